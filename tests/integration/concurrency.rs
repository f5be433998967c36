//! Concurrency (docs/hardening.md, "Concurrency and thread safety"):
//! - one model loaded with `no_copy` from a memory-mapped file, shared as `Arc<ModelProto>` by
//!   many threads that walk it, compare every tensor's borrowed bytes, serialize it and save it
//!   (plain and with external data) at the same time, all byte-compared with a reference;
//! - loads and saves of different models in parallel;
//! - owner tokens cloned and dropped from many threads while (and after) the model goes away;
//! - the compile-time `Send + Sync` checks are in `src/thread_safety.rs`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::thread;

use onnx_light::external::save_model_with_external_data;
use onnx_light::proto::{ModelProto, TensorProto};
use onnx_light::{
    FileLoadMode, LoadOptions, Message, Owner, ParseOptions, SaveExternalOptions, SerializeOptions,
};

const TENSORS: usize = 8;
const TENSOR_BYTES: usize = 256 << 10;
const THREADS: usize = 8;

fn pattern(i: usize, seed: u32) -> Vec<u8> {
    (0..TENSOR_BYTES)
        .map(|j| {
            (j as u32)
                .wrapping_mul(31)
                .wrapping_add(i as u32 * 7 + seed) as u8
        })
        .collect()
}

fn model(seed: u32) -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    m.set_producer_name(format!("seed-{seed}"));
    let g = m.mutable_graph();
    g.set_name("g");
    for i in 0..TENSORS {
        let mut t = TensorProto::new();
        t.set_name(format!("w{i}"));
        t.set_data_type(2);
        t.add_dims(TENSOR_BYTES as i64);
        t.set_raw_data(pattern(i, seed));
        g.mutable_initializer().push(t);
        let n = g.add_node();
        n.set_op_type("Identity");
        n.add_input(format!("w{i}"));
    }
    m
}

