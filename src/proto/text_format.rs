//! protobuf's text format, byte for byte as protobuf C++ 3.21 prints it in
//! `Message::DebugString()`, `ShortDebugString()` and `Utf8DebugString()`, for every message of
//! the schema.
//!
//! The printer is driven by the schema table ([`super::schema`]): it walks the wire bytes of the
//! message, no per-message code. The input is first parsed and re-serialized by onnx_light, so it
//! is printed the way protobuf prints the message it would parse from the same bytes (last value
//! of an optional field, merged sub-messages, the set member of a oneof, out-of-range closed-enum
//! values moved to the unknown fields), and malformed bytes are refused exactly where protobuf
//! refuses them. The canonical encoding has the known fields in field-number order and then the
//! unknown fields in read order, which is the order protobuf prints them in.
//!
//! What protobuf prints (`text_format.cc` and `strutil.cc` of protobuf 3.21):
//! - one `name: value` per value, repeated fields (packed or not) one line per element, a field
//!   set to its default value too (proto2 presence);
//! - a sub-message as `name {`, its fields one level deeper (two spaces), `}`;
//! - integers in decimal (`int32` sign-extended, `uint64` unsigned), closed enums by value name;
//! - `float` and `double` as `SimpleFtoa` / `SimpleDtoa`: `%.6g` / `%.15g`, or `%.9g` / `%.17g`
//!   when the short form does not read back as the same value (a `float` subnormal always takes
//!   the long form: `strtof` reports its underflow), and `inf`, `-inf`, `nan`;
//! - `string` and `bytes` quoted and escaped as `CEscape` (`\n`, `\r`, `\t`, `\"`, `\'`, `\\`, and
//!   three-digit octal for every other byte outside 0x20..=0x7e); in the UTF-8 style, `string`
//!   fields as `Utf8SafeCEscape`, which copies every byte of 0x80 and above unchanged (valid UTF-8
//!   or not) while `bytes` fields stay `CEscape`d;
//! - unknown fields by number after the known ones: varints in unsigned decimal, fixed32 and
//!   fixed64 as `0x` and 8 or 16 lowercase hex digits, groups as blocks, and length-delimited
//!   values as a block when they parse as a set of unknown fields (with
//!   `UnknownFieldSet::ParseFromCodedStream` rules: non-empty, every tag valid, groups matched,
//!   at most 10 levels of such nesting per message), else as a `CEscape`d string;
//! - the short style on one line: `name: value ` and `name { ` ... `} `, the final space removed.

use super::schema::{self, FieldDef, Kind, Label, MessageDef};
use crate::error::{Error, Result, require_feature};
use crate::wire::{self, DecodeConfig, Message, MessageVisitor, Reader};

/// Which of protobuf's three debug strings to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextStyle {
    /// `DebugString()`: one field per line, two spaces of indentation per level, every byte of a
    /// string outside printable ASCII escaped in octal.
    Debug,
    /// `ShortDebugString()`: everything on one line.
    Short,
    /// `Utf8DebugString()`: as `Debug`, but `string` fields keep their bytes of 0x80 and above.
    Utf8,
}

