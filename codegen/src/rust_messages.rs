//! Writes `src/proto/generated.rs`: structs, codec and accessors of every message.

use std::fmt::Write;

use crate::schema::{FieldDef, Kind, Label, MESSAGES, MessageDef};
use crate::{
    camel, cycle_fields, field_path, has_rare, is_cycle_field, is_rare, oneofs, proto_decl,
    rare_presets, rust_member, rust_type_name, snake, unknown_fields_path, varint_bytes,
};

/// Repeated message fields whose elements may be parsed ahead of time, in parallel.
const PARALLEL_FIELDS: &[(&str, &str)] = &[("GraphProto", "initializer")];

/// Sub-message fields stored inline (`Option<T>`, or `T` in a oneof case) instead of boxed.
/// None: every sub-message is boxed, so that its address is its identity for the life of the
/// value (protobuf C++'s contract: `set_allocated_x(p)` makes `p` the field, `mutable_x()` keeps
/// returning it), which the C++ classes, whose objects are these structs, rely on. Inline fields
/// must not form a cycle (a struct cannot contain itself); `inline_fields_are_acyclic` checks that.
/// The generator refuses to run while any is listed (`cxx_rust::assert_sub_messages_are_boxed`).
const INLINE_MESSAGE_FIELDS: &[(&str, &str)] = &[];

/// True when sub-message field `f` of `m` is stored in a `MsgBox`.
pub(crate) fn boxed(m: &MessageDef, f: &FieldDef) -> bool {
    !INLINE_MESSAGE_FIELDS.contains(&(m.name, f.name))
}

/// The storage type of sub-message field `f` of `m` holding a `vt`.
fn message_storage(m: &MessageDef, f: &FieldDef, vt: &str) -> String {
    if boxed(m, f) {
        format!("MsgBox<{vt}>")
    } else {
        vt.to_string()
    }
}

/// An expression making an empty `vt` stored as field `f` of `m` (boxed or not).
fn new_message(m: &MessageDef, f: &FieldDef, vt: &str) -> String {
    if boxed(m, f) {
        format!("MsgBox::new({vt}::new())")
    } else {
        format!("{vt}::new()")
    }
}

/// Panics when the inline sub-message fields form a cycle.
fn inline_fields_are_acyclic() {
    fn visit(name: &str, path: &mut Vec<String>) {
        assert!(
            !path.iter().any(|p| p == name),
            "inline sub-message fields form a cycle: {path:?} -> {name}"
        );
        path.push(name.to_string());
        for &(owner, field) in INLINE_MESSAGE_FIELDS {
            if owner == name {
                let m = MESSAGES
                    .iter()
                    .find(|m| m.name == owner)
                    .expect("known message");
                let f = m
                    .fields
                    .iter()
                    .find(|f| f.name == field)
                    .expect("known field");
                let Kind::Message(target) = f.kind else {
                    panic!("{owner}.{field} is not a sub-message")
                };
                visit(target, path);
            }
        }
        path.pop();
    }
    for m in MESSAGES {
        visit(m.name, &mut Vec::new());
    }
}

fn plain_name(f: &FieldDef) -> &'static str {
    f.name
}

/// The Rust type of one value of the field (element type for repeated fields).
pub(crate) fn value_type(k: Kind) -> String {
    match k {
        Kind::Int64 => "i64".into(),
        Kind::Int32 | Kind::Enum(_) => "i32".into(),
        Kind::UInt64 => "u64".into(),
        Kind::Float => "f32".into(),
        Kind::Double => "f64".into(),
        Kind::String | Kind::Bytes => "ProtoString".into(),
        Kind::Payload => "ByteSpan".into(),
        Kind::Message(m) => rust_type_name(m),
    }
}

fn is_scalar(k: Kind) -> bool {
    matches!(
        k,
        Kind::Int64 | Kind::Int32 | Kind::UInt64 | Kind::Float | Kind::Double | Kind::Enum(_)
    )
}

fn wire_type(k: Kind) -> u32 {
    match k {
        Kind::Int64 | Kind::Int32 | Kind::UInt64 | Kind::Enum(_) => 0,
        Kind::Double => 1,
        Kind::Float => 5,
        Kind::String | Kind::Bytes | Kind::Payload | Kind::Message(_) => 2,
    }
}

fn tag_value(f: &FieldDef, wt: u32) -> u32 {
    (f.number << 3) | wt
}

/// The tag bytes as a Rust byte-array literal.
fn tag_lit(f: &FieldDef, wt: u32) -> String {
    let b = varint_bytes(tag_value(f, wt) as u64);
    let parts: Vec<String> = b.iter().map(|x| format!("0x{x:02x}")).collect();
    format!("&[{}]", parts.join(", "))
}

fn tag_len(f: &FieldDef, wt: u32) -> usize {
    varint_bytes(tag_value(f, wt) as u64).len()
}

/// Expression converting a scalar value `v` to the u64 written as a varint.
fn varint_of(k: Kind, v: &str) -> String {
    match k {
        Kind::Int64 => format!("{v} as u64"),
        Kind::Int32 | Kind::Enum(_) => format!("{v} as i64 as u64"),
        Kind::UInt64 => v.to_string(),
        _ => unreachable!(),
    }
}

/// Expression reading one scalar (non-packed) from `r`.
fn read_scalar(k: Kind) -> String {
    match k {
        Kind::Int64 => "r.read_varint()? as i64".into(),
        Kind::Int32 | Kind::Enum(_) => "r.read_varint()? as i32".into(),
        Kind::UInt64 => "r.read_varint()?".into(),
        Kind::Float => "f32::from_bits(r.read_fixed32()?)".into(),
        Kind::Double => "f64::from_bits(r.read_fixed64()?)".into(),
        _ => unreachable!(),
    }
}

pub(crate) fn oneof_enum_name(m: &MessageDef, oneof: &str) -> String {
    format!("{}{}", rust_type_name(m.name), camel(oneof))
}

/// Generates the whole file.
pub fn generate() -> String {
    inline_fields_are_acyclic();
    let mut o = String::new();
    o.push_str(
        "// @generated by `cargo run -p codegen` from src/proto/schema.rs. Do not edit.\n\
         //! Message structs, codec and accessors generated from the schema table.\n\n\
         use std::alloc::Layout;\n\n\
         use crate::bytes::{ByteSpan, CxxStringPool, ProtoString, UnknownFields};\n\
         use crate::error::{DecodeError, TryClone, clone_or_abort};\n\
         use crate::proto::{InlineVec, Message, MsgBox, Rare, RareFields, Repeated, RepeatedField};\n\
         use crate::wire::{Reader, SizeCursor, SizeTable, Sink, len_delimited_size, put_varint, varint_len};\n\n",
    );
    for m in MESSAGES {
        gen_struct(&mut o, m);
        gen_oneof_enums(&mut o, m);
        gen_codec(&mut o, m);
        gen_accessors(&mut o, m);
        gen_recycle(&mut o, m);
    }
    gen_recycler(&mut o);
    gen_tensor_visitors(&mut o);
    gen_tensor_rewriters(&mut o);
    gen_placed_tensor_walk(&mut o);
    gen_payload_paths(&mut o);
    gen_dispatch(&mut o);
    o
}

/// Names of the messages from which a `TensorProto` can be reached (TensorProto included).
fn reaches_tensor() -> Vec<&'static str> {
    let mut set = vec!["TensorProto"];
    loop {
        let before = set.len();
        for m in MESSAGES {
            if set.contains(&m.name) {
                continue;
            }
            if m.fields
                .iter()
                .any(|f| matches!(f.kind, Kind::Message(t) if set.contains(&t)))
            {
                set.push(m.name);
            }
        }
        if set.len() == before {
            return set;
        }
    }
}

/// `PAYLOAD_PATHS` and `payload_walk_index`: the fields of the encoding that lead to tensor
/// payloads, for walks of the bytes that skip payloads (`codec::sparse`).
fn gen_payload_paths(o: &mut String) {
    let reach = reaches_tensor();
    let walked: Vec<&MessageDef> = MESSAGES
        .iter()
        .filter(|m| reach.contains(&m.name))
        .collect();
    let index = |name: &str| walked.iter().position(|m| m.name == name).unwrap();
    o.push_str(
        "/// The fields of an encoding on the paths to tensor payloads, for walks of the bytes that skip\n\
         /// payloads (`codec::sparse`): `(message, field number, target)` for each message that can\n\
         /// hold a `TensorProto` (numbered as [`payload_walk_index`] numbers them), `target` being the\n\
         /// field's message or [`PAYLOAD_FIELD`] (`TensorProto.raw_data`).\n\
         pub(crate) const PAYLOAD_PATHS: &[(u8, u32, u8)] = &[\n",
    );
    for (i, m) in walked.iter().enumerate() {
        for f in m.fields {
            let target = match f.kind {
                Kind::Payload => "PAYLOAD_FIELD".to_string(),
                Kind::Message(t) if reach.contains(&t) => index(t).to_string(),
                _ => continue,
            };
            writeln!(
                o,
                "    ({i}, {}, {target}), // {}.{}",
                f.number, m.name, f.name
            )
            .unwrap();
        }
    }
    o.push_str(
        "];\n\n/// The `target` of a tensor payload in [`PAYLOAD_PATHS`].\n\
         pub(crate) const PAYLOAD_FIELD: u8 = u8::MAX;\n\n\
         /// The number of the message named `name` in [`PAYLOAD_PATHS`]; `None` when it cannot hold\n\
         /// a tensor payload.\n\
         pub(crate) fn payload_walk_index(name: &str) -> Option<u8> {\n    Some(match name {\n",
    );
    for (i, m) in walked.iter().enumerate() {
        writeln!(o, "        \"{}\" => {i},", m.name).unwrap();
    }
    o.push_str("        _ => return None,\n    })\n}\n\n");
}

