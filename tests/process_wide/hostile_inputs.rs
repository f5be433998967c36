//! Hostile inputs: every case must end in the expected ERROR KIND (or a clean
//! accept where protobuf accepts), never in a panic, an abort, a hang or a large allocation.
//!
//! One test runs every case in sequence so that the counting allocator (`heap`) measures each case
//! alone: a case may not allocate more than `CASE_ALLOC_LIMIT` bytes at its peak. The number of
//! cases is printed and checked (run with `--nocapture` to see the summary).

use std::path::Path;

use crate::common::{nested_graphs, wrap};
use crate::heap::peak_of;

use onnx_light::proto::schema::{self, Kind, Label};
use onnx_light::proto::{Message, MessageVisitor, ModelProto, TensorProto, visit_message_type};
use onnx_light::wire::{put_varint, tag};
use onnx_light::{DecodeErrorKind, Error, LoadOptions, ParseOptions, SaveExternalOptions};

/// Largest peak allocation a single hostile case may reach (inputs are at most a few MB).
const CASE_ALLOC_LIMIT: usize = 64 << 20;

/// Runs the cases and keeps the count per category.
struct Suite {
    counts: Vec<(&'static str, usize)>,
    worst_alloc: usize,
}

impl Suite {
    /// Runs one case: `f` must not panic and its peak allocation stays under the limit.
    fn case(&mut self, category: &'static str, what: &dyn Fn() -> String, f: impl FnOnce()) {
        let ((), grew) = peak_of(f);
        assert!(
            grew <= CASE_ALLOC_LIMIT,
            "{category}: {} allocated {grew} bytes at its peak",
            what()
        );
        self.worst_alloc = self.worst_alloc.max(grew);
        match self.counts.iter_mut().find(|(c, _)| *c == category) {
            Some((_, n)) => *n += 1,
            None => self.counts.push((category, 1)),
        }
    }
    fn total(&self) -> usize {
        self.counts.iter().map(|(_, n)| n).sum()
    }
}

fn corpus_models() -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![(
        "samples/mlp.onnx".to_string(),
        std::fs::read(root.join("samples/mlp.onnx")).unwrap(),
    )];
    let dir = root.join("fuzz/corpus/parse_model");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    names.sort();
    for p in names {
        out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
    }
    out
}

fn decode_kind(e: &Error) -> &DecodeErrorKind {
    match e {
        Error::Decode(d) => &d.kind,
        other => panic!("expected a decode error, got {other}"),
    }
}

fn parse_model(bytes: &[u8]) -> onnx_light::Result<ModelProto> {
    onnx_light::parse_from_bytes::<ModelProto>(bytes, &ParseOptions::default())
}

/// Byte offsets where top-level fields of a (valid) message end.
fn top_level_boundaries(bytes: &[u8]) -> Vec<usize> {
    let cfg = onnx_light::wire::DecodeConfig::default();
    let mut r = onnx_light::wire::Reader::new(bytes, &cfg);
    let mut out = vec![0];
    while let Some(t) = r.read_tag().unwrap() {
        r.skip_value(t).unwrap();
        out.push(r.position());
    }
    out
}

fn truncations(s: &mut Suite) {
    for (name, bytes) in corpus_models() {
        let model = parse_model(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(model.serialize_to_vec(), bytes, "{name} is canonical");
        let boundaries = top_level_boundaries(&bytes);
        // Every byte boundary of small models, a dense sample (~1500 cuts) of larger ones.
        let step = (bytes.len() / 1500).max(1);
        let cuts = (0..bytes.len())
            .step_by(step)
            .chain(boundaries.iter().copied());
        for cut in cuts {
            let what = || format!("{name} cut at {cut}");
            s.case("truncated model", &what, || {
                let r = parse_model(&bytes[..cut]);
                if boundaries.contains(&cut) {
                    assert!(r.is_ok(), "{}: {:?}", what(), r.err());
                    return;
                }
                let e = r.expect_err(&what());
                let kind = decode_kind(&e);
                assert!(
                    matches!(
                        kind,
                        DecodeErrorKind::Truncated | DecodeErrorKind::LengthPastEnd { .. }
                    ),
                    "{}: {e}",
                    what()
                );
                let text = e.to_string();
                assert!(text.starts_with("parse error: ModelProto"), "{text}");
                assert!(text.contains(" at byte "), "{text}");
                assert!(e.as_decode().unwrap().offset <= cut as u64, "{text}");
            });
        }
    }
}

/// Deterministic xorshift.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn bit_flips(s: &mut Suite) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (name, bytes) in corpus_models() {
        for _ in 0..40 {
            let mut m = bytes.clone();
            let flips = 1 + rng.next() % 3;
            for _ in 0..flips {
                let at = (rng.next() % m.len() as u64) as usize;
                m[at] ^= 1 << (rng.next() % 8);
            }
            let what = || format!("{name} with {flips} bit flips");
            s.case("bit flips", &what, || match parse_model(&m) {
                Ok(model) => {
                    // Accepted: the round trip is stable.
                    let again = model.serialize_to_vec();
                    let back = parse_model(&again).unwrap();
                    assert_eq!(back.serialize_to_vec(), again, "{}", what());
                }
                Err(e) => {
                    decode_kind(&e);
                }
            });
        }
    }
}

/// Parses `bytes` as the message `name` (default options); returns the re-serialized bytes.
struct ParseAs<'a>(&'a [u8], &'a ParseOptions);
impl MessageVisitor for ParseAs<'_> {
    type Output = onnx_light::Result<Vec<u8>>;
    fn visit<M: Message>(self) -> Self::Output {
        onnx_light::parse_from_bytes::<M>(self.0, self.1).map(|m| m.serialize_to_vec())
    }
}

