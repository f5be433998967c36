//! [`MsgBox`]: the box of a sub-message field (`Option<MsgBox<M>>`), which a parse cuts from its
//! metadata blocks and the C++ classes create and delete as their own objects.
//!
//! A `std` box must come from the global allocator, so a parse that boxed every `TypeProto`,
//! `TensorShapeProto` and `TensorProto` value took one `malloc` each. A `MsgBox` records where its
//! memory came from in an **origin word** right before the message (`mem/origin.rs`): `0` for the
//! global allocator, otherwise the address of the region block the box holds one share of.
//! Dropping the box reads the word: a heap box frees its allocation, a block box gives back its
//! share (the block is freed with its last).
//!
//! The C++ classes' `operator new` / `operator delete` (`onnxl_cxx_alloc` / `onnxl_cxx_free`)
//! allocate and free through [`alloc_raw`] / [`free_raw`], so a `T*` is the same object whether
//! C++ `new` or a parse made it: `release_x()` hands out the box's own pointer, `delete` of it
//! frees a heap box or gives back a block's share, and `set_allocated_x(new T)` becomes a box.
//!
//! `MsgBox<T>` is one non-null pointer (`Option<MsgBox<T>>` is one word, null for `None`), which
//! the C++ classes read in place.

use std::alloc::Layout;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::mem::{ChunkRegion, alloc_raw, alloc_raw_in, free_raw, heap_layout};

/// An owned sub-message, on the heap or in a parse's metadata block (see the module docs):
/// used as `Box<T>` is (`Deref`, `DerefMut`, `Clone`, `Debug`, `PartialEq`); make one with
/// [`MsgBox::new`] or `value.into()`.
#[repr(transparent)]
pub struct MsgBox<T>(NonNull<T>, PhantomData<T>);

// SAFETY: a `MsgBox` owns its `T` as a `Box` does; a block's share is an atomic count.
unsafe impl<T: Send> Send for MsgBox<T> {}
// SAFETY: as above (shared access only reads `T`).
unsafe impl<T: Sync> Sync for MsgBox<T> {}

impl<T> MsgBox<T> {
    /// `value` in a new heap box (aborts when out of memory, as `Box::new` does).
    pub fn new(value: T) -> Self {
        match Self::try_new(value) {
            Ok(b) => b,
            Err(layout) => std::alloc::handle_alloc_error(layout),
        }
    }

    /// `value` in a new heap box, or the layout the allocator refused (`value` dropped).
    pub fn try_new(value: T) -> Result<Self, Layout> {
        Self::place(alloc_raw(size_of::<T>(), align_of::<T>()), value)
    }

    /// `value` in a box cut from `region`'s block in use (holding one share of it), or on the heap
    /// when the region has no room for it; the layout the allocator refused otherwise.
    pub(crate) fn try_new_in(value: T, region: &ChunkRegion) -> Result<Self, Layout> {
        Self::place(alloc_raw_in(size_of::<T>(), align_of::<T>(), region), value)
    }

    /// `value` moved into `p`, fresh memory of a `T` with its origin word (from [`alloc_raw`] or
    /// [`alloc_raw_in`]); when `p` is null (the allocator refused), the layout asked for.
    #[inline]
    fn place(p: *mut u8, value: T) -> Result<Self, Layout> {
        match NonNull::new(p.cast::<T>()) {
            // SAFETY: fresh memory for a `T`, its origin word written.
            Some(p) => Ok(unsafe { Self::write(p, value) }),
            None => Err(heap_layout(size_of::<T>(), align_of::<T>()).unwrap_or(Layout::new::<T>())),
        }
    }

    /// # Safety
    /// `p` is fresh memory for a `T` preceded by its origin word.
    #[inline]
    unsafe fn write(p: NonNull<T>, value: T) -> Self {
        // SAFETY: the caller's contract.
        unsafe { p.as_ptr().write(value) };
        Self(p, PhantomData)
    }

