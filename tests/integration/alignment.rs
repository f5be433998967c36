//! Aligned tensor bytes (docs/design.md, "Aligned tensor bytes"): in every load mode — copy
//! (file, bytes, stream), no-copy (mapped file, read file, shared bytes, stream), external data
//! (copy and no-copy, packed, aligned and encrypted weight files), encrypted models (bytes and
//! files) — with 1, 2 and 3 threads and several alignments, every tensor byte pointer handed out
//! (`raw_data`, DLPack exports) is a multiple of the requested alignment, and the bytes equal
//! the serialized model's.
//!
//! The models: built ones whose payloads sit at every offset mod 64 of the file (checked), plus
//! every model of the onnx wheel's backend test data when `ONNXL_BACKEND_DATA` names its
//! directory (the test command sets it; a name that is not a directory is a failure).

use crate::common;
// Aligned single-file saves: their payloads are aligned in the file (docs/aligned-models.md).
mod saves;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{TempDir, pattern};
use onnx_light::codec::{misaligned_tensors, realigned_tensors};
use onnx_light::proto::{AttributeProto, ModelProto, SparseTensorProto, TensorProto};
use onnx_light::{FileLoadMode, LoadOptions, Message, ParseOptions, SaveExternalOptions};

/// Every tensor's (name, raw bytes) in visitor order.
fn payloads(m: &ModelProto) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    m.visit_tensors(&mut |t| {
        out.push((
            t.name().to_string(),
            t.raw_data_opt().map(|r| r.to_vec()).unwrap_or_default(),
        ))
    });
    out
}

/// Asserts that every non-empty payload of `m` is aligned to `align` and equals `expected`.
fn check(m: &ModelProto, expected: &[(String, Vec<u8>)], align: u64, what: &str) {
    let mut i = 0;
    m.visit_tensors(&mut |t| {
        let bytes = t
            .raw_data_opt()
            .as_ref()
            .map(|r| r.as_slice())
            .unwrap_or_default();
        if !bytes.is_empty() {
            assert_eq!(
                bytes.as_ptr() as u64 % align,
                0,
                "{what}: tensor {:?} ({} bytes) at {:p}",
                t.name().to_string(),
                bytes.len(),
                bytes.as_ptr()
            );
        }
        assert_eq!(
            (t.name().to_string(), bytes.to_vec()),
            expected[i],
            "{what}: tensor {i}"
        );
        i += 1;
    });
    assert_eq!(i, expected.len(), "{what}: tensor count");
    assert_eq!(misaligned_tensors(m, align), 0, "{what}");
}

/// A model whose large raw_data payloads (at least `raw_data_threshold` bytes) sit at every
/// offset mod 64 of its serialization, with small ones in between, in initializers, a sparse
/// initializer, a node attribute and a subgraph: initializers are added until the large
/// payloads cover every offset.
fn every_offset_model() -> ModelProto {
    let mut m = base_model();
    for i in 0..4000usize {
        let mut t = TensorProto::new();
        // Names of varying length shift the following payloads too.
        t.set_name("w".repeat(1 + i % 7) + &i.to_string());
        t.set_data_type(2);
        let n = if i % 3 == 0 {
            1 + i % 200
        } else {
            1024 + 37 * i
        };
        t.add_dims(n as i64);
        t.set_raw_data(pattern(n, i as u8));
        m.mutable_graph().mutable_initializer().push(t);
        if i % 16 == 15 && payload_offsets(&m.serialize_to_vec(), 1024).len() == 64 {
            return m;
        }
    }
    panic!("4000 initializers do not cover every offset mod 64");
}

/// The sparse initializer, the subgraph and the attribute tensor of [`every_offset_model`].
fn base_model() -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    let g = m.mutable_graph();
    g.set_name("g");
    let mut values = TensorProto::new();
    values.set_name("sparse_values");
    values.set_data_type(1);
    values.add_dims(500);
    values.set_raw_data(pattern(2000, 7));
    let mut indices = TensorProto::new();
    indices.set_name("sparse_indices");
    indices.set_data_type(7);
    indices.add_dims(500);
    indices.set_raw_data(
        (0..500i64)
            .flat_map(|i| (i * 3).to_le_bytes())
            .collect::<Vec<u8>>(),
    );
    g.mutable_sparse_initializer().push({
        let mut s = SparseTensorProto::new();
        s.set_values(values);
        s.set_indices(indices);
        s.set_dims([1500]);
        s
    });
    let mut sub = onnx_light::proto::GraphProto::new();
    sub.set_name("body");
    let mut t = TensorProto::new();
    t.set_name("body_w");
    t.set_data_type(2);
    t.set_raw_data(pattern(3001, 9));
    sub.mutable_initializer().push(t);
    let n = g.add_node();
    n.set_op_type("If");
    let mut a = AttributeProto::new();
    a.set_name("then_branch");
    a.set_type(5);
    a.set_g(sub);
    n.mutable_attribute().push(a);
    let mut c = TensorProto::new();
    c.set_name("const");
    c.set_data_type(2);
    c.set_raw_data(pattern(1500, 11));
    let mut a = AttributeProto::new();
    a.set_name("value");
    a.set_type(4);
    a.set_t(c);
    n.mutable_attribute().push(a);
    m
}