fn parse_as(name: &str, bytes: &[u8]) -> onnx_light::Result<Vec<u8>> {
    visit_message_type(name, ParseAs(bytes, &ParseOptions::default())).expect("known message")
}

/// Wire types the schema accepts for a field (LEN also for repeated scalars: packed or not).
fn expected_wire_types(kind: Kind, label: Label) -> Vec<u32> {
    let base = match kind {
        Kind::Int64 | Kind::Int32 | Kind::UInt64 | Kind::Enum(_) => 0,
        Kind::Double => 1,
        Kind::Float => 5,
        Kind::String | Kind::Bytes | Kind::Payload | Kind::Message(_) => 2,
    };
    if label == Label::Repeated && base != 2 {
        vec![base, 2]
    } else {
        vec![base]
    }
}

fn field_with_wire_type(number: u32, wt: u32) -> Vec<u8> {
    let mut b = Vec::new();
    put_varint(&mut b, tag(number, wt) as u64);
    match wt {
        0 => b.push(0x2a),
        1 => b.extend_from_slice(&[7; 8]),
        2 => b.extend_from_slice(&[3, 0x08, 0x96, 0x01]),
        3 => put_varint(&mut b, tag(number, 4) as u64),
        5 => b.extend_from_slice(&[9; 4]),
        _ => {}
    }
    b
}

fn wrong_wire_types(s: &mut Suite) {
    for m in schema::MESSAGES {
        for f in m.fields {
            let ok = expected_wire_types(f.kind, f.label);
            for wt in 0..=5u32 {
                if ok.contains(&wt) {
                    continue;
                }
                let input = field_with_wire_type(f.number, wt);
                let what = || format!("{}.{} with wire type {wt}", m.name, f.name);
                s.case("wrong wire type", &what, || {
                    let r = parse_as(m.name, &input);
                    if wt == 4 {
                        // An end-group tag outside a group: refused, as by protobuf.
                        let e = r.expect_err(&what());
                        assert_eq!(
                            decode_kind(&e),
                            &DecodeErrorKind::UnmatchedGroup(f.number),
                            "{}",
                            what()
                        );
                        assert!(e.to_string().contains(m.name), "{e}");
                    } else {
                        // Any other mismatch is an unknown field, kept byte for byte.
                        let out = r.unwrap_or_else(|e| panic!("{}: {e}", what()));
                        assert_eq!(out, input, "{}", what());
                    }
                });
            }
            // A LEN field whose length runs past the end, for every LEN-capable field.
            if ok.contains(&2) {
                let mut input = Vec::new();
                put_varint(&mut input, tag(f.number, 2) as u64);
                input.push(100);
                input.extend_from_slice(&[0; 10]);
                let what = || format!("{}.{} length 100 of 10", m.name, f.name);
                s.case("length past end", &what, || {
                    let e = parse_as(m.name, &input).expect_err(&what());
                    assert_eq!(
                        decode_kind(&e),
                        &DecodeErrorKind::LengthPastEnd {
                            length: 100,
                            available: 10
                        },
                        "{}",
                        what()
                    );
                });
            }
        }
    }
}

fn varints_and_lengths(s: &mut Suite) {
    // 11-byte varints (more than 64 bits) as a value, a tag and a length.
    let long = [0xffu8; 10]
        .iter()
        .copied()
        .chain([0x01])
        .collect::<Vec<u8>>();
    let mut value = vec![0x08];
    value.extend_from_slice(&long);
    let mut length = vec![0x3a];
    length.extend_from_slice(&long);
    for (what, input, expect) in [
        (
            "11-byte varint value",
            value,
            DecodeErrorKind::VarintOverflow,
        ),
        ("11-byte tag", long.clone(), DecodeErrorKind::VarintOverflow),
        ("11-byte length", length, DecodeErrorKind::VarintOverflow),
        (
            "6-byte tag",
            vec![0x88, 0x80, 0x80, 0x80, 0x80, 0x00, 0x00],
            DecodeErrorKind::InvalidFieldNumber(1),
        ),
        (
            "tag of field 0",
            vec![0x00, 0x00],
            DecodeErrorKind::InvalidFieldNumber(0),
        ),
        (
            "wire type 6",
            vec![0x0e],
            DecodeErrorKind::InvalidWireType(6),
        ),
        (
            "wire type 7",
            vec![0x0f],
            DecodeErrorKind::InvalidWireType(7),
        ),
        (
            "truncated varint",
            vec![0x08, 0x80, 0x80],
            DecodeErrorKind::Truncated,
        ),
        (
            "truncated fixed64",
            vec![0x09, 1, 2, 3],
            DecodeErrorKind::Truncated,
        ),
        (
            "overlong zero length",
            vec![0x3a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00],
            DecodeErrorKind::OverlongLength,
        ),
        (
            "unclosed group",
            vec![0x7b, 0x08, 0x01],
            DecodeErrorKind::UnmatchedGroup(15),
        ),
        (
            "mismatched end group",
            vec![0x7b, 0x84, 0x01],
            DecodeErrorKind::UnmatchedGroup(16),
        ),
    ] {
        s.case("varints and tags", &|| what.to_string(), || {
            let e = parse_model(&input).expect_err(what);
            assert_eq!(decode_kind(&e), &expect, "{what}: {e}");
        });
    }
    // Length prefixes past the end, up to 2^64 - 1 (graph, then a TensorProto's raw_data).
    for len in [
        4u64,
        100,
        (1 << 31) - 1,
        1 << 31,
        1 << 32,
        1 << 35,
        1 << 62,
        (1 << 63) + 5,
        u64::MAX - 1,
        u64::MAX,
    ] {
        for (field_tag, msg) in [(0x3au8, "ModelProto"), (0x4a, "TensorProto")] {
            let mut input = vec![field_tag];
            put_varint(&mut input, len);
            input.extend_from_slice(b"xyz");
            let what = || format!("{msg} length prefix {len} over 3 bytes");
            s.case("length past end", &what, || {
                let e = parse_as(msg, &input).expect_err(&what());
                assert_eq!(
                    decode_kind(&e),
                    &DecodeErrorKind::LengthPastEnd {
                        length: len,
                        available: 3
                    },
                    "{}",
                    what()
                );
                assert!(
                    e.to_string()
                        .contains(&format!("length {len} runs past the end"))
                );
            });
        }
    }
}

