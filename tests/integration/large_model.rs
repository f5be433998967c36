//! A model over 2 GB (inline, > 2^31 bytes in one tensor) saves and loads with correct bytes,
//! in copy mode, no-copy (memory-mapped) mode and parallel mode. Uses ~2.2 GB of disk, removed
//! at the end.

use onnx_light::proto::{Message, ModelProto, TensorProto};
use onnx_light::{FileLoadMode, LoadOptions, ParseOptions, SerializeOptions};

const BIG: usize = (1 << 31) + 12_345;

fn pattern(i: usize) -> u8 {
    (i as u8) ^ ((i >> 11) as u8) ^ ((i >> 23) as u8)
}

fn check(data: &[u8]) {
    assert_eq!(data.len(), BIG);
    // Every 4 KiB page, plus the bytes around the 2^31 boundary and the end.
    for i in (0..BIG)
        .step_by(4093)
        .chain((1 << 31) - 4..(1 << 31) + 4)
        .chain(BIG - 4..BIG)
    {
        assert_eq!(data[i], pattern(i), "byte {i}");
    }
}

#[test]
#[ignore = "slow (a model over 2 GB): the test command runs it (cargo test -- --include-ignored)"]
fn model_over_2gb_saves_and_loads() {
    let _turn = crate::common::one_large_test_at_a_time();
    let scratch = crate::common::TempDir::with_room("large", 3 << 30);
    let dir = scratch.0.clone();
    let path = dir.join("big.onnx");

    {
        let mut m = ModelProto::new();
        m.set_ir_version(10);
        let g = m.mutable_graph();
        let mut small = TensorProto::new();
        small.set_name("small");
        small.set_raw_data(vec![1u8, 2, 3, 4]);
        g.mutable_initializer().push(small);
        let mut t = TensorProto::new();
        t.set_name("big");
        t.set_data_type(2);
        t.add_dims(BIG as i64);
        t.set_raw_data((0..BIG).map(pattern).collect::<Vec<u8>>());
        g.mutable_initializer().push(t);
        assert!(m.encoded_len() > 1 << 31);
        onnx_light::save_model(&m, &path, &SerializeOptions::default()).unwrap();
    }
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size > (1 << 31) + 12_345, "file is {size} bytes");

    for (mode, no_copy, threads) in [
        (FileLoadMode::Mmap, false, 1),
        (FileLoadMode::Mmap, true, 1),
        (FileLoadMode::Mmap, false, 2),
    ] {
        let opts = ParseOptions {
            file_load_mode: mode,
            no_copy,
            num_threads: threads,
            // Borrow the 2 GB payload wherever it is in the file (an aligned copy would double
            // the memory; tests/integration/alignment.rs covers alignment).
            alignment: 1,
            ..Default::default()
        };
        let m = onnx_light::load_model(&path, &LoadOptions::from(opts.clone())).unwrap();
        let g = m.graph();
        assert_eq!(g.initializer().len(), 2);
        assert_eq!(g.initializer()[0].raw_data(), &[1, 2, 3, 4]);
        let big = &g.initializer()[1];
        assert_eq!(big.name(), "big");
        assert_eq!(big.dims()[..], [BIG as i64]);
        assert_eq!(big.raw_data_opt().unwrap().is_borrowed(), no_copy);
        check(big.raw_data());
        assert_eq!(m.encoded_len(), size);
    }
}
