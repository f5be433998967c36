#!/usr/bin/env bash
# The onnx component (components/onnx; run by scripts/test-all.sh): onnx's own C++ library built
# unchanged against onnx_light through CMake, with no protobuf on the machine for the build:
# 1. configure, build and install (-DONNXL_WITH_ONNX=ON, onnx's sdist from PyPI) with protobuf out
#    of reach: when the machine has protobuf, inside a private mount namespace where its headers,
#    libraries and protoc are empty; either way the step checks that no protobuf header is found
#    and protoc does not run, and the installed library names no protobuf symbol or library;
#    onnx's main sources and the component's own also compile with ONNX_NAMESPACE=onnx_torch
#    (as PyTorch builds onnx), syntax only (scripts/lib/onnx_namespace_check.py);
# 2. the consumer project (c_tests/onnx_consumer) finds it with
#    find_package(onnx_light COMPONENTS onnx), in the same namespace: a program written only
#    against onnx's headers (checker, shape inference, version converter, schema registry; shared
#    and static) runs over every model of the onnx wheel's backend test data, and the tests of the
#    C ABI (onnx_light_onnx.h) and of its C++ names (onnx_light_onnx.hpp) pass.
# 3. the Rust binding (components/onnx/rust) linking the installed libonnx_light_onnx.a, and the
#    `onnx-light` tool built with it (feature `onnx`): `check` gives onnx's verdicts and
#    messages, `check --infer-shapes` writes onnx's strict inference result byte for byte.
# The install prefix (build/onnx-component/prefix) is reused by the later steps: the Python
# package links its libonnx_light_onnx.a (50-python.sh) and onnx's C++ tests run on it and the
# consumer's output is compared with the protobuf build's (16-onnx-cxx.sh); the tool built here
# (target/tool/release/onnx-light, with onnx's checker) is the one the later steps run.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PY="$ROOT/.venv/bin/python"
JOBS=$(nproc 2>/dev/null || echo 2)
die() { echo "15-onnx-component: $*" >&2; exit 1; }
[ -x "$PY" ] || die "$PY is missing (scripts/test-all.sh creates the venv)"
export PATH="$ROOT/.venv/bin:$PATH"   # the pinned cmake
. scripts/lib/onnx-sdist.sh
fetch_onnx_sdist
. scripts/lib/onnx-component.sh
BUILD="$ROOT/build/onnx-component"
PREFIX="$ONNX_COMPONENT_PREFIX"
BACKEND_DATA=$("$PY" -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend', 'test', 'data'))")
mkdir -p "$BUILD"
# A model whose strict shape inference fails (Add of [2] and [3]), for the C ABI test.
"$PY" - "$BUILD/bad_shapes.onnx" <<'PYEOF'
import sys
from onnx import TensorProto, helper, save
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "g", [x, y], [z])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), sys.argv[1])
PYEOF