fn sandbox(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("onnxl-conc-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn check_seed(m: &ModelProto, seed: u32) {
    assert_eq!(m.producer_name().to_string(), format!("seed-{seed}"));
    let init = &m.graph().initializer();
    assert_eq!(init.len(), TENSORS);
    for (i, t) in init.iter().enumerate() {
        assert!(t.raw_data() == pattern(i, seed).as_slice(), "tensor w{i}");
    }
}

fn mapped(path: &Path) -> ModelProto {
    let opts = ParseOptions {
        no_copy: true,
        file_load_mode: FileLoadMode::Mmap,
        // Borrow every payload wherever it is in the file (no aligned copies).
        alignment: 1,
        ..Default::default()
    };
    onnx_light::load_model(path, &LoadOptions::from(opts.clone())).unwrap()
}

#[test]
fn one_mapped_model_shared_by_many_threads() {
    let dir = sandbox("shared");
    let path = dir.join("shared.onnx");
    onnx_light::save_model(&model(7), &path, &SerializeOptions::default()).unwrap();
    let shared = Arc::new(mapped(&path));
    assert!(
        shared
            .graph()
            .initializer()
            .iter()
            .all(|t| t.raw_data_opt().unwrap().is_borrowed()),
        "no_copy borrows from the mapping"
    );
    let reference = Arc::new(shared.serialize_to_vec());
    let expected: Arc<Vec<Vec<u8>>> = Arc::new((0..TENSORS).map(|i| pattern(i, 7)).collect());
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|k| {
            let (shared, reference, expected, start) = (
                shared.clone(),
                reference.clone(),
                expected.clone(),
                start.clone(),
            );
            let dir = dir.clone();
            thread::spawn(move || -> Vec<Owner> {
                start.wait();
                let mut kept = Vec::new();
                for round in 0..6 {
                    // Walk and read.
                    let g = shared.graph();
                    assert_eq!(g.node_size(), TENSORS);
                    for (i, t) in g.initializer().iter().enumerate() {
                        assert!(t.raw_data() == expected[i].as_slice());
                        let owner = t.raw_data_opt().unwrap().owner().expect("token");
                        if (i + round + k) % 3 == 0 {
                            kept.push(owner); // dropped later, on another thread
                        }
                    }
                    // Serialize (sequential and parallel writers).
                    let opts = SerializeOptions {
                        num_threads: if round % 2 == 0 { 1 } else { 2 },
                        ..Default::default()
                    };
                    let bytes = onnx_light::serialize_to_vec(&*shared, &opts).unwrap();
                    assert!(bytes == *reference, "thread {k} round {round}");
                    // Save the shared model, plain and with external data, each thread into its
                    // own files, and read the files back.
                    let own = dir.join(format!("t{k}.onnx"));
                    onnx_light::save_model(&shared, &own, &opts).unwrap();
                    assert!(std::fs::read(&own).unwrap() == *reference);
                    let ext_dir = dir.join(format!("ext{k}"));
                    std::fs::create_dir_all(&ext_dir).unwrap();
                    let ext = ext_dir.join("m.onnx");
                    let xopts = SaveExternalOptions {
                        all_tensors_to_one_file: round % 3 != 2,
                        num_threads: opts.num_threads,
                        ..Default::default()
                    };
                    save_model_with_external_data(&shared, &ext, &xopts).unwrap();
                    check_seed(
                        &onnx_light::load_model(&ext, &Default::default()).unwrap(),
                        7,
                    );
                }
                kept
            })
        })
        .collect();
    let tokens: Vec<Owner> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert!(!tokens.is_empty());
    // The model goes first; the tokens (taken on the worker threads) keep the mapping alive and
    // are dropped on yet other threads.
    let shared = Arc::try_unwrap(shared).expect("last reference");
    let raw: Vec<(usize, usize)> = shared
        .graph()
        .initializer()
        .iter()
        .map(|t| (t.raw_data().as_ptr() as usize, t.raw_data().len()))
        .collect();
    drop(shared);
    let tokens = Arc::new(tokens);
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (tokens, expected, raw) = (tokens.clone(), expected.clone(), raw.clone());
            thread::spawn(move || {
                let copies: Vec<Owner> = tokens.iter().cloned().collect();
                for (i, &(ptr, len)) in raw.iter().enumerate() {
                    // SAFETY: the tokens held in `copies` keep the mapping (and so these bytes)
                    // alive and unchanged; the model they came from is gone.
                    let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
                    assert!(bytes == expected[i].as_slice());
                }
                drop(copies);
            })
        })
        .collect();
    for r in readers {
        r.join().unwrap();
    }
    drop(tokens);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn loads_and_saves_of_different_models_in_parallel() {
    let dir = sandbox("parallel");
    let handles: Vec<_> = (0..THREADS)
        .map(|k| {
            let dir = dir.join(format!("m{k}"));
            thread::spawn(move || {
                std::fs::create_dir_all(&dir).unwrap();
                for round in 0..4u32 {
                    let seed = k as u32 * 100 + round;
                    let m = model(seed);
                    let plain = dir.join("plain.onnx");
                    let ext = dir.join("ext.onnx");
                    onnx_light::save_model(&m, &plain, &SerializeOptions::default()).unwrap();
                    let xopts = SaveExternalOptions {
                        all_tensors_to_one_file: round % 2 == 0,
                        checksum: true,
                        ..Default::default()
                    };
                    save_model_with_external_data(&m, &ext, &xopts).unwrap();
                    drop(m);
                    for path in [&plain, &ext] {
                        check_seed(
                            &onnx_light::load_model(path, &Default::default()).unwrap(),
                            seed,
                        );
                        let mm = mapped(path);
                        check_seed(&mm, seed);
                        // A no-copy model moves to another thread and is dropped there.
                        thread::spawn(move || check_seed(&mm, seed)).join().unwrap();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn owner_tokens_cloned_and_dropped_from_many_threads() {
    let dir = sandbox("tokens");
    let path = dir.join("m.onnx");
    onnx_light::save_model(&model(3), &path, &SerializeOptions::default()).unwrap();
    let m = mapped(&path);
    let token = m.graph().initializer()[0]
        .raw_data_opt()
        .as_ref()
        .unwrap()
        .owner()
        .unwrap();
    let (ptr, len) = {
        let r = m.graph().initializer()[0].raw_data();
        (r.as_ptr() as usize, r.len())
    };
    drop(m);
    let before = Arc::strong_count(&token);
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (token, start) = (token.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for _ in 0..2000 {
                    let batch: Vec<Owner> = (0..16).map(|_| token.clone()).collect();
                    drop(batch);
                }
                // SAFETY: `token` keeps the mapping alive.
                let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
                assert!(bytes == pattern(0, 3).as_slice());
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(Arc::strong_count(&token), before, "every clone was dropped");
    drop(token);
    let _ = std::fs::remove_dir_all(&dir);
}