    /// The value, moved out of the box (whose memory is freed).
    pub fn into_inner(b: Self) -> T {
        let p = Self::into_raw(b);
        // SAFETY: `p` is the box's live value, read once; its memory is freed without dropping it.
        unsafe {
            let value = p.read();
            free_raw(p.cast(), size_of::<T>(), align_of::<T>());
            value
        }
    }

    /// The address of the value, which the caller then owns (give it back with
    /// [`MsgBox::from_raw`]; a C++ object's `delete` frees it too).
    pub fn into_raw(b: Self) -> *mut T {
        let p = b.0.as_ptr();
        std::mem::forget(b);
        p
    }

    /// The box of a value at `p`.
    ///
    /// # Safety
    /// `p` came from [`MsgBox::into_raw`] of a `MsgBox<T>` or is a C++ object of this message
    /// made by `new` (the class's `operator new`), and is owned by nothing else.
    pub unsafe fn from_raw(p: *mut T) -> Self {
        // SAFETY: the caller's contract (non-null).
        Self(unsafe { NonNull::new_unchecked(p) }, PhantomData)
    }

    /// Whether the box was cut from a parse's metadata block (not from the global allocator).
    pub fn in_block(b: &Self) -> bool {
        // SAFETY: a live box's origin word precedes its value.
        unsafe { crate::mem::in_block(b.0.as_ptr().cast()) }
    }
}

impl<T> Drop for MsgBox<T> {
    fn drop(&mut self) {
        let p = self.0.as_ptr();
        // SAFETY: the box owns its value and memory; both are given up once, here.
        unsafe {
            p.drop_in_place();
            free_raw(p.cast(), size_of::<T>(), align_of::<T>());
        }
    }
}

impl<T> Deref for MsgBox<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: the box owns a live value.
        unsafe { self.0.as_ref() }
    }
}

impl<T> DerefMut for MsgBox<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the box owns a live value, borrowed mutably through `self`.
        unsafe { self.0.as_mut() }
    }
}

impl<T> AsRef<T> for MsgBox<T> {
    fn as_ref(&self) -> &T {
        self
    }
}

impl<T> AsMut<T> for MsgBox<T> {
    fn as_mut(&mut self) -> &mut T {
        self
    }
}

impl<T> std::borrow::Borrow<T> for MsgBox<T> {
    fn borrow(&self) -> &T {
        self
    }
}

impl<T> std::borrow::BorrowMut<T> for MsgBox<T> {
    fn borrow_mut(&mut self) -> &mut T {
        self
    }
}

impl<T: crate::error::TryClone> crate::error::TryClone for MsgBox<T> {
    /// A deep copy in a new heap box.
    #[inline(never)] // one copy per type: the callers are many (every field of every message)
    fn try_clone(&self) -> Result<Self, Layout> {
        Self::try_new((**self).try_clone()?)
    }
}

impl<T: Clone> Clone for MsgBox<T> {
    /// A deep copy on the heap.
    fn clone(&self) -> Self {
        Self::new((**self).clone())
    }
}

impl<T: Default> Default for MsgBox<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T: fmt::Debug> fmt::Debug for MsgBox<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: fmt::Display> fmt::Display for MsgBox<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: PartialEq> PartialEq for MsgBox<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Eq> Eq for MsgBox<T> {}

impl<T> From<T> for MsgBox<T> {
    fn from(value: T) -> Self {
        Self::new(value)
    }
}

