//! Replays the fuzz corpora through the fuzz target bodies (`onnx_light::fuzzing`), the same
//! functions the cargo-fuzz targets in `fuzz/` run: every input that ever failed
//! (`fuzz/regressions/<target>/`) and the checked-in seeds (`fuzz/corpus/<target>/`). A panic
//! names the input. Long fuzzing runs are `scripts/fuzz.sh`, never part of the test command.

use std::path::Path;

fn inputs(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<_> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != ".gitkeep"))
        .collect();
    out.sort();
    out
}

fn replay(kind: &str) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(kind);
    let mut n = 0;
    for target in onnx_light::fuzzing::TARGETS {
        for path in inputs(&root.join(target)) {
            let data = std::fs::read(&path).unwrap();
            let r = std::panic::catch_unwind(|| onnx_light::fuzzing::run(target, &data));
            assert!(
                r.is_ok(),
                "fuzz target {target} failed on {}",
                path.display()
            );
            n += 1;
        }
    }
    println!("{kind}: {n} inputs replayed");
    n
}

#[test]
fn fuzz_regressions_replay() {
    let n = replay("regressions");
    assert!(n > 0, "fuzz/regressions/ is empty");
}

#[test]
fn fuzz_seeds_replay() {
    let n = replay("corpus");
    assert!(n >= 100, "only {n} seeds");
}