/// `visit_tensors` / `visit_tensors_mut`: every TensorProto reachable from a message, in field
/// declaration order, depth-first (initializers, sparse tensors, attributes, subgraphs, function
/// bodies, training graphs, sequence/map/optional values).
fn gen_tensor_visitors(o: &mut String) {
    let set = reaches_tensor();
    for m in MESSAGES.iter().filter(|m| set.contains(&m.name)) {
        let rn = rust_type_name(m.name);
        writeln!(o, "impl {rn} {{").unwrap();
        for (suffix, refm, deref) in [("", "&", "&"), ("_mut", "&mut ", "&mut ")] {
            let _ = deref;
            writeln!(o, "    /// Calls `f` on every `TensorProto` reachable from this message, depth-first in").unwrap();
            writeln!(
                o,
                "    /// schema order (the message itself, for a `TensorProto`)."
            )
            .unwrap();
            writeln!(
                o,
                "    pub fn visit_tensors{suffix}(self: {refm}Self, f: &mut dyn FnMut({refm}TensorProto)) {{"
            )
            .unwrap();
            if m.name == "TensorProto" {
                writeln!(o, "        f(self);").unwrap();
            }
            for fd in m.fields {
                let Kind::Message(t) = fd.kind else { continue };
                if !set.contains(&t) {
                    continue;
                }
                let name = rust_member(fd);
                if let Some(oneof) = fd.oneof {
                    let en = oneof_enum_name(m, oneof);
                    writeln!(
                        o,
                        "        if let Some({en}::{}(v)) = {refm}self.{oneof} {{",
                        camel(fd.name)
                    )
                    .unwrap();
                    writeln!(o, "            v.visit_tensors{suffix}(f);\n        }}").unwrap();
                    continue;
                }
                let visit = if is_cycle_field(m.name, fd.name) {
                    format!("crate::wire::guard_stack(|| v.visit_tensors{suffix}(f))")
                } else {
                    format!("v.visit_tensors{suffix}(f)")
                };
                // A mutable walk must not allocate an unallocated rare box.
                let (target, close) = if is_rare(m, fd) && !suffix.is_empty() {
                    writeln!(o, "        if let Some(rare) = self.rare.get_mut() {{").unwrap();
                    (format!("rare.{name}"), "        }\n")
                } else {
                    (format!("self.{}", field_path(fd)), "")
                };
                match fd.label {
                    Label::Optional => {
                        writeln!(o, "        if let Some(v) = {refm}{target} {{").unwrap();
                        writeln!(o, "            {visit};\n        }}").unwrap();
                    }
                    Label::Repeated => {
                        writeln!(o, "        for v in {refm}{target} {{").unwrap();
                        writeln!(o, "            {visit};\n        }}").unwrap();
                    }
                }
                o.push_str(close);
            }
            writeln!(o, "    }}").unwrap();
        }
        writeln!(o, "}}\n").unwrap();
    }
}

/// Names of the messages that can be reached from `root` through sub-message fields.
fn reachable_from(root: &'static str) -> Vec<&'static str> {
    let mut set = vec![root];
    let mut i = 0;
    while i < set.len() {
        let m = message_def(set[i]);
        for fd in m.fields {
            if let Kind::Message(t) = fd.kind
                && !set.contains(&t)
            {
                set.push(t);
            }
        }
        i += 1;
    }
    set
}

fn message_def(name: &str) -> &'static MessageDef {
    MESSAGES
        .iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("message {name} is not in the schema"))
}

/// `TensorProto` -> `Tensor`, `GraphProto` -> `Graph` (enum variant prefixes).
fn short_message_name(name: &str) -> String {
    let n = rust_type_name(name);
    n.strip_suffix("Proto").map(str::to_string).unwrap_or(n)
}

/// The place-aware walk a save makes over a model: `TensorField` (every sub-message field on a
/// path from `ModelProto` to a `TensorProto`), `TensorPlace` (the field holding a tensor and the
/// field through which its message was reached) and `visit_tensors_placed` on the messages of
/// those paths, in the order of `visit_tensors`.
fn gen_placed_tensor_walk(o: &mut String) {
    let reach = reaches_tensor();
    let from_model = reachable_from("ModelProto");
    let messages: Vec<&MessageDef> = MESSAGES
        .iter()
        .filter(|m| {
            m.name != "TensorProto" && reach.contains(&m.name) && from_model.contains(&m.name)
        })
        .collect();
    // The fields on the paths, in message then declaration order.
    let mut fields: Vec<(&MessageDef, &FieldDef, String)> = Vec::new();
    for m in &messages {
        for fd in m.fields {
            let Kind::Message(t) = fd.kind else { continue };
            if !reach.contains(&t) {
                continue;
            }
            assert!(
                fd.oneof.is_none(),
                "{}.{}: a oneof member on a path to TensorProto is not supported",
                m.name,
                fd.name
            );
            let variant = format!("{}{}", short_message_name(m.name), camel(fd.name));
            fields.push((m, fd, variant));
        }
    }
    writeln!(
        o,
        "/// A sub-message field on a path from a `ModelProto` to a `TensorProto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum TensorField {{"
    )
    .unwrap();
    for (m, fd, variant) in &fields {
        writeln!(o, "    /// `{}.{}`", m.name, fd.name).unwrap();
        writeln!(o, "    {variant},").unwrap();
    }
    writeln!(o, "}}\n").unwrap();
    writeln!(
        o,
        "impl TensorField {{
    /// The message that declares the field (`\"AttributeProto\"`).
    pub(crate) fn message(self) -> &'static str {{
        match self {{"
    )
    .unwrap();
    for (m, _, variant) in &fields {
        writeln!(o, "            Self::{variant} => \"{}\",", m.name).unwrap();
    }
    writeln!(
        o,
        "        }}
    }}
}}

/// Where a `TensorProto` sits in a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TensorPlace {{
    /// The field whose value (or element) is the tensor: `GraphProto.initializer`,
    /// `AttributeProto.t`, `SparseTensorProto.values`, ...
    pub(crate) field: TensorField,
    /// The field through which the message declaring `field` was reached (`None` for a field of
    /// the message the walk started from): `GraphProto.sparse_initializer` for the values of a
    /// sparse initializer, `NodeProto.attribute` for an attribute's tensor.
    pub(crate) parent: Option<TensorField>,
}}
"
    )
    .unwrap();
    for m in &messages {
        let rn = rust_type_name(m.name);
        // Only the fields that hold a TensorProto themselves name the parent in a place.
        let holds_tensor = m
            .fields
            .iter()
            .any(|fd| matches!(fd.kind, Kind::Message("TensorProto")));
        let parent = if holds_tensor { "parent" } else { "_parent" };
        writeln!(o, "impl {rn} {{").unwrap();
        writeln!(
            o,
            "    /// Calls `f` on every `TensorProto` reachable from this message with its place, in the
    /// order of `visit_tensors`; `parent` is the field this message was reached through.
    pub(crate) fn visit_tensors_placed<'a>(
        &'a self,
        {parent}: Option<TensorField>,
        f: &mut dyn FnMut(&'a TensorProto, TensorPlace),
    ) {{"
        )
        .unwrap();
        for (fm, fd, variant) in fields.iter().filter(|(fm, _, _)| fm.name == m.name) {
            let name = field_path(fd);
            let Kind::Message(t) = fd.kind else {
                unreachable!()
            };
            let call = if t == "TensorProto" {
                format!("f(v, TensorPlace {{ field: TensorField::{variant}, parent }})")
            } else if is_cycle_field(fm.name, fd.name) {
                format!(
                    "crate::wire::guard_stack(|| v.visit_tensors_placed(Some(TensorField::{variant}), f))"
                )
            } else {
                format!("v.visit_tensors_placed(Some(TensorField::{variant}), f)")
            };
            match fd.label {
                Label::Optional => {
                    writeln!(o, "        if let Some(v) = &self.{name} {{").unwrap();
                }
                Label::Repeated => {
                    writeln!(o, "        for v in &self.{name} {{").unwrap();
                }
            }
            writeln!(o, "            {call};\n        }}").unwrap();
        }
        writeln!(o, "    }}\n}}\n").unwrap();
    }
}

/// `clone_with_tensors(f)`: a copy of a message in which every reachable `TensorProto` is
/// `f(original)`, called in the order of `visit_tensors`; every other field is cloned. Also
/// `Message::without_payloads` (`SerializeOptions::skip_raw_data`) of these messages.
fn gen_tensor_rewriters(o: &mut String) {
    let set = reaches_tensor();
    for m in MESSAGES.iter().filter(|m| set.contains(&m.name)) {
        let rn = rust_type_name(m.name);
        writeln!(o, "impl {rn} {{").unwrap();
        writeln!(
            o,
            "    /// A copy in which every `TensorProto` reachable from this message is `f(original)`,"
        )
        .unwrap();
        writeln!(
            o,
            "    /// called in the order of `visit_tensors`; every other field is cloned."
        )
        .unwrap();
        writeln!(
            o,
            "    pub fn clone_with_tensors(&self, f: &mut dyn FnMut(&TensorProto) -> TensorProto) -> Self {{"
        )
        .unwrap();
        if m.name == "TensorProto" {
            writeln!(
                o,
                "        f(self)
    }}
}}
"
            )
            .unwrap();
            continue;
        }
        // Tensor-bearing fields first, in declaration order (the visitor's), then the struct.
        let mut members: Vec<String> = Vec::new();
        let mut rare_members: Vec<String> = Vec::new();
        let mut done_oneofs: Vec<&str> = Vec::new();
        for fd in m.fields {
            if let Some(oneof) = fd.oneof {
                assert!(
                    !matches!(fd.kind, Kind::Message(t) if set.contains(&t)),
                    "{}.{}: a oneof member that reaches TensorProto is not supported",
                    m.name,
                    fd.name
                );
                if !done_oneofs.contains(&oneof) {
                    done_oneofs.push(oneof);
                    members.push(format!("{oneof}: self.{oneof}.clone()"));
                }
                continue;
            }
            let name = rust_member(fd);
            // Rare fields are members of the rare struct, cloned from `r` (its fields).
            let (members, src) = if is_rare(m, fd) {
                (&mut rare_members, "r")
            } else {
                (&mut members, "self")
            };
            let Kind::Message(t) = fd.kind else {
                members.push(format!("{name}: {src}.{name}.clone()"));
                continue;
            };
            if !set.contains(&t) {
                members.push(format!("{name}: {src}.{name}.clone()"));
                continue;
            }
            let call = if is_cycle_field(m.name, fd.name) {
                "crate::wire::guard_stack(|| v.clone_with_tensors(f))".to_string()
            } else {
                "v.clone_with_tensors(f)".to_string()
            };
            let path = field_path(fd);
            let expr = match fd.label {
                Label::Optional if boxed(m, fd) => {
                    format!("self.{path}.as_ref().map(|v| MsgBox::new({call}))")
                }
                Label::Optional => format!("self.{path}.as_ref().map(|v| {call})"),
                Label::Repeated => format!("self.{path}.iter().map(|v| {call}).collect()"),
            };
            writeln!(o, "        let {name} = {expr};").unwrap();
            members.push(name);
        }
        if has_rare(m) {
            rare_members.push("unknown_fields: r.unknown_fields.clone()".into());
            members.push(format!(
                "rare: self.rare.map_allocated(move |r| {rn}Rare {{ {} }})",
                rare_members.join(", ")
            ));
        } else {
            members.push("unknown_fields: self.unknown_fields.clone()".into());
        }
        writeln!(o, "        Self {{").unwrap();
        for mem in members {
            writeln!(o, "            {mem},").unwrap();
        }
        writeln!(
            o,
            "        }}
    }}
}}
"
        )
        .unwrap();
    }
}

