//! The memory layout of the message structs, decided here rather than measured from a build.
//!
//! Every message struct (and its rare struct) is `#[repr(C)]` with its members in the order this
//! module chooses: by alignment, largest first, schema order within one alignment (no padding
//! between members: every member's size is a multiple of its alignment). The size and alignment
//! of each member's type are the facts below; `generated.rs` asserts every one of them, and
//! every offset and struct size, at compile time, so a build whose layout differs from this
//! table does not compile. The table (`table`, checked in as `codegen/cxx_layout.txt`) is what
//! the C++ header is generated from; the library measures the same table from its types
//! (`layout_text`) for the header's start-up fingerprint check.

use std::fmt::Write;

use crate::cxx_rust::{by_offset, cpp_name};
use crate::rust_messages::{boxed, oneof_enum_name, value_type};
use crate::schema::{FieldDef, Kind, Label, MESSAGES, MessageDef};
use crate::{
    has_rare, inline_list_capacity, is_rare, oneofs, proto_decl, rust_member, rust_type_name,
};

/// One member of a generated struct.
pub struct Member {
    /// The Rust member name (`r#type` for `type`).
    pub name: String,
    /// Its Rust type.
    pub ty: String,
    /// Its doc comment lines (without `///`).
    pub doc: Vec<String>,
    pub size: usize,
    pub align: usize,
}

/// A struct's members in layout order, each with its offset; its size and alignment.
pub struct StructLayout {
    pub members: Vec<(Member, usize)>,
    pub size: usize,
    pub align: usize,
}

/// The size of a `ProtoString` and of an `Option<ProtoString>` (32: the value, then the slot of
/// the C++ classes' `std::string`).
const STRING_SIZE: usize = 32;

/// Size and alignment of an element of a repeated scalar or string field.
fn element_layout(vt: &str) -> (usize, usize) {
    match vt {
        "ProtoString" => (STRING_SIZE, 8),
        "i64" | "u64" | "f64" => (8, 8),
        "i32" | "f32" => (4, 4),
        other => panic!("no element layout for {other}"),
    }
}

/// Size and alignment of the storage of field `f` of `m` (not a oneof member), and its type.
fn field_type(m: &MessageDef, f: &FieldDef) -> (String, usize, usize) {
    let vt = value_type(f.kind);
    match (f.label, f.kind) {
        // RepeatedField: a pointer and a length word.
        (Label::Repeated, Kind::Message(_)) => (format!("RepeatedField<{vt}>"), 16, 8),
        // InlineVec: a u32 length and a u32 capacity, then the heap pointer or, in its place,
        // up to N elements.
        (Label::Repeated, _) => {
            let n = inline_list_capacity(m, f);
            let (elem, _) = element_layout(&vt);
            let size = 8 + (n.unwrap_or(0) * elem).max(8);
            let ty = match n {
                Some(n) => format!("InlineVec<{vt}, {n}>"),
                None => format!("InlineVec<{vt}>"),
            };
            (ty, size, 8)
        }
        (Label::Optional, Kind::Message(_)) => {
            assert!(boxed(m, f), "{}.{}: sub-messages are boxed", m.name, f.name);
            // A null pointer is `None`.
            (format!("Option<MsgBox<{vt}>>"), 8, 8)
        }
        (Label::Optional, Kind::String | Kind::Bytes) => {
            // `None` is a tag value of the string's first byte.
            ("Option<ProtoString>".into(), STRING_SIZE, 8)
        }
        // The span's value (a 40-byte Rust enum: `None` in its tag) and the C++ slot.
        (Label::Optional, Kind::Payload) => ("Option<ByteSpan>".into(), 48, 8),
        // A tag word before the value.
        (Label::Optional, _) => {
            let (elem, align) = element_layout(&vt);
            (format!("Option<{vt}>"), 2 * elem, align)
        }
    }
}

/// The `repr(u32)` enum of oneof `oneof` of `m` in an `Option`: a tag word, then the value at
/// offset 8. Its size.
fn oneof_size(m: &MessageDef, oneof: &str) -> usize {
    let value = m
        .fields
        .iter()
        .filter(|f| f.oneof == Some(oneof))
        .map(|f| match f.kind {
            Kind::String | Kind::Bytes => STRING_SIZE,
            Kind::Int64 | Kind::Message(_) => 8,
            k => panic!("{}.{}: no oneof layout for {k:?}", m.name, f.name),
        })
        .max()
        .expect("a oneof has members");
    8 + value
}

/// The members of `m`'s struct (`rare == false`) or of its rare struct, in schema order.
fn members(m: &MessageDef, rare: bool) -> Vec<Member> {
    let mut out = Vec::new();
    let mut done_oneofs: Vec<&str> = Vec::new();
    for f in m.fields {
        if let Some(oneof) = f.oneof {
            assert!(
                !is_rare(m, f),
                "{}.{}: a oneof member cannot be rare",
                m.name,
                f.name
            );
            if rare || done_oneofs.contains(&oneof) {
                continue;
            }
            done_oneofs.push(oneof);
            out.push(Member {
                name: oneof.to_string(),
                ty: format!("Option<{}>", oneof_enum_name(m, oneof)),
                doc: vec![format!(" `oneof {oneof}`.")],
                size: oneof_size(m, oneof),
                align: 8,
            });
            continue;
        }
        if is_rare(m, f) != rare {
            continue;
        }
        let (ty, size, align) = field_type(m, f);
        out.push(Member {
            name: rust_member(f),
            ty,
            doc: vec![format!(" `{}`", proto_decl(f))],
            size,
            align,
        });
    }
    let unknown_doc = vec![
        " Fields not in the schema, as read (written back after the known ones); read and write them"
            .to_string(),
        " through `Message::unknown_fields` / `Message::unknown_fields_mut`.".to_string(),
    ];
    let rn = rust_type_name(m.name);
    if rare || !has_rare(m) {
        out.push(Member {
            name: "unknown_fields".into(),
            ty: "UnknownFields".into(),
            doc: unknown_doc,
            size: 8,
            align: 8,
        });
    } else {
        out.push(Member {
            name: "rare".into(),
            ty: format!("Rare<{rn}Rare>"),
            doc: vec![format!(
                " The fields few models set (`{rn}Rare`), in a box allocated on first write."
            )],
            size: 8,
            align: 8,
        });
    }
    out
}

