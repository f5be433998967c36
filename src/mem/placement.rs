//! Aligned homes for tensor payloads that a parse copies: every payload pointer a load hands
//! out is aligned to at least the requested alignment (64 bytes by default: a cache line, and
//! the widest SIMD load, AVX-512, so `raw_data` can be cast to `float*` and read with aligned
//! vector loads). Small payloads share 64 KiB chunks (anonymous mappings kept for reuse, see
//! [`AlignedRegion::shared_chunk`]); larger ones get a region of their own (an
//! anonymous mapping, with transparent huge pages where the kernel allows, from 2 MiB, reused by
//! later loads once freed: see `recycle.rs`). Each payload is an exclusive range of its region,
//! which is freed with its last payload.

use std::alloc::Layout;
use std::sync::Arc;

use super::recycle::ReusableMap;
use crate::bytes::{ByteSpan, Owner};

/// Payloads up to this size share chunks of [`CHUNK_BYTES`].
const SHARED_MAX_BYTES: usize = 16 << 10;
/// Largest size of a shared chunk.
const CHUNK_BYTES: usize = 64 << 10;
/// Smallest size of a shared chunk.
const MIN_CHUNK_BYTES: usize = 1 << 10;
/// Regions of at least this size are anonymous mappings (page-aligned, huge pages advised).
pub(crate) const MAP_MIN_BYTES: usize = 2 << 20;

/// Size of the one allocation of a parse that cannot fail cleanly: the reference-count block
/// (`Arc`) of a payload region, made just after the region itself was allocated fallibly (a
/// stable `Arc::try_new` does not exist). Tests that refuse allocations one by one skip it.
#[doc(hidden)]
pub const REGION_OWNER_BYTES: usize = 2 * size_of::<usize>() + size_of::<AlignedRegion>();

/// An aligned, writable block of memory, owned by the payload ranges made from it.
pub(crate) struct AlignedRegion {
    ptr: *mut u8,
    storage: Storage,
}

enum Storage {
    Heap(Layout),
    Map(#[allow(dead_code)] ReusableMap),
}

// SAFETY: the region owns its memory; shared access goes through the exclusive payload ranges
// handed out once each (see `ByteSpan::from_arena_range`), never through the region itself.
unsafe impl Send for AlignedRegion {}
// SAFETY: see `Send`.
unsafe impl Sync for AlignedRegion {}

impl AlignedRegion {
    /// `len` (> 0) uninitialized-or-zeroed bytes at an address aligned to `align` (a power of
    /// two); `None` when the memory cannot be had.
    pub(crate) fn new(len: usize, align: usize) -> Option<Self> {
        debug_assert!(len > 0 && align.is_power_of_two());
        if len >= MAP_MIN_BYTES && align <= 4096 {
            let mut map = ReusableMap::new(len).ok()?;
            let ptr = map.as_mut_ptr();
            return Some(Self {
                ptr,
                storage: Storage::Map(map),
            });
        }
        let layout = Layout::from_size_align(len, align).ok()?;
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        (!ptr.is_null()).then_some(Self {
            ptr,
            storage: Storage::Heap(layout),
        })
    }

    /// A chunk of `len` bytes that small payloads share (see [`PayloadPool`]). A chunk of the
    /// largest size is a mapping kept resident for reuse when freed (`recycle.rs`), as the
    /// parse's metadata blocks are: from malloc's heap, the chunk a parsed model freed was split
    /// by the next parse's small allocations before its own chunk was asked for, and every
    /// repeated parse grew the heap (light_densenet121: 20 parses in a process added 212 KiB
    /// to the heap; as a mapping, 0). Smaller chunks (inputs under ~26 KB) come from the heap.
    fn shared_chunk(len: usize, align: usize) -> Option<Self> {
        if len == CHUNK_BYTES
            && align <= 4096
            && let Ok(mut map) = ReusableMap::resident(len)
        {
            let ptr = map.as_mut_ptr();
            return Some(Self {
                ptr,
                storage: Storage::Map(map),
            });
        }
        Self::new(len, align)
    }

