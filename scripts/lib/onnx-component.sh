# The onnx component's CMake build (the project with ONNXL_WITH_ONNX=ON: onnx's C++ sources from
# its PyPI source distribution, compiled against onnx_light); sourced, not run. One build tree
# for 15-onnx-component.sh, which tests what it installs, and scripts/dist.sh, which packages it.
# The caller sets ROOT, JOBS and ONNX_SDIST (scripts/lib/onnx-sdist.sh).
ONNX_COMPONENT_TREE="$ROOT/build/onnx-component/tree"
ONNX_COMPONENT_PREFIX="$ROOT/build/onnx-component/prefix"

# Configures and builds the tree (nothing to do when it is up to date).
build_onnx_component() {
  cmake -S "$ROOT" -B "$ONNX_COMPONENT_TREE" -DCMAKE_BUILD_TYPE=Release -DONNXL_WITH_ONNX=ON \
    -DONNXL_ONNX_SDIST="$ONNX_SDIST" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
  cmake --build "$ONNX_COMPONENT_TREE" -j "$JOBS"
}