/// The layout of `m`'s struct (`rare == false`) or of its rare struct.
pub fn layout(m: &MessageDef, rare: bool) -> StructLayout {
    let mut ms = members(m, rare);
    // Largest alignment first, schema order within one (a stable sort).
    ms.sort_by_key(|x| std::cmp::Reverse(x.align));
    let align = ms.iter().map(|x| x.align).max().unwrap_or(1);
    let mut at: usize = 0;
    let mut members = Vec::new();
    for x in ms {
        assert_eq!(
            x.size % x.align,
            0,
            "{}: size not a multiple of alignment",
            x.ty
        );
        at = at.next_multiple_of(x.align);
        let off = at;
        at += x.size;
        members.push((x, off));
    }
    StructLayout {
        members,
        size: at.next_multiple_of(align),
        align,
    }
}

impl StructLayout {
    /// The offset of member `name`.
    pub fn offset(&self, name: &str) -> usize {
        self.members
            .iter()
            .find(|(x, _)| x.name == name)
            .unwrap_or_else(|| panic!("no member {name}"))
            .1
    }
}

/// The compile-time checks of `generated.rs` for struct `rn` laid out as `l`: the size and
/// alignment of the struct and of every member's type, and every offset.
pub fn assertions(rn: &str, l: &StructLayout) -> String {
    let mut o = String::new();
    writeln!(o, "const _: () = {{").unwrap();
    writeln!(
        o,
        "    assert!(size_of::<{rn}>() == {} && align_of::<{rn}>() == {});",
        l.size, l.align
    )
    .unwrap();
    for (x, off) in &l.members {
        writeln!(
            o,
            "    assert!(size_of::<{}>() == {} && align_of::<{}>() == {} && std::mem::offset_of!({rn}, {}) == {off});",
            x.ty, x.size, x.ty, x.align, x.name
        )
        .unwrap();
    }
    writeln!(o, "}};\n").unwrap();
    o
}

/// The representation facts the C++ runtime relies on (the end of the table), as the library
/// states them (`ffi::cxx::layout_facts`, which measures them: the table check compares).
const FACTS: &str = "\
string size=32 cxx_slot_at=24 tag_cxx=3 option_size=32 option_payload=0 none_byte0=6
option_i32 size=8 value=4 none=00000000 some=01000000
option_i64 size=16 value=8 none=0000000000000000 some=0100000000000000
option_u64 size=16 value=8 none=0000000000000000 some=0100000000000000
option_f32 size=8 value=4 none=00000000 some=01000000
option_f64 size=16 value=8 none=0000000000000000 some=0100000000000000
option_box size=8 null_is_none=true origin_word_before=8
inline_vec size_n0=16 size_u64_n2=24 len_u32_at0=1 cap_u32_at4=2 data_at8=7 max_len=2147483647
repeated_field size=16 order=0 len=8
string_ops size=48 payload=fill
";

/// The layout table of the C++ classes: each message's size and alignment, the offset of its
/// rare box and of each field the C++ code reaches in place (a rare field's in the rare struct),
/// each oneof's offset and tags (a `repr(u32)` enum: tag `i` for the `i`-th member, "unset" the
/// member count, the value at offset 8), then the representation facts.
pub fn table() -> String {
    let mut o = String::new();
    for m in MESSAGES {
        let cn = cpp_name(m.name);
        let common = layout(m, false);
        let rare = has_rare(m).then(|| layout(m, true));
        writeln!(
            o,
            "message {cn} size={} align={}",
            common.size, common.align
        )
        .unwrap();
        if has_rare(m) {
            writeln!(o, "rare {cn} offset={}", common.offset("rare")).unwrap();
        }
        for f in m.fields.iter().filter(|f| by_offset(f)) {
            let name = rust_member(f);
            match (&rare, is_rare(m, f)) {
                (Some(r), true) => writeln!(o, "field {cn}.{} {} rare", f.name, r.offset(&name)),
                _ => writeln!(o, "field {cn}.{} {}", f.name, common.offset(&name)),
            }
            .unwrap();
        }
    }
    for m in MESSAGES {
        let common = layout(m, false);
        for oneof in oneofs(m) {
            let members: Vec<&FieldDef> =
                m.fields.iter().filter(|f| f.oneof == Some(oneof)).collect();
            write!(
                o,
                "oneof {}.{oneof} offset={} none={}",
                cpp_name(m.name),
                common.offset(oneof),
                members.len()
            )
            .unwrap();
            for (tag, f) in members.iter().enumerate() {
                write!(o, " {}={tag}@8", f.name).unwrap();
            }
            writeln!(o).unwrap();
        }
    }
    o.push_str(FACTS);
    o
}
