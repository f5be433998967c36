//! Every default documented in the C header (`include/onnx_light.h`: "Default N", "(default
//! N)", "N = ... (default)") and in the options table of docs/external-data.md equals what the
//! default functions return, so documentation and code cannot drift apart again. Every numeric
//! or boolean field of the option structs must document its default.

use std::collections::BTreeMap;

use onnx_light::SaveExternalOptions;
use onnx_light::ffi::conversions::{
    onnxl_convert_external_data_options_default, onnxl_tensor_buffer_options_default,
};
use onnx_light::ffi::crypto::onnxl_encryption_options_default;
use onnx_light::ffi::external::{
    onnxl_external_data_options_default, onnxl_external_load_options_default,
};
use onnx_light::ffi::options::{onnxl_parse_options_default, onnxl_serialize_options_default};

const HEADER: &str = include_str!("../../include/onnx_light.h");
const EXTERNAL_DATA_DOC: &str = include_str!("../../docs/external-data.md");

/// The value of a documented default: a number with an optional binary unit, a boolean, or an
/// `ONNXL_*` constant of the header.
fn value_of(text: &str, constants: &BTreeMap<String, i128>) -> Option<i128> {
    let t = text
        .trim()
        .trim_matches(|c| matches!(c, '`' | '.' | ',' | ';' | ':' | '(' | ')'));
    match t {
        "true" => return Some(1),
        "false" => return Some(0),
        "AES-256-GCM" => return constants.get("ONNXL_CHUNK_CIPHER_AES_256_GCM").copied(),
        _ => {}
    }
    if let Some(v) = constants.get(t) {
        return Some(*v);
    }
    let (num, unit) = match t.split_once(' ') {
        Some((n, u)) => (n, u),
        None => (t, ""),
    };
    let n: i128 = num.parse().ok()?;
    let scale = match unit.trim_end_matches(['.', ',', ';', ')']) {
        "" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    Some(n * scale)
}

/// `#define ONNXL_X N` and `ONNXL_X = N,` constants of the header.
fn constants() -> BTreeMap<String, i128> {
    let mut out = BTreeMap::new();
    for line in HEADER.lines() {
        let l = line.trim();
        let (name, value) = if let Some(rest) = l.strip_prefix("#define ONNXL_") {
            match rest.split_once(' ') {
                Some((n, v)) => (format!("ONNXL_{n}"), v.trim()),
                None => continue,
            }
        } else if l.starts_with("ONNXL_") && l.contains(" = ") {
            let (n, v) = l.split_once(" = ").unwrap();
            (n.to_string(), v.trim_end_matches(','))
        } else {
            continue;
        };
        if let Ok(v) = value.trim_end_matches('u').parse::<i128>() {
            out.insert(name, v);
        }
    }
    out
}

/// The default documented for a field, from its doc comment.
fn documented_default(doc: &str, constants: &BTreeMap<String, i128>) -> Option<i128> {
    let words: Vec<&str> = doc.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        let lw = w.trim_start_matches('(').to_ascii_lowercase();
        if lw == "default" || lw == "default:" {
            // "Default 1024", "(default 1 MiB; ...", "default `ONNXL_X`".
            if let Some(next) = words.get(i + 1) {
                let two = words.get(i + 2).map(|u| format!("{next} {u}"));
                if let Some(v) = two.as_deref().and_then(|t| value_of(t, constants)) {
                    return Some(v);
                }
                if let Some(v) = value_of(next, constants) {
                    return Some(v);
                }
            }
        }
        // "1 = sequential (default)", "0 (default) = automatic", "(true, default)".
        if w.starts_with("(default)") || w.starts_with("default)") {
            if let Some(v) = words
                .get(i.wrapping_sub(1))
                .and_then(|p| value_of(p, constants))
            {
                return Some(v);
            }
            for back in words[..i].iter().rev().take(4) {
                if let Some(v) = value_of(back, constants) {
                    return Some(v);
                }
            }
        }
    }
    None
}

