//! Fuzz target `decrypt`: the body is `onnx_light::fuzzing::decrypt`, shared with the regression
//! replay (tests/integration/fuzz_regressions.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| onnx_light::fuzzing::decrypt(data));
