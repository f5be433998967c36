//! `onnx-light convert --inline --align N IN OUT`: a single-file model whose embedded payloads of
//! at least `--size-threshold` bytes start at multiples of N in OUT, which a no-copy load
//! borrows from the file's map (none copied); `--inline` alone writes protobuf's bytes; a bad
//! N fails naming the option.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use onnx_light::proto::{ModelProto, TensorProto};
use onnx_light::{FileLoadMode, Message, ParseOptions};

fn convert(args: &[&str], input: &Path, output: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_onnx-light"))
        .arg("convert")
        .args(args)
        .arg(input)
        .arg(output)
        .output()
        .unwrap()
}

fn ok(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    err
}

/// A model with payloads of 100 to 100 000 bytes behind names of varying length.
fn model() -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    let g = m.mutable_graph();
    for (i, n) in [100usize, 3000, 1024, 7, 100_000, 5000, 1023]
        .into_iter()
        .enumerate()
    {
        let mut t = TensorProto::new();
        t.set_name("w".repeat(1 + i));
        t.set_data_type(2);
        t.add_dims(n as i64);
        t.set_raw_data((0..n).map(|k| (k * 7 + i) as u8).collect::<Vec<u8>>());
        g.mutable_initializer().push(t);
    }
    m
}

/// (offset in the file, length) of every payload of the model at `path`.
fn payload_spans(path: &Path) -> Vec<(u64, usize)> {
    let bytes = std::fs::read(path).unwrap();
    let opts = ParseOptions {
        no_copy: true,
        raw_data_threshold: 0,
        alignment: 1,
        ..Default::default()
    };
    // SAFETY: `bytes` outlives the model, dropped at the end of this function.
    let m: ModelProto = unsafe { onnx_light::parse_from_bytes_unowned(&bytes, &opts) }.unwrap();
    m.graph()
        .initializer()
        .iter()
        .map(|t| {
            let r = t.raw_data();
            (r.as_ptr() as u64 - bytes.as_ptr() as u64, r.len())
        })
        .collect()
}

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn convert_inline_align_writes_an_aligned_single_file() {
    let dir = Dir(std::env::temp_dir().join(format!("onnxl-cli-aligned-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let input = dir.0.join("in.onnx");
    let m = model();
    let plain = m.serialize_to_vec();
    std::fs::write(&input, &plain).unwrap();
    assert!(
        payload_spans(&input)
            .iter()
            .any(|&(o, n)| n >= 1024 && o % 64 != 0),
        "the input has misaligned payloads"
    );

    // --inline alone: protobuf's bytes.
    let out = dir.0.join("plain.onnx");
    ok(&convert(&["--inline"], &input, &out));
    assert_eq!(std::fs::read(&out).unwrap(), plain);

    for (align, threshold) in [("4096", "1024"), ("64", "64")] {
        let out = dir.0.join(format!("aligned-{align}.onnx"));
        let err = ok(&convert(
            &["--inline", "--align", align, "--size-threshold", threshold],
            &input,
            &out,
        ));
        assert!(err.contains(&format!("aligned to {align}")), "{err}");
        let (align, threshold): (u64, usize) = (align.parse().unwrap(), threshold.parse().unwrap());
        for (offset, len) in payload_spans(&out) {
            if len >= threshold {
                assert_eq!(
                    offset % align,
                    0,
                    "a payload of {len} bytes, alignment {align}"
                );
            }
        }
        let opts = ParseOptions {
            no_copy: true,
            file_load_mode: FileLoadMode::Mmap,
            ..Default::default()
        };
        let back = onnx_light::load_model(&out, &opts.into()).unwrap();
        assert_eq!(back, m);
        assert_eq!(onnx_light::codec::realigned_tensors(&back), 0);
        assert_eq!(
            back.graph()
                .initializer()
                .iter()
                .filter(|t| t.raw_data_opt().is_some_and(|r| r.is_borrowed()))
                .count(),
            4,
            "every payload of at least 1024 bytes is borrowed"
        );
    }

    let o = convert(
        &["--inline", "--align", "100"],
        &input,
        &dir.0.join("bad.onnx"),
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("inline_alignment") && err.contains("100"),
        "{err}"
    );
    assert!(!dir.0.join("bad.onnx").exists());
}
