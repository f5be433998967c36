//! A sparse image of a message read from a source with ranged reads: the schema is walked and
//! the tensor payloads of at least a threshold are skipped by their length prefix, never read.
//! The bytes read land at their own offsets in a zeroed region of the source's size whose
//! untouched pages cost nothing; a parse then reads that region as it would read the whole
//! input. The parse must not read a skipped payload: either it drops it (`skip_raw_data` with
//! the same threshold, remote metadata-only loads) or it reads it from the source itself
//! ([`crate::wire::Reader::sparse_input`]: the C++ classes' `ParseFromIstream`).

use crate::error::{Error, Result};
use crate::mem::ReusableMap;
use crate::proto::{PAYLOAD_FIELD, PAYLOAD_PATHS, payload_walk_index};
use crate::wire::ReadSource;

/// Granule of the read-bytes map, and the first read after a skip.
const BLOCK: u64 = 16 << 10;
/// Largest read-ahead of a sequential run of metadata.
const MAX_AHEAD: u64 = 8 << 20;

/// A region of a source's size that a parse reads as its input. Its bytes outside the ranges
/// read are never looked at (they hold zeros or an earlier image's bytes), so it is never
/// cleared: large images are mappings taken back from [`crate::mem`]'s store (the parse of a
/// file after others writes to pages already there: no fault, no zero fill) or fresh ones (the
/// system's zero pages: untouched pages cost nothing); small ones are zeroed heap memory.
pub(crate) struct Image(ImageMemory);

enum ImageMemory {
    Heap(Box<[u8]>),
    Map(ReusableMap),
}

/// Images of at least this many bytes are mappings. Below, clearing heap memory costs less
/// than a mapping's system calls, and the heap often has the pages already (the parse of a
/// 0.6 MB model after larger ones: ~110 fewer page faults than a mapping, measured).
const MAP_MIN: u64 = 1 << 20;

impl Image {
    /// A region of `len` bytes for a parse whose model keeps it (its strings and no-copy
    /// payloads point into it); the error names `what`.
    #[cfg(any(test, feature = "remote"))]
    pub(crate) fn new(len: u64, what: &str) -> Result<Self> {
        Self::make(len, what, false)
    }

    /// A region of `len` bytes given back when the parse ends (the C++ classes' parse copies
    /// what it keeps): any larger kept mapping will do (see [`ReusableMap::scratch`]).
    pub(crate) fn scratch(len: u64, what: &str) -> Result<Self> {
        Self::make(len, what, true)
    }

    #[inline(never)]
    fn make(len: u64, what: &str, scratch: bool) -> Result<Self> {
        let failed = || Error::alloc_failed(len, what);
        let n = usize::try_from(len).map_err(|_| failed())?;
        if len >= MAP_MIN {
            let map = match scratch {
                true => ReusableMap::scratch(n),
                false => ReusableMap::new(n),
            };
            return Ok(Self(ImageMemory::Map(map.map_err(|_| failed())?)));
        }
        if n == 0 {
            return Ok(Self(ImageMemory::Heap(Box::default())));
        }
        let layout = std::alloc::Layout::array::<u8>(n).map_err(|_| failed())?;
        // SAFETY: `layout` has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return Err(failed());
        }
        // SAFETY: `p` is a fresh zeroed allocation of `n` bytes of the global allocator with the
        // layout `Box<[u8]>` frees it with.
        Ok(Self(ImageMemory::Heap(unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n))
        })))
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.0 {
            ImageMemory::Heap(b) => b,
            ImageMemory::Map(m) => m,
        }
    }

    /// Records that the first `bytes` bytes hold what was read (see
    /// [`ReusableMap::note_written`]).
    fn note_written(&mut self, bytes: usize) {
        if let ImageMemory::Map(m) = &mut self.0 {
            m.note_written(bytes);
        }
    }
}

impl AsRef<[u8]> for Image {
    fn as_ref(&self) -> &[u8] {
        match &self.0 {
            ImageMemory::Heap(b) => b,
            ImageMemory::Map(m) => m,
        }
    }
}

/// Reads `dst.len()` bytes of the source at an offset (all of them, or an error).
pub(crate) type RangeRead<'a> = dyn FnMut(u64, &mut [u8]) -> Result<()> + 'a;

struct Walker<'a, 'r> {
    read: &'a mut RangeRead<'r>,
    size: u64,
    image: Image,
    /// Which blocks are in `image`.
    have: Vec<bool>,
    /// End of the last read, and the read-ahead that grows while reads follow each other.
    last_end: u64,
    ahead: u64,
    threshold: u64,
    max_depth: u32,
}

