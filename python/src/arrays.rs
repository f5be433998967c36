//! Zero-copy tensor bytes for NumPy: `RawBuffer` exposes bytes kept alive by an owner token
//! through `__array_interface__` (read-only), so `numpy.asarray(buf)` is a view whose base keeps
//! the token, valid after the model is gone. Also the copies of typed fields (`float_data`, ...)
//! and DLPack export.

use std::ffi::{CStr, c_void};
use std::sync::Arc;

use onnx_light::proto::{ModelProto, TensorProto};
use onnx_light::{LoadOptions, Owner, ParseOptions};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::IntoPyResult;
use crate::ops::{self, Msg};
use crate::root::SendPtr;
use crate::view::Message;

/// Bytes kept alive by an owner token, as a read-only NumPy array interface (`|u1`, 1-D).
#[pyclass(frozen, module = "onnx_light")]
pub struct RawBuffer {
    _owner: Owner,
    ptr: SendPtr<u8>,
    len: usize,
}

impl RawBuffer {
    /// A buffer over `bytes`, which `owner` keeps alive and nobody modifies.
    pub fn shared(owner: Owner, bytes: &[u8]) -> RawBuffer {
        RawBuffer {
            _owner: owner,
            ptr: SendPtr(bytes.as_ptr()),
            len: bytes.len(),
        }
    }

    fn copied<T: Copy + Send + Sync + 'static>(v: Vec<T>) -> RawBuffer {
        let len = std::mem::size_of_val(v.as_slice());
        let v = Arc::new(v);
        let ptr = SendPtr(v.as_ptr() as *const u8);
        RawBuffer {
            _owner: v,
            ptr,
            len,
        }
    }
}

// SAFETY: the bytes are immutable (shared spans are never written) and kept alive by `_owner`,
// an `Arc` of `Send + Sync` storage.
unsafe impl Sync for RawBuffer {}

#[pymethods]
impl RawBuffer {
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("shape", (self.len,))?;
        d.set_item("typestr", "|u1")?;
        d.set_item("data", (self.ptr.0 as usize, true))?;
        d.set_item("version", 3)?;
        Ok(d)
    }

    fn __len__(&self) -> usize {
        self.len
    }
}

fn tensor_view<'py>(t: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Message>> {
    crate::foreign::as_message(t, TensorProto::INFO, "")
}

/// Makes the bytes of `span` shareable (owned bytes move into shared storage, not copied) and
/// returns their owner token; bytes borrowed without an owner are copied first.
pub fn share(span: &mut onnx_light::ByteSpan) -> Owner {
    match span.share() {
        Some(o) => o,
        None => {
            *span = onnx_light::ByteSpan::from_vec(span.as_slice().to_vec());
            span.share().expect("owned bytes can be shared")
        }
    }
}

/// The `raw_data` of a tensor as a zero-copy buffer, or None when it has none. Owned bytes are
/// moved (not copied) into shared storage first, so they outlive the model; later writes to the
/// tensor copy them first and never change what the buffer shows.
#[pyfunction]
pub fn tensor_raw_buffer(t: &Bound<'_, PyAny>) -> PyResult<Option<RawBuffer>> {
    let v = tensor_view(t)?;
    let (m, _root) = ops::write::<TensorProto>(&v)?;
    if !m.has_raw_data() {
        return Ok(None);
    }
    let span = m.mutable_raw_data();
    let owner = share(span);
    Ok(Some(RawBuffer {
        _owner: owner,
        ptr: SendPtr(span.as_slice().as_ptr()),
        len: span.len(),
    }))
}

/// A copy of a typed field of a tensor (`float_data`, `int32_data`, `int64_data`,
/// `double_data`, `uint64_data`) as a buffer of its little-endian bytes.
#[pyfunction]
pub fn tensor_field_buffer(t: &Bound<'_, PyAny>, field: &str) -> PyResult<RawBuffer> {
    let v = tensor_view(t)?;
    let m = ops::read::<TensorProto>(&v)?;
    Ok(match field {
        "float_data" => RawBuffer::copied(m.float_data().to_vec()),
        "int32_data" => RawBuffer::copied(m.int32_data().to_vec()),
        "int64_data" => RawBuffer::copied(m.int64_data().to_vec()),
        "double_data" => RawBuffer::copied(m.double_data().to_vec()),
        "uint64_data" => RawBuffer::copied(m.uint64_data().to_vec()),
        other => return Err(PyValueError::new_err(format!("not a typed field: {other}"))),
    })
}

