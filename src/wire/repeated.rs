//! [`RepeatedField`]: the container of repeated message fields.
//!
//! Elements live in slots of a few chunks (sizes doubling, up to [`MAX_CHUNK_BYTES`] of slots),
//! and an ordered array of pointers — kept in the newest chunk, so a chunk is one allocation —
//! gives their order. An element therefore never moves while it is in the field — as with
//! protobuf C++'s `RepeatedPtrField`, a reference or a C pointer to it stays valid when other
//! elements are added, removed or reordered — yet a field of `n` elements costs about `log n`
//! allocations instead of one per element (one for a field of one element). The first chunk a
//! parse makes for a short field has a one-word header (see [`CompactHeader`]).

use super::{Message, prefetch};
use std::alloc::{self, Layout};
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};
use std::ptr::{self, NonNull};

use crate::mem::{BlockHeader, ChunkRegion, free_chunk};

/// Largest chunk, in bytes of element slots (a chunk holds at least one element).
const MAX_CHUNK_BYTES: usize = 64 * 1024;
/// Order arrays of at least this many pointers (32 KiB) grow eightfold, smaller ones double.
const LARGE_ORDER_ARRAY: usize = 4096;

/// Header at the start of every chunk but a compact one (see [`CompactHeader`]); the chunks of a
/// field form a list, newest first. A chunk is the header, then an order array of `order_cap`
/// pointers (often none: a new order array, twice as large, is made only when the one in use is
/// full), then `cap` element slots. The counts are `u32` (a field holds fewer than 2^32
/// elements) so that the header is 56 bytes. Its first word (`next`) and its last (`block`) are
/// addresses with bit 0 clear: that bit tells it from a compact header, from either end.
#[repr(C)]
struct ChunkHeader {
    /// The previous (older, full) chunk.
    next: Option<NonNull<ChunkHeader>>,
    /// Head of the list of freed slots (kept in the newest chunk's header only); each free slot
    /// holds the address of the next one in its first bytes.
    free: *mut u8,
    /// The field's newest chunk, kept in the header of the chunk whose order array is in use
    /// (the field reaches that header from its order pointer, so it stores no chunk pointer of
    /// its own); meaningless in the other chunks.
    newest: Option<NonNull<ChunkHeader>>,
    /// Number of slots in this chunk.
    cap: u32,
    /// Slots handed out so far (the rest are unused).
    used: u32,
    /// Size of the order array stored in this chunk (0 when it has none). The order array in
    /// use holds at least `total` pointers, so any number of elements the field can hold fits.
    order_cap: u32,
    /// Slots of this chunk and all older ones (newest chunk: the field's capacity).
    total: u32,
    /// Spare elements (newest chunk only): cleared elements kept for reuse just past the live
    /// ones in the order array, `order[len..len + spare]` (see
    /// [`RepeatedField::recycle_elements`]).
    spare: u32,
    /// The region block the chunk was cut from (see `mem/region.rs`), or `None`: the global
    /// allocator's. Last, right before the order array (see the type's documentation).
    block: Option<NonNull<BlockHeader>>,
}

const _: () = assert!(
    std::mem::offset_of!(ChunkHeader, next) == 0
        && std::mem::offset_of!(ChunkHeader, block) + size_of::<usize>()
            == size_of::<ChunkHeader>()
);

/// The one-word header of a compact chunk: the first chunk a parse makes for a field of at most
/// [`CompactHeader::MAX_CAP`] elements (a node's attribute list, a shape's dimensions), cut from
/// the parse's region. Most lists of a parsed model are that chunk and nothing else, and the
/// 48 bytes it saves over a [`ChunkHeader`] are a fifth of a one-attribute list.
///
/// The word is the address of the chunk's region block (page-aligned) with its low bits holding
/// a tag (bit 0, set), the slot count, the slots handed out and the spare elements. A compact
/// chunk has no free list: a slot freed in it stays unused until the field is dropped (at most
/// `MAX_CAP` per field, within the parse's own memory); it is only ever the oldest chunk of its
/// field, and the only one holding its order array until the field grows past it.
#[repr(transparent)]
struct CompactHeader {
    word: usize,
}

impl CompactHeader {
    const TAG: usize = 1;
    /// Width of each count, and the largest compact chunk.
    const COUNT_BITS: u32 = 3;
    const MAX_CAP: usize = (1 << Self::COUNT_BITS) - 1;
    const CAP_SHIFT: u32 = 1;
    const USED_SHIFT: u32 = Self::CAP_SHIFT + Self::COUNT_BITS;
    const SPARE_SHIFT: u32 = Self::USED_SHIFT + Self::COUNT_BITS;
    /// The bits below the block address (a block is at least this aligned).
    const LOW_BITS: usize = (1 << (Self::SPARE_SHIFT + Self::COUNT_BITS)) - 1;

    /// The header of a chunk of `cap` slots (one handed out) cut from `block`, or `None` when
    /// `cap` is too large or the block not aligned enough for its address to share the word.
    fn new(block: NonNull<BlockHeader>, cap: usize) -> Option<Self> {
        let addr = block.as_ptr() as usize;
        (cap <= Self::MAX_CAP && addr & Self::LOW_BITS == 0).then_some(Self {
            word: addr | Self::TAG | cap << Self::CAP_SHIFT | 1 << Self::USED_SHIFT,
        })
    }
    #[inline(always)]
    fn count(&self, shift: u32) -> usize {
        (self.word >> shift) & Self::MAX_CAP
    }
    #[inline(always)]
    fn set_count(&mut self, shift: u32, n: usize) {
        debug_assert!(n <= Self::MAX_CAP);
        self.word = (self.word & !(Self::MAX_CAP << shift)) | n << shift;
    }
    #[inline(always)]
    fn cap(&self) -> usize {
        self.count(Self::CAP_SHIFT)
    }
    #[inline(always)]
    fn used(&self) -> usize {
        self.count(Self::USED_SHIFT)
    }
    #[inline(always)]
    fn spare(&self) -> usize {
        self.count(Self::SPARE_SHIFT)
    }
    fn block(&self) -> NonNull<BlockHeader> {
        // SAFETY: the word holds a block address (non-null) in its high bits.
        unsafe { NonNull::new_unchecked((self.word & !Self::LOW_BITS) as *mut BlockHeader) }
    }
}

/// A chunk of either kind, by its header.
#[derive(Clone, Copy)]
enum Chunk {
    Full(NonNull<ChunkHeader>),
    Compact(NonNull<CompactHeader>),
}

impl Chunk {
    /// The chunk whose header starts at `h` (a link of the chunk list).
    ///
    /// # Safety
    /// `h` is the header of a live chunk.
    #[inline(always)]
    unsafe fn at(h: NonNull<ChunkHeader>) -> Self {
        // SAFETY: both headers start with a word (see `ChunkHeader`).
        if unsafe { h.cast::<usize>().read() } & CompactHeader::TAG != 0 {
            Self::Compact(h.cast())
        } else {
            Self::Full(h)
        }
    }

    /// The chunk holding the order array `order`.
    ///
    /// # Safety
    /// `order` is the order array of a live chunk.
    #[inline(always)]
    unsafe fn of_order(order: NonNull<u8>) -> Self {
        // SAFETY: both headers end with a word right before the order array.
        unsafe {
            let last = order.cast::<usize>().sub(1);
            if last.read() & CompactHeader::TAG != 0 {
                Self::Compact(last.cast())
            } else {
                Self::Full(order.sub(size_of::<ChunkHeader>()).cast())
            }
        }
    }

    /// The header as a link of the chunk list.
    fn link(self) -> NonNull<ChunkHeader> {
        match self {
            Self::Full(h) => h,
            Self::Compact(c) => c.cast(),
        }
    }

