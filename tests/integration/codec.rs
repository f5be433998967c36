//! Codec behaviour that the protobuf comparison in tests/compat cannot show: error values with
//! offsets and field paths, ownership of tensor bytes (the README's table), parallel == sequential,
//! option validation and atomic saves.

use std::sync::Arc;

use onnx_light::proto::{
    AttributeProto, GraphProto, Message, ModelProto, NodeProto, TensorProto, TypeProto,
    TypeProtoSequence,
};
use onnx_light::{
    DecodeErrorKind, Error, FileLoadMode, LoadOptions, ParseOptions, Repeated, SerializeOptions,
    parse_from_bytes, parse_from_shared,
};

const SAMPLE: &[u8] = include_bytes!("../../samples/mlp.onnx");

fn tensor(name: &str, bytes: usize, seed: u8) -> TensorProto {
    let mut t = TensorProto::new();
    t.set_name(name);
    t.set_data_type(2);
    t.add_dims(bytes as i64);
    t.set_raw_data(
        (0..bytes)
            .map(|i| (i as u8).wrapping_mul(seed))
            .collect::<Vec<u8>>(),
    );
    t
}

/// A model with `n` initializers of `size` bytes each and a few nodes.
fn model(n: usize, size: usize) -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    m.add_opset_import().set_version(21);
    let g = m.mutable_graph();
    g.set_name("g");
    for i in 0..n {
        g.mutable_initializer()
            .push(tensor(&format!("w{i}"), size, i as u8 + 1));
        let node = g.add_node();
        node.set_op_type("Relu");
        node.add_input(format!("w{i}"));
        node.add_output(format!("y{i}"));
    }
    m
}

fn decode_err(e: Error) -> onnx_light::DecodeError {
    match e {
        Error::Decode(d) => *d,
        other => panic!("expected a decode error, got {other:?}"),
    }
}

#[test]
fn sample_model_parses_and_reserializes_identically() {
    let m: ModelProto = parse_from_bytes(SAMPLE, &ParseOptions::default()).unwrap();
    assert_eq!(m.graph().node().len(), 6);
    assert_eq!(m.graph().initializer().len(), 4);
    assert_eq!(m.serialize_to_vec(), SAMPLE);
}

#[test]
fn errors_name_offset_and_field_path() {
    let mut m = model(14, 8);
    m.mutable_graph().mutable_initializer()[12].set_float_data([1.0, 2.0]);
    let mut bytes = m.serialize_to_vec();
    // float_data of initializer 12 is packed: tag 0x22, length 8, then 1.0f32. Make the length
    // 7, which is not a multiple of 4.
    let at = bytes
        .windows(6)
        .position(|w| w == [0x22, 0x08, 0x00, 0x00, 0x80, 0x3f])
        .unwrap();
    bytes[at + 1] = 7;
    let e =
        decode_err(parse_from_bytes::<ModelProto>(&bytes, &ParseOptions::default()).unwrap_err());
    assert_eq!(e.path(), "graph.initializer[12].float_data");
    assert_eq!(e.kind, DecodeErrorKind::BadPackedLength);
    assert_eq!(e.offset as usize, at + 1, "offset of the length prefix");
    assert!(e.offset > 0 && (e.offset as usize) < bytes.len());
    let text = e.to_string();
    assert!(
        text.contains("ModelProto.graph.initializer[12]") && text.contains("at byte"),
        "{text}"
    );

    // Parallel parsing reports the same error.
    let opts = ParseOptions {
        num_threads: 4,
        min_parallel_block_size: 0,
        ..Default::default()
    };
    let e4 = decode_err(parse_from_bytes::<ModelProto>(&bytes, &opts).unwrap_err());
    assert_eq!(e4, e);
}

#[test]
fn wire_format_violations_are_errors() {
    type Expect = fn(&DecodeErrorKind) -> bool;
    let cases: &[(&[u8], Expect)] = &[
        (&[0x00, 0x01], |k| {
            matches!(k, DecodeErrorKind::InvalidFieldNumber(0))
        }),
        (&[0x0e], |k| {
            matches!(k, DecodeErrorKind::InvalidWireType(6))
        }),
        (&[0x0f], |k| {
            matches!(k, DecodeErrorKind::InvalidWireType(7))
        }),
        (&[0x08], |k| matches!(k, DecodeErrorKind::Truncated)),
        (
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ],
            |k| matches!(k, DecodeErrorKind::VarintOverflow),
        ),
        (&[0x3a, 0x05, 0x01], |k| {
            matches!(
                k,
                DecodeErrorKind::LengthPastEnd {
                    length: 5,
                    available: 1
                }
            )
        }),
        (
            &[0x3a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
            |k| matches!(k, DecodeErrorKind::LengthPastEnd { .. }),
        ),
        (&[0x0c], |k| matches!(k, DecodeErrorKind::UnmatchedGroup(1))),
        (&[0x0b, 0x08, 0x01], |k| {
            matches!(k, DecodeErrorKind::UnmatchedGroup(1))
        }),
        (&[0x0b, 0x14], |k| {
            matches!(k, DecodeErrorKind::UnmatchedGroup(2))
        }),
        (&[0x22, 0x03, 0, 0, 0], |k| {
            matches!(k, DecodeErrorKind::BadPackedLength)
        }),
        (&[0x3a, 0x01, 0x80], |k| {
            matches!(k, DecodeErrorKind::BadPackedLength)
        }),
        (&[0xf8, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00], |k| {
            matches!(k, DecodeErrorKind::InvalidFieldNumber(_))
        }),
    ];
    for (bytes, expect) in cases {
        let e = decode_err(TensorProto::parse_from_bytes(bytes).unwrap_err());
        assert!(expect(&e.kind), "{bytes:02x?}: got {:?}", e.kind);
    }
}

