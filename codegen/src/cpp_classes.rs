//! Writes `include/onnx_light.hpp` (the C++ message classes, with protobuf's generated-code
//! contract, and the onnx_light C++ API) and `include/onnx_light/onnx_pb.h` (the same classes
//! under `namespace onnx`, for code written against protobuf's `onnx.pb.h`).
//!
//! A C++ message object IS the Rust message: its storage has the Rust type's size and alignment
//! and C++ reads lists, sub-message pointers, optional scalars and strings' `std::string` slots
//! in place, at the offsets of the layout table that `crate::layout` decides (checked in as
//! `codegen/cxx_layout.txt`; the header checks its fingerprint at start-up). Everything
//! else calls the functions of `src/ffi/cxx.rs` and `src/ffi/cxx_messages.rs`.

use std::collections::HashMap;
use std::fmt::Write;

use crate::c_accessors::{c_type, data_types, schema_enums};
use crate::cxx_rust::cpp_name;
use crate::schema::{FieldDef, Kind, Label, MESSAGES, MessageDef};
use crate::{camel, oneofs, proto_decl};

/// The runtime part of the header (after its `//@CUT@` line).
const RUNTIME: &str = include_str!("cpp_runtime.hpp");
/// The onnx_light C++ API (after its `//@CUT@` line).
const API: &str = include_str!("cpp_api.hpp");

/// The layout table the header is generated from (`crate::layout::table`).
fn layout_table() -> &'static str {
    static TABLE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TABLE.get_or_init(crate::layout::table)
}

fn after_cut(text: &str) -> &str {
    &text[text.find("//@CUT@\n").expect("template has a //@CUT@ line") + 8..]
}

