#!/usr/bin/env bash
# Remote models (run by scripts/test-all.sh, after 50-python.sh has installed the wheel into the
# venv): tests/remote/test_remote.py against real servers it starts — moto's S3 server (PyPI,
# pinned in scripts/requirements-test.txt), Azurite (Microsoft's Azure Storage emulator, pinned,
# from the npm registry), nginx from Debian over HTTP and HTTPS (a test CA made by the test), and
# a fault-injecting proxy — through the Python package, the CLI
# (target/tool/release/onnx-light) and the C ABI (target/tool/release/libonnx_light.so, whose
# size budget, RELRO and optional parts are checked here too).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
die() { echo "65-remote: $*" >&2; exit 1; }
. scripts/lib/apt.sh
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || die "$PY is missing (scripts/test-all.sh creates the venv)"
"$PY" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  [ "$(id -u)" = 0 ] || die "nginx is missing and installing it needs root (apt-get install nginx-light)"
  apt_install nginx-light
fi

# Azurite into target/azurite (Node.js and npm from Debian when the machine has none).
AZURITE_VERSION=3.35.0
AZURITE="$ROOT/target/azurite"
if [ ! -x "$AZURITE/node_modules/.bin/azurite-blob" ] \
  || [ "$("$AZURITE/node_modules/.bin/azurite-blob" --version)" != "$AZURITE_VERSION" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || die "npm is missing and installing it needs root (apt-get install nodejs npm)"
    apt_install nodejs npm
  fi
  mkdir -p "$AZURITE"
  (cd "$AZURITE" && npm install --silent --no-audit --no-fund --no-save "azurite@$AZURITE_VERSION")
fi
export ONNXL_AZURITE_BIN="$AZURITE/node_modules/.bin/azurite-blob"

# The CLI (remote is on in the tool) and the C library with the opt-in remote feature (the other
# C-level steps build it without: `-p onnx_light` keeps the tool's features out of it).
# (In the tool's target directory: scripts/lib/tool-target.sh. The tool is the one the test
# command built, with onnx's checker, when there is one.)
. scripts/lib/tool-target.sh
export ONNX_LIGHT_BIN="$TOOL_TARGET_DIR/release/onnx-light"
[ -x "$ONNX_LIGHT_BIN" ] || CARGO_TARGET_DIR="$TOOL_TARGET_DIR" cargo build --release -q -p onnx-light-cli
CARGO_TARGET_DIR="$TOOL_TARGET_DIR" cargo build --release -q -p onnx_light --lib --features remote
export ONNX_LIGHT_CLIB="$TOOL_TARGET_DIR/release/libonnx_light.so"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# That library's size: the client stack (`object_store`, `reqwest`, `hyper`, `h2`, `rustls`,
# `tokio`, `url`) more than triples it, so it has a budget of its own, set on this build (the
# release profile; the shipping `dist` profile's LTO makes it ~15% smaller: scripts/bench.sh
# reports that one): 10 165 944 bytes measured when it was set, plus ~2.5%. Full RELRO, as the
# other builds (45-size-budget.sh); its optional parts as a C program sees them.
REMOTE_BUDGET=10420000
# shellcheck source=scripts/lib/library-sizes.sh
source scripts/lib/library-sizes.sh
size=$(stripped_size "$ONNX_LIGHT_CLIB")
echo "stripped libonnx_light.so with remote (release profile): $size bytes (budget $REMOTE_BUDGET)"
[ "$size" -le "$REMOTE_BUDGET" ] || die "the library with remote grew to $size bytes (budget $REMOTE_BUDGET)"
# (Outputs captured first: `grep -q` in a pipe would end the writer early under pipefail.)
dynamic=$(readelf -dW "$ONNX_LIGHT_CLIB")
segments=$(readelf -lW "$ONNX_LIGHT_CLIB")
grep -q BIND_NOW <<<"$dynamic" || die "the library with remote is not linked with -z now"
grep -q GNU_RELRO <<<"$segments" || die "the library with remote has no RELRO segment"
# (The program asks the loader for the library's SONAME: a link of that name beside it.)
ln -s "$ONNX_LIGHT_CLIB" "$work/$(sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p' <<<"$dynamic")"
"${CC:-cc}" -std=c11 -Wall -Wextra -Werror -Iinclude -Ic_tests c_tests/test_optional_features.c \
  -o "$work/test_optional_features" -L"$TOOL_TARGET_DIR/release" -lonnx_light -Wl,-rpath,"$work"
"$work/test_optional_features" remote "$ROOT/samples/mlp.onnx"

cd "$work"
"$PY" -c 'import onnx_light, os; assert "site-packages" in onnx_light.__file__, onnx_light.__file__'
"$PY" -m pytest -q -p no:cacheprovider "$ROOT/tests/remote"
echo "65-remote: ok"