/// The text of `encoded` (the protobuf encoding of the message named `message`, a schema name
/// such as `ModelProto` or `TensorProto.Segment`) in `style`, as protobuf's debug strings print
/// it.
///
/// `Debug` and `Short` texts are ASCII. A `Utf8` text is protobuf's exactly when the `string`
/// fields hold valid UTF-8; protobuf copies invalid sequences too, which a Rust `String` cannot
/// hold, so here they become U+FFFD ([`debug_bytes`] returns protobuf's exact bytes).
///
/// Errors: an unknown message name, or bytes protobuf would not parse as that message;
/// [`Error::Unsupported`] in a build without the `text-format` feature.
pub fn debug_string(message: &str, encoded: &[u8], style: TextStyle) -> Result<String> {
    let text = debug_bytes(message, encoded, style)?;
    Ok(match String::from_utf8(text) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// [`debug_string`] as the exact bytes protobuf prints (the `Utf8` style copies the bytes of
/// `string` fields of 0x80 and above unchanged, valid UTF-8 or not).
pub fn debug_bytes(message: &str, encoded: &[u8], style: TextStyle) -> Result<Vec<u8>> {
    // Without the feature the rest is dead code, left out of the library with the printer.
    require_feature(cfg!(feature = "text-format"), "text-format")?;
    let unknown = || Error::InvalidArgument(format!("unknown message type {message:?}"));
    let def = schema::message(message).ok_or_else(unknown)?;
    let canonical =
        super::visit_message_type(def.name, Canonical(encoded)).ok_or_else(unknown)??;
    let mut p = Printer {
        out: Vec::with_capacity(canonical.len() * 2),
        indent: 0,
        at_line_start: true,
        single_line: style == TextStyle::Short,
        utf8: style == TextStyle::Utf8,
    };
    p.message(def, &canonical, 0)?;
    if p.single_line && p.out.last() == Some(&b' ') {
        p.out.pop();
    }
    Ok(p.out)
}

/// Parses bytes as a message type and serializes it back: the canonical encoding.
struct Canonical<'a>(&'a [u8]);

impl MessageVisitor for Canonical<'_> {
    type Output = Result<Vec<u8>>;
    fn visit<M: Message>(self) -> Result<Vec<u8>> {
        // The message being printed may nest deeper than a parse's default limit (100): C++
        // setters build any depth, and protobuf prints whatever it holds. Up to the deepest
        // nesting a decode supports.
        let config = DecodeConfig {
            max_depth: wire::MAX_RECURSION_DEPTH_LIMIT,
            ..DecodeConfig::default()
        };
        let mut m = M::default();
        m.merge_from_bytes(self.0, &config)?;
        Ok(m.serialize_to_vec())
    }
}

/// protobuf's `TextFormat::Printer` with its `TextGenerator`.
struct Printer {
    out: Vec<u8>,
    indent: usize,
    at_line_start: bool,
    single_line: bool,
    utf8: bool,
}

/// How deeply length-delimited unknown fields are tried as nested sets of unknown fields
/// (`kUnknownFieldRecursionLimit`).
const UNKNOWN_RECURSION_BUDGET: i32 = 10;

impl Printer {
    /// Appends `text`, indenting first at the start of a line. Texts never hold a newline but as
    /// their last byte (escaping removes every other one).
    fn write(&mut self, text: &[u8]) {
        if text.is_empty() {
            return;
        }
        if self.at_line_start {
            self.at_line_start = false;
            self.out.resize(self.out.len() + 2 * self.indent, b' ');
        }
        self.out.extend_from_slice(text);
        if text.last() == Some(&b'\n') {
            self.at_line_start = true;
        }
    }

    /// Ends a `name: value` line.
    fn end_value(&mut self) {
        self.write(if self.single_line { b" " } else { b"\n" });
    }

    /// ` {` after a field name or number, then one level deeper.
    fn open(&mut self) {
        self.write(if self.single_line { b" { " } else { b" {\n" });
        self.indent += 1;
    }

    /// One level up, then `}`.
    fn close(&mut self) {
        self.indent -= 1;
        self.write(if self.single_line { b"} " } else { b"}\n" });
    }

    /// The fields of one message (`bytes` is its canonical body, at `offset` in the input).
    fn message(&mut self, def: &MessageDef, bytes: &[u8], offset: u64) -> Result<()> {
        let config = DecodeConfig::default();
        let mut r = Reader::new(bytes, &config);
        r.set_base_offset(offset);
        let mut unknown = Vec::new();
        loop {
            let start = r.position();
            let Some(tag) = r.read_tag()? else { break };
            let known = match def.field(tag >> 3) {
                Some(field) if !out_of_range_enum(field, tag, &bytes[r.position()..]) => {
                    self.field(field, tag & 7, &mut r, offset)?
                }
                _ => false,
            };
            if !known {
                r.skip_value(tag)?;
                unknown.extend_from_slice(&bytes[start..r.position()]);
            }
        }
        if !unknown.is_empty() {
            let fields = parse_unknown(&unknown, i32::MAX, true)
                .ok_or_else(|| Error::InvalidArgument("malformed unknown fields".into()))?;
            self.unknown_fields(&fields, UNKNOWN_RECURSION_BUDGET);
        }
        Ok(())
    }

