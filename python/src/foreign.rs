//! Messages of the onnx package (protobuf's generated classes) where onnx_light expects its own:
//! a protobuf message whose `DESCRIPTOR.full_name` is the full name of the expected type is
//! converted by serializing it (protobuf's C code) and parsing the bytes (the library), never by
//! walking its fields in Python. protobuf is not imported for this: an object can only be a
//! protobuf message when `google.protobuf.message` is already in `sys.modules`.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyType};

use crate::bytes_io::{BytesArg, parse_released, serialize_released};
use crate::root::Root;
use crate::schema::{AnyBox, MsgInfo};
use crate::view::Message;

/// protobuf's `Message` class, once `google.protobuf.message` has been imported by someone.
fn protobuf_message_class(py: Python<'_>) -> Option<Bound<'_, PyType>> {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    if let Some(c) = CLASS.get(py) {
        return Some(c.bind(py).clone());
    }
    let modules = py.import("sys").ok()?.getattr("modules").ok()?;
    let m = modules.get_item("google.protobuf.message").ok()?;
    let c = m.getattr("Message").ok()?.cast_into::<PyType>().ok()?;
    Some(CLASS.get_or_init(py, || c.unbind()).bind(py).clone())
}

/// The full name (`onnx.NodeProto`) of a protobuf message, `None` for anything else.
pub fn protobuf_full_name(v: &Bound<'_, PyAny>) -> Option<String> {
    if v.is_instance_of::<Message>() {
        return None;
    }
    let cls = protobuf_message_class(v.py())?;
    if !v.is_instance(&cls).unwrap_or(false) {
        return None;
    }
    v.get_type()
        .getattr("DESCRIPTOR")
        .and_then(|d| d.getattr("full_name"))
        .and_then(|n| n.extract())
        .ok()
}

/// True when `v` is a protobuf message of `info`'s type.
pub fn is_foreign(v: &Bound<'_, PyAny>, info: &MsgInfo) -> bool {
    protobuf_full_name(v).is_some_and(|n| n.strip_prefix("onnx.") == Some(info.name))
}

/// The content of `v`, a protobuf message of `info`'s type, as a boxed message of that type
/// (`None` when `v` is not one).
pub fn foreign_box(v: &Bound<'_, PyAny>, info: &'static MsgInfo) -> PyResult<Option<AnyBox>> {
    if !is_foreign(v, info) {
        return Ok(None);
    }
    let data = v.call_method0("SerializeToString")?;
    let data = data.cast_into::<PyBytes>()?;
    let bytes = BytesArg::Bytes(data);
    Ok(Some(parse_released(v.py(), info, &bytes)?))
}

/// A new onnx_light message owning `value` (of `info`'s type).
pub fn wrap_box<'py>(
    py: Python<'py>,
    info: &'static MsgInfo,
    value: AnyBox,
) -> PyResult<Bound<'py, Message>> {
    let (root, p) = Root::from_any(value);
    let obj = (info.wrap)(py, Message::owning(root, p, info))?;
    Ok(obj.into_bound(py).cast_into::<Message>()?)
}

/// `module.QualName` of the type of `v`, as error messages name it.
pub fn type_name(v: &Bound<'_, PyAny>) -> String {
    let t = v.get_type();
    let module = t.module().map(|m| m.to_string()).unwrap_or_default();
    let name = t
        .qualname()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    match module.as_str() {
        "" | "builtins" => name,
        "onnx_light._native" => format!("onnx_light.{name}"),
        _ => format!("{module}.{name}"),
    }
}

/// `onnx_light.NodeProto`: how error messages name the expected type.
pub fn expected_name(info: &MsgInfo) -> String {
    format!("onnx_light.{}", info.name)
}

/// The `TypeError` for a value that is not a message of `info`'s type.
pub fn wrong_type(v: &Bound<'_, PyAny>, info: &MsgInfo, what: &str) -> PyErr {
    let prefix = if what.is_empty() {
        String::new()
    } else {
        format!("{what}: ")
    };
    PyTypeError::new_err(format!(
        "{prefix}expected {}, got {}",
        expected_name(info),
        type_name(v)
    ))
}

/// `v` as an onnx_light message of `info`'s type: itself, or a new message with the content of a
/// protobuf message of that type; a `TypeError` naming `what` for anything else.
pub fn as_message<'py>(
    v: &Bound<'py, PyAny>,
    info: &'static MsgInfo,
    what: &str,
) -> PyResult<Bound<'py, Message>> {
    if let Ok(m) = v.cast::<Message>()
        && m.get().info.tag == info.tag
    {
        return Ok(m.clone());
    }
    match foreign_box(v, info)? {
        Some(b) => wrap_box(v.py(), info, b),
        None => Err(wrong_type(v, info, what)),
    }
}

/// After an in-place operation on `converted` (the conversion of `original`): when `original` is
/// a protobuf message, gives it the new content (serialized here, parsed by protobuf).
pub fn write_back(original: &Bound<'_, PyAny>, converted: &Bound<'_, Message>) -> PyResult<()> {
    if original.is(converted) {
        return Ok(());
    }
    let data = serialize_released(converted)?;
    original.call_method1("ParseFromString", (data,))?;
    Ok(())
}
