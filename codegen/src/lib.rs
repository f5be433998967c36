//! Generator of onnx_light's schema-derived code. It reads the one schema table
//! (`src/proto/schema.rs`, included here by path) and writes:
//! - `src/proto/generated.rs`: the message structs, their decode/size/encode code and accessors;
//! - `src/ffi/accessors.rs`: the C handles and per-field `extern "C"` accessors (read by cbindgen
//!   to write `include/onnx_light.h`);
//! - `src/ffi/cxx_messages.rs` and `include/onnx_light.hpp` (+ `include/onnx_light/onnx_pb.h`):
//!   the C++ message classes (protobuf's generated-code contract) and the onnx_light C++ API;
//! - `python/src/generated.rs`: the message classes of the Python package;
//! - `tests/compat/schema.json`: the schema as data, compared with the onnx package's descriptors.
//!
//! The output is deterministic; a test in onnx_light compares it with the checked-in files.

#[path = "../../src/proto/schema.rs"]
#[allow(dead_code)]
pub mod schema;

mod c_accessors;
mod c_walker;
mod cpp_classes;
pub mod cxx_rust;
pub mod layout;
mod python_bindings;
mod rust_messages;
mod schema_dump;

/// Every generated file: (path relative to the repository root, contents).
pub fn generate_all() -> Vec<(&'static str, String)> {
    cxx_rust::assert_sub_messages_are_boxed();
    vec![
        ("src/proto/generated.rs", rust_messages::generate()),
        ("src/ffi/accessors.rs", c_accessors::generate()),
        ("codegen/cxx_layout.txt", layout::table()),
        ("include/onnx_light.hpp", cpp_classes::generate()),
        (
            "include/onnx_light/onnx_pb.h",
            cpp_classes::generate_compat(),
        ),
        ("src/ffi/cxx_messages.rs", cxx_rust::generate()),
        ("c_tests/generated/walk_copy.c", c_walker::generate()),
        ("python/src/generated.rs", python_bindings::generate()),
        (
            "python/onnx_light/_native.pyi",
            python_bindings::generate_stubs(),
        ),
        ("tests/compat/schema.json", schema_dump::generate()),
    ]
}

/// `TensorProto.Segment` -> `TensorProtoSegment`.
pub fn rust_type_name(full: &str) -> String {
    full.replace('.', "")
}

