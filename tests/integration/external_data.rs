//! External data: every tensor place, every path rule on load and on save (the attack is
//! refused with the distinct error and nothing outside the directory is read or written), split
//! files, alignment, checksums, no-copy sharing, re-saving over mapped files, zero-length
//! tensors, consolidation, and saving without touching the model.

use crate::common;
use common::{pattern, uint8_tensor as tensor};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use onnx_light::external::{
    self, DATA_LOCATION_EXTERNAL, ExternalDataInfo, check_external_data,
    consolidate_tensors_to_buffer, load_external_data_for_model, save_model_with_external_data,
    sha1_hex, uses_external_data,
};
use onnx_light::proto::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, SparseTensorProto,
    StringStringEntryProto, TensorProto, TrainingInfoProto,
};
use onnx_light::{
    Error, LoadOptions, Message, ParseOptions, SaveExternalOptions, TensorBufferOptions,
};

// ---------------------------------------------------------------------------------------------
// Fixtures

/// `root/model` (the model directory) and `root/outside` (a sibling that must stay untouched).
struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    fn new(tag: &str) -> Self {
        let root = std::env::temp_dir().join(format!(
            "onnxl-ext-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("model")).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::fs::write(root.join("outside/secret.bin"), vec![0x5a; 8192]).unwrap();
        Self { root }
    }
    fn dir(&self) -> PathBuf {
        self.root.join("model")
    }
    fn outside(&self) -> PathBuf {
        self.root.join("outside")
    }
    fn model(&self) -> PathBuf {
        self.dir().join("m.onnx")
    }
    /// Every file under `outside` with its bytes and modification time.
    fn outside_snapshot(&self) -> BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime)> {
        snapshot(&self.outside())
    }
}

fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        if m.is_file() {
            out.insert(
                e.path(),
                (std::fs::read(e.path()).unwrap(), m.modified().unwrap()),
            );
        } else if m.is_dir() {
            out.extend(snapshot(&e.path()));
        }
    }
    out
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn sparse(prefix: &str, n: usize, seed: u8) -> SparseTensorProto {
    let mut s = SparseTensorProto::new();
    s.set_values(tensor(&format!("{prefix}.values"), n, seed));
    let mut idx = tensor(&format!("{prefix}.indices"), n, seed ^ 0x40);
    idx.set_data_type(2);
    s.set_indices(idx);
    s.set_dims(vec![n as i64 * 2]);
    s
}

fn attr_t(name: &str, t: TensorProto) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.set_name(name);
    a.set_type(4);
    a.set_t(t);
    a
}

const BIG: usize = 3000;

/// A model with a large tensor in every place a tensor can live, plus small ones.
fn every_place_model() -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    m.set_producer_name("external-data-test");
    let mut sub = GraphProto::new();
    sub.set_name("sub");
    sub.mutable_initializer().push(tensor("sub.init", BIG, 1));
    let mut sub_node = NodeProto::new();
    sub_node.set_op_type("Constant");
    sub_node
        .mutable_attribute()
        .push(attr_t("value", tensor("sub.attr", BIG, 2)));
    sub.mutable_node().push(sub_node);
    let mut sub2 = GraphProto::new();
    sub2.set_name("sub2");
    sub2.mutable_initializer()
        .push(tensor("graphs.init", BIG, 3));
    sub2.mutable_sparse_initializer()
        .push(sparse("graphs.sparse", BIG, 4));

    let g = m.mutable_graph();
    g.set_name("main");
    g.mutable_initializer().push(tensor("init.big", BIG, 5));
    g.mutable_initializer().push(tensor("init.small", 16, 6));
    g.mutable_initializer().push(tensor("init.empty", 0, 7));
    g.mutable_sparse_initializer()
        .push(sparse("init.sparse", BIG, 8));
    let mut node = NodeProto::new();
    node.set_op_type("Custom");
    node.mutable_attribute()
        .push(attr_t("t", tensor("attr.t", BIG, 9)));
    let mut a = AttributeProto::new();
    a.set_name("tensors");
    a.mutable_tensors().push(tensor("attr.tensors0", BIG, 10));
    a.mutable_tensors().push(tensor("attr.tensors1", BIG, 11));
    node.mutable_attribute().push(a);
    let mut a = AttributeProto::new();
    a.set_name("sparse");
    a.set_sparse_tensor(sparse("attr.sparse", BIG, 12));
    a.mutable_sparse_tensors()
        .push(sparse("attr.sparses", BIG, 13));
    node.mutable_attribute().push(a);
    let mut a = AttributeProto::new();
    a.set_name("body");
    a.set_g(sub);
    node.mutable_attribute().push(a);
    let mut a = AttributeProto::new();
    a.set_name("branches");
    a.mutable_graphs().push(sub2);
    node.mutable_attribute().push(a);
    g.mutable_node().push(node);

    let mut f = FunctionProto::new();
    f.set_name("fn");
    f.mutable_attribute_proto()
        .push(attr_t("default", tensor("fn.default", BIG, 14)));
    let mut fnode = NodeProto::new();
    fnode
        .mutable_attribute()
        .push(attr_t("value", tensor("fn.node", BIG, 15)));
    f.mutable_node().push(fnode);
    m.mutable_functions().push(f);

    let mut ti = TrainingInfoProto::new();
    let mut init = GraphProto::new();
    init.mutable_initializer()
        .push(tensor("train.init", BIG, 16));
    let mut algo = GraphProto::new();
    algo.mutable_initializer()
        .push(tensor("train.algo", BIG, 17));
    ti.set_initialization(init);
    ti.set_algorithm(algo);
    m.mutable_training_info().push(ti);
    m
}

/// name → (raw bytes, data location) of every tensor.
fn tensors_of(m: &ModelProto) -> BTreeMap<String, (Option<Vec<u8>>, Option<i32>)> {
    let mut out = BTreeMap::new();
    m.visit_tensors(&mut |t| {
        out.insert(
            t.name().to_string(),
            (t.raw_data_opt().map(|r| r.to_vec()), t.data_location_opt()),
        );
    });
    out
}

fn no_load() -> LoadOptions {
    LoadOptions {
        load_external_data: false,
        ..Default::default()
    }
}

fn entry(k: &str, v: &str) -> StringStringEntryProto {
    {
        let mut s = StringStringEntryProto::new();
        s.set_key(k);
        s.set_value(v);
        s
    }
}

/// A model with one external tensor `w` described by `entries`.
fn external_model(entries: &[(&str, &str)], data_type: i32, n: i64) -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    let mut t = TensorProto::new();
    t.set_name("w");
    t.set_data_type(data_type);
    t.add_dims(n);
    t.set_data_location(DATA_LOCATION_EXTERNAL);
    for (k, v) in entries {
        t.mutable_external_data().push(entry(k, v));
    }
    m.mutable_graph().mutable_initializer().push(t);
    m
}

fn infos(m: &ModelProto) -> BTreeMap<String, ExternalDataInfo> {
    let mut out = BTreeMap::new();
    m.visit_tensors(&mut |t| {
        if uses_external_data(t) {
            out.insert(t.name().to_string(), ExternalDataInfo::parse(t).unwrap());
        }
    });
    out
}

fn is_refused(e: &Error) -> bool {
    matches!(e, Error::PathRefused { .. })
}

// ---------------------------------------------------------------------------------------------
// Round trips, every place