/// FNV-1a, as the library computes its fingerprint.
fn fnv1a(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The parsed layout table.
struct Layout {
    /// Message -> (size, align).
    messages: HashMap<String, (usize, usize)>,
    /// `Message.field` -> offset.
    fields: HashMap<String, usize>,
    /// Fact line name -> (key -> value).
    facts: HashMap<String, HashMap<String, String>>,
    /// `Message.oneof` -> (offset, member -> (tag, value offset)).
    oneofs: HashMap<String, Oneof>,
    /// Message -> offset of its `rare` box pointer.
    rares: HashMap<String, usize>,
    /// The `Message.field`s whose offset is in the message's rare struct.
    rare_fields: std::collections::HashSet<String>,
}

/// Where a field lives: at an offset in the message, or in its rare struct.
enum Place {
    Inline(usize),
    Rare(usize),
}

/// Where a oneof lives in its message and how its case is told.
struct Oneof {
    offset: usize,
    members: HashMap<String, (u32, usize)>,
}

impl Layout {
    fn parse() -> Self {
        let mut l = Layout {
            messages: HashMap::new(),
            fields: HashMap::new(),
            facts: HashMap::new(),
            oneofs: HashMap::new(),
            rares: HashMap::new(),
            rare_fields: Default::default(),
        };
        for line in layout_table().lines() {
            let mut words = line.split(' ');
            let head = words.next().unwrap_or_default();
            match head {
                "message" => {
                    let name = words.next().unwrap().to_string();
                    let kv: HashMap<_, _> = words.filter_map(|w| w.split_once('=')).collect();
                    l.messages.insert(
                        name,
                        (kv["size"].parse().unwrap(), kv["align"].parse().unwrap()),
                    );
                }
                "field" => {
                    let name = words.next().unwrap().to_string();
                    l.fields
                        .insert(name.clone(), words.next().unwrap().parse().unwrap());
                    if words.next() == Some("rare") {
                        l.rare_fields.insert(name);
                    }
                }
                "rare" => {
                    let name = words.next().unwrap().to_string();
                    let kv: HashMap<_, _> = words.filter_map(|w| w.split_once('=')).collect();
                    l.rares.insert(name, kv["offset"].parse().unwrap());
                }
                "oneof" => {
                    let name = words.next().unwrap().to_string();
                    let kv: HashMap<_, _> = words.filter_map(|w| w.split_once('=')).collect();
                    let members = kv
                        .iter()
                        .filter(|(k, _)| !matches!(**k, "offset" | "none"))
                        .map(|(k, v)| {
                            let (tag, at) = v.split_once('@').expect("tag@offset");
                            (k.to_string(), (tag.parse().unwrap(), at.parse().unwrap()))
                        })
                        .collect();
                    l.oneofs.insert(
                        name,
                        Oneof {
                            offset: kv["offset"].parse().unwrap(),
                            members,
                        },
                    );
                }
                _ => {
                    let kv = words
                        .filter_map(|w| w.split_once('='))
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect();
                    l.facts.insert(head.to_string(), kv);
                }
            }
        }
        l
    }

    fn fact(&self, line: &str, key: &str) -> &str {
        self.facts
            .get(line)
            .and_then(|f| f.get(key))
            .unwrap_or_else(|| panic!("the layout table has no {line} {key}="))
    }

    fn oneof(&self, m: &MessageDef, oneof: &str) -> &Oneof {
        let key = format!("{}.{oneof}", cpp_name(m.name));
        self.oneofs
            .get(&key)
            .unwrap_or_else(|| panic!("the layout table has no oneof {key}"))
    }

    fn place(&self, m: &MessageDef, f: &FieldDef) -> Place {
        let key = format!("{}.{}", cpp_name(m.name), f.name);
        let off = *self
            .fields
            .get(&key)
            .unwrap_or_else(|| panic!("the layout table has no field {key}"));
        assert_eq!(
            self.rare_fields.contains(&key),
            crate::is_rare(m, f),
            "the layout table: {key} is not where the schema puts it"
        );
        if crate::is_rare(m, f) {
            Place::Rare(off)
        } else {
            Place::Inline(off)
        }
    }

    /// The representation facts the runtime relies on, as C++ constants; panics when the
    /// table shows a representation the runtime does not handle.
    fn constants(&self) -> String {
        assert_eq!(self.fact("string", "option_payload"), "0");
        assert_eq!(
            self.fact("string", "option_size"),
            self.fact("string", "size")
        );
        assert_eq!(self.fact("option_box", "null_is_none"), "true");
        // `operator new` / `operator delete` go through `onnxl_cxx_alloc` / `onnxl_cxx_free`,
        // which keep the origin word of a Rust `MsgBox` before every object.
        assert_eq!(self.fact("option_box", "origin_word_before"), "8");
        // The list header the runtime's `list_*` functions read: u32 length, u32 capacity (an
        // inline list of 2 with one element, `7`, reads 1, 2, 7).
        assert_eq!(self.fact("inline_vec", "len_u32_at0"), "1");
        assert_eq!(self.fact("inline_vec", "cap_u32_at4"), "2");
        assert_eq!(self.fact("inline_vec", "data_at8"), "7");
        assert_eq!(self.fact("inline_vec", "max_len"), "2147483647");
        let mut o = String::new();
        for (bytes, names) in [(4, ["i32", "f32"].as_slice()), (8, &["i64", "u64", "f64"])] {
            let line = format!("option_{}", names[0]);
            let (none, some) = (self.fact(&line, "none"), self.fact(&line, "some"));
            for n in names {
                let l = format!("option_{n}");
                assert_eq!(self.fact(&l, "value"), bytes.to_string(), "{l}");
                assert_eq!(
                    (self.fact(&l, "none"), self.fact(&l, "some")),
                    (none, some),
                    "{l}"
                );
            }
            assert!(none[2..].bytes().all(|b| b == b'0') && some[2..].bytes().all(|b| b == b'0'));
            writeln!(
                o,
                "constexpr uint8_t kOptionalNone{bytes} = 0x{};\nconstexpr uint8_t kOptionalSome{bytes} = 0x{};",
                &none[..2],
                &some[..2]
            )
            .unwrap();
        }
        writeln!(
            o,
            "constexpr std::size_t kStringSlotAt = {};\nconstexpr uint8_t kStringTagCxx = {};\nconstexpr uint8_t kOptionalStringNone = {};\nconstexpr std::size_t kStringSize = {};\nconstexpr std::size_t kRepeatedOrderAt = {};\nconstexpr std::size_t kRepeatedLenAt = {};\nconstexpr std::size_t kRepeatedFieldSize = {};\nconstexpr uint64_t kLayoutFingerprint = 0x{:016x}ull;",
            self.fact("string", "cxx_slot_at"),
            self.fact("string", "tag_cxx"),
            self.fact("string", "none_byte0"),
            self.fact("string", "size"),
            self.fact("repeated_field", "order"),
            self.fact("repeated_field", "len"),
            self.fact("repeated_field", "size"),
            fnv1a(layout_table())
        )
        .unwrap();
        o
    }
}

/// The C++ type of a scalar kind, and the storage type it is read as.
fn scalar(k: Kind) -> (String, &'static str) {
    match k {
        Kind::Int64 => ("int64_t".into(), "int64_t"),
        Kind::Int32 => ("int32_t".into(), "int32_t"),
        Kind::UInt64 => ("uint64_t".into(), "uint64_t"),
        Kind::Float => ("float".into(), "float"),
        Kind::Double => ("double".into(), "double"),
        Kind::Enum(e) => (cpp_name(e.name), "int32_t"),
        _ => unreachable!("not a scalar"),
    }
}

fn is_string(k: Kind) -> bool {
    matches!(k, Kind::String | Kind::Bytes)
}

/// Every enum of the C++ classes: (full name, values). The schema's own, `TensorProto.DataType`
/// (an `int32` field in the schema), and the enums of onnx.proto / onnx-data.proto that no field
/// uses but code refers to.
pub(crate) fn enums() -> Vec<(String, Vec<(String, i32)>)> {
    let mut out: Vec<(String, Vec<(String, i32)>)> = schema_enums()
        .iter()
        .map(|e| {
            (
                e.name.to_string(),
                e.values.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            )
        })
        .collect();
    let own = |v: &[(&str, i32)]| v.iter().map(|(n, x)| (n.to_string(), *x)).collect();
    out.push((
        "TensorProto.DataType".into(),
        data_types()
            .iter()
            .map(|(n, v)| (n.to_string(), *v))
            .collect(),
    ));
    let kinds: &[(&str, i32)] = &[
        ("UNDEFINED", 0),
        ("TENSOR", 1),
        ("SPARSE_TENSOR", 2),
        ("SEQUENCE", 3),
        ("MAP", 4),
        ("OPTIONAL", 5),
    ];
    out.push(("SequenceProto.DataType".into(), own(kinds)));
    out.push(("OptionalProto.DataType".into(), own(kinds)));
    out.push((
        "Version".into(),
        own(&[
            ("_START_VERSION", 0),
            ("IR_VERSION_2017_10_10", 1),
            ("IR_VERSION_2017_10_30", 2),
            ("IR_VERSION_2017_11_3", 3),
            ("IR_VERSION_2019_1_22", 4),
            ("IR_VERSION_2019_3_18", 5),
            ("IR_VERSION_2019_9_19", 6),
            ("IR_VERSION_2020_5_8", 7),
            ("IR_VERSION_2021_7_30", 8),
            ("IR_VERSION_2023_5_5", 9),
            ("IR_VERSION_2024_3_25", 10),
            ("IR_VERSION_2025_05_12", 11),
            ("IR_VERSION_2025_08_26", 12),
            ("IR_VERSION_2025_11_06", 13),
            ("IR_VERSION", 14),
        ]),
    ));
    out.push((
        "OperatorStatus".into(),
        own(&[("EXPERIMENTAL", 0), ("STABLE", 1)]),
    ));
    out
}

/// The enum definitions and their free functions (protobuf's names).
fn gen_enum(o: &mut String, full: &str, values: &[(String, i32)]) {
    let en = cpp_name(full);
    // Nested enums prefix their values with the C++ name; top-level ones do not.
    let prefix = if full.contains('.') {
        format!("{en}_")
    } else {
        String::new()
    };
    let min = values.iter().map(|v| v.1).min().unwrap();
    let max = values.iter().map(|v| v.1).max().unwrap();
    writeln!(o, "/// `{full}`.\nenum {en} : int {{").unwrap();
    for (n, v) in values {
        writeln!(o, "  {prefix}{n} = {v},").unwrap();
    }
    writeln!(o, "}};").unwrap();
    let base = enum_base(full);
    writeln!(
        o,
        "constexpr {en} {base}_MIN = static_cast<{en}>({min});\nconstexpr {en} {base}_MAX = static_cast<{en}>({max});\nconstexpr int {base}_ARRAYSIZE = {max} + 1;"
    )
    .unwrap();
    let cases: String = values
        .iter()
        .map(|(n, v)| {
            format!("    case {v}: {{ static const std::string s(\"{n}\"); return s; }}\n")
        })
        .collect();
    let parse: String = values
        .iter()
        .map(|(n, v)| {
            format!("  if (name == \"{n}\") {{ *value = static_cast<{en}>({v}); return true; }}\n")
        })
        .collect();
    let valid: String = values
        .iter()
        .map(|(_, v)| format!("    case {v}:\n"))
        .collect();
    writeln!(
        o,
        "inline bool {en}_IsValid(int value) {{\n  switch (value) {{\n{valid}      return true;\n    default:\n      return false;\n  }}\n}}\n\
         inline const std::string& {en}_Name({en} value) {{\n  switch (static_cast<int>(value)) {{\n{cases}    default: return detail::empty_string();\n  }}\n}}\n\
         inline bool {en}_Parse(const std::string& name, {en}* value) {{\n{parse}  return false;\n}}\n"
    )
    .unwrap();
}

/// The prefix of an enum's `_MIN` / `_MAX` / `_ARRAYSIZE` constants: `Version` for a top-level
/// enum, `TensorProto_DataType_DataType` for a nested one (protobuf's names).
fn enum_base(full: &str) -> String {
    match full.rsplit_once('.') {
        Some((_, short)) => format!("{}_{short}", cpp_name(full)),
        None => full.to_string(),
    }
}

/// The class-scope aliases of a nested enum (`TensorProto::FLOAT`, `TensorProto::DataType_Name`).
fn nested_enum_aliases(o: &mut String, full: &str, values: &[(String, i32)]) {
    let en = cpp_name(full);
    let short = full.rsplit('.').next().unwrap();
    writeln!(o, "  typedef {en} {short};").unwrap();
    for (n, _) in values {
        writeln!(o, "  static constexpr {short} {n} = {en}_{n};").unwrap();
    }
    writeln!(
        o,
        "  static inline bool {short}_IsValid(int value) {{ return {en}_IsValid(value); }}\n  static constexpr {short} {short}_MIN = {en}_{short}_MIN;\n  static constexpr {short} {short}_MAX = {en}_{short}_MAX;\n  static constexpr int {short}_ARRAYSIZE = {en}_{short}_ARRAYSIZE;\n  static inline const std::string& {short}_Name({short} value) {{ return {en}_Name(value); }}\n  static inline bool {short}_Parse(const std::string& name, {short}* value) {{ return {en}_Parse(name, value); }}"
    )
    .unwrap();
}

/// Generates `include/onnx_light.hpp`.
pub fn generate() -> String {
    let layout = Layout::parse();
    let mut o = String::from(
        "// @generated by `cargo run -p codegen` from src/proto/schema.rs and its layout table (codegen/src/layout.rs).\n\
         // Do not edit.\n//\n\
         // onnx_light's C++ API: the ONNX message classes with protobuf's generated-code contract\n\
         // (x(), set_x(), mutable_x() -> T*, add_x(), x_size(), has_x(), clear_x(), release_x(),\n\
         // set_allocated_x(), x_case(), RepeatedField / RepeatedPtrField, copy = deep copy, Parse*,\n\
         // Serialize*, DebugString), whose objects ARE the library's messages (no conversion,\n\
         // no copy), and the library's load / save / external-data / encryption functions.\n\
         // Code written for protobuf's onnx.pb.h includes <onnx_light/onnx_pb.h> instead.\n\
         // See docs/cpp.md for the design, thread safety and the differences from protobuf.\n\
         #ifndef ONNX_LIGHT_HPP\n#define ONNX_LIGHT_HPP\n\n\
         #if !defined(__cplusplus) || __cplusplus < 201703L\n\
         #error \"onnx_light.hpp needs C++17 or later (-std=c++17)\"\n#endif\n\n\
         #include <algorithm>\n#include <cassert>\n#include <cstddef>\n#include <cstdint>\n#include <cstdio>\n#include <cstdlib>\n\
         #include <cstring>\n#include <istream>\n#include <iterator>\n#include <memory>\n#include <new>\n#include <ostream>\n\
         #include <stdexcept>\n#include <string>\n#include <string_view>\n#include <type_traits>\n\
         #include <utility>\n#include <vector>\n\n#include \"onnx_light.h\"\n\n\
         static_assert(sizeof(void*) == 8, \"the onnx_light C++ classes need a 64-bit target\");\n\n",
    );
    o.push_str(&extern_declarations());
    o.push_str("namespace onnx_light {\nnamespace detail {\n");
    o.push_str(&layout.constants());
    o.push_str("}  // namespace detail\n\n");
    o.push_str(after_cut(RUNTIME));
    o.push('\n');
    for (full, values) in &enums() {
        gen_enum(&mut o, full, values);
    }
    for m in MESSAGES {
        writeln!(o, "class {};", cpp_name(m.name)).unwrap();
    }
    o.push_str("\nnamespace detail {\n");
    for m in MESSAGES {
        let cn = cpp_name(m.name);
        writeln!(
            o,
            "template <>\nstruct ListOps<{cn}> {{\n  static void init(void* f) {{ onnxl_cxx_{cn}_list_init(f); }}\n  static void drop(void* f) {{ onnxl_cxx_{cn}_list_drop(f); }}\n  static void* add(void* f) {{ return onnxl_cxx_{cn}_list_add(f); }}\n  static void add_copy(void* f, const void* v) {{ if (!onnxl_cxx_{cn}_list_add_copy(f, v)) throw std::bad_alloc(); }}\n  static void erase(void* f, std::size_t start, std::size_t n) {{ onnxl_cxx_{cn}_list_delete(f, start, n); }}\n  static void swap(void* f, std::size_t i, std::size_t j) {{ onnxl_cxx_{cn}_list_swap(f, i, j); }}\n  static void truncate(void* f, std::size_t n) {{ onnxl_cxx_{cn}_list_truncate(f, n); }}\n  static void reserve(void* f, std::size_t n) {{ onnxl_cxx_{cn}_list_reserve(f, n); }}\n}};"
        )
        .unwrap();
    }
    o.push_str("}  // namespace detail\n\nclass Owner;\n\n");
    let mut defs = String::new();
    let all_enums = enums();
    for m in MESSAGES {
        gen_class(&mut o, &mut defs, m, &layout, &all_enums);
    }
    o.push_str(&defs);
    o.push_str(after_cut(API));
    o.push_str("}  // namespace onnx_light\n\n#endif  // ONNX_LIGHT_HPP\n");
    o
}

/// The `extern "C"` declarations of the C++ runtime (src/ffi/cxx*.rs).
fn extern_declarations() -> String {
    let mut o = String::from(
        "// Entry points of the C++ layer (src/ffi/cxx*.rs; not part of the C API).\nextern \"C\" {\n\
         typedef struct OnnxlCxxStringOps {\n  void* (*create)(const uint8_t* data, size_t len);\n  void (*destroy)(void* s);\n  void (*assign)(void* s, const uint8_t* data, size_t len);\n  uint8_t* (*data)(const void* s);\n  size_t (*size)(const void* s);\n  bool (*fill)(void* s, size_t len, bool (*read)(void* ctx, uint8_t* dst, size_t n), void* ctx);\n} OnnxlCxxStringOps;\n\
         typedef struct OnnxlCxxSource {\n  bool (*read)(void* ctx, uint64_t offset, uint8_t* dst, size_t len);\n  void* ctx;\n  uint64_t size;\n} OnnxlCxxSource;\n\
         bool onnxl_cxx_init(const OnnxlCxxStringOps* ops, uint64_t fingerprint);\n\
         uint64_t onnxl_cxx_layout_fingerprint(void);\n\
         void* onnxl_cxx_alloc(size_t size, size_t align);\n\
         void onnxl_cxx_free(void* p, size_t size, size_t align);\n\
         const uint8_t* onnxl_cxx_str_bytes(const void* s, size_t* len);\n\
         void* onnxl_cxx_str_mutable(void* s);\n\
         void* onnxl_cxx_payload_slot(const void* f);\n\
         const uint8_t* onnxl_cxx_payload_bytes(const void* f, size_t* len);\n\
         void onnxl_cxx_str_set(void* s, const uint8_t* data, size_t len);\n",
    );
    for (kind, ty) in [("ostr", "string"), ("payload", "payload")] {
        let _ = ty;
        writeln!(
            o,
            "void* onnxl_cxx_{kind}_mutable(void* f);\nvoid onnxl_cxx_{kind}_set(void* f, const uint8_t* data, size_t len);\nvoid onnxl_cxx_{kind}_clear(void* f);\nvoid* onnxl_cxx_{kind}_release(void* f);\nvoid onnxl_cxx_{kind}_set_allocated(void* f, void* s);\nbool onnxl_cxx_{kind}_has(const void* f);"
        )
        .unwrap();
    }
    o.push_str(
        "void* onnxl_cxx_strs_add(void* f, const uint8_t* data, size_t len);\n\
         void onnxl_cxx_strs_truncate(void* f, size_t n);\n\
         void onnxl_cxx_strs_delete(void* f, size_t start, size_t n);\n\
         bool onnxl_cxx_strs_reserve(void* f, size_t n);\n\
         bool onnxl_cxx_scalars32_add(void* f, uint32_t value);\n\
         bool onnxl_cxx_scalars64_add(void* f, uint64_t value);\n\
         bool onnxl_cxx_scalars32_reserve(void* f, size_t n);\n\
         bool onnxl_cxx_scalars64_reserve(void* f, size_t n);\n\
         bool onnxl_cxx_debug_string(const char* message, const uint8_t* data, size_t len, uint32_t style,\n\
         \x20                           uint8_t* (*alloc)(void* ctx, size_t size), void* ctx);\n",
    );
    for m in MESSAGES {
        let p = format!("onnxl_cxx_{}", cpp_name(m.name));
        writeln!(
            o,
            "void {p}_init(void* p);\nvoid {p}_drop(void* p);\nbool {p}_init_copy(void* p, const void* src);\nbool {p}_copy_from(void* p, const void* src);\nbool {p}_merge_from(void* p, const void* src);\nvoid {p}_clear(void* p);\nbool {p}_parse(void* p, const uint8_t* data, size_t len, bool merge, const OnnxlCxxSource* source);\nbool {p}_serialize(const void* p, uint8_t* (*alloc)(void* ctx, size_t size), void* ctx);\nsize_t {p}_byte_size(const void* p);\nvoid {p}_list_init(void* f);\nvoid {p}_list_drop(void* f);\nvoid* {p}_list_add(void* f);\nvoid* {p}_list_add_copy(void* f, const void* src);\nvoid {p}_list_delete(void* f, size_t start, size_t n);\nvoid {p}_list_swap(void* f, size_t i, size_t j);\nvoid {p}_list_truncate(void* f, size_t n);\nvoid {p}_list_reserve(void* f, size_t n);"
        )
        .unwrap();
        if crate::has_rare(m) {
            writeln!(
                o,
                "void* {p}_rare_mut(void* p);\nconst void* {p}_rare_empty(void);"
            )
            .unwrap();
        }
        for oneof in oneofs(m) {
            writeln!(
                o,
                "uint32_t {p}_{oneof}_case(const void* p);\nvoid {p}_clear_{oneof}(void* p);"
            )
            .unwrap();
            for f in m.fields.iter().filter(|f| f.oneof == Some(oneof)) {
                let n = f.name;
                match f.kind {
                    Kind::Message(_) => writeln!(
                        o,
                        "const void* {p}_{n}_get(const void* p);\nvoid* {p}_{n}_mutable(void* p);\nvoid* {p}_{n}_release(void* p);\nvoid {p}_{n}_set_allocated(void* p, void* v);"
                    ),
                    k if is_string(k) => writeln!(
                        o,
                        "void* {p}_{n}_get(const void* p);\nvoid* {p}_{n}_mutable(void* p);\nvoid {p}_{n}_set(void* p, const uint8_t* data, size_t len);\nvoid* {p}_{n}_release(void* p);\nvoid {p}_{n}_set_allocated(void* p, void* s);"
                    ),
                    k => {
                        let (t, _) = scalar(k);
                        writeln!(o, "{t} {p}_{n}_get(const void* p);\nvoid {p}_{n}_set(void* p, {t} x);")
                    }
                }
                .unwrap();
            }
        }
    }
    o.push_str("}  // extern \"C\"\n\n");
    o
}

/// One member: its declaration in the class and (for longer ones) its definition after every
/// class.
struct Members<'a> {
    class: &'a str,
    decls: String,
    defs: String,
}

