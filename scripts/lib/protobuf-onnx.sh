# Shared by the test steps that check onnx_light against protobuf's C++ (55-text-format.sh,
# 50-cpp-compat.sh); sourced, not run. The caller defines die() and runs from the repository
# root.
. scripts/lib/apt.sh

# Installs Debian's libprotobuf-dev and protobuf-compiler when protoc or the headers are missing
# (the test command runs as root); a machine without apt-get fails.
require_protobuf() {
  if ! command -v protoc >/dev/null 2>&1 || [ ! -f /usr/include/google/protobuf/text_format.h ]; then
    command -v apt-get >/dev/null 2>&1 || die "protoc and libprotobuf-dev are required (Debian: apt-get install libprotobuf-dev protobuf-compiler)"
    echo "installing libprotobuf-dev and protobuf-compiler"
    apt_install libprotobuf-dev protobuf-compiler
  fi
}

# Writes OUT/onnx/onnx.proto and OUT/onnx/onnx-data.proto from the onnx package in ONNX_DIR, with
# `option optimize_for = LITE_RUNTIME;` removed (the lite runtime has no text format, DebugString)
# and onnx-data.proto importing onnx.proto (its onnx-ml.proto declares the same messages).
onnx_protos_for_protoc() {
  local onnx_dir=$1 out=$2
  mkdir -p "$out/onnx"
  sed '/^option optimize_for = LITE_RUNTIME;$/d' "$onnx_dir/onnx.proto" >"$out/onnx/onnx.proto"
  sed -e '/^option optimize_for = LITE_RUNTIME;$/d' \
    -e 's|^import "onnx/onnx-ml.proto";$|import "onnx/onnx.proto";|' \
    "$onnx_dir/onnx-data.proto" >"$out/onnx/onnx-data.proto"
  if grep -n 'optimize_for\|^import "onnx/onnx-ml' "$out"/onnx/*.proto; then
    die "the .proto files of the onnx package in $onnx_dir changed: the lines above were not removed"
  fi
}
