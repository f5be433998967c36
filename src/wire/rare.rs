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
//! A message may have *presets* ([`RareFields::presets`]): shared static values of its rare
//! fields in which some strings hold one of a few common values (its *preset strings*,
//! [`RareFields::PRESET_VALUES`]) and every other field is unset. The parse points the box to the
//! preset matching what it read instead of allocating one. Exporters write `NodeProto.doc_string
//! = ""` and a `domain` (`""`, `com.microsoft`, ...) on every node: with both fields rare and
//! the presets, such a node pays the 8-byte pointer instead of two 32-byte string members or a
//! box. A preset is read in place like a box and copied into a box of its own on the first
//! write.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The struct of a message's rare fields.
pub trait RareFields: Default + Clone + 'static {
    /// The shared value with every field unset (what an unallocated box reads as).
    fn empty() -> &'static Self;

    /// Whether the message skips the padding an aligned save writes before a tensor payload
    /// ([`super::PADDING_TAG`]) instead of keeping it as an unknown field (`TensorProto`).
    const SKIPS_PADDING: bool = false;

    /// For each preset string of the message (in order), the values a preset holds it at
    /// (empty for the messages without presets).
    const PRESET_VALUES: &'static [&'static [&'static [u8]]] = &[];

    /// The shared values that a `Rare` may point to instead of a box of its own (set by the
    /// parser): one for every combination of the preset strings' states (unset, or one of
    /// their [`RareFields::PRESET_VALUES`]) but the one with all unset, each other field unset.
    /// The combination numbered `c` is at index `c - 1`, where the states are the digits of
    /// `c`, the first field's the lowest, each in base one more than the field's value count.
    fn presets() -> &'static [Self] {
        &[]
    }
}

/// The number of the combination `c` with preset string `field` in state `state` (0: unset,
/// `j + 1`: its `j`-th value): the states are the digits of `c`, the first field's the lowest,
/// each in base one more than the field's value count.
pub(crate) fn preset_number(values: &[&[&[u8]]], c: usize, field: usize, state: usize) -> usize {
    let stride: usize = values[..field].iter().map(|v| v.len() + 1).product();
    let base = values[field].len() + 1;
    c - (c / stride) % base * stride + state * stride
}

/// Whether `a` and `b` hold the same bytes, compared in line (preset values are at most 30
/// bytes, mostly empty: a call to `memcmp` for each would cost more than the comparison).
#[inline(always)]
fn same_short_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut at = 0;
    while at + 8 <= a.len() {
        let word = |s: &[u8]| u64::from_le_bytes(s[at..at + 8].try_into().unwrap());
        if word(a) != word(b) {
            return false;
        }
        at += 8;
    }
    a[at..].iter().zip(&b[at..]).all(|(x, y)| x == y)
}

/// True when `p` points into the presets of `T` (a static, never freed).
#[cfg(test)]
pub(crate) fn in_presets<T: RareFields>(p: *const u8) -> bool {
    let r = T::presets().as_ptr_range();
    (r.start as usize..r.end as usize).contains(&(p as usize))
}