/// `visit_message_type(name, visitor)`: calls the visitor with the message type named `name`.
fn gen_dispatch(o: &mut String) {
    writeln!(
        o,
        "/// Calls `v.visit::<M>()` with the message type named `name` (schema name such as"
    )
    .unwrap();
    writeln!(o, "/// `TensorProto.Segment`, or the Rust name `TensorProtoSegment`); `None` for unknown names.").unwrap();
    writeln!(
        o,
        "pub fn visit_message_type<V: crate::proto::MessageVisitor>(name: &str, v: V) -> Option<V::Output> {{"
    )
    .unwrap();
    writeln!(o, "    Some(match name {{").unwrap();
    for m in MESSAGES {
        let rn = rust_type_name(m.name);
        if rn == m.name {
            writeln!(o, "        \"{}\" => v.visit::<{rn}>(),", m.name).unwrap();
        } else {
            writeln!(o, "        \"{}\" | \"{rn}\" => v.visit::<{rn}>(),", m.name).unwrap();
        }
    }
    writeln!(o, "        _ => return None,\n    }})\n}}").unwrap();
}

fn gen_struct(o: &mut String, m: &MessageDef) {
    let rn = rust_type_name(m.name);
    writeln!(o, "/// `onnx.{}`.", m.name).unwrap();
    if has_cycle_fields(m) {
        // Clone, PartialEq, Debug and Drop guard the stack (see gen_guarded_traits).
        writeln!(o, "#[derive(Default)]").unwrap();
    } else {
        writeln!(o, "#[derive(Debug, Default, PartialEq)]").unwrap();
    }
    writeln!(o, "#[repr(C)]\npub struct {rn} {{").unwrap();
    let common = crate::layout::layout(m, false);
    struct_fields(o, &common);
    writeln!(o, "}}\n").unwrap();
    o.push_str(&crate::layout::assertions(&rn, &common));
    if !has_cycle_fields(m) {
        let names: Vec<String> = common.members.iter().map(|(x, _)| x.name.clone()).collect();
        gen_try_clone(o, &rn, &names, None);
    }

    // const constructor (for static defaults)
    writeln!(o, "impl {rn} {{").unwrap();
    writeln!(o, "    /// An empty message (every field unset).").unwrap();
    writeln!(o, "    pub const fn new() -> Self {{").unwrap();
    writeln!(o, "        Self {{").unwrap();
    struct_inits(o, m, false);
    if has_rare(m) {
        writeln!(o, "            rare: Rare::new(),").unwrap();
    } else {
        writeln!(o, "            unknown_fields: UnknownFields::new(),").unwrap();
    }
    writeln!(o, "        }}\n    }}\n}}\n").unwrap();
    if has_rare(m) {
        writeln!(
            o,
            "/// The rare fields of `onnx.{}` (its `rare` member).\n#[derive(Debug, Default, PartialEq)]\n#[repr(C)]\npub(crate) struct {rn}Rare {{",
            m.name
        )
        .unwrap();
        let rare = crate::layout::layout(m, true);
        struct_fields(o, &rare);
        writeln!(o, "}}\n").unwrap();
        o.push_str(&crate::layout::assertions(&format!("{rn}Rare"), &rare));
        let names: Vec<String> = rare.members.iter().map(|(x, _)| x.name.clone()).collect();
        gen_try_clone(o, &format!("{rn}Rare"), &names, None);
        writeln!(o, "impl {rn}Rare {{").unwrap();
        writeln!(o, "    /// Every rare field unset.").unwrap();
        writeln!(o, "    pub const fn new() -> Self {{").unwrap();
        writeln!(o, "        Self {{").unwrap();
        struct_inits(o, m, true);
        writeln!(o, "            unknown_fields: UnknownFields::new(),").unwrap();
        writeln!(o, "        }}\n    }}\n}}\n").unwrap();
        writeln!(
            o,
            "impl RareFields for {rn}Rare {{\n    fn empty() -> &'static Self {{\n        static EMPTY: {rn}Rare = {rn}Rare::new();\n        &EMPTY\n    }}"
        )
        .unwrap();
        if m.fields.iter().any(|f| f.kind == Kind::Payload) {
            writeln!(o, "    const SKIPS_PADDING: bool = true;").unwrap();
        }
        let presets = rare_presets(m);
        if !presets.is_empty() {
            gen_presets(o, m, &rn, &presets);
        }
        writeln!(o, "}}\n").unwrap();
    }
    if has_cycle_fields(m) {
        gen_guarded_traits(o, m);
    }
}

/// `RareFields::PRESET_VALUES` and `RareFields::presets` of a message with preset strings
/// (see `RARE_PRESETS`): the preset numbered `c` sets field `k` to its state `c`'s `k`-th digit
/// (0: unset, `j + 1`: its `j`-th value; each digit in base one more than the field's values).
fn gen_presets(o: &mut String, m: &MessageDef, rn: &str, presets: &[(&FieldDef, &[&str])]) {
    let mut inits = String::new();
    struct_inits(&mut inits, m, true);
    let values: Vec<String> = presets
        .iter()
        .map(|(_, vs)| {
            let vs: Vec<String> = vs.iter().map(|v| format!("b{v:?}")).collect();
            format!("&[{}]", vs.join(", "))
        })
        .collect();
    let count: usize = presets
        .iter()
        .map(|(_, vs)| vs.len() + 1)
        .product::<usize>()
        - 1;
    let mut items = String::new();
    for c in 1..=count {
        let mut item = inits.clone();
        let mut stride = 1;
        for (f, vs) in presets {
            let state = (c / stride) % (vs.len() + 1);
            stride *= vs.len() + 1;
            if state > 0 {
                let member = rust_member(f);
                let from = format!("            {member}: None,\n");
                assert!(item.contains(&from));
                item = item.replace(
                    &from,
                    &format!(
                        "            {member}: Some(ProtoString::inline_const({:?})),\n",
                        vs[state - 1]
                    ),
                );
            }
        }
        let fields: String = item.lines().map(|l| format!("    {l}\n")).collect();
        writeln!(
            items,
            "            {rn}Rare {{\n{fields}                unknown_fields: UnknownFields::new(),\n            }},"
        )
        .unwrap();
    }
    writeln!(
        o,
        "\n    const PRESET_VALUES: &'static [&'static [&'static [u8]]] = &[{}];\n\n    fn presets() -> &'static [Self] {{\n        static PRESETS: [{rn}Rare; {count}] = [\n{items}        ];\n        &PRESETS\n    }}",
        values.join(", ")
    )
    .unwrap();
}

/// The member declarations of a struct, in layout order (`crate::layout`).
fn struct_fields(o: &mut String, l: &crate::layout::StructLayout) {
    for (x, _) in &l.members {
        for d in &x.doc {
            writeln!(o, "    ///{d}").unwrap();
        }
        writeln!(o, "    pub(crate) {}: {},", x.name, x.ty).unwrap();
    }
}

/// The `new()` initializers of the common (`rare == false`) or rare fields of `m`.
fn struct_inits(o: &mut String, m: &MessageDef, rare: bool) {
    let mut done_oneofs: Vec<&str> = Vec::new();
    for f in m.fields {
        if let Some(oneof) = f.oneof {
            if !rare && !done_oneofs.contains(&oneof) {
                done_oneofs.push(oneof);
                writeln!(o, "            {oneof}: None,").unwrap();
            }
            continue;
        }
        if is_rare(m, f) != rare {
            continue;
        }
        let init = match f.label {
            Label::Repeated if matches!(f.kind, Kind::Message(_)) => "RepeatedField::new()",
            Label::Repeated => "InlineVec::new()",
            Label::Optional => "None",
        };
        writeln!(o, "            {}: {init},", rust_member(f)).unwrap();
    }
}

/// True when `m` holds a field that closes a cycle of the schema.
fn has_cycle_fields(m: &MessageDef) -> bool {
    cycle_fields().iter().any(|&(owner, _)| owner == m.name)
}

/// The struct members of `m` in declaration order, as (Rust name, name shown by `Debug`).
fn struct_members(m: &MessageDef) -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = Vec::new();
    for f in m.fields {
        match f.oneof {
            Some(oneof) if out.iter().any(|(n, _)| n == oneof) => {}
            Some(oneof) => out.push((oneof.to_string(), oneof)),
            None if is_rare(m, f) => {}
            None => out.push((rust_member(f), plain_name(f))),
        }
    }
    if has_rare(m) {
        // The rare struct holds the unknown fields.
        out.push(("rare".to_string(), "rare"));
    } else {
        out.push(("unknown_fields".to_string(), "unknown_fields"));
    }
    out
}

/// `TryClone` of the struct `ty` (field by field; under `guard_stack` when `guarded` holds: a
/// message holding a field that closes a cycle), and its `Clone` through it.
fn gen_try_clone(o: &mut String, ty: &str, fields: &[String], guarded: Option<&str>) {
    // Field by field into the empty message `out`: one call and one check per field (a refusal
    // leaves the part copied in `out`, which its owner drops).
    writeln!(o, "impl TryClone for {ty} {{").unwrap();
    writeln!(o, "    fn try_clone(&self) -> Result<Self, Layout> {{").unwrap();
    writeln!(
        o,
        "        crate::error::try_clone_via_default(self)\n    }}\n"
    )
    .unwrap();
    writeln!(
        o,
        "    fn try_clone_into(&self, out: &mut Self) -> Result<(), Layout> {{"
    )
    .unwrap();
    let body: String = fields
        .iter()
        .map(|name| format!("self.{name}.try_clone_into(&mut out.{name})?;"))
        .collect::<Vec<_>>()
        .join("\n            ");
    match guarded {
        Some(cond) => writeln!(
            o,
            "        let clone = |out: &mut Self| -> Result<(), Layout> {{\n            {body}\n            Ok(())\n        }};\n        if {cond} {{\n            crate::wire::guard_stack(|| clone(out))\n        }} else {{\n            clone(out)\n        }}"
        )
        .unwrap(),
        None => writeln!(o, "        {body}\n        Ok(())").unwrap(),
    }
    writeln!(o, "    }}\n}}\n").unwrap();
    writeln!(
        o,
        "impl Clone for {ty} {{\n    fn clone(&self) -> Self {{\n        clone_or_abort(self)\n    }}\n}}\n"
    )
    .unwrap();
}

