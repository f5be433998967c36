//! Fuzz target `parse_tensor`: the body is `onnx_light::fuzzing::parse_tensor`, shared with the regression
//! replay (tests/integration/fuzz_regressions.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| onnx_light::fuzzing::parse_tensor(data));