impl<T> From<Box<T>> for MsgBox<T> {
    /// The value moved into a new box (its address changes).
    fn from(value: Box<T>) -> Self {
        Self::new(*value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A value that counts its drops.
    #[derive(Clone, Debug, Default)]
    struct Counted {
        values: Vec<u64>,
        drops: Option<Arc<AtomicUsize>>,
    }

    impl Counted {
        fn new(values: Vec<u64>, drops: Option<&Arc<AtomicUsize>>) -> Self {
            Self {
                values,
                drops: drops.cloned(),
            }
        }
    }

    impl PartialEq for Counted {
        fn eq(&self, other: &Self) -> bool {
            self.values == other.values
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            if let Some(drops) = &self.drops {
                drops.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    #[test]
    fn an_optional_box_is_one_word() {
        assert_eq!(size_of::<Option<MsgBox<Counted>>>(), size_of::<usize>());
        let none: Option<MsgBox<u64>> = None;
        // SAFETY: a `repr(transparent)` non-null pointer: `None` is null.
        assert_eq!(
            unsafe { std::mem::transmute::<Option<MsgBox<u64>>, usize>(none) },
            0
        );
    }

    #[test]
    fn heap_boxes_hold_and_drop_their_value() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut b = MsgBox::new(Counted::new(vec![1, 2], Some(&drops)));
        assert!(!MsgBox::in_block(&b));
        b.values.push(3);
        assert_eq!(b.values, [1, 2, 3]);
        let c = b.clone();
        assert_eq!(b, c);
        assert_ne!(&*b as *const Counted, &*c as *const Counted);
        assert_eq!(format!("{b:?}"), format!("{:?}", *c));
        drop(b);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        let inner = MsgBox::into_inner(c);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert_eq!(inner.values, [1, 2, 3]);
        drop(inner);
        assert_eq!(drops.load(Ordering::Relaxed), 2);
        let raw = MsgBox::into_raw(MsgBox::<Counted>::from(Box::new(Counted::default())));
        // SAFETY: from `into_raw` just above.
        drop(unsafe { MsgBox::from_raw(raw) });
    }

    #[test]
    fn over_aligned_values_keep_their_alignment() {
        #[repr(align(64))]
        #[derive(Default)]
        struct Wide {
            byte: u8,
        }
        let boxes: Vec<MsgBox<Wide>> = (0..8).map(|_| MsgBox::default()).collect();
        let region = ChunkRegion::new();
        let cut = MsgBox::try_new_in(Wide { byte: 7 }, &region).unwrap();
        for b in boxes.iter().chain([&cut]) {
            assert_eq!(&**b as *const Wide as usize % 64, 0);
        }
        assert!(MsgBox::in_block(&cut));
        assert_eq!(cut.byte, 7);
    }

    #[test]
    fn raw_memory_is_a_heap_box() {
        let p = alloc_raw(size_of::<Counted>(), align_of::<Counted>()).cast::<Counted>();
        assert!(!p.is_null());
        // SAFETY: fresh memory of a `Counted` with its origin word, owned by the box made here.
        let b = unsafe {
            p.write(Counted::new(vec![4], None));
            MsgBox::from_raw(p)
        };
        assert_eq!(b.values, [4]);
        let p = MsgBox::into_raw(b);
        // SAFETY: the value is live: dropped once, then its memory freed as `operator delete` does.
        unsafe {
            p.drop_in_place();
            free_raw(p.cast(), size_of::<Counted>(), align_of::<Counted>());
        }
    }

    #[test]
    fn block_boxes_outlive_their_region_and_free_their_block_last() {
        let drops = Arc::new(AtomicUsize::new(0));
        let region = ChunkRegion::new();
        let boxes: Vec<MsgBox<Counted>> = (0..100)
            .map(|i| MsgBox::try_new_in(Counted::new(vec![i], Some(&drops)), &region).unwrap())
            .collect();
        assert!(boxes.iter().all(MsgBox::in_block));
        // Consecutive boxes are cut one after the other: the value and its origin word.
        let step = &*boxes[1] as *const Counted as usize - &*boxes[0] as *const Counted as usize;
        assert_eq!(step, size_of::<Counted>() + 8);
        drop(region);
        let mut boxes = boxes.into_iter();
        let first = boxes.next().unwrap();
        // Dropped on another thread: the block's count is atomic.
        std::thread::spawn(move || drop(boxes)).join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 99);
        // The last share keeps the block (and the value) alive.
        assert_eq!(first.values, [0]);
        let p = MsgBox::into_raw(first);
        // SAFETY: as `operator delete` frees a block object: value dropped, then its share.
        unsafe {
            p.drop_in_place();
            free_raw(p.cast(), size_of::<Counted>(), align_of::<Counted>());
        }
        assert_eq!(drops.load(Ordering::Relaxed), 100);
    }
}
