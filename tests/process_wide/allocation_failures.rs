//! Every heap allocation of a parse may fail without aborting the process: the test binary's
//! allocator (`heap`) refuses the k-th allocation made by the parsing thread, for every k from the
//! first to the last allocation of a successful parse, and each parse must then end in
//! `Error::OutOfMemory` (C `ONNXL_STATUS_OUT_OF_MEMORY`) naming the size refused — never in an
//! abort (`handle_alloc_error`), a panic or a wrong result. The models hold every kind of
//! allocation a parse makes: sub-message boxes (singular fields and oneof members), chunks of
//! repeated message fields, strings, packed and unpacked scalars, unknown fields and unknown
//! enum values, payload copies, and nesting through the fields that close a cycle.

use std::sync::Arc;

use onnx_light::proto::{Message, ModelProto};
use onnx_light::{Error, ParseOptions};

use crate::common;
use crate::heap::armed;

/// A model with every kind of allocation a parse makes (see the module comment).
fn rich_model() -> Vec<u8> {
    use onnx_light::proto::{AttributeProto, GraphProto, TensorProto, TypeProto};
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    m.set_producer_name("allocation failures");
    m.add_opset_import().set_version(21);
    let kv = m.add_metadata_props();
    kv.set_key("k");
    kv.set_value("v");
    let g = m.mutable_graph();
    g.set_name("main");
    for i in 0..3 {
        let t = g.add_initializer();
        t.set_name(format!("w{i}"));
        t.set_data_type(1);
        t.add_dims(2);
        t.add_dims(3);
        t.set_raw_data(vec![i as u8; 24]);
        let s = g.add_initializer();
        s.set_name(format!("s{i}"));
        s.set_data_type(8);
        s.add_string_data("a");
        s.add_string_data("bc");
        let f = g.add_initializer();
        f.set_name(format!("f{i}"));
        f.set_data_type(1);
        f.add_dims(4);
        for v in [1.0f32, 2.0, 3.0, 4.0] {
            f.add_float_data(v);
        }
    }
    let vi = g.add_input();
    vi.set_name("x");
    let shape = vi.mutable_type().mutable_tensor_type().mutable_shape();
    shape.add_dim().set_dim_value(1);
    shape.add_dim().set_dim_param("n");
    let seq = g.add_value_info();
    seq.set_name("seq");
    seq.mutable_type()
        .mutable_sequence_type()
        .mutable_elem_type()
        .mutable_map_type()
        .mutable_value_type()
        .mutable_tensor_type()
        .set_elem_type(1);
    // Nodes whose attributes hold a tensor, a sparse tensor, a type, graphs (three levels
    // deep), lists, and an enum value outside the enum (kept as an unknown field).
    let mut sub = GraphProto::new();
    sub.set_name("level");
    for level in 0..3 {
        let mut outer = GraphProto::new();
        outer.set_name(format!("level{level}"));
        let n = outer.add_node();
        n.set_op_type("If");
        n.add_input("c");
        let a = n.add_attribute();
        a.set_name("then_branch");
        a.set_type(5);
        *a.mutable_g() = sub.clone();
        let b = n.add_attribute();
        b.set_name("branches");
        b.mutable_graphs().push(sub.clone());
        b.mutable_graphs().push(sub);
        sub = outer;
    }
    let n = g.add_node();
    n.set_op_type("Loop");
    n.add_input("x");
    n.add_output("y");
    let a = n.add_attribute();
    a.set_name("body");
    *a.mutable_g() = sub;
    let mut t = TensorProto::new();
    t.set_name("t");
    t.add_dims(2);
    t.add_int64_data(5);
    t.add_int64_data(-7);
    let mut attr = AttributeProto::new();
    attr.set_name("value");
    attr.set_type(99); // not an AttributeType: an unknown enum value
    *attr.mutable_t() = t.clone();
    *attr.mutable_sparse_tensor().mutable_values() = t.clone();
    attr.mutable_sparse_tensor().add_dims(8);
    let mut tp = TypeProto::new();
    tp.mutable_optional_type()
        .mutable_elem_type()
        .mutable_sparse_tensor_type()
        .set_elem_type(1);
    *attr.mutable_tp() = tp;
    attr.add_ints(1);
    attr.add_ints(300);
    attr.add_floats(0.5);
    attr.add_strings("s");
    attr.mutable_tensors().push(t);
    n.mutable_attribute().push(attr);
    let mut bytes = m.serialize_to_vec();
    // An unknown field (number 100, LEN) at the top level.
    bytes.extend_from_slice(&common::wrap(100, b"unknown"));
    bytes
}

fn sample_models() -> Vec<(String, Vec<u8>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![("rich model".to_string(), rich_model())];
    for name in [
        "samples/mlp.onnx",
        "fuzz/corpus/parse_model/test_operator_convtranspose.onnx",
        "fuzz/corpus/parse_model/test_gradient_of_add_and_mul.onnx",
    ] {
        out.push((name.to_string(), std::fs::read(root.join(name)).unwrap()));
    }
    out
}

/// One way of parsing: a name and the parse.
type Mode = (
    &'static str,
    fn(&Arc<Vec<u8>>) -> onnx_light::Result<ModelProto>,
);

