//! The module functions: load, parse, save and serialize models (each without the GIL), the
//! library's external-data, encryption, parameter and pre-packed operations. The Python layer
//! (`onnx_light/__init__.py`) gives them the onnx package's names and keyword arguments.

use std::path::PathBuf;
use std::sync::Arc;

use onnx_light::proto::ModelProto;
use onnx_light::{LoadOptions, ParseOptions, SaveExternalOptions, SerializeOptions};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::bytes_io::{BytesArg, serialize_to_pybytes};
use crate::errors::IntoPyResult;
use crate::generated::{MESSAGE_INFOS, MODEL_PROTO_INFO};
use crate::ops::Msg;
use crate::root::{Root, SendPtr};
use crate::tools::with_model;
use crate::view::{Message, owning_view};

/// A `bytes` object as the owner of the bytes a no-copy parse borrows.
struct PyBytesOwner {
    _obj: Py<PyBytes>,
    ptr: SendPtr<u8>,
    len: usize,
}

impl AsRef<[u8]> for PyBytesOwner {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the bytes of a `bytes` object are immutable and live as long as the object,
        // which `_obj` keeps alive.
        unsafe { std::slice::from_raw_parts(self.ptr.0, self.len) }
    }
}
// SAFETY: the object is only kept alive (dropping a `Py` without the GIL defers the decref);
// the bytes are immutable.
unsafe impl Sync for PyBytesOwner {}

/// Options of the load functions.
fn load_options(
    no_copy: bool,
    num_threads: Option<i32>,
    load_external_data: bool,
    base_dir: Option<PathBuf>,
    alignment: Option<u64>,
) -> LoadOptions {
    let defaults = ParseOptions::default();
    LoadOptions {
        load_external_data,
        external_data_dir: base_dir,
        ..LoadOptions::from(ParseOptions {
            no_copy,
            num_threads: num_threads.unwrap_or(-1),
            alignment: alignment.unwrap_or(defaults.alignment),
            ..defaults
        })
    }
}

/// Keeps the first exception a progress callback raised (later ones are dropped), to be raised
/// when the operation is done.
fn keep_first_error<T>(failure: &std::sync::Mutex<Option<PyErr>>, result: PyResult<T>) {
    if let Err(e) = result {
        failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
    }
}

/// The owning view of a loaded model.
fn model_view(py: Python<'_>, m: ModelProto) -> PyResult<Py<PyAny>> {
    owning_view(py, Box::new(m), &MODEL_PROTO_INFO)
}

/// Loads a model file or URL (and its external data) without the GIL.
/// With `skip_raw_data`, payloads of at least 1 KiB are dropped (a remote model's are never
/// fetched). `progress` is called as `progress(bytes)` with the bytes of each piece done (see
/// `LoadProgress`: the file's size once parsed, then each piece of external data; each piece
/// received for a URL), from the loading threads with the GIL taken; what it raises is raised
/// when the load is done.
#[pyfunction]
#[pyo3(signature = (path, *, no_copy = false, num_threads = None, load_external_data = true, base_dir = None, key = None, alignment = None, skip_raw_data = false, progress = None, storage_options = None))]
#[allow(clippy::too_many_arguments)]
pub fn load_path(
    py: Python<'_>,
    path: PathBuf,
    no_copy: bool,
    num_threads: Option<i32>,
    load_external_data: bool,
    base_dir: Option<PathBuf>,
    key: Option<Vec<u8>>,
    alignment: Option<u64>,
    skip_raw_data: bool,
    progress: Option<Py<PyAny>>,
    storage_options: Option<Vec<(String, String)>>,
) -> PyResult<Py<PyAny>> {
    let failure: Arc<std::sync::Mutex<Option<PyErr>>> = Arc::default();
    let mut opts = LoadOptions {
        progress: progress.map(|cb| {
            let failure = failure.clone();
            onnx_light::LoadProgress::new(move |n: u64| {
                Python::attach(|py| keep_first_error(&failure, cb.call1(py, (n,))))
            })
        }),
        ..load_options(
            no_copy,
            num_threads,
            load_external_data,
            base_dir,
            alignment,
        )
    };
    opts.parse.skip_raw_data = skip_raw_data;
    let remote = remote_for(&path, storage_options)?.map(|ro| onnx_light::remote::RemoteOptions {
        progress: opts.progress.as_ref().map(|p| p.0.clone()),
        ..ro
    });
    let m = py
        .detach(|| {
            let url = path.to_string_lossy();
            match (key, &remote) {
                (Some(k), Some(ro)) => {
                    onnx_light::remote::load_encrypted_model(&url, &k, &opts, ro)
                }
                (None, Some(ro)) => onnx_light::remote::load_model(&url, &opts, ro),
                (Some(k), None) => onnx_light::load_encrypted_model(&path, &k, &opts),
                (None, None) => onnx_light::load_model(&path, &opts),
            }
        })
        .py()?;
    if let Some(e) = failure.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    model_view(py, m)
}

