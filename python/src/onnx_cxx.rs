//! onnx's checker, shape inference, version converter, schema registry, parser and printer on
//! the models of this package (the onnx component through `onnx_light_onnx`, linked with the `onnx` feature).
//! The model is read in place without the GIL: nothing is serialized, and models over 2 GB
//! work. `onnx_light/checker.py`, `shape_inference.py`, `version_converter.py`, `defs.py`,
//! `parser.py` and `printer.py` give these functions the onnx package's names.

use std::path::PathBuf;

use onnx_light::Message as _;
use onnx_light::proto::{FunctionProto, GraphProto, ModelProto, NodeProto, TensorProto};
use onnx_light_onnx::{
    self as onnx, CheckOptions, ErrorKind, OpSchema, ShapeInferenceOptions, TextFormat,
};
use pyo3::exceptions::{PyIndexError, PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::errors::{ConvertError, InferenceError, SchemaError, ValidationError};
use crate::generated::MODEL_PROTO_INFO;
use crate::ops::{self, Msg};
use crate::root::SendPtr;
use crate::tools::{with_model, with_model_mut_plain};
use crate::view::{Message, owning_view};

/// onnx's exception types for onnx's errors, with onnx's messages.
fn py_err(e: onnx::Error) -> PyErr {
    match e.kind {
        ErrorKind::Validation => ValidationError::new_err(e.message),
        ErrorKind::Inference => InferenceError::new_err(e.message),
        ErrorKind::Conversion => ConvertError::new_err(e.message),
        ErrorKind::NotFound => SchemaError::new_err(e.message),
        // The parser's refusals are returned, not raised (see `parse_text`); what it throws
        // becomes the exception nanobind makes of it in onnx's Python.
        ErrorKind::Parse => PyValueError::new_err(e.message),
        ErrorKind::OutOfRange => PyIndexError::new_err(e.message),
        ErrorKind::OutOfMemory => PyMemoryError::new_err(e.message),
        ErrorKind::InvalidArgument => PyValueError::new_err(e.message),
        ErrorKind::Other(_) => PyRuntimeError::new_err(e.message),
    }
}

trait IntoPy<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for onnx::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(py_err)
    }
}

/// The onnx release the component was built from.
#[pyfunction]
pub fn onnx_cxx_version() -> &'static str {
    onnx::onnx_version()
}

/// The highest opset of `domain` in onnx's registry.
#[pyfunction]
pub fn opset_version(domain: &str) -> PyResult<i64> {
    onnx::opset_version(domain).py()
}

/// onnx.checker.check_model's flags.
fn check_options(full: bool, skip_opset_compatibility: bool, custom_domain: bool) -> CheckOptions {
    CheckOptions {
        full_check: full,
        skip_opset_compatibility_check: skip_opset_compatibility,
        check_custom_domain: custom_domain,
    }
}

/// onnx.shape_inference.infer_shapes' flags.
fn inference_options(
    check_type: bool,
    strict_mode: bool,
    data_prop: bool,
) -> ShapeInferenceOptions {
    ShapeInferenceOptions {
        check_type,
        strict_mode,
        data_prop,
    }
}

/// Frees the `std::string` copies of payloads that onnx's const reads made in `model` (its
/// root is taken for writing: every other reader has finished).
fn release_copies(model: &Bound<'_, PyAny>) -> PyResult<()> {
    with_model_mut_plain(model, onnx::release_cxx_copies)
}

/// onnx's checker on a model of this package, in place, without the GIL.
#[pyfunction]
#[pyo3(signature = (model, full_check, skip_opset_compatibility_check, check_custom_domain))]
pub fn check_model(
    model: &Bound<'_, PyAny>,
    full_check: bool,
    skip_opset_compatibility_check: bool,
    check_custom_domain: bool,
) -> PyResult<()> {
    let opts = check_options(
        full_check,
        skip_opset_compatibility_check,
        check_custom_domain,
    );
    // An onnx package's model is converted once, for the check and the release below.
    let model = &crate::tools::model_view(model)?.into_any();
    let checked = with_model(model, move |m| onnx::check_model(m, &opts))?;
    // Also after a failure: the reads before it made copies too.
    release_copies(model)?;
    checked.py()
}

