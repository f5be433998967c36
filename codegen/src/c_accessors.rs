//! Writes `src/ffi/accessors.rs`: the opaque C handle of every message and one literal
//! `#[unsafe(no_mangle)] pub unsafe extern "C" fn` per accessor of every field, named like
//! protobuf's generated C++ (`onnxl_<message>_<verb>_<field>`), plus the enum and oneof-case
//! constants. cbindgen reads the file to write `include/onnx_light.h`.
//!
//! The naming and classification helpers here are shared with the C++ wrapper generator
//! (`cpp_wrapper.rs`), so both always agree on every C name.

use std::collections::BTreeSet;
use std::fmt::Write;

pub(crate) use crate::oneofs;
use crate::schema::{EnumDef, FieldDef, Kind, Label, MESSAGES, MessageDef};
use crate::{camel, proto_decl, rust_member, rust_type_name, snake, unknown_fields_path};

#[path = "../../src/proto/data_type.rs"]
#[allow(dead_code)]
mod data_type;

/// `onnxl_tensor_proto_segment` for `TensorProto.Segment`.
pub(crate) fn c_prefix(msg: &str) -> String {
    format!("onnxl_{}", snake(msg))
}

/// `OnnxlTensorProtoSegment` for `TensorProto.Segment`.
pub(crate) fn c_type(msg: &str) -> String {
    format!("Onnxl{}", rust_type_name(msg))
}

/// `ONNXL_TENSOR_PROTO_DATA_TYPE` for the enum `TensorProto.DataType`.
pub(crate) fn enum_const_prefix(enum_name: &str) -> String {
    format!("ONNXL_{}", snake(enum_name).to_ascii_uppercase())
}

/// `ONNXL_TYPE_PROTO_VALUE_CASE` for oneof `value` of `TypeProto`.
pub(crate) fn oneof_const_prefix(msg: &str, oneof: &str) -> String {
    format!(
        "ONNXL_{}_{}_CASE",
        snake(msg).to_ascii_uppercase(),
        oneof.to_ascii_uppercase()
    )
}

/// Every closed enum of the schema, in first-use order.
pub(crate) fn schema_enums() -> Vec<&'static EnumDef> {
    let mut out: Vec<&'static EnumDef> = Vec::new();
    for m in MESSAGES {
        for f in m.fields {
            if let Kind::Enum(e) = f.kind
                && !out.iter().any(|x| x.name == e.name)
            {
                out.push(e);
            }
        }
    }
    out
}

/// `TensorProto.DataType` values: (name, value).
pub(crate) fn data_types() -> Vec<(&'static str, i32)> {
    (0..)
        .map_while(|v| data_type::DataType::from_i32(v).map(|t| (t.name(), v)))
        .collect()
}

/// What a field looks like through the C ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Optional number or enum: value getter, setter, has, clear.
    Scalar,
    /// Optional `string`: `OnnxlStr` view, copying setter.
    Str,
    /// Optional `bytes`: `OnnxlBytes` view, copying setter.
    Bytes,
    /// Tensor payload: view by out-parameters, copy or borrow setters, owner token.
    Payload,
    /// Optional message: const pointer (default instance when unset), mutable pointer.
    Message,
    /// Repeated number: element getter, (pointer, count) view, add, set, assign.
    RepScalar,
    /// Repeated `string`.
    RepStr,
    /// Repeated `bytes`.
    RepBytes,
    /// Repeated message: element pointers, add.
    RepMessage,
}

pub(crate) fn shape(f: &FieldDef) -> Shape {
    match (f.label, f.kind) {
        (Label::Optional, Kind::String) => Shape::Str,
        (Label::Optional, Kind::Bytes) => Shape::Bytes,
        (Label::Optional, Kind::Payload) => Shape::Payload,
        (Label::Optional, Kind::Message(_)) => Shape::Message,
        (Label::Optional, _) => Shape::Scalar,
        (Label::Repeated, Kind::String) => Shape::RepStr,
        (Label::Repeated, Kind::Bytes) => Shape::RepBytes,
        (Label::Repeated, Kind::Message(_)) => Shape::RepMessage,
        (Label::Repeated, Kind::Payload) => panic!("repeated payload fields are not supported"),
        (Label::Repeated, Kind::Enum(_)) => panic!("repeated enum fields are not supported"),
        (Label::Repeated, _) => Shape::RepScalar,
    }
}

/// The Rust type of a scalar value as passed through the C ABI.
pub(crate) fn scalar_rust(k: Kind) -> &'static str {
    match k {
        Kind::Int64 => "i64",
        Kind::Int32 | Kind::Enum(_) => "i32",
        Kind::UInt64 => "u64",
        Kind::Float => "f32",
        Kind::Double => "f64",
        _ => unreachable!("not a scalar: {k:?}"),
    }
}

/// The C type of a scalar value.
pub(crate) fn scalar_c(k: Kind) -> &'static str {
    match k {
        Kind::Int64 => "int64_t",
        Kind::Int32 | Kind::Enum(_) => "int32_t",
        Kind::UInt64 => "uint64_t",
        Kind::Float => "float",
        Kind::Double => "double",
        _ => unreachable!("not a scalar: {k:?}"),
    }
}

const S_READ: &str =
    "`m` is NULL or a live handle of this type that no other thread modifies during the call.";
const S_WRITE: &str =
    "`m` is NULL or a live handle of this type that no other thread uses during the call.";
const SAFETY_READ: &str =
    "`m` is NULL or a live handle, not modified elsewhere during the call (contract above).";