/// The rare fields of a message: a box allocated on first write (see the module documentation).
/// Its representation is one pointer (the C++ classes read it in place): null while
/// unallocated, the box, or one of the message's shared [`RareFields::presets`] (read in place
/// as a box; never written or freed: the first write copies it into a box of its own).
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

    /// True when `p` is one of the shared presets (never freed, never written).
    #[inline]
    fn is_preset(p: NonNull<T>) -> bool {
        T::presets()
            .as_ptr_range()
            .contains(&p.as_ptr().cast_const())
    }

    /// The number of the preset combination the fields hold (0: unallocated), or `None` for a
    /// box of their own.
    #[inline]
    fn preset_combination(&self) -> Option<usize> {
        let Some(p) = self.0 else { return Some(0) };
        let presets = T::presets();
        Self::is_preset(p).then(|| {
            // The offset of a preset in the array is a multiple of its size.
            (p.as_ptr() as usize - presets.as_ptr() as usize) / size_of::<T>().max(1) + 1
        })
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

    /// Sets preset string `field` (an index into [`RareFields::PRESET_VALUES`]) to `value`
    /// by pointing the fields at a shared preset, when they are unallocated or a preset and
    /// `value` is one of the field's preset values; returns whether it did (else nothing
    /// changed: the caller sets the field in a box).
    #[inline]
    pub(crate) fn try_set_preset_string(&mut self, field: usize, value: &[u8]) -> bool {
        let Some(c) = self.preset_combination() else {
            return false;
        };
        let Some(j) = T::PRESET_VALUES[field]
            .iter()
            .position(|v| same_short_bytes(v, value))
        else {
            return false;
        };
        let n = preset_number(T::PRESET_VALUES, c, field, j + 1);
        self.0 = Some(NonNull::from(&T::presets()[n - 1]));
        true
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

impl<T: RareFields + crate::error::TryClone> crate::error::TryClone for Rare<T> {
    #[inline(never)] // one copy per type: the callers are many (every field of every message)
    fn try_clone(&self) -> Result<Self, std::alloc::Layout> {
        crate::error::try_clone_via_default(self)
    }

    fn try_clone_into(&self, dst: &mut Self) -> Result<(), std::alloc::Layout> {
        match self.get() {
            Some(b) => {
                let fields = crate::error::try_box(T::default())?;
                *dst = Self(Some(NonNull::from(Box::leak(fields))), PhantomData);
                b.try_clone_into(dst.get_mut().expect("allocated just now"))
            }
            // Unallocated, or the shared preset: shared again.
            None => {
                *dst = Self(self.0, PhantomData);
                Ok(())
            }
        }
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
        doc: Option<&'static [u8]>,
        domain: Option<&'static [u8]>,
        list: Vec<u8>,
    }

    const fn with(doc: Option<&'static [u8]>, domain: Option<&'static [u8]>) -> WithPreset {
        WithPreset {
            doc,
            domain,
            list: Vec::new(),
        }
    }

    impl RareFields for WithPreset {
        fn empty() -> &'static Self {
            static EMPTY: WithPreset = with(None, None);
            &EMPTY
        }
        const PRESET_VALUES: &'static [&'static [&'static [u8]]] = &[&[b""], &[b"", b"x"]];
        fn presets() -> &'static [Self] {
            // Combination c: doc's state is c % 2, domain's c / 2.
            static PRESETS: [WithPreset; 5] = [
                with(Some(b""), None),
                with(None, Some(b"")),
                with(Some(b""), Some(b"")),
                with(None, Some(b"x")),
                with(Some(b""), Some(b"x")),
            ];
            &PRESETS
        }
    }

    #[test]
    fn preset_numbers_are_the_digits_of_the_states() {
        let v = WithPreset::PRESET_VALUES;
        assert_eq!(WithPreset::presets().len(), 2 * 3 - 1);
        assert_eq!(preset_number(v, 0, 0, 1), 1);
        assert_eq!(preset_number(v, 0, 1, 2), 4);
        assert_eq!(preset_number(v, 4, 0, 1), 5);
        assert_eq!(preset_number(v, 5, 1, 1), 3);
        assert_eq!(preset_number(v, 5, 1, 0), 1);
        assert_eq!(preset_number(v, 3, 0, 0), 2);
    }

    #[test]
    fn preset_strings_move_between_presets_without_allocating() {
        let mut r: Rare<WithPreset> = Rare::new();
        assert!(r.try_set_preset_string(1, b"x"));
        assert!(!r.is_allocated());
        assert_eq!(*r, with(None, Some(b"x")));
        assert!(r.try_set_preset_string(0, b""));
        assert_eq!(*r, with(Some(b""), Some(b"x")));
        assert!(r.try_set_preset_string(1, b""));
        assert_eq!(*r, with(Some(b""), Some(b"")));
        assert!(!r.is_allocated());
        assert!(in_presets::<WithPreset>((&raw const *r).cast()));
        // A value that no preset holds changes nothing.
        assert!(!r.try_set_preset_string(1, b"y"));
        assert!(!r.try_set_preset_string(0, b"x"));
        assert_eq!(*r, with(Some(b""), Some(b"")));
        // Neither does any value once the fields have a box of their own.
        r.list.push(1);
        assert!(r.is_allocated());
        assert!(!in_presets::<WithPreset>((&raw const *r).cast()));
        assert!(!r.try_set_preset_string(1, b"x"));
        assert_eq!(r.domain, Some(&b""[..]));
    }

    #[test]
    fn the_preset_is_shared_until_written() {
        let mut r: Rare<WithPreset> = Rare::new();
        assert!(r.try_set_preset_string(0, b""));
        let preset = &WithPreset::presets()[0];
        assert_eq!(r.doc, Some(&b""[..]));
        assert!(!r.is_allocated());
        assert!(r.get().is_none());
        // A clone shares it too.
        let c = r.clone();
        assert!(std::ptr::eq(&*c, preset));
        assert_eq!(c, r);
        // The first write copies it into a box of its own; the preset is unchanged.
        r.list.push(1);
        assert!(r.is_allocated());
        assert_eq!(
            *r,
            WithPreset {
                doc: Some(b""),
                domain: None,
                list: vec![1]
            }
        );
        assert!(preset.list.is_empty());
        assert_eq!(c.doc, Some(&b""[..]));
        // `get_mut` copies it as well (clearing what it sets then works).
        let mut d = c.clone();
        d.get_mut().expect("the preset's fields").doc = None;
        assert!(d.is_allocated());
        assert_eq!(d, Rare::<WithPreset>::new());
        assert_eq!(c.doc, Some(&b""[..]));
        // Clearing and dropping never free the static.
        let mut e = c.clone();
        e.clear();
        assert_eq!(e.doc, None);
        let m = c.map_allocated(|f| WithPreset {
            domain: f.doc,
            ..WithPreset::default()
        });
        assert_eq!(m.domain, Some(&b""[..]));
        assert!(m.is_allocated());
        drop(c);
        assert_eq!(preset.doc, Some(&b""[..]));
    }
}
