//! protobuf's text format (what `str(message)` prints), written by the generated `Msg::text`.

use std::fmt::Write;

/// A text-format writer.
pub struct TextOut {
    /// The text so far.
    pub buf: String,
    indent: usize,
    /// Longest bytes/string value printed in full; longer ones are abbreviated (`repr`).
    max_bytes: Option<usize>,
    /// Stop after this many bytes of output (`repr`); `truncated` is then set.
    max_len: Option<usize>,
    /// True when output was cut at `max_len`.
    pub truncated: bool,
}

impl TextOut {
    /// A writer of the full text.
    pub fn full() -> Self {
        TextOut {
            buf: String::new(),
            indent: 0,
            max_bytes: None,
            max_len: None,
            truncated: false,
        }
    }

    /// A writer of an abbreviated text (long values shortened, total length bounded).
    pub fn short(max_bytes: usize, max_len: usize) -> Self {
        TextOut {
            max_bytes: Some(max_bytes),
            max_len: Some(max_len),
            ..Self::full()
        }
    }

    fn line(&mut self, name: &str) -> bool {
        if let Some(m) = self.max_len
            && self.buf.len() >= m
        {
            self.truncated = true;
            return false;
        }
        for _ in 0..self.indent {
            self.buf.push_str("  ");
        }
        self.buf.push_str(name);
        true
    }

    /// An integer field.
    pub fn num(&mut self, name: &str, v: impl std::fmt::Display) {
        if self.line(name) {
            let _ = writeln!(self.buf, ": {v}");
        }
    }

    /// A `float` field, printed as protobuf's text encoder does: `%.6g` if that reads back as
    /// the same `f32`, else `%.9g`.
    pub fn float32(&mut self, name: &str, v: f32) {
        if self.line(name) {
            self.buf.push_str(": ");
            if v.is_nan() {
                self.buf.push_str("nan");
            } else {
                round_trip(&mut self.buf, v as f64, [6, 9], |s| {
                    s.parse::<f32>().is_ok_and(|x| x == v)
                });
            }
            self.buf.push('\n');
        }
    }

    /// A `double` field: `%.15g` if that reads back as the same `f64`, else `%.17g`.
    pub fn double(&mut self, name: &str, v: f64) {
        if self.line(name) {
            self.buf.push_str(": ");
            if v.is_nan() {
                self.buf.push_str("nan");
            } else {
                round_trip(&mut self.buf, v, [15, 17], |s| {
                    s.parse::<f64>().is_ok_and(|x| x == v)
                });
            }
            self.buf.push('\n');
        }
    }

    /// A closed enum field: its name when known.
    pub fn enumeration(&mut self, name: &str, v: i32, values: &[(&str, i32)]) {
        match values.iter().find(|(_, x)| *x == v) {
            Some((k, _)) => {
                if self.line(name) {
                    let _ = writeln!(self.buf, ": {k}");
                }
            }
            None => self.num(name, v),
        }
    }

    /// A string field (UTF-8 printed as is, other bytes escaped).
    pub fn string(&mut self, name: &str, v: &[u8]) {
        self.quoted(name, v, true)
    }

    /// A bytes field (non-printable and non-ASCII bytes escaped in octal).
    pub fn bytes(&mut self, name: &str, v: &[u8]) {
        self.quoted(name, v, false)
    }

    fn quoted(&mut self, name: &str, v: &[u8], utf8: bool) {
        if !self.line(name) {
            return;
        }
        self.buf.push_str(": \"");
        let shown = match self.max_bytes {
            Some(m) if v.len() > m => &v[..m],
            _ => v,
        };
        if utf8 {
            // Valid UTF-8 sequences pass through, bytes of invalid ones are escaped one by one.
            let mut rest = shown;
            while !rest.is_empty() {
                let (valid, bad) = match std::str::from_utf8(rest) {
                    Ok(t) => (t, false),
                    Err(e) => (
                        std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default(),
                        true,
                    ),
                };
                for c in valid.chars() {
                    if c.is_ascii() {
                        escape_ascii(&mut self.buf, c as u8);
                    } else {
                        self.buf.push(c);
                    }
                }
                rest = &rest[valid.len()..];
                if bad {
                    let _ = write!(self.buf, "\\{:03o}", rest[0]);
                    rest = &rest[1..];
                }
            }
        } else {
            for &b in shown {
                escape_ascii(&mut self.buf, b);
            }
        }
        self.buf.push('"');
        if shown.len() < v.len() {
            let _ = write!(self.buf, "  # {} bytes", v.len());
        }
        self.buf.push('\n');
    }

    /// Opens a sub-message.
    pub fn begin(&mut self, name: &str) {
        if self.line(name) {
            self.buf.push_str(" {\n");
        }
        self.indent += 1;
    }

    /// Closes a sub-message.
    pub fn end(&mut self) {
        self.indent -= 1;
        if self.line("") {
            self.buf.push_str("}\n");
        }
    }
}

/// One byte of a quoted value: printable ASCII as is (quotes and backslash escaped), `\n`,
/// `\r`, `\t` by name, everything else in octal.
fn escape_ascii(buf: &mut String, b: u8) {
    match b {
        b'\n' => buf.push_str("\\n"),
        b'\r' => buf.push_str("\\r"),
        b'\t' => buf.push_str("\\t"),
        b'"' => buf.push_str("\\\""),
        b'\'' => buf.push_str("\\'"),
        b'\\' => buf.push_str("\\\\"),
        0x20..=0x7e => buf.push(b as char),
        _ => {
            let _ = write!(buf, "\\{b:03o}");
        }
    }
}

/// Appends `v` as C's `%.{p}g` with the short precision `p` if `reads` accepts that text, else
/// with the long one, as protobuf's text encoder prints floating-point values.
fn round_trip(buf: &mut String, v: f64, [short, long]: [usize; 2], reads: impl Fn(&str) -> bool) {
    let mut s = String::new();
    format_g(&mut s, v, short);
    if !reads(&s) {
        s.clear();
        format_g(&mut s, v, long);
    }
    buf.push_str(&s);
}

/// C's `printf("%.{p}g", v)` for a finite or infinite `v` (correctly rounded, as glibc is).
fn format_g(out: &mut String, v: f64, p: usize) {
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "inf" } else { "-inf" });
        return;
    }
    let p = p.max(1);
    // The exponent is the one of `%.{p-1}e`, after rounding.
    let sci = format!("{:.*e}", p - 1, v);
    let (mant, exp) = sci.split_once('e').expect("exponent");
    let x: i32 = exp.parse().expect("exponent");
    if x < -4 || x >= p as i32 {
        out.push_str(strip_zeros(mant));
        let _ = write!(
            out,
            "e{}{:02}",
            if x < 0 { '-' } else { '+' },
            x.unsigned_abs()
        );
    } else {
        let fixed = format!("{:.*}", (p as i32 - 1 - x) as usize, v);
        out.push_str(strip_zeros(&fixed));
    }
}

/// `%g`'s removal of trailing zeros after a decimal point (and of the point itself).
fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}