    /// The first byte.
    pub(crate) fn base(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for AlignedRegion {
    fn drop(&mut self) {
        if let Storage::Heap(layout) = self.storage {
            // SAFETY: allocated in `new` with this very layout.
            unsafe { std::alloc::dealloc(self.ptr, layout) };
        }
    }
}

/// Copies payloads into aligned memory (one pool per reader).
pub(crate) struct PayloadPool {
    align: usize,
    chunk_bytes: usize,
    chunk: Option<(Arc<AlignedRegion>, Owner)>,
    used: usize,
}

impl PayloadPool {
    /// A pool placing payloads at multiples of `align` (a power of two), for an input of
    /// about `input_len` bytes (small inputs get small chunks).
    pub(crate) fn new(align: usize, input_len: usize) -> Self {
        let chunk_bytes = input_len
            .saturating_add(input_len / 4)
            .next_power_of_two()
            .clamp(MIN_CHUNK_BYTES, CHUNK_BYTES);
        Self {
            align: align.max(1),
            chunk_bytes,
            chunk: None,
            used: 0,
        }
    }

    /// A copy of `bytes` at an aligned address; `realigned` marks it as copied only because
    /// its source was misaligned (see [`ByteSpan::is_realigned`]). `None` when memory runs out.
    pub(crate) fn copy(&mut self, bytes: &[u8], realigned: bool) -> Option<ByteSpan> {
        let len = bytes.len();
        if len == 0 {
            return Some(ByteSpan::new());
        }
        let (ptr, owner, _) = self.place(len)?;
        // SAFETY: `ptr..ptr+len` lies in the region (see `place`), which nothing else accesses.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, len) };
        // SAFETY: `place`'s range, now written.
        Some(unsafe { Self::span(ptr, len, owner, realigned) })
    }

    /// `len` bytes at an aligned address, written by `write` (which must write all of them);
    /// `realigned` as for [`PayloadPool::copy`]. For large payloads (a region of their own),
    /// where the range is usually memory already initialized (a mapping); other ranges are
    /// zeroed before `write` sees them. `None` when memory runs out.
    pub(crate) fn fill(
        &mut self,
        len: usize,
        realigned: bool,
        write: impl FnOnce(&mut [u8]),
    ) -> Option<ByteSpan> {
        if len == 0 {
            return Some(ByteSpan::new());
        }
        let (ptr, owner, initialized) = self.place(len)?;
        if !initialized {
            // SAFETY: `ptr..ptr+len` lies in the region (see `place`).
            unsafe { std::ptr::write_bytes(ptr, 0, len) };
        }
        // SAFETY: the range lies in the region, is initialized (above), and nothing else
        // accesses it until the span is made below.
        write(unsafe { std::slice::from_raw_parts_mut(ptr, len) });
        // SAFETY: `place`'s range, now written.
        Some(unsafe { Self::span(ptr, len, owner, realigned) })
    }

    /// A fresh range of `len` (> 0) bytes at an aligned address, exclusive to the caller: its
    /// start, its owner, and whether its bytes are initialized (a mapping) or may not be.
    fn place(&mut self, len: usize) -> Option<(*mut u8, Owner, bool)> {
        let shared_max = SHARED_MAX_BYTES.min(self.chunk_bytes / 2);
        if len > shared_max || self.align > shared_max {
            let region = Arc::new(AlignedRegion::new(len, self.align)?);
            let initialized = matches!(region.storage, Storage::Map(_));
            return Some((region.base(), region as Owner, initialized));
        }
        // `used <= chunk_bytes` (0 before the first chunk) and `len, align <= shared_max`: no
        // overflow.
        let mut start = self.used.next_multiple_of(self.align);
        if self.chunk.is_none() || start + len > self.chunk_bytes {
            let region = Arc::new(AlignedRegion::shared_chunk(self.chunk_bytes, self.align)?);
            let owner: Owner = region.clone();
            self.chunk = Some((region, owner));
            start = 0;
        }
        self.used = start + len;
        let (region, owner) = self.chunk.as_ref().expect("a chunk was just made");
        // SAFETY: `start + len <= chunk_bytes`, inside the chunk.
        Some((unsafe { region.base().add(start) }, owner.clone(), false))
    }

    /// The span of a range made by [`PayloadPool::place`] and written since.
    ///
    /// # Safety
    /// `ptr..ptr+len` is such a range, kept alive by `owner`, handed out once.
    unsafe fn span(ptr: *mut u8, len: usize, owner: Owner, realigned: bool) -> ByteSpan {
        // SAFETY: the caller's contract: the range lies in memory kept alive by `owner`, is
        // writable, and the pool never gives out an overlapping range.
        unsafe {
            if realigned {
                ByteSpan::from_realigned_range(ptr, len, owner)
            } else {
                ByteSpan::from_arena_range(ptr, len, owner)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_copy_is_aligned_and_equal() {
        for align in [1usize, 16, 64, 4096] {
            let mut pool = PayloadPool::new(align, 1 << 20);
            let mut spans = Vec::new();
            for n in [1usize, 3, 63, 64, 65, 1000, 20_000, 70_000, 3 << 20] {
                let src: Vec<u8> = (0..n).map(|i| (i * 7 + n) as u8).collect();
                let s = pool.copy(&src, n % 2 == 0).unwrap();
                assert_eq!(s.as_slice(), &src[..]);
                assert_eq!(s.as_ptr() as usize % align, 0, "{n} bytes at {align}");
                assert_eq!(s.is_realigned(), n % 2 == 0);
                spans.push((s, src));
            }
            // Ranges never overlap: all still hold their bytes.
            for (s, src) in &spans {
                assert_eq!(s.as_slice(), &src[..]);
            }
        }
    }
}
