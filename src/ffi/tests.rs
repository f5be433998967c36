//! Tests of the C ABI through its exported functions, as a C caller uses them: entry points,
//! NULL and error paths, ownership (owner tokens outliving the model, lent memory released once),
//! and the generated accessors.

use std::ffi::{CStr, CString, c_void};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::accessors::*;
use super::buffer::*;
use super::model::*;
use super::options::*;
use super::owner::*;
use super::status::{OnnxlStatus, last_error};
use crate::proto::{Message, ModelProto};

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/samples/mlp.onnx");

fn sample_path() -> CString {
    CString::new(SAMPLE).unwrap()
}

fn sample_bytes() -> Vec<u8> {
    std::fs::read(SAMPLE).unwrap()
}

/// Loads the sample through the C ABI.
fn load(opts: Option<&OnnxlParseOptions>) -> *mut OnnxlModelProto {
    let mut m = null_mut();
    let opts = opts.map_or(null(), |o| o as *const _);
    // SAFETY: valid path, options and out-pointer.
    let s = unsafe { onnxl_load_model(sample_path().as_ptr(), opts, &mut m) };
    assert_eq!(s, OnnxlStatus::Ok, "{}", last_error());
    assert!(!m.is_null());
    m
}

fn raw_data(t: *const OnnxlTensorProto) -> Vec<u8> {
    let (mut p, mut n) = (null(), 0usize);
    // SAFETY: `t` is live; valid out-pointers.
    unsafe {
        assert_eq!(
            onnxl_tensor_proto_raw_data(t, &mut p, &mut n),
            OnnxlStatus::Ok
        );
        std::slice::from_raw_parts(p, n).to_vec()
    }
}

fn str_of(s: super::OnnxlStr) -> String {
    assert!(!s.data.is_null());
    // SAFETY: a successful view: `len` bytes at `data`.
    String::from_utf8(unsafe { std::slice::from_raw_parts(s.data.cast::<u8>(), s.len) }.to_vec())
        .unwrap()
}

#[test]
fn load_walk_serialize_matches_the_file() {
    let m = load(None);
    // SAFETY: `m` is live until freed at the end; child pointers are used while it lives.
    unsafe {
        assert_eq!(onnxl_model_proto_ir_version(m), 8);
        assert!(onnxl_model_proto_has_ir_version(m));
        assert_eq!(
            str_of(onnxl_model_proto_producer_name(m)),
            "onnx_light-sample"
        );
        let g = onnxl_model_proto_graph(m);
        assert_eq!(str_of(onnxl_graph_proto_name(g)), "mlp");
        assert_eq!(onnxl_graph_proto_node_size(g), 6);
        assert_eq!(onnxl_graph_proto_initializer_size(g), 4);
        let t = onnxl_graph_proto_initializer(g, 0);
        assert!(!t.is_null());
        let rust = ModelProto::parse_from_bytes(&sample_bytes()).unwrap();
        assert_eq!(raw_data(t), rust.graph().initializer[0].raw_data());
        assert_eq!(
            onnxl_tensor_proto_dims_size(t),
            rust.graph().initializer[0].dims.len()
        );
        let dims = onnxl_tensor_proto_dims_data(t);
        assert_eq!(*dims, rust.graph().initializer[0].dims[0]);
        // Out of range: NULL with OUT_OF_RANGE as the last error.
        assert!(onnxl_graph_proto_initializer(g, 4).is_null());
        assert!(last_error().contains("out of range"), "{}", last_error());
        assert_eq!(
            super::status::onnxl_last_error_status(),
            OnnxlStatus::OutOfRange
        );
        // Oneof case through ValueInfo -> TypeProto.
        let tp = onnxl_value_info_proto_type(onnxl_graph_proto_input(g, 0));
        assert_eq!(
            onnxl_type_proto_value_case(tp),
            ONNXL_TYPE_PROTO_VALUE_CASE_TENSOR_TYPE
        );
        let tt = onnxl_type_proto_tensor_type(tp);
        assert_eq!(
            onnxl_type_proto_tensor_elem_type(tt),
            ONNXL_TENSOR_PROTO_DATA_TYPE_FLOAT
        );
        let dim0 = onnxl_tensor_shape_proto_dim(onnxl_type_proto_tensor_shape(tt), 0);
        assert_eq!(
            onnxl_tensor_shape_proto_dimension_value_case(dim0),
            ONNXL_TENSOR_SHAPE_PROTO_DIMENSION_VALUE_CASE_DIM_PARAM
        );
        assert_eq!(
            str_of(onnxl_tensor_shape_proto_dimension_dim_param(dim0)),
            "batch"
        );

        // Serialize: byte-identical to the file (which the official onnx package wrote).
        let mut buf = null_mut();
        assert_eq!(onnxl_serialize_model(m, null(), &mut buf), OnnxlStatus::Ok);
        let bytes = std::slice::from_raw_parts(onnxl_buffer_data(buf), onnxl_buffer_size(buf));
        assert_eq!(bytes, &sample_bytes()[..]);
        assert_eq!(onnxl_model_proto_byte_size(m), bytes.len() as u64);
        onnxl_buffer_free(buf);
        onnxl_model_proto_free(m);
    }
}

