//! The containers of repeated fields, as protobuf's Python objects have them:
//! `RepeatedScalarContainer` (numbers, strings, bytes: a list-like view) and
//! `RepeatedCompositeContainer` (messages: elements are views; `add`, `append` copies, ...).
//!
//! A container holds its parent message view and resolves it on every operation, so it never
//! holds an address of its own. Neither containers nor views are tracked by the cycle collector
//! (they cannot form cycles), so making them never runs Python code.

use std::any::Any;

use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PySlice, PyTuple};

use crate::schema::{MsgListOps, ScalarListOps};
use crate::view::{Ctx, Message, view_of};

/// The operations of repeated scalar field of `$M` read by its accessor `$get` (a slice) and
/// written through `$mutable` (the field's `Repeated` list), converting elements with
/// `$to_py(py, &elem)` and `$from_py(&obj)`.
#[macro_export]
macro_rules! scalar_list {
    ($name:expr, $M:ty, $get:ident, $mutable:ident, $to_py:expr, $from_py:expr) => {
        $crate::schema::ScalarListOps {
            name: $name,
            len: |s| Ok($crate::ops::read::<$M>(s)?.$get().len()),
            get: |s, i| {
                let m = $crate::ops::read::<$M>(s)?;
                match m.$get().get(i) {
                    Some(v) => ($to_py)(s.py(), v),
                    None => Err($crate::containers::index_error()),
                }
            },
            get_all: |s| {
                let m = $crate::ops::read::<$M>(s)?;
                m.$get().iter().map(|v| ($to_py)(s.py(), v)).collect()
            },
            set: |s, i, v| {
                let v = ($from_py)(v)?;
                let (m, _) = $crate::ops::write::<$M>(s)?;
                if i >= m.$get().len() {
                    return Err($crate::containers::index_error());
                }
                m.$mutable()[i] = v;
                Ok(())
            },
            insert: |s, i, v| {
                let v = ($from_py)(v)?;
                let (m, _) = $crate::ops::write::<$M>(s)?;
                let i = i.min(m.$get().len());
                m.$mutable().insert(i, v);
                Ok(())
            },
            remove: |s, i| {
                let (m, _) = $crate::ops::write::<$M>(s)?;
                if i < m.$get().len() {
                    m.$mutable().remove(i);
                    Ok(())
                } else {
                    Err($crate::containers::index_error())
                }
            },
            extend: |s, vs| {
                let vs = vs
                    .iter()
                    .map(|v| ($from_py)(v))
                    .collect::<PyResult<Vec<_>>>()?;
                let (m, _) = $crate::ops::write::<$M>(s)?;
                m.$mutable().extend(vs);
                Ok(())
            },
            assign: |s, vs| {
                let vs = vs
                    .iter()
                    .map(|v| ($from_py)(v))
                    .collect::<PyResult<Vec<_>>>()?;
                let (m, _) = $crate::ops::write::<$M>(s)?;
                let list = m.$mutable();
                list.clear();
                list.extend(vs);
                Ok(())
            },
            // SAFETY: the caller passes a live `$M`.
            raw_len: |p| unsafe { &*(p as *const $M) }.$get().len(),
        }
    };
}

