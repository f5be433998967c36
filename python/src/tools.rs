//! Thin wrappers of the library's model operations: external data (load into a model, check,
//! consolidate), encrypted files, parameter dictionaries, pre-packed blobs, and the split of a
//! model into metadata + large payloads that `to_onnx` uses. Each runs without the GIL.

use std::path::PathBuf;

use onnx_light::Message as _;
use onnx_light::proto::{ModelProto, TensorProto};
use onnx_light::{LoadOptions, ParseOptions, TensorBufferOptions};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::arrays::{RawBuffer, share};
use crate::bytes_io::BytesArg;
use crate::errors::IntoPyResult;
use crate::ops::{self, Msg};
use crate::root::SendPtr;
use crate::view::{Ctx, Message, owning_view};

/// The view of a ModelProto (a new one with the content of an onnx package's ModelProto).
pub(crate) fn model_view<'py>(model: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Message>> {
    crate::foreign::as_message(model, ModelProto::INFO, "")
}

/// Runs `f` on the model of `model` without the GIL, as the only user of its root (every
/// Python access waits meanwhile). Views of `external_data` entries are detached first (the
/// loaders replace those lists).
fn with_model_mut<R: Send>(
    model: &Bound<'_, PyAny>,
    f: impl FnOnce(&mut ModelProto) -> onnx_light::Result<R> + Send,
) -> PyResult<R> {
    with_model_mut_plain(model, f)?.py()
}

/// [`with_model_mut`] for any result of `f`.
pub(crate) fn with_model_mut_plain<R: Send>(
    model: &Bound<'_, PyAny>,
    f: impl FnOnce(&mut ModelProto) -> R + Send,
) -> PyResult<R> {
    let py = model.py();
    let view = model_view(model)?;
    let (m, root) = ops::write::<ModelProto>(&view)?;
    if !root.registry(py).is_empty() {
        let ctx = Ctx { py, root: &root };
        m.visit_tensors_mut(&mut |t: &mut TensorProto| {
            if !t.external_data().is_empty() {
                let copy = t.external_data().clone();
                ops::take_detach(&ctx, t.mutable_external_data());
                *t.mutable_external_data() = copy;
            }
        });
    }
    let busy = root.begin_write(py);
    let p = SendMutModel(m as *mut ModelProto);
    let r = py.detach(move || {
        let p = p;
        // SAFETY: the root is marked busy by a writer: no other code reads or writes the model
        // until `busy` drops.
        f(unsafe { &mut *p.0 })
    });
    drop(busy);
    // An onnx package's model gets the result (an in-place operation on it).
    crate::foreign::write_back(model, &view)?;
    Ok(r)
}

/// Runs `f` on the model of `model` without the GIL, its root marked busy for reading (Python
/// may read the model meanwhile; writes wait).
pub fn with_model<R: Send>(
    model: &Bound<'_, PyAny>,
    f: impl FnOnce(&ModelProto) -> R + Send,
) -> PyResult<R> {
    let py = model.py();
    let (m, root) = ops::read_with_root::<ModelProto>(&model_view(model)?)?;
    let _busy = root.map(|r| r.begin_read(py));
    let p = SendPtr(m as *const ModelProto);
    Ok(py.detach(move || {
        let p = p;
        // SAFETY: the root is marked busy (read) until `_busy` drops (or the message is the
        // static default instance of an unset sub-message, which nothing writes).
        f(unsafe { &*p.0 })
    }))
}

struct SendMutModel(*mut ModelProto);
// SAFETY: carries the model pointer into `Python::detach` while its root is marked busy by a
// writer (see `with_model_mut`); `ModelProto` is `Send`.
unsafe impl Send for SendMutModel {}

/// Loads the external data of a model in place (`onnx.load_external_data_for_model`).
#[pyfunction]
#[pyo3(signature = (model, base_dir, *, no_copy = false, verify_checksums = false))]
pub fn load_external_data_for_model(
    model: &Bound<'_, PyAny>,
    base_dir: PathBuf,
    no_copy: bool,
    verify_checksums: bool,
) -> PyResult<usize> {
    let opts = LoadOptions {
        verify_external_checksums: verify_checksums,
        ..LoadOptions::from(ParseOptions {
            no_copy,
            ..Default::default()
        })
    };
    with_model_mut(model, move |m| {
        onnx_light::load_external_data_for_model(m, &base_dir, &opts).map(|r| r.tensors)
    })
}

