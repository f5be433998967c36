# Shared by the steps and scripts that build with the library's `remote` feature; sourced, not
# run. The caller sets ROOT (the repository root).
#
# The onnx-light tool, the Python package and the C library with `remote` build in a target
# directory of their own, target/tool: the library is also a cdylib, whose file name does not
# depend on its features, so cargo keeps one build of it per target directory and recompiles it
# at every switch between the C library's default features (target/) and the tool's (measured:
# seven such recompiles of about 50 s each in one run of the test command). The tool is
# $TOOL_TARGET_DIR/release/onnx-light.
TOOL_TARGET_DIR="$ROOT/target/tool"
