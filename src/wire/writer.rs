//! Encoding side of the wire format.
//!
//! Encoding is two passes: `compute_size` records the size of every embedded message in
//! pre-order into a `Vec<u64>`, then `encode_to` writes forward, reading those sizes back in the
//! same order through a [`SizeCursor`]. Tensor payloads go to the sink with
//! [`Sink::put_payload`] so a file sink can write them straight from where they are.

/// Where encoded bytes go. Errors (e.g. I/O) are the sink's to record; encoding never fails.
pub trait Sink {
    /// Appends bytes.
    fn put(&mut self, bytes: &[u8]);
    /// Appends a (possibly large) tensor payload.
    #[inline]
    fn put_payload(&mut self, bytes: &[u8]) {
        self.put(bytes);
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Writes `v` as a varint.
#[inline]
pub fn put_varint<S: Sink + ?Sized>(s: &mut S, mut v: u64) {
    if v < 0x80 {
        s.put(&[v as u8]);
        return;
    }
    let mut buf = [0u8; 10];
    let mut n = 0;
    while v >= 0x80 {
        buf[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    buf[n] = v as u8;
    s.put(&buf[..=n]);
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