const SAFETY_WRITE: &str =
    "`m` is NULL or a live handle used by no one else during the call (contract above).";

/// One generated function.
struct Func<'a> {
    name: String,
    doc: Vec<String>,
    safety_doc: String,
    params: String,
    ret: String,
    safety_comment: &'a str,
    body: String,
}

struct Out {
    text: String,
    names: BTreeSet<String>,
}

impl Out {
    fn func(&mut self, f: Func<'_>) {
        assert!(
            self.names.insert(f.name.clone()),
            "duplicate C function name {}",
            f.name
        );
        let o = &mut self.text;
        for line in &f.doc {
            if line.is_empty() {
                writeln!(o, "///").unwrap();
            } else {
                writeln!(o, "/// {line}").unwrap();
            }
        }
        let ret = if f.ret.is_empty() {
            String::new()
        } else {
            format!(" -> {}", f.ret)
        };
        if f.safety_doc.is_empty() {
            // No pointer arguments: a safe function.
            writeln!(o, "#[unsafe(no_mangle)]").unwrap();
            writeln!(o, "pub extern \"C\" fn {}({}){ret} {{", f.name, f.params).unwrap();
            writeln!(o, "    {}", f.body).unwrap();
        } else {
            writeln!(o, "///\n/// # Safety\n/// {}", f.safety_doc).unwrap();
            writeln!(o, "#[unsafe(no_mangle)]").unwrap();
            writeln!(
                o,
                "pub unsafe extern \"C\" fn {}({}){ret} {{",
                f.name, f.params
            )
            .unwrap();
            writeln!(o, "    // SAFETY: {}", f.safety_comment).unwrap();
            writeln!(o, "    unsafe {{ {} }}", f.body).unwrap();
        }
        writeln!(o, "}}\n").unwrap();
    }
}

/// Generates the whole file.
pub fn generate() -> String {
    let mut out = Out {
        text: String::new(),
        names: BTreeSet::new(),
    };
    out.text.push_str(HEADER);
    gen_constants(&mut out.text);
    for m in MESSAGES {
        gen_message(&mut out, m);
    }
    out.text
}

const HEADER: &str = "\
// @generated by `cargo run -p codegen` from src/proto/schema.rs. Do not edit.
//! Opaque handles and per-field accessors of every message, generated from the schema table.
//!
//! Rules shared by every function here (see also the `ffi` module documentation):
//! - a NULL handle is reported as `ONNXL_STATUS_NULL_POINTER` (getters return their zero value,
//!   NULL or an empty view; the last error says why);
//! - child pointers and views are owned by the handle they came from: never free them;
//! - a pointer to an element of a repeated MESSAGE field stays valid while other elements are
//!   added (protobuf's rule): until that element is removed, the field cleared, or the parent
//!   freed; a view of a repeated string or scalar array is valid until that field is modified
//!   (add, remove, clear, set) or the parent is freed;
//!   other child pointers and views are valid until the field is cleared or set again, or the
//!   parent is freed (and, like everything under it, while the parent itself stays valid);
//! - setters copy their input (except `_set_raw_data_borrowed`).

use std::ffi::{c_char, c_void};

use super::buffer::OnnxlBuffer;
use super::fields::{
    add_message, assign, bytes, clear, clear_all, data, elem_bytes, elem_message, elem_string, elem_value, has, len,
    message, mutable_data, mutable_elem_message, mutable_message, push_bytes, push_value, remove, set_bytes,
    set_elem_bytes, set_elem_value, set_enum, set_value, string, value,
};
use super::handle::{Castable, OnnxlBytes, OnnxlStr, read, write, write_copied};
use super::message::{
    msg_add_unknown_fields, msg_byte_size, msg_clear, msg_clear_unknown_fields, msg_copy_from, msg_free, msg_new,
    msg_parse_from_bytes, msg_serialize, msg_unknown_fields,
};
use super::options::{OnnxlParseOptions, OnnxlSerializeOptions};
use super::owner::{OnnxlOwner, OnnxlReleaseCallback, payload_owner, payload_set_borrowed, payload_view};
use super::status::OnnxlStatus;
use crate::bytes::{ByteSpan, ProtoString};
use crate::proto::*;

";

fn gen_constants(o: &mut String) {
    for e in schema_enums() {
        let p = enum_const_prefix(e.name);
        for (name, v) in e.values {
            writeln!(
                o,
                "/// `{}.{name}`.\npub const {p}_{name}: i32 = {v};",
                e.name
            )
            .unwrap();
        }
        o.push('\n');
    }
    let p = enum_const_prefix("TensorProto.DataType");
    for (name, v) in data_types() {
        writeln!(
            o,
            "/// `TensorProto.DataType.{name}` (values of `data_type` / `elem_type` fields)."
        )
        .unwrap();
        writeln!(o, "pub const {p}_{name}: i32 = {v};").unwrap();
    }
    o.push('\n');
    for m in MESSAGES {
        for oneof in oneofs(m) {
            let p = oneof_const_prefix(m.name, oneof);
            writeln!(
                o,
                "/// `{}_{oneof}_case()` when no member of `oneof {oneof}` is set.",
                c_prefix(m.name)
            )
            .unwrap();
            writeln!(o, "pub const {p}_NOT_SET: u32 = 0;").unwrap();
            for f in m.fields.iter().filter(|f| f.oneof == Some(oneof)) {
                writeln!(
                    o,
                    "/// `{}_{oneof}_case()` when `{}` is set.",
                    c_prefix(m.name),
                    f.name
                )
                .unwrap();
                writeln!(
                    o,
                    "pub const {p}_{}: u32 = {};",
                    f.name.to_ascii_uppercase(),
                    f.number
                )
                .unwrap();
            }
            o.push('\n');
        }
    }
}

