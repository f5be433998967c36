//! onnx's checker, shape inference, version converter and schema registry on the models of
//! this package, through the C ABI of the onnx component (`include/onnx_light_onnx.h`, linked
//! statically with the `onnx` feature). The model is read in place without the GIL: nothing is
//! serialized, and models over 2 GB work. `onnx_light/checker.py`, `shape_inference.py`,
//! `version_converter.py` and `defs.py` give these functions the onnx package's names.

use std::ffi::{CStr, CString, c_char, c_void};
use std::path::PathBuf;

use onnx_light::Message as _;
use onnx_light::proto::{AttributeProto, ModelProto};
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::errors::{ConvertError, InferenceError, SchemaError, ValidationError};
use crate::generated::MODEL_PROTO_INFO;
use crate::tools::{with_model, with_model_mut_plain};
use crate::view::owning_view;

/// `OnnxlCheckOptions`.
#[repr(C)]
struct CheckOptions {
    struct_size: usize,
    full_check: bool,
    skip_opset_compatibility_check: bool,
    check_custom_domain: bool,
}

/// `OnnxlShapeInferenceOptions`.
#[repr(C)]
struct InferenceOptions {
    struct_size: usize,
    check_type: bool,
    strict_mode: bool,
    data_prop: bool,
}

/// `OnnxlFormalParameter`.
#[repr(C)]
struct FormalParameter {
    name: *const c_char,
    type_str: *const c_char,
    description: *const c_char,
    option: u32,
    is_homogeneous: bool,
    min_arity: i32,
    differentiation_category: i32,
}

/// `OnnxlTypeConstraint`.
#[repr(C)]
struct TypeConstraint {
    type_param_str: *const c_char,
    description: *const c_char,
    allowed_type_count: usize,
}

/// `OnnxlAttributeSchema`.
#[repr(C)]
struct AttributeSchema {
    name: *const c_char,
    description: *const c_char,
    attr_type: i32,
    required: bool,
    default_value: *const c_void,
}

/// `OnnxlOpSchemaInfo`.
#[repr(C)]
struct SchemaInfo {
    name: *const c_char,
    domain: *const c_char,
    doc: *const c_char,
    since_version: i32,
    deprecated: bool,
    support_level: i32,
    min_input: i32,
    max_input: i32,
    min_output: i32,
    max_output: i32,
    has_function: bool,
    has_context_dependent_function: bool,
    has_type_and_shape_inference_function: bool,
    input_count: usize,
    output_count: usize,
    type_constraint_count: usize,
    attribute_count: usize,
}

/// `OnnxlOpSchema` (opaque; lives as long as the process).
#[repr(C)]
struct OpSchema {
    _private: [u8; 0],
}

unsafe extern "C" {
    fn onnxl_onnx_version() -> *const c_char;
    fn onnxl_onnx_opset_version(domain: *const c_char) -> i64;
    fn onnxl_check_model(model: *const c_void, options: *const CheckOptions) -> u32;
    fn onnxl_check_model_path(path: *const c_char, options: *const CheckOptions) -> u32;
    fn onnxl_infer_shapes_in_place(model: *mut c_void, options: *const InferenceOptions) -> u32;
    fn onnxl_infer_shapes_path(
        model_path: *const c_char,
        output_path: *const c_char,
        options: *const InferenceOptions,
    ) -> u32;
    fn onnxl_convert_version(
        model: *const c_void,
        target_version: i64,
        out: *mut *mut c_void,
    ) -> u32;
    fn onnxl_get_schema(
        op_type: *const c_char,
        max_inclusive_version: i64,
        domain: *const c_char,
        out: *mut *const OpSchema,
    ) -> u32;
    fn onnxl_schema_count() -> usize;
    fn onnxl_schema_at(i: usize) -> *const OpSchema;
    fn onnxl_op_schema_info(schema: *const OpSchema, out: *mut SchemaInfo) -> u32;
    fn onnxl_op_schema_input(schema: *const OpSchema, i: usize, out: *mut FormalParameter) -> u32;
    fn onnxl_op_schema_output(schema: *const OpSchema, i: usize, out: *mut FormalParameter) -> u32;
    fn onnxl_op_schema_type_constraint(
        schema: *const OpSchema,
        i: usize,
        out: *mut TypeConstraint,
    ) -> u32;
    fn onnxl_op_schema_allowed_type(schema: *const OpSchema, i: usize, j: usize) -> *const c_char;
    fn onnxl_op_schema_attribute(
        schema: *const OpSchema,
        i: usize,
        out: *mut AttributeSchema,
    ) -> u32;
    fn onnxl_last_error_message() -> *const c_char;
    fn onnxl_last_error_message_length() -> usize;
}

