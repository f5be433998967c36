#!/usr/bin/env bash
# The benchmark of the Python package (not a test): onnx_light against onnx and onnx-ir in one
# Python process (python/bench/bench.py), on the models of scripts/bench.sh's generators
# (bench/'s `onnx-bench gen`): (a) ~0.5 GB inline, (b) ~3 GB with external data, (c) 200 000
# nodes. Prints a markdown table and the ratios of the package's targets (docs/benchmarks.md),
# and onnx's checker and shape inference through onnx_light against the onnx package; then
# ONNX Runtime sessions, ORT alone against onnx_light.onnxruntime (python/bench/ort_sessions.py:
# creation time, memory, PSS of several processes).
#
# environment:
#   BENCH_RUNS=3      runs per case (the first is reported as "cold", the best of the rest "warm")
#   BENCH_SCALE=1     < 1 shrinks the models (quick check of the script)
#   BENCH_ONLY=a,b,c,d  the models to run
#   BENCH_PROCESSES=4 processes sharing one model for the PSS column
#   BENCH_WORK_DIR    where the models are generated (default: $TMPDIR or /tmp); needs ~4 GB
#   BENCH_OUT         where the report is also written (default: target/bench-python.md)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY="$ROOT/.venv/bin/python"
if [ ! -x "$PY" ]; then
  "${PYTHON:-python3}" -m venv .venv
fi
"$PY" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt onnx-ir==1.1.0

BASE=${BENCH_WORK_DIR:-${TMPDIR:-/tmp}}
mkdir -p "$BASE"
WORK=$(mktemp -d "$BASE/onnx-bench-py.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# The package, as users get it: the release wheel, with onnx's C++ library (the onnx component's
# static library; scripts/test.d/15-onnx-component.sh builds it into build/onnx-component).
export ONNX_LIGHT_ONNX_LIB_DIR=${ONNX_LIGHT_ONNX_LIB_DIR:-$ROOT/build/onnx-component/prefix/lib}
die() { echo "bench-python: $*" >&2; exit 1; }
. scripts/lib/artifacts.sh
build_wheel "$WORK/dist"
"$PY" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$WORK"/dist/onnx_light-*-abi3-*.whl

cargo build --release --quiet -p onnx_light_bench
# (The tool the test command built, when there is one: scripts/lib/tool-target.sh.)
[ -x "$TOOL_TARGET_DIR/release/onnx-light" ] ||
  CARGO_TARGET_DIR="$TOOL_TARGET_DIR" cargo build --release --quiet -p onnx-light-cli
BIN="$ROOT/target/release/onnx-bench"
SCALE=${BENCH_SCALE:-1}
"$BIN" gen transformer "$WORK/a.onnx" --scale "$SCALE"
"$BIN" gen external "$WORK/b.onnx" --scale "$SCALE"
"$BIN" gen metadata "$WORK/c.onnx" --scale "$SCALE"

OUT=${BENCH_OUT:-$ROOT/target/bench-python.md}
mkdir -p "$(dirname "$OUT")"
cd "$WORK"
"$PY" "$ROOT/python/bench/bench.py" --models "$WORK" --runs "${BENCH_RUNS:-3}" --only "${BENCH_ONLY:-a,b,c,d}" --out "$OUT"

# ONNX Runtime sessions (fresh processes): ORT alone against onnx_light's, on (a), (b), a model
# whose every weight is used at run time (e), and (a) and (e) saved aligned (`--align 4096`).
BYTES=$("$PY" -c "import sys; print(int(512 * 2**20 * float(sys.argv[1])))" "$SCALE")
"$PY" "$ROOT/python/bench/ort_sessions.py" --gen-adds "$WORK/e.onnx" --bytes "$BYTES"
"$TOOL_TARGET_DIR/release/onnx-light" convert --inline --align 4096 "$WORK/a.onnx" "$WORK/a_aligned.onnx" >/dev/null 2>&1
"$TOOL_TARGET_DIR/release/onnx-light" convert --inline --align 4096 "$WORK/e.onnx" "$WORK/e_aligned.onnx" >/dev/null 2>&1
"$PY" "$ROOT/python/bench/ort_sessions.py" --runs "${BENCH_RUNS:-3}" --processes "${BENCH_PROCESSES:-4}" --out "$OUT" \
  --model "(a) 0.5 GB=$WORK/a.onnx" --model "(a) aligned=$WORK/a_aligned.onnx" \
  --model "(b) 3 GB external=$WORK/b.onnx" --model "(e) 0.5 GB, every weight used=$WORK/e.onnx" \
  --model "(e) aligned=$WORK/e_aligned.onnx"
echo "report also written to $OUT" >&2