    /// Prints the field whose tag (of wire type `wire_type`) was just read; false when the wire
    /// type is not the field's (the field is then an unknown one, as for protobuf).
    fn field(
        &mut self,
        field: &FieldDef,
        wire_type: u32,
        r: &mut Reader<'_>,
        base: u64,
    ) -> Result<bool> {
        let element = match field.kind {
            Kind::Int64 | Kind::Int32 | Kind::UInt64 | Kind::Enum(_) => wire::VARINT,
            Kind::Float => wire::FIXED32,
            Kind::Double => wire::FIXED64,
            Kind::String | Kind::Bytes | Kind::Payload | Kind::Message(_) => wire::LEN,
        };
        if wire_type == element {
            match field.kind {
                Kind::Message(name) => {
                    let def = schema::message(name).ok_or_else(|| {
                        Error::InvalidArgument(format!("no message {name} in the schema"))
                    })?;
                    let body = r.read_bytes()?;
                    let offset = base + (r.position() - body.len()) as u64;
                    self.write(field.name.as_bytes());
                    self.open();
                    // Messages nest without bound: see `wire::stack`.
                    crate::wire::guard_stack(|| self.message(def, body, offset))?;
                    self.close();
                }
                Kind::String | Kind::Bytes | Kind::Payload => {
                    let s = r.read_bytes()?;
                    self.write(field.name.as_bytes());
                    self.write(b": \"");
                    let utf8 = self.utf8 && field.kind == Kind::String;
                    self.write(&c_escape(s, utf8));
                    self.write(b"\"");
                    self.end_value();
                }
                Kind::Float => {
                    let v = r.read_fixed32()? as u64;
                    self.scalar(field, v);
                }
                Kind::Double => {
                    let v = r.read_fixed64()?;
                    self.scalar(field, v);
                }
                Kind::Int64 | Kind::Int32 | Kind::UInt64 | Kind::Enum(_) => {
                    let v = r.read_varint()?;
                    self.scalar(field, v);
                }
            }
            return Ok(true);
        }
        if wire_type != wire::LEN || field.label != Label::Repeated || element == wire::LEN {
            return Ok(false);
        }
        // A packed run: one line per element.
        match element {
            wire::VARINT => r.read_packed_varints(|v| self.scalar(field, v))?,
            _ => {
                let n = if element == wire::FIXED32 { 4 } else { 8 };
                for chunk in r.read_packed_fixed(n)?.chunks_exact(n) {
                    let mut le = [0u8; 8];
                    le[..n].copy_from_slice(chunk);
                    self.scalar(field, u64::from_le_bytes(le));
                }
            }
        }
        Ok(true)
    }

    /// `name: value` of a numeric field from its wire value (a varint, or the bits of a fixed32 /
    /// fixed64).
    fn scalar(&mut self, field: &FieldDef, v: u64) {
        let text = match field.kind {
            Kind::Int64 => (v as i64).to_string(),
            // protobuf keeps the low 32 bits of an int32 varint.
            Kind::Int32 => (v as i32).to_string(),
            Kind::UInt64 => v.to_string(),
            Kind::Enum(e) => {
                let v = v as i32;
                match e.values.iter().find(|(_, n)| *n == v) {
                    Some((name, _)) => (*name).to_string(),
                    None => v.to_string(),
                }
            }
            Kind::Float => simple_ftoa(f32::from_bits(v as u32)),
            _ => simple_dtoa(f64::from_bits(v)),
        };
        self.write(field.name.as_bytes());
        self.write(b": ");
        self.write(text.as_bytes());
        self.end_value();
    }

