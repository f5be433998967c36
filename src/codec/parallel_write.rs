//! Parallel serialization: the metadata is encoded sequentially (sizes are known beforehand, so
//! every byte has a fixed position), large tensor payloads are only given their place, and then
//! copied (into memory) or written (into a file, with `pwrite`) by several threads at once.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};

use crate::storage::par::{ThreadPool, prelude::*};

use crate::error::{Error, Result};
use crate::storage::Piece;
use crate::wire::{DynMessage, SizeTable, SliceWriter, Spill, encode_streaming};

/// Piece size of the parallel phase (large tensors are split so threads share the work).
const PIECE_BYTES: usize = 8 << 20;

/// A payload to place at `offset` of the output.
struct Job {
    offset: u64,
    src: *const u8,
    len: usize,
}

// SAFETY: `src` points into a tensor of the message being serialized, which the caller borrows
// immutably for the whole serialization (jobs never outlive `serialize_*_parallel`); the bytes are
// only read.
unsafe impl Send for Job {}
// SAFETY: see `Send`.
unsafe impl Sync for Job {}

impl Job {
    fn bytes(&self) -> &[u8] {
        // SAFETY: see the `Send` impl: the borrowed message keeps `src..src+len` alive and
        // unmodified while jobs exist.
        unsafe { std::slice::from_raw_parts(self.src, self.len) }
    }

    /// Splits into pieces of at most `PIECE_BYTES`.
    fn pieces(&self) -> impl Iterator<Item = Job> + '_ {
        (0..self.len).step_by(PIECE_BYTES).map(|start| Job {
            offset: self.offset + start as u64,
            // SAFETY: `start < len`, so the pointer stays inside the payload.
            src: unsafe { self.src.add(start) },
            len: PIECE_BYTES.min(self.len - start),
        })
    }
}

/// The payloads a [`SliceWriter`] leaves gaps for, to be placed by the parallel phase.
#[derive(Default)]
struct Deferred {
    jobs: Vec<Job>,
}

impl Deferred {
    fn record(&mut self, offset: u64, bytes: &[u8]) {
        self.jobs.push(Job {
            offset,
            src: bytes.as_ptr(),
            len: bytes.len(),
        });
    }
}

impl Spill for Deferred {
    /// Not called: the writer of a [`Deferred`] has the whole output as its buffer.
    fn take(&mut self, _bytes: &[u8]) {
        unreachable!("a deferring writer never spills its buffer")
    }

    fn defer(&mut self, offset: u64, bytes: &[u8]) -> bool {
        self.record(offset, bytes);
        true
    }
}