// The statuses of onnx_light.h the component reports.
const STATUS_OUT_OF_MEMORY: u32 = 11;
const STATUS_VALIDATION: u32 = 15;
const STATUS_INFERENCE: u32 = 16;
const STATUS_CONVERSION: u32 = 17;
const STATUS_NOT_FOUND: u32 = 18;

/// A failed call: its status and message (read on the failing thread).
struct Failure(u32, String);

/// `Ok` for `ONNXL_STATUS_OK`, else the status with the calling thread's last error message.
fn status(s: u32) -> Result<(), Failure> {
    if s == 0 {
        return Ok(());
    }
    // SAFETY: the message is NUL-terminated thread-local text of `length` bytes, valid until the
    // next call on this thread; it is copied at once.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            onnxl_last_error_message().cast::<u8>(),
            onnxl_last_error_message_length(),
        )
    };
    Err(Failure(s, String::from_utf8_lossy(bytes).into_owned()))
}

impl From<Failure> for PyErr {
    /// onnx's exception types for onnx's errors, with onnx's messages.
    fn from(Failure(s, msg): Failure) -> PyErr {
        match s {
            STATUS_VALIDATION => ValidationError::new_err(msg),
            STATUS_INFERENCE => InferenceError::new_err(msg),
            STATUS_CONVERSION => ConvertError::new_err(msg),
            STATUS_NOT_FOUND => SchemaError::new_err(msg),
            STATUS_OUT_OF_MEMORY => PyMemoryError::new_err(msg),
            _ => PyRuntimeError::new_err(msg),
        }
    }
}

fn c_string(what: &str, s: &str) -> PyResult<CString> {
    CString::new(s).map_err(|_| PyValueError::new_err(format!("{what} contains a NUL character")))
}

fn c_path(what: &str, p: PathBuf) -> PyResult<CString> {
    let s = p
        .into_os_string()
        .into_string()
        .map_err(|_| PyValueError::new_err(format!("{what} is not valid UTF-8")))?;
    c_string(what, &s)
}

/// Text owned by a schema (static) as a Python string.
fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL NUL-terminated strings of the schema registry, alive for the process.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The onnx release the component was built from.
#[pyfunction]
pub fn onnx_cxx_version() -> String {
    // SAFETY: a static NUL-terminated string.
    text(unsafe { onnxl_onnx_version() })
}

/// The highest opset of `domain` in onnx's registry.
#[pyfunction]
pub fn opset_version(domain: &str) -> PyResult<i64> {
    let dom = c_string("domain", domain)?;
    // SAFETY: a NUL-terminated string.
    let v = unsafe { onnxl_onnx_opset_version(dom.as_ptr()) };
    if v < 0 {
        status(STATUS_NOT_FOUND)?;
    }
    Ok(v)
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
    let opts = CheckOptions {
        struct_size: size_of::<CheckOptions>(),
        full_check,
        skip_opset_compatibility_check,
        check_custom_domain,
    };
    // SAFETY: a live model, read-only for the call (its root is marked busy for reading); the
    // component's const reads are safe alongside other readers.
    let checked = with_model(model, move |m| {
        status(unsafe { onnxl_check_model(std::ptr::from_ref(m).cast(), &opts) })
    })?;
    // Also after a failure: the reads before it made copies too.
    release_copies(model)?;
    Ok(checked?)
}

