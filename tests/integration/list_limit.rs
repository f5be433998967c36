//! A repeated scalar or string field holds at most 2^31 − 1 elements (its list counts in 32
//! bits, as protobuf's `int`): more is a clear error everywhere, never a panic or a crash.
//!
//! The parse is tested for real without gigabytes of memory: a sparse file holds a packed
//! `float_data` field whose declared length is 2^33 bytes (2^31 floats, one too many), so the
//! file is 8 GiB long but its body is a hole; the parse must refuse the field from its length,
//! before it reserves or reads anything. (The other ways to go past the limit, unpacked values
//! and packed varints, go through the same check: the unit tests of `wire::reader` cover them
//! with a list type of a small limit.)

use std::ffi::CStr;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use onnx_light::ffi::accessors::{
    onnxl_tensor_proto_assign_float_data, onnxl_tensor_proto_float_data_size,
    onnxl_tensor_proto_free, onnxl_tensor_proto_new,
};
use onnx_light::ffi::model::onnxl_load_model;
use onnx_light::ffi::status::{OnnxlStatus, onnxl_last_error_message};
use onnx_light::wire::MAX_LEN;
use onnx_light::wire::put_varint;
use onnx_light::{DecodeErrorKind, Error, FileLoadMode, LoadOptions, ParseOptions};

struct Cleanup(PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes a ModelProto whose graph's one initializer has a packed `float_data` of `floats`
/// elements, all zero (a hole of the file); returns the offset of the `float_data` tag.
fn sparse_model(path: &Path, floats: u64) -> u64 {
    let payload = 4 * floats;
    let mut tensor_head = vec![0x22]; // float_data = 4, length-delimited
    put_varint(&mut tensor_head, payload);
    let tensor_len = tensor_head.len() as u64 + payload;
    let mut graph_head = vec![0x2a]; // initializer = 5
    put_varint(&mut graph_head, tensor_len);
    let graph_len = graph_head.len() as u64 + tensor_len;
    let mut head = vec![0x3a]; // graph = 7
    put_varint(&mut head, graph_len);
    head.extend_from_slice(&graph_head);
    let tag_at = head.len() as u64;
    head.extend_from_slice(&tensor_head);
    let mut f = File::create(path).unwrap();
    f.write_all(&head).unwrap();
    f.set_len(head.len() as u64 + payload).unwrap();
    tag_at
}

fn last_error() -> String {
    // SAFETY: the library's thread-local message, NUL-terminated.
    unsafe { CStr::from_ptr(onnxl_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_packed_field_of_more_than_max_len_elements_is_refused_before_it_is_read() {
    assert_eq!(MAX_LEN, (1 << 31) - 1);
    let path = std::env::temp_dir().join(format!("onnxl-list-limit-{}.onnx", std::process::id()));
    let _cleanup = Cleanup(path.clone());
    let tag_at = sparse_model(&path, MAX_LEN as u64 + 1);
    assert!(std::fs::metadata(&path).unwrap().len() > 8 << 30);

    // Rust: a decode error naming the field and the offset of its tag.
    let opts = ParseOptions {
        file_load_mode: FileLoadMode::Mmap,
        num_threads: 1,
        ..Default::default()
    };
    let e = onnx_light::load_model(&path, &LoadOptions::from(opts.clone())).unwrap_err();
    let Error::Decode(d) = &e else {
        panic!("not a decode error: {e}")
    };
    assert_eq!(
        d.kind,
        DecodeErrorKind::TooManyElements {
            limit: MAX_LEN as u64
        }
    );
    assert_eq!(d.offset, tag_at);
    assert_eq!(d.path(), "graph.initializer[0].float_data");
    let text = e.to_string();
    assert!(
        text.contains("more than 2147483647 elements") && text.contains("float_data"),
        "{text}"
    );

    // C: ONNXL_STATUS_LIMIT_EXCEEDED with that message (default options: any thread count).
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let mut out = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path, default options, a writable out pointer.
    let status = unsafe { onnxl_load_model(c_path.as_ptr(), std::ptr::null(), &mut out) };
    assert_eq!(status, OnnxlStatus::LimitExceeded);
    assert!(out.is_null());
    let message = last_error();
    assert!(
        message.contains("more than 2147483647 elements") && message.contains("float_data"),
        "{message}"
    );
}

#[test]
fn c_functions_refuse_a_list_of_more_than_max_len_elements_up_front() {
    let t = onnxl_tensor_proto_new();
    let one = [1.5f32];
    // SAFETY: a live tensor; the count is refused before `data` is read (only one value is
    // readable there).
    let status = unsafe { onnxl_tensor_proto_assign_float_data(t, one.as_ptr(), MAX_LEN + 1) };
    assert_eq!(status, OnnxlStatus::LimitExceeded);
    assert!(
        last_error().contains("at most 2147483647 elements"),
        "{}",
        last_error()
    );
    // SAFETY: as above, with the one readable value.
    unsafe {
        assert_eq!(onnxl_tensor_proto_float_data_size(t), 0, "left unchanged");
        assert_eq!(
            onnxl_tensor_proto_assign_float_data(t, one.as_ptr(), 1),
            OnnxlStatus::Ok
        );
        assert_eq!(onnxl_tensor_proto_float_data_size(t), 1);
        onnxl_tensor_proto_free(t);
    }
}
