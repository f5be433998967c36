//! [`ChunkRegion`]: where a parse puts the chunks of the repeated message fields it fills.
//!
//! A parsed model's metadata is mostly `RepeatedField` chunks (the nodes, their attributes, the
//! `value_info`s, the dimensions of each shape): hundreds of thousands of small allocations that
//! a fresh process pays for page by page, each first touch of a 4 KiB page a fault. A parse
//! (each `wire::Reader`, so each part of a parallel parse) instead cuts its chunks
//! one after the other out of a few large blocks of anonymous memory (256 KiB, doubling up to
//! 4 MiB): mappings of `recycle.rs`, kept resident for the next parse when freed, within the
//! memory-reuse limit. A parse in a fresh process still faults each page in once; later parses
//! write into the kept blocks without faults, and every parse saves the allocator's
//! per-allocation work.
//!
//! The longer strings of a parse in copy mode (more than the 22 bytes a `ProtoString` holds
//! inline) are copied into the same blocks, each holding a share of its block as a chunk does,
//! instead of one allocation each; an equal string copied shortly before in the same block, or
//! a string that starts the last one copied, shares that copy. So are the sub-message boxes of
//! a parse and the elements of its lists past their inline slots (`origin.rs`).
//!
//! The rule, for any mutation: a chunk keeps its address until its field drops it; a block is
//! given back when the last chunk cut from it is freed. Memory a mutation frees inside a block
//! is not handed out again before that, so a model's blocks never hold more than the chunks
//! its parse made; parts of a model kept after the model is dropped keep their blocks (at most
//! the parse's own metadata memory). Chunks made after the parse (by mutation) come from the
//! global allocator.

use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::ptr::{self, NonNull};
use std::sync::atomic::AtomicUsize;

use super::recycle::ReusableMap;
use crate::bytes::{BlockBytes, SharedBlock};

/// The smallest and the largest block.
const MIN_BLOCK_BYTES: usize = 256 << 10;
const MAX_BLOCK_BYTES: usize = 4 << 20;
/// Larger chunks come from the global allocator: a block saves them nothing (one allocation
/// among thousands of bytes), and the heap often has their memory already, where a block's
/// pages would be touched for the first time (the C++ parse of a 0.6 MB model whose weights
/// are `float_data` lists, after larger models: 110 page faults -> 30, measured).
const LARGE_CHUNK_BYTES: usize = 8 << 10;
/// The live count of a block being cut from: far above any number of chunks, so that frees of
/// its chunks never bring it to zero before the region lets go of it.
const CUTTING: usize = usize::MAX / 2;

/// Test hook: when set, regions map no blocks (every chunk comes from the global allocator), so
/// that the allocation-failure tests can refuse each chunk allocation in turn.
#[cfg(feature = "test-hooks")]
pub static REGIONS_OFF: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The start of every block.
#[repr(C)]
pub(crate) struct BlockHeader {
    /// Chunks and strings of the block not yet freed (plus [`CUTTING`] while a region cuts
    /// from it); frees the block (see [`free_block`]) when it reaches zero.
    shared: SharedBlock,
    /// The mapping of the block itself, given back when the count reaches zero.
    map: ManuallyDrop<ReusableMap>,
}

/// Whether parses cut from blocks at all: not when the environment variable
/// `ONNXL_METADATA_BLOCKS` is `0` (read once), for memory checkers (AddressSanitizer, Valgrind)
/// and heap profilers, which then see every chunk, box, list and string as an allocation of its
/// own; nor while the test hook [`REGIONS_OFF`] is set.
fn blocks_enabled() -> bool {
    #[cfg(feature = "test-hooks")]
    if REGIONS_OFF.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var_os("ONNXL_METADATA_BLOCKS").is_none_or(|v| v != "0"))
}

/// Slots of the table of strings recently copied into the block in use (a power of two).
const RECENT_SLOTS: usize = 256;

/// A string copied into the block in use: where its bytes are (null: an empty slot).
#[derive(Clone, Copy)]
struct RecentString {
    ptr: *const u8,
    /// The length (0 for an empty slot) and the hash of the bytes, in one word.
    len_and_hash: u64,
}

const NO_STRING: RecentString = RecentString {
    ptr: ptr::null(),
    len_and_hash: 0,
};

/// Whether `a` and `b` (of equal length, at least 8 bytes) hold the same bytes: words compared
/// in line (the strings compared here are names of 23 to ~100 bytes, where a call to `memcmp`
/// costs more than the comparison).
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    debug_assert!(a.len() == b.len() && a.len() >= 8);
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap());
    // The end first: names that differ share their start (`/model/layers.`) more often.
    let last = a.len() - 8;
    if word(a, last) != word(b, last) {
        return false;
    }
    let mut at = 0;
    while at < last {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    true
}

