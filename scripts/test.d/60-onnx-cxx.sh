#!/usr/bin/env bash
# onnx's own C++ library on onnx_light (run by scripts/test-all.sh): the C++ sources of the
# pinned onnx release (checker, shape inference, version converter, operator schemas, inliner,
# parser, printer) and onnx's C++ unit tests (tests/cpp, gtest), built twice, unchanged:
#   (a) against protobuf (protoc 3.21 on the sdist's .proto files, libprotobuf-lite), the
#       reference;
#   (b) against onnx_light: <onnx_light/onnx_pb.h> through the forwarding headers of
#       include/onnx_light/protobuf_compat/ and target/release/libonnx_light.so. The depfiles
#       must name no protobuf header and the program must not link libprotobuf.
# Both test programs run; their lists of passed, failed and skipped tests must be the same.
# onnx's sources come from its source distribution on PyPI (pip download, sha256 checked) into
# target/onnx-cxx/ and are never committed. Patches to onnx: none.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CXX=${CXX:-g++}
PY="$ROOT/.venv/bin/python"
die() { echo "60-onnx-cxx: $*" >&2; exit 1; }
[ -x "$PY" ] || die "$PY is missing (scripts/test-all.sh creates the venv)"
ONNX_VERSION=1.23.2
ONNX_SHA256=008cb0467b2bbee41448acc7da8b6f4e704624cb0d327a2d5adafc7ce19bc5b8
W="$ROOT/target/onnx-cxx"
SRC="$W/onnx-$ONNX_VERSION"
mkdir -p "$W"

# ---- 1. onnx's sources, gtest, protoc ----------------------------------------------------------
TARBALL="$W/dl/onnx-$ONNX_VERSION.tar.gz"
if ! echo "$ONNX_SHA256  $TARBALL" | sha256sum -c --status - 2>/dev/null; then
  # pip prepares the sdist's metadata, which needs onnx's build backend (scikit-build-core) and
  # cmake >= 3.26 (both in the venv); nothing is built.
  "$PY" -m pip install --quiet --disable-pip-version-check scikit-build-core==1.1.2
  rm -rf "$W/dl"
  PATH="$ROOT/.venv/bin:$PATH" "$PY" -m pip download --quiet --disable-pip-version-check \
    --no-binary :all: --no-deps --no-build-isolation "onnx==$ONNX_VERSION" -d "$W/dl"
  echo "$ONNX_SHA256  $TARBALL" | sha256sum -c - || die "checksum of $TARBALL"
fi
rm -rf "$SRC" && tar xzf "$TARBALL" -C "$W"
. scripts/lib/protobuf-onnx.sh
require_protobuf
if [ ! -f /usr/include/gtest/gtest.h ] || [ ! -f /usr/lib/x86_64-linux-gnu/libgtest.a ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libgtest-dev >/dev/null
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
FLAGS=(-std=c++17 -O1 -g0 -w "${DEFS[@]}")

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

# ---- 3. (b) against onnx_light ----------------------------------------------------------------
echo "(b) onnx $ONNX_VERSION against onnx_light"
cargo build --release --lib -q
LIBDIR="$ROOT/target/release"
SONAME=$(readelf -d "$LIBDIR/libonnx_light.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
OL="$W/ol"
rm -rf "$OL" && mkdir -p "$OL"
ln -sf "$LIBDIR/libonnx_light.so" "$OL/$SONAME"
EXTRA_SOURCES=()
build_objects "$OL/obj" -I"$ROOT/include/onnx_light/protobuf_compat" -I"$GEN" -I"$ROOT/include" -I.
if grep -h 'google/protobuf' "$OL"/obj/*.d | grep -v "include/onnx_light/protobuf_compat/" | grep -q .; then
  grep -h 'google/protobuf' "$OL"/obj/*.d | grep -v "include/onnx_light/protobuf_compat/" | head -5 >&2
  die "a protobuf header was read in the onnx_light build"
fi
"$CXX" -o "$OL/onnx_cpp_tests" "$OL"/obj/*.o -L"$LIBDIR" -lonnx_light -lgtest -pthread -Wl,-rpath,"$OL"
if ldd "$OL/onnx_cpp_tests" | grep -q protobuf || nm -D --undefined-only "$OL/onnx_cpp_tests" | grep -qi protobuf; then
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
