#!/usr/bin/env bash
# The Python package (python/, run by scripts/test-all.sh; its crate is linted by
# 15-onnx-component.sh, formatted with the workspace): the abi3 wheel built with maturin,
# installed into the project venv (.venv), and its pytest suite (python/tests), which checks it
# against the onnx wheel and onnxruntime (onnx's checker, shape inference, version converter and
# schemas too: python/tests/test_onnx_cxx.py; its text parser and printer:
# python/tests/test_parser_printer.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PY="$ROOT/.venv/bin/python"
if [ ! -x "$PY" ]; then
  "${PYTHON:-python3}" -m venv .venv
fi
"$PY" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt

# The extension links onnx's C++ library (its `onnx` feature): the static library of the onnx
# component that 15-onnx-component.sh built and installed.
export ONNX_LIGHT_ONNX_LIB_DIR="$ROOT/build/onnx-component/prefix/lib"
[ -f "$ONNX_LIGHT_ONNX_LIB_DIR/libonnx_light_onnx.a" ] ||
  { echo "50-python: no onnx component in $ONNX_LIGHT_ONNX_LIB_DIR (scripts/test.d/15-onnx-component.sh)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
die() { echo "50-python: $*" >&2; exit 1; }
. scripts/lib/artifacts.sh
build_wheel "$work/dist"
"$PY" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$work"/dist/onnx_light-*-abi3-*.whl
# Run from outside the source tree, so that the installed wheel is what is imported.
cd "$work"
"$PY" -c 'import onnx_light, os; assert "site-packages" in onnx_light.__file__, onnx_light.__file__; assert onnx_light._native.HAS_ONNX_CXX'
"$PY" -m pytest -q -p no:cacheprovider "$ROOT/python/tests"

# The package's benchmark at a tiny scale, so that it cannot rot: every case must produce a row
# (times are not checked).
cd "$ROOT"
BENCH_SCALE=0.002 BENCH_RUNS=2 BENCH_PROCESSES=2 BENCH_OUT="$work/bench.md" bash scripts/bench-python.sh >/dev/null
for row in "| load | onnx_light |" "| load | onnx |" "| load no_copy | onnx_light |" "| load no_copy | onnx_light (alignment=1) |" "| load (lazy) | onnx_ir |" \
  "| save external | onnx |" "| save external | onnx_ir |" "| op_type + len(input) | onnx_light |" \
  "| op_type + len(input) | onnx |" "| load | onnx_light (memory reuse off) |" \
  "| load_from_string | onnx_light |" "| load_from_string | onnx |" "| SerializeToString | onnx_light |" \
  "| ParseFromString | onnx_light |" "| ParseFromString | onnx |" "| load (path) | onnx_light |" "| load (path) | onnx |" \
  "| check_model | onnx_light |" "| check_model | onnx |" "| infer_shapes | onnx_light |" "| infer_shapes | onnx |" \
  "| (a) 0.5 GB | ONNX Runtime alone |" "| (b) 3 GB external | onnx_light.onnxruntime |" \
  "| (e) aligned | onnx_light.onnxruntime |" "| (e) 0.5 GB, every weight used | ONNX Runtime alone |"; do
  grep -qF "$row" "$work/bench.md" || { echo "50-python: bench report lacks $row" >&2; cat "$work/bench.md" >&2; exit 1; }
done
grep -q "reading op_type and input of every node" "$work/bench.md"
grep -q "SerializeToString per call vs onnx" "$work/bench.md"
echo "50-python: ok"
