//! Crash-safe saves (docs/hardening.md, "Crash-safe saves").
//!
//! - `kill_during_save_never_breaks_the_model` (Linux): a child process (this test binary, re-run
//!   on `crash_child`) saves a new model with external data (one file, split files, one file per
//!   tensor, an inline model) over the previous model and its weight files; the parent sends
//!   SIGKILL at a random point of the save, then checks that the directory holds either the
//!   previous model with ALL its weight files byte-identical, or the new model complete — never
//!   a model whose weights do not match. One scenario writes a fully encrypted directory
//!   (`save_encrypted_model_with_external_data`: ONNXCRYS weights, ONNXCRY3 `.onnx`), so
//!   encrypted saves replace plaintext models and plaintext saves replace encrypted ones. Every
//!   re-save to the same weight file name commits twice (the new weights under an alternate
//!   name, then moved to the wanted name), so kills also land between the two commits (counted);
//!   after the final complete saves the directory holds exactly the model and its files, under
//!   the names asked for.
//! - `disk_full_fails_cleanly` (Linux): the child runs under `RLIMIT_FSIZE` (SIGXFSZ ignored), so
//!   a write fails with EFBIG in the middle of the save: the error is `Error::Io` naming the
//!   file, the previous files are intact and nothing is left behind.
//! - `disk_full_on_a_tmpfs`: the same on a real full file system (a 12 MiB tmpfs). On Linux the
//!   test mounts it where mounting is allowed (root; skipped elsewhere); on Windows (under Wine)
//!   the test command mounts it and names it in `ONNXL_TEST_FULL_DIR` (required there).
//! - `a_failed_rename_leaves_the_previous_files`: the commit's rename fails (the destination is
//!   a directory; on Windows also: another process holds the `.onnx` open without delete
//!   sharing): an `Error::Io` naming the `.onnx`, and the directory exactly as before.
//! - `stale_temporary_files_of_ended_processes_are_removed`: temporary files that a killed save
//!   left go with the next save once their process has ended, never while it runs.
#![cfg(any(target_os = "linux", windows))]
// Windows runs the tests without kills and size limits; their helpers are unused there.
#![cfg_attr(windows, allow(dead_code))]

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
#[cfg(target_os = "linux")]
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use onnx_light::external::{
    ExternalDataInfo, PrepackedBlobs, save_encrypted_model_with_external_data,
    save_model_with_external_data, uses_external_data,
};
use onnx_light::proto::{ModelProto, TensorProto};
use onnx_light::{
    EncryptionOptions, Error, ExternalEncryption, LoadOptions, SaveExternalOptions,
    SerializeOptions,
};

const CHILD_ENV: &str = "ONNXL_CRASH_CHILD";
const WAIT_ENV: &str = "ONNXL_WAIT_CHILD";
const START: &str = "@@onnxl-save-start";
const DONE: &str = "@@onnxl-save-done";
const ERROR: &str = "@@onnxl-save-error";

/// Tensor sizes of every generation (about 6.6 MB in all).
const SIZES: [usize; 6] = [3 << 20, 1 << 20, 2 << 20, 512 << 10, 64 << 10, 4 << 10];

/// The bytes of tensor `i` of generation `g` (different for every `(g, i)`).
fn pattern(g: u32, i: usize, n: usize) -> Vec<u8> {
    let seed = (g.wrapping_mul(2_654_435_761) ^ (i as u32).wrapping_mul(40_503)) as u64;
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes()[..(n - out.len()).min(8)]);
    }
    out
}

/// Tensor sizes of a scenario: 40 small tensors then a large one for `ManyFiles` (two batches
/// of files: the first batch is in place when the second fails), else [`SIZES`].
fn sizes(s: Scenario) -> Vec<usize> {
    match s {
        Scenario::ManyFiles => {
            let mut v = vec![64 << 10; 40];
            v.push(3 << 20);
            v
        }
        _ => SIZES.to_vec(),
    }
}

