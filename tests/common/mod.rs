//! Helpers shared by the test binaries (tests/integration and tests/process_wide; each uses a
//! part of them).
#![allow(dead_code)]

use std::path::PathBuf;

use onnx_light::proto::TensorProto;

/// A fresh directory under the system temp dir, unique per tag, process and thread, removed on
/// drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        Self::new_in(&std::env::temp_dir(), tag)
    }
    /// Like [`TempDir::new`], under `base`.
    pub fn new_in(base: &std::path::Path, tag: &str) -> Self {
        let d = base.join(format!(
            "onnxl-test-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Self(d)
    }
    /// The temp dir off Linux (see the Linux twin).
    #[cfg(not(target_os = "linux"))]
    pub fn with_room(tag: &str, _need: u64) -> Self {
        Self::new(tag)
    }
    /// A fresh directory for a test that writes `need` bytes of files: under the system temp
    /// dir when its file system has the room, else under the build's scratch dir
    /// (`CARGO_TARGET_TMPDIR`), else under `/dev/shm` (a file system in memory) when that and
    /// the free memory have it. Machines differ in free disk, not in what such a
    /// test checks; when neither place has the room the test fails saying so.
    #[cfg(target_os = "linux")]
    pub fn with_room(tag: &str, need: u64) -> Self {
        // The temp dir, then the build's own scratch dir (on the disk that holds the build, where
        // the temp dir is a small file system of its own), then memory.
        let mut tried = Vec::new();
        let disks = [
            Some(std::env::temp_dir()),
            option_env!("CARGO_TARGET_TMPDIR").map(PathBuf::from),
        ];
        for dir in disks.into_iter().flatten() {
            std::fs::create_dir_all(&dir).ok();
            let free = bytes_free(&dir);
            if free > need {
                return Self::new_in(&dir, tag);
            }
            tried.push(format!("{} has {free} bytes free", dir.display()));
        }
        // The files take memory there, beside the test's own (at most about the same again).
        let shm = std::path::Path::new("/dev/shm");
        let (in_shm, memory) = (bytes_free(shm), memory_available());
        assert!(
            in_shm > need && memory > 2 * need,
            "this test writes {need} bytes of files: {}, {} has {in_shm} and the machine {memory} \
             bytes of available memory",
            tried.join(", "),
            shm.display()
        );
        Self::new_in(shm, tag)
    }
    /// `name` inside the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Bytes an unprivileged process may still write to the file system holding `dir`.
#[cfg(target_os = "linux")]
pub fn bytes_free(dir: &std::path::Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: `st` is plain data written by statvfs on success; `c` is NUL-terminated.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return 0;
        }
        st.f_bavail as u64 * st.f_frsize as u64
    }
}

/// The kernel's estimate of memory available to new allocations (`MemAvailable`), in bytes.
#[cfg(target_os = "linux")]
pub fn memory_available() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .unwrap()
        * 1024
}

/// `n` bytes of a pattern that differs per `seed` and does not repeat within 16 MiB.
pub fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed ^ ((i >> 8) as u8) ^ ((i >> 16) as u8))
        .collect()
}

/// A UINT8 tensor `name` of `n` pattern bytes in `raw_data`.
pub fn uint8_tensor(name: &str, n: usize, seed: u8) -> TensorProto {
    let mut t = TensorProto::new();
    t.set_name(name);
    t.set_data_type(2); // UINT8
    t.add_dims(n as i64);
    t.set_raw_data(pattern(n, seed));
    t
}

/// `inner` as field `field` (wire type LEN) of a message: tag, length, bytes.
pub fn wrap(field: u32, inner: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    onnx_light::wire::put_varint(&mut b, onnx_light::wire::tag(field, 2) as u64);
    onnx_light::wire::put_varint(&mut b, inner.len() as u64);
    b.extend_from_slice(inner);
    b
}

/// A ModelProto whose graph holds a node whose attribute holds a graph ... `levels` times
/// (nesting depth 3 × `levels` + 1).
pub fn nested_graphs(levels: usize) -> Vec<u8> {
    let mut g: Vec<u8> = Vec::new();
    for _ in 0..levels {
        // GraphProto.node (1) -> NodeProto.attribute (5) -> AttributeProto.g (6)
        g = wrap(1, &wrap(5, &wrap(6, &g)));
    }
    wrap(7, &g)
}

