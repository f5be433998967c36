//! Memory with an **origin word**: the 8 bytes (or the alignment, when larger) right before an
//! object or array that say where its memory came from — `0` for the global allocator, otherwise
//! the address of the region block (`region.rs`) it holds one share of.
//!
//! A parse cuts boxed sub-messages (`wire::MsgBox`) and the spilled elements of short
//! lists (`wire::InlineVec`) from its metadata blocks; mutation, clones and the C++
//! classes' `new` take heap memory. Freeing reads the word: heap memory goes back to the
//! allocator, a block's share to its block (freed with its last share), so the owner of the
//! memory needs no other record of where it lives, and either kind can replace the other.

use std::alloc::Layout;
use std::ptr::{self, NonNull};

use super::region::ChunkRegion;
use crate::bytes::SharedBlock;

/// How far before an object its origin word starts (the C++ header's layout table records it:
/// `origin_word_before`).
pub(crate) const ORIGIN_WORD_BEFORE: usize = size_of::<usize>();

/// The room before an object of alignment `align` for its origin word (the word is its last
/// bytes), which is also the alignment of the allocation.
#[inline(always)]
const fn header(align: usize) -> usize {
    if align > ORIGIN_WORD_BEFORE {
        align
    } else {
        ORIGIN_WORD_BEFORE
    }
}

/// The origin word of the object at `p`.
///
/// # Safety
/// `p` was made by [`alloc_raw`] or [`alloc_raw_in`] (being made or live).
#[inline(always)]
unsafe fn origin_word(p: *mut u8) -> *mut usize {
    // SAFETY: the caller's contract: the word lies right before the object, aligned.
    unsafe { p.sub(ORIGIN_WORD_BEFORE).cast::<usize>() }
}

/// The heap allocation of an object of `size` bytes aligned to `align`, origin word included.
#[inline]
pub(crate) fn heap_layout(size: usize, align: usize) -> Option<Layout> {
    let h = header(align);
    Layout::from_size_align(size.checked_add(h)?, h).ok()
}

/// Memory for an object of `size` bytes aligned to `align` from the global allocator, its origin
/// word written (`0`); null when the allocator refuses or the layout is impossible. Freed by
/// [`free_raw`].
pub(crate) fn alloc_raw(size: usize, align: usize) -> *mut u8 {
    let Some(layout) = heap_layout(size, align) else {
        return ptr::null_mut();
    };
    // SAFETY: the layout has a non-zero size (the header).
    let base = unsafe { std::alloc::alloc(layout) };
    if base.is_null() {
        return base;
    }
    // SAFETY: `base + header` is within the allocation, its origin word the bytes before it.
    unsafe {
        let p = base.add(header(align));
        origin_word(p).write(0);
        p
    }
}

/// As [`alloc_raw`], but cut from `region`'s block in use (holding one share of it) when the
/// region has room; from the global allocator otherwise.
#[inline]
pub(crate) fn alloc_raw_in(size: usize, align: usize, region: &ChunkRegion) -> *mut u8 {
    let h = header(align);
    let Some(total) = size.checked_add(h) else {
        return ptr::null_mut();
    };
    match region.alloc(total, h) {
        // SAFETY: `total` fresh bytes of the block aligned to `h`, one share of it counted for
        // this object: its origin word is right before `p + h`.
        Some((p, block)) => unsafe {
            let p = p.as_ptr().add(h);
            origin_word(p).write(block.as_ptr() as usize);
            p
        },
        None => alloc_raw(size, align),
    }
}

/// Frees the memory of an object made by [`alloc_raw`] or [`alloc_raw_in`] (a heap allocation or
/// a block's share, as its origin word says); its value is dropped already.
///
/// # Safety
/// `p` is such an object's address, of `size` bytes aligned to `align`, not used again.
pub(crate) unsafe fn free_raw(p: *mut u8, size: usize, align: usize) {
    // SAFETY: the caller's contract: the origin word precedes the object.
    let origin = unsafe { origin_word(p).read() };
    match NonNull::new(origin as *mut SharedBlock) {
        // SAFETY: the object held one share of this block, given back once.
        Some(block) => unsafe { SharedBlock::release(block, 1) },
        None => {
            let layout = heap_layout(size, align).expect("the layout it was allocated with");
            // SAFETY: allocated by `alloc_raw` with this layout, at `p - header`.
            unsafe { std::alloc::dealloc(p.sub(header(align)), layout) }
        }
    }
}

/// Moves the object at `p` (of `old_size` bytes, the first `live` of them in use) to heap memory
/// of `new_size` bytes: `realloc` for heap memory, a copy for a block's share (given back); null
/// (and `p` untouched) when the allocator refuses or the layout is impossible.
///
/// # Safety
/// As [`free_raw`] for `p` and `old_size`; `live <= min(old_size, new_size)`.
pub(crate) unsafe fn realloc_raw(
    p: *mut u8,
    old_size: usize,
    new_size: usize,
    live: usize,
    align: usize,
) -> *mut u8 {
    let Some(new_layout) = heap_layout(new_size, align) else {
        return ptr::null_mut();
    };
    // SAFETY: the caller's contract: `p` is live memory with an origin word.
    if unsafe { in_block(p) } {
        let q = alloc_raw(new_size, align);
        if !q.is_null() {
            // SAFETY: `live` bytes of both objects; the old one is not used again.
            unsafe {
                ptr::copy_nonoverlapping(p, q, live);
                free_raw(p, old_size, align);
            }
        }
        return q;
    }
    let h = header(align);
    let old_layout = heap_layout(old_size, align).expect("the layout it was allocated with");
    // SAFETY: heap memory allocated with `old_layout` at `p - h`; the new size is non-zero and
    // fits a layout of this alignment (checked above). The origin word (0) moves with the bytes.
    unsafe {
        let base = std::alloc::realloc(p.sub(h), old_layout, new_layout.size());
        if base.is_null() { base } else { base.add(h) }
    }
}

/// Whether the object at `p` was cut from a region block (not from the global allocator).
///
/// # Safety
/// `p` is a live object made by [`alloc_raw`] or [`alloc_raw_in`].
#[inline]
pub(crate) unsafe fn in_block(p: *mut u8) -> bool {
    // SAFETY: the caller's contract.
    unsafe { origin_word(p).read() != 0 }
}
