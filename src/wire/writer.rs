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

/// Payloads at least this large are offered to a writer's [`Spill`] ([`Spill::defer`]), and a
/// streaming writer hands them on without copying them into its buffer.
pub(crate) const LARGE_PAYLOAD_BYTES: usize = 1 << 20;

/// Where a [`SliceWriter`] made with [`SliceWriter::streaming`] or [`SliceWriter::deferring`]
/// sends what does not go into its buffer. Every serializer encodes through a `SliceWriter`, so
/// the generated `encode_to` of each message exists once in the library; the few kinds of output
/// (a `Write`, a file with deferred payloads, an encryptor) differ only here, behind one dynamic
/// call per buffer-full or large payload.
pub(crate) trait Spill {
    /// Takes `bytes`, the next bytes of the output (a streaming writer's full buffer, or a large
    /// write passed straight through). Errors are the spill's to record.
    fn take(&mut self, bytes: &[u8]);

    /// Offered a payload of at least [`LARGE_PAYLOAD_BYTES`] at output offset `offset`
    /// (everything before it has been taken): returns `true` when it places the payload itself
    /// later, so the writer leaves a gap of its length; `false` to have it written in order.
    fn defer(&mut self, offset: u64, bytes: &[u8]) -> bool {
        let _ = (offset, bytes);
        false
    }
}

/// Every [`Sink`] is a [`Spill`] of a streaming writer: it takes the bytes in order.
impl<S: Sink + ?Sized> Spill for S {
    fn take(&mut self, bytes: &[u8]) {
        self.put(bytes);
    }
}

