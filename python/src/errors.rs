//! Python exceptions of the package and the mapping from the library's errors.
//!
//! I/O failures are `OSError`s (Python picks the subclass from the errno: `FileNotFoundError`,
//! `PermissionError`, ...) whose message names the file; bad input raises `ValueError`
//! subclasses carrying the library's message (for decoding errors: the field path and byte
//! offset); a wrong key raises `WrongKeyError`.

use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

create_exception!(
    onnx_light,
    DecodeError,
    PyValueError,
    "The bytes are not a valid encoding of the message (the message names the field path and the byte offset)."
);
create_exception!(
    onnx_light,
    InvalidArgumentError,
    PyValueError,
    "An argument or option has an invalid value."
);
create_exception!(
    onnx_light,
    LimitExceededError,
    PyValueError,
    "A configured limit (tensor size, metadata budget, serialized size) was exceeded."
);
create_exception!(
    onnx_light,
    UnsupportedError,
    PyValueError,
    "The operation is not supported for this input."
);
create_exception!(
    onnx_light,
    ExternalDataError,
    PyValueError,
    "External tensor data could not be resolved, read, verified or written."
);
create_exception!(
    onnx_light,
    PathRefusedError,
    PyValueError,
    "A path was refused by the path-safety rules (absolute, '..', symbolic link, outside the model directory, ...)."
);
create_exception!(
    onnx_light,
    EncryptionError,
    PyValueError,
    "Encrypted data is malformed (bad magic, unsupported version, truncated)."
);
create_exception!(
    onnx_light,
    WrongKeyError,
    PyValueError,
    "Decryption failed authentication: wrong key, or the encrypted data was modified or truncated."
);
create_exception!(
    onnx_light,
    ParamsError,
    PyValueError,
    "A parameter dictionary is malformed."
);

/// The Python exception for a library error.
pub fn to_py(e: onnx_light::Error) -> PyErr {
    use onnx_light::Error as E;
    let msg = e.to_string();
    match e {
        E::Decode(_) => DecodeError::new_err(msg),
        E::Io { path, source } => match source.raw_os_error() {
            Some(errno) => PyOSError::new_err((errno, msg, path.display().to_string())),
            None => PyOSError::new_err(msg),
        },
        E::InvalidOption { .. } | E::InvalidArgument(_) => InvalidArgumentError::new_err(msg),
        E::LimitExceeded(_) => LimitExceededError::new_err(msg),
        E::Unsupported(_) => UnsupportedError::new_err(msg),
        E::ExternalData { .. } => ExternalDataError::new_err(msg),
        E::PathRefused { .. } => PathRefusedError::new_err(msg),
        E::Crypto(_) => EncryptionError::new_err(msg),
        E::Authentication(_) => WrongKeyError::new_err(msg),
        E::Params { .. } => ParamsError::new_err(msg),
        _ => PyValueError::new_err(msg),
    }
}

// onnx's exception types of its C++ library, under onnx's names (`onnx_light.checker`,
// `onnx_light.shape_inference`, `onnx_light.version_converter`, `onnx_light.defs`).
create_exception!(
    onnx_light,
    ValidationError,
    pyo3::exceptions::PyException,
    "A model failed onnx's checker (onnx.checker.ValidationError)."
);
create_exception!(
    onnx_light,
    InferenceError,
    pyo3::exceptions::PyException,
    "Shape inference failed (onnx.shape_inference.InferenceError)."
);
create_exception!(
    onnx_light,
    ConvertError,
    pyo3::exceptions::PyException,
    "The version converter failed (onnx.version_converter.ConvertError)."
);
create_exception!(
    onnx_light,
    SchemaError,
    pyo3::exceptions::PyException,
    "No such operator schema (onnx.defs.SchemaError)."
);

/// `Result<T, onnx_light::Error>` → `PyResult<T>`.
pub trait IntoPyResult<T> {
    /// Maps the error to its Python exception.
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for onnx_light::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("DecodeError", py.get_type::<DecodeError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("LimitExceededError", py.get_type::<LimitExceededError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("ExternalDataError", py.get_type::<ExternalDataError>())?;
    m.add("PathRefusedError", py.get_type::<PathRefusedError>())?;
    m.add("EncryptionError", py.get_type::<EncryptionError>())?;
    m.add("WrongKeyError", py.get_type::<WrongKeyError>())?;
    m.add("ParamsError", py.get_type::<ParamsError>())?;
    m.add("ValidationError", py.get_type::<ValidationError>())?;
    m.add("InferenceError", py.get_type::<InferenceError>())?;
    m.add("ConvertError", py.get_type::<ConvertError>())?;
    m.add("SchemaError", py.get_type::<SchemaError>())?;
    Ok(())
}
