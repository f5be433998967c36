//! The `external_data` key/value entries of a `TensorProto`: parsing (strict numbers, keys in
//! any order, unknown keys ignored, `prepacked*` kept) and writing (never `basepath`).

use crate::proto::{StringStringEntryProto, TensorProto};

/// `TensorProto.rare.data_location` value of tensors whose bytes live in a file.
pub const DATA_LOCATION_EXTERNAL: i32 = 1;
/// `TensorProto.rare.data_location` value of tensors whose bytes are in the message.
pub const DATA_LOCATION_DEFAULT: i32 = 0;

/// True when the tensor's bytes live in an external file (`data_location == EXTERNAL`).
pub fn uses_external_data(t: &TensorProto) -> bool {
    t.rare.data_location == Some(DATA_LOCATION_EXTERNAL)
}

/// The parsed `external_data` entries of one tensor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExternalDataInfo {
    /// `location`: path of the file, relative to the model directory (required).
    pub location: String,
    /// `offset`: first byte in the file (default 0).
    pub offset: u64,
    /// `length`: number of bytes (absent: to the end of the file).
    pub length: Option<u64>,
    /// `checksum`: SHA-1 (hex) of the whole file, when recorded.
    pub checksum: Option<String>,
    /// `basepath`: accepted and kept, NEVER used to resolve the file (a file must not choose
    /// where it is read from) and never written.
    pub basepath: Option<String>,
    /// Entries whose key starts with `prepacked` (ONNX Runtime pre-packed blobs), in order,
    /// validated with [`parse_prepacked`] (see [`prepacked_blobs_of`]).
    pub prepacked: Vec<(String, String)>,
}

/// A number of an `offset`/`length` entry: decimal digits only (no sign, no spaces), fitting in
/// 64 bits. Negative and non-numeric values are errors.
pub fn parse_number(key: &str, value: &str) -> Result<u64, String> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "'{key}' is {value:?}, not a non-negative decimal integer"
        ));
    }
    value
        .parse::<u64>()
        .map_err(|_| format!("'{key}' {value} does not fit in 64 bits"))
}

/// One buffer of a pre-packed blob as recorded: `OFFSET;LENGTH;CHECKSUM`. The offset is signed,
/// as ONNX Runtime parses it (`off_t`); a negative one is refused when the range is checked
/// against the file. ONNX Runtime writes the checksum as `0` (not computed); onnx_light writes
/// `0`, or the SHA-1 (hex) of the buffer when saving with `checksum`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrepackedRange {
    /// First byte in the tensor's own file (absolute).
    pub offset: i64,
    /// Number of bytes.
    pub length: u64,
    /// The third field, verbatim.
    pub checksum: String,
}

/// `s` split at `delim` with empty pieces dropped (ONNX Runtime's `utils::SplitString(s, delim,
/// keep_empty = false)`).
fn split_non_empty(s: &str, delim: char) -> impl Iterator<Item = &str> {
    s.split(delim).filter(|p| !p.is_empty())
}

/// The offset of a `prepacked*` triple, parsed as ONNX Runtime (1.2x+) parses it:
/// `std::from_chars` into a signed 64-bit integer, the whole string consumed: an optional `-`,
/// decimal digits, nothing else (no `+`, no space, no hex), within range.
fn parse_ort_offset(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("prepacked offset {s:?} is not a number"));
    }
    s.parse::<i64>()
        .map_err(|_| format!("prepacked offset {s:?} is out of range"))
}