/// A [`Sink`] writing into a buffer through a pointer: each write is a bounds check and a copy,
/// short copies inline instead of a call to `memcpy`.
///
/// - [`SliceWriter::new`] / [`SliceWriter::new_uninit`]: a buffer of exactly the planned size
///   (the serializers that know the size first). A write past the end panics (the size plan was
///   wrong), before anything is written out of bounds.
/// - `SliceWriter::deferring` (in the crate): the same, and large payloads are offered to a
///   `Spill`, which may copy them later (the parallel serializer).
/// - `SliceWriter::streaming` (in the crate): the buffer is reused; when full, its bytes go to a
///   `Spill` (a `Write`, a file, an encryptor).
pub struct SliceWriter<'a> {
    at: *mut u8,
    end: *mut u8,
    start: *mut u8,
    /// Output bytes before `start`: taken by the spill, or gaps of deferred payloads.
    base: u64,
    /// Whether the buffer is reused once its bytes are taken by `spill`.
    streaming: bool,
    /// Whether every payload, whatever its size, is offered to `spill` (a measuring walk).
    #[cfg(feature = "inline-alignment")]
    defer_all: bool,
    spill: Option<&'a mut dyn Spill>,
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
            base: 0,
            streaming: false,
            #[cfg(feature = "inline-alignment")]
            defer_all: false,
            spill: None,
            _buf: PhantomData,
        }
    }

    /// A writer at the start of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self::new_uninit(as_uninit(buf))
    }

    /// A writer at the start of `buf` (the whole output, of the planned size) that offers large
    /// payloads to `spill`: a deferred one leaves its bytes of `buf` as they are.
    pub(crate) fn deferring(buf: &'a mut [u8], spill: &'a mut dyn Spill) -> Self {
        Self {
            spill: Some(spill),
            ..Self::new(buf)
        }
    }

    /// A writer of any length of output through `buf`, which `spill` empties whenever it is full
    /// (and at [`SliceWriter::finish`]); large payloads go to `spill` directly.
    pub(crate) fn streaming(buf: &'a mut [MaybeUninit<u8>], spill: &'a mut dyn Spill) -> Self {
        Self {
            streaming: true,
            spill: Some(spill),
            ..Self::new_uninit(buf)
        }
    }

    /// [`SliceWriter::streaming`] offering every payload to `spill`, whatever its size (a walk
    /// measuring where the payloads are).
    #[cfg(feature = "inline-alignment")]
    pub(crate) fn measuring(buf: &'a mut [MaybeUninit<u8>], spill: &'a mut dyn Spill) -> Self {
        Self {
            defer_all: true,
            ..Self::streaming(buf, spill)
        }
    }

    /// Whether `bytes` go to the spill as a payload of their own.
    #[inline(always)]
    fn defers(&self, bytes: &[u8]) -> bool {
        #[cfg(feature = "inline-alignment")]
        let all = self.defer_all;
        #[cfg(not(feature = "inline-alignment"))]
        let all = false;
        (bytes.len() >= LARGE_PAYLOAD_BYTES || all) && self.spill.is_some()
    }

    /// Bytes written (or skipped) so far.
    #[inline]
    pub fn written(&self) -> usize {
        self.base as usize + self.buffered()
    }

    /// Bytes of output so far, as a `u64` (a streaming writer's output may pass `usize::MAX`
    /// on 32-bit targets).
    pub(crate) fn position(&self) -> u64 {
        self.base + self.buffered() as u64
    }

    /// Bytes in the buffer.
    #[inline(always)]
    fn buffered(&self) -> usize {
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

    /// Hands the buffered bytes of a streaming writer to its spill (the end of the output);
    /// returns the output's length.
    pub(crate) fn finish(mut self) -> u64 {
        self.drain();
        self.position()
    }

    /// A streaming writer's buffered bytes go to the spill; the buffer starts over.
    fn drain(&mut self) {
        let n = self.buffered();
        if n == 0 {
            return;
        }
        if let Some(spill) = self.spill.as_deref_mut() {
            // SAFETY: the first `n` bytes from `start` were written (initialized) by this writer.
            spill.take(unsafe { std::slice::from_raw_parts(self.start, n) });
        }
        self.base += n as u64;
        self.at = self.start;
    }

    /// A write that does not fit: a streaming writer drains its buffer (a write at least the
    /// buffer's size goes to the spill directly); any other writer overflows.
    #[cold]
    #[inline(never)]
    fn put_slow(&mut self, bytes: &[u8]) {
        if !self.streaming {
            overflow();
        }
        self.drain();
        if bytes.len() >= self.room() {
            self.pass_through(bytes);
        } else {
            // SAFETY: fits (checked above); `bytes` cannot overlap the buffer (borrowed mutably).
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.at, bytes.len());
                self.at = self.at.add(bytes.len());
            }
        }
    }

    /// A drained streaming writer's spill takes `bytes` as they are.
    fn pass_through(&mut self, bytes: &[u8]) {
        if let Some(spill) = self.spill.as_deref_mut() {
            spill.take(bytes);
        }
        self.base += bytes.len() as u64;
    }

    /// A payload of at least [`LARGE_PAYLOAD_BYTES`] (any, when measuring) of a writer with a
    /// spill.
    #[inline(never)]
    fn put_large_payload(&mut self, bytes: &[u8]) {
        if self.streaming {
            self.drain();
        }
        let offset = self.position();
        let deferred = self
            .spill
            .as_deref_mut()
            .is_some_and(|spill| spill.defer(offset, bytes));
        match (deferred, self.streaming) {
            (true, true) => self.base += bytes.len() as u64,
            (true, false) => self.skip(bytes.len()),
            (false, true) => self.pass_through(bytes),
            (false, false) => self.put(bytes),
        }
    }
}

/// `buf` as a slice of possibly uninitialized bytes.
pub(crate) fn as_uninit(buf: &mut [u8]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: `u8` and `MaybeUninit<u8>` have the same layout, and only initialized bytes are
    // ever written through the view (nothing makes them uninitialized).
    unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) }
}

/// The message of a write past the end of a [`SliceWriter`].
const OVERFLOW: &str = "encoded size differs from the computed size";

#[cold]
#[inline(never)]
fn overflow() -> ! {
    panic!("{}", OVERFLOW)
}