    /// Spare elements (meaningful in the newest chunk).
    ///
    /// # Safety
    /// The chunk is live.
    #[inline(always)]
    unsafe fn spare(self) -> usize {
        // SAFETY: the caller's contract.
        unsafe {
            match self {
                Self::Full(h) => (*h.as_ptr()).spare as usize,
                Self::Compact(c) => (*c.as_ptr()).spare(),
            }
        }
    }

    /// Sets the spare count (of the newest chunk).
    ///
    /// # Safety
    /// The chunk is live; `n` is at most its field's capacity.
    #[inline(always)]
    unsafe fn set_spare(self, n: usize) {
        // SAFETY: the caller's contract.
        unsafe {
            match self {
                Self::Full(h) => (*h.as_ptr()).spare = n as u32,
                Self::Compact(c) => (*c.as_ptr()).set_count(CompactHeader::SPARE_SHIFT, n),
            }
        }
    }

    /// Slots never handed out yet.
    ///
    /// # Safety
    /// The chunk is live.
    unsafe fn unused(self) -> usize {
        // SAFETY: the caller's contract.
        unsafe {
            match self {
                Self::Full(h) => ((*h.as_ptr()).cap - (*h.as_ptr()).used) as usize,
                Self::Compact(c) => (*c.as_ptr()).cap() - (*c.as_ptr()).used(),
            }
        }
    }

    /// A slot for an element of layout `elem`: a freed one, else the next unused one, else
    /// `None`.
    ///
    /// # Safety
    /// The chunk is live, the newest of a field with elements of layout `elem`.
    #[inline(always)]
    unsafe fn take_slot(self, elem: Layout) -> Option<NonNull<u8>> {
        // SAFETY: the caller's contract; a non-null `free` is an unoccupied slot holding the
        // next link (see `RepeatedField::release_slot`), and `used < cap` names an unused one.
        unsafe {
            match self {
                Self::Full(h) => {
                    let h = h.as_ptr();
                    if let Some(p) = NonNull::new((*h).free) {
                        (*h).free = p.cast::<*mut u8>().as_ptr().read_unaligned();
                        return Some(p);
                    }
                    if (*h).used == (*h).cap {
                        return None;
                    }
                    let (_, _, slots_at) =
                        chunk_layout_of(elem, (*h).order_cap as usize, (*h).cap as usize);
                    let p = h
                        .cast::<u8>()
                        .add(slots_at + elem.size() * (*h).used as usize);
                    (*h).used += 1;
                    Some(NonNull::new_unchecked(p))
                }
                Self::Compact(c) => {
                    let c = &mut *c.as_ptr();
                    let (cap, used) = (c.cap(), c.used());
                    if used == cap {
                        return None;
                    }
                    let (_, _, slots_at) = compact_layout_of(elem, cap);
                    c.set_count(CompactHeader::USED_SHIFT, used + 1);
                    let p = (c as *mut CompactHeader).cast::<u8>();
                    Some(NonNull::new_unchecked(p.add(slots_at + elem.size() * used)))
                }
            }
        }
    }
}

/// A count as stored in a chunk header.
fn count(n: usize) -> u32 {
    u32::try_from(n).expect("repeated field size overflows")
}

/// A repeated message field. Its API follows `Vec`.
///
/// An element keeps its address for as long as it stays in the field (protobuf C++'s rule: a
/// child lives until it is removed, its field cleared or its parent freed), which the C ABI
/// relies on. Freed slots are reused by later additions.
#[repr(C)]
pub struct RepeatedField<T> {
    /// `len` pointers to the elements, in order: the order array in use, right after the
    /// header of the chunk holding it (which names the newest chunk); dangling while there is
    /// no chunk.
    order: NonNull<NonNull<T>>,
    len: usize,
    _owns: PhantomData<T>,
}

// SAFETY: the field owns its elements exclusively (no slot is shared with anything else), so
// sending it sends the `T`s.
unsafe impl<T: Send> Send for RepeatedField<T> {}
// SAFETY: `&RepeatedField<T>` only gives out `&T`.
unsafe impl<T: Sync> Sync for RepeatedField<T> {}

/// Layout of a chunk with an order array of `order_cap` pointers and `cap` slots of layout
/// `elem`, and the offsets of the order array and of the first slot.
#[inline(always)]
fn chunk_layout_of(elem: Layout, order_cap: usize, cap: usize) -> (Layout, usize, usize) {
    let overflow = "repeated field chunk size overflows";
    let order = Layout::array::<NonNull<u8>>(order_cap).expect(overflow);
    // `Layout::array` for an element of layout `elem` (whose size is a multiple of its align).
    let slots = elem
        .size()
        .checked_mul(cap)
        .and_then(|n| Layout::from_size_align(n, elem.align()).ok())
        .expect(overflow);
    let (with_order, order_at) = Layout::new::<ChunkHeader>().extend(order).expect(overflow);
    let (layout, slots_at) = with_order.extend(slots).expect(overflow);
    (layout, order_at, slots_at)
}

/// Layout of a compact chunk (see [`CompactHeader`]) of `cap` slots of layout `elem` (and as
/// many order pointers), and the offsets of the order array and of the first slot.
#[inline(always)]
fn compact_layout_of(elem: Layout, cap: usize) -> (Layout, usize, usize) {
    let (layout, _, slots_at) = chunk_layout_of(elem, cap, cap);
    let shorter = size_of::<ChunkHeader>() - size_of::<CompactHeader>();
    // The same chunk without the 48 bytes a compact header saves: every part keeps its
    // alignment (the headers' sizes are multiples of a pointer's alignment, and the slots are
    // aligned again below when their alignment is larger).
    let slots_at = (slots_at - shorter).next_multiple_of(elem.align());
    let size = slots_at + elem.size() * cap;
    let layout = Layout::from_size_align(size, layout.align()).expect("a smaller layout");
    (layout, size_of::<CompactHeader>(), slots_at)
}

