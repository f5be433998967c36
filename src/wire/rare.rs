//! `Rare<T>`: the fields of a message that few models set, in one box allocated on first write.
//!
//! A message keeps its common fields inline and its rare ones (an attribute's tensor, graph and
//! doc string, ...) in a `{Msg}Rare` struct behind this one pointer, so that a parsed model whose
//! messages set none of them pays 8 bytes per message for them instead of their full size.
//! Reading goes through `Deref` (the shared empty value while unallocated); writing through
//! `DerefMut` or [`Rare::make_mut`] allocates the box; [`Rare::get_mut`] does not, unless the
//! message holds its preset. An allocated box whose fields are all unset is equal to an
//! unallocated one and serializes as nothing.
//!
//! A message may have a *preset* ([`RareFields::preset`]): a shared static value of its rare
//! fields with one string set to the empty string, which the parse points the box to instead of
//! allocating one. Exporters write `NodeProto.doc_string = ""` on every node: with the field
//! rare and the preset, such a node pays the 8-byte pointer instead of a 32-byte string member
//! or a box. The preset is read in place like a box and copied into a box of its own on the
//! first write.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The struct of a message's rare fields.
pub trait RareFields: Default + Clone + 'static {
    /// The shared value with every field unset (what an unallocated box reads as).
    fn empty() -> &'static Self;

    /// A shared value that a `Rare` may point to instead of a box of its own (set by the
    /// parser): the rare fields of a message that sets only one rare string, to
    /// the empty string (`NodeProto.doc_string = ""`, written by exporters on every node).
    /// `None` for the messages without one.
    fn preset() -> Option<&'static Self> {
        None
    }
}

/// The rare fields of a message: a box allocated on first write (see the module documentation).
/// Its representation is one pointer (the C++ classes read it in place): null while
/// unallocated, the box, or the message's shared [`RareFields::preset`] (read in place as a
/// box; never written or freed: the first write copies it into a box of its own).
#[repr(transparent)]
pub struct Rare<T: RareFields>(Option<NonNull<T>>, PhantomData<Box<T>>);

// SAFETY: a `Rare<T>` owns its box as a `Box<T>` would; the preset is a `static` (so `T` is
// `Sync` whenever there is one) that is only read.
unsafe impl<T: RareFields + Send> Send for Rare<T> {}
// SAFETY: as above; `&Rare<T>` gives only `&T`.
unsafe impl<T: RareFields + Sync> Sync for Rare<T> {}

impl<T: RareFields> Rare<T> {
    /// Unallocated: every rare field unset.
    pub const fn new() -> Self {
        Self(None, PhantomData)
    }

    /// True when `p` is the shared preset (never freed, never written).
    #[inline]
    fn is_preset(p: NonNull<T>) -> bool {
        T::preset().is_some_and(|q| std::ptr::eq(q, p.as_ptr()))
    }

    /// The box, when one of its own is allocated (not the shared preset).
    #[inline]
    fn owned(&self) -> Option<NonNull<T>> {
        self.0.filter(|&p| !Self::is_preset(p))
    }

    /// The fields when the box is allocated.
    #[inline]
    pub fn get(&self) -> Option<&T> {
        // SAFETY: an owned box is valid while `self` is borrowed.
        self.owned().map(|p| unsafe { p.as_ref() })
    }

    /// The fields when they are not all unset: the box, allocated here when the message holds
    /// the shared preset (so that what it sets can be changed), else without allocating.
    #[inline]
    pub fn get_mut(&mut self) -> Option<&mut T> {
        self.0?;
        Some(self.make_mut())
    }

    /// True when the box is allocated (the shared preset is not).
    #[inline]
    pub fn is_allocated(&self) -> bool {
        self.owned().is_some()
    }

    /// Frees the box: every rare field unset.
    pub fn clear(&mut self) {
        if let Some(p) = self.owned() {
            // SAFETY: an owned box came from `Box::into_raw` and is freed once (the pointer is
            // reset below).
            drop(unsafe { Box::from_raw(p.as_ptr()) });
        }
        self.0 = None;
    }

    /// Makes `b` the box (allocated by the caller, e.g. fallibly).
    pub(crate) fn put(&mut self, b: Box<T>) {
        self.clear();
        self.0 = Some(NonNull::from(Box::leak(b)));
    }

    /// Points the fields at the shared preset (the message's only rare field set is its one
    /// preset string, to the empty string); frees the box if one is allocated.
    pub(crate) fn set_preset(&mut self) {
        let preset = T::preset().expect("a message with a preset");
        self.clear();
        self.0 = Some(NonNull::from(preset));
    }

    /// What an allocation of the box starts from: a copy of the preset when the fields point to
    /// it, else every field unset.
    pub(crate) fn unallocated_value(&self) -> T {
        match self.0 {
            Some(_) => (**self).clone(),
            None => T::default(),
        }
    }

    /// A box of its own holding `fields`.
    fn owning(fields: T) -> Self {
        Self(
            Some(NonNull::from(Box::leak(Box::new(fields)))),
            PhantomData,
        )
    }

