//! `tests/compat/schema.json`: the schema table as data, for the test that compares it with the
//! descriptors of the onnx package (every message, field number, type, label, packing, oneof and
//! enum value), so a field added upstream fails the test instead of passing as an unknown field.

use crate::schema::{self, Kind, Label};

/// The protobuf type name of a field as a descriptor spells it (`TYPE_INT64` → `int64`).
fn type_name(kind: Kind) -> String {
    match kind {
        Kind::Int64 => "int64".into(),
        Kind::Int32 => "int32".into(),
        Kind::UInt64 => "uint64".into(),
        Kind::Float => "float".into(),
        Kind::Double => "double".into(),
        Kind::String => "string".into(),
        Kind::Bytes | Kind::Payload => "bytes".into(),
        Kind::Enum(e) => format!("enum {}", e.name),
        Kind::Message(m) => format!("message {m}"),
    }
}

/// The JSON text: `{"messages": {name: [field, …]}, "enums": {name: {value name: number}}}`,
/// one field per line so that a change reads as a one-line diff.
pub fn generate() -> String {
    let mut out = String::from("{\n  \"messages\": {\n");
    let mut enums: Vec<&schema::EnumDef> = Vec::new();
    for (i, m) in schema::MESSAGES.iter().enumerate() {
        out += &format!("    \"{}\": [\n", m.name);
        for (j, f) in m.fields.iter().enumerate() {
            if let Kind::Enum(e) = f.kind
                && !enums.iter().any(|seen| seen.name == e.name)
            {
                enums.push(e);
            }
            let oneof = f.oneof.map_or("null".to_string(), |o| format!("\"{o}\""));
            out += &format!(
                "      {{\"name\": \"{}\", \"number\": {}, \"type\": \"{}\", \"repeated\": {}, \
                 \"packed\": {}, \"oneof\": {oneof}}}{}\n",
                f.name,
                f.number,
                type_name(f.kind),
                f.label == Label::Repeated,
                f.packed,
                if j + 1 < m.fields.len() { "," } else { "" }
            );
        }
        out += if i + 1 < schema::MESSAGES.len() {
            "    ],\n"
        } else {
            "    ]\n"
        };
    }
    out += "  },\n  \"enums\": {\n";
    for (i, e) in enums.iter().enumerate() {
        let values: Vec<String> = e
            .values
            .iter()
            .map(|(n, v)| format!("\"{n}\": {v}"))
            .collect();
        out += &format!(
            "    \"{}\": {{{}}}{}\n",
            e.name,
            values.join(", "),
            if i + 1 < enums.len() { "," } else { "" }
        );
    }
    out += "  }\n}\n";
    out
}