/// The chunk-cutting state of one reader: the block in use and the free part of it. Not
/// shared between threads (each parallel part has its own).
pub(crate) struct ChunkRegion {
    block: Cell<*mut BlockHeader>,
    /// Next free byte and end of the block in use (both null before the first block).
    next: Cell<*mut u8>,
    end: Cell<*mut u8>,
    /// Chunks cut from the block in use.
    cut: Cell<usize>,
    /// Size of the next block.
    next_block_bytes: Cell<usize>,
    /// Strings copied into the block in use, by a hash of their bytes (allocated with the first
    /// copy, emptied with each new block): an equal string read soon after (a node's output,
    /// then the next node's input) shares the copy instead of making another.
    recent: Cell<Option<NonNull<[RecentString; RECENT_SLOTS]>>>,
    /// The bytes and length of the last string copied into the block in use (null: none): a
    /// string that starts it (a node's name after its output `{name}_output_0`) shares them.
    last_copy: Cell<(*const u8, usize)>,
}

// SAFETY: the region is used by one thread at a time (a `Reader` moves between threads, never
// shared); the block it cuts from is released through its atomic count.
unsafe impl Send for ChunkRegion {}

impl ChunkRegion {
    /// A region without blocks yet (the first is mapped when a chunk is needed; each next
    /// block is twice as large, up to 4 MiB).
    pub(crate) fn new() -> Self {
        Self {
            block: Cell::new(ptr::null_mut()),
            next: Cell::new(ptr::null_mut()),
            end: Cell::new(ptr::null_mut()),
            cut: Cell::new(0),
            next_block_bytes: Cell::new(MIN_BLOCK_BYTES),
            recent: Cell::new(None),
            last_copy: Cell::new((ptr::null(), 0)),
        }
    }

    /// Memory for a chunk of `size` bytes aligned to `align` (at most 4096), and its block;
    /// `None` when the chunk is too large for a region or no block can be mapped (the caller
    /// then uses the global allocator).
    #[inline]
    pub(crate) fn alloc(
        &self,
        size: usize,
        align: usize,
    ) -> Option<(NonNull<u8>, NonNull<BlockHeader>)> {
        // A large chunk comes from the global allocator (`LARGE_CHUNK_BYTES`; and the end of a
        // block left unused when a chunk does not fit is at most a quarter of it).
        if size > (self.next_block_bytes.get() / 4).min(LARGE_CHUNK_BYTES) {
            return None;
        }
        let next = self.next.get();
        let pad = next.align_offset(align);
        let fits = !next.is_null() && (self.end.get() as usize - next as usize) >= pad + size;
        if !fits {
            self.new_block()?;
            return self.alloc(size, align);
        }
        // SAFETY: `next + pad + size` is within the block in use (checked above).
        let p = unsafe { next.add(pad) };
        self.next.set(unsafe { p.add(size) });
        self.cut.set(self.cut.get() + 1);
        // SAFETY: both are non-null (a block is in use).
        unsafe {
            Some((
                NonNull::new_unchecked(p),
                NonNull::new_unchecked(self.block.get()),
            ))
        }
    }