/// The remote options of a call on `path`: for a URL, the environment's, then `storage_options`
/// (see `RemoteOptions::with_options`); None for a local path, where `storage_options` is an
/// error.
fn remote_for(
    path: &std::path::Path,
    storage_options: Option<Vec<(String, String)>>,
) -> PyResult<Option<onnx_light::remote::RemoteOptions>> {
    if !onnx_light::remote::is_url(path) {
        return match storage_options {
            Some(_) => Err(pyo3::exceptions::PyValueError::new_err(
                "storage_options apply to s3://, http:// and https:// URLs only",
            )),
            None => Ok(None),
        };
    }
    onnx_light::remote::RemoteOptions::from_env()
        .and_then(|ro| ro.with_options(storage_options.unwrap_or_default()))
        .map(Some)
        .py()
}

/// Parses a message of class `cls` (default ModelProto) from bytes without the GIL; with
/// `no_copy`, tensors borrow from a `bytes` object (kept alive by the model's tensors).
#[pyfunction]
#[pyo3(signature = (data, *, cls = None, no_copy = false, num_threads = None, load_external_data = true, base_dir = None, key = None, alignment = None))]
#[allow(clippy::too_many_arguments)]
pub fn load_bytes(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    cls: Option<&Bound<'_, pyo3::types::PyType>>,
    no_copy: bool,
    num_threads: Option<i32>,
    load_external_data: bool,
    base_dir: Option<PathBuf>,
    key: Option<Vec<u8>>,
    alignment: Option<u64>,
) -> PyResult<Py<PyAny>> {
    let info = match cls {
        None => &MODEL_PROTO_INFO,
        Some(c) => MESSAGE_INFOS
            .iter()
            .copied()
            .find(|i| (i.class)(py).is(c))
            .ok_or_else(|| PyTypeError::new_err("cls must be a message class of onnx_light"))?,
    };
    let opts = load_options(
        no_copy,
        num_threads,
        load_external_data,
        base_dir,
        alignment,
    );
    let bytes = BytesArg::from_py(data)?;
    if info.tag != ModelProto::TAG {
        if key.is_some() {
            return Err(PyTypeError::new_err("only models can be encrypted"));
        }
        let s = bytes.as_slice();
        let (ptr, len) = (SendPtr(s.as_ptr()), s.len());
        let parse = info.ops.parse;
        let parsed = crate::gil::detach_if_large(py, len, move || {
            let ptr = ptr;
            // SAFETY: `bytes` (immutable `bytes` or a private copy) outlives this call.
            parse(
                unsafe { std::slice::from_raw_parts(ptr.0, len) },
                &opts.parse,
            )
        })
        .py()?;
        let (root, p) = Root::from_any(parsed);
        return (info.wrap)(py, Message::owning(root, p, info));
    }
    let m = match (&bytes, no_copy, key) {
        (BytesArg::Bytes(b), true, None) => {
            let s = b.as_bytes();
            let owner = Arc::new(PyBytesOwner {
                _obj: b.clone().unbind(),
                ptr: SendPtr(s.as_ptr()),
                len: s.len(),
            });
            py.detach(move || {
                let dir = opts.external_data_dir.clone();
                let mut m: ModelProto = onnx_light::parse_from_shared(owner, &opts.parse)?;
                if let (Some(d), true) = (dir, opts.load_external_data) {
                    onnx_light::load_external_data_for_model(&mut m, d, &opts)?;
                }
                Ok(m)
            })
            .py()?
        }
        (_, _, key) => {
            let s = bytes.as_slice();
            let (ptr, len) = (SendPtr(s.as_ptr()), s.len());
            // Decryption (key derivation) and external data (file reads) always release it.
            let work = match (&key, &opts.external_data_dir) {
                (None, None) => len,
                _ => usize::MAX,
            };
            crate::gil::detach_if_large(py, work, move || {
                let ptr = ptr;
                // SAFETY: `bytes` outlives this call and is not modified.
                let s = unsafe { std::slice::from_raw_parts(ptr.0, len) };
                match key {
                    Some(k) => onnx_light::load_encrypted_model_from_bytes(s, &k, &opts),
                    None => onnx_light::load_model_from_bytes(s, &opts),
                }
            })
            .py()?
        }
    };
    model_view(py, m)
}

