//! The thread pools of parallel reads, parses and writes, and the cap on thread counts.

use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// Fewest threads [`max_threads`] allows, whatever the core count.
pub const MIN_THREAD_CAP: usize = 16;

/// The most threads a `num_threads` option may ask for: 4 × the cores the OS reports, and at
/// least [`MIN_THREAD_CAP`]. More would only add contention, and an unbounded count lets one
/// option value start threads until the machine stalls. Larger values are refused by every
/// options struct (`Error::InvalidOption`).
pub fn max_threads() -> usize {
    cores().saturating_mul(4).max(MIN_THREAD_CAP)
}

/// The cores this process may use (1 when unknown), read once per process: the look-up reads
/// several files (cgroup limits, the affinity mask), which cost a small parse or serialize more
/// than its work.
pub(crate) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(count_cores)
}

/// `std::thread::available_parallelism`: the affinity mask and cgroup quotas, which size the
/// thread pools.
#[cfg(feature = "parallel")]
fn count_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Without threads of its own the library needs the count only for the thread-count cap
/// ([`max_threads`]): the processors online, which spares the minimal build the ~10 kB of
/// `available_parallelism`'s cgroup parsing.
#[cfg(all(not(feature = "parallel"), unix))]
fn count_cores() -> usize {
    // SAFETY: sysconf reads a system value; no memory is passed.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).map_or(1, |n| n.max(1))
}

/// See the Unix variant.
#[cfg(all(not(feature = "parallel"), not(unix)))]
fn count_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How many thread pools (of different sizes) are kept between operations.
const KEPT_POOLS: usize = 2;

/// The number of threads of one pool still running, and a signal when it drops; on Linux also
/// their `/proc` entries, to see them leave the process (a thread still exists for a moment after
/// its exit handler ran).
#[derive(Default)]
struct LiveThreads {
    n: Mutex<usize>,
    changed: Condvar,
    #[cfg(target_os = "linux")]
    tasks: Mutex<Vec<std::path::PathBuf>>,
}

/// A kept pool: its size, the pool, and the count of its running threads.
struct Kept {
    size: usize,
    pool: Arc<super::par::ThreadPool>,
    live: Arc<LiveThreads>,
}

impl Kept {
    /// Drops the pool and, when no operation uses it any more (its threads are idle), waits
    /// (at most a second) until its threads have exited: pools of new sizes then never pile up
    /// threads faster than old ones end. A pool still in use ends with its last operation.
    fn retire(self) {
        let idle = Arc::strong_count(&self.pool) == 1;
        drop(self.pool);
        if !idle {
            return;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        let mut n = self.live.n.lock().unwrap_or_else(|e| e.into_inner());
        while *n > 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            n = self
                .live
                .changed
                .wait_timeout(n, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(n);
        #[cfg(target_os = "linux")]
        for task in self
            .live
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            while task.exists() && std::time::Instant::now() < deadline {
                std::thread::yield_now();
            }
        }
    }
}

/// The kept pools, most recently used last.
static POOLS: Mutex<Vec<Kept>> = Mutex::new(Vec::new());

/// A pool of exactly `n` threads (`n` clamped to [`max_threads`]). The pools of the last
/// [`KEPT_POOLS`] sizes used are kept for later operations; an older pool is dropped, and its
/// threads exit before a new pool starts (or, when operations still use it, once they are done).
/// `None` when no thread can start.
pub(crate) fn thread_pool(n: usize) -> Option<Arc<super::par::ThreadPool>> {
    let n = n.clamp(1, max_threads());
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = pools.iter().position(|k| k.size == n) {
        let entry = pools.remove(i);
        let pool = entry.pool.clone();
        pools.push(entry);
        return Some(pool);
    }
    let retired = (pools.len() >= KEPT_POOLS).then(|| pools.remove(0));
    drop(pools);
    // Outside the lock: an operation running on the retired pool may ask for a pool.
    if let Some(old) = retired {
        old.retire();
    }
    let live = Arc::new(LiveThreads::default());
    let pool = Arc::new(build_pool(n, &live)?);
    POOLS.lock().unwrap_or_else(|e| e.into_inner()).push(Kept {
        size: n,
        pool: pool.clone(),
        live,
    });
    Some(pool)
}

/// A new pool of `n` threads, which count themselves in `live`; `None` when a thread cannot
/// start, or (the minimal build, without the `parallel` feature) always: everything then runs
/// on the calling thread.
#[cfg(feature = "parallel")]
fn build_pool(n: usize, live: &Arc<LiveThreads>) -> Option<super::par::ThreadPool> {
    // Counted before they start, so that a pool retired at once still waits for all of them.
    *live.n.lock().unwrap_or_else(|e| e.into_inner()) = n;
    let (up, down) = (live.clone(), live.clone());
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .start_handler(move |_| {
            // The thread's own /proc entry (`/proc/PID/task/TID`), gone once it has exited.
            #[cfg(target_os = "linux")]
            if let Ok(task) = std::fs::read_link("/proc/thread-self") {
                up.tasks
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(std::path::Path::new("/proc").join(task));
            }
            let _ = &up;
        })
        .exit_handler(move |_| {
            let mut n = down.n.lock().unwrap_or_else(|e| e.into_inner());
            *n = n.saturating_sub(1);
            down.changed.notify_all();
        })
        .build()
        .ok()
}

#[cfg(not(feature = "parallel"))]
fn build_pool(_n: usize, _live: &Arc<LiveThreads>) -> Option<super::par::ThreadPool> {
    None
}

/// Drops every kept thread pool: their threads exit as soon as the operations still running on
/// them finish, so a host that is done with the library can leave no worker thread behind. Later
/// operations build pools again as needed.
pub fn release_thread_pools() {
    let pools = std::mem::take(&mut *POOLS.lock().unwrap_or_else(|e| e.into_inner()));
    for k in pools {
        k.retire();
    }
}