/// Generation `g`: producer_version = g, doc_string = the number of tensors, tensors `w0..`.
fn model(g: u32, s: Scenario) -> ModelProto {
    let sizes = sizes(s);
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    m.set_producer_name("crash-safe-test");
    m.set_producer_version(g.to_string());
    m.set_doc_string(sizes.len().to_string());
    for (i, &n) in sizes.iter().enumerate() {
        let mut t = TensorProto::new();
        t.set_name(format!("w{i}"));
        t.set_data_type(2); // UINT8
        t.add_dims(n as i64);
        t.set_raw_data(pattern(g, i, n));
        m.mutable_graph().mutable_initializer().push(t);
    }
    m
}

/// The save scenarios.
#[derive(Debug, Clone, Copy)]
enum Scenario {
    OneFile,
    Split,
    PerTensor,
    Inline,
    OneFileParallelChecksum,
    ManyFiles,
    /// A fully encrypted directory: weight files ONNXCRYS, the `.onnx` ONNXCRY3.
    Encrypted,
}

/// The scenarios of the kill test.
const SCENARIOS: [Scenario; 6] = [
    Scenario::OneFile,
    Scenario::Split,
    Scenario::PerTensor,
    Scenario::Inline,
    Scenario::OneFileParallelChecksum,
    Scenario::Encrypted,
];

/// The passphrase of the `Encrypted` scenario.
const KEY: &[u8] = b"crash-safe passphrase";

impl Scenario {
    fn parse(s: &str) -> Self {
        *SCENARIOS
            .iter()
            .chain(&[Scenario::ManyFiles])
            .find(|x| format!("{x:?}") == s)
            .expect("scenario")
    }

    fn save(self, m: &ModelProto, path: &Path) -> onnx_light::Result<()> {
        let ext = |o: SaveExternalOptions| save_model_with_external_data(m, path, &o).map(drop);
        match self {
            Scenario::OneFile => ext(SaveExternalOptions::default()),
            Scenario::Split => ext(SaveExternalOptions {
                location: Some("w.bin".into()),
                max_external_file_size: 2 << 20,
                ..Default::default()
            }),
            Scenario::PerTensor | Scenario::ManyFiles => ext(SaveExternalOptions {
                all_tensors_to_one_file: false,
                ..Default::default()
            }),
            Scenario::Inline => onnx_light::save_model(m, path, &SerializeOptions::default()),
            Scenario::OneFileParallelChecksum => ext(SaveExternalOptions {
                location: Some("w.bin".into()),
                num_threads: 2,
                checksum: true,
                ..Default::default()
            }),
            Scenario::Encrypted => save_encrypted_model_with_external_data(
                m,
                &PrepackedBlobs::new(),
                path,
                &SaveExternalOptions {
                    checksum: true,
                    encryption: Some(ExternalEncryption::new(KEY)),
                    ..Default::default()
                },
                &EncryptionOptions::default(),
                None,
            )
            .map(drop),
        }
    }
}

/// Loads `path`, decrypting it (with [`KEY`]) when it is an encrypted model.
fn load(path: &Path, opts: LoadOptions) -> onnx_light::Result<ModelProto> {
    let opts = LoadOptions {
        external_data_key: Some(KEY.into()),
        ..opts
    };
    if onnx_light::crypto::detect_file_format(path).is_ok() {
        onnx_light::load_encrypted_model(path, KEY, &opts)
    } else {
        onnx_light::load_model(path, &opts)
    }
}

/// The child side, run by the parent (`ONNXL_CRASH_CHILD=scenario:gen:path`).
#[test]
#[ignore = "child process of the kill tests; started by them"]
fn child_process_crash_save() {
    let spec = common::child_spec(CHILD_ENV);
    let mut parts = spec.splitn(3, ':');
    let scenario = Scenario::parse(parts.next().unwrap());
    let g: u32 = parts.next().unwrap().parse().unwrap();
    let path = PathBuf::from(parts.next().unwrap());
    let m = model(g, scenario);
    println!("{START}");
    match scenario.save(&m, &path) {
        Ok(()) => println!("{DONE}"),
        Err(e) => {
            let kind = match &e {
                Error::Io { path, source } => {
                    format!("io path={} os={:?}", path.display(), source.raw_os_error())
                }
                other => format!("other {other:?}"),
            };
            println!("{ERROR} {kind} | {e}");
        }
    }
}