/// Frees the `std::string` copies of payloads that onnx's const reads made in `model` (its
/// root is taken for writing: every other reader has finished).
fn release_copies(model: &Bound<'_, PyAny>) -> PyResult<()> {
    with_model_mut_plain(model, |m| {
        m.visit_tensors_mut(&mut |t| {
            if let Some(d) = t.raw_data.as_mut() {
                d.release_cxx_copy();
            }
        })
    })
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
    let path = c_path("path", path)?;
    let opts = CheckOptions {
        struct_size: size_of::<CheckOptions>(),
        full_check,
        skip_opset_compatibility_check,
        check_custom_domain,
    };
    // SAFETY: a NUL-terminated path and valid options.
    py.detach(move || status(unsafe { onnxl_check_model_path(path.as_ptr(), &opts) }))?;
    Ok(())
}

fn inference_options(check_type: bool, strict_mode: bool, data_prop: bool) -> InferenceOptions {
    InferenceOptions {
        struct_size: size_of::<InferenceOptions>(),
        check_type,
        strict_mode,
        data_prop,
    }
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
        // SAFETY: `copy` is a live model this thread owns.
        let p = std::ptr::from_mut::<ModelProto>(&mut copy).cast();
        // (The call frees the payload copies its reads made in `copy`.)
        status(unsafe { onnxl_infer_shapes_in_place(p, &opts) }).map(|()| copy)
    })??;
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
    // SAFETY: the model is this call's alone (its root is marked busy by a writer).
    with_model_mut_plain(model, move |m| {
        status(unsafe { onnxl_infer_shapes_in_place(std::ptr::from_mut(m).cast(), &opts) })
    })??;
    Ok(())
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
    let input = c_path("model_path", model_path)?;
    let output = c_path("output_path", output_path)?;
    let opts = inference_options(check_type, strict_mode, data_prop);
    py.detach(move || {
        // SAFETY: NUL-terminated paths and valid options.
        status(unsafe { onnxl_infer_shapes_path(input.as_ptr(), output.as_ptr(), &opts) })
    })?;
    Ok(())
}

/// onnx's version converter: a new model at opset `target_version`.
#[pyfunction]
pub fn convert_version(model: &Bound<'_, PyAny>, target_version: i64) -> PyResult<Py<PyAny>> {
    let converted = with_model(model, move |m| {
        let mut out: *mut c_void = std::ptr::null_mut();
        // SAFETY: a live model read in place; `out` receives a model made by
        // `onnxl_model_proto_new`, a `Box<ModelProto>` of this library (same allocator).
        status(unsafe {
            onnxl_convert_version(std::ptr::from_ref(m).cast(), target_version, &mut out)
        })
        .map(|()| unsafe { Box::from_raw(out.cast::<ModelProto>()) })
    })?;
    release_copies(model)?;
    owning_view(model.py(), converted?, &MODEL_PROTO_INFO)
}

