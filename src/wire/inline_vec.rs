//! [`InlineVec`]: the container of repeated scalar and string fields.
//!
//! A `Vec` that keeps its first `N` elements inside the message (no allocation for the short
//! lists nearly every node, tensor and attribute has) and whose layout does not depend on `N`:
//! a `#[repr(C)]` header `len: u32, cap: u32` followed by either the inline elements or the heap
//! pointer. Every operation except construction reads the capacity from the header, so code that
//! only knows the element type (the C++ classes' `RepeatedField<T>` /
//! `RepeatedPtrField<std::string>`, through [`raw`]) can work on a field of any inline capacity.
//!
//! # At most 2^31 − 1 elements
//!
//! The counts are 32-bit (the top bit of `cap` says "spilled"), so a list holds at most
//! [`MAX_LEN`] = 2^31 − 1 elements: protobuf's own `RepeatedField` counts in an `int`, with the
//! same limit. This header is 8 bytes where two `usize` would take 16, and every message has
//! several lists (a node its inputs and outputs, a tensor its dims and three typed data lists):
//! 16 bytes less per node, 32 per tensor, 8 per attribute, which is memory every parse touches.
//! (Keeping `usize` counts in a header of the heap allocation, as `thin-vec` does, would save the
//! same bytes but put a second layout, and a branch, in every length read of a spilled list;
//! the limit is no loss: more elements in one field take at least 2 GB of input for packed
//! varints, 8 GB for 4-byte values, and no real model has them — tensor payloads that large are
//! `raw_data` bytes, not lists.)
//!
//! Going past the limit is refused as `Vec` refuses a capacity overflow: [`InlineVec::push`] and
//! [`InlineVec::reserve`] panic ("capacity overflow"), [`InlineVec::try_reserve`] returns an
//! error, a parse fails with [`TooManyElements`](crate::DecodeErrorKind::TooManyElements) naming
//! the field and offset before it reserves anything, and the C and C++ functions that add
//! elements return a status.

use std::fmt;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ops::{Deref, DerefMut};
use std::ptr;

use crate::mem::{self, ChunkRegion};

/// Set in `cap` when the elements live outside the list (on the heap or in a parse's block).
const SPILLED: u32 = 1 << 31;

/// The most elements a list holds: 2^31 − 1 (as protobuf's `int`-counted `RepeatedField`).
pub const MAX_LEN: usize = (SPILLED - 1) as usize;

/// The most elements a `Vec<T>` holds (its allocation is at most `isize::MAX` bytes), for code
/// that handles both list types.
pub(crate) const fn vec_max_len<T>() -> usize {
    match size_of::<T>() {
        0 => usize::MAX,
        n => isize::MAX as usize / n,
    }
}

/// A growable list with `N` elements of inline storage; derefs to a slice.
///
/// The `N` inline slots hold the elements until the list grows past them; then all elements move
/// to one allocation (and never move back): cut from the parse's metadata blocks when a parse
/// grows the list, from the global allocator otherwise. The word before the elements records
/// which (see `mem/origin.rs`), so the list frees either kind, and one that grows again after its
/// parse moves to the heap. With `N = 0` it is a plain vector of 16 bytes
/// (the header and the pointer).
#[repr(C)]
pub struct InlineVec<T, const N: usize = 0> {
    /// Number of elements (at most [`MAX_LEN`]).
    len: u32,
    /// Capacity (`N` while inline), with [`SPILLED`] set once the elements live outside the list.
    cap: u32,
    data: Storage<T, N>,
}

#[repr(C)]
union Storage<T, const N: usize> {
    heap: *mut T,
    inline: ManuallyDrop<[MaybeUninit<T>; N]>,
}

// SAFETY: the list owns its elements exclusively (inline or in its own heap allocation).
unsafe impl<T: Send, const N: usize> Send for InlineVec<T, N> {}
// SAFETY: `&InlineVec<T, N>` only gives out `&T`.
unsafe impl<T: Sync, const N: usize> Sync for InlineVec<T, N> {}

impl<T, const N: usize> InlineVec<T, N> {
    /// An empty list.
    pub const fn new() -> Self {
        const {
            assert!(N <= MAX_LEN, "inline capacity above MAX_LEN");
            // The elements start right after the 8-byte header, where `raw::Header` expects them.
            assert!(align_of::<T>() <= align_of::<*mut T>());
        }
        Self {
            len: 0,
            cap: N as u32,
            data: Storage {
                inline: ManuallyDrop::new([const { MaybeUninit::uninit() }; N]),
            },
        }
    }

    /// An empty list with room for `n` elements.
    pub fn with_capacity(n: usize) -> Self {
        let mut v = Self::new();
        v.reserve_exact(n);
        v
    }