impl Members<'_> {
    /// A member defined in the class.
    fn inline(&mut self, text: &str) {
        writeln!(self.decls, "  {text}").unwrap();
    }
    /// A member declared in the class, defined after every class (it needs complete types).
    fn outline(&mut self, ret: &str, name_params: &str, qual: &str, body: &str) {
        writeln!(self.decls, "  {ret} {name_params}{qual};").unwrap();
        writeln!(
            self.defs,
            "inline {ret} {}::{name_params}{qual} {{ {body} }}",
            self.class
        )
        .unwrap();
    }
}

fn gen_class(
    o: &mut String,
    defs: &mut String,
    m: &MessageDef,
    layout: &Layout,
    enums: &[(String, Vec<(String, i32)>)],
) {
    let cn = cpp_name(m.name);
    let ct = c_type(m.name);
    let p = format!("onnxl_cxx_{cn}");
    let (size, align) = *layout
        .messages
        .get(&cn)
        .unwrap_or_else(|| panic!("the layout table has no message {cn}"));
    writeln!(o, "/// `onnx.{}`.\nclass {cn} final {{\n public:", m.name).unwrap();
    // Nested types.
    for n in MESSAGES.iter().filter(|n| {
        n.name.starts_with(m.name)
            && n.name[m.name.len()..].starts_with('.')
            && !n.name[m.name.len() + 1..].contains('.')
    }) {
        writeln!(
            o,
            "  typedef {} {};",
            cpp_name(n.name),
            &n.name[m.name.len() + 1..]
        )
        .unwrap();
    }
    for (full, values) in enums {
        if full
            .rsplit_once('.')
            .is_some_and(|(owner, _)| owner == m.name)
        {
            nested_enum_aliases(o, full, values);
        }
    }
    let mut ms = Members {
        class: &cn,
        decls: String::new(),
        defs: String::new(),
    };
    // Construction, value semantics, memory.
    ms.inline(&format!(
        "{cn}() noexcept {{ (void)detail::init(); {p}_init(this); }}"
    ));
    ms.inline(&format!("~{cn}() {{ {p}_drop(this); }}"));
    ms.inline(&format!(
        "{cn}(const {cn}& o) {{ (void)detail::init(); if (!{p}_init_copy(this, &o)) throw std::bad_alloc(); }}"
    ));
    ms.inline(&format!(
        "{cn}({cn}&& o) noexcept {{ std::memcpy(storage_, o.storage_, sizeof storage_); {p}_init(&o); }}"
    ));
    ms.inline(&format!(
        "{cn}& operator=(const {cn}& o) {{ CopyFrom(o); return *this; }}"
    ));
    ms.inline(&format!(
        "{cn}& operator=({cn}&& o) noexcept {{ if (this != &o) Swap(&o); return *this; }}"
    ));
    ms.inline(&format!(
        "static void* operator new(std::size_t n) {{ void* q = onnxl_cxx_alloc(n, alignof({cn})); if (!q) throw std::bad_alloc(); return q; }}"
    ));
    ms.inline(&format!(
        "static void operator delete(void* q, std::size_t n) noexcept {{ onnxl_cxx_free(q, n, alignof({cn})); }}"
    ));
    ms.inline("static void* operator new(std::size_t, void* where) noexcept { return where; }");
    ms.inline("static void operator delete(void*, void*) noexcept {}");
    ms.inline(&format!(
        "void Swap({cn}* o) noexcept {{ if (o == this) return; unsigned char t[sizeof storage_]; std::memcpy(t, storage_, sizeof t); std::memcpy(storage_, o->storage_, sizeof t); std::memcpy(o->storage_, t, sizeof t); }}"
    ));
    ms.inline(&format!(
        "void CopyFrom(const {cn}& o) {{ if (!{p}_copy_from(this, &o)) throw std::bad_alloc(); }}"
    ));
    ms.inline(&format!(
        "void MergeFrom(const {cn}& o) {{ if (!{p}_merge_from(this, &o)) throw std::bad_alloc(); }}"
    ));
    ms.inline(&format!("void Clear() {{ {p}_clear(this); }}"));
    ms.inline("bool IsInitialized() const { return true; }");
    ms.inline(&format!(
        "std::size_t ByteSizeLong() const {{ return {p}_byte_size(this); }}"
    ));
    ms.inline("int ByteSize() const { return static_cast<int>(ByteSizeLong()); }");
    ms.inline(&format!(
        "std::string GetTypeName() const {{ return \"onnx.{}\"; }}",
        m.name
    ));
    ms.inline(&format!("{cn}* New() const {{ return new {cn}; }}"));
    ms.inline(&format!(
        "static const {cn}& default_instance() {{ static const {cn} d; return d; }}"
    ));
    // Parsing and serializing.
    ms.inline(&format!(
        "bool ParseFromArray(const void* data, int size) {{ return size >= 0 && {p}_parse(this, static_cast<const uint8_t*>(data), static_cast<std::size_t>(size), false, nullptr); }}"
    ));
    ms.inline(&format!(
        "bool ParseFromString(const std::string& s) {{ return {p}_parse(this, reinterpret_cast<const uint8_t*>(s.data()), s.size(), false, nullptr); }}"
    ));
    ms.inline("bool ParsePartialFromArray(const void* data, int size) { return ParseFromArray(data, size); }");
    ms.inline("bool ParsePartialFromString(const std::string& s) { return ParseFromString(s); }");
    ms.inline(&format!(
        "bool MergeFromString(const std::string& s) {{ return {p}_parse(this, reinterpret_cast<const uint8_t*>(s.data()), s.size(), true, nullptr); }}"
    ));
    ms.inline(&format!(
        "bool MergeFromArray(const void* data, int size) {{ return size >= 0 && {p}_parse(this, static_cast<const uint8_t*>(data), static_cast<std::size_t>(size), true, nullptr); }}"
    ));
    ms.inline(&format!(
        "bool ParseFromIstream(std::istream* in) {{ return detail::parse_istream(in, this, {p}_parse); }}"
    ));
    ms.inline("bool ParsePartialFromIstream(std::istream* in) { return ParseFromIstream(in); }");
    ms.inline("bool ParseFromCodedStream(io::CodedInputStream* in) { const uint8_t* d; std::size_t n; std::string t; return in->ReadRest(&d, &n, &t) && n <= 2147483647u && ParseFromArray(d, static_cast<int>(n)); }");
    ms.inline("bool ParsePartialFromCodedStream(io::CodedInputStream* in) { return ParseFromCodedStream(in); }");
    ms.inline("bool MergeFromCodedStream(io::CodedInputStream* in) { const uint8_t* d; std::size_t n; std::string t; return in->ReadRest(&d, &n, &t) && n <= 2147483647u && MergeFromArray(d, static_cast<int>(n)); }");
    ms.inline(&format!(
        "bool AppendToString(std::string* out) const {{ detail::Appender a{{out, out->size()}}; return {p}_serialize(this, detail::Appender::grow, &a); }}"
    ));
    ms.inline("bool SerializeToString(std::string* out) const { out->clear(); return AppendToString(out); }");
    ms.inline(
        "bool SerializePartialToString(std::string* out) const { return SerializeToString(out); }",
    );
    ms.inline(
        "std::string SerializeAsString() const { std::string s; SerializeToString(&s); return s; }",
    );
    ms.inline("std::string SerializePartialAsString() const { return SerializeAsString(); }");
    ms.inline(&format!(
        "bool SerializeToArray(void* data, int size) const {{ detail::FixedBuffer b{{static_cast<uint8_t*>(data), size < 0 ? 0 : static_cast<std::size_t>(size)}}; return {p}_serialize(this, detail::FixedBuffer::take, &b); }}"
    ));
    ms.inline("bool SerializePartialToArray(void* data, int size) const { return SerializeToArray(data, size); }");
    ms.inline("bool SerializeToOstream(std::ostream* out) const { std::string s; if (!SerializeToString(&s)) return false; out->write(s.data(), static_cast<std::streamsize>(s.size())); return out->good(); }");
    ms.inline("bool SerializePartialToOstream(std::ostream* out) const { return SerializeToOstream(out); }");
    for (name, style) in [
        ("DebugString", 0),
        ("ShortDebugString", 1),
        ("Utf8DebugString", 2),
    ] {
        ms.inline(&format!(
            "std::string {name}() const {{ return detail::debug_string(\"{}\", SerializeAsString(), {style}); }}",
            m.name
        ));
    }
    // The C handle of the same object.
    ms.inline(&format!(
        "const {ct}* c_ptr() const noexcept {{ return reinterpret_cast<const {ct}*>(this); }}"
    ));
    ms.inline(&format!(
        "{ct}* c_ptr() noexcept {{ return reinterpret_cast<{ct}*>(this); }}"
    ));
    ms.inline(&format!(
        "static const {cn}* from_c(const {ct}* p) noexcept {{ (void)detail::init(); return reinterpret_cast<const {cn}*>(p); }}"
    ));
    ms.inline(&format!(
        "static {cn}* from_c({ct}* p) noexcept {{ (void)detail::init(); return reinterpret_cast<{cn}*>(p); }}"
    ));
    for f in m.fields {
        writeln!(ms.decls, "\n  // {}", proto_decl(f)).unwrap();
        if let Some(oneof) = f.oneof {
            oneof_member(&mut ms, m, f, layout.oneof(m, oneof));
        } else {
            // A rare field is reached through `rare_at` (see below).
            let at = match layout.place(m, f) {
                Place::Inline(off) => format!("detail::at(this, {off})"),
                Place::Rare(off) => format!("rare_at({off})"),
            };
            offset_field(&mut ms, f, &at);
        }
        ref_accessor(&mut ms, f);
    }
    for oneof in oneofs(m) {
        let members: Vec<&FieldDef> = m.fields.iter().filter(|f| f.oneof == Some(oneof)).collect();
        let case = format!("{}Case", camel(oneof));
        writeln!(ms.decls, "\n  // oneof {oneof}\n  enum {case} {{").unwrap();
        for f in &members {
            writeln!(ms.decls, "    k{} = {},", camel(f.name), f.number).unwrap();
        }
        writeln!(ms.decls, "    {}_NOT_SET = 0,\n  }};", oneof.to_uppercase()).unwrap();
        let l = layout.oneof(m, oneof);
        let arms: String = members
            .iter()
            .map(|f| format!("case {}: return k{}; ", l.members[f.name].0, camel(f.name)))
            .collect();
        ms.inline(&format!(
            "{case} {oneof}_case() const {{ switch (detail::load<uint32_t>(detail::at(this, {}))) {{ {arms}default: return {}_NOT_SET; }} }}",
            l.offset,
            oneof.to_uppercase()
        ));
        ms.inline(&format!(
            "void clear_{oneof}() {{ {p}_clear_{oneof}(this); }}"
        ));
    }
    o.push_str(&ms.decls);
    o.push_str("\n private:\n");
    if crate::has_rare(m) {
        // The rare fields: read in the box, or in the shared empty ones when it is unallocated
        // (const); written in the box, allocated first (non-const).
        let rare = layout
            .rares
            .get(&cn)
            .unwrap_or_else(|| panic!("the layout table has no rare {cn}"));
        writeln!(
            o,
            "  const unsigned char* rare_at(std::size_t off) const {{ const void* r = detail::load<const void*>(detail::at(this, {rare})); return detail::at(r ? r : {p}_rare_empty(), off); }}\n  unsigned char* rare_at(std::size_t off) {{ return detail::at({p}_rare_mut(this), off); }}"
        )
        .unwrap();
    }
    writeln!(
        o,
        "  alignas({align}) unsigned char storage_[{size}];\n}};\nstatic_assert(sizeof({cn}) == {size} && alignof({cn}) == {align}, \"layout of {cn}\");\n"
    )
    .unwrap();
    defs.push_str(&ms.defs);
}