/// `tensor_type` -> `TensorType`.
pub fn camel(s: &str) -> String {
    s.split('_')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// `TensorProto.Segment` -> `tensor_proto_segment` (C function prefix part).
pub fn snake(full: &str) -> String {
    let mut out = String::new();
    for part in full.split('.') {
        if !out.is_empty() {
            out.push('_');
        }
        let mut prev_lower = false;
        for ch in part.chars() {
            if ch.is_ascii_uppercase() {
                if prev_lower {
                    out.push('_');
                }
                out.push(ch.to_ascii_lowercase());
                prev_lower = false;
            } else {
                out.push(ch);
                prev_lower = ch.is_ascii_lowercase() || ch.is_ascii_digit();
            }
        }
    }
    out
}

/// The protobuf declaration of a field, for doc comments.
pub fn proto_decl(f: &schema::FieldDef) -> String {
    let label = match f.label {
        schema::Label::Optional if f.oneof.is_some() => "",
        schema::Label::Optional => "optional ",
        schema::Label::Repeated => "repeated ",
    };
    let ty = match f.kind {
        schema::Kind::Int64 => "int64".to_string(),
        schema::Kind::Int32 => "int32".to_string(),
        schema::Kind::UInt64 => "uint64".to_string(),
        schema::Kind::Float => "float".to_string(),
        schema::Kind::Double => "double".to_string(),
        schema::Kind::String => "string".to_string(),
        schema::Kind::Bytes | schema::Kind::Payload => "bytes".to_string(),
        schema::Kind::Enum(e) => e.name.to_string(),
        schema::Kind::Message(m) => m.to_string(),
    };
    let packed = if f.packed { " [packed = true]" } else { "" };
    format!("{label}{ty} {} = {}{packed};", f.name, f.number)
}

/// Repeated scalar and string fields that keep their first elements inside the message (a
/// `InlineVec` with this inline capacity) instead of in a heap allocation: lists that are short in
/// nearly every real model (a node's inputs and outputs, a tensor's dims, an attribute's ints),
/// where an allocation each would cost more than parsing them. Every other repeated scalar field
/// keeps as many elements inline as fit in the word its heap pointer takes anyway (see
/// [`free_inline_capacity`]); every other string list is a `Vec`.
pub const INLINE_LIST_FIELDS: &[(&str, &str, usize)] = &[
    ("NodeProto", "input", 2),
    ("NodeProto", "output", 1),
    ("TensorProto", "dims", 4),
];

/// The inline capacity of repeated field `f` of `m`: its entry of [`INLINE_LIST_FIELDS`], else
/// [`free_inline_capacity`] of its kind (`None`: a plain vector).
pub fn inline_list_capacity(m: &schema::MessageDef, f: &schema::FieldDef) -> Option<usize> {
    INLINE_LIST_FIELDS
        .iter()
        .find(|&&(msg, field, _)| msg == m.name && field == f.name)
        .map(|&(_, _, n)| n)
        .or_else(|| free_inline_capacity(f.kind))
}

/// The elements of a scalar kind that fit in the 8-byte heap pointer of an `InlineVec`, which
/// holds either (2 of 4 bytes, 1 of 8): a list that short (a constant tensor's one value, an
/// attribute's one or two floats) then needs no allocation, at no cost in size.
pub fn free_inline_capacity(kind: schema::Kind) -> Option<usize> {
    use schema::Kind::*;
    match kind {
        Int32 | Enum(_) | Float => Some(2),
        Int64 | UInt64 | Double => Some(1),
        String | Bytes | Payload | Message(_) => None,
    }
}

/// Fields that are set in few real models, held in one lazily allocated box per message (the
/// `rare` member, a `Rare<{Msg}Rare>`) instead of inline, so that the common message is small:
/// `(message, fields)`. Oneof members cannot be rare.
pub const RARE_FIELDS: &[(&str, &[&str])] = &[
    (
        "AttributeProto",
        &[
            "ref_attr_name",
            "doc_string",
            // `t` stays inline: every ConstantOfShape / Constant node of an export sets it, and
            // a box of its own beside the tensor's would cost more than the 8 bytes it saves.
            "g",
            "sparse_tensor",
            "tp",
            // A string and lists of floats and of strings: few operators take them (`Resize`'s
            // and `Pad`'s modes, `Einsum`'s equation, `Constant`'s `value_floats` /
            // `value_strings`, LSTM's `activations`, the ML domain's trees and label encoders,
            // whose few attributes hold long lists; the onnx wheel's real models have none),
            // while ints, ints lists and floats are everywhere (`axis`, `perm`, `pads`,
            // `kernel_shape`, `epsilon`, ...).
            "s",
            "floats",
            "strings",
            "tensors",
            "graphs",
            "sparse_tensors",
            "type_protos",
        ],
    ),
    (
        "NodeProto",
        // `doc_string` and `domain`: exporters write them on every node, nearly always empty
        // or a well-known domain, which the message's presets (`RARE_PRESETS`) hold without a
        // box.
        &[
            "doc_string",
            "domain",
            "overload",
            "metadata_props",
            "device_configurations",
        ],
    ),
    ("ValueInfoProto", &["doc_string", "metadata_props"]),
    ("TensorShapeProto.Dimension", &["denotation"]),
    ("TypeProto", &["denotation"]),
    // Exporters write tensors as `raw_data` (or `float_data` / `int64_data` for small
    // constants), with their name, dims and type: of the 4 160 tensors of the onnx wheel's
    // backend test models, none holds `int32_data`, `external_data` or `data_location`. A model
    // with external data has few tensors, each holding far more than its rare box (152 bytes).
    (
        "TensorProto",
        &[
            "segment",
            "int32_data",
            "string_data",
            "external_data",
            "data_location",
            "doc_string",
            "double_data",
            "uint64_data",
            "metadata_props",
        ],
    ),
];

/// A preset string of [`RARE_PRESETS`]: a field and the values its presets hold.
pub type PresetString = (&'static str, &'static [&'static str]);

/// Rare string fields that a parse sets to one of a few common values without allocating the
/// box: `(message, [(field, values)])`. The message's rare fields then point to a shared static
/// value (`RareFields::presets`: one for every combination of these fields' states, unset or one
/// of their values) copied into a box on the first write. PyTorch's exporter writes an empty
/// `doc_string` and a `domain` on every node (`""` for the standard operators, the domain of
/// contrib operators otherwise): 64 bytes per node less than two inline members, at no cost
/// for the nodes of exports without them. The domains are those of the onnx standard and of
/// the contrib operators onnxruntime, PyTorch and onnxscript write.
pub const RARE_PRESETS: &[(&str, &[PresetString])] = &[(
    "NodeProto",
    &[
        ("doc_string", &[""]),
        (
            "domain",
            &[
                "",
                "ai.onnx",
                "ai.onnx.ml",
                "ai.onnx.preview.training",
                "com.microsoft",
                "com.microsoft.nchwc",
                "org.pytorch.aten",
                "pkg.onnxscript.torch_lib",
            ],
        ),
    ],
)];

/// The preset strings of `m` (see [`RARE_PRESETS`]) with their values, in order (empty for a
/// message without presets).
pub fn rare_presets(m: &schema::MessageDef) -> Vec<(&schema::FieldDef, &'static [&'static str])> {
    let Some(&(_, fields)) = RARE_PRESETS.iter().find(|&&(msg, _)| msg == m.name) else {
        return Vec::new();
    };
    fields
        .iter()
        .map(|&(field, values)| {
            let f = m
                .fields
                .iter()
                .find(|f| f.name == field)
                .expect("a field of the message");
            assert!(
                is_rare(m, f)
                    && matches!(f.kind, schema::Kind::String)
                    && f.label == schema::Label::Optional,
                "{}.{field}: a preset string is an optional rare string",
                m.name
            );
            (f, values)
        })
        .collect()
}

/// True when field `f` of `m` is held in the message's `rare` box.
pub fn is_rare(m: &schema::MessageDef, f: &schema::FieldDef) -> bool {
    RARE_FIELDS
        .iter()
        .any(|&(msg, fields)| msg == m.name && fields.contains(&f.name))
}

/// True when message `m` has a `rare` box.
pub fn has_rare(m: &schema::MessageDef) -> bool {
    RARE_FIELDS.iter().any(|&(msg, _)| msg == m.name)
}

/// The message declaring `f` (a field of the schema table, found by its address).
pub fn owner_of(f: &schema::FieldDef) -> &'static schema::MessageDef {
    schema::MESSAGES
        .iter()
        .find(|m| m.fields.iter().any(|g| std::ptr::eq(g, f)))
        .expect("a field of the schema table")
}

/// The Rust struct field of `f` (`r#type` for `type`), without the path to it.
pub fn rust_member(f: &schema::FieldDef) -> String {
    match f.name {
        "type" => "r#type".to_string(),
        n => n.to_string(),
    }
}

/// The path from a message value to field `f`: `rare.t` for a rare field (read through the box,
/// or the empty one when unallocated; written through `DerefMut`, which allocates it), else the
/// member itself.
pub fn field_path(f: &schema::FieldDef) -> String {
    if is_rare(owner_of(f), f) {
        format!("rare.{}", rust_member(f))
    } else {
        rust_member(f)
    }
}

/// The path from a value of `m` to its unknown fields: `rare.unknown_fields` when `m` has a rare
/// box (unknown fields are rare too: they cost such a message no inline bytes), else the
/// `unknown_fields` member.
pub fn unknown_fields_path(m: &schema::MessageDef) -> &'static str {
    if has_rare(m) {
        "rare.unknown_fields"
    } else {
        "unknown_fields"
    }
}