/// The fields of `typedef struct NAME { ... } NAME;` with their doc comments.
fn struct_fields(name: &str) -> Vec<(String, String)> {
    let start = HEADER
        .find(&format!("typedef struct {name} {{"))
        .unwrap_or_else(|| panic!("{name} is not in the header"));
    let body = &HEADER[start..];
    let body = &body[..body.find(&format!("}} {name};")).unwrap()];
    let mut out = Vec::new();
    let mut doc = String::new();
    for line in body.lines().skip(1) {
        let l = line.trim();
        if l.starts_with("/*") || l.starts_with('*') {
            doc.push_str(l.trim_start_matches("/**").trim_start_matches('*'));
            doc.push(' ');
        } else if let Some(decl) = l.strip_suffix(';') {
            let field = decl
                .split_whitespace()
                .last()
                .unwrap()
                .split('[')
                .next()
                .unwrap()
                .trim_start_matches('*')
                .to_string();
            out.push((field, std::mem::take(&mut doc)));
        }
    }
    out
}

/// Checks one struct: every field of `values` documents its default and it is the value.
fn check_struct(name: &str, values: &[(&str, i128)], failures: &mut Vec<String>) {
    let consts = constants();
    let fields = struct_fields(name);
    for (field, value) in values {
        let Some((_, doc)) = fields.iter().find(|(f, _)| f == field) else {
            failures.push(format!("{name}.{field}: not in the header"));
            continue;
        };
        match documented_default(doc, &consts) {
            Some(d) if d == *value => {}
            Some(d) => failures.push(format!(
                "{name}.{field}: the header says default {d}, the default function gives {value}"
            )),
            None => failures.push(format!("{name}.{field}: no documented default in {doc:?}")),
        }
    }
}

