#!/usr/bin/env bash
# Beyond Linux x86-64 (run by scripts/test-all.sh): cross-builds for Linux aarch64 and Windows
# (x86_64-pc-windows-gnu, MinGW) and runs the tests there:
# - aarch64 under qemu-user: the library's unit tests and the process-wide tests (fewer PBKDF2
#   iterations in the test processes: ONNXL_TEST_EMULATED), then, built with
#   aarch64-linux-gnu-gcc against the cross-built libonnx_light.so (exports checked: onnxl_*
#   only), the C tests (c_tests/test_*.c) and the walker (every field of every model of the onnx
#   wheel's backend test data, and of inputs that set every field, read, the model rebuilt and
#   serialized byte-identical); the integration tests (tests/integration: files, maps,
#   processes and saves, the same Linux calls on both architectures) run on x86-64 and under
#   Wine, not under emulation;
# - Windows under Wine: the library's unit tests (the Windows path rules, open / atomic-replace
#   code and save lock included), the fast integration tests (see below; the disk-full
#   test of crash_safe_save on a 12 MiB tmpfs mounted here, which needs root), the C tests
#   built with MinGW against onnx_light.dll (import library libonnx_light.dll.a; exports
#   checked), and the CMake package built with a MinGW toolchain file, installed (DLL, import
#   library, static library) and used by c_tests/consumer through find_package: the consumer
#   loads, walks, saves and reloads a model under Wine, from the DLL and statically;
# (macOS and Windows MSVC are compile-checked by 17-target-checks.sh.)
# Installs what it needs: the Rust targets (rustup) and Debian's gcc-aarch64-linux-gnu,
# gcc-mingw-w64-x86-64, g++-mingw-w64-x86-64, qemu-user and wine64; cmake comes from the test
# command's venv. Wine 8 has no bcryptprimitives.dll (ProcessPrng, which Rust's standard
# library imports): a small stand-in built here with MinGW, on top of
# advapi32!SystemFunction036, is put beside the test executables.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
AARCH64=aarch64-unknown-linux-gnu
WINDOWS=x86_64-pc-windows-gnu
. scripts/lib/apt.sh

need=()
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need+=(gcc-mingw-w64-x86-64)
command -v x86_64-w64-mingw32-g++ >/dev/null 2>&1 || need+=(g++-mingw-w64-x86-64)
command -v qemu-aarch64 >/dev/null 2>&1 || need+=(qemu-user)
[ -x /usr/lib/wine/wine64 ] || need+=(wine64)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}"
  apt_install "${need[@]}"
fi
rustup_target_add "$AARCH64" "$WINDOWS"
command -v cmake >/dev/null 2>&1 || { echo "70-cross: cmake is required (scripts/test-all.sh puts the venv's on PATH)" >&2; exit 1; }

# phase TEXT: the start of a part of the step, with the seconds the step has run so far.
phase() { echo "[${SECONDS} s] $*"; }

work=$(mktemp -d)
# (The Wine server of the step's prefix is stopped first: it would write into the removed prefix.)
trap 'WINEPREFIX="$work/wine" /usr/lib/wine/wineserver -k 2>/dev/null || true
      umount "$work/full" 2>/dev/null || true; rm -rf "$work"' EXIT

# ---- The tests of both targets, built at once (the two targets' compilations share the
# cores): the library's unit tests and the process-wide tests (tests/process_wide), then, for
# Windows, the integration tests (tests/integration; the source checks are not built for these
# targets: the same on every target), with the test-hooks feature. The library as shipped
# (without it; `-p onnx_light`: the tool's remote feature stays out) is built after the test
# runs, for the C tests.
# (Full paths, as CMake passes them with the toolchain files of cmake/toolchains: the same linker
# setting, so that cargo reuses what this step compiled.)
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=$(command -v aarch64-linux-gnu-gcc)
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=$(command -v x86_64-w64-mingw32-gcc)
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=/usr/lib/wine/wine64
TESTS=(-p onnx_light --release --lib --test process_wide)
WINDOWS_TESTS=("${TESTS[@]}" --test integration)
# The tests over 2 GB (large_*; list_limit's 8 GiB sparse model; the aligned 2 GB model) do not
# run under Wine.
SKIP_LARGE=(--skip large_external:: --skip large_model:: --skip list_limit::
  --skip model_over_2gb_loads_without_copies)