/// The operations of repeated message field of `$M` (elements `$C`) read by its accessor `$get`
/// and written through `$mutable` (its `RepeatedField`).
#[macro_export]
macro_rules! msg_list {
    ($name:expr, $M:ty, $get:ident, $mutable:ident, $C:ty, $info:expr) => {
        $crate::schema::MsgListOps {
            name: $name,
            elem: $info,
            // SAFETY (all below): the caller passes a live `$M`, writable for the mutating ones.
            len: |p| unsafe { &*(p as *const $M) }.$get().len(),
            ptr: |p, i| {
                unsafe { &*(p as *const $M) }
                    .$get()
                    .get(i)
                    .map_or(std::ptr::null_mut(), |e| e as *const $C as *mut ())
            },
            add: |p| {
                unsafe { &mut *(p as *mut $M) }.$mutable().push_default() as *mut $C as *mut ()
            },
            remove: |ctx, p, i| {
                let list = unsafe { &mut *(p as *mut $M) }.$mutable();
                let at = $crate::ops::addr(&list[i]);
                let old = list.remove(i);
                ctx.detach(old, at);
            },
            clear: |ctx, p| {
                $crate::ops::take_detach(ctx, unsafe { &mut *(p as *mut $M) }.$mutable())
            },
            insert: |p, i, v| {
                let v = *v.downcast::<$C>().expect("element type");
                let list = unsafe { &mut *(p as *mut $M) }.$mutable();
                let i = i.min(list.len());
                list.insert(i, v);
            },
            swap: |p, a, b| unsafe { &mut *(p as *mut $M) }.$mutable().swap(a, b),
        }
    };
}

/// `IndexError` for an index out of range.
pub fn index_error() -> PyErr {
    PyIndexError::new_err("list index out of range")
}

/// Resolves a Python index (negative from the end) against `len`.
fn norm_index(i: isize, len: usize) -> PyResult<usize> {
    let j = if i < 0 { i + len as isize } else { i };
    if j < 0 || j as usize >= len {
        Err(index_error())
    } else {
        Ok(j as usize)
    }
}

/// The indices a slice selects.
fn slice_indices(s: &Bound<'_, PySlice>, len: usize) -> PyResult<Vec<usize>> {
    let ind = s.indices(len as isize)?;
    let mut out = Vec::with_capacity(ind.slicelength);
    let mut i = ind.start;
    for _ in 0..ind.slicelength {
        out.push(i as usize);
        i += ind.step;
    }
    Ok(out)
}

/// A list-like view of a repeated scalar, string or bytes field.
#[pyclass(
    frozen,
    module = "onnx_light",
    name = "RepeatedScalarContainer",
    sequence
)]
pub struct RepeatedScalarContainer {
    pub parent: Py<Message>,
    pub ops: &'static ScalarListOps,
}

impl RepeatedScalarContainer {
    fn list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = (self.ops.get_all)(self.parent.bind(py))?;
        PyList::new(py, items)
    }
}