/// `Clone`, `PartialEq`, `Debug` (as derived) and `Drop` of a message holding a field that
/// closes a cycle: each runs under `guard_stack`, so a chain of nested messages of any length
/// is cloned, compared, formatted and dropped without overflowing the stack. `Drop` takes the
/// cycle fields out and drops them inside the guard (the rest goes with the drop glue).
fn gen_guarded_traits(o: &mut String, m: &MessageDef) {
    let rn = rust_type_name(m.name);
    let members = struct_members(m);
    // The guard costs a thread-local read: Clone and Drop skip it when no cycle field is set.
    let nested: Vec<String> = m
        .fields
        .iter()
        .filter(|f| is_cycle_field(m.name, f.name))
        .map(|f| match f.label {
            Label::Optional => format!("self.{}.is_some()", field_path(f)),
            Label::Repeated => format!("!self.{}.is_empty()", field_path(f)),
        })
        .collect();
    writeln!(o, "impl {rn} {{").unwrap();
    writeln!(
        o,
        "    /// True when a field that closes a cycle of the schema is set."
    )
    .unwrap();
    writeln!(o, "    #[inline]").unwrap();
    writeln!(o, "    fn has_nested_cycle(&self) -> bool {{").unwrap();
    writeln!(o, "        {}", nested.join(" || ")).unwrap();
    writeln!(o, "    }}\n}}\n").unwrap();

    let names: Vec<String> = members.iter().map(|(n, _)| n.clone()).collect();
    gen_try_clone(o, &rn, &names, Some("self.has_nested_cycle()"));

    writeln!(o, "impl PartialEq for {rn} {{").unwrap();
    writeln!(o, "    fn eq(&self, other: &Self) -> bool {{").unwrap();
    writeln!(o, "        crate::wire::guard_stack(|| {{").unwrap();
    let eqs: Vec<String> = members
        .iter()
        .map(|(name, _)| format!("self.{name} == other.{name}"))
        .collect();
    writeln!(o, "            {}", eqs.join("\n                && ")).unwrap();
    writeln!(o, "        }})\n    }}\n}}\n").unwrap();

    writeln!(o, "impl std::fmt::Debug for {rn} {{").unwrap();
    writeln!(
        o,
        "    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {{"
    )
    .unwrap();
    writeln!(o, "        crate::wire::guard_stack(|| {{").unwrap();
    writeln!(o, "            f.debug_struct(\"{rn}\")").unwrap();
    for (name, shown) in &members {
        writeln!(o, "                .field(\"{shown}\", &self.{name})").unwrap();
    }
    writeln!(o, "                .finish()\n        }})\n    }}\n}}\n").unwrap();

    writeln!(o, "impl Drop for {rn} {{").unwrap();
    writeln!(o, "    fn drop(&mut self) {{").unwrap();
    writeln!(
        o,
        "        if !self.has_nested_cycle() {{\n            return;\n        }}"
    )
    .unwrap();
    writeln!(o, "        crate::wire::stack::guard_drop(|| {{").unwrap();
    for f in m.fields.iter().filter(|f| is_cycle_field(m.name, f.name)) {
        assert!(
            f.oneof.is_none(),
            "cycle field {}.{} in a oneof",
            m.name,
            f.name
        );
        let name = rust_member(f);
        if is_rare(m, f) {
            // Taken out of an allocated box only (nothing to drop in an unallocated one).
            writeln!(
                o,
                "            if let Some(rare) = self.rare.get_mut() {{\n                drop(std::mem::take(&mut rare.{name}));\n            }}"
            )
            .unwrap();
        } else {
            writeln!(o, "            drop(std::mem::take(&mut self.{name}));").unwrap();
        }
    }
    writeln!(o, "        }})\n    }}\n}}\n").unwrap();
}

/// The Rust type of the value of oneof case `f` of `m`.
pub(crate) fn oneof_value_type(m: &MessageDef, f: &FieldDef) -> String {
    let vt = value_type(f.kind);
    if matches!(f.kind, Kind::Message(_)) {
        message_storage(m, f, &vt)
    } else {
        vt
    }
}

fn gen_oneof_enums(o: &mut String, m: &MessageDef) {
    for oneof in oneofs(m) {
        let en = oneof_enum_name(m, oneof);
        writeln!(o, "/// `oneof {oneof}` of `onnx.{}`.", m.name).unwrap();
        // `repr(u32)`: the case is the first word, which the C++ classes read in place (the
        // layout table records each case's tag and where its value lies).
        writeln!(o, "#[derive(Debug, PartialEq)]\n#[repr(u32)]").unwrap();
        writeln!(o, "pub(crate) enum {en} {{").unwrap();
        let mut arms = String::new();
        for f in m.fields.iter().filter(|f| f.oneof == Some(oneof)) {
            let ty = oneof_value_type(m, f);
            writeln!(o, "    /// `{}`", proto_decl(f)).unwrap();
            writeln!(o, "    {}({ty}),", camel(f.name)).unwrap();
            let v = camel(f.name);
            writeln!(
                arms,
                "            Self::{v}(x) => Self::{v}(x.try_clone()?),"
            )
            .unwrap();
        }
        writeln!(o, "}}\n").unwrap();
        writeln!(
            o,
            "impl TryClone for {en} {{\n    fn try_clone(&self) -> Result<Self, Layout> {{\n        Ok(match self {{\n{arms}        }})\n    }}\n}}\n"
        )
        .unwrap();
        writeln!(
            o,
            "impl Clone for {en} {{\n    fn clone(&self) -> Self {{\n        clone_or_abort(self)\n    }}\n}}\n"
        )
        .unwrap();
        writeln!(
            o,
            "/// Which field of `oneof {oneof}` of `onnx.{}` is set.",
            m.name
        )
        .unwrap();
        writeln!(o, "#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]").unwrap();
        writeln!(o, "pub enum {en}Case {{").unwrap();
        for f in m.fields.iter().filter(|f| f.oneof == Some(oneof)) {
            writeln!(o, "    /// `{}`", proto_decl(f)).unwrap();
            writeln!(o, "    {},", camel(f.name)).unwrap();
        }
        writeln!(o, "}}\n").unwrap();
    }
}

/// `{oneof}_case()` of each oneof of `m`: which field is set, or `None`.
fn gen_oneof_cases(o: &mut String, m: &MessageDef) {
    for oneof in oneofs(m) {
        let en = oneof_enum_name(m, oneof);
        writeln!(
            o,
            "    /// Which field of `oneof {oneof}` is set, or `None`."
        )
        .unwrap();
        writeln!(o, "    pub fn {oneof}_case(&self) -> Option<{en}Case> {{").unwrap();
        writeln!(o, "        Some(match self.{oneof}.as_ref()? {{").unwrap();
        for f in m.fields.iter().filter(|f| f.oneof == Some(oneof)) {
            let v = camel(f.name);
            writeln!(o, "            {en}::{v}(_) => {en}Case::{v},").unwrap();
        }
        writeln!(o, "        }})\n    }}").unwrap();
    }
}

fn sorted_fields(m: &MessageDef) -> Vec<&'static FieldDef> {
    let mut v: Vec<&'static FieldDef> = m.fields.iter().collect();
    v.sort_by_key(|f| f.number);
    v
}

fn gen_codec(o: &mut String, m: &MessageDef) {
    let rn = rust_type_name(m.name);
    writeln!(o, "impl Message for {rn} {{").unwrap();
    writeln!(o, "    const NAME: &'static str = \"{}\";\n", m.name).unwrap();

    // ---- decode
    writeln!(
        o,
        "    fn merge_from(&mut self, r: &mut Reader<'_>) -> Result<(), Box<DecodeError>> {{"
    )
    .unwrap();
    writeln!(o, "        while let Some(tag) = r.read_tag()? {{").unwrap();
    writeln!(o, "            match tag {{").unwrap();
    for f in m.fields {
        if let Some(index) = rare_presets(m)
            .iter()
            .position(|(p, _)| std::ptr::eq(*p, f))
        {
            // A preset value points the box to a preset (see `RARE_PRESETS`).
            writeln!(
                o,
                "                {} => r.read_preset_string(&mut self.rare, {index}, |r| &mut r.{}){}?,",
                (f.number << 3) | 2,
                rust_member(f),
                at(f, None)
            )
            .unwrap();
        } else if is_rare(m, f) {
            let mut arms = String::new();
            gen_decode_arms(&mut arms, m, f);
            o.push_str(&allocating_rare(&arms));
        } else {
            gen_decode_arms(o, m, f);
        }
    }
    if has_rare(m) {
        // The first unknown field allocates the rare box, which holds them.
        writeln!(
            o,
            "                _ => r.skip_unknown_into_rare(tag, &mut self.rare, |r| &mut r.unknown_fields)?,"
        )
        .unwrap();
    } else {
        writeln!(
            o,
            "                _ => r.skip_unknown(tag, &mut self.unknown_fields)?,"
        )
        .unwrap();
    }
    writeln!(o, "            }}\n        }}\n        Ok(())\n    }}\n").unwrap();

    // ---- size
    writeln!(
        o,
        "    fn compute_size(&self, sizes: &mut SizeTable) -> u64 {{"
    )
    .unwrap();
    let unknown = unknown_fields_path(m);
    let mut body = format!("        let mut n: u64 = self.{unknown}.len() as u64;\n");
    for f in sorted_fields(m) {
        gen_size(&mut body, m, f);
    }
    o.push_str(&through_rare(m, &body));
    writeln!(o, "        n\n    }}\n").unwrap();

    // ---- encode
    writeln!(
        o,
        "    fn encode_to<S: Sink + ?Sized>(&self, s: &mut S, c: &mut SizeCursor<'_>) {{"
    )
    .unwrap();
    let mut body = String::new();
    for f in sorted_fields(m) {
        gen_encode(&mut body, m, f);
    }
    writeln!(body, "        s.put(self.{unknown}.as_bytes());").unwrap();
    o.push_str(&through_rare(m, &body));
    writeln!(o, "    }}\n").unwrap();

    writeln!(
        o,
        "    fn unknown_fields(&self) -> &UnknownFields {{\n        &self.{unknown}\n    }}\n"
    )
    .unwrap();
    // Through `DerefMut` for a rare box: allocates it.
    writeln!(
        o,
        "    fn unknown_fields_mut(&mut self) -> &mut UnknownFields {{\n        &mut self.{unknown}\n    }}"
    )
    .unwrap();
    writeln!(
        o,
        "\n    fn take_recycled(r: &Reader<'_>) -> Option<MsgBox<Self>> {{\n        recycled(r)\n    }}"
    )
    .unwrap();
    gen_prefetch_children(o, m);
    if reaches_tensor().contains(&m.name) {
        writeln!(
            o,
            "\n    fn without_payloads(&self, min_len: u64) -> Option<Self> {{\n        \
             Some(self.clone_with_tensors(&mut |t| t.without_payload(min_len)))\n    }}"
        )
        .unwrap();
    }
    writeln!(o, "}}\n").unwrap();
}

/// Decode arms of a rare field, each allocating the rare box first (fallibly: the writes through
/// `DerefMut` after it do not allocate).
fn allocating_rare(arms: &str) -> String {
    const ARM: &str = "                ";
    let mut starts: Vec<usize> = Vec::new();
    let mut at = 0;
    for line in arms.split_inclusive('\n') {
        let rest = line.strip_prefix(ARM).unwrap_or("");
        if rest.starts_with(|c: char| c.is_ascii_digit()) && rest.contains(" => ") {
            starts.push(at);
        }
        at += line.len();
    }
    starts.push(arms.len());
    let mut out = String::new();
    for w in starts.windows(2) {
        let arm = &arms[w[0]..w[1]];
        let (head, body) = arm.split_once(" => ").expect("a match arm");
        let body = body.trim_end();
        let body = body.strip_suffix(',').unwrap_or(body);
        writeln!(
            out,
            "{head} => {{\n{ARM}    r.alloc_rare(&mut self.rare)?;\n{ARM}    {body}\n{ARM}}}"
        )
        .unwrap();
    }
    out
}

