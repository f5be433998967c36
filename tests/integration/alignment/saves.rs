//! Aligned single-file models (`SerializeOptions::inline_alignment`, docs/aligned-models.md):
//! every `raw_data` payload of at least `raw_data_threshold` bytes starts at a multiple of the
//! alignment in the saved bytes, whichever serializer writes them; the file reloads to the same
//! message; a no-copy load with the default `alignment` borrows every payload from the file's
//! map (none copied), also in a model over 2 GB; the default output is protobuf's bytes.
//!
//! The models: a built one with tensors everywhere a model holds them (initializers, a sparse
//! initializer, node attributes `t` / `tensors` / `sparse_tensor`, a subgraph, a function, a
//! training graph), the repository's sample, and every model of the onnx wheel's backend test
//! data (`ONNXL_BACKEND_DATA`, which the test command sets; a name that is not a directory is a
//! failure).

#![cfg_attr(not(feature = "inline-alignment"), allow(dead_code, unused_imports))]

use std::path::{Path, PathBuf};

use crate::common::{TempDir, mappings_of, uint8_tensor};
use onnx_light::codec::realigned_tensors;
use onnx_light::proto::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, SparseTensorProto, TensorProto,
    TrainingInfoProto,
};
use onnx_light::{FileLoadMode, LoadOptions, Message, ParseOptions, SerializeOptions};

/// The padding field's tag bytes (field 536870911, wire type 2).
const PADDING_TAG: [u8; 5] = [0xfa, 0xff, 0xff, 0xff, 0x0f];

fn aligned(align: u64) -> SerializeOptions {
    SerializeOptions {
        inline_alignment: align,
        ..Default::default()
    }
}

/// Parse options of the reference loads (the model as it is, no external data).
fn plain() -> LoadOptions {
    LoadOptions {
        load_external_data: false,
        ..Default::default()
    }
}

/// (offset in `bytes`, length) of every non-empty payload of the model `bytes` hold.
fn payload_spans(bytes: &[u8]) -> Vec<(u64, usize)> {
    let opts = ParseOptions {
        no_copy: true,
        raw_data_threshold: 0,
        alignment: 1,
        ..plain().parse
    };
    // SAFETY: `bytes` outlives the model, dropped at the end of this function.
    let m: ModelProto = unsafe { onnx_light::parse_from_bytes_unowned(bytes, &opts) }.unwrap();
    let mut out = Vec::new();
    m.visit_tensors(&mut |t| {
        if let Some(r) = t.raw_data_opt().filter(|r| !r.is_empty()) {
            out.push((r.as_ptr() as u64 - bytes.as_ptr() as u64, r.len()));
        }
    });
    out
}

/// A tensor of `n` pattern bytes named `name`.
fn tensor(name: &str, n: usize, seed: u8) -> TensorProto {
    uint8_tensor(name, n, seed)
}

/// A graph named `name` with initializers of the given sizes (names of varying length shift
/// the payloads after them).
fn graph(name: &str, sizes: &[usize], seed: u8) -> GraphProto {
    let mut g = GraphProto::new();
    g.set_name(name);
    for (i, &n) in sizes.iter().enumerate() {
        let t = tensor(
            &format!("{name}{}{i}", "w".repeat(i % 5)),
            n,
            seed ^ i as u8,
        );
        g.mutable_initializer().push(t);
    }
    g
}

