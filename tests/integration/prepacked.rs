//! ONNX Runtime pre-packed blobs: attach → save (right after the initializer, aligned,
//! `prepacked_N` entries) → load (no-copy: borrowed from the one mapping of the file, owner
//! shared with the initializers; copy: equal bytes), checksums, and malformed entries handled as
//! ONNX Runtime's `ExternalDataInfo::Create` handles them.

use crate::common;
use common::{TempDir as Dir, pattern, uint8_tensor as tensor};

use std::collections::BTreeMap;
use std::sync::Arc;

use onnx_light::external::{
    DATA_LOCATION_EXTERNAL, ExternalDataInfo, check_external_data, load_external_data_for_model,
    parse_prepacked, save_model_with_prepacked,
};
use onnx_light::proto::{ModelProto, StringStringEntryProto, TensorProto};
use onnx_light::{Error, LoadOptions, ParseOptions, PrepackedBlobs, SaveExternalOptions};

/// W (3000 bytes), B (100 bytes: below the size threshold), X (5000 bytes, no blobs).
fn model() -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    let g = m.mutable_graph();
    g.set_name("g");
    g.mutable_initializer().push(tensor("X", 5000, 1));
    g.mutable_initializer().push(tensor("W", 3000, 2));
    g.mutable_initializer().push(tensor("B", 100, 3));
    m
}

fn blobs() -> PrepackedBlobs {
    let mut b = PrepackedBlobs::new();
    b.attach("W", "k1", pattern(5000, 9)).unwrap();
    b.push_buffer("W", "k0", pattern(2 << 20, 7)).unwrap();
    b.push_buffer("W", "k0", pattern(10, 8)).unwrap();
    b.attach("B", "kb", pattern(7, 6)).unwrap();
    b
}

fn no_load() -> LoadOptions {
    LoadOptions {
        load_external_data: false,
        ..Default::default()
    }
}

fn infos(m: &ModelProto) -> BTreeMap<String, ExternalDataInfo> {
    m.graph()
        .initializer()
        .iter()
        .filter(|t| t.data_location_opt() == Some(DATA_LOCATION_EXTERNAL))
        .map(|t| (t.name().to_string(), ExternalDataInfo::parse(t).unwrap()))
        .collect()
}

fn same_blobs(a: &PrepackedBlobs, b: &PrepackedBlobs) {
    let keys = |s: &PrepackedBlobs| {
        s.iter()
            .map(|(i, k, b)| (i.to_string(), k.to_string(), b.buffers.len()))
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(a), keys(b));
    for (i, k, blob) in a.iter() {
        let other = b.get(i, k).unwrap();
        for (x, y) in blob.buffers.iter().zip(&other.buffers) {
            assert_eq!(x.as_slice(), y.as_slice(), "{i}/{k}");
        }
    }
}