    /// The header, for the layout-independent operations of [`raw`].
    #[inline]
    fn raw(&mut self) -> *mut raw::Header<T> {
        (self as *mut Self).cast()
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when there are no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of elements it can hold without growing.
    #[inline]
    pub fn capacity(&self) -> usize {
        (self.cap & !SPILLED) as usize
    }

    /// True when the elements live outside the list (it outgrew its inline slots): in a heap
    /// allocation, or in memory cut from a parse's metadata block (see [`InlineVec::in_block`]).
    #[inline]
    pub fn spilled(&self) -> bool {
        self.cap & SPILLED != 0
    }

    /// True when the elements live in memory a parse cut from its metadata blocks (a list that
    /// outgrew its inline slots while being parsed); a list that grows further moves to the heap.
    pub fn in_block(&self) -> bool {
        // SAFETY: spilled elements of a non-zero-sized type are memory with an origin word.
        self.spilled()
            && size_of::<T>() != 0
            && unsafe { mem::in_block(self.as_ptr().cast_mut().cast()) }
    }

    /// Pointer to the first element.
    #[inline]
    pub fn as_ptr(&self) -> *const T {
        // SAFETY: the header of `self` (a valid list) is read only.
        unsafe { raw::data((self as *const Self).cast()) }
    }

    /// Mutable pointer to the first element.
    #[inline]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        // SAFETY: as `as_ptr`; `self` is borrowed exclusively.
        unsafe { raw::data(self.raw()) }
    }

