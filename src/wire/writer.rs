//! Encoding side of the wire format.
//!
//! Encoding is two passes: `compute_size` records the size of every embedded message in
//! pre-order into a `Vec<u64>`, then `encode_to` writes forward, reading those sizes back in the
//! same order through a [`SizeCursor`]. Tensor payloads go to the sink with
//! [`Sink::put_payload`] so a file sink can write them straight from where they are.

use std::marker::PhantomData;
use std::mem::MaybeUninit;

/// Where encoded bytes go. Errors (e.g. I/O) are the sink's to record; encoding never fails.
pub trait Sink {
    /// Appends bytes.
    fn put(&mut self, bytes: &[u8]);
    /// Appends a (possibly large) tensor payload.
    #[inline]
    fn put_payload(&mut self, bytes: &[u8]) {
        self.put(bytes);
    }
    /// Appends `v` as a varint.
    #[inline]
    fn put_varint(&mut self, v: u64) {
        if v < 0x80 {
            self.put(&[v as u8]);
            return;
        }
        let mut buf = [0u8; 10];
        let n = encode_varint(v, &mut buf);
        self.put(&buf[..n]);
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Writes `v` as a varint.
#[inline(always)]
pub fn put_varint<S: Sink + ?Sized>(s: &mut S, v: u64) {
    s.put_varint(v);
}

/// A [`Sink`] over a buffer of exactly the planned size (the serializers that know the size
/// first): each write is a bounds check and a copy through a pointer, short copies inline
/// instead of a call to `memcpy`. A write past the end panics (the size plan was wrong), before
/// anything is written out of bounds.
pub struct SliceWriter<'a> {
    at: *mut u8,
    end: *mut u8,
    start: *mut u8,
    _buf: PhantomData<&'a mut [MaybeUninit<u8>]>,
}

impl<'a> SliceWriter<'a> {
    /// A writer at the start of `buf`, whose bytes may be uninitialized (e.g. a `Vec`'s spare
    /// capacity): the first [`SliceWriter::written`] bytes are initialized afterwards.
    pub fn new_uninit(buf: &'a mut [MaybeUninit<u8>]) -> Self {
        let start = buf.as_mut_ptr().cast::<u8>();
        Self {
            at: start,
            // SAFETY: one past the end of `buf`.
            end: unsafe { start.add(buf.len()) },
            start,
            _buf: PhantomData,
        }
    }

    /// A writer at the start of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        // SAFETY: `u8` and `MaybeUninit<u8>` have the same layout, and only initialized bytes
        // are ever written through the view (nothing makes them uninitialized).
        Self::new_uninit(unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) })
    }

    /// Bytes written (or skipped) so far.
    #[inline]
    pub fn written(&self) -> usize {
        self.at as usize - self.start as usize
    }

    /// Bytes left.
    #[inline(always)]
    fn room(&self) -> usize {
        self.end as usize - self.at as usize
    }

    /// Moves on by `n` bytes without writing them: they keep what they held, so this is only
    /// for a writer made with [`SliceWriter::new`] (initialized bytes).
    pub(crate) fn skip(&mut self, n: usize) {
        assert!(n <= self.room(), "{}", OVERFLOW);
        // SAFETY: at most `room` bytes on, inside the buffer.
        self.at = unsafe { self.at.add(n) };
    }
}

/// The message of a write past the end of a [`SliceWriter`].
const OVERFLOW: &str = "encoded size differs from the computed size";

#[cold]
#[inline(never)]
fn overflow() -> ! {
    panic!("{}", OVERFLOW)
}

impl Sink for SliceWriter<'_> {
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        if bytes.len() > self.room() {
            overflow();
        }
        // SAFETY: `bytes.len()` bytes of room at `at` (checked above), and the caller's slice
        // cannot overlap the buffer this writer borrows exclusively.
        unsafe {
            copy_short(bytes, self.at);
            self.at = self.at.add(bytes.len());
        }
    }

    #[inline(always)]
    fn put_varint(&mut self, v: u64) {
        if self.room() < 10 {
            let mut buf = [0u8; 10];
            let n = encode_varint(v, &mut buf);
            self.put(&buf[..n]);
            return;
        }
        // SAFETY: at least 10 bytes of room, the longest varint.
        unsafe {
            let mut v = v;
            while v >= 0x80 {
                self.at.write((v as u8) | 0x80);
                self.at = self.at.add(1);
                v >>= 7;
            }
            self.at.write(v as u8);
            self.at = self.at.add(1);
        }
    }
}

/// Copies `src` to `dst` with a few unaligned loads and stores for up to 32 bytes (two
/// overlapping ones cover any length in their range), `memcpy` above.
///
/// # Safety
/// `dst` is valid for `src.len()` bytes of writes and does not overlap `src`.
#[inline(always)]
unsafe fn copy_short(src: &[u8], dst: *mut u8) {
    use std::ptr::{read_unaligned as rd, write_unaligned as wr};
    let n = src.len();
    let s = src.as_ptr();
    // SAFETY (every branch): reads stay inside `src` (offsets `0` and `n - k` for a `k`-byte
    // word with `k <= n`) and writes inside `dst[..n]`, which the caller guarantees.
    unsafe {
        match n {
            0 => {}
            1..=3 => {
                dst.write(*s);
                dst.add(n / 2).write(*s.add(n / 2));
                dst.add(n - 1).write(*s.add(n - 1));
            }
            4..=7 => {
                let (a, b) = (rd(s.cast::<u32>()), rd(s.add(n - 4).cast::<u32>()));
                wr(dst.cast::<u32>(), a);
                wr(dst.add(n - 4).cast::<u32>(), b);
            }
            8..=16 => {
                let (a, b) = (rd(s.cast::<u64>()), rd(s.add(n - 8).cast::<u64>()));
                wr(dst.cast::<u64>(), a);
                wr(dst.add(n - 8).cast::<u64>(), b);
            }
            17..=32 => {
                let (a, b) = (rd(s.cast::<u128>()), rd(s.add(n - 16).cast::<u128>()));
                wr(dst.cast::<u128>(), a);
                wr(dst.add(n - 16).cast::<u128>(), b);
            }
            _ => std::ptr::copy_nonoverlapping(s, dst, n),
        }
    }
}

/// Writes `v` as a varint into `buf`; returns its length.
#[inline]
fn encode_varint(mut v: u64, buf: &mut [u8; 10]) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        buf[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    buf[n] = v as u8;
    n + 1
}

/// Writes a tag (as a varint).
#[inline]
pub fn put_tag<S: Sink + ?Sized>(s: &mut S, tag: u32) {
    put_varint(s, tag as u64);
}

/// Reads back, in order, the message sizes recorded by `compute_size`.
pub struct SizeCursor<'a> {
    sizes: &'a [u64],
    next: usize,
}

impl<'a> SizeCursor<'a> {
    /// A cursor at the start of `sizes`.
    pub fn new(sizes: &'a [u64]) -> Self {
        Self { sizes, next: 0 }
    }

    /// The next recorded size.
    #[inline]
    pub fn next_size(&mut self) -> u64 {
        let s = self.sizes[self.next];
        self.next += 1;
        s
    }

    /// Number of sizes consumed so far.
    pub fn position(&self) -> usize {
        self.next
    }
}