#[test]
fn null_and_error_paths() {
    let mut m: *mut OnnxlModelProto = null_mut();
    // SAFETY: NULL and invalid arguments are what is tested; valid ones are valid.
    unsafe {
        assert_eq!(
            onnxl_load_model(null(), null(), &mut m),
            OnnxlStatus::NullPointer
        );
        assert!(m.is_null(), "out untouched on failure");
        assert_eq!(
            onnxl_load_model(sample_path().as_ptr(), null(), null_mut()),
            OnnxlStatus::NullPointer
        );
        let missing = CString::new("/nonexistent/dir/model.onnx").unwrap();
        assert_eq!(
            onnxl_load_model(missing.as_ptr(), null(), &mut m),
            OnnxlStatus::Io
        );
        assert!(
            last_error().contains("/nonexistent/dir/model.onnx"),
            "{}",
            last_error()
        );
        assert!(m.is_null());

        let bytes = sample_bytes();
        let s = onnxl_load_model_from_bytes(bytes.as_ptr(), bytes.len() - 7, null(), &mut m);
        assert_eq!(s, OnnxlStatus::Parse);
        assert!(last_error().contains("at byte"), "{}", last_error());
        assert!(m.is_null());
        assert_eq!(
            onnxl_load_model_from_bytes(null(), 5, null(), &mut m),
            OnnxlStatus::NullPointer
        );
        // Zero bytes are a valid (empty) model.
        assert_eq!(
            onnxl_load_model_from_bytes(null(), 0, null(), &mut m),
            OnnxlStatus::Ok
        );
        assert!(!onnxl_model_proto_has_graph(m));
        onnxl_model_proto_free(m);

        let mut opts = onnxl_parse_options_default();
        opts.file_load_mode = 9;
        m = null_mut();
        assert_eq!(
            onnxl_load_model(sample_path().as_ptr(), &opts, &mut m),
            OnnxlStatus::InvalidArgument
        );
        opts = onnxl_parse_options_default();
        opts.max_recursion_depth = 1;
        assert_eq!(
            onnxl_load_model(sample_path().as_ptr(), &opts, &mut m),
            OnnxlStatus::LimitExceeded
        );
        assert!(m.is_null());

        // Getters on NULL handles return zero values and record the error.
        assert_eq!(onnxl_model_proto_ir_version(null()), 0);
        assert_eq!(last_error(), "message is NULL");
        assert!(!onnxl_model_proto_has_ir_version(null()));
        assert!(onnxl_model_proto_graph(null()).is_null());
        assert!(onnxl_model_proto_producer_name(null()).data.is_null());
        assert_eq!(onnxl_graph_proto_node_size(null()), 0);
        assert_eq!(
            onnxl_model_proto_set_ir_version(null_mut(), 1),
            OnnxlStatus::NullPointer
        );
        assert!(onnxl_model_proto_add_opset_import(null_mut()).is_null());
        onnxl_model_proto_free(null_mut());
        let mut buf = null_mut();
        assert_eq!(
            onnxl_serialize_model(null(), null(), &mut buf),
            OnnxlStatus::NullPointer
        );
        assert!(buf.is_null());
        let mut sopts = onnxl_serialize_options_default();
        sopts.max_serialized_size_bytes = 10;
        let m = load(None);
        assert_eq!(
            onnxl_serialize_model(m, &sopts, &mut buf),
            OnnxlStatus::LimitExceeded
        );
        assert!(buf.is_null());
        onnxl_model_proto_free(m);
    }
}

