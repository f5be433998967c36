//! ONNX Runtime pre-packed blobs: named binary blobs that
//! belong to an initializer, kept beside the model (never inside a `TensorProto`, which stays
//! protobuf-exact), saved into the weight file right after their initializer's bytes and
//! recorded there as `prepacked_N` entries, mapped back on load. See `docs/prepacked.md`.

use std::collections::BTreeMap;

use crate::bytes::{ByteSpan, Owner};
use crate::error::{Error, Result};

/// One pre-packed blob: one or more buffers (ONNX Runtime's `PrePackedWeights` may have
/// several), in order.
#[derive(Debug, Clone, Default)]
pub struct PrepackedBlob {
    /// The buffers. Each one has an owner token (`ByteSpan::owner`) unless it was attached as
    /// an unowned borrow: after a no-copy load it is the weight file's memory map, shared with
    /// the initializers of that file.
    pub buffers: Vec<ByteSpan>,
}

impl PrepackedBlob {
    /// The bytes of buffer `i`.
    pub fn buffer(&self, i: usize) -> Option<&[u8]> {
        self.buffers.get(i).map(ByteSpan::as_slice)
    }

    /// The owner token of buffer `i` (keeps its bytes alive; `None` for an unowned borrow).
    pub fn owner(&self, i: usize) -> Option<Owner> {
        self.buffers.get(i).and_then(ByteSpan::owner)
    }

    /// Total bytes of all buffers.
    pub fn total_len(&self) -> u64 {
        self.buffers.iter().map(|b| b.len() as u64).sum()
    }
}

/// Pre-packed blobs keyed by (initializer name, blob key), in key order.
///
/// ```
/// use onnx_light::external::PrepackedBlobs;
/// let mut blobs = PrepackedBlobs::new();
/// blobs.attach("W", "gemm:packed_b", vec![1u8, 2, 3])?;
/// assert_eq!(blobs.get("W", "gemm:packed_b").unwrap().buffer(0), Some(&[1u8, 2, 3][..]));
/// # Ok::<(), onnx_light::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct PrepackedBlobs {
    map: BTreeMap<(String, String), PrepackedBlob>,
}

/// Checks a blob key: non-empty, no `|` (the entry separator; a key containing it could not be
/// read back).
fn check_key(initializer: &str, key: &str) -> Result<()> {
    if initializer.is_empty() {
        return Err(Error::InvalidArgument(
            "pre-packed blob: empty initializer name".into(),
        ));
    }
    if key.is_empty() || key.contains('|') {
        return Err(Error::InvalidArgument(format!(
            "pre-packed blob key {key:?} of '{initializer}': must be non-empty and contain no '|'"
        )));
    }
    Ok(())
}

/// A span that has an owner token when possible: owned bytes are moved (not copied) into a
/// shared allocation, so every buffer of a store can hand out a token.
fn shared(mut span: ByteSpan) -> ByteSpan {
    let _ = span.share();
    span
}

impl PrepackedBlobs {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of blobs.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when there is no blob.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Attaches a one-buffer blob `key` to `initializer`, replacing any blob of that key. The
    /// bytes are moved in (a `Vec`) or shared (a borrowed `ByteSpan` keeps its owner).
    pub fn attach(
        &mut self,
        initializer: &str,
        key: &str,
        bytes: impl Into<ByteSpan>,
    ) -> Result<()> {
        self.attach_buffers(initializer, key, vec![bytes.into()])
    }

    /// Attaches a blob made of several buffers, replacing any blob of that key.
    pub fn attach_buffers(
        &mut self,
        initializer: &str,
        key: &str,
        buffers: Vec<ByteSpan>,
    ) -> Result<()> {
        check_key(initializer, key)?;
        let buffers = buffers.into_iter().map(shared).collect();
        self.map.insert(
            (initializer.to_string(), key.to_string()),
            PrepackedBlob { buffers },
        );
        Ok(())
    }

