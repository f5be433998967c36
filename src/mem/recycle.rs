//! Anonymous memory that loads reuse. The large regions a copy load puts tensor payloads in
//! (one per payload of at least 2 MiB, and the one arena of a model's external data), and the
//! blocks a parse cuts repeated-field chunks from (`region.rs`), are anonymous mappings of their
//! own, as are the 64 KiB chunks small payloads share (`placement.rs`). When the last payload
//! of one is dropped, the mapping is kept in a bounded, process-wide store instead of being
//! unmapped, and a later load that needs a region of about that size takes it back. Fresh
//! anonymous memory is zeroed by the kernel page by page as it is first touched, which costs a
//! copy load more than the copy itself (more still in a virtual machine on a busy host); memory
//! taken back is written in place.
//!
//! - The store holds at most [`memory_reuse_limit`] bytes (default: a quarter of the physical
//!   memory; [`set_memory_reuse_limit`], 0 turns reuse off); the oldest mappings go first.
//! - On Linux, kept payload mappings are advised `MADV_FREE`: the kernel may take their pages
//!   back whenever memory runs short (without swapping them out), so kept memory never makes the
//!   system swap. Pages it takes back read as zeros afterwards, which is fine: a load writes every
//!   byte it hands out. Until then the pages count in the process's resident set. Metadata
//!   blocks are kept resident as they are (see [`ReusableMap::resident`]), as the C library's
//!   heap keeps freed memory.
//! - On Windows (and other systems) kept mappings get no such advice: nothing like
//!   `MADV_FREE` is used there (`DiscardVirtualMemory` / `MEM_RESET` are left out: their effect
//!   cannot be tested under Wine, where the Windows build is tested), so kept memory stays
//!   committed, up to the limit, and is paged out like any other when memory runs short. Reuse
//!   is on there too (fresh memory is zero-filled page by page on first touch there as well);
//!   the limit is a quarter of the physical memory (`GlobalMemoryStatusEx`).
//! - [`release_memory_held_for_reuse`] unmaps everything kept at once.
//!
//! A mapping taken back holds bytes of an earlier model of the same process until the load
//! overwrites them; only what the load wrote is ever handed out.

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

use memmap2::MmapMut;

/// Mappings at least this large are advised to use transparent huge pages (Linux).
#[cfg(any(target_os = "linux", target_os = "android"))]
const HUGE_PAGE_MIN_BYTES: usize = 2 << 20;

/// A mapping kept for reuse, and how many of its first bytes were written (resident) before.
struct Kept {
    map: MmapMut,
    written: usize,
}

/// The kept mappings, oldest first, their total size and the limit (`None`: the default).
struct Store {
    kept: Vec<Kept>,
    bytes: usize,
    limit: Option<usize>,
}

static STORE: Mutex<Store> = Mutex::new(Store {
    kept: Vec::new(),
    bytes: 0,
    limit: None,
});

/// The store, locked. On Unix the `Mutex` is taken under a pthread mutex as well: ThreadSanitizer
/// and Helgrind intercept pthread locks but do not see Rust's futex-based `Mutex`, and a mapping
/// (and the store's own vector) handed from one thread's dropped model to another thread's load
/// must show to them as ordered, or every multi-threaded C test under them reports a race. The
/// inner `Mutex` is then never contended; it is what makes the access safe.
fn store() -> StoreGuard {
    #[cfg(unix)]
    let os = OsLock::lock();
    StoreGuard {
        inner: STORE.lock().unwrap_or_else(|e| e.into_inner()),
        #[cfg(unix)]
        _os: os,
    }
}

/// The locked store (fields drop in order: the `Mutex` is released before the pthread lock).
struct StoreGuard {
    inner: std::sync::MutexGuard<'static, Store>,
    #[cfg(unix)]
    _os: OsLock,
}

impl Deref for StoreGuard {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.inner
    }
}

impl DerefMut for StoreGuard {
    fn deref_mut(&mut self) -> &mut Store {
        &mut self.inner
    }
}

/// The process-wide pthread mutex around the store, held while this value lives (when locking
/// worked: a default mutex does not fail, and the `Mutex` inside protects the store regardless).
#[cfg(unix)]
struct OsLock {
    locked: bool,
}

#[cfg(unix)]
struct PthreadMutex(std::cell::UnsafeCell<libc::pthread_mutex_t>);

// SAFETY: a pthread mutex is made to be shared between threads; it is only used through
// pthread_mutex_lock / pthread_mutex_unlock, never moved (it is a static).
#[cfg(unix)]
unsafe impl Sync for PthreadMutex {}

#[cfg(unix)]
static OS_LOCK: PthreadMutex =
    PthreadMutex(std::cell::UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));