/// The growth of a field (the part of `try_take_slot` that makes a new chunk), with the element
/// type erased so that one body serves every `RepeatedField<T>`: a new chunk of at least
/// `min_cap` slots of layout `elem` (at most `most`; its order array takes over when the one in
/// use is too small); returns its first slot, or the layout the allocator refused.
///
/// # Safety
/// `order` and `len` are the fields of a `RepeatedField<T>` with `Layout::new::<T>() == elem`;
/// its newest chunk (if any) is full with no free slot, `old_total` is that chunk's `total` and
/// `live_order_cap` the `order_cap` of the chunk holding the order array in use (both 0 without
/// chunks).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn grow(
    order: &mut NonNull<NonNull<u8>>,
    len: usize,
    old_total: usize,
    live_order_cap: usize,
    elem: Layout,
    most: usize,
    min_cap: usize,
    region: Option<&ChunkRegion>,
) -> Result<NonNull<u8>, Layout> {
    let has_chunk = *order != NonNull::dangling();
    // SAFETY: a non-dangling order array is that of a live chunk, which names the newest one
    // (a compact chunk is its own newest).
    let old_newest = has_chunk
        .then(|| unsafe {
            match Chunk::of_order(order.cast()) {
                Chunk::Full(h) => (*h.as_ptr()).newest,
                c @ Chunk::Compact(_) => Some(c.link()),
            }
        })
        .flatten();
    let cap = len.clamp(1, most).max(min_cap);
    if !has_chunk
        && cap <= CompactHeader::MAX_CAP
        && let Some(region) = region
    {
        let (layout, order_at, slots_at) = compact_layout_of(elem, cap);
        if let Some((p, block)) = region.alloc(layout.size(), layout.align()) {
            match CompactHeader::new(block, cap) {
                // SAFETY: fresh memory of the compact chunk's layout: header, order array (of
                // `cap` pointers, none in use yet: the field is empty) and slots.
                Some(header) => unsafe {
                    p.cast::<CompactHeader>().write(header);
                    *order = p.add(order_at).cast();
                    return Ok(p.add(slots_at));
                },
                // (Never: region blocks are page-aligned.) The cut goes unused.
                // SAFETY: the cut's block, whose share is freed once.
                None => unsafe { free_chunk(block) },
            }
        }
    }
    let total = old_total
        .checked_add(cap)
        .expect("repeated field size overflows");
    // A new order array (in this chunk) only when the one in use cannot hold `total`
    // pointers; it doubles, so all order arrays together stay within twice the last one. A
    // large one grows eightfold instead: the older arrays, left behind written in their
    // chunks, then add up to a seventh of the new one instead of as much as it, and the part of
    // the new one not yet written costs address space, not memory (its pages are touched as
    // elements are added).
    let growth = if live_order_cap >= LARGE_ORDER_ARRAY {
        8
    } else {
        2
    };
    let order_cap = if live_order_cap >= total {
        0
    } else {
        total.max(live_order_cap.saturating_mul(growth))
    };
    let (cap32, order_cap32, total32) = (count(cap), count(order_cap), count(total));
    let (layout, order_at, slots_at) = chunk_layout_of(elem, order_cap, cap);
    debug_assert_eq!(order_at, size_of::<ChunkHeader>(), "see `order_chunk`");
    let (raw, block) = match region.and_then(|r| r.alloc(layout.size(), layout.align())) {
        Some((p, block)) => (p.as_ptr(), Some(block)),
        // SAFETY: the layout has a non-zero size (it starts with the header).
        None => (unsafe { alloc::alloc(layout) }, None),
    };
    let Some(h) = NonNull::new(raw.cast::<ChunkHeader>()) else {
        return Err(layout);
    };
    // SAFETY: fresh memory of the chunk's layout: header, order array, slots. A new order
    // array receives the `len <= old_total < order_cap` pointers of the old one (older
    // chunks, and so the old array, stay allocated until the field is dropped).
    unsafe {
        h.as_ptr().write(ChunkHeader {
            next: old_newest,
            block,
            free: ptr::null_mut(),
            newest: Some(h),
            cap: cap32,
            used: 1,
            order_cap: order_cap32,
            total: total32,
            spare: 0,
        });
        if order_cap > 0 {
            let new_order = raw.add(order_at).cast::<NonNull<u8>>();
            ptr::copy_nonoverlapping(order.as_ptr(), new_order, len);
            *order = NonNull::new_unchecked(new_order);
        } else {
            // The order array in use stays where it is; its chunk names the new newest. (It is
            // not a compact chunk's: the field outgrows a compact order array with its chunk.)
            match Chunk::of_order(order.cast()) {
                Chunk::Full(o) => (*o.as_ptr()).newest = Some(h),
                Chunk::Compact(_) => unreachable!("a compact order array holds its chunk only"),
            }
        }
        Ok(NonNull::new_unchecked(raw.add(slots_at)))
    }
}

/// What the type-erased bodies of [`RawField`] need of an element type: one static table per
/// type, so that those bodies exist once instead of once per element type.
struct ElemInfo {
    /// The element's layout.
    layout: Layout,
    /// Slots of the largest chunk.
    most: usize,
    /// Drops the element at the address (`ptr::drop_in_place`).
    drop: unsafe fn(*mut u8),
}

impl ElemInfo {
    /// The table of `T`.
    #[inline(always)]
    fn of<T>() -> &'static Self {
        /// Drops the `T` at `p`.
        ///
        /// # Safety
        /// `p` is a live `T`, not used again.
        unsafe fn drop_elem<T>(p: *mut u8) {
            // SAFETY: the caller's contract.
            unsafe { ptr::drop_in_place(p.cast::<T>()) }
        }
        const {
            assert!(
                size_of::<T>() >= size_of::<*mut u8>(),
                "a free slot holds a pointer"
            );
            &Self {
                layout: Layout::new::<T>(),
                most: RepeatedField::<T>::max_chunk_slots(),
                drop: drop_elem::<T>,
            }
        }
    }
}

/// A [`RepeatedField`] with its element type erased: the same `repr(C)` fields (the order
/// pointer, the length), for the bodies that move element pointers and chunks but never an
/// element's value, written once for every element type (they take its [`ElemInfo`]).
#[repr(C)]
struct RawField {
    order: NonNull<NonNull<u8>>,
    len: usize,
}