    /// A copy of `bytes` (a string value longer than the inline capacity of 22 bytes) cut from the region, holding
    /// one share of its block; the copy of an equal string made shortly before in the same
    /// block, or the start of the last string copied, when there is one. `None` when the region
    /// cannot hold it (the caller then allocates the copy).
    #[inline]
    pub(crate) fn copy_bytes(&self, bytes: &[u8]) -> Option<BlockBytes> {
        let len = bytes.len();
        debug_assert!(len > 22);
        let (last, last_len) = self.last_copy.get();
        // SAFETY: a non-null last copy lies in the block in use (emptied with each new block),
        // which this region's `CUTTING` share keeps alive, and nothing writes it again.
        if len < last_len && same_bytes(unsafe { std::slice::from_raw_parts(last, len) }, bytes) {
            // SAFETY: as above.
            return Some(unsafe { self.share(last, len) });
        }
        let recent = match self.recent.get() {
            Some(table) => table,
            None => self.new_recent_table()?,
        };
        // Names differ in their middle (a layer number) more than at their start or end: three
        // words of it are hashed (8..16, the last 8 bytes and the 8 before them, which overlap
        // for short names).
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        let hash =
            (word(8) ^ word(len - 8).rotate_left(21) ^ word(len - 16).rotate_left(42) ^ len as u64)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let slot = (hash >> (64 - RECENT_SLOTS.trailing_zeros())) as usize;
        // Strings of up to 4 GiB are looked up (longer ones never match: their key is not
        // stored).
        let key = (len as u64) << 32 | (hash & 0xFFFF_FFFF);
        // SAFETY: the table is this region's own allocation, used by one thread at a time.
        let entry = unsafe { &mut (*recent.as_ptr())[slot] };
        // SAFETY: a non-empty slot holds bytes copied into the block in use (the table is
        // emptied with each new block), which this region's `CUTTING` share keeps alive, and
        // which nothing writes again.
        if entry.len_and_hash == key
            && same_bytes(unsafe { std::slice::from_raw_parts(entry.ptr, len) }, bytes)
        {
            // SAFETY: the bytes lie in the block in use (above).
            return Some(unsafe { self.share(entry.ptr, len) });
        }
        let (p, block) = self.alloc(len, 1)?;
        // SAFETY: `p` is `len` fresh bytes of the block (cut above, not overlapping `bytes`,
        // which is the parse input); the cut's share goes to the value, which frees it once
        // when dropped, and nothing writes the bytes again.
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr(), p.as_ptr(), len);
            self.last_copy.set((p.as_ptr(), len));
            // `alloc` may have emptied the table (a new block): the slot is written after it.
            if len <= u32::MAX as usize {
                (*recent.as_ptr())[slot] = RecentString {
                    ptr: p.as_ptr(),
                    len_and_hash: key,
                };
            }
            Some(BlockBytes::new(p, len, block.cast()))
        }
    }

    /// Another share of the `len` bytes at `ptr`, a copy in the block in use.
    ///
    /// # Safety
    /// The bytes lie in the block in use and are never written again.
    #[inline]
    unsafe fn share(&self, ptr: *const u8, len: usize) -> BlockBytes {
        self.cut.set(self.cut.get() + 1);
        // SAFETY: the caller's contract; the value gets the share counted above.
        unsafe {
            BlockBytes::new(
                NonNull::new_unchecked(ptr.cast_mut()),
                len,
                NonNull::new_unchecked(self.block.get()).cast(),
            )
        }
    }

    /// Allocates the table of recent strings (`None` when it cannot be allocated: the caller
    /// then allocates the copy on its own).
    #[cold]
    #[inline(never)]
    fn new_recent_table(&self) -> Option<NonNull<[RecentString; RECENT_SLOTS]>> {
        let layout = std::alloc::Layout::new::<[RecentString; RECENT_SLOTS]>();
        // SAFETY: the layout is not zero-sized; all-zero bytes are empty slots.
        let table = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })?.cast();
        self.recent.set(Some(table));
        Some(table)
    }

    /// Lets go of the block in use and maps the next one.
    #[cold]
    #[inline(never)]
    fn new_block(&self) -> Option<()> {
        if !blocks_enabled() {
            return None;
        }
        let bytes = self.next_block_bytes.get();
        let mut map = ReusableMap::resident(bytes).ok()?;
        self.retire();
        let base = map.as_mut_ptr();
        let header = base.cast::<BlockHeader>();
        // SAFETY: a fresh (or taken back) mapping of `bytes` ≥ `MIN_BLOCK_BYTES`, page-aligned:
        // room for the header, written before anything reads it. The mapping moves into its own
        // first bytes (it does not move when the `ReusableMap` value does).
        unsafe {
            header.write(BlockHeader {
                shared: SharedBlock {
                    live: AtomicUsize::new(CUTTING),
                    free: free_block,
                },
                map: ManuallyDrop::new(map),
            });
            self.next.set(base.add(size_of::<BlockHeader>()));
            self.end.set(base.add(bytes));
        }
        self.block.set(header);
        self.cut.set(0);
        if let Some(table) = self.recent.get() {
            // SAFETY: the region's own table; its strings were in the block let go of above.
            unsafe { (*table.as_ptr()).fill(NO_STRING) };
        }
        self.last_copy.set((ptr::null(), 0));
        self.next_block_bytes.set((bytes * 2).min(MAX_BLOCK_BYTES));
        Some(())
    }

    /// Lets go of the block in use, if any (freeing it when all its chunks are freed already).
    fn retire(&self) {
        let block = self.block.replace(ptr::null_mut());
        let next = self.next.replace(ptr::null_mut());
        self.end.set(ptr::null_mut());
        if let Some(block) = NonNull::new(block) {
            // SAFETY: the block is live: this region still holds its `CUTTING` share. Only the
            // last holder of a share reads the mapping, after this region's release; the bytes
            // before `next` were written (the recycle store reuses the most written first).
            unsafe {
                let written = next as usize - block.as_ptr() as usize;
                (*block.as_ptr()).map.note_written(written);
                release(block, CUTTING - self.cut.get());
            }
        }
    }
}