/// A model with tensors in every place a model holds them, large and small, and one payload
/// larger than 16383 bytes after which paddings need longer length prefixes.
fn every_place_model() -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    let mut g = graph("g", &[3000, 10, 70, 1024, 5000, 64, 63, 1, 40_000, 2048], 1);
    let mut values = tensor("sparse_values", 2000, 7);
    values.set_data_type(1);
    g.mutable_sparse_initializer().push({
        let mut s = SparseTensorProto::new();
        s.set_values(values);
        s.set_indices(tensor("sparse_indices", 4000, 8));
        s.set_dims([1500]);
        s
    });
    let n = g.add_node();
    n.set_op_type("If");
    let mut a = AttributeProto::new();
    a.set_name("then_branch");
    a.set_type(5);
    a.set_g(graph("body", &[3001, 17, 999], 9));
    n.mutable_attribute().push(a);
    let mut a = AttributeProto::new();
    a.set_name("value");
    a.set_type(4);
    a.set_t(tensor("const", 1500, 11));
    n.mutable_attribute().push(a);
    let mut a = AttributeProto::new();
    a.set_name("tensors");
    a.set_type(9);
    a.mutable_tensors().push(tensor("ts0", 777, 12));
    a.mutable_tensors().push(tensor("ts1", 4097, 13));
    n.mutable_attribute().push(a);
    let mut a = AttributeProto::new();
    a.set_name("sparse");
    a.set_type(11);
    a.set_sparse_tensor({
        let mut s = SparseTensorProto::new();
        s.set_values(tensor("sv", 1200, 14));
        s.set_indices(tensor("si", 300, 15));
        s.set_dims([600]);
        s
    });
    n.mutable_attribute().push(a);
    m.set_graph(g);
    let mut f = FunctionProto::new();
    f.set_name("f");
    let node = f.mutable_node().push_default();
    node.set_op_type("Constant");
    let mut a = AttributeProto::new();
    a.set_name("value");
    a.set_type(4);
    a.set_t(tensor("fconst", 2500, 16));
    node.mutable_attribute().push(a);
    m.mutable_functions().push(f);
    let mut ti = TrainingInfoProto::new();
    ti.set_initialization(graph("init", &[1100, 5], 17));
    ti.set_algorithm(graph("algo", &[900], 18));
    m.mutable_training_info().push(ti);
    m
}

/// Checks the aligned save of `m` with alignment `align` (default threshold, 64 bytes) and
/// returns its bytes: every serializer writes the same bytes; every payload of at least 64 bytes
/// is aligned, smaller ones are not padded; the bytes reload to `m`; saving the reloaded model
/// again gives the same bytes.
fn check_aligned_save(what: &str, m: &ModelProto, align: u64) -> Vec<u8> {
    let opts = aligned(align);
    let bytes = onnx_light::serialize_to_vec(m, &opts).unwrap();
    let plain_bytes = m.serialize_to_vec();
    for (k, (offset, len)) in payload_spans(&bytes).into_iter().enumerate() {
        if len >= 64 {
            assert_eq!(offset % align, 0, "{what}: payload {k} ({len} bytes)");
        }
    }
    let padded = bytes.windows(5).filter(|w| *w == PADDING_TAG).count();
    let large = payload_spans(&plain_bytes)
        .iter()
        .filter(|&&(o, n)| n >= 64 && o % align != 0)
        .count();
    assert!(padded <= payload_spans(&bytes).len(), "{what}");
    assert!(
        padded >= large.min(1),
        "{what}: {large} misaligned payloads, {padded} paddings"
    );
    if large == 0 {
        assert_eq!(
            bytes, plain_bytes,
            "{what}: nothing to align, nothing added"
        );
    }
    let back: ModelProto = onnx_light::parse_from_bytes(&bytes, &plain().parse).unwrap();
    assert_eq!(&back, m, "{what}: reloads to the same message");
    let mut unknown = 0;
    back.visit_tensors(&mut |t| unknown += t.unknown_fields().len());
    assert_eq!(
        unknown, 0,
        "{what}: the padding is not kept as an unknown field"
    );
    assert_eq!(
        onnx_light::serialize_to_vec(&back, &opts).unwrap(),
        bytes,
        "{what}: saved again"
    );
    bytes
}

