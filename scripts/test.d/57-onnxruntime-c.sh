#!/usr/bin/env bash
# ONNX Runtime over onnx_light's memory through the two C APIs (run by scripts/test-all.sh):
# examples/c/ort_session.c, built against target/release/libonnx_light.so and the ONNX Runtime
# library of the test venv's onnxruntime wheel, with ONNX Runtime's C header from Debian's
# libonnxruntime-dev package (Debian 13+; downloaded with apt-get from the release named below and
# unpacked here, checked by apt against Debian's archive keys: nothing is installed). The example
# hands every large initializer to ONNX Runtime as an OrtValue over onnx_light's buffers, builds a
# second session with ONNX Runtime alone, runs both and compares their outputs byte for byte; the
# step checks, on models with their weights in external data and embedded (plain and saved
# aligned with `onnx-light convert --inline --align`) and on the sample model:
# - identical outputs, and every large initializer of the embedded models shared (plain: those
#   its layout places at an address their type can be read from; aligned: all); none of the
#   external-data models (handed to ONNX Runtime as they are: it maps their files itself);
# - the anonymous memory the onnx_light session added stays under a quarter of the weights (no
#   copy of a weight), where ONNX Runtime alone copies the embedded ones.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PY="$ROOT/.venv/bin/python"
DEBIAN_RELEASE=forky
die() { echo "57-onnxruntime-c: $*" >&2; exit 1; }

[ -x "$PY" ] || die "$PY is missing (scripts/test-all.sh creates the venv)"
ORT_LIB_DIR=$("$PY" -c 'import onnxruntime, os; print(os.path.join(os.path.dirname(onnxruntime.__file__), "capi"))')
ORT_LIB=$(ls "$ORT_LIB_DIR"/libonnxruntime.so.* 2>/dev/null | head -n 1)
[ -n "$ORT_LIB" ] || die "no libonnxruntime.so.* in $ORT_LIB_DIR"

cargo build --release -p onnx_light --lib
. scripts/lib/tool-target.sh
ONNX_LIGHT_BIN="$TOOL_TARGET_DIR/release/onnx-light"
[ -x "$ONNX_LIGHT_BIN" ] || CARGO_TARGET_DIR="$TOOL_TARGET_DIR" cargo build --release -p onnx-light-cli
LIB="$ROOT/target/release/libonnx_light.so"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ONNX Runtime's C header: libonnxruntime-dev from Debian, through a private apt configuration.
apt_dir="$work/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
echo "deb http://deb.debian.org/debian $DEBIAN_RELEASE main" > "$apt_dir/sources.list"
apt_opts=(-q -o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache"
          -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" update >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; die "apt-get update failed"; }
(cd "$work" && apt-get "${apt_opts[@]}" download libonnxruntime-dev >>"$work/apt.log" 2>&1) \
  || { cat "$work/apt.log" >&2; die "cannot download libonnxruntime-dev"; }
dpkg-deb -x "$work"/libonnxruntime-dev_*.deb "$work/ort"
ORT_INCLUDE="$work/ort/usr/include/onnxruntime"
[ -f "$ORT_INCLUDE/onnxruntime_c_api.h" ] || die "no onnxruntime_c_api.h in the package"
echo "ONNX Runtime header $(basename "$work"/libonnxruntime-dev_*.deb), library $(basename "$ORT_LIB")"

# The libraries under the names the program asks the loader for.
ln -s "$LIB" "$work/$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
ln -s "$ORT_LIB" "$work/$(readelf -d "$ORT_LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
"${CC:-cc}" -std=c11 -O1 -Wall -Wextra -Werror -Iinclude -I"$ORT_INCLUDE" examples/c/ort_session.c \
  -o "$work/ort_session" -L"$ROOT/target/release" -lonnx_light -L"$ORT_LIB_DIR" -l:"$(basename "$ORT_LIB")" \
  -Wl,-rpath,"$work"

# Models: four Add nodes over 4 x 16 MiB of weights (all used at run time), in external data and
# embedded; the embedded one saved aligned; four MatMul nodes (pre-packed by ONNX Runtime).
"$PY" - "$work" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
work = sys.argv[1]
n = 4 << 20
def chain(op, shape, weights):
    nodes, prev = [], "x"
    for i in range(len(weights)):
        nodes.append(helper.make_node(op, [prev, f"w{i}"], [f"h{i}"]))
        prev = f"h{i}"
    g = helper.make_graph(nodes, op.lower(), [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, shape)],
                          initializer=[numpy_helper.from_array(w, f"w{i}") for i, w in enumerate(weights)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    return m
adds = chain("Add", [n], [np.full((n,), i + 1, np.float32) for i in range(4)])
onnx.save(adds, f"{work}/adds_inline.onnx")  # (first: the external save marks the tensors)
onnx.save(adds, f"{work}/adds_external.onnx", save_as_external_data=True, location="adds.data")
rng = np.random.default_rng(0)
mm = chain("MatMul", [1, 1024], [(rng.standard_normal((1024, 1024)) / 32).astype(np.float32) for _ in range(4)])
onnx.save(mm, f"{work}/matmul_external.onnx", save_as_external_data=True, location="matmul.data")
PY
aligned="$work/adds_aligned.onnx"
"$ONNX_LIGHT_BIN" convert --inline --align 4096 "$work/adds_inline.onnx" "$aligned" >/dev/null 2>&1
cp samples/mlp.onnx "$work/mlp.onnx"

# run MODEL SHARED [MAX_ANON_KIB]: the outputs identical, SHARED initializers shared (a pattern),
# and the onnx_light session's anonymous memory under MAX_ANON_KIB.
run() {
  local out anon
  out=$(cd "$work" && ./ort_session "$1" 2>&1) || { echo "$out" >&2; die "$1: the example failed"; }
  echo "  $(basename "$1"): $(tr '\n' ';' <<<"$out")"
  grep -q "outputs: identical" <<<"$out" || die "$1: outputs differ"
  grep -q "^$2 initializers" <<<"$out" || die "$1: expected $2 shared initializers"
  if [ $# -ge 3 ]; then
    anon=$(sed -n 's/.*session over onnx_light.s map \([0-9]*\) KiB.*/\1/p' <<<"$out")
    [ -n "$anon" ] && [ "$anon" -lt "$3" ] || die "$1: the onnx_light session added $anon KiB (limit $3)"
  fi
}
quarter=$(((64 << 10) / 4)) # KiB: a quarter of the 64 MiB of weights
run "$work/adds_external.onnx" 0 "$quarter"
run "$aligned" 4 "$quarter"
run "$work/adds_inline.onnx" '[1-4]' "$quarter"
run "$work/matmul_external.onnx" 0
run "$work/mlp.onnx" 0
echo "57-onnxruntime-c: ok"