    /// The elements.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: the first `len` elements at `as_ptr()` are initialized (the list's invariant);
        // the pointer is non-null and aligned also for an empty list.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len()) }
    }

    /// The elements, mutably.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        let len = self.len();
        // SAFETY: as `as_slice`, borrowed exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr(), len) }
    }

    /// Room for at least `additional` more elements (amortized growth).
    ///
    /// Panics when the list would hold more than [`MAX_LEN`] elements or the size in bytes
    /// overflows; aborts when memory runs out (as `Vec`).
    pub fn reserve(&mut self, additional: usize) {
        // SAFETY: `self` is a valid list, borrowed exclusively.
        unsafe { raw::reserve(self.raw(), additional, false) }.unwrap_or_else(|e| e.raise())
    }

    /// Room for exactly `additional` more elements.
    pub fn reserve_exact(&mut self, additional: usize) {
        // SAFETY: as `reserve`.
        unsafe { raw::reserve(self.raw(), additional, true) }.unwrap_or_else(|e| e.raise())
    }

    /// Room for at least `additional` more elements, or an error instead of a panic or abort
    /// (a `CapacityOverflow` error past [`MAX_LEN`] elements).
    pub fn try_reserve(
        &mut self,
        additional: usize,
    ) -> Result<(), std::collections::TryReserveError> {
        // SAFETY: as `reserve`.
        unsafe { raw::reserve(self.raw(), additional, false) }.map_err(|_| try_reserve_error())
    }

    /// Room for exactly `additional` more elements, or an error instead of a panic or abort.
    pub fn try_reserve_exact(
        &mut self,
        additional: usize,
    ) -> Result<(), std::collections::TryReserveError> {
        // SAFETY: as `reserve`.
        unsafe { raw::reserve(self.raw(), additional, true) }.map_err(|_| try_reserve_error())
    }

    /// [`InlineVec::try_reserve`] (or `_exact`) for a parse: a list that leaves its inline slots
    /// moves to memory cut from the parse's `region`.
    pub(crate) fn try_reserve_in(
        &mut self,
        additional: usize,
        exact: bool,
        region: &ChunkRegion,
    ) -> Result<(), std::collections::TryReserveError> {
        // SAFETY: as `reserve`.
        unsafe { raw::reserve_in(self.raw(), additional, exact, Some(region)) }
            .map_err(|_| try_reserve_error())
    }

    /// Appends `value`.
    ///
    /// Panics when the list already holds [`MAX_LEN`] elements (see [`InlineVec::reserve`]).
    #[inline]
    pub fn push(&mut self, value: T) {
        self.push_with(|| value);
    }

    /// Appends `make()`, made once there is room for it, and returns it.
    #[inline(always)]
    pub fn push_with(&mut self, make: impl FnOnce() -> T) -> &mut T {
        if self.len == self.cap & !SPILLED {
            self.reserve(1);
        }
        let value = make();
        // SAFETY: there is room for one more element past `len`; it is initialized here and
        // borrowed with `self`.
        unsafe {
            let p = self.as_mut_ptr().add(self.len());
            p.write(value);
            self.len += 1;
            &mut *p
        }
    }

    /// Removes and returns the last element.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        // SAFETY: the element at the old `len - 1` is initialized and no longer counted.
        Some(unsafe { self.as_ptr().add(self.len()).read() })
    }

    /// Inserts `value` at `index`, shifting the later elements.
    ///
    /// Panics when `index > len`.
    pub fn insert(&mut self, index: usize, value: T) {
        let len = self.len();
        assert!(
            index <= len,
            "insertion index {index} out of range (len {len})"
        );
        if len == self.capacity() {
            self.reserve(1);
        }
        // SAFETY: room for one more; elements `index..len` move up by one, then `index` is
        // written.
        unsafe {
            let p = self.as_mut_ptr().add(index);
            ptr::copy(p, p.add(1), len - index);
            p.write(value);
        }
        self.len += 1;
    }

    /// Removes and returns the element at `index`, shifting the later elements.
    ///
    /// Panics when `index >= len`.
    pub fn remove(&mut self, index: usize) -> T {
        let len = self.len();
        assert!(
            index < len,
            "removal index {index} out of range (len {len})"
        );
        // SAFETY: `index` is initialized; it is read out, then the tail moves down over it.
        unsafe {
            let p = self.as_mut_ptr().add(index);
            let v = p.read();
            ptr::copy(p.add(1), p, len - index - 1);
            self.len -= 1;
            v
        }
    }

    /// Removes the element at `index`, replacing it with the last one.
    ///
    /// Panics when `index >= len`.
    pub fn swap_remove(&mut self, index: usize) -> T {
        let last = self
            .len()
            .checked_sub(1)
            .expect("swap_remove on an empty list");
        self.as_mut_slice().swap(index, last);
        self.pop().expect("not empty")
    }

    /// Keeps the first `len` elements, dropping the rest.
    pub fn truncate(&mut self, len: usize) {
        // SAFETY: `self` is a valid list, borrowed exclusively.
        unsafe { raw::truncate(self.raw(), len) }
    }

    /// Removes every element (the capacity stays).
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Keeps the elements for which `keep` returns true, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let mut kept = 0;
        for i in 0..self.len() {
            if keep(&self[i]) {
                self.as_mut_slice().swap(kept, i);
                kept += 1;
            }
        }
        self.truncate(kept);
    }

    /// Removes the elements of `range`, shifting the later ones down.
    pub fn drain_range(&mut self, range: std::ops::Range<usize>) {
        let len = self.len();
        assert!(
            range.start <= range.end && range.end <= len,
            "range {range:?} out of bounds (len {len})"
        );
        self.as_mut_slice()[range.start..].rotate_left(range.end - range.start);
        self.truncate(len - (range.end - range.start));
    }

    /// Appends clones of `items`.
    pub fn extend_from_slice(&mut self, items: &[T])
    where
        T: Clone,
    {
        self.reserve(items.len());
        for v in items {
            self.push(v.clone());
        }
    }

    /// Resizes to `len`, filling new places with clones of `value`.
    pub fn resize(&mut self, len: usize, value: T)
    where
        T: Clone,
    {
        if len <= self.len() {
            self.truncate(len);
        } else {
            self.reserve(len - self.len());
            while self.len() < len {
                self.push(value.clone());
            }
        }
    }

    /// The elements as a `Vec` (moved, no clone).
    pub fn into_vec(mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        // SAFETY: the `len` elements are moved into `out`; `len` is set to 0 first so they are
        // not dropped again by `self`.
        unsafe {
            let n = self.len();
            self.len = 0;
            ptr::copy_nonoverlapping(self.as_ptr(), out.as_mut_ptr(), n);
            out.set_len(n);
        }
        out
    }
}