    /// A box holding `f(fields)` when this one is allocated or holds the preset, else an
    /// unallocated one.
    pub fn map_allocated(&self, f: impl FnOnce(&T) -> T) -> Self {
        match self.0 {
            Some(_) => Self::owning(f(self)),
            None => Self::new(),
        }
    }

    /// The fields, allocating the box when it is not.
    #[inline]
    pub fn make_mut(&mut self) -> &mut T {
        if self.owned().is_none() {
            let b = Box::new(self.unallocated_value());
            self.put(b);
        }
        // SAFETY: the box is owned (made above when it was not), valid and uniquely borrowed
        // through `&mut self`.
        unsafe { self.0.expect("allocated above").as_mut() }
    }
}

impl<T: RareFields> Drop for Rare<T> {
    fn drop(&mut self) {
        self.clear();
    }
}

impl<T: RareFields> Deref for Rare<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        match self.0 {
            // SAFETY: the box or the static preset, valid while `self` is borrowed.
            Some(p) => unsafe { p.as_ref() },
            None => T::empty(),
        }
    }
}

impl<T: RareFields> DerefMut for Rare<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        self.make_mut()
    }
}

impl<T: RareFields> Default for Rare<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: RareFields> Clone for Rare<T> {
    fn clone(&self) -> Self {
        match self.get() {
            Some(b) => Self::owning(b.clone()),
            // Unallocated, or the shared preset: shared again.
            None => Self(self.0, PhantomData),
        }
    }
}

impl<T: RareFields + PartialEq> PartialEq for Rare<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: RareFields + std::fmt::Debug> std::fmt::Debug for Rare<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Debug, Clone, PartialEq)]
    struct Fields {
        doc: Option<u32>,
        list: Vec<u8>,
    }

    impl RareFields for Fields {
        fn empty() -> &'static Self {
            static EMPTY: Fields = Fields {
                doc: None,
                list: Vec::new(),
            };
            &EMPTY
        }
    }

    #[test]
    fn reads_do_not_allocate_and_writes_do() {
        let mut r: Rare<Fields> = Rare::new();
        assert_eq!(r.doc, None);
        assert!(r.list.is_empty());
        assert!(!r.is_allocated());
        assert!(r.get_mut().is_none());
        assert!(!r.is_allocated());
        r.list.push(3);
        assert!(r.is_allocated());
        assert_eq!(r.list, [3]);
        assert_eq!(
            std::mem::size_of::<Rare<Fields>>(),
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn an_allocated_empty_box_equals_an_unallocated_one() {
        let mut a: Rare<Fields> = Rare::new();
        let b: Rare<Fields> = Rare::new();
        a.make_mut();
        assert!(a.is_allocated());
        assert_eq!(a, b);
        a.doc = Some(1);
        assert_ne!(a, b);
        let c = a.map_allocated(|f| Fields {
            doc: f.doc.map(|d| d + 1),
            list: Vec::new(),
        });
        assert_eq!(c.doc, Some(2));
        assert!(!b.map_allocated(|f| f.clone()).is_allocated());
        a.clear();
        assert!(!a.is_allocated());
    }

    #[derive(Default, Debug, Clone, PartialEq)]
    struct WithPreset {
        doc: Option<u32>,
        list: Vec<u8>,
    }

    impl RareFields for WithPreset {
        fn empty() -> &'static Self {
            static EMPTY: WithPreset = WithPreset {
                doc: None,
                list: Vec::new(),
            };
            &EMPTY
        }
        fn preset() -> Option<&'static Self> {
            static PRESET: WithPreset = WithPreset {
                doc: Some(0),
                list: Vec::new(),
            };
            Some(&PRESET)
        }
    }

    #[test]
    fn the_preset_is_shared_until_written() {
        let mut r: Rare<WithPreset> = Rare::new();
        r.set_preset();
        assert_eq!(r.doc, Some(0));
        assert!(!r.is_allocated());
        assert!(r.get().is_none());
        // A clone shares it too.
        let c = r.clone();
        assert!(std::ptr::eq(&*c, WithPreset::preset().unwrap()));
        assert_eq!(c, r);
        // The first write copies it into a box of its own; the preset is unchanged.
        r.list.push(1);
        assert!(r.is_allocated());
        assert_eq!(
            *r,
            WithPreset {
                doc: Some(0),
                list: vec![1]
            }
        );
        assert_eq!(WithPreset::preset().unwrap().list, []);
        assert_eq!(c.doc, Some(0));
        // `get_mut` copies it as well (clearing what it sets then works).
        let mut d = c.clone();
        d.get_mut().expect("the preset's fields").doc = None;
        assert!(d.is_allocated());
        assert_eq!(d, Rare::<WithPreset>::new());
        assert_eq!(c.doc, Some(0));
        // Clearing and dropping never free the static.
        let mut e = c.clone();
        e.clear();
        assert_eq!(e.doc, None);
        let m = c.map_allocated(|f| WithPreset {
            doc: f.doc.map(|v| v + 5),
            list: Vec::new(),
        });
        assert_eq!(m.doc, Some(5));
        assert!(m.is_allocated());
        drop(c);
        assert_eq!(WithPreset::preset().unwrap().doc, Some(0));
    }
}