#[test]
fn owner_outlives_the_model() {
    for (mode, no_copy) in [
        (OnnxlFileLoadMode::Buffered, false),
        (OnnxlFileLoadMode::Mmap, true),
        (OnnxlFileLoadMode::Buffered, true),
    ] {
        let mut opts = onnxl_parse_options_default();
        opts.file_load_mode = mode as u32;
        opts.no_copy = no_copy.into();
        opts.raw_data_threshold = 0;
        // Borrow wherever the payload is in the file.
        opts.alignment = 1;
        let m = load(Some(&opts));
        // SAFETY: handles are used while live; the owner token after the model is freed is the
        // point of the test.
        unsafe {
            let t = onnxl_graph_proto_mutable_initializer(onnxl_model_proto_mutable_graph(m), 1);
            assert_eq!(
                onnxl_tensor_proto_raw_data_is_borrowed(t),
                no_copy,
                "{mode:?}"
            );
            let expected = raw_data(t);
            let (mut before, mut n) = (null(), 0);
            onnxl_tensor_proto_raw_data(t, &mut before, &mut n);
            let owner = onnxl_tensor_proto_raw_data_owner(t);
            assert!(!owner.is_null(), "{}", last_error());
            let (mut after, mut n2) = (null(), 0);
            onnxl_tensor_proto_raw_data(t, &mut after, &mut n2);
            assert_eq!(
                (before, n),
                (after, n2),
                "taking the owner does not move the bytes"
            );
            assert!(onnxl_tensor_proto_raw_data_is_borrowed(t), "shared now");
            onnxl_model_proto_free(m);
            let (mut p, mut len) = (null(), 0);
            assert_eq!(onnxl_owner_data(owner, &mut p, &mut len), OnnxlStatus::Ok);
            assert_eq!(p, before);
            assert_eq!(std::slice::from_raw_parts(p, len), &expected[..]);
            onnxl_owner_release(owner);
        }
    }
}

#[test]
fn no_copy_from_caller_bytes_borrows_without_owner() {
    let bytes = sample_bytes();
    let mut opts = onnxl_parse_options_default();
    opts.no_copy = 1;
    opts.raw_data_threshold = 0;
    let mut m = null_mut();
    // SAFETY: `bytes` outlives the model.
    unsafe {
        assert_eq!(
            onnxl_load_model_from_bytes(bytes.as_ptr(), bytes.len(), &opts, &mut m),
            OnnxlStatus::Ok
        );
        let t = onnxl_graph_proto_mutable_initializer(onnxl_model_proto_mutable_graph(m), 0);
        assert!(onnxl_tensor_proto_raw_data_is_borrowed(t));
        let (mut p, mut n) = (null(), 0);
        onnxl_tensor_proto_raw_data(t, &mut p, &mut n);
        assert!(
            p >= bytes.as_ptr() && p.add(n) <= bytes.as_ptr().add(bytes.len()),
            "points into the caller's bytes"
        );
        assert!(onnxl_tensor_proto_raw_data_owner(t).is_null());
        assert!(
            last_error().contains("without an owner"),
            "{}",
            last_error()
        );
        onnxl_model_proto_free(m);
    }
}

static RELEASED: AtomicUsize = AtomicUsize::new(0);
unsafe extern "C" fn release(user: *mut c_void) {
    RELEASED.fetch_add(1, Ordering::SeqCst);
    // SAFETY: `user` is the Box<Vec<u8>> leaked by the test below, released exactly once.
    drop(unsafe { Box::from_raw(user.cast::<Vec<u8>>()) });
}