#[test]
fn recursion_limit_is_enforced_and_configurable() {
    // TypeProto nested through sequence_type.elem_type: two levels per step.
    let mut t = TypeProto::new();
    t.mutable_tensor_type().set_elem_type(1);
    for _ in 0..60 {
        let mut outer = TypeProto::new();
        let mut seq = TypeProtoSequence::new();
        seq.set_elem_type(t);
        *outer.mutable_sequence_type() = seq;
        t = outer;
    }
    let bytes = t.serialize_to_vec();
    let e = decode_err(TypeProto::parse_from_bytes(&bytes).unwrap_err());
    assert_eq!(e.kind, DecodeErrorKind::RecursionLimit(100));
    let opts = ParseOptions {
        max_recursion_depth: 200,
        ..Default::default()
    };
    let back: TypeProto = parse_from_bytes(&bytes, &opts).unwrap();
    assert_eq!(back, t);
    let too_deep = ParseOptions {
        max_recursion_depth: 100_000,
        ..Default::default()
    };
    assert!(matches!(
        parse_from_bytes::<TypeProto>(&bytes, &too_deep),
        Err(Error::InvalidOption { .. })
    ));
}

#[test]
fn max_tensor_size_is_checked_before_allocating() {
    let m = model(2, 4096);
    let bytes = m.serialize_to_vec();
    let opts = ParseOptions {
        max_tensor_size_bytes: 4095,
        ..Default::default()
    };
    let e = decode_err(parse_from_bytes::<ModelProto>(&bytes, &opts).unwrap_err());
    assert_eq!(
        e.kind,
        DecodeErrorKind::TensorTooLarge {
            size: 4096,
            limit: 4095
        }
    );
    assert_eq!(e.path(), "graph.initializer[0].raw_data");
    let ok = ParseOptions {
        max_tensor_size_bytes: 4096,
        ..Default::default()
    };
    assert!(parse_from_bytes::<ModelProto>(&bytes, &ok).is_ok());
}