#[test]
fn every_place_round_trips_in_one_file() {
    let sb = Sandbox::new("every");
    let m = every_place_model();
    let before = tensors_of(&m);
    let opts = SaveExternalOptions {
        convert_attribute: true,
        externalize_sparse: true,
        location: Some("weights.bin".into()),
        ..Default::default()
    };
    let report = save_model_with_external_data(&m, sb.model(), &opts).unwrap();
    // Every large tensor, in every place, went to the file; the small and empty ones stayed.
    let large = before
        .values()
        .filter(|(r, _)| r.as_ref().is_some_and(|r| r.len() >= 1024))
        .count();
    assert_eq!(large, 19);
    assert_eq!(report.external_tensors, large);
    let saved = onnx_light::load_model(sb.model(), &no_load()).unwrap();
    let ext = infos(&saved);
    assert_eq!(ext.len(), large);
    assert!(ext.values().all(|i| i.location == "weights.bin"));
    assert!(!ext.contains_key("init.small") && !ext.contains_key("init.empty"));
    // Loading (default options) gives every tensor back, inline.
    let loaded = onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap();
    let after = tensors_of(&loaded);
    for (name, (bytes, loc)) in &before {
        assert_eq!(&after[name].0, bytes, "{name}");
        if ext.contains_key(name) {
            assert_eq!(after[name].1, Some(0), "{name} becomes DEFAULT");
        } else {
            assert_eq!(&after[name].1, loc, "{name}");
        }
    }
    // The rest of the model is unchanged.
    let mut expected = m.clone();
    expected.visit_tensors_mut(&mut |t| {
        if ext.contains_key(t.name().to_string().as_str()) {
            t.set_data_location(0);
        }
    });
    assert_eq!(loaded, expected);
}

#[test]
fn attributes_stay_inline_without_convert_attribute() {
    let sb = Sandbox::new("attr");
    let m = every_place_model();
    save_model_with_external_data(&m, sb.model(), &SaveExternalOptions::default()).unwrap();
    let saved = onnx_light::load_model(sb.model(), &no_load()).unwrap();
    let ext = infos(&saved);
    // Sparse initializers stay inline too by default (the onnx package cannot read them from
    // external data).
    let expected: Vec<&str> = vec![
        "graphs.init",
        "init.big",
        "sub.init",
        "train.algo",
        "train.init",
    ];
    assert_eq!(ext.keys().map(String::as_str).collect::<Vec<_>>(), expected);
    // Default location: the model file name + ".data".
    assert!(ext.values().all(|i| i.location == "m.onnx.data"));
}

#[test]
fn saving_does_not_mutate_the_model() {
    let sb = Sandbox::new("nomut");
    let m = every_place_model();
    let copy = m.clone();
    let mut ptrs = Vec::new();
    m.visit_tensors(&mut |t| ptrs.push(t.raw_data_opt().map(|r| (r.as_ptr(), r.is_borrowed()))));
    for opts in [
        SaveExternalOptions::default(),
        SaveExternalOptions {
            all_tensors_to_one_file: false,
            convert_attribute: true,
            ..Default::default()
        },
        SaveExternalOptions {
            max_external_file_size: 8000,
            checksum: true,
            num_threads: 2,
            ..Default::default()
        },
    ] {
        save_model_with_external_data(&m, sb.model(), &opts).unwrap();
        assert_eq!(m, copy);
        let mut now = Vec::new();
        m.visit_tensors(&mut |t| {
            now.push(t.raw_data_opt().map(|r| (r.as_ptr(), r.is_borrowed())));
            assert_ne!(t.data_location_opt(), Some(DATA_LOCATION_EXTERNAL));
            assert!(t.external_data().is_empty());
        });
        assert_eq!(now, ptrs, "payloads neither moved nor changed mode");
    }
    // Also a model loaded with no_copy (borrowed payloads).
    let mapped = onnx_light::load_model(
        sb.model(),
        &LoadOptions::from(ParseOptions {
            no_copy: true,
            ..Default::default()
        }),
    )
    .unwrap();
    let before = mapped.clone();
    save_model_with_external_data(&mapped, sb.dir().join("other.onnx"), &Default::default())
        .unwrap();
    assert_eq!(mapped, before);
}

#[test]
fn per_tensor_files_have_safe_unique_names() {
    let sb = Sandbox::new("pertensor");
    let mut m = ModelProto::new();
    let g = m.mutable_graph();
    g.mutable_initializer()
        .push(tensor("../../outside/evil", 2000, 1));
    g.mutable_initializer().push(tensor("/etc/passwd", 2000, 2));
    g.mutable_initializer().push(tensor("w", 2000, 3));
    g.mutable_initializer().push(tensor("W", 2000, 4));
    g.mutable_initializer().push(tensor("m.onnx", 2000, 5));
    g.mutable_initializer().push(tensor("", 2000, 6));
    g.mutable_initializer().push(tensor("small", 10, 7));
    let outside = sb.outside_snapshot();
    let opts = SaveExternalOptions {
        all_tensors_to_one_file: false,
        ..Default::default()
    };
    let report = save_model_with_external_data(&m, sb.model(), &opts).unwrap();
    let mut names: Vec<String> = report.files.iter().map(|f| f.location.clone()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "W_1",
            "_._.._outside_evil",
            "_etc_passwd",
            "m.onnx_1",
            "tensor",
            "w"
        ]
    );
    for n in &names {
        assert!(sb.dir().join(n).is_file(), "{n}");
    }
    assert_eq!(sb.outside_snapshot(), outside, "nothing written outside");
    let loaded = onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap();
    assert_eq!(tensors_of(&loaded).len(), 7);
    for (t, l) in m
        .graph()
        .initializer()
        .iter()
        .zip(loaded.graph().initializer().iter())
    {
        assert_eq!(t.raw_data(), l.raw_data());
    }
}

#[test]
fn alignment_of_offsets() {
    let sb = Sandbox::new("align");
    let mut m = ModelProto::new();
    let sizes = [
        5000usize,
        (1 << 20) + 3,
        1 << 20,
        777_777,
        (1 << 20) + 1,
        3000,
    ];
    for (i, n) in sizes.iter().enumerate() {
        m.mutable_graph()
            .mutable_initializer()
            .push(tensor(&format!("t{i}"), *n, i as u8));
    }
    let check = |opts: SaveExternalOptions, f: &dyn Fn(&str, u64, u64)| {
        save_model_with_external_data(&m, sb.model(), &opts).unwrap();
        let saved = onnx_light::load_model(sb.model(), &no_load()).unwrap();
        for (name, i) in infos(&saved) {
            f(&name, i.offset, i.length.unwrap());
        }
        let loaded = onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap();
        assert_eq!(tensors_of(&loaded).len(), sizes.len());
        for (t, l) in m
            .graph()
            .initializer()
            .iter()
            .zip(loaded.graph().initializer().iter())
        {
            assert_eq!(t.raw_data(), l.raw_data());
        }
    };
    // Default: every tensor at a multiple of 4096 (the ONNX external-data recommendation).
    check(SaveExternalOptions::default(), &|n, off, _| {
        assert_eq!(off % 4096, 0, "{n} at {off}");
    });
    // ONNX Runtime's threshold: 4096 for tensors of at least 1 MiB, 16 for the others.
    check(
        SaveExternalOptions {
            align_threshold: 1 << 20,
            ..Default::default()
        },
        &|n, off, len| {
            let a = if len >= 1 << 20 { 4096 } else { 16 };
            assert_eq!(off % a, 0, "{n} at {off}");
        },
    );
    // 64 KiB for every tensor.
    check(
        SaveExternalOptions {
            alignment: 65536,
            align_threshold: 0,
            ..Default::default()
        },
        &|n, off, _| assert_eq!(off % 65536, 0, "{n} at {off}"),
    );
    // Packed: each tensor right after the previous one.
    let mut expected = 0u64;
    let offsets = std::cell::RefCell::new(Vec::new());
    check(
        SaveExternalOptions {
            alignment: 0,
            ..Default::default()
        },
        &|_, off, len| offsets.borrow_mut().push((off, len)),
    );
    let mut offs = offsets.into_inner();
    offs.sort();
    for (off, len) in offs {
        assert_eq!(off, expected);
        expected += len;
    }
    assert_eq!(
        std::fs::metadata(sb.dir().join("m.onnx.data"))
            .unwrap()
            .len(),
        expected
    );
    // A non-power-of-two alignment is an option error.
    let bad = SaveExternalOptions {
        alignment: 3000,
        ..Default::default()
    };
    assert!(matches!(
        save_model_with_external_data(&m, sb.model(), &bad),
        Err(Error::InvalidOption { .. })
    ));
}

