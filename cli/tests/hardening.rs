//! The `onnx-light` tool against hostile files and option values: text taken from a model is
//! printed with control characters escaped (a model cannot drive the terminal); model, weight
//! and key files must be regular files (devices, FIFOs, sockets, directories and procfs files
//! are refused at once, naming their kind); key files are size-capped; thread counts above the
//! cap are usage errors; `check` validates the ONNX basics (IR version, graph, opset imports)
//! and says which is missing; `info --key-file` opens models with encrypted weights; reading an
//! ONNXCRY1 (unauthenticated) file prints a warning.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{TempDir, uint8_tensor};
use onnx_light::crypto::{EncryptionFormat, EncryptionOptions};
use onnx_light::proto::{Message, ModelProto};
use onnx_light::{ExternalEncryption, SaveExternalOptions};

const HOSTILE: &str = "evil\x1b]0;pwned\x07\x1b[2J\u{9b}31m\u{202e}";

/// Runs the tool with `args`; kills it (and fails) if it has not exited within 20 s.
fn tool(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_onnx-light"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("onnx-light {args:?} hangs");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&o.stderr));
    s
}

/// No control character other than newline and tab (and no bidi override) reaches the terminal.
fn assert_clean(what: &str, o: &Output) {
    for stream in [&o.stdout, &o.stderr] {
        let s = String::from_utf8_lossy(stream);
        let bad: Vec<char> = s
            .chars()
            .filter(|&c| {
                (c.is_control() && c != '\n' && c != '\t')
                    || ('\u{202a}'..='\u{202e}').contains(&c)
                    || ('\u{2066}'..='\u{2069}').contains(&c)
            })
            .collect();
        assert!(
            bad.is_empty(),
            "{what}: raw control characters {bad:?} in:\n{s}"
        );
    }
}