#[test]
fn parallel_parse_equals_sequential() {
    let m = model(64, 3000);
    let bytes = m.serialize_to_vec();
    let seq: ModelProto = parse_from_bytes(&bytes, &ParseOptions::default()).unwrap();
    for threads in [2, 4, -1] {
        let opts = ParseOptions {
            num_threads: threads,
            min_parallel_block_size: 0,
            ..Default::default()
        };
        let before = onnx_light::codec::parallel_parse_count();
        let par: ModelProto = parse_from_bytes(&bytes, &opts).unwrap();
        assert!(
            onnx_light::codec::parallel_parse_count() > before,
            "parallel path not taken"
        );
        assert_eq!(par, seq);
        assert_eq!(par.serialize_to_vec(), bytes);
    }
    // A model whose graph field appears twice (protobuf merges them) in parallel mode.
    let mut twice = bytes.clone();
    twice.extend_from_slice(&bytes);
    let seq2: ModelProto = parse_from_bytes(&twice, &ParseOptions::default()).unwrap();
    let par2: ModelProto = parse_from_bytes(
        &twice,
        &ParseOptions {
            num_threads: 3,
            min_parallel_block_size: 0,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(seq2.graph().initializer().len(), 128);
    assert_eq!(par2, seq2);
}

/// The README's loading-scenarios table, row by row.
#[test]
fn ownership_table_of_seed_000() {
    let m = model(3, 4096);
    let bytes = m.serialize_to_vec();
    let dir = tempdir();
    let path = dir.join("m.onnx");
    std::fs::write(&path, &bytes).unwrap();

    // load(bytes, no_copy=False): owned copy.
    let owned: ModelProto = parse_from_bytes(&bytes, &ParseOptions::default()).unwrap();
    let t = &owned.graph().initializer()[0];
    assert!(!t.raw_data_opt().unwrap().is_borrowed());

    // load(bytes, no_copy=True): borrowed pointer into the caller's bytes.
    let shared = Arc::new(bytes.clone());
    let opts = ParseOptions {
        no_copy: true,
        // Borrow wherever the payload is (with the default 64, a payload that is not aligned
        // in the input would be an aligned copy: tests/integration/alignment.rs).
        alignment: 1,
        ..Default::default()
    };
    let borrowed: ModelProto = parse_from_shared(shared.clone(), &opts).unwrap();
    let span = borrowed.graph().initializer()[0].raw_data_opt().unwrap();
    assert!(span.is_borrowed());
    let range = shared.as_ptr_range();
    assert!(
        range.contains(&span.as_ptr()),
        "payload must point into the input bytes"
    );
    // The owner token keeps the bytes alive after the model and the caller's handle are gone.
    let owner = span.owner().unwrap();
    let (ptr, len) = (span.as_ptr(), span.len());
    let expected = owned.graph().initializer()[0].raw_data().to_vec();
    drop(borrowed);
    drop(shared);
    // SAFETY (test): `owner` keeps the input buffer alive.
    let still = unsafe { std::slice::from_raw_parts(ptr, len) };
    assert_eq!(still, &expected[..]);
    drop(owner);

    // load(file, no_copy=False): owned copy, for both read modes.
    for mode in [FileLoadMode::Mmap, FileLoadMode::Buffered] {
        let opts = ParseOptions {
            file_load_mode: mode,
            ..Default::default()
        };
        let f: ModelProto =
            onnx_light::load_model(&path, &LoadOptions::from(opts.clone())).unwrap();
        assert!(
            !f.graph().initializer()[0]
                .raw_data_opt()
                .as_ref()
                .unwrap()
                .is_borrowed()
        );
        assert_eq!(f, owned);
    }
    // load(file, no_copy=True): borrowed with a shared owner (better than the C++ library,
    // which copies here); valid after the model is dropped while the token is held.
    for mode in [FileLoadMode::Mmap, FileLoadMode::Buffered] {
        let opts = ParseOptions {
            file_load_mode: mode,
            no_copy: true,
            // Borrow wherever the payload is in the file (see tests/integration/alignment.rs for
            // the aligned copies of the default).
            alignment: 1,
            ..Default::default()
        };
        let f: ModelProto =
            onnx_light::load_model(&path, &LoadOptions::from(opts.clone())).unwrap();
        let span = f.graph().initializer()[2].raw_data_opt().unwrap();
        assert!(span.is_borrowed() && !span.is_unowned_borrow());
        let owner = span.owner().unwrap();
        let (ptr, len) = (span.as_ptr(), span.len());
        let clone = f.clone();
        assert!(
            clone.graph().initializer()[2]
                .raw_data_opt()
                .as_ref()
                .unwrap()
                .is_borrowed(),
            "clone keeps borrows"
        );
        drop(f);
        drop(clone);
        // SAFETY (test): the owner token keeps the mapping / buffer alive.
        let still = unsafe { std::slice::from_raw_parts(ptr, len) };
        assert_eq!(still, owned.graph().initializer()[2].raw_data());
        drop(owner);
    }
    // Small payloads (below raw_data_threshold) are copied even with no_copy.
    let small = model(1, 16).serialize_to_vec();
    let f: ModelProto = parse_from_shared(
        Arc::new(small),
        &ParseOptions {
            no_copy: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(
        !f.graph().initializer()[0]
            .raw_data_opt()
            .as_ref()
            .unwrap()
            .is_borrowed()
    );
}

#[test]
fn unowned_no_copy_borrows_caller_bytes() {
    let bytes = model(2, 2048).serialize_to_vec();
    let opts = ParseOptions {
        no_copy: true,
        ..Default::default()
    };
    // SAFETY (test): `bytes` outlives `m`.
    let m: ModelProto = unsafe { onnx_light::parse_from_bytes_unowned(&bytes, &opts) }.unwrap();
    let span = m.graph().initializer()[1].raw_data_opt().unwrap();
    assert!(span.is_unowned_borrow());
    assert!(bytes.as_ptr_range().contains(&span.as_ptr()));
    assert_eq!(m.serialize_to_vec(), bytes);
}

#[test]
fn skip_raw_data_keeps_structure() {
    let bytes = model(3, 5000).serialize_to_vec();
    let opts = ParseOptions {
        skip_raw_data: true,
        ..Default::default()
    };
    let m: ModelProto = parse_from_bytes(&bytes, &opts).unwrap();
    assert_eq!(m.graph().initializer().len(), 3);
    assert!(
        m.graph()
            .initializer()
            .iter()
            .all(|t| !t.has_raw_data() && t.dims()[..] == [5000])
    );
    assert_eq!(m.graph().node().len(), 3);
}

/// A message with a rare box keeps its unknown fields in it (no inline bytes for them): the box
/// is allocated by the first unknown field only, and the fields round trip byte-identically,
/// after the known ones (the rare ones included), through clone, equality and clearing.
#[test]
fn unknown_fields_of_messages_with_a_rare_box_live_in_it() {
    use onnx_light::proto::{TensorShapeProtoDimension, ValueInfoProto};
    for (what, size, most) in [
        ("NodeProto", size_of::<NodeProto>(), 264),
        ("AttributeProto", size_of::<AttributeProto>(), 120),
        ("ValueInfoProto", size_of::<ValueInfoProto>(), 48),
        ("TypeProto", size_of::<TypeProto>(), 24),
        ("Dimension", size_of::<TensorShapeProtoDimension>(), 48),
    ] {
        assert!(size <= most, "{what} is {size} bytes");
    }
    let unknown = [0xa0, 0x1f, 0x05]; // field 500, varint 5
    let mut node = NodeProto::new();
    node.set_op_type("Add");
    node.add_input("x");
    let plain = node.serialize_to_vec();
    let back = NodeProto::parse_from_bytes(&plain).unwrap();
    assert!(
        !back.rare_is_allocated(),
        "no rare or unknown field: no box"
    );
    assert!(back.unknown_fields().is_empty());

    // The first unknown field allocates the box; a rare field is written before them.
    let mut with_unknown = plain.clone();
    with_unknown.extend_from_slice(&unknown);
    let back = NodeProto::parse_from_bytes(&with_unknown).unwrap();
    assert!(back.rare_is_allocated());
    assert_eq!(back.unknown_fields().as_bytes(), &unknown);
    assert_eq!(back.serialize_to_vec(), with_unknown);
    assert_ne!(back, node, "unknown fields take part in equality");
    assert_eq!(back.clone(), back);
    let mut edited = back.clone();
    edited.set_overload("o");
    let out = edited.serialize_to_vec();
    assert!(out.ends_with(&unknown), "unknown fields are written last");
    assert_eq!(out.len(), with_unknown.len() + 3, "overload written once");
    assert_eq!(NodeProto::parse_from_bytes(&out).unwrap(), edited);
    // Cleared through the trait: equal to a message that never had any (box or not).
    let mut cleared = back.clone();
    cleared.unknown_fields_mut().clear();
    assert_eq!(cleared, node);
    assert_eq!(cleared.serialize_to_vec(), plain);

    // An out-of-range enum value is an unknown field too, re-encoded canonically.
    let mut attr = AttributeProto::new();
    attr.set_name("a");
    let mut bytes = attr.serialize_to_vec();
    bytes.extend_from_slice(&[0xa0, 0x01, 0x63]); // type (field 20) = 99
    let attr = AttributeProto::parse_from_bytes(&bytes).unwrap();
    assert!(!attr.has_type());
    assert_eq!(attr.unknown_fields().as_bytes(), &[0xa0, 0x01, 0x63]);
    assert_eq!(attr.serialize_to_vec(), bytes);

    // Every message with a rare box, inside a model: the model re-serializes byte-identically.
    let mut dim = TensorShapeProtoDimension::new();
    dim.set_dim_param("batch");
    let mut vi = ValueInfoProto::new();
    vi.set_name("y");
    vi.mutable_type()
        .mutable_tensor_type()
        .mutable_shape()
        .mutable_dim()
        .push(dim);
    let mut t = tensor("w", 4, 1);
    vi.unknown_fields_mut().push_raw(&unknown);
    vi.mutable_type().unknown_fields_mut().push_raw(&unknown);
    let shape = vi.mutable_type().mutable_tensor_type().mutable_shape();
    shape.mutable_dim()[0]
        .unknown_fields_mut()
        .push_raw(&unknown);
    t.unknown_fields_mut().push_raw(&unknown);
    let mut model = ModelProto::new();
    let g = model.mutable_graph();
    g.mutable_value_info().push(vi);
    g.mutable_initializer().push(t);
    let mut node = back;
    node.mutable_attribute().push(attr);
    g.mutable_node().push(node);
    let bytes = model.serialize_to_vec();
    let parsed = ModelProto::parse_from_bytes(&bytes).unwrap();
    assert_eq!(parsed, model);
    assert_eq!(parsed.serialize_to_vec(), bytes);
    let g = parsed.graph();
    assert_eq!(g.initializer()[0].unknown_fields().as_bytes(), &unknown);
    assert_eq!(
        g.initializer()[0]
            .clone_without_payload()
            .unknown_fields()
            .as_bytes(),
        &unknown
    );
    let d = &g.value_info()[0].r#type().tensor_type().shape().dim()[0];
    assert_eq!(d.unknown_fields().as_bytes(), &unknown);
    assert_eq!(
        g.value_info()[0].r#type().unknown_fields().as_bytes(),
        &unknown
    );
}

#[test]
fn unknown_fields_survive_edits_and_messages_merge() {
    let mut node = NodeProto::new();
    node.set_op_type("Add");
    let mut bytes = node.serialize_to_vec();
    bytes.extend_from_slice(&[0xa0, 0x1f, 0x05]); // field 500, varint 5
    let mut back = NodeProto::parse_from_bytes(&bytes).unwrap();
    assert_eq!(back.unknown_fields().as_bytes(), &[0xa0, 0x1f, 0x05]);
    back.set_name("n");
    let out = back.serialize_to_vec();
    assert!(
        out.ends_with(&[0xa0, 0x1f, 0x05]),
        "unknown fields are written last"
    );

    // Merging: repeated appends, scalars overwrite, messages merge.
    let mut a = AttributeProto::new();
    a.set_name("x");
    a.add_ints(1);
    let mut merged = a.clone();
    let mut b = AttributeProto::new();
    b.set_name("y");
    b.add_ints(2);
    merged
        .merge_from_bytes(
            &b.serialize_to_vec(),
            &onnx_light::wire::DecodeConfig::default(),
        )
        .unwrap();
    assert_eq!(merged.name(), "y");
    assert_eq!(merged.ints()[..], [1, 2]);
}

#[test]
fn presence_is_kept_for_defaults() {
    let mut g = GraphProto::new();
    g.set_name("");
    let mut m = ModelProto::new();
    m.set_ir_version(0);
    m.set_graph(g);
    let bytes = m.serialize_to_vec();
    assert_eq!(bytes, vec![0x08, 0x00, 0x3a, 0x02, 0x12, 0x00]);
    let back = ModelProto::parse_from_bytes(&bytes).unwrap();
    assert!(back.has_ir_version() && back.graph().has_name());
}

#[test]
fn options_are_validated() {
    let bytes = model(1, 8).serialize_to_vec();
    for bad in [
        ParseOptions {
            num_threads: 0,
            ..Default::default()
        },
        ParseOptions {
            alignment: 3,
            ..Default::default()
        },
    ] {
        assert!(matches!(
            parse_from_bytes::<ModelProto>(&bytes, &bad),
            Err(Error::InvalidOption { .. })
        ));
    }
    let m = model(1, 8);
    let limit = SerializeOptions {
        max_serialized_size_bytes: 10,
        ..Default::default()
    };
    assert!(matches!(
        onnx_light::serialize_to_vec(&m, &limit),
        Err(Error::LimitExceeded(_))
    ));
}

#[test]
fn save_is_atomic_and_reports_io_errors() {
    let dir = tempdir();
    let path = dir.join("model.onnx");
    let first = model(2, 100);
    onnx_light::save_model(&first, &path, &SerializeOptions::default()).unwrap();
    let before = std::fs::read(&path).unwrap();
    // A failing save (size limit) leaves the previous file intact and no temporary files.
    let limit = SerializeOptions {
        max_serialized_size_bytes: 10,
        ..Default::default()
    };
    assert!(onnx_light::save_model(&model(3, 100), &path, &limit).is_err());
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    // Saving into a missing directory is an I/O error naming the path.
    let missing = dir.join("no/such/dir/m.onnx");
    match onnx_light::save_model(&first, &missing, &SerializeOptions::default()) {
        Err(Error::Io { path, .. }) => assert!(path.starts_with(dir.join("no"))),
        other => panic!("expected an I/O error, got {other:?}"),
    }
    // Loading a missing file is an I/O error too.
    assert!(matches!(
        onnx_light::load_model(dir.join("nope.onnx"), &LoadOptions::default()),
        Err(Error::Io { .. })
    ));
    // Round trip through a writer and a reader.
    let mut buf = Vec::new();
    let n =
        onnx_light::serialize_to_writer(&first, &mut buf, &SerializeOptions::default()).unwrap();
    assert_eq!(n as usize, buf.len());
    let back: ModelProto =
        onnx_light::parse_from_reader(&buf[..], &ParseOptions::default()).unwrap();
    assert_eq!(back, first);
}

fn tempdir() -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let d = std::env::temp_dir().join(format!("onnxl-codec-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn parallel_serialize_equals_sequential() {
    // Payloads below and above the deferral size (1 MiB) and above the piece size (8 MiB).
    let mut m = model(3, 100);
    for (i, size) in [(3usize, 1 << 20), (4, 3 << 20), (5, (17 << 20) + 3)] {
        m.mutable_graph()
            .mutable_initializer()
            .push(tensor(&format!("big{i}"), size, i as u8));
    }
    m.mutable_graph()
        .mutable_initializer()
        .push(tensor("tail", 10, 9));
    let sequential = m.serialize_to_vec();
    let dir = tempdir();
    for threads in [2, -1] {
        let opts = SerializeOptions {
            num_threads: threads,
            ..Default::default()
        };
        assert_eq!(onnx_light::serialize_to_vec(&m, &opts).unwrap(), sequential);
        let path = dir.join(format!("p{threads}.onnx"));
        onnx_light::save_model(&m, &path, &opts).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), sequential);
    }
    // Into a caller's buffer, sized once the size is known, with 1 and 2 threads.
    for threads in [1, 2] {
        let opts = SerializeOptions {
            num_threads: threads,
            ..Default::default()
        };
        let mut buf = Vec::new();
        onnx_light::serialize_into(&m, &opts, |len| {
            buf.resize(len, 0xAA);
            Ok(&mut buf[..])
        })
        .unwrap();
        assert_eq!(buf, sequential);
        // A buffer of the wrong size is refused, nothing is written.
        let mut short = vec![0u8; 10];
        let err = onnx_light::serialize_into(&m, &opts, |_| Ok(&mut short[..])).unwrap_err();
        assert!(err.to_string().contains("10 bytes"), "{err}");
        assert_eq!(short, vec![0u8; 10]);
        // The allocator's error is returned as it is.
        let err = onnx_light::serialize_into(&m, &opts, |len| {
            Err(onnx_light::Error::InvalidArgument(format!(
                "no room for {len}"
            )))
        })
        .unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("no room for {}", sequential.len())),
            "{err}"
        );
    }
}

/// A model with tensors in every place: initializers of several sizes, a node attribute, a
/// subgraph, a sparse initializer, a function body.
fn model_with_tensors_everywhere() -> ModelProto {
    let mut m = model(4, 300);
    m.mutable_graph()
        .mutable_initializer()
        .push(tensor("small", 10, 3));
    let mut sub = GraphProto::new();
    sub.set_name("body");
    sub.mutable_initializer().push(tensor("body_w", 500, 5));
    let n = m.mutable_graph().add_node();
    n.set_op_type("If");
    let mut a = AttributeProto::new();
    a.set_name("then_branch");
    a.set_type(5);
    a.set_g(sub);
    n.mutable_attribute().push(a);
    let mut a = AttributeProto::new();
    a.set_name("value");
    a.set_type(4);
    a.set_t(tensor("const", 200, 7));
    n.mutable_attribute().push(a);
    m.mutable_graph().mutable_sparse_initializer().push({
        let mut s = onnx_light::proto::SparseTensorProto::new();
        s.set_values(tensor("sparse_values", 100, 9));
        s.set_indices(tensor("sparse_indices", 800, 11));
        s.set_dims([1000]);
        s
    });
    let mut f = onnx_light::proto::FunctionProto::new();
    f.set_name("fn");
    let mut fnode = NodeProto::new();
    fnode.set_op_type("Constant");
    let mut a = AttributeProto::new();
    a.set_name("value");
    a.set_type(4);
    a.set_t(tensor("fn_const", 700, 13));
    fnode.mutable_attribute().push(a);
    f.mutable_node().push(fnode);
    m.mutable_functions().push(f);
    m
}

#[test]
fn clone_with_tensors_follows_the_visitor() {
    let m = model_with_tensors_everywhere();
    let mut visited = Vec::new();
    m.visit_tensors(&mut |t| visited.push(t.name().to_string()));
    let mut rewritten = Vec::new();
    let copy = m.clone_with_tensors(&mut |t| {
        rewritten.push(t.name().to_string());
        t.clone()
    });
    assert_eq!(copy, m);
    assert_eq!(rewritten, visited);
    assert_eq!(visited.len(), 10, "{visited:?}");
    // A rewrite reaches every tensor and nothing else.
    let renamed = m.clone_with_tensors(&mut |t| {
        let mut c = t.clone_without_payload();
        c.set_name(format!("{}!", t.name()));
        c
    });
    let mut names = Vec::new();
    renamed.visit_tensors(&mut |t| {
        assert!(t.raw_data_opt().is_none());
        names.push(t.name().to_string());
    });
    assert_eq!(
        names,
        visited.iter().map(|n| format!("{n}!")).collect::<Vec<_>>()
    );
    assert!(renamed.graph().node().iter().any(|n| n.op_type() == "If"));
}

/// `SerializeOptions::skip_raw_data` writes, byte for byte, what a parse with
/// `ParseOptions::skip_raw_data` and the same threshold reads, through every writer, and leaves
/// the model alone.
#[test]
fn serialize_skip_raw_data_writes_what_a_skipping_parse_reads() {
    let m = model_with_tensors_everywhere();
    let before = m.clone();
    let dir = tempdir();
    for threshold in [0u64, 64, 250, 600, 1 << 20] {
        let full = onnx_light::serialize_to_vec(&m, &SerializeOptions::default()).unwrap();
        let parsed: ModelProto = parse_from_bytes(
            &full,
            &ParseOptions {
                skip_raw_data: true,
                raw_data_threshold: threshold,
                ..Default::default()
            },
        )
        .unwrap();
        let expected = parsed.serialize_to_vec();
        let mut kept = 0;
        parsed.visit_tensors(&mut |t| kept += usize::from(t.has_raw_data()));
        match threshold {
            0 => assert_eq!(kept, 0),
            t if t >= 1 << 20 => assert_eq!(kept, 10),
            _ => assert!(kept > 0 && kept < 10, "{threshold}: {kept}"),
        }
        for threads in [1, 2] {
            let opts = SerializeOptions {
                skip_raw_data: true,
                raw_data_threshold: threshold,
                num_threads: threads,
                ..Default::default()
            };
            let what = format!("threshold {threshold}, {threads} threads");
            assert_eq!(
                onnx_light::serialize_to_vec(&m, &opts).unwrap(),
                expected,
                "{what}: vec"
            );
            let mut out = Vec::new();
            let n = onnx_light::serialize_to_writer(&m, &mut out, &opts).unwrap();
            assert_eq!((out.len() as u64, &out), (n, &expected), "{what}: writer");
            let mut into = Vec::new();
            onnx_light::serialize_into(&m, &opts, |len| {
                into.resize(len, 0);
                Ok(&mut into[..])
            })
            .unwrap();
            assert_eq!(into, expected, "{what}: into a caller's buffer");
            let path = dir.join("skip.onnx");
            onnx_light::save_model(&m, &path, &opts).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), expected, "{what}: file");
            let enc = onnx_light::EncryptionOptions {
                serialize: opts.clone(),
                ..Default::default()
            };
            let bytes = onnx_light::save_encrypted_model_to_bytes(&m, b"k", &enc).unwrap();
            let back =
                onnx_light::load_encrypted_model_from_bytes(&bytes, b"k", &Default::default())
                    .unwrap();
            assert_eq!(back.serialize_to_vec(), expected, "{what}: encrypted");
            // A standalone tensor too.
            let t = &m.graph().initializer()[0];
            let tb = onnx_light::serialize_to_vec(t, &opts).unwrap();
            let tp: TensorProto = parse_from_bytes(&tb, &ParseOptions::default()).unwrap();
            assert_eq!(tp.has_raw_data(), 300 < threshold, "{what}: tensor");
        }
    }
    assert_eq!(m, before, "the model is not changed");
}