#[test]
fn header_defaults_equal_the_default_functions() {
    let mut failures = Vec::new();
    let p = onnxl_parse_options_default();
    check_struct(
        "OnnxlParseOptions",
        &[
            ("raw_data_threshold", p.raw_data_threshold.into()),
            ("alignment", p.alignment.into()),
            ("min_parallel_block_size", p.min_parallel_block_size.into()),
            ("num_threads", p.num_threads.into()),
            ("max_recursion_depth", p.max_recursion_depth.into()),
            ("file_load_mode", p.file_load_mode.into()),
            ("no_copy", p.no_copy.into()),
            ("skip_raw_data", p.skip_raw_data.into()),
            ("reject_unauthenticated", p.reject_unauthenticated.into()),
            ("max_metadata_bytes", p.max_metadata_bytes.into()),
            ("max_tensor_size_bytes", p.max_tensor_size_bytes.into()),
        ],
        &mut failures,
    );
    let s = onnxl_serialize_options_default();
    check_struct(
        "OnnxlSerializeOptions",
        &[
            ("raw_data_threshold", s.raw_data_threshold.into()),
            ("alignment", s.alignment.into()),
            (
                "max_serialized_size_bytes",
                s.max_serialized_size_bytes.into(),
            ),
            ("num_threads", s.num_threads.into()),
            ("skip_raw_data", s.skip_raw_data.into()),
            (
                "use_external_data_location",
                s.use_external_data_location.into(),
            ),
            ("max_external_file_size", s.max_external_file_size.into()),
        ],
        &mut failures,
    );
    let e = onnxl_external_data_options_default();
    check_struct(
        "OnnxlExternalDataOptions",
        &[
            ("size_threshold", e.size_threshold.into()),
            ("alignment", e.alignment.into()),
            ("align_threshold", e.align_threshold.into()),
            ("max_external_file_size", e.max_external_file_size.into()),
            ("num_threads", e.num_threads.into()),
            ("all_tensors_to_one_file", e.all_tensors_to_one_file.into()),
            ("convert_attribute", e.convert_attribute.into()),
            ("checksum", e.checksum.into()),
            ("sync", e.sync.into()),
            ("encryption_chunk_size", e.encryption_chunk_size.into()),
            ("encryption_chunk_cipher", e.encryption_chunk_cipher.into()),
            ("encrypt", e.encrypt.into()),
            ("externalize_sparse", e.externalize_sparse.into()),
            (
                "use_external_data_location",
                e.use_external_data_location.into(),
            ),
        ],
        &mut failures,
    );
    let l = onnxl_external_load_options_default();
    check_struct(
        "OnnxlExternalLoadOptions",
        &[
            ("load_external_data", l.load_external_data.into()),
            ("verify_checksums", l.verify_checksums.into()),
            ("has_key", l.has_key.into()),
        ],
        &mut failures,
    );
    let c = onnxl_encryption_options_default();
    check_struct(
        "OnnxlEncryptionOptions",
        &[
            ("format", c.format.into()),
            ("chunk_cipher", c.chunk_cipher.into()),
            ("chunk_size", c.chunk_size.into()),
        ],
        &mut failures,
    );
    let b = onnxl_tensor_buffer_options_default();
    check_struct(
        "OnnxlTensorBufferOptions",
        &[
            ("raw_data_threshold", b.raw_data_threshold.into()),
            ("alignment", b.alignment.into()),
        ],
        &mut failures,
    );
    let v = onnxl_convert_external_data_options_default();
    check_struct(
        "OnnxlConvertExternalDataOptions",
        &[
            ("size_threshold", v.size_threshold.into()),
            ("all_tensors_to_one_file", v.all_tensors_to_one_file.into()),
            ("convert_attribute", v.convert_attribute.into()),
        ],
        &mut failures,
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_save_options_table_of_the_docs_equals_the_defaults() {
    let d = SaveExternalOptions::default();
    let expected: BTreeMap<&str, i128> = [
        ("size_threshold", d.size_threshold.into()),
        ("all_tensors_to_one_file", d.all_tensors_to_one_file.into()),
        ("alignment", d.alignment.into()),
        ("align_threshold", d.align_threshold.into()),
        ("max_external_file_size", d.max_external_file_size.into()),
        ("convert_attribute", d.convert_attribute.into()),
        ("externalize_sparse", d.externalize_sparse.into()),
        ("checksum", d.checksum.into()),
        ("num_threads", d.num_threads.into()),
        ("sync", d.sync.into()),
        (
            "use_external_data_location",
            d.use_external_data_location.into(),
        ),
    ]
    .into();
    let consts = constants();
    let mut seen = BTreeMap::new();
    // The table after "`SaveExternalOptions` (after onnx's ...)", up to its end.
    let start = EXTERNAL_DATA_DOC
        .find("`SaveExternalOptions` (after onnx's")
        .expect("the SaveExternalOptions table");
    let table = EXTERNAL_DATA_DOC[start..]
        .lines()
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'));
    for line in table {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || !cells[1].starts_with('`') {
            continue;
        }
        let field = cells[1].trim_matches('`');
        if let Some(&want) = expected.get(field) {
            let first = cells[2].split([' ', '(']).next().unwrap_or_default();
            let two: String = cells[2].split(' ').take(2).collect::<Vec<_>>().join(" ");
            let got = value_of(&two, &consts).or_else(|| value_of(first, &consts));
            assert_eq!(
                got,
                Some(want),
                "docs/external-data.md: `{field}` says {:?}",
                cells[2]
            );
            seen.insert(field, got);
        }
    }
    let missing: Vec<_> = expected.keys().filter(|k| !seen.contains_key(*k)).collect();
    assert!(
        missing.is_empty(),
        "fields missing from the table: {missing:?}"
    );
}

#[test]
fn the_parser_of_documented_defaults_reads_what_it_should() {
    let c = constants();
    assert_eq!(documented_default("Default 1024.", &c), Some(1024));
    assert_eq!(
        documented_default("(default 1 MiB; 64 ..= 64 MiB)", &c),
        Some(1 << 20)
    );
    assert_eq!(
        documented_default("1 = sequential (default), n > 1", &c),
        Some(1)
    );
    assert_eq!(documented_default("0 (default) = automatic", &c), Some(0));
    assert_eq!(
        documented_default("One file (true, default) or", &c),
        Some(1)
    );
    assert_eq!(
        documented_default("(default `ONNXL_FILE_LOAD_MODE_AUTO`); other", &c),
        c.get("ONNXL_FILE_LOAD_MODE_AUTO").copied()
    );
    assert_eq!(
        documented_default("(default false: plaintext)", &c),
        Some(0)
    );
    assert_eq!(documented_default("no default here", &c), None);
}
