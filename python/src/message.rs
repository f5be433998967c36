//! The methods every message class shares (on the base class `Message`): protobuf's
//! `HasField`, `ClearField`, `WhichOneof`, `CopyFrom`, `MergeFrom`, `SerializeToString`,
//! `ParseFromString`, `ByteSize`, `ListFields`, `==`, `str`/`repr`, pickling and copying.

use std::any::Any;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple, PyType};

use crate::bytes_io::{BytesArg, parse_released, serialize_released};
use crate::ops::Msg;
use crate::root::Root;
use crate::schema::{AnyBox, FieldKind, MsgInfo};
use crate::text::TextOut;
use crate::view::{Ctx, Message};

/// Base-class data of a new, empty message (a root of its own).
pub fn new_base<M: Msg>() -> Message {
    let (root, p) = Root::new(Box::new(M::default()));
    Message::owning(root, p as *mut (), M::INFO)
}

fn no_field(info: &MsgInfo, name: &str) -> PyErr {
    PyValueError::new_err(format!(
        "Protocol message {} has no \"{name}\" field.",
        py_name(info)
    ))
}

fn py_name(info: &MsgInfo) -> &'static str {
    info.name.rsplit('.').next().unwrap_or(info.name)
}

/// Sets fields from keyword arguments, as protobuf's constructors do: scalars are assigned,
/// sub-messages copied from a message or built from a dict, repeated fields extended; `None`
/// leaves a field unset.
pub fn init_fields(s: &Bound<'_, Message>, kw: &Bound<'_, PyDict>) -> PyResult<()> {
    let info = s.get().info;
    for (k, v) in kw.iter() {
        let name: String = k.extract()?;
        let f = info.field(&name).ok_or_else(|| no_field(info, &name))?;
        if v.is_none() {
            continue;
        }
        match f.kind {
            FieldKind::Scalar => (f.set.expect("scalar fields have a setter"))(s, &v)?,
            FieldKind::Message(..) => {
                let child = (f.get)(s)?;
                let c = child.bind(s.py()).cast::<Message>()?;
                if let Ok(d) = v.cast::<PyDict>() {
                    Message::resolve_write(c)?;
                    // Dicts nest without bound: deep ones continue on stack segments.
                    onnx_light::wire::guard_stack(|| init_fields(c, d))?;
                } else {
                    copy_from(c, &v)?;
                }
            }
            FieldKind::RepeatedScalar(_) | FieldKind::RepeatedMessage(_) => {
                (f.get)(s)?.bind(s.py()).call_method1("extend", (v,))?;
            }
        }
    }
    Ok(())
}

/// A boxed copy of the message of `src`, which must have the class of `info` (or be the onnx
/// package's message of that type).
fn owned_copy(
    src: &Bound<'_, PyAny>,
    info: &'static MsgInfo,
    what: &str,
) -> PyResult<Box<dyn Any + Send + Sync>> {
    let m = src
        .cast::<Message>()
        .ok()
        .filter(|m| m.get().info.tag == info.tag);
    let Some(m) = m else {
        if let Some(b) = crate::foreign::foreign_box(src, info)? {
            return Ok(b);
        }
        return Err(PyTypeError::new_err(format!(
            "Parameter to {what}() must be instance of same class: expected {} got {}.",
            crate::foreign::expected_name(info),
            crate::foreign::type_name(src)
        )));
    };
    let p = m.get().read_ptr(src.py())?;
    // SAFETY: a live message of `info`'s type.
    Ok(unsafe { (info.ops.clone_box)(p) })
}

/// `dst.CopyFrom(src)`.
pub fn copy_from(dst: &Bound<'_, Message>, src: &Bound<'_, PyAny>) -> PyResult<()> {
    if dst.is(src) {
        return Ok(());
    }
    let info = dst.get().info;
    let copy = owned_copy(src, info, "CopyFrom")?;
    replace_with(dst, copy)
}