/// Reads the bytes of the external tensors of a model in place and keeps their references
/// (the library's `populate_external_data`); returns the tensors read.
#[pyfunction]
#[pyo3(signature = (model, base_dir, *, no_copy = false))]
pub fn populate_external_data(
    model: &Bound<'_, PyAny>,
    base_dir: PathBuf,
    no_copy: bool,
) -> PyResult<usize> {
    let opts = LoadOptions::from(ParseOptions {
        no_copy,
        ..Default::default()
    });
    with_model_mut(model, move |m| {
        onnx_light::external::populate_external_data(m, &base_dir, &opts)
    })
}

/// Drops the bytes of the external tensors of a model in place, keeping their references (the
/// library's `clear_external_data`); returns the tensors cleared.
#[pyfunction]
pub fn clear_external_data(model: &Bound<'_, PyAny>) -> PyResult<usize> {
    with_model_mut(model, |m| Ok(onnx_light::external::clear_external_data(m)))
}

/// Whether a tensor of the model is marked external while holding its bytes (what onnx's save
/// writes to the tensor's file first).
#[pyfunction]
pub fn has_marked_external_bytes(model: &Bound<'_, PyAny>) -> PyResult<bool> {
    with_model(model, |m| {
        let mut found = false;
        m.visit_tensors(&mut |t| {
            found |= onnx_light::external::uses_external_data(t) && t.has_raw_data();
        });
        found
    })
}

/// Gives each tensor of `model` that `saved` (the metadata of the model as a save wrote it:
/// the same tensors in the same order) has external the entries and `data_location` of
/// `saved`'s, and drops its bytes: the model as onnx's save leaves it. Returns the tensors changed.
#[pyfunction]
pub fn adopt_external_references(
    model: &Bound<'_, PyAny>,
    saved: &Bound<'_, PyAny>,
) -> PyResult<usize> {
    let refs = with_model(saved, |m| {
        let mut refs = Vec::new();
        m.visit_tensors(&mut |t| {
            refs.push(
                onnx_light::external::uses_external_data(t)
                    .then(|| (t.external_data().clone(), t.data_location_opt())),
            );
        });
        refs
    })?;
    let (changed, seen) = with_model_mut_plain(model, move |m| {
        let (mut i, mut changed) = (0, 0);
        m.visit_tensors_mut(&mut |t| {
            if let Some(Some((entries, location))) = refs.get(i) {
                *t.mutable_external_data() = entries.clone();
                match location {
                    Some(v) => t.set_data_location(*v),
                    None => t.clear_data_location(),
                }
                t.clear_raw_data();
                changed += 1;
            }
            i += 1;
        });
        (changed, (i, refs.len()))
    })?;
    if seen.0 != seen.1 {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "the saved model has {} tensors, the model {}",
            seen.1, seen.0
        )));
    }
    Ok(changed)
}

/// Makes every external tensor of a model inline, in place, as onnx's
/// `convert_model_from_external_data`: each must hold its bytes (a `ValueError` names the first
/// that does not, and nothing is changed); its `external_data` entries go and `data_location`
/// becomes DEFAULT. Returns the tensors changed.
#[pyfunction]
pub fn convert_model_from_external_data(model: &Bound<'_, PyAny>) -> PyResult<usize> {
    let mut missing: Option<String> = None;
    with_model(model, |m| {
        m.visit_tensors(&mut |t| {
            if missing.is_none()
                && onnx_light::external::uses_external_data(t)
                && t.raw_data_opt().is_none()
            {
                missing = Some(t.name().to_string_lossy().into_owned());
            }
        })
    })?;
    if let Some(name) = missing {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "tensor '{name}': raw_data field doesn't exist (load its external data first)"
        )));
    }
    with_model_mut(model, |m| {
        let mut n = 0;
        m.visit_tensors_mut(&mut |t| {
            if onnx_light::external::uses_external_data(t) {
                t.mutable_external_data().clear();
                t.set_data_location(0);
                n += 1;
            }
        });
        Ok(n)
    })
}