/// A tensor's rarely set fields (int32, string, double and uint64 data, segment, external data
/// references and location, doc string, metadata) live in its rare box, allocated only when one
/// is set; a list of one or two 4-byte scalars (one 8-byte scalar) stays inside the message, in
/// the word of its heap pointer.
#[test]
fn tensors_box_their_rare_fields_and_keep_short_scalar_lists_inline() {
    use onnx_light::proto::TensorProto;
    assert!(
        size_of::<TensorProto>() <= 168,
        "TensorProto is {} bytes",
        size_of::<TensorProto>()
    );
    // A constant as exporters write it (`ConstantOfShape`'s value): dims [1], one float.
    let mut t = TensorProto::new();
    t.set_name("value");
    t.set_data_type(1);
    t.mutable_dims().push(1);
    t.mutable_float_data().push(0.5);
    t.mutable_int64_data().push(7);
    let parsed: TensorProto =
        onnx_light::parse_from_bytes(&t.serialize_to_vec(), &ParseOptions::default()).unwrap();
    assert_eq!(parsed, t);
    assert!(!parsed.rare_is_allocated(), "no rare field: no box");

    // Rare fields round trip, in field-number order with the common ones.
    let mut r = t.clone();
    r.set_doc_string("a tensor");
    r.mutable_double_data().push(2.5);
    r.mutable_uint64_data().extend([1, 2, 3]);
    let bytes = r.serialize_to_vec();
    let parsed: TensorProto =
        onnx_light::parse_from_bytes(&bytes, &ParseOptions::default()).unwrap();
    assert!(parsed.rare_is_allocated());
    assert_eq!(parsed, r);
    assert_eq!(parsed.doc_string(), "a tensor");
    assert_eq!(parsed.uint64_data(), [1, 2, 3]);
    assert_eq!(parsed.serialize_to_vec(), bytes);

    // A tensor whose bytes are in a file: its references and location are in the box.
    let mut e = TensorProto::new();
    e.set_name("w");
    e.set_data_type(1);
    e.mutable_dims().push(1024);
    e.set_data_location(1);
    let entry = e.add_external_data();
    entry.set_key("location");
    entry.set_value("w.bin");
    e.mutable_int32_data().push(5);
    let bytes = e.serialize_to_vec();
    let parsed: TensorProto =
        onnx_light::parse_from_bytes(&bytes, &ParseOptions::default()).unwrap();
    assert!(parsed.rare_is_allocated());
    assert_eq!(parsed, e);
    assert_eq!(parsed.data_location(), 1);
    assert_eq!(parsed.external_data()[0].value(), "w.bin");
    assert_eq!(parsed.serialize_to_vec(), bytes);
}

