//! The tests that measure or change what a process has once: the heap (this binary's global
//! allocator counts bytes and allocations and refuses chosen ones, `heap`), the memory-reuse
//! store, the worker thread pools and the thread count, the sync and direct-write counters and
//! switches of the test hooks. Each test takes the process for itself ([`alone`]): one runs at a
//! time, from the state of a fresh process. Everything else is in tests/integration.

#[path = "../common/mod.rs"]
mod common;
mod heap;

mod allocation_failures;
mod direct_writes;
mod hostile_inputs;
mod memory_reuse;
mod metadata_budget;
mod metadata_region;
mod save_sync;
mod thread_pools;

use std::sync::{Mutex, MutexGuard, OnceLock};

/// Waits until no other test of this binary runs, then puts back the process-wide state as a
/// fresh process has it: no worker pools kept, memory reuse at its default limit with nothing
/// held, metadata regions on, no direct write made to fail. The process is the caller's while
/// it holds the guard.
pub fn alone() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    // The limit before any test changed it (every test that changes it holds the lock).
    static DEFAULT_REUSE_LIMIT: OnceLock<usize> = OnceLock::new();
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let limit = *DEFAULT_REUSE_LIMIT.get_or_init(onnx_light::memory_reuse_limit);
    onnx_light::set_memory_reuse_limit(limit);
    onnx_light::release_memory_held_for_reuse();
    onnx_light::release_thread_pools();
    onnx_light::codec::set_metadata_regions_off(false);
    onnx_light::storage::fail_next_direct_writes(0);
    guard
}
