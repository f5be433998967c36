//! Run-time description of the message classes (filled by the generated code): each message's
//! fields with type-erased accessors, used by the generic methods of `Message` (`HasField`,
//! `ClearField`, keyword construction, `ListFields`) and by the containers; and the types those
//! accessors take: the `Message` class (a view: its behaviour is in `view`), where its message
//! is, and the context of a mutation. (They refer to each other, so they are declared together
//! here, below every module that gives them behaviour.)

use std::any::Any;
use std::cell::UnsafeCell;
use std::sync::Arc;

use pyo3::prelude::*;

use crate::root::{Root, Tag};

/// What a field holds.
pub enum FieldKind {
    /// An optional scalar, string or bytes field.
    Scalar,
    /// An optional sub-message.
    Message(&'static MsgInfo, &'static SubField),
    /// A repeated scalar, string or bytes field.
    RepeatedScalar(&'static ScalarListOps),
    /// A repeated sub-message.
    RepeatedMessage(&'static MsgListOps),
}

/// Where a view's message is.
pub enum Loc {
    /// At `ptr`, inside `root`'s value. `registered`: listed in the root's registry (every
    /// direct view is, except the one showing the root's own value, which cannot be removed).
    Direct {
        root: Arc<Root>,
        ptr: *mut (),
        registered: bool,
    },
    /// Field `field` of the message of `parent`, not set when the view was made.
    Lazy {
        parent: Py<Message>,
        field: &'static SubField,
    },
}

/// A sub-message field, type-erased: how to find it and how to create it.
pub struct SubField {
    /// The sub-message of the parent at the pointer, or null when it is not set.
    pub get: unsafe fn(*const ()) -> *const (),
    /// Sets the sub-message (switching a oneof detaches the member it replaces) and returns it.
    pub make: unsafe fn(&Ctx<'_>, *mut ()) -> *mut (),
}

/// The base class of every message class: a view of one Rust message.
#[pyclass(subclass, frozen, module = "onnx_light", name = "Message")]
pub struct Message {
    pub(crate) loc: UnsafeCell<Loc>,
    /// The message type.
    pub info: &'static MsgInfo,
}

// SAFETY: `loc` is only read or written with the GIL held (every method takes a `Python` token),
// which serializes access; the pointer it holds is guarded by the root's busy protocol.
unsafe impl Sync for Message {}
// SAFETY: see `Sync`; the contents (`Arc<Root>`, `Py<..>`, a raw pointer into the root) may be
// dropped on any thread.
unsafe impl Send for Message {}

impl Drop for Message {
    fn drop(&mut self) {
        if let Loc::Direct {
            root,
            ptr,
            registered: true,
        } = self.loc.get_mut()
        {
            // SAFETY: Python deallocates objects with the GIL held.
            let py = unsafe { Python::assume_attached() };
            // A registered view is the registry's entry for its key (see `view_of`,
            // `resolve_write`, `Ctx::detach_except`).
            root.registry(py).remove(&(*ptr as usize, self.info.tag));
        }
    }
}

/// What a mutation needs: the GIL and the root of the message being changed.
pub struct Ctx<'a> {
    pub py: Python<'a>,
    pub root: &'a Arc<Root>,
}

/// Operations of one repeated scalar, string or bytes field (see `scalar_list!`).
pub struct ScalarListOps {
    /// `Message.field`, for messages.
    pub name: &'static str,
    pub len: fn(&Bound<'_, Message>) -> PyResult<usize>,
    pub get: fn(&Bound<'_, Message>, usize) -> PyResult<Py<PyAny>>,
    pub get_all: fn(&Bound<'_, Message>) -> PyResult<Vec<Py<PyAny>>>,
    pub set: fn(&Bound<'_, Message>, usize, &Bound<'_, PyAny>) -> PyResult<()>,
    pub insert: fn(&Bound<'_, Message>, usize, &Bound<'_, PyAny>) -> PyResult<()>,
    pub remove: fn(&Bound<'_, Message>, usize) -> PyResult<()>,
    pub extend: fn(&Bound<'_, Message>, &[Bound<'_, PyAny>]) -> PyResult<()>,
    pub assign: fn(&Bound<'_, Message>, &[Bound<'_, PyAny>]) -> PyResult<()>,
    /// Number of elements of the message at the pointer (for `ListFields`).
    pub raw_len: unsafe fn(*const ()) -> usize,
}

/// Operations of one repeated message field (see `msg_list!`).
pub struct MsgListOps {
    /// `Message.field`, for messages.
    pub name: &'static str,
    /// The element class.
    pub elem: &'static MsgInfo,
    pub len: unsafe fn(*const ()) -> usize,
    /// Element `i`, or null.
    pub ptr: unsafe fn(*const (), usize) -> *mut (),
    /// Appends an empty element.
    pub add: unsafe fn(*mut ()) -> *mut (),
    /// Removes element `i` (detaching it).
    pub remove: unsafe fn(&Ctx<'_>, *mut (), usize),
    /// Removes every element (detaching them).
    pub clear: unsafe fn(&Ctx<'_>, *mut ()),
    /// Inserts a boxed element (from `MsgOps::clone_box` of the element type) at `i` (clamped).
    pub insert: unsafe fn(*mut (), usize, Box<dyn Any + Send + Sync>),
    /// Swaps two elements (their addresses do not change).
    pub swap: unsafe fn(*mut (), usize, usize),
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