/// Setter overloads of a string value, each forwarding `(data, len)` to `call`.
fn string_setters(ms: &mut Members<'_>, name: &str, lead: &str, call: &str) {
    let call = |d: &str, n: &str| call.replace("{D}", d).replace("{N}", n);
    ms.inline(&format!(
        "void {name}({lead}const std::string& v) {{ {} }}",
        call("v.data()", "v.size()")
    ));
    ms.inline(&format!(
        "void {name}({lead}std::string&& v) {{ {} }}",
        call("v.data()", "v.size()")
    ));
    ms.inline(&format!(
        "void {name}({lead}const char* v) {{ {} }}",
        call("v", "std::strlen(v)")
    ));
    ms.inline(&format!(
        "void {name}({lead}const char* v, std::size_t n) {{ {} }}",
        call("v", "n")
    ));
    ms.inline(&format!(
        "void {name}({lead}const void* v, std::size_t n) {{ {} }}",
        call("static_cast<const char*>(v)", "n")
    ));
}

/// A field reached at its offset in the message.
fn offset_field(ms: &mut Members<'_>, f: &FieldDef, at: &str) {
    let n = f.name;
    match (f.label, f.kind) {
        (Label::Optional, Kind::Message(t)) => {
            let t = cpp_name(t);
            ms.inline(&format!(
                "bool has_{n}() const {{ return detail::load<const void*>({at}) != nullptr; }}"
            ));
            ms.outline(
                &format!("const {t}&"),
                &format!("{n}()"),
                " const",
                &format!("const {t}* v = detail::load<const {t}*>({at}); return v ? *v : {t}::default_instance();"),
            );
            ms.outline(
                &format!("{t}*"),
                &format!("mutable_{n}()"),
                "",
                &format!("{t}* v = detail::load<{t}*>({at}); if (!v) {{ v = new {t}; detail::store({at}, v); }} return v;"),
            );
            ms.outline(
                "void",
                &format!("clear_{n}()"),
                "",
                &format!("{t}* v = detail::load<{t}*>({at}); detail::store<{t}*>({at}, nullptr); delete v;"),
            );
            ms.outline(
                &format!("{t}*"),
                &format!("release_{n}()"),
                "",
                &format!("{t}* v = detail::load<{t}*>({at}); detail::store<{t}*>({at}, nullptr); return v;"),
            );
            ms.outline(
                "void",
                &format!("set_allocated_{n}({t}* v)"),
                "",
                &format!("{t}* old = detail::load<{t}*>({at}); if (old == v) return; detail::store({at}, v); delete old;"),
            );
            ms.inline(&format!(
                "{t}* unsafe_arena_release_{n}() {{ return release_{n}(); }}"
            ));
            ms.inline(&format!(
                "void unsafe_arena_set_allocated_{n}({t}* v) {{ set_allocated_{n}(v); }}"
            ));
        }
        (Label::Optional, Kind::Payload) | (Label::Optional, Kind::String | Kind::Bytes) => {
            let k = if f.kind == Kind::Payload {
                "payload"
            } else {
                "ostr"
            };
            if f.kind == Kind::Payload {
                ms.inline(&format!(
                    "bool has_{n}() const {{ return onnxl_cxx_payload_has({at}); }}"
                ));
                ms.inline(&format!(
                    "const std::string& {n}() const {{ return detail::payload({at}); }}"
                ));
            } else {
                ms.inline(&format!(
                    "bool has_{n}() const {{ return detail::optional_string_has({at}); }}"
                ));
                ms.inline(&format!(
                    "const std::string& {n}() const {{ return detail::optional_string({at}); }}"
                ));
            }
            ms.inline(&format!(
                "std::string* mutable_{n}() {{ return static_cast<std::string*>(onnxl_cxx_{k}_mutable({at})); }}"
            ));
            string_setters(
                ms,
                &format!("set_{n}"),
                "",
                &format!(
                    "onnxl_cxx_{k}_set({at}, reinterpret_cast<const uint8_t*>({{D}}), {{N}});"
                ),
            );
            ms.inline(&format!(
                "void clear_{n}() {{ onnxl_cxx_{k}_clear({at}); }}"
            ));
            ms.inline(&format!(
                "std::string* release_{n}() {{ return static_cast<std::string*>(onnxl_cxx_{k}_release({at})); }}"
            ));
            ms.inline(&format!(
                "void set_allocated_{n}(std::string* v) {{ onnxl_cxx_{k}_set_allocated({at}, v); }}"
            ));
            if f.kind == Kind::Payload {
                ms.inline(&format!(
                    "/// The bytes without copying them into a std::string (a borrowed view of a no_copy load stays one).\n  std::string_view {n}_view() const {{ const uint8_t* d = nullptr; std::size_t len = 0; detail::check(onnxl_tensor_proto_{n}(c_ptr(), &d, &len)); return std::string_view(reinterpret_cast<const char*>(d), len); }}"
                ));
                ms.inline(&format!(
                    "/// True when the bytes are borrowed from a file map or caller memory (not copied).\n  bool {n}_is_borrowed() const {{ return onnxl_tensor_proto_{n}_is_borrowed(c_ptr()); }}"
                ));
                ms.outline(
                    "Owner",
                    &format!("{n}_owner()"),
                    "",
                    &format!(
                        "return Owner(detail::check_ptr(onnxl_tensor_proto_{n}_owner(c_ptr())));"
                    ),
                );
                ms.inline(&format!(
                    "/// Borrows `len` bytes at `data` without copying; `release(user_data)` runs once when the last user is gone (NULL: the caller keeps the bytes alive while the tensor uses them).\n  void set_{n}_borrowed(const void* data, std::size_t len, OnnxlReleaseCallback release = nullptr, void* user_data = nullptr) {{ detail::check(onnxl_tensor_proto_set_{n}_borrowed(c_ptr(), static_cast<const uint8_t*>(data), len, release, user_data)); }}"
                ));
            }
        }
        (Label::Optional, k) => {
            let (t, s) = scalar(k);
            let ops = format!("detail::OptionalScalar<{s}>");
            ms.inline(&format!(
                "bool has_{n}() const {{ return {ops}::has({at}); }}"
            ));
            ms.inline(&format!(
                "{t} {n}() const {{ return static_cast<{t}>({ops}::get({at}, {s}())); }}"
            ));
            ms.inline(&format!(
                "void set_{n}({t} v) {{ {ops}::set({at}, static_cast<{s}>(v)); }}"
            ));
            ms.inline(&format!("void clear_{n}() {{ {ops}::clear({at}); }}"));
        }
        (Label::Repeated, Kind::Message(t)) => {
            let t = cpp_name(t);
            let rf = format!("RepeatedPtrField<{t}>");
            ms.inline(&format!(
                "const {rf}& {n}() const {{ return *reinterpret_cast<const {rf}*>({at}); }}"
            ));
            ms.inline(&format!(
                "{rf}* mutable_{n}() {{ return reinterpret_cast<{rf}*>({at}); }}"
            ));
            ms.inline(&format!("int {n}_size() const {{ return {n}().size(); }}"));
            ms.outline(
                &format!("const {t}&"),
                &format!("{n}(int i)"),
                " const",
                &format!("return {n}().Get(i);"),
            );
            ms.outline(
                &format!("{t}*"),
                &format!("mutable_{n}(int i)"),
                "",
                &format!("return mutable_{n}()->Mutable(i);"),
            );
            ms.outline(
                &format!("{t}*"),
                &format!("add_{n}()"),
                "",
                &format!("return mutable_{n}()->Add();"),
            );
            ms.inline(&format!("void clear_{n}() {{ mutable_{n}()->Clear(); }}"));
        }
        (Label::Repeated, k) if is_string(k) => {
            let rf = "RepeatedPtrField<std::string>";
            ms.inline(&format!(
                "const {rf}& {n}() const {{ return *reinterpret_cast<const {rf}*>({at}); }}"
            ));
            ms.inline(&format!(
                "{rf}* mutable_{n}() {{ return reinterpret_cast<{rf}*>({at}); }}"
            ));
            ms.inline(&format!("int {n}_size() const {{ return {n}().size(); }}"));
            ms.inline(&format!(
                "const std::string& {n}(int i) const {{ return {n}().Get(i); }}"
            ));
            ms.inline(&format!(
                "std::string* mutable_{n}(int i) {{ return mutable_{n}()->Mutable(i); }}"
            ));
            string_setters(
                ms,
                &format!("set_{n}"),
                "int i, ",
                &format!("mutable_{n}(i)->assign({{D}}, {{N}});"),
            );
            ms.inline(&format!(
                "std::string* add_{n}() {{ return mutable_{n}()->Add(); }}"
            ));
            string_setters(
                ms,
                &format!("add_{n}"),
                "",
                &format!(
                    "detail::check_ptr(onnxl_cxx_strs_add({at}, reinterpret_cast<const uint8_t*>({{D}}), {{N}}));"
                ),
            );
            ms.inline(&format!("void clear_{n}() {{ mutable_{n}()->Clear(); }}"));
        }
        (Label::Repeated, k) => {
            let (t, _) = scalar(k);
            let rf = format!("RepeatedField<{t}>");
            ms.inline(&format!(
                "const {rf}& {n}() const {{ return *reinterpret_cast<const {rf}*>({at}); }}"
            ));
            ms.inline(&format!(
                "{rf}* mutable_{n}() {{ return reinterpret_cast<{rf}*>({at}); }}"
            ));
            ms.inline(&format!("int {n}_size() const {{ return {n}().size(); }}"));
            ms.inline(&format!("{t} {n}(int i) const {{ return {n}().Get(i); }}"));
            ms.inline(&format!(
                "void set_{n}(int i, {t} v) {{ mutable_{n}()->Set(i, v); }}"
            ));
            ms.inline(&format!("void add_{n}({t} v) {{ mutable_{n}()->Add(v); }}"));
            ms.inline(&format!("void clear_{n}() {{ mutable_{n}()->Clear(); }}"));
        }
    }
}