/// The offsets mod 64 of the model's payloads of at least `min` bytes in its serialization.
fn payload_offsets(bytes: &[u8], min: usize) -> BTreeSet<u64> {
    let opts = ParseOptions {
        no_copy: true,
        raw_data_threshold: 0,
        alignment: 1,
        ..Default::default()
    };
    // SAFETY: `bytes` outlives the model, which is dropped at the end of this function.
    let m: ModelProto = unsafe { onnx_light::parse_from_bytes_unowned(bytes, &opts) }.unwrap();
    let base = bytes.as_ptr() as u64;
    let mut out = BTreeSet::new();
    m.visit_tensors(&mut |t| {
        if let Some(r) = t.raw_data_opt()
            && !r.is_empty()
            && r.len() >= min
        {
            out.insert((r.as_ptr() as u64 - base) % 64);
        }
    });
    out
}

/// The models of the test: built ones, and the onnx wheel's when `ONNXL_BACKEND_DATA` is set.
fn models() -> Vec<(String, Vec<u8>)> {
    let built = every_offset_model().serialize_to_vec();
    assert_eq!(
        payload_offsets(&built, 1024).len(),
        64,
        "the built model covers every offset mod 64"
    );
    let mut out = vec![("built".to_string(), built)];
    if let Ok(dir) = std::env::var("ONNXL_BACKEND_DATA") {
        let dir = PathBuf::from(dir);
        assert!(
            dir.is_dir(),
            "ONNXL_BACKEND_DATA={} is not a directory",
            dir.display()
        );
        let mut files = Vec::new();
        collect(&dir, &mut files);
        assert!(
            files.len() > 100,
            "only {} models under {}",
            files.len(),
            dir.display()
        );
        for f in files {
            out.push((f.display().to_string(), std::fs::read(&f).unwrap()));
        }
    }
    out
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

/// The option sets of every in-memory and file load: threads x alignment.
fn option_sets() -> Vec<LoadOptions> {
    let mut out = Vec::new();
    for threads in [1, 2, 3] {
        for alignment in [16u64, 64, 4096] {
            out.push(LoadOptions {
                load_external_data: false,
                ..LoadOptions::from(ParseOptions {
                    num_threads: threads,
                    min_parallel_block_size: 0,
                    alignment,
                    ..Default::default()
                })
            });
        }
    }
    out
}

#[test]
fn every_pointer_is_aligned_in_every_load_mode() {
    let dir = TempDir::new("align");
    let mut wheel_models = 0usize;
    let mut realigned = 0usize;
    for (name, bytes) in models() {
        // The reference: the payloads as serialized (an unaligned parse borrows them in place).
        let expected = {
            let m: ModelProto = onnx_light::parse_from_bytes(
                &bytes,
                &(LoadOptions {
                    load_external_data: false,
                    ..Default::default()
                })
                .parse,
            )
            .unwrap();
            payloads(&m)
        };
        wheel_models += usize::from(name != "built");
        let path = dir.path("m.onnx");
        std::fs::write(&path, &bytes).unwrap();
        let shared = Arc::new(bytes.clone());
        for o in option_sets() {
            let a = o.parse.alignment;
            let what =
                |mode: &str| format!("{name}: {mode}, {} threads, align {a}", o.parse.num_threads);
            let m: ModelProto = onnx_light::parse_from_bytes(&bytes, &o.parse).unwrap();
            check(&m, &expected, a, &what("copy bytes"));
            assert_eq!(realigned_tensors(&m), 0);
            let m = onnx_light::load_model(&path, &o).unwrap();
            check(&m, &expected, a, &what("copy file"));
            let m: ModelProto =
                onnx_light::parse_from_reader(std::io::Cursor::new(&bytes), &o.parse).unwrap();
            check(&m, &expected, a, &what("copy stream"));
            let nc = ParseOptions {
                no_copy: true,
                ..o.clone().parse
            };
            for mode in [FileLoadMode::Mmap, FileLoadMode::Buffered] {
                let m = onnx_light::load_model(
                    &path,
                    &LoadOptions::from(ParseOptions {
                        file_load_mode: mode,
                        ..nc.clone()
                    }),
                )
                .unwrap();
                check(&m, &expected, a, &what(&format!("no-copy file {mode:?}")));
                realigned += realigned_tensors(&m);
            }
            let m: ModelProto = onnx_light::parse_from_shared(shared.clone(), &nc).unwrap();
            check(&m, &expected, a, &what("no-copy shared bytes"));
            let m: ModelProto =
                onnx_light::parse_from_reader(std::io::Cursor::new(&bytes), &nc).unwrap();
            check(&m, &expected, a, &what("no-copy stream"));
        }
    }
    eprintln!("{wheel_models} models of the onnx wheel; {realigned} tensors copied for alignment");
    assert!(realigned > 0, "misaligned payloads were seen and copied");
}

/// No-copy loads borrow exactly the payloads that are aligned in the input, and copy the
/// others (counted); parses of caller bytes without an owner borrow everything and count the
/// misaligned ones.
#[test]
fn no_copy_borrows_aligned_payloads_and_copies_the_others() {
    let bytes = every_offset_model().serialize_to_vec();
    let expected = payloads(&every_offset_model());
    // An input whose first byte is 64-aligned, so file offsets decide.
    let mut region = vec![0u8; bytes.len() + 64];
    let shift = (64 - region.as_ptr() as usize % 64) % 64;
    region[shift..shift + bytes.len()].copy_from_slice(&bytes);
    let input = &region[shift..shift + bytes.len()];
    let opts = ParseOptions {
        no_copy: true,
        ..Default::default()
    };
    let large_at: Vec<u64> = {
        let mut v = Vec::new();
        // SAFETY: `input` outlives the model.
        let m: ModelProto = unsafe { onnx_light::parse_from_bytes_unowned(input, &opts) }.unwrap();
        m.visit_tensors(&mut |t| {
            if let Some(r) = t.raw_data_opt()
                && r.len() >= 1024
            {
                v.push(r.as_ptr() as u64 - input.as_ptr() as u64);
            }
        });
        assert_eq!(
            misaligned_tensors(&m, 64),
            v.iter().filter(|&&o| o % 64 != 0).count(),
            "unowned parses borrow everything and count the misaligned"
        );
        v
    };
    let shared = Arc::new(AlignedBytes::new(&bytes));
    assert_eq!(AsRef::<[u8]>::as_ref(&*shared).as_ptr() as usize % 64, 0);
    let m: ModelProto = onnx_light::parse_from_shared(shared.clone(), &opts).unwrap();
    check(&m, &expected, 64, "shared");
    let mut borrowed = 0;
    m.visit_tensors(&mut |t| {
        if let Some(r) = t.raw_data_opt()
            && r.len() >= 1024
        {
            borrowed += usize::from(r.is_borrowed());
            assert_eq!(r.is_borrowed(), !r.is_realigned());
        }
    });
    let misaligned = large_at.iter().filter(|&&o| o % 64 != 0).count();
    assert!(misaligned > 0 && borrowed > 0);
    assert_eq!(realigned_tensors(&m), misaligned);
    assert_eq!(borrowed, large_at.len() - misaligned);
    // Alignment 1: borrow everything.
    let all = ParseOptions {
        alignment: 1,
        ..opts
    };
    let m: ModelProto = onnx_light::parse_from_shared(shared, &all).unwrap();
    assert_eq!(realigned_tensors(&m), 0);
}

/// Bytes whose first byte is 64-aligned.
struct AlignedBytes {
    region: Vec<u8>,
    shift: usize,
    len: usize,
}

impl AlignedBytes {
    fn new(bytes: &[u8]) -> Self {
        let mut region = vec![0u8; bytes.len() + 64];
        let shift = (64 - region.as_ptr() as usize % 64) % 64;
        region[shift..shift + bytes.len()].copy_from_slice(bytes);
        Self {
            region,
            shift,
            len: bytes.len(),
        }
    }
}

impl AsRef<[u8]> for AlignedBytes {
    fn as_ref(&self) -> &[u8] {
        &self.region[self.shift..self.shift + self.len]
    }
}

/// External data (copy and no-copy, weight files packed or aligned) and encrypted models.
#[test]
fn external_data_and_encrypted_models_are_aligned() {
    let dir = TempDir::new("align-ext");
    let model = every_offset_model();
    let expected = payloads(&model);
    let weights_key = b"weights";
    for (tag, alignment, encrypted) in [
        ("packed", 0u64, false),
        ("aligned", 4096, false),
        ("encrypted", 0, true),
    ] {
        let path = dir.path(&format!("{tag}.onnx"));
        onnx_light::save_model_with_external_data(
            &model,
            &path,
            &SaveExternalOptions {
                alignment,
                align_threshold: 0,
                size_threshold: 100,
                convert_attribute: true,
                externalize_sparse: true,
                encryption: encrypted
                    .then(|| onnx_light::ExternalEncryption::new(&weights_key[..])),
                ..Default::default()
            },
        )
        .unwrap();
        for o in option_sets() {
            for no_copy in [false, true] {
                let opts = LoadOptions {
                    load_external_data: true,
                    external_data_key: encrypted.then(|| weights_key[..].into()),
                    ..LoadOptions::from(ParseOptions {
                        no_copy,
                        ..o.clone().parse
                    })
                };
                let m = onnx_light::load_model(&path, &opts).unwrap();
                let what = format!(
                    "external {tag}, no_copy {no_copy}, {} threads, align {}",
                    o.parse.num_threads, o.parse.alignment
                );
                check(&m, &expected, o.parse.alignment, &what);
                if no_copy && alignment == 4096 && o.parse.alignment <= 4096 {
                    assert_eq!(
                        realigned_tensors(&m),
                        0,
                        "{what}: aligned files are borrowed"
                    );
                }
            }
        }
    }
    let key = b"alignment";
    let enc = onnx_light::save_encrypted_model_to_bytes(&model, key, &Default::default()).unwrap();
    let enc_path = dir.path("model.onnxc");
    std::fs::write(&enc_path, &enc).unwrap();
    for threads in [1, 2] {
        for no_copy in [false, true] {
            let opts = ParseOptions {
                no_copy,
                alignment: 256,
                num_threads: threads,
                min_parallel_block_size: 0,
                ..Default::default()
            };
            let what = format!("encrypted, no_copy {no_copy}, {threads} threads");
            let m = onnx_light::load_encrypted_model_from_bytes(
                &enc,
                key,
                &LoadOptions::from(opts.clone()),
            )
            .unwrap();
            check(&m, &expected, 256, &format!("{what}, bytes"));
            let m =
                onnx_light::load_encrypted_model(&enc_path, key, &LoadOptions::from(opts.clone()))
                    .unwrap();
            check(&m, &expected, 256, &format!("{what}, file"));
        }
    }
}

/// External data and encrypted models over every model of the test (the onnx wheel's too):
/// weight files packed (payloads at any offset), no-copy and copy loads, and encrypted models
/// (one passphrase derivation per model and mode, so every 8th wheel model).
#[test]
fn external_data_and_encrypted_wheel_models_are_aligned() {
    let dir = TempDir::new("align-ext-wheel");
    let mut externalized = 0usize;
    for (i, (name, bytes)) in models().into_iter().enumerate() {
        let no_load = LoadOptions {
            load_external_data: false,
            ..Default::default()
        };
        let model: ModelProto =
            onnx_light::parse_from_bytes(&bytes, &no_load.clone().parse).unwrap();
        if onnx_light::external::has_external_data(&model) {
            continue;
        }
        let expected = payloads(&model);
        let path = dir.path("m.onnx");
        let report = onnx_light::save_model_with_external_data(
            &model,
            &path,
            &SaveExternalOptions {
                alignment: 1,
                size_threshold: 1,
                convert_attribute: true,
                externalize_sparse: true,
                sync: false,
                ..Default::default()
            },
        )
        .unwrap();
        externalized += report.external_tensors;
        for threads in [1, 2] {
            for no_copy in [false, true] {
                let opts = ParseOptions {
                    no_copy,
                    num_threads: threads,
                    min_parallel_block_size: 0,
                    raw_data_threshold: 0,
                    ..Default::default()
                };
                let what = format!("{name}: external packed, no_copy {no_copy}, {threads} threads");
                let m = onnx_light::load_model(&path, &LoadOptions::from(opts.clone())).unwrap();
                check(&m, &expected, 64, &what);
            }
        }
        if i % 8 == 0 {
            let key = b"k";
            let enc = onnx_light::save_encrypted_model_to_bytes(&model, key, &Default::default())
                .unwrap();
            for no_copy in [false, true] {
                let opts = LoadOptions {
                    load_external_data: false,
                    ..LoadOptions::from(ParseOptions {
                        no_copy,
                        raw_data_threshold: 0,
                        ..Default::default()
                    })
                };
                let m = onnx_light::load_encrypted_model_from_bytes(&enc, key, &opts).unwrap();
                check(
                    &m,
                    &expected,
                    64,
                    &format!("{name}: encrypted, no_copy {no_copy}"),
                );
            }
        }
    }
    assert!(externalized > 0);
}

/// DLPack exports of a no-copy load share the aligned bytes: borrowed from the mapping where
/// they were aligned, the load's aligned copies elsewhere.
#[test]
fn dlpack_exports_are_aligned() {
    let dir = TempDir::new("align-dlpack");
    let model = every_offset_model();
    let path = dir.path("m.onnx");
    std::fs::write(&path, model.serialize_to_vec()).unwrap();
    for alignment in [64u64, 4096] {
        let mut m = onnx_light::load_model(
            &path,
            &LoadOptions::from(ParseOptions {
                no_copy: true,
                file_load_mode: FileLoadMode::Mmap,
                alignment,
                ..Default::default()
            }),
        )
        .unwrap();
        let mut exported = 0;
        for t in m.mutable_graph().mutable_initializer().iter_mut() {
            let raw = t
                .raw_data_opt()
                .as_ref()
                .map(|r| r.as_ptr() as usize)
                .unwrap_or(0);
            let d = onnx_light::dlpack::to_dlpack_versioned(t, &Default::default()).unwrap();
            let data = d.dl_tensor().data as usize;
            assert_eq!(data, raw, "{}: zero-copy", t.name());
            assert_eq!(data as u64 % alignment, 0, "{}: aligned", t.name());
            exported += 1;
        }
        assert!(exported > 64);
    }
}

/// Takes every payload of `m` that a no-copy load copied for alignment out of the model (as a
/// caller keeps a tensor's bytes beyond the model), checking there is at least one.
fn take_realigned(m: &mut ModelProto) -> Vec<onnx_light::ByteSpan> {
    let mut out = Vec::new();
    m.visit_tensors_mut(&mut |t| {
        if t.raw_data_opt().is_some_and(|r| r.is_realigned()) {
            out.push(t.take_raw_data().unwrap());
        }
    });
    assert!(!out.is_empty(), "the load copied payloads for alignment");
    out
}

/// A payload copied because its address in a mapped file was misaligned lives in memory of
/// its own: once the model is gone, no such payload keeps the file mapped (for the model file
/// and for external weight files), while a borrowed payload does, as long as it lives.
#[test]
fn realigned_payloads_do_not_keep_the_file_mapped() {
    let dir = TempDir::new("align-unmap");
    let model = every_offset_model();
    let path = dir.path("m.onnx");
    std::fs::write(&path, model.serialize_to_vec()).unwrap();
    let ext = dir.path("ext.onnx");
    onnx_light::save_model_with_external_data(
        &model,
        &ext,
        &SaveExternalOptions {
            alignment: 1,
            size_threshold: 100,
            ..Default::default()
        },
    )
    .unwrap();
    let weights = dir.path("ext.onnx.data");
    let expected = payloads(&model);
    for threads in [1, 2] {
        for (file, mapped) in [(&path, &path), (&ext, &weights)] {
            let opts = ParseOptions {
                no_copy: true,
                file_load_mode: FileLoadMode::Mmap,
                num_threads: threads,
                min_parallel_block_size: 0,
                ..Default::default()
            };
            let what = format!("{}, {threads} threads", file.display());
            // Control: a borrowed payload keeps the file mapped after the model is gone.
            let mut m = onnx_light::load_model(file, &LoadOptions::from(opts.clone())).unwrap();
            assert!(common::is_mapped(mapped), "{what}: mapped while loaded");
            let mut borrowed = None;
            m.visit_tensors_mut(&mut |t| {
                if borrowed.is_none() && t.raw_data_opt().is_some_and(|r| r.is_borrowed()) {
                    borrowed = t.take_raw_data();
                }
            });
            let borrowed = borrowed.expect("an aligned payload is borrowed");
            drop(m);
            assert!(common::is_mapped(mapped), "{what}: a borrow keeps the map");
            drop(borrowed);
            assert!(
                !common::is_mapped(mapped),
                "{what}: unmapped after the borrow"
            );
            // The copies made for alignment: kept, while the model and the map are gone.
            let mut m = onnx_light::load_model(file, &LoadOptions::from(opts.clone())).unwrap();
            let kept = take_realigned(&mut m);
            drop(m);
            assert!(
                !common::is_mapped(mapped),
                "{what}: {} payloads copied for alignment keep the file mapped",
                kept.len()
            );
            for span in &kept {
                assert_eq!(span.as_ptr() as usize % 64, 0, "{what}");
                assert!(
                    expected.iter().any(|(_, b)| b[..] == span[..]),
                    "{what}: a kept payload still holds its bytes"
                );
            }
        }
    }
}