#[test]
fn lent_memory_is_released_exactly_once_after_the_last_user() {
    RELEASED.store(0, Ordering::SeqCst);
    let data = Box::new(vec![9u8; 64]);
    let (ptr, len) = (data.as_ptr(), data.len());
    let user = Box::into_raw(data).cast::<c_void>();
    // SAFETY: the lent bytes stay valid until `release` frees them.
    unsafe {
        let t = onnxl_tensor_proto_new();
        assert_eq!(
            onnxl_tensor_proto_set_raw_data_borrowed(null_mut(), ptr, len, Some(release), user),
            OnnxlStatus::NullPointer
        );
        assert_eq!(RELEASED.load(Ordering::SeqCst), 0, "not called on failure");
        assert_eq!(
            onnxl_tensor_proto_set_raw_data_borrowed(t, ptr, len, Some(release), user),
            OnnxlStatus::Ok
        );
        let copy = onnxl_tensor_proto_new();
        assert_eq!(onnxl_tensor_proto_copy_from(copy, t), OnnxlStatus::Ok);
        let owner = onnxl_tensor_proto_raw_data_owner(t);
        assert!(!owner.is_null());
        onnxl_tensor_proto_free(t);
        onnxl_tensor_proto_free(copy);
        assert_eq!(
            RELEASED.load(Ordering::SeqCst),
            0,
            "the owner token still holds it"
        );
        let (mut p, mut n) = (null(), 0);
        onnxl_owner_data(owner, &mut p, &mut n);
        assert_eq!(std::slice::from_raw_parts(p, n), &[9u8; 64][..]);
        onnxl_owner_release(owner);
        assert_eq!(RELEASED.load(Ordering::SeqCst), 1);
    }
}

#[test]
fn build_a_model_through_the_accessors() {
    // SAFETY: every handle is live where used; views are read before the field changes.
    unsafe {
        let m = onnxl_model_proto_new();
        assert_eq!(onnxl_model_proto_set_ir_version(m, 10), OnnxlStatus::Ok);
        let op = onnxl_model_proto_add_opset_import(m);
        assert_eq!(
            onnxl_operator_set_id_proto_set_version(op, 21),
            OnnxlStatus::Ok
        );
        assert_eq!(
            onnxl_operator_set_id_proto_set_domain(op, c"".as_ptr(), 0),
            OnnxlStatus::Ok
        );
        let g = onnxl_model_proto_mutable_graph(m);
        let name = b"g\0ignored";
        assert_eq!(
            onnxl_graph_proto_set_name(g, name.as_ptr().cast(), 1),
            OnnxlStatus::Ok
        );
        let n = onnxl_graph_proto_add_node(g);
        onnxl_node_proto_set_op_type(n, c"Relu".as_ptr(), 4);
        onnxl_node_proto_add_input(n, c"x".as_ptr(), 1);
        onnxl_node_proto_add_output(n, c"y".as_ptr(), 1);
        assert_eq!(str_of(onnxl_node_proto_input(n, 0)), "x");
        assert!(onnxl_node_proto_input(n, 1).data.is_null());
        let a = onnxl_node_proto_add_attribute(n);
        assert_eq!(
            onnxl_attribute_proto_set_type(a, 99),
            OnnxlStatus::InvalidArgument
        );
        assert!(!onnxl_attribute_proto_has_type(a));
        assert_eq!(
            onnxl_attribute_proto_set_type(a, ONNXL_ATTRIBUTE_PROTO_ATTRIBUTE_TYPE_INTS),
            OnnxlStatus::Ok
        );
        onnxl_attribute_proto_assign_ints(a, [1i64, 2, 3].as_ptr(), 3);
        onnxl_attribute_proto_add_ints(a, 4);
        onnxl_attribute_proto_set_ints(a, 0, 7);
        assert_eq!(
            onnxl_attribute_proto_set_ints(a, 9, 7),
            OnnxlStatus::OutOfRange
        );
        assert_eq!(onnxl_attribute_proto_remove_ints(a, 1), OnnxlStatus::Ok);
        let ints = std::slice::from_raw_parts(
            onnxl_attribute_proto_ints_data(a),
            onnxl_attribute_proto_ints_size(a),
        );
        assert_eq!(ints, &[7, 3, 4]);
        let t = onnxl_graph_proto_add_initializer(g);
        onnxl_tensor_proto_assign_dims(t, [2i64].as_ptr(), 1);
        onnxl_tensor_proto_set_data_type(t, ONNXL_TENSOR_PROTO_DATA_TYPE_FLOAT);
        onnxl_tensor_proto_set_raw_data(t, [0u8; 8].as_ptr(), 8);
        // A oneof switches members.
        let tp = onnxl_value_info_proto_mutable_type(onnxl_graph_proto_add_input(g));
        onnxl_type_proto_tensor_set_elem_type(onnxl_type_proto_mutable_tensor_type(tp), 1);
        assert_eq!(
            onnxl_type_proto_value_case(tp),
            ONNXL_TYPE_PROTO_VALUE_CASE_TENSOR_TYPE
        );
        onnxl_type_proto_mutable_sequence_type(tp);
        assert_eq!(
            onnxl_type_proto_value_case(tp),
            ONNXL_TYPE_PROTO_VALUE_CASE_SEQUENCE_TYPE
        );
        assert!(!onnxl_type_proto_has_tensor_type(tp));
        onnxl_type_proto_clear_sequence_type(tp);
        assert_eq!(
            onnxl_type_proto_value_case(tp),
            ONNXL_TYPE_PROTO_VALUE_CASE_NOT_SET
        );

        // The same model built in Rust encodes to the same bytes.
        let mut r = ModelProto::new();
        r.set_ir_version(10);
        let o = r.add_opset_import();
        o.set_version(21);
        o.set_domain("");
        let rg = r.mutable_graph();
        rg.set_name("g");
        let rn = rg.add_node();
        rn.set_op_type("Relu");
        rn.add_input("x");
        rn.add_output("y");
        let ra = rn.add_attribute();
        ra.set_type(7);
        ra.ints = vec![7, 3, 4].into();
        let rt = rg.add_initializer();
        rt.dims = vec![2].into();
        rt.set_data_type(1);
        rt.set_raw_data(vec![0u8; 8]);
        rg.add_input().mutable_type();
        let mut buf = null_mut();
        assert_eq!(
            onnxl_model_proto_serialize(m, null(), &mut buf),
            OnnxlStatus::Ok
        );
        assert_eq!(
            std::slice::from_raw_parts(onnxl_buffer_data(buf), onnxl_buffer_size(buf)),
            &r.serialize_to_vec()[..]
        );
        onnxl_buffer_free(buf);

        // Clear, copy, parse back.
        assert_eq!(onnxl_model_proto_clear_ir_version(m), OnnxlStatus::Ok);
        assert!(!onnxl_model_proto_has_ir_version(m));
        let c = onnxl_model_proto_new();
        assert_eq!(onnxl_model_proto_copy_from(c, m), OnnxlStatus::Ok);
        assert_eq!(onnxl_model_proto_copy_from(c, c), OnnxlStatus::Ok);
        assert_eq!(onnxl_graph_proto_node_size(onnxl_model_proto_graph(c)), 1);
        assert_eq!(onnxl_model_proto_clear(c), OnnxlStatus::Ok);
        assert_eq!(onnxl_model_proto_byte_size(c), 0);
        let bytes = r.serialize_to_vec();
        assert_eq!(
            onnxl_model_proto_parse_from_bytes(c, bytes.as_ptr(), bytes.len(), null()),
            OnnxlStatus::Ok
        );
        assert_eq!(onnxl_model_proto_ir_version(c), 10);
        assert_eq!(
            onnxl_model_proto_parse_from_bytes(c, bytes.as_ptr(), 3, null()),
            OnnxlStatus::Parse
        );
        assert_eq!(onnxl_model_proto_ir_version(c), 10, "unchanged on failure");
        onnxl_model_proto_free(c);
        onnxl_model_proto_free(m);
    }
}

