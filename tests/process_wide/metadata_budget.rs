//! The metadata budget (`ParseOptions::max_metadata_bytes`), measured with a
//! counting global allocator: parsing a hostile 10 MB input of empty `NodeProto`s (2 bytes of
//! input each, ~200 heap bytes each without a budget) stays under the budget and fails with
//! `MetadataLimit`; real models stay well inside the automatic budget.
//!
//! The test has the process to itself, so the allocator measures one parse at a time.

use crate::heap::peak_of;

use onnx_light::proto::{Message, ModelProto};
use onnx_light::wire::{AUTO_METADATA_BASE_BYTES, AUTO_METADATA_BYTES_PER_INPUT_BYTE, put_varint};
use onnx_light::{DecodeErrorKind, Error, ParseOptions};

/// A ModelProto whose graph holds `n` empty nodes (`0a 00` each).
fn empty_nodes(n: usize) -> Vec<u8> {
    let mut b = vec![0x3a];
    put_varint(&mut b, 2 * n as u64);
    b.extend_from_slice(&[0x0a, 0x00].repeat(n));
    b
}

/// A ModelProto whose graph holds one node with `n` empty input names (`0a 00` each).
fn empty_input_names(n: usize) -> Vec<u8> {
    let mut node = vec![0x0a];
    put_varint(&mut node, 2 * n as u64);
    node.extend_from_slice(&[0x0a, 0x00].repeat(n));
    let mut b = vec![0x3a];
    put_varint(&mut b, node.len() as u64);
    b.extend_from_slice(&node);
    b
}

#[test]
fn metadata_budget_bounds_memory() {
    let _alone = crate::alone();
    let input = empty_nodes(5_000_000); // 10 MB
    let mib = |b: usize| b as f64 / (1 << 20) as f64;

    // Unlimited: what the attack costs without a budget (~one NodeProto per 2 input bytes),
    // measured on 2 MB of it.
    let small = empty_nodes(1_000_000);
    let (r, unlimited) = peak_of(|| {
        let opts = ParseOptions {
            max_metadata_bytes: u64::MAX,
            ..Default::default()
        };
        onnx_light::parse_from_bytes::<ModelProto>(&small, &opts).map(|m| m.graph().node().len())
    });
    assert_eq!(r.unwrap(), 1_000_000);
    println!(
        "2 MB of empty nodes, no budget: peak {:.0} MiB ({:.0} bytes per input byte)",
        mib(unlimited),
        unlimited as f64 / small.len() as f64
    );
    drop(small);

    // Explicit budgets: the parse stops with MetadataLimit, its peak stays under the budget
    // plus the input copy (the arena) and container growth. Also for one node with 6 million
    // empty input names (a repeated string field reserves room for the run of values ahead:
    // never more than the budget left).
    let strings = empty_input_names(6_000_000);
    for (what, input) in [("empty nodes", &input), ("empty input names", &strings)] {
        for budget in [16u64 << 20, 64 << 20, 256 << 20] {
            for threads in [1, 2] {
                let (r, peak) = peak_of(|| {
                    let opts = ParseOptions {
                        max_metadata_bytes: budget,
                        num_threads: threads,
                        min_parallel_block_size: 0,
                        ..Default::default()
                    };
                    onnx_light::parse_from_bytes::<ModelProto>(input, &opts)
                });
                let e = r.unwrap_err();
                match &e {
                    Error::Decode(d) => {
                        assert_eq!(d.kind, DecodeErrorKind::MetadataLimit { limit: budget })
                    }
                    other => panic!("{other}"),
                }
                println!(
                    "{what}, budget {} MiB, {threads} thread(s): refused at peak {:.1} MiB: {e}",
                    budget >> 20,
                    mib(peak)
                );
                assert!(
                    peak as u64 <= budget + input.len() as u64 + budget / 4,
                    "{what}: peak {peak} over budget {budget}"
                );
            }
        }
    }
    drop(strings);

    // The automatic budget (default options): 64 MiB + 64 x 10 MB = 704 MiB, enforced too.
    let auto = AUTO_METADATA_BASE_BYTES + AUTO_METADATA_BYTES_PER_INPUT_BYTE * input.len() as u64;
    let (r, peak) =
        peak_of(|| onnx_light::parse_from_bytes::<ModelProto>(&input, &ParseOptions::default()));
    let auto_refused = r.is_err();
    println!(
        "automatic budget {} MiB: {} at peak {:.0} MiB",
        auto >> 20,
        if auto_refused { "refused" } else { "accepted" },
        mib(peak)
    );
    assert!(peak as u64 <= auto + input.len() as u64 + auto / 4);
    drop(input);

    // Real models: heap per input byte, far below the automatic budget's 64.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut worst: f64 = 0.0;
    for entry in std::fs::read_dir(root.join("fuzz/corpus/parse_model")).unwrap() {
        let path = entry.unwrap().path();
        // The models (the other seeds are hostile inputs, some refused).
        if path.extension().is_none_or(|e| e != "onnx") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let (m, peak) = peak_of(|| {
            onnx_light::parse_from_bytes::<ModelProto>(&bytes, &ParseOptions::default()).unwrap()
        });
        drop(m);
        // The input copy (arena) is part of the peak: count only what exceeds it.
        let ratio = peak.saturating_sub(bytes.len()) as f64 / bytes.len() as f64;
        worst = worst.max(ratio);
    }
    println!("real models: at most {worst:.1} heap bytes per input byte besides the input copy");
    assert!(worst < AUTO_METADATA_BYTES_PER_INPUT_BYTE as f64);
    let _ = ModelProto::default().serialize_to_vec();
}