phase "aarch64 and Windows: build the tests"
cargo test "${TESTS[@]}" --target "$AARCH64" --target "$WINDOWS" --no-run
cargo test "${WINDOWS_TESTS[@]}" --target "$WINDOWS" --no-run

# ---- Linux aarch64 under qemu-user
phase "aarch64: unit tests and process-wide tests (qemu-user)"
# - ONNXL_TEST_EMULATED=1: a PBKDF2 derivation with the formats' 100 000 iterations takes about
#   a second under qemu and the encryption tests make hundreds, so in these test processes (built
#   with the test-hooks feature, never the shipped library) derivations use 1 000 iterations,
#   except for the known-answer vectors, written and decrypted with 100 000
#   (crypto::testing::with_real_pbkdf2); the C test test_encryption decrypts one through the
#   shipped libonnx_light.so, which shows that it derives with 100 000.
# - ONNXL_TEST_RUNNER: tests that re-run their own binary in a child process run it under qemu.
# - direct_writes takes its buffered path only: qemu 7.2 passes statx through without the
#   direct-I/O alignment (STATX_DIOALIGN reads 0), so the library, like the test, sees a file
#   system that does not take direct writes.
ONNXL_TEST_EMULATED=1 ONNXL_TEST_RUNNER="$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER" \
  cargo test "${TESTS[@]}" --target "$AARCH64" -- --skip child_process_

# ---- Windows (MinGW) under Wine
export WINEPREFIX="$work/wine" WINEDEBUG=-all
# Create the prefix first and wait for that setup's server to exit, then keep ONE server for the
# whole step: the tests start many short Wine processes, and a server exiting between them
# while a new client connects ended a run with "recvmsg: Connection reset by peer".
/usr/lib/wine/wine64 wineboot -i >/dev/null 2>&1
/usr/lib/wine/wineserver -w
/usr/lib/wine/wineserver -p
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
phase "Windows: unit tests (Windows path rules and save lock included) and integration tests (Wine)"
# The integration tests that run on Windows: all but the over-2 GB ones and
# - out_of_memory (Unix-only: not built there): it limits RLIMIT_AS, and Wine 8 enforces no
#   job-object memory limit (a process in a job with JOB_OBJECT_LIMIT_PROCESS_MEMORY of 256 MiB
#   commits 512 MiB); filling its address space with reservations instead got the Wine process
#   killed;
# - crash_safe_save's kill and RLIMIT_FSIZE tests (Linux-only in the file).
# direct_writes takes its buffered path (direct writes are Linux-only); the re-saves over weight
# files this process maps check the Windows outcome (a mapped file can be neither replaced nor
# removed: the new files keep their alternate names, the mapped ones stay beside them). The tests that look for
# a file's mappings read /proc/self/maps on Linux and the mapped views on Windows; the CPU-time
# comparisons repeat a run until it spans 20 steps of Wine's 10 ms thread clock (tests/common).
# tests/integration/crash_safe_save.rs fills a small file system (a 12 MiB tmpfs, mounted here: the
# step runs as root) through Wine's drive Z: to see saves fail cleanly with ERROR_DISK_FULL.
mkdir -p "$work/full"
mount -t tmpfs -o size=12m tmpfs "$work/full" \
  || { echo "70-cross: cannot mount a tmpfs for the disk-full test (needs root)" >&2; exit 1; }
ONNXL_TEST_FULL_DIR="Z:${work//\//\\}\\full" \
cargo test "${WINDOWS_TESTS[@]}" --target "$WINDOWS" -- --skip child_process_ "${SKIP_LARGE[@]}"

# ---- The libraries as shipped, both targets at once (after the tests: a build of the library
# with other features replaces its cdylib, and cargo would then rebuild the test-hooks library
# before each test run, measured 72 s and 62 s)
phase "aarch64 and Windows: build the shipped libraries"
cargo build --release -p onnx_light --target "$AARCH64" --target "$WINDOWS" --lib