    /// `PrintUnknownFields` with its recursion budget.
    fn unknown_fields(&mut self, fields: &[UnknownField<'_>], budget: i32) {
        for f in fields {
            self.write(f.number.to_string().as_bytes());
            match &f.value {
                UnknownValue::Varint(v) => {
                    self.write(b": ");
                    self.write(v.to_string().as_bytes());
                    self.end_value();
                }
                UnknownValue::Fixed32(v) => {
                    self.write(format!(": 0x{v:08x}").as_bytes());
                    self.end_value();
                }
                UnknownValue::Fixed64(v) => {
                    self.write(format!(": 0x{v:016x}").as_bytes());
                    self.end_value();
                }
                UnknownValue::Len(bytes) => {
                    let nested = if !bytes.is_empty() && budget > 0 {
                        parse_unknown(bytes, budget, false)
                    } else {
                        None
                    };
                    match nested {
                        Some(inner) => {
                            self.open();
                            self.unknown_fields(&inner, budget - 1);
                            self.close();
                        }
                        None => {
                            self.write(b": \"");
                            self.write(&c_escape(bytes, false));
                            self.write(b"\"");
                            self.end_value();
                        }
                    }
                }
                UnknownValue::Group(inner) => {
                    self.open();
                    self.unknown_fields(inner, budget - 1);
                    self.close();
                }
            }
        }
    }
}

/// True for a closed-enum field whose value (at the start of `value`) is not in the enum: the
/// parser keeps such a value among the unknown fields, which is where it is in the canonical
/// bytes and where protobuf prints it.
fn out_of_range_enum(field: &FieldDef, tag: u32, value: &[u8]) -> bool {
    let Kind::Enum(e) = field.kind else {
        return false;
    };
    if tag & 7 != wire::VARINT {
        return false;
    }
    let config = DecodeConfig::default();
    match Reader::new(value, &config).read_varint() {
        Ok(v) => !e.values.iter().any(|(_, n)| *n == v as i32),
        Err(_) => false,
    }
}

/// One field of an `UnknownFieldSet`.
#[derive(Debug, PartialEq)]
struct UnknownField<'a> {
    number: u32,
    value: UnknownValue<'a>,
}

#[derive(Debug, PartialEq)]
enum UnknownValue<'a> {
    Varint(u64),
    Fixed32(u32),
    Fixed64(u64),
    Len(&'a [u8]),
    Group(Vec<UnknownField<'a>>),
}

/// Parses `bytes` as a set of unknown fields with the rules of protobuf's
/// `UnknownFieldSet::ParseFromCodedStream` (a `CodedInputStream` with recursion limit `budget`):
/// tags and lengths are varints of up to 10 bytes keeping their low 32 bits, a length of 2^31 or
/// more fails, a zero tag or an end-group tag ends the set early (a failure at the top level),
/// field number 0 fails, groups nest at most `budget` deep and end with their own end-group tag.
/// `None` when protobuf's parse fails.
///
/// `field_zero_in_groups` accepts field number 0 inside groups, which the message parser (upb's
/// rules, see [`crate::wire::Reader`]) keeps: the stored unknown fields of a message are decoded
/// with it, the length-delimited values tried as nested sets without.
fn parse_unknown(
    bytes: &[u8],
    budget: i32,
    field_zero_in_groups: bool,
) -> Option<Vec<UnknownField<'_>>> {
    let mut p = UnknownParser {
        buf: bytes,
        pos: 0,
        budget,
        field_zero_in_groups,
        depth: 0,
    };
    match p.fields()? {
        (fields, SetEnd::Eof) => Some(fields),
        _ => None,
    }
}

/// How a set of unknown fields ended (`CodedInputStream::ReadTag` returning 0, or an end-group
/// tag).
#[derive(PartialEq)]
enum SetEnd {
    /// The end of the input: the only legitimate end of a top-level set.
    Eof,
    /// A tag whose low 32 bits are 0, or a malformed tag.
    Zero,
    /// An end-group tag (its full value).
    EndGroup(u32),
}

struct UnknownParser<'a> {
    buf: &'a [u8],
    pos: usize,
    budget: i32,
    field_zero_in_groups: bool,
    depth: u32,
}

impl<'a> UnknownParser<'a> {
    /// `WireFormat::SkipMessage`.
    fn fields(&mut self) -> Option<(Vec<UnknownField<'a>>, SetEnd)> {
        let mut fields = Vec::new();
        loop {
            if self.pos == self.buf.len() {
                return Some((fields, SetEnd::Eof));
            }
            let tag = match self.varint() {
                Some(v) if v as u32 != 0 => v as u32,
                _ => return Some((fields, SetEnd::Zero)),
            };
            if tag & 7 == wire::END_GROUP {
                return Some((fields, SetEnd::EndGroup(tag)));
            }
            fields.push(self.field(tag)?);
        }
    }