/// A repeated scalar or string field, as its `mutable_x()` accessor hands it out: a slice that
/// grows and shrinks (`Vec`'s methods of the same names). How many elements the message keeps
/// inline is not part of the type.
///
/// ```
/// use onnx_light::{Repeated, TensorProto};
///
/// let mut t = TensorProto::new();
/// t.set_dims([2, 3]);
/// t.mutable_dims().push(4);
/// t.mutable_dims()[0] = 5;
/// assert_eq!(t.dims(), [5, 3, 4]);
/// ```
pub trait Repeated<T>:
    DerefMut<Target = [T]> + Extend<T> + IntoIterator<Item = T> + Default
{
    /// Appends `value` (panics past [`MAX_LEN`] elements, as `Vec` past its capacity).
    fn push(&mut self, value: T);
    /// Removes and returns the last element.
    fn pop(&mut self) -> Option<T>;
    /// Inserts `value` at `index`, shifting the later elements (panics when `index > len`).
    fn insert(&mut self, index: usize, value: T);
    /// Removes and returns the element at `index`, shifting the later ones.
    fn remove(&mut self, index: usize) -> T;
    /// Removes the element at `index`, moving the last one into its place.
    fn swap_remove(&mut self, index: usize) -> T;
    /// Keeps the first `len` elements.
    fn truncate(&mut self, len: usize);
    /// Removes every element.
    fn clear(&mut self);
    /// Keeps the elements for which `keep` returns true, in order.
    fn retain(&mut self, keep: impl FnMut(&T) -> bool);
    /// Room for at least `additional` more elements.
    fn reserve(&mut self, additional: usize);
    /// Room for at least `additional` more elements, or an error instead of a panic or abort.
    fn try_reserve(&mut self, additional: usize) -> Result<(), std::collections::TryReserveError>;
    /// Appends clones of `items`.
    fn extend_from_slice(&mut self, items: &[T])
    where
        T: Clone;
    /// Resizes to `len`, filling new places with clones of `value`.
    fn resize(&mut self, len: usize, value: T)
    where
        T: Clone;
}

impl<T, const N: usize> Repeated<T> for InlineVec<T, N> {
    fn push(&mut self, value: T) {
        InlineVec::push(self, value)
    }
    fn pop(&mut self) -> Option<T> {
        InlineVec::pop(self)
    }
    fn insert(&mut self, index: usize, value: T) {
        InlineVec::insert(self, index, value)
    }
    fn remove(&mut self, index: usize) -> T {
        InlineVec::remove(self, index)
    }
    fn swap_remove(&mut self, index: usize) -> T {
        InlineVec::swap_remove(self, index)
    }
    fn truncate(&mut self, len: usize) {
        InlineVec::truncate(self, len)
    }
    fn clear(&mut self) {
        InlineVec::clear(self)
    }
    fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        InlineVec::retain(self, keep)
    }
    fn reserve(&mut self, additional: usize) {
        InlineVec::reserve(self, additional)
    }
    fn try_reserve(&mut self, additional: usize) -> Result<(), std::collections::TryReserveError> {
        InlineVec::try_reserve(self, additional)
    }
    fn extend_from_slice(&mut self, items: &[T])
    where
        T: Clone,
    {
        InlineVec::extend_from_slice(self, items)
    }
    fn resize(&mut self, len: usize, value: T)
    where
        T: Clone,
    {
        InlineVec::resize(self, len, value)
    }
}

/// The error of a refused `try_reserve`: `Vec` produces it (the only public way to build one),
/// asked for more bytes than any allocation may have.
#[cold]
fn try_reserve_error() -> std::collections::TryReserveError {
    Vec::<u8>::new()
        .try_reserve(usize::MAX)
        .expect_err("more than isize::MAX bytes")
}

impl<T, const N: usize> Drop for InlineVec<T, N> {
    fn drop(&mut self) {
        // SAFETY: `self` is a valid list, dropped once.
        unsafe { raw::free(self.raw()) }
    }
}

impl<T, const N: usize> Default for InlineVec<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const N: usize> Deref for InlineVec<T, N> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T, const N: usize> DerefMut for InlineVec<T, N> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T, const N: usize> AsRef<[T]> for InlineVec<T, N> {
    fn as_ref(&self) -> &[T] {
        self
    }
}

impl<T: crate::error::TryClone, const N: usize> crate::error::TryClone for InlineVec<T, N> {
    #[inline(never)] // one copy per type: the callers are many (every field of every message)
    fn try_clone(&self) -> Result<Self, std::alloc::Layout> {
        crate::error::try_clone_via_default(self)
    }

    fn try_clone_into(&self, dst: &mut Self) -> Result<(), std::alloc::Layout> {
        dst.try_reserve_exact(self.len()).map_err(|_| {
            std::alloc::Layout::array::<T>(self.len()).unwrap_or(std::alloc::Layout::new::<T>())
        })?;
        for x in self.iter() {
            dst.push(x.try_clone()?);
        }
        Ok(())
    }
}

impl<T: Clone, const N: usize> Clone for InlineVec<T, N> {
    fn clone(&self) -> Self {
        let mut v = Self::new();
        v.extend_from_slice(self);
        v
    }
}

