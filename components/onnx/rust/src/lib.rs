//! onnx's checker, shape inference, version converter, operator schemas and text format
//! (parser, printer) on onnx_light's models: Rust bindings of the onnx component's C ABI (`include/onnx_light_onnx.h`), which
//! runs onnx's own C++ library built against onnx_light. Models are read in place: nothing is
//! serialized, models over 2 GB work. Errors carry onnx's messages.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::fmt;
use std::path::Path;

use onnx_light::proto::{AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto};

/// What kind of failure onnx reported (the C status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The model failed the checker (onnx's `ValidationError`).
    Validation,
    /// Shape inference failed (onnx's `InferenceError`).
    Inference,
    /// The version converter failed (onnx's `ConvertError`).
    Conversion,
    /// No such schema or opset domain.
    NotFound,
    /// onnx's parser refused the text (its message says where and why; onnx's Python raises
    /// `onnx.parser.ParseError`).
    Parse,
    /// onnx's parser threw `std::out_of_range` (an integer literal past int64; onnx's Python
    /// raises `IndexError`).
    OutOfRange,
    /// Memory could not be allocated.
    OutOfMemory,
    /// An argument was refused (a path that is not UTF-8 or holds NUL, a version out of range).
    InvalidArgument,
    /// Another failure of onnx's code (a `std::runtime_error`, e.g. one of its assertions; onnx's
    /// Python raises `RuntimeError`), or of the library, with its C status.
    Other(u32),
}

/// A failure: its kind and onnx's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Options of [`check_model`] (onnx.checker.check_model's arguments); all false by default.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckOptions {
    /// Also run strict shape inference over the model.
    pub full_check: bool,
    /// Skip the check that each node's opset exists for its operator.
    pub skip_opset_compatibility_check: bool,
    /// Also check nodes of custom domains.
    pub check_custom_domain: bool,
}

/// Options of shape inference (onnx.shape_inference.infer_shapes' arguments); all false by
/// default.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShapeInferenceOptions {
    /// Check the types of inputs and outputs against the schemas.
    pub check_type: bool,
    /// Fail on the first inference error instead of skipping the node.
    pub strict_mode: bool,
    /// Propagate constant data for shape computations.
    pub data_prop: bool,
}

mod sys {
    //! The C ABI of `include/onnx_light_onnx.h` (and the two core functions it reports through).
    use std::ffi::{c_char, c_int, c_void};

    #[repr(C)]
    pub struct CheckOptions {
        pub struct_size: usize,
        pub full_check: bool,
        pub skip_opset_compatibility_check: bool,
        pub check_custom_domain: bool,
    }

    #[repr(C)]
    pub struct InferenceOptions {
        pub struct_size: usize,
        pub check_type: bool,
        pub strict_mode: bool,
        pub data_prop: bool,
    }

    #[repr(C)]
    pub struct FormalParameter {
        pub name: *const c_char,
        pub type_str: *const c_char,
        pub description: *const c_char,
        pub option: u32,
        pub is_homogeneous: bool,
        pub min_arity: i32,
        pub differentiation_category: i32,
    }

    #[repr(C)]
    pub struct TypeConstraint {
        pub type_param_str: *const c_char,
        pub description: *const c_char,
        pub allowed_type_count: usize,
    }

    #[repr(C)]
    pub struct AttributeSchema {
        pub name: *const c_char,
        pub description: *const c_char,
        pub attr_type: i32,
        pub required: bool,
        pub default_value: *const c_void,
    }

    #[repr(C)]
    pub struct SchemaInfo {
        pub name: *const c_char,
        pub domain: *const c_char,
        pub doc: *const c_char,
        pub since_version: i32,
        pub deprecated: bool,
        pub support_level: i32,
        pub min_input: i32,
        pub max_input: i32,
        pub min_output: i32,
        pub max_output: i32,
        pub has_function: bool,
        pub has_context_dependent_function: bool,
        pub has_type_and_shape_inference_function: bool,
        pub input_count: usize,
        pub output_count: usize,
        pub type_constraint_count: usize,
        pub attribute_count: usize,
    }

    /// `OnnxlOpSchema` (opaque).
    #[derive(Debug)]
    #[repr(C)]
    pub struct OpSchema {
        _private: [u8; 0],
    }

