//! Tensors naming the same range of one weight file share one copy of it: a small model cannot
//! make a load copy (or decrypt) a range many times over.

use onnx_light::proto::ModelProto;
use onnx_light::{LoadOptions, Message, ParseOptions};

const RANGE: usize = 1 << 20;
const TENSORS: usize = 100;

/// A model of `TENSORS` initializers that all name `RANGE` bytes at `offset` of `w.bin`, and one
/// that names another range.
fn model(offset: usize) -> ModelProto {
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    for i in 0..=TENSORS {
        let t = m.mutable_graph().add_initializer();
        t.set_name(format!("w{i}"));
        t.set_data_type(2); // UINT8
        t.add_dims(RANGE as i64);
        t.set_data_location(1);
        let at = if i == TENSORS { offset + RANGE } else { offset };
        for (k, v) in [
            ("location", "w.bin".to_string()),
            ("offset", at.to_string()),
            ("length", RANGE.to_string()),
        ] {
            let e = t.add_external_data();
            e.set_key(k);
            e.set_value(v);
        }
    }
    m
}

fn write(dir: &std::path::Path, offset: usize) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let data: Vec<u8> = (0..offset + 2 * RANGE).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.join("w.bin"), data).unwrap();
    let path = dir.join("model.onnx");
    std::fs::write(&path, model(offset).serialize_to_vec()).unwrap();
    path
}

/// The distinct payload addresses of a loaded model, after checking every payload's bytes.
fn distinct_payloads(m: &ModelProto, offset: usize) -> usize {
    let mut seen = std::collections::HashSet::new();
    for (i, t) in m.graph().initializer().iter().enumerate() {
        let bytes = t.raw_data_opt().expect("loaded").as_slice();
        let at = if i == TENSORS { offset + RANGE } else { offset };
        assert_eq!(bytes.len(), RANGE);
        assert!(
            bytes
                .iter()
                .enumerate()
                .step_by(4093)
                .all(|(k, &b)| b == ((at + k) % 251) as u8)
        );
        seen.insert(bytes.as_ptr());
    }
    seen.len()
}

#[test]
fn a_range_named_many_times_is_copied_once() {
    let root =
        std::env::temp_dir().join(format!("onnx_light_shared_ranges_{}", std::process::id()));
    // offset 0: a no-copy load borrows from the map; offset 1: not aligned, so it copies.
    for offset in [0usize, 1] {
        let path = write(&root.join(offset.to_string()), offset);
        for (no_copy, threads) in [(false, 1), (false, 2), (true, 1)] {
            let opts = ParseOptions {
                no_copy,
                num_threads: threads,
                ..Default::default()
            };
            let mut m = onnx_light::load_model(&path, &LoadOptions::from(opts.clone())).unwrap();
            assert_eq!(
                distinct_payloads(&m, offset),
                2,
                "offset {offset}, no_copy {no_copy}"
            );
            // A write to one of them copies first: the others keep their bytes.
            m.mutable_graph().mutable_initializer()[0]
                .mutable_raw_data()
                .as_mut_slice()[0] ^= 0xff;
            let first = m.graph().initializer()[1]
                .raw_data_opt()
                .unwrap()
                .as_slice()[0];
            assert_eq!(first, (offset % 251) as u8);
            assert_eq!(distinct_payloads_after_write(&m), 3);
        }
    }
    std::fs::remove_dir_all(&root).unwrap();
}

fn distinct_payloads_after_write(m: &ModelProto) -> usize {
    let set: std::collections::HashSet<_> = m
        .graph()
        .initializer()
        .iter()
        .map(|t| t.raw_data_opt().unwrap().as_slice().as_ptr())
        .collect();
    set.len()
}

#[test]
fn a_save_writes_a_shared_range_once() {
    let root = std::env::temp_dir().join(format!("onnx_light_shared_saves_{}", std::process::id()));
    let path = write(&root.join("in"), 0);
    let m = onnx_light::load_model(&path, &LoadOptions::default()).unwrap();
    let out = root.join("out").join("model.onnx");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let report = onnx_light::save_model_with_external_data(&m, &out, &Default::default()).unwrap();
    assert_eq!(report.external_tensors, TENSORS + 1);
    // Two distinct ranges of RANGE bytes, the second aligned to 4096.
    assert_eq!(report.files.len(), 1);
    assert_eq!(report.files[0].size, 2 * RANGE as u64);
    let back = onnx_light::load_model(&out, &LoadOptions::default()).unwrap();
    assert_eq!(distinct_payloads(&back, 0), 2);
    std::fs::remove_dir_all(&root).unwrap();
}

/// Pre-packed blobs (ONNX Runtime's `prepacked_N` entries) naming one range many times: one copy
/// on load (copy mode, 1 and 2 threads), one write on save, the bytes right after a reload.
#[test]
fn blobs_naming_one_range_are_read_and_written_once() {
    let root = std::env::temp_dir().join(format!("onnx_light_shared_blobs_{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let data: Vec<u8> = (0..2 * RANGE).map(|i| (i % 251) as u8).collect();
    std::fs::write(root.join("w.bin"), &data).unwrap();
    let mut m = model(0);
    // Every initializer gets two blobs over the second range, one of them with two buffers.
    let range = format!("{RANGE};{RANGE};0");
    for t in m.mutable_graph().mutable_initializer() {
        for (k, v) in [
            ("prepacked_0", format!("a|{range}")),
            ("prepacked_1", format!("b|{range}|{range}")),
        ] {
            let e = t.add_external_data();
            e.set_key(k);
            e.set_value(v);
        }
    }
    let path = root.join("model.onnx");
    std::fs::write(&path, m.serialize_to_vec()).unwrap();
    for threads in [1, 2] {
        let opts = ParseOptions {
            num_threads: threads,
            ..Default::default()
        };
        let (m, blobs) =
            onnx_light::load_model_with_prepacked(&path, &LoadOptions::from(opts.clone())).unwrap();
        let mut seen = std::collections::HashSet::new();
        let mut buffers = 0;
        for (_, _, blob) in blobs.iter() {
            for b in &blob.buffers {
                assert_eq!(b.as_slice(), &data[RANGE..]);
                seen.insert(b.as_slice().as_ptr());
                buffers += 1;
            }
        }
        assert_eq!((buffers, seen.len()), (3 * (TENSORS + 1), 1));

        let out = root.join(format!("out{threads}")).join("model.onnx");
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let report =
            onnx_light::external::save_model_with_prepacked(&m, &blobs, &out, &Default::default())
                .unwrap();
        assert_eq!(report.prepacked_blobs, 2 * (TENSORS + 1));
        // The two tensor ranges and the blobs' one.
        assert_eq!(report.files[0].size, 3 * RANGE as u64);
        let (back, again) =
            onnx_light::load_model_with_prepacked(&out, &LoadOptions::from(opts.clone())).unwrap();
        assert_eq!(distinct_payloads(&back, 0), 2);
        let blob = again.get("w7", "b").unwrap();
        assert_eq!(blob.buffers.len(), 2);
        assert_eq!(blob.buffer(1).unwrap(), &data[RANGE..]);
    }
    std::fs::remove_dir_all(&root).unwrap();
}