#[test]
fn split_files() {
    let sb = Sandbox::new("split");
    let mut m = ModelProto::new();
    for i in 0..10 {
        m.mutable_graph().mutable_initializer().push(tensor(
            &format!("t{i}"),
            30_000 + i * 1000,
            i as u8,
        ));
    }
    m.mutable_graph()
        .mutable_initializer()
        .push(tensor("huge", 250_000, 99));
    let opts = SaveExternalOptions {
        location: Some("w.bin".into()),
        max_external_file_size: 100_000,
        checksum: true,
        ..Default::default()
    };
    let report = save_model_with_external_data(&m, sb.model(), &opts).unwrap();
    let names: Vec<&str> = report.files.iter().map(|f| f.location.as_str()).collect();
    assert_eq!(names[0], "w.bin");
    for (i, n) in names.iter().enumerate().skip(1) {
        assert_eq!(*n, format!("w.bin.{i}"));
    }
    for f in &report.files {
        let size = std::fs::metadata(sb.dir().join(&f.location)).unwrap().len();
        assert_eq!(size, f.size);
        // Only a tensor larger than the limit gets a bigger file, alone.
        assert!(
            size <= 100_000 || f.tensors == 1,
            "{} is {size} bytes",
            f.location
        );
    }
    assert!(report.files.len() >= 5);
    let loaded = onnx_light::load_model(
        sb.model(),
        &LoadOptions {
            verify_external_checksums: true,
            ..LoadOptions::from(ParseOptions {
                num_threads: 2,
                ..Default::default()
            })
        },
    )
    .unwrap();
    assert_eq!(tensors_of(&loaded), {
        let mut t = tensors_of(&m);
        for v in t.values_mut() {
            v.1 = Some(0);
        }
        t
    });
    // And back to one file.
    save_model_with_external_data(&loaded, sb.model(), &Default::default()).unwrap();
    let one = onnx_light::load_model(sb.model(), &no_load()).unwrap();
    assert!(infos(&one).values().all(|i| i.location == "m.onnx.data"));
    let again = onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap();
    assert_eq!(tensors_of(&again), tensors_of(&loaded));
}

#[test]
fn checksums_are_written_verified_and_corruption_refused() {
    let sb = Sandbox::new("sum");
    let m = every_place_model();
    let opts = SaveExternalOptions {
        checksum: true,
        externalize_sparse: true,
        location: Some("w.bin".into()),
        ..Default::default()
    };
    let report = save_model_with_external_data(&m, sb.model(), &opts).unwrap();
    let file = sb.dir().join("w.bin");
    let digest = sha1_hex(&std::fs::read(&file).unwrap());
    assert_eq!(report.files[0].sha1.as_deref(), Some(digest.as_str()));
    let saved = onnx_light::load_model(sb.model(), &no_load()).unwrap();
    assert!(
        infos(&saved)
            .values()
            .all(|i| i.checksum.as_deref() == Some(digest.as_str()))
    );
    let verify = LoadOptions {
        verify_external_checksums: true,
        ..Default::default()
    };
    onnx_light::load_model(sb.model(), &verify).unwrap();
    let check = check_external_data(&saved, sb.dir(), &LoadOptions::default(), true, None);
    assert!(check.problems.is_empty(), "{:?}", check.problems);
    assert_eq!(check.checksums_verified, 9);
    // Flip one byte of padding-free data.
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&file, &bytes).unwrap();
    let e = onnx_light::load_model(sb.model(), &verify).unwrap_err();
    assert!(matches!(e, Error::ExternalData { .. }), "{e}");
    assert!(e.to_string().contains("checksum mismatch"), "{e}");
    assert!(e.to_string().contains("w.bin"), "{e}");
    let check = check_external_data(&saved, sb.dir(), &LoadOptions::default(), true, None);
    assert_eq!(check.problems.len(), 9);
    // Without verification the load goes through (onnx and ONNX Runtime never verify).
    onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap();
}

// ---------------------------------------------------------------------------------------------
// No-copy

#[test]
fn no_copy_maps_each_file_once_and_shares_one_owner() {
    let sb = Sandbox::new("nocopy");
    let m = every_place_model();
    let opts = SaveExternalOptions {
        convert_attribute: true,
        externalize_sparse: true,
        max_external_file_size: 40_000,
        location: Some("w.bin".into()),
        ..Default::default()
    };
    let report = save_model_with_external_data(&m, sb.model(), &opts).unwrap();
    assert!(report.files.len() >= 2);
    let saved_infos = infos(&onnx_light::load_model(sb.model(), &no_load()).unwrap());
    let mut nc = ParseOptions {
        no_copy: true,
        ..Default::default()
    };
    nc.raw_data_threshold = 1024;
    let loaded = onnx_light::load_model(sb.model(), &LoadOptions::from(nc.clone())).unwrap();
    let mut by_file: BTreeMap<String, Vec<(String, *const u8, u64, onnx_light::Owner)>> =
        BTreeMap::new();
    loaded.visit_tensors(&mut |t| {
        let name = t.name().to_string();
        if let Some(i) = saved_infos.get(&name) {
            let r = t.raw_data_opt().unwrap();
            assert!(r.is_borrowed(), "{name}");
            by_file.entry(i.location.clone()).or_default().push((
                name,
                r.as_ptr(),
                i.offset,
                r.owner().unwrap(),
            ));
        }
    });
    assert_eq!(by_file.len(), report.files.len());
    for (loc, tensors) in &by_file {
        let maps = common::mappings_of(&sb.dir().join(loc));
        assert_eq!(maps.len(), 1, "{loc} is mapped exactly once: {maps:?}");
        let (lo, hi) = maps[0];
        let (_, p0, off0, owner0) = &tensors[0];
        for (name, p, off, owner) in tensors {
            assert!(Arc::ptr_eq(owner, owner0), "{name}: one owner per file");
            let p = *p as usize;
            assert!(p >= lo && p < hi, "{name} lies inside the mapping of {loc}");
            assert_eq!(p as i64 - *p0 as i64, *off as i64 - *off0 as i64, "{name}");
        }
    }
    drop(by_file);
    // The bytes stay valid after the model is dropped while a token is held.
    let t = loaded.graph().initializer()[0].clone();
    let file = sb.dir().join(&saved_infos[&t.name().to_string()].location);
    let keep: onnx_light::Owner = t.raw_data_opt().unwrap().owner().unwrap();
    let (ptr, len) = (t.raw_data().as_ptr(), t.raw_data().len());
    drop(t);
    drop(loaded);
    // SAFETY: `keep` owns the mapping these bytes are in.
    let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
    assert_eq!(bytes, m.graph().initializer()[0].raw_data());
    assert!(!common::mappings_of(&file).is_empty());
    drop(keep);
    assert!(
        common::mappings_of(&file).is_empty(),
        "unmapped with the last token"
    );
}

