#!/usr/bin/env bash
# Before/after benchmark of onnx_light against an earlier revision of itself, in one run: the
# benchmark (bench/) is built from BASE_REV (in a scratch worktree outside the repository) and from
# the working tree, and each case runs alternately in fresh processes of the two, so that both see
# the same machine state. Cases: parse and serialize in memory, copy and no-copy loads, 1 thread,
# on the metadata-heavy model (c), the value_info-heavy model (e) and a 0.5 GB transformer (a)
# scaled by BENCH_SCALE. Prints one markdown table: per case the best warm time and the median
# first (cold, in-process) time of each side, and after/before.
#
# usage: scripts/bench-ab.sh BASE_REV
# environment:
#   BENCH_ROUNDS=5     alternating rounds per case (each round: one process of each side)
#   BENCH_ITERS=5      iterations per process (the first is the "first" column)
#   BENCH_SCALE=0.25   scale of the transformer (1 = 0.5 GB)
#   BENCH_WORK_DIR     scratch directory (default: $TMPDIR or /tmp)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BASE_REV=${1:?usage: scripts/bench-ab.sh BASE_REV}
ROUNDS=${BENCH_ROUNDS:-5}
ITERS=${BENCH_ITERS:-5}
SCALE=${BENCH_SCALE:-0.25}

WORK=$(mktemp -d "${BENCH_WORK_DIR:-${TMPDIR:-/tmp}}/onnxl-ab.XXXXXX")
cleanup() {
  git -C "$ROOT" worktree remove --force "$WORK/base" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

base_sha=$(git rev-parse --verify "$BASE_REV^{commit}")
git worktree add --quiet --detach "$WORK/base" "$base_sha"
# The base tree's benchmark builds in a target dir of its own, BENCH_BASE_TARGET (default: in the
# scratch directory; name one to reuse an earlier run's build of the same revision), whether that
# revision's bench/ is a workspace member or a project of its own; this tree's in target/.
BASE_TARGET=${BENCH_BASE_TARGET:-$WORK/base-target}
CARGO_TARGET_DIR="$BASE_TARGET" cargo build --release --quiet --manifest-path "$WORK/base/bench/Cargo.toml"
cargo build --release --quiet -p onnx_light_bench
BEFORE="$BASE_TARGET/release/onnx-bench"
AFTER="$ROOT/target/release/onnx-bench"

"$AFTER" gen metadata "$WORK/c.onnx" 2>/dev/null
"$AFTER" gen value-info "$WORK/e.onnx" 2>/dev/null
"$AFTER" gen transformer "$WORK/a.onnx" --scale "$SCALE" 2>/dev/null

# One case in one process: "<warm ns> <first ns>"; a case without its result line stops the run.
one() {
  local bin=$1 op=$2 model=$3 out
  out=$("$bin" case onnx_light "$op" "$model" --out "$WORK/out.onnx" --threads 1 --iters "$ITERS" |
    sed -n 's/^RESULT time_ns=\([0-9]*\) first_ns=\([0-9]*\).*/\1 \2/p') || true
  [ -n "$out" ] || { echo "bench-ab: $bin gave no result for $op on $model" >&2; exit 1; }
  echo "$out"
}

ms() { awk -v ns="$1" 'BEGIN { printf "%.3f", ns / 1e6 }'; }
best() { sort -n | head -1; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "| model | case | before warm ms | after warm ms | after/before | before first ms | after first ms | after/before |"
echo "|---|---|---|---|---|---|---|---|"
for model in c e a; do
  for op in parse_mem serialize_mem load_copy load_nocopy; do
    : >"$WORK/before" && : >"$WORK/after"
    for _ in $(seq "$ROUNDS"); do
      one "$BEFORE" "$op" "$WORK/$model.onnx" >>"$WORK/before"
      one "$AFTER" "$op" "$WORK/$model.onnx" >>"$WORK/after"
    done
    bw=$(cut -d' ' -f1 "$WORK/before" | best)
    aw=$(cut -d' ' -f1 "$WORK/after" | best)
    bf=$(cut -d' ' -f2 "$WORK/before" | median)
    af=$(cut -d' ' -f2 "$WORK/after" | median)
    printf '| (%s) | %s | %s | %s | %.3f | %s | %s | %.3f |\n' "$model" "$op" \
      "$(ms "$bw")" "$(ms "$aw")" "$(awk -v a="$aw" -v b="$bw" 'BEGIN { print a / b }')" \
      "$(ms "$bf")" "$(ms "$af")" "$(awk -v a="$af" -v b="$bf" 'BEGIN { print a / b }')"
  done
done
echo
echo "before: $base_sha; after: $(git rev-parse --short HEAD) + working tree; $ROUNDS alternating rounds of" \
  "$ITERS iterations, 1 thread; $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC')"
