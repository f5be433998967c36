//! Generic building blocks of the generated field accessors: reading and writing a message
//! through its view, Python ↔ Rust value conversions, and the type-erased [`MsgOps`] of each
//! message type.

use std::any::Any;
use std::sync::Arc;

use pyo3::BoundObject;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::root::{Root, Tag};
use crate::schema::{MsgInfo, MsgOps};
use crate::text::TextOut;
use crate::view::{Ctx, Message, Walk, view_of};

/// What the generated code adds to every message type.
pub trait Msg: onnx_light::Message + Walk + PartialEq {
    /// The class description.
    const INFO: &'static MsgInfo;
    /// The index in the type table.
    const TAG: Tag;
    /// The default instance.
    fn default_ref() -> &'static Self;
    /// protobuf's `MergeFrom`: `src` is a copy (never aliases `dst`).
    fn merge(ctx: &Ctx<'_>, dst: &mut Self, src: Self);
    /// Text format of the fields.
    fn text(&self, out: &mut TextOut);
}

/// The message of a view, for reading. The reference must not be kept across anything that may
/// run Python code (see the module docs of `view`).
#[inline]
pub fn read<'a, M: Msg>(s: &Bound<'_, Message>) -> PyResult<&'a M> {
    let p = s.get().read_ptr(s.py())?;
    // SAFETY: the view's address is a live `M` (its class is `M`'s); the root is not being
    // written (checked by `read_ptr`).
    Ok(unsafe { &*(p as *const M) })
}

/// The message of a view, for reading, with its root (None: an unset sub-message, read as
/// the default instance).
#[inline]
pub fn read_with_root<'a, M: Msg>(s: &Bound<'_, Message>) -> PyResult<(&'a M, Option<Arc<Root>>)> {
    let (p, root) = s.get().resolve_read(s.py())?;
    // SAFETY: as `read`.
    Ok((unsafe { &*(p as *const M) }, root.cloned()))
}

/// The message of a view, for writing, with its root.
#[inline]
pub fn write<'a, M: Msg>(s: &Bound<'_, Message>) -> PyResult<(&'a mut M, Arc<Root>)> {
    let (p, root) = Message::resolve_write(s)?;
    // SAFETY: the view's address is a live `M`; the root is idle and the GIL is held, so nothing
    // else accesses it; callers do not keep the reference across Python code.
    Ok((unsafe { &mut *(p as *mut M) }, root))
}

/// The address of a value, as registry keys use it.
#[inline]
pub fn addr<T>(v: &T) -> usize {
    v as *const T as usize
}

// ---- Python → Rust conversions (run before resolving a view: they may call Python code)

fn out_of_range(v: &Bound<'_, PyAny>) -> PyErr {
    PyValueError::new_err(format!("Value out of range: {v}"))
}

/// An `int64` field value.
pub fn to_i64(v: &Bound<'_, PyAny>) -> PyResult<i64> {
    check_int(v)?;
    v.extract::<i64>().map_err(|_| out_of_range(v))
}
/// An `int32` field value.
pub fn to_i32(v: &Bound<'_, PyAny>) -> PyResult<i32> {
    check_int(v)?;
    v.extract::<i32>().map_err(|_| out_of_range(v))
}
/// A `uint64` field value.
pub fn to_u64(v: &Bound<'_, PyAny>) -> PyResult<u64> {
    check_int(v)?;
    v.extract::<u64>().map_err(|_| out_of_range(v))
}
/// A closed enum value (one of `values`).
pub fn to_enum(v: &Bound<'_, PyAny>, values: &[i32]) -> PyResult<i32> {
    let x = to_i32(v)?;
    if values.contains(&x) {
        Ok(x)
    } else {
        Err(PyValueError::new_err(format!("invalid enumerator {x}")))
    }
}
fn check_int(v: &Bound<'_, PyAny>) -> PyResult<()> {
    if v.is_instance_of::<pyo3::types::PyInt>() || v.hasattr("__index__")? {
        Ok(())
    } else {
        Err(PyTypeError::new_err(format!(
            "'{}' object cannot be interpreted as an integer",
            v.get_type().name()?
        )))
    }
}
/// A `float` field value.
pub fn to_f32(v: &Bound<'_, PyAny>) -> PyResult<f32> {
    Ok(to_f64(v)? as f32)
}
/// A `double` field value.
pub fn to_f64(v: &Bound<'_, PyAny>) -> PyResult<f64> {
    if v.is_instance_of::<PyString>() || v.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(format!(
            "must be real number, not {}",
            v.get_type().name()?
        )));
    }
    v.extract::<f64>()
}
/// A `string` field value: `str` (UTF-8; lone surrogates from `surrogateescape` give back the
/// bytes they stand for) or `bytes`.
pub fn to_str_bytes(v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(s) = v.cast::<PyString>() {
        if let Ok(t) = s.to_cow() {
            return Ok(t.as_bytes().to_vec());
        }
        let b = s.call_method1("encode", ("utf-8", "surrogateescape"))?;
        return Ok(b.cast::<PyBytes>()?.as_bytes().to_vec());
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    Err(PyTypeError::new_err(format!(
        "{} has type {}, but expected one of: bytes, str",
        v.repr()?,
        v.get_type().name()?
    )))
}
/// A `bytes` field value: any bytes-like object (or `str`, encoded as UTF-8).
pub fn to_bytes(v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if v.is_instance_of::<PyString>() {
        return to_str_bytes(v);
    }
    if let Ok(b) = v.extract::<Vec<u8>>() {
        return Ok(b);
    }
    match v.call_method0("__bytes__") {
        Ok(b) => Ok(b.cast::<PyBytes>()?.as_bytes().to_vec()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{} has type {}, but expected one of: bytes",
            v.repr()?,
            v.get_type().name()?
        ))),
    }
}