/// The C++ onnx_light library's `ref_x()`: the field itself, `const` (the getter's value) and
/// mutable (what `mutable_x()` returns, set if unset). Scalars are read-only (by value): their
/// storage is not a C++ object of the field's type.
fn ref_accessor(ms: &mut Members<'_>, f: &FieldDef) {
    let n = f.name;
    let ty = match (f.label, f.kind) {
        (Label::Repeated, Kind::Message(t)) => format!("RepeatedPtrField<{}>", cpp_name(t)),
        (Label::Repeated, k) if is_string(k) => "RepeatedPtrField<std::string>".to_string(),
        (Label::Repeated, k) => format!("RepeatedField<{}>", scalar(k).0),
        (_, Kind::Message(t)) => cpp_name(t),
        (_, Kind::String | Kind::Bytes | Kind::Payload) => "std::string".to_string(),
        (_, k) => {
            let t = scalar(k).0;
            ms.inline(&format!("{t} ref_{n}() const {{ return {n}(); }}"));
            return;
        }
    };
    ms.inline(&format!("const {ty}& ref_{n}() const {{ return {n}(); }}"));
    ms.inline(&format!("{ty}& ref_{n}() {{ return *mutable_{n}(); }}"));
}

/// `mutable_x`, `release_x`, `set_allocated_x` (and their `unsafe_arena_` forms) of a
/// sub-message reached through its functions `{p}_mutable` / `_release` / `_set_allocated`.
fn message_changers(ms: &mut Members<'_>, n: &str, t: &str, p: &str) {
    ms.outline(
        &format!("{t}*"),
        &format!("mutable_{n}()"),
        "",
        &format!("return static_cast<{t}*>({p}_mutable(this));"),
    );
    ms.outline(
        &format!("{t}*"),
        &format!("release_{n}()"),
        "",
        &format!("return static_cast<{t}*>({p}_release(this));"),
    );
    ms.outline(
        "void",
        &format!("set_allocated_{n}({t}* v)"),
        "",
        &format!("{p}_set_allocated(this, v);"),
    );
    ms.inline(&format!(
        "{t}* unsafe_arena_release_{n}() {{ return release_{n}(); }}"
    ));
    ms.inline(&format!(
        "void unsafe_arena_set_allocated_{n}({t}* v) {{ set_allocated_{n}(v); }}"
    ));
}

