#!/usr/bin/env bash
# Beyond Linux x86-64 (run by scripts/test-all.sh): cross-builds for Linux aarch64 and for Windows
# (x86_64-pc-windows-gnu, MinGW) and runs the fast part of the test suite there:
# - aarch64 under qemu-user: the library's unit tests, tests/codec.rs and tests/alignment.rs,
#   then the C tests (c_tests/test_*.c) built with aarch64-linux-gnu-gcc against the
#   cross-built libonnx_light.so, whose exports are checked (onnxl_* only);
# - Windows under Wine: the library's unit tests (including the Windows path rules and the
#   Windows open / atomic-replace code, src/external/paths.rs) and tests/codec.rs.
# Installs what it needs: the Rust targets (rustup) and Debian's gcc-aarch64-linux-gnu,
# gcc-mingw-w64-x86-64, qemu-user and wine64. Wine 8 has no bcryptprimitives.dll (ProcessPrng,
# which Rust's standard library imports): a small stand-in built here with MinGW, on top of
# advapi32!SystemFunction036, is put beside the test executables.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
AARCH64=aarch64-unknown-linux-gnu
WINDOWS=x86_64-pc-windows-gnu

need=()
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need+=(gcc-mingw-w64-x86-64)
command -v qemu-aarch64 >/dev/null 2>&1 || need+=(qemu-user)
[ -x /usr/lib/wine/wine64 ] || need+=(wine64)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi
rustup target add "$AARCH64" "$WINDOWS"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ---- Linux aarch64 under qemu-user
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
echo "aarch64: unit tests, codec, alignment (qemu-user)"
cargo test --release --target "$AARCH64" --lib --test codec --test alignment

echo "aarch64: shared library exports and C tests (qemu-user)"
cargo build --release --target "$AARCH64" --lib
LIB="$ROOT/target/$AARCH64/release/libonnx_light.so"
others=$(aarch64-linux-gnu-nm -D --defined-only "$LIB" | awk '{print $3}' | grep -v '^onnxl_' || true)
[ -z "$others" ] || { echo "symbols other than onnxl_* exported:" >&2; echo "$others" >&2; exit 1; }
ln -s "$LIB" "$work/$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
# Tests that take the sample model and a temporary directory, and those that take only the latter.
for t in entry_points:model errors:model hardening:model accessors:none ownership:tmp \
         streams:tmp encryption:tmp prepacked:tmp threads:tmp; do
  name=${t%%:*}
  args=()
  case ${t#*:} in
    model) args=("$ROOT/samples/mlp.onnx" "$work/tmp_$name") ;;
    tmp) args=("$work/tmp_$name") ;;
  esac
  mkdir -p "$work/tmp_$name"
  aarch64-linux-gnu-gcc -std=c11 -O1 -DONNXL_EXPECTED_VERSION="\"$version\"" \
    -Iinclude "c_tests/test_$name.c" -L"$ROOT/target/$AARCH64/release" -lonnx_light -lpthread \
    -o "$work/$name"
  echo "  $name"
  qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH="$work" "$work/$name" "${args[@]}" \
    > "$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; exit 1; }
  tail -n 1 "$work/$name.log"
done

# ---- Windows (MinGW) under Wine
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
export WINEPREFIX="$work/wine" WINEDEBUG=-all
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=/usr/lib/wine/wine64
cat > "$work/prng.c" <<'C'
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG len);
/* bcryptprimitives!ProcessPrng, missing from Wine 8: the system RNG through RtlGenRandom. */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
    if (!SystemFunction036(data, n)) return FALSE;
    data += n;
    len -= n;
  }
  return TRUE;
}
C
mkdir -p "target/$WINDOWS/release/deps"
x86_64-w64-mingw32-gcc -shared -O2 -o "target/$WINDOWS/release/deps/bcryptprimitives.dll" \
  "$work/prng.c" -ladvapi32
echo "Windows: unit tests (Windows path rules included), codec (Wine)"
cargo test --release --target "$WINDOWS" --lib --test codec
