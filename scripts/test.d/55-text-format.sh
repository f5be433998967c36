#!/usr/bin/env bash
# protobuf's text format, checked against protobuf itself (run by scripts/test-all.sh): the
# DebugString / ShortDebugString / Utf8DebugString texts of onnx_light (src/proto/text_format.rs,
# through onnxl_cxx_debug_string, the entry point of the C++ message classes) must be
# byte-identical to those of protobuf C++ 3.21 for every input:
# 1. installs Debian's libprotobuf-dev and protobuf-compiler when missing (apt-get);
# 2. runs protoc on onnx.proto and onnx-data.proto of the pinned onnx wheel (.venv) with their
#    `option optimize_for = LITE_RUNTIME;` removed (the lite runtime has no text format), into
#    build/text-format/ (gitignored; nothing protoc writes is committed);
# 3. builds c_tests/text_format/debug_string_check.cpp with the generated classes, libprotobuf
#    and target/release/libonnx_light.so;
# 4. writes the inputs (c_tests/text_format/make_inputs.py: every model and value of the wheel's
#    backend test data, the all-fields inputs of c_tests/make_walk_inputs.py, the empty encoding
#    of every message, edge cases, malformed encodings both must refuse) and checks them all.
# A missing tool fails the script; nothing is skipped.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CXX=${CXX:-g++}
PY="$ROOT/.venv/bin/python"
die() { echo "55-text-format: $*" >&2; exit 1; }
[ -x "$PY" ] || die "$PY is missing (scripts/test-all.sh creates the venv)"
command -v "$CXX" >/dev/null 2>&1 || die "$CXX is required (a C++17 compiler)"

# ---- 1. protobuf C++ and protoc ---------------------------------------------------------------
. scripts/lib/protobuf-onnx.sh
require_protobuf
PROTOC_VERSION=$(protoc --version | awk '{print $2}')
case "$PROTOC_VERSION" in
  3.21.*) ;;
  *) die "protoc $PROTOC_VERSION: the texts are checked against protobuf 3.21 (Debian bookworm's 3.21.12)" ;;
esac

# ---- 2. protoc on the wheel's schema ----------------------------------------------------------
ONNX_DIR=$("$PY" -c "import onnx, os; print(os.path.dirname(onnx.__file__))")
BACKEND_DATA="$ONNX_DIR/backend/test/data"
[ -d "$BACKEND_DATA" ] || die "no onnx backend test data at $BACKEND_DATA"
BUILD="$ROOT/build/text-format"
rm -rf "$BUILD"
mkdir -p "$BUILD/gen"
onnx_protos_for_protoc "$ONNX_DIR" "$BUILD/proto"
(cd "$BUILD/proto" && protoc --cpp_out="$BUILD/gen" onnx/onnx.proto onnx/onnx-data.proto)

# ---- 3. the checker ---------------------------------------------------------------------------
cargo build --release -p onnx_light --lib
LIB="$ROOT/target/release/libonnx_light.so"
[ -f "$LIB" ] || die "missing $LIB"
FLAGS=(-std=c++17 -O0 -DNDEBUG -I"$BUILD/gen")
"$CXX" "${FLAGS[@]}" -c "$BUILD/gen/onnx/onnx.pb.cc" -o "$BUILD/onnx.pb.o" &
pb=$!
"$CXX" "${FLAGS[@]}" -c "$BUILD/gen/onnx/onnx-data.pb.cc" -o "$BUILD/onnx-data.pb.o"
"$CXX" "${FLAGS[@]}" -Wall -Wextra -Werror -c c_tests/text_format/debug_string_check.cpp \
  -o "$BUILD/debug_string_check.o"
wait "$pb"
"$CXX" -o "$BUILD/debug_string_check" "$BUILD/debug_string_check.o" "$BUILD/onnx.pb.o" \
  "$BUILD/onnx-data.pb.o" -L"$ROOT/target/release" -lonnx_light -lprotobuf -pthread \
  -Wl,-rpath,"$BUILD"
# The library's SONAME is what the program asks the loader for.
ln -s "$LIB" "$BUILD/$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"

# ---- 4. inputs and the check ------------------------------------------------------------------
"$PY" c_tests/make_walk_inputs.py "$BUILD/walk" >/dev/null
"$PY" c_tests/text_format/make_inputs.py "$BACKEND_DATA" "$BUILD/walk" "$BUILD/inputs"
"$BUILD/debug_string_check" "$BUILD/inputs/manifest.tsv" 700