#[test]
fn unknown_fields_are_kept_and_checked() {
    // ir_version = 3, then field 99 (varint 5), unknown to the schema.
    let bytes = [0x08, 0x03, 0x98, 0x06, 0x05];
    let mut m = null_mut();
    // SAFETY: valid arguments.
    unsafe {
        assert_eq!(
            onnxl_load_model_from_bytes(bytes.as_ptr(), bytes.len(), null(), &mut m),
            OnnxlStatus::Ok
        );
        assert!(onnxl_model_proto_has_unknown_fields(m));
        let u = onnxl_model_proto_unknown_fields(m);
        assert_eq!(std::slice::from_raw_parts(u.data, u.len), &bytes[2..]);
        assert_eq!(
            onnxl_model_proto_add_unknown_fields(m, [0x0a, 0x09].as_ptr(), 2),
            OnnxlStatus::InvalidArgument
        );
        assert_eq!(onnxl_model_proto_clear_unknown_fields(m), OnnxlStatus::Ok);
        assert!(!onnxl_model_proto_has_unknown_fields(m));
        assert_eq!(
            onnxl_model_proto_add_unknown_fields(m, bytes[2..].as_ptr(), 3),
            OnnxlStatus::Ok
        );
        let mut buf = null_mut();
        onnxl_serialize_model(m, null(), &mut buf);
        assert_eq!(
            std::slice::from_raw_parts(onnxl_buffer_data(buf), onnxl_buffer_size(buf)),
            &bytes[..]
        );
        onnxl_buffer_free(buf);
        onnxl_model_proto_free(m);
    }
}