/// A function body reading the rare fields of `m` through one reference to them (the box's
/// fields, or the empty ones), made once at its start.
fn through_rare(m: &MessageDef, body: &str) -> String {
    if !has_rare(m) || !body.contains("self.rare.") {
        return body.to_string();
    }
    format!(
        "        let rare = &*self.rare;\n{}",
        body.replace("self.rare.", "rare.")
    )
}

/// `prefetch_children` of `m`, for a message with sub-message fields (outside a `oneof`):
/// fetches the storage of each repeated one and the box of each set optional one.
fn gen_prefetch_children(o: &mut String, m: &MessageDef) {
    let fields: Vec<&FieldDef> = m
        .fields
        .iter()
        .filter(|f| f.oneof.is_none() && matches!(f.kind, Kind::Message(_)) && !is_rare(m, f))
        .collect();
    if fields.is_empty() {
        return;
    }
    writeln!(
        o,
        "\n    #[inline(always)]\n    fn prefetch_children(&self) {{"
    )
    .unwrap();
    for f in fields {
        let name = rust_member(f);
        if f.label == Label::Repeated {
            writeln!(o, "        self.{name}.prefetch_head();").unwrap();
        } else if boxed(m, f) {
            writeln!(
                o,
                "        if let Some(m) = &self.{name} {{\n            \
                 crate::wire::prefetch::prefetch_value::<_>(&**m);\n        }}"
            )
            .unwrap();
        }
    }
    writeln!(o, "    }}").unwrap();
}

/// `.map_err(...)` adding the field to the error path.
fn at(f: &FieldDef, index: Option<&str>) -> String {
    match index {
        Some(i) => format!(".map_err(|e| e.at(\"{}\", Some({i})))", plain_name(f)),
        None => format!(".map_err(|e| e.at(\"{}\", None))", plain_name(f)),
    }
}

/// The reader call `call` (e.g. `read_message(m)`) parsing sub-message field `f` of `m`
/// (stack-guarded when `f` closes a cycle of the schema).
fn read_message(m: &MessageDef, f: &FieldDef, call: &str) -> String {
    if is_cycle_field(m.name, f.name) {
        format!("r.guarded(|r| r.{call})")
    } else {
        format!("r.{call}")
    }
}

/// The call encoding sub-message `v` of field `f` of `m` (stack-guarded when `f` closes a cycle).
fn encode_message(m: &MessageDef, f: &FieldDef, v: &str) -> String {
    if is_cycle_field(m.name, f.name) {
        format!("crate::wire::guard_stack(|| {v}.encode_to(s, c))")
    } else {
        format!("{v}.encode_to(s, c)")
    }
}

fn gen_decode_arms(o: &mut String, m: &MessageDef, f: &FieldDef) {
    let name = field_path(f);
    let t = |wt| tag_value(f, wt);
    let path = at(f, None);
    if let Some(oneof) = f.oneof {
        let en = oneof_enum_name(m, oneof);
        let var = camel(f.name);
        match f.kind {
            Kind::Message(mt) => {
                let mt = rust_type_name(mt);
                writeln!(o, "                {} => {{", t(2)).unwrap();
                writeln!(
                    o,
                    "                    if !matches!(self.{oneof}, Some({en}::{var}(_))) {{"
                )
                .unwrap();
                let empty = if boxed(m, f) {
                    format!("r.new_boxed(){path}?")
                } else {
                    new_message(m, f, &mt)
                };
                writeln!(
                    o,
                    "                        self.{oneof} = Some({en}::{var}({empty}));"
                )
                .unwrap();
                writeln!(o, "                    }}").unwrap();
                writeln!(
                    o,
                    "                    if let Some({en}::{var}(m)) = &mut self.{oneof} {{"
                )
                .unwrap();
                let read = read_message(
                    m,
                    f,
                    if boxed(m, f) {
                        "read_message(m.as_mut())"
                    } else {
                        "read_message(m)"
                    },
                );
                writeln!(o, "                        {read}{path}?;").unwrap();
                writeln!(o, "                    }}").unwrap();
                writeln!(o, "                }}").unwrap();
            }
            Kind::String | Kind::Bytes => {
                // Read in place (see `Reader::read_string_in`).
                writeln!(
                    o,
                    "                {} => r.read_string_in(|| {{\n                    if !matches!(self.{oneof}, Some({en}::{var}(_))) {{\n                        self.{oneof} = Some({en}::{var}(ProtoString::new()));\n                    }}\n                    match &mut self.{oneof} {{\n                        Some({en}::{var}(s)) => s,\n                        _ => unreachable!(\"just set\"),\n                    }}\n                }}){path}?,",
                    t(2)
                )
                .unwrap();
            }
            k if is_scalar(k) => {
                let read = read_scalar(k).replace("()?", &format!("(){path}?"));
                writeln!(
                    o,
                    "                {} => self.{oneof} = Some({en}::{var}({read})),",
                    t(wire_type(k))
                )
                .unwrap();
            }
            _ => unreachable!("unsupported oneof member kind"),
        }
        return;
    }
    match (f.label, f.kind) {
        (Label::Optional, Kind::Enum(e)) => {
            let valid: Vec<String> = e.values.iter().map(|(_, v)| v.to_string()).collect();
            writeln!(o, "                {} => {{", t(0)).unwrap();
            writeln!(o, "                    let v = r.read_varint(){path}?;").unwrap();
            writeln!(
                o,
                "                    if matches!(v as i32, {}) {{",
                valid.join(" | ")
            )
            .unwrap();
            writeln!(o, "                        self.{name} = Some(v as i32);").unwrap();
            writeln!(o, "                    }} else {{").unwrap();
            if has_rare(m) {
                writeln!(o, "                        r.alloc_rare(&mut self.rare)?;").unwrap();
            }
            writeln!(
                o,
                "                        r.push_unknown_enum(&mut self.{}, {}, v){path}?;",
                unknown_fields_path(m),
                f.number
            )
            .unwrap();
            writeln!(o, "                    }}\n                }}").unwrap();
        }
        (Label::Optional, k) if is_scalar(k) => {
            let wt = wire_type(k);
            let read = read_scalar(k).replace("()?", &format!("(){path}?"));
            writeln!(
                o,
                "                {} => self.{name} = Some({read}),",
                t(wt)
            )
            .unwrap();
        }
        (Label::Optional, Kind::String | Kind::Bytes) => {
            writeln!(
                o,
                "                {} => r.read_string_into(&mut self.{name}){path}?,",
                t(2)
            )
            .unwrap();
        }
        (Label::Optional, Kind::Payload) => {
            writeln!(
                o,
                "                {} => self.{name} = r.read_payload(){path}?,",
                t(2)
            )
            .unwrap();
        }
        (Label::Optional, Kind::Message(mt)) => {
            let mt = rust_type_name(mt);
            let call = if boxed(m, f) {
                format!("read_message_into(&mut self.{name})")
            } else {
                format!("read_message(self.{name}.get_or_insert_with({mt}::new))")
            };
            writeln!(
                o,
                "                {} => {}{path}?,",
                t(2),
                read_message(m, f, &call)
            )
            .unwrap();
        }
        (Label::Repeated, k) if is_scalar(k) => {
            let wt = wire_type(k);
            let read = read_scalar(k).replace("()?", &format!("(){path}?"));
            writeln!(o, "                {} => {{", t(wt)).unwrap();
            writeln!(
                o,
                "                    r.reserve_run(&mut self.{name}, {}){path}?;",
                t(wt)
            )
            .unwrap();
            writeln!(o, "                    self.{name}.push({read});").unwrap();
            writeln!(o, "                }}").unwrap();
            // packed encoding, accepted for every repeated scalar
            match k {
                Kind::Float | Kind::Double => {
                    let (n, ty, bits) = if k == Kind::Float {
                        (4, "f32", "u32")
                    } else {
                        (8, "f64", "u64")
                    };
                    writeln!(o, "                {} => {{", t(2)).unwrap();
                    writeln!(
                        o,
                        "                    let b = r.read_packed_fixed({n}){path}?;"
                    )
                    .unwrap();
                    writeln!(
                        o,
                        "                    r.reserve_elements(&mut self.{name}, b.len() / {n}){path}?;"
                    )
                    .unwrap();
                    writeln!(
                        o,
                        "                    self.{name}.extend(b.chunks_exact({n}).map(|c| {ty}::from_bits({bits}::from_le_bytes(c.try_into().unwrap()))));"
                    )
                    .unwrap();
                    writeln!(o, "                }}").unwrap();
                }
                _ => {
                    let conv = match k {
                        Kind::Int64 => "v as i64",
                        Kind::Int32 | Kind::Enum(_) => "v as i32",
                        _ => "v",
                    };
                    writeln!(
                        o,
                        "                {} => r.read_packed_varints_into(&mut self.{name}, |v| {conv}){path}?,",
                        t(2)
                    )
                    .unwrap();
                }
            }
        }
        (Label::Repeated, Kind::String | Kind::Bytes) => {
            writeln!(o, "                {} => {{", t(2)).unwrap();
            writeln!(
                o,
                "                    r.reserve_run(&mut self.{name}, {}){path}?;",
                t(2)
            )
            .unwrap();
            writeln!(
                o,
                "                    r.push_string(&mut self.{name}){path}?;"
            )
            .unwrap();
            writeln!(o, "                }}").unwrap();
        }
        (Label::Repeated, Kind::Message(mt)) => {
            let mt = rust_type_name(mt);
            let idx_path = at(f, Some(&format!("self.{name}.len()")));
            writeln!(o, "                {} => {{", t(2)).unwrap();
            if PARALLEL_FIELDS.contains(&(m.name, f.name)) {
                writeln!(
                    o,
                    "                    if let Some(res) = r.take_preparsed::<{mt}>() {{"
                )
                .unwrap();
                writeln!(o, "                        let v = res{idx_path}?;").unwrap();
                writeln!(
                    o,
                    "                        r.push_parsed(&mut self.{name}, v){idx_path}?;"
                )
                .unwrap();
                writeln!(o, "                        continue;").unwrap();
                writeln!(o, "                    }}").unwrap();
            }
            // decode in place: no move of the (large) element after decoding
            writeln!(o, "                    let i = self.{name}.len();").unwrap();
            writeln!(
                o,
                "                    let m = r.push_message(&mut self.{name}, {}).map_err(|e| e.at(\"{}\", Some(i)))?;",
                t(2),
                plain_name(f)
            )
            .unwrap();
            writeln!(
                o,
                "                    {}.map_err(|e| e.at(\"{}\", Some(i)))?;",
                read_message(m, f, "read_message(m)"),
                plain_name(f)
            )
            .unwrap();
            writeln!(o, "                }}").unwrap();
        }
        _ => unreachable!("unsupported field kind {:?}", f.kind),
    }
}