/// Every serializer (one buffer, threads, a caller's buffer, a writer, a file written in order
/// or by threads) writes the same aligned bytes.
fn check_serializers(what: &str, m: &ModelProto, align: u64, expected: &[u8], dir: &TempDir) {
    let with = |threads| SerializeOptions {
        num_threads: threads,
        ..aligned(align)
    };
    assert_eq!(
        onnx_light::serialize_to_vec(m, &with(2)).unwrap(),
        expected,
        "{what}: 2 threads"
    );
    let mut into = Vec::new();
    onnx_light::serialize_into(m, &with(2), |n| {
        into.resize(n, 0);
        Ok(&mut into[..])
    })
    .unwrap();
    assert_eq!(into, expected, "{what}: serialize_into");
    let mut out = Vec::new();
    onnx_light::serialize_to_writer(m, &mut out, &with(1)).unwrap();
    assert_eq!(out, expected, "{what}: writer");
    for threads in [1, 2] {
        let path = dir.path("saved.onnx");
        onnx_light::save_model(m, &path, &with(threads)).unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            expected,
            "{what}: file, {threads} threads"
        );
    }
}

/// A no-copy load of `path` with the default options borrows every payload it does not copy
/// for size (at least `raw_data_threshold`, 1024) from the file's map, at an aligned address:
/// none is copied for alignment. Returns how many it borrowed.
fn check_no_copy_load(what: &str, path: &Path, expected: &ModelProto) -> usize {
    let opts = ParseOptions {
        no_copy: true,
        file_load_mode: FileLoadMode::Mmap,
        ..plain().parse
    };
    let m = onnx_light::load_model(path, &LoadOptions::from(opts.clone())).unwrap();
    assert_eq!(&m, expected, "{what}: no-copy load");
    assert_eq!(realigned_tensors(&m), 0, "{what}: payloads copied");
    let maps = mappings_of(path);
    let mut borrowed = 0;
    m.visit_tensors(&mut |t| {
        if let Some(r) = t.raw_data_opt().filter(|r| r.len() >= 1024) {
            let p = r.as_ptr() as usize;
            assert!(
                maps.iter().any(|&(a, b)| a <= p && p + r.len() <= b),
                "{what}: tensor {:?} is not in the file's map",
                t.name().to_string()
            );
            assert_eq!(p % 64, 0, "{what}: tensor {:?}", t.name().to_string());
            borrowed += 1;
        }
    });
    borrowed
}

#[cfg(feature = "inline-alignment")]
#[test]
fn built_and_sample_models_save_aligned_and_load_without_copies() {
    let dir = TempDir::new("aligned");
    let sample = onnx_light::load_model(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/mlp.onnx"),
        &plain(),
    )
    .unwrap();
    for (name, m) in [("every place", every_place_model()), ("sample", sample)] {
        for align in [64, 4096, 65536] {
            let what = format!("{name}, alignment {align}");
            let bytes = check_aligned_save(&what, &m, align);
            check_serializers(&what, &m, align, &bytes, &dir);
            let path = dir.path("m.onnx");
            std::fs::write(&path, &bytes).unwrap();
            let borrowed = check_no_copy_load(&what, &path, &m);
            let mut large = 0;
            m.visit_tensors(&mut |t| large += usize::from(t.raw_data().len() >= 1024));
            assert_eq!(borrowed, large, "{what}");
        }
    }
    // The default output is protobuf's (the same as the unaligned encoder's).
    let m = every_place_model();
    assert_eq!(
        onnx_light::serialize_to_vec(&m, &SerializeOptions::default()).unwrap(),
        m.serialize_to_vec()
    );
    // Payloads below `raw_data_threshold` are left where they are.
    let opts = SerializeOptions {
        raw_data_threshold: 5000,
        ..aligned(4096)
    };
    let bytes = onnx_light::serialize_to_vec(&m, &opts).unwrap();
    let spans = payload_spans(&bytes);
    assert!(spans.iter().all(|&(o, n)| n < 5000 || o % 4096 == 0));
    assert!(spans.iter().any(|&(o, n)| n < 5000 && o % 64 != 0));
    assert_eq!(
        bytes.windows(5).filter(|w| *w == PADDING_TAG).count(),
        spans.iter().filter(|&&(_, n)| n >= 5000).count()
    );
}

