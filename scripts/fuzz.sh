#!/usr/bin/env bash
# Builds the cargo-fuzz targets (fuzz/) and runs each for N seconds on one core, as many at once
# as there are cores (FUZZ_JOBS to choose). The test command runs it for 10 s per target
# (scripts/test.d/18-fuzz.sh); longer runs are for finding new bugs.
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET=60] [TARGET...]
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). Works on a stable toolchain: the targets are
# built without a sanitizer (`-s none`; Rust's own checks catch memory errors in safe code, and
# debug assertions + overflow checks are on). With a nightly toolchain (or RUSTC_BOOTSTRAP=1)
# set FUZZ_SANITIZER=address for ASan.
#
# Each target starts from its seeds (fuzz/corpus/<t>/) and its regressions
# (fuzz/regressions/<t>/) and grows a local corpus in fuzz/corpus-run/<t>/ (not checked in).
# A failing input lands in fuzz/artifacts/<t>/: copy it to fuzz/regressions/<t>/ (it then
# replays in `cargo test`) and fix the bug. Stats of each run: fuzz/logs/<t>.log (last lines).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(parse_model parse_tensor external_data decrypt params prepacked)
fi
SAN=${FUZZ_SANITIZER:-none}
command -v cargo-fuzz >/dev/null 2>&1 || { echo "fuzz.sh: install cargo-fuzz first (cargo install cargo-fuzz)" >&2; exit 1; }

cd fuzz
cargo fuzz build -s "$SAN" -O --debug-assertions
mkdir -p logs
# fuzz_target T: runs target T; its log is logs/T.log, its exit status logs/T.status.
fuzz_target() {
  local t=$1 rc
  mkdir -p "corpus-run/$t" "artifacts/$t" "regressions/$t"
  set +e
  cargo fuzz run -s "$SAN" -O --debug-assertions "$t" "corpus-run/$t" "corpus/$t" "regressions/$t" -- \
    -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="artifacts/$t/" >"logs/$t.log" 2>&1
  rc=$?
  set -e
  echo "$rc" >"logs/$t.status"
}
JOBS=${FUZZ_JOBS:-$(nproc)}
pids=()
for t in "${TARGETS[@]}"; do
  fuzz_target "$t" &
  pids+=($!)
  if [ "${#pids[@]}" -ge "$JOBS" ]; then
    wait "${pids[0]}"
    pids=("${pids[@]:1}")
  fi
done
wait
status=0
for t in "${TARGETS[@]}"; do
  rc=$(cat "logs/$t.status")
  echo "=== $t: ${SECS}s"
  grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb" "logs/$t.log" || true
  echo "corpus-run/$t: $(ls "corpus-run/$t" | wc -l) inputs; exit $rc"
  if [ "$rc" -ne 0 ]; then
    status=1
    echo "FAILED: see fuzz/logs/$t.log and fuzz/artifacts/$t/"
    grep -m1 -A20 -E "panicked|ERROR" "logs/$t.log" || true
  fi
done
exit $status