    /// `WireFormat::SkipField` of the field with `tag` (not an end-group tag).
    fn field(&mut self, tag: u32) -> Option<UnknownField<'a>> {
        let number = tag >> 3;
        if number == 0 && !(self.field_zero_in_groups && self.depth > 0) {
            return None;
        }
        let value = match tag & 7 {
            wire::VARINT => UnknownValue::Varint(self.varint()?),
            wire::FIXED64 => {
                let b = self.take(8)?;
                UnknownValue::Fixed64(u64::from_le_bytes(b.try_into().ok()?))
            }
            wire::LEN => {
                let len = self.varint()? as u32;
                let len = usize::try_from(i32::try_from(len).ok()?).ok()?;
                UnknownValue::Len(self.take(len)?)
            }
            wire::START_GROUP => {
                self.budget -= 1;
                if self.budget < 0 {
                    return None;
                }
                self.depth += 1;
                let (inner, end) = self.fields()?;
                self.depth -= 1;
                self.budget += 1;
                if end != SetEnd::EndGroup(wire::tag(number, wire::END_GROUP)) {
                    return None;
                }
                UnknownValue::Group(inner)
            }
            wire::FIXED32 => {
                let b = self.take(4)?;
                UnknownValue::Fixed32(u32::from_le_bytes(b.try_into().ok()?))
            }
            _ => return None,
        };
        Some(UnknownField { number, value })
    }

    /// A varint of up to 10 bytes (bits past 64 dropped).
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = *self.buf.get(self.pos)?;
            self.pos += 1;
            v |= ((b & 0x7f) as u64).wrapping_shl(7 * i);
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len())?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Some(s)
    }
}

/// protobuf's `CEscape` (`utf8_safe` false) or `Utf8SafeCEscape` (true: bytes of 0x80 and above
/// are copied).
fn c_escape(bytes: &[u8], utf8_safe: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\'' => out.extend_from_slice(b"\\'"),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x20..=0x7e => out.push(b),
            0x80.. if utf8_safe => out.push(b),
            _ => out.extend_from_slice(&[
                b'\\',
                b'0' + (b >> 6),
                b'0' + ((b >> 3) & 7),
                b'0' + (b & 7),
            ]),
        }
    }
    out
}

/// protobuf's `SimpleFtoa` as the text format uses it (`nan` without a sign).
fn simple_ftoa(v: f32) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.into();
    }
    let short = format_g(v as f64, 6);
    // `safe_strtof` fails on an underflow (ERANGE), which every subnormal's short form causes.
    if !v.is_subnormal() && short.parse::<f32>() == Ok(v) {
        short
    } else {
        format_g(v as f64, 9)
    }
}

/// protobuf's `SimpleDtoa` as the text format uses it (`nan` without a sign).
fn simple_dtoa(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.into();
    }
    let short = format_g(v, 15);
    if short.parse::<f64>() == Ok(v) {
        short
    } else {
        format_g(v, 17)
    }
}