#[cfg(feature = "inline-alignment")]
#[test]
fn backend_models_save_aligned_and_load_without_copies() {
    let dir = PathBuf::from(
        std::env::var("ONNXL_BACKEND_DATA")
            .expect("ONNXL_BACKEND_DATA names the onnx wheel's backend test data"),
    );
    assert!(
        dir.is_dir(),
        "ONNXL_BACKEND_DATA={} is not a directory",
        dir.display()
    );
    let mut files = Vec::new();
    collect(&dir, &mut files);
    assert!(files.len() > 100, "only {} models", files.len());
    let tmp = TempDir::new("aligned-backend");
    let (mut padded, mut borrowed) = (0, 0);
    for f in &files {
        let m = onnx_light::load_model(f, &plain()).unwrap();
        for align in [64, 4096] {
            let what = format!("{}, alignment {align}", f.display());
            let bytes = check_aligned_save(&what, &m, align);
            padded += bytes.windows(5).filter(|w| *w == PADDING_TAG).count();
            let path = tmp.path("m.onnx");
            std::fs::write(&path, &bytes).unwrap();
            borrowed += check_no_copy_load(&what, &path, &m);
        }
    }
    eprintln!(
        "{} models: {padded} paddings, {borrowed} payloads borrowed",
        files.len()
    );
    assert!(
        padded > 100 && borrowed > 0,
        "{padded} paddings, {borrowed} borrowed"
    );
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "onnx") {
            out.push(p);
        }
    }
}

/// A model over 2 GB: a tensor of 2^31 + 12345 bytes (borrowed from a sparse file, written as a
/// hole: the test writes a few KiB) between small ones. Saved aligned, every payload is aligned,
/// also past 2^31, and a no-copy load borrows them all from the map in metadata time.
/// (Not on Windows, where the cross step runs the tests under Wine: its over-2 GB tests are
/// Linux-only, see scripts/test.d/70-cross.sh.)
#[cfg(all(feature = "inline-alignment", not(windows)))]
#[test]
fn model_over_2gb_loads_without_copies() {
    use std::io::{Seek, SeekFrom, Write};
    const BIG: usize = (1 << 31) + 12_345;
    let dir = TempDir::new("aligned-2gb");
    let zeros = dir.path("zeros");
    std::fs::File::create(&zeros)
        .unwrap()
        .set_len(BIG as u64)
        .unwrap();
    let source = onnx_light::storage::MappedFile::open(&zeros).unwrap();
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    let g = m.mutable_graph();
    g.mutable_initializer().push(tensor("before", 3000, 1));
    let mut big = TensorProto::new();
    big.set_name("big");
    big.set_data_type(2);
    big.add_dims(BIG as i64);
    big.set_raw_data(onnx_light::ByteSpan::from_shared(source.clone(), 0..BIG));
    g.mutable_initializer().push(big);
    g.mutable_initializer().push(tensor("after", 5000, 2));
    g.mutable_initializer().push(tensor("last", 70_000, 3));

    /// Writes everything but the big payload, which becomes a hole.
    struct Holes<'a> {
        file: std::fs::File,
        hole: &'a [u8],
    }
    impl Write for Holes<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if std::ptr::eq(buf.as_ptr(), self.hole.as_ptr()) && buf.len() == self.hole.len() {
                self.file.seek(SeekFrom::Current(buf.len() as i64))?;
                return Ok(buf.len());
            }
            self.file.write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let path = dir.path("big.onnx");
    let file = std::fs::File::create(&path).unwrap();
    let mut out = Holes {
        file: file.try_clone().unwrap(),
        hole: m.graph().initializer()[1].raw_data(),
    };
    let len = onnx_light::serialize_to_writer(&m, &mut out, &aligned(4096)).unwrap();
    file.set_len(len).unwrap();
    assert!(len > 1 << 31);

    let opts = ParseOptions {
        no_copy: true,
        ..plain().parse
    };
    let start = std::time::Instant::now();
    let back = onnx_light::load_model(&path, &LoadOptions::from(opts.clone())).unwrap();
    let took = start.elapsed();
    assert_eq!(realigned_tensors(&back), 0);
    let maps = mappings_of(&path);
    let init = &back.graph().initializer();
    assert_eq!(init.len(), 4);
    let base = maps.iter().map(|&(a, _)| a).min().unwrap();
    for (t, want) in init.iter().zip(m.graph().initializer().iter()) {
        let r = t.raw_data_opt().unwrap();
        let p = r.as_ptr() as usize;
        assert!(r.is_borrowed(), "{:?}", t.name().to_string());
        assert!(maps.iter().any(|&(a, b)| a <= p && p + r.len() <= b));
        assert_eq!((p - base) % 4096, 0, "{:?}", t.name().to_string());
        assert_eq!(r.len(), want.raw_data().len());
        if t.name() != "big" {
            assert_eq!(t.raw_data(), want.raw_data());
        }
    }
    assert!((init[3].raw_data().as_ptr() as usize - base) > 1 << 31);
    let big = init[1].raw_data();
    assert!(
        big[..4096]
            .iter()
            .chain(&big[BIG - 4096..])
            .all(|&b| b == 0)
    );
    // Metadata time: nothing proportional to the 2 GB (a copy would take about a second).
    assert!(took.as_millis() < 200, "no-copy load took {took:?}");
    eprintln!("no-copy load of the {len}-byte aligned model: {took:?}");
}

