#!/usr/bin/env bash
# Runs EVERY test of onnx_light: formatting and lints, Rust unit/integration tests, generated
# files up to date, compatibility with the official onnx package (pytest), the C ABI through
# CMake/CTest, and the installed-package consumer. Installs what it needs itself: a project-local
# Python venv (.venv) with pinned packages from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# Archive and wheel times (scripts/dist.sh, reproducible artifacts) are the last commit's. Set
# for every step: C compilers' build scripts (the `cc` crate: ring, mimalloc, ...) rebuild when
# it changes, so all of the command's cargo builds see the same value as dist.sh's.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 315532800)}
export SOURCE_DATE_EPOCH

# Each step's header also says how long the previous one took and the time so far (CI has a limit).
last=$SECONDS
step() {
  printf '\n=== %s === (previous step %d s, %d s so far)\n' "$*" $((SECONDS - last)) "$SECONDS"
  last=$SECONDS
}

# ---- Python venv with pinned tools (cmake, onnx, onnxruntime, numpy, pytest), installed while
# the Rust lints run (a download, mostly waiting on the network); the tests wait for it.
step "python venv (installing in the background)"
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
mkdir -p target
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt \
  >target/venv-install.log 2>&1 &
venv_pid=$!
export PATH="$ROOT/.venv/bin:$PATH"

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
# The Python package and the onnx component's Rust binding are linted by
# scripts/test.d/15-onnx-component.sh: both link the onnx component, which that step builds (the
# binding's build script needs it even for a lint), and an extension module has no Rust tests.
EXCLUDE=(--exclude onnx_light_python --exclude onnx_light_onnx)
cargo clippy --workspace "${EXCLUDE[@]}" --all-targets --release -- -D warnings

step "rustdoc -D warnings (no broken intra-doc links)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -q -p onnx_light

step "generated files are up to date"
# The code generator's outputs and the C header (cbindgen), and the generator's own tests (left
# out of `cargo test` below: cbindgen's dependencies there would change the features of the
# ones the tool shares). In the debug profile: nothing else builds cbindgen's dependencies, and
# unoptimised they compile in a third of the time (measured: 27 s against 75 s).
cargo run -q -p codegen -- --check
cargo test -q -p codegen --lib

step "python venv ready"
wait "$venv_pid" || { cat target/venv-install.log >&2; echo "installing the Python packages failed" >&2; exit 1; }

step "cargo test"
# tests/integration/alignment.rs also runs over every model of the onnx wheel's backend test data.
ONNXL_BACKEND_DATA=$(.venv/bin/python -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data"))')
export ONNXL_BACKEND_DATA
# Everything, the slow tests included (models over 2 GB, exhaustive tamper and key checks: marked
# #[ignore], so that a plain `cargo test` takes a couple of minutes); child_process_* tests are
# steps that other tests start, not tests on their own.
# (The benchmark has no tests: 40-bench-smoke.sh runs it; the code generator's ran above.)
cargo test --workspace "${EXCLUDE[@]}" --exclude onnx_light_bench --exclude codegen --release -- \
  --include-ignored --skip child_process_

step "release binary"
# The tool (its remote feature on; in target/tool: scripts/lib/tool-target.sh) and the C library
# as users build it (`-p onnx_light`: at the top level cargo would unify the tool's features into
# the library).
. scripts/lib/tool-target.sh
CARGO_TARGET_DIR="$TOOL_TARGET_DIR" cargo build --release -p onnx-light-cli
cargo build --release -p onnx_light --lib
export ONNX_LIGHT_BIN="$TOOL_TARGET_DIR/release/onnx-light"

step "compatibility with the onnx package (pytest)"
.venv/bin/python -m pytest -q tests/compat

# The steps of scripts/test.d in the order of their names. The ones named in BACKGROUND start at
# their turn and run beside the later ones at the lowest priority (nice 19): they take the cores
# only when the steps in front leave them idle (single-threaded tests, links, downloads, servers
# starting); their output is printed once they end, after the last step. 16-onnx-cxx.sh compiles
# onnx twice and reads only what 15-onnx-component.sh installed and the venv; 17-target-checks.sh
# and 18-fuzz.sh build in target directories of their own (the fuzz targets run for a fixed time,
# fewer inputs then); 56-dist.sh packages what 15 and 50-python built (scripts/dist.sh) and tries
# the artifacts out, mostly waiting on pip, CMake and emulators. (Their Debian packages and Rust
# targets are installed one step at a time: scripts/lib/apt.sh.)
BACKGROUND=(scripts/test.d/16-onnx-cxx.sh scripts/test.d/17-target-checks.sh scripts/test.d/18-fuzz.sh
            scripts/test.d/56-dist.sh)
mkdir -p target/step-logs
declare -A background=()
# (A failing step ends the command: the background ones end with it.)
trap 'for p in "${background[@]}"; do kill -- -"$p" 2>/dev/null || true; done' EXIT
for extra in scripts/test.d/*.sh; do
  [ -e "$extra" ] || continue
  if [[ " ${BACKGROUND[*]} " == *" $extra "* ]]; then
    step "$extra (starts in the background; its output comes at the end)"
    log="target/step-logs/$(basename "$extra" .sh).log"
    # Its own session (and process group, killed as one); with the kernel's autogroups each
    # session shares the cores as an equal, whatever its processes' nice values, so the session's
    # group is given nice 19 too (measured: two busy loops at nice 19 in a session of their own
    # took half the cores from two in the foreground; with the group at 19, a sixteenth).
    setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null || true; nice -n 19 bash "$0"; rc=$?
      echo "($0 ran $SECONDS s in the background)"; exit $rc' "$extra" >"$log" 2>&1 &
    background[$extra]=$!
    continue
  fi
  step "$extra"
  bash "$extra"
done
for extra in "${!background[@]}"; do
  step "$extra (in the background: waiting for it to end)"
  status=0
  wait "${background[$extra]}" || status=$?
  unset "background[$extra]"
  cat "target/step-logs/$(basename "$extra" .sh).log"
  [ "$status" -eq 0 ] || { echo "$extra failed (status $status)" >&2; exit 1; }
done

step "all tests passed"