/// The length of a `prepacked*` triple, parsed as ONNX Runtime parses a `size_t`:
/// `std::from_chars` into an unsigned 64-bit integer, decimal, or hexadecimal after a `0x`/`0X`
/// prefix; no sign, no space, the whole string consumed, within range.
fn parse_ort_length(s: &str) -> Result<u64, String> {
    let (digits, radix) = match s.get(..2) {
        Some("0x" | "0X") => (&s[2..], 16),
        _ => (s, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(format!("prepacked length {s:?} is not a number"));
    }
    u64::from_str_radix(digits, radix)
        .map_err(|_| format!("prepacked length {s:?} is out of range"))
}

/// Parses one `prepacked*` value `BLOBKEY|OFFSET;LENGTH;CHECKSUM[|OFFSET;LENGTH;CHECKSUM...]`
/// exactly as ONNX Runtime's `ExternalDataInfo::Create` does:
///
/// - the value is split at `|` and each piece at `;`, empty pieces DROPPED (so `k||0;4;0` and
///   `k|0;;4;0` are `k` with one buffer, and in `|0;4;0|8;4;0` the key is `0;4;0`);
/// - an empty value, or one without a piece after the key, is ignored (`Ok(None)`);
/// - a piece that does not split into exactly three fields is skipped;
/// - a number that does not parse is an error (offset: signed 64-bit decimal; length: unsigned
///   64-bit, decimal or `0x` hexadecimal — `std::from_chars` as ONNX Runtime 1.31 calls it);
///   the checksum field is kept verbatim;
/// - a key whose pieces were all skipped is ignored (`Ok(None)`).
pub fn parse_prepacked(value: &str) -> Result<Option<(String, Vec<PrepackedRange>)>, String> {
    Ok(parse_prepacked_borrowed(value)?.map(|(key, buffers)| (key.to_string(), buffers)))
}

/// [`parse_prepacked`] with the key borrowed from `value`.
fn parse_prepacked_borrowed(value: &str) -> Result<Option<(&str, Vec<PrepackedRange>)>, String> {
    let mut fields = split_non_empty(value, '|');
    let Some(key) = fields.next() else {
        return Ok(None);
    };
    let mut buffers = Vec::new();
    for piece in fields {
        let mut parts = split_non_empty(piece, ';');
        let (Some(offset), Some(length), Some(checksum), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        buffers.push(PrepackedRange {
            offset: parse_ort_offset(offset)?,
            length: parse_ort_length(length)?,
            checksum: checksum.to_string(),
        });
    }
    if buffers.is_empty() {
        return Ok(None);
    }
    Ok(Some((key, buffers)))
}

/// The blobs of a tensor's `prepacked*` entries (`(key, value)` in order), merged as ONNX Runtime
/// merges them: entries naming the same blob key append their buffers to it, in entry order.
pub fn prepacked_blobs_of(
    entries: &[(String, String)],
) -> Result<Vec<(String, Vec<PrepackedRange>)>, String> {
    let mut out: Vec<(String, Vec<PrepackedRange>)> = Vec::new();
    // Position of each key in `out`: a file may name hundreds of thousands of keys, so the
    // lookup must not scan the keys seen so far.
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (k, v) in entries {
        let Some((key, buffers)) =
            parse_prepacked_borrowed(v).map_err(|e| format!("'{k}': {e}"))?
        else {
            continue;
        };
        match index.entry(key) {
            std::collections::hash_map::Entry::Occupied(i) => out[*i.get()].1.extend(buffers),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(out.len());
                out.push((key.to_string(), buffers));
            }
        }
    }
    Ok(out)
}

impl ExternalDataInfo {
    /// Parses the entries of `t` (whatever its `data_location`). Keys may come in any order; a
    /// repeated key takes its last value (as the onnx package does); unknown keys are ignored.
    pub fn parse(t: &TensorProto) -> Result<Self, String> {
        let mut info = ExternalDataInfo::default();
        let mut location = None;
        for e in &t.rare.external_data {
            let key = e.key.as_deref().unwrap_or_default();
            let value = e.value.as_deref().unwrap_or_default();
            let text = |what: &str| {
                std::str::from_utf8(value)
                    .map(str::to_string)
                    .map_err(|_| format!("'{what}' is not valid UTF-8"))
            };
            match key {
                b"location" => location = Some(text("location")?),
                b"offset" => info.offset = parse_number("offset", &text("offset")?)?,
                b"length" => info.length = Some(parse_number("length", &text("length")?)?),
                b"checksum" => info.checksum = Some(text("checksum")?),
                b"basepath" => info.basepath = Some(text("basepath")?),
                k if k.starts_with(b"prepacked") => {
                    let k = String::from_utf8_lossy(k).into_owned();
                    let v = text(&k)?;
                    parse_prepacked(&v).map_err(|e| format!("'{k}': {e}"))?;
                    info.prepacked.push((k, v));
                }
                _ => {}
            }
        }
        info.location = location.ok_or("no 'location' entry")?;
        Ok(info)
    }

    /// The entries to write, in the onnx package's order: `location`, `offset`, `length`, then
    /// `checksum` and `prepacked*` when present. `basepath` is never written (ONNX Runtime
    /// rejects unknown keys).
    pub fn entries(&self) -> Vec<StringStringEntryProto> {
        let entry = |k: &str, v: &str| StringStringEntryProto {
            key: Some(k.into()),
            value: Some(v.into()),
            ..Default::default()
        };
        let mut out = vec![
            entry("location", &self.location),
            entry("offset", &self.offset.to_string()),
        ];
        if let Some(len) = self.length {
            out.push(entry("length", &len.to_string()));
        }
        if let Some(c) = &self.checksum {
            out.push(entry("checksum", c));
        }
        for (k, v) in &self.prepacked {
            out.push(entry(k, v));
        }
        out
    }

    /// Makes `t` an external tensor described by `self`: the entries replace the old ones,
    /// `data_location` becomes EXTERNAL and `raw_data` is cleared.
    pub fn apply_to(&self, t: &mut TensorProto) {
        t.rare.external_data = self.entries().into_iter().collect();
        t.rare.data_location = Some(DATA_LOCATION_EXTERNAL);
        t.raw_data = None;
    }
}

/// Name of split part `index` of `location`: `location` itself for 0, else `location.INDEX`.
pub fn split_file_name(location: &str, index: usize) -> String {
    if index == 0 {
        location.to_string()
    } else {
        format!("{location}.{index}")
    }
}

/// `(base, index)` when `location` is split part `base.INDEX` (INDEX ≥ 1, digits only).
pub fn split_part_of(location: &str) -> Option<(&str, usize)> {
    let (base, suffix) = location.rsplit_once('.')?;
    if base.is_empty() || suffix.is_empty() || !suffix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: usize = suffix.parse().ok()?;
    (n >= 1).then_some((base, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(entries: &[(&str, &str)]) -> TensorProto {
        let mut t = TensorProto::new();
        for (k, v) in entries {
            t.rare.external_data.push(StringStringEntryProto {
                key: Some((*k).into()),
                value: Some((*v).into()),
                ..Default::default()
            });
        }
        t.rare.data_location = Some(DATA_LOCATION_EXTERNAL);
        t
    }

    #[test]
    fn keys_in_any_order_unknown_ignored() {
        let t = tensor(&[
            ("length", "12"),
            ("whatever", "x"),
            ("offset", "4096"),
            ("basepath", "/etc"),
            ("location", "w.bin"),
            ("checksum", "ab"),
            ("prepacked_0", "k|0;4;0|bad"),
        ]);
        let i = ExternalDataInfo::parse(&t).unwrap();
        assert_eq!(i.location, "w.bin");
        assert_eq!((i.offset, i.length), (4096, Some(12)));
        assert_eq!(i.checksum.as_deref(), Some("ab"));
        assert_eq!(i.basepath.as_deref(), Some("/etc"));
        assert_eq!(i.prepacked.len(), 1);
        let names: Vec<String> = i
            .entries()
            .iter()
            .map(|e| e.key.as_ref().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            ["location", "offset", "length", "checksum", "prepacked_0"]
        );
    }

    #[test]
    fn bad_numbers_are_errors() {
        for v in ["-1", "", "1e3", " 1", "+1", "0x10", "18446744073709551616"] {
            let t = tensor(&[("location", "w"), ("offset", v)]);
            assert!(ExternalDataInfo::parse(&t).is_err(), "offset {v:?}");
            let t = tensor(&[("location", "w"), ("length", v)]);
            assert!(ExternalDataInfo::parse(&t).is_err(), "length {v:?}");
        }
        assert!(ExternalDataInfo::parse(&tensor(&[("offset", "0")])).is_err());
        let t = tensor(&[("location", "w"), ("prepacked_1", "k|1;x;0")]);
        assert!(ExternalDataInfo::parse(&t).is_err());
        // Incomplete triples are skipped, not errors.
        let t = tensor(&[("location", "w"), ("prepacked_1", "k|1;2|x")]);
        assert!(ExternalDataInfo::parse(&t).is_ok());
    }

    fn ranges(v: &[(i64, u64)]) -> Vec<PrepackedRange> {
        v.iter()
            .map(|&(offset, length)| PrepackedRange {
                offset,
                length,
                checksum: "0".into(),
            })
            .collect()
    }

    #[test]
    fn prepacked_values() {
        assert_eq!(
            parse_prepacked("key|0;16;0|32;8;0|incomplete;1").unwrap(),
            Some(("key".to_string(), ranges(&[(0, 16), (32, 8)])))
        );
        assert!(parse_prepacked("key|a;1;0").is_err());
    }

    #[test]
    fn prepacked_parsing_mirrors_onnxruntime() {
        let one = |v: &str| parse_prepacked(v).unwrap();
        // Ignored: empty, key only, no complete triple.
        assert_eq!(one(""), None);
        assert_eq!(one("key"), None);
        assert_eq!(one("key|"), None);
        assert_eq!(one("key|1;2"), None);
        assert_eq!(one("key|1;2;3;4"), None);
        assert_eq!(one("|||"), None);
        // Empty pieces are dropped, not counted.
        assert_eq!(one("k||0;4;0|"), Some(("k".into(), ranges(&[(0, 4)]))));
        assert_eq!(one("k|0;;4;0"), Some(("k".into(), ranges(&[(0, 4)]))));
        assert_eq!(
            one("|0;4;0|8;4;0"),
            Some(("0;4;0".into(), ranges(&[(8, 4)])))
        );
        // std::from_chars: `-` only for the offset (a negative one parses; it is refused later,
        // by range), hex lengths after 0x, leading zeros.
        assert_eq!(
            one("k|-8;0x1f;x"),
            Some((
                "k".into(),
                vec![PrepackedRange {
                    offset: -8,
                    length: 31,
                    checksum: "x".into()
                }]
            ))
        );
        assert_eq!(one("k|-0;0XaB;0"), Some(("k".into(), ranges(&[(0, 0xab)]))));
        assert_eq!(one("k|007;010;0"), Some(("k".into(), ranges(&[(7, 10)]))));
        // Bad numbers are errors, even next to good triples.
        for bad in [
            "k|0;4;0|x;4;0",
            "k|0;-4;0",
            "k| 0;4;0",
            "k|0 ;4;0",
            "k|0x10;4;0",
            "k|1e3;4;0",
            "k|+1;4;0",
            "k|0;+4;0",
            "k|-;4;0",
            "k|0;-0;0",
            "k|0;0x;0",
            "k|0;0xg;0",
            "k|0;0x-1;0",
            "k|0;0x0x1;0",
            "k|0;0x10000000000000000;0",
            "k|0;\t4;0",
            "k|9223372036854775808;4;0",
            "k|0;18446744073709551616;0",
            "k|0;4.0;0",
        ] {
            assert!(parse_prepacked(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            one("k|-9223372036854775808;18446744073709551615;0"),
            Some(("k".into(), ranges(&[(i64::MIN, u64::MAX)])))
        );
        assert_eq!(
            one("k|9223372036854775807;0xFFFFFFFFFFFFFFFF;0"),
            Some(("k".into(), ranges(&[(i64::MAX, u64::MAX)])))
        );
        // Entries of one tensor merge by blob key.
        let merged = prepacked_blobs_of(&[
            ("prepacked_0".into(), "a|0;4;0".into()),
            ("prepacked_1".into(), "b|8;4;0".into()),
            ("prepacked_x".into(), "a|16;4;0|bad".into()),
            ("prepacked_2".into(), "c|".into()),
        ])
        .unwrap();
        assert_eq!(
            merged,
            vec![
                ("a".to_string(), ranges(&[(0, 4), (16, 4)])),
                ("b".to_string(), ranges(&[(8, 4)])),
            ]
        );
    }

    #[test]
    fn split_names() {
        assert_eq!(split_file_name("w.bin", 0), "w.bin");
        assert_eq!(split_file_name("w.bin", 2), "w.bin.2");
        assert_eq!(split_part_of("w.bin.2"), Some(("w.bin", 2)));
        assert_eq!(split_part_of("w.bin"), None);
        assert_eq!(split_part_of("w.0"), None);
    }
}