impl RawField {
    /// The chunk holding the order array in use, if there is a chunk.
    #[inline(always)]
    fn order_chunk(&self) -> Option<Chunk> {
        if self.order == NonNull::dangling() {
            return None;
        }
        // SAFETY: a non-dangling order pointer is the order array of a live chunk.
        Some(unsafe { Chunk::of_order(self.order.cast()) })
    }
    /// The newest chunk, if any.
    #[inline(always)]
    fn chunks(&self) -> Option<Chunk> {
        match self.order_chunk()? {
            // SAFETY: the chunk holding the order array in use is live and names the newest
            // one, a full chunk (a compact one is only ever the oldest).
            Chunk::Full(h) => unsafe { (*h.as_ptr()).newest.map(Chunk::Full) },
            c @ Chunk::Compact(_) => Some(c),
        }
    }
    /// See [`RepeatedField::release_slot`].
    ///
    /// # Safety
    /// `p` must be an unoccupied slot of one of the field's chunks, not already on the free
    /// list.
    unsafe fn release_slot(&self, p: NonNull<u8>) {
        if let Some(Chunk::Full(head)) = self.chunks() {
            let head = head.as_ptr();
            // SAFETY: `head` is live; the slot is unoccupied and at least pointer-sized
            // (checked when the slot was handed out), so its first bytes may hold the link.
            unsafe {
                p.cast::<*mut u8>().as_ptr().write_unaligned((*head).free);
                (*head).free = p.as_ptr();
            }
        }
    }
    /// The element pointers, in order, for reordering.
    #[inline]
    fn order_mut(&mut self) -> &mut [NonNull<u8>] {
        // SAFETY: `order` holds `len` initialized pointers (or is dangling with `len == 0`),
        // borrowed exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.order.as_ptr(), self.len) }
    }
    /// Number of spare elements (see [`RepeatedField::recycle_elements`]).
    #[inline]
    fn spare(&self) -> usize {
        // SAFETY: the newest chunk is live.
        self.chunks().map_or(0, |h| unsafe { h.spare() })
    }
    /// See [`RepeatedField::drop_spares`].
    fn drop_spares(&mut self, e: &ElemInfo) {
        let Some(h) = self.chunks() else { return };
        // SAFETY: `h` is the live newest chunk; `order[len..len + spare]` are live spare
        // elements owned by the field (dropped once: the count is reset first).
        unsafe {
            let n = h.spare();
            if n == 0 {
                return;
            }
            h.set_spare(0);
            for i in self.len..self.len + n {
                let p = self.order.as_ptr().add(i).read();
                (e.drop)(p.as_ptr());
                self.release_slot(p);
            }
        }
    }
    /// See [`RepeatedField::take_slot`].
    fn take_slot(&mut self, min_cap: usize, e: &ElemInfo) -> NonNull<u8> {
        match self.try_take_slot(min_cap, None, e) {
            Ok(p) => p,
            Err(layout) => alloc::handle_alloc_error(layout),
        }
    }
    /// See [`RepeatedField::try_take_slot`].
    fn try_take_slot(
        &mut self,
        min_cap: usize,
        region: Option<&ChunkRegion>,
        e: &ElemInfo,
    ) -> Result<NonNull<u8>, Layout> {
        self.drop_spares(e);
        let (mut old_total, mut live_order_cap) = (0, 0);
        if let Some(newest) = self.chunks() {
            // SAFETY: the newest chunk and the one holding the order array in use are live.
            unsafe {
                if let Some(p) = newest.take_slot(e.layout) {
                    return Ok(p);
                }
                (old_total, live_order_cap) = match (newest, self.order_chunk().unwrap_unchecked())
                {
                    (Chunk::Full(h), Chunk::Full(o)) => (
                        (*h.as_ptr()).total as usize,
                        (*o.as_ptr()).order_cap as usize,
                    ),
                    // A compact chunk is the field's only one, its order array as long as it.
                    (Chunk::Compact(c), _) => ((*c.as_ptr()).cap(), (*c.as_ptr()).cap()),
                    (Chunk::Full(_), Chunk::Compact(_)) => {
                        unreachable!("a compact order array holds its chunk only")
                    }
                };
            }
        }
        // SAFETY: the newest chunk (if any) is full with no free slot (both checked above) and
        // the totals are read from the chunks (`grow`'s contract).
        unsafe {
            grow(
                &mut self.order,
                self.len,
                old_total,
                live_order_cap,
                e.layout,
                e.most,
                min_cap,
                region,
            )
        }
    }
    /// See [`RepeatedField::place`].
    fn place(&mut self, index: usize, p: NonNull<u8>, e: &ElemInfo) {
        debug_assert!(index <= self.len);
        self.drop_spares(e);
        // SAFETY: the order array in use holds at least one pointer per slot of all chunks, and
        // `p` occupies a slot not yet counted in `len`, so `len + 1` pointers fit.
        unsafe {
            let at = self.order.as_ptr().add(index);
            ptr::copy(at, at.add(1), self.len - index);
            at.write(p);
        }
        self.len += 1;
    }
    /// See [`RepeatedField::unplace`].
    fn unplace(&mut self, index: usize, e: &ElemInfo) -> NonNull<u8> {
        self.drop_spares(e);
        assert!(
            index < self.len,
            "index {index} out of range (len {})",
            self.len
        );
        // SAFETY: `index < len`; the later pointers move down by one.
        unsafe {
            let at = self.order.as_ptr().add(index);
            let p = at.read();
            ptr::copy(at.add(1), at, self.len - index - 1);
            self.len -= 1;
            p
        }
    }
    /// See [`RepeatedField::truncate`].
    fn truncate(&mut self, len: usize, e: &ElemInfo) {
        while self.len > len {
            let p = self.unplace(self.len - 1, e);
            // SAFETY: `p` held a live element that nothing refers to any more (it left the
            // order); dropped once, then its slot is unoccupied.
            unsafe {
                (e.drop)(p.as_ptr());
                self.release_slot(p);
            }
        }
    }
    /// See [`RepeatedField::reserve`].
    fn reserve(&mut self, additional: usize, e: &ElemInfo) {
        // SAFETY: the newest chunk is live.
        let room = self.chunks().map_or(0, |h| unsafe { h.unused() });
        if room == 0 && additional > 1 {
            // Start a chunk big enough, and give its first slot back.
            let p = self.take_slot(additional, e);
            // SAFETY: `p` is an unoccupied slot of the newest chunk.
            unsafe { self.release_slot(p) };
        }
    }
    /// The part of [`RepeatedField::try_push_default_sized_slow`] that does not touch an
    /// element's value: the first spare, made the last live element (`false`), or an unoccupied
    /// slot not yet in the order (`true`), from a new chunk sized by `run` when the newest one
    /// is full.
    fn push_slot_slow(
        &mut self,
        run: &mut dyn FnMut(usize) -> usize,
        region: Option<&ChunkRegion>,
        e: &ElemInfo,
    ) -> Result<(NonNull<u8>, bool), Layout> {
        if self.spare() > 0 {
            // SAFETY: `order[len]` is the first spare, a live cleared element owned by `self`;
            // it becomes the last live one.
            unsafe {
                let h = self.chunks().unwrap_unchecked();
                h.set_spare(h.spare() - 1);
                let p = self.order.as_ptr().add(self.len).read();
                self.len += 1;
                return Ok((p, false));
            }
        }
        // Only the first chunk is sized by counting the values that follow (exactly, for the
        // short lists of most fields and a small model's nodes); later chunks double. Counting
        // ahead for every new chunk read each element of a long list twice: 8% of the parse
        // of a 200 000-node graph.
        let min_cap = match self.chunks() {
            None => run(e.most).min(e.most),
            Some(_) => 1,
        };
        Ok((self.try_take_slot(min_cap, region, e)?, true))
    }
    /// See [`RepeatedField`]'s `drop`: drops the elements and frees the chunks.
    fn drop_all(&mut self, e: &ElemInfo) {
        self.drop_spares(e);
        while self.len > 0 {
            // SAFETY: every pointer of the order is a live element, dropped once here (`len`
            // shrinks first, so a panicking `drop` leaks the rest instead of a double drop).
            unsafe {
                self.len -= 1;
                (e.drop)(self.order.as_ptr().add(self.len).read().as_ptr());
            }
        }
        let mut next = self.chunks();
        while let Some(chunk) = next {
            // SAFETY: `chunk` is a live chunk allocated with this layout; no element lives in it
            // any more. A compact chunk is the oldest (the last of the list).
            unsafe {
                let h = match chunk {
                    Chunk::Full(h) => h.as_ptr(),
                    Chunk::Compact(c) => {
                        free_chunk((*c.as_ptr()).block());
                        break;
                    }
                };
                next = (*h).next.map(|n| Chunk::at(n));
                match (*h).block {
                    Some(block) => free_chunk(block),
                    None => {
                        let (layout, _, _) =
                            chunk_layout_of(e.layout, (*h).order_cap as usize, (*h).cap as usize);
                        alloc::dealloc(h.cast(), layout);
                    }
                }
            }
        }
    }
}

impl<T> RepeatedField<T> {
    /// Offsets of the order array pointer and of the length (`repr(C)`): the C++ classes read
    /// both in place.
    pub(crate) fn layout() -> (usize, usize) {
        (
            std::mem::offset_of!(Self, order),
            std::mem::offset_of!(Self, len),
        )
    }

    /// An empty field.
    pub const fn new() -> Self {
        Self {
            order: NonNull::dangling(),
            len: 0,
            _owns: PhantomData,
        }
    }
    /// The field with its element type erased (see [`RawField`]).
    #[inline(always)]
    fn raw(&self) -> &RawField {
        // SAFETY: `RawField` is this type's `repr(C)` layout without the zero-sized marker.
        unsafe { &*(self as *const Self).cast::<RawField>() }
    }
    /// [`Self::raw`], for changes.
    #[inline(always)]
    fn raw_mut(&mut self) -> &mut RawField {
        // SAFETY: as `raw`; the erased bodies keep the field's invariants for elements of
        // `ElemInfo::of::<T>()`.
        unsafe { &mut *(self as *mut Self).cast::<RawField>() }
    }
    /// The newest chunk, if any.
    #[inline(always)]
    fn chunks(&self) -> Option<Chunk> {
        self.raw().chunks()
    }
    /// Puts a slot whose element was moved out or dropped on the free list of the newest chunk
    /// (a compact chunk has none: the slot stays unused, see [`CompactHeader`]).
    ///
    /// # Safety
    /// `p` must be an unoccupied slot of one of the field's chunks, not already on the free
    /// list.
    unsafe fn release_slot(&self, p: NonNull<T>) {
        // SAFETY: the caller's contract.
        unsafe { self.raw().release_slot(p.cast()) }
    }
    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when there are no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The element pointers, in order.
    #[inline]
    fn order(&self) -> &[NonNull<T>] {
        // SAFETY: `order` holds `len` initialized pointers (or is dangling with `len == 0`).
        unsafe { std::slice::from_raw_parts(self.order.as_ptr(), self.len) }
    }
    /// Asks the CPU to fetch the start of this field's storage (the order array and, in a
    /// chunk of a few slots, the first element right after it), without reading it.
    #[inline(always)]
    pub fn prefetch_head(&self) {
        if self.len > 0 {
            prefetch::prefetch_lines(self.order.as_ptr().cast::<u8>(), prefetch::MAX_LINES);
        }
    }

