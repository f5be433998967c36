//! The thread pools of parallel reads, parses and writes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// A pool of exactly `n` threads, built once per size and kept for the process.
pub(crate) fn thread_pool(n: usize) -> Option<Arc<rayon::ThreadPool>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS.get_or_init(Default::default).lock().ok()?;
    if let Some(p) = pools.get(&n) {
        return Some(p.clone());
    }
    let p = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .ok()?,
    );
    pools.insert(n, p.clone());
    Some(p)
}