impl<T: fmt::Debug, const N: usize> fmt::Debug for InlineVec<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: PartialEq, const N: usize, const M: usize> PartialEq<InlineVec<T, M>> for InlineVec<T, N> {
    fn eq(&self, other: &InlineVec<T, M>) -> bool {
        self.as_slice() == other.as_slice()
    }
}
impl<T: Eq, const N: usize> Eq for InlineVec<T, N> {}
impl<T: PartialEq, const N: usize> PartialEq<[T]> for InlineVec<T, N> {
    fn eq(&self, other: &[T]) -> bool {
        self.as_slice() == other
    }
}
impl<T: PartialEq, const N: usize> PartialEq<&[T]> for InlineVec<T, N> {
    fn eq(&self, other: &&[T]) -> bool {
        self.as_slice() == *other
    }
}
impl<T: PartialEq, const N: usize, const K: usize> PartialEq<[T; K]> for InlineVec<T, N> {
    fn eq(&self, other: &[T; K]) -> bool {
        self.as_slice() == other
    }
}
impl<T: PartialEq, const N: usize> PartialEq<Vec<T>> for InlineVec<T, N> {
    fn eq(&self, other: &Vec<T>) -> bool {
        self.as_slice() == other.as_slice()
    }
}
impl<T: std::hash::Hash, const N: usize> std::hash::Hash for InlineVec<T, N> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl<T, const N: usize> Extend<T> for InlineVec<T, N> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        let iter = iter.into_iter();
        self.reserve(iter.size_hint().0);
        for v in iter {
            self.push(v);
        }
    }
}
impl<'a, T: Copy + 'a, const N: usize> Extend<&'a T> for InlineVec<T, N> {
    fn extend<I: IntoIterator<Item = &'a T>>(&mut self, iter: I) {
        self.extend(iter.into_iter().copied())
    }
}

impl<T, const N: usize> FromIterator<T> for InlineVec<T, N> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut v = Self::new();
        v.extend(iter);
        v
    }
}

impl<T, const N: usize> From<Vec<T>> for InlineVec<T, N> {
    fn from(v: Vec<T>) -> Self {
        v.into_iter().collect()
    }
}
impl<T: Clone, const N: usize> From<&[T]> for InlineVec<T, N> {
    fn from(v: &[T]) -> Self {
        v.iter().cloned().collect()
    }
}
impl<T, const N: usize, const K: usize> From<[T; K]> for InlineVec<T, N> {
    fn from(v: [T; K]) -> Self {
        v.into_iter().collect()
    }
}
impl<T, const N: usize> From<InlineVec<T, N>> for Vec<T> {
    fn from(v: InlineVec<T, N>) -> Self {
        v.into_vec()
    }
}

impl<'a, T, const N: usize> IntoIterator for &'a InlineVec<T, N> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}
impl<'a, T, const N: usize> IntoIterator for &'a mut InlineVec<T, N> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}
impl<T, const N: usize> IntoIterator for InlineVec<T, N> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

/// `InlineVec` literal: `inline_vec![2, 3]` (the type, and so `N`, comes from the context).
#[cfg(test)]
macro_rules! inline_vec {
    () => { InlineVec::new() };
    ($($x:expr),+ $(,)?) => { InlineVec::from([$($x),+]) };
}

/// Operations on a list through its header alone, whatever its inline capacity: what
/// [`InlineVec`]'s own methods use, and what the C ABI uses for a field it knows only by its
/// element type.
pub mod raw {
    use super::*;
    use std::alloc::{self, Layout};

    /// The part of an [`InlineVec`] whose layout is the same for every `N`; the inline slots or
    /// the heap pointer start at `data`.
    #[repr(C)]
    pub struct Header<T> {
        len: u32,
        cap: u32,
        data: MaybeUninit<*mut T>,
    }

    /// Why a list could not grow.
    #[derive(Debug)]
    pub enum GrowError {
        /// More than [`MAX_LEN`] elements, or a size in bytes that overflows.
        CapacityOverflow,
        /// The allocator refused (the layout of the refused allocation).
        Alloc(Layout),
    }

    impl GrowError {
        /// Panics (overflow) or aborts (allocation failure), as `Vec` does.
        pub(crate) fn raise(self) -> ! {
            match self {
                GrowError::CapacityOverflow => panic!("InlineVec capacity overflow"),
                GrowError::Alloc(layout) => alloc::handle_alloc_error(layout),
            }
        }
    }

    /// Pointer to the first element (inline slots or spilled memory).
    ///
    /// # Safety
    /// `h` points to a valid list.
    #[inline]
    pub unsafe fn data<T>(h: *const Header<T>) -> *mut T {
        // SAFETY: `h` is valid; the inline slots start at `data`, where the heap pointer is
        // stored once spilled. Offsets are computed from the raw pointer, so the slots past the
        // header stay within the provenance of the whole list.
        unsafe {
            let slot = ptr::addr_of!((*h).data).cast::<*mut T>();
            if (*h).cap & SPILLED != 0 {
                slot.read()
            } else {
                slot.cast_mut().cast::<T>()
            }
        }
    }

