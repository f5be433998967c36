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

    /// A float or double field.
    pub fn float(&mut self, name: &str, v: f64) {
        if self.line(name) {
            let s = if v.is_nan() {
                "nan".to_string()
            } else if v.is_infinite() {
                if v > 0.0 { "inf" } else { "-inf" }.to_string()
            } else {
                format!("{v}")
            };
            let _ = writeln!(self.buf, ": {s}");
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
        let text = if utf8 {
            std::str::from_utf8(shown).ok()
        } else {
            None
        };
        match text {
            Some(t) => {
                for c in t.chars() {
                    match c {
                        '"' => self.buf.push_str("\\\""),
                        '\\' => self.buf.push_str("\\\\"),
                        '\n' => self.buf.push_str("\\n"),
                        '\r' => self.buf.push_str("\\r"),
                        '\t' => self.buf.push_str("\\t"),
                        c if (c as u32) < 0x20 => {
                            let _ = write!(self.buf, "\\{:03o}", c as u32);
                        }
                        c => self.buf.push(c),
                    }
                }
            }
            None => {
                for &b in shown {
                    match b {
                        b'"' => self.buf.push_str("\\\""),
                        b'\\' => self.buf.push_str("\\\\"),
                        b'\n' => self.buf.push_str("\\n"),
                        b'\r' => self.buf.push_str("\\r"),
                        b'\t' => self.buf.push_str("\\t"),
                        b'\'' => self.buf.push_str("\\'"),
                        0x20..=0x7e => self.buf.push(b as char),
                        _ => {
                            let _ = write!(self.buf, "\\{b:03o}");
                        }
                    }
                }
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