#[pymethods]
impl RepeatedScalarContainer {
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        (self.ops.len)(self.parent.bind(py))
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let p = self.parent.bind(py);
        if let Ok(s) = key.cast::<PySlice>() {
            let all = (self.ops.get_all)(p)?;
            let idx = slice_indices(s, all.len())?;
            let items: Vec<&Py<PyAny>> = idx.iter().map(|&i| &all[i]).collect();
            return Ok(PyList::new(py, items)?.into_any().unbind());
        }
        let i: isize = key.extract()?;
        let i = norm_index(i, (self.ops.len)(p)?)?;
        (self.ops.get)(p, i)
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let p = self.parent.bind(py);
        if key.is_instance_of::<PySlice>() {
            let l = self.list(py)?;
            l.as_any().set_item(key, value)?;
            let items: Vec<Bound<'_, PyAny>> = l.iter().collect();
            return (self.ops.assign)(p, &items);
        }
        let i: isize = key.extract()?;
        let i = norm_index(i, (self.ops.len)(p)?)?;
        (self.ops.set)(p, i, value)
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = self.parent.bind(py);
        if key.is_instance_of::<PySlice>() {
            let l = self.list(py)?;
            l.as_any().del_item(key)?;
            let items: Vec<Bound<'_, PyAny>> = l.iter().collect();
            return (self.ops.assign)(p, &items);
        }
        let i: isize = key.extract()?;
        let i = norm_index(i, (self.ops.len)(p)?)?;
        (self.ops.remove)(p, i)
    }

    fn __iter__(slf: Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        Ok(slf.get().list(slf.py())?.try_iter()?.into_any().unbind())
    }

    fn __contains__(&self, py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.list(py)?.contains(v)
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let mine = self.list(py)?;
        if let Ok(o) = other.cast::<RepeatedScalarContainer>() {
            return Ok(mine
                .eq(o.get().list(py)?)?
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind());
        }
        if other.is_instance_of::<PyList>() || other.is_instance_of::<PyTuple>() {
            let o = PyList::new(py, other.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
            return Ok(mine
                .eq(o)?
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind());
        }
        Ok(py.NotImplemented())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.list(py)?.repr()?.to_string())
    }

    /// Appends a value.
    fn append(&self, py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<()> {
        (self.ops.extend)(self.parent.bind(py), std::slice::from_ref(v))
    }

    /// Appends every value of an iterable (all are checked before any is added).
    fn extend(&self, py: Python<'_>, vs: &Bound<'_, PyAny>) -> PyResult<()> {
        let items: Vec<Bound<'_, PyAny>> = vs.try_iter()?.collect::<PyResult<_>>()?;
        (self.ops.extend)(self.parent.bind(py), &items)
    }

    /// Inserts a value before index `i`.
    fn insert(&self, py: Python<'_>, i: isize, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = self.parent.bind(py);
        let len = (self.ops.len)(p)? as isize;
        let j = if i < 0 { (i + len).max(0) } else { i.min(len) };
        (self.ops.insert)(p, j as usize, v)
    }

    /// Removes and returns the value at `i` (default: the last).
    #[pyo3(signature = (i = -1))]
    fn pop(&self, py: Python<'_>, i: isize) -> PyResult<Py<PyAny>> {
        let p = self.parent.bind(py);
        let i = norm_index(i, (self.ops.len)(p)?)?;
        let v = (self.ops.get)(p, i)?;
        (self.ops.remove)(p, i)?;
        Ok(v)
    }

    /// Removes the first value equal to `v` (`ValueError` when there is none).
    fn remove(&self, py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let l = self.list(py)?;
        let i = l.index(v)?;
        (self.ops.remove)(self.parent.bind(py), i)
    }

    /// Index of the first value equal to `v`.
    fn index(&self, py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.list(py)?.index(v)
    }

    /// Number of values equal to `v`.
    fn count(&self, py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<usize> {
        let mut n = 0;
        for x in self.list(py)?.iter() {
            if x.eq(v)? {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Sorts in place (same arguments as `list.sort`).
    #[pyo3(signature = (**kwargs))]
    fn sort(&self, py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        let l = self.list(py)?;
        l.call_method("sort", (), kwargs)?;
        let items: Vec<Bound<'_, PyAny>> = l.iter().collect();
        (self.ops.assign)(self.parent.bind(py), &items)
    }

    /// Reverses in place.
    fn reverse(&self, py: Python<'_>) -> PyResult<()> {
        let l = self.list(py)?;
        l.reverse()?;
        let items: Vec<Bound<'_, PyAny>> = l.iter().collect();
        (self.ops.assign)(self.parent.bind(py), &items)
    }

    /// Appends the values of another container or iterable.
    #[allow(non_snake_case)]
    fn MergeFrom(&self, py: Python<'_>, vs: &Bound<'_, PyAny>) -> PyResult<()> {
        self.extend(py, vs)
    }

    fn __hash__(&self) -> PyResult<isize> {
        Err(PyTypeError::new_err("unhashable object"))
    }

    fn __reduce__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err(
            "can't pickle repeated message fields, convert to list first",
        ))
    }
}

/// A list-like view of a repeated message field; elements are message views.
#[pyclass(
    frozen,
    module = "onnx_light",
    name = "RepeatedCompositeContainer",
    sequence
)]
pub struct RepeatedCompositeContainer {
    pub parent: Py<Message>,
    pub ops: &'static MsgListOps,
}

impl RepeatedCompositeContainer {
    fn len(&self, py: Python<'_>) -> PyResult<usize> {
        let p = self.parent.bind(py).get().read_ptr(py)?;
        // SAFETY: a live message of the parent's type.
        Ok(unsafe { (self.ops.len)(p) })
    }

