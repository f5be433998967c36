//! The wire format's reading side, nothing else: a bounded cursor over one byte slice that
//! reads tags, varints, fixed-size values and length prefixes, and skips values (groups
//! included), with offsets in errors absolute. What a parse does with the values (budgets,
//! payload homes, strings, messages) is [`Reader`](super::Reader)'s.

use super::{END_GROUP, FIXED32, FIXED64, LEN, MAX_FIELD_NUMBER, START_GROUP, VARINT};
use crate::error::{DecodeError, DecodeErrorKind};

type DResult<T> = Result<T, Box<DecodeError>>;

/// A bounded cursor over one input slice. All reads are checked against the end of the
/// current message (`limit`); groups nest at most `max_depth` deep.
pub struct Cursor<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
    /// End of the current message.
    pub(super) limit: usize,
    /// Absolute offset of `buf[0]` in the whole input (for errors).
    pub(super) base: u64,
    /// Nesting levels left (messages and groups).
    pub(super) depth_left: u32,
    /// The nesting limit (for errors).
    pub(super) max_depth: u32,
    /// Where the last tag read starts.
    pub(super) tag_start: usize,
    /// Whether a length prefix past its end is read through to the end (and recorded in
    /// `overrun`) instead of refused.
    read_through_overruns: bool,
    /// The first length prefix that ran past its end, read through.
    overrun: Option<Box<DecodeError>>,
}

impl<'a> Cursor<'a> {
    /// A cursor over all of `buf`, `max_depth` levels deep at most; a length prefix past
    /// its end is an error unless `read_through_overruns` (then it is read to the end and kept
    /// for [`Cursor::take_overrun`]).
    pub fn new(buf: &'a [u8], max_depth: u32, read_through_overruns: bool) -> Self {
        Self::part(
            buf,
            0,
            buf.len(),
            max_depth,
            max_depth,
            read_through_overruns,
        )
    }

    /// A cursor over `buf[start..end]` with `depth_left` of `max_depth` levels left.
    pub(super) fn part(
        buf: &'a [u8],
        start: usize,
        end: usize,
        depth_left: u32,
        max_depth: u32,
        read_through_overruns: bool,
    ) -> Self {
        Self {
            buf,
            pos: start,
            limit: end,
            base: 0,
            depth_left,
            max_depth,
            tag_start: start,
            read_through_overruns,
            overrun: None,
        }
    }

    /// Sets the absolute offset of `buf[0]` in the whole input (for error messages).
    pub fn set_base_offset(&mut self, base: u64) {
        self.base = base;
    }