#[cfg(unix)]
impl OsLock {
    fn lock() -> Self {
        // SAFETY: OS_LOCK is a statically initialized default mutex that lives for the whole
        // process; a thread unlocks it only through the `OsLock` it got here (in `drop`), and
        // nothing locks it twice on one thread (the store's functions do not nest).
        let rc = unsafe { libc::pthread_mutex_lock(OS_LOCK.0.get()) };
        OsLock { locked: rc == 0 }
    }
}

#[cfg(unix)]
impl Drop for OsLock {
    fn drop(&mut self) {
        if self.locked {
            // SAFETY: this thread holds OS_LOCK (taken in `OsLock::lock`, released only here).
            unsafe { libc::pthread_mutex_unlock(OS_LOCK.0.get()) };
        }
    }
}

/// A quarter of the physical memory (1 GiB where the system does not say).
fn default_limit() -> usize {
    static LIMIT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(quarter_of_memory)
}

fn quarter_of_memory() -> usize {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "macos"))]
    {
        // SAFETY: `sysconf` has no preconditions; it returns -1 for an unknown name.
        let (pages, page) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && page > 0 {
            return usize::try_from(pages)
                .unwrap_or(usize::MAX)
                .saturating_mul(usize::try_from(page).unwrap_or(4096))
                / 4;
        }
    }
    #[cfg(windows)]
    {
        use windows_sys::Win32::System::SystemInformation::{GlobalMemoryStatusEx, MEMORYSTATUSEX};
        // SAFETY: MEMORYSTATUSEX is plain data (all-zero bytes are a valid value); the call
        // fills it once dwLength holds its size, and only reads the system's memory counters.
        let total = unsafe {
            let mut status: MEMORYSTATUSEX = std::mem::zeroed();
            status.dwLength = std::mem::size_of::<MEMORYSTATUSEX>() as u32;
            if GlobalMemoryStatusEx(&mut status) != 0 {
                status.ullTotalPhys
            } else {
                0
            }
        };
        if total > 0 {
            return usize::try_from(total / 4).unwrap_or(usize::MAX);
        }
    }
    1 << 30
}

impl Store {
    fn limit(&self) -> usize {
        self.limit.unwrap_or_else(default_limit)
    }

    /// The smallest kept mapping that holds `len` bytes and is at most an eighth larger, of
    /// equal ones the one with the most bytes written (so a parse takes back its fully written
    /// blocks first, and the partly written last one last: it does not fault in new pages while
    /// written ones stay idle), then the newest; removed, with its written size.
    ///
    /// `scratch` (memory used briefly): any larger one will do, and one whose first `len` bytes
    /// were all written (no page of it faults) comes before the smallest.
    fn take(&mut self, len: usize, scratch: bool) -> Option<Kept> {
        let fits = |k: &Kept| k.map.len() >= len && (scratch || k.map.len() - len <= len / 8);
        let (i, _) = self
            .kept
            .iter()
            .enumerate()
            .filter(|(_, k)| fits(k))
            .min_by_key(|&(i, k)| {
                (
                    scratch && k.written < len,
                    k.map.len(),
                    std::cmp::Reverse((k.written, i)),
                )
            })?;
        let k = self.kept.remove(i);
        self.bytes -= k.map.len();
        Some(k)
    }

    /// Keeps `map` (newest); returns what no longer fits the limit (oldest first), `map` itself
    /// when it alone is over the limit.
    fn keep(&mut self, map: MmapMut, written: usize) -> Vec<MmapMut> {
        let limit = self.limit();
        if map.len() > limit {
            return vec![map];
        }
        self.bytes += map.len();
        self.kept.push(Kept { map, written });
        self.trim(limit)
    }

    /// Removes the oldest mappings until the total fits `limit`; returns them (to be unmapped
    /// after the lock is released).
    fn trim(&mut self, limit: usize) -> Vec<MmapMut> {
        let mut out = Vec::new();
        while self.bytes > limit && !self.kept.is_empty() {
            let k = self.kept.remove(0);
            self.bytes -= k.map.len();
            out.push(k.map);
        }
        out
    }
}

/// The most bytes of freed load memory kept for reuse (see the module documentation).
pub fn memory_reuse_limit() -> usize {
    store().limit()
}

/// Sets the most bytes of freed load memory kept for later loads (0: none, every region is
/// unmapped when freed); mappings over the new limit are unmapped now, oldest first.
pub fn set_memory_reuse_limit(bytes: usize) {
    let dropped = {
        let mut s = store();
        s.limit = Some(bytes);
        s.trim(bytes)
    };
    drop(dropped);
}

/// Bytes of freed load memory kept for reuse right now.
pub fn memory_held_for_reuse() -> usize {
    store().bytes
}