/// The least CPU time of this thread per run of `f` over `n` measurements (for time ratios of
/// single-threaded work: unlike wall time, it does not count the time other processes take the
/// core away, so the ratio holds on a loaded machine). A measurement runs `f` as many times as
/// it takes to span at least [`CLOCK_STEPS`] steps of the clock and divides: Linux's thread
/// clock counts nanoseconds (one run per measurement), Wine's `GetThreadTimes` advances in 10 ms
/// steps, which would read a 5 ms run as 0 or 10 ms.
pub fn best_cpu_of(n: usize, mut f: impl FnMut()) -> std::time::Duration {
    let span = CLOCK_STEPS * thread_cpu_clock_step();
    (0..n)
        .map(|_| {
            let t = thread_cpu_now();
            let mut runs = 0u32;
            let mut elapsed;
            loop {
                f();
                runs += 1;
                elapsed = thread_cpu_now() - t;
                if elapsed >= span {
                    break elapsed / runs;
                }
            }
        })
        .min()
        .unwrap()
}

/// The least number of clock steps one measurement of [`best_cpu_of`] spans: a clock that
/// advances in steps reads an interval off by less than one step, here less than 1/20.
pub const CLOCK_STEPS: u32 = 20;

/// The smallest step of this thread's CPU clock, measured once (the least of a few observed
/// steps, spinning until the clock moves).
pub fn thread_cpu_clock_step() -> std::time::Duration {
    static STEP: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();
    *STEP.get_or_init(|| {
        let mut step = std::time::Duration::MAX;
        let mut last = thread_cpu_now();
        for _ in 0..4 {
            let next = loop {
                let now = thread_cpu_now();
                if now != last {
                    break now;
                }
            };
            step = step.min(next - last);
            last = next;
        }
        step
    })
}

/// This thread's CPU time (user and system) so far.
#[cfg(unix)]
pub fn thread_cpu_now() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// This thread's CPU time (user and kernel) so far.
#[cfg(windows)]
pub fn thread_cpu_now() -> std::time::Duration {
    use windows_sys::Win32::Foundation::FILETIME;
    use windows_sys::Win32::System::Threading::{GetCurrentThread, GetThreadTimes};
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: the pseudo-handle of the current thread and four valid out-pointers.
    let ok = unsafe {
        GetThreadTimes(
            GetCurrentThread(),
            &mut created,
            &mut exited,
            &mut kernel,
            &mut user,
        )
    };
    assert_ne!(ok, 0, "GetThreadTimes");
    // FILETIME counts 100 ns units.
    let ticks = |t: FILETIME| (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime);
    std::time::Duration::from_nanos((ticks(kernel) + ticks(user)) * 100)
}

/// name → raw bytes (None: no `raw_data`) of every tensor of `m`, subgraphs included.
pub fn tensors_of(
    m: &onnx_light::ModelProto,
) -> std::collections::BTreeMap<String, Option<Vec<u8>>> {
    let mut out = std::collections::BTreeMap::new();
    m.visit_tensors(&mut |t| {
        out.insert(t.name().to_string(), t.raw_data_opt().map(|r| r.to_vec()));
    });
    out
}

/// `opts` with `key` as the passphrase of encrypted weight files.
pub fn with_key(key: &[u8], opts: onnx_light::LoadOptions) -> onnx_light::LoadOptions {
    onnx_light::LoadOptions {
        external_data_key: Some(key.into()),
        ..opts
    }
}

/// The file starts with the magic of the chunked encrypted format (`ONNXCRYS`).
pub fn starts_with_chunked_magic(p: &std::path::Path) -> bool {
    std::fs::read(p).unwrap().starts_with(b"ONNXCRYS")
}

/// The file is encrypted, in any format (ONNXCRY1/2/3/S).
pub fn is_encrypted(p: &std::path::Path) -> bool {
    onnx_light::crypto::detect_file_format(p).is_ok()
}

/// The name the test harness gives test function `function` of the module `module` (its
/// `module_path!()`): the module path without the crate's name, then the function, as in
/// `codec::parallel_parse_equals_sequential`.
pub fn test_name(module: &str, function: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{function}"),
        None => function.to_string(),
    }
}

/// A command that runs the child-process test `function` of the module `module` (the caller's
/// `module_path!()`) of this test binary with `spec` in the environment variable `var`.
/// Child-process tests are named `child_process_*` and marked `#[ignore]`: they are steps of
/// another test, never tests on their own (the test command skips them with
/// `--skip child_process_`).
pub fn child_process(
    module: &str,
    function: &str,
    var: &str,
    spec: impl AsRef<std::ffi::OsStr>,
) -> std::process::Command {
    assert!(
        function.starts_with("child_process_"),
        "{function}: child-process tests are named child_process_*"
    );
    let mut cmd = this_test_binary();
    cmd.args([
        "--ignored",
        "--exact",
        &test_name(module, function),
        "--nocapture",
        "--test-threads=1",
    ])
    .env(var, spec);
    cmd
}

