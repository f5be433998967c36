//! Aligned payloads in the serialized bytes (`SerializeOptions::inline_alignment`): a padding
//! field ([`super::PADDING_FIELD`], zero bytes) before a tensor's `raw_data` makes the payload
//! start at a multiple of the alignment.
//!
//! A padding changes the sizes of the messages around it, hence their length prefixes, hence
//! the offsets of every later payload; the paddings are therefore found by rounds: measure
//! where every payload lands with the current paddings (a walk of the encoder that skips the
//! payloads), then walk them in order, growing each padding just enough to align its payload
//! given the growth of the ones before it. Paddings only grow, so sizes, and the lengths of
//! their varint prefixes, only grow: a round in which no prefix length changed lands every
//! payload where it was planned, and the next measure finds them all aligned. Prefix lengths
//! are bounded (at most 10 bytes), so the rounds end; in practice after two or three.

use std::mem::MaybeUninit;

use super::SizeTable;
use super::message::DynMessage;
use super::writer::{SliceWriter, Spill, padding_body_len as body_len};

/// Most rounds of [`align_payloads`] (two or three are the rule; every round but the last
/// lengthens a varint prefix, of which a model has a bounded number of bytes).
const MAX_ROUNDS: usize = 64;

/// Buffer of the measuring walk (the metadata passes through it; payloads are skipped).
const WALK_BUFFER_BYTES: u64 = 64 << 10;

/// Finds the paddings that align every `raw_data` payload of at least `min_len` (and 1) bytes of
/// `m` to `align` in its encoding, and records them in `sizes` (whose sizes of `m`, total
/// `len`, are recomputed with them); returns the new total size, or `None` when no fixed point
/// was reached in [`MAX_ROUNDS`] rounds.
pub(crate) fn align_payloads(
    m: &dyn DynMessage,
    sizes: &mut SizeTable,
    mut len: u64,
    align: u64,
    min_len: u64,
) -> Option<u64> {
    debug_assert!(align.is_power_of_two());
    let min_len = min_len.max(1);
    for _ in 0..MAX_ROUNDS {
        let spans = payload_spans(m, sizes, len);
        if sizes.pads.is_empty() {
            sizes.pads = vec![0; spans.len()];
        }
        debug_assert_eq!(spans.len(), sizes.pads.len());
        // How far the paddings grown so far in this round move the payloads after them.
        let mut shift = 0;
        for (&(offset, payload_len), pad) in spans.iter().zip(sizes.pads.iter_mut()) {
            let at = offset + shift;
            if payload_len < min_len || at % align == 0 {
                continue;
            }
            let grown = next_pad(at - *pad, *pad, align);
            shift += grown - *pad;
            *pad = grown;
        }
        if shift == 0 {
            return Some(len);
        }
        len = sizes.recompute(m);
    }
    None
}

/// The smallest padding of at least `at_least` bytes that a padding field can take and that
/// moves a payload at offset `base` (without padding) to a multiple of `align`.
fn next_pad(base: u64, at_least: u64, align: u64) -> u64 {
    let mut pad = (align - base % align) % align;
    while pad < at_least || body_len(pad).is_none() {
        pad += align;
    }
    pad
}

/// Where each `raw_data` payload (offset, length) of `m`'s encoding with `sizes` (total `len`)
/// is, in encoding order: a walk of the encoder whose output, payloads skipped, is dropped.
fn payload_spans(m: &dyn DynMessage, sizes: &SizeTable, len: u64) -> Vec<(u64, u64)> {
    /// Records the payloads, drops everything.
    struct Spans(Vec<(u64, u64)>);
    impl Spill for Spans {
        fn take(&mut self, _: &[u8]) {}
        fn defer(&mut self, offset: u64, bytes: &[u8]) -> bool {
            self.0.push((offset, bytes.len() as u64));
            true
        }
    }
    let mut spans = Spans(Vec::new());
    let mut buf = vec![MaybeUninit::uninit(); len.min(WALK_BUFFER_BYTES) as usize];
    let mut w = SliceWriter::measuring(&mut buf, &mut spans);
    m.encode_into(&mut w, &mut sizes.cursor());
    let end = w.finish();
    debug_assert_eq!(end, len, "encoded size differs from the computed size");
    spans.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::writer::put_padding;
    use crate::wire::{PADDING_TAG, varint_len};

    const TAG_LEN: u64 = varint_len(PADDING_TAG as u64);

    #[test]
    fn padding_fields_have_every_size_but_a_few() {
        assert_eq!(TAG_LEN, 5);
        for total in 0..70_000u64 {
            let Some(body) = body_len(total) else {
                assert!(
                    (1..=5).contains(&total) || total == 134 || total == 16_391,
                    "{total}"
                );
                continue;
            };
            if total == 0 {
                continue;
            }
            let mut out = Vec::new();
            put_padding(&mut out, total);
            assert_eq!(out.len() as u64, total);
            assert_eq!(&out[..5], &[0xfa, 0xff, 0xff, 0xff, 0x0f]);
            assert_eq!(body + TAG_LEN + varint_len(body), total);
            assert!(out[out.len() - body as usize..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn next_pad_aligns_and_never_shrinks() {
        for align in [64u64, 4096] {
            for base in 0..3 * align {
                for at_least in [0, 7, 134 - (base % 64), align + 3] {
                    let p = next_pad(base, at_least, align);
                    assert_eq!((base + p) % align, 0);
                    assert!(p >= at_least && body_len(p).is_some());
                    assert!(p < at_least + 2 * align + 6, "{base} {at_least} {p}");
                }
            }
        }
    }
}