fn scalar_size(k: Kind, v: &str) -> String {
    match k {
        Kind::Float => "4".into(),
        Kind::Double => "8".into(),
        _ => format!("varint_len({})", varint_of(k, v)),
    }
}

/// Size code of embedded message field `f` of `msg`, one value bound to `m` by `head` (an
/// `if let` or `for` line): records its size in `sizes` (pre-order, one level deeper; guarding
/// the stack when `f` closes a cycle) and adds tag + length prefix + body to `n`.
fn message_size(o: &mut String, msg: &MessageDef, f: &FieldDef, head: &str, tl: usize) {
    let Kind::Message(t) = f.kind else {
        unreachable!("message_size of a scalar field")
    };
    let call = if is_cycle_field(msg.name, f.name) {
        "nested_deep"
    } else {
        "nested"
    };
    writeln!(o, "{head}").unwrap();
    writeln!(
        o,
        "            n += {tl} + len_delimited_size(sizes.{call}::<{}>(m));\n        }}",
        rust_type_name(t)
    )
    .unwrap();
}

fn gen_size(o: &mut String, m: &MessageDef, f: &FieldDef) {
    let name = field_path(f);
    if let Some(oneof) = f.oneof {
        let en = oneof_enum_name(m, oneof);
        let var = camel(f.name);
        let tl = tag_len(f, wire_type(f.kind));
        match f.kind {
            Kind::Message(_) => {
                message_size(
                    o,
                    m,
                    f,
                    &format!("        if let Some({en}::{var}(m)) = &self.{oneof} {{"),
                    tl,
                );
            }
            Kind::String | Kind::Bytes => {
                writeln!(o, "        if let Some({en}::{var}(v)) = &self.{oneof} {{").unwrap();
                writeln!(
                    o,
                    "            n += {tl} + len_delimited_size(v.len() as u64);\n        }}"
                )
                .unwrap();
            }
            k => {
                writeln!(o, "        if let Some({en}::{var}(v)) = &self.{oneof} {{").unwrap();
                writeln!(
                    o,
                    "            n += {tl} + {};\n        }}",
                    scalar_size(k, "*v")
                )
                .unwrap();
            }
        }
        return;
    }
    match (f.label, f.kind) {
        (Label::Optional, k) if is_scalar(k) => {
            let tl = tag_len(f, wire_type(k));
            writeln!(o, "        if let Some(v) = self.{name} {{").unwrap();
            writeln!(
                o,
                "            n += {tl} + {};\n        }}",
                scalar_size(k, "v")
            )
            .unwrap();
        }
        (Label::Optional, Kind::String | Kind::Bytes | Kind::Payload) => {
            let tl = tag_len(f, 2);
            writeln!(o, "        if let Some(v) = &self.{name} {{").unwrap();
            writeln!(
                o,
                "            n += {tl} + len_delimited_size(v.len() as u64);"
            )
            .unwrap();
            if f.kind == Kind::Payload {
                // An aligned save's padding before the payload (`SerializeOptions::inline_alignment`).
                writeln!(
                    o,
                    "            #[cfg(feature = \"inline-alignment\")]\n            {{\n                n += sizes.payload_pad();\n            }}"
                )
                .unwrap();
            }
            writeln!(o, "        }}").unwrap();
        }
        (Label::Optional, Kind::Message(_)) => {
            let tl = tag_len(f, 2);
            message_size(
                o,
                m,
                f,
                &format!("        if let Some(m) = &self.{name} {{"),
                tl,
            );
        }
        (Label::Repeated, k) if is_scalar(k) && f.packed => {
            let tl = tag_len(f, 2);
            writeln!(o, "        if !self.{name}.is_empty() {{").unwrap();
            match k {
                Kind::Float => {
                    writeln!(o, "            let s = self.{name}.len() as u64 * 4;").unwrap()
                }
                Kind::Double => {
                    writeln!(o, "            let s = self.{name}.len() as u64 * 8;").unwrap()
                }
                _ => {
                    writeln!(
                        o,
                        "            let s: u64 = self.{name}.iter().map(|&v| {}).sum();",
                        scalar_size(k, "v")
                    )
                    .unwrap();
                    writeln!(o, "            sizes.push(s);").unwrap();
                }
            }
            writeln!(
                o,
                "            n += {tl} + len_delimited_size(s);\n        }}"
            )
            .unwrap();
        }
        (Label::Repeated, k) if is_scalar(k) => {
            let tl = tag_len(f, wire_type(k));
            match k {
                Kind::Float | Kind::Double => writeln!(
                    o,
                    "        n += self.{name}.len() as u64 * ({tl} + {});",
                    scalar_size(k, "")
                )
                .unwrap(),
                _ => writeln!(
                    o,
                    "        n += self.{name}.iter().map(|&v| {tl} + {}).sum::<u64>();",
                    scalar_size(k, "v")
                )
                .unwrap(),
            }
        }
        (Label::Repeated, Kind::String | Kind::Bytes) => {
            let tl = tag_len(f, 2);
            writeln!(o, "        n += self.{name}.iter().map(|v| {tl} + len_delimited_size(v.len() as u64)).sum::<u64>();")
                .unwrap();
        }
        (Label::Repeated, Kind::Message(_)) => {
            let tl = tag_len(f, 2);
            message_size(
                o,
                m,
                f,
                &format!("        for m in self.{name}.iter_prefetching() {{"),
                tl,
            );
        }
        _ => unreachable!(),
    }
}

fn put_scalar(k: Kind, v: &str) -> String {
    match k {
        Kind::Float | Kind::Double => format!("s.put(&{v}.to_le_bytes())"),
        _ => format!("put_varint(s, {})", varint_of(k, v)),
    }
}

fn gen_encode(o: &mut String, m: &MessageDef, f: &FieldDef) {
    let name = field_path(f);
    if let Some(oneof) = f.oneof {
        let en = oneof_enum_name(m, oneof);
        let var = camel(f.name);
        let tl = tag_lit(f, wire_type(f.kind));
        writeln!(o, "        if let Some({en}::{var}(v)) = &self.{oneof} {{").unwrap();
        writeln!(o, "            s.put({tl});").unwrap();
        match f.kind {
            Kind::Message(_) => writeln!(
                o,
                "            put_varint(s, c.next_size());\n            {};",
                encode_message(m, f, "v")
            )
            .unwrap(),
            Kind::String | Kind::Bytes => writeln!(
                o,
                "            put_varint(s, v.len() as u64);\n            s.put(v);"
            )
            .unwrap(),
            k => writeln!(o, "            {};", put_scalar(k, "*v")).unwrap(),
        }
        writeln!(o, "        }}").unwrap();
        return;
    }
    match (f.label, f.kind) {
        (Label::Optional, k) if is_scalar(k) => {
            let tl = tag_lit(f, wire_type(k));
            writeln!(o, "        if let Some(v) = self.{name} {{").unwrap();
            writeln!(
                o,
                "            s.put({tl});\n            {};\n        }}",
                put_scalar(k, "v")
            )
            .unwrap();
        }
        (Label::Optional, Kind::String | Kind::Bytes) => {
            let tl = tag_lit(f, 2);
            writeln!(o, "        if let Some(v) = &self.{name} {{").unwrap();
            writeln!(o, "            s.put({tl});\n            put_varint(s, v.len() as u64);\n            s.put(v);\n        }}")
                .unwrap();
        }
        (Label::Optional, Kind::Payload) => {
            let tl = tag_lit(f, 2);
            writeln!(o, "        if let Some(v) = &self.{name} {{").unwrap();
            writeln!(
                o,
                "            #[cfg(feature = \"inline-alignment\")]\n            c.put_payload_pad(s);"
            )
            .unwrap();
            writeln!(
                o,
                "            s.put({tl});\n            put_varint(s, v.len() as u64);\n            s.put_payload(v);\n        }}"
            )
            .unwrap();
        }
        (Label::Optional, Kind::Message(_)) => {
            let tl = tag_lit(f, 2);
            writeln!(o, "        if let Some(m) = &self.{name} {{").unwrap();
            writeln!(o, "            s.put({tl});\n            put_varint(s, c.next_size());\n            {};\n        }}", encode_message(m, f, "m"))
                .unwrap();
        }
        (Label::Repeated, k) if is_scalar(k) && f.packed => {
            let tl = tag_lit(f, 2);
            writeln!(o, "        if !self.{name}.is_empty() {{").unwrap();
            writeln!(o, "            s.put({tl});").unwrap();
            match k {
                Kind::Float | Kind::Double => {
                    let n = if k == Kind::Float { 4 } else { 8 };
                    writeln!(
                        o,
                        "            put_varint(s, self.{name}.len() as u64 * {n});"
                    )
                    .unwrap();
                    writeln!(
                        o,
                        "            crate::proto::put_packed_fixed(s, &self.{name});"
                    )
                    .unwrap();
                }
                _ => {
                    writeln!(o, "            put_varint(s, c.next_size());").unwrap();
                    writeln!(o, "            for &v in &self.{name} {{\n                {};\n            }}", put_scalar(k, "v"))
                        .unwrap();
                }
            }
            writeln!(o, "        }}").unwrap();
        }
        (Label::Repeated, k) if is_scalar(k) => {
            let tl = tag_lit(f, wire_type(k));
            writeln!(o, "        for &v in &self.{name} {{").unwrap();
            writeln!(
                o,
                "            s.put({tl});\n            {};\n        }}",
                put_scalar(k, "v")
            )
            .unwrap();
        }
        (Label::Repeated, Kind::String | Kind::Bytes) => {
            let tl = tag_lit(f, 2);
            writeln!(o, "        for v in &self.{name} {{").unwrap();
            writeln!(o, "            s.put({tl});\n            put_varint(s, v.len() as u64);\n            s.put(v);\n        }}")
                .unwrap();
        }
        (Label::Repeated, Kind::Message(_)) => {
            let tl = tag_lit(f, 2);
            writeln!(o, "        for m in &self.{name} {{").unwrap();
            writeln!(o, "            s.put({tl});\n            put_varint(s, c.next_size());\n            {};\n        }}", encode_message(m, f, "m"))
                .unwrap();
        }
        _ => unreachable!(),
    }
}