// ---- Rust → Python

/// A `string` field as `str` (invalid UTF-8 bytes become lone surrogates, `surrogateescape`).
#[inline]
pub fn py_str(py: Python<'_>, b: &[u8]) -> PyResult<Py<PyAny>> {
    if let Ok(s) = std::str::from_utf8(b) {
        return Ok(PyString::new(py, s).into_any().unbind());
    }
    let bytes = PyBytes::new(py, b);
    Ok(bytes
        .call_method1("decode", ("utf-8", "surrogateescape"))?
        .unbind())
}

/// A `bytes` field as `bytes`.
#[inline]
pub fn py_bytes(py: Python<'_>, b: &[u8]) -> Py<PyAny> {
    PyBytes::new(py, b).into_any().unbind()
}

/// A scalar as a Python object.
#[inline]
pub fn py_val<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: T) -> PyResult<Py<PyAny>> {
    v.into_pyobject(py)
        .map(|b| b.into_any().unbind())
        .map_err(Into::into)
}

/// A `float` (f32) field as a Python float.
#[inline]
pub fn py_f32(py: Python<'_>, v: f32) -> PyResult<Py<PyAny>> {
    py_val(py, v as f64)
}

// ---- generic accessors used by the generated code

/// Getter of a scalar field.
#[inline]
pub fn get_with<M: Msg>(
    s: &Bound<'_, Message>,
    f: impl FnOnce(Python<'_>, &M) -> PyResult<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let m = read::<M>(s)?;
    f(s.py(), m)
}

/// Setter of a scalar field: converts, then writes.
#[inline]
pub fn set_with<M: Msg, T>(
    s: &Bound<'_, Message>,
    v: &Bound<'_, PyAny>,
    conv: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<T>,
    f: impl FnOnce(&Ctx<'_>, &mut M, T),
) -> PyResult<()> {
    let v = conv(v)?;
    let (m, root) = write::<M>(s)?;
    f(
        &Ctx {
            py: s.py(),
            root: &root,
        },
        m,
        v,
    );
    Ok(())
}

/// Getter of a sub-message field: the view of the sub-message, or a lazy view when unset.
pub fn get_message<M: Msg>(
    s: &Bound<'_, Message>,
    field: &'static crate::view::SubField,
    child: &'static MsgInfo,
) -> PyResult<Py<PyAny>> {
    let py = s.py();
    let (p, root) = s.get().resolve_read(py)?;
    // SAFETY: `p` is a live `M` (or its default).
    let c = unsafe { (field.get)(p) };
    match root {
        Some(root) if !c.is_null() => view_of(py, &root.clone(), c as *mut (), child),
        _ => crate::view::lazy_view(py, s, field, child),
    }
}

// ---- type-erased operations of a message type

unsafe fn encoded_len<M: Msg>(p: *const ()) -> u64 {
    // SAFETY: the caller passes a live `M`.
    unsafe { &*(p as *const M) }.encoded_len()
}
unsafe fn serialize<M: Msg>(
    p: *const (),
    opts: &onnx_light::SerializeOptions,
    alloc: &mut crate::schema::AllocOut<'_>,
) -> onnx_light::Result<()> {
    // SAFETY: the caller passes a live `M`.
    serialize_with_alloc(unsafe { &*(p as *const M) }, opts, alloc)
}

/// Serializes `m` into the buffer `alloc` gives for its size.
pub fn serialize_with_alloc<M: onnx_light::Message>(
    m: &M,
    opts: &onnx_light::SerializeOptions,
    alloc: &mut crate::schema::AllocOut<'_>,
) -> onnx_light::Result<()> {
    onnx_light::serialize_into(m, opts, |len| {
        let out = alloc(len)?;
        // SAFETY: `alloc` returns `len` writable bytes that nothing else uses until this returns.
        Ok(unsafe { std::slice::from_raw_parts_mut(out, len) })
    })
}
fn parse<M: Msg>(
    b: &[u8],
    opts: &onnx_light::ParseOptions,
) -> onnx_light::Result<Box<dyn Any + Send + Sync>> {
    Ok(Box::new(onnx_light::parse_from_bytes::<M>(b, opts)?))
}
unsafe fn replace<M: Msg>(ctx: &Ctx<'_>, dst: *mut (), src: Box<dyn Any + Send + Sync>) {
    let src = src.downcast::<M>().expect("replace with the same type");
    // SAFETY: the caller passes a live, writable `M`.
    let dst = unsafe { &mut *(dst as *mut M) };
    let at = addr(dst);
    let old = std::mem::replace(dst, *src);
    ctx.detach_except(old, at, Some((at, M::TAG)));
}
unsafe fn clone_box<M: Msg>(p: *const ()) -> Box<dyn Any + Send + Sync> {
    // SAFETY: the caller passes a live `M`.
    Box::new(unsafe { &*(p as *const M) }.clone())
}
unsafe fn merge<M: Msg>(ctx: &Ctx<'_>, dst: *mut (), src: Box<dyn Any + Send + Sync>) {
    let src = src.downcast::<M>().expect("merge with the same type");
    // SAFETY: the caller passes a live, writable `M`.
    M::merge(ctx, unsafe { &mut *(dst as *mut M) }, *src);
}
unsafe fn eq<M: Msg>(a: *const (), b: *const ()) -> bool {
    // SAFETY: the caller passes two live `M`s.
    unsafe { *(a as *const M) == *(b as *const M) }
}
unsafe fn text<M: Msg>(p: *const (), out: &mut TextOut) {
    // SAFETY: the caller passes a live `M`.
    unsafe { &*(p as *const M) }.text(out)
}
unsafe fn new_owning<M: Msg>(py: Python<'_>, p: *const ()) -> PyResult<Py<PyAny>> {
    // SAFETY: the caller passes a live `M`.
    let copy = Box::new(unsafe { &*(p as *const M) }.clone());
    crate::view::owning_view(py, copy, M::INFO)
}

/// The operations of `M`.
pub const fn ops_of<M: Msg>() -> MsgOps {
    MsgOps {
        encoded_len: encoded_len::<M>,
        serialize: serialize::<M>,
        parse: parse::<M>,
        replace: replace::<M>,
        clone_box: clone_box::<M>,
        merge: merge::<M>,
        eq: eq::<M>,
        text: text::<M>,
        new_owning: new_owning::<M>,
    }
}

/// Detaches the value of `slot` (a sub-message field, a oneof, a repeated field) and leaves it
/// empty.
#[inline]
pub fn take_detach<V: Walk + Default + Send + Sync + 'static>(ctx: &Ctx<'_>, slot: &mut V) {
    let at = addr(slot);
    let old = std::mem::take(slot);
    ctx.detach(old, at);
}

/// Detaches `taken`, a sub-message just taken out of its message (`take_x()`), whose address
/// there was `at` (read before the take).
#[inline]
pub fn detach_taken<M: Walk + Send + Sync + 'static>(
    ctx: &Ctx<'_>,
    at: Option<usize>,
    taken: Option<M>,
) {
    if let (Some(at), Some(old)) = (at, taken) {
        ctx.detach(old, at);
    }
}