const MODES: &[Mode] = &[
    ("copy", |b| {
        onnx_light::parse_from_bytes::<ModelProto>(b, &ParseOptions::default())
    }),
    ("no_copy", |b| {
        let opts = ParseOptions {
            no_copy: true,
            ..Default::default()
        };
        onnx_light::parse_from_shared::<ModelProto, _>(b.clone(), &opts)
    }),
    ("skip_raw_data", |b| {
        let opts = ParseOptions {
            skip_raw_data: true,
            ..Default::default()
        };
        onnx_light::parse_from_bytes::<ModelProto>(b, &opts)
    }),
];

#[test]
fn every_allocation_of_a_parse_may_fail() {
    let _alone = crate::alone();
    // As shipped (repeated-field chunks cut from mapped blocks: when a block cannot be had, the
    // chunk falls back to the global allocator), and with every chunk from the global
    // allocator, so that each chunk allocation is refused in turn too.
    let mut swept = 0;
    for regions_off in [false, true] {
        onnx_light::codec::set_metadata_regions_off(regions_off);
        swept += sweep_every_allocation(regions_off);
    }
    onnx_light::codec::set_metadata_regions_off(false);
    assert!(swept >= 600, "{swept} allocations swept");
}

/// Refuses each allocation of the parse of each sample model in turn; returns their number.
/// With `regions_off`, every chunk and sub-message box is an allocation of its own; otherwise
/// most come from the parse's blocks.
fn sweep_every_allocation(regions_off: bool) -> usize {
    let mut swept = 0;
    for (name, bytes) in sample_models() {
        let bytes = Arc::new(bytes);
        for (mode, parse) in MODES {
            let (expected, total) = armed(usize::MAX, || parse(&bytes));
            let expected = expected
                .unwrap_or_else(|e| panic!("{name} ({mode}): {e}"))
                .serialize_to_vec();
            assert!(
                total > if regions_off { 5 } else { 0 },
                "{name} ({mode}): only {total} allocations"
            );
            // The allocations of a parse of nothing are its fixed set-up (a handle on the
            // input's owner, for strings that borrow from it: an `Arc`, which cannot fail
            // cleanly): not refused.
            let (_, setup) = armed(usize::MAX, || parse(&Arc::new(Vec::new())));
            assert!(setup <= 2, "{name} ({mode}): {setup} set-up allocations");
            for k in setup..total {
                let (r, _) = armed(k, || parse(&bytes));
                match r {
                    Err(Error::OutOfMemory(msg)) => {
                        assert!(
                            msg.contains("cannot allocate"),
                            "{name} ({mode}) #{k}: {msg}"
                        )
                    }
                    Err(e) => panic!("{name} ({mode}): allocation #{k} refused: {e}"),
                    // An allocation whose failure has a fallback (none expected, but a
                    // result must then be the right one).
                    Ok(m) => assert_eq!(
                        m.serialize_to_vec(),
                        expected,
                        "{name} ({mode}): allocation #{k} refused: a different model"
                    ),
                }
            }
            println!(
                "{name} ({mode}): {total} allocations, {} refused in turn",
                total - setup
            );
            swept += total - setup;
        }
    }
    swept
}

/// Every allocation of a deep copy may fail too (`TryClone`, what the C++ classes' copy
/// constructor and `CopyFrom` and C `onnxl_*_copy_from` use): each refusal is an error carrying
/// the refused layout (C: `ONNXL_STATUS_OUT_OF_MEMORY`, the destination unchanged), never an
/// abort; the copies that succeed are equal to the original.
#[test]
fn every_allocation_of_a_copy_may_fail() {
    use onnx_light::error::TryClone;
    use onnx_light::ffi::{accessors, status::OnnxlStatus};
    let mut swept = 0;
    for (name, bytes) in sample_models() {
        let m =
            onnx_light::parse_from_bytes::<ModelProto>(&bytes, &ParseOptions::default()).unwrap();
        let (copy, total) = armed(usize::MAX, || m.try_clone());
        assert!(copy.unwrap() == m, "{name}: the copy differs");
        assert!(total > 3, "{name}: only {total} allocations");
        for k in 0..total {
            let (r, _) = armed(k, || m.try_clone());
            let layout = r.expect_err(&format!("{name}: allocation #{k} refused, copy made"));
            assert!(layout.size() > 0, "{name} #{k}");
        }
        // The C ABI: the destination keeps its content.
        let src = accessors::onnxl_model_proto_new();
        let dst = accessors::onnxl_model_proto_new();
        // SAFETY: live handles made above; the bytes are a valid slice.
        unsafe {
            assert_eq!(
                accessors::onnxl_model_proto_parse_from_bytes(
                    src,
                    bytes.as_ptr(),
                    bytes.len(),
                    std::ptr::null()
                ),
                OnnxlStatus::Ok
            );
            accessors::onnxl_model_proto_set_producer_name(dst, c"kept".as_ptr().cast(), 4);
            let (s, _) = armed(total / 2, || {
                accessors::onnxl_model_proto_copy_from(dst, src)
            });
            assert_eq!(s, OnnxlStatus::OutOfMemory, "{name}");
            let kept = accessors::onnxl_model_proto_producer_name(dst);
            assert_eq!(
                std::slice::from_raw_parts(kept.data.cast::<u8>(), kept.len),
                b"kept"
            );
            assert_eq!(
                accessors::onnxl_model_proto_copy_from(dst, src),
                OnnxlStatus::Ok
            );
            accessors::onnxl_model_proto_free(src);
            accessors::onnxl_model_proto_free(dst);
        }
        swept += total;
    }
    assert!(swept >= 100, "{swept} allocations swept");
}