    pub type ParamFn = unsafe extern "C" fn(*const OpSchema, usize, *mut FormalParameter) -> u32;

    unsafe extern "C" {
        pub fn onnxl_onnx_version() -> *const c_char;
        pub fn onnxl_onnx_opset_version(domain: *const c_char) -> i64;
        pub fn onnxl_check_model(model: *const c_void, options: *const CheckOptions) -> u32;
        pub fn onnxl_check_model_path(path: *const c_char, options: *const CheckOptions) -> u32;
        pub fn onnxl_infer_shapes_in_place(
            model: *mut c_void,
            options: *const InferenceOptions,
        ) -> u32;
        pub fn onnxl_infer_shapes_path(
            model_path: *const c_char,
            output_path: *const c_char,
            options: *const InferenceOptions,
        ) -> u32;
        pub fn onnxl_convert_version(
            model: *const c_void,
            target_version: i64,
            out: *mut *mut c_void,
        ) -> u32;
        pub fn onnxl_inline_local_functions(
            model: *const c_void,
            convert_version: c_int,
            out: *mut *mut c_void,
        ) -> u32;
        pub fn onnxl_inline_selected_functions(
            model: *const c_void,
            domains: *const *const c_char,
            names: *const *const c_char,
            count: usize,
            exclude: c_int,
            inline_schema_functions: c_int,
            out: *mut *mut c_void,
        ) -> u32;
        pub fn onnxl_model_proto_release_cxx_copies(model: *mut c_void) -> u32;
        pub fn onnxl_get_schema(
            op_type: *const c_char,
            max_inclusive_version: i64,
            domain: *const c_char,
            out: *mut *const OpSchema,
        ) -> u32;
        pub fn onnxl_schema_count() -> usize;
        pub fn onnxl_schema_at(i: usize) -> *const OpSchema;
        pub fn onnxl_op_schema_info(schema: *const OpSchema, out: *mut SchemaInfo) -> u32;
        pub fn onnxl_op_schema_input(
            schema: *const OpSchema,
            i: usize,
            out: *mut FormalParameter,
        ) -> u32;
        pub fn onnxl_op_schema_output(
            schema: *const OpSchema,
            i: usize,
            out: *mut FormalParameter,
        ) -> u32;
        pub fn onnxl_op_schema_type_constraint(
            schema: *const OpSchema,
            i: usize,
            out: *mut TypeConstraint,
        ) -> u32;
        pub fn onnxl_op_schema_allowed_type(
            schema: *const OpSchema,
            i: usize,
            j: usize,
        ) -> *const c_char;
        pub fn onnxl_op_schema_attribute(
            schema: *const OpSchema,
            i: usize,
            out: *mut AttributeSchema,
        ) -> u32;
        pub fn onnxl_parse_model_text(text: *const c_char, out: *mut *mut c_void) -> u32;
        pub fn onnxl_parse_graph_text(text: *const c_char, out: *mut *mut c_void) -> u32;
        pub fn onnxl_parse_function_text(text: *const c_char, out: *mut *mut c_void) -> u32;
        pub fn onnxl_parse_node_text(text: *const c_char, out: *mut *mut c_void) -> u32;
        pub fn onnxl_model_to_text(m: *const c_void, out: *mut *mut c_char, len: *mut usize)
        -> u32;
        pub fn onnxl_graph_to_text(m: *const c_void, out: *mut *mut c_char, len: *mut usize)
        -> u32;
        pub fn onnxl_function_to_text(
            m: *const c_void,
            out: *mut *mut c_char,
            len: *mut usize,
        ) -> u32;
        pub fn onnxl_node_to_text(m: *const c_void, out: *mut *mut c_char, len: *mut usize) -> u32;
        pub fn onnxl_text_free(text: *mut c_char);
        pub fn onnxl_last_error_message() -> *const c_char;
        pub fn onnxl_last_error_message_length() -> usize;
    }
}