/// A command that runs this test binary again: directly, or under the emulator named by
/// `ONNXL_TEST_RUNNER` (a command and its arguments, split at spaces; the cross step sets it to
/// `qemu-aarch64 -L /usr/aarch64-linux-gnu` for the aarch64 tests under qemu-user, where the
/// binary cannot be executed by itself).
pub fn this_test_binary() -> std::process::Command {
    let exe = std::env::current_exe().unwrap();
    let runner = std::env::var("ONNXL_TEST_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(program) => {
            let mut cmd = std::process::Command::new(program);
            cmd.args(words).arg(exe);
            cmd
        }
        None => std::process::Command::new(exe),
    }
}

/// Holds the lock that the tests over 2 GB take in turn (models of gigabytes in memory and on
/// disk): one binary runs them, and two at once would need the sum of their memory and disk.
pub fn one_large_test_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LARGE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LARGE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The scenario a child-process test was started with (see [`child_process`]).
pub fn child_spec(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("a child-process test runs only as a step of its parent test (${var} is not set)")
    })
}

/// Whether `file` is memory-mapped in this process right now (see [`mappings_of`]).
pub fn is_mapped(file: &std::path::Path) -> bool {
    !mappings_of(file).is_empty()
}

/// The address ranges `[start, end)` of this process's memory mappings of `file`: on Linux the
/// lines of `/proc/self/maps` that name it; on Windows the mapped views whose file
/// (`GetMappedFileNameW`, a device path `\Device\...\dir\file`) ends with `file`'s full path
/// less its drive, compared case-insensitively, one range per view.
pub fn mappings_of(file: &std::path::Path) -> Vec<(usize, usize)> {
    let full = std::path::absolute(file).unwrap();
    #[cfg(target_os = "linux")]
    {
        let real = full.canonicalize().unwrap();
        let real = real.to_str().unwrap();
        std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .filter(|l| l.ends_with(real))
            .map(|l| {
                let range = l.split_whitespace().next().unwrap();
                let (a, b) = range.split_once('-').unwrap();
                (
                    usize::from_str_radix(a, 16).unwrap(),
                    usize::from_str_radix(b, 16).unwrap(),
                )
            })
            .collect()
    }
    #[cfg(windows)]
    {
        let full = full.to_string_lossy().to_lowercase();
        let tail = full.split_once(':').map_or(full.as_str(), |(_, rest)| rest);
        mapped_views()
            .into_iter()
            .filter(|(_, name)| name.to_lowercase().ends_with(tail))
            .map(|(range, _)| range)
            .collect()
    }
}

/// This process's mapped views: the address range of each and its file (a device path).
#[cfg(windows)]
fn mapped_views() -> Vec<((usize, usize), String)> {
    use windows_sys::Win32::System::Memory::{MEM_MAPPED, MEMORY_BASIC_INFORMATION, VirtualQuery};
    use windows_sys::Win32::System::ProcessStatus::K32GetMappedFileNameW;
    use windows_sys::Win32::System::Threading::GetCurrentProcess;
    let query = |at: usize| {
        // SAFETY: MEMORY_BASIC_INFORMATION is plain data; all-zero bytes are a valid value.
        let mut info: MEMORY_BASIC_INFORMATION = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<MEMORY_BASIC_INFORMATION>();
        // SAFETY: VirtualQuery only reads the process's address map and writes `info`.
        (unsafe { VirtualQuery(at as *const _, &mut info, size) } == size).then_some(info)
    };
    let mut out = Vec::new();
    let mut at = 0usize;
    while let Some(info) = query(at) {
        let base = info.BaseAddress as usize;
        if info.Type == MEM_MAPPED && info.BaseAddress == info.AllocationBase {
            let mut name = [0u16; 1024];
            // SAFETY: `name` is a writable buffer of the length passed; the address is a view.
            let n = unsafe {
                K32GetMappedFileNameW(
                    GetCurrentProcess(),
                    info.BaseAddress,
                    name.as_mut_ptr(),
                    name.len() as u32,
                )
            };
            if n > 0 {
                // The whole view: this region and the following ones of the same allocation.
                let mut end = base + info.RegionSize;
                while let Some(next) =
                    query(end).filter(|n| n.AllocationBase == info.AllocationBase)
                {
                    end += next.RegionSize;
                }
                out.push(((base, end), String::from_utf16_lossy(&name[..n as usize])));
            }
        }
        let next = base + info.RegionSize;
        if next <= at {
            break;
        }
        at = next;
    }
    out
}