/// TypeProto nested through sequence_type.elem_type (or map_type.value_type).
fn nested_types(levels: usize, map: bool) -> Vec<u8> {
    let mut t: Vec<u8> = Vec::new();
    for _ in 0..levels {
        t = if map {
            wrap(5, &wrap(2, &t))
        } else {
            wrap(4, &wrap(1, &t))
        };
    }
    t
}

fn nested_groups(levels: usize) -> Vec<u8> {
    // start group / end group, field 15
    let mut b = vec![0x7b; levels];
    b.extend(std::iter::repeat_n(0x7c, levels));
    b
}

fn deep_nesting(s: &mut Suite) {
    let limit = ParseOptions::default().max_recursion_depth;
    for (what, msg, ok, deep) in [
        (
            "graphs in attributes",
            "ModelProto",
            nested_graphs(8),
            nested_graphs(40),
        ),
        (
            "graphs in attributes, far past the limit",
            "ModelProto",
            nested_graphs(8),
            nested_graphs(20_000),
        ),
        (
            "TypeProto sequences",
            "TypeProto",
            nested_types(45, false),
            nested_types(60, false),
        ),
        (
            "TypeProto maps",
            "TypeProto",
            nested_types(45, true),
            nested_types(60, true),
        ),
        (
            "TypeProto sequences, far past the limit",
            "TypeProto",
            nested_types(45, false),
            nested_types(50_000, false),
        ),
        (
            "unknown groups",
            "ModelProto",
            nested_groups(90),
            nested_groups(200),
        ),
        (
            "unknown groups, far past the limit",
            "ModelProto",
            nested_groups(90),
            nested_groups(100_000),
        ),
    ] {
        s.case(
            "deep nesting",
            &|| format!("{what} (accepted depth)"),
            || {
                let out = parse_as(msg, &ok).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(out, ok, "{what}");
            },
        );
        s.case("deep nesting", &|| what.to_string(), || {
            let e = parse_as(msg, &deep).expect_err(what);
            assert_eq!(
                decode_kind(&e),
                &DecodeErrorKind::RecursionLimit(limit),
                "{what}"
            );
            assert!(e.to_string().contains("recursion limit 100"), "{e}");
        });
    }
    // The limit is an option (up to 1000): 1000 levels of groups are fine with it.
    s.case(
        "deep nesting",
        &|| "groups at max_recursion_depth 1000".into(),
        || {
            let opts = ParseOptions {
                max_recursion_depth: 1000,
                ..Default::default()
            };
            let input = nested_groups(999);
            let m = onnx_light::parse_from_bytes::<ModelProto>(&input, &opts).unwrap();
            assert_eq!(m.serialize_to_vec(), input);
            let e = onnx_light::parse_from_bytes::<ModelProto>(&nested_groups(1001), &opts)
                .unwrap_err();
            assert_eq!(decode_kind(&e), &DecodeErrorKind::RecursionLimit(1000));
        },
    );
}

fn tensor_bytes(dims: &[i64], data_type: i32, raw: &[u8]) -> Vec<u8> {
    let mut t = TensorProto::new();
    t.set_name("t");
    t.set_data_type(data_type);
    for &d in dims {
        t.add_dims(d);
    }
    t.set_raw_data(raw.to_vec());
    t.serialize_to_vec()
}