// The statuses of onnx_light.h the component reports.
const STATUS_INVALID_ARGUMENT: u32 = 1;
const STATUS_PARSE: u32 = 4;
const STATUS_OUT_OF_MEMORY: u32 = 11;
const STATUS_OUT_OF_RANGE: u32 = 13;
const STATUS_VALIDATION: u32 = 15;
const STATUS_INFERENCE: u32 = 16;
const STATUS_CONVERSION: u32 = 17;
const STATUS_NOT_FOUND: u32 = 18;

/// `Ok` for `ONNXL_STATUS_OK`, else the status with the calling thread's last error message.
fn status(s: u32) -> Result<()> {
    if s == 0 {
        return Ok(());
    }
    // SAFETY: the message is thread-local text of `length` bytes, valid until the next call on
    // this thread; it is copied at once.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            sys::onnxl_last_error_message().cast::<u8>(),
            sys::onnxl_last_error_message_length(),
        )
    };
    let kind = match s {
        STATUS_VALIDATION => ErrorKind::Validation,
        STATUS_INFERENCE => ErrorKind::Inference,
        STATUS_CONVERSION => ErrorKind::Conversion,
        STATUS_NOT_FOUND => ErrorKind::NotFound,
        STATUS_PARSE => ErrorKind::Parse,
        STATUS_OUT_OF_RANGE => ErrorKind::OutOfRange,
        STATUS_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
        STATUS_INVALID_ARGUMENT => ErrorKind::InvalidArgument,
        other => ErrorKind::Other(other),
    };
    Err(Error {
        kind,
        message: String::from_utf8_lossy(bytes).into_owned(),
    })
}

fn invalid(message: String) -> Error {
    Error {
        kind: ErrorKind::InvalidArgument,
        message,
    }
}

fn c_string(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| invalid(format!("{what} contains a NUL character")))
}

fn c_path(what: &str, p: &Path) -> Result<CString> {
    let s = p
        .to_str()
        .ok_or_else(|| invalid(format!("{what} {} is not valid UTF-8", p.display())))?;
    c_string(what, s)
}

/// Text owned by onnx's registry (static), or "" for NULL.
fn text(p: *const c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    // SAFETY: non-NULL NUL-terminated strings of the schema registry, alive for the process.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

fn c_check_options(o: &CheckOptions) -> sys::CheckOptions {
    sys::CheckOptions {
        struct_size: size_of::<sys::CheckOptions>(),
        full_check: o.full_check,
        skip_opset_compatibility_check: o.skip_opset_compatibility_check,
        check_custom_domain: o.check_custom_domain,
    }
}

fn c_inference_options(o: &ShapeInferenceOptions) -> sys::InferenceOptions {
    sys::InferenceOptions {
        struct_size: size_of::<sys::InferenceOptions>(),
        check_type: o.check_type,
        strict_mode: o.strict_mode,
        data_prop: o.data_prop,
    }
}

/// The onnx release the component was built from (e.g. "1.23.2").
pub fn onnx_version() -> &'static str {
    // SAFETY: a static string.
    text(unsafe { sys::onnxl_onnx_version() })
}

/// The highest opset of `domain` ("" is the default domain) in onnx's registry.
pub fn opset_version(domain: &str) -> Result<i64> {
    let d = c_string("domain", domain)?;
    // SAFETY: a NUL-terminated string.
    let v = unsafe { sys::onnxl_onnx_opset_version(d.as_ptr()) };
    if v < 0 {
        status(STATUS_NOT_FOUND)?;
    }
    Ok(v)
}

/// Runs onnx's checker over `model` (onnx.checker.check_model). Any number of threads may
/// check one model at once; the payload copies onnx's reads make stay with the model until
/// [`release_cxx_copies`].
pub fn check_model(model: &ModelProto, options: &CheckOptions) -> Result<()> {
    let o = c_check_options(options);
    // SAFETY: a live model (a C++ ModelProto is the Rust one), read only; valid options.
    status(unsafe { sys::onnxl_check_model(std::ptr::from_ref(model).cast(), &o) })
}

/// Runs onnx's checker over the model file at `path` (external data checked against its
/// directory).
pub fn check_model_path(path: &Path, options: &CheckOptions) -> Result<()> {
    let p = c_path("path", path)?;
    let o = c_check_options(options);
    // SAFETY: a NUL-terminated path and valid options.
    status(unsafe { sys::onnxl_check_model_path(p.as_ptr(), &o) })
}

