//! [`RepeatedField`]: the container of repeated message fields.
//!
//! Elements live in slots of a few large chunks (sizes doubling, up to [`MAX_CHUNK_BYTES`]), and
//! an ordered list of pointers gives their order. An element therefore never moves while it is
//! in the field — as with protobuf C++'s `RepeatedPtrField`, a reference or a C pointer to it
//! stays valid when other elements are added, removed or reordered — yet a field of `n`
//! elements costs about `log n` allocations instead of one per element.

use std::alloc::{self, Layout};
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};
use std::ptr::{self, NonNull};

/// Largest chunk, in bytes of element slots (a chunk holds at least one element).
const MAX_CHUNK_BYTES: usize = 64 * 1024;

/// Header at the start of every chunk; the chunks of a field form a list, newest first.
struct ChunkHeader {
    /// The previous (older, full) chunk.
    next: Option<NonNull<ChunkHeader>>,
    /// Number of slots in this chunk.
    cap: usize,
    /// Slots handed out so far (the rest are unused).
    used: usize,
    /// Head of the list of freed slots (kept in the newest chunk's header only); each free slot
    /// holds the address of the next one in its first bytes.
    free: *mut u8,
}

/// A repeated message field. Its API follows `Vec`.
///
/// An element keeps its address for as long as it stays in the field (protobuf C++'s rule: a
/// child lives until it is removed, its field cleared or its parent freed), which the C ABI
/// relies on. Freed slots are reused by later additions.
pub struct RepeatedField<T> {
    /// The elements in order; each points at a slot of a chunk.
    ptrs: Vec<NonNull<T>>,
    /// The newest chunk, if any.
    chunks: Option<NonNull<ChunkHeader>>,
    _owns: PhantomData<T>,
}

// SAFETY: the field owns its elements exclusively (no slot is shared with anything else), so
// sending it sends the `T`s.
unsafe impl<T: Send> Send for RepeatedField<T> {}
// SAFETY: `&RepeatedField<T>` only gives out `&T`.
unsafe impl<T: Sync> Sync for RepeatedField<T> {}

/// Layout of a chunk of `cap` slots, and the offset of its first slot.
fn chunk_layout<T>(cap: usize) -> (Layout, usize) {
    let slots = Layout::array::<T>(cap).expect("repeated field chunk size overflows");
    Layout::new::<ChunkHeader>()
        .extend(slots)
        .expect("repeated field chunk size overflows")
}

/// Slot `i` of chunk `h`.
///
/// # Safety
/// `h` must be a live chunk of `T` slots with `i < cap`.
unsafe fn slot<T>(h: NonNull<ChunkHeader>, i: usize) -> NonNull<T> {
    // SAFETY: `h` is live, so reading its `cap` is fine.
    let cap = unsafe { (*h.as_ptr()).cap };
    let (_, offset) = chunk_layout::<T>(cap);
    // SAFETY: the chunk is `chunk_layout(cap)` bytes long and `i < cap`.
    unsafe { h.cast::<u8>().add(offset).cast::<T>().add(i) }
}

/// Puts a slot whose element was moved out or dropped on the free list of `chunks`.
///
/// # Safety
/// `p` must be an unoccupied slot of a chunk of the list headed by `chunks` (which is then not
/// `None`), not already on the free list.
unsafe fn release_slot<T>(chunks: Option<NonNull<ChunkHeader>>, p: NonNull<T>) {
    let head = chunks.expect("a slot implies a chunk").as_ptr();
    // SAFETY: `head` is live; the slot is unoccupied and at least pointer-sized (checked when
    // the slot was handed out), so its first bytes may hold the link.
    unsafe {
        p.cast::<*mut u8>().as_ptr().write_unaligned((*head).free);
        (*head).free = p.cast::<u8>().as_ptr();
    }
}