    /// The whole input slice.
    pub fn input(&self) -> &'a [u8] {
        self.buf
    }

    /// Current position in the input slice.
    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }

    #[cold]
    pub(crate) fn err(&self, kind: DecodeErrorKind, at: usize) -> Box<DecodeError> {
        DecodeError::new(kind, self.base + at as u64)
    }

    /// The error of a refused allocation of `bytes` bytes for the item at `at`.
    #[cold]
    pub(crate) fn alloc_error(&self, bytes: usize, at: usize) -> Box<DecodeError> {
        self.err(
            DecodeErrorKind::OutOfMemory {
                bytes: bytes as u64,
            },
            at,
        )
    }

    /// True when the current message has no more bytes.
    #[inline]
    pub fn at_end(&self) -> bool {
        self.pos >= self.limit
    }

    /// Reads the next tag, or `None` at the end of the current message. Refuses field number 0,
    /// field numbers above 2^29-1, wire types 6 and 7, and an end-group tag (which is only valid
    /// inside a group).
    #[inline(always)]
    pub fn read_tag(&mut self) -> DResult<Option<u32>> {
        if self.pos >= self.limit {
            return Ok(None);
        }
        self.tag_start = self.pos;
        let b = self.buf[self.pos];
        // The common case: a one-byte tag (fields 1..=15) of wire type 0, 1, 2, 3 or 5.
        const ONE_BYTE_OK: u8 = 0b10_1111;
        if (8..0x80).contains(&b) && (ONE_BYTE_OK >> (b & 7)) & 1 != 0 {
            self.pos += 1;
            return Ok(Some(b as u32));
        }
        self.read_tag_slow()
    }

    /// [`Cursor::read_tag`] for multi-byte and invalid tags.
    #[inline(never)]
    fn read_tag_slow(&mut self) -> DResult<Option<u32>> {
        let tag = self.read_tag_value(false)?;
        if tag & 7 == END_GROUP {
            return Err(self.err(DecodeErrorKind::UnmatchedGroup(tag >> 3), self.tag_start));
        }
        Ok(Some(tag))
    }

    /// Reads and validates a tag value (any wire type 0..=5). Field number 0 is refused except
    /// inside unknown groups, where protobuf (upb) skips it like any other field.
    #[inline]
    fn read_tag_value(&mut self, in_group: bool) -> DResult<u32> {
        let start = self.pos;
        let b = self.buf[self.pos];
        let v = if b < 0x80 {
            self.pos += 1;
            b as u64
        } else {
            self.read_varint()?
        };
        if self.pos - start > 5 || v > u32::MAX as u64 {
            // protobuf reads tags as 32-bit varints of at most 5 bytes.
            return Err(self.err(DecodeErrorKind::InvalidFieldNumber(v >> 3), start));
        }
        let tag = v as u32;
        let field = tag >> 3;
        if (field == 0 && !in_group) || field > MAX_FIELD_NUMBER {
            return Err(self.err(DecodeErrorKind::InvalidFieldNumber(field as u64), start));
        }
        let wt = tag & 7;
        if wt > 5 {
            return Err(self.err(DecodeErrorKind::InvalidWireType(wt as u8), start));
        }
        Ok(tag)
    }

    /// Reads a varint (up to 10 bytes; bits past 64 are dropped, as protobuf does).
    #[inline]
    pub fn read_varint(&mut self) -> DResult<u64> {
        let start = self.pos;
        let avail = &self.buf[start..self.limit];
        if let Some(&b) = avail.first()
            && b < 0x80
        {
            self.pos += 1;
            return Ok(b as u64);
        }
        let mut v: u64 = 0;
        for (i, &b) in avail.iter().take(10).enumerate() {
            v |= ((b & 0x7f) as u64).wrapping_shl(7 * i as u32);
            if b < 0x80 {
                self.pos = start + i + 1;
                return Ok(v);
            }
        }
        if avail.len() >= 10 {
            Err(self.err(DecodeErrorKind::VarintOverflow, start))
        } else {
            Err(self.err(DecodeErrorKind::Truncated, start))
        }
    }

    /// Reads 4 little-endian bytes.
    #[inline]
    pub fn read_fixed32(&mut self) -> DResult<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads 8 little-endian bytes.
    #[inline]
    pub fn read_fixed64(&mut self) -> DResult<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    #[inline]
    fn take(&mut self, n: usize) -> DResult<&'a [u8]> {
        if self.limit - self.pos < n {
            return Err(self.err(DecodeErrorKind::Truncated, self.pos));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Reads a length prefix and checks it against the bytes left in the current message.
    #[inline(always)]
    pub fn read_len(&mut self) -> DResult<usize> {
        // The common case: a one-byte length that fits in the current message.
        if self.pos < self.limit {
            let b = self.buf[self.pos];
            if b < 0x80 && (b as usize) < self.limit - self.pos {
                self.pos += 1;
                return Ok(b as usize);
            }
        }
        self.read_len_slow()
    }

    /// [`Cursor::read_len`] for multi-byte and invalid lengths.
    #[inline(never)]
    fn read_len_slow(&mut self) -> DResult<usize> {
        let start = self.pos;
        let len = self.read_varint()?;
        // protobuf reads lengths as varints of at most 5 bytes; longer encodings are accepted
        // only when needed (lengths of 2^35 and more, beyond protobuf's own 2 GB limit).
        let used = (self.pos - start) as u64;
        if used > 5 && used > super::varint_len(len) {
            return Err(self.err(DecodeErrorKind::OverlongLength, start));
        }
        let available = (self.limit - self.pos) as u64;
        if len > available {
            let e = self.err(
                DecodeErrorKind::LengthPastEnd {
                    length: len,
                    available,
                },
                start,
            );
            if !self.read_through_overruns {
                return Err(e);
            }
            self.overrun.get_or_insert(e);
            return Ok(available as usize);
        }
        Ok(len as usize)
    }

    /// The first length prefix that ran past its end when the decode settings read through
    /// them (see [`Cursor::new`]); the parse's error.
    pub fn take_overrun(&mut self) -> Option<Box<DecodeError>> {
        self.overrun.take()
    }

    /// Reads a length-delimited field body.
    #[inline]
    pub fn read_bytes(&mut self) -> DResult<&'a [u8]> {
        let len = self.read_len()?;
        let s = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(s)
    }

    /// How many values of field `tag` stand in a row from the reader's position: the value
    /// right after `tag` (just read), then each value whose `tag` directly follows the previous
    /// one, counting at most `max`. A capacity hint for repeated fields (one allocation of the
    /// right size instead of several growing ones); it never fails: a malformed value ends the
    /// count, and the parse itself then reports it. Returns at least 1.
    #[inline]
    pub fn run_length(&self, tag: u32, max: usize) -> usize {
        let buf = &self.buf[..self.limit];
        let (mut p, mut n) = (self.pos, 0);
        if tag < 0x80 && tag & 7 == LEN {
            // The common case, with one-byte tags and lengths.
            while let Some(&len) = buf.get(p) {
                if len >= 0x80 {
                    return (n + self.run_length_slow(p, tag, max - n)).max(1);
                }
                p += 1 + len as usize;
                if p > buf.len() {
                    break;
                }
                n += 1;
                if n >= max || buf.get(p) != Some(&(tag as u8)) {
                    break;
                }
                p += 1;
            }
            return n.max(1);
        }
        self.run_length_slow(p, tag, max).max(1)
    }

    /// [`Cursor::run_length`] from position `p` for any tag and length (may return 0).
    #[inline(never)]
    fn run_length_slow(&self, mut p: usize, tag: u32, max: usize) -> usize {
        let mut enc = [0u8; 5];
        let mut tag_len = 0;
        let mut v = tag;
        loop {
            enc[tag_len] = (v as u8 & 0x7f) | if v >= 0x80 { 0x80 } else { 0 };
            tag_len += 1;
            v >>= 7;
            if v == 0 {
                break;
            }
        }
        let buf = &self.buf[..self.limit];
        let mut n = 0;
        while n < max {
            let Some(next) = value_end(buf, p, tag & 7) else {
                break;
            };
            n += 1;
            p = next;
            // Byte by byte (at most 5): a slice comparison calls `memcmp`, whose call costs more
            // than the comparison.
            let Some(next_tag) = buf.get(p..p + tag_len) else {
                break;
            };
            if next_tag.iter().zip(&enc).any(|(a, b)| a != b) {
                break;
            }
            p += tag_len;
        }
        n
    }

    /// Reads the `len` bytes of a packed varint run, calling `f` for each value.
    #[inline]
    pub(crate) fn packed_varints_body(
        &mut self,
        len: usize,
        mut f: impl FnMut(u64),
    ) -> DResult<()> {
        let end = self.pos + len;
        let saved_limit = self.limit;
        self.limit = end;
        while self.pos < end {
            let at = self.pos;
            match self.read_varint() {
                Ok(v) => f(v),
                Err(e) => {
                    self.limit = saved_limit;
                    return Err(if e.kind == DecodeErrorKind::Truncated {
                        self.err(DecodeErrorKind::BadPackedLength, at)
                    } else {
                        e
                    });
                }
            }
        }
        self.limit = saved_limit;
        Ok(())
    }

    /// Skips the value of a field whose tag was just read (groups recursively).
    pub fn skip_value(&mut self, tag: u32) -> DResult<()> {
        match tag & 7 {
            VARINT => {
                self.read_varint()?;
            }
            FIXED64 => {
                self.take(8)?;
            }
            LEN => {
                self.read_bytes()?;
            }
            FIXED32 => {
                self.take(4)?;
            }
            START_GROUP => match super::try_guard_stack(|| self.skip_group(tag >> 3)) {
                Ok(r) => r?,
                Err(bytes) => return Err(self.alloc_error(bytes, self.tag_start)),
            },
            _ => return Err(self.err(DecodeErrorKind::UnmatchedGroup(tag >> 3), self.tag_start)),
        }
        Ok(())
    }

    fn skip_group(&mut self, field: u32) -> DResult<()> {
        let group_start = self.tag_start;
        if self.depth_left == 0 {
            return Err(self.err(DecodeErrorKind::RecursionLimit(self.max_depth), group_start));
        }
        self.depth_left -= 1;
        let result = loop {
            if self.pos >= self.limit {
                break Err(self.err(DecodeErrorKind::UnmatchedGroup(field), group_start));
            }
            let at = self.pos;
            let tag = match self.read_tag_value(true) {
                Ok(t) => t,
                Err(e) => break Err(e),
            };
            if tag & 7 == END_GROUP {
                if tag >> 3 == field {
                    break Ok(());
                }
                break Err(self.err(DecodeErrorKind::UnmatchedGroup(tag >> 3), at));
            }
            self.tag_start = at;
            if let Err(e) = self.skip_value(tag) {
                break Err(e);
            }
        };
        self.depth_left += 1;
        result
    }
}

/// End of the value of wire type `wire_type` that starts at `buf[at]`, or `None` when it is
/// malformed, runs past `buf` or is a group.
fn value_end(buf: &[u8], at: usize, wire_type: u32) -> Option<usize> {
    let varint_end = |at: usize| -> Option<(u64, usize)> {
        let mut v = 0u64;
        for (i, &b) in buf.get(at..)?.iter().take(10).enumerate() {
            v |= ((b & 0x7f) as u64).wrapping_shl(7 * i as u32);
            if b < 0x80 {
                return Some((v, at + i + 1));
            }
        }
        None
    };
    let end = match wire_type {
        VARINT => varint_end(at)?.1,
        FIXED64 => at.checked_add(8)?,
        FIXED32 => at.checked_add(4)?,
        LEN => {
            let (len, body) = varint_end(at)?;
            body.checked_add(usize::try_from(len).ok()?)?
        }
        _ => return None,
    };
    (end <= buf.len()).then_some(end)
}
