//! `Rare<T>`: the fields of a message that few models set, in one box allocated on first write.
//!
//! A message keeps its common fields inline and its rare ones (an attribute's tensor, graph and
//! doc string, ...) in a `{Msg}Rare` struct behind this one pointer, so that a parsed model whose
//! messages set none of them pays 8 bytes per message for them instead of their full size.
//! Reading goes through `Deref` (the shared empty value while unallocated); writing through
//! `DerefMut` or [`Rare::make_mut`] allocates the box; [`Rare::get_mut`] does not. An allocated box
//! whose fields are all unset is equal to an unallocated one and serializes as nothing.

use std::ops::{Deref, DerefMut};

/// The struct of a message's rare fields.
pub trait RareFields: Default + 'static {
    /// The shared value with every field unset (what an unallocated box reads as).
    fn empty() -> &'static Self;
}

/// The rare fields of a message: a box allocated on first write (see the module documentation).
/// Its representation is one pointer, null while unallocated (the C++ classes read it in place).
#[repr(transparent)]
pub struct Rare<T>(Option<Box<T>>);

impl<T> Rare<T> {
    /// Unallocated: every rare field unset.
    pub const fn new() -> Self {
        Self(None)
    }

    /// The fields when the box is allocated.
    #[inline]
    pub fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }

    /// The fields when the box is allocated, without allocating it.
    #[inline]
    pub fn get_mut(&mut self) -> Option<&mut T> {
        self.0.as_deref_mut()
    }

    /// True when the box is allocated.
    #[inline]
    pub fn is_allocated(&self) -> bool {
        self.0.is_some()
    }

    /// Frees the box: every rare field unset.
    pub fn clear(&mut self) {
        self.0 = None;
    }

    /// Makes `b` the box (allocated by the caller, e.g. fallibly).
    pub(crate) fn put(&mut self, b: Box<T>) {
        self.0 = Some(b);
    }

    /// A box holding `f(fields)` when this one is allocated, else an unallocated one.
    pub fn map_allocated(&self, f: impl FnOnce(&T) -> T) -> Self {
        Self(self.0.as_deref().map(|r| Box::new(f(r))))
    }
}

impl<T: Default> Rare<T> {
    /// The fields, allocating the box when it is not.
    #[inline]
    pub fn make_mut(&mut self) -> &mut T {
        self.0.get_or_insert_with(Box::default)
    }
}

impl<T: RareFields> Deref for Rare<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        match &self.0 {
            Some(b) => b,
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

impl<T> Default for Rare<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> Clone for Rare<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
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
}
