//! Messages to and from Python bytes: bytes-like arguments read in place or copied, parsing into
//! a boxed message and serializing straight into a `bytes` object, without the GIL when large.

use std::any::Any;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};

use crate::errors::IntoPyResult;
use crate::root::SendPtr;
use crate::schema::{AllocOut, MsgInfo};
use crate::view::Message;

/// The bytes of a bytes-like argument: `bytes` are read in place, anything else is copied.
pub enum BytesArg<'py> {
    Bytes(Bound<'py, PyBytes>),
    Owned(Vec<u8>),
}

impl BytesArg<'_> {
    /// Converts `v` (bytes, bytearray, memoryview or any buffer).
    pub fn from_py<'py>(v: &Bound<'py, PyAny>) -> PyResult<BytesArg<'py>> {
        if let Ok(b) = v.cast::<PyBytes>() {
            return Ok(BytesArg::Bytes(b.clone()));
        }
        if let Ok(b) = v.cast::<PyByteArray>() {
            return Ok(BytesArg::Owned(b.to_vec()));
        }
        // Any other object with the buffer protocol (memoryview, NumPy array, mmap, ...).
        let view = v.py().get_type::<pyo3::types::PyMemoryView>().call1((v,));
        match view.and_then(|m| m.call_method0("tobytes")) {
            Ok(b) => Ok(BytesArg::Owned(b.cast::<PyBytes>()?.as_bytes().to_vec())),
            Err(_) => Err(PyTypeError::new_err(format!(
                "expected a bytes-like object, got {}",
                v.get_type().name()?
            ))),
        }
    }

    /// The bytes (valid while `self` lives; `bytes` objects are immutable).
    pub fn as_slice(&self) -> &[u8] {
        match self {
            BytesArg::Bytes(b) => b.as_bytes(),
            BytesArg::Owned(v) => v,
        }
    }
}

/// Parses `data` as a message of `info`'s type (without the GIL when it is large).
pub fn parse_released(
    py: Python<'_>,
    info: &'static MsgInfo,
    data: &BytesArg<'_>,
) -> PyResult<Box<dyn Any + Send + Sync>> {
    let s = data.as_slice();
    let (ptr, len) = (SendPtr(s.as_ptr()), s.len());
    let parse = info.ops.parse;
    crate::gil::detach_if_large(py, len, move || {
        let ptr = ptr;
        // SAFETY: the bytes stay alive and unmodified while `data` (an immutable `bytes` object
        // or a private copy) lives, which outlasts this call.
        let bytes = unsafe { std::slice::from_raw_parts(ptr.0, len) };
        parse(bytes, &onnx_light::ParseOptions::default())
    })
    .py()
}

/// Serializes the message of `s` straight into a new `bytes` object (see
/// [`serialize_to_pybytes`] for the GIL).
pub fn serialize_released<'py>(s: &Bound<'py, Message>) -> PyResult<Bound<'py, PyBytes>> {
    let py = s.py();
    let info = s.get().info;
    let (p, root) = s.get().resolve_read(py)?;
    let ser = info.ops.serialize;
    let opts = onnx_light::SerializeOptions {
        num_threads: -1,
        ..Default::default()
    };
    let root = root.cloned();
    let _busy = root.as_ref().map(|r| r.begin_read(py));
    let p = SendPtr(p);
    // SAFETY: the root is marked busy: no Python code writes the message meanwhile (or the
    // message is the static default instance of its type, which nothing writes).
    serialize_to_pybytes(py, move |alloc| unsafe {
        let p = p;
        ser(p.0, &opts, alloc)
    })
}

/// Runs `serialize` and returns the `bytes` object it serialized into: its `alloc` argument
/// creates the object once the size is known, and the bytes are written in place, so a large
/// message is never held twice in memory. The size is computed with the GIL; the bytes are
/// written without it when there are at least `RELEASE_GIL_MIN_BYTES` of them.
pub fn serialize_to_pybytes<'py>(
    py: Python<'py>,
    serialize: impl FnOnce(&mut AllocOut<'_>) -> onnx_light::Result<()>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut made: Option<Bound<'py, PyAny>> = None;
    let mut released: Option<crate::gil::Released> = None;
    let result = {
        let mut alloc = |len: usize| -> onnx_light::Result<*mut u8> {
            let size = pyo3::ffi::Py_ssize_t::try_from(len)
                .map_err(|_| onnx_light::Error::alloc_failed(len, "a bytes object"))?;
            // SAFETY: a NULL source asks CPython for an uninitialized object of `size` bytes;
            // we own the returned reference (held by `made`).
            let o = unsafe { pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), size) };
            if o.is_null() {
                drop(PyErr::take(py));
                return Err(onnx_light::Error::alloc_failed(len, "a bytes object"));
            }
            // SAFETY: `o` is a new reference to a live `bytes` object.
            made = Some(unsafe { Bound::from_owned_ptr(py, o) });
            // SAFETY: its buffer has `size` bytes (+ a NUL), ours to write until it is returned.
            let buf = unsafe { pyo3::ffi::PyBytes_AsString(o) } as *mut u8;
            if len >= crate::gil::RELEASE_GIL_MIN_BYTES {
                // SAFETY: the GIL is held here; what runs until `released` is dropped below is
                // the library writing the bytes, which makes no Python call.
                released = Some(unsafe { crate::gil::Released::new() });
            }
            Ok(buf)
        };
        serialize(&mut alloc)
    };
    drop(released);
    result.py()?;
    let obj = made.ok_or_else(|| pyo3::exceptions::PySystemError::new_err("no output buffer"))?;
    Ok(obj.cast_into::<PyBytes>()?)
}
