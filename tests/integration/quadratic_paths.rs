//! No operation takes quadratic time in a count that a file controls. Each case runs at N and
//! 16N and compares the times (the least CPU time of this thread over five runs: other processes
//! taking the core do not count): quadratic work grows 256x, linear work 16x plus what the
//! larger input costs in cache misses and page faults (27x measured on an idle machine, and
//! linear cases have reached 2.6x per element on a loaded 2-core machine); the bound is 80x. A
//! ratio, not a duration, so a slow or loaded machine does not fail it, and the wide factor
//! keeps both kinds of work far from the bound.

use crate::common;

use common::{TempDir, best_cpu_of};
use onnx_light::external::prepacked_blobs_of;
use onnx_light::proto::{Message, ModelProto, StringStringEntryProto, TensorProto};
use onnx_light::{LoadOptions, check_external_data, load_model_with_prepacked};

/// How much larger the second input of each case is.
const FACTOR: usize = 16;

/// Asserts that `run(FACTOR * n)` takes less than 80 times `run(n)`.
fn assert_linear(what: &str, n: usize, mut run: impl FnMut(usize)) {
    let small = best_cpu_of(5, || run(n));
    let large = best_cpu_of(5, || run(FACTOR * n));
    let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-6);
    println!("{what}: N = {n}: {small:?}, {FACTOR}N: {large:?} (x{ratio:.1})");
    assert!(
        ratio < 80.0,
        "{what}: {FACTOR}x the input took {ratio:.1}x the time ({small:?} -> {large:?}): quadratic"
    );
}

/// `n` pre-packed entries naming `n` distinct blob keys, each one byte of the tensor's file.
fn prepacked_entries(n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("prepacked_{i}"), format!("key{i}|0;1;0")))
        .collect()
}

#[test]
fn distinct_prepacked_keys_are_merged_in_linear_time() {
    // The entries are built before the timing: what is timed is the merge alone (building and
    // freeing 80 000 strings costs more than 16x 5 000 through the allocator and page faults).
    let inputs = [prepacked_entries(5_000), prepacked_entries(FACTOR * 5_000)];
    assert_linear("prepacked_blobs_of", 5_000, |n| {
        let entries = inputs.iter().find(|e| e.len() == n).unwrap();
        let blobs = prepacked_blobs_of(entries).unwrap();
        assert_eq!(blobs.len(), n);
    });
    // Entries naming the same key still append to it, in order.
    let merged = prepacked_blobs_of(&[
        ("prepacked_0".into(), "a|0;1;0".into()),
        ("prepacked_1".into(), "b|1;1;0".into()),
        ("prepacked_2".into(), "a|2;1;0".into()),
    ])
    .unwrap();
    assert_eq!(merged.len(), 2);
    assert_eq!(merged[0].0, "a");
    assert_eq!(
        merged[0].1.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [0, 2]
    );
}

/// A model directory whose one external tensor records `n` pre-packed blobs.
fn model_with_prepacked(dir: &TempDir, n: usize) -> std::path::PathBuf {
    let mut t = TensorProto::new();
    t.set_name("w");
    t.set_data_type(2);
    t.add_dims(4);
    t.set_data_location(1);
    let entry = |k: &str, v: &str| {
        let mut s = StringStringEntryProto::new();
        s.set_key(k);
        s.set_value(v);
        s
    };
    t.mutable_external_data().push(entry("location", "w.bin"));
    t.mutable_external_data().push(entry("offset", "0"));
    t.mutable_external_data().push(entry("length", "4"));
    for (k, v) in prepacked_entries(n) {
        t.mutable_external_data().push(entry(&k, &v));
    }
    let mut m = ModelProto::new();
    m.set_ir_version(8);
    m.mutable_graph().mutable_initializer().push(t);
    std::fs::write(dir.path("w.bin"), [1u8, 2, 3, 4]).unwrap();
    let path = dir.path(&format!("m{n}.onnx"));
    std::fs::write(&path, m.serialize_to_vec()).unwrap();
    path
}

#[test]
fn models_with_many_prepacked_blobs_load_and_check_in_linear_time() {
    let dir = TempDir::new("quadratic");
    let n = 5_000;
    let small = model_with_prepacked(&dir, n);
    let large = model_with_prepacked(&dir, FACTOR * n);
    let path_of = |k: usize| if k == n { &small } else { &large };
    assert_linear("load_model_with_prepacked", n, |k| {
        let (_, blobs) = load_model_with_prepacked(path_of(k), &LoadOptions::default()).unwrap();
        assert_eq!(blobs.len(), k);
    });
    assert_linear("check_external_data", n, |k| {
        let opts = LoadOptions {
            load_external_data: false,
            ..Default::default()
        };
        let m = onnx_light::load_model(path_of(k), &opts).unwrap();
        let report = check_external_data(&m, &dir.0, &LoadOptions::default(), false, None);
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    });
}
