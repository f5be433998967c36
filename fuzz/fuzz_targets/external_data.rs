//! Fuzz target `external_data`: the body is `onnx_light::fuzzing::external_data`, shared with the regression
//! replay (tests/integration/fuzz_regressions.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| onnx_light::fuzzing::external_data(data));
