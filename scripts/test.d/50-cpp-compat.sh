#!/usr/bin/env bash
# Differential C++ API suite (run by scripts/test-all.sh): code written against protobuf's
# generated onnx.pb.h must compile and behave the same against onnx_light's compat header
# <onnx_light/onnx_pb.h> (namespace onnx).
# 1. installs Debian's libprotobuf-dev and protobuf-compiler (apt-get; a missing tool fails);
# 2. runs protoc (--cpp_out and --descriptor_set_out) on onnx.proto and onnx-data.proto of the
#    pinned onnx wheel (.venv), with `option optimize_for = LITE_RUNTIME;` removed so the full
#    runtime (DebugString) is generated, into target/cpp-compat/ (never committed);
# 3. generates the schema-driven tests (c_tests/cpp_compat/gen_cpp_compat.py) into the same dir;
# 4. builds the SAME sources (c_tests/cpp_compat/*.cpp + the generated ones) twice:
#    (a) against protobuf's generated classes and libprotobuf,
#    (b) with -DONNXL_SIDE=1 against include/ and target/release/libonnx_light.so, with
#        AddressSanitizer and UndefinedBehaviorSanitizer (UBSan fatal, leaks reported), run
#        with the parse's metadata blocks and without (ONNXL_METADATA_BLOCKS=0);
# 5. runs both on every model of the wheel's backend test data; their outputs must be
#    byte-identical (and side (a) is run twice: its output must be deterministic);
# 6. builds c_tests/cpp_compat/thread_tests.cpp four times (protobuf and onnx_light, each under
#    ThreadSanitizer and under AddressSanitizer + UBSan) and runs them on the same models:
#    concurrent const calls (a serializer thread and a walker thread on one const message) and
#    views taken before the first getter call (still valid after it); one output for all four;
# 7. builds walk_bench and parse_bench (-O2, no sanitizer) on both sides and runs them at a small
#    scale (parse_bench: the parsed sizes must match; walk_bench: the digest
#    must match; times are printed, not checked: scripts/bench.sh reports them).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CXX=${CXX:-g++}
PY="$ROOT/.venv/bin/python"
die() { echo "50-cpp-compat: $*" >&2; exit 1; }
[ -x "$PY" ] || die "$PY is missing (scripts/test-all.sh creates the venv)"
command -v "$CXX" >/dev/null 2>&1 || die "$CXX is required (a C++17 compiler)"
WALK_ROUNDS=${CPP_COMPAT_WALK_ROUNDS:-2}

# ---- 1. protobuf C++ and protoc ---------------------------------------------------------------
. scripts/lib/protobuf-onnx.sh
require_protobuf
echo "protobuf $(protoc --version)"

# ---- 2. protoc on the wheel's schema ----------------------------------------------------------
ONNX_DIR=$("$PY" -c "import onnx, os; print(os.path.dirname(onnx.__file__))")
DATA="$ONNX_DIR/backend/test/data"
[ -d "$DATA" ] || die "no onnx backend test data at $DATA"
BUILD="$ROOT/target/cpp-compat"
rm -rf "$BUILD"
mkdir -p "$BUILD/gen" "$BUILD/obj-protobuf" "$BUILD/obj-onnxl"
onnx_protos_for_protoc "$ONNX_DIR" "$BUILD/proto"
(cd "$BUILD/proto" && protoc --cpp_out="$BUILD/gen" --include_imports \
  --descriptor_set_out="$BUILD/schema.pb" onnx/onnx.proto onnx/onnx-data.proto)

# ---- 3. the schema-driven tests ---------------------------------------------------------------
"$PY" c_tests/cpp_compat/gen_cpp_compat.py "$BUILD/schema.pb" "$BUILD/gen"
(cd "$DATA" && find . -name '*.onnx' | sed 's|^\./||' | LC_ALL=C sort) >"$BUILD/models.txt"
[ "$(wc -l <"$BUILD/models.txt")" -ge 100 ] || die "fewer than 100 models under $DATA"