    /// The view of element `i` (already in range).
    fn item(&self, py: Python<'_>, i: usize) -> PyResult<Py<PyAny>> {
        let (p, root) = self.parent.bind(py).get().resolve_read(py)?;
        // SAFETY: a live message of the parent's type.
        let e = unsafe { (self.ops.ptr)(p, i) };
        match root {
            Some(root) if !e.is_null() => view_of(py, &root.clone(), e, self.ops.elem),
            _ => Err(index_error()),
        }
    }

    /// Views of every element.
    fn items(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        let (p, root) = self.parent.bind(py).get().resolve_read(py)?;
        let Some(root) = root.cloned() else {
            return Ok(Vec::new());
        };
        // SAFETY: a live message of the parent's type.
        let ptrs: Vec<*mut ()> = (0..unsafe { (self.ops.len)(p) })
            .map(|i| unsafe { (self.ops.ptr)(p, i) })
            .collect();
        ptrs.into_iter()
            .map(|e| view_of(py, &root, e, self.ops.elem))
            .collect()
    }

    /// A boxed copy of a message (or of a new one made from a dict) of the element type.
    fn owned_elem(
        &self,
        py: Python<'_>,
        v: &Bound<'_, PyAny>,
    ) -> PyResult<Box<dyn Any + Send + Sync>> {
        let info = self.ops.elem;
        let msg = if let Ok(d) = v.cast::<PyDict>() {
            (info.class)(py).call((), Some(d))?
        } else {
            v.clone()
        };
        let m = match msg.cast::<Message>() {
            Ok(m) if m.get().info.tag == info.tag => m,
            _ => {
                if let Some(b) = crate::foreign::foreign_box(&msg, info)? {
                    return Ok(b);
                }
                return Err(PyTypeError::new_err(format!(
                    "Parameter to {} must be a message of type {}, got {}",
                    self.ops.name,
                    crate::foreign::expected_name(info),
                    crate::foreign::type_name(&msg)
                )));
            }
        };
        let p = m.get().read_ptr(py)?;
        // SAFETY: a live message of the element type.
        Ok(unsafe { (info.ops.clone_box)(p) })
    }

    fn insert_owned(
        &self,
        py: Python<'_>,
        at: Option<isize>,
        vs: Vec<Box<dyn Any + Send + Sync>>,
    ) -> PyResult<()> {
        let parent = self.parent.bind(py);
        let (p, _root) = Message::resolve_write(parent)?;
        // SAFETY: a live, writable message of the parent's type.
        let len = unsafe { (self.ops.len)(p) } as isize;
        let start = match at {
            None => len,
            Some(i) if i < 0 => (i + len).max(0),
            Some(i) => i.min(len),
        } as usize;
        for (i, v) in (start..).zip(vs) {
            // SAFETY: as above; `v` has the element type (checked by `owned_elem`).
            unsafe { (self.ops.insert)(p, i, v) };
        }
        Ok(())
    }

    fn remove_indices(&self, py: Python<'_>, mut idx: Vec<usize>) -> PyResult<()> {
        idx.sort_unstable();
        idx.dedup();
        let parent = self.parent.bind(py);
        let (p, root) = Message::resolve_write(parent)?;
        let ctx = Ctx { py, root: &root };
        for &i in idx.iter().rev() {
            // SAFETY: a live, writable message; `i` is in range (indices come from the length
            // read under the same GIL hold).
            unsafe {
                if i < (self.ops.len)(p) {
                    (self.ops.remove)(&ctx, p, i)
                }
            }
        }
        Ok(())
    }
}

