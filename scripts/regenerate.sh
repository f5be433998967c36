#!/usr/bin/env bash
# Rewrites every generated file: the codegen outputs (src/proto/generated.rs,
# src/ffi/accessors.rs, src/ffi/cxx_messages.rs, ...), then the layout table of the C++ classes
# (codegen/cxx_layout.txt, measured on the library as built), then the codegen outputs again
# (include/onnx_light.hpp is generated from that table), then include/onnx_light.h with the pinned
# cbindgen (which reads src/ffi/). tests/generated_files.rs fails when any of them is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release -q -p codegen
ONNXL_REGENERATE=1 cargo test --release -q --test generated_files cxx_layout_table_is_up_to_date
cargo run --release -q -p codegen
ONNXL_REGENERATE=1 cargo test --release -q --test generated_files c_header_is_up_to_date
cargo test --release -q --test generated_files