    /// Number of elements.
    ///
    /// # Safety
    /// `h` points to a valid list.
    #[inline]
    pub unsafe fn len<T>(h: *const Header<T>) -> usize {
        // SAFETY: `h` is valid.
        unsafe { (*h).len as usize }
    }

    /// Makes room for `additional` more elements (exactly, or with amortized doubling, capped at
    /// [`MAX_LEN`]); `CapacityOverflow` when the list would hold more than [`MAX_LEN`].
    ///
    /// # Safety
    /// `h` points to a valid list that nothing else accesses during the call.
    pub unsafe fn reserve<T>(
        h: *mut Header<T>,
        additional: usize,
        exact: bool,
    ) -> Result<(), GrowError> {
        // SAFETY: the caller's contract.
        unsafe { reserve_in(h, additional, exact, None) }
    }

    /// As [`reserve`]; a list that leaves its inline slots moves to memory cut from `region`
    /// (a parse's block) when one is given and has room.
    ///
    /// # Safety
    /// As [`reserve`].
    #[inline]
    pub(crate) unsafe fn reserve_in<T>(
        h: *mut Header<T>,
        additional: usize,
        exact: bool,
        region: Option<&ChunkRegion>,
    ) -> Result<(), GrowError> {
        // SAFETY: `h` is valid and exclusive (caller).
        unsafe {
            let len = (*h).len as usize;
            let cap = ((*h).cap & !SPILLED) as usize;
            let need = len
                .checked_add(additional)
                .filter(|&n| n <= MAX_LEN)
                .ok_or(GrowError::CapacityOverflow)?;
            if need <= cap {
                return Ok(());
            }
            let new_cap = if exact {
                need
            } else {
                need.max(cap * 2).clamp(4, MAX_LEN)
            };
            grow_to(h, new_cap, region)
        }
    }

    /// Moves the elements to spilled memory of `new_cap` (> the capacity, <= [`MAX_LEN`])
    /// elements: cut from `region` when the list is inline and a region with room is given,
    /// else from the global allocator (see `mem/origin.rs`: the word before the elements says which).
    ///
    /// # Safety
    /// As [`reserve`].
    unsafe fn grow_to<T>(
        h: *mut Header<T>,
        new_cap: usize,
        region: Option<&ChunkRegion>,
    ) -> Result<(), GrowError> {
        debug_assert!(new_cap <= MAX_LEN);
        let layout = Layout::array::<T>(new_cap).map_err(|_| GrowError::CapacityOverflow)?;
        let align = align_of::<T>();
        // SAFETY: `h` is valid and exclusive (caller).
        unsafe {
            let old = data(h);
            let len = (*h).len as usize;
            let new = if size_of::<T>() == 0 {
                ptr::NonNull::<T>::dangling().as_ptr()
            } else if (*h).cap & SPILLED != 0 {
                let old_bytes = ((*h).cap & !SPILLED) as usize * size_of::<T>();
                let live = len * size_of::<T>();
                mem::realloc_raw(old.cast(), old_bytes, layout.size(), live, align).cast::<T>()
            } else {
                let p = match region {
                    Some(region) => mem::alloc_raw_in(layout.size(), align, region),
                    None => mem::alloc_raw(layout.size(), align),
                }
                .cast::<T>();
                if !p.is_null() {
                    ptr::copy_nonoverlapping(old, p, len);
                }
                p
            };
            if new.is_null() {
                let refused = mem::heap_layout(layout.size(), align).unwrap_or(layout);
                return Err(GrowError::Alloc(refused));
            }
            ptr::addr_of_mut!((*h).data).cast::<*mut T>().write(new);
            (*h).cap = new_cap as u32 | SPILLED;
        }
        Ok(())
    }

    /// Appends `value`, growing as needed.
    ///
    /// # Safety
    /// As [`reserve`].
    pub unsafe fn push<T>(h: *mut Header<T>, value: T) -> Result<(), GrowError> {
        // SAFETY: `h` is valid and exclusive; after `reserve` there is room at `len`.
        unsafe {
            reserve(h, 1, false)?;
            data(h).add((*h).len as usize).write(value);
            (*h).len += 1;
        }
        Ok(())
    }

    /// Drops the elements past `len`.
    ///
    /// # Safety
    /// As [`reserve`].
    pub unsafe fn truncate<T>(h: *mut Header<T>, len: usize) {
        // SAFETY: `h` is valid and exclusive; elements `len..old` are initialized and dropped
        // once, after `len` is lowered (so a panicking drop cannot cause a double drop).
        unsafe {
            let old = (*h).len as usize;
            if len >= old {
                return;
            }
            (*h).len = len as u32;
            let tail = ptr::slice_from_raw_parts_mut(data(h).add(len), old - len);
            ptr::drop_in_place(tail);
        }
    }