#[test]
fn no_copy_copies_misaligned_and_small_tensors() {
    let sb = Sandbox::new("misaligned");
    let mut data = vec![0u8; 2];
    data.extend((0..4000u32).flat_map(|i| (i as f32).to_le_bytes()));
    std::fs::write(sb.dir().join("w.bin"), &data).unwrap();
    // A FLOAT tensor at offset 2: a borrowed pointer would be misaligned for f32.
    let m = external_model(
        &[("location", "w.bin"), ("offset", "2"), ("length", "16000")],
        1,
        4000,
    );
    onnx_light::save_model(&m, sb.model(), &Default::default()).unwrap();
    let opts = ParseOptions {
        no_copy: true,
        ..Default::default()
    };
    let l = onnx_light::load_model(sb.model(), &LoadOptions::from(opts.clone())).unwrap();
    let r = l.graph().initializer()[0].raw_data_opt().unwrap();
    assert!(!r.is_borrowed(), "misaligned: copied");
    assert_eq!(&r[..], &data[2..]);
    assert_eq!(r.as_ptr() as usize % 4, 0);
    assert_eq!(
        r.as_ptr() as usize % 64,
        0,
        "aligned to ParseOptions::alignment"
    );
    assert!(r.is_realigned());
    assert_eq!(onnx_light::codec::realigned_tensors(&l), 1);
    // The same bytes as UINT8 are copied as well (every pointer is 64-aligned by default)...
    let m = external_model(&[("location", "w.bin"), ("offset", "2")], 2, 16000);
    onnx_light::save_model(&m, sb.model(), &Default::default()).unwrap();
    let l = onnx_light::load_model(sb.model(), &LoadOptions::from(opts.clone())).unwrap();
    assert!(
        l.graph().initializer()[0]
            .raw_data_opt()
            .as_ref()
            .unwrap()
            .is_realigned()
    );
    // ... and borrowed when the alignment requirement is off.
    let any = ParseOptions {
        alignment: 1,
        ..opts.clone()
    };
    let l = onnx_light::load_model(sb.model(), &LoadOptions::from(any.clone())).unwrap();
    assert!(
        l.graph().initializer()[0]
            .raw_data_opt()
            .as_ref()
            .unwrap()
            .is_borrowed()
    );
    // Below raw_data_threshold: copied.
    let m = external_model(&[("location", "w.bin"), ("length", "100")], 2, 100);
    onnx_light::save_model(&m, sb.model(), &Default::default()).unwrap();
    let l = onnx_light::load_model(sb.model(), &LoadOptions::from(opts.clone())).unwrap();
    let r = l.graph().initializer()[0].raw_data_opt().unwrap();
    assert!(!r.is_borrowed());
    assert_eq!(&r[..], &data[..100]);
}

#[test]
fn resave_over_own_mapped_files() {
    let sb = Sandbox::new("resave");
    let m = every_place_model();
    let loc = SaveExternalOptions {
        location: Some("w.bin".into()),
        convert_attribute: true,
        ..Default::default()
    };
    save_model_with_external_data(&m, sb.model(), &loc).unwrap();
    let opts = ParseOptions {
        no_copy: true,
        ..Default::default()
    };
    let mapped = onnx_light::load_model(sb.model(), &LoadOptions::from(opts.clone())).unwrap();
    let expected = tensors_of(&mapped);
    // Same path, same location, different layout (packed, split, checksums): the new file
    // replaces the mapped one by rename; the mapping keeps the old bytes.
    for o in [
        SaveExternalOptions {
            alignment: 0,
            ..loc.clone()
        },
        SaveExternalOptions {
            max_external_file_size: 20_000,
            checksum: true,
            num_threads: 2,
            ..loc.clone()
        },
        loc.clone(),
    ] {
        let report = save_model_with_external_data(&mapped, sb.model(), &o).unwrap();
        assert_eq!(
            tensors_of(&mapped),
            expected,
            "the borrowed bytes did not change"
        );
        let again = onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap();
        assert_eq!(tensors_of(&again), expected);
        // The name asked for is kept (the alternate of the first commit is gone), and the
        // directory holds exactly the model and its weight files: no temporary, alternate,
        // lock or obsolete file. Windows can neither replace nor remove the mapped `w.bin`:
        // the files keep an alternate name (`w_K.bin`, `w_K.bin.1`, ...), and the mapped file
        // stays beside them.
        let written: Vec<String> = report.files.iter().map(|f| f.location.clone()).collect();
        let names = |base: &str| -> Vec<String> {
            (0..written.len())
                .map(|i| match i {
                    0 => base.to_string(),
                    i => format!("{base}.{i}"),
                })
                .collect()
        };
        let mut listed = dir_names(&sb.dir());
        listed.retain(|n| n != "m.onnx");
        let wanted = if cfg!(windows) {
            let base = written[0].clone();
            assert!(
                base.starts_with("w_") && base.ends_with(".bin"),
                "an alternate name: {written:?}"
            );
            listed.retain(|n| n != "w.bin");
            names(&base)
        } else {
            names("w.bin")
        };
        assert_eq!(written, wanted);
        assert_eq!(listed, wanted);
        assert!(
            infos(&onnx_light::load_model(sb.model(), &no_load()).unwrap())
                .values()
                .all(|i| wanted.contains(&i.location))
        );
    }
}

/// The names in `dir`, sorted.
fn dir_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `m` with every external `location` renamed by `f`.
fn relocated(m: &ModelProto, f: impl Fn(&str) -> String) -> ModelProto {
    let mut m = m.clone();
    m.visit_tensors_mut(&mut |t| {
        for e in t.mutable_external_data().iter_mut() {
            if e.key() == "location" {
                let new = f(&e.value().to_string());
                e.set_value(new);
            }
        }
    });
    m
}

#[test]
fn per_tensor_resave_keeps_names() {
    let sb = Sandbox::new("pt-resave");
    let m = every_place_model();
    let opts = SaveExternalOptions {
        all_tensors_to_one_file: false,
        ..Default::default()
    };
    let first = save_model_with_external_data(&m, sb.model(), &opts).unwrap();
    let before = dir_names(&sb.dir());
    let mapped = onnx_light::load_model(
        sb.model(),
        &LoadOptions::from(ParseOptions {
            no_copy: true,
            ..Default::default()
        }),
    )
    .unwrap();
    let again = save_model_with_external_data(&mapped, sb.model(), &opts).unwrap();
    if cfg!(windows) {
        // Windows cannot replace the mapped files: each keeps its first alternate name
        // (`w` -> `w_1`), the mapped files stay beside them.
        let mut renamed = first.files.clone();
        let mut listed = before.clone();
        for f in &mut renamed {
            f.location = format!("{}_1", f.location);
            listed.push(f.location.clone());
        }
        listed.sort();
        assert_eq!(again.files, renamed);
        assert_eq!(dir_names(&sb.dir()), listed);
    } else {
        assert_eq!(again.files, first.files);
        assert_eq!(dir_names(&sb.dir()), before);
    }
    let loaded = onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap();
    assert_eq!(tensors_of(&loaded), tensors_of(&mapped));
}

/// What a save killed between its two commits leaves, and what a killed save's alternate
/// leaves: the model still loads, and the next save removes every stray file.
#[test]
fn the_next_save_removes_what_a_killed_save_left() {
    let sb = Sandbox::new("strays");
    let m = every_place_model();
    let opts = SaveExternalOptions::default();
    save_model_with_external_data(&m, sb.model(), &opts).unwrap();
    let data = sb.dir().join("m.onnx.data");
    let alternate = sb.dir().join("m.onnx_1.data");
    // Killed after the wanted name was linked, before the second commit: the committed model
    // references the alternate, which has a second link under the wanted name.
    std::fs::rename(&data, &alternate).unwrap();
    std::fs::hard_link(&alternate, &data).unwrap();
    let raw = onnx_light::load_model(sb.model(), &no_load()).unwrap();
    let first = relocated(&raw, |_| "m.onnx_1.data".into());
    onnx_light::save_model(&first, sb.model(), &Default::default()).unwrap();
    let expected =
        tensors_of(&onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap());
    let no_copy = ParseOptions {
        no_copy: true,
        ..Default::default()
    };
    let mapped = onnx_light::load_model(sb.model(), &LoadOptions::from(no_copy.clone())).unwrap();
    assert_eq!(tensors_of(&mapped), expected);
    drop(mapped);
    // A stray alternate of an older killed save, and a file of someone else.
    std::fs::write(sb.dir().join("m.onnx_7.data"), b"stray").unwrap();
    std::fs::write(sb.dir().join("notes.txt"), b"mine").unwrap();
    let report = save_model_with_external_data(&m, sb.model(), &opts).unwrap();
    assert_eq!(report.files[0].location, "m.onnx.data");
    assert_eq!(dir_names(&sb.dir()), ["m.onnx", "m.onnx.data", "notes.txt"]);
    let loaded = onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap();
    assert_eq!(tensors_of(&loaded), expected);
    // A third link (one of them outside the directory) is still refused on load.
    let outside = sb.outside().join("third");
    std::fs::hard_link(&data, sb.dir().join("m.onnx_2.data")).unwrap();
    std::fs::hard_link(&data, &outside).unwrap();
    let e = onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap_err();
    assert!(is_refused(&e), "{e}");
}