fn gen_message(out: &mut Out, m: &MessageDef) {
    let ct = c_type(m.name);
    let rt = rust_type_name(m.name);
    let p = c_prefix(m.name);
    let o = &mut out.text;
    writeln!(o, "/// `onnx.{}` (opaque handle).", m.name).unwrap();
    writeln!(o, "///").unwrap();
    writeln!(
        o,
        "/// Ownership: a handle from `{p}_new` (or a load / parse function) is owned by the caller and \
         freed with `{p}_free`; a handle returned by an accessor of another message is borrowed from it."
    )
    .unwrap();
    writeln!(
        o,
        "/// Thread safety: like a protobuf message: any number of threads may call read-only (`const`) \
         functions on it at once; a modifying function needs exclusive access to it and to everything \
         reachable from it."
    )
    .unwrap();
    writeln!(o, "pub struct {ct} {{\n    _private: [u8; 0],\n}}\n").unwrap();
    writeln!(o, "impl Castable for {ct} {{\n    type Rust = {rt};\n}}\n").unwrap();

    gen_lifecycle(out, m);
    for oneof in oneofs(m) {
        gen_oneof_case(out, m, oneof);
    }
    for f in m.fields {
        gen_field(out, m, f);
    }
}

fn gen_lifecycle(out: &mut Out, m: &MessageDef) {
    let ct = c_type(m.name);
    let p = c_prefix(m.name);
    let n = m.name;
    out.func(Func {
        name: format!("{p}_new"),
        doc: vec![
            format!("A new, empty `{n}` (every field unset); NULL only if the library panicked."),
            String::new(),
            format!("Ownership: the caller owns the handle and frees it with `{p}_free`."),
        ],
        safety_doc: String::new(),
        params: String::new(),
        ret: format!("*mut {ct}"),
        safety_comment: "no pointer arguments.",
        body: format!("msg_new::<{ct}>()"),
    });
    out.func(Func {
        name: format!("{p}_free"),
        doc: vec![
            format!(
                "Frees a `{n}` made by `{p}_new` or a load / parse function (NULL is ignored)."
            ),
            String::new(),
            "Every pointer and view taken from it becomes invalid; owner tokens retained from it \
             stay valid. Never pass a pointer returned by an accessor of another message."
                .into(),
        ],
        safety_doc: "`m` is NULL or an owned handle, not freed yet and not in use elsewhere."
            .into(),
        params: format!("m: *mut {ct}"),
        ret: "".into(),
        safety_comment: "`m` is NULL or an owned handle (contract above).",
        body: "msg_free(m)".into(),
    });
    out.func(Func {
        name: format!("{p}_clear"),
        doc: vec![
            "Unsets every field (protobuf `Clear()`).".into(),
            String::new(),
            "Every pointer and view taken from `m` becomes invalid.".into(),
        ],
        safety_doc: S_WRITE.into(),
        params: format!("m: *mut {ct}"),
        ret: "OnnxlStatus".into(),
        safety_comment: SAFETY_WRITE,
        body: format!("msg_clear::<{ct}>(m)"),
    });
    out.func(Func {
        name: format!("{p}_copy_from"),
        doc: vec![
            "Makes `dst` a deep copy of `src` (protobuf `CopyFrom()`); copying onto itself does nothing. \
             When memory runs out: `ONNXL_STATUS_OUT_OF_MEMORY`, `dst` unchanged."
                .into(),
            String::new(),
            "Borrowed tensor bytes stay borrowed in the copy and share their owner token (bytes \
             borrowed without an owner stay the caller's to keep alive). Pointers and views taken \
             from `dst` become invalid; `src` is only read."
                .into(),
        ],
        safety_doc: "`dst` and `src` are NULL or live handles of this type; no other thread uses `dst` \
                     or modifies `src` during the call."
            .into(),
        params: format!("dst: *mut {ct}, src: *const {ct}"),
        ret: "OnnxlStatus".into(),
        safety_comment: "live or NULL handles (contract above).",
        body: "msg_copy_from(dst, src)".into(),
    });
    out.func(Func {
        name: format!("{p}_parse_from_bytes"),
        doc: vec![
            format!("Replaces `m` with the `{n}` encoded in `len` bytes at `data` (protobuf `ParseFromString`); `m` is unchanged on failure."),
            String::new(),
            "Without `no_copy` the bytes are copied and may be freed after the call. With \
             `opts->no_copy`, large payloads BORROW `data` without an owner token: the caller keeps \
             `data` valid and unchanged while `m` is used. `opts` may be NULL (defaults)."
                .into(),
        ],
        safety_doc: format!("{S_WRITE} `data..data+len` is readable (NULL only with `len` 0); `opts` is NULL or valid options."),
        params: format!("m: *mut {ct}, data: *const u8, len: usize, opts: *const OnnxlParseOptions"),
        ret: "OnnxlStatus".into(),
        safety_comment: "forwarded contract above.",
        body: "msg_parse_from_bytes(m, data, len, opts)".into(),
    });
    out.func(Func {
        name: format!("{p}_serialize"),
        doc: vec![
            "Encodes `m` into a new buffer, byte-identical to protobuf's `SerializeToString`; writes \
             it to `*out` only on success."
                .into(),
            String::new(),
            "Ownership: the caller owns `*out` and frees it with `onnxl_buffer_free`. `opts` may be NULL.".into(),
        ],
        safety_doc: format!("{S_READ} `opts` is NULL or valid options; `out` is NULL or writable."),
        params: format!("m: *const {ct}, opts: *const OnnxlSerializeOptions, out: *mut *mut OnnxlBuffer"),
        ret: "OnnxlStatus".into(),
        safety_comment: "forwarded contract above.",
        body: "msg_serialize(m, opts, out)".into(),
    });
    out.func(Func {
        name: format!("{p}_byte_size"),
        doc: vec![
            "Size in bytes of the encoded message (protobuf `ByteSizeLong()`); 0 when `m` is NULL."
                .into(),
        ],
        safety_doc: S_READ.into(),
        params: format!("m: *const {ct}"),
        ret: "u64".into(),
        safety_comment: SAFETY_READ,
        body: "msg_byte_size(m)".into(),
    });
    out.func(Func {
        name: format!("{p}_has_unknown_fields"),
        doc: vec!["True when `m` holds fields the schema does not know (kept as read, written back after the known fields).".into()],
        safety_doc: S_READ.into(),
        params: format!("m: *const {ct}"),
        ret: "bool".into(),
        safety_comment: SAFETY_READ,
        body: format!(
            "read(m, false, |m| Ok(!m.{}.is_empty()))",
            unknown_fields_path(m)
        ),
    });
    out.func(Func {
        name: format!("{p}_unknown_fields"),
        doc: vec![
            "The raw wire bytes (tags included) of the fields the schema does not know, in the order they were read.".into(),
            String::new(),
            "Lifetime: the view points into `m`; valid until the unknown fields of `m` change or `m` is freed.".into(),
        ],
        safety_doc: S_READ.into(),
        params: format!("m: *const {ct}"),
        ret: "OnnxlBytes".into(),
        safety_comment: SAFETY_READ,
        body: "msg_unknown_fields(m)".into(),
    });
    out.func(Func {
        name: format!("{p}_add_unknown_fields"),
        doc: vec![
            "Appends raw wire bytes (one or more complete protobuf fields, checked) to the unknown fields of `m`.".into(),
            String::new(),
            "The bytes are copied.".into(),
        ],
        safety_doc: format!("{S_WRITE} `data..data+len` is readable (NULL only with `len` 0)."),
        params: format!("m: *mut {ct}, data: *const u8, len: usize"),
        ret: "OnnxlStatus".into(),
        safety_comment: SAFETY_WRITE,
        body: "msg_add_unknown_fields(m, data, len)".into(),
    });
    out.func(Func {
        name: format!("{p}_clear_unknown_fields"),
        doc: vec!["Drops the unknown fields of `m`.".into()],
        safety_doc: S_WRITE.into(),
        params: format!("m: *mut {ct}"),
        ret: "OnnxlStatus".into(),
        safety_comment: SAFETY_WRITE,
        body: format!("msg_clear_unknown_fields::<{ct}>(m)"),
    });
}