    /// Slots of the largest chunk.
    const fn max_chunk_slots() -> usize {
        let n = MAX_CHUNK_BYTES / size_of::<T>();
        if n == 0 { 1 } else { n }
    }

    /// An unoccupied slot: a freed one, else the next unused one of the newest chunk, else the
    /// first of a new chunk of at least `min_cap` slots (whose order array takes over).
    fn take_slot(&mut self, min_cap: usize) -> NonNull<T> {
        self.raw_mut()
            .take_slot(min_cap, ElemInfo::of::<T>())
            .cast()
    }

    /// [`Self::take_slot`] (a new chunk from `region` when given and it can), or the layout of
    /// the chunk the allocator refused.
    #[inline]
    fn try_take_slot(
        &mut self,
        min_cap: usize,
        region: Option<&ChunkRegion>,
    ) -> Result<NonNull<T>, Layout> {
        self.raw_mut()
            .try_take_slot(min_cap, region, ElemInfo::of::<T>())
            .map(NonNull::cast)
    }

    /// Stores `value` in an unoccupied slot, not yet in the order.
    fn store(&mut self, value: T) -> NonNull<T> {
        let p = self.take_slot(1);
        // SAFETY: an unoccupied slot, sized and aligned for `T`.
        unsafe { p.as_ptr().write(value) };
        p
    }

    /// Puts the stored element `p` at `index` of the order.
    fn place(&mut self, index: usize, p: NonNull<T>) {
        self.raw_mut().place(index, p.cast(), ElemInfo::of::<T>());
    }

    /// Takes the pointer at `index` out of the order.
    fn unplace(&mut self, index: usize) -> NonNull<T> {
        self.raw_mut().unplace(index, ElemInfo::of::<T>()).cast()
    }

    /// Number of spare elements (see [`RepeatedField::recycle_elements`]).
    #[cfg(test)]
    fn spare(&self) -> usize {
        self.raw().spare()
    }

    /// Drops the spare elements (their slots go back to the free list). Every change of the
    /// field other than [`RepeatedField::try_push_default_sized_in`] starts with it, so that the order
    /// array past `len` is free for it to use.
    fn drop_spares(&mut self) {
        self.raw_mut().drop_spares(ElemInfo::of::<T>());
    }

    /// Empties the field but keeps its elements, after `clear` emptied each of them (it must
    /// leave a value equal to the default one, minus the memory it keeps), as spares that
    /// [`RepeatedField::try_push_default_sized_in`] hands out again, in the same order: the C++
    /// classes' parse reuses a message's memory as protobuf does when it parses into it again.
    pub(crate) fn recycle_elements(&mut self, mut clear: impl FnMut(&mut T)) {
        for p in self.order() {
            // SAFETY: a live element owned by `self`, borrowed mutably through it.
            clear(unsafe { &mut *p.as_ptr() });
        }
        if let Some(h) = self.chunks() {
            // SAFETY: the newest chunk is live; the live elements become the first spares,
            // followed by the older spares (already cleared).
            // (`len + spare` is at most the field's capacity.)
            unsafe { h.set_spare(h.spare() + self.len) };
            self.len = 0;
        }
    }

    /// Appends an element.
    #[inline]
    pub fn push(&mut self, value: T) {
        let p = self.store(value);
        self.place(self.len, p);
    }
    /// Inserts an element at `index` (panics when `index > len`).
    pub fn insert(&mut self, index: usize, value: T) {
        assert!(
            index <= self.len,
            "insertion index {index} out of range (len {})",
            self.len
        );
        let p = self.store(value);
        self.place(index, p);
    }
    /// Moves the element out of slot `p` (already taken out of the order).
    fn take(&mut self, p: NonNull<T>) -> T {
        // SAFETY: `p` held a live element that nothing else refers to any more; after the read
        // the slot is unoccupied and goes back to the free list.
        unsafe {
            let v = p.as_ptr().read();
            self.release_slot(p);
            v
        }
    }
    /// Removes and returns element `index` (panics when out of range).
    pub fn remove(&mut self, index: usize) -> T {
        let p = self.unplace(index);
        self.take(p)
    }
    /// Removes and returns the last element.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let p = self.unplace(self.len - 1);
        Some(self.take(p))
    }
    /// Removes every element.
    pub fn clear(&mut self) {
        self.truncate(0);
    }
    /// Keeps the first `len` elements.
    pub fn truncate(&mut self, len: usize) {
        self.raw_mut().truncate(len, ElemInfo::of::<T>());
    }
    /// Reserves room for `additional` more elements.
    pub fn reserve(&mut self, additional: usize) {
        self.raw_mut().reserve(additional, ElemInfo::of::<T>());
    }
    /// Keeps the elements for which `f` is true.
    pub fn retain(&mut self, mut f: impl FnMut(&T) -> bool) {
        self.drop_spares();
        let total = self.len;
        // Should `f` or a `drop` panic, the elements not yet visited leak (nothing is dropped
        // twice): `len` only ever counts the kept ones.
        self.len = 0;
        for i in 0..total {
            // SAFETY: `i < total`: a live element's pointer; the kept ones are compacted to the
            // front (`len <= i`), a dropped one's slot goes back to the free list.
            unsafe {
                let p = self.order.as_ptr().add(i).read();
                if f(p.as_ref()) {
                    self.order.as_ptr().add(self.len).write(p);
                    self.len += 1;
                } else {
                    ptr::drop_in_place(p.as_ptr());
                    self.release_slot(p);
                }
            }
        }
    }
    /// Swaps two elements.
    pub fn swap(&mut self, a: usize, b: usize) {
        self.raw_mut().order_mut().swap(a, b);
    }
    /// Element `index`.
    #[inline]
    pub fn get(&self, index: usize) -> Option<&T> {
        // SAFETY: every pointer of the order is a live element owned by `self`.
        self.order().get(index).map(|p| unsafe { p.as_ref() })
    }
    /// Element `index`, for writing.
    #[inline]
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        // SAFETY: as `get`; `&mut self` makes the access exclusive.
        self.order().get(index).map(|p| unsafe { &mut *p.as_ptr() })
    }
    /// The first element.
    pub fn first(&self) -> Option<&T> {
        self.get(0)
    }
    /// The last element.
    pub fn last(&self) -> Option<&T> {
        self.get(self.len.wrapping_sub(1))
    }
    /// The last element, for writing.
    pub fn last_mut(&mut self) -> Option<&mut T> {
        self.get_mut(self.len.wrapping_sub(1))
    }
    /// The elements in order.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter {
            ptrs: self.order().iter(),
            _elems: PhantomData,
        }
    }
    /// The elements in order, each fetched ahead of its use (see `PrefetchIter`): for the
    /// walks over a whole model (size and encode passes).
    #[inline]
    pub fn iter_prefetching(&self) -> PrefetchIter<'_, T>
    where
        T: Message,
    {
        PrefetchIter { ptrs: self.order() }
    }
    /// The elements in order, for writing.
    pub fn iter_mut(&mut self) -> IterMut<'_, T> {
        IterMut {
            ptrs: self.order().iter(),
            _elems: PhantomData,
        }
    }
}

impl<T: Default> RepeatedField<T> {
    /// Appends a default element and returns it for writing.
    pub fn push_default(&mut self) -> &mut T {
        match self.try_push_default_sized_slow(&mut |_| 1, None) {
            Ok(p) => p,
            Err(layout) => alloc::handle_alloc_error(layout),
        }
    }