#[test]
fn saved_as_onnxruntime_records_them_aligned_after_the_initializer() {
    let d = Dir::new("layout");
    let m = model();
    let b = blobs();
    let before = m.clone();
    let report =
        save_model_with_prepacked(&m, &b, d.path("m.onnx"), &SaveExternalOptions::default())
            .unwrap();
    assert_eq!(m, before, "the model is not changed");
    assert_eq!((report.prepacked_blobs, report.external_tensors), (3, 3));
    assert_eq!(report.prepacked_bytes, 5000 + (2 << 20) + 10 + 7);
    assert_eq!(report.files[0].tensors, 3);
    assert_eq!(report.files[0].prepacked_buffers, 4);
    let saved = onnx_light::load_model(d.path("m.onnx"), &no_load()).unwrap();
    let i = infos(&saved);
    assert!(
        i.contains_key("B"),
        "B carries blobs: external despite its size"
    );
    let data = std::fs::read(d.0.join("m.onnx.data")).unwrap();
    // W: prepacked_0 = k0 (two buffers), prepacked_1 = k1, in key order.
    let w = &i["W"];
    let keys: Vec<&str> = w.prepacked.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["prepacked_0", "prepacked_1"]);
    let (k0, r0) = parse_prepacked(&w.prepacked[0].1).unwrap().unwrap();
    let (k1, r1) = parse_prepacked(&w.prepacked[1].1).unwrap().unwrap();
    assert_eq!((k0.as_str(), k1.as_str()), ("k0", "k1"));
    assert_eq!(r0.len(), 2);
    // Right after W's bytes, each buffer at the next 4096 boundary (the default aligns every
    // buffer like every tensor): the first (2 MiB), the 10-byte one, then k1.
    let w_end = w.offset + w.length.unwrap();
    assert_eq!(r0[0].offset as u64, w_end.div_ceil(4096) * 4096);
    let after0 = r0[0].offset as u64 + r0[0].length;
    assert_eq!(r0[1].offset as u64, after0.div_ceil(4096) * 4096);
    let after1 = r0[1].offset as u64 + r0[1].length;
    assert_eq!(r1[0].offset as u64, after1.div_ceil(4096) * 4096);
    for r in r0.iter().chain(&r1) {
        assert_eq!(r.checksum, "0", "ONNX Runtime's value: not computed");
    }
    let at = |r: &onnx_light::external::PrepackedRange| {
        &data[r.offset as usize..r.offset as usize + r.length as usize]
    };
    assert_eq!(at(&r0[0]), pattern(2 << 20, 7));
    assert_eq!(at(&r0[1]), pattern(10, 8));
    assert_eq!(at(&r1[0]), pattern(5000, 9));
    // The next tensor (B) starts after W's blobs.
    assert!(i["B"].offset >= r1[0].offset as u64 + 5000);
    // Only the keys ONNX Runtime accepts are written.
    for t in saved.graph().initializer() {
        for e in t.external_data() {
            let k = e.key().to_string();
            assert!(
                ["location", "offset", "length"].contains(&k.as_str())
                    || k.starts_with("prepacked_"),
                "{k}"
            );
        }
    }
}

#[test]
fn no_copy_load_borrows_from_the_one_mapping_with_the_initializers_owner() {
    let d = Dir::new("nocopy");
    let m = model();
    let b = blobs();
    save_model_with_prepacked(&m, &b, d.path("m.onnx"), &SaveExternalOptions::default()).unwrap();
    let nc = ParseOptions {
        no_copy: true,
        ..Default::default()
    };
    let (loaded, got) =
        onnx_light::load_model_with_prepacked(d.path("m.onnx"), &LoadOptions::from(nc.clone()))
            .unwrap();
    same_blobs(&got, &b);
    let file = d.0.join("m.onnx.data");
    let maps = common::mappings_of(&file);
    assert_eq!(maps.len(), 1, "mapped exactly once: {maps:?}");
    let (lo, hi) = maps[0];
    let w = loaded
        .graph()
        .initializer()
        .iter()
        .find(|t| t.name() == "W")
        .unwrap();
    let w_owner = w.raw_data_opt().unwrap().owner().unwrap();
    for (i, k, blob) in got.iter() {
        for (n, buf) in blob.buffers.iter().enumerate() {
            assert!(buf.is_borrowed(), "{i}/{k}[{n}]");
            let p = buf.as_ptr() as usize;
            assert!(
                p >= lo && p + buf.len() <= hi,
                "{i}/{k}[{n}] inside the mapping"
            );
            assert!(
                Arc::ptr_eq(&blob.owner(n).unwrap(), &w_owner),
                "one owner per file"
            );
        }
    }
    // The same through load_external_data_for_model: the report's file owner is that token.
    let mut m2 = onnx_light::load_model(d.path("m.onnx"), &no_load()).unwrap();
    let report =
        load_external_data_for_model(&mut m2, &d.0, &LoadOptions::from(nc.clone())).unwrap();
    assert_eq!(report.prepacked.len(), 2);
    let file_owner = report.files[0].owner.clone().unwrap();
    let blob = report.blobs.get("W", "k0").unwrap();
    assert!(Arc::ptr_eq(&blob.owner(0).unwrap(), &file_owner));
    // The bytes outlive the model and the store while a token is held.
    let keep = got.get("W", "k1").unwrap().owner(0).unwrap();
    let (ptr, len) = {
        let s = got.get("W", "k1").unwrap().buffer(0).unwrap();
        (s.as_ptr(), s.len())
    };
    drop((loaded, got, m2, report, w_owner, file_owner));
    // SAFETY: `keep` holds the mapping these bytes lie in.
    assert_eq!(
        unsafe { std::slice::from_raw_parts(ptr, len) },
        pattern(5000, 9)
    );
    drop(keep);
    assert!(
        common::mappings_of(&file).is_empty(),
        "unmapped with the last token"
    );
}