/// Infers shapes into `model` (onnx.shape_inference.infer_shapes, in place); the payload copies
/// onnx's reads make are freed before it returns.
pub fn infer_shapes_in_place(
    model: &mut ModelProto,
    options: &ShapeInferenceOptions,
) -> Result<()> {
    let o = c_inference_options(options);
    // SAFETY: a live model this call borrows exclusively; valid options.
    status(unsafe { sys::onnxl_infer_shapes_in_place(std::ptr::from_mut(model).cast(), &o) })
}

/// Infers the shapes of the model file `model_path` and writes the result to `output_path`.
pub fn infer_shapes_path(
    model_path: &Path,
    output_path: &Path,
    options: &ShapeInferenceOptions,
) -> Result<()> {
    let (i, out) = (
        c_path("model_path", model_path)?,
        c_path("output_path", output_path)?,
    );
    let o = c_inference_options(options);
    // SAFETY: NUL-terminated paths and valid options.
    status(unsafe { sys::onnxl_infer_shapes_path(i.as_ptr(), out.as_ptr(), &o) })
}

/// `model` converted to the default domain's opset `target_version`
/// (onnx.version_converter.convert_version).
pub fn convert_version(model: &ModelProto, target_version: i64) -> Result<ModelProto> {
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: a live model read in place; `out` receives a model of `onnxl_model_proto_new`, a
    // `Box<ModelProto>` of the onnx_light this program links (the same allocator).
    status(unsafe {
        sys::onnxl_convert_version(std::ptr::from_ref(model).cast(), target_version, &mut out)
    })?;
    Ok(owned_model(out))
}

/// A model of `onnxl_model_proto_new` that an entry point gave to `out`, owned here.
fn owned_model(out: *mut c_void) -> ModelProto {
    // SAFETY: `out` is a `Box<ModelProto>` of the onnx_light this program links (the same
    // allocator), handed over by a successful call; ownership moves here.
    *unsafe { Box::from_raw(out.cast::<ModelProto>()) }
}

/// A copy of `model` with its calls to model-local functions inlined, recursively
/// (onnx.inliner.inline_local_functions); `convert_version`: convert functions of another
/// default-domain opset first.
pub fn inline_local_functions(model: &ModelProto, convert_version: bool) -> Result<ModelProto> {
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: a live model read in place; `out` receives a new model on success.
    status(unsafe {
        sys::onnxl_inline_local_functions(
            std::ptr::from_ref(model).cast(),
            c_int::from(convert_version),
            &mut out,
        )
    })?;
    Ok(owned_model(out))
}

/// A copy of `model` with the calls to the functions `ids` ((domain, name) pairs) inlined, or
/// with `exclude` to every function but those; schema-defined functions too with
/// `inline_schema_functions` (onnx.inliner.inline_selected_functions).
pub fn inline_selected_functions(
    model: &ModelProto,
    ids: &[(&str, &str)],
    exclude: bool,
    inline_schema_functions: bool,
) -> Result<ModelProto> {
    let domains = ids
        .iter()
        .map(|(d, _)| c_string("a function domain", d))
        .collect::<Result<Vec<_>>>()?;
    let names = ids
        .iter()
        .map(|(_, n)| c_string("a function name", n))
        .collect::<Result<Vec<_>>>()?;
    let domain_ptrs: Vec<*const c_char> = domains.iter().map(|c| c.as_ptr()).collect();
    let name_ptrs: Vec<*const c_char> = names.iter().map(|c| c.as_ptr()).collect();
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: a live model read in place; `ids.len()` NUL-terminated strings in each array,
    // alive for the call; `out` receives a new model on success.
    status(unsafe {
        sys::onnxl_inline_selected_functions(
            std::ptr::from_ref(model).cast(),
            domain_ptrs.as_ptr(),
            name_ptrs.as_ptr(),
            ids.len(),
            c_int::from(exclude),
            c_int::from(inline_schema_functions),
            &mut out,
        )
    })?;
    Ok(owned_model(out))
}

/// Frees the `std::string` copies of tensor payloads that onnx's const reads made in `model`.
pub fn release_cxx_copies(model: &mut ModelProto) {
    // SAFETY: a live model this call borrows exclusively (so no reference into a copy is used
    // afterwards); the call cannot fail on a non-NULL model.
    unsafe { sys::onnxl_model_proto_release_cxx_copies(std::ptr::from_mut(model).cast()) };
}