    /// [`RepeatedField::push_default`] for decoding: when a new chunk is needed, `run(max)`
    /// tells how many elements (at most `max`, the largest chunk) are about to be added, and the
    /// chunk gets room for all of them.
    #[cfg(test)]
    pub(crate) fn push_default_sized(&mut self, run: impl FnOnce(usize) -> usize) -> &mut T {
        match self.try_push_default_sized_in(run, None) {
            Ok(p) => p,
            Err(layout) => alloc::handle_alloc_error(layout),
        }
    }

    /// [`RepeatedField::push_default`] for decoding, or (nothing added) the layout of the chunk
    /// the allocator refused: when a new chunk is needed, `run(max)` tells how many elements (at
    /// most `max`, the largest chunk) are about to be added, and the chunk gets room for all of
    /// them; it is cut from `region` when given (a parse's).
    #[inline(always)]
    pub(crate) fn try_push_default_sized_in(
        &mut self,
        run: impl FnOnce(usize) -> usize,
        region: Option<&ChunkRegion>,
    ) -> Result<&mut T, Layout> {
        // The common case of a parse, kept short: the newest chunk has a free or unused slot,
        // and no spare comes first. (Not in size-optimized builds, `cfg(onnxl_small)`: there
        // every push takes the slow path, which handles that case too, so that the element's
        // default value is written in one place per type instead of once more in each parse
        // of the field.)
        #[cfg(not(onnxl_small))]
        if let Some(h) = self.chunks() {
            // SAFETY: `h` is the live newest chunk; the slot it hands out is unoccupied, sized
            // and aligned for `T`; the order array in use holds a pointer per slot of all chunks
            // and `len` counts occupied slots only, so `order[len]` is free (no spares).
            unsafe {
                if h.spare() == 0
                    && let Some(p) = h.take_slot(Layout::new::<T>())
                {
                    let p = p.cast::<T>();
                    p.as_ptr().write(T::default());
                    self.order.as_ptr().add(self.len).write(p);
                    self.len += 1;
                    return Ok(&mut *p.as_ptr());
                }
            }
        }
        let mut run = Some(run);
        self.try_push_default_sized_slow(&mut |most| run.take().map_or(1, |f| f(most)), region)
    }

    /// [`Self::try_push_default_sized_in`] when the newest chunk has no unused slot to hand out
    /// first (and [`Self::push_default`]: it hands out any slot).
    #[inline(never)]
    fn try_push_default_sized_slow(
        &mut self,
        run: &mut dyn FnMut(usize) -> usize,
        region: Option<&ChunkRegion>,
    ) -> Result<&mut T, Layout> {
        let (p, fresh) = self
            .raw_mut()
            .push_slot_slow(run, region, ElemInfo::of::<T>())?;
        let p = p.cast::<T>();
        if fresh {
            // SAFETY: an unoccupied slot, sized and aligned for `T`, not yet in the order.
            unsafe { p.as_ptr().write(T::default()) };
            self.place(self.len, p);
        }
        // SAFETY: a live element (a spare or the one just written) owned by `self`, borrowed
        // mutably through it.
        Ok(unsafe { &mut *p.as_ptr() })
    }

    /// [`Self::push`] (a new chunk cut from `region` when given: a parse's), or (`value` dropped,
    /// nothing added) the layout of the chunk the allocator refused.
    #[inline]
    pub(crate) fn try_push(
        &mut self,
        value: T,
        region: Option<&ChunkRegion>,
    ) -> Result<(), Layout> {
        let p = self.try_take_slot(1, region)?;
        // SAFETY: an unoccupied slot, sized and aligned for `T`.
        unsafe { p.as_ptr().write(value) };
        self.place(self.len, p);
        Ok(())
    }
}

impl<T> Drop for RepeatedField<T> {
    fn drop(&mut self) {
        self.raw_mut().drop_all(ElemInfo::of::<T>());
    }
}

impl<T> Default for RepeatedField<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: crate::error::TryClone + Default> crate::error::TryClone for RepeatedField<T> {
    #[inline(never)] // one copy per type: the callers are many (every field of every message)
    fn try_clone(&self) -> Result<Self, Layout> {
        crate::error::try_clone_via_default(self)
    }

    fn try_clone_into(&self, dst: &mut Self) -> Result<(), Layout> {
        for x in self.iter() {
            x.try_clone_into(dst.try_push_default_sized_slow(&mut |_| 1, None)?)?;
        }
        Ok(())
    }
}

impl<T: Clone> Clone for RepeatedField<T> {
    fn clone(&self) -> Self {
        self.iter().cloned().collect()
    }
}

impl<T: PartialEq> PartialEq for RepeatedField<T> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl<T: PartialEq> PartialEq<Vec<T>> for RepeatedField<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        self.iter().eq(other.iter())
    }
}

impl<T: fmt::Debug> fmt::Debug for RepeatedField<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T> Index<usize> for RepeatedField<T> {
    type Output = T;
    #[inline]
    fn index(&self, index: usize) -> &T {
        // SAFETY: every pointer of the list is a live element owned by `self`.
        unsafe { self.order()[index].as_ref() }
    }
}

impl<T> IndexMut<usize> for RepeatedField<T> {
    #[inline]
    fn index_mut(&mut self, index: usize) -> &mut T {
        // SAFETY: as `index`; `&mut self` makes the access exclusive.
        unsafe { self.raw_mut().order_mut()[index].cast::<T>().as_mut() }
    }
}

impl<T> From<Vec<T>> for RepeatedField<T> {
    fn from(v: Vec<T>) -> Self {
        v.into_iter().collect()
    }
}

impl<T> FromIterator<T> for RepeatedField<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut r = Self::new();
        r.extend(iter);
        r
    }
}

impl<T> Extend<T> for RepeatedField<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        let iter = iter.into_iter();
        self.reserve(iter.size_hint().0);
        for v in iter {
            self.push(v);
        }
    }
}

/// Elements [`PrefetchIter`] fetches ahead: the element itself this many places ahead...
const PREFETCH_ELEMENT_AHEAD: usize = 8;
/// ...and the storage of its children half as far ahead (the element's own fields are in the
/// cache by then, so reading where its children are does not wait).
const PREFETCH_CHILDREN_AHEAD: usize = 4;

/// Iterator over the elements of a [`RepeatedField`] of messages that asks the CPU to fetch
/// each element, then its children's storage, some places before they are reached: the
/// elements are boxed, so the hardware prefetcher cannot see where the next one is, and a walk
/// over a model that does not fit in the cache would otherwise wait on memory at every element.
pub struct PrefetchIter<'a, T> {
    ptrs: &'a [NonNull<T>],
}

impl<'a, T: Message> Iterator for PrefetchIter<'a, T> {
    type Item = &'a T;
    #[inline(always)]
    fn next(&mut self) -> Option<&'a T> {
        let (first, rest) = self.ptrs.split_first()?;
        if let Some(ahead) = rest.get(PREFETCH_ELEMENT_AHEAD - 1) {
            prefetch::prefetch_value(ahead.as_ptr().cast_const());
        }
        if let Some(ahead) = rest.get(PREFETCH_CHILDREN_AHEAD - 1) {
            // SAFETY: a live element of the field borrowed for `'a`.
            unsafe { ahead.as_ref() }.prefetch_children();
        }
        self.ptrs = rest;
        // SAFETY: a live element of the field borrowed for `'a`.
        Some(unsafe { first.as_ref() })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.ptrs.len(), Some(self.ptrs.len()))
    }
}

/// Iterator over the elements of a [`RepeatedField`].
pub struct Iter<'a, T> {
    ptrs: std::slice::Iter<'a, NonNull<T>>,
    _elems: PhantomData<&'a T>,
}

// SAFETY: it only gives out `&T`, like `std::slice::Iter`.
unsafe impl<T: Sync> Send for Iter<'_, T> {}
// SAFETY: see `Send`.
unsafe impl<T: Sync> Sync for Iter<'_, T> {}

