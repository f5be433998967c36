//! Two `onnx-light convert` processes saving different models to one destination at the same
//! time: the save lock serializes them (docs/hardening.md, "Concurrent saves to one destination").

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;

use common::{TempDir, pattern, uint8_tensor};
use onnx_light::proto::ModelProto;
use onnx_light::{LoadOptions, SerializeOptions};

const TENSORS: usize = 8;
const TENSOR_BYTES: usize = 256 << 10;

/// A model whose producer name and tensor bytes depend on `seed`.
fn model(seed: u32) -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    m.set_producer_name(format!("seed-{seed}"));
    let g = m.mutable_graph();
    g.set_name("g");
    for i in 0..TENSORS {
        g.mutable_initializer().push(uint8_tensor(
            &format!("w{i}"),
            TENSOR_BYTES,
            (seed as u8) * 16 + i as u8,
        ));
    }
    m
}

/// Every tensor of `m` is the one `model(seed)` has.
fn check_seed(m: &ModelProto, seed: u32) {
    let init = &m.graph().initializer();
    assert_eq!(init.len(), TENSORS);
    for (i, t) in init.iter().enumerate() {
        let expected = pattern(TENSOR_BYTES, (seed as u8) * 16 + i as u8);
        assert!(
            t.raw_data() == expected.as_slice(),
            "tensor w{i} is not from seed {seed}"
        );
    }
}

/// Two processes (the CLI) saving different models to one destination at the same time, many
/// times: the save lock serializes them, so every result is one complete generation — the
/// `.onnx` and every tensor of its weight file from the same model — and no lock, temporary
/// or alternate file stays.
#[test]
fn two_processes_saving_to_one_path_never_mix_generations() {
    use std::process::Command;
    let tmp = TempDir::new("two-writers");
    let dir = tmp.0.clone();
    let inputs: Vec<PathBuf> = (1..=2)
        .map(|seed| {
            let p = dir.join(format!("in{seed}.onnx"));
            onnx_light::save_model(&model(seed), &p, &SerializeOptions::default()).unwrap();
            p
        })
        .collect();
    let out = dir.join("out.onnx");
    for round in 0..20 {
        let children: Vec<_> = inputs
            .iter()
            .map(|input| {
                Command::new(env!("CARGO_BIN_EXE_onnx-light"))
                    .arg("convert")
                    .arg(input)
                    .arg(&out)
                    .args(["--threads", "1"])
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success(), "round {round}: a save failed");
        }
        let m = onnx_light::load_model(&out, &LoadOptions::default()).unwrap();
        let seed: u32 = m.producer_name().to_string()["seed-".len()..]
            .parse()
            .unwrap();
        check_seed(&m, seed);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["in1.onnx", "in2.onnx", "out.onnx", "out.onnx.data"],
            "round {round}"
        );
    }
}

/// `onnx-light roundtrip` takes the save lock of each output: while another process holds it
/// (`flock` on the lock file beside the output, as the library's saves take it), the tool waits,
/// and once it is released the output is written.
#[cfg(unix)]
#[test]
fn roundtrip_waits_for_the_save_lock() {
    use std::os::fd::AsRawFd;
    use std::process::Command;
    let tmp = TempDir::new("roundtrip-lock");
    let dir = tmp.0.clone();
    let input = dir.join("in.onnx");
    onnx_light::save_model(&model(3), &input, &SerializeOptions::default()).unwrap();
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let lock = std::fs::File::create(out_dir.join(".0.pb.lock")).unwrap();
    // SAFETY: a valid descriptor, held by `lock`.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let mut child = Command::new(env!("CARGO_BIN_EXE_onnx-light"))
        .arg("roundtrip")
        .arg("--out-dir")
        .arg(&out_dir)
        .arg(&input)
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "roundtrip did not wait for the save lock"
    );
    assert!(!out_dir.join("0.pb").exists());
    drop(lock);
    assert!(child.wait().unwrap().success());
    let saved = onnx_light::load_model(out_dir.join("0.pb"), &LoadOptions::default()).unwrap();
    check_seed(&saved, 3);
}
