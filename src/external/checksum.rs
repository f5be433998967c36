//! SHA-1 checksums of external data files (the `checksum` entry: SHA-1, lowercase hex, of the
//! WHOLE file named by `location`, as the ONNX external-data specification defines it).

use std::fs::File;
use std::io;

use sha1::{Digest, Sha1};

use crate::storage::read_exact_at;

/// An incremental SHA-1.
#[derive(Clone, Default)]
pub struct Sha1Hasher(Sha1);

impl Sha1Hasher {
    /// A new hasher.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Feeds `n` zero bytes (alignment padding).
    pub fn update_zeros(&mut self, mut n: u64) {
        const ZEROS: [u8; 4096] = [0; 4096];
        while n > 0 {
            let k = n.min(ZEROS.len() as u64) as usize;
            self.0.update(&ZEROS[..k]);
            n -= k as u64;
        }
    }

    /// The digest as 40 lowercase hex digits.
    pub fn finish_hex(self) -> String {
        to_hex(&self.0.finalize())
    }
}

fn to_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

/// SHA-1 of `bytes`, lowercase hex.
pub fn sha1_hex(bytes: &[u8]) -> String {
    let mut h = Sha1Hasher::new();
    h.update(bytes);
    h.finish_hex()
}

/// SHA-1 of the first `len` bytes of `file`, read with positional reads into a small buffer (so
/// the file never adds to the process's resident memory); `progress` gets the bytes done.
pub(crate) fn sha1_of_file(
    file: &File,
    len: u64,
    progress: Option<&(dyn Fn(u64) + Sync)>,
) -> io::Result<String> {
    let mut h = Sha1Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0u64;
    while pos < len {
        let n = (len - pos).min(buf.len() as u64) as usize;
        read_exact_at(file, &mut buf[..n], pos)?;
        h.update(&buf[..n]);
        pos += n as u64;
        if let Some(p) = progress {
            p(n as u64);
        }
    }
    Ok(h.finish_hex())
}

/// True when `recorded` (any case, surrounding spaces ignored) equals the computed digest.
pub(crate) fn matches(recorded: &str, computed: &str) -> bool {
    recorded.trim().eq_ignore_ascii_case(computed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        let mut h = Sha1Hasher::new();
        h.update(b"a");
        h.update_zeros(5000);
        let mut v = vec![b'a'];
        v.resize(5001, 0);
        assert_eq!(h.finish_hex(), sha1_hex(&v));
    }
}
