# The builds of what ships (the Python wheel, the onnx-light tool), shared by the test steps and
# scripts/dist.sh so that what the tests run is what ships; sourced, not run. The caller sets
# ROOT and PY (a Python with maturin) and defines die().
#
# Builds for this machine use the tool's target directory (scripts/lib/tool-target.sh: the wheel
# and the tool share the library's features); cross-compiled ones (TRIPLE: a Rust target)
# target/tool-cross.
. "$ROOT/scripts/lib/tool-target.sh"
. "$ROOT/scripts/lib/onnx-sdist.sh"
TOOL_CROSS_TARGET_DIR="$ROOT/target/tool-cross"

# cross_linker TRIPLE: exports cargo's linker for TRIPLE, the full path of Debian's cross compiler
# (as CMake passes it with the toolchain files of cmake/toolchains: one setting, one build).
cross_linker() {
  local cc path
  case $1 in
    aarch64-unknown-linux-gnu) cc=aarch64-linux-gnu-gcc ;;
    x86_64-pc-windows-gnu) cc=x86_64-w64-mingw32-gcc ;;
    *) die "no cross compiler known for $1" ;;
  esac
  path=$(command -v "$cc") || die "$cc is missing (Debian's cross compiler for $1)"
  export "CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$1")_LINKER=$path"
}

# target_dir [TRIPLE]: the target directory of the builds for TRIPLE (this machine when empty).
target_dir() { if [ -n "${1:-}" ]; then echo "$TOOL_CROSS_TARGET_DIR"; else echo "$TOOL_TARGET_DIR"; fi; }

# build_tool [TRIPLE]: the onnx-light tool, with onnx's checker for this machine (the onnx
# component's static library in ONNX_LIGHT_ONNX_LIB_DIR), without it cross-compiled; prints its path.
build_tool() {
  local triple=${1:-} dir
  dir=$(target_dir "$triple")
  if [ -z "$triple" ]; then
    CARGO_TARGET_DIR="$dir" cargo build --release -q -p onnx-light-cli --features onnx >&2
    echo "$dir/release/onnx-light"
  else
    cross_linker "$triple"
    CARGO_TARGET_DIR="$dir" cargo build --release -q -p onnx-light-cli --target "$triple" >&2
    echo "$dir/$triple/release/onnx-light$([[ $triple == *windows* ]] && echo .exe)"
  fi
}

# package_licences LICENCE-ARGS...: writes python/onnx_light/LICENSE (the project's) and
# THIRD_PARTY_LICENSES.txt (scripts/lib/third_party_licenses.py for the extension's crates with
# LICENCE-ARGS), which the wheel and the sdist carry (pyproject.toml, license-files).
package_licences() {
  cp "$ROOT/LICENSE" "$ROOT/python/onnx_light/LICENSE"
  (cd "$ROOT" && "$PY" scripts/lib/third_party_licenses.py python/onnx_light/THIRD_PARTY_LICENSES.txt \
    --package onnx_light_python "$@") >/dev/null
}

# build_wheel OUT [TRIPLE]: the abi3 wheel into the directory OUT. For this machine with onnx's
# C++ library (the `onnx` feature), cross-compiled without it; with the licences of every crate
# linked into the extension for that target (and onnx's, with the component).
build_wheel() {
  local out=$1 triple=${2:-} build=()
  if [ -z "$triple" ]; then
    [ -f "${ONNX_LIGHT_ONNX_LIB_DIR:-}/libonnx_light_onnx.a" ] ||
      die "no onnx component in ONNX_LIGHT_ONNX_LIB_DIR=${ONNX_LIGHT_ONNX_LIB_DIR:-} (scripts/test.d/15-onnx-component.sh)"
    extract_onnx_license
    build=(--features onnx)
    package_licences --features onnx \
      --extra "onnx $ONNX_VERSION (onnx's C++ library: checker, shape inference, version converter, schemas)=$ONNX_LICENSE"
  else
    cross_linker "$triple"
    build=(--target "$triple")
    package_licences --target "$triple"
  fi
  CARGO_TARGET_DIR=$(target_dir "$triple") \
    "$PY" -m maturin build --release --strip --quiet -m "$ROOT/python/Cargo.toml" "${build[@]}" --out "$out"
}