impl<T> Clone for Iter<'_, T> {
    fn clone(&self) -> Self {
        Self {
            ptrs: self.ptrs.clone(),
            _elems: PhantomData,
        }
    }
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;
    #[inline]
    fn next(&mut self) -> Option<&'a T> {
        // SAFETY: live elements of a field borrowed for `'a`.
        self.ptrs.next().map(|p| unsafe { p.as_ref() })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.ptrs.size_hint()
    }
}

impl<T> DoubleEndedIterator for Iter<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        // SAFETY: as `next`.
        self.ptrs.next_back().map(|p| unsafe { p.as_ref() })
    }
}

impl<T> ExactSizeIterator for Iter<'_, T> {}

/// Iterator over the elements of a [`RepeatedField`], for writing.
pub struct IterMut<'a, T> {
    ptrs: std::slice::Iter<'a, NonNull<T>>,
    _elems: PhantomData<&'a mut T>,
}

// SAFETY: it gives out each `&mut T` once, like `std::slice::IterMut`.
unsafe impl<T: Send> Send for IterMut<'_, T> {}
// SAFETY: see `Send`.
unsafe impl<T: Sync> Sync for IterMut<'_, T> {}

impl<'a, T> Iterator for IterMut<'a, T> {
    type Item = &'a mut T;
    #[inline]
    fn next(&mut self) -> Option<&'a mut T> {
        // SAFETY: live elements of a field borrowed mutably for `'a`; the pointers are
        // distinct, so each element is handed out once.
        self.ptrs.next().map(|p| unsafe { &mut *p.as_ptr() })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.ptrs.size_hint()
    }
}

impl<T> DoubleEndedIterator for IterMut<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        // SAFETY: as `next`.
        self.ptrs.next_back().map(|p| unsafe { &mut *p.as_ptr() })
    }
}

impl<T> ExactSizeIterator for IterMut<'_, T> {}

/// Iterator that moves the elements out of a [`RepeatedField`].
pub struct IntoIter<T> {
    /// The order array of the elements not yet moved out: `front..back`.
    order: NonNull<NonNull<T>>,
    front: usize,
    back: usize,
    /// Keeps the chunks (its own length is 0).
    storage: RepeatedField<T>,
}

// SAFETY: it owns the remaining elements exclusively.
unsafe impl<T: Send> Send for IntoIter<T> {}
// SAFETY: shared access gives nothing out.
unsafe impl<T: Sync> Sync for IntoIter<T> {}

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        if self.front == self.back {
            return None;
        }
        // SAFETY: `front < back`: a live element, moved out once; its slot is freed with the
        // chunks.
        let v = unsafe { self.order.as_ptr().add(self.front).read().as_ptr().read() };
        self.front += 1;
        Some(v)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.back - self.front, Some(self.back - self.front))
    }
}

impl<T> DoubleEndedIterator for IntoIter<T> {
    fn next_back(&mut self) -> Option<T> {
        if self.front == self.back {
            return None;
        }
        self.back -= 1;
        // SAFETY: as `next`.
        Some(unsafe { self.order.as_ptr().add(self.back).read().as_ptr().read() })
    }
}

impl<T> ExactSizeIterator for IntoIter<T> {}

impl<T> Drop for IntoIter<T> {
    fn drop(&mut self) {
        while self.front < self.back {
            self.front += 1;
            // SAFETY: the elements not moved out are dropped once here.
            unsafe { ptr::drop_in_place(self.order.as_ptr().add(self.front - 1).read().as_ptr()) };
        }
        debug_assert_eq!(self.storage.len, 0);
    }
}

impl<'a, T> IntoIterator for &'a RepeatedField<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<'a, T> IntoIterator for &'a mut RepeatedField<T> {
    type Item = &'a mut T;
    type IntoIter = IterMut<'a, T>;
    fn into_iter(self) -> IterMut<'a, T> {
        self.iter_mut()
    }
}

