//! Generates prost's structs for onnx.proto (a copy of the file shipped in the onnx 1.23.2 wheel)
//! with prost-build, using protox instead of protoc. `bytes` fields become `bytes::Bytes`, so
//! decoding from a `Bytes` (e.g. a memory map) borrows tensor payloads instead of copying them.
fn main() {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    let fds = protox::compile(["onnx.proto"], ["proto"]).expect("compile proto/onnx.proto");
    let mut cfg = prost_build::Config::new();
    cfg.bytes(["."]);
    cfg.compile_fds(fds).expect("prost-build");
}