impl<T> RepeatedField<T> {
    /// An empty field.
    pub const fn new() -> Self {
        Self {
            ptrs: Vec::new(),
            chunks: None,
            _owns: PhantomData,
        }
    }
    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.ptrs.len()
    }
    /// True when there are no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ptrs.is_empty()
    }

    /// An unoccupied slot: a freed one, else the next unused one of the newest chunk, else the
    /// first of a new chunk of at least `min_cap` slots.
    fn take_slot(&mut self, min_cap: usize) -> NonNull<T> {
        const {
            assert!(
                size_of::<T>() >= size_of::<*mut u8>(),
                "a free slot holds a pointer"
            )
        };
        if let Some(h) = self.chunks {
            let h = h.as_ptr();
            // SAFETY: `h` is the live newest chunk; a non-null `free` is an unoccupied slot
            // holding the next link (see `release_slot`), and `used < cap` names an unused one.
            unsafe {
                if let Some(p) = NonNull::new((*h).free) {
                    (*h).free = p.cast::<*mut u8>().as_ptr().read_unaligned();
                    return p.cast();
                }
                if (*h).used < (*h).cap {
                    let p = slot::<T>(NonNull::new_unchecked(h), (*h).used);
                    (*h).used += 1;
                    return p;
                }
            }
        }
        let most = (MAX_CHUNK_BYTES / size_of::<T>()).max(1);
        let cap = self.ptrs.len().clamp(1, most).max(min_cap);
        let (layout, _) = chunk_layout::<T>(cap);
        // SAFETY: the layout has a non-zero size (it starts with the header).
        let raw = unsafe { alloc::alloc(layout) };
        let Some(h) = NonNull::new(raw.cast::<ChunkHeader>()) else {
            alloc::handle_alloc_error(layout)
        };
        // SAFETY: fresh memory of the chunk's layout, which starts with the header.
        unsafe {
            h.as_ptr().write(ChunkHeader {
                next: self.chunks,
                cap,
                used: 1,
                free: ptr::null_mut(),
            });
        }
        self.chunks = Some(h);
        // SAFETY: `h` is live and `0 < cap`.
        unsafe { slot::<T>(h, 0) }
    }

    /// Stores `value` in a new slot (not yet in the order list).
    fn store(&mut self, value: T) -> NonNull<T> {
        self.ptrs.reserve(1);
        let p = self.take_slot(1);
        // SAFETY: an unoccupied slot, sized and aligned for `T`.
        unsafe { p.as_ptr().write(value) };
        p
    }

    /// Appends an element.
    #[inline]
    pub fn push(&mut self, value: T) {
        let p = self.store(value);
        self.ptrs.push(p);
    }
    /// Inserts an element at `index` (panics when `index > len`).
    pub fn insert(&mut self, index: usize, value: T) {
        assert!(
            index <= self.len(),
            "insertion index {index} out of range (len {})",
            self.len()
        );
        let p = self.store(value);
        self.ptrs.insert(index, p);
    }
    /// Moves the element out of slot `p` (already taken out of the order list).
    fn take(&mut self, p: NonNull<T>) -> T {
        // SAFETY: `p` held a live element that nothing else refers to any more; after the read
        // the slot is unoccupied and goes back to the free list.
        unsafe {
            let v = p.as_ptr().read();
            release_slot(self.chunks, p);
            v
        }
    }
    /// Removes and returns element `index` (panics when out of range).
    pub fn remove(&mut self, index: usize) -> T {
        let p = self.ptrs.remove(index);
        self.take(p)
    }
    /// Removes and returns the last element.
    pub fn pop(&mut self) -> Option<T> {
        let p = self.ptrs.pop()?;
        Some(self.take(p))
    }
    /// Removes every element.
    pub fn clear(&mut self) {
        self.truncate(0);
    }
    /// Keeps the first `len` elements.
    pub fn truncate(&mut self, len: usize) {
        while self.ptrs.len() > len {
            drop(self.pop());
        }
    }
    /// Reserves room for `additional` more elements.
    pub fn reserve(&mut self, additional: usize) {
        self.ptrs.reserve(additional);
        let room = self.chunks.map_or(0, |h| {
            // SAFETY: the newest chunk is live.
            let h = unsafe { &*h.as_ptr() };
            h.cap - h.used
        });
        if room == 0 && additional > 1 {
            // Start a chunk big enough, and give its first slot back.
            let p = self.take_slot(additional);
            // SAFETY: `p` is an unoccupied slot of the newest chunk.
            unsafe { release_slot(self.chunks, p) };
        }
    }
    /// Keeps the elements for which `f` is true.
    pub fn retain(&mut self, mut f: impl FnMut(&T) -> bool) {
        let chunks = self.chunks;
        self.ptrs.retain(|p| {
            // SAFETY: every pointer of the list is a live element.
            if f(unsafe { p.as_ref() }) {
                return true;
            }
            // SAFETY: the element is dropped once and its slot, now unoccupied, is freed.
            unsafe {
                ptr::drop_in_place(p.as_ptr());
                release_slot(chunks, *p);
            }
            false
        });
    }
    /// Swaps two elements.
    pub fn swap(&mut self, a: usize, b: usize) {
        self.ptrs.swap(a, b);
    }
    /// Element `index`.
    #[inline]
    pub fn get(&self, index: usize) -> Option<&T> {
        // SAFETY: every pointer of the list is a live element owned by `self`.
        self.ptrs.get(index).map(|p| unsafe { p.as_ref() })
    }
    /// Element `index`, for writing.
    #[inline]
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        // SAFETY: as `get`; `&mut self` makes the access exclusive.
        self.ptrs.get_mut(index).map(|p| unsafe { p.as_mut() })
    }
    /// The first element.
    pub fn first(&self) -> Option<&T> {
        self.get(0)
    }
    /// The last element.
    pub fn last(&self) -> Option<&T> {
        self.get(self.len().wrapping_sub(1))
    }
    /// The last element, for writing.
    pub fn last_mut(&mut self) -> Option<&mut T> {
        self.get_mut(self.len().wrapping_sub(1))
    }
    /// The elements in order.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter {
            ptrs: self.ptrs.iter(),
            _elems: PhantomData,
        }
    }
    /// The elements in order, for writing.
    pub fn iter_mut(&mut self) -> IterMut<'_, T> {
        IterMut {
            ptrs: self.ptrs.iter(),
            _elems: PhantomData,
        }
    }
}