// `put` and `put_varint` are inlined into every field's encoder, except in size-optimized builds
// (`cfg(onnxl_small)`: see build.rs).
impl Sink for SliceWriter<'_> {
    #[cfg_attr(not(onnxl_small), inline(always))]
    #[cfg_attr(onnxl_small, inline(never))]
    fn put(&mut self, bytes: &[u8]) {
        if bytes.len() > self.room() {
            self.put_slow(bytes);
            return;
        }
        // SAFETY: `bytes.len()` bytes of room at `at` (checked above), and the caller's slice
        // cannot overlap the buffer this writer borrows exclusively.
        unsafe {
            copy_short(bytes, self.at);
            self.at = self.at.add(bytes.len());
        }
    }

    #[inline]
    fn put_payload(&mut self, bytes: &[u8]) {
        if self.defers(bytes) {
            self.put_large_payload(bytes);
        } else {
            self.put(bytes);
        }
    }

    #[cfg_attr(not(onnxl_small), inline(always))]
    #[cfg_attr(onnxl_small, inline(never))]
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
#[cfg_attr(not(onnxl_small), inline(always))]
#[cfg_attr(onnxl_small, inline(never))]
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

#[cfg(feature = "inline-alignment")]
/// Bytes of the padding field's tag.
const PADDING_TAG_LEN: u64 = super::varint_len(super::PADDING_TAG as u64);

/// The number of zero bytes of a padding field of `total` bytes (tag and length prefix
/// included; 0 = no field): `None` for the sizes no field has (1 to 5, and the few a longer
/// length prefix skips, e.g. 134).
#[cfg(feature = "inline-alignment")]
pub(super) fn padding_body_len(total: u64) -> Option<u64> {
    if total == 0 {
        return Some(0);
    }
    (1..=10).find_map(|prefix| {
        let body = total.checked_sub(PADDING_TAG_LEN + prefix)?;
        (super::varint_len(body) == prefix).then_some(body)
    })
}

/// Writes a padding field ([`super::PADDING_TAG`]) of `total` bytes.
#[cfg(feature = "inline-alignment")]
pub(super) fn put_padding<S: Sink + ?Sized>(s: &mut S, total: u64) {
    static ZEROS: [u8; 4096] = [0; 4096];
    let Some(mut body) = padding_body_len(total).filter(|_| total > 0) else {
        unreachable!("no padding field has {total} bytes");
    };
    put_varint(s, super::PADDING_TAG as u64);
    put_varint(s, body);
    while body > 0 {
        let n = body.min(ZEROS.len() as u64);
        s.put(&ZEROS[..n as usize]);
        body -= n;
    }
}

/// Reads back, in order, the message sizes recorded by `compute_size`.
pub struct SizeCursor<'a> {
    sizes: &'a [u64],
    next: usize,
    /// The paddings before `raw_data` payloads (see `SizeTable::payload_pad`), and how many
    /// were read.
    #[cfg(feature = "inline-alignment")]
    pads: &'a [u64],
    #[cfg(feature = "inline-alignment")]
    pads_read: usize,
}

impl<'a> SizeCursor<'a> {
    /// A cursor at the start of `sizes`.
    pub fn new(sizes: &'a [u64]) -> Self {
        Self {
            sizes,
            next: 0,
            #[cfg(feature = "inline-alignment")]
            pads: &[],
            #[cfg(feature = "inline-alignment")]
            pads_read: 0,
        }
    }

    /// A cursor at the start of `sizes` and of the paddings `pads`.
    #[cfg(feature = "inline-alignment")]
    pub(crate) fn with_pads(sizes: &'a [u64], pads: &'a [u64]) -> Self {
        Self {
            pads,
            ..Self::new(sizes)
        }
    }