# ---- 4. both builds ---------------------------------------------------------------------------
SOURCES=(c_tests/cpp_compat/api_tests.cpp "$BUILD/gen/field_tests.cpp" "$BUILD/gen/schema_ops.cpp")
COMMON=(-std=c++17 -Wall -Wextra -Werror -Ic_tests/cpp_compat -I"$BUILD/gen")
# Compiles "$@" (sources) into $OBJ with $FLAGS, two at a time.
compile_all() {
  local pids=() src
  for src in "$@"; do
    "$CXX" "${FLAGS[@]}" -c "$src" -o "$OBJ/$(basename "${src%.*}").o" &
    pids+=($!)
    if [ "${#pids[@]}" -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
}

echo "(a) protobuf build"
OBJ="$BUILD/obj-protobuf"
FLAGS=("${COMMON[@]}" -O1 -isystem "$BUILD/gen")
compile_all "$BUILD/gen/onnx/onnx.pb.cc" "$BUILD/gen/onnx/onnx-data.pb.cc" "${SOURCES[@]}"
"$CXX" -o "$BUILD/test-protobuf" "$OBJ"/*.o -lprotobuf -pthread

[ -f include/onnx_light/onnx_pb.h ] || die "include/onnx_light/onnx_pb.h is missing"
cargo build --release -p onnx_light --lib
LIB="$ROOT/target/release/libonnx_light.so"
[ -f "$LIB" ] || die "missing $LIB"
# The library's SONAME is what the programs ask the loader for.
ln -sf "$LIB" "$BUILD/$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
echo "(b) onnx_light build (ASan + UBSan)"
OBJ="$BUILD/obj-onnxl"
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
FLAGS=("${COMMON[@]}" -O1 -g -DONNXL_SIDE=1 -Iinclude "${SAN[@]}")
compile_all "${SOURCES[@]}"
"$CXX" "${SAN[@]}" -o "$BUILD/test-onnxl" "$OBJ"/*.o -L"$ROOT/target/release" -lonnx_light -pthread \
  -Wl,-rpath,"$BUILD"

# ---- 5. run and compare -----------------------------------------------------------------------
echo "running the protobuf build"
"$BUILD/test-protobuf" "$BUILD/models.txt" "$DATA" >"$BUILD/out-protobuf.txt" ||
  die "the protobuf build failed its own checks: grep FAIL $BUILD/out-protobuf.txt"
"$BUILD/test-protobuf" "$BUILD/models.txt" "$DATA" >"$BUILD/out-protobuf-2.txt"
cmp "$BUILD/out-protobuf.txt" "$BUILD/out-protobuf-2.txt" || die "the protobuf build's output is not deterministic"
lines=$(wc -l <"$BUILD/out-protobuf.txt")
[ "$lines" -ge 3000 ] || die "only $lines lines of output from the protobuf build"
# Twice: as shipped (a parse cuts its lists, sub-messages and long strings from blocks of its
# own, inside which ASan sees no boundaries), and with ONNXL_METADATA_BLOCKS=0 (every one of them
# an allocation of its own, so ASan checks each sub-message released, deleted or replaced).
for blocks in 1 0; do
  echo "running the onnx_light build (ONNXL_METADATA_BLOCKS=$blocks)"
  status=0
  ONNXL_METADATA_BLOCKS=$blocks ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$BUILD/test-onnxl" "$BUILD/models.txt" "$DATA" >"$BUILD/out-onnxl.txt" || status=$?
  if ! diff -u "$BUILD/out-protobuf.txt" "$BUILD/out-onnxl.txt" >"$BUILD/out.diff"; then
    head -60 "$BUILD/out.diff" >&2
    die "outputs differ ($(grep -c '^[-+][^-+]' "$BUILD/out.diff") lines; full diff: $BUILD/out.diff)"
  fi
  [ "$status" -eq 0 ] || die "the onnx_light build exited with status $status (sanitizer report above)"
  echo "ok: identical output ($lines lines), ASan/UBSan/LSan clean"
done

# ---- 6. threads and lifetimes: concurrent const calls under ThreadSanitizer, views taken before
# the first getter call under AddressSanitizer; four programs (protobuf and onnx_light, each
# with either sanitizer), one output.
THREAD_ROUNDS=${CPP_COMPAT_THREAD_ROUNDS:-2}
PB_SOURCES=("$BUILD/gen/onnx/onnx.pb.cc" "$BUILD/gen/onnx/onnx-data.pb.cc")
for san in thread address; do
  SANF=(-fsanitize=$san -fno-omit-frame-pointer -g)
  [ "$san" = address ] && SANF+=(-fsanitize=undefined -fno-sanitize-recover=all)
  OBJ="$BUILD/obj-threads-protobuf-$san"
  mkdir -p "$OBJ"
  FLAGS=("${COMMON[@]}" -O1 -isystem "$BUILD/gen" "${SANF[@]}")
  compile_all c_tests/cpp_compat/thread_tests.cpp "$BUILD/gen/schema_ops.cpp" "${PB_SOURCES[@]}"
  "$CXX" "${SANF[@]}" -o "$BUILD/threads-protobuf-$san" "$OBJ"/*.o -lprotobuf -pthread
  OBJ="$BUILD/obj-threads-onnxl-$san"
  mkdir -p "$OBJ"
  FLAGS=("${COMMON[@]}" -O1 -DONNXL_SIDE=1 -Iinclude "${SANF[@]}")
  compile_all c_tests/cpp_compat/thread_tests.cpp "$BUILD/gen/schema_ops.cpp"
  "$CXX" "${SANF[@]}" -o "$BUILD/threads-onnxl-$san" "$OBJ"/*.o -L"$ROOT/target/release" -lonnx_light -pthread \
    -Wl,-rpath,"$BUILD"
done
for prog in threads-protobuf-thread threads-protobuf-address threads-onnxl-thread threads-onnxl-address; do
  echo "running $prog"
  status=0
  TSAN_OPTIONS=halt_on_error=1:exitcode=66 ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$BUILD/$prog" "$BUILD/models.txt" "$DATA" "$THREAD_ROUNDS" >"$BUILD/out-$prog.txt" || status=$?
  [ "$status" -eq 0 ] || die "$prog exited with status $status (sanitizer report or failed check above; output: $BUILD/out-$prog.txt)"
  cmp "$BUILD/out-threads-protobuf-thread.txt" "$BUILD/out-$prog.txt" ||
    die "$prog: output differs from the protobuf build's (diff $BUILD/out-threads-protobuf-thread.txt $BUILD/out-$prog.txt)"
done
echo "ok: concurrent const calls and views before getters: $(grep -c '^model ' "$BUILD/out-threads-protobuf-thread.txt") models, four builds, same output, sanitizers clean"

# ---- 7. walk benchmark at a small scale -------------------------------------------------------
BENCH_FLAGS=("${COMMON[@]}" -O2 -DNDEBUG)
"$CXX" "${BENCH_FLAGS[@]}" -isystem "$BUILD/gen" -o "$BUILD/walk_bench-protobuf" c_tests/cpp_compat/walk_bench.cpp \
  "$BUILD/gen/schema_ops.cpp" "$BUILD/obj-protobuf/onnx.pb.o" "$BUILD/obj-protobuf/onnx-data.pb.o" -lprotobuf -pthread
"$BUILD/walk_bench-protobuf" "$BUILD/models.txt" "$DATA" "$WALK_ROUNDS" >"$BUILD/bench-protobuf.txt"
"$CXX" "${BENCH_FLAGS[@]}" -DONNXL_SIDE=1 -Iinclude -o "$BUILD/walk_bench-onnxl" c_tests/cpp_compat/walk_bench.cpp \
  "$BUILD/gen/schema_ops.cpp" -L"$ROOT/target/release" -lonnx_light -pthread -Wl,-rpath,"$BUILD"
"$BUILD/walk_bench-onnxl" "$BUILD/models.txt" "$DATA" "$WALK_ROUNDS" >"$BUILD/bench-onnxl.txt"
cmp "$BUILD/bench-protobuf.txt" "$BUILD/bench-onnxl.txt" || die "walk_bench digests differ"
# The parse entry points' benchmark (scripts/bench-cpp.sh runs it at full size): both builds parse
# the largest backend models through each entry point to the same sizes.
"$CXX" "${BENCH_FLAGS[@]}" -isystem "$BUILD/gen" -o "$BUILD/parse_bench-protobuf" c_tests/cpp_compat/parse_bench.cpp \
  "$BUILD/obj-protobuf/onnx.pb.o" "$BUILD/obj-protobuf/onnx-data.pb.o" -lprotobuf -pthread
"$CXX" "${BENCH_FLAGS[@]}" -DONNXL_SIDE=1 -Iinclude -o "$BUILD/parse_bench-onnxl" c_tests/cpp_compat/parse_bench.cpp \
  -L"$ROOT/target/release" -lonnx_light -pthread -Wl,-rpath,"$BUILD"
mapfile -t LARGEST < <(cd "$DATA" && ls -S light/*.onnx | head -2 | sed "s|^|$DATA/|")
for side in protobuf onnxl; do
  "$BUILD/parse_bench-$side" 2 "${LARGEST[@]}" | awk '{ print $1, $2, $5 }' >"$BUILD/parse-$side.txt"
done
[ "$(wc -l <"$BUILD/parse-onnxl.txt")" -eq 8 ] || die "parse_bench: expected 8 rows"
cmp "$BUILD/parse-protobuf.txt" "$BUILD/parse-onnxl.txt" || die "parse_bench: the parsed sizes differ"
cat "$BUILD/bench-protobuf.txt"
