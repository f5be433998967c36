#!/usr/bin/env bash
# The side-by-side benchmark (not a test): onnx_light (1 and all threads) against the onnx
# Python package (protobuf upb), prost, onnx-rs and the plain read/write baselines, on synthetic
# models it generates ((a) ~0.5 GB transformer inline, (b) ~3 GB transformer with external data,
# (c) 200k-node metadata-heavy model) and the largest real models of the onnx wheel's test data
# ((d)). Prints one markdown table plus the ratios of the issue's performance targets, and the
# stripped sizes of the shipping C library (full and minimal build) beside Debian's libprotobuf;
# see docs/benchmarks.md for what each column measures.
#
# usage: scripts/bench.sh [extra onnx-bench run options, e.g. --only a,c]
# environment:
#   BENCH_RUNS=3       runs per case (best time kept; each run is a fresh process)
#   BENCH_SCALE=1      < 1 shrinks the synthetic models (quick check of the script)
#   BENCH_WORK_DIR     where the models are generated (default: $TMPDIR or /tmp); needs ~7 GB
#   BENCH_OUT          where the report is also written (default: target/bench-results.md)
#   BENCH_LIBRARY_VARIANTS  the library builds whose sizes are reported (default: full remote
#                      minimal; scripts/lib/library-sizes.sh)
#
# bench/ is a member of the workspace (not a default one): it reuses the release build of the
# library. A full run takes ~10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# ---- Python venv of the project (the onnx package is a peer of the benchmark)
if [ ! -x .venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .venv
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt
fi
PY="$ROOT/.venv/bin/python"
# onnx-ir (the lazy loader row of model (b)) is installed for the bench only, not a test requirement.
if ! "$PY" -c 'import onnx_ir' 2>/dev/null; then
  "$PY" -m pip install --quiet --disable-pip-version-check onnx-ir==1.1.0 ||
    echo "bench.sh: onnx-ir could not be installed: its row is skipped" >&2
fi
TESTDATA=$("$PY" -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data"))')

# ---- build (release)
cargo build --release --quiet -p onnx_light_bench
BIN="$ROOT/target/release/onnx-bench"

# ---- work dir, removed on exit whatever happens
BASE=${BENCH_WORK_DIR:-${TMPDIR:-/tmp}}
mkdir -p "$BASE"
avail_kb=$(df -Pk "$BASE" | awk 'NR == 2 { print $4 }')
need_kb=$((7 * 1024 * 1024))
if [ "${BENCH_SCALE:-1}" = "1" ] && [ "$avail_kb" -lt "$need_kb" ]; then
  echo "bench.sh: $BASE has $((avail_kb / 1024)) MiB free; the full run needs ~7 GiB (set BENCH_WORK_DIR)" >&2
  exit 1
fi
WORK=$(mktemp -d "$BASE/onnx-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

OUT=${BENCH_OUT:-$ROOT/target/bench-results.md}
"$BIN" run --work "$WORK" --python "$PY" --pyscript "$ROOT/bench/py/onnx_case.py" \
  --testdata "$TESTDATA" --runs "${BENCH_RUNS:-3}" --scale "${BENCH_SCALE:-1}" --out "$OUT" "$@"

# ---- library size: the shipping build (cargo profile `dist`), full and minimal, stripped, beside
# Debian's libprotobuf.so / libprotobuf-lite.so (libprotobuf-dev installed when missing).
die() { echo "bench.sh: $*" >&2; exit 1; }
# shellcheck source=scripts/lib/library-sizes.sh
source scripts/lib/library-sizes.sh
# shellcheck disable=SC2086
build_library_variants "$WORK/lib" ${BENCH_LIBRARY_VARIANTS:-full remote minimal} >&2
size_row() { # label, file, target
  local bytes
  bytes=$(stripped_size "$2")
  awk -v l="$1" -v b="$bytes" -v t="$3" 'BEGIN {
    printf "| %s | %d | %.2f MB | %s |\n", l, b, b / 1e6, t }'
}
{
  echo
  echo "### Library size"
  echo
  echo "Stripped shared libraries (\`strip\`; x86-64 Linux); onnx_light in its shipping profiles: \`dist\` (LTO, 1 codegen unit), the minimal one \`dist-min\` (\`dist\` optimized for size)."
  echo
  echo "| library | bytes | size | target |"
  echo "|---|---|---|---|"
  size_row "onnx_light, full (default features)" "$WORK/lib/full/libonnx_light.so" "≤ 2.6 MB"
  if [ -f "$WORK/lib/remote/libonnx_light.so" ]; then
    size_row "onnx_light with the opt-in \`remote\` feature" "$WORK/lib/remote/libonnx_light.so" "≤ 8.3 MB"
  fi
  size_row "onnx_light, minimal (\`--no-default-features\`: codec, external data, C ABI)" "$WORK/lib/minimal/libonnx_light.so" "≤ 1.5 MB"
  for name in libprotobuf libprotobuf-lite; do
    lib=$(debian_protobuf_library "$name")
    if [ -n "$lib" ]; then
      size_row "Debian $name.so ($(basename "$lib"))" "$lib" "—"
    else
      echo "| Debian $name.so | not installed | — | — |"
    fi
  done
} | tee -a "$OUT"
echo "report also written to $OUT" >&2