/// onnx's checker on a model file (external data checked against its directory).
#[pyfunction]
#[pyo3(signature = (path, full_check, skip_opset_compatibility_check, check_custom_domain))]
pub fn check_model_path(
    py: Python<'_>,
    path: PathBuf,
    full_check: bool,
    skip_opset_compatibility_check: bool,
    check_custom_domain: bool,
) -> PyResult<()> {
    let opts = check_options(
        full_check,
        skip_opset_compatibility_check,
        check_custom_domain,
    );
    py.detach(move || onnx::check_model_path(&path, &opts)).py()
}

/// Shape inference into a copy of the model (returned), as `onnx.shape_inference.infer_shapes`.
#[pyfunction]
#[pyo3(signature = (model, check_type, strict_mode, data_prop))]
pub fn infer_shapes(
    model: &Bound<'_, PyAny>,
    check_type: bool,
    strict_mode: bool,
    data_prop: bool,
) -> PyResult<Py<PyAny>> {
    let opts = inference_options(check_type, strict_mode, data_prop);
    let copy = with_model(model, move |m| {
        let mut copy = Box::new(m.clone());
        onnx::infer_shapes_in_place(&mut copy, &opts).map(|()| copy)
    })?
    .py()?;
    owning_view(model.py(), copy, &MODEL_PROTO_INFO)
}

/// Shape inference into the model itself (no copy).
#[pyfunction]
#[pyo3(signature = (model, check_type, strict_mode, data_prop))]
pub fn infer_shapes_in_place(
    model: &Bound<'_, PyAny>,
    check_type: bool,
    strict_mode: bool,
    data_prop: bool,
) -> PyResult<()> {
    let opts = inference_options(check_type, strict_mode, data_prop);
    with_model_mut_plain(model, move |m| onnx::infer_shapes_in_place(m, &opts))?.py()
}

/// Shape inference of a model file, written to `output_path`.
#[pyfunction]
#[pyo3(signature = (model_path, output_path, check_type, strict_mode, data_prop))]
pub fn infer_shapes_path(
    py: Python<'_>,
    model_path: PathBuf,
    output_path: PathBuf,
    check_type: bool,
    strict_mode: bool,
    data_prop: bool,
) -> PyResult<()> {
    let opts = inference_options(check_type, strict_mode, data_prop);
    py.detach(move || onnx::infer_shapes_path(&model_path, &output_path, &opts))
        .py()
}

/// onnx's version converter: a new model at opset `target_version`.
#[pyfunction]
pub fn convert_version(model: &Bound<'_, PyAny>, target_version: i64) -> PyResult<Py<PyAny>> {
    let converted = with_model(model, move |m| onnx::convert_version(m, target_version))?;
    release_copies(model)?;
    owning_view(model.py(), Box::new(converted.py()?), &MODEL_PROTO_INFO)
}

/// onnx's inliner: a new model with the calls to model-local functions inlined.
#[pyfunction]
pub fn inline_local_functions(
    model: &Bound<'_, PyAny>,
    convert_version: bool,
) -> PyResult<Py<PyAny>> {
    let inlined = with_model(model, move |m| {
        onnx::inline_local_functions(m, convert_version)
    })?;
    release_copies(model)?;
    owning_view(model.py(), Box::new(inlined.py()?), &MODEL_PROTO_INFO)
}

/// onnx's inliner: a new model with the calls to the functions `ids` ((domain, name) pairs)
/// inlined, or with `exclude` to every function but those.
#[pyfunction]
pub fn inline_selected_functions(
    model: &Bound<'_, PyAny>,
    ids: Vec<(String, String)>,
    exclude: bool,
    inline_schema_functions: bool,
) -> PyResult<Py<PyAny>> {
    let inlined = with_model(model, move |m| {
        let ids: Vec<(&str, &str)> = ids.iter().map(|(d, n)| (d.as_str(), n.as_str())).collect();
        onnx::inline_selected_functions(m, &ids, exclude, inline_schema_functions)
    })?;
    release_copies(model)?;
    owning_view(model.py(), Box::new(inlined.py()?), &MODEL_PROTO_INFO)
}