phase "aarch64: shared library exports and C tests (qemu-user)"
LIB="$ROOT/target/$AARCH64/release/libonnx_light.so"
others=$(aarch64-linux-gnu-nm -D --defined-only "$LIB" | awk '{print $3}' | grep -v '^onnxl_' || true)
[ -z "$others" ] || { echo "symbols other than onnxl_* exported:" >&2; echo "$others" >&2; exit 1; }
ln -s "$LIB" "$work/$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

# run_c_tests DIR CC EXE RUN...: builds each C test with CC (its library flags in $C_LIBS) into
# DIR/NAME$EXE and runs it there with the command RUN... (an emulator and its arguments).
C_TESTS=(entry_points:model errors:model hardening:model accessors:none ownership:tmp
         streams:tmp encryption:tmp prepacked:tmp threads:tmp)
run_c_tests() {
  local dir=$1 cc=$2 exe=$3 t name args
  shift 3
  for t in "${C_TESTS[@]}"; do
    name=${t%%:*}
    # Tests that take the sample model and a temporary directory, and those that take only the latter.
    case ${t#*:} in
      model) args=("$ROOT/samples/mlp.onnx" "tmp_$name") ;;
      tmp) args=("tmp_$name") ;;
      *) args=() ;;
    esac
    # shellcheck disable=SC2086
    "$cc" -std=c11 -O1 -Wall -Werror -DONNXL_EXPECTED_VERSION="\"$version\"" -Iinclude \
      "c_tests/test_$name.c" $C_LIBS -o "$dir/$name$exe"
    echo "  $name"
    (cd "$dir" && mkdir -p "tmp_$name" && "$@" "./$name$exe" "${args[@]}") > "$dir/$name.log" 2>&1 \
      || { cat "$dir/$name.log" >&2; exit 1; }
    tail -n 1 "$dir/$name.log"
  done
}
# The emulator, with the shipped library (its SONAME link in $work) on the guest's library path.
QEMU=(qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH="$work")
C_LIBS="-L$ROOT/target/$AARCH64/release -lonnx_light -lpthread" \
  run_c_tests "$work" aarch64-linux-gnu-gcc "" "${QEMU[@]}"
