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
    /// `SerializeToString`.
    pub serialize: unsafe fn(*const ()) -> onnx_light::Result<Vec<u8>>,
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