    /// Appends one buffer to blob `key` of `initializer` (creating the blob).
    pub fn push_buffer(
        &mut self,
        initializer: &str,
        key: &str,
        bytes: impl Into<ByteSpan>,
    ) -> Result<()> {
        check_key(initializer, key)?;
        self.map
            .entry((initializer.to_string(), key.to_string()))
            .or_default()
            .buffers
            .push(shared(bytes.into()));
        Ok(())
    }

    /// Inserts a loaded blob unless the pair is already present (first insert wins, as in ONNX
    /// Runtime's shared container). Returns whether it was inserted.
    pub(crate) fn insert_first(
        &mut self,
        initializer: &str,
        key: &str,
        blob: PrepackedBlob,
    ) -> bool {
        let k = (initializer.to_string(), key.to_string());
        if self.map.contains_key(&k) {
            return false;
        }
        self.map.insert(k, blob);
        true
    }

    /// The blob `key` of `initializer`.
    pub fn get(&self, initializer: &str, key: &str) -> Option<&PrepackedBlob> {
        self.map.get(&(initializer.to_string(), key.to_string()))
    }

    /// Removes and returns the blob `key` of `initializer`.
    pub fn remove(&mut self, initializer: &str, key: &str) -> Option<PrepackedBlob> {
        self.map.remove(&(initializer.to_string(), key.to_string()))
    }

    /// The blobs of `initializer` as (key, blob), in key order (a range of the ordered map, not
    /// a scan of every blob).
    pub fn blobs_of<'a>(
        &'a self,
        initializer: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a PrepackedBlob)> + 'a {
        self.map
            .range((initializer.to_owned(), String::new())..)
            .take_while(move |((i, _), _)| i == initializer)
            .map(|((_, k), b)| (k.as_str(), b))
    }

    /// The keys of the blobs of `initializer`, in order.
    pub fn keys_for<'a>(&'a self, initializer: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.blobs_of(initializer).map(|(k, _)| k)
    }

    /// The names of the initializers that have blobs, in order, once each.
    pub fn initializers(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.map.keys().map(|(i, _)| i.as_str()).collect();
        out.dedup();
        out
    }

    /// Every blob as (initializer, key, blob), in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &PrepackedBlob)> {
        self.map
            .iter()
            .map(|((i, k), b)| (i.as_str(), k.as_str(), b))
    }

    /// Blob number `index` of [`PrepackedBlobs::iter`].
    pub fn at(&self, index: usize) -> Option<(&str, &str, &PrepackedBlob)> {
        self.iter().nth(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_basics() {
        let mut s = PrepackedBlobs::new();
        assert!(s.is_empty());
        s.attach("W", "b", vec![1u8, 2]).unwrap();
        s.attach("W", "a", vec![3u8]).unwrap();
        s.push_buffer("V", "k", vec![4u8]).unwrap();
        s.push_buffer("V", "k", vec![5u8, 6]).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s.keys_for("W").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(s.initializers(), ["V", "W"]);
        let k = s.get("V", "k").unwrap();
        assert_eq!(k.buffers.len(), 2);
        assert_eq!(k.buffer(1), Some(&[5u8, 6][..]));
        assert_eq!(k.total_len(), 3);
        // Every buffer has a token, and the token's bytes are the buffer's.
        assert!(k.owner(0).is_some());
        assert_eq!(s.at(0).unwrap().0, "V");
        assert!(s.attach("W", "", vec![]).is_err());
        assert!(s.attach("W", "a|b", vec![]).is_err());
        assert!(s.attach("", "a", vec![]).is_err());
        assert!(!s.insert_first("W", "a", PrepackedBlob::default()));
        assert_eq!(s.get("W", "a").unwrap().buffer(0), Some(&[3u8][..]));
        assert!(s.remove("W", "a").is_some());
        assert_eq!(s.len(), 2);
    }
}
