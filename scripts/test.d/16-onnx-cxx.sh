#!/usr/bin/env bash
# onnx's own C++ library on onnx_light (run by scripts/test-all.sh, in the background): the C++
# sources of the pinned onnx release (checker, shape inference, version converter, operator
# schemas, inliner, parser, printer) and onnx's C++ unit tests (tests/cpp, gtest), compared two
# ways:
#   (a) against protobuf (protoc 3.21 on the sdist's .proto files, libprotobuf-lite), the
#       reference: the library and tests compiled here;
#   (b) against onnx_light: the onnx component as 15-onnx-component.sh built and installed it
#       without protobuf (build/onnx-component/prefix); only the test sources are compiled here,
#       through the installed headers. The depfiles must name no protobuf header and the program
#       must not link libprotobuf.
# Both test programs run; their lists of passed, failed and skipped tests must be the same. Then
# c_tests/onnx_consumer/onnx_api.cpp (onnx's checker, shape inference and version converter over
# every backend model, printing verdicts and digests of the serialized results) is built against
# (a) and its output must equal the component's (15-onnx-component.sh wrote it).
# onnx's sources come from its source distribution on PyPI (scripts/lib/onnx-sdist.sh) and are
# never committed. Patches to onnx: none.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CXX=${CXX:-g++}
PY="$ROOT/.venv/bin/python"
die() { echo "16-onnx-cxx: $*" >&2; exit 1; }
[ -x "$PY" ] || die "$PY is missing (scripts/test-all.sh creates the venv)"
. scripts/lib/onnx-sdist.sh
fetch_onnx_sdist
COMPONENT="$ROOT/build/onnx-component"
[ -f "$COMPONENT/prefix/lib/libonnx_light_onnx.so" ] ||
  die "the onnx component is not installed in $COMPONENT/prefix (scripts/test.d/15-onnx-component.sh)"
W="$ROOT/target/onnx-cxx"
SRC="$W/onnx-$ONNX_VERSION"
mkdir -p "$W"
rm -rf "$SRC" && tar xzf "$ONNX_SDIST" -C "$W"
. scripts/lib/protobuf-onnx.sh
require_protobuf
if [ ! -f /usr/include/gtest/gtest.h ] || [ ! -f /usr/lib/x86_64-linux-gnu/libgtest.a ]; then
  apt_install libgtest-dev
fi
# onnx/common/version.h, as onnx's CMake writes it from version.h.in.
GEN="$W/gen"
rm -rf "$GEN" && mkdir -p "$GEN/onnx/common"
IFS=. read -r MAJOR MINOR PATCH <<<"$ONNX_VERSION"
sed -e "s/@ONNX_VERSION_MAJOR@/$MAJOR/; s/@ONNX_VERSION_MINOR@/$MINOR/; s/@ONNX_VERSION_PATCH@/$PATCH/" \
  -e "s/@ONNX_VERSION@/$ONNX_VERSION/" "$SRC/onnx/common/version.h.in" >"$GEN/onnx/common/version.h"

LIB_SOURCES=$(cd "$SRC" && find onnx -name '*.cc' ! -name cpp2py_export.cc | LC_ALL=C sort)
TEST_SOURCES=$(cd "$SRC" && ls tests/cpp/*.cc | LC_ALL=C sort)
[ "$(echo "$LIB_SOURCES" | wc -l)" -ge 50 ] || die "fewer than 50 library sources under $SRC/onnx"
# As the onnx wheel is built (ONNX_ML=ON, namespace onnx); the sdist's .proto files are the
# lite ones, so both builds use protobuf's lite API (ONNX_USE_LITE_PROTO).
DEFS=(-DONNX_NAMESPACE=onnx -DONNX_ML=1 -DONNX_USE_LITE_PROTO=1)
# Unoptimized: what is compared is outcomes, and -O1 took a third longer to compile.
FLAGS=(-std=c++17 -O0 -g0 -w "${DEFS[@]}")

# Compiles the library and test sources into $1 with the include flags after it, two at a time,
# with depfiles (*.d, system headers included).
build_objects() {
  local obj=$1 f pids=()
  shift
  mkdir -p "$obj"
  for f in $LIB_SOURCES $TEST_SOURCES "${EXTRA_SOURCES[@]}"; do
    (cd "$SRC" && "$CXX" "${FLAGS[@]}" "$@" -MD -MF "$obj/$(echo "$f" | tr / _).d" -c "$f" \
      -o "$obj/$(echo "$f" | tr / _).o") &
    pids+=($!)
    if [ "${#pids[@]}" -ge 2 ]; then wait "${pids[0]}" || die "compiling failed"; pids=("${pids[@]:1}"); fi
  done
  for p in "${pids[@]}"; do wait "$p" || die "compiling failed"; done
}

# The test names of a gtest run, one per line with its outcome (OK, FAILED, SKIPPED), sorted.
outcomes() {
  sed -n 's/^\[ *\(OK\|FAILED\|SKIPPED\) *\] \([A-Za-z0-9_/.]*\) (.*/\1 \2/p' "$1" | LC_ALL=C sort -u -k2
}