/// Saves a model without the GIL: atomically to `path`, with its weights in external files
/// (`external`: a dict of `SaveExternalOptions` fields), encrypted with `key`. `progress`
/// (with `external`) is called as `progress(bytes_written, total_bytes)` from the writing
/// threads, with the GIL taken for the call; what it raises is raised when the save is done.
#[pyfunction]
#[pyo3(signature = (model, path, *, external = None, key = None, num_threads = None, progress = None, align = None, align_min = None, storage_options = None))]
#[allow(clippy::too_many_arguments)]
pub fn save_path(
    model: &Bound<'_, PyAny>,
    path: PathBuf,
    external: Option<&Bound<'_, PyDict>>,
    key: Option<Vec<u8>>,
    num_threads: Option<i32>,
    progress: Option<Py<PyAny>>,
    align: Option<u64>,
    align_min: Option<u64>,
    storage_options: Option<Vec<(String, String)>>,
) -> PyResult<()> {
    let ext = external.map(external_options).transpose()?;
    let ser = serialize_options(num_threads, align, align_min);
    let failure: std::sync::Mutex<Option<PyErr>> = std::sync::Mutex::new(None);
    let report = |done: u64, total: u64| {
        if let Some(cb) = &progress {
            Python::attach(|py| keep_first_error(&failure, cb.call1(py, (done, total))));
        }
    };
    if let Some(ro) = remote_for(&path, storage_options)? {
        let url = path.to_string_lossy();
        if key.is_some() {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "encrypted models are saved to local files only",
            ));
        }
        return with_model(model, |m| {
            onnx_light::remote::save_model(m, &url, &ser, ext.as_ref(), &ro)
        })?
        .py();
    }
    let saved = with_model(model, |m| match (ext, key) {
        (None, None) => onnx_light::save_model(m, &path, &ser),
        (None, Some(k)) => {
            let opts = onnx_light::EncryptionOptions {
                serialize: ser,
                ..Default::default()
            };
            onnx_light::save_encrypted_model(m, &path, &k, &opts)
        }
        (Some(mut e), key) => {
            if num_threads.is_some() {
                e.num_threads = ser.num_threads;
            }
            let report = progress
                .as_ref()
                .map(|_| &report as onnx_light::external::Progress<'_>);
            match key {
                None => {
                    let mut request = onnx_light::external::SaveRequest::new(m, &path, &e);
                    if let Some(p) = report {
                        request = request.progress(p);
                    }
                    request.save()
                }
                Some(k) => {
                    e.encryption = Some(onnx_light::ExternalEncryption::new(k.as_slice()));
                    onnx_light::external::save_encrypted_model_with_external_data(
                        m,
                        &onnx_light::PrepackedBlobs::new(),
                        &path,
                        &e,
                        &onnx_light::EncryptionOptions::default(),
                        report,
                    )
                }
            }
            .map(|_| ())
        }
    })?;
    if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    saved.py()
}

/// `SaveExternalOptions` from a dict of its field names.
fn external_options(d: &Bound<'_, PyDict>) -> PyResult<SaveExternalOptions> {
    let mut o = SaveExternalOptions::default();
    for (k, v) in d.iter() {
        let k: String = k.extract()?;
        if v.is_none() {
            continue;
        }
        match k.as_str() {
            "location" => o.location = Some(v.extract()?),
            "size_threshold" => o.size_threshold = v.extract()?,
            "all_tensors_to_one_file" => o.all_tensors_to_one_file = v.extract()?,
            "alignment" => o.alignment = v.extract()?,
            "align_threshold" => o.align_threshold = v.extract()?,
            "max_file_size" => o.max_external_file_size = v.extract()?,
            "convert_attribute" => o.convert_attribute = v.extract()?,
            "checksum" => o.checksum = v.extract()?,
            "num_threads" => o.num_threads = v.extract()?,
            "source_dir" => o.source_dir = Some(v.extract()?),
            "sync" => o.sync = v.extract()?,
            other => {
                return Err(PyTypeError::new_err(format!(
                    "unknown external-data option {other}"
                )));
            }
        }
    }
    Ok(o)
}

/// The serialize options of a save: `align` aligns the embedded payloads of at least
/// `align_min` bytes (the library's default threshold when `None`).
fn serialize_options(
    num_threads: Option<i32>,
    align: Option<u64>,
    align_min: Option<u64>,
) -> SerializeOptions {
    let defaults = SerializeOptions::default();
    SerializeOptions {
        num_threads: num_threads.unwrap_or(-1),
        inline_alignment: align.unwrap_or(0),
        raw_data_threshold: align_min.unwrap_or(defaults.raw_data_threshold),
        ..defaults
    }
}

/// Serializes a model (encrypted with `key`; payloads aligned to `align` in the bytes) without
/// the GIL.
#[pyfunction]
#[pyo3(signature = (model, *, key = None, num_threads = None, align = None, align_min = None))]
pub fn serialize<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    key: Option<Vec<u8>>,
    num_threads: Option<i32>,
    align: Option<u64>,
    align_min: Option<u64>,
) -> PyResult<Bound<'py, PyBytes>> {
    let ser = serialize_options(num_threads, align, align_min);
    match key {
        Some(k) => {
            let opts = onnx_light::EncryptionOptions {
                serialize: ser,
                ..Default::default()
            };
            let v = with_model(model, move |m| {
                onnx_light::save_encrypted_model_to_bytes(m, &k, &opts)
            })?
            .py()?;
            Ok(PyBytes::new(py, &v))
        }
        None => {
            let (m, root) =
                crate::ops::read_with_root::<ModelProto>(&crate::tools::model_view(model)?)?;
            let _busy = root.map(|r| r.begin_read(py));
            let p = SendPtr(m as *const ModelProto);
            serialize_to_pybytes(py, move |alloc| {
                let p = p;
                // SAFETY: the root is marked busy (read) until `_busy` drops.
                crate::ops::serialize_with_alloc(unsafe { &*p.0 }, &ser, alloc)
            })
        }
    }
}