impl Walker<'_, '_> {
    /// Makes `a..b` (clamped to the source) present, reading the missing blocks.
    #[inline(never)]
    fn ensure(&mut self, a: u64, b: u64) -> Result<()> {
        let b = b.min(self.size);
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
            let mut end = (b.max(start + self.ahead).div_ceil(BLOCK) * BLOCK).min(self.size);
            // (stop before a block already present)
            let mut last = blk;
            while (last + 1) * BLOCK < end && !self.have[(last + 1) as usize] {
                last += 1;
            }
            end = end.min((last + 1) * BLOCK);
            let dst = &mut self.image.bytes_mut()[start as usize..end as usize];
            (self.read)(start, dst)?;
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
        let stop = end.min(*pos + 10);
        self.ensure(*pos, stop)?;
        let mut v = 0u64;
        for (i, &b) in self.image.as_ref()[*pos as usize..stop as usize]
            .iter()
            .enumerate()
        {
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                *pos += i as u64 + 1;
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// Reads the fields of message `msg` (numbered as in `PAYLOAD_PATHS`) at `start..end`; what
    /// it cannot follow (malformed input, groups, depth past the limit) is read whole, for the
    /// parse to judge.
    fn walk(&mut self, msg: u8, start: u64, end: u64, depth: u32) -> Result<()> {
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
                    // (a message shorter than the threshold holds no payload to skip)
                    let target = PAYLOAD_PATHS
                        .iter()
                        .find(|&&(m, n, _)| m == msg && u64::from(n) == tag >> 3)
                        .filter(|_| len >= self.threshold && len > 0);
                    match target {
                        Some(&(_, _, PAYLOAD_FIELD)) => {}
                        Some(&(_, _, sub)) => self.walk(sub, pos, body_end, depth + 1)?,
                        None => self.ensure(pos, body_end)?,
                    }
                    body_end
                }
                _ => return self.ensure(pos, end),
            };
        }
        Ok(())
    }
}

/// The image of a `message` (its schema name) read through `read` into `image` (of the
/// source's size), with every byte a parse reads except the payloads (`TensorProto.raw_data`)
/// of at least `threshold` bytes; messages nested deeper than `max_depth` are read whole.
pub(crate) fn sparse_image(
    message: &str,
    image: Image,
    threshold: u64,
    max_depth: u32,
    read: &mut RangeRead<'_>,
) -> Result<Image> {
    let size = image.as_ref().len() as u64;
    let blocks = size.div_ceil(BLOCK) as usize;
    let mut w = Walker {
        read,
        size,
        image,
        have: vec![false; blocks],
        last_end: u64::MAX,
        ahead: BLOCK,
        threshold,
        max_depth,
    };
    match payload_walk_index(message) {
        Some(msg) => w.walk(msg, 0, size, 0)?,
        None => w.ensure(0, size)?,
    }
    let read_prefix = w.have.iter().position(|&h| !h).unwrap_or(blocks) as u64 * BLOCK;
    w.image.note_written(read_prefix.min(size) as usize);
    Ok(w.image)
}