/// Checks every external reference of a model without loading anything; returns a dict
/// (`tensors`, `bytes`, `files`, `checksums_verified`, `problems`: list of messages).
#[pyfunction]
#[pyo3(signature = (model, base_dir, *, verify_checksums = false))]
pub fn check_external_data<'py>(
    model: &Bound<'py, PyAny>,
    base_dir: PathBuf,
    verify_checksums: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let py = model.py();
    let report = with_model(model, move |m| {
        onnx_light::check_external_data(
            m,
            &base_dir,
            &LoadOptions::default(),
            verify_checksums,
            None,
        )
    })?;
    let d = PyDict::new(py);
    d.set_item("tensors", report.tensors)?;
    d.set_item("bytes", report.bytes)?;
    d.set_item("files", report.files.len())?;
    d.set_item("checksums_verified", report.checksums_verified)?;
    let problems: Vec<String> = report.problems.iter().map(|e| e.to_string()).collect();
    d.set_item("problems", PyList::new(py, problems)?)?;
    Ok(d)
}

/// Moves every payload of at least `threshold` bytes into one buffer at `alignment`-aligned
/// offsets (the tensors share it); returns the buffer size (0: no tensor qualified).
#[pyfunction]
#[pyo3(signature = (model, *, threshold = 0, alignment = 64))]
pub fn consolidate_tensors(
    model: &Bound<'_, PyAny>,
    threshold: u64,
    alignment: u64,
) -> PyResult<usize> {
    let opts = TensorBufferOptions {
        raw_data_threshold: threshold,
        alignment,
    };
    with_model_mut(model, move |m| {
        onnx_light::consolidate_tensors_to_buffer(m, &opts)
            .map(|b| b.map_or(0, |b| b.as_slice().len()))
    })
}

/// Encrypts a file (any content; models in ONNXCRYS chunks) from `input` to `output`.
#[pyfunction]
pub fn encrypt_file(
    py: Python<'_>,
    input: PathBuf,
    output: PathBuf,
    key: Vec<u8>,
) -> PyResult<u64> {
    py.detach(|| {
        onnx_light::crypto::encrypt_file(
            &input,
            &output,
            &key,
            &onnx_light::EncryptionOptions::default(),
        )
    })
    .py()
}

/// Decrypts a file written by `encrypt_file` (or any supported format) to `output`.
#[pyfunction]
pub fn decrypt_file(
    py: Python<'_>,
    input: PathBuf,
    output: PathBuf,
    key: Vec<u8>,
) -> PyResult<u64> {
    py.detach(|| onnx_light::crypto::decrypt_file(&input, &output, &key))
        .py()
}

/// Parses a TVM/CVM parameter dictionary into a list of TensorProto.
#[pyfunction]
pub fn load_params<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
    let bytes = BytesArg::from_py(data)?;
    let s = bytes.as_slice();
    let (ptr, len) = (SendPtr(s.as_ptr()), s.len());
    let tensors = py
        .detach(move || {
            let ptr = ptr;
            // SAFETY: `bytes` outlives this call and is not modified.
            onnx_light::params::load_params(unsafe { std::slice::from_raw_parts(ptr.0, len) })
        })
        .py()?;
    let views = tensors
        .into_iter()
        .map(|t| owning_view(py, Box::new(t), TensorProto::INFO))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, views)
}

/// Writes the initializers of a model (all, or those named) as a parameter dictionary.
#[pyfunction]
#[pyo3(signature = (model, names = None))]
pub fn save_params<'py>(
    model: &Bound<'py, PyAny>,
    names: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let py = model.py();
    let out = with_model(model, move |m| {
        let names: Option<Vec<&str>> = names
            .as_ref()
            .map(|v| v.iter().map(String::as_str).collect());
        onnx_light::params::save_params(m, names.as_deref())
    })?
    .py()?;
    Ok(PyBytes::new(py, &out))
}

