#!/usr/bin/env bash
# The release artifacts as users get them (run by scripts/test-all.sh, in the background, after
# the steps whose builds scripts/dist.sh packages: 15's onnx component and tool, 50-python's
# wheel; it compiles almost nothing of its own).
# scripts/dist.sh builds them into target/dist: the sdist, the crate and the platforms of
# DIST_PLATFORMS (default linux-x86_64; `linux-x86_64 linux-aarch64 windows-x86_64` for all:
# the cross-compiled ones build the Python extension and the tool with the remote client stack
# once more per target, 19 CPU-minutes, more than the test command has room for). Then, on a
# machine without Rust (no cargo or rustc on PATH, RUSTUP_HOME and CARGO_HOME empty directories):
# - the sdist: `pip install` of it stops within 10 seconds with the one-line message;
# - the crate: its file list and version;
# - linux-x86_64: the wheel installs into a fresh venv, imports, loads, checks (onnx's checker)
#   and saves a model byte-identical (manylinux tag checked with auditwheel); the SDK, unpacked
#   into an empty directory, serves a CMake consumer (find_package; shared and static), a
#   pkg-config consumer and a program written for onnx's C++ API (find_package(onnx_light
#   COMPONENTS onnx)), and its tool runs; no ELF file of it needs a newer glibc or libstdc++ than
#   its README states; built again, the sdist, wheel and SDK are the same bytes;
# - linux-aarch64: the wheel, installed for aarch64 (numpy and ml_dtypes from PyPI's aarch64
#   wheels), runs the same way under qemu-user in Debian's aarch64 CPython; the SDK's CMake
#   (shared) and pkg-config (static) consumers, cross-built, and its tool run under qemu-user;
# - windows-x86_64: the wheel is inspected (no Windows CPython comes from a package registry):
#   its extension imports only python3.dll (the stable ABI) and system DLLs, and exports
#   PyInit__native; the SDK's CMake consumer, cross-built with MinGW, and its tool run under Wine.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PY="$ROOT/.venv/bin/python"
die() { echo "56-dist: $*" >&2; exit 1; }
read -r -a PLATFORMS <<<"${DIST_PLATFORMS:-linux-x86_64}"
has() { [[ " ${PLATFORMS[*]} " == *" $1 "* ]]; }
. scripts/lib/apt.sh
need=()
command -v pkg-config >/dev/null 2>&1 || need+=(pkgconf)
command -v unzip >/dev/null 2>&1 || need+=(unzip)
if has linux-aarch64; then
  command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || need+=(g++-aarch64-linux-gnu)
  command -v qemu-aarch64 >/dev/null 2>&1 || need+=(qemu-user)
fi
if has windows-x86_64; then
  command -v x86_64-w64-mingw32-g++ >/dev/null 2>&1 || need+=(g++-mingw-w64-x86-64)
  [ -x /usr/lib/wine/wine64 ] || need+=(wine64)
