#!/usr/bin/env bash
# The benchmark (scripts/bench.sh) at a tiny scale, so that it keeps building and running: every
# case of every library must produce a cell and the target section must be printed. Times are
# NOT checked here (performance is measured by the full benchmark, not by timed tests). (The
# benchmark's crate is linted with the workspace.)
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The library's size in its full and minimal builds (the ones 45-size-budget.sh checks, which
# reuses them; the remote one's size is checked by 65-remote.sh).
if ! BENCH_SCALE=0.02 BENCH_RUNS=1 BENCH_WORK_DIR="$tmp" BENCH_OUT="$tmp/report.md" \
  BENCH_LIBRARY_VARIANTS="full minimal" \
  bash scripts/bench.sh >"$tmp/stdout" 2>"$tmp/stderr"; then
  tail -30 "$tmp/stderr"
  echo "40-bench-smoke: scripts/bench.sh failed" >&2
  exit 1
fi
fail() {
  echo "40-bench-smoke: $1" >&2
  grep -m5 -A3 FAILED "$tmp/stderr" >&2 || true
  exit 1
}
if grep -q FAILED "$tmp/stderr"; then fail "a case failed"; fi
if grep -q "| error" "$tmp/report.md"; then fail "a cell of the table is an error"; fi
for row in "baseline: \`fs::read\`" "onnx_light, 1 thread" "onnx_light, 2 threads" \
  "onnx (Python, protobuf upb)" "prost 0.14" "onnx-rs 0.1.3"; do
  grep -qF "| $row" "$tmp/report.md" || fail "row missing: $row"
done
for section in "Targets and ratios" "real: light_resnet50" "metadata-heavy" "Aligned placement" \
  "Library size" "Metadata targets against upb" "(e) " "(f) "; do
  grep -qF "$section" "$tmp/report.md" || fail "section missing: $section"
done
# The aligned-placement rows have times in both columns, and no-copy loads report what they
# copied for alignment.
grep -qE "^\| 1 thread, cold, wall \| [0-9.]+ (ms|µs|s) \| [0-9.]+ (ms|µs|s) \|" "$tmp/report.md" ||
  fail "aligned placement: no times for alignment 64 and 1"
grep -qE "tensors copied for alignment\)" "$tmp/report.md" || fail "no count of tensors copied for alignment"
grep -qE "· [0-9]+ realigned \|" "$tmp/report.md" || fail "no-copy cells lack the realigned count"
grep -qE "^\| 1 thread \| [^|]+ \| [0-9.]+ (ms|µs|s) · [0-9.]+ (ms|µs|s) · [0-9]+ MiB · 0 \|" "$tmp/report.md" ||
  fail "aligned save: no row of a no-copy load that copied nothing"
# Both libraries with malloc keeping freed memory: a parse and a serialize time for each model.
grep -qF "The same with glibc's malloc keeping freed memory" "$tmp/report.md" ||
  fail "section missing: freed memory kept"
grep -qE "^\| \(e\) .*\| [0-9.]+ (ms|µs|s) \([0-9.]+ (ms|µs|s) CPU\) · [0-9.]+ (ms|µs|s) \([0-9.]+ (ms|µs|s) CPU\) · [0-9.]+×" "$tmp/report.md" ||
  fail "freed memory kept: no times for model (e)"
for row in "onnx_light, full" "onnx_light, minimal" "Debian libprotobuf.so" "Debian libprotobuf-lite.so"; do
  grep -qE "^\| $row.* \| [0-9]+ \| [0-9.]+ MB \|" "$tmp/report.md" || fail "size row missing: $row"
done
echo "40-bench-smoke: ok ($(grep -c '^| ' "$tmp/report.md") table rows)"