impl<T: Default> RepeatedField<T> {
    /// Appends a default element and returns it for writing.
    #[inline]
    pub fn push_default(&mut self) -> &mut T {
        let mut p = self.store(T::default());
        self.ptrs.push(p);
        // SAFETY: the slot was just filled and is owned by `self`, borrowed mutably.
        unsafe { p.as_mut() }
    }
}

impl<T> Drop for RepeatedField<T> {
    fn drop(&mut self) {
        for p in self.ptrs.drain(..) {
            // SAFETY: every pointer of the list is a live element, dropped once here.
            unsafe { ptr::drop_in_place(p.as_ptr()) };
        }
        let mut next = self.chunks.take();
        while let Some(h) = next {
            // SAFETY: `h` is a live chunk allocated with `chunk_layout(cap)`; no element lives
            // in it any more.
            unsafe {
                next = (*h.as_ptr()).next;
                let (layout, _) = chunk_layout::<T>((*h.as_ptr()).cap);
                alloc::dealloc(h.as_ptr().cast(), layout);
            }
        }
    }
}

impl<T> Default for RepeatedField<T> {
    fn default() -> Self {
        Self::new()
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
        unsafe { self.ptrs[index].as_ref() }
    }
}

impl<T> IndexMut<usize> for RepeatedField<T> {
    #[inline]
    fn index_mut(&mut self, index: usize) -> &mut T {
        // SAFETY: as `index`; `&mut self` makes the access exclusive.
        unsafe { self.ptrs[index].as_mut() }
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
    rest: std::vec::IntoIter<NonNull<T>>,
    /// Keeps the chunks (its own element list is empty).
    storage: RepeatedField<T>,
}

// SAFETY: it owns the remaining elements exclusively.
unsafe impl<T: Send> Send for IntoIter<T> {}
// SAFETY: shared access gives nothing out.
unsafe impl<T: Sync> Sync for IntoIter<T> {}

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        // SAFETY: each remaining pointer is a live element, moved out once; its slot is freed
        // with the chunks.
        self.rest.next().map(|p| unsafe { p.as_ptr().read() })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.rest.size_hint()
    }
}

impl<T> DoubleEndedIterator for IntoIter<T> {
    fn next_back(&mut self) -> Option<T> {
        // SAFETY: as `next`.
        self.rest.next_back().map(|p| unsafe { p.as_ptr().read() })
    }
}

impl<T> ExactSizeIterator for IntoIter<T> {}

impl<T> Drop for IntoIter<T> {
    fn drop(&mut self) {
        for p in self.rest.by_ref() {
            // SAFETY: the elements not moved out are dropped once here.
            unsafe { ptr::drop_in_place(p.as_ptr()) };
        }
        debug_assert!(self.storage.ptrs.is_empty());
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
        IntoIter {
            rest: std::mem::take(&mut self.ptrs).into_iter(),
            storage: self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

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
        assert_eq!(chunk_count(&r), chunks_before, "push after remove allocated");
        r.clear();
        for i in 0..64 {
            r.push([i; 4]);
        }
        assert_eq!(chunk_count(&r), chunks_before, "push after clear allocated");
    }

    fn chunk_count<T>(r: &RepeatedField<T>) -> usize {
        let mut n = 0;
        let mut next = r.chunks;
        while let Some(h) = next {
            n += 1;
            // SAFETY: the chunks of a live field.
            next = unsafe { (*h.as_ptr()).next };
        }
        n
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