fn gen_oneof_case(out: &mut Out, m: &MessageDef, oneof: &str) {
    let ct = c_type(m.name);
    let p = c_prefix(m.name);
    let en = format!("{}{}", rust_type_name(m.name), camel(oneof));
    let mut arms = String::new();
    for f in m.fields.iter().filter(|f| f.oneof == Some(oneof)) {
        write!(arms, "Some({en}::{}(_)) => {}, ", camel(f.name), f.number).unwrap();
    }
    out.func(Func {
        name: format!("{p}_{oneof}_case"),
        doc: vec![format!(
            "Which member of `oneof {oneof}` is set: its field number (`{}_<FIELD>`), or `{}_NOT_SET` (0).",
            oneof_const_prefix(m.name, oneof),
            oneof_const_prefix(m.name, oneof)
        )],
        safety_doc: S_READ.into(),
        params: format!("m: *const {ct}"),
        ret: "u32".into(),
        safety_comment: SAFETY_READ,
        body: format!("read(m, 0, |m| Ok(match &m.{oneof} {{ {arms}None => 0 }}))"),
    });
}

fn gen_field(out: &mut Out, m: &MessageDef, f: &FieldDef) {
    let ct = c_type(m.name);
    let p = c_prefix(m.name);
    let n = f.name;
    let rf = crate::field_path(f);
    let decl = format!("`{}` of `{}`", proto_decl(f), m.name);
    let fq = format!("{}.{}", m.name, n);
    let sh = shape(f);
    let oneof = f.oneof;

    // has_ / clear_ for optional fields.
    if f.label == Label::Optional {
        let (has, clear) = match oneof {
            Some(_) => (
                format!("read(m, false, |m| Ok(m.has_{n}()))"),
                format!("write(m, |m| {{ m.clear_{n}(); Ok(()) }})"),
            ),
            None => (
                format!("has(m, |m| &m.{rf})"),
                format!("clear(m, |m| &mut m.{rf})"),
            ),
        };
        let what = match oneof {
            Some(o) => format!("True when `oneof {o}` holds `{n}`."),
            None => format!(
                "True when `{n}` is set (proto2 presence: set to its default still counts)."
            ),
        };
        out.func(Func {
            name: format!("{p}_has_{n}"),
            doc: vec![what, String::new(), decl.clone()],
            safety_doc: S_READ.into(),
            params: format!("m: *const {ct}"),
            ret: "bool".into(),
            safety_comment: SAFETY_READ,
            body: has,
        });
        let cdoc = match (oneof, sh) {
            (Some(o), _) => {
                format!("Unsets `{n}` if `oneof {o}` holds it (otherwise does nothing).")
            }
            (None, _) => format!("Unsets `{n}`."),
        };
        let inval = match sh {
            Shape::Message => {
                "Pointers taken from the field (and everything under it) become invalid."
            }
            Shape::Str | Shape::Bytes | Shape::Payload => "Views of the field become invalid.",
            _ => "",
        };
        out.func(Func {
            name: format!("{p}_clear_{n}"),
            doc: vec![
                cdoc,
                String::new(),
                format!("{decl}. {inval}").trim_end().to_string(),
            ],
            safety_doc: S_WRITE.into(),
            params: format!("m: *mut {ct}"),
            ret: "OnnxlStatus".into(),
            safety_comment: SAFETY_WRITE,
            body: clear,
        });
    } else {
        out.func(Func {
            name: format!("{p}_{n}_size"),
            doc: vec![
                format!("Number of `{n}` elements (0 when `m` is NULL)."),
                String::new(),
                decl.clone(),
            ],
            safety_doc: S_READ.into(),
            params: format!("m: *const {ct}"),
            ret: "usize".into(),
            safety_comment: SAFETY_READ,
            body: format!("len(m, |m| &m.{rf})"),
        });
        out.func(Func {
            name: format!("{p}_clear_{n}"),
            doc: vec![
                format!("Removes every `{n}` element."),
                String::new(),
                format!("{decl}. Pointers and views of its elements become invalid."),
            ],
            safety_doc: S_WRITE.into(),
            params: format!("m: *mut {ct}"),
            ret: "OnnxlStatus".into(),
            safety_comment: SAFETY_WRITE,
            body: format!("clear_all(m, |m| &mut m.{rf})"),
        });
        out.func(Func {
            name: format!("{p}_remove_{n}"),
            doc: vec![
                format!("Removes `{n}` element `i`; later elements move down by one (`ONNXL_STATUS_OUT_OF_RANGE` when `i` >= size)."),
                String::new(),
                format!("{decl}. Pointers and views of its elements become invalid."),
            ],
            safety_doc: S_WRITE.into(),
            params: format!("m: *mut {ct}, i: usize"),
            ret: "OnnxlStatus".into(),
            safety_comment: SAFETY_WRITE,
            body: format!("remove(m, i, \"{fq}\", |m| &mut m.{rf})"),
        });
    }

    match sh {
        Shape::Scalar => {
            let t = scalar_rust(f.kind);
            let get = match oneof {
                Some(_) => format!("read(m, Default::default(), |m| Ok(m.{n}()))"),
                None => format!("value(m, |m| &m.{rf})"),
            };
            let checked = match f.kind {
                Kind::Enum(e) => {
                    let vals: Vec<String> = e.values.iter().map(|(_, v)| v.to_string()).collect();
                    format!("check_enum(v, &[{}], \"{fq}\")?", vals.join(", "))
                }
                _ => "v".to_string(),
            };
            let set = match (oneof, f.kind) {
                (Some(_), _) => format!("write(m, |m| {{ m.set_{n}({checked}); Ok(()) }})"),
                (None, Kind::Enum(e)) => {
                    let vals: Vec<String> = e.values.iter().map(|(_, v)| v.to_string()).collect();
                    format!(
                        "set_enum(m, v, &[{}], \"{fq}\", |m| &mut m.{rf})",
                        vals.join(", ")
                    )
                }
                (None, _) => format!("set_value(m, v, |m| &mut m.{rf})"),
            };
            let enum_note = match f.kind {
                Kind::Enum(e) => format!(
                    " `v` must be a value of `{}` (`{}_*`), else `ONNXL_STATUS_INVALID_ARGUMENT`.",
                    e.name,
                    enum_const_prefix(e.name)
                ),
                _ => String::new(),
            };
            let unset = if oneof.is_some() {
                "0 when another member (or none) is set"
            } else {
                "0 when unset"
            };
            out.func(Func {
                name: format!("{p}_{n}"),
                doc: vec![
                    format!("The value of `{n}`; {unset} or `m` is NULL."),
                    String::new(),
                    decl.clone(),
                ],
                safety_doc: S_READ.into(),
                params: format!("m: *const {ct}"),
                ret: t.into(),
                safety_comment: SAFETY_READ,
                body: get,
            });
            let sw = if oneof.is_some() {
                " (switches the oneof to it)"
            } else {
                ""
            };
            out.func(Func {
                name: format!("{p}_set_{n}"),
                doc: vec![
                    format!("Sets `{n}` to `v`{sw}.{enum_note}"),
                    String::new(),
                    decl.clone(),
                ],
                safety_doc: S_WRITE.into(),
                params: format!("m: *mut {ct}, v: {t}"),
                ret: "OnnxlStatus".into(),
                safety_comment: SAFETY_WRITE,
                body: set,
            });
        }
        Shape::Str | Shape::Bytes => {
            let (view, ptr) = if sh == Shape::Str {
                ("OnnxlStr", "c_char")
            } else {
                ("OnnxlBytes", "u8")
            };
            let get = match oneof {
                Some(_) => format!("read(m, {view}::FAILED, |m| Ok({view}::of(m.{n}())))"),
                None if sh == Shape::Str => format!("string(m, |m| &m.{rf})"),
                None => format!("bytes(m, |m| &m.{rf})"),
            };
            let set = match oneof {
                Some(_) => format!(
                    "write_copied(m, data.cast::<u8>(), len, |m, v| {{ m.set_{n}(ProtoString::from(v)); Ok(()) }})"
                ),
                None => format!("set_bytes(m, data, len, |m| &mut m.{rf})"),
            };
            out.func(Func {
                name: format!("{p}_{n}"),
                doc: vec![
                    format!("A view of `{n}` (empty when unset; `data` NULL only when `m` is NULL)."),
                    String::new(),
                    format!("{decl}. Lifetime: the view points into `m`; valid until `{n}` is set or cleared, or `m` is freed."),
                ],
                safety_doc: S_READ.into(),
                params: format!("m: *const {ct}"),
                ret: view.into(),
                safety_comment: SAFETY_READ,
                body: get,
            });
            let sw = if oneof.is_some() {
                " (switches the oneof to it)"
            } else {
                ""
            };
            out.func(Func {
                name: format!("{p}_set_{n}"),
                doc: vec![
                    format!("Sets `{n}` to a copy of `len` bytes at `data`{sw}."),
                    String::new(),
                    format!("{decl}. `data` may be freed after the call; it may point into `m`."),
                ],
                safety_doc: format!(
                    "{S_WRITE} `data..data+len` is readable (NULL only with `len` 0)."
                ),
                params: format!("m: *mut {ct}, data: *const {ptr}, len: usize"),
                ret: "OnnxlStatus".into(),
                safety_comment: "forwarded contract above.",
                body: set,
            });
        }
        Shape::Payload => gen_payload(out, m, f),
        Shape::Message => {
            let Kind::Message(sub) = f.kind else {
                unreachable!()
            };
            let sct = c_type(sub);
            let (get, mutable) = match oneof {
                Some(_) => (format!("m.{n}()"), format!("m.mutable_{n}()")),
                None => (
                    format!("m.{}()", rust_member(f)),
                    format!("m.mutable_{n}()"),
                ),
            };
            let unset = if oneof.is_some() {
                "when another member (or none) of the oneof is set"
            } else {
                "when unset"
            };
            out.func(Func {
                name: format!("{p}_{n}"),
                doc: vec![
                    format!("`{n}` (read-only); {unset}, a shared empty default `{sub}`. NULL only when `m` is NULL."),
                    String::new(),
                    format!(
                        "{decl}. Lifetime: owned by `m` (never free it); valid until `{n}` is cleared or replaced, or `m` is freed. \
                         Never modify it (the default instance is shared by every thread)."
                    ),
                ],
                safety_doc: S_READ.into(),
                params: format!("m: *const {ct}"),
                ret: format!("*const {sct}"),
                safety_comment: SAFETY_READ,
                body: format!("message::<{ct}, {sct}>(m, |m| {get})"),
            });
            let sw = if oneof.is_some() {
                "; switches the oneof to it"
            } else {
                ""
            };
            out.func(Func {
                name: format!("{p}_mutable_{n}"),
                doc: vec![
                    format!("`{n}` for writing, set to an empty `{sub}` first if unset{sw}. NULL only when `m` is NULL."),
                    String::new(),
                    format!("{decl}. Lifetime: owned by `m` (never free it); valid until `{n}` is cleared or replaced, or `m` is freed."),
                ],
                safety_doc: S_WRITE.into(),
                params: format!("m: *mut {ct}"),
                ret: format!("*mut {sct}"),
                safety_comment: SAFETY_WRITE,
                body: format!("mutable_message::<{ct}, {sct}>(m, |m| {mutable})"),
            });
        }
        Shape::RepScalar => {
            let t = scalar_rust(f.kind);
            out.func(Func {
                name: format!("{p}_{n}"),
                doc: vec![
                    format!("`{n}` element `i`; 0 (with `ONNXL_STATUS_OUT_OF_RANGE` as last error) when `i` >= size or `m` is NULL."),
                    String::new(),
                    decl.clone(),
                ],
                safety_doc: S_READ.into(),
                params: format!("m: *const {ct}, i: usize"),
                ret: t.into(),
                safety_comment: SAFETY_READ,
                body: format!("elem_value(m, i, \"{fq}\", |m| &m.{rf})"),
            });
            out.func(Func {
                name: format!("{p}_{n}_data"),
                doc: vec![
                    format!("The `{n}` elements as a contiguous array of `{p}_{n}_size(m)` values (NULL only when `m` is NULL; not to be read when the size is 0)."),
                    String::new(),
                    format!("{decl}. Lifetime: points into `m`; valid until `{n}` is resized (add, assign, remove, clear) or `m` is freed."),
                ],
                safety_doc: S_READ.into(),
                params: format!("m: *const {ct}"),
                ret: format!("*const {t}"),
                safety_comment: SAFETY_READ,
                body: format!("data(m, |m| &m.{rf})"),
            });
            out.func(Func {
                name: format!("{p}_mutable_{n}_data"),
                doc: vec![
                    format!(
                        "The `{n}` elements for in-place writing (NULL only when `m` is NULL)."
                    ),
                    String::new(),
                    format!("{decl}. Lifetime: as `{p}_{n}_data`."),
                ],
                safety_doc: S_WRITE.into(),
                params: format!("m: *mut {ct}"),
                ret: format!("*mut {t}"),
                safety_comment: SAFETY_WRITE,
                body: format!("mutable_data(m, |m| &mut m.{rf})"),
            });
            out.func(Func {
                name: format!("{p}_set_{n}"),
                doc: vec![format!("Sets `{n}` element `i` to `v` (`ONNXL_STATUS_OUT_OF_RANGE` when `i` >= size)."), String::new(), decl.clone()],
                safety_doc: S_WRITE.into(),
                params: format!("m: *mut {ct}, i: usize, v: {t}"),
                ret: "OnnxlStatus".into(),
                safety_comment: SAFETY_WRITE,
                body: format!("set_elem_value(m, i, v, \"{fq}\", |m| &mut m.{rf})"),
            });
            out.func(Func {
                name: format!("{p}_add_{n}"),
                doc: vec![
                    format!("Appends `v` to `{n}`."),
                    String::new(),
                    format!("{decl}. May move the elements (see `{p}_{n}_data`)."),
                ],
                safety_doc: S_WRITE.into(),
                params: format!("m: *mut {ct}, v: {t}"),
                ret: "OnnxlStatus".into(),
                safety_comment: SAFETY_WRITE,
                body: format!("push_value(m, v, |m| &mut m.{rf})"),
            });
            out.func(Func {
                name: format!("{p}_assign_{n}"),
                doc: vec![
                    format!(
                        "Replaces every `{n}` element with a copy of the `count` values at `data`."
                    ),
                    String::new(),
                    format!("{decl}. `data` may point into `m`."),
                ],
                safety_doc: format!(
                    "{S_WRITE} `data` is readable for `count` values (NULL only with `count` 0)."
                ),
                params: format!("m: *mut {ct}, data: *const {t}, count: usize"),
                ret: "OnnxlStatus".into(),
                safety_comment: "forwarded contract above.",
                body: format!("assign(m, data, count, |m| &mut m.{rf})"),
            });
        }
        Shape::RepStr | Shape::RepBytes => {
            let (view, ptr, elem_fn) = if sh == Shape::RepStr {
                ("OnnxlStr", "c_char", "elem_string")
            } else {
                ("OnnxlBytes", "u8", "elem_bytes")
            };
            out.func(Func {
                name: format!("{p}_{n}"),
                doc: vec![
                    format!("A view of `{n}` element `i` (`data` NULL when `i` >= size or `m` is NULL)."),
                    String::new(),
                    format!(
                        "{decl}. Lifetime: points into `m`; valid until `{n}` is modified (set, add, remove, clear) or `m` is freed \
                         (short values are stored inside the element array, which moves when it grows)."
                    ),
                ],
                safety_doc: S_READ.into(),
                params: format!("m: *const {ct}, i: usize"),
                ret: view.into(),
                safety_comment: SAFETY_READ,
                body: format!("{elem_fn}(m, i, \"{fq}\", |m| &m.{rf})"),
            });
            out.func(Func {
                name: format!("{p}_set_{n}"),
                doc: vec![
                    format!("Sets `{n}` element `i` to a copy of `len` bytes at `data` (`ONNXL_STATUS_OUT_OF_RANGE` when `i` >= size)."),
                    String::new(),
                    format!("{decl}. `data` may point into `m`."),
                ],
                safety_doc: format!("{S_WRITE} `data..data+len` is readable (NULL only with `len` 0)."),
                params: format!("m: *mut {ct}, i: usize, data: *const {ptr}, len: usize"),
                ret: "OnnxlStatus".into(),
                safety_comment: "forwarded contract above.",
                body: format!("set_elem_bytes(m, i, data, len, \"{fq}\", |m| &mut m.{rf})"),
            });
            out.func(Func {
                name: format!("{p}_add_{n}"),
                doc: vec![
                    format!("Appends a copy of `len` bytes at `data` to `{n}`."),
                    String::new(),
                    format!("{decl}. `data` may point into `m`."),
                ],
                safety_doc: format!(
                    "{S_WRITE} `data..data+len` is readable (NULL only with `len` 0)."
                ),
                params: format!("m: *mut {ct}, data: *const {ptr}, len: usize"),
                ret: "OnnxlStatus".into(),
                safety_comment: "forwarded contract above.",
                body: format!("push_bytes(m, data, len, |m| &mut m.{rf})"),
            });
        }
        Shape::RepMessage => {
            let Kind::Message(sub) = f.kind else {
                unreachable!()
            };
            let sct = c_type(sub);
            out.func(Func {
                name: format!("{p}_{n}"),
                doc: vec![
                    format!("`{n}` element `i` (read-only); NULL when `i` >= size or `m` is NULL."),
                    String::new(),
                    format!("{decl}. Lifetime: owned by `m` (never free it); valid until this element is removed, `{n}` is cleared, or `m` is freed (adding elements does not move it)."),
                ],
                safety_doc: S_READ.into(),
                params: format!("m: *const {ct}, i: usize"),
                ret: format!("*const {sct}"),
                safety_comment: SAFETY_READ,
                body: format!("elem_message::<{ct}, {sct}>(m, i, \"{fq}\", |m| &m.{rf})"),
            });
            out.func(Func {
                name: format!("{p}_mutable_{n}"),
                doc: vec![
                    format!("`{n}` element `i` for writing; NULL when `i` >= size or `m` is NULL."),
                    String::new(),
                    format!("{decl}. Lifetime: as `{p}_{n}`."),
                ],
                safety_doc: S_WRITE.into(),
                params: format!("m: *mut {ct}, i: usize"),
                ret: format!("*mut {sct}"),
                safety_comment: SAFETY_WRITE,
                body: format!(
                    "mutable_elem_message::<{ct}, {sct}>(m, i, \"{fq}\", |m| &mut m.{rf})"
                ),
            });
            out.func(Func {
                name: format!("{p}_add_{n}"),
                doc: vec![
                    format!("Appends an empty `{sub}` to `{n}` and returns it for writing; NULL only when `m` is NULL."),
                    String::new(),
                    format!(
                        "{decl}. Lifetime: as `{p}_{n}`: adding elements never moves the existing ones."
                    ),
                ],
                safety_doc: S_WRITE.into(),
                params: format!("m: *mut {ct}"),
                ret: format!("*mut {sct}"),
                safety_comment: SAFETY_WRITE,
                body: format!("add_message::<{ct}, {sct}>(m, |m| &mut m.{rf})"),
            });
        }
    }
}

