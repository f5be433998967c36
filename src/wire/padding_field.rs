//! The padding field of aligned payloads ([`super::PADDING_FIELD`]): which sizes it can take and
//! how it is written (zero bytes). Below the writer, which writes it, and `padding`, which
//! places it.

use super::{PADDING_TAG, Sink, put_varint, varint_len};

/// Bytes of the padding field's tag.
const TAG_LEN: u64 = varint_len(PADDING_TAG as u64);

/// The number of zero bytes of a padding field of `total` bytes (tag and length prefix
/// included; 0 = no field): `None` for the sizes no field has (1 to 5, and the few a longer
/// length prefix skips, e.g. 134).
pub(super) fn body_len(total: u64) -> Option<u64> {
    if total == 0 {
        return Some(0);
    }
    (1..=10).find_map(|prefix| {
        let body = total.checked_sub(TAG_LEN + prefix)?;
        (varint_len(body) == prefix).then_some(body)
    })
}

/// Writes a padding field of `total` bytes.
pub(super) fn put_padding<S: Sink + ?Sized>(s: &mut S, total: u64) {
    static ZEROS: [u8; 4096] = [0; 4096];
    let Some(mut body) = body_len(total).filter(|_| total > 0) else {
        unreachable!("no padding field has {total} bytes");
    };
    put_varint(s, PADDING_TAG as u64);
    put_varint(s, body);
    while body > 0 {
        let n = body.min(ZEROS.len() as u64);
        s.put(&ZEROS[..n as usize]);
        body -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