/// Replaces the content of `dst` by `value` (of its type), detaching views of the old content.
fn replace_with(dst: &Bound<'_, Message>, value: AnyBox) -> PyResult<()> {
    let info = dst.get().info;
    let (p, root) = Message::resolve_write(dst)?;
    let ctx = Ctx {
        py: dst.py(),
        root: &root,
    };
    // SAFETY: a live, writable message of `info`'s type; `value` has that type.
    unsafe { (info.ops.replace)(&ctx, p, value) };
    Ok(())
}

/// Merges `value` (of the type of `dst`) into `dst`, protobuf's `MergeFrom`.
fn merge_with(dst: &Bound<'_, Message>, value: AnyBox) -> PyResult<()> {
    let info = dst.get().info;
    let (p, root) = Message::resolve_write(dst)?;
    let ctx = Ctx {
        py: dst.py(),
        root: &root,
    };
    // SAFETY: a live, writable message of `info`'s type; `value` has that type.
    unsafe { (info.ops.merge)(&ctx, p, value) };
    Ok(())
}

/// Clears field (or oneof) `name` of `s`.
pub fn clear_field(s: &Bound<'_, Message>, name: &str) -> PyResult<()> {
    let info = s.get().info;
    let fields: Vec<_> = match info.field(name) {
        Some(f) => vec![f],
        None => {
            let members: Vec<_> = info
                .fields
                .iter()
                .filter(|f| f.oneof == Some(name))
                .collect();
            if members.is_empty() {
                return Err(no_field(info, name));
            }
            members
        }
    };
    let (p, root) = Message::resolve_write(s)?;
    let ctx = Ctx {
        py: s.py(),
        root: &root,
    };
    for f in fields {
        // SAFETY: a live, writable message of `info`'s type.
        unsafe { (f.clear)(&ctx, p) };
    }
    Ok(())
}

/// A `FieldDescriptor`-like description of a field (what `ListFields` pairs values with).
#[pyclass(frozen, module = "onnx_light", name = "FieldDescriptor")]
pub struct FieldDescriptor {
    /// Field name.
    #[pyo3(get)]
    name: &'static str,
    /// Field number.
    #[pyo3(get)]
    number: u32,
    /// `Message.field`.
    #[pyo3(get)]
    full_name: String,
}

#[pymethods]
impl FieldDescriptor {
    fn __repr__(&self) -> String {
        format!("<FieldDescriptor {}>", self.full_name)
    }
}