#[test]
fn copy_load_gives_equal_bytes_and_round_trips_again() {
    let d = Dir::new("copy");
    let m = model();
    let b = blobs();
    save_model_with_prepacked(&m, &b, d.path("m.onnx"), &SaveExternalOptions::default()).unwrap();
    let (loaded, got) =
        onnx_light::load_model_with_prepacked(d.path("m.onnx"), &LoadOptions::default()).unwrap();
    same_blobs(&got, &b);
    assert!(
        common::mappings_of(&d.0.join("m.onnx.data")).is_empty(),
        "copy mode keeps no map"
    );
    // Tensors are inline after the load, the blobs travel beside the model.
    assert!(
        loaded
            .graph()
            .initializer()
            .iter()
            .all(|t| t.external_data().is_empty())
    );
    // Save again (per-tensor files this time): same keys, same bytes.
    let d2 = Dir::new("copy2");
    let opts = SaveExternalOptions {
        all_tensors_to_one_file: false,
        alignment: 0,
        ..Default::default()
    };
    save_model_with_prepacked(&loaded, &got, d2.path("m.onnx"), &opts).unwrap();
    let saved = onnx_light::load_model(d2.path("m.onnx"), &no_load()).unwrap();
    let i = infos(&saved);
    assert_eq!(i["W"].location, "W");
    let (_, r) = parse_prepacked(&i["W"].prepacked[0].1).unwrap().unwrap();
    assert_eq!(
        r[0].offset as u64, 3000,
        "packed: the blob follows the tensor in its own file"
    );
    let (_, again) =
        onnx_light::load_model_with_prepacked(d2.path("m.onnx"), &LoadOptions::default()).unwrap();
    same_blobs(&again, &b);
}

#[test]
fn checksums_are_written_and_verified() {
    let d = Dir::new("checksum");
    let m = model();
    let b = blobs();
    let opts = SaveExternalOptions {
        checksum: true,
        ..Default::default()
    };
    save_model_with_prepacked(&m, &b, d.path("m.onnx"), &opts).unwrap();
    let verify = LoadOptions {
        verify_external_checksums: true,
        ..Default::default()
    };
    let (_, got) = onnx_light::load_model_with_prepacked(d.path("m.onnx"), &verify).unwrap();
    same_blobs(&got, &b);
    // Drop the whole-file checksums (so only the blobs' are left), corrupt one blob byte.
    let mut saved = onnx_light::load_model(d.path("m.onnx"), &no_load()).unwrap();
    let mut k1 = None;
    for t in saved.mutable_graph().mutable_initializer().iter_mut() {
        t.mutable_external_data()
            .retain(|e| e.key().as_bytes() != b"checksum");
        if t.name() == "W" {
            let i = ExternalDataInfo::parse(t).unwrap();
            let (_, r) = parse_prepacked(&i.prepacked[1].1).unwrap().unwrap();
            assert_eq!(
                r[0].checksum,
                onnx_light::external::sha1_hex(&pattern(5000, 9))
            );
            k1 = Some(r[0].offset as usize);
        }
    }
    onnx_light::save_model(&saved, d.path("m.onnx"), &Default::default()).unwrap();
    let data_path = d.0.join("m.onnx.data");
    let mut data = std::fs::read(&data_path).unwrap();
    data[k1.unwrap() + 10] ^= 0xff;
    std::fs::write(&data_path, &data).unwrap();
    let err = onnx_light::load_model_with_prepacked(d.path("m.onnx"), &verify).unwrap_err();
    assert!(
        matches!(&err, Error::ExternalData { reason, .. } if reason.contains("pre-packed blob \"k1\": checksum mismatch")),
        "{err}"
    );
    // Not verified by default (as ONNX Runtime): loads, with the corrupted bytes.
    let (_, got) =
        onnx_light::load_model_with_prepacked(d.path("m.onnx"), &LoadOptions::default()).unwrap();
    assert_ne!(
        got.get("W", "k1").unwrap().buffer(0).unwrap(),
        pattern(5000, 9)
    );
}