/// C's `printf("%.*g", precision, v)` for a finite `v` (correctly rounded, ties to even, as
/// glibc prints).
fn format_g(v: f64, precision: usize) -> String {
    let precision = precision.max(1);
    let sign = if v.is_sign_negative() { "-" } else { "" };
    let a = v.abs();
    if a == 0.0 {
        return format!("{sign}0");
    }
    // The digits rounded to `precision` significant ones, and the exponent after rounding.
    let e = format!("{:.*e}", precision - 1, a);
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let strip = |frac: &str| -> String {
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            String::new()
        } else {
            format!(".{frac}")
        }
    };
    if exp < -4 || exp >= precision as i32 {
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!(
            "{sign}{}{}e{exp_sign}{:02}",
            &digits[..1],
            strip(&digits[1..]),
            exp.unsigned_abs()
        )
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        format!("{sign}{}{}", &digits[..int_len], strip(&digits[int_len..]))
    } else {
        let zeros = "0".repeat((-exp - 1) as usize);
        format!("{sign}0{}", strip(&format!("{zeros}{digits}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(message: &str, encoded: &[u8], style: TextStyle) -> String {
        debug_string(message, encoded, style).unwrap()
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))] // compared with glibc itself
    /// glibc's `%.*g`, protobuf's `FloatToBuffer` and `DoubleToBuffer` through libc.
    fn c_format_g(v: f64, precision: usize) -> String {
        let mut buf = [0u8; 64];
        // SAFETY: `buf` is 64 writable bytes; the format takes an int and a double.
        let n = unsafe {
            libc::snprintf(
                buf.as_mut_ptr().cast(),
                buf.len(),
                c"%.*g".as_ptr(),
                precision as libc::c_int,
                v,
            )
        };
        String::from_utf8(buf[..n as usize].to_vec()).unwrap()
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))] // compared with glibc itself
    fn c_simple_ftoa(v: f32) -> String {
        let short = c_format_g(v as f64, 6);
        let c = std::ffi::CString::new(short.clone()).unwrap();
        // SAFETY: `c` is NUL-terminated; errno is this thread's.
        let (parsed, errno) = unsafe {
            *libc::__errno_location() = 0;
            let p = libc::strtof(c.as_ptr(), std::ptr::null_mut());
            (p, *libc::__errno_location())
        };
        if errno == 0 && parsed == v {
            short
        } else {
            c_format_g(v as f64, 9)
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))] // compared with glibc itself
    fn c_simple_dtoa(v: f64) -> String {
        let short = c_format_g(v, 15);
        let c = std::ffi::CString::new(short.clone()).unwrap();
        // SAFETY: `c` is NUL-terminated.
        let parsed = unsafe { libc::strtod(c.as_ptr(), std::ptr::null_mut()) };
        if parsed == v {
            short
        } else {
            c_format_g(v, 17)
        }
    }

    /// A deterministic stream of bit patterns (xorshift64*).
    fn patterns(n: usize) -> impl Iterator<Item = u64> {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        (0..n).map(move |_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        })
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))] // compared with glibc itself
    #[test]
    fn floats_print_as_glibc_and_protobuf_do() {
        let mut floats = vec![
            0.0f32,
            -0.0,
            0.1,
            1e-5,
            123456789.0,
            123456.5,
            1.5,
            16777216.0,
            3.4028235e38,
            f32::MIN_POSITIVE,
            1e-45,
            1.1754942e-38,
            0.3,
            2.0f32.powi(-130),
            1e10,
            1e-10,
        ];
        floats.extend(patterns(300_000).map(|b| f32::from_bits(b as u32)));
        // Values with few significant digits, where ties and exponent changes happen.
        floats.extend((0..20_000).map(|i| (i as f32) * 0.5 + 0.25));
        for v in floats.into_iter().filter(|v| v.is_finite()) {
            assert_eq!(
                simple_ftoa(v),
                c_simple_ftoa(v),
                "float bits {:#x}",
                v.to_bits()
            );
        }
        let mut doubles = vec![
            0.0f64,
            -0.0,
            0.1,
            1e-5,
            123456789.0,
            123456789012345.5,
            1e300,
            f64::MIN_POSITIVE,
            5e-324,
            f64::MAX,
            0.3,
            1.0 / 3.0,
            2.5,
            1e21,
            1e-7,
        ];
        doubles.extend(patterns(300_000).map(f64::from_bits));
        doubles.extend(patterns(50_000).map(|b| (b >> 40) as f64 / 1024.0));
        for v in doubles.into_iter().filter(|v| v.is_finite()) {
            assert_eq!(
                simple_dtoa(v),
                c_simple_dtoa(v),
                "double bits {:#x}",
                v.to_bits()
            );
        }
        for p in 1..=17 {
            for v in [
                0.5,
                2.5,
                1e-4,
                9.5e-5,
                99999.5,
                0.000123456789,
                1e15,
                1e16,
                1e17,
            ] {
                assert_eq!(format_g(v, p), c_format_g(v, p), "{v} at precision {p}");
            }
        }
        assert_eq!(simple_ftoa(f32::NAN), "nan");
        assert_eq!(simple_ftoa(-f32::NAN), "nan");
        assert_eq!(simple_dtoa(f64::NEG_INFINITY), "-inf");
        assert_eq!(simple_ftoa(f32::INFINITY), "inf");
    }

    #[test]
    fn escapes_as_cescape() {
        let all: Vec<u8> = (0..=255).collect();
        let e = c_escape(&all, false);
        assert!(e.is_ascii());
        assert!(e.starts_with(b"\\000\\001"));
        assert_eq!(
            c_escape(b"\n\r\t\"'\\ ~\x7f\x80\xff", false),
            b"\\n\\r\\t\\\"\\'\\\\ ~\\177\\200\\377"
        );
        assert_eq!(c_escape("\u{e9}\x7f".as_bytes(), true), b"\xc3\xa9\\177");
        assert_eq!(c_escape(b"\xff", true), b"\xff");
    }

    /// `model_fields` then `graph { node { <node> } <graph_fields> }` (short bodies).
    fn model_with(model_fields: &[u8], node: &[u8], graph_fields: &[u8]) -> Vec<u8> {
        let mut graph = vec![0x0a, node.len() as u8];
        graph.extend_from_slice(node);
        graph.extend_from_slice(graph_fields);
        let mut model = model_fields.to_vec();
        model.extend_from_slice(&[0x3a, graph.len() as u8]);
        model.extend_from_slice(&graph);
        model
    }

    #[test]
    fn prints_nested_and_repeated_fields() {
        // graph { name: "g" node { input: "x" } } ir_version: 7
        let model = model_with(b"\x08\x07", b"\x0a\x01x", b"\x12\x01g");
        assert_eq!(
            text("ModelProto", &model, TextStyle::Debug),
            "ir_version: 7\ngraph {\n  node {\n    input: \"x\"\n  }\n  name: \"g\"\n}\n"
        );
        assert_eq!(
            text("ModelProto", &model, TextStyle::Short),
            "ir_version: 7 graph { node { input: \"x\" } name: \"g\" }"
        );
        // Packed floats, an enum by name, an unknown enum value among the unknown fields.
        let t = b"\x22\x08\x00\x00\xc0\x3f\x00\x00\x80\x7f\x70\x01\xa0\x01\x05";
        assert_eq!(
            text("TensorProto", t, TextStyle::Debug),
            "float_data: 1.5\nfloat_data: inf\ndata_location: EXTERNAL\n20: 5\n"
        );
        let a = b"\xa0\x01\x63";
        assert_eq!(text("AttributeProto", a, TextStyle::Short), "20: 99");
        assert_eq!(
            text("AttributeProto", b"\xa0\x01\x04", TextStyle::Short),
            "type: TENSOR"
        );
        assert_eq!(text("TensorProto.Segment", b"", TextStyle::Debug), "");
    }

    #[test]
    fn prints_unknown_fields_as_protobuf() {
        // 1000: 300, 1001: fixed64, 1002: "abc" (not a message), 1003: group, 1004: fixed32,
        // 1005: an embedded message, 1006: empty.
        let mut u = Vec::new();
        let tag = |u: &mut Vec<u8>, f: u32, wt: u32| wire::put_varint(u, ((f << 3) | wt) as u64);
        tag(&mut u, 1000, 0);
        wire::put_varint(&mut u, 300);
        tag(&mut u, 1001, 1);
        u.extend_from_slice(&12345u64.to_le_bytes());
        tag(&mut u, 1002, 2);
        u.extend_from_slice(b"\x03abc");
        tag(&mut u, 1003, 3);
        u.extend_from_slice(b"\x08\x07");
        tag(&mut u, 1003, 4);
        tag(&mut u, 1004, 5);
        u.extend_from_slice(&[0xff, 0xff, 0xff, 0x7f]);
        tag(&mut u, 1005, 2);
        u.extend_from_slice(b"\x04\x08\x01\x10\x02");
        tag(&mut u, 1006, 2);
        u.push(0);
        assert_eq!(
            text("OperatorSetIdProto", &u, TextStyle::Debug),
            "1000: 300\n1001: 0x0000000000003039\n1002: \"abc\"\n1003 {\n  1: 7\n}\n\
             1004: 0x7fffffff\n1005 {\n  1: 1\n  2: 2\n}\n1006: \"\"\n"
        );
        assert_eq!(
            text("OperatorSetIdProto", &u, TextStyle::Short),
            "1000: 300 1001: 0x0000000000003039 1002: \"abc\" 1003 { 1: 7 } 1004: 0x7fffffff \
             1005 { 1: 1 2: 2 } 1006: \"\""
        );
    }

    #[test]
    fn unknown_sets_parse_with_coded_stream_rules() {
        assert!(parse_unknown(b"\x08\x01", 10, false).is_some());
        // Field number 0, a zero tag, a lone end-group tag, wire types 6 and 7: not a set.
        for bad in [
            &b"\x00"[..],
            b"\x02\x00",
            b"\x08\x01\x00",
            b"\x0c",
            b"\x0e",
            b"\x0f",
        ] {
            assert!(parse_unknown(bad, 10, false).is_none(), "{bad:?}");
        }
        // A tag of 10 bytes keeps its low 32 bits.
        let long_tag = b"\x88\x80\x80\x80\x80\x80\x80\x80\x80\x01\x05";
        assert_eq!(
            parse_unknown(long_tag, 10, false).unwrap(),
            vec![UnknownField {
                number: 1,
                value: UnknownValue::Varint(5)
            }]
        );
        // Groups: matched, and at most `budget` deep.
        assert!(parse_unknown(b"\x0b\x0c", 1, false).is_some());
        assert!(parse_unknown(b"\x0b\x14", 1, false).is_none());
        assert!(parse_unknown(b"\x0b\x0b\x0c\x0c", 1, false).is_none());
        assert!(parse_unknown(b"\x0b\x0b\x0c\x0c", 2, false).is_some());
        // Field 0 inside a group only where the message parser keeps it.
        assert!(parse_unknown(b"\x0b\x00\x0c", 2, false).is_none());
        assert!(parse_unknown(b"\x0b\x02\x00\x0c", 2, true).is_some());
        // Lengths past the end or of 2^31 and more.
        assert!(parse_unknown(b"\x0a\x02a", 10, false).is_none());
        assert!(parse_unknown(b"\x0a\x80\x80\x80\x80\x08", 10, false).is_none());
    }

    #[test]
    fn mutated_inputs_print_or_fail_without_panicking() {
        // A model with nested messages, every scalar kind, strings and unknown fields.
        let mut node = b"\x0a\x01x\x2a\x0b\x0a\x01a\xa0\x01\x01\x15\x00\x00\xc0\x3f".to_vec();
        node.extend_from_slice(b"\xc3\x3e\x08\x01\x12\x02\x08\x02\xc4\x3e\xca\x3e\x02\x08\x05");
        let graph_rest =
            b"\x2a\x10\x22\x04\x00\x00\x80\x3f\x52\x08\x00\x00\x00\x00\x00\x00\xf0\x3f";
        let model = model_with(b"\x08\x07\x12\x02\xc3\xa9", &node, graph_rest);
        assert_eq!(
            text("ModelProto", &model, TextStyle::Short),
            "ir_version: 7 producer_name: \"\\303\\251\" graph { node { input: \"x\" attribute { \
             name: \"a\" f: 1.5 type: FLOAT } 1000 { 1: 1 2 { 1: 2 } } 1001 { 1: 5 } } \
             initializer { float_data: 1 double_data: 1 } }"
        );
        let mut printed = 0;
        for (i, bits) in patterns(20_000).enumerate() {
            let mut m = model.clone();
            let at = (bits % m.len() as u64) as usize;
            match i % 3 {
                0 => m[at] = (bits >> 32) as u8,
                1 => m.truncate(at),
                _ => m.insert(at, (bits >> 40) as u8),
            }
            let style = [TextStyle::Debug, TextStyle::Short, TextStyle::Utf8][i % 3];
            printed += usize::from(debug_bytes("ModelProto", &m, style).is_ok());
        }
        assert!(
            printed > 1000 && printed < 20_000,
            "{printed} of the mutated inputs printed"
        );
    }

    #[test]
    fn prints_messages_deeper_than_a_parse_allows_by_default() {
        // A graph nested 150 levels (node -> attribute g -> graph -> ...): deeper than the 100
        // levels a parse allows by default, as C++ setters can build. protobuf prints it all.
        let mut g = crate::proto::GraphProto::new();
        g.set_name("leaf");
        for _ in 0..150 {
            let mut outer = crate::proto::GraphProto::new();
            outer.add_node().add_attribute().set_g(g);
            g = outer;
        }
        let text = debug_bytes("GraphProto", &g.serialize_to_vec(), TextStyle::Debug).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert_eq!(text.matches("g {").count(), 150);
        assert!(text.contains("name: \"leaf\""));
    }

    #[test]
    fn malformed_input_and_unknown_names_are_errors() {
        assert!(debug_string("TensorProto", b"\x0a", TextStyle::Debug).is_err());
        assert!(debug_string("TensorProto", b"\x0b", TextStyle::Debug).is_err());
        assert!(debug_string("Nope", b"", TextStyle::Debug).is_err());
    }
}
