//! Thread counts are capped (a documented maximum; above it every options struct is refused
//! before any thread starts), the worker pools are shared and bounded (serializing with many
//! different thread counts does not pile up pools), and `release_thread_pools` leaves no
//! worker thread alive. The test has the process to itself: it counts the process's threads.

use std::time::{Duration, Instant};

use crate::common::{TempDir, uint8_tensor};
use onnx_light::proto::Message;
use onnx_light::{
    Error, LoadOptions, ModelProto, ParseOptions, SaveExternalOptions, SerializeOptions,
    max_threads, release_thread_pools,
};

/// Threads of this process (Linux: entries of /proc/self/task).
fn live_threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Waits up to 10 s for the thread count to drop to `at_most`; returns the last count.
fn wait_for_threads(at_most: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = live_threads();
        if n <= at_most || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The thread count once the pools of the tests before (released by [`crate::alone`]) have
/// wound down: the count once it has stayed the same for 200 ms (at most 10 s).
fn settled_threads() -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut last, mut same) = (live_threads(), 0);
    while same < 10 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let n = live_threads();
        same = if n == last { same + 1 } else { 0 };
        last = n;
    }
    last
}

fn is_thread_option_error(e: &Error) -> bool {
    matches!(
        e,
        Error::InvalidOption {
            name: "num_threads",
            ..
        }
    )
}

#[test]
fn thread_counts_are_capped_and_pools_are_bounded() {
    let _alone = crate::alone();
    let baseline = settled_threads();
    let cap = max_threads();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        cap >= cores,
        "the cap {cap} is below the core count {cores}"
    );
    assert!(
        cap <= 1024,
        "the cap {cap} is not a small multiple of the cores"
    );

    // Above the cap: refused by every options struct and every entry point, no thread started.
    for n in [cap as i32 + 1, 1_000_000, i32::MAX] {
        let p = ParseOptions {
            num_threads: n,
            ..Default::default()
        };
        assert!(is_thread_option_error(&p.validate().unwrap_err()), "{n}");
        let s = SerializeOptions {
            num_threads: n,
            ..Default::default()
        };
        assert!(is_thread_option_error(&s.validate().unwrap_err()), "{n}");
        let x = SaveExternalOptions {
            num_threads: n,
            ..Default::default()
        };
        assert!(is_thread_option_error(&x.validate().unwrap_err()), "{n}");
        let e = onnx_light::serialize_to_vec(&ModelProto::new(), &s).unwrap_err();
        assert!(is_thread_option_error(&e), "{e}");
        assert!(e.to_string().contains(&cap.to_string()), "{e}");
        let e = onnx_light::parse_from_bytes::<ModelProto>(&[], &p).unwrap_err();
        assert!(is_thread_option_error(&e), "{e}");
    }
    assert_eq!(
        live_threads(),
        baseline,
        "a refused thread count started threads"
    );

    // At the cap: accepted.
    assert!(
        SerializeOptions {
            num_threads: cap as i32,
            ..Default::default()
        }
        .validate()
        .is_ok()
    );

    // Many distinct thread counts: pools are shared and bounded.
    let mut model = ModelProto::new();
    let g = model.mutable_graph();
    for i in 0..4 {
        g.mutable_initializer()
            .push(uint8_tensor(&format!("w{i}"), 3 << 20, i as u8));
    }
    let reference = model.serialize_to_vec();
    let dir = TempDir::new("pools");
    let mut peak = 0;
    for n in 2..=cap.min(64) {
        let opts = SerializeOptions {
            num_threads: n as i32,
            ..Default::default()
        };
        assert_eq!(
            onnx_light::serialize_to_vec(&model, &opts).unwrap(),
            reference
        );
        let path = dir.path("m.onnx");
        onnx_light::save_model(&model, &path, &opts).unwrap();
        let popts = ParseOptions {
            num_threads: n as i32,
            min_parallel_block_size: 0,
            ..Default::default()
        };
        let back = onnx_light::load_model(&path, &LoadOptions::from(popts.clone())).unwrap();
        assert_eq!(back.serialize_to_vec(), reference);
        peak = peak.max(live_threads());
    }
    // At most a few pools of at most `cap` threads each are alive at any time.
    let bound = baseline + 3 * cap; // two kept pools, and one winding down
    assert!(
        peak <= bound,
        "{peak} threads alive (baseline {baseline}, cap {cap}): pools pile up"
    );

    // Churn: three sizes in turn (each call retires a pool and starts one), 1 000 times. A
    // retired idle pool's threads end before the new pool starts, so the count stays bounded
    // (before, threads of retired pools piled up faster than they ended: 536 seen).
    let small = {
        let mut m = ModelProto::new();
        m.mutable_graph()
            .mutable_initializer()
            .push(uint8_tensor("w", 1024, 1));
        m
    };
    let small_bytes = small.serialize_to_vec();
    let mut churn_peak = 0;
    for i in 0..1000 {
        let opts = SerializeOptions {
            num_threads: (cap - 2 + i % 3) as i32,
            ..Default::default()
        };
        assert_eq!(
            onnx_light::serialize_to_vec(&small, &opts).unwrap(),
            small_bytes
        );
        churn_peak = churn_peak.max(live_threads());
    }
    assert!(
        churn_peak <= bound,
        "{churn_peak} threads alive while pool sizes churn (baseline {baseline}, cap {cap})"
    );

    // Released on request: back to the baseline.
    release_thread_pools();
    let after = wait_for_threads(baseline);
    assert!(
        after <= baseline,
        "{after} threads alive after release_thread_pools (baseline {baseline})"
    );
    // And rebuilt on demand.
    let opts = SerializeOptions {
        num_threads: 2,
        ..Default::default()
    };
    assert_eq!(
        onnx_light::serialize_to_vec(&model, &opts).unwrap(),
        reference
    );
    release_thread_pools();
    assert!(wait_for_threads(baseline) <= baseline);
}