/// The oneofs of a message, in declaration order.
pub fn oneofs(m: &schema::MessageDef) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for f in m.fields {
        if let Some(o) = f.oneof
            && !out.contains(&o)
        {
            out.push(o);
        }
    }
    out
}

/// Varint bytes of `v`.
pub fn varint_bytes(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

/// The sub-message fields that close a cycle of the schema's message graph, as
/// `(message, field)`: the back edges of a depth-first search from `ModelProto`, then from
/// every other message in schema order (so the fields that close a cycle are the rare ones,
/// such as `AttributeProto.g`, not `NodeProto.attribute`). Every cycle holds one, so code that recurses over messages and guards its stack at
/// these fields (see `wire::stack`) recurses along acyclic paths only between two guards.
pub fn cycle_fields() -> Vec<(&'static str, &'static str)> {
    use schema::{Kind, MESSAGES, MessageDef};
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        Open,
        Done,
    }
    fn index(name: &str) -> usize {
        MESSAGES
            .iter()
            .position(|m| m.name == name)
            .expect("known message")
    }
    fn visit(i: usize, state: &mut [State], out: &mut Vec<(&'static str, &'static str)>) {
        state[i] = State::Open;
        let m: &MessageDef = &MESSAGES[i];
        for f in m.fields {
            let Kind::Message(t) = f.kind else { continue };
            let j = index(t);
            match state[j] {
                State::Open => out.push((m.name, f.name)),
                State::New => visit(j, state, out),
                State::Done => {}
            }
        }
        state[i] = State::Done;
    }
    let mut state = vec![State::New; MESSAGES.len()];
    let mut out = Vec::new();
    let roots = std::iter::once(index("ModelProto")).chain(0..MESSAGES.len());
    for i in roots {
        if state[i] == State::New {
            visit(i, &mut state, &mut out);
        }
    }
    out
}

/// True when field `field` of message `message` closes a cycle (see [`cycle_fields`]).
pub fn is_cycle_field(message: &str, field: &str) -> bool {
    cycle_fields()
        .iter()
        .any(|&(m, f)| m == message && f == field)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(snake("TensorProto.Segment"), "tensor_proto_segment");
        assert_eq!(snake("TypeProto.SparseTensor"), "type_proto_sparse_tensor");
        assert_eq!(snake("IntIntListEntryProto"), "int_int_list_entry_proto");
        assert_eq!(camel("sparse_tensor_type"), "SparseTensorType");
        assert_eq!(rust_type_name("TypeProto.Map"), "TypeProtoMap");
    }
}
