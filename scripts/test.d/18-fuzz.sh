#!/usr/bin/env bash
# The fuzz targets as a test (run by scripts/test-all.sh, in the background), with debug
# assertions and overflow checks on (the release test run has neither): each cargo-fuzz target
# first replays its seeds (fuzz/corpus/<t>/) and every past failure (fuzz/regressions/<t>/),
# then fuzzes for FUZZ_SECONDS (default 10; scripts/fuzz.sh: a failing input fails the step
# and lands in fuzz/artifacts/). The release `cargo test` replays the same inputs
# (fuzz_regressions), so a debug build of the test binary would only repeat them. Installs the
# pinned cargo-fuzz from crates.io when it is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
CARGO_FUZZ_VERSION=0.13.1
if [ "$(cargo fuzz --version 2>/dev/null | awk '{print $2}')" != "$CARGO_FUZZ_VERSION" ]; then
  cargo install --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi
bash scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
