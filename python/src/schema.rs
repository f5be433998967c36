//! Run-time description of the message classes (filled by the generated code): each message's
//! fields with type-erased accessors, used by the generic methods of `Message` (`HasField`,
//! `ClearField`, keyword construction, `ListFields`) and by the containers.

use std::any::Any;

use pyo3::prelude::*;

use crate::root::Tag;
use crate::view::{Ctx, Message, SubField};

/// What a field holds.
pub enum FieldKind {
    /// An optional scalar, string or bytes field.
    Scalar,
    /// An optional sub-message.
    Message(&'static MsgInfo, &'static SubField),
    /// A repeated scalar, string or bytes field.
    RepeatedScalar(&'static crate::containers::ScalarListOps),
    /// A repeated sub-message.
    RepeatedMessage(&'static crate::containers::MsgListOps),
}

/// A boxed value of a type known at run time (a message, or a detached part of one).
pub type AnyBox = Box<dyn Any + Send + Sync>;

/// Gives the output buffer of a serialization once its size is known: a pointer to that many
/// writable bytes.
pub type AllocOut<'a> = dyn FnMut(usize) -> onnx_light::Result<*mut u8> + 'a;

/// Assigns a scalar field of the message of a view.
pub type Setter = fn(&Bound<'_, Message>, &Bound<'_, PyAny>) -> PyResult<()>;

/// One field of a message class.
pub struct FieldInfo {
    /// Name as in onnx.proto.
    pub name: &'static str,
    /// Field number.
    pub number: u32,
    /// What it holds.
    pub kind: FieldKind,
    /// The oneof it belongs to.
    pub oneof: Option<&'static str>,
    /// The attribute value (a scalar, a view, a container).
    pub get: fn(&Bound<'_, Message>) -> PyResult<Py<PyAny>>,
    /// Assigns a scalar field (None for message and repeated fields).
    pub set: Option<Setter>,
    /// Presence of a singular field (None for repeated fields).
    pub has: Option<unsafe fn(*const ()) -> bool>,
    /// Clears the field (detaching removed sub-messages).
    pub clear: unsafe fn(&Ctx<'_>, *mut ()),
}

/// Type-erased operations of one message type.
pub struct MsgOps {
    /// Encoded size.
    pub encoded_len: unsafe fn(*const ()) -> u64,
    /// `SerializeToString`: serializes into the buffer `AllocOut` provides for the size.
    pub serialize: unsafe fn(
        *const (),
        &onnx_light::SerializeOptions,
        &mut AllocOut<'_>,
    ) -> onnx_light::Result<()>,
    /// Parses bytes into a new boxed message.
    pub parse: fn(&[u8], &onnx_light::ParseOptions) -> onnx_light::Result<AnyBox>,
    /// Replaces the message at the pointer by a boxed one of the same type (from `parse` or
    /// `clone_box`), detaching views of its old content (the view of the message itself stays).
    pub replace: unsafe fn(&Ctx<'_>, *mut (), Box<dyn Any + Send + Sync>),
    /// A boxed copy.
    pub clone_box: unsafe fn(*const ()) -> Box<dyn Any + Send + Sync>,
    /// Merges a copy (from `clone_box`) into the message, protobuf's `MergeFrom`.
    pub merge: unsafe fn(&Ctx<'_>, *mut (), Box<dyn Any + Send + Sync>),
    /// Equality.
    pub eq: unsafe fn(*const (), *const ()) -> bool,
    /// Text format (`str()`).
    pub text: unsafe fn(*const (), &mut crate::text::TextOut),
    /// A new view owning a copy.
    pub new_owning: unsafe fn(Python<'_>, *const ()) -> PyResult<Py<PyAny>>,
}

/// One message class.
pub struct MsgInfo {
    /// Full name, e.g. `TensorProto.Segment`.
    pub name: &'static str,
    /// Index in the type table.
    pub tag: Tag,
    /// Fields in declaration order.
    pub fields: &'static [FieldInfo],
    /// The default instance (what an unset sub-message reads as).
    pub default: fn() -> *const (),
    /// Wraps base-class data into an object of this class.
    pub wrap: fn(Python<'_>, Message) -> PyResult<Py<PyAny>>,
    /// The class object.
    pub class: fn(Python<'_>) -> Bound<'_, pyo3::types::PyType>,
    /// Operations.
    pub ops: &'static MsgOps,
}

impl MsgInfo {
    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&'static FieldInfo> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// One field of the library's schema as Python data: `(name, number, kind, repeated, packed,
/// type name, oneof)`; `kind` is protobuf's type name (`int64`, `string`, `bytes`, `enum`,
/// `message`, ...), the type name that of the message or enum.
type FieldRow = (
    &'static str,
    u32,
    &'static str,
    bool,
    bool,
    Option<&'static str>,
    Option<&'static str>,
);

/// The library's schema table (`onnx_light::proto::schema`), from which the Python layer builds
/// protobuf-like descriptors (`onnx_light/descriptor.py`): every message with its fields in
/// declaration order, and every closed enum with its values.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn schema_table() -> (
    Vec<(&'static str, Vec<FieldRow>)>,
    Vec<(&'static str, Vec<(&'static str, i32)>)>,
) {
    use onnx_light::proto::schema::{Kind, Label, MESSAGES};
    let mut enums: Vec<(&'static str, Vec<(&'static str, i32)>)> = Vec::new();
    let messages = MESSAGES
        .iter()
        .map(|m| {
            let fields = m
                .fields
                .iter()
                .map(|f| {
                    let (kind, type_name) = match f.kind {
                        Kind::Int64 => ("int64", None),
                        Kind::Int32 => ("int32", None),
                        Kind::UInt64 => ("uint64", None),
                        Kind::Float => ("float", None),
                        Kind::Double => ("double", None),
                        Kind::String => ("string", None),
                        Kind::Bytes | Kind::Payload => ("bytes", None),
                        Kind::Enum(e) => {
                            if !enums.iter().any(|(n, _)| *n == e.name) {
                                enums.push((e.name, e.values.to_vec()));
                            }
                            ("enum", Some(e.name))
                        }
                        Kind::Message(name) => ("message", Some(name)),
                    };
                    let repeated = f.label == Label::Repeated;
                    (
                        f.name, f.number, kind, repeated, f.packed, type_name, f.oneof,
                    )
                })
                .collect();
            (m.name, fields)
        })
        .collect();
    (messages, enums)
}