fn entry(k: &str, v: &str) -> StringStringEntryProto {
    {
        let mut s = StringStringEntryProto::new();
        s.set_key(k);
        s.set_value(v);
        s
    }
}

/// A model whose tensor `w` (64 bytes at offset 0 of `w.bin`, 4096 bytes) has `extra` entries.
fn external_model(location: &str, extra: &[(&str, &str)]) -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    let mut t = TensorProto::new();
    t.set_name("w");
    t.set_data_type(2);
    t.add_dims(64);
    t.set_data_location(DATA_LOCATION_EXTERNAL);
    t.mutable_external_data().push(entry("location", location));
    t.mutable_external_data().push(entry("offset", "0"));
    t.mutable_external_data().push(entry("length", "64"));
    for (k, v) in extra {
        t.mutable_external_data().push(entry(k, v));
    }
    m.mutable_graph().mutable_initializer().push(t);
    m
}

fn load(d: &Dir, extra: &[(&str, &str)], no_copy: bool) -> onnx_light::Result<PrepackedBlobs> {
    let mut m = external_model("w.bin", extra);
    let opts = ParseOptions {
        no_copy,
        ..Default::default()
    };
    load_external_data_for_model(&mut m, &d.0, &LoadOptions::from(opts.clone())).map(|r| r.blobs)
}

#[test]
fn malformed_entries_are_handled_as_onnxruntime_does() {
    let d = Dir::new("malformed");
    let data = pattern(4096, 5);
    std::fs::write(d.0.join("w.bin"), &data).unwrap();
    for no_copy in [false, true] {
        // Incomplete triples skipped; the rest of the entry is used.
        let b = load(
            &d,
            &[("prepacked_0", "k|64;16;0|bad|1;2|3;4;5;6|;;")],
            no_copy,
        )
        .unwrap();
        assert_eq!(b.len(), 1);
        let k = b.get("w", "k").unwrap();
        assert_eq!(k.buffers.len(), 1);
        assert_eq!(k.buffer(0).unwrap(), &data[64..80]);
        // Entries ignored as a whole: no blob, the tensor still loads.
        for v in ["", "k", "k|", "k|1;2", "|||", "k|1;2;3;4"] {
            let b = load(&d, &[("prepacked_0", v)], no_copy).unwrap();
            assert!(b.is_empty(), "{v:?}");
        }
        // Any key starting with `prepacked` counts; others are not blobs.
        let b = load(
            &d,
            &[
                ("prepackedX", "a|0;8;0"),
                ("prepacked_9", "a|8;8;0"),
                ("xprepacked", "b|0;8;0"),
            ],
            no_copy,
        )
        .unwrap();
        assert_eq!(b.len(), 1);
        let a = b.get("w", "a").unwrap();
        assert_eq!(
            a.buffers.len(),
            2,
            "same key in two entries: buffers appended"
        );
        assert_eq!(a.buffer(1).unwrap(), &data[8..16]);
        // Zero-length buffers, numbers as std::from_chars reads them (ONNX Runtime 1.31).
        let b = load(&d, &[("prepacked_0", "z|4096;0;0|-0;0x2;0")], no_copy).unwrap();
        let z = b.get("w", "z").unwrap();
        assert_eq!(
            (z.buffer(0).unwrap(), z.buffer(1).unwrap()),
            (&[][..], &data[..2])
        );
        assert!(z.owner(0).is_some(), "an empty buffer has a token too");
        // Bad numbers are errors; ranges outside the file are errors.
        for v in [
            "k|x;16;0",
            "k|0;16;0|1;y;0",
            "k| 1;16;0",
            "k|1 ;16;0",
            "k|0x10;16;0",
            "k|+1;16;0",
            "k|0;+16;0",
            "k|0;0x;0",
            "k|0;-16;0",
            "k|99999999999999999999;1;0",
            "k|-64;16;0",
            "k|4090;16;0",
            "k|4097;0;0",
            "k|1;18446744073709551615;0",
            "k|9223372036854775807;1;0",
        ] {
            let err = load(&d, &[("prepacked_0", v)], no_copy).unwrap_err();
            assert!(matches!(err, Error::ExternalData { .. }), "{v:?}: {err}");
            // check_external_data reports it too, without loading.
            let m = external_model("w.bin", &[("prepacked_0", v)]);
            let r = check_external_data(&m, &d.0, &LoadOptions::default(), false, None);
            assert_eq!(r.problems.len(), 1, "{v:?}");
        }
    }
}

