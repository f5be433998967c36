//! The `external_data` key/value entries of a `TensorProto`: parsing (strict numbers, keys in
//! any order, unknown keys ignored, `prepacked*` kept) and writing (never `basepath`).

use crate::proto::{StringStringEntryProto, TensorProto};

/// `TensorProto.data_location` value of tensors whose bytes live in a file.
pub const DATA_LOCATION_EXTERNAL: i32 = 1;
/// `TensorProto.data_location` value of tensors whose bytes are in the message.
pub const DATA_LOCATION_DEFAULT: i32 = 0;

/// True when the tensor's bytes live in an external file (`data_location == EXTERNAL`).
pub fn uses_external_data(t: &TensorProto) -> bool {
    t.data_location == Some(DATA_LOCATION_EXTERNAL)
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
    /// validated with [`parse_prepacked`].
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

/// One buffer of a pre-packed blob: `(offset, length)` in the tensor's own file.
pub type PrepackedBuffer = (u64, u64);

/// Parses a `prepacked*` value `BLOBKEY|OFFSET;LENGTH;CHECKSUM[|OFFSET;LENGTH;CHECKSUM...]` the
/// way ONNX Runtime does: triples without exactly three parts are skipped; a number that does not
/// parse is an error. Returns the blob key and its buffers.
pub fn parse_prepacked(value: &str) -> Result<(String, Vec<PrepackedBuffer>), String> {
    let mut parts = value.split('|');
    let key = parts.next().unwrap_or_default().to_string();
    let mut buffers = Vec::new();
    for triple in parts {
        let fields: Vec<&str> = triple.split(';').collect();
        if fields.len() != 3 {
            continue;
        }
        let offset = parse_number("prepacked offset", fields[0])?;
        let length = parse_number("prepacked length", fields[1])?;
        buffers.push((offset, length));
    }
    Ok((key, buffers))
}

impl ExternalDataInfo {
    /// Parses the entries of `t` (whatever its `data_location`). Keys may come in any order; a
    /// repeated key takes its last value (as the onnx package does); unknown keys are ignored.
    pub fn parse(t: &TensorProto) -> Result<Self, String> {
        let mut info = ExternalDataInfo::default();
        let mut location = None;
        for e in &t.external_data {
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
        t.external_data = self.entries().into_iter().collect();
        t.data_location = Some(DATA_LOCATION_EXTERNAL);
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
            t.external_data.push(StringStringEntryProto {
                key: Some((*k).into()),
                value: Some((*v).into()),
                ..Default::default()
            });
        }
        t.data_location = Some(DATA_LOCATION_EXTERNAL);
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
    }

    #[test]
    fn prepacked_values() {
        assert_eq!(
            parse_prepacked("key|0;16;0|32;8;0|incomplete;1").unwrap(),
            ("key".to_string(), vec![(0, 16), (32, 8)])
        );
        assert!(parse_prepacked("key|a;1;0").is_err());
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
