//! Only regular files are read as models: a device, FIFO, socket, directory or procfs file
//! given as the model path is refused at once (never read as an empty model, never blocking on
//! a FIFO), with an error naming the path and its kind. External weight files obey the same
//! rule (through the path rules).

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::TempDir;
use onnx_light::{FileLoadMode, LoadOptions, ModelProto, ParseOptions};

/// `load_model(path)` fails within 10 s (run on a thread, so a blocking open cannot hang the
/// test) with a message containing the path and `kind`.
fn refused(path: &Path, kind: &str) {
    for mode in [
        FileLoadMode::Auto,
        FileLoadMode::Mmap,
        FileLoadMode::Buffered,
    ] {
        for no_copy in [false, true] {
            let opts = ParseOptions {
                file_load_mode: mode,
                no_copy,
                ..Default::default()
            };
            let p = path.to_path_buf();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(
                    onnx_light::load_model(&p, &LoadOptions::from(opts.clone()))
                        .map(|_: ModelProto| ()),
                );
            });
            let start = Instant::now();
            let r = rx
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("{}: load blocks ({mode:?})", path.display()));
            let e = r.expect_err(&format!("{} was loaded ({mode:?})", path.display()));
            let msg = e.to_string();
            assert!(
                msg.contains(&path.display().to_string()) && msg.contains(kind),
                "{}: {msg}",
                path.display()
            );
            assert!(start.elapsed() < Duration::from_secs(5));
        }
    }
}

#[cfg(unix)]
#[test]
fn devices_fifos_sockets_directories_and_procfs_files_are_refused() {
    refused(Path::new("/dev/zero"), "character device");
    refused(Path::new("/dev/urandom"), "character device");
    refused(Path::new("/dev/null"), "character device");
    refused(Path::new("/proc/self/status"), "procfs");
    refused(Path::new("/proc/self/mem"), "procfs");
    let dir = TempDir::new("kinds");
    refused(&dir.0, "directory");
    let fifo = dir.path("fifo.onnx");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    refused(&fifo, "FIFO");
    let sock = dir.path("sock.onnx");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    refused(&sock, "socket");
    // A symbolic link to a regular file is fine (the caller chose the path); to a device it is
    // refused like the device.
    let link = dir.path("zero.onnx");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    refused(&link, "character device");
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/mlp.onnx");
    let good = dir.path("good.onnx");
    std::os::unix::fs::symlink(&sample, &good).unwrap();
    onnx_light::load_model(&good, &LoadOptions::default()).unwrap();
}

/// Windows: a directory and the NUL device (by its plain and its device-namespace name) are
/// refused, never read as an empty model.
#[cfg(windows)]
#[test]
fn devices_and_directories_are_refused() {
    let dir = TempDir::new("kinds");
    refused(&dir.0, "directory");
    refused(Path::new(r"\\.\NUL"), "");
    refused(Path::new("NUL"), "");
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/mlp.onnx");
    onnx_light::load_model(&sample, &LoadOptions::default()).unwrap();
}