#[test]
fn blobs_follow_the_tensors_path_rules() {
    let d = Dir::new("paths");
    std::fs::create_dir_all(d.0.join("sub")).unwrap();
    std::fs::write(d.0.join("sub/w.bin"), pattern(256, 1)).unwrap();
    std::fs::write(d.0.join("other.bin"), pattern(256, 2)).unwrap();
    // The blob's offsets are in the TENSOR's file (no location of their own).
    let mut m = external_model("sub/w.bin", &[("prepacked_0", "k|100;10;0")]);
    let r = load_external_data_for_model(&mut m, &d.0, &LoadOptions::default()).unwrap();
    assert_eq!(
        r.blobs.get("w", "k").unwrap().buffer(0).unwrap(),
        &pattern(256, 1)[100..110]
    );
    // A refused location refuses its blobs with it: nothing is read.
    for loc in ["../x/w.bin", "/etc/passwd", "sub/../../w.bin"] {
        let mut m = external_model(loc, &[("prepacked_0", "k|0;1;0")]);
        let err = load_external_data_for_model(&mut m, &d.0, &LoadOptions::default()).unwrap_err();
        assert!(matches!(err, Error::PathRefused { .. }), "{loc}: {err}");
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(d.0.join("other.bin"), d.0.join("link.bin")).unwrap();
        let mut m = external_model("link.bin", &[("prepacked_0", "k|0;1;0")]);
        let err = load_external_data_for_model(&mut m, &d.0, &LoadOptions::default()).unwrap_err();
        assert!(matches!(err, Error::PathRefused { .. }), "{err}");
    }
}