/// A schema's facts as a dict (the Python layer wraps it in `onnx_light.defs.OpSchema`).
fn schema_dict<'py>(py: Python<'py>, s: OpSchema) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let info = s.info();
    d.set_item("name", info.name)?;
    d.set_item("domain", info.domain)?;
    d.set_item("doc", info.doc)?;
    d.set_item("since_version", info.since_version)?;
    d.set_item("deprecated", info.deprecated)?;
    d.set_item("support_level", info.support_level)?;
    d.set_item("min_input", info.min_input)?;
    d.set_item("max_input", info.max_input)?;
    d.set_item("min_output", info.min_output)?;
    d.set_item("max_output", info.max_output)?;
    d.set_item("has_function", info.has_function)?;
    d.set_item(
        "has_context_dependent_function",
        info.has_context_dependent_function,
    )?;
    d.set_item(
        "has_type_and_shape_inference_function",
        info.has_type_and_shape_inference_function,
    )?;
    let params = |list: Vec<onnx::FormalParameter>| -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for p in list {
            let e = PyDict::new(py);
            e.set_item("name", p.name)?;
            e.set_item("type_str", p.type_str)?;
            e.set_item("description", p.description)?;
            e.set_item("option", p.option)?;
            e.set_item("is_homogeneous", p.is_homogeneous)?;
            e.set_item("min_arity", p.min_arity)?;
            e.set_item("differentiation_category", p.differentiation_category)?;
            out.append(e)?;
        }
        Ok(out)
    };
    d.set_item("inputs", params(s.inputs())?)?;
    d.set_item("outputs", params(s.outputs())?)?;
    let constraints = PyList::empty(py);
    for c in s.type_constraints() {
        let e = PyDict::new(py);
        e.set_item("type_param_str", c.type_param_str)?;
        e.set_item("description", c.description)?;
        e.set_item("allowed_type_strs", c.allowed_type_strs)?;
        constraints.append(e)?;
    }
    d.set_item("type_constraints", constraints)?;
    let attributes = PyList::empty(py);
    for a in s.attributes() {
        let e = PyDict::new(py);
        e.set_item("name", a.name)?;
        e.set_item("description", a.description)?;
        e.set_item("type", a.attr_type)?;
        e.set_item("required", a.required)?;
        let default = a
            .default_value
            .map(|v| PyBytes::new(py, &v.serialize_to_vec()));
        e.set_item("default_value", default)?;
        attributes.append(e)?;
    }
    d.set_item("attributes", attributes)?;
    Ok(d)
}

fn version(max_inclusive_version: i64) -> Option<i64> {
    (max_inclusive_version >= 0).then_some(max_inclusive_version)
}

/// The schema of `op_type` (`max_inclusive_version` negative: the latest), as a dict.
#[pyfunction]
pub fn get_schema<'py>(
    py: Python<'py>,
    op_type: &str,
    max_inclusive_version: i64,
    domain: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let s = onnx::get_schema(op_type, version(max_inclusive_version), domain).py()?;
    schema_dict(py, s)
}

/// Whether a schema of `op_type` exists (`max_inclusive_version` negative: any version).
#[pyfunction]
pub fn has_schema(op_type: &str, max_inclusive_version: i64, domain: &str) -> PyResult<bool> {
    match onnx::get_schema(op_type, version(max_inclusive_version), domain) {
        Ok(_) => Ok(true),
        Err(e) if e.kind == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(py_err(e)),
    }
}

/// Every schema of every version, in onnx's order, as dicts.
#[pyfunction]
pub fn all_schemas_with_history(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for s in onnx::all_schemas_with_history() {
        list.append(schema_dict(py, s)?)?;
    }
    Ok(list)
}

/// A new message of type `M` parsed from onnx's text format, as onnx's C++ `parser.parse_*`
/// gives it: `(True, b"", message)`, or `(False, onnx's message, None)` when onnx's parser refuses
/// the text.
fn parse_as<M: Msg + TextFormat + Send + Sync + 'static>(
    py: Python<'_>,
    text: &str,
) -> PyResult<(bool, Py<PyBytes>, Option<Py<PyAny>>)> {
    let text = text.to_owned();
    match py.detach(move || onnx::parse::<M>(&text)) {
        Ok(m) => Ok((
            true,
            PyBytes::new(py, b"").unbind(),
            Some(owning_view(py, Box::new(m), M::INFO)?),
        )),
        Err(e) if e.kind == ErrorKind::Parse => {
            Ok((false, PyBytes::new(py, e.message.as_bytes()).unbind(), None))
        }
        Err(e) => Err(py_err(e)),
    }
}

/// onnx's parser: `kind` is "model", "graph", "function" or "node"; `text` holds no NUL (onnx's
/// parser reads up to the first one: the Python layer cuts it there).
#[pyfunction]
pub fn parse_text(
    py: Python<'_>,
    kind: &str,
    text: &str,
) -> PyResult<(bool, Py<PyBytes>, Option<Py<PyAny>>)> {
    match kind {
        "model" => parse_as::<ModelProto>(py, text),
        "graph" => parse_as::<GraphProto>(py, text),
        "function" => parse_as::<FunctionProto>(py, text),
        "node" => parse_as::<NodeProto>(py, text),
        _ => Err(PyValueError::new_err(format!(
            "no text format for {kind:?}"
        ))),
    }
}