fi
[ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"
has linux-aarch64 && rustup_target_add aarch64-unknown-linux-gnu
has windows-x86_64 && rustup_target_add x86_64-pc-windows-gnu

export DIST_DIR="$ROOT/target/dist"
rm -rf "$DIST_DIR"
bash scripts/dist.sh sdist crate "${PLATFORMS[@]}" >/dev/null
D=$DIST_DIR
VERSION=$(sed -n '/^\[workspace\.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
(cd "$D" && sha256sum --quiet -c SHA256SUMS) || die "SHA256SUMS"
echo "built: $(cd "$D" && ls | grep -v SHA256SUMS | tr '\n' ' ')"

work=$(mktemp -d)
trap 'WINEPREFIX="$work/wine" /usr/lib/wine/wineserver -k 2>/dev/null || true; rm -rf "$work"' EXIT
# ---- The machine without Rust: a clean environment whose PATH has the system's programs and the
# venv's cmake only.
mkdir -p "$work/bin" "$work/home" "$work/empty-rustup" "$work/empty-cargo"
ln -s "$ROOT/.venv/bin/cmake" "$work/bin/cmake"
NO_RUST=(env -i HOME="$work/home" PATH="$work/bin:/usr/local/bin:/usr/bin:/bin" LANG=C.UTF-8
         RUSTUP_HOME="$work/empty-rustup" CARGO_HOME="$work/empty-cargo")
if "${NO_RUST[@]}" sh -c 'command -v cargo || command -v rustc'; then die "Rust is on the clean PATH"; fi

# ---- Helpers
# consume_cmake PREFIX BUILD [CMAKE ARGS...]: c_tests/consumer built against PREFIX.
consume_cmake() {
  local prefix=$1 build=$2
  shift 2
  "${NO_RUST[@]}" cmake -S "$ROOT/c_tests/consumer" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" "$@" >/dev/null
  "${NO_RUST[@]}" cmake --build "$build" >/dev/null
}
# check_consumer_output TEXT: the C consumer's report on samples/mlp.onnx.
check_consumer_output() {
  grep -q "graph mlp: 6 nodes, 4 initializers" <<<"$1" && grep -q "loaded back: identical" <<<"$1" ||
    die "unexpected consumer output: $1"
}
# max_symbol_version FILES...: the newest GLIBC_ and GLIBCXX_ versions the ELF files need.
max_symbol_version() {
  local prefix=$1
  shift
  for f in "$@"; do objdump -T "$f" 2>/dev/null; done | grep -o "${prefix}_[0-9][0-9.]*" | sed "s/${prefix}_//" |
    LC_ALL=C sort -V | tail -n 1
}

# The check run in each wheel's Python: import, load, onnx's checker (when the wheel has it),
# save, the saved file byte-identical.
cat >"$work/use_wheel.py" <<'PYEOF'
import sys, onnx_light as ol
model_path, out_path, version, want_checker = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
assert ol.__version__ == version, (ol.__version__, version)
m = ol.load(model_path)
assert len(m.graph.node) == 6, len(m.graph.node)
if want_checker:
    ol.checker.check_model(m, full_check=True)
else:  # a wheel without onnx's C++ library says so
    try:
        ol.checker.check_model(m)
        raise AssertionError("check_model ran without onnx's C++ library")
    except RuntimeError as e:
        assert "does not include onnx's C++ library" in str(e), e
ol.save(m, out_path)
assert open(out_path, "rb").read() == open(model_path, "rb").read(), "the saved model differs"
print(f"onnx_light {ol.__version__} from {ol.__file__}: loaded, {'checked, ' if want_checker else ''}saved identical")
PYEOF

# ---- sdist: fails fast without Rust (timed at the normal priority: the step itself runs at the
# lowest; `setsid` gives it a scheduling group of its own, `nice` its nice value back to 0)
python3 -m venv "$work/sdist-venv"
start=$SECONDS
if setsid -w nice -n "-$(nice)" "${NO_RUST[@]}" "$work/sdist-venv/bin/pip" install --disable-pip-version-check "$D/onnx_light-$VERSION.tar.gz" \
     >"$work/sdist.log" 2>&1; then
  die "the sdist installed without Rust"
fi
took=$((SECONDS - start))
grep -q "onnx_light: building from source needs Rust" "$work/sdist.log" || { cat "$work/sdist.log" >&2; die "sdist: no message"; }
[ "$took" -le 10 ] || die "the sdist took $took s to fail without Rust"
echo "sdist without Rust: failed in $took s with: $(grep -o 'onnx_light: building from source needs Rust[^;]*' "$work/sdist.log" | head -n 1)"

# ---- The crate
crate_list=$(tar -tzf "$D/onnx_light-$VERSION.crate")
for f in Cargo.toml src/lib.rs build.rs include/onnx_light.h LICENSE README.md; do
  grep -qx "onnx_light-$VERSION/$f" <<<"$crate_list" || die "the crate lacks $f"
done
tar -xzf "$D/onnx_light-$VERSION.crate" -O "onnx_light-$VERSION/Cargo.toml" | grep -qx "version = \"$VERSION\"" ||
  die "the crate's Cargo.toml has no version $VERSION"
echo "crate: $(wc -l <<<"$crate_list") files"

# ---- Linux x86-64
if has linux-x86_64; then
  # The wheel
  WHEEL_X86=$(ls "$D"/onnx_light-"$VERSION"-cp39-abi3-manylinux_*_x86_64.whl)
  policy=$("$PY" -m auditwheel show "$WHEEL_X86" 2>&1) || die "auditwheel show: $policy"
  # (auditwheel wraps its lines.)
  tr -s ' \n' '  ' <<<"$policy" | grep -q 'is consistent with the following platform tag: "manylinux_2_34_x86_64"' ||
    { echo "$policy" >&2; die "auditwheel: $WHEEL_X86 is not manylinux_2_34_x86_64"; }
  python3 -m venv "$work/wheel-venv"
  "${NO_RUST[@]}" "$work/wheel-venv/bin/pip" install --quiet --disable-pip-version-check "$WHEEL_X86"
  (cd "$work" && "${NO_RUST[@]}" "$work/wheel-venv/bin/python" use_wheel.py "$ROOT/samples/mlp.onnx" x86.onnx "$VERSION" 1)

  # The SDK
  sdk="$work/sdk-x86_64"
  mkdir -p "$sdk"
  tar -xzf "$D/onnx_light-$VERSION-linux-x86_64.tar.gz" -C "$sdk"
  sdk="$sdk/onnx_light-$VERSION-linux-x86_64"
  for f in bin/onnx-light include/onnx_light.h include/onnx_light.hpp include/onnx_light/onnx_pb.h lib/libonnx_light.a \
           "lib/libonnx_light.so.$VERSION" lib/libonnx_light_onnx.a lib/cmake/onnx_light/onnx_lightConfig.cmake \
           lib/pkgconfig/onnx_light.pc share/doc/onnx_light/LICENSE share/doc/onnx_light/THIRD_PARTY_LICENSES.txt README.md; do
    [ -e "$sdk/$f" ] || die "linux-x86_64 SDK: $f missing"
  done
  grep -q "^onnx " "$sdk/share/doc/onnx_light/THIRD_PARTY_LICENSES.txt" || die "no onnx licence in the SDK"
  consume_cmake "$sdk" "$work/consumer-x86_64"
  out=$(cd "$work" && "${NO_RUST[@]}" "$work/consumer-x86_64/consumer_c" "$ROOT/samples/mlp.onnx" saved.onnx)
  check_consumer_output "$out"
  "${NO_RUST[@]}" "$work/consumer-x86_64/consumer_static_cpp" "$ROOT/samples/mlp.onnx" | grep -q "round trip identical" ||
    die "consumer_static_cpp against the SDK"
  "${NO_RUST[@]}" PKG_CONFIG_PATH="$sdk/lib/pkgconfig" sh -c \
    'cc -std=c11 -O1 "$0" $(pkg-config --cflags --libs onnx_light) -Wl,-rpath,"$1" -o "$2"' \
    "$ROOT/c_tests/consumer/main.c" "$sdk/lib" "$work/pc-x86_64"
  out=$(cd "$work" && "${NO_RUST[@]}" "$work/pc-x86_64" "$ROOT/samples/mlp.onnx" saved-pc.onnx)
  check_consumer_output "$out"
  "${NO_RUST[@]}" cmake -S "$ROOT/c_tests/onnx_consumer" -B "$work/onnx-consumer" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$sdk" >/dev/null
  "${NO_RUST[@]}" cmake --build "$work/onnx-consumer" --target onnx_api >/dev/null
  "${NO_RUST[@]}" "$work/onnx-consumer/onnx_api" "$ROOT/samples/mlp.onnx" | grep -q ": valid, inferred" ||
    die "onnx_api (onnx's C++ API) against the SDK"
  "${NO_RUST[@]}" "$sdk/bin/onnx-light" check "$ROOT/samples/mlp.onnx" >/dev/null || die "onnx-light check from the SDK"
  [ "$("${NO_RUST[@]}" "$sdk/bin/onnx-light" --version)" = "onnx-light $VERSION" ] || die "onnx-light --version"
  mapfile -t elf < <(find "$sdk/bin" "$sdk/lib" -type f \( -name 'onnx-light' -o -name '*.so.*' \))
  glibc=$(max_symbol_version GLIBC "${elf[@]}")
  glibcxx=$(max_symbol_version GLIBCXX "${elf[@]}")
  grep -q "Needs: glibc $glibc, libstdc++ of GCC 11" "$sdk/README.md" || die "linux-x86_64 needs glibc $glibc: its README says $(grep Needs: "$sdk/README.md")"
  [ "$(printf '%s\n' "$glibcxx" 3.4.29 | sort -V | tail -n 1)" = 3.4.29 ] || die "linux-x86_64 needs GLIBCXX_$glibcxx (GCC 11 has 3.4.29)"
  echo "linux-x86_64 SDK: CMake, pkg-config and onnx C++ API consumers built and ran; the tool ran; needs GLIBC_$glibc, GLIBCXX_$glibcxx"

  # Reproducible: built again, the same bytes
  cp "$D/SHA256SUMS" "$work/SHA256SUMS.first"
  bash scripts/dist.sh sdist linux-x86_64 >/dev/null
  for f in "onnx_light-$VERSION.tar.gz" "$(basename "$WHEEL_X86")" "onnx_light-$VERSION-linux-x86_64.tar.gz"; do
    grep -q "  $f$" "$D/SHA256SUMS" || die "$f was not built again"
    grep -qF "$(grep "  $f$" "$D/SHA256SUMS")" "$work/SHA256SUMS.first" || die "$f differs when built again"
  done
  echo "built again: the sdist, the x86-64 wheel and SDK are the same bytes"
fi

# ---- Linux aarch64
if has linux-aarch64; then
  # The wheel, under qemu-user
  WHEEL_ARM=$(ls "$D"/onnx_light-"$VERSION"-cp39-abi3-manylinux_*_aarch64.whl)
  bash scripts/lib/aarch64-python.sh "$work/arm" "$WHEEL_ARM"
  (cd "$work" && "${NO_RUST[@]}" "$work/arm/python" use_wheel.py "$ROOT/samples/mlp.onnx" arm.onnx "$VERSION" 0)

  # The SDK
  sdk="$work/sdk-aarch64"
  mkdir -p "$sdk"
  tar -xzf "$D/onnx_light-$VERSION-linux-aarch64.tar.gz" -C "$sdk"
  sdk="$sdk/onnx_light-$VERSION-linux-aarch64"
  QEMU=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
  consume_cmake "$sdk" "$work/consumer-aarch64" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchains/aarch64-linux-gnu.cmake"
  out=$(cd "$work" && "${NO_RUST[@]}" "${QEMU[@]}" -E LD_LIBRARY_PATH="$sdk/lib" "$work/consumer-aarch64/consumer_c" \
    "$ROOT/samples/mlp.onnx" saved-arm.onnx)
  check_consumer_output "$out"
  "${NO_RUST[@]}" PKG_CONFIG_PATH="$sdk/lib/pkgconfig" sh -c \
    'aarch64-linux-gnu-gcc -std=c11 -O1 "$0" $(pkg-config --cflags --static --libs onnx_light) -static-libgcc -o "$1"' \
    "$ROOT/c_tests/consumer/main.c" "$work/pc-aarch64"
  readelf -d "$work/pc-aarch64" | grep -q "NEEDED.*onnx_light" && die "the static pkg-config consumer needs libonnx_light"
  out=$(cd "$work" && "${NO_RUST[@]}" "${QEMU[@]}" "$work/pc-aarch64" "$ROOT/samples/mlp.onnx" saved-arm-pc.onnx)
  check_consumer_output "$out"
  "${NO_RUST[@]}" "${QEMU[@]}" "$sdk/bin/onnx-light" info "$ROOT/samples/mlp.onnx" | grep -q mlp || die "onnx-light (aarch64)"
  mapfile -t elf < <(find "$sdk/bin" "$sdk/lib" -type f \( -name 'onnx-light' -o -name '*.so.*' \))
  glibc=$(max_symbol_version GLIBC "${elf[@]}")
  grep -q "Needs: glibc $glibc" "$sdk/README.md" || die "linux-aarch64 needs glibc $glibc: its README says $(grep Needs: "$sdk/README.md")"
  echo "linux-aarch64 SDK: CMake (shared) and pkg-config (static) consumers and the tool ran under qemu-user; needs GLIBC_$glibc"

fi

# ---- Windows x86-64
if has windows-x86_64; then
  # The wheel: inspected
  WHEEL_WIN=$(ls "$D"/onnx_light-"$VERSION"-cp39-abi3-win_amd64.whl)
  mkdir -p "$work/win-wheel"
  (cd "$work/win-wheel" && unzip -q "$WHEEL_WIN")
  pyd="$work/win-wheel/onnx_light/_native.pyd"
  [ -f "$pyd" ] || die "$WHEEL_WIN has no onnx_light/_native.pyd"
  imports=$(x86_64-w64-mingw32-objdump -p "$pyd" | sed -n 's/^\s*DLL Name: //p' | LC_ALL=C sort -u)
  grep -qx python3.dll <<<"$imports" || die "_native.pyd does not import python3.dll: $imports"
  others=$(grep -vix -e python3.dll -e kernel32.dll -e ntdll.dll -e advapi32.dll -e ws2_32.dll -e userenv.dll \
    -e bcrypt.dll -e bcryptprimitives.dll -e msvcrt.dll -e crypt32.dll -e secur32.dll -e ncrypt.dll \
    -e 'api-ms-win-.*' <<<"$imports" || true)
  [ -z "$others" ] || die "_native.pyd imports DLLs that Windows does not have: $others"
  x86_64-w64-mingw32-objdump -p "$pyd" | grep -q "PyInit__native" || die "_native.pyd does not export PyInit__native"
  echo "Windows wheel: _native.pyd imports $(tr '\n' ' ' <<<"$imports")and exports PyInit__native"

  # The SDK, under Wine
  sdk="$work/sdk-windows"
  mkdir -p "$sdk"
  (cd "$sdk" && unzip -q "$D/onnx_light-$VERSION-windows-x86_64.zip")
  sdk="$sdk/onnx_light-$VERSION-windows-x86_64"
  consume_cmake "$sdk" "$work/consumer-windows" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchains/mingw-w64-x86_64.cmake"
  export WINEPREFIX="$work/wine" WINEDEBUG=-all
  /usr/lib/wine/wine64 wineboot -i >/dev/null 2>&1
  # (Wine 8 lacks bcryptprimitives!ProcessPrng: 70-cross.sh's stand-in, beside the programs.)
  prng="$ROOT/target/x86_64-pc-windows-gnu/release/deps/bcryptprimitives.dll"
  [ -f "$prng" ] || die "$prng is missing (scripts/test.d/70-cross.sh builds it)"
  cp "$sdk/bin/onnx_light.dll" "$prng" "$work/consumer-windows/"
  out=$(cd "$work/consumer-windows" && /usr/lib/wine/wine64 ./consumer_c.exe "$ROOT/samples/mlp.onnx" saved.onnx)
  check_consumer_output "$out"
  cp "$prng" "$sdk/bin/"
  /usr/lib/wine/wine64 "$sdk/bin/onnx-light.exe" info "$ROOT/samples/mlp.onnx" | grep -q mlp || die "onnx-light.exe under Wine"
  echo "windows-x86_64 SDK: the CMake consumer and the tool ran under Wine"

fi