#[test]
fn save_refuses_blobs_without_a_carrier() {
    let d = Dir::new("carrier");
    let m = model();
    let mut b = PrepackedBlobs::new();
    b.attach("missing", "k", vec![1u8]).unwrap();
    let err = save_model_with_prepacked(&m, &b, d.path("m.onnx"), &SaveExternalOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(!d.path("m.onnx").exists(), "nothing written");
    let mut m = model();
    let t = &mut m.mutable_graph().mutable_initializer()[2];
    t.clear_raw_data();
    t.set_data_type(1);
    t.set_float_data(vec![1.0; 25]);
    let mut b = PrepackedBlobs::new();
    b.attach("B", "k", vec![1u8]).unwrap();
    let err = save_model_with_prepacked(&m, &b, d.path("m.onnx"), &SaveExternalOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    // An empty store is a plain external-data save.
    let r = save_model_with_prepacked(
        &model(),
        &PrepackedBlobs::new(),
        d.path("m.onnx"),
        &SaveExternalOptions::default(),
    )
    .unwrap();
    assert_eq!((r.prepacked_blobs, r.external_tensors), (0, 2));
}

#[test]
fn split_files_keep_a_tensor_with_its_blobs() {
    let d = Dir::new("split");
    let m = model();
    let mut b = PrepackedBlobs::new();
    b.attach("W", "k", pattern(6000, 4)).unwrap();
    let opts = SaveExternalOptions {
        location: Some("w.bin".into()),
        max_external_file_size: 8000,
        ..Default::default()
    };
    let report = save_model_with_prepacked(&m, &b, d.path("m.onnx"), &opts).unwrap();
    assert!(report.files.len() >= 2);
    let saved = onnx_light::load_model(d.path("m.onnx"), &no_load()).unwrap();
    let w = &infos(&saved)["W"];
    assert_eq!(w.location, "w.bin.1", "W + its blob did not fit after X");
    let (_, got) =
        onnx_light::load_model_with_prepacked(d.path("m.onnx"), &LoadOptions::default()).unwrap();
    same_blobs(&got, &b);
}

#[test]
fn resave_over_the_mapped_files_keeps_blobs() {
    let d = Dir::new("resave");
    let b = blobs();
    save_model_with_prepacked(
        &model(),
        &b,
        d.path("m.onnx"),
        &SaveExternalOptions::default(),
    )
    .unwrap();
    let nc = ParseOptions {
        no_copy: true,
        ..Default::default()
    };
    let (loaded, got) =
        onnx_light::load_model_with_prepacked(d.path("m.onnx"), &LoadOptions::from(nc.clone()))
            .unwrap();
    // Over the very files the tensors and blobs borrow from, with another alignment.
    let opts = SaveExternalOptions {
        alignment: 65536,
        align_threshold: 0,
        ..Default::default()
    };
    save_model_with_prepacked(&loaded, &got, d.path("m.onnx"), &opts).unwrap();
    same_blobs(&got, &b);
    let (_, again) =
        onnx_light::load_model_with_prepacked(d.path("m.onnx"), &LoadOptions::from(nc.clone()))
            .unwrap();
    same_blobs(&again, &b);
    let saved = onnx_light::load_model(d.path("m.onnx"), &no_load()).unwrap();
    for (_, v) in &infos(&saved)["W"].prepacked {
        let (_, ranges) = parse_prepacked(v).unwrap().unwrap();
        assert!(ranges.iter().all(|r| r.offset % 65536 == 0));
    }
}

#[test]
fn blobs_in_encrypted_weight_files_round_trip_in_both_modes() {
    use onnx_light::ExternalEncryption;
    use onnx_light::crypto::{ChunkCipher, Passphrase};
    let d = Dir::new("encrypted");
    let (m, b) = (model(), blobs());
    let opts = SaveExternalOptions {
        encryption: Some(ExternalEncryption {
            key: Passphrase::new(b"blob key".as_slice()),
            cipher: ChunkCipher::AesGcm,
            chunk_size: 4096,
        }),
        checksum: true,
        ..Default::default()
    };
    save_model_with_prepacked(&m, &b, d.path("m.onnx"), &opts).unwrap();
    let data = std::fs::read(d.0.join("m.onnx.data")).unwrap();
    assert!(data.starts_with(b"ONNXCRYS"), "weights are encrypted");
    let clear = &pattern(5000, 9)[..64];
    assert!(
        !data.windows(64).any(|w| w == clear),
        "blob bytes in the clear"
    );
    for no_copy in [false, true] {
        let popts = LoadOptions {
            verify_external_checksums: true,
            external_data_key: Some(b"blob key".as_slice().into()),
            ..LoadOptions::from(ParseOptions {
                no_copy,
                ..Default::default()
            })
        };
        let (_, got) = onnx_light::load_model_with_prepacked(d.path("m.onnx"), &popts).unwrap();
        same_blobs(&got, &b);
    }
    let e = onnx_light::load_model_with_prepacked(d.path("m.onnx"), &LoadOptions::default())
        .unwrap_err();
    assert!(e.to_string().contains("passphrase"), "{e}");
}

#[test]
fn blobs_of_an_initializer_are_exactly_its_own() {
    let mut b = PrepackedBlobs::new();
    for (init, key) in [("W", "b"), ("W2", "a"), ("V", "z"), ("W", "a"), ("", "x")] {
        if init.is_empty() {
            assert!(
                b.attach(init, key, vec![1]).is_err(),
                "empty initializer name"
            );
            continue;
        }
        b.attach(init, key, pattern(4, key.as_bytes()[0])).unwrap();
    }
    let keys = |i| {
        b.blobs_of(i)
            .map(|(k, _)| k.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(keys("W"), ["a", "b"]);
    assert_eq!(keys("W2"), ["a"]);
    assert_eq!(keys("V"), ["z"]);
    assert!(keys("X").is_empty() && keys("").is_empty());
    assert_eq!(b.keys_for("W").collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(
        b.blobs_of("W").next().unwrap().1.buffer(0),
        Some(&pattern(4, b'a')[..])
    );
}