impl<T> IntoIterator for RepeatedField<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(mut self) -> IntoIter<T> {
        let back = std::mem::take(&mut self.len);
        IntoIter {
            order: self.order,
            front: 0,
            back,
            storage: self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn push_default_sized_makes_one_chunk_for_the_announced_run() {
        let mut r: RepeatedField<[u64; 4]> = RepeatedField::new();
        let mut asked = Vec::new();
        for i in 0..5 {
            r.push_default_sized(|max| {
                asked.push(max);
                5
            })[0] = i;
        }
        // Asked once (the first chunk has room for all five), with the largest chunk as bound.
        assert_eq!(asked, [RepeatedField::<[u64; 4]>::max_chunk_slots()]);
        let base = &r[0] as *const [u64; 4];
        for i in 0..5 {
            assert_eq!(r[i][0], i as u64);
            // SAFETY: only pointer arithmetic for the comparison; nothing is read.
            assert_eq!(&r[i] as *const [u64; 4], unsafe { base.add(i) });
        }
        // Later chunks double without counting ahead.
        for i in 5..40 {
            r.push_default_sized(|_| unreachable!("asked again"))[0] = i;
        }
        assert!((0..40).all(|i| r[i][0] == i as u64));
        // A run larger than the largest chunk is capped by it (no overflowing layout).
        let mut big: RepeatedField<Vec<[u8; 16 * 1024]>> = RepeatedField::new();
        big.push_default_sized(|max| {
            assert_eq!(max, MAX_CHUNK_BYTES / size_of::<Vec<u8>>());
            usize::MAX
        });
        assert_eq!(big.len(), 1);
    }

    #[test]
    fn recycled_elements_come_back_in_order_and_are_dropped_once() {
        // Each element holds a clone of `alive`: its strong count tells how many live.
        let alive = Rc::new(());
        let mut r: RepeatedField<Vec<Rc<()>>> = RepeatedField::new();
        for _ in 0..5 {
            r.push(vec![alive.clone()]);
        }
        let addresses: Vec<*const Vec<Rc<()>>> = r.iter().map(|e| e as *const _).collect();
        let mut capacities = Vec::new();
        r.recycle_elements(|e| {
            capacities.push(e.capacity());
            e.clear();
        });
        assert!(r.is_empty() && r.iter().next().is_none());
        assert_eq!(
            Rc::strong_count(&alive),
            1,
            "the recycle emptied every element"
        );
        // The spares come back first, in their order, emptied but with their memory.
        for (i, at) in addresses.iter().take(3).enumerate() {
            let e = r.push_default_sized(|_| 1);
            assert!(e.is_empty() && e.capacity() == capacities[i]);
            assert_eq!(*at, e as *const _);
            e.push(alive.clone());
        }
        assert_eq!((r.len(), r.spare()), (3, 2));
        // Any other change first drops the two spares left.
        r.push(vec![alive.clone()]);
        assert_eq!((r.len(), r.spare(), Rc::strong_count(&alive)), (4, 0, 5));
        r.recycle_elements(Vec::clear);
        r.push_default_sized(|_| 1).push(alive.clone());
        r.truncate(0);
        assert_eq!((r.len(), r.spare(), Rc::strong_count(&alive)), (0, 0, 1));
        r.recycle_elements(Vec::clear);
        // Recycling an empty field, then dropping one with spares, drops each spare once.
        for _ in 0..40 {
            r.push(vec![alive.clone()]);
        }
        r.recycle_elements(|e| e.truncate(0));
        for _ in 0..10 {
            r.push_default_sized(|_| 1).push(alive.clone());
        }
        assert_eq!((r.len(), r.spare(), Rc::strong_count(&alive)), (10, 30, 11));
        drop(r);
        assert_eq!(Rc::strong_count(&alive), 1);
    }

    #[test]
    fn a_parse_makes_short_lists_compact_and_they_change_as_any_other() {
        let alive = Rc::new(());
        let region = ChunkRegion::new();
        let mut kept = Vec::new();
        for run in 1..=CompactHeader::MAX_CAP + 2 {
            let mut r: RepeatedField<Vec<Rc<()>>> = RepeatedField::new();
            for _ in 0..run {
                r.try_push_default_sized_in(|_| run, Some(&region))
                    .unwrap()
                    .push(alive.clone());
            }
            let compact = run <= CompactHeader::MAX_CAP;
            assert_eq!(chunk_list(&r), [(run, run, compact)], "run {run}");
            let first = &r[0] as *const Vec<Rc<()>>;
            if compact {
                // One word of header, the order array, then the slots.
                // SAFETY: the field's order array and the slots right after it (only addresses
                // are compared, and the header word is read).
                unsafe {
                    assert_eq!(
                        r.order.as_ptr().add(run).cast::<Vec<Rc<()>>>(),
                        first.cast_mut()
                    );
                    let header = &*r.order.as_ptr().cast::<CompactHeader>().sub(1);
                    assert_eq!((header.cap(), header.used(), header.spare()), (run, run, 0));
                }
            }
            // Recycled elements come back in place (a compact chunk keeps spares too).
            r.recycle_elements(Vec::clear);
            assert_eq!((r.len(), r.spare()), (0, run));
            for _ in 0..run {
                r.push_default_sized(|_| 1).push(alive.clone());
            }
            assert_eq!(&r[0] as *const _, first);
            assert_eq!(chunk_count(&r), 1);
            // Growth, removal, insertion and reordering keep every address.
            let addresses: Vec<*const Vec<Rc<()>>> = r.iter().map(|e| e as *const _).collect();
            for _ in 0..20 {
                r.push(vec![alive.clone()]);
            }
            assert_eq!(chunk_list(&r).last(), Some(&(run, run, compact)));
            let removed = r.remove(0);
            r.insert(1, removed);
            r.swap(0, 1);
            assert!(
                addresses
                    .iter()
                    .all(|&a| r.iter().any(|e| std::ptr::eq(e, a)))
            );
            r.retain(|_| true);
            kept.push(r);
        }
        // Removing from a compact chunk loses the slot until the field is dropped, and the next
        // pushes grow the field by one chunk whose freed slots are reused.
        let mut r: RepeatedField<Vec<Rc<()>>> = RepeatedField::new();
        for _ in 0..2 {
            r.try_push_default_sized_in(|_| 2, Some(&region))
                .unwrap()
                .push(alive.clone());
        }
        for _ in 0..1000 {
            drop(r.remove(0));
            r.push(vec![alive.clone()]);
        }
        assert_eq!(chunk_list(&r).len(), 2);
        assert_eq!(r.len(), 2);
        kept.push(r);
        drop(region);
        let elements: usize = kept.iter().map(RepeatedField::len).sum();
        assert_eq!(Rc::strong_count(&alive), 1 + elements);
        drop(kept);
        assert_eq!(Rc::strong_count(&alive), 1);
    }

    #[test]
    fn element_addresses_survive_growth() {
        let mut r: RepeatedField<[u64; 8]> = RepeatedField::new();
        r.push([1; 8]);
        let first: *const [u64; 8] = &r[0];
        for i in 0..1000 {
            r.push([i; 8]);
        }
        assert_eq!(first, &r[0] as *const _, "element 0 moved");
        assert_eq!(r.len(), 1001);
        assert_eq!(r.remove(0), [1; 8]);
        assert_eq!(r.iter().next(), Some(&[0; 8]));
        assert_eq!(r, (0..1000).map(|i| [i; 8]).collect::<Vec<_>>());
    }

    #[test]
    fn addresses_survive_removal_insertion_and_swaps() {
        let mut r: RepeatedField<String> = (0..100).map(|i| i.to_string()).collect();
        let at_50: *const String = &r[50];
        r.remove(10);
        r.insert(0, "new".into());
        r.swap(1, 99);
        r.retain(|s| s != "7");
        let i = r.iter().position(|s| s == "50").unwrap();
        assert_eq!(at_50, &r[i] as *const _, "element moved");
        assert_eq!(r[0], "new");
    }

    #[test]
    fn freed_slots_are_reused() {
        let mut r: RepeatedField<[u64; 4]> = RepeatedField::new();
        for i in 0..64 {
            r.push([i; 4]);
        }
        let chunks_before = chunk_count(&r);
        for _ in 0..10_000 {
            let v = r.remove(3);
            r.push(v);
        }
        assert_eq!(
            chunk_count(&r),
            chunks_before,
            "push after remove allocated"
        );
        r.clear();
        for i in 0..64 {
            r.push([i; 4]);
        }
        assert_eq!(chunk_count(&r), chunks_before, "push after clear allocated");
    }

    /// The field's chunks, newest first: slots and order pointers of each, and whether it is
    /// compact.
    fn chunk_list<T>(r: &RepeatedField<T>) -> Vec<(usize, usize, bool)> {
        let mut list = Vec::new();
        let mut next = r.chunks();
        // SAFETY: the chunks of a live field.
        while let Some(chunk) = next {
            unsafe {
                match chunk {
                    Chunk::Full(h) => {
                        let h = &*h.as_ptr();
                        list.push((h.cap as usize, h.order_cap as usize, false));
                        next = h.next.map(|n| Chunk::at(n));
                    }
                    Chunk::Compact(c) => {
                        let cap = (*c.as_ptr()).cap();
                        list.push((cap, cap, true));
                        next = None;
                    }
                }
            }
        }
        list
    }

    fn chunk_count<T>(r: &RepeatedField<T>) -> usize {
        chunk_list(r).len()
    }

    #[test]
    fn every_element_dropped_once() {
        let token = Rc::new(());
        let make = |n| (0..n).map(|_| token.clone()).collect::<RepeatedField<_>>();
        let mut r = make(50);
        r.truncate(20);
        r.retain(|_| true);
        drop(r.pop());
        let moved: Vec<_> = r.into_iter().take(5).collect();
        assert_eq!(Rc::strong_count(&token), 1 + 5);
        drop(moved);
        let r = make(30);
        let c = r.clone();
        drop((r, c));
        let mut it = make(10).into_iter();
        it.next_back();
        drop(it);
        assert_eq!(Rc::strong_count(&token), 1);
    }

    #[test]
    fn memory_stays_linear_in_the_element_count() {
        let mut r: RepeatedField<[u64; 32]> = RepeatedField::new();
        for i in 0..200_000 {
            r.push([i; 32]);
        }
        let (mut slots, mut order, mut largest) = (0, 0, 0);
        for (cap, order_cap, _) in chunk_list(&r) {
            slots += cap;
            order += order_cap;
            largest = largest.max(order_cap);
        }
        assert!(slots < 200_000 + 300, "{slots} slots");
        assert!(order <= 4 * 200_000, "{order} order pointers: not linear");
        // The order arrays left behind (written, in older chunks) are a fraction of the field.
        assert!(
            order - largest <= 200_000 / 4,
            "{} order pointers left behind",
            order - largest
        );
        assert!(r.iter().enumerate().all(|(i, v)| v[0] == i as u64));
    }

    #[test]
    fn large_fields_use_few_chunks() {
        let r: RepeatedField<[u64; 4]> = (0..100_000).map(|i| [i; 4]).collect();
        assert!(chunk_count(&r) <= 2, "{} chunks", chunk_count(&r));
        let mut r: RepeatedField<[u64; 4]> = RepeatedField::new();
        for i in 0..100_000 {
            r.push([i; 4]);
        }
        // Doubling to 64 KiB chunks: 12 small ones, then 32-byte elements 2048 per chunk.
        assert!(chunk_count(&r) < 70, "{} chunks", chunk_count(&r));
        assert!(r.iter().enumerate().all(|(i, v)| v[0] == i as u64));
    }
}