fn huge_claims(s: &mut Suite) {
    // A tiny input claiming a huge tensor parses (protobuf accepts it: dims are metadata) without
    // allocating for it; every consumer that trusts dims refuses it before allocating.
    let cases: &[(&str, Vec<i64>)] = &[
        ("2^40 x 2^20 floats", vec![1 << 40, 1 << 20]),
        ("product overflows i64", vec![i64::MAX, 2]),
        ("product overflows u64", vec![1 << 32, 1 << 32, 1 << 32]),
        ("negative dim", vec![-1, 4]),
        ("i64::MIN dim", vec![i64::MIN]),
    ];
    for (what, dims) in cases {
        let input = tensor_bytes(dims, 1, &[0; 4]);
        s.case("huge tensor claims", &|| format!("{what}: parse"), || {
            let t = onnx_light::parse_from_bytes::<TensorProto>(&input, &ParseOptions::default())
                .unwrap();
            assert_eq!(t.dims()[..], dims[..]);
        });
        s.case(
            "huge tensor claims",
            &|| format!("{what}: DLPack export"),
            || {
                let mut t = TensorProto::parse_from_bytes(&input).unwrap();
                let opts = onnx_light::dlpack::ExportOptions {
                    copy: onnx_light::dlpack::CopyMode::Always,
                };
                let e = onnx_light::dlpack::to_dlpack_versioned(&mut t, &opts)
                    .err()
                    .unwrap_or_else(|| panic!("{what}: exported"));
                assert!(
                    matches!(
                        e,
                        Error::InvalidArgument(_) | Error::LimitExceeded(_) | Error::Unsupported(_)
                    ),
                    "{what}: {e}"
                );
            },
        );
        s.case(
            "huge tensor claims",
            &|| format!("{what}: params save"),
            || {
                let t = TensorProto::parse_from_bytes(&input).unwrap();
                let e = onnx_light::params::save_tensors(&[&t]).unwrap_err();
                assert!(
                    matches!(
                        e,
                        Error::InvalidArgument(_)
                            | Error::LimitExceeded(_)
                            | Error::Params { .. }
                            | Error::Unsupported(_)
                    ),
                    "{what}: {e}"
                );
            },
        );
    }
    // max_tensor_size_bytes refuses a payload before copying it.
    for (size, limit) in [(1025usize, 1024u64), (1 << 20, 4096), (64, 1)] {
        let input = tensor_bytes(&[size as i64], 2, &vec![7; size]);
        let what = || format!("{size}-byte payload, max_tensor_size_bytes {limit}");
        s.case("max_tensor_size_bytes", &what, || {
            for no_copy in [false, true] {
                let opts = ParseOptions {
                    max_tensor_size_bytes: limit,
                    no_copy,
                    ..Default::default()
                };
                let e = onnx_light::parse_from_shared::<TensorProto, _>(
                    std::sync::Arc::new(input.clone()),
                    &opts,
                )
                .unwrap_err();
                assert_eq!(
                    decode_kind(&e),
                    &DecodeErrorKind::TensorTooLarge {
                        size: size as u64,
                        limit
                    }
                );
                assert!(e.to_string().contains("TensorProto.raw_data"), "{e}");
            }
        });
    }
}

/// A model with one external tensor whose entries are `entries`.
fn external_model(dims: &[i64], entries: &[(&str, &str)]) -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    let t = m.mutable_graph().add_initializer();
    t.set_name("w");
    t.set_data_type(2); // UINT8
    for &d in dims {
        t.add_dims(d);
    }
    t.set_data_location(1);
    for (k, v) in entries {
        let e = t.add_external_data();
        e.set_key(*k);
        e.set_value(*v);
    }
    m
}

