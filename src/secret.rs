//! Secrets: [`Passphrase`] (the key of encrypted models and files) and [`SecretBytes`] (a
//! plaintext buffer), both zeroed (their whole allocation) when dropped.

use std::ops::{Deref, Range};

use zeroize::Zeroize;

/// Decrypted bytes, zeroed when dropped.
///
/// The buffer is allocated once at its final size and never grows, so no copy of the plaintext
/// is left behind in freed memory by a reallocation. It can be shared as the owner of a model's
/// borrowed tensor bytes (`parse_from_shared` with `no_copy`): it is then zeroed when the last
/// tensor that borrows from it is gone.
pub struct SecretBytes {
    buf: Vec<u8>,
    range: Range<usize>,
}

impl SecretBytes {
    /// Takes ownership of `buf`; only `range` is the secret's content (the rest, e.g. a header
    /// that was decrypted in place after, is zeroed on drop too).
    pub(crate) fn new(buf: Vec<u8>, range: Range<usize>) -> Self {
        debug_assert!(range.start <= range.end && range.end <= buf.len());
        let range = range.start.min(buf.len())..range.end.min(buf.len());
        Self { buf, range }
    }

    /// A zeroed buffer of `len` bytes, allocated exactly once (`None` when memory is short).
    pub(crate) fn zeroed(len: usize) -> Option<Self> {
        let mut buf = Vec::new();
        buf.try_reserve_exact(len).ok()?;
        buf.resize(len, 0);
        Some(Self { buf, range: 0..len })
    }

    /// The whole underlying buffer, for decrypting in place.
    pub(crate) fn buffer_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    /// The content, writable.
    pub(crate) fn content_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.range.clone()]
    }

    /// Narrows the content to `range` (relative to the whole buffer).
    pub(crate) fn set_range(&mut self, range: Range<usize>) {
        debug_assert!(range.start <= range.end && range.end <= self.buf.len());
        self.range = range;
    }

    /// The content.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf[self.range.clone()]
    }
}

impl Deref for SecretBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for SecretBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Drop for SecretBytes {
    fn drop(&mut self) {
        // `Vec::zeroize` clears every initialized byte and the spare capacity.
        self.buf.zeroize();
    }
}

impl std::fmt::Debug for SecretBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretBytes({} bytes, redacted)", self.range.len())
    }
}

/// A passphrase held in options (e.g. the key of encrypted external data): any bytes, zeroed
/// when dropped, never printed (`Debug` shows only its length).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Passphrase(zeroize::Zeroizing<Vec<u8>>);

impl Passphrase {
    /// A passphrase of `bytes` (copied).
    pub fn new(bytes: &[u8]) -> Self {
        Self(zeroize::Zeroizing::new(bytes.to_vec()))
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl From<&[u8]> for Passphrase {
    fn from(bytes: &[u8]) -> Self {
        Self::new(bytes)
    }
}

impl<const N: usize> From<&[u8; N]> for Passphrase {
    fn from(bytes: &[u8; N]) -> Self {
        Self::new(bytes)
    }
}

impl From<Vec<u8>> for Passphrase {
    /// Takes the vector (no copy is left behind).
    fn from(bytes: Vec<u8>) -> Self {
        Self(zeroize::Zeroizing::new(bytes))
    }
}

impl std::fmt::Debug for Passphrase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Passphrase({} bytes, redacted)", self.0.len())
    }
}