# ---- 2. (a) against protobuf -----------------------------------------------------------------
echo "(a) onnx $ONNX_VERSION against protobuf $(protoc --version)"
PB="$W/pb"
rm -rf "$PB" && mkdir -p "$PB/gen"
(cd "$SRC" && protoc --cpp_out="$PB/gen" onnx/onnx-ml.proto onnx/onnx-operators-ml.proto onnx/onnx-data.proto)
EXTRA_SOURCES=("$PB/gen/onnx/onnx-ml.pb.cc" "$PB/gen/onnx/onnx-operators-ml.pb.cc" "$PB/gen/onnx/onnx-data.pb.cc")
build_objects "$PB/obj" -I"$PB/gen" -I"$GEN" -I.
"$CXX" -o "$PB/onnx_cpp_tests" "$PB"/obj/*.o -lprotobuf-lite -lgtest -pthread
(cd "$PB" && ./onnx_cpp_tests >"$PB/run.txt" 2>&1) || true
outcomes "$PB/run.txt" >"$W/outcomes-protobuf.txt"

# ---- 3. (b) against onnx_light: the installed component ----------------------------------------
echo "(b) onnx $ONNX_VERSION against onnx_light (the installed onnx component)"
PREFIX="$COMPONENT/prefix"
OL="$W/ol"
rm -rf "$OL" && mkdir -p "$OL"
LIB_SOURCES=""
EXTRA_SOURCES=()
build_objects "$OL/obj" -I"$PREFIX/include/onnx_light/protobuf_compat" -I"$PREFIX/include/onnx_light/onnx_cxx" \
  -I"$PREFIX/include" -I.
if grep -h 'google/protobuf' "$OL"/obj/*.d | grep -v "include/onnx_light/protobuf_compat/" | grep -q .; then
  grep -h 'google/protobuf' "$OL"/obj/*.d | grep -v "include/onnx_light/protobuf_compat/" | head -5 >&2
  die "a protobuf header was read in the onnx_light build"
fi
"$CXX" -o "$OL/onnx_cpp_tests" "$OL"/obj/*.o -L"$PREFIX/lib" -lonnx_light_onnx -lonnx_light -lgtest -pthread \
  -Wl,-rpath,"$PREFIX/lib"
deps=$(ldd "$OL/onnx_cpp_tests")
undefined=$(nm -D --undefined-only "$OL/onnx_cpp_tests")
if grep -qi protobuf <<<"$deps$undefined"; then
  die "the onnx_light build links protobuf"
fi
(cd "$OL" && ./onnx_cpp_tests >"$OL/run.txt" 2>&1) || true
outcomes "$OL/run.txt" >"$W/outcomes-onnxl.txt"

# ---- 4. the same outcomes --------------------------------------------------------------------
passed=$(grep -c '^OK ' "$W/outcomes-protobuf.txt" || true)
[ "$passed" -ge 100 ] || die "only $passed tests passed in the protobuf build ($PB/run.txt)"
diff -u "$W/outcomes-protobuf.txt" "$W/outcomes-onnxl.txt" ||
  die "onnx's C++ tests differ between the protobuf and the onnx_light build (runs: $PB/run.txt, $OL/run.txt)"
echo "ok: onnx $ONNX_VERSION's C++ library and tests unchanged on onnx_light: $(wc -l <"$W/outcomes-onnxl.txt") tests," \
  "$passed passed, $(grep -c '^FAILED ' "$W/outcomes-onnxl.txt" || true) failed," \
  "$(grep -c '^SKIPPED ' "$W/outcomes-onnxl.txt" || true) skipped, as with protobuf; no protobuf header read or library linked"

# ---- 5. onnx's API over the backend models: protobuf build vs the component --------------------
"$CXX" "${FLAGS[@]}" -I"$PB/gen" -I"$GEN" -I"$SRC" -c c_tests/onnx_consumer/onnx_api.cpp -o "$PB/onnx_api.o"
"$CXX" -o "$PB/onnx_api" "$PB/onnx_api.o" "$PB"/obj/onnx_*.o "$PB"/obj/_*.pb.cc.o -lprotobuf-lite -pthread
BACKEND_DATA=$("$PY" -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend', 'test', 'data'))")
mapfile -t MODELS < <(find "$BACKEND_DATA" -name '*.onnx' | LC_ALL=C sort)
"$PB/onnx_api" "${MODELS[@]}" >"$W/onnx_api-protobuf.txt" || die "onnx_api (protobuf) failed"
diff -u "$W/onnx_api-protobuf.txt" "$COMPONENT/onnx_api.txt" ||
  die "onnx's checker, shape inference or version converter differ between protobuf and onnx_light"
echo "ok: onnx's checker, shape inference (bytes) and version converter (bytes) agree on ${#MODELS[@]} backend models"