/// Unmaps every mapping kept for reuse (later loads map fresh memory, and keep what they free
/// again up to the limit); returns the bytes released.
pub fn release_memory_held_for_reuse() -> usize {
    let dropped = {
        let mut s = store();
        s.bytes = 0;
        std::mem::take(&mut s.kept)
    };
    dropped.iter().map(|k| k.map.len()).sum()
}

/// A writable anonymous mapping of `len` bytes for tensor payloads: a kept one taken back
/// (holding earlier bytes), or a fresh one (zeroed). Returned to the store when dropped.
pub(crate) struct ReusableMap {
    map: Option<MmapMut>,
    len: usize,
    /// Kept resident when given back (not advised `MADV_FREE`): see [`ReusableMap::resident`].
    resident: bool,
    /// Bytes from the start known to be written (resident), this time or by an earlier user.
    written: usize,
}

impl ReusableMap {
    /// `len` (> 0) writable bytes, page-aligned; an error when the memory cannot be had.
    pub(crate) fn new(len: usize) -> std::io::Result<Self> {
        Self::make(len, false, false)
    }

    /// [`ReusableMap::new`] for many small writes whose memory is reused soon (the blocks of
    /// a parse's repeated-field chunks, the chunks small payloads share): no huge pages
    /// advised, and kept resident when given back. Measured on the 2-core VM of
    /// docs/benchmarks.md: pages taken back after
    /// `MADV_FREE` cost a metadata parse ~70% more CPU than pages kept as they were (the kernel
    /// handles each again), and fresh transparent huge pages cost anything from 0.2× to 5× the
    /// time of 4 KiB pages (the host backs them lazily: free-page reporting returns the
    /// guest's free 8 MiB blocks to it, and huge pages are cut from those).
    pub(crate) fn resident(len: usize) -> std::io::Result<Self> {
        Self::make(len, true, false)
    }

    /// [`ReusableMap::resident`] for memory given back soon after (the image a parse of a
    /// stream reads): any kept mapping that holds `len` bytes will do, preferably one whose
    /// pages are all there (the parse of a small file after larger ones faults in no page).
    pub(crate) fn scratch(len: usize) -> std::io::Result<Self> {
        Self::make(len, true, true)
    }

    fn make(len: usize, resident: bool, scratch: bool) -> std::io::Result<Self> {
        let kept = store().take(len, scratch);
        if let Some(k) = kept {
            return Ok(Self {
                map: Some(k.map),
                len,
                resident,
                written: k.written,
            });
        }
        let map = MmapMut::map_anon(len)?;
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if !resident && len >= HUGE_PAGE_MIN_BYTES {
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        Ok(Self {
            map: Some(map),
            len,
            resident,
            written: 0,
        })
    }

    /// Records that the first `bytes` bytes were written (the store then prefers this mapping
    /// to an equal one less written: see `Store::take`).
    pub(crate) fn note_written(&mut self, bytes: usize) {
        self.written = self.written.max(bytes.min(self.len));
    }
}

impl Deref for ReusableMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map.as_ref().expect("present until dropped")[..self.len]
    }
}

impl DerefMut for ReusableMap {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.map.as_mut().expect("present until dropped")[..self.len]
    }
}

impl Drop for ReusableMap {
    fn drop(&mut self) {
        if let Some(map) = self.map.take() {
            give_back(map, self.resident, self.written);
        }
    }
}

