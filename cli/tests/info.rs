//! `onnx-light info` (the README's first command): with no argument it summarizes the sample
//! model bundled in the binary, with a path the file; a missing file is a clear error.

use std::process::{Command, Output};

fn info(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_onnx-light"))
        .arg("info")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// The summary lines of samples/mlp.onnx (the bundled sample), whatever the source.
const SAMPLE_SUMMARY: &[&str] = &[
    "ir_version: 8",
    "opsets: ai.onnx:17",
    "producer: onnx_light-sample 1",
    "graph: mlp",
    "  x: tensor(float)[batch,4]",
    "  y: tensor(float)[batch,3]",
    "nodes: 6 (Add x2, MatMul x2, Relu x1, Softmax x1)",
    "initializers: 4 (268 bytes inline), sparse initializers: 0",
    "external files: none",
];

fn assert_sample_summary(out: &str) {
    for line in SAMPLE_SUMMARY {
        assert!(
            out.lines().any(|l| l == *line),
            "missing {line:?} in:\n{out}"
        );
    }
}

#[test]
fn info_without_argument_summarizes_the_bundled_sample() {
    let out = stdout(&info(&[]));
    assert!(out.starts_with("model: <bundled sample mlp.onnx>"), "{out}");
    assert_sample_summary(&out);
}

#[test]
fn info_with_a_path_summarizes_that_file() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../samples/mlp.onnx");
    let out = stdout(&info(&[path]));
    assert!(out.starts_with(&format!("model: {path}")), "{out}");
    assert_sample_summary(&out);
}

#[test]
fn info_on_a_missing_file_fails_naming_it() {
    let o = info(&["/nonexistent/model.onnx"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/nonexistent/model.onnx"), "{err}");
}