/// Spawns this test binary on `child_process_crash_save`.
fn spawn_child(
    scenario: Scenario,
    g: u32,
    path: &Path,
    fsize_limit: Option<u64>,
) -> std::io::Result<Child> {
    let mut cmd = common::child_process(
        module_path!(),
        "child_process_crash_save",
        CHILD_ENV,
        format!("{scenario:?}:{g}:{}", path.display()),
    );
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    #[cfg(not(target_os = "linux"))]
    assert!(
        fsize_limit.is_none(),
        "file size limits are set on Linux only"
    );
    #[cfg(target_os = "linux")]
    if let Some(limit) = fsize_limit {
        // SAFETY: the closure runs in the forked child before exec and only calls the
        // async-signal-safe setrlimit(2) and signal(2).
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // A write past the limit then fails with EFBIG instead of killing the process.
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
    }
    cmd.spawn()
}

/// Runs a child to its end; returns its output and how long the save took.
fn run_child(scenario: Scenario, g: u32, path: &Path, fsize: Option<u64>) -> (String, Duration) {
    let mut child = spawn_child(scenario, g, path, fsize).unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    let mut line = String::new();
    let mut started = None;
    while out.read_line(&mut line).unwrap() > 0 {
        if line.contains(START) {
            started = Some(Instant::now());
        }
        text.push_str(&line);
        line.clear();
    }
    let took = started.map(|s| s.elapsed()).unwrap_or_default();
    assert!(child.wait().unwrap().success(), "child failed:\n{text}");
    (text, took)
}

/// The model file and every file it references, byte for byte.
#[derive(Debug, Clone, PartialEq)]
struct State {
    generation: u32,
    files: BTreeMap<String, Vec<u8>>,
}

/// Checks the model in `dir`: it loads (with checksums verified), every tensor is exactly
/// generation g's, and every file it references is returned.
fn check_model(path: &Path) -> Result<State, String> {
    let dir = path.parent().unwrap();
    let opts = LoadOptions {
        verify_external_checksums: true,
        ..Default::default()
    };
    let m = load(path, opts).map_err(|e| format!("does not load: {e}"))?;
    let g: u32 = m
        .producer_version()
        .to_string()
        .parse()
        .map_err(|_| "no generation".to_string())?;
    let init = &m.graph().initializer();
    if init.len().to_string() != m.doc_string().to_string() {
        return Err(format!("{} tensors", init.len()));
    }
    for (i, t) in init.iter().enumerate() {
        let n = t.raw_data().len();
        if n < 4096 || t.raw_data() != pattern(g, i, n).as_slice() {
            return Err(format!(
                "tensor w{i} does not hold generation {g}'s bytes (a mix)"
            ));
        }
    }
    // The references, from the file itself.
    let raw = load(
        path,
        LoadOptions {
            load_external_data: false,
            ..Default::default()
        },
    )
    .unwrap();
    let mut files = BTreeMap::new();
    files.insert(
        path.file_name().unwrap().to_string_lossy().into_owned(),
        std::fs::read(path).unwrap(),
    );
    raw.visit_tensors(&mut |t: &TensorProto| {
        if uses_external_data(t) {
            let loc = ExternalDataInfo::parse(t).unwrap().location;
            let bytes = std::fs::read(dir.join(&loc)).unwrap();
            files.insert(loc, bytes);
        }
    });
    Ok(State {
        generation: g,
        files,
    })
}

/// Files of `dir` with more than one link.
#[cfg(target_os = "linux")]
fn linked_files(dir: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.metadata().ok())
        .filter(|m| m.nlink() > 1)
        .count()
}

/// Whether the model at `path` references a weight file under an alternate name
/// (`m.onnx_1.data`, `w_2.bin`, `w0_1`).
fn uses_alternate(path: &Path) -> bool {
    let Ok(raw) = load(
        path,
        LoadOptions {
            load_external_data: false,
            ..Default::default()
        },
    ) else {
        return false;
    };
    let mut alternate = false;
    raw.visit_tensors(&mut |t: &TensorProto| {
        if uses_external_data(t) {
            let loc = ExternalDataInfo::parse(t).unwrap().location;
            alternate |= is_alternate(&loc);
        }
    });
    alternate
}