# ---- 1 + 2, with protobuf out of reach --------------------------------------------------------
# Where the machine has protobuf (an earlier run's Debian packages), the step runs in a mount
# namespace of its own that hides it; where it has none, there is nothing to hide and no
# namespace is needed (one cannot always be made, e.g. in an unprivileged container).
protobuf_present=0
for f in /usr/include/google/protobuf /usr/local/include/google/protobuf /usr/bin/protoc /usr/local/bin/protoc \
         /usr/lib/*/libprotobuf*; do
  [ -e "$f" ] && protobuf_present=1
done
if [ "$protobuf_present" = 1 ]; then
  command -v unshare >/dev/null || die "protobuf is installed and unshare (util-linux) is missing to hide it"
  unshare --mount true 2>/dev/null || die "protobuf is installed and no mount namespace can be made to hide it"
  IN_STEP=(unshare --mount bash -euo pipefail -c)
else
  IN_STEP=(bash -euo pipefail -c)
fi
export ROOT BUILD PREFIX JOBS ONNX_SDIST BACKEND_DATA protobuf_present PY
"${IN_STEP[@]}" '
die() { echo "15-onnx-component: $*" >&2; exit 1; }
hidden=0
if [ "$protobuf_present" = 1 ]; then
  for d in /usr/include/google /usr/local/include/google; do
    [ -d "$d" ] && { mount -t tmpfs none "$d"; hidden=$((hidden + 1)); }
  done
  for f in /usr/lib/*/libprotobuf* /usr/lib/*/libprotoc* /usr/lib/libprotobuf* /usr/local/lib/libprotobuf* \
           /usr/bin/protoc* /usr/local/bin/protoc*; do
    [ -e "$f" ] && [ ! -L "$f" ] && { mount --bind /dev/null "$f"; hidden=$((hidden + 1)); }
  done
fi
echo "protobuf on the machine: $protobuf_present; paths hidden for this step: $hidden"
if echo "#include <google/protobuf/message_lite.h>" | "${CXX:-c++}" -x c++ -E - >/dev/null 2>&1; then
  die "protobuf headers are still reachable"
fi
if command -v protoc >/dev/null && protoc --version >/dev/null 2>&1; then die "protoc still runs"; fi

cd "$ROOT"
. scripts/lib/onnx-component.sh
build_onnx_component
"$PY" scripts/lib/onnx_namespace_check.py "$BUILD/tree/compile_commands.json" "$JOBS"
rm -rf "$PREFIX"
cmake --install "$BUILD/tree" --prefix "$PREFIX" >/dev/null

rm -rf "$BUILD/consumer"
cmake -S c_tests/onnx_consumer -B "$BUILD/consumer" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD/consumer" -j "$JOBS" >/dev/null
'

# ---- checks of the installed component --------------------------------------------------------
LIB="$PREFIX/lib/libonnx_light_onnx.so"
for f in "$LIB" "$PREFIX/lib/libonnx_light_onnx.a" "$PREFIX/include/onnx_light_onnx.h" "$PREFIX/include/onnx_light_onnx.hpp" \
         "$PREFIX/include/onnx_light/onnx_cxx/onnx/checker.h" \
         "$PREFIX/include/onnx_light/onnx_cxx/onnx/shape_inference/implementation.h" \
         "$PREFIX/include/onnx_light/onnx_cxx/onnx/version_converter/convert.h" \
         "$PREFIX/include/onnx_light/onnx_cxx/onnx/defs/schema.h" \
         "$PREFIX/include/onnx_light/onnx_cxx/onnx/common/version.h" \
         "$PREFIX/lib/cmake/onnx_light/onnx_light_onnxTargets.cmake"; do
  [ -e "$f" ] || die "not installed: $f"
done
# (Outputs are captured first: `grep -q` in a pipe would end the writer early under pipefail.)
deps=$(ldd "$LIB")
undefined=$(nm -D --undefined-only "$LIB")
defined=$(nm -DC --defined-only "$LIB")
if grep -qi protobuf <<<"$deps$undefined"; then die "$LIB needs protobuf"; fi
grep -q "libonnx_light.so" <<<"$deps" || die "$LIB does not link the core library"
grep -q "onnx::checker::check_model(onnx_light::ModelProto const&" <<<"$defined" ||
  die "$LIB lacks onnx::checker::check_model over onnx_light's ModelProto"
grep -q " T onnxl_check_model$" <<<"$defined" || die "$LIB lacks onnxl_check_model"

# ---- the consumer programs --------------------------------------------------------------------
mapfile -t MODELS < <(find "$BACKEND_DATA" -name '*.onnx' | LC_ALL=C sort)
[ "${#MODELS[@]}" -ge 100 ] || die "only ${#MODELS[@]} backend models under $BACKEND_DATA"
"$BUILD/consumer/onnx_api" "${MODELS[@]}" >"$BUILD/onnx_api.txt" || die "onnx_api failed ($BUILD/onnx_api.txt)"
"$BUILD/consumer/onnx_api_static" "${MODELS[@]}" >"$BUILD/onnx_api_static.txt"
diff -q "$BUILD/onnx_api.txt" "$BUILD/onnx_api_static.txt" >/dev/null || die "the static build's output differs"
if readelf -d "$BUILD/consumer/onnx_api_static" | grep "NEEDED.*onnx_light"; then
  die "onnx_api_static needs a shared onnx_light"
fi
valid=$(grep -c ": valid, inferred" "$BUILD/onnx_api.txt" || true)
[ "$valid" -ge 100 ] || die "only $valid backend models passed the full check ($BUILD/onnx_api.txt)"
"$BUILD/consumer/onnx_api" --schema Conv | grep -q "^Conv since [0-9]* inputs X:T W:T B:T attributes 6$" ||
  die "onnx_api --schema Conv: $("$BUILD/consumer/onnx_api" --schema Conv)"
"$BUILD/consumer/onnx_light_api" "$BACKEND_DATA/light/light_resnet50.onnx"
"$BUILD/consumer/onnx_c_abi" samples/mlp.onnx "$BACKEND_DATA/light/light_resnet50.onnx" --bad-shapes "$BUILD/bad_shapes.onnx"
"$BUILD/consumer/onnx_large"
# ---- 3. the Rust binding (components/onnx/rust) and the tool's `check` with onnx's checker ----
export ONNX_LIGHT_ONNX_LIB_DIR="$PREFIX/lib"
# Lints of the three crates that link the component, in one run (one check of the library, whose
# features they share): the binding, the tool and the Python package with their `onnx` features.
cargo clippy -q --release -p onnx_light_onnx -p onnx-light-cli -p onnx_light_python --all-targets \
  --features onnx-light-cli/onnx,onnx_light_python/onnx -- -D warnings
# The tool with onnx's checker replaces the plain build: the later steps use it.
. scripts/lib/artifacts.sh
BIN=$(build_tool)
"$PY" - "$BIN" "$BUILD" "$BACKEND_DATA/light/light_resnet50.onnx" <<'PYEOF'
import subprocess, sys
import onnx
from onnx import helper, shape_inference
bin, work, good = sys.argv[1:4]
run = lambda *a: subprocess.run([bin, "check", *a], capture_output=True, text=True)
# A valid model: onnx's full check passes, and --infer-shapes writes what onnx's strict inference
# gives, byte for byte.
r = run(good, "--infer-shapes", f"{work}/inferred.onnx")
assert r.returncode == 0 and "checker (full check): valid" in r.stdout, r
expected = shape_inference.infer_shapes(onnx.load(good), strict_mode=True).SerializeToString()
assert open(f"{work}/inferred.onnx", "rb").read() == expected, "inferred model differs from onnx's"
# An invalid one: the exit status says so, with onnx's own message.
bad = f"{work}/bad_shapes.onnx"
try:
    onnx.checker.check_model(bad, full_check=True)
    raise SystemExit("onnx accepted the bad model")
except onnx.checker.ValidationError as e:
    message = str(e)
r = run(bad)
assert r.returncode != 0 and message.splitlines()[0] in r.stdout, (message, r)
r = run(bad, "--infer-shapes", f"{work}/never.onnx")
assert r.returncode != 0, r
# A model with external data, checked from another directory: onnx's checker sees it with its
# external data read in, as onnx checks a loaded model (not against the working directory).
import os
os.makedirs(f"{work}/external", exist_ok=True)
onnx.save(onnx.load(good), f"{work}/external/model.onnx", save_as_external_data=True,
          location="weights.bin", size_threshold=0)
r = subprocess.run([bin, "check", f"{work}/external/model.onnx"], capture_output=True, text=True, cwd="/")
assert r.returncode == 0 and "checker (full check): valid" in r.stdout, r
print("onnx-light check: onnx's verdicts and strict inference, as the onnx wheel; external data")
PYEOF

echo "15-onnx-component: ok: built and installed without protobuf; onnx's API over ${#MODELS[@]} backend models ($valid pass the full check), the C ABI test"