/// Protobuf-style accessors: `x()`, `has_x()`, `set_x()`, `clear_x()`, `mutable_x()`,
/// `x_size()`, `add_x()`.
fn gen_accessors(o: &mut String, m: &MessageDef) {
    let rn = rust_type_name(m.name);
    writeln!(o, "impl {rn} {{").unwrap();
    gen_oneof_cases(o, m);
    if has_rare(m) {
        writeln!(o, "    /// Test hook: where the rare fields are read from (a box of this message's own, a shared preset, or the shared empty value).").unwrap();
        writeln!(o, "    #[cfg(feature = \"test-hooks\")]\n    #[doc(hidden)]\n    pub fn rare_address(&self) -> *const u8 {{\n        &*self.rare as *const {rn}Rare as *const u8\n    }}").unwrap();
        writeln!(
            o,
            "    /// Test hook: whether the message has a box of rare fields of its own."
        )
        .unwrap();
        writeln!(o, "    #[cfg(feature = \"test-hooks\")]\n    #[doc(hidden)]\n    pub fn rare_is_allocated(&self) -> bool {{\n        self.rare.is_allocated()\n    }}").unwrap();
    }
    for f in m.fields {
        let name = rust_member(f);
        let path = field_path(f);
        let base = f.name;
        let vt = value_type(f.kind);
        if let Some(oneof) = f.oneof {
            let en = oneof_enum_name(m, oneof);
            let var = camel(f.name);
            writeln!(o, "    /// True when the oneof `{oneof}` holds `{base}`.").unwrap();
            writeln!(o, "    pub fn has_{base}(&self) -> bool {{\n        matches!(self.{oneof}, Some({en}::{var}(_)))\n    }}")
                .unwrap();
            match f.kind {
                Kind::Message(_) => {
                    writeln!(
                        o,
                        "    /// `{base}`, or the empty message when another case (or none) is set."
                    )
                    .unwrap();
                    writeln!(o, "    pub fn {base}(&self) -> &{vt} {{").unwrap();
                    writeln!(o, "        static DEFAULT: {vt} = {vt}::new();").unwrap();
                    writeln!(o, "        match &self.{oneof} {{\n            Some({en}::{var}(v)) => v,\n            _ => &DEFAULT,\n        }}\n    }}")
                        .unwrap();
                    writeln!(o, "    /// `{base}` for writing; switches the oneof to it.").unwrap();
                    writeln!(o, "    pub fn mutable_{base}(&mut self) -> &mut {vt} {{").unwrap();
                    let empty = new_message(m, f, &vt);
                    writeln!(o, "        if !self.has_{base}() {{\n            self.{oneof} = Some({en}::{var}({empty}));\n        }}")
                        .unwrap();
                    writeln!(o, "        match &mut self.{oneof} {{\n            Some({en}::{var}(v)) => v,\n            _ => unreachable!(),\n        }}\n    }}")
                        .unwrap();
                    let unbox = if boxed(m, f) {
                        "MsgBox::into_inner(v)"
                    } else {
                        "v"
                    };
                    writeln!(o, "    /// Removes `{base}` and returns it (`None`, the oneof unchanged, when another case or none is set).").unwrap();
                    writeln!(o, "    pub fn take_{base}(&mut self) -> Option<{vt}> {{\n        if !self.has_{base}() {{\n            return None;\n        }}\n        match self.{oneof}.take() {{\n            Some({en}::{var}(v)) => Some({unbox}),\n            _ => unreachable!(),\n        }}\n    }}")
                        .unwrap();
                }
                Kind::String | Kind::Bytes => {
                    writeln!(
                        o,
                        "    /// `{base}`, or empty when another case (or none) is set."
                    )
                    .unwrap();
                    writeln!(o, "    pub fn {base}(&self) -> &ProtoString {{").unwrap();
                    writeln!(
                        o,
                        "        static DEFAULT: ProtoString = ProtoString::new();"
                    )
                    .unwrap();
                    writeln!(o, "        match &self.{oneof} {{\n            Some({en}::{var}(v)) => v,\n            _ => &DEFAULT,\n        }}\n    }}")
                        .unwrap();
                    writeln!(o, "    /// Sets `{base}` (switches the oneof).").unwrap();
                    writeln!(o, "    pub fn set_{base}(&mut self, v: impl Into<ProtoString>) {{\n        self.{oneof} = Some({en}::{var}(v.into()));\n    }}")
                        .unwrap();
                }
                _ => {
                    writeln!(
                        o,
                        "    /// `{base}`, or 0 when another case (or none) is set."
                    )
                    .unwrap();
                    writeln!(o, "    pub fn {base}(&self) -> {vt} {{").unwrap();
                    writeln!(o, "        match &self.{oneof} {{\n            Some({en}::{var}(v)) => *v,\n            _ => Default::default(),\n        }}\n    }}")
                        .unwrap();
                    writeln!(o, "    /// Sets `{base}` (switches the oneof).").unwrap();
                    writeln!(o, "    pub fn set_{base}(&mut self, v: {vt}) {{\n        self.{oneof} = Some({en}::{var}(v));\n    }}")
                        .unwrap();
                }
            }
            writeln!(o, "    /// Clears the oneof if it holds `{base}`.").unwrap();
            writeln!(o, "    pub fn clear_{base}(&mut self) {{\n        if self.has_{base}() {{\n            self.{oneof} = None;\n        }}\n    }}")
                .unwrap();
            continue;
        }
        match f.label {
            Label::Optional => {
                writeln!(o, "    /// True when `{base}` is set.").unwrap();
                writeln!(
                    o,
                    "    pub fn has_{base}(&self) -> bool {{\n        self.{path}.is_some()\n    }}"
                )
                .unwrap();
                writeln!(o, "    /// Unsets `{base}`.").unwrap();
                if is_rare(m, f) {
                    writeln!(
                        o,
                        "    pub fn clear_{base}(&mut self) {{\n        if let Some(rare) = self.rare.get_mut() {{\n            rare.{name} = None;\n        }}\n    }}"
                    )
                    .unwrap();
                } else {
                    writeln!(
                        o,
                        "    pub fn clear_{base}(&mut self) {{\n        self.{path} = None;\n    }}"
                    )
                    .unwrap();
                }
                match f.kind {
                    Kind::Message(_) => {
                        writeln!(o, "    /// `{base}`, or the empty message when unset.").unwrap();
                        writeln!(o, "    pub fn {name}(&self) -> &{vt} {{").unwrap();
                        writeln!(o, "        static DEFAULT: {vt} = {vt}::new();").unwrap();
                        writeln!(
                            o,
                            "        self.{path}.{}.unwrap_or(&DEFAULT)\n    }}",
                            if boxed(m, f) {
                                "as_deref()"
                            } else {
                                "as_ref()"
                            }
                        )
                        .unwrap();
                        writeln!(
                            o,
                            "    /// `{base}` for writing (set to an empty message first if unset)."
                        )
                        .unwrap();
                        writeln!(o, "    pub fn mutable_{base}(&mut self) -> &mut {vt} {{")
                            .unwrap();
                        let (empty, value) = if boxed(m, f) {
                            (format!("|| MsgBox::new({vt}::new())"), "MsgBox::new(v)")
                        } else {
                            (format!("{vt}::new"), "v")
                        };
                        writeln!(o, "        self.{path}.get_or_insert_with({empty})\n    }}")
                            .unwrap();
                        writeln!(o, "    /// Sets `{base}`.").unwrap();
                        writeln!(o, "    pub fn set_{base}(&mut self, v: {vt}) {{\n        self.{path} = Some({value});\n    }}")
                            .unwrap();
                        let deref = if boxed(m, f) {
                            "as_deref()"
                        } else {
                            "as_ref()"
                        };
                        writeln!(o, "    /// `{base}`, or `None` when unset.").unwrap();
                        writeln!(o, "    pub fn {base}_opt(&self) -> Option<&{vt}> {{\n        self.{path}.{deref}\n    }}").unwrap();
                        let unbox = if boxed(m, f) {
                            ".map(MsgBox::into_inner)"
                        } else {
                            ""
                        };
                        writeln!(o, "    /// Removes `{base}` and returns it.").unwrap();
                        writeln!(o, "    pub fn take_{base}(&mut self) -> Option<{vt}> {{")
                            .unwrap();
                        if is_rare(m, f) {
                            writeln!(
                                o,
                                "        self.rare.get_mut()?.{name}.take(){unbox}\n    }}"
                            )
                            .unwrap();
                        } else {
                            writeln!(o, "        self.{path}.take(){unbox}\n    }}").unwrap();
                        }
                    }
                    Kind::String | Kind::Bytes => {
                        writeln!(o, "    /// `{base}`, or empty when unset.").unwrap();
                        writeln!(o, "    pub fn {base}(&self) -> &ProtoString {{").unwrap();
                        writeln!(
                            o,
                            "        static DEFAULT: ProtoString = ProtoString::new();"
                        )
                        .unwrap();
                        writeln!(
                            o,
                            "        self.{path}.as_ref().unwrap_or(&DEFAULT)\n    }}"
                        )
                        .unwrap();
                        writeln!(o, "    /// Sets `{base}`.").unwrap();
                        writeln!(o, "    pub fn set_{base}(&mut self, v: impl Into<ProtoString>) {{\n        self.{path} = Some(v.into());\n    }}")
                            .unwrap();
                        writeln!(o, "    /// `{base}`, or `None` when unset.").unwrap();
                        writeln!(o, "    pub fn {base}_opt(&self) -> Option<&ProtoString> {{\n        self.{path}.as_ref()\n    }}").unwrap();
                        writeln!(
                            o,
                            "    /// `{base}` for writing (set to empty first if unset)."
                        )
                        .unwrap();
                        writeln!(o, "    pub fn mutable_{base}(&mut self) -> &mut ProtoString {{\n        self.{path}.get_or_insert_with(ProtoString::new)\n    }}").unwrap();
                    }
                    Kind::Payload => {
                        writeln!(o, "    /// `{base}` bytes, or empty when unset.").unwrap();
                        writeln!(o, "    pub fn {base}(&self) -> &[u8] {{").unwrap();
                        writeln!(o, "        self.{path}.as_ref().map(|b| b.as_slice()).unwrap_or(&[])\n    }}").unwrap();
                        writeln!(o, "    /// Sets `{base}` (owned or borrowed span).").unwrap();
                        writeln!(o, "    pub fn set_{base}(&mut self, v: impl Into<ByteSpan>) {{\n        self.{path} = Some(v.into());\n    }}")
                            .unwrap();
                        writeln!(o, "    /// `{base}` as the span that holds it (owned, or borrowed with its owner), or `None` when unset.").unwrap();
                        writeln!(o, "    pub fn {base}_opt(&self) -> Option<&ByteSpan> {{\n        self.{path}.as_ref()\n    }}").unwrap();
                        writeln!(
                            o,
                            "    /// `{base}` for writing (set to empty first if unset)."
                        )
                        .unwrap();
                        writeln!(o, "    pub fn mutable_{base}(&mut self) -> &mut ByteSpan {{\n        self.{path}.get_or_insert_with(ByteSpan::default)\n    }}").unwrap();
                        writeln!(o, "    /// Removes `{base}` and returns its span.").unwrap();
                        writeln!(o, "    pub fn take_{base}(&mut self) -> Option<ByteSpan> {{\n        self.{path}.take()\n    }}").unwrap();
                    }
                    _ => {
                        writeln!(o, "    /// `{base}`, or 0 when unset.").unwrap();
                        writeln!(o, "    pub fn {name}(&self) -> {vt} {{\n        self.{path}.unwrap_or_default()\n    }}").unwrap();
                        writeln!(o, "    /// Sets `{base}`.").unwrap();
                        writeln!(o, "    pub fn set_{base}(&mut self, v: {vt}) {{\n        self.{path} = Some(v);\n    }}").unwrap();
                        writeln!(o, "    /// `{base}`, or `None` when unset.").unwrap();
                        writeln!(o, "    pub fn {base}_opt(&self) -> Option<{vt}> {{\n        self.{path}\n    }}").unwrap();
                    }
                }
            }
            Label::Repeated => {
                writeln!(o, "    /// Number of `{base}` elements.").unwrap();
                writeln!(
                    o,
                    "    pub fn {base}_size(&self) -> usize {{\n        self.{path}.len()\n    }}"
                )
                .unwrap();
                writeln!(o, "    /// Removes every `{base}` element.").unwrap();
                if is_rare(m, f) {
                    writeln!(
                        o,
                        "    pub fn clear_{base}(&mut self) {{\n        if let Some(rare) = self.rare.get_mut() {{\n            rare.{name}.clear();\n        }}\n    }}"
                    )
                    .unwrap();
                } else {
                    writeln!(
                        o,
                        "    pub fn clear_{base}(&mut self) {{\n        self.{path}.clear();\n    }}"
                    )
                    .unwrap();
                }
                match f.kind {
                    Kind::Message(_) => {
                        writeln!(o, "    /// The `{base}` elements.").unwrap();
                        writeln!(o, "    pub fn {name}(&self) -> &RepeatedField<{vt}> {{\n        &self.{path}\n    }}").unwrap();
                        writeln!(o, "    /// The `{base}` elements for writing.").unwrap();
                        writeln!(o, "    pub fn mutable_{base}(&mut self) -> &mut RepeatedField<{vt}> {{\n        &mut self.{path}\n    }}").unwrap();
                    }
                    _ => {
                        let et = if matches!(f.kind, Kind::String | Kind::Bytes) {
                            "ProtoString".to_string()
                        } else {
                            vt.clone()
                        };
                        let (item, conv) = if et == "ProtoString" {
                            ("impl Into<ProtoString>".to_string(), ".map(Into::into)")
                        } else {
                            (
                                format!("impl std::borrow::Borrow<{et}>"),
                                ".map(|x| *x.borrow())",
                            )
                        };
                        writeln!(o, "    /// The `{base}` elements.").unwrap();
                        writeln!(
                            o,
                            "    pub fn {name}(&self) -> &[{et}] {{\n        &self.{path}\n    }}"
                        )
                        .unwrap();
                        writeln!(o, "    /// The `{base}` elements for writing.").unwrap();
                        writeln!(o, "    pub fn mutable_{base}(&mut self) -> &mut impl Repeated<{et}> {{\n        &mut self.{path}\n    }}").unwrap();
                        writeln!(o, "    /// Replaces the `{base}` elements.").unwrap();
                        writeln!(o, "    pub fn set_{base}(&mut self, v: impl IntoIterator<Item = {item}>) {{").unwrap();
                        writeln!(o, "        let list = &mut self.{path};\n        list.clear();\n        list.extend(v.into_iter(){conv});\n    }}").unwrap();
                    }
                }
                match f.kind {
                    Kind::Message(_) => {
                        writeln!(
                            o,
                            "    /// Appends an empty `{base}` element and returns it."
                        )
                        .unwrap();
                        writeln!(o, "    pub fn add_{base}(&mut self) -> &mut {vt} {{").unwrap();
                        writeln!(o, "        self.{path}.push_default()\n    }}").unwrap();
                    }
                    Kind::String | Kind::Bytes => {
                        writeln!(o, "    /// Appends a `{base}` element.").unwrap();
                        writeln!(o, "    pub fn add_{base}(&mut self, v: impl Into<ProtoString>) {{\n        self.{path}.push(v.into());\n    }}")
                            .unwrap();
                    }
                    _ => {
                        writeln!(o, "    /// Appends a `{base}` element.").unwrap();
                        writeln!(o, "    pub fn add_{base}(&mut self, v: {vt}) {{\n        self.{path}.push(v);\n    }}").unwrap();
                    }
                }
            }
        }
    }
    writeln!(o, "}}\n").unwrap();
}