/// An input or output of an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormalParameter {
    pub name: &'static str,
    /// A type ("tensor(float)") or the name of a type constraint ("T").
    pub type_str: &'static str,
    pub description: &'static str,
    /// 0 single, 1 optional, 2 variadic.
    pub option: u32,
    pub is_homogeneous: bool,
    pub min_arity: i32,
    /// 0 unknown, 1 differentiable, 2 not differentiable.
    pub differentiation_category: i32,
}

/// A type parameter and the types it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeConstraint {
    pub type_param_str: &'static str,
    pub description: &'static str,
    pub allowed_type_strs: Vec<&'static str>,
}

/// An attribute of an operator.
#[derive(Debug, Clone)]
pub struct AttributeSchema {
    pub name: &'static str,
    pub description: &'static str,
    /// The AttributeProto type.
    pub attr_type: i32,
    pub required: bool,
    /// The default value (onnx's registry owns it).
    pub default_value: Option<&'static AttributeProto>,
}

/// Scalar facts of a schema, with onnx's OpSchema property names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaInfo {
    pub name: &'static str,
    /// "" for the default domain.
    pub domain: &'static str,
    pub doc: &'static str,
    pub since_version: i32,
    pub deprecated: bool,
    /// 0 common, 1 experimental.
    pub support_level: i32,
    pub min_input: i32,
    pub max_input: i32,
    pub min_output: i32,
    pub max_output: i32,
    pub has_function: bool,
    pub has_context_dependent_function: bool,
    pub has_type_and_shape_inference_function: bool,
}

/// A C out-parameter filled by `fill`, which is given zeroed memory.
///
/// # Safety
/// `T` is one of `sys`'s C structs of pointers, integers and bools (all-zero is a valid value),
/// and `fill` leaves a valid `T` there.
unsafe fn out_param<T>(fill: impl FnOnce(*mut T) -> u32) -> T {
    let mut v = std::mem::MaybeUninit::<T>::zeroed();
    fill(v.as_mut_ptr());
    // SAFETY: zeroed memory is a valid `T` and `fill` keeps it valid (the caller's contract).
    unsafe { v.assume_init() }
}

