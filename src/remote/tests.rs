//! The remote layer against `object_store`'s in-memory store (no server): full and
//! metadata-only loads equal to local ones, the bytes a metadata-only load reads, external data
//! under the model's prefix, and the path rules. The same paths against real S3 and HTTP(S)
//! servers, with injected faults: tests/remote/ (scripts/test.d/65-remote.sh).

use std::path::Path;
use std::sync::Arc;

use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::*;
use crate::codec::{ParseOptions, parse_from_bytes};
use crate::external::{SaveExternalOptions, save_model_with_external_data};
use crate::proto::{ModelProto, TensorProto};

fn sample() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/mlp.onnx")).unwrap()
}

/// A location in `store` for `key`, with objects put there first.
fn put(store: &Arc<InMemory>, objects: &[(&str, Vec<u8>)], key: &str) -> Location {
    for (k, bytes) in objects {
        block_on(store.put(&ObjectPath::from(*k), PutPayload::from(bytes.clone())))
            .unwrap()
            .unwrap();
    }
    Location {
        store: store.clone() as Arc<dyn ObjectStore>,
        key: ObjectPath::from(key),
        url: format!("memory:///{key}"),
        root: "memory://".into(),
    }
}

fn bytes_of(m: &ModelProto) -> Vec<u8> {
    crate::codec::serialize_to_vec(m, &Default::default()).unwrap()
}

#[test]
fn urls_are_recognized() {
    for u in [
        "s3://b/k.onnx",
        "S3://b/k",
        "s3a://b/k",
        "az://c/k.onnx",
        "Azure://c/k",
        "http://h/m.onnx",
        "https://h:1/m",
    ] {
        assert!(is_url(Path::new(u)), "{u}");
    }
    for p in [
        "model.onnx",
        "/tmp/s3/m.onnx",
        "s3:/b/k",
        "az://",
        "gs://b/k.onnx",
        "https://",
        "file:///m.onnx",
    ] {
        assert!(!is_url(Path::new(p)), "{p}");
    }
}

#[test]
fn loads_equal_local_loads_and_skip_payloads() {
    let store = Arc::new(InMemory::new());
    let ro = RemoteOptions {
        part_size: 64 << 10,
        ..Default::default()
    };
    // The sample, whole and metadata-only.
    let loc = put(&store, &[("m/mlp.onnx", sample())], "m/mlp.onnx");
    for skip_raw_data in [false, true] {
        let opts = ParseOptions {
            skip_raw_data,
            raw_data_threshold: 16,
            ..Default::default()
        };
        let remote: ModelProto = parse_at(&loc, &opts.clone().into(), &ro).unwrap();
        let local: ModelProto = parse_from_bytes(&sample(), &opts).unwrap();
        assert_eq!(
            bytes_of(&remote),
            bytes_of(&local),
            "skip_raw_data {skip_raw_data}"
        );
    }
    // A model of 16 MiB payloads: a metadata-only load reads under 1% of it.
    let mut big = ModelProto::new();
    let g = big.graph.get_or_insert_with(Default::default);
    for i in 0..8 {
        let mut t = TensorProto::new();
        t.set_name(format!("w{i}"));
        t.dims = vec![4 << 20].into();
        t.data_type = Some(1);
        t.raw_data = Some(vec![i as u8; 16 << 20].into());
        g.initializer.push(t);
    }
    let file = bytes_of(&big);
    let loc = put(&store, &[("big/m.onnx", file.clone())], "big/m.onnx");
    let opts = ParseOptions {
        skip_raw_data: true,
        ..Default::default()
    };
    let before = bytes_fetched();
    let remote: ModelProto = parse_at(&loc, &opts.clone().into(), &ro).unwrap();
    let read = bytes_fetched() - before;
    assert!(
        read * 100 < file.len() as u64,
        "{read} of {} bytes",
        file.len()
    );
    let local: ModelProto = parse_from_bytes(&file, &opts).unwrap();
    assert_eq!(bytes_of(&remote), bytes_of(&local));
    assert!(remote.graph().initializer[7].raw_data.is_none());
    // The full load has every byte.
    let remote: ModelProto = parse_at(&loc, &LoadOptions::default(), &ro).unwrap();
    assert_eq!(bytes_of(&remote), file);
}

#[test]
fn external_data_resolves_under_the_model_prefix() {
    let dir = std::env::temp_dir().join(format!("onnxl-remote-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model: ModelProto = parse_from_bytes(&sample(), &Default::default()).unwrap();
    let saved = dir.join("model.onnx");
    let ext = SaveExternalOptions {
        size_threshold: 0,
        all_tensors_to_one_file: false,
        ..Default::default()
    };
    let report = save_model_with_external_data(&model, &saved, &ext).unwrap();
    assert!(report.files.len() > 1);
    let mut objects = vec![("a/b/model.onnx".to_string(), std::fs::read(&saved).unwrap())];
    for f in &report.files {
        objects.push((
            format!("a/b/{}", f.location),
            std::fs::read(dir.join(&f.location)).unwrap(),
        ));
    }
    // (The local load, through the layers below this one: parse, then the external data.)
    let mut local: crate::proto::ModelProto =
        crate::codec::parse_file(&saved, &Default::default()).unwrap();
    crate::external::load_external_data_for_model(&mut local, &dir, &Default::default()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let store = Arc::new(InMemory::new());
    let refs: Vec<(&str, Vec<u8>)> = objects
        .iter()
        .map(|(k, b)| (k.as_str(), b.clone()))
        .collect();
    let loc = put(&store, &refs, "a/b/model.onnx");
    let ro = RemoteOptions::default();
    let remote: ModelProto = parse_at(&loc, &Default::default(), &ro).unwrap();
    assert_eq!(bytes_of(&remote), bytes_of(&local));
    // A location that leaves the prefix is refused, never read.
    let mut bad = model.clone();
    let t = &mut bad.graph.as_mut().unwrap().initializer[0];
    t.raw_data = None;
    t.rare.data_location = Some(crate::external::DATA_LOCATION_EXTERNAL);
    let mut entry = crate::proto::StringStringEntryProto::new();
    entry.set_key("location");
    entry.set_value("../../outside.bin");
    t.rare.external_data.push(entry);
    let loc = put(
        &store,
        &[
            ("outside.bin", vec![0; 64]),
            ("a/b/bad.onnx", bytes_of(&bad)),
        ],
        "a/b/bad.onnx",
    );
    let err = parse_at::<ModelProto>(&loc, &Default::default(), &ro).unwrap_err();
    assert!(matches!(err, Error::PathRefused { .. }), "{err}");
    // A missing object names its URL.
    let loc = put(&store, &[], "a/b/missing.onnx");
    let err = parse_at::<ModelProto>(&loc, &Default::default(), &ro).unwrap_err();
    assert!(
        err.to_string().contains("memory:///a/b/missing.onnx"),
        "{err}"
    );
    assert!(err.to_string().contains("not found"), "{err}");
}
