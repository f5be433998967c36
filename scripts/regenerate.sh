#!/usr/bin/env bash
# Rewrites every generated file: the code generator's outputs (src/proto/generated.rs,
# src/ffi/accessors.rs, src/ffi/cxx_messages.rs, the layout table codegen/cxx_layout.txt and the
# C++ header written from it, ...), then include/onnx_light.h with the pinned cbindgen (which
# reads src/ffi/). tests/integration/generated_files.rs fails when any of them is stale, or when the
# build's layout differs from the generator's.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release -q -p codegen
ONNXL_REGENERATE=1 cargo test --release -q --test integration generated_files::c_header_is_up_to_date
cargo test --release -q --test integration generated_files::
