//! Memory reused between loads: the regions of large payloads (and the external-data arena) go
//! back to a bounded process-wide store when their model is dropped, and a later load of about
//! the same sizes takes them back, writing its own bytes. The store is process-wide, so nothing
//! else may load at the same time (the test has the process to itself).

use crate::common::{TempDir, pattern, uint8_tensor};
use onnx_light::proto::{GraphProto, ModelProto};
use onnx_light::{
    LoadOptions, Message, ParseOptions, SaveExternalOptions, memory_held_for_reuse,
    memory_reuse_limit, release_memory_held_for_reuse, save_model, save_model_with_external_data,
    set_memory_reuse_limit,
};

const BIG: usize = 3 << 20;
const MID: usize = (5 << 20) / 2;
/// The first block a parse cuts repeated-field chunks from (its metadata), kept and taken back
/// like the payload regions.
const META: usize = 256 << 10;
/// The chunk small payloads share (the 100-byte one here), kept and taken back too when it
/// has the largest chunk size (sized from the input: a parallel parse's part holding only the
/// small tensor takes a small chunk from the heap).
const SMALL: usize = 64 << 10;

/// A model with two payloads large enough for regions of their own (3 MiB, 2.5 MiB) and a
/// small one; `seed` changes every byte.
fn model(seed: u8) -> ModelProto {
    let mut g = GraphProto::new();
    g.set_name("g");
    g.mutable_initializer().push(uint8_tensor("big", BIG, seed));
    g.mutable_initializer()
        .push(uint8_tensor("mid", MID, seed ^ 0x55));
    g.mutable_initializer()
        .push(uint8_tensor("small", 100, seed));
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    m.set_graph(g);
    m
}

/// (name, payload address, payload bytes) of every initializer.
fn payloads(m: &ModelProto) -> Vec<(String, usize, Vec<u8>)> {
    m.graph()
        .initializer()
        .iter()
        .map(|t| {
            let raw = t.raw_data_opt().unwrap();
            (
                t.name().to_string(),
                raw.as_slice().as_ptr() as usize,
                raw.as_slice().to_vec(),
            )
        })
        .collect()
}

#[test]
fn loads_take_back_the_memory_of_dropped_models_and_write_their_own_bytes() {
    let _alone = crate::alone();
    let dir = TempDir::new("reuse");
    let (p1, p2) = (dir.path("one.onnx"), dir.path("two.onnx"));
    save_model(&model(1), &p1, &Default::default()).unwrap();
    save_model(&model(2), &p2, &Default::default()).unwrap();
    set_memory_reuse_limit(64 << 20);
    assert_eq!(memory_reuse_limit(), 64 << 20);
    release_memory_held_for_reuse();
    for threads in [1, 2] {
        let opts = ParseOptions {
            num_threads: threads,
            ..Default::default()
        };
        // A copy load from a file: the large payloads are read into mappings of their own.
        let small = if threads == 1 { SMALL } else { 0 };
        let first = onnx_light::load_model(&p1, &LoadOptions::from(opts.clone())).unwrap();
        let a = payloads(&first);
        assert_eq!(a[0].2, pattern(BIG, 1));
        assert_eq!(a[1].2, pattern(MID, 1 ^ 0x55));
        assert!(a.iter().all(|(_, addr, _)| addr % 64 == 0));
        assert_eq!(memory_held_for_reuse(), 0);
        drop(first);
        assert_eq!(
            memory_held_for_reuse(),
            BIG + MID + META + small,
            "{threads} threads"
        );
        // Another model of the same shapes takes both regions back and holds its own bytes.
        let second = onnx_light::load_model(&p2, &LoadOptions::from(opts.clone())).unwrap();
        let b = payloads(&second);
        assert_eq!(memory_held_for_reuse(), 0);
        assert_eq!((b[0].1, b[1].1), (a[0].1, a[1].1), "the same regions");
        assert_eq!(b[0].2, pattern(BIG, 2));
        assert_eq!(b[1].2, pattern(MID, 2 ^ 0x55));
        assert_eq!(b[2].2, pattern(100, 2));
        assert_eq!(second, model(2));
        // Parsing bytes (no file to read from) reuses them the same way.
        drop(second);
        let bytes = model(3).serialize_to_vec();
        let third: ModelProto = onnx_light::parse_from_bytes(&bytes, &opts).unwrap();
        assert_eq!(memory_held_for_reuse(), 0);
        assert_eq!(third, model(3));
        drop(third);
        assert_eq!(release_memory_held_for_reuse(), BIG + MID + META + small);
        assert_eq!(memory_held_for_reuse(), 0);
    }

    // External data: the one arena of the weights is kept and taken back too.
    let ext = dir.path("ext.onnx");
    let opts = SaveExternalOptions::default();
    save_model_with_external_data(&model(4), &ext, &opts).unwrap();
    let loaded = onnx_light::load_model(&ext, &LoadOptions::default()).unwrap();
    assert_eq!(payloads(&loaded)[0].2, pattern(BIG, 4));
    drop(loaded);
    let held = memory_held_for_reuse();
    assert!(held >= BIG + MID, "the arena is kept: {held}");
    let again = onnx_light::load_model(&ext, &LoadOptions::default()).unwrap();
    assert_eq!(memory_held_for_reuse(), 0);
    assert_eq!(payloads(&again)[1].2, pattern(MID, 4 ^ 0x55));

    // Limit 0: nothing is kept, and what was kept is unmapped at once.
    set_memory_reuse_limit(0);
    drop(again);
    assert_eq!(memory_held_for_reuse(), 0);
    let m = onnx_light::load_model(&p1, &LoadOptions::default()).unwrap();
    drop(m);
    assert_eq!(memory_held_for_reuse(), 0);
    // A smaller limit keeps only what fits (the newest).
    set_memory_reuse_limit(BIG);
    let m = onnx_light::load_model(&p1, &LoadOptions::default()).unwrap();
    drop(m);
    assert!(memory_held_for_reuse() <= BIG);
}
