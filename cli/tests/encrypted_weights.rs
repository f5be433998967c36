//! `onnx-light convert` with encrypted weights: `--encrypt-weights` with a key file or an
//! environment variable, `check` of the result, and a fully encrypted model directory; the
//! results load through the library with the same tensors.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{TempDir, is_encrypted, starts_with_chunked_magic, tensors_of, with_key};
use onnx_light::crypto::{self, EncryptionFormat};
use onnx_light::{Error, LoadOptions};

const KEY: &[u8] = b"weights passphrase";

#[test]
fn cli_convert_encrypt_weights_and_check() {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let dir = TempDir::new("cli");
    let key_file = dir.path("key");
    std::fs::write(&key_file, [KEY, b"\n"].concat()).unwrap();
    let cli = || Command::new(env!("CARGO_BIN_EXE_onnx-light"));
    let out = cli()
        .arg("convert")
        .arg(root.join("samples/mlp.onnx"))
        .arg(dir.path("m.onnx"))
        .args(["--size-threshold", "64", "--checksum", "--encrypt-weights"])
        .args(["--chunk-size", "128", "--cipher", "chacha20-poly1305"])
        .arg("--key-file")
        .arg(&key_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(starts_with_chunked_magic(&dir.path("m.onnx.data")));
    // --encrypt-weights without a key is a usage error.
    let out = cli()
        .arg("convert")
        .arg(root.join("samples/mlp.onnx"))
        .arg(dir.path("x.onnx"))
        .arg("--encrypt-weights")
        .output()
        .unwrap();
    assert!(!out.status.success());
    // check: without the key, a problem; with it (from the environment), OK.
    let out = cli().arg("check").arg(dir.path("m.onnx")).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("no passphrase"));
    let out = cli()
        .arg("check")
        .arg(dir.path("m.onnx"))
        .args(["--key-env", "ONNXL_TEST_WEIGHTS_KEY"])
        .env("ONNXL_TEST_WEIGHTS_KEY", std::str::from_utf8(KEY).unwrap())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("encrypted") && stdout.contains("checksum(s) verified"));
    // convert back to inline with the key: the sample's tensors.
    let out = cli()
        .arg("convert")
        .arg(dir.path("m.onnx"))
        .arg(dir.path("inline.onnx"))
        .arg("--inline")
        .arg("--key-file")
        .arg(&key_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let a = onnx_light::load_model(dir.path("inline.onnx"), &LoadOptions::default()).unwrap();
    let b = onnx_light::load_model(root.join("samples/mlp.onnx"), &LoadOptions::default()).unwrap();
    assert_eq!(tensors_of(&a), tensors_of(&b));
}

#[test]
fn cli_convert_encrypt_writes_a_fully_encrypted_directory() {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let sample = root.join("samples/mlp.onnx");
    let dir = TempDir::new("cli-full");
    let key_file = dir.path("key");
    std::fs::write(&key_file, [KEY, b"\n"].concat()).unwrap();
    let out_dir = dir.path("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join("m.onnx");
    let cli = || Command::new(env!("CARGO_BIN_EXE_onnx-light"));
    let convert = |extra: &[&str]| {
        let o = cli()
            .arg("convert")
            .arg(&sample)
            .arg(&out)
            .args(["--size-threshold", "64", "--checksum", "--encrypt"])
            .args(["--chunk-size", "128"])
            .args(extra)
            .arg("--key-file")
            .arg(&key_file)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let original = onnx_light::load_model(&sample, &LoadOptions::default()).unwrap();
    let files = || -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&out_dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    };
    // Twice: the second save replaces the encrypted directory (read with the key to learn its
    // weight files, which are not overwritten before the commit and removed after it).
    for (round, extra) in [&[][..], &["--model-format", "chunked"][..]]
        .into_iter()
        .enumerate()
    {
        let stderr = convert(extra);
        assert!(stderr.contains("encrypted as"), "{stderr}");
        let all = files();
        assert_eq!(all.len(), 2, "round {round}: {all:?}");
        assert!(all.iter().all(|p| is_encrypted(p)), "{all:?}");
        // Loaded back with the key: the original model's graph and tensors.
        let m = onnx_light::load_encrypted_model(
            &out,
            KEY,
            &with_key(
                KEY,
                LoadOptions {
                    verify_external_checksums: true,
                    ..Default::default()
                },
            ),
        )
        .unwrap();
        assert_eq!(tensors_of(&m), tensors_of(&original));
        assert_eq!(m.graph().node(), original.graph().node());
        assert_eq!(m.graph().input(), original.graph().input());
        assert_eq!(m.graph().output(), original.graph().output());
    }
    assert_eq!(
        crypto::detect_file_format(&out).unwrap(),
        EncryptionFormat::Chunked
    );
    // A wrong key: a clear authentication error, from the library and from the CLI.
    let e =
        onnx_light::load_encrypted_model(&out, b"not the key", &with_key(KEY, Default::default()))
            .unwrap_err();
    assert!(matches!(e, Error::Authentication(_)), "{e}");
    assert!(e.to_string().contains("wrong key"), "{e}");
    let o = cli()
        .arg("decrypt")
        .arg(&out)
        .arg(dir.path("plain.onnx"))
        .args(["--key-env", "ONNXL_TEST_WRONG_KEY"])
        .env("ONNXL_TEST_WRONG_KEY", "not the key")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("authentication failed (wrong key"),
        "{stderr}"
    );
    assert!(!dir.path("plain.onnx").exists());
    // --encrypt without a passphrase is a usage error; nothing is written.
    let o = cli()
        .arg("convert")
        .arg(&sample)
        .arg(dir.path("x.onnx"))
        .arg("--encrypt")
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(!dir.path("x.onnx").exists());
    // --model-format without --encrypt too.
    let o = cli()
        .arg("convert")
        .arg(&sample)
        .arg(dir.path("x.onnx"))
        .args(["--model-format", "2", "--key-file"])
        .arg(&key_file)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(!dir.path("x.onnx").exists());
    // With --inline: the one .onnx, encrypted.
    let o = cli()
        .arg("convert")
        .arg(&sample)
        .arg(dir.path("inline.onnx"))
        .args(["--inline", "--encrypt", "--key-file"])
        .arg(&key_file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(is_encrypted(&dir.path("inline.onnx")));
    let m = onnx_light::load_encrypted_model(dir.path("inline.onnx"), KEY, &LoadOptions::default())
        .unwrap();
    assert_eq!(tensors_of(&m), tensors_of(&original));
}