fn external_attacks(s: &mut Suite) {
    let root = std::env::temp_dir().join(format!("onnx_light_hostile_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dir = root.join("model");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("w.bin"), vec![1u8; 4096]).unwrap();
    std::fs::write(root.join("secret.bin"), vec![2u8; 64]).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("../secret.bin", dir.join("out_link")).unwrap();
        std::os::unix::fs::symlink(root.join("secret.bin"), dir.join("abs_link")).unwrap();
        std::os::unix::fs::symlink("sub", dir.join("dir_link")).unwrap();
        std::fs::write(dir.join("sub/inner.bin"), [3u8; 16]).unwrap();
    }
    let secret = root.join("secret.bin").display().to_string();
    let max = u64::MAX.to_string();
    let near = (u64::MAX - 10).to_string();
    type Case<'a> = (&'a str, Vec<i64>, Vec<(&'a str, &'a str)>, &'a str, &'a str);
    #[cfg_attr(not(unix), allow(unused_mut))]
    let mut cases: Vec<Case> = vec![
        (
            "parent directory",
            vec![64],
            vec![("location", "../secret.bin")],
            "path",
            "..",
        ),
        (
            "nested parent",
            vec![64],
            vec![("location", "sub/../../secret.bin")],
            "path",
            "..",
        ),
        (
            "absolute path",
            vec![64],
            vec![("location", &secret)],
            "path",
            // (Windows names the kind of absolute path: "drive-letter path".)
            if cfg!(windows) {
                "drive-letter"
            } else {
                "absolute"
            },
        ),
        (
            "a directory",
            vec![16],
            vec![("location", "sub")],
            "path",
            "regular file",
        ),
        (
            "missing file",
            vec![16],
            vec![("location", "nope.bin")],
            "any",
            "",
        ),
        (
            "empty location",
            vec![16],
            vec![("location", "")],
            "any",
            "",
        ),
        (
            "no location",
            vec![16],
            vec![("offset", "0")],
            "external",
            "location",
        ),
        (
            "NUL in location",
            vec![16],
            vec![("location", "w.bin\0../x")],
            "any",
            "",
        ),
        (
            "offset + length overflows",
            vec![16],
            vec![("location", "w.bin"), ("offset", &near), ("length", "16")],
            "external",
            "",
        ),
        (
            "offset past EOF",
            vec![16],
            vec![("location", "w.bin"), ("offset", "8192"), ("length", "16")],
            "external",
            "",
        ),
        (
            "length past EOF",
            vec![8192],
            vec![("location", "w.bin"), ("length", "8192")],
            "external",
            "",
        ),
        (
            "huge length",
            vec![1 << 40],
            vec![("location", "w.bin"), ("length", "1099511627776")],
            "external",
            "",
        ),
        (
            "u64::MAX length",
            vec![16],
            vec![("location", "w.bin"), ("length", &max)],
            "external",
            "",
        ),
        (
            "u64::MAX offset",
            vec![16],
            vec![("location", "w.bin"), ("offset", &max)],
            "external",
            "",
        ),
        (
            "negative offset",
            vec![16],
            vec![("location", "w.bin"), ("offset", "-1")],
            "external",
            "offset",
        ),
        (
            "offset beyond 64 bits",
            vec![16],
            vec![("location", "w.bin"), ("offset", "18446744073709551616")],
            "external",
            "64 bits",
        ),
        (
            "length does not match dims",
            vec![100],
            vec![("location", "w.bin"), ("length", "16")],
            "check",
            "",
        ),
        (
            "dims product overflows",
            vec![1 << 32, 1 << 32, 1 << 32],
            vec![("location", "w.bin"), ("length", "16")],
            "check",
            "",
        ),
        (
            "dims product overflows, no length",
            vec![i64::MAX, 4],
            vec![("location", "w.bin")],
            "check",
            "",
        ),
        (
            "bad prepacked number",
            vec![16],
            vec![
                ("location", "w.bin"),
                ("length", "16"),
                ("prepacked_0", "k|x;1;c"),
            ],
            "external",
            "prepacked",
        ),
    ];
    // Symbolic links (made above on Unix; Windows' reparse points are refused by the same rule,
    // src/external/paths.rs, and its unit tests).
    #[cfg(unix)]
    cases.extend([
        (
            "symlink out",
            vec![64],
            vec![("location", "out_link")],
            "path",
            "link",
        ),
        (
            "absolute symlink",
            vec![64],
            vec![("location", "abs_link")],
            "path",
            "link",
        ),
        (
            "symlinked directory",
            vec![16],
            vec![("location", "dir_link/inner.bin")],
            "path",
            "link",
        ),
    ]);
    for (what, dims, entries, kind, text) in cases {
        let model = external_model(&dims, &entries);
        for no_copy in [false, true] {
            let what = || format!("{what} (no_copy {no_copy})");
            s.case("external data attacks", &what, || {
                let opts = ParseOptions {
                    no_copy,
                    ..Default::default()
                };
                let mut m = model.clone();
                if kind == "check" {
                    // Loads (as onnx.load does: the range is what counts); the check reports
                    // the mismatch between the range and dims x type.
                    let r = onnx_light::load_external_data_for_model(
                        &mut m,
                        &dir,
                        &LoadOptions::from(opts.clone()),
                    );
                    let _ = r;
                    let report = onnx_light::check_external_data(
                        &model,
                        &dir,
                        &LoadOptions::from(opts.clone()),
                        false,
                        None,
                    );
                    assert!(
                        !report.problems.is_empty(),
                        "{}: no problem reported",
                        what()
                    );
                    assert!(
                        report
                            .problems
                            .iter()
                            .all(|p| matches!(p, Error::ExternalData { .. })),
                        "{}: {:?}",
                        what(),
                        report.problems
                    );
                    return;
                }
                let e = onnx_light::load_external_data_for_model(
                    &mut m,
                    &dir,
                    &LoadOptions::from(opts.clone()),
                )
                .err()
                .unwrap_or_else(|| panic!("{}: loaded", what()));
                let ok = match kind {
                    "path" => matches!(e, Error::PathRefused { .. }),
                    "external" => matches!(e, Error::ExternalData { .. }),
                    _ => matches!(
                        e,
                        Error::PathRefused { .. } | Error::ExternalData { .. } | Error::Io { .. }
                    ),
                };
                assert!(ok, "{}: wrong error kind: {e:?}", what());
                assert!(e.to_string().contains(text), "{}: {e}", what());
                assert_eq!(m, model, "{}: the model changed on error", what());
                // Through a model file load as well.
                let bytes = model.serialize_to_vec();
                let path = dir.join("m.onnx");
                std::fs::write(&path, &bytes).unwrap();
                assert!(
                    onnx_light::load_model(&path, &LoadOptions::from(opts.clone())).is_err(),
                    "{}",
                    what()
                );
            });
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}

fn metadata_budget(s: &mut Suite) {
    // Many empty nodes: 2 bytes of input each. With a small budget the parse stops at it.
    let n = 500_000;
    let graph: Vec<u8> = [0x0au8, 0x00].repeat(n);
    let input = wrap(7, &graph);
    for budget in [1u64 << 20, 8 << 20] {
        let what = || format!("{n} empty nodes, max_metadata_bytes {budget}");
        s.case("metadata budget", &what, || {
            for threads in [1, 2] {
                let opts = ParseOptions {
                    max_metadata_bytes: budget,
                    num_threads: threads,
                    ..Default::default()
                };
                let e = onnx_light::parse_from_bytes::<ModelProto>(&input, &opts).unwrap_err();
                assert_eq!(
                    decode_kind(&e),
                    &DecodeErrorKind::MetadataLimit { limit: budget }
                );
                assert!(
                    e.to_string()
                        .contains(&format!("more than max_metadata_bytes {budget}")),
                    "{e}"
                );
                assert!(e.to_string().contains("ModelProto.graph.node["), "{e}");
            }
        });
    }
    // Many empty strings, packed varints, unknown fields: all charged.
    for (what, input) in [
        ("empty strings", [0x12u8, 0x00].repeat(200_000)), // NodeProto.output
        ("packed varints", {
            let mut b = vec![0x3a]; // AttributeProto.ints (8), packed
            b.clear();
            b.push(0x42);
            put_varint(&mut b, 400_000);
            b.extend(std::iter::repeat_n(1u8, 400_000));
            b
        }),
        ("unknown fields", [0xf8u8, 0x07, 0x01].repeat(200_000)),
    ] {
        let msg = if what == "packed varints" {
            "AttributeProto"
        } else {
            "NodeProto"
        };
        s.case("metadata budget", &|| what.to_string(), || {
            let opts = ParseOptions {
                max_metadata_bytes: 256 << 10,
                ..Default::default()
            };
            let e = visit_message_type(msg, ParseAs(&input, &opts))
                .unwrap()
                .unwrap_err();
            assert_eq!(
                decode_kind(&e),
                &DecodeErrorKind::MetadataLimit { limit: 256 << 10 },
                "{what}"
            );
        });
    }
    // Initializers parsed in parallel draw on shares of the same budget: the outcome is the
    // sequential one (same error, same place).
    let init = |n: usize| wrap(5, &[0x32u8, 0x00].repeat(n)); // TensorProto.string_data ""
    let mut graph = Vec::new();
    for n in [30_000, 10, 5_000, 20_000] {
        graph.extend_from_slice(&init(n));
    }
    let model = wrap(7, &graph);
    for budget in [512u64 << 10, 1 << 20, 2 << 20, 4 << 20, 64 << 20] {
        let what = || format!("parallel initializers, max_metadata_bytes {budget}");
        s.case("metadata budget", &what, || {
            let run = |threads| {
                let opts = ParseOptions {
                    max_metadata_bytes: budget,
                    num_threads: threads,
                    min_parallel_block_size: 0,
                    ..Default::default()
                };
                onnx_light::parse_from_bytes::<ModelProto>(&model, &opts)
                    .map(|m| m.serialize_to_vec())
                    .map_err(|e| e.to_string())
            };
            let (seq, par) = (run(1), run(2));
            assert_eq!(seq, par, "{}", what());
            if budget <= 2 << 20 {
                assert!(
                    seq.unwrap_err().contains("max_metadata_bytes"),
                    "{}",
                    what()
                );
            } else {
                assert_eq!(seq.unwrap(), model);
            }
        });
    }
    // Every real model parses within the automatic budget (and with parallel parsing).
    for (name, bytes) in corpus_models() {
        s.case(
            "metadata budget",
            &|| format!("{name} within the default budget"),
            || {
                for threads in [1, 2] {
                    let opts = ParseOptions {
                        num_threads: threads,
                        min_parallel_block_size: 0,
                        ..Default::default()
                    };
                    let m = onnx_light::parse_from_bytes::<ModelProto>(&bytes, &opts)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert_eq!(m.serialize_to_vec(), bytes);
                }
            },
        );
    }
}

fn encrypted_headers(s: &mut Suite) {
    use onnx_light::crypto::{
        EncryptionFormat, EncryptionOptions, MAX_CHUNK_SIZE, StreamDecryptor,
    };
    let key = b"k";
    let plain = vec![5u8; 100];
    let opts = EncryptionOptions {
        format: EncryptionFormat::Chunked,
        chunk_size: MAX_CHUNK_SIZE,
        ..Default::default()
    };
    let ct = onnx_light::crypto::testing::encrypt_bytes_with(&plain, key, &opts, [1; 16], [2; 16])
        .unwrap();
    // A header announcing 64 MiB chunks costs no 64 MiB buffer: the stream decryptor grows its
    // buffer as ciphertext arrives (the case allocation limit would catch it otherwise... so
    // check a much tighter bound here).
    for cut in [ct.len(), 36, 40, ct.len() - 1] {
        let what = || format!("ONNXCRYS with {MAX_CHUNK_SIZE}-byte chunks, {cut} bytes");
        s.case("encrypted headers", &what, || {
            let (r, grew) = peak_of(|| {
                StreamDecryptor::new(&ct[..cut], key).and_then(|d| {
                    let mut out = Vec::new();
                    d.decrypt_to(&mut out, Path::new("<test>")).map(|_| out)
                })
            });
            assert!(grew < 1 << 20, "{}: {grew} bytes", what());
            if cut == ct.len() {
                assert_eq!(r.unwrap(), plain);
            } else {
                let e = r.unwrap_err();
                assert!(
                    matches!(e, Error::Crypto(_) | Error::Authentication(_)),
                    "{}: {e}",
                    what()
                );
            }
            let r = onnx_light::crypto::decrypt_bytes(&ct[..cut], key);
            assert_eq!(r.is_ok(), cut == ct.len(), "{}", what());
        });
    }
}

/// Message of `e`, asserting it contains every needle.
fn assert_message(what: &str, e: &Error, needles: &[&str]) {
    let msg = e.to_string();
    for n in needles {
        assert!(msg.contains(n), "{what}: {n:?} not in {msg:?}");
    }
}

/// The inputs of an adversarial pass over the loader and saver (each a regression case of a
/// defect it found): nesting as deep as the maximum depth allows and past it, 200 000 distinct
/// pre-packed keys, a flood of empty dims, device/procfs/FIFO/directory/empty paths, huge
/// alignment and thread counts, terminal escape sequences in names and locations, a save into a
/// missing directory, and ONNXCRY1 ciphertexts with a bad padding. Every outcome is asserted:
/// the error kind and the words of its message, or the accepted result.
fn adversarial_pass(s: &mut Suite) {
    let cat = "adversarial pass";
    let max_depth = ParseOptions {
        max_recursion_depth: onnx_light::codec::MAX_RECURSION_DEPTH_LIMIT,
        ..Default::default()
    };
    // 332 graph-in-attribute levels: depth 997 (overflowed a 768 KiB stack before).
    for (levels, ok) in [(332usize, true), (333, true), (334, false)] {
        s.case(
            cat,
            &|| format!("{levels} nested graphs at depth limit 1000"),
            || {
                let input = nested_graphs(levels);
                match onnx_light::parse_from_bytes::<ModelProto>(&input, &max_depth) {
                    Ok(m) => {
                        assert!(ok, "{levels} levels accepted");
                        assert_eq!(m.serialize_to_vec(), input);
                    }
                    Err(e) => {
                        assert!(!ok, "{levels} levels: {e}");
                        assert_eq!(decode_kind(&e), &DecodeErrorKind::RecursionLimit(1000));
                        assert_message("deep graphs", &e, &["recursion limit 1000", ".g.node[0]"]);
                    }
                }
            },
        );
    }
    // 200 000 distinct pre-packed keys on one tensor (37 s in `info` before).
    let entries: Vec<(String, String)> = (0..200_000)
        .map(|i| (format!("prepacked_{i}"), format!("key{i}|{i};1;0")))
        .collect();
    s.case(cat, &|| "200 000 pre-packed keys".into(), || {
        let blobs = onnx_light::external::prepacked_blobs_of(&entries).unwrap();
        assert_eq!(blobs.len(), 200_000);
        assert_eq!(blobs[199_999].0, "key199999");
        assert_eq!(blobs[199_999].1[0].offset, 199_999);
    });
    drop(entries);
    // Empty `TensorShapeProto.dim` entries: ~36 bytes of memory per input byte, charged.
    s.case(cat, &|| "1 million empty dims".into(), || {
        let shape = [0x0au8, 0x00].repeat(1_000_000);
        let input = wrap(7, &wrap(11, &wrap(2, &wrap(1, &wrap(2, &shape)))));
        let opts = ParseOptions {
            max_metadata_bytes: 8 << 20,
            ..Default::default()
        };
        let e = onnx_light::parse_from_bytes::<ModelProto>(&input, &opts).unwrap_err();
        assert_eq!(
            decode_kind(&e),
            &DecodeErrorKind::MetadataLimit { limit: 8 << 20 }
        );
        assert_message(
            "empty dims",
            &e,
            &["tensor_type.shape.dim[", "max_metadata_bytes"],
        );
    });
    // Paths that are not regular files, and an empty file.
    let dir = std::env::temp_dir().join(format!("onnx_light_adversarial_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    #[cfg(unix)]
    let paths: Vec<(std::path::PathBuf, &str)> = {
        let fifo = dir.join("fifo.onnx");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        vec![
            ("/dev/zero".into(), "a character device, not a regular file"),
            (
                "/dev/urandom".into(),
                "a character device, not a regular file",
            ),
            ("/proc/self/status".into(), "procfs"),
            ("/proc/self/mem".into(), "procfs"),
            (dir.clone(), "a directory, not a regular file"),
            (fifo, "a FIFO, not a regular file"),
        ]
    };
    // Windows: no FIFOs or procfs; the NUL device has no file information to read.
    #[cfg(windows)]
    let paths: Vec<(std::path::PathBuf, &str)> = vec![
        (dir.clone(), "a directory, not a regular file"),
        (r"\\.\NUL".into(), ""),
    ];
    for (path, kind) in paths {
        s.case(cat, &|| format!("model path {}", path.display()), || {
            let e = onnx_light::load_model(&path, &LoadOptions::default()).unwrap_err();
            assert!(matches!(e, Error::Io { .. }), "{}: {e:?}", path.display());
            assert_message("path", &e, &[&path.display().to_string(), kind]);
        });
    }
    let empty = dir.join("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    s.case(cat, &|| "0-byte model file".into(), || {
        // A valid (empty) protobuf message, as protobuf says; `onnx-light check` reports the
        // missing IR version, graph and opsets (cli/tests).
        let m: ModelProto = onnx_light::load_model(&empty, &LoadOptions::default()).unwrap();
        assert!(!m.has_ir_version() && !m.has_graph() && m.opset_import().is_empty());
    });
    // Option values out of range.
    let model = {
        let mut m = ModelProto::new();
        m.set_ir_version(10);
        let t = m.mutable_graph().add_initializer();
        t.set_name("w");
        t.set_data_type(2);
        t.add_dims(4096);
        t.set_raw_data(vec![1u8; 4096]);
        m
    };
    for alignment in [1u64 << 63, 1 << 40, 32 << 20, u64::MAX, 3] {
        s.case(cat, &|| format!("save alignment {alignment}"), || {
            let opts = SaveExternalOptions {
                alignment,
                ..Default::default()
            };
            let e = onnx_light::save_model_with_external_data(&model, dir.join("a.onnx"), &opts)
                .unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::InvalidOption {
                        name: "alignment",
                        ..
                    }
                ),
                "alignment {alignment}: {e:?}"
            );
            let reason = if alignment.is_power_of_two() {
                "above the maximum 16777216"
            } else {
                "not 0, 1 or a power of two"
            };
            assert_message("alignment", &e, &[reason]);
            assert!(!dir.join("a.onnx").exists() && !dir.join("a.onnx.data").exists());
        });
    }
    for threads in [1_000_000, i32::MAX] {
        s.case(cat, &|| format!("num_threads {threads}"), || {
            let opts = ParseOptions {
                num_threads: threads,
                ..Default::default()
            };
            let e = onnx_light::parse_from_bytes::<ModelProto>(&[], &opts).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::InvalidOption {
                        name: "num_threads",
                        ..
                    }
                ),
                "{e:?}"
            );
            assert_message("threads", &e, &[&threads.to_string(), "above the maximum"]);
        });
    }
    // A save into a directory that does not exist names that directory.
    s.case(cat, &|| "save into a missing directory".into(), || {
        let missing = dir.join("no_such_dir");
        let e = onnx_light::save_model_with_external_data(
            &model,
            missing.join("m.onnx"),
            &SaveExternalOptions::default(),
        )
        .unwrap_err();
        assert_message("missing directory", &e, &[&missing.display().to_string()]);
        assert!(!missing.exists());
    });
    // Terminal escape sequences in names and an external location: kept byte for byte (the
    // tool escapes them when it prints), and a location that leads nowhere is refused naming it.
    let hostile = "evil\x1b]0;pwned\x07\x1b[2J\u{9b}31m\u{202e}";
    s.case(cat, &|| "escape sequences in names".into(), || {
        let mut m = model.clone();
        m.set_producer_name(hostile);
        m.mutable_graph().set_name(hostile);
        m.mutable_graph().mutable_initializer()[0].set_name(hostile);
        let bytes = m.serialize_to_vec();
        let back = parse_model(&bytes).unwrap();
        assert_eq!(back.graph().name().as_bytes(), hostile.as_bytes());
        assert_eq!(back.serialize_to_vec(), bytes);
        let mut ext = external_model(&[4], &[("location", hostile)]);
        let e = onnx_light::load_external_data_for_model(&mut ext, &dir, &LoadOptions::default())
            .unwrap_err();
        if cfg!(windows) {
            // Control characters are not allowed in Windows file names: refused before opening.
            assert!(matches!(e, Error::PathRefused { .. }), "{e:?}");
            assert_message("escaped location", &e, &["evil", "Windows does not allow"]);
        } else {
            assert!(matches!(e, Error::ExternalData { .. }), "{e:?}");
            assert_message("escaped location", &e, &["evil", "cannot open"]);
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
    // ONNXCRY1 (CBC): a bad padding fails like a corrupted block (same error, same work).
    s.case(cat, &|| "ONNXCRY1 with a bad padding".into(), || {
        use onnx_light::crypto::{EncryptionFormat, EncryptionOptions};
        let plain = model.serialize_to_vec();
        let opts = EncryptionOptions {
            format: EncryptionFormat::AesCbc,
            ..Default::default()
        };
        let key = b"k";
        let ct =
            onnx_light::crypto::testing::encrypt_bytes_with(&plain, key, &opts, [1; 16], [2; 16])
                .unwrap();
        assert_eq!(
            onnx_light::crypto::decrypt_bytes(&ct, key)
                .unwrap()
                .as_slice(),
            plain
        );
        let n = ct.len();
        let mut bad_padding = ct.clone();
        bad_padding[n - 17] ^= 0x5a; // last byte of the next-to-last block: the padding byte
        let mut bad_block = ct.clone();
        bad_block[n / 2] ^= 0x5a;
        let e1 =
            onnx_light::load_encrypted_model_from_bytes(&bad_padding, key, &LoadOptions::default())
                .unwrap_err();
        let e2 =
            onnx_light::load_encrypted_model_from_bytes(&bad_block, key, &LoadOptions::default())
                .err();
        assert!(matches!(e1, Error::Authentication(_)), "{e1:?}");
        assert_message("bad padding", &e1, &["ONNXCRY1", "not a valid model"]);
        if let Some(e2) = e2 {
            // A corrupted block may still decrypt to a parsable model (no MAC); when it fails
            // it fails the same way.
            assert_eq!(e1.to_string(), e2.to_string());
        }
        let opts = LoadOptions {
            reject_unauthenticated: true,
            ..Default::default()
        };
        let e = onnx_light::load_encrypted_model_from_bytes(&ct, key, &opts).unwrap_err();
        assert!(matches!(e, Error::Authentication(_)), "{e:?}");
        assert_message("reject_unauthenticated", &e, &["reject_unauthenticated"]);
    });
}

#[test]
fn hostile_inputs() {
    let _alone = crate::alone();
    let start = std::time::Instant::now();
    let mut s = Suite {
        counts: Vec::new(),
        worst_alloc: 0,
    };
    truncations(&mut s);
    bit_flips(&mut s);
    wrong_wire_types(&mut s);
    varints_and_lengths(&mut s);
    deep_nesting(&mut s);
    huge_claims(&mut s);
    external_attacks(&mut s);
    metadata_budget(&mut s);
    encrypted_headers(&mut s);
    adversarial_pass(&mut s);
    for (c, n) in &s.counts {
        println!("{c}: {n} cases");
    }
    println!(
        "hostile inputs: {} cases in {:.1?}, worst peak allocation of a case {} KiB",
        s.total(),
        start.elapsed(),
        s.worst_alloc >> 10
    );
    for (c, min) in [
        ("truncated model", 5000),
        ("bit flips", 2000),
        ("wrong wire type", 400),
        ("length past end", 100),
        ("varints and tags", 12),
        ("deep nesting", 15),
        ("huge tensor claims", 15),
        ("max_tensor_size_bytes", 3),
        // (Without the 6 symbolic-link cases elsewhere than on Unix.)
        ("external data attacks", if cfg!(unix) { 46 } else { 40 }),
        ("metadata budget", 10),
        ("encrypted headers", 4),
        // (With 2 of the 6 special model paths elsewhere than on Unix.)
        ("adversarial pass", if cfg!(unix) { 20 } else { 18 }),
    ] {
        let n = s
            .counts
            .iter()
            .find(|(k, _)| *k == c)
            .map_or(0, |(_, n)| *n);
        assert!(n >= min, "{c}: {n} cases, expected at least {min}");
    }
    assert!(s.total() >= 8000, "{} cases", s.total());
}