    /// Drops every element and frees the spilled memory (a heap allocation or a block's share);
    /// the list is then empty.
    ///
    /// # Safety
    /// As [`reserve`]. The list must not be used again except by dropping its memory (its
    /// capacity is left as is, so it must not grow either).
    pub unsafe fn free<T>(h: *mut Header<T>) {
        // SAFETY: `h` is valid and exclusive.
        unsafe {
            truncate(h, 0);
            if (*h).cap & SPILLED != 0 && size_of::<T>() != 0 {
                let bytes = ((*h).cap & !SPILLED) as usize * size_of::<T>();
                mem::free_raw(data(h).cast(), bytes, align_of::<T>());
            }
        }
    }

    /// Removes the elements of `start..start + n` (clamped to the list), shifting the later
    /// ones down.
    ///
    /// # Safety
    /// As [`reserve`].
    pub unsafe fn delete_range<T>(h: *mut Header<T>, start: usize, n: usize) {
        // SAFETY: `h` is valid and exclusive; the slice covers the initialized elements.
        unsafe {
            let len = (*h).len as usize;
            let start = start.min(len);
            let n = n.min(len - start);
            std::slice::from_raw_parts_mut(data(h), len)[start..].rotate_left(n);
            truncate(h, len - n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn a_parse_spills_into_its_block_and_later_growth_moves_to_the_heap() {
        let region = ChunkRegion::new();
        let mut lists: Vec<InlineVec<String, 1>> = (0..50)
            .map(|i| {
                let mut v = InlineVec::new();
                v.push(format!("a{i}"));
                v.try_reserve_in(3, false, &region).unwrap();
                v.push(format!("b{i}"));
                v
            })
            .collect();
        assert!(
            lists
                .iter()
                .all(|v| v.spilled() && v.in_block() && v.capacity() == 4)
        );
        // One after the other in the block: the elements and the origin word before them.
        let step = lists[1].as_ptr() as usize - lists[0].as_ptr() as usize;
        assert_eq!(step, 4 * size_of::<String>() + 8);
        // Room left: pushes stay in the block.
        lists[0].push("c0".into());
        assert!(lists[0].in_block());
        // Growing past the block's memory moves the elements to the heap.
        for k in 0..10 {
            lists[1].push(format!("x{k}"));
        }
        assert!(lists[1].spilled() && !lists[1].in_block());
        assert_eq!(lists[1][..3], ["a1", "b1", "x0"]);
        drop(region);
        // The lists outlive the region (each holds a share of the block), on any thread.
        let tail = lists.split_off(25);
        std::thread::spawn(move || drop(tail)).join().unwrap();
        assert_eq!(lists[0][..], ["a0", "b0", "c0"]);
        assert_eq!(lists[24].clone()[..], ["a24", "b24"]);
        assert_eq!(lists.pop().unwrap().into_vec(), ["a24", "b24"]);
        lists[2].clear();
        lists[2].extend(["p".to_string(), "q".into(), "r".into()]);
        assert!(lists[2].in_block(), "cleared room is reused");
    }

    #[test]
    fn lists_without_a_region_spill_to_the_heap_and_short_ones_stay_inline() {
        let region = ChunkRegion::new();
        let mut short: InlineVec<u64, 2> = InlineVec::new();
        short.try_reserve_in(2, true, &region).unwrap();
        assert!(!short.spilled() && !short.in_block());
        let mut heap: InlineVec<u64, 1> = InlineVec::new();
        heap.try_reserve(3).unwrap();
        assert!(heap.spilled() && !heap.in_block());
        let mut cut: InlineVec<u64, 1> = InlineVec::new();
        cut.try_reserve_in(3, true, &region).unwrap();
        assert!(cut.in_block() && cut.capacity() == 3);
        // Zero-sized elements take no memory from either.
        let mut units: InlineVec<(), 1> = InlineVec::new();
        units.try_reserve_in(5, true, &region).unwrap();
        units.extend([(), (), ()]);
        assert!(units.spilled() && !units.in_block());
    }

    #[test]
    fn stays_inline_up_to_n_then_spills_once() {
        let mut v: InlineVec<i64, 4> = InlineVec::new();
        for i in 0..4 {
            v.push(i);
        }
        assert!(!v.spilled());
        assert_eq!(v.capacity(), 4);
        v.push(4);
        assert!(v.spilled());
        assert_eq!(v[..], [0, 1, 2, 3, 4]);
        v.truncate(1);
        assert!(v.spilled(), "never moves back inline");
        assert_eq!(v, [0]);
    }

    #[test]
    fn header_layout_does_not_depend_on_n() {
        assert_eq!(size_of::<InlineVec<i64>>(), 16);
        assert_eq!(size_of::<InlineVec<i64, 4>>(), 8 + 32);
        assert_eq!(size_of::<InlineVec<i32, 2>>(), 16);
        assert_eq!(size_of::<InlineVec<crate::ProtoString, 2>>(), 8 + 64);
        // The raw operations see the same elements through a header of any `N`.
        let mut a: InlineVec<u32, 3> = [1, 2].into();
        let h = (&mut a as *mut InlineVec<u32, 3>).cast::<raw::Header<u32>>();
        // SAFETY: `h` is the header of a valid list used by nothing else meanwhile.
        unsafe {
            raw::push(h, 3).unwrap();
            raw::push(h, 4).unwrap();
            assert_eq!(raw::len(h), 4);
            raw::delete_range(h, 1, 2);
        }
        assert!(a.spilled());
        assert_eq!(a, [1, 4]);
    }

    #[test]
    fn refuses_more_than_max_len_elements_as_vec_refuses_a_capacity_overflow() {
        // Zero-sized elements take no memory, so a list can be at the limit for real.
        let mut full: InlineVec<(), 2> = InlineVec::new();
        full.reserve_exact(MAX_LEN);
        assert_eq!(full.capacity(), MAX_LEN);
        full.len = MAX_LEN as u32; // `()` needs no initialization
        assert_eq!(full.len(), MAX_LEN);
        assert!(full.try_reserve(1).is_err());
        assert!(full.try_reserve_exact(1).is_err());
        full.try_reserve(0).expect("no more room needed");
        let pushed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| full.push(())));
        let message = pushed.expect_err("a push past MAX_LEN panics");
        assert_eq!(
            message.downcast_ref::<&str>(),
            Some(&"InlineVec capacity overflow")
        );
        assert_eq!(full.len(), MAX_LEN, "nothing was added");
        full.pop();
        full.push(());
        assert_eq!(full.len(), MAX_LEN);

        // Sizes that would take memory are refused before anything is allocated.
        let mut v: InlineVec<u32, 2> = [1, 2, 3].into();
        assert!(v.try_reserve(MAX_LEN - 2).is_err());
        assert!(v.try_reserve_exact(usize::MAX).is_err());
        // Amortized growth near the limit stops at the limit instead of failing.
        let mut z: InlineVec<()> = InlineVec::new();
        z.reserve_exact(MAX_LEN / 2 + 1);
        z.len = (MAX_LEN / 2 + 1) as u32;
        z.reserve(MAX_LEN / 2);
        assert_eq!(z.capacity(), MAX_LEN);
        assert_eq!(v, [1, 2, 3]);
    }

    #[test]
    fn drops_every_element_once() {
        let token = Rc::new(());
        {
            let mut v: InlineVec<Rc<()>, 2> = InlineVec::new();
            for _ in 0..10 {
                v.push(token.clone());
            }
            v.truncate(7);
            assert_eq!(Rc::strong_count(&token), 8);
            let _ = v.remove(3);
            v.insert(0, token.clone());
            v.retain(|_| true);
            v.drain_range(1..3);
            assert_eq!(Rc::strong_count(&token), 6);
            let w = v.clone();
            assert_eq!(Rc::strong_count(&token), 11);
            let as_vec = w.into_vec();
            assert_eq!(as_vec.len(), 5);
        }
        assert_eq!(Rc::strong_count(&token), 1);
    }

    #[test]
    fn vec_like_api() {
        let mut v: InlineVec<i32, 1> = (0..10).collect();
        assert_eq!(v.iter().sum::<i32>(), 45);
        v.retain(|x| x % 2 == 0);
        assert_eq!(v, [0, 2, 4, 6, 8]);
        assert_eq!(v.swap_remove(0), 0);
        assert_eq!(v, [8, 2, 4, 6]);
        v.resize(6, -1);
        assert_eq!(v, vec![8, 2, 4, 6, -1, -1]);
        v.sort();
        assert_eq!(v.pop(), Some(8));
        let e: InlineVec<i32> = InlineVec::new();
        assert!(e.is_empty() && e.as_slice().is_empty());
        assert!(v.try_reserve(usize::MAX / 2).is_err());
        let w: InlineVec<i32, 3> = inline_vec![1, 2];
        assert_eq!(format!("{w:?}"), "[1, 2]");
        assert_eq!(Vec::from(w), vec![1, 2]);
    }
}