/// An operator schema of onnx's registry (which lives as long as the process).
#[derive(Debug, Clone, Copy)]
pub struct OpSchema(&'static sys::OpSchema);

// SAFETY: schemas are immutable after registration; every accessor only reads.
unsafe impl Send for OpSchema {}
// SAFETY: as above.
unsafe impl Sync for OpSchema {}

/// The schema of `op_type` in `domain` ("" is the default domain) with the highest since_version
/// not above `max_inclusive_version` (`None`: the latest); onnx's message when there is none.
pub fn get_schema(
    op_type: &str,
    max_inclusive_version: Option<i64>,
    domain: &str,
) -> Result<OpSchema> {
    let (op, dom) = (c_string("op_type", op_type)?, c_string("domain", domain)?);
    let mut s: *const sys::OpSchema = std::ptr::null();
    let v = max_inclusive_version.unwrap_or(-1);
    // SAFETY: NUL-terminated strings; `s` receives a static schema on success.
    status(unsafe { sys::onnxl_get_schema(op.as_ptr(), v, dom.as_ptr(), &mut s) })?;
    // SAFETY: non-NULL on success, static.
    Ok(OpSchema(unsafe { &*s }))
}

/// Every schema of every operator and version, in onnx's order.
pub fn all_schemas_with_history() -> Vec<OpSchema> {
    // SAFETY: indices below the count give static non-NULL schemas.
    (0..unsafe { sys::onnxl_schema_count() })
        .filter_map(|i| unsafe { sys::onnxl_schema_at(i).as_ref() })
        .map(OpSchema)
        .collect()
}

impl OpSchema {
    fn info_raw(&self) -> sys::SchemaInfo {
        // SAFETY: a plain C struct; a valid schema, so the call fills it.
        unsafe { out_param(|p| sys::onnxl_op_schema_info(self.0, p)) }
    }

    /// The scalar facts.
    pub fn info(&self) -> SchemaInfo {
        let i = self.info_raw();
        SchemaInfo {
            name: text(i.name),
            domain: text(i.domain),
            doc: text(i.doc),
            since_version: i.since_version,
            deprecated: i.deprecated,
            support_level: i.support_level,
            min_input: i.min_input,
            max_input: i.max_input,
            min_output: i.min_output,
            max_output: i.max_output,
            has_function: i.has_function,
            has_context_dependent_function: i.has_context_dependent_function,
            has_type_and_shape_inference_function: i.has_type_and_shape_inference_function,
        }
    }

    fn params(&self, n: usize, get: sys::ParamFn) -> Vec<FormalParameter> {
        (0..n)
            .map(|i| {
                // SAFETY: a plain C struct; `i` is below the count, so the call fills it.
                let p = unsafe { out_param(|p| get(self.0, i, p)) };
                FormalParameter {
                    name: text(p.name),
                    type_str: text(p.type_str),
                    description: text(p.description),
                    option: p.option,
                    is_homogeneous: p.is_homogeneous,
                    min_arity: p.min_arity,
                    differentiation_category: p.differentiation_category,
                }
            })
            .collect()
    }

    /// The inputs, in order.
    pub fn inputs(&self) -> Vec<FormalParameter> {
        self.params(self.info_raw().input_count, sys::onnxl_op_schema_input)
    }

    /// The outputs, in order.
    pub fn outputs(&self) -> Vec<FormalParameter> {
        self.params(self.info_raw().output_count, sys::onnxl_op_schema_output)
    }

    /// The type constraints, in order.
    pub fn type_constraints(&self) -> Vec<TypeConstraint> {
        (0..self.info_raw().type_constraint_count)
            .map(|i| {
                // SAFETY: as in `params`; the allowed types are indexed below their count.
                let c =
                    unsafe { out_param(|c| sys::onnxl_op_schema_type_constraint(self.0, i, c)) };
                TypeConstraint {
                    type_param_str: text(c.type_param_str),
                    description: text(c.description),
                    allowed_type_strs: (0..c.allowed_type_count)
                        .map(|j| text(unsafe { sys::onnxl_op_schema_allowed_type(self.0, i, j) }))
                        .collect(),
                }
            })
            .collect()
    }

    /// The attributes, in name order.
    pub fn attributes(&self) -> Vec<AttributeSchema> {
        (0..self.info_raw().attribute_count)
            .map(|i| {
                // SAFETY: as in `params`.
                let a = unsafe { out_param(|a| sys::onnxl_op_schema_attribute(self.0, i, a)) };
                AttributeSchema {
                    name: text(a.name),
                    description: text(a.description),
                    attr_type: a.attr_type,
                    required: a.required,
                    // SAFETY: NULL or the registry's AttributeProto (a C++ AttributeProto is the
                    // Rust one), static and never written.
                    default_value: unsafe { a.default_value.cast::<AttributeProto>().as_ref() },
                }
            })
            .collect()
    }
}

mod text_format {
    /// Keeps [`super::TextFormat`] to the four messages of onnx's text format.
    pub trait Sealed {}
}

/// A message of onnx's text format: [`ModelProto`], [`GraphProto`], [`FunctionProto`],
/// [`NodeProto`] (what onnx.parser and onnx.printer take).
pub trait TextFormat: text_format::Sealed + Sized {
    #[doc(hidden)]
    const PARSE: unsafe extern "C" fn(*const c_char, *mut *mut c_void) -> u32;
    #[doc(hidden)]
    const PRINT: unsafe extern "C" fn(*const c_void, *mut *mut c_char, *mut usize) -> u32;
}

macro_rules! text_format {
    ($($t:ty => $parse:ident, $print:ident;)*) => {$(
        impl text_format::Sealed for $t {}
        impl TextFormat for $t {
            const PARSE: unsafe extern "C" fn(*const c_char, *mut *mut c_void) -> u32 =
                sys::$parse;
            const PRINT: unsafe extern "C" fn(*const c_void, *mut *mut c_char, *mut usize) -> u32 =
                sys::$print;
        }
    )*};
}

text_format! {
    ModelProto => onnxl_parse_model_text, onnxl_model_to_text;
    GraphProto => onnxl_parse_graph_text, onnxl_graph_to_text;
    FunctionProto => onnxl_parse_function_text, onnxl_function_to_text;
    NodeProto => onnxl_parse_node_text, onnxl_node_to_text;
}

/// Parses onnx's text format into a message (onnx's `OnnxParser`; onnx.parser.parse_model,
/// `parse_graph`, `parse_function`, `parse_node`). A text onnx refuses is [`ErrorKind::Parse`]
/// with onnx's message; a text holding a NUL character is [`ErrorKind::InvalidArgument`] (onnx's
/// C++ parser reads up to the first NUL).
pub fn parse<M: TextFormat>(text: &str) -> Result<M> {
    let t = c_string("text", text)?;
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: a NUL-terminated text; `out` receives a message of `onnxl_<message>_new`, a
    // `Box<M>` of the onnx_light this program links (the same allocator).
    status(unsafe { M::PARSE(t.as_ptr(), &mut out) })?;
    // SAFETY: see above; ownership moves here.
    Ok(*unsafe { Box::from_raw(out.cast::<M>()) })
}

/// [`parse`] of a model (onnx.parser.parse_model).
pub fn parse_model(text: &str) -> Result<ModelProto> {
    parse(text)
}

/// [`parse`] of a graph (onnx.parser.parse_graph).
pub fn parse_graph(text: &str) -> Result<GraphProto> {
    parse(text)
}

/// [`parse`] of a function (onnx.parser.parse_function).
pub fn parse_function(text: &str) -> Result<FunctionProto> {
    parse(text)
}

/// [`parse`] of a node (onnx.parser.parse_node).
pub fn parse_node(text: &str) -> Result<NodeProto> {
    parse(text)
}

/// onnx's text of a message (onnx.printer.to_text), as bytes: string attributes are printed as
/// they are, so the text is not UTF-8 where one of them is not. The message is read in place
/// (for a model, [`release_cxx_copies`] gives back the payload copies the printer's reads made).
pub fn to_text_bytes<M: TextFormat>(message: &M) -> Result<Vec<u8>> {
    let mut out: *mut c_char = std::ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: a live message (a C++ message is the Rust one), read only; on success `out` is a
    // malloc'ed text of `len` bytes.
    status(unsafe { M::PRINT(std::ptr::from_ref(message).cast(), &mut out, &mut len) })?;
    // SAFETY: as above; the text is copied, then freed once with the component's free function.
    let bytes = unsafe { std::slice::from_raw_parts(out.cast::<u8>(), len) }.to_vec();
    // SAFETY: `out` came from the printer above and is not used again.
    unsafe { sys::onnxl_text_free(out) };
    Ok(bytes)
}

/// onnx's text of a message (onnx.printer.to_text); bytes that are not UTF-8 (see
/// [`to_text_bytes`]) become U+FFFD.
pub fn to_text<M: TextFormat>(message: &M) -> Result<String> {
    to_text_bytes(message).map(|b| match String::from_utf8(b) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        let node: NodeProto = parse("x = Foo <alpha = 2.5> (y)").unwrap();
        assert_eq!(node.op_type().as_str(), Some("Foo"));
        assert_eq!(
            to_text(&node).unwrap(),
            "   x = Foo <alpha: float = 2.5> (y)\n"
        );
        let model = parse_model(
            "<ir_version: 8, opset_import: [\"\" : 18]> g (float[2] x) => (float[2] y) { y = Neg(x) }",
        )
        .unwrap();
        check_model(&model, &CheckOptions::default()).unwrap();
        let again = parse_model(&to_text(&model).unwrap()).unwrap();
        assert_eq!(again, model);
    }

    #[test]
    fn errors() {
        let e = parse_node("x = Foo(").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Parse);
        assert_eq!(
            e.message,
            "[ParseError at position (line: 1 column: 9)]\nError context: x = Foo(\nExpected character ) not found."
        );
        let e = parse_node("x = F<a=99999999999999999999>(y)").unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ErrorKind::OutOfRange, "stoll")
        );
        assert_eq!(
            parse_node("x\0").unwrap_err().kind,
            ErrorKind::InvalidArgument
        );
    }
}