/// Asks for transparent huge pages on the page-aligned part of `buf` (fewer page faults when a
/// large fresh buffer is filled). Advisory only; a no-op where there is no such advice.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn advise_huge_pages(buf: &mut [u8]) {
    const PAGE: usize = 4096;
    let start = buf.as_mut_ptr() as usize;
    let aligned = start.next_multiple_of(PAGE);
    let end = start + buf.len();
    if end > aligned + (2 << 20) {
        let len = (end - aligned) / PAGE * PAGE;
        // SAFETY: `aligned..aligned+len` lies inside `buf`, which we borrow mutably; MADV_HUGEPAGE
        // changes no contents, only how the kernel backs the pages.
        unsafe {
            libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn advise_huge_pages(_buf: &mut [u8]) {}

/// Serializes `m` (whose sizes are `sizes`, total `len`) into a new buffer; payloads are copied
/// by `pool`'s threads.
pub(super) fn serialize_to_vec_parallel(
    m: &dyn DynMessage,
    len: usize,
    sizes: &SizeTable,
    pool: &ThreadPool,
) -> Vec<u8> {
    // Zeroed allocation: large ones come straight from the kernel, untouched until written, so
    // the page faults happen in the parallel phase.
    let mut out = vec![0u8; len];
    advise_huge_pages(&mut out);
    serialize_into_slice(m, &mut out, sizes, Some(pool));
    out
}

/// Serializes `m` (whose sizes are `sizes`, total `out.len()`) into `out`: the metadata in
/// order, then the large payloads, copied by `pool`'s threads when there is a pool.
pub(super) fn serialize_into_slice(
    m: &dyn DynMessage,
    out: &mut [u8],
    sizes: &SizeTable,
    pool: Option<&ThreadPool>,
) {
    let len = out.len();
    let mut deferred = Deferred::default();
    {
        let mut w = SliceWriter::deferring(out, &mut deferred);
        m.encode_into(&mut w, &mut sizes.cursor());
        assert_eq!(
            w.written(),
            len,
            "encoded size differs from the computed size"
        );
    }
    let jobs = deferred.jobs;
    // Carve the output into disjoint destination slices, one per piece, in offset order.
    let pieces: Vec<Job> = jobs.iter().flat_map(Job::pieces).collect();
    let mut targets: Vec<(&mut [u8], &Job)> = Vec::with_capacity(pieces.len());
    let mut rest: &mut [u8] = out;
    let mut consumed = 0usize;
    for p in &pieces {
        let (_, tail) = rest.split_at_mut(p.offset as usize - consumed);
        let (dst, tail) = tail.split_at_mut(p.len);
        targets.push((dst, p));
        rest = tail;
        consumed = p.offset as usize + p.len;
    }
    match pool {
        Some(pool) if targets.len() > 1 => pool.install(|| {
            targets
                .into_par_iter()
                .for_each(|(dst, p)| dst.copy_from_slice(p.bytes()))
        }),
        _ => targets
            .into_iter()
            .for_each(|(dst, p)| dst.copy_from_slice(p.bytes())),
    }
}

/// The file of the parallel file writer's sequential phase: the writer's full buffers are
/// written in order, a deferred payload is a forward seek.
struct FileOut<'a> {
    file: &'a File,
    deferred: Deferred,
    error: Option<io::Error>,
}

impl FileOut<'_> {
    fn keep_error(&mut self, r: io::Result<()>) {
        if let Err(e) = r
            && self.error.is_none()
        {
            self.error = Some(e);
        }
    }
}

impl Spill for FileOut<'_> {
    fn take(&mut self, bytes: &[u8]) {
        if self.error.is_none() {
            let r = self.file.write_all(bytes);
            self.keep_error(r);
        }
    }

    fn defer(&mut self, offset: u64, bytes: &[u8]) -> bool {
        if self.error.is_none() {
            let r = self
                .file
                .seek(SeekFrom::Current(bytes.len() as i64))
                .map(drop);
            self.keep_error(r);
        }
        self.deferred.record(offset, bytes);
        true
    }
}

/// Serializes `m` into `file` (positioned at 0, empty): metadata sequentially, payloads with
/// positional writes into the pre-sized file (in parallel on `pool`'s threads when given).
pub(super) fn write_file_parallel(
    m: &dyn DynMessage,
    len: u64,
    sizes: &SizeTable,
    file: &File,
    path: &std::path::Path,
    pool: Option<&ThreadPool>,
) -> Result<()> {
    let io_err = |e| Error::io(path, e);
    crate::storage::presize(file, len).map_err(io_err)?;
    let mut out = FileOut {
        file,
        deferred: Deferred::default(),
        error: None,
    };
    encode_streaming(m, sizes, len, &mut out);
    if let Some(e) = out.error.take() {
        return Err(io_err(e));
    }
    let jobs = out.deferred.jobs;
    let pieces: Vec<Piece<'_>> = jobs
        .iter()
        .flat_map(|job| {
            job.bytes()
                .chunks(PIECE_BYTES)
                .enumerate()
                .map(move |(k, bytes)| Piece {
                    file,
                    offset: job.offset + (k * PIECE_BYTES) as u64,
                    bytes,
                })
        })
        .collect();
    crate::storage::write_pieces(&pieces, pool, &|_| {})
        .map(drop)
        .map_err(|(_, e)| io_err(e))
}