/// A member of a oneof: read in place (the case tag, then the value at its offset), changed
/// through its functions.
fn oneof_member(ms: &mut Members<'_>, m: &MessageDef, f: &FieldDef, l: &Oneof) {
    let oneof = f.oneof.unwrap();
    let (n, p) = (f.name, format!("onnxl_cxx_{}_{}", cpp_name(m.name), f.name));
    let (tag, at) = l.members[n];
    let value = format!("detail::at(this, {})", l.offset + at);
    let has = format!(
        "detail::load<uint32_t>(detail::at(this, {})) == {tag}u",
        l.offset
    );
    ms.inline(&format!("bool has_{n}() const {{ return {has}; }}"));
    ms.inline(&format!(
        "void clear_{n}() {{ if (has_{n}()) clear_{oneof}(); }}"
    ));
    match f.kind {
        Kind::Message(t) => {
            let t = cpp_name(t);
            ms.outline(
                &format!("const {t}&"),
                &format!("{n}()"),
                " const",
                &format!("return has_{n}() ? *detail::load<const {t}*>({value}) : {t}::default_instance();"),
            );
            message_changers(ms, n, &t, &p);
        }
        k if is_string(k) => {
            ms.inline(&format!(
                "const std::string& {n}() const {{ return has_{n}() ? *detail::string_at({value}) : detail::empty_string(); }}"
            ));
            ms.inline(&format!("std::string* mutable_{n}() {{ return static_cast<std::string*>({p}_mutable(this)); }}"));
            string_setters(
                ms,
                &format!("set_{n}"),
                "",
                &format!("{p}_set(this, reinterpret_cast<const uint8_t*>({{D}}), {{N}});"),
            );
            ms.inline(&format!("std::string* release_{n}() {{ return static_cast<std::string*>({p}_release(this)); }}"));
            ms.inline(&format!(
                "void set_allocated_{n}(std::string* v) {{ {p}_set_allocated(this, v); }}"
            ));
        }
        k => {
            let (t, _) = scalar(k);
            ms.inline(&format!(
                "{t} {n}() const {{ return has_{n}() ? detail::load<{t}>({value}) : {t}(); }}"
            ));
            ms.inline(&format!("void set_{n}({t} v) {{ {p}_set(this, v); }}"));
        }
    }
}