/// The messages onnx's printer takes, with their tensor walks.
trait Printable: Msg + TextFormat + Sync {
    fn tensors(&self, f: &mut dyn FnMut(&TensorProto));
    fn tensors_mut(&mut self, f: &mut dyn FnMut(&mut TensorProto));
}

macro_rules! printable {
    ($($t:ty),*) => {$(
        impl Printable for $t {
            fn tensors(&self, f: &mut dyn FnMut(&TensorProto)) {
                self.visit_tensors(f)
            }
            fn tensors_mut(&mut self, f: &mut dyn FnMut(&mut TensorProto)) {
                self.visit_tensors_mut(f)
            }
        }
    )*};
}

printable!(ModelProto, GraphProto, FunctionProto, NodeProto);

/// onnx's text of the message of `view`, read in place without the GIL; afterwards the payload
/// copies the printer's reads made are given back (only when it has payloads: taking an unset
/// sub-message for writing would set it).
fn print_in_place<M: Printable>(view: &Bound<'_, Message>) -> PyResult<Vec<u8>> {
    let py = view.py();
    let (m, root) = ops::read_with_root::<M>(view)?;
    let (text, has_payloads) = {
        let _busy = root.map(|r| r.begin_read(py));
        let p = SendPtr(m as *const M);
        py.detach(move || {
            let p = p;
            // SAFETY: the root is marked busy (read) until `_busy` drops (or the message is
            // the static default instance of an unset sub-message, which nothing writes).
            let m = unsafe { &*p.0 };
            let mut has_payloads = false;
            m.tensors(&mut |t| has_payloads |= t.has_raw_data());
            (onnx::to_text_bytes(m), has_payloads)
        })
    };
    if has_payloads {
        let (m, _root) = ops::write::<M>(view)?;
        m.tensors_mut(&mut |t| {
            if t.has_raw_data() {
                t.mutable_raw_data().release_cxx_copy();
            }
        });
    }
    text.py()
}

/// onnx's printer (onnx.printer.to_text) on a ModelProto, GraphProto, FunctionProto or
/// NodeProto of this package, as bytes (the Python layer decodes them as nanobind does).
#[pyfunction]
pub fn to_text<'py>(message: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let py = message.py();
    let view = message
        .cast::<Message>()
        .map_err(|_| PyTypeError::new_err("Unsupported argument type."))?;
    let tag = view.get().info.tag;
    let text = if tag == ModelProto::TAG {
        print_in_place::<ModelProto>(view)?
    } else if tag == GraphProto::TAG {
        print_in_place::<GraphProto>(view)?
    } else if tag == FunctionProto::TAG {
        print_in_place::<FunctionProto>(view)?
    } else if tag == NodeProto::TAG {
        print_in_place::<NodeProto>(view)?
    } else {
        return Err(PyTypeError::new_err("Unsupported argument type."));
    };
    Ok(PyBytes::new(py, &text))
}

/// Adds the functions to the native module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(onnx_cxx_version, m)?)?;
    m.add_function(wrap_pyfunction!(opset_version, m)?)?;
    m.add_function(wrap_pyfunction!(check_model, m)?)?;
    m.add_function(wrap_pyfunction!(check_model_path, m)?)?;
    m.add_function(wrap_pyfunction!(infer_shapes, m)?)?;
    m.add_function(wrap_pyfunction!(infer_shapes_in_place, m)?)?;
    m.add_function(wrap_pyfunction!(infer_shapes_path, m)?)?;
    m.add_function(wrap_pyfunction!(convert_version, m)?)?;
    m.add_function(wrap_pyfunction!(inline_local_functions, m)?)?;
    m.add_function(wrap_pyfunction!(inline_selected_functions, m)?)?;
    m.add_function(wrap_pyfunction!(get_schema, m)?)?;
    m.add_function(wrap_pyfunction!(has_schema, m)?)?;
    m.add_function(wrap_pyfunction!(all_schemas_with_history, m)?)?;
    m.add_function(wrap_pyfunction!(parse_text, m)?)?;
    m.add_function(wrap_pyfunction!(to_text, m)?)?;
    Ok(())
}