/// Without the `inline-alignment` feature the option is refused, naming the feature.
#[cfg(not(feature = "inline-alignment"))]
#[test]
fn inline_alignment_needs_its_feature() {
    let m = every_place_model();
    let e = onnx_light::serialize_to_vec(&m, &aligned(4096)).unwrap_err();
    assert!(matches!(e, onnx_light::Error::Unsupported(_)), "{e}");
    assert!(e.to_string().contains("inline-alignment"), "{e}");
}

/// Invalid alignments are errors naming the option.
#[test]
fn invalid_inline_alignments_are_errors() {
    let m = every_place_model();
    for bad in [1, 2, 32, 100, 1 << 17] {
        let e = onnx_light::serialize_to_vec(&m, &aligned(bad)).unwrap_err();
        if cfg!(feature = "inline-alignment") {
            assert!(e.to_string().contains("inline_alignment"), "{bad}: {e}");
        }
    }
}

/// Every build skips the padding field in a `TensorProto`, wherever it is (before or after
/// `raw_data`, as a protobuf re-save moves it), and keeps other unknown fields.
#[test]
fn padding_is_skipped_on_parsing() {
    let t = tensor("t", 100, 1);
    let plain_bytes = t.serialize_to_vec();
    let pad = |n: u8| {
        let mut v = PADDING_TAG.to_vec();
        v.push(n);
        v.extend(std::iter::repeat_n(0u8, n as usize));
        v
    };
    let mut before = pad(3);
    before.extend_from_slice(&plain_bytes);
    let mut after = plain_bytes.clone();
    after.extend(pad(0));
    after.extend(pad(120));
    for bytes in [before, after] {
        let back: TensorProto = onnx_light::parse_from_bytes(&bytes, &plain().parse).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.serialize_to_vec(), plain_bytes);
    }
    // Another unknown field is kept.
    let mut other = plain_bytes.clone();
    other.extend_from_slice(&[0xf2, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x07]);
    let back: TensorProto = onnx_light::parse_from_bytes(&other, &plain().parse).unwrap();
    assert_eq!(back.serialize_to_vec(), other);
}