/// A schema's facts as a dict (the Python layer wraps it in `onnx_light.defs.OpSchema`).
fn schema_dict<'py>(py: Python<'py>, s: *const OpSchema) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    // SAFETY (every call below): `s` is a schema of the registry, the out-parameters are
    // writable, indices are within the counts the info reports.
    let mut info: SchemaInfo = unsafe { std::mem::zeroed() };
    status(unsafe { onnxl_op_schema_info(s, &mut info) })?;
    d.set_item("name", text(info.name))?;
    d.set_item("domain", text(info.domain))?;
    d.set_item("doc", text(info.doc))?;
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
    type ParamFn = unsafe extern "C" fn(*const OpSchema, usize, *mut FormalParameter) -> u32;
    let params = |n: usize, get: ParamFn| -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for i in 0..n {
            let mut p: FormalParameter = unsafe { std::mem::zeroed() };
            status(unsafe { get(s, i, &mut p) })?;
            let e = PyDict::new(py);
            e.set_item("name", text(p.name))?;
            e.set_item("type_str", text(p.type_str))?;
            e.set_item("description", text(p.description))?;
            e.set_item("option", p.option)?;
            e.set_item("is_homogeneous", p.is_homogeneous)?;
            e.set_item("min_arity", p.min_arity)?;
            e.set_item("differentiation_category", p.differentiation_category)?;
            list.append(e)?;
        }
        Ok(list)
    };
    d.set_item("inputs", params(info.input_count, onnxl_op_schema_input)?)?;
    d.set_item(
        "outputs",
        params(info.output_count, onnxl_op_schema_output)?,
    )?;
    let constraints = PyList::empty(py);
    for i in 0..info.type_constraint_count {
        let mut c: TypeConstraint = unsafe { std::mem::zeroed() };
        status(unsafe { onnxl_op_schema_type_constraint(s, i, &mut c) })?;
        let allowed: Vec<String> = (0..c.allowed_type_count)
            .map(|j| text(unsafe { onnxl_op_schema_allowed_type(s, i, j) }))
            .collect();
        let e = PyDict::new(py);
        e.set_item("type_param_str", text(c.type_param_str))?;
        e.set_item("description", text(c.description))?;
        e.set_item("allowed_type_strs", allowed)?;
        constraints.append(e)?;
    }
    d.set_item("type_constraints", constraints)?;
    let attributes = PyList::empty(py);
    for i in 0..info.attribute_count {
        let mut a: AttributeSchema = unsafe { std::mem::zeroed() };
        status(unsafe { onnxl_op_schema_attribute(s, i, &mut a) })?;
        let e = PyDict::new(py);
        e.set_item("name", text(a.name))?;
        e.set_item("description", text(a.description))?;
        e.set_item("type", a.attr_type)?;
        e.set_item("required", a.required)?;
        // SAFETY: NULL or the schema's own AttributeProto (static, never written).
        let default = unsafe { a.default_value.cast::<AttributeProto>().as_ref() }
            .map(|v| PyBytes::new(py, &v.serialize_to_vec()));
        e.set_item("default_value", default)?;
        attributes.append(e)?;
    }
    d.set_item("attributes", attributes)?;
    Ok(d)
}

/// The schema of `op_type` (`max_inclusive_version` negative: the latest), as a dict.
#[pyfunction]
pub fn get_schema<'py>(
    py: Python<'py>,
    op_type: &str,
    max_inclusive_version: i64,
    domain: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let op = c_string("op_type", op_type)?;
    let dom = c_string("domain", domain)?;
    let mut s: *const OpSchema = std::ptr::null();
    // SAFETY: NUL-terminated strings; `s` receives a static schema.
    status(unsafe { onnxl_get_schema(op.as_ptr(), max_inclusive_version, dom.as_ptr(), &mut s) })?;
    schema_dict(py, s)
}

/// Whether a schema of `op_type` exists (`max_inclusive_version` negative: any version).
#[pyfunction]
pub fn has_schema(op_type: &str, max_inclusive_version: i64, domain: &str) -> PyResult<bool> {
    let op = c_string("op_type", op_type)?;
    let dom = c_string("domain", domain)?;
    let mut s: *const OpSchema = std::ptr::null();
    // SAFETY: NUL-terminated strings; `s` receives a static schema.
    match status(unsafe {
        onnxl_get_schema(op.as_ptr(), max_inclusive_version, dom.as_ptr(), &mut s)
    }) {
        Ok(()) => Ok(true),
        Err(Failure(STATUS_NOT_FOUND, _)) => Ok(false),
        Err(f) => Err(f.into()),
    }
}

/// Every schema of every version, in onnx's order, as dicts.
#[pyfunction]
pub fn all_schemas_with_history(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    // SAFETY: indices below the count; the schemas are static.
    for i in 0..unsafe { onnxl_schema_count() } {
        list.append(schema_dict(py, unsafe { onnxl_schema_at(i) })?)?;
    }
    Ok(list)
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
    m.add_function(wrap_pyfunction!(get_schema, m)?)?;
    m.add_function(wrap_pyfunction!(has_schema, m)?)?;
    m.add_function(wrap_pyfunction!(all_schemas_with_history, m)?)?;
    Ok(())
}