#[test]
fn clearing_absent_unknown_fields_allocates_nothing() {
    // A node keeps its unknown fields in its rare box: clearing none must not make the box.
    let mut node = crate::proto::NodeProto::default();
    let m = (&mut node as *mut crate::proto::NodeProto).cast::<OnnxlNodeProto>();
    // SAFETY: a live node used by nothing else during the call.
    assert_eq!(
        unsafe { onnxl_node_proto_clear_unknown_fields(m) },
        OnnxlStatus::Ok
    );
    assert!(!node.rare.is_allocated());
    node.unknown_fields_mut().push_raw(&[0x98, 0x06, 0x05]);
    // SAFETY: as above.
    assert_eq!(
        unsafe { onnxl_node_proto_clear_unknown_fields(m) },
        OnnxlStatus::Ok
    );
    assert!(node.unknown_fields().is_empty());
}

#[test]
fn save_and_load_files() {
    let dir = std::env::temp_dir().join(format!("onnxl-ffi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = CString::new(dir.join("copy.onnx").to_str().unwrap()).unwrap();
    let tpath = CString::new(dir.join("t.pb").to_str().unwrap()).unwrap();
    let m = load(None);
    // SAFETY: valid arguments.
    unsafe {
        assert_eq!(onnxl_save_model(m, path.as_ptr(), null()), OnnxlStatus::Ok);
        assert_eq!(
            std::fs::read(dir.join("copy.onnx")).unwrap(),
            sample_bytes()
        );
        let t = onnxl_graph_proto_initializer(onnxl_model_proto_graph(m), 0);
        assert_eq!(
            onnxl_save_tensor_proto(t, tpath.as_ptr(), null()),
            OnnxlStatus::Ok
        );
        let mut t2 = null_mut();
        assert_eq!(
            onnxl_load_tensor_proto(tpath.as_ptr(), null(), &mut t2),
            OnnxlStatus::Ok
        );
        assert_eq!(raw_data(t2), raw_data(t));
        onnxl_tensor_proto_free(t2);
        assert_eq!(
            onnxl_save_model(m, c"".as_ptr(), null()),
            OnnxlStatus::InvalidArgument
        );
        onnxl_model_proto_free(m);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The C saves (`onnxl_save_model`, `onnxl_save_tensor_proto`) take the destination's save lock:
/// while another holder has it, they wait; once it is released they complete.
#[cfg(unix)]
#[test]
fn c_saves_wait_for_the_save_lock() {
    let dir = std::env::temp_dir().join(format!("onnxl-ffi-lock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let m = load(None) as usize;
    let held = [
        crate::storage::SaveLock::for_file(&dir.join("m.onnx")).unwrap(),
        crate::storage::SaveLock::for_file(&dir.join("t.pb")).unwrap(),
    ];
    let saves: Vec<_> = ["m.onnx", "t.pb"]
        .into_iter()
        .map(|name| {
            let path = CString::new(dir.join(name).to_str().unwrap()).unwrap();
            std::thread::spawn(move || {
                let m = m as *const OnnxlModelProto;
                // SAFETY: the model lives until both threads are joined; only read here.
                unsafe {
                    if name == "m.onnx" {
                        onnxl_save_model(m, path.as_ptr(), null())
                    } else {
                        let t = onnxl_graph_proto_initializer(onnxl_model_proto_graph(m), 0);
                        onnxl_save_tensor_proto(t, path.as_ptr(), null())
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        saves.iter().all(|t| !t.is_finished()),
        "a C save did not wait for the lock"
    );
    assert!(!dir.join("m.onnx").exists() && !dir.join("t.pb").exists());
    drop(held);
    for t in saves {
        assert_eq!(t.join().unwrap(), OnnxlStatus::Ok);
    }
    assert_eq!(std::fs::read(dir.join("m.onnx")).unwrap(), sample_bytes());
    assert!(dir.join("t.pb").exists());
    // SAFETY: made by `load`, freed once.
    unsafe { onnxl_model_proto_free(m as *mut OnnxlModelProto) };
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn version_and_messages_are_c_strings() {
    // SAFETY: static NUL-terminated strings.
    let v = unsafe { CStr::from_ptr(super::status::onnxl_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn element_pointers_survive_adding_more_elements() {
    // SAFETY (test): handles are created and freed here; pointers are used while valid.
    unsafe {
        let m = onnxl_model_proto_new();
        let g = onnxl_model_proto_mutable_graph(m);
        let first = onnxl_graph_proto_add_node(g);
        let mut later = Vec::new();
        for _ in 0..1000 {
            later.push(onnxl_graph_proto_add_node(g));
        }
        // Protobuf's rule: `first` is still the first element, and writing through it works.
        let name = b"first";
        assert_eq!(
            onnxl_node_proto_set_name(first, name.as_ptr().cast(), name.len()),
            OnnxlStatus::Ok
        );
        assert_eq!(onnxl_graph_proto_node(g, 0), first as *const _);
        assert_eq!(
            str_of(onnxl_node_proto_name(onnxl_graph_proto_node(g, 0))),
            "first"
        );
        assert_eq!(onnxl_graph_proto_node(g, 1000), later[999] as *const _);
        // Removing element 0 keeps the others where they are.
        assert_eq!(onnxl_graph_proto_remove_node(g, 0), OnnxlStatus::Ok);
        assert_eq!(onnxl_graph_proto_node(g, 0), later[0] as *const _);
        onnxl_model_proto_free(m);
    }
}

#[test]
fn model_with_weights_stream_writes_and_reads_the_pair() {
    use super::stream::*;
    let dir = std::env::temp_dir().join(format!("onnxl-ffi-pair-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model_path = CString::new(dir.join("m.onnx").to_str().unwrap()).unwrap();
    let weights_path = CString::new(dir.join("m.weights").to_str().unwrap()).unwrap();
    let m = load(None);
    // SAFETY: valid arguments; handles freed at the end.
    unsafe {
        let mut s = null_mut();
        assert_eq!(
            onnxl_stream_open_model_with_weights(
                model_path.as_ptr(),
                weights_path.as_ptr(),
                &mut s
            ),
            OnnxlStatus::Ok
        );
        assert_eq!(
            onnxl_serialize_proto_to_stream(m, s, null()),
            OnnxlStatus::Ok
        );
        // The weights (the 128-byte w1 and 96-byte w2, >= 64 bytes) went to the weights file.
        let weights_len = std::fs::metadata(dir.join("m.weights")).unwrap().len();
        assert!(
            weights_len >= 128 + 96,
            "weights file has {weights_len} bytes"
        );
        let written =
            ModelProto::parse_from_bytes(&std::fs::read(dir.join("m.onnx")).unwrap()).unwrap();
        assert_eq!(written.graph().initializer[0].data_location(), 1);

        // Reading the pair back (no_copy: tensors borrow the mapped weights file).
        let mut opts = onnxl_parse_options_default();
        opts.no_copy = 1;
        let back = onnxl_model_proto_new();
        assert_eq!(
            onnxl_parse_proto_from_stream(back, s, &opts),
            OnnxlStatus::Ok
        );
        let g = onnxl_model_proto_graph(m);
        let g2 = onnxl_model_proto_graph(back);
        for i in 0..onnxl_graph_proto_initializer_size(g) {
            assert_eq!(
                raw_data(onnxl_graph_proto_initializer(g2, i)),
                raw_data(onnxl_graph_proto_initializer(g, i))
            );
        }
        onnxl_model_proto_free(back);
        onnxl_stream_free(s);

        // A weights file outside the model's directory is refused on write.
        let elsewhere = CString::new(
            std::env::temp_dir()
                .join("elsewhere.weights")
                .to_str()
                .unwrap(),
        )
        .unwrap();
        let inner = CString::new(dir.join("sub").join("m.onnx").to_str().unwrap()).unwrap();
        let mut s2 = null_mut();
        assert_eq!(
            onnxl_stream_open_model_with_weights(inner.as_ptr(), elsewhere.as_ptr(), &mut s2),
            OnnxlStatus::Ok
        );
        assert_eq!(
            onnxl_serialize_proto_to_stream(m, s2, null()),
            OnnxlStatus::InvalidArgument
        );
        onnxl_stream_free(s2);
        onnxl_model_proto_free(m);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
