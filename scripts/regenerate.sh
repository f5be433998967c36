#!/usr/bin/env bash
# Rewrites every generated file: the code generator's outputs (src/proto/generated.rs,
# src/ffi/accessors.rs, src/ffi/cxx_messages.rs, the layout table codegen/cxx_layout.txt and the
# C++ header written from it, ...), then include/onnx_light.h with the pinned cbindgen (which
# reads src/ffi/); `cargo run -p codegen -- --check` fails when any of them is stale. Then
# tests/integration/generated_files.rs checks the headers against the code and the build's
# layout against the generator's.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run -q -p codegen
cargo test --release -q --test integration generated_files::
