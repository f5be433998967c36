//! The global allocator of this test binary: it forwards every call to the system allocator and
//! counts what the tests measure — live heap bytes and their peak and the number of allocations
//! (all threads), and, on a thread that armed it, refuses one chosen allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

#[global_allocator]
static ALLOC: Counting = Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Allocations made by this thread since it was armed (`None`: not armed).
    static COUNT: Cell<Option<usize>> = const { Cell::new(None) };
    /// Index of the allocation to refuse.
    static FAIL_AT: Cell<usize> = const { Cell::new(usize::MAX) };
    /// Size of the previous allocation of this thread.
    static LAST_SIZE: Cell<usize> = const { Cell::new(0) };
}

fn grew(n: usize) {
    let now = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

/// True when this allocation of `size` bytes is the one to refuse on an armed thread (and
/// counts it). Not counted: the reference-count block of a payload region, made right after the
/// region (at least 512 bytes) and the one allocation of a parse that cannot fail cleanly (see
/// `onnx_light::mem::REGION_OWNER_BYTES`).
fn refuse(size: usize) -> bool {
    // `try_with`: thread-locals may be gone while a thread exits.
    let last = LAST_SIZE.try_with(|l| l.replace(size)).unwrap_or(0);
    if size == onnx_light::mem::REGION_OWNER_BYTES && last >= 512 {
        return false;
    }
    COUNT
        .try_with(|c| {
            let Some(n) = c.get() else {
                return false;
            };
            c.set(Some(n + 1));
            FAIL_AT.with(|f| f.get()) == n
        })
        .unwrap_or(false)
}

// SAFETY: forwards every call to the system allocator unchanged, or returns null (allowed: an
// allocation failure) without allocating; only counts sizes and calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        if refuse(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        if refuse(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        if new_size > layout.size() && refuse(new_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

/// Peak heap growth of `f` (bytes above what was live before, all threads).
pub fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

/// Allocations (and reallocations) made so far by the process.
pub fn allocations() -> usize {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Runs `f` with this thread's allocation number `fail_at` refused; returns its result and the
/// number of allocations it made.
pub fn armed<T>(fail_at: usize, f: impl FnOnce() -> T) -> (T, usize) {
    FAIL_AT.with(|c| c.set(fail_at));
    COUNT.with(|c| c.set(Some(0)));
    let out = f();
    let n = COUNT.with(|c| c.replace(None)).expect("armed");
    (out, n)
}
