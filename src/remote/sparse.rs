//! A metadata-only load of a remote model (`skip_raw_data`): the message structure is read with
//! ranged reads, walking the schema, and the tensor payloads the parse drops are skipped by
//! their length prefix, never fetched. The bytes read land at their own offsets in a region of
//! the object's size whose untouched pages cost nothing; the parse then reads that region as it
//! would read the whole file, and the rule that drops a payload is the parser's own
//! (`TensorProto.raw_data` of at least `raw_data_threshold` bytes), so it never reads a byte that
//! was not fetched.

use super::RemoteOptions;
use super::fetch::{Image, Object};
use crate::codec::ParseOptions;
use crate::error::Result;
use crate::proto::schema::{Kind, MessageDef, message};

/// Granule of the fetched-bytes map, and the first read after a skip.
const BLOCK: u64 = 16 << 10;
/// Largest read-ahead of a sequential run of metadata.
const MAX_AHEAD: u64 = 8 << 20;

struct Walker<'a> {
    obj: &'a Object,
    ro: &'a RemoteOptions,
    image: Image,
    /// Which blocks are in `image`.
    have: Vec<bool>,
    /// End of the last read, and the read-ahead that grows while reads follow each other.
    last_end: u64,
    ahead: u64,
    threshold: u64,
    max_depth: u32,
}

impl Walker<'_> {
    /// Makes `a..b` (clamped to the object) present, reading the missing blocks.
    fn ensure(&mut self, a: u64, b: u64) -> Result<()> {
        let b = b.min(self.obj.size);
        let mut blk = a / BLOCK;
        while blk * BLOCK < b {
            if self.have[blk as usize] {
                blk += 1;
                continue;
            }
            let start = blk * BLOCK;
            self.ahead = if start == self.last_end {
                (self.ahead * 2).min(MAX_AHEAD)
            } else {
                BLOCK
            };
            // (whole blocks: a block is marked present only when all of it was read)
            let mut end = (b.max(start + self.ahead).div_ceil(BLOCK) * BLOCK).min(self.obj.size);
            // (stop before a block already present)
            let mut last = blk;
            while (last + 1) * BLOCK < end && !self.have[(last + 1) as usize] {
                last += 1;
            }
            end = end.min((last + 1) * BLOCK);
            let dst = &mut self.image.bytes_mut()[start as usize..end as usize];
            self.obj.read_range(start, dst, self.ro)?;
            for h in &mut self.have[blk as usize..=last as usize] {
                *h = true;
            }
            self.last_end = end;
            blk = last + 1;
        }
        Ok(())
    }

    /// A varint at `*pos` (before `end`), or `None` when it is malformed or cut.
    fn varint(&mut self, pos: &mut u64, end: u64) -> Result<Option<u64>> {
        self.ensure(*pos, (*pos + 10).min(end))?;
        let bytes = self.image.as_ref();
        let mut v = 0u64;
        for i in 0..10u64 {
            let p = *pos + i;
            if p >= end {
                return Ok(None);
            }
            let b = bytes[p as usize];
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                *pos = p + 1;
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// Reads the fields of a `def` message at `start..end`; what it cannot follow (malformed
    /// input, groups, depth past the limit) is read whole, for the parse to judge.
    fn walk(&mut self, def: &'static MessageDef, start: u64, end: u64, depth: u32) -> Result<()> {
        if depth > self.max_depth {
            return self.ensure(start, end);
        }
        let mut pos = start;
        while pos < end {
            let Some(tag) = self.varint(&mut pos, end)? else {
                return self.ensure(pos, end);
            };
            pos = match tag & 7 {
                0 => match self.varint(&mut pos, end)? {
                    Some(_) => pos,
                    None => return self.ensure(pos, end),
                },
                1 | 5 => {
                    let next = pos + if tag & 7 == 1 { 8 } else { 4 };
                    self.ensure(pos, next.min(end))?;
                    next
                }
                2 => {
                    let Some(len) = self.varint(&mut pos, end)? else {
                        return self.ensure(pos, end);
                    };
                    let Some(body_end) = pos.checked_add(len).filter(|&e| e <= end) else {
                        return self.ensure(pos, end);
                    };
                    let field = u32::try_from(tag >> 3).ok().and_then(|n| def.field(n));
                    match field.map(|f| f.kind) {
                        Some(Kind::Payload) if len >= self.threshold && len > 0 => {}
                        Some(Kind::Message(name)) => match message(name) {
                            Some(sub) => self.walk(sub, pos, body_end, depth + 1)?,
                            None => self.ensure(pos, body_end)?,
                        },
                        _ => self.ensure(pos, body_end)?,
                    }
                    body_end
                }
                _ => return self.ensure(pos, end),
            };
        }
        Ok(())
    }
}

/// The region of `obj` with every byte a `skip_raw_data` parse of a `def` message reads.
pub(crate) fn metadata_image(
    obj: &Object,
    def: &'static MessageDef,
    opts: &ParseOptions,
    ro: &RemoteOptions,
) -> Result<Image> {
    let blocks = obj.size.div_ceil(BLOCK) as usize;
    let mut w = Walker {
        obj,
        ro,
        image: Image::new(obj.size, &obj.loc.url)?,
        have: vec![false; blocks],
        last_end: u64::MAX,
        ahead: BLOCK,
        threshold: opts.raw_data_threshold,
        max_depth: opts.max_recursion_depth,
    };
    w.walk(def, 0, obj.size, 0)?;
    Ok(w.image)
}