fn gen_payload(out: &mut Out, m: &MessageDef, f: &FieldDef) {
    let ct = c_type(m.name);
    let p = c_prefix(m.name);
    let n = f.name;
    let rf = crate::field_path(f);
    let decl = format!("`{}` of `{}`", proto_decl(f), m.name);
    out.func(Func {
        name: format!("{p}_{n}"),
        doc: vec![
            format!("The bytes of `{n}`, without copying: writes the first byte to `*data` (never NULL) and the length to `*len` (0 when unset), only on success."),
            String::new(),
            format!(
                "{decl}. Lifetime: valid until `{n}` is set or cleared, or `m` is freed; to keep the bytes longer, \
                 retain `{p}_{n}_owner(m)`. Bytes parsed with `no_copy` from caller memory live as long as that memory."
            ),
        ],
        safety_doc: format!("{S_READ} `data` and `len` are NULL or writable."),
        params: format!("m: *const {ct}, data: *mut *const u8, len: *mut usize"),
        ret: "OnnxlStatus".into(),
        safety_comment: "forwarded contract above.",
        body: format!("payload_view(m, data, len, |m| m.{n}())"),
    });
    out.func(Func {
        name: format!("{p}_set_{n}"),
        doc: vec![
            format!("Sets `{n}` to a copy of `len` bytes at `data`."),
            String::new(),
            format!("{decl}. `data` may be freed after the call; it may point into `m`."),
        ],
        safety_doc: format!("{S_WRITE} `data..data+len` is readable (NULL only with `len` 0)."),
        params: format!("m: *mut {ct}, data: *const u8, len: usize"),
        ret: "OnnxlStatus".into(),
        safety_comment: "forwarded contract above.",
        body: format!(
            "write_copied(m, data, len, |m, v| {{ m.{rf} = Some(ByteSpan::from_vec(v)); Ok(()) }})"
        ),
    });
    out.func(Func {
        name: format!("{p}_set_{n}_borrowed"),
        doc: vec![
            format!("Sets `{n}` to BORROW `len` bytes at `data` without copying."),
            String::new(),
            format!(
                "{decl}. With `release` non-NULL, the library owns a reference to the memory: `release(user_data)` runs \
                 exactly once, on any thread, when the last user is gone (the tensor, its copies, retained owner tokens); \
                 until then `data` must stay valid and unchanged. With `release` NULL the bytes have no owner: the caller \
                 keeps them valid while `m` or any copy of it is used, and `{p}_{n}_owner` fails. On failure \
                 nothing is borrowed and `release` is not called."
            ),
        ],
        safety_doc: format!("{S_WRITE} `data..data+len` is readable (NULL only with `len` 0) for the lifetime stated above."),
        params: format!(
            "m: *mut {ct}, data: *const u8, len: usize, release: OnnxlReleaseCallback, user_data: *mut c_void"
        ),
        ret: "OnnxlStatus".into(),
        safety_comment: "forwarded contract above.",
        body: format!("payload_set_borrowed(m, data, len, release, user_data, |m, span| m.{rf} = Some(span))"),
    });
    out.func(Func {
        name: format!("{p}_{n}_owner"),
        doc: vec![
            format!("A retained owner token that keeps the current bytes of `{n}` valid and unchanged after `m` (and its model) is freed; NULL on failure."),
            String::new(),
            format!(
                "{decl}. Takes a non-const `m` because owned bytes are first moved (not copied: `{p}_{n}` keeps returning \
                 the same pointer) into a shared buffer; later writes to `{n}` copy instead of changing the shared bytes. \
                 Fails (NULL, `ONNXL_STATUS_UNSUPPORTED`) for bytes borrowed from caller memory without an owner, and \
                 (`ONNXL_STATUS_INVALID_ARGUMENT`) when `{n}` is unset. Ownership: the caller owns the returned reference \
                 and releases it with `onnxl_owner_release`; `onnxl_owner_data` gives the bytes."
            ),
        ],
        safety_doc: S_WRITE.into(),
        params: format!("m: *mut {ct}"),
        ret: "*const OnnxlOwner".into(),
        safety_comment: SAFETY_WRITE,
        body: format!("payload_owner(m, |m| m.{rf}.as_mut())"),
    });
    out.func(Func {
        name: format!("{p}_{n}_is_borrowed"),
        doc: vec![
            format!("True when the bytes of `{n}` are not owned by the tensor (no-copy parse, memory map, shared buffer, caller memory); false when owned or unset."),
            String::new(),
            decl,
        ],
        safety_doc: S_READ.into(),
        params: format!("m: *const {ct}"),
        ret: "bool".into(),
        safety_comment: SAFETY_READ,
        body: format!("read(m, false, |m| Ok(m.{rf}.as_ref().is_some_and(|b| b.is_borrowed())))"),
    });
}