/// A `Relu` node with `domain` and `doc_string` set when given.
fn node_with_strings(domain: Option<&str>, doc: Option<&str>) -> NodeProto {
    let mut n = NodeProto::new();
    n.set_op_type("Relu");
    if let Some(d) = domain {
        n.set_domain(d);
    }
    if let Some(d) = doc {
        n.set_doc_string(d);
    }
    n
}

/// Exporters write an empty `doc_string` on every node: a parse holds it in a shared read-only
/// value instead of a rare box per node, and every read, write, clone and round trip behaves as
/// if the node had its own.
#[test]
fn empty_node_doc_strings_share_a_preset() {
    let node = |doc: Option<&str>, overload: Option<&str>| {
        let mut n = node_with_strings(None, doc);
        if let Some(o) = overload {
            n.set_overload(o);
        }
        n
    };
    let mut g = GraphProto::new();
    g.mutable_node().push(node(Some(""), None));
    g.mutable_node().push(node(Some(""), None));
    g.mutable_node().push(node(Some("doc"), None));
    g.mutable_node().push(node(Some(""), Some("o")));
    g.mutable_node().push(node(None, None));
    let bytes = g.serialize_to_vec();
    let m: GraphProto = parse_from_bytes(&bytes, &ParseOptions::default()).unwrap();
    assert_eq!(m.serialize_to_vec(), bytes);
    assert_eq!(m, g);
    let (a, b) = (&m.node()[0], &m.node()[1]);
    // No box: both point at the one preset, which reads as a set, empty doc string.
    assert!(!a.rare_is_allocated() && !b.rare_is_allocated());
    assert!(std::ptr::eq(a.rare_address(), b.rare_address()));
    assert!(a.has_doc_string() && a.doc_string().is_empty());
    assert_eq!(a.doc_string_opt().map(|s| s.as_bytes()), Some(&b""[..]));
    // Other values, and an empty one beside another rare field, have boxes of their own.
    assert!(m.node()[2].rare_is_allocated() && m.node()[3].rare_is_allocated());
    assert_eq!(m.node()[2].doc_string().as_bytes(), b"doc");
    assert!(m.node()[3].has_doc_string() && m.node()[3].overload().as_bytes() == b"o");
    assert!(!m.node()[4].rare_is_allocated() && !m.node()[4].has_doc_string());

    // Writes copy the preset into a box; the other nodes keep reading it.
    let mut w = m.clone();
    assert!(std::ptr::eq(w.node()[0].rare_address(), a.rare_address()));
    w.mutable_node()[0].set_doc_string("written");
    w.mutable_node()[1].clear_doc_string();
    assert!(w.node()[0].rare_is_allocated());
    assert_eq!(w.node()[0].doc_string().as_bytes(), b"written");
    assert!(!w.node()[1].has_doc_string());
    assert!(a.has_doc_string() && a.doc_string().is_empty());
    let mut o = m.node()[0].clone();
    o.set_overload("x");
    assert!(o.has_doc_string() && o.doc_string().is_empty());
    let mut e = NodeProto::new();
    e.set_op_type("Relu");
    e.set_doc_string("");
    e.set_overload("x");
    assert_eq!(o, e);

    // A later value replaces the empty one, and an empty one a former value.
    let mut twice = Vec::new();
    let mut n = NodeProto::new();
    n.set_doc_string("");
    twice.extend(n.serialize_to_vec());
    n.set_doc_string("then");
    twice.extend(n.serialize_to_vec());
    let p: NodeProto = parse_from_bytes(&twice, &ParseOptions::default()).unwrap();
    assert_eq!(p.doc_string().as_bytes(), b"then");
    let mut back = n.serialize_to_vec();
    back.extend(node(Some(""), None).serialize_to_vec());
    let q: NodeProto = parse_from_bytes(&back, &ParseOptions::default()).unwrap();
    assert!(q.has_doc_string() && q.doc_string().is_empty());
    assert_eq!(q.op_type().as_bytes(), b"Relu");

    // A node ending with the tag of its doc string has no length byte, even when the byte after
    // the node is a zero.
    let cut = [0x0a, 0x01, 0x32, 0x00];
    let e = decode_err(parse_from_bytes::<GraphProto>(&cut, &ParseOptions::default()).unwrap_err());
    assert!(matches!(e.kind, DecodeErrorKind::Truncated), "{e:?}");
}

