//! Saves whose payloads go to disk past the page cache (`O_DIRECT`, Linux, files receiving at
//! least 32 MiB of payloads): the file written is byte for byte what the buffered path and the
//! in-memory serializer produce, for payloads at every alignment (copy-loaded, no-copy from a
//! mapped file), 1 and 2 threads, one file and external data; and when the kernel refuses direct
//! writes (`EINVAL`, made by a test hook), the save falls back to buffered writes and still
//! writes the same bytes. Whether direct writes happen is checked against what the temporary
//! directory's file system reports (`statx` `STATX_DIOALIGN`).

use crate::common::{TempDir, pattern};
use onnx_light::external::save_model_with_external_data;
use onnx_light::proto::{ModelProto, TensorProto};
use onnx_light::storage::{direct_written_bytes, fail_next_direct_writes};
use onnx_light::{LoadOptions, ParseOptions, SaveExternalOptions, SerializeOptions};

/// Payload sizes: unaligned ones, one spanning several 8 MiB pieces, small ones; 41 MiB total.
const SIZES: [usize; 7] = [
    5 << 20 | 3,
    19 << 20 | 101,
    1 << 20 | 1,
    700,
    9 << 20,
    4097,
    7 << 20,
];

fn model() -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    m.set_producer_name("direct-writes");
    for (i, &n) in SIZES.iter().enumerate() {
        let mut t = TensorProto::new();
        t.set_name(format!("w{i}"));
        t.set_data_type(2); // UINT8
        t.add_dims(n as i64);
        // Shift the payload in memory by i bytes, so sources sit at every alignment.
        let mut v = pattern(n + i, i as u8);
        v.drain(..i);
        t.set_raw_data(v);
        m.mutable_graph().mutable_initializer().push(t);
        let mut node = onnx_light::NodeProto::new();
        node.set_op_type("Identity");
        node.add_input(format!("w{i}"));
        node.add_output(format!("y{i}"));
        m.mutable_graph().mutable_node().push(node);
    }
    m
}

/// Whether the file system of `dir` takes direct writes (it reports their alignment).
fn takes_direct_writes(dir: &std::path::Path) -> bool {
    #[cfg(all(target_os = "linux", any(target_env = "gnu", target_env = "musl")))]
    {
        use std::os::unix::ffi::OsStrExt;
        let probe = dir.join("probe");
        std::fs::write(&probe, b"x").unwrap();
        let c = std::ffi::CString::new(probe.as_os_str().as_bytes()).unwrap();
        // SAFETY: statx is plain data, zeroed is valid; a NUL-terminated path and a valid buffer.
        let mut st: libc::statx = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let r =
            unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), 0, libc::STATX_DIOALIGN, &mut st) };
        std::fs::remove_file(&probe).unwrap();
        r == 0
            && st.stx_mask & libc::STATX_DIOALIGN != 0
            && st.stx_dio_offset_align.is_power_of_two()
            && st.stx_dio_offset_align <= 4096
            && st.stx_dio_mem_align.is_power_of_two()
            && st.stx_dio_mem_align <= 4096
    }
    #[cfg(not(all(target_os = "linux", any(target_env = "gnu", target_env = "musl"))))]
    {
        let _ = dir;
        false
    }
}

fn ser(threads: i32) -> SerializeOptions {
    SerializeOptions {
        num_threads: threads,
        ..Default::default()
    }
}

/// Saves `m` to one file with `threads`, `failures` direct writes refused; returns the file's
/// bytes and the bytes written direct.
fn save_one_file(m: &ModelProto, dir: &TempDir, threads: i32, failures: usize) -> (Vec<u8>, u64) {
    let path = dir.path("m.onnx");
    fail_next_direct_writes(failures);
    let before = direct_written_bytes();
    onnx_light::save_model(m, &path, &ser(threads)).unwrap();
    fail_next_direct_writes(0);
    (
        std::fs::read(&path).unwrap(),
        direct_written_bytes() - before,
    )
}

