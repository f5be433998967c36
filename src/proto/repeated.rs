//! [`RepeatedField`]: the container of repeated message fields.

use std::fmt;
use std::ops::{Index, IndexMut};

/// A repeated message field: a list whose elements are individually boxed, so a reference or a
/// C pointer to an element stays valid when other elements are added (protobuf C++'s
/// `RepeatedPtrField` rule: a child lives until it is removed, its field cleared or its parent
/// freed). Its API follows `Vec`.
pub struct RepeatedField<T>(Vec<Box<T>>);

impl<T> RepeatedField<T> {
    /// An empty field.
    pub const fn new() -> Self {
        Self(Vec::new())
    }
    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// True when there are no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Appends an element.
    #[inline]
    pub fn push(&mut self, value: T) {
        self.0.push(Box::new(value));
    }
    /// Appends an already boxed element.
    #[inline]
    pub fn push_boxed(&mut self, value: Box<T>) {
        self.0.push(value);
    }
    /// Inserts an element at `index` (panics when `index > len`).
    pub fn insert(&mut self, index: usize, value: T) {
        self.0.insert(index, Box::new(value));
    }
    /// Removes and returns element `index` (panics when out of range).
    pub fn remove(&mut self, index: usize) -> T {
        *self.0.remove(index)
    }
    /// Removes and returns the last element.
    pub fn pop(&mut self) -> Option<T> {
        self.0.pop().map(|b| *b)
    }
    /// Removes every element.
    pub fn clear(&mut self) {
        self.0.clear();
    }
    /// Keeps the first `len` elements.
    pub fn truncate(&mut self, len: usize) {
        self.0.truncate(len);
    }
    /// Reserves room for `additional` more elements.
    pub fn reserve(&mut self, additional: usize) {
        self.0.reserve(additional);
    }
    /// Keeps the elements for which `f` is true.
    pub fn retain(&mut self, mut f: impl FnMut(&T) -> bool) {
        self.0.retain(|b| f(b));
    }
    /// Swaps two elements.
    pub fn swap(&mut self, a: usize, b: usize) {
        self.0.swap(a, b);
    }
    /// Element `index`.
    #[inline]
    pub fn get(&self, index: usize) -> Option<&T> {
        self.0.get(index).map(|b| &**b)
    }
    /// Element `index`, for writing.
    #[inline]
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.0.get_mut(index).map(|b| &mut **b)
    }
    /// The first element.
    pub fn first(&self) -> Option<&T> {
        self.get(0)
    }
    /// The last element.
    pub fn last(&self) -> Option<&T> {
        self.0.last().map(|b| &**b)
    }
    /// The last element, for writing.
    pub fn last_mut(&mut self) -> Option<&mut T> {
        self.0.last_mut().map(|b| &mut **b)
    }
    /// The elements in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.0.iter().map(|b| &**b)
    }
    /// The elements in order, for writing.
    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut T> + ExactSizeIterator {
        self.0.iter_mut().map(|b| &mut **b)
    }
    /// The boxed elements (to move elements between fields without copying them).
    pub fn as_boxed_mut(&mut self) -> &mut Vec<Box<T>> {
        &mut self.0
    }
}

impl<T: Default> RepeatedField<T> {
    /// Appends a default element and returns it for writing.
    #[inline]
    pub fn push_default(&mut self) -> &mut T {
        self.0.push(Box::default());
        self.0.last_mut().expect("just pushed")
    }
}

impl<T> Default for RepeatedField<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> Clone for RepeatedField<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T: PartialEq> PartialEq for RepeatedField<T> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<T: PartialEq> PartialEq<Vec<T>> for RepeatedField<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == b)
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
        &self.0[index]
    }
}

impl<T> IndexMut<usize> for RepeatedField<T> {
    #[inline]
    fn index_mut(&mut self, index: usize) -> &mut T {
        &mut self.0[index]
    }
}

impl<T> From<Vec<T>> for RepeatedField<T> {
    fn from(v: Vec<T>) -> Self {
        Self(v.into_iter().map(Box::new).collect())
    }
}

impl<T> FromIterator<T> for RepeatedField<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Self(iter.into_iter().map(Box::new).collect())
    }
}

impl<T> Extend<T> for RepeatedField<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        self.0.extend(iter.into_iter().map(Box::new));
    }
}

impl<'a, T> IntoIterator for &'a RepeatedField<T> {
    type Item = &'a T;
    type IntoIter = std::iter::Map<std::slice::Iter<'a, Box<T>>, fn(&'a Box<T>) -> &'a T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|b| &**b)
    }
}

impl<'a, T> IntoIterator for &'a mut RepeatedField<T> {
    type Item = &'a mut T;
    type IntoIter =
        std::iter::Map<std::slice::IterMut<'a, Box<T>>, fn(&'a mut Box<T>) -> &'a mut T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter_mut().map(|b| &mut **b)
    }
}

impl<T> IntoIterator for RepeatedField<T> {
    type Item = T;
    type IntoIter = std::iter::Map<std::vec::IntoIter<Box<T>>, fn(Box<T>) -> T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter().map(|b| *b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