impl Drop for ChunkRegion {
    fn drop(&mut self) {
        self.retire();
        if let Some(table) = self.recent.take() {
            // SAFETY: allocated by `new_recent_table` with this layout, freed once.
            unsafe {
                std::alloc::dealloc(
                    table.as_ptr().cast(),
                    std::alloc::Layout::new::<[RecentString; RECENT_SLOTS]>(),
                )
            };
        }
    }
}

/// Frees a chunk cut from `block`.
///
/// # Safety
/// `block` is the block a [`ChunkRegion::alloc`] returned with the chunk, which is not used
/// any more and freed once.
#[inline]
pub(crate) unsafe fn free_chunk(block: NonNull<BlockHeader>) {
    // SAFETY: the caller's contract; the chunk's share keeps the block live until here.
    unsafe { release(block, 1) }
}

/// Takes `shares` off the live count of `block`, and gives the block back when none is left.
///
/// # Safety
/// `block` is live and the caller holds `shares` of its count, not used again.
unsafe fn release(block: NonNull<BlockHeader>, shares: usize) {
    // SAFETY: the caller's contract; the count is the header's first field (`repr(C)`).
    unsafe { SharedBlock::release(block.cast(), shares) }
}

/// Gives back the mapping of a block whose count reached zero.
///
/// # Safety
/// `block` is the `shared` field (the start) of a [`BlockHeader`] whose count is zero: nothing
/// uses the block any more.
unsafe fn free_block(block: NonNull<SharedBlock>) {
    let header = block.cast::<BlockHeader>();
    // SAFETY: the caller's contract; the mapping is read out of the block once, then dropped
    // (it unmaps or keeps the memory the header itself lives in, read no more after this).
    unsafe {
        let mut map = ptr::read(&(*header.as_ptr()).map);
        ManuallyDrop::drop(&mut map);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_share_a_copy_within_a_block() {
        let region = ChunkRegion::new();
        let a = b"/model/layers.0/self_attn/q_proj/MatMul_output_0";
        let b = b"/model/layers.1/self_attn/q_proj/MatMul_output_0";
        let first = region.copy_bytes(a).unwrap();
        let other = region.copy_bytes(b).unwrap();
        let again = region.copy_bytes(a).unwrap();
        assert_eq!(first.as_bytes(), a);
        assert_eq!(other.as_bytes(), b);
        assert_eq!(again.as_bytes(), a);
        assert_eq!(first.as_bytes().as_ptr(), again.as_bytes().as_ptr());
        assert_ne!(first.as_bytes().as_ptr(), other.as_bytes().as_ptr());
        // A copy whose value was dropped still lends its bytes (the block holds them until the
        // region lets go of it), and the shares keep the block alive past the region.
        drop((first, again));
        let third = region.copy_bytes(a).unwrap();
        assert_eq!(third.as_bytes(), a);
        drop(region);
        assert_eq!(third.as_bytes(), a);
        assert_eq!(other.as_bytes(), b);
    }

    #[test]
    fn a_string_that_starts_the_last_copy_shares_it() {
        let region = ChunkRegion::new();
        let output = b"/model/layers.0/self_attn/q_proj/MatMul_output_0";
        let name = &output[..39];
        let out = region.copy_bytes(output).unwrap();
        let n = region.copy_bytes(name).unwrap();
        assert_eq!(n.as_bytes(), name);
        assert_eq!(n.as_bytes().as_ptr(), out.as_bytes().as_ptr());
        // Not a start of it: a copy of its own.
        let other = region.copy_bytes(&output[1..40]).unwrap();
        assert_eq!(other.as_bytes(), &output[1..40]);
        assert_ne!(other.as_bytes().as_ptr(), out.as_bytes().as_ptr());
        drop((out, region));
        assert_eq!(n.as_bytes(), name);
    }

    #[test]
    fn strings_are_not_shared_across_blocks() {
        let region = ChunkRegion::new();
        let name = [b'n'; 40];
        let first = region.copy_bytes(&name).unwrap();
        let block = region.block.get();
        // Fill the first block with chunks until a new one is mapped.
        let mut chunks = Vec::new();
        while region.block.get() == block {
            chunks.push(region.alloc(4096, 8).unwrap().1);
        }
        let second = region.copy_bytes(&name).unwrap();
        assert_eq!(second.as_bytes(), &name[..]);
        assert_ne!(first.as_bytes().as_ptr(), second.as_bytes().as_ptr());
        for block in chunks {
            // SAFETY: each chunk was cut above and is freed once.
            unsafe { free_chunk(block) };
        }
    }
}