phase "aarch64: the walker over the onnx wheel's backend test models and every field (qemu-user)"
BACKEND_DATA=$("$ROOT/.venv/bin/python" -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data"))')
aarch64-linux-gnu-gcc -std=c11 -O1 -Wall -Werror -Iinclude -Ic_tests c_tests/walk_main.c c_tests/generated/walk_copy.c \
  -L"$ROOT/target/$AARCH64/release" -lonnx_light -o "$work/walk_copy"
"${QEMU[@]}" "$work/walk_copy" --require-canonical --min-files 100 \
  "$BACKEND_DATA" "$ROOT/samples/mlp.onnx"
# ... and over inputs that set every field of every message, and unknown fields in every message.
"$ROOT/.venv/bin/python" c_tests/make_walk_inputs.py "$work/walk_inputs" >/dev/null
"${QEMU[@]}" "$work/walk_copy" --require-full-coverage --min-files 30 \
  "$work/walk_inputs/all_fields.onnx" "$work/walk_inputs/all_unknown.onnx" --typed-dir "$work/walk_inputs/typed"

phase "Windows: onnx_light.dll exports and C tests (Wine)"
WIN_OUT="$ROOT/target/$WINDOWS/release"
exports=$(x86_64-w64-mingw32-objdump -p "$WIN_OUT/onnx_light.dll" \
  | sed -n '/\[Ordinal\/Name Pointer\] Table/,/^$/p' | awk '$1 ~ /^\[/ && $NF !~ /Table/ {print $NF}')
grep -q '^onnxl_model_proto_new$' <<<"$exports" || { echo "onnx_light.dll: no export table read" >&2; exit 1; }
others=$(grep -v '^onnxl_' <<<"$exports" || true)
[ -z "$others" ] || { echo "onnx_light.dll exports symbols other than onnxl_*:" >&2; echo "$others" >&2; exit 1; }
echo "  $(wc -l <<<"$exports") exports, all onnxl_*"
win="$work/windows"
mkdir -p "$win"
cp "$WIN_OUT/onnx_light.dll" "$WIN_OUT/deps/bcryptprimitives.dll" "$win/"
# Linked with the import library libonnx_light.dll.a; winpthreads statically (no DLL to ship);
# psapi for GetMappedFileNameW (c_tests/test_maps.h).
C_LIBS="-L$WIN_OUT -lonnx_light -lpsapi -Wl,-Bstatic -lpthread -Wl,-Bdynamic" \
  run_c_tests "$win" x86_64-w64-mingw32-gcc .exe /usr/lib/wine/wine64

phase "Windows: the CMake package built with MinGW, and a find_package consumer (Wine)"
MINGW_TOOLCHAIN="$ROOT/cmake/toolchains/mingw-w64-x86_64.cmake"
mingw_build="$work/cmake-mingw"
mingw_prefix="$work/mingw-prefix"
cmake -S . -B "$mingw_build" -DCMAKE_TOOLCHAIN_FILE="$MINGW_TOOLCHAIN" -DCMAKE_BUILD_TYPE=Release \
  > "$work/cmake-mingw.log" 2>&1 || { cat "$work/cmake-mingw.log" >&2; exit 1; }
grep -q "onnx_light .*: onnx_light.dll with import library libonnx_light.dll.a" "$work/cmake-mingw.log" \
  || { cat "$work/cmake-mingw.log" >&2; echo "the MinGW configuration did not choose the DLL layout" >&2; exit 1; }
cmake --build "$mingw_build"
cmake --install "$mingw_build" --prefix "$mingw_prefix" >/dev/null
for f in bin/onnx_light.dll lib/libonnx_light.dll.a lib/libonnx_light.a include/onnx_light.h \
         include/onnx_light.hpp include/onnx_light/onnx_pb.h lib/cmake/onnx_light/onnx_lightConfig.cmake \
         lib/cmake/onnx_light/onnx_lightConfigVersion.cmake lib/pkgconfig/onnx_light.pc; do
  [ -f "$mingw_prefix/$f" ] || { echo "MinGW install: $f missing" >&2; exit 1; }
done
echo "  installed bin/onnx_light.dll, lib/libonnx_light.dll.a, lib/libonnx_light.a, headers, CMake and pkg-config files"
consumer="$work/consumer-mingw"
cmake -S c_tests/consumer -B "$consumer" -DCMAKE_TOOLCHAIN_FILE="$MINGW_TOOLCHAIN" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$mingw_prefix" >/dev/null
cmake --build "$consumer"
dlls() { x86_64-w64-mingw32-objdump -p "$1" | sed -n 's/^\s*DLL Name: //p'; }
dlls "$consumer/consumer_c.exe" | grep -qx onnx_light.dll \
  || { echo "consumer_c.exe does not import onnx_light.dll" >&2; exit 1; }
if dlls "$consumer/consumer_static_cpp.exe" | grep -qi onnx_light; then
  echo "consumer_static_cpp.exe links onnx_light dynamically" >&2; exit 1
fi
# The installed DLL beside the programs (Windows looks there first), with the ProcessPrng stand-in.
cp "$mingw_prefix/bin/onnx_light.dll" "$WIN_OUT/deps/bcryptprimitives.dll" "$consumer/"
out=$(cd "$consumer" && /usr/lib/wine/wine64 ./consumer_c.exe "$ROOT/samples/mlp.onnx" saved.onnx)
echo "  $out"
grep -q "graph mlp: 6 nodes, 4 initializers" <<<"$out" || { echo "unexpected consumer_c output" >&2; exit 1; }
grep -q "loaded back: identical" <<<"$out" || { echo "consumer_c: the saved model differs" >&2; exit 1; }
cmp -s "$consumer/saved.onnx" "$ROOT/samples/mlp.onnx" \
  || { echo "consumer_c: the saved file is not byte-identical to the loaded one" >&2; exit 1; }
out=$(cd "$consumer" && /usr/lib/wine/wine64 ./consumer_static_cpp.exe "$ROOT/samples/mlp.onnx")
echo "  $out"
grep -q "6 nodes: MatMul Add Relu MatMul Add Softmax; round trip identical" <<<"$out" \
  || { echo "unexpected consumer_static_cpp output" >&2; exit 1; }
phase "70-cross: all passed"