#[pymethods]
impl RepeatedCompositeContainer {
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.len(py)
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if let Ok(s) = key.cast::<PySlice>() {
            let all = self.items(py)?;
            let idx = slice_indices(s, all.len())?;
            let items: Vec<&Py<PyAny>> = idx.iter().map(|&i| &all[i]).collect();
            return Ok(PyList::new(py, items)?.into_any().unbind());
        }
        let i: isize = key.extract()?;
        let i = norm_index(i, self.len(py)?)?;
        self.item(py, i)
    }

    fn __setitem__(&self, _key: &Bound<'_, PyAny>, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(PyTypeError::new_err("does not support assignment"))
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let len = self.len(py)?;
        let idx = if let Ok(s) = key.cast::<PySlice>() {
            slice_indices(s, len)?
        } else {
            vec![norm_index(key.extract()?, len)?]
        };
        self.remove_indices(py, idx)
    }

    fn __iter__(slf: Bound<'_, Self>) -> CompositeIter {
        CompositeIter {
            container: slf.unbind(),
            next: 0.into(),
        }
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let mine = PyList::new(py, self.items(py)?)?;
        let theirs = if let Ok(o) = other.cast::<RepeatedCompositeContainer>() {
            PyList::new(py, o.get().items(py)?)?
        } else if other.is_instance_of::<PyList>() || other.is_instance_of::<PyTuple>() {
            PyList::new(py, other.try_iter()?.collect::<PyResult<Vec<_>>>()?)?
        } else {
            return Ok(py.NotImplemented());
        };
        Ok(mine
            .eq(theirs)?
            .into_pyobject(py)?
            .to_owned()
            .into_any()
            .unbind())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(PyList::new(py, self.items(py)?)?.repr()?.to_string())
    }

    /// Appends a new element, sets the given fields on it and returns it.
    #[pyo3(signature = (**kwargs))]
    fn add(&self, py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyAny>> {
        let parent = self.parent.bind(py);
        let (p, root) = Message::resolve_write(parent)?;
        // SAFETY: a live, writable message of the parent's type.
        let e = unsafe { (self.ops.add)(p) };
        let v = view_of(py, &root, e, self.ops.elem)?;
        if let Some(kw) = kwargs {
            crate::message::init_fields(v.bind(py).cast::<Message>()?, kw)?;
        }
        Ok(v)
    }

    /// Appends a copy of a message (or a new message made from a dict).
    fn append(&self, py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let b = self.owned_elem(py, v)?;
        self.insert_owned(py, None, vec![b])
    }

    /// Inserts a copy of a message before index `i`.
    fn insert(&self, py: Python<'_>, i: isize, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let b = self.owned_elem(py, v)?;
        self.insert_owned(py, Some(i), vec![b])
    }

    /// Appends copies of the messages of an iterable (all are checked before any is added).
    fn extend(&self, py: Python<'_>, vs: &Bound<'_, PyAny>) -> PyResult<()> {
        let items: Vec<Bound<'_, PyAny>> = vs.try_iter()?.collect::<PyResult<_>>()?;
        let owned = items
            .iter()
            .map(|v| self.owned_elem(py, v))
            .collect::<PyResult<Vec<_>>>()?;
        self.insert_owned(py, None, owned)
    }

    /// Appends copies of the elements of another container.
    #[allow(non_snake_case)]
    fn MergeFrom(&self, py: Python<'_>, vs: &Bound<'_, PyAny>) -> PyResult<()> {
        self.extend(py, vs)
    }

    /// Removes and returns element `i` (default: the last); it keeps its content.
    #[pyo3(signature = (i = -1))]
    fn pop(&self, py: Python<'_>, i: isize) -> PyResult<Py<PyAny>> {
        let i = norm_index(i, self.len(py)?)?;
        let v = self.item(py, i)?;
        self.remove_indices(py, vec![i])?;
        Ok(v)
    }

    /// Removes the first element equal to `v` (`ValueError` when there is none).
    fn remove(&self, py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let elem = self.ops.elem;
        let foreign;
        let target = match v.cast::<Message>() {
            Ok(m) if m.get().info.tag == elem.tag => m.get().read_ptr(py)?,
            _ => match crate::foreign::foreign_box(v, elem)? {
                Some(b) => {
                    foreign = b;
                    &*foreign as *const (dyn Any + Send + Sync) as *const ()
                }
                None => return Err(PyValueError::new_err("remove(x): x not in list")),
            },
        };
        let p = self.parent.bind(py).get().read_ptr(py)?;
        // SAFETY: live messages of the parent's and the element's types (reading only).
        let found = unsafe {
            (0..(self.ops.len)(p)).find(|&i| {
                let e = (self.ops.ptr)(p, i);
                std::ptr::eq(e, target) || (self.ops.elem.ops.eq)(e, target)
            })
        };
        match found {
            Some(i) => self.remove_indices(py, vec![i]),
            None => Err(PyValueError::new_err("remove(x): x not in list")),
        }
    }

    /// Removes every element (they keep their content).
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let (p, root) = Message::resolve_write(self.parent.bind(py))?;
        // SAFETY: a live, writable message of the parent's type.
        unsafe { (self.ops.clear)(&Ctx { py, root: &root }, p) };
        Ok(())
    }

    /// Sorts in place by `key` (elements keep their identity).
    #[pyo3(signature = (key = None, reverse = false))]
    fn sort(&self, py: Python<'_>, key: Option<&Bound<'_, PyAny>>, reverse: bool) -> PyResult<()> {
        let items = PyList::new(py, self.items(py)?)?;
        let kw = PyDict::new(py);
        if let Some(k) = key {
            kw.set_item("key", k)?;
        }
        kw.set_item("reverse", reverse)?;
        items.call_method("sort", (), Some(&kw))?;
        let wanted: Vec<*const ()> = items
            .iter()
            .map(|v| v.cast::<Message>()?.get().read_ptr(py))
            .collect::<PyResult<_>>()?;
        self.reorder(py, &wanted)
    }

    /// Reverses in place.
    fn reverse(&self, py: Python<'_>) -> PyResult<()> {
        let p = self.parent.bind(py).get().read_ptr(py)?;
        // SAFETY: a live message of the parent's type.
        let mut wanted: Vec<*const ()> = (0..unsafe { (self.ops.len)(p) })
            .map(|i| unsafe { (self.ops.ptr)(p, i) } as *const ())
            .collect();
        wanted.reverse();
        self.reorder(py, &wanted)
    }

    fn __hash__(&self) -> PyResult<isize> {
        Err(PyTypeError::new_err("unhashable object"))
    }
}