/// The external data of a tensor (not loaded into it), read through the library's external-data
/// loader (path rules, range checks, memory map) relative to `base_dir`, as a zero-copy buffer.
#[pyfunction]
pub fn tensor_external_buffer(
    py: Python<'_>,
    t: &Bound<'_, PyAny>,
    base_dir: std::path::PathBuf,
) -> PyResult<RawBuffer> {
    let v = tensor_view(t)?;
    let m = ops::read::<TensorProto>(&v)?;
    let mut copy = m.clone();
    copy.clear_raw_data();
    let mut model = ModelProto::new();
    model.mutable_graph().mutable_initializer().push(copy);
    let opts = LoadOptions::from(ParseOptions {
        no_copy: true,
        ..Default::default()
    });
    py.detach(|| onnx_light::load_external_data_for_model(&mut model, &base_dir, &opts))
        .py()?;
    let t = &mut model.mutable_graph().mutable_initializer()[0];
    if !t.has_raw_data() {
        return Err(PyValueError::new_err("the tensor has no external data"));
    }
    let span = t.mutable_raw_data();
    let owner = span.share().expect("loaded bytes have an owner");
    Ok(RawBuffer {
        _owner: owner,
        ptr: SendPtr(span.as_slice().as_ptr()),
        len: span.len(),
    })
}

const DLTENSOR: &CStr = c"dltensor";
const DLTENSOR_VERSIONED: &CStr = c"dltensor_versioned";

unsafe extern "C" fn capsule_destructor(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: called by Python with a capsule made by `tensor_dlpack`. A consumer renames the
    // capsule ("used_dltensor...") and takes over the tensor; only an unused one is freed here.
    unsafe {
        for name in [DLTENSOR_VERSIONED, DLTENSOR] {
            if pyo3::ffi::PyCapsule_IsValid(capsule, name.as_ptr()) == 1 {
                let p = pyo3::ffi::PyCapsule_GetPointer(capsule, name.as_ptr());
                free_managed(p, name);
            }
        }
    }
}

/// `TensorProto.__dlpack__`: a DLPack capsule of the tensor's bytes (zero-copy for `raw_data`,
/// read-only; typed fields are copied). `max_version >= (1, 0)` gives a versioned capsule.
#[pyfunction]
#[pyo3(signature = (t, max_version = None, copy = None))]
pub fn tensor_dlpack(
    py: Python<'_>,
    t: &Bound<'_, PyAny>,
    max_version: Option<(u32, u32)>,
    copy: Option<bool>,
) -> PyResult<Py<PyAny>> {
    use onnx_light::dlpack::{CopyMode, ExportOptions};
    let v = tensor_view(t)?;
    let opts = ExportOptions {
        copy: match copy {
            Some(true) => CopyMode::Always,
            Some(false) => CopyMode::Never,
            None => CopyMode::IfNeeded,
        },
    };
    let (m, _root) = ops::write::<TensorProto>(&v)?;
    let (ptr, name): (*mut c_void, &CStr) = if max_version.is_some_and(|(major, _)| major >= 1) {
        let d = onnx_light::dlpack::to_dlpack_versioned(m, &opts).py()?;
        (d.into_raw().cast(), DLTENSOR_VERSIONED)
    } else {
        let d = onnx_light::dlpack::to_dlpack(m, &opts).py()?;
        (d.into_raw().cast(), DLTENSOR)
    };
    // SAFETY: `ptr` is a managed tensor this capsule now owns (freed by the destructor unless a
    // consumer takes it); the name is a static string.
    let cap = unsafe { pyo3::ffi::PyCapsule_New(ptr, name.as_ptr(), Some(capsule_destructor)) };
    if cap.is_null() {
        // SAFETY: the capsule was not made: free the tensor here.
        unsafe { free_managed(ptr, name) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference.
    Ok(unsafe { Bound::from_owned_ptr(py, cap) }.unbind())
}

/// Frees a managed tensor that no capsule owns.
unsafe fn free_managed(ptr: *mut c_void, name: &CStr) {
    // SAFETY: `ptr` is a managed tensor of the kind `name` says, owned by nobody else.
    unsafe {
        if name == DLTENSOR_VERSIONED {
            let p = ptr as *mut onnx_light::dlpack::DLManagedTensorVersioned;
            if let Some(d) = (*p).deleter {
                d(p)
            }
        } else {
            let p = ptr as *mut onnx_light::dlpack::DLManagedTensor;
            if let Some(d) = (*p).deleter {
                d(p)
            }
        }
    }
}