/// `Recycle` for `m`: empties the message, in field-number order (the order of the encoding, so
/// the order in which a parse of it meets its parts), handing its `std::string`s and boxed
/// sub-messages (themselves emptied first) to the pools and keeping list memory in place.
fn gen_recycle(out: &mut String, m: &MessageDef) {
    let rt = rust_type_name(m.name);
    let pool = snake(m.name);
    writeln!(out, "impl Recycle for {rt} {{").unwrap();
    writeln!(
        out,
        "    fn pool(rec: &mut Recycler) -> &mut std::collections::VecDeque<MsgBox<Self>> {{\n        &mut rec.{pool}\n    }}\n"
    )
    .unwrap();
    writeln!(
        out,
        "    fn recycle(&mut self, rec: &mut Recycler, strings: &mut CxxStringPool) {{"
    )
    .unwrap();
    if !rare_presets(m).is_empty() {
        // A shared preset holds nothing to keep: let go of it without copying it into a box.
        writeln!(
            out,
            "        if !self.rare.is_allocated() {{\n            self.rare.clear();\n        }}"
        )
        .unwrap();
    }
    let mut oneofs_done: Vec<&str> = Vec::new();
    let recurse = |f: &FieldDef, v: &str| -> String {
        if is_cycle_field(m.name, f.name) {
            format!("crate::wire::guard_stack(|| {v}.recycle(rec, strings))")
        } else {
            format!("{v}.recycle(rec, strings)")
        }
    };
    for f in sorted_fields(m) {
        let name = rust_member(f);
        if let Some(oneof) = f.oneof {
            if oneofs_done.contains(&oneof) {
                continue;
            }
            oneofs_done.push(oneof);
            let en = oneof_enum_name(m, oneof);
            writeln!(out, "        match self.{oneof}.take() {{").unwrap();
            for mf in m.fields.iter().filter(|x| x.oneof == Some(oneof)) {
                let var = camel(mf.name);
                match mf.kind {
                    Kind::Message(mt) => {
                        let mt = rust_type_name(mt);
                        assert!(boxed(m, mf), "oneof message members are boxed");
                        writeln!(
                            out,
                            "            Some({en}::{var}(mut v)) => {{\n                {};\n                {mt}::pool(rec).push_back(v);\n            }}",
                            recurse(mf, "v")
                        )
                        .unwrap();
                    }
                    Kind::String | Kind::Bytes => {
                        writeln!(
                            out,
                            "            Some({en}::{var}(mut v)) => strings.keep(&mut v),"
                        )
                        .unwrap();
                    }
                    _ => {}
                }
            }
            writeln!(out, "            _ => {{}}\n        }}").unwrap();
            continue;
        }
        // A rare field is emptied in an allocated box (the box is freed at the end).
        let o = &mut String::new();
        match (f.label, f.kind) {
            (Label::Optional, Kind::String | Kind::Bytes) => writeln!(
                o,
                "        if let Some(mut v) = self.{name}.take() {{\n            strings.keep(&mut v);\n        }}"
            ),
            (Label::Optional, Kind::Message(mt)) => {
                let mt = rust_type_name(mt);
                assert!(boxed(m, f), "recycled sub-messages are boxed");
                writeln!(
                    o,
                    "        if let Some(mut v) = self.{name}.take() {{\n            {};\n            {mt}::pool(rec).push_back(v);\n        }}",
                    recurse(f, "v")
                )
            }
            (Label::Optional, Kind::Payload) => writeln!(
                o,
                "        if let Some(mut v) = self.{name}.take() {{\n            strings.keep_payload(&mut v);\n        }}"
            ),
            (Label::Optional, _) => writeln!(o, "        self.{name} = None;"),
            (Label::Repeated, Kind::String | Kind::Bytes) => writeln!(
                o,
                "        for v in self.{name}.iter_mut() {{\n            strings.keep(v);\n        }}\n        self.{name}.clear();"
            ),
            (Label::Repeated, Kind::Message(_)) => writeln!(
                o,
                "        self.{name}.recycle_elements(|e| {});",
                recurse(f, "e")
            ),
            (Label::Repeated, _) => writeln!(o, "        self.{name}.clear();"),
        }
        .unwrap();
        if is_rare(m, f) {
            let inner = o
                .replace("self.", "rare.")
                .replace("\n        ", "\n            ");
            writeln!(
                out,
                "        if let Some(rare) = self.rare.get_mut() {{\n    {}        }}",
                inner
            )
            .unwrap();
        } else {
            out.push_str(o);
        }
    }
    if has_rare(m) {
        // Frees the box, unknown fields included.
        writeln!(out, "        self.rare.clear();").unwrap();
    } else {
        writeln!(out, "        self.unknown_fields.clear();").unwrap();
    }
    writeln!(out, "    }}\n}}\n").unwrap();
}

/// The pools of `Recycle` (one per message type), the trait, and `recycled`.
fn gen_recycler(o: &mut String) {
    o.push_str(
        "/// The boxed sub-messages of a message's old content, emptied, per type and in the order\n\
         /// they were met: the C++ classes' parse into a message takes its sub-messages from here\n\
         /// (first-in first-out) before allocating, as protobuf reuses a message's objects when it\n\
         /// parses into it again. What is left is freed with it.\n\
         #[derive(Default)]\n\
         pub(crate) struct Recycler {\n",
    );
    for m in MESSAGES {
        writeln!(
            o,
            "    {}: std::collections::VecDeque<MsgBox<{}>>,",
            snake(m.name),
            rust_type_name(m.name)
        )
        .unwrap();
    }
    o.push_str(
        "}\n\n\
         /// A message whose content can be handed to a [`Recycler`] for a parse to reuse.\n\
         pub(crate) trait Recycle: Message {\n    \
         /// The pool of this type.\n    \
         fn pool(rec: &mut Recycler) -> &mut std::collections::VecDeque<MsgBox<Self>>;\n    \
         /// Empties the message (as `*self = Self::new()` would, keeping memory): its\n    \
         /// `std::string`s go to `strings`, its boxed sub-messages (emptied) to `rec`, and its\n    \
         /// lists keep their buffers (repeated messages their elements, as spares).\n    \
         fn recycle(&mut self, rec: &mut Recycler, strings: &mut CxxStringPool);\n\
         }\n\n\
         /// An emptied boxed `M` of the [`Recycler`] of the parse of `r`, if it has one.\n\
         #[inline]\n\
         fn recycled<M: Recycle>(r: &Reader<'_>) -> Option<MsgBox<M>> {\n    \
         let rec = r.recycler().cast::<Recycler>();\n    \
         if rec.is_null() {\n        \
         return None;\n    \
         }\n    \
         // SAFETY: `Reader::recycle_from`'s contract: a live `Recycler` that only this parse uses.\n    \
         M::pool(unsafe { &mut *rec }).pop_front()\n\
         }\n\n",
    );
}