impl RepeatedCompositeContainer {
    /// Puts the elements in the order of `wanted` (their addresses) by swaps.
    fn reorder(&self, py: Python<'_>, wanted: &[*const ()]) -> PyResult<()> {
        let (p, _root) = Message::resolve_write(self.parent.bind(py))?;
        // SAFETY: a live, writable message of the parent's type; swaps keep addresses.
        unsafe {
            let n = (self.ops.len)(p);
            if wanted.len() != n {
                return Err(PyValueError::new_err("the field changed while sorting"));
            }
            for (i, &w) in wanted.iter().enumerate() {
                let j = (i..n)
                    .find(|&j| std::ptr::eq((self.ops.ptr)(p, j), w))
                    .ok_or_else(|| PyValueError::new_err("the field changed while sorting"))?;
                if j != i {
                    (self.ops.swap)(p, i, j);
                }
            }
        }
        Ok(())
    }
}

/// Iterator over a repeated message field.
#[pyclass(frozen, module = "onnx_light")]
pub struct CompositeIter {
    container: Py<RepeatedCompositeContainer>,
    next: std::sync::atomic::AtomicUsize,
}

#[pymethods]
impl CompositeIter {
    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        use std::sync::atomic::Ordering::Relaxed;
        let c = self.container.get();
        let i = self.next.load(Relaxed);
        if i >= c.len(py)? {
            return Ok(None);
        }
        self.next.store(i + 1, Relaxed);
        c.item(py, i).map(Some)
    }
}