#[test]
fn one_file_saves_write_the_serialized_bytes() {
    let _alone = crate::alone();
    let dir = TempDir::new("direct-one");
    let direct = takes_direct_writes(&dir.0);
    let m = model();
    let expected = onnx_light::serialize_to_vec(&m, &ser(1)).unwrap();
    let payload: u64 = SIZES.iter().map(|&n| n as u64).sum();
    for threads in [1, 2] {
        let (bytes, written) = save_one_file(&m, &dir, threads, 0);
        assert!(bytes == expected, "{threads} threads: the file differs");
        if direct {
            // Every payload of at least 1 MiB goes direct, but for its unaligned ends.
            assert!(
                written > payload - (2 << 20),
                "{threads} threads: {written} direct bytes"
            );
        } else {
            assert_eq!(written, 0, "{threads} threads");
        }
    }
    // A model below the size for direct writes goes through the page cache.
    let mut small = model();
    small.mutable_graph().mutable_initializer().truncate(3);
    let (bytes, written) = save_one_file(&small, &dir, 2, 0);
    assert!(bytes == onnx_light::serialize_to_vec(&small, &ser(1)).unwrap());
    assert_eq!(written, 0);
}

#[test]
fn refused_direct_writes_fall_back_to_buffered_ones() {
    let _alone = crate::alone();
    let dir = TempDir::new("direct-refused");
    let direct = takes_direct_writes(&dir.0);
    let m = model();
    let expected = onnx_light::serialize_to_vec(&m, &ser(1)).unwrap();
    for (threads, failures) in [(1, 1), (2, 1), (2, 3), (2, 1000)] {
        let (bytes, written) = save_one_file(&m, &dir, threads, failures);
        assert!(
            bytes == expected,
            "{threads} threads, {failures} refusals: the file differs"
        );
        if direct && failures < 1000 {
            // The refused file's remaining pieces are written buffered; with two threads the other
            // thread may have written some pieces direct before the refusal.
            assert!(written < 41 << 20, "{threads}/{failures}: {written}");
        } else {
            assert_eq!(written, 0, "{threads}/{failures}");
        }
    }
}

/// Every file of `dir`, sorted by name, with its bytes.
fn files_of(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn external_data_saves_write_the_same_files_from_every_source() {
    let _alone = crate::alone();
    let direct = takes_direct_writes(&std::env::temp_dir());
    let m = model();
    let opts = |threads: i32| SaveExternalOptions {
        num_threads: threads,
        ..Default::default()
    };
    // The reference: saved buffered (every direct write refused).
    let reference = TempDir::new("direct-ext-ref");
    fail_next_direct_writes(usize::MAX);
    save_model_with_external_data(&m, reference.path("m.onnx"), &opts(2)).unwrap();
    fail_next_direct_writes(0);
    let expected = files_of(&reference.0);
    assert_eq!(expected.len(), 2, "model and one weight file");
    // Sources: the copy in memory, then the weights mapped from the reference (page-aligned
    // payloads, written straight from the mapping).
    let mapped = onnx_light::load_model(
        reference.path("m.onnx"),
        &LoadOptions {
            load_external_data: true,
            ..LoadOptions::from(ParseOptions {
                no_copy: true,
                ..Default::default()
            })
        },
    )
    .unwrap();
    for (source, model) in [("copy", &m), ("mapped", &mapped)] {
        for threads in [1, 2] {
            for failures in [0, 2] {
                let out = TempDir::new("direct-ext");
                fail_next_direct_writes(failures);
                let before = direct_written_bytes();
                save_model_with_external_data(model, out.path("m.onnx"), &opts(threads)).unwrap();
                fail_next_direct_writes(0);
                let written = direct_written_bytes() - before;
                let what = format!("{source}, {threads} threads, {failures} refusals");
                assert!(files_of(&out.0) == expected, "{what}: the files differ");
                if direct && failures == 0 {
                    assert!(written > 30 << 20, "{what}: {written} direct bytes");
                } else if !direct {
                    assert_eq!(written, 0, "{what}");
                }
            }
        }
    }
}