/// The sparse image of a `message` of `size` bytes read from `read` (which fills the buffer
/// from an offset, all of it, or says false), without its payloads of at least `min` (> 0)
/// bytes: the parse of the image takes `read` as its `DecodeConfig::read_source` and
/// `Reader::sparse_input(min)` reads those payloads from it. A failed read of the structure is
/// an I/O error naming `what` and the offset.
pub(crate) fn sparse_input(
    message: &str,
    size: u64,
    min: usize,
    max_depth: u32,
    read: &ReadSource,
    what: &str,
) -> Result<Image> {
    sparse_image(
        message,
        Image::scratch(size, what)?,
        min as u64,
        max_depth,
        &mut |offset, dst| match read(offset as usize, dst) {
            true => Ok(()),
            false => Err(Error::io(
                format!("{what} at offset {offset}"),
                std::io::ErrorKind::UnexpectedEof.into(),
            )),
        },
    )
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::proto::ModelProto;
    use crate::wire::{DecodeConfig, Message, ReadSource, Reader};

    /// A model with payloads of 1 KiB to 200 KiB in the graph, an attribute and a subgraph.
    fn model() -> ModelProto {
        let mut m = ModelProto::new();
        m.set_ir_version(10);
        let g = m.mutable_graph();
        for (i, len) in [200usize << 10, 1 << 10, 40 << 10, 32 << 10, (32 << 10) - 1]
            .iter()
            .enumerate()
        {
            let t = g.add_initializer();
            t.set_name(format!("w{i}"));
            t.set_raw_data((0..*len).map(|k| (k * 7 + i) as u8).collect::<Vec<u8>>());
        }
        let n = g.add_node();
        n.set_op_type("Constant");
        let a = n.add_attribute();
        a.set_name("value");
        a.mutable_t().set_raw_data(vec![5u8; 64 << 10]);
        let b = n.add_attribute();
        b.set_name("body");
        b.mutable_g()
            .add_initializer()
            .set_raw_data(vec![9u8; 50 << 10]);
        m
    }

    #[test]
    fn the_image_lacks_exactly_the_large_payloads_and_a_parse_reads_them_from_the_source() {
        let m = model();
        let bytes = Arc::new(m.serialize_to_vec());
        let min = 32usize << 10;
        let mut read_bytes = 0u64;
        let image = sparse_image(
            "ModelProto",
            Image::new(bytes.len() as u64, "test").unwrap(),
            min as u64,
            100,
            &mut |at, dst| {
                read_bytes += dst.len() as u64;
                dst.copy_from_slice(&bytes[at as usize..at as usize + dst.len()]);
                Ok(())
            },
        )
        .unwrap();
        // The payloads of at least `min` bytes (200 + 40 + 32 + 64 + 50 KiB) were not read
        // (block granularity: at most a block of each boundary).
        let large = (200 + 40 + 32 + 64 + 50) << 10;
        assert!(
            read_bytes <= bytes.len() as u64 - large + 10 * BLOCK,
            "{read_bytes} of {}",
            bytes.len()
        );
        assert_ne!(image.as_ref(), &bytes[..]);
        // A parse of the image that reads those payloads from the source is the model.
        let reads = Arc::new(Mutex::new(Vec::new()));
        let (src, log) = (bytes.clone(), reads.clone());
        let read: ReadSource = Arc::new(move |at, dst: &mut [u8]| {
            log.lock().unwrap().push(dst.len());
            dst.copy_from_slice(&src[at..][..dst.len()]);
            true
        });
        let image =
            sparse_input("ModelProto", bytes.len() as u64, min, 100, &read, "test").unwrap();
        reads.lock().unwrap().clear(); // (the structure's reads)
        assert_eq!(parse_image(image.as_ref(), read, min).unwrap(), m);
        let mut sizes = reads.lock().unwrap().clone();
        sizes.sort_unstable();
        assert_eq!(sizes, [32 << 10, 40 << 10, 50 << 10, 64 << 10, 200 << 10]);
        // A failed read of the source fails the parse.
        let fail: ReadSource = Arc::new(|_, _: &mut [u8]| false);
        assert!(parse_image(image.as_ref(), fail, min).is_err());
    }

    /// A parse of a sparse image whose payloads of at least `min` bytes come from `read`.
    fn parse_image(image: &[u8], read: ReadSource, min: usize) -> crate::Result<ModelProto> {
        let cfg = DecodeConfig {
            read_source: Some(read),
            ..DecodeConfig::default()
        };
        let mut parsed = ModelProto::new();
        let mut r = Reader::new(image, &cfg);
        r.sparse_input(min);
        parsed.merge_from(&mut r)?;
        Ok(parsed)
    }

    #[test]
    fn the_bytes_of_an_earlier_image_in_the_holes_are_never_read() {
        // An image in a mapping whose every byte is left over from an earlier use (never
        // cleared): the skipped payloads' ranges keep that garbage, and the parse, which reads
        // them from the source, still gives the model.
        let m = model();
        let bytes = Arc::new(m.serialize_to_vec());
        let min = 32usize << 10;
        let mut map = ReusableMap::resident(bytes.len()).unwrap();
        map.fill(0xA5);
        let src = bytes.clone();
        let image = sparse_image(
            "ModelProto",
            Image(ImageMemory::Map(map)),
            min as u64,
            100,
            &mut |at, dst| {
                dst.copy_from_slice(&src[at as usize..at as usize + dst.len()]);
                Ok(())
            },
        )
        .unwrap();
        assert!(
            image
                .as_ref()
                .windows(4096)
                .any(|w| w.iter().all(|&b| b == 0xA5))
        );
        let src = bytes.clone();
        let read: ReadSource = Arc::new(move |at, dst: &mut [u8]| {
            dst.copy_from_slice(&src[at..][..dst.len()]);
            true
        });
        assert_eq!(parse_image(image.as_ref(), read, min).unwrap(), m);
    }

    #[test]
    fn a_failed_read_of_the_structure_is_the_error() {
        let bytes = model().serialize_to_vec();
        let r = sparse_image(
            "ModelProto",
            Image::new(bytes.len() as u64, "test").unwrap(),
            32 << 10,
            100,
            &mut |_, _| Err(Error::Unsupported("no read".into())),
        );
        assert!(matches!(r, Err(Error::Unsupported(_))));
    }
}