/// Generates `include/onnx_light/onnx_pb.h`: every class, enum and enum function under
/// `namespace onnx` (or `ONNX_NAMESPACE`), and protobuf's container names.
pub fn generate_compat() -> String {
    let mut o = String::from(
        "// @generated by `cargo run -p codegen` from src/proto/schema.rs. Do not edit.\n//\n\
         // Drop-in for protobuf's generated onnx.pb.h / onnx-data.pb.h: the onnx_light message classes\n\
         // under namespace onnx, or the namespace ONNX_NAMESPACE names when it is defined (as onnx's\n\
         // build renames the .proto package), and protobuf's container names under google::protobuf\n\
         // unless ONNX_LIGHT_NO_PROTOBUF_NAMES is defined. See docs/cpp.md.\n\
         #ifndef ONNX_LIGHT_ONNX_PB_H\n#define ONNX_LIGHT_ONNX_PB_H\n\n#include \"../onnx_light.hpp\"\n\n\
         #ifdef ONNX_NAMESPACE\nnamespace ONNX_NAMESPACE {\n#else\nnamespace onnx {\n#endif\n",
    );
    for m in MESSAGES {
        writeln!(o, "using ::onnx_light::{};", cpp_name(m.name)).unwrap();
    }
    for (full, values) in &enums() {
        let en = cpp_name(full);
        let short = full.rsplit('.').next().unwrap();
        let prefix = if full.contains('.') {
            format!("{en}_")
        } else {
            String::new()
        };
        writeln!(o, "using ::onnx_light::{en};").unwrap();
        for (n, _) in values {
            writeln!(o, "using ::onnx_light::{prefix}{n};").unwrap();
        }
        let _ = short;
        for suffix in ["MIN", "MAX", "ARRAYSIZE"] {
            writeln!(o, "using ::onnx_light::{}_{suffix};", enum_base(full)).unwrap();
        }
        for func in ["IsValid", "Name", "Parse"] {
            writeln!(o, "using ::onnx_light::{en}_{func};").unwrap();
        }
    }
    o.push_str(
        "}  // namespace onnx (ONNX_NAMESPACE)\n\n#ifndef ONNX_LIGHT_NO_PROTOBUF_NAMES\nnamespace google {\nnamespace protobuf {\n\
         using ::onnx_light::RepeatedField;\nusing ::onnx_light::RepeatedPtrField;\n\
         using ::onnx_light::Message;\nusing ::onnx_light::MessageLite;\n\
         namespace io {\nusing ::onnx_light::io::ArrayInputStream;\nusing ::onnx_light::io::CodedInputStream;\n\
         using ::onnx_light::io::ZeroCopyInputStream;\n}  // namespace io\n\
         }  // namespace protobuf\n}  // namespace google\n#endif\n\n#endif  // ONNX_LIGHT_ONNX_PB_H\n",
    );
    o
}
