#!/usr/bin/env bash
# The fuzz targets as a test (run by scripts/test-all.sh), with debug assertions and overflow
# checks on (the release test run has neither):
# 1. the corpora (seeds and every past failure) replayed through the target bodies in a debug
#    build of tests/integration/fuzz_regressions.rs;
# 2. each cargo-fuzz target fuzzed for FUZZ_SECONDS (default 10) from its seeds (scripts/fuzz.sh:
#    a failing input fails the step and lands in fuzz/artifacts/). Installs the pinned
#    cargo-fuzz from crates.io when it is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
CARGO_FUZZ_VERSION=0.13.1
cargo test -q --test integration fuzz_regressions::
if [ "$(cargo fuzz --version 2>/dev/null | awk '{print $2}')" != "$CARGO_FUZZ_VERSION" ]; then
  cargo install --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi
bash scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