/// Loads a model file with the ONNX Runtime pre-packed blobs of its weight files; returns
/// `(model, [(initializer, key, [buffer, ...]), ...])` with zero-copy buffers.
#[pyfunction]
#[pyo3(signature = (path, *, no_copy = false))]
pub fn load_with_prepacked<'py>(
    py: Python<'py>,
    path: PathBuf,
    no_copy: bool,
) -> PyResult<(Py<PyAny>, Bound<'py, PyList>)> {
    let opts = LoadOptions::from(ParseOptions {
        no_copy,
        ..Default::default()
    });
    let (model, mut blobs) = py
        .detach(|| onnx_light::load_model_with_prepacked(&path, &opts))
        .py()?;
    let mut out = Vec::new();
    let keys: Vec<(String, String)> = blobs
        .iter()
        .map(|(i, k, _)| (i.to_string(), k.to_string()))
        .collect();
    for (init, key) in keys {
        let blob = blobs.remove(&init, &key).expect("listed blob");
        let mut bufs = Vec::new();
        for mut span in blob.buffers {
            let owner = share(&mut span);
            bufs.push(Py::new(py, RawBuffer::shared(owner, span.as_slice()))?);
        }
        out.push((init, key, bufs));
    }
    let view = owning_view(py, Box::new(model), ModelProto::INFO)?;
    Ok((view, PyList::new(py, out)?))
}

/// The model serialized with every payload of at least `threshold` bytes left out and replaced
/// by a marker (`data_location` EXTERNAL, `external_data` {location: "onnx_light:N"}), with the
/// N-th payload as a zero-copy buffer: how `to_onnx` hands models over 2 GB to protobuf.
#[pyfunction]
pub fn split_large_payloads<'py>(
    model: &Bound<'py, PyAny>,
    threshold: usize,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyList>)> {
    let py = model.py();
    // Share the large payloads (a write: their storage becomes shareable; no bytes move).
    let view = model_view(model)?;
    let (m, _root) = ops::write::<ModelProto>(&view)?;
    let mut owners = Vec::new();
    m.visit_tensors_mut(&mut |t: &mut TensorProto| {
        if t.has_raw_data() && t.raw_data().len() >= threshold {
            let span = t.mutable_raw_data();
            let owner = share(span);
            owners.push((owner, SendPtr(span.as_slice().as_ptr()), span.len()));
        }
    });
    // A copy of the metadata (payloads shared, not copied) with markers instead of payloads.
    let mut copy = m.clone();
    let mut index = 0usize;
    copy.visit_tensors_mut(&mut |t: &mut TensorProto| {
        if t.raw_data_opt().is_some_and(|s| s.len() >= threshold) {
            t.clear_raw_data();
            t.set_data_location(1);
            let mut e = onnx_light::proto::StringStringEntryProto::new();
            e.set_key("location");
            e.set_value(format!("onnx_light:{index}"));
            t.mutable_external_data().clear();
            t.mutable_external_data().push(e);
            index += 1;
        }
    });
    let bytes = py.detach(move || copy.serialize_to_vec());
    let bufs = owners
        .into_iter()
        .map(|(o, p, len)| {
            // SAFETY: `p..p+len` are the shared bytes `o` keeps alive.
            Py::new(
                py,
                RawBuffer::shared(o, unsafe { std::slice::from_raw_parts(p.0, len) }),
            )
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok((PyBytes::new(py, &bytes), PyList::new(py, bufs)?))
}

/// The most bytes of freed load memory the library keeps for later loads.
#[pyfunction]
pub fn memory_reuse_limit() -> usize {
    onnx_light::memory_reuse_limit()
}

/// Sets the most bytes of freed load memory kept for later loads (0: none).
#[pyfunction]
pub fn set_memory_reuse_limit(nbytes: usize) {
    onnx_light::set_memory_reuse_limit(nbytes)
}

/// Bytes of freed load memory kept for reuse right now.
#[pyfunction]
pub fn memory_held_for_reuse() -> usize {
    onnx_light::memory_held_for_reuse()
}

/// Unmaps the freed load memory kept for reuse; returns the bytes released.
#[pyfunction]
pub fn release_memory_held_for_reuse(py: Python<'_>) -> usize {
    py.detach(onnx_light::release_memory_held_for_reuse)
}