/// Whether a weight file name is an alternate name (`m.onnx_1.data`, `w_2.bin`, `w0_1`).
fn is_alternate(name: &str) -> bool {
    name.split('.').any(|piece| {
        piece
            .rsplit_once('_')
            .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect()
}

fn sandbox(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("onnxl-crash-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// xorshift64*, seeded from the clock (the seed is printed for reproduction).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[cfg(target_os = "linux")]
#[test]
fn kill_during_save_never_breaks_the_model() {
    // At least 70 kills, and more until 50 have landed mid-save (a loaded machine makes saves
    // slower or faster than calibrated; each scenario's kill window shrinks after a miss).
    const MIN_KILLS: usize = 70;
    const MAX_KILLS: usize = 400;
    const MIN_MID_SAVE: usize = 50;
    let dir = sandbox("kill");
    let path = dir.join("m.onnx");
    // Generation 1 on disk; calibrate each scenario's save time with complete runs.
    let mut durations = Vec::new();
    let mut g = 0u32;
    for s in SCENARIOS {
        g += 1;
        let (_, took) = run_child(s, g, &path, None);
        durations.push(took);
    }
    let mut state = check_model(&path).expect("calibration saves");
    assert_eq!(state.generation, g);
    let seed = std::env::var("ONNXL_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("seed {seed} (ONNXL_CRASH_SEED to repeat); save times {durations:?}");
    let mut rng = Rng(seed);
    let (mut mid_save, mut with_temps, mut committed) = (0usize, 0usize, 0usize);
    let mut before_commit = 0usize;
    let mut between_commits = 0usize;
    let mut windows: Vec<u64> = durations
        .iter()
        .map(|d| d.as_micros().max(1000) as u64)
        .collect();
    let mut kill = 0usize;
    while kill < MIN_KILLS || mid_save < MIN_MID_SAVE {
        assert!(
            kill < MAX_KILLS,
            "only {mid_save} of {kill} kills landed mid-save (seed {seed})"
        );
        let si = kill % SCENARIOS.len();
        let scenario = SCENARIOS[si];
        g += 1;
        let mut child = spawn_child(scenario, g, &path, None).unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        // Wait for the child to start saving, then kill it within its save time.
        loop {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "child ended early");
            if line.contains(START) {
                break;
            }
        }
        std::thread::sleep(Duration::from_micros(rng.next() % windows[si]));
        let temps_before = !temp_files(&dir).is_empty();
        child.kill().unwrap();
        let status = child.wait().unwrap();
        let mut rest = String::new();
        out.read_to_string(&mut rest).unwrap();
        let landed = !rest.contains(DONE) && !rest.contains(ERROR);
        if landed {
            mid_save += 1;
            assert!(status.code().is_none(), "killed by the signal");
        } else {
            windows[si] = (windows[si] * 3 / 4).max(200);
        }
        assert!(!rest.contains(ERROR), "save failed: {rest}");
        with_temps += usize::from(temps_before);
        // Killed between the two commits: a weight file still has its second link (the
        // wanted name and the alternate), or the committed model references an alternate.
        between_commits += usize::from(landed && (linked_files(&dir) > 0 || uses_alternate(&path)));
        // The invariant: the previous model with ALL its files byte-identical, or the new one
        // complete.
        let now = check_model(&path)
            .unwrap_or_else(|e| panic!("kill {kill} ({scenario:?}, seed {seed}): {e}"));
        if now.generation == state.generation {
            before_commit += usize::from(landed);
            assert_eq!(
                now, state,
                "kill {kill} ({scenario:?}): previous model or its files changed"
            );
        } else {
            assert_eq!(now.generation, g, "kill {kill}: an unexpected generation");
            committed += 1;
            state = now;
        }
        kill += 1;
    }
    eprintln!(
        "{kill} kills: {mid_save} landed mid-save ({before_commit} before the commit point, the \
         rest after it; {between_commits} between the first and the second commit), \
         {with_temps} with temporary files present; {committed} saves had committed"
    );
    // A complete save afterwards removes the temporary files the killed saves left.
    for s in SCENARIOS {
        g += 1;
        run_child(s, g, &path, None);
        assert_eq!(check_model(&path).unwrap().generation, g);
    }
    assert_eq!(
        temp_files(&dir),
        Vec::<String>::new(),
        "stale temporary files"
    );
    // No stray file either: no alternate name, no lock file, no second link (the files of the
    // other scenarios' naming families stay: a save removes only its own family's).
    let strays: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".lock") || is_alternate(n))
        .collect();
    assert_eq!(strays, Vec::<String>::new(), "stray files");
    assert!(!uses_alternate(&path), "an alternate name stayed");
    assert_eq!(linked_files(&dir), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every file of `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Saves generation 2 over generation 1 in `dir` with a child under `fsize` (RLIMIT_FSIZE, or
/// none on a full tmpfs); the save must fail cleanly.
fn assert_fails_cleanly(dir: &Path, scenario: Scenario, fsize: Option<u64>, expect_os: i32) {
    let path = dir.join("m.onnx");
    let before = snapshot(dir);
    let (out, _) = run_child(scenario, 2, &path, fsize);
    let line = out
        .lines()
        .find(|l| l.contains(ERROR))
        .unwrap_or_else(|| panic!("{scenario:?}: the save did not fail:\n{out}"));
    assert!(
        line.contains(&format!("io path={}", dir.display())),
        "{scenario:?}: not an I/O error on a file of the directory: {line}"
    );
    assert!(
        line.contains(&format!("os=Some({expect_os})")),
        "{scenario:?}: {line}"
    );
    assert!(line.contains("I/O error on "), "{scenario:?}: {line}");
    assert_eq!(
        snapshot(dir),
        before,
        "{scenario:?}: the directory changed (previous files, temporary or new files)"
    );
    assert_eq!(check_model(&path).unwrap().generation, 1);
    eprintln!("{scenario:?}: {line}");
}

#[cfg(target_os = "linux")]
#[test]
fn disk_full_fails_cleanly() {
    for (scenario, limit) in [
        // The first weight file cannot even be sized.
        (Scenario::OneFile, 1 << 20),
        // The 3 MiB split part cannot be sized.
        (Scenario::Split, (2 << 20) + 4096),
        (Scenario::PerTensor, (2 << 20) + 4096),
        // 32 files are written and renamed into place, then the 41st fails: the 32 are
        // removed again.
        (Scenario::ManyFiles, 1 << 20),
        // The inline model fails in the middle of its sequential write.
        (Scenario::Inline, 1 << 20),
        // The encrypted weight file cannot be sized.
        (Scenario::Encrypted, 1 << 20),
    ] {
        let dir = sandbox(&format!("fsize-{scenario:?}"));
        let path = dir.join("m.onnx");
        scenario.save(&model(1, scenario), &path).unwrap();
        assert_fails_cleanly(&dir, scenario, Some(limit), libc::EFBIG);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn disk_full_on_a_tmpfs() {
    #[cfg(target_os = "linux")]
    let (dir, no_space) = {
        let dir = sandbox("tmpfs");
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=12m", "tmpfs"])
            .arg(&dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!("skipped: cannot mount a tmpfs here (needs root)");
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        (dir, libc::ENOSPC)
    };
    // Windows: ERROR_DISK_FULL.
    #[cfg(windows)]
    let (dir, no_space) =
        (
            PathBuf::from(std::env::var_os("ONNXL_TEST_FULL_DIR").expect(
                "ONNXL_TEST_FULL_DIR: an empty directory on a 12 MiB file system (a tmpfs)",
            )),
            112,
        );
    // 12 MiB: generation 1 (6.6 MB) fits, a second copy beside it does not.
    for scenario in [Scenario::OneFile, Scenario::PerTensor, Scenario::Inline] {
        for e in std::fs::read_dir(&dir).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        let path = dir.join("m.onnx");
        scenario.save(&model(1, scenario), &path).unwrap();
        assert_fails_cleanly(&dir, scenario, None, no_space);
    }
    #[cfg(target_os = "linux")]
    {
        // (a child another test forks at that moment holds this process's descriptors until it
        // execs: the file system may be busy for an instant)
        let umount = || {
            std::process::Command::new("umount")
                .arg(&dir)
                .stderr(Stdio::null())
                .status()
                .unwrap()
                .success()
        };
        let ok = (0..50).any(|_| {
            umount() || {
                std::thread::sleep(std::time::Duration::from_millis(100));
                false
            }
        });
        assert!(ok, "umount of {} still busy after 5 s", dir.display());
        let _ = std::fs::remove_dir_all(&dir);
    }
    #[cfg(windows)]
    for e in std::fs::read_dir(&dir).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
}

/// Every file under `dir` (its subdirectories too, by relative path) with its bytes.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        for e in std::fs::read_dir(dir.join(&rel)).unwrap() {
            let e = e.unwrap();
            let name = rel.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                out.insert(name.clone(), b"<dir>".to_vec());
                todo.push(name);
            } else {
                out.insert(name, std::fs::read(e.path()).unwrap());
            }
        }
    }
    out
}

/// Saves generation 2 with `scenario` to `path`, which must fail with an I/O error naming
/// `path` itself (its rename), leaving the directory as it was.
fn assert_rename_fails_cleanly(path: &Path, scenario: Scenario) {
    let dir = path.parent().unwrap();
    let before = tree(dir);
    let e = scenario.save(&model(2, scenario), path).unwrap_err();
    match &e {
        Error::Io { path: p, .. } => assert_eq!(p, path, "{scenario:?}: {e}"),
        other => panic!("{scenario:?}: not an I/O error: {other:?}"),
    }
    assert_eq!(tree(dir), before, "{scenario:?}: the directory changed");
}

#[test]
fn a_failed_rename_leaves_the_previous_files() {
    for scenario in [Scenario::OneFile, Scenario::PerTensor, Scenario::Inline] {
        // A directory (not empty) where the model is to go: the weight files are written, the
        // rename of the `.onnx` fails, and the weight files go again.
        let dir = sandbox(&format!("rename-{scenario:?}"));
        let path = dir.join("m.onnx");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("inside"), b"kept").unwrap();
        assert_rename_fails_cleanly(&path, scenario);
        std::fs::remove_dir_all(&path).unwrap();
        // Windows: another process holds the previous `.onnx` open without FILE_SHARE_DELETE,
        // so it cannot be replaced; once it is closed, the save goes through.
        #[cfg(windows)]
        {
            use std::os::windows::fs::OpenOptionsExt;
            scenario.save(&model(1, scenario), &path).unwrap();
            let held = std::fs::OpenOptions::new()
                .read(true)
                .share_mode(1) // FILE_SHARE_READ only
                .open(&path)
                .unwrap();
            assert_rename_fails_cleanly(&path, scenario);
            drop(held);
            assert_eq!(check_model(&path).unwrap().generation, 1);
            scenario.save(&model(2, scenario), &path).unwrap();
            assert_eq!(check_model(&path).unwrap().generation, 2);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
#[ignore = "child process of stale_temporary_files_of_ended_processes_are_removed"]
fn child_process_wait_for_stdin() {
    common::child_spec(WAIT_ENV);
    let mut rest = Vec::new();
    std::io::stdin().read_to_end(&mut rest).unwrap();
}

#[test]
fn stale_temporary_files_of_ended_processes_are_removed() {
    let dir = sandbox("stale");
    let path = dir.join("m.onnx");
    Scenario::OneFile
        .save(&model(1, Scenario::OneFile), &path)
        .unwrap();
    // A process that has ended, and one that runs until its stdin is closed.
    let mut ended = common::this_test_binary()
        .arg("--list")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    assert!(ended.wait().unwrap().success());
    let mut running = common::child_process(
        module_path!(),
        "child_process_wait_for_stdin",
        WAIT_ENV,
        "1",
    );
    let mut running = running
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stale = [
        format!(".m.onnx.data.tmp-{}-0", ended.id()),
        format!(".m.onnx.tmp-{}-3", ended.id()),
    ];
    let live = format!(".m.onnx.data.tmp-{}-0", running.id());
    for name in stale.iter().chain([&live]) {
        std::fs::write(dir.join(name), b"partial").unwrap();
    }
    Scenario::OneFile
        .save(&model(2, Scenario::OneFile), &path)
        .unwrap();
    assert_eq!(
        temp_files(&dir),
        std::slice::from_ref(&live),
        "only the running process's file stays"
    );
    assert_eq!(check_model(&path).unwrap().generation, 2);
    drop(running.stdin.take());
    assert!(running.wait().unwrap().success());
    Scenario::OneFile
        .save(&model(3, Scenario::OneFile), &path)
        .unwrap();
    assert_eq!(
        temp_files(&dir),
        Vec::<String>::new(),
        "its process has ended"
    );
    assert_eq!(check_model(&path).unwrap().generation, 3);
    let _ = std::fs::remove_dir_all(&dir);
}
