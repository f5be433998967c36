//! The thread pools of parallel reads, parses and writes, and the cap on thread counts.

use std::sync::{Arc, Mutex, OnceLock};

/// Fewest threads [`max_threads`] allows, whatever the core count.
pub const MIN_THREAD_CAP: usize = 16;

/// The most threads a `num_threads` option may ask for: 4 × the cores the OS reports, and at
/// least [`MIN_THREAD_CAP`]. More would only add contention, and an unbounded count lets one
/// option value start threads until the machine stalls. Larger values are refused by every
/// options struct (`Error::InvalidOption`).
pub fn max_threads() -> usize {
    cores().saturating_mul(4).max(MIN_THREAD_CAP)
}

/// The cores this process may use (`std::thread::available_parallelism`, 1 when unknown), read
/// once per process: the look-up reads several files (cgroup limits, the affinity mask), which
/// cost a small parse or serialize more than its work.
pub(crate) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// How many thread pools (of different sizes) are kept between operations.
const KEPT_POOLS: usize = 2;

/// The kept pools, most recently used last.
static POOLS: Mutex<Vec<(usize, Arc<super::par::ThreadPool>)>> = Mutex::new(Vec::new());

/// A pool of exactly `n` threads (`n` clamped to [`max_threads`]). The pools of the last
/// [`KEPT_POOLS`] sizes used are kept for later operations; an older pool is dropped, and its
/// threads exit once the operations still using it are done. `None` when no thread can start.
pub(crate) fn thread_pool(n: usize) -> Option<Arc<super::par::ThreadPool>> {
    let n = n.clamp(1, max_threads());
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = pools.iter().position(|(size, _)| *size == n) {
        let entry = pools.remove(i);
        let pool = entry.1.clone();
        pools.push(entry);
        return Some(pool);
    }
    let pool = Arc::new(build_pool(n)?);
    if pools.len() >= KEPT_POOLS {
        pools.remove(0);
    }
    pools.push((n, pool.clone()));
    Some(pool)
}

/// A new pool of `n` threads; `None` when a thread cannot start, or (the minimal build,
/// without the `parallel` feature) always: everything then runs on the calling thread.
#[cfg(feature = "parallel")]
fn build_pool(n: usize) -> Option<super::par::ThreadPool> {
    rayon::ThreadPoolBuilder::new().num_threads(n).build().ok()
}

#[cfg(not(feature = "parallel"))]
fn build_pool(_n: usize) -> Option<super::par::ThreadPool> {
    None
}

/// Drops every kept thread pool: their threads exit as soon as the operations still running on
/// them finish, so a host that is done with the library can leave no worker thread behind. Later
/// operations build pools again as needed.
pub fn release_thread_pools() {
    let pools = std::mem::take(&mut *POOLS.lock().unwrap_or_else(|e| e.into_inner()));
    drop(pools);
}