#[test]
fn zero_length_tensors() {
    let sb = Sandbox::new("zero");
    let mut m = ModelProto::new();
    m.mutable_graph()
        .mutable_initializer()
        .push(tensor("a", 100, 1));
    m.mutable_graph()
        .mutable_initializer()
        .push(tensor("empty", 0, 2));
    m.mutable_graph()
        .mutable_initializer()
        .push(tensor("b", 100, 3));
    let opts = SaveExternalOptions {
        size_threshold: 0,
        ..Default::default()
    };
    let r = save_model_with_external_data(&m, sb.model(), &opts).unwrap();
    assert_eq!(r.external_tensors, 3);
    for no_copy in [false, true] {
        let l = onnx_light::load_model(
            sb.model(),
            &LoadOptions::from(ParseOptions {
                no_copy,
                raw_data_threshold: 0,
                ..Default::default()
            }),
        )
        .unwrap();
        let e = &l.graph().initializer()[1];
        assert_eq!(e.raw_data_opt().map(|r| r.len()), Some(0));
        assert_eq!(
            l.graph().initializer()[2].raw_data(),
            m.graph().initializer()[2].raw_data()
        );
    }
    // A zero-length range at the very end of a file, and an empty file.
    std::fs::write(sb.dir().join("end.bin"), [1, 2, 3]).unwrap();
    std::fs::write(sb.dir().join("none.bin"), []).unwrap();
    for (loc, off) in [("end.bin", "3"), ("none.bin", "0")] {
        let m = external_model(&[("location", loc), ("offset", off)], 2, 0);
        let mut m2 = m.clone();
        load_external_data_for_model(&mut m2, sb.dir(), &LoadOptions::default()).unwrap();
        assert_eq!(m2.graph().initializer()[0].raw_data_opt().unwrap().len(), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Entries

#[test]
fn keys_in_any_order_unknown_keys_basepath_and_length_to_end() {
    let sb = Sandbox::new("keys");
    let data = pattern(5000, 3);
    std::fs::write(sb.dir().join("w.bin"), &data).unwrap();
    // basepath points outside: it is accepted and never used.
    let basepath = sb.outside().to_string_lossy().into_owned();
    let m = external_model(
        &[
            ("offset", "1000"),
            ("unknown_key", "whatever"),
            ("basepath", &basepath),
            ("location", "w.bin"),
        ],
        2,
        4000,
    );
    let mut l = m.clone();
    let report = load_external_data_for_model(&mut l, sb.dir(), &LoadOptions::default()).unwrap();
    assert_eq!(report.tensors, 1);
    let t = &l.graph().initializer()[0];
    assert_eq!(
        t.raw_data(),
        &data[1000..],
        "length absent: to the end of the file"
    );
    assert!(t.external_data().is_empty());
    assert_eq!(t.data_location_opt(), Some(0));
    // prepacked entries are kept in the report.
    let m = external_model(
        &[("location", "w.bin"), ("prepacked_0", "key|0;16;0|16;16;0")],
        2,
        5000,
    );
    let mut l = m.clone();
    let report = load_external_data_for_model(&mut l, sb.dir(), &LoadOptions::default()).unwrap();
    assert_eq!(report.prepacked.len(), 1);
    assert_eq!(report.prepacked[0].entries[0].0, "prepacked_0");
}

#[test]
fn bad_entries_and_bounds_are_errors_before_allocation() {
    let sb = Sandbox::new("bounds");
    std::fs::write(sb.dir().join("w.bin"), pattern(4096, 1)).unwrap();
    let cases: &[&[(&str, &str)]] = &[
        &[("location", "w.bin"), ("offset", "-1")],
        &[("location", "w.bin"), ("length", "-5")],
        &[("location", "w.bin"), ("offset", "12abc")],
        &[("location", "w.bin"), ("length", "1e9")],
        &[("location", "w.bin"), ("offset", "4097")],
        &[("location", "w.bin"), ("offset", "4000"), ("length", "97")],
        // Would allocate 16 EiB if it were trusted.
        &[("location", "w.bin"), ("length", "18446744073709551615")],
        &[
            ("location", "w.bin"),
            ("offset", "18446744073709551615"),
            ("length", "2"),
        ],
        &[("offset", "0")],
        &[("location", "missing.bin")],
        &[("location", "w.bin"), ("prepacked_1", "k|x;1;0")],
    ];
    for entries in cases {
        let mut m = external_model(entries, 2, 1);
        let before = m.clone();
        let e =
            load_external_data_for_model(&mut m, sb.dir(), &LoadOptions::default()).unwrap_err();
        assert!(matches!(e, Error::ExternalData { .. }), "{entries:?}: {e}");
        assert!(e.to_string().contains("'w'"), "names the tensor: {e}");
        assert_eq!(m, before, "the model is unchanged on error");
    }
    // max_tensor_size_bytes is checked before reading.
    let mut m = external_model(&[("location", "w.bin")], 2, 4096);
    let e = load_external_data_for_model(
        &mut m,
        sb.dir(),
        &LoadOptions::from(ParseOptions {
            max_tensor_size_bytes: 100,
            ..Default::default()
        }),
    )
    .unwrap_err();
    assert!(matches!(e, Error::LimitExceeded(_)), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Path rules on load

#[cfg(unix)]
fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Every location that must be refused, set up in `sb`.
#[cfg(unix)]
fn attacks(sb: &Sandbox) -> Vec<(String, &'static str)> {
    use std::os::unix::fs::symlink;
    let dir = sb.dir();
    let secret = sb.outside().join("secret.bin");
    symlink(&secret, dir.join("link.bin")).unwrap();
    symlink(sb.outside(), dir.join("outdir")).unwrap();
    std::fs::create_dir(dir.join("real")).unwrap();
    std::fs::write(dir.join("real/inner.bin"), [1u8; 64]).unwrap();
    symlink(dir.join("real"), dir.join("alias")).unwrap();
    std::fs::hard_link(&secret, dir.join("hard.bin")).unwrap();
    mkfifo(&dir.join("fifo.bin"));
    std::fs::create_dir(dir.join("adir")).unwrap();
    vec![
        (String::new(), "empty"),
        (secret.to_string_lossy().into_owned(), "absolute"),
        ("\\outside\\secret.bin".into(), "absolute (backslash)"),
        ("C:\\outside\\secret.bin".into(), "drive letter"),
        ("C:secret.bin".into(), "drive-relative"),
        ("../outside/secret.bin".into(), "dot-dot"),
        (
            "a/../../outside/secret.bin".into(),
            "dot-dot after normalisation",
        ),
        ("..\\outside\\secret.bin".into(), "dot-dot (backslash)"),
        ("./../outside/secret.bin".into(), "dot-dot after dot"),
        ("link.bin".into(), "final symlink out"),
        ("outdir/secret.bin".into(), "symlinked parent out"),
        ("alias/inner.bin".into(), "symlinked parent (inside)"),
        ("hard.bin".into(), "hard link"),
        ("fifo.bin".into(), "FIFO"),
        ("adir".into(), "directory"),
        ("*/_ORT_MEM_ADDR_/*".into(), "ORT memory address tag"),
        (
            "x/_ORT_MEM_ADDR_/y".into(),
            "ORT memory address tag (variant)",
        ),
        (".".into(), "the directory itself"),
        ("w.bin:stream".into(), "stream separator"),
    ]
}

#[cfg(unix)]
#[test]
fn every_path_rule_on_load() {
    let sb = Sandbox::new("loadrules");
    let cases = attacks(&sb);
    let outside = sb.outside_snapshot();
    for (loc, what) in &cases {
        for no_copy in [false, true] {
            let m = external_model(&[("location", loc)], 2, 8192);
            // Through a file load (the automatic path)...
            onnx_light::save_model(&m, sb.model(), &Default::default()).unwrap();
            let opts = ParseOptions {
                no_copy,
                ..Default::default()
            };
            let e =
                onnx_light::load_model(sb.model(), &LoadOptions::from(opts.clone())).unwrap_err();
            assert!(is_refused(&e), "{what} ({loc:?}): {e}");
            assert!(
                e.to_string().contains(loc.as_str()),
                "{what}: names the path: {e}"
            );
            assert!(
                e.to_string().contains("'w'"),
                "{what}: names the tensor: {e}"
            );
            // ... and after the fact.
            let mut m2 = m.clone();
            let e =
                load_external_data_for_model(&mut m2, sb.dir(), &LoadOptions::from(opts.clone()))
                    .unwrap_err();
            assert!(is_refused(&e), "{what}: {e}");
            assert_eq!(m2, m);
        }
        // The checker reports the same refusal.
        let m = external_model(&[("location", loc)], 2, 8192);
        let r = check_external_data(&m, sb.dir(), &LoadOptions::default(), true, None);
        assert_eq!(r.problems.len(), 1, "{what}");
        assert!(is_refused(&r.problems[0]), "{what}");
        assert!(r.files.is_empty(), "{what}: no file opened");
    }
    assert_eq!(sb.outside_snapshot(), outside);
    // The file named in the refused hard-link case is readable when it is not linked twice.
    std::fs::remove_file(sb.outside().join("secret.bin")).unwrap();
    let mut m = external_model(&[("location", "hard.bin")], 2, 8192);
    load_external_data_for_model(&mut m, sb.dir(), &LoadOptions::default()).unwrap();
    assert_eq!(m.graph().initializer()[0].raw_data(), &[0x5a; 8192][..]);
}

// ---------------------------------------------------------------------------------------------
// Path rules on save

#[cfg(unix)]
#[test]
fn every_path_rule_on_save() {
    use std::os::unix::fs::symlink;
    let sb = Sandbox::new("saverules");
    let dir = sb.dir();
    let target = sb.outside().join("target.bin");
    std::fs::write(&target, b"do not touch").unwrap();
    symlink(&target, dir.join("link.bin")).unwrap();
    symlink(sb.outside(), dir.join("outdir")).unwrap();
    std::fs::hard_link(&target, dir.join("hard.bin")).unwrap();
    std::fs::create_dir(dir.join("adir")).unwrap();
    mkfifo(&dir.join("fifo.bin"));
    std::fs::create_dir(dir.join("real")).unwrap();
    symlink(dir.join("real"), dir.join("alias")).unwrap();
    let m = every_place_model();
    let outside = sb.outside_snapshot();
    let inside = snapshot(&dir);
    let cases: Vec<(String, &str)> = vec![
        (String::new(), "empty"),
        ("../outside/target.bin".into(), "dot-dot"),
        (
            "x/../../outside/target.bin".into(),
            "dot-dot after normalisation",
        ),
        ("..\\outside\\target.bin".into(), "dot-dot (backslash)"),
        ("link.bin".into(), "destination is a symlink"),
        ("outdir/target.bin".into(), "symlinked parent out"),
        (
            "outdir/new.bin".into(),
            "new file through a symlinked parent",
        ),
        ("alias/new.bin".into(), "symlinked parent (inside)"),
        ("hard.bin".into(), "destination has two links"),
        ("adir".into(), "destination is a directory"),
        ("fifo.bin".into(), "destination is a FIFO"),
        ("*/_ORT_MEM_ADDR_/*".into(), "ORT memory address tag"),
        ("m.onnx".into(), "the model file itself"),
        ("sub/../m.onnx".into(), "the model file itself, normalised"),
    ];
    for (loc, what) in &cases {
        let opts = SaveExternalOptions {
            location: Some(loc.clone()),
            ..Default::default()
        };
        let e = save_model_with_external_data(&m, sb.model(), &opts).unwrap_err();
        assert!(is_refused(&e), "{what} ({loc:?}): {e}");
        assert!(e.to_string().contains(loc.as_str()), "{what}: {e}");
        assert_eq!(
            sb.outside_snapshot(),
            outside,
            "{what}: nothing written outside"
        );
        assert_eq!(
            snapshot(&dir),
            inside,
            "{what}: no file written (no model, no temp)"
        );
        assert!(!sb.model().exists(), "{what}");
    }
    // An absolute location is reduced to its file name: written inside the directory, never
    // at the path itself.
    for absolute in [
        target.to_string_lossy().into_owned(),
        "C:\\x\\target.bin".to_string(),
    ] {
        let opts = SaveExternalOptions {
            location: Some(absolute.clone()),
            ..Default::default()
        };
        let report = save_model_with_external_data(&m, sb.model(), &opts).unwrap();
        assert_eq!(report.files[0].location, "target.bin", "{absolute}");
        assert!(dir.join("target.bin").is_file());
        assert_eq!(sb.outside_snapshot(), outside, "{absolute}");
    }
    // A valid sub-directory location is created inside the directory.
    let opts = SaveExternalOptions {
        location: Some("weights/sub/w.bin".into()),
        ..Default::default()
    };
    save_model_with_external_data(&m, sb.model(), &opts).unwrap();
    assert!(dir.join("weights/sub/w.bin").is_file());
    let l = onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap();
    assert_eq!(
        l.graph().initializer()[0].raw_data(),
        m.graph().initializer()[0].raw_data()
    );
    assert_eq!(sb.outside_snapshot(), outside);
}

// ---------------------------------------------------------------------------------------------
// Directories, overrides, loading after the fact

#[test]
fn base_directory_override_and_bytes_loads() {
    let sb = Sandbox::new("dirs");
    let m = every_place_model();
    let opts = SaveExternalOptions {
        externalize_sparse: true,
        location: Some("w.bin".into()),
        max_external_file_size: 20_000,
        ..Default::default()
    };
    save_model_with_external_data(&m, sb.model(), &opts).unwrap();
    let expected =
        tensors_of(&onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap());

    // Bytes loads read external data only with a base directory.
    let bytes = std::fs::read(sb.model()).unwrap();
    let plain = onnx_light::load_model_from_bytes(&bytes, &LoadOptions::default()).unwrap();
    assert!(external::has_external_data(&plain));
    let with_dir = onnx_light::load_model_from_bytes(
        &bytes,
        &LoadOptions {
            external_data_dir: Some(sb.dir()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(tensors_of(&with_dir), expected);

    // Move the weights elsewhere: a base directory, or a location override (split parts follow).
    let elsewhere = sb.root.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let mut parts = 0;
    for e in std::fs::read_dir(sb.dir()).unwrap() {
        let e = e.unwrap();
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with("w.bin") {
            std::fs::rename(e.path(), elsewhere.join(n.replace("w.bin", "moved.bin"))).unwrap();
            parts += 1;
        }
    }
    assert!(parts >= 2);
    assert!(onnx_light::load_model(sb.model(), &LoadOptions::default()).is_err());
    let over = LoadOptions {
        external_data_location: Some(elsewhere.join("moved.bin")),
        ..Default::default()
    };
    assert_eq!(
        tensors_of(&onnx_light::load_model(sb.model(), &over).unwrap()),
        expected
    );
    // Load after the fact from a directory.
    for e in std::fs::read_dir(&elsewhere).unwrap() {
        let e = e.unwrap();
        let n = e.file_name().to_string_lossy().into_owned();
        std::fs::rename(e.path(), elsewhere.join(n.replace("moved.bin", "w.bin"))).unwrap();
    }
    let mut lazy = onnx_light::load_model(sb.model(), &no_load()).unwrap();
    load_external_data_for_model(&mut lazy, &elsewhere, &LoadOptions::default()).unwrap();
    assert_eq!(tensors_of(&lazy), expected);
    let dir_opts = LoadOptions {
        external_data_dir: Some(elsewhere.clone()),
        ..Default::default()
    };
    assert_eq!(
        tensors_of(&onnx_light::load_model(sb.model(), &dir_opts).unwrap()),
        expected
    );
}

#[test]
fn unloaded_tensors_are_read_from_source_dir_when_saving() {
    let sb = Sandbox::new("source");
    let m = every_place_model();
    save_model_with_external_data(&m, sb.model(), &Default::default()).unwrap();
    let lazy = onnx_light::load_model(sb.model(), &no_load()).unwrap();
    let out = sb.root.join("out");
    std::fs::create_dir(&out).unwrap();
    // Without a source directory: an error naming the tensor.
    let e =
        save_model_with_external_data(&lazy, out.join("n.onnx"), &Default::default()).unwrap_err();
    assert!(matches!(e, Error::ExternalData { .. }), "{e}");
    assert!(!out.join("n.onnx").exists());
    // With it: the data is copied into the new layout; the in-memory model is unchanged.
    let before = lazy.clone();
    let opts = SaveExternalOptions {
        source_dir: Some(sb.dir()),
        size_threshold: 2500,
        all_tensors_to_one_file: false,
        ..Default::default()
    };
    save_model_with_external_data(&lazy, out.join("n.onnx"), &opts).unwrap();
    assert_eq!(lazy, before);
    let l = onnx_light::load_model(out.join("n.onnx"), &LoadOptions::default()).unwrap();
    let expected =
        tensors_of(&onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap());
    assert_eq!(tensors_of(&l), expected);
    // Re-saving the lazy model over its own files (same directory) also works.
    let opts = SaveExternalOptions {
        source_dir: Some(sb.dir()),
        alignment: 0,
        ..Default::default()
    };
    save_model_with_external_data(&lazy, sb.model(), &opts).unwrap();
    let l = onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap();
    assert_eq!(tensors_of(&l), expected);
}

#[test]
fn parallel_copy_load_equals_sequential() {
    let sb = Sandbox::new("parallel");
    let mut m = ModelProto::new();
    for i in 0..6 {
        m.mutable_graph()
            .mutable_initializer()
            .push(tensor(&format!("t{i}"), 3 << 20, i as u8));
    }
    let o = SaveExternalOptions {
        num_threads: 2,
        ..Default::default()
    };
    save_model_with_external_data(&m, sb.model(), &o).unwrap();
    let seq = onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap();
    let par = onnx_light::load_model(
        sb.model(),
        &LoadOptions::from(ParseOptions {
            num_threads: 2,
            ..Default::default()
        }),
    )
    .unwrap();
    assert_eq!(tensors_of(&seq), tensors_of(&par));
    for (a, b) in m
        .graph()
        .initializer()
        .iter()
        .zip(par.graph().initializer().iter())
    {
        assert_eq!(a.raw_data(), b.raw_data());
        // Copy mode: owned (a range of the load arena), aligned to 64 bytes.
        let r = b.raw_data_opt().unwrap();
        assert!(!r.is_borrowed());
        assert_eq!(r.as_ptr() as usize % 64, 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Consolidation

#[test]
fn consolidate_tensors_to_buffer_semantics() {
    let mut m = every_place_model();
    let before = tensors_of(&m);
    let opts = TensorBufferOptions {
        raw_data_threshold: 1000,
        alignment: 256,
    };
    let buf = consolidate_tensors_to_buffer(&mut m, &opts)
        .unwrap()
        .unwrap();
    assert_eq!(buf.tensors(), 19);
    let start = buf.as_slice().as_ptr() as usize;
    assert_eq!(start % 256, 0, "the buffer start is aligned");
    let owner: onnx_light::Owner = buf.clone();
    let mut seen = 0;
    m.visit_tensors(&mut |t| {
        let r = t.raw_data_opt().unwrap();
        if r.len() >= 1000 {
            seen += 1;
            assert!(r.is_borrowed());
            assert!(Arc::ptr_eq(&r.owner().unwrap(), &owner), "{}", t.name());
            let p = r.as_ptr() as usize;
            assert_eq!((p - start) % 256, 0, "{} offset is aligned", t.name());
            assert!(p >= start && p + r.len() <= start + buf.as_slice().len());
        } else {
            assert!(
                !r.is_borrowed(),
                "{} below the threshold is untouched",
                t.name()
            );
        }
    });
    assert_eq!(seen, 19);
    assert_eq!(tensors_of(&m), before, "same bytes");
    // The returned owner may be dropped: the tensors keep the buffer.
    drop(owner);
    drop(buf);
    assert_eq!(tensors_of(&m), before);
    // Threshold 0 also takes the small and empty tensors; alignment 0 packs.
    let mut m = every_place_model();
    let b = consolidate_tensors_to_buffer(&mut m, &TensorBufferOptions::default())
        .unwrap()
        .unwrap();
    assert_eq!(b.tensors(), 21);
    assert_eq!(b.as_slice().len(), 19 * BIG + 16);
    assert_eq!(tensors_of(&m), before);
    let bad = TensorBufferOptions {
        alignment: 100,
        raw_data_threshold: 0,
    };
    assert!(consolidate_tensors_to_buffer(&mut m, &bad).is_err());
    let mut empty = ModelProto::new();
    assert!(
        consolidate_tensors_to_buffer(&mut empty, &TensorBufferOptions::default())
            .unwrap()
            .is_none()
    );
}

// ---------------------------------------------------------------------------------------------
// Checker

#[test]
fn check_reports_every_problem() {
    let sb = Sandbox::new("check");
    std::fs::write(sb.dir().join("w.bin"), pattern(1000, 0)).unwrap();
    let mut m = ModelProto::new();
    let mut add = |name: &str, entries: &[(&str, &str)], dims: i64| {
        let mut t = external_model(entries, 2, dims).graph().initializer()[0].clone();
        t.set_name(name);
        m.mutable_graph().mutable_initializer().push(t);
    };
    add("ok", &[("location", "w.bin"), ("length", "100")], 100);
    add("size", &[("location", "w.bin"), ("length", "100")], 99);
    add(
        "bounds",
        &[("location", "w.bin"), ("offset", "990"), ("length", "100")],
        100,
    );
    add("missing", &[("location", "nope.bin")], 1);
    add("refused", &[("location", "../x")], 1);
    add("sum", &[("location", "w.bin"), ("checksum", "00")], 1000);
    let r = check_external_data(&m, sb.dir(), &LoadOptions::default(), true, None);
    assert_eq!(r.problems.len(), 5, "{:#?}", r.problems);
    let text: Vec<String> = r.problems.iter().map(|e| e.to_string()).collect();
    for name in ["size", "bounds", "missing", "refused", "sum"] {
        assert!(
            text.iter().any(|t| t.contains(&format!("'{name}'"))),
            "{name}: {text:?}"
        );
    }
    assert_eq!(r.files.len(), 1);
    assert!(!m.graph().initializer()[0].external_data().is_empty());
    let _ = Message::encoded_len(&m);
}

// ---------------------------------------------------------------------------------------------
// Many files, few descriptors

#[cfg(unix)]
const FD_CHILD: &str = "ONNXL_EXTERNAL_FD_CHILD";

/// A model with 600 per-tensor files saves, loads (copy and no-copy, checksums verified) and
/// checks in a process limited to 100 open descriptors (in a child process, so the limit binds
/// nothing else).
#[cfg(unix)]
#[test]
fn thousands_of_files_with_few_descriptors() {
    let Ok(dir) = std::env::var(FD_CHILD) else {
        let sb = Sandbox::new("fds");
        let out = common::this_test_binary()
            .args([
                "--exact",
                &common::test_name(module_path!(), "thousands_of_files_with_few_descriptors"),
                "--nocapture",
                "--test-threads=1",
            ])
            .env(FD_CHILD, sb.dir())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && text.contains("FD-CHILD-OK"),
            "{text}"
        );
        return;
    };
    let dir = PathBuf::from(dir);
    let lim = libc::rlimit {
        rlim_cur: 100,
        rlim_max: 20_000.min(u64::MAX as libc::rlim_t),
    };
    // SAFETY: a valid rlimit struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    // The limit binds: 200 open files are not possible.
    let held: Vec<_> = (0..200)
        .map_while(|_| std::fs::File::open("/dev/null").ok())
        .collect();
    assert!(held.len() < 100, "{}", held.len());
    drop(held);
    let mut m = ModelProto::new();
    for i in 0..600 {
        m.mutable_graph()
            .mutable_initializer()
            .push(tensor(&format!("t{i}"), 2000, i as u8));
    }
    let opts = SaveExternalOptions {
        all_tensors_to_one_file: false,
        checksum: true,
        num_threads: 2,
        ..Default::default()
    };
    let path = dir.join("m.onnx");
    let r = save_model_with_external_data(&m, &path, &opts).unwrap();
    assert_eq!(r.files.len(), 600);
    for no_copy in [false, true] {
        let l = onnx_light::load_model(
            &path,
            &LoadOptions {
                verify_external_checksums: true,
                ..LoadOptions::from(ParseOptions {
                    no_copy,
                    num_threads: 2,
                    ..Default::default()
                })
            },
        )
        .unwrap();
        for (a, b) in m
            .graph()
            .initializer()
            .iter()
            .zip(l.graph().initializer().iter())
        {
            assert_eq!(a.raw_data(), b.raw_data());
        }
    }
    let lazy = onnx_light::load_model(&path, &no_load()).unwrap();
    let c = check_external_data(&lazy, &dir, &LoadOptions::default(), true, None);
    assert!(
        c.problems.is_empty(),
        "{:?}",
        &c.problems[..c.problems.len().min(3)]
    );
    assert_eq!(c.checksums_verified, 600);
    println!("FD-CHILD-OK");
}

#[test]
fn use_external_data_location_keeps_the_references_of_unloaded_tensors() {
    let sb = Sandbox::new("keep-refs");
    let m = every_place_model();
    let weights = SaveExternalOptions {
        location: Some("weights.bin".into()),
        ..Default::default()
    };
    save_model_with_external_data(&m, sb.model(), &weights).unwrap();
    let expected =
        tensors_of(&onnx_light::load_model(sb.model(), &LoadOptions::default()).unwrap());
    let lazy = onnx_light::load_model(sb.model(), &no_load()).unwrap();
    let kept_refs = infos(&lazy);
    assert!(!kept_refs.is_empty());
    let weights_before = std::fs::read(sb.dir().join("weights.bin")).unwrap();
    // A second model beside the first: the unloaded tensors keep their references, read by
    // nobody; the new file holds only what the model had in memory, and the shared weights
    // file is untouched.
    let keep = SaveExternalOptions {
        location: Some("other.bin".into()),
        use_external_data_location: true,
        size_threshold: 0,
        ..Default::default()
    };
    let second = sb.dir().join("second.onnx");
    save_model_with_external_data(&lazy, &second, &keep).unwrap();
    let saved = onnx_light::load_model(&second, &no_load()).unwrap();
    let saved_refs = infos(&saved);
    for (name, info) in &kept_refs {
        assert_eq!(
            saved_refs.get(name),
            Some(info),
            "{name} keeps its reference"
        );
    }
    assert!(
        saved_refs.len() > kept_refs.len(),
        "the tensors in memory went to other.bin"
    );
    assert_eq!(
        std::fs::read(sb.dir().join("weights.bin")).unwrap(),
        weights_before
    );
    // The same bytes (the tensors written to other.bin come back with data_location set).
    let bytes = |m: BTreeMap<String, (Option<Vec<u8>>, Option<i32>)>| {
        m.into_iter()
            .map(|(k, v)| (k, v.0))
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(
        bytes(tensors_of(
            &onnx_light::load_model(&second, &LoadOptions::default()).unwrap()
        )),
        bytes(expected)
    );
    // Without the option (and no source directory) such a tensor is an error.
    let e = save_model_with_external_data(
        &lazy,
        sb.dir().join("third.onnx"),
        &SaveExternalOptions {
            use_external_data_location: false,
            ..keep.clone()
        },
    )
    .unwrap_err();
    assert!(matches!(e, Error::ExternalData { .. }), "{e}");
    // A kept reference that names a file of this save (here the very weights file it writes,
    // or the model over itself with the default location) is refused before anything is
    // written.
    for (path, location) in [
        (
            sb.dir().join("fourth.onnx"),
            Some("weights.bin".to_string()),
        ),
        (sb.model(), Some("weights.bin".to_string())),
    ] {
        let before = snapshot(&sb.dir());
        let e = save_model_with_external_data(
            &lazy,
            &path,
            &SaveExternalOptions {
                location,
                ..keep.clone()
            },
        )
        .unwrap_err();
        assert!(is_refused(&e), "{e}");
        assert!(e.to_string().contains("use_external_data_location"), "{e}");
        assert_eq!(snapshot(&sb.dir()), before, "nothing written");
    }
}

/// `LoadOptions::progress`: the calls of a file load sum to the model file's size plus every
/// external range read once (two tensors naming one range count it once), in pieces of at most
/// 8 MiB when copying and one call per range when mapping, with 1 or 2 threads; a load from
/// bytes reports its external data only.
#[test]
fn progress_reports_every_byte_loaded_once() {
    let sb = Sandbox::new("progress");
    let mut m = ModelProto::new();
    for i in 0..6 {
        m.mutable_graph().mutable_initializer().push(tensor(
            &format!("t{i}"),
            30_000 + i * 1000,
            i as u8,
        ));
    }
    m.mutable_graph()
        .mutable_initializer()
        .push(tensor("big", 20 << 20, 7));
    let opts = SaveExternalOptions {
        location: Some("w.bin".into()),
        max_external_file_size: 100_000,
        ..Default::default()
    };
    save_model_with_external_data(&m, sb.model(), &opts).unwrap();
    // A second tensor naming t0's range.
    let mut refs = onnx_light::load_model(sb.model(), &no_load()).unwrap();
    let mut alias = refs.graph().initializer()[0].clone();
    alias.set_name("alias");
    refs.mutable_graph().mutable_initializer().push(alias);
    onnx_light::save_model(&refs, sb.model(), &Default::default()).unwrap();
    let ranges: u64 = infos(&refs)
        .iter()
        .filter(|(name, _)| *name != "alias")
        .map(|(_, i)| i.length.unwrap())
        .sum();
    let model_size = std::fs::metadata(sb.model()).unwrap().len();
    let unique_ranges = 7;

    for threads in [1, 2] {
        for no_copy in [false, true] {
            let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
            let sink = calls.clone();
            let opts = LoadOptions {
                progress: Some(onnx_light::LoadProgress::new(move |n| {
                    sink.lock().unwrap().push(n)
                })),
                ..LoadOptions::from(ParseOptions {
                    num_threads: threads,
                    no_copy,
                    ..Default::default()
                })
            };
            let loaded = onnx_light::load_model(sb.model(), &opts).unwrap();
            assert_eq!(loaded.graph().initializer().len(), 8);
            let calls = calls.lock().unwrap();
            let case = format!("threads {threads}, no_copy {no_copy}: {calls:?}");
            assert_eq!(calls.iter().sum::<u64>(), model_size + ranges, "{case}");
            assert_eq!(calls[0], model_size, "{case}");
            if no_copy {
                assert_eq!(calls.len(), 1 + unique_ranges, "{case}");
            } else {
                assert!(calls.iter().all(|&n| n <= 8 << 20), "{case}");
                assert!(calls.len() >= 1 + unique_ranges + 2, "{case}");
            }
        }
    }

    let total = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sink = total.clone();
    let opts = LoadOptions {
        external_data_dir: Some(sb.dir()),
        progress: Some(onnx_light::LoadProgress::new(move |n| {
            sink.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        })),
        ..Default::default()
    };
    let bytes = std::fs::read(sb.model()).unwrap();
    onnx_light::load_model_from_bytes(&bytes, &opts).unwrap();
    assert_eq!(total.load(std::sync::atomic::Ordering::Relaxed), ranges);
}