#[pymethods]
impl Message {
    #[pyo3(signature = (**kwargs))]
    fn __init__(slf: &Bound<'_, Self>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        match kwargs {
            Some(kw) => init_fields(slf, kw),
            None => Ok(()),
        }
    }

    /// True when singular field (or oneof) `name` is set.
    #[allow(non_snake_case)]
    fn HasField(slf: &Bound<'_, Self>, name: &str) -> PyResult<bool> {
        let info = slf.get().info;
        let p = slf.get().read_ptr(slf.py())?;
        if let Some(f) = info.field(name) {
            let Some(has) = f.has else {
                return Err(PyValueError::new_err(format!(
                    "Protocol message {} has no singular \"{name}\" field.",
                    py_name(info)
                )));
            };
            // SAFETY: a live message of `info`'s type.
            return Ok(unsafe { has(p) });
        }
        let members: Vec<_> = info
            .fields
            .iter()
            .filter(|f| f.oneof == Some(name))
            .collect();
        if members.is_empty() {
            return Err(no_field(info, name));
        }
        // SAFETY: as above.
        Ok(members
            .iter()
            .any(|f| unsafe { f.has.expect("oneof members are singular")(p) }))
    }

    /// Clears field (or oneof) `name`; sub-messages removed keep their content in views.
    #[allow(non_snake_case)]
    fn ClearField(slf: &Bound<'_, Self>, name: &str) -> PyResult<()> {
        clear_field(slf, name)
    }

    /// The name of the member of oneof `name` that is set, or None.
    #[allow(non_snake_case)]
    fn WhichOneof(slf: &Bound<'_, Self>, name: &str) -> PyResult<Option<&'static str>> {
        let info = slf.get().info;
        let members: Vec<_> = info
            .fields
            .iter()
            .filter(|f| f.oneof == Some(name))
            .collect();
        if members.is_empty() {
            return Err(PyValueError::new_err(format!(
                "Protocol message has no oneof \"{name}\" field."
            )));
        }
        let p = slf.get().read_ptr(slf.py())?;
        // SAFETY: a live message of `info`'s type.
        Ok(members
            .iter()
            .find(|f| unsafe { f.has.expect("oneof members are singular")(p) })
            .map(|f| f.name))
    }

    /// Clears every field.
    #[allow(non_snake_case)]
    fn Clear(slf: &Bound<'_, Self>) -> PyResult<()> {
        let info = slf.get().info;
        // SAFETY: the default instance of the type.
        let empty = unsafe { (info.ops.clone_box)((info.default)()) };
        replace_with(slf, empty)
    }

    /// Replaces the content by a copy of `other` (same class).
    #[allow(non_snake_case)]
    fn CopyFrom(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<()> {
        copy_from(slf, other)
    }

    /// Merges a copy of `other` (same class): scalars set in `other` overwrite, repeated fields
    /// are appended, sub-messages merged.
    #[allow(non_snake_case)]
    fn MergeFrom(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<()> {
        let info = slf.get().info;
        let copy = owned_copy(other, info, "MergeFrom")?;
        merge_with(slf, copy)
    }

    /// The encoded message (byte-identical to protobuf's), encoded without the GIL.
    #[allow(non_snake_case)]
    #[pyo3(signature = (**_kwargs))]
    fn SerializeToString<'py>(
        slf: &Bound<'py, Self>,
        _kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        serialize_released(slf)
    }

    /// Same as `SerializeToString` (every ONNX message is always initialized).
    #[allow(non_snake_case)]
    #[pyo3(signature = (**_kwargs))]
    fn SerializePartialToString<'py>(
        slf: &Bound<'py, Self>,
        _kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        Self::SerializeToString(slf, None)
    }

    /// Replaces the content by the message parsed from `data` (parsed without the GIL);
    /// returns the number of bytes read. Raises `DecodeError` (a `ValueError`) on bad input.
    #[allow(non_snake_case)]
    fn ParseFromString(slf: &Bound<'_, Self>, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let bytes = BytesArg::from_py(data)?;
        let parsed = parse_released(slf.py(), slf.get().info, &bytes)?;
        replace_with(slf, parsed)?;
        Ok(bytes.as_slice().len())
    }

    /// Merges the message parsed from `data`; returns the number of bytes read.
    #[allow(non_snake_case)]
    fn MergeFromString(slf: &Bound<'_, Self>, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let info = slf.get().info;
        let bytes = BytesArg::from_py(data)?;
        let parsed = parse_released(slf.py(), info, &bytes)?;
        merge_with(slf, parsed)?;
        Ok(bytes.as_slice().len())
    }

    /// A new message parsed from `data`.
    #[allow(non_snake_case)]
    #[classmethod]
    fn FromString<'py>(
        cls: &Bound<'py, PyType>,
        data: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let obj = cls.call0()?;
        obj.call_method1("ParseFromString", (data,))?;
        Ok(obj)
    }

    /// Size of the encoded message in bytes.
    #[allow(non_snake_case)]
    fn ByteSize(slf: &Bound<'_, Self>) -> PyResult<u64> {
        let p = slf.get().read_ptr(slf.py())?;
        // SAFETY: a live message of the view's type.
        Ok(unsafe { (slf.get().info.ops.encoded_len)(p) })
    }

    /// Marks the message set in its parent (an unset sub-message becomes set, empty), as
    /// protobuf's `SetInParent` (what `json_format` and `text_format` parsing call).
    #[allow(non_snake_case)]
    fn SetInParent(slf: &Bound<'_, Self>) -> PyResult<()> {
        Message::resolve_write(slf)?;
        Ok(())
    }

    /// Always True (ONNX messages have no required fields).
    #[allow(non_snake_case)]
    fn IsInitialized(&self) -> bool {
        true
    }

    /// `(FieldDescriptor, value)` pairs of the fields that are set, by field number.
    #[allow(non_snake_case)]
    fn ListFields<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyList>> {
        let py = slf.py();
        let info = slf.get().info;
        let p = slf.get().read_ptr(py)?;
        let mut set: Vec<_> = info
            .fields
            .iter()
            .filter(|f| {
                // SAFETY: a live message of `info`'s type (read before any Python object is made).
                unsafe {
                    match (&f.kind, f.has) {
                        (_, Some(has)) => has(p),
                        (FieldKind::RepeatedScalar(l), None) => (l.raw_len)(p) > 0,
                        (FieldKind::RepeatedMessage(l), None) => (l.len)(p) > 0,
                        _ => false,
                    }
                }
            })
            .collect();
        set.sort_by_key(|f| f.number);
        let mut out = Vec::with_capacity(set.len());
        for f in set {
            let d = Py::new(
                py,
                FieldDescriptor {
                    name: f.name,
                    number: f.number,
                    full_name: format!("onnx.{}.{}", info.name, f.name),
                },
            )?;
            out.push(PyTuple::new(py, [d.into_any(), (f.get)(slf)?])?);
        }
        PyList::new(py, out)
    }

    fn __eq__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let info = slf.get().info;
        let a = slf.get().read_ptr(py)?;
        let eq = match other.cast::<Message>() {
            Ok(o) if o.get().info.tag == info.tag => {
                let b = o.get().read_ptr(py)?;
                // SAFETY: two live messages of `info`'s type (reading only).
                unsafe { (info.ops.eq)(a, b) }
            }
            Ok(_) => return Ok(py.NotImplemented()),
            // The onnx package's message of the same type: compared by content.
            Err(_) => match crate::foreign::foreign_box(other, info)? {
                Some(b) => {
                    let a = slf.get().read_ptr(py)?;
                    let b = &*b as *const (dyn Any + Send + Sync) as *const ();
                    // SAFETY: two live messages of `info`'s type (reading only).
                    unsafe { (info.ops.eq)(a, b) }
                }
                None => return Ok(py.NotImplemented()),
            },
        };
        Ok(eq.into_pyobject(py)?.to_owned().into_any().unbind())
    }

    fn __hash__(&self) -> PyResult<isize> {
        Err(PyTypeError::new_err(format!(
            "unhashable type: '{}'",
            py_name(self.info)
        )))
    }

    /// The full text format.
    fn __str__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let p = slf.get().read_ptr(slf.py())?;
        let mut out = TextOut::full();
        // SAFETY: a live message of the view's type.
        unsafe { (slf.get().info.ops.text)(p, &mut out) };
        Ok(out.buf)
    }

    /// The text format with long values shortened and at most ~4 KB of it.
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let p = slf.get().read_ptr(slf.py())?;
        let mut out = TextOut::short(64, 4096);
        // SAFETY: a live message of the view's type.
        unsafe { (slf.get().info.ops.text)(p, &mut out) };
        let name = py_name(slf.get().info);
        let body = out.buf.trim_end();
        let more = if out.truncated { "\n..." } else { "" };
        Ok(if body.is_empty() {
            format!("{name}()")
        } else {
            format!("{name}(\n{body}{more}\n)")
        })
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let cls = slf.get_type();
        let from = cls.getattr("FromString")?;
        let data = Self::SerializeToString(slf, None)?;
        PyTuple::new(py, [from, PyTuple::new(py, [data])?.into_any()])
    }

    fn __copy__(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let p = slf.get().read_ptr(slf.py())?;
        // SAFETY: a live message of the view's type.
        unsafe { (slf.get().info.ops.new_owning)(slf.py(), p) }
    }

    fn __deepcopy__(slf: &Bound<'_, Self>, _memo: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        Self::__copy__(slf)
    }
}