/// Keeps `map` for reuse when the limit allows (unmapping the oldest kept ones to make room),
/// or unmaps it; advised `MADV_FREE` unless `resident`.
#[inline(never)]
fn give_back(map: MmapMut, resident: bool, written: usize) {
    if map.len() > memory_reuse_limit() {
        return;
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if !resident {
        // SAFETY: MADV_FREE lets the kernel discard the pages' contents; nothing reads them
        // again before writing them (a load hands out only bytes it wrote), and the mapping
        // stays valid.
        unsafe {
            let _ = map.unchecked_advise(memmap2::UncheckedAdvice::Free);
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = resident;
    // Pages of a mapping advised `MADV_FREE` may be gone: none counts as written.
    let written = if resident { written } else { 0 };
    let dropped = store().keep(map, written);
    drop(dropped);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with_limit(limit: usize) -> Store {
        Store {
            kept: Vec::new(),
            bytes: 0,
            limit: Some(limit),
        }
    }

    fn map(len: usize) -> MmapMut {
        MmapMut::map_anon(len).unwrap()
    }

    #[test]
    fn a_kept_mapping_serves_a_request_of_about_its_size() {
        let mut s = store_with_limit(64 << 20);
        let m = map(8 << 20);
        let addr = m.as_ptr() as usize;
        assert!(s.keep(m, 0).is_empty());
        assert_eq!(s.bytes, 8 << 20);
        // More than an eighth would be wasted, or too small: not taken.
        assert!(s.take(4 << 20, false).is_none());
        assert!(s.take((8 << 20) + 1, false).is_none());
        let m = s
            .take((8 << 20) - 4096, false)
            .expect("within an eighth")
            .map;
        assert_eq!(m.as_ptr() as usize, addr);
        assert_eq!(s.bytes, 0);
        // The smallest fitting one is chosen.
        assert!(s.keep(map(9 << 20), 0).is_empty());
        assert!(s.keep(m, 0).is_empty());
        assert_eq!(s.take(8 << 20, false).unwrap().map.as_ptr() as usize, addr);
        assert_eq!(s.take(8 << 20, false).unwrap().map.len(), 9 << 20);
        assert_eq!(s.bytes, 0);
    }

    #[test]
    fn the_limit_bounds_what_is_kept_oldest_first() {
        let mut s = store_with_limit(10 << 20);
        for i in 1..=3 {
            assert!(s.keep(map(i << 20), 0).is_empty());
        }
        assert_eq!(s.bytes, 6 << 20);
        let over = s.keep(map(11 << 20), 0);
        assert_eq!(over.len(), 1, "over the limit on its own: not kept");
        assert_eq!(s.bytes, 6 << 20);
        let gone: Vec<usize> = s.keep(map(6 << 20), 0).iter().map(|m| m.len()).collect();
        assert_eq!(gone, [1 << 20, 2 << 20], "the oldest go first");
        assert_eq!(s.bytes, 9 << 20);
        assert_eq!(s.trim(0).len(), 2);
        assert_eq!(s.bytes, 0);
        let mut off = store_with_limit(0);
        assert_eq!(off.keep(map(4096), 0).len(), 1, "limit 0: nothing kept");
    }

    #[test]
    fn of_equal_mappings_the_most_written_is_taken_first() {
        let mut s = store_with_limit(64 << 20);
        let (full, part, fresh) = (map(4 << 20), map(4 << 20), map(4 << 20));
        let addrs = [&full, &part, &fresh].map(|m| m.as_ptr() as usize);
        // Given back in an order where neither the oldest nor the newest is the fullest.
        assert!(s.keep(part, 1 << 20).is_empty());
        assert!(s.keep(full, 4 << 20).is_empty());
        assert!(s.keep(fresh, 0).is_empty());
        let taken: Vec<(usize, usize)> = (0..3)
            .map(|_| {
                let k = s.take(4 << 20, false).unwrap();
                (k.map.as_ptr() as usize, k.written)
            })
            .collect();
        assert_eq!(
            taken,
            [(addrs[0], 4 << 20), (addrs[1], 1 << 20), (addrs[2], 0)]
        );
        // Equally written: the newest first.
        let (a, b) = (map(1 << 20), map(1 << 20));
        let b_addr = b.as_ptr() as usize;
        assert!(s.keep(a, 0).is_empty());
        assert!(s.keep(b, 0).is_empty());
        assert_eq!(
            s.take(1 << 20, false).unwrap().map.as_ptr() as usize,
            b_addr
        );
    }

    #[test]
    fn scratch_memory_takes_any_larger_mapping_whose_pages_are_there_first() {
        let mut s = store_with_limit(64 << 20);
        let (small, big_written, big_fresh) = (map(1 << 20), map(16 << 20), map(8 << 20));
        let addrs = [&small, &big_written, &big_fresh].map(|m| m.as_ptr() as usize);
        assert!(s.keep(small, 1 << 20).is_empty());
        assert!(s.keep(big_written, 2 << 20).is_empty());
        assert!(s.keep(big_fresh, 0).is_empty());
        // 2 MiB: the 1 MiB one is too small; of the others, the one with 2 MiB written, though
        // larger (a regular take refuses both: more than an eighth larger).
        assert!(s.take(2 << 20, false).is_none());
        let k = s.take(2 << 20, true).unwrap();
        assert_eq!((k.map.as_ptr() as usize, k.written), (addrs[1], 2 << 20));
        // Then the smallest that holds it; none when none does.
        assert_eq!(
            s.take(4 << 20, true).unwrap().map.as_ptr() as usize,
            addrs[2]
        );
        assert!(s.take(4 << 20, true).is_none());
        assert_eq!(s.take(1, true).unwrap().map.as_ptr() as usize, addrs[0]);
        assert_eq!(s.bytes, 0);
    }

    #[test]
    fn reusable_maps_have_the_requested_length_and_are_writable() {
        let mut m = ReusableMap::new(3 << 20).unwrap();
        assert_eq!(m.len(), 3 << 20);
        assert_eq!(m.as_ptr() as usize % 4096, 0);
        m[0] = 1;
        m[(3 << 20) - 1] = 2;
        assert_eq!((m[0], m[(3 << 20) - 1]), (1, 2));
        assert!(default_limit() >= 1 << 28);
    }
}