fn fails_with(what: &str, o: &Output, needles: &[&str]) {
    assert!(!o.status.success(), "{what}: succeeded:\n{}", text(o));
    let t = text(o);
    for n in needles {
        assert!(t.contains(n), "{what}: {n:?} not in:\n{t}");
    }
    assert_clean(what, o);
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A model whose names, producer and external location carry terminal escape sequences.
fn hostile_model(dir: &TempDir) -> std::path::PathBuf {
    let mut m = ModelProto::new();
    m.set_ir_version(8);
    m.set_producer_name(HOSTILE);
    m.add_opset_import().set_version(17);
    let g = m.mutable_graph();
    g.set_name(HOSTILE);
    let mut t = uint8_tensor(HOSTILE, 4, 1);
    t.set_data_location(1);
    t.clear_raw_data();
    for (k, v) in [("location", HOSTILE), ("offset", "0"), ("length", "4")] {
        let e = t.add_external_data();
        e.set_key(k);
        e.set_value(v);
    }
    g.mutable_initializer().push(t);
    let n = g.add_node();
    n.set_name(HOSTILE);
    n.set_op_type(HOSTILE);
    let path = dir.path("hostile.onnx");
    std::fs::write(&path, m.serialize_to_vec()).unwrap();
    path
}

#[test]
fn text_from_a_model_is_printed_escaped() {
    let dir = TempDir::new("cli-escape");
    let model = hostile_model(&dir);
    // Names in the summary (a copy of the model without its external tensor).
    let mut names = onnx_light::load_model(
        &model,
        &onnx_light::LoadOptions {
            load_external_data: false,
            ..Default::default()
        },
    )
    .unwrap();
    names.mutable_graph().mutable_initializer().clear();
    let names_path = dir.path("names.onnx");
    std::fs::write(&names_path, names.serialize_to_vec()).unwrap();
    let out = tool(&["info", s(&names_path)]);
    assert!(out.status.success(), "{}", text(&out));
    assert_clean("info", &out);
    assert!(
        text(&out).contains("evil\\x1b]0;pwned\\x07"),
        "{}",
        text(&out)
    );
    // The external location in an error message.
    let out = tool(&["info", s(&model)]);
    assert_clean("info (external)", &out);
    assert!(text(&out).contains("\\x1b"), "{}", text(&out));
    let out = tool(&["check", s(&model)]);
    assert_clean("check", &out);
    assert!(text(&out).contains("\\x1b"), "{}", text(&out));
    let out = tool(&[
        "convert",
        s(&model),
        s(&dir.path("out.onnx")),
        "--inline",
        "--threads",
        "1",
    ]);
    assert_clean("convert", &out);
    assert!(text(&out).contains("\\x1b"), "{}", text(&out));
}

#[test]
fn only_regular_files_are_models() {
    let dir = TempDir::new("cli-kinds");
    for (path, kind) in [
        ("/dev/zero", "character device"),
        ("/dev/urandom", "character device"),
        ("/proc/self/status", "procfs"),
        ("/proc/self/mem", "procfs"),
    ] {
        for cmd in ["info", "check"] {
            fails_with(&format!("{cmd} {path}"), &tool(&[cmd, path]), &[path, kind]);
        }
    }
    fails_with("info DIR", &tool(&["info", s(&dir.0)]), &["directory"]);
    // A FIFO is refused without blocking on it (no writer ever comes).
    let fifo = dir.path("fifo.onnx");
    let c = std::ffi::CString::new(s(&fifo)).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    fails_with("info FIFO", &tool(&["info", s(&fifo)]), &["FIFO"]);
    fails_with("check FIFO", &tool(&["check", s(&fifo)]), &["FIFO"]);
    // A socket.
    let sock = dir.path("sock.onnx");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    fails_with("info socket", &tool(&["info", s(&sock)]), &["socket"]);
}

#[test]
fn key_files_are_regular_and_small() {
    let dir = TempDir::new("cli-keys");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/../samples/mlp.onnx");
    let out = dir.path("m.enc");
    fails_with(
        "--key-file /dev/zero",
        &tool(&["encrypt", model, s(&out), "--key-file", "/dev/zero"]),
        &["/dev/zero", "character device"],
    );
    let big = dir.path("big.key");
    std::fs::write(&big, vec![b'k'; 2 << 20]).unwrap();
    fails_with(
        "--key-file of 2 MiB",
        &tool(&["encrypt", model, s(&out), "--key-file", s(&big)]),
        &["big.key", "larger than"],
    );
    assert!(!out.exists());
}

#[test]
fn thread_counts_above_the_cap_are_usage_errors() {
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/../samples/mlp.onnx");
    let dir = TempDir::new("cli-threads");
    for args in [
        vec!["info", model, "--threads", "1000000"],
        vec![
            "convert",
            model,
            s(&dir.path("o.onnx")),
            "--threads",
            "1000000",
        ],
    ] {
        let o = tool(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("threads"), "{}", text(&o));
    }
}

#[test]
fn check_validates_onnx_basics() {
    let dir = TempDir::new("cli-check");
    let empty = dir.path("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    fails_with(
        "check empty",
        &tool(&["check", s(&empty)]),
        &["ir_version", "graph"],
    );
    let mut m = ModelProto::new();
    m.set_ir_version(8);
    m.mutable_graph().set_name("g");
    let no_opset = dir.path("no_opset.onnx");
    std::fs::write(&no_opset, m.serialize_to_vec()).unwrap();
    fails_with(
        "check no opset",
        &tool(&["check", s(&no_opset)]),
        &["opset_import"],
    );
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/../samples/mlp.onnx");
    let ok = tool(&["check", model]);
    assert!(ok.status.success(), "{}", text(&ok));
}

#[test]
fn info_opens_models_with_encrypted_weights() {
    let dir = TempDir::new("cli-info-key");
    let mut m = ModelProto::new();
    m.set_ir_version(8);
    m.add_opset_import().set_version(17);
    m.mutable_graph()
        .mutable_initializer()
        .push(uint8_tensor("w", 4096, 3));
    let path = dir.path("m.onnx");
    let opts = SaveExternalOptions {
        encryption: Some(ExternalEncryption::new(b"secret".to_vec())),
        ..Default::default()
    };
    onnx_light::save_model_with_external_data(&m, &path, &opts).unwrap();
    let key = dir.path("k");
    std::fs::write(&key, "secret\n").unwrap();
    let o = tool(&["info", s(&path), "--key-file", s(&key)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("initializers: 1"), "{}", text(&o));
    fails_with(
        "info without key",
        &tool(&["info", s(&path)]),
        &["--key-file"],
    );
}

#[test]
fn reading_onnxcry1_warns_that_it_is_unauthenticated() {
    let dir = TempDir::new("cli-cry1");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/../samples/mlp.onnx");
    let key = dir.path("k");
    std::fs::write(&key, "secret").unwrap();
    let bytes = std::fs::read(model).unwrap();
    let enc = onnx_light::crypto::encrypt_bytes(
        &bytes,
        b"secret",
        &EncryptionOptions::with_format(EncryptionFormat::AesCbc),
    )
    .unwrap();
    let cry1 = dir.path("m.cry1");
    std::fs::write(&cry1, enc).unwrap();
    let o = tool(&[
        "decrypt",
        s(&cry1),
        s(&dir.path("plain.onnx")),
        "--key-file",
        s(&key),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("warning") && err.contains("ONNXCRY1") && err.contains("unauthenticated"),
        "{err}"
    );
    // An authenticated format gives no warning.
    let enc3 = onnx_light::crypto::encrypt_bytes(&bytes, b"secret", &EncryptionOptions::default())
        .unwrap();
    let cry3 = dir.path("m.cry3");
    std::fs::write(&cry3, enc3).unwrap();
    let o = tool(&[
        "decrypt",
        s(&cry3),
        s(&dir.path("plain3.onnx")),
        "--key-file",
        s(&key),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"));
}