    /// Writes the padding planned before the next `raw_data` payload, if any.
    #[cfg(feature = "inline-alignment")]
    #[doc(hidden)]
    #[inline]
    pub fn put_payload_pad<S: Sink + ?Sized>(&mut self, s: &mut S) {
        let p = self.pads.get(self.pads_read).copied().unwrap_or(0);
        self.pads_read += 1;
        if p > 0 {
            put_padding(s, p);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What a streaming writer's spill was given: the bytes, and the sizes of the pieces.
    #[derive(Default)]
    struct Recorder {
        bytes: Vec<u8>,
        pieces: Vec<usize>,
        deferred: Vec<(u64, usize)>,
        defer_all: bool,
    }

    impl Spill for Recorder {
        fn take(&mut self, bytes: &[u8]) {
            self.bytes.extend_from_slice(bytes);
            self.pieces.push(bytes.len());
        }
        fn defer(&mut self, offset: u64, bytes: &[u8]) -> bool {
            if self.defer_all {
                self.deferred.push((offset, bytes.len()));
            }
            self.defer_all
        }
    }

    /// The same writes into a `Vec` (the expected output).
    fn writes(s: &mut dyn Sink, payload: &[u8]) {
        for i in 0..40u64 {
            s.put_varint(i * 1_000_003);
            s.put(&b"abcdefghijklmnopqrstuvwxyz0123456789"[..(i as usize % 37)]);
        }
        s.put_payload(payload);
        s.put_varint(u64::MAX);
        s.put(b"end");
    }

    #[test]
    fn streaming_writer_spills_in_order_through_a_small_buffer() {
        let payload: Vec<u8> = (0..LARGE_PAYLOAD_BYTES + 5).map(|i| i as u8).collect();
        let mut expected = Vec::new();
        writes(&mut expected, &payload);
        for cap in [0, 1, 9, 10, 11, 64, 4096] {
            let mut rec = Recorder::default();
            let mut buf = vec![MaybeUninit::<u8>::uninit(); cap];
            let mut w = SliceWriter::streaming(&mut buf, &mut rec);
            writes(&mut w, &payload);
            assert_eq!(w.finish(), expected.len() as u64, "buffer of {cap}");
            assert_eq!(rec.bytes, expected, "buffer of {cap}");
            assert!(rec.pieces.iter().all(|&n| n > 0), "no empty pieces");
            // The payload went to the spill as one piece, not through the buffer.
            assert!(rec.pieces.contains(&payload.len()), "buffer of {cap}");
        }
    }

    #[test]
    fn streaming_writer_leaves_a_gap_for_a_deferred_payload() {
        let payload = vec![7u8; LARGE_PAYLOAD_BYTES];
        let mut rec = Recorder {
            defer_all: true,
            ..Recorder::default()
        };
        let mut buf = vec![MaybeUninit::<u8>::uninit(); 16];
        let mut w = SliceWriter::streaming(&mut buf, &mut rec);
        w.put(b"head");
        w.put_payload(&payload);
        w.put(b"tail");
        assert_eq!(w.finish(), (8 + payload.len()) as u64);
        assert_eq!(rec.bytes, b"headtail");
        assert_eq!(rec.deferred, vec![(4, payload.len())]);
    }

    #[test]
    fn deferring_writer_skips_deferred_payloads_and_keeps_small_ones() {
        let large = vec![1u8; LARGE_PAYLOAD_BYTES];
        let mut out = vec![9u8; 2 + 3 + large.len() + 1];
        let mut rec = Recorder {
            defer_all: true,
            ..Recorder::default()
        };
        let mut w = SliceWriter::deferring(&mut out, &mut rec);
        w.put(b"ab");
        w.put_payload(b"xyz");
        w.put_payload(&large);
        w.put(b"!");
        assert_eq!(w.written(), out.len());
        assert_eq!(rec.deferred, vec![(5, large.len())]);
        assert!(rec.bytes.is_empty());
        assert_eq!(&out[..5], b"abxyz");
        assert!(
            out[5..5 + large.len()].iter().all(|&b| b == 9),
            "the gap is left as it was"
        );
        assert_eq!(out[out.len() - 1], b'!');
    }

    #[test]
    #[should_panic(expected = "encoded size differs from the computed size")]
    fn fixed_writer_panics_on_overflow() {
        let mut out = [0u8; 3];
        let mut w = SliceWriter::new(&mut out);
        w.put(b"abcd");
    }
}