/// Exporters write a `domain` on every node (`""`, or that of contrib operators such as
/// `com.microsoft`): a parse points the node to a shared read-only value holding it (and an
/// empty doc string when there is one) instead of a rare box per node; other domains get a box.
#[test]
fn node_domains_share_presets() {
    let node = node_with_strings;
    let cases = [
        (Some(""), Some("")),
        (Some("com.microsoft"), Some("")),
        (Some("com.microsoft"), None),
        (Some("ai.onnx.ml"), Some("")),
        (Some(""), None),
        (None, Some("")),
        (Some("my.domain"), Some("")),
        (Some("com.microsoft"), Some("doc")),
        (None, None),
    ];
    let mut g = GraphProto::new();
    for (domain, doc) in cases {
        g.mutable_node().push(node(domain, doc));
        g.mutable_node().push(node(domain, doc));
    }
    let bytes = g.serialize_to_vec();
    for threads in [1, 2] {
        let opts = ParseOptions {
            num_threads: threads,
            min_parallel_block_size: 0,
            ..ParseOptions::default()
        };
        let m: GraphProto = parse_from_bytes(&bytes, &opts).unwrap();
        assert_eq!(m, g);
        assert_eq!(m.serialize_to_vec(), bytes);
        for (i, &(domain, doc)) in cases.iter().enumerate() {
            let (a, b) = (&m.node()[2 * i], &m.node()[2 * i + 1]);
            assert_eq!(a.has_domain(), domain.is_some(), "{domain:?} {doc:?}");
            assert_eq!(a.domain().as_bytes(), domain.unwrap_or("").as_bytes());
            assert_eq!(a.has_doc_string(), doc.is_some());
            assert_eq!(a.doc_string().as_bytes(), doc.unwrap_or("").as_bytes());
            let boxed = domain == Some("my.domain") || doc == Some("doc");
            assert_eq!(a.rare_is_allocated(), boxed, "{domain:?} {doc:?}");
            // Equal nodes without a box share one preset (none at all when both are unset).
            if !boxed {
                assert!(
                    std::ptr::eq(a.rare_address(), b.rare_address()),
                    "{domain:?} {doc:?}"
                );
            }
        }
        // Presets differ by what they hold.
        assert!(!std::ptr::eq(
            m.node()[0].rare_address(),
            m.node()[2].rare_address()
        ));
        assert!(!std::ptr::eq(
            m.node()[2].rare_address(),
            m.node()[4].rare_address()
        ));

        // A write copies the preset into a box; the node sharing it keeps reading it.
        let mut w = m.clone();
        w.mutable_node()[2].set_domain("ai.onnx");
        assert!(w.node()[2].rare_is_allocated());
        assert_eq!(w.node()[2].domain().as_bytes(), b"ai.onnx");
        assert!(w.node()[2].has_doc_string());
        assert_eq!(w.node()[3].domain().as_bytes(), b"com.microsoft");
        w.mutable_node()[0].clear_domain();
        assert!(!w.node()[0].has_domain() && w.node()[0].has_doc_string());
        assert_eq!(m.node()[0].domain().as_bytes(), b"");
        assert!(m.node()[0].has_domain());
    }

    // A later value replaces an earlier one, preset or not, in either order.
    let mut twice = node(Some("my.domain"), None).serialize_to_vec();
    twice.extend(node(Some("com.microsoft"), Some("")).serialize_to_vec());
    let p: NodeProto = parse_from_bytes(&twice, &ParseOptions::default()).unwrap();
    assert_eq!(p.domain().as_bytes(), b"com.microsoft");
    assert!(p.has_doc_string());
    let mut back = node(Some("com.microsoft"), None).serialize_to_vec();
    back.extend(node(Some("ai.onnx"), None).serialize_to_vec());
    let q: NodeProto = parse_from_bytes(&back, &ParseOptions::default()).unwrap();
    assert!(!q.rare_is_allocated());
    assert_eq!(q.domain().as_bytes(), b"ai.onnx");

    // A domain whose length runs past the node is an error, not a preset.
    let cut = [0x0a, 0x03, 0x3a, 0x05, 0x61];
    let e = decode_err(parse_from_bytes::<GraphProto>(&cut, &ParseOptions::default()).unwrap_err());
    assert!(
        matches!(e.kind, DecodeErrorKind::LengthPastEnd { length: 5, .. }),
        "{e:?}"
    );
}
