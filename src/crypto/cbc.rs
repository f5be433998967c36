//! ONNXCRY1: `magic 8 | salt 16 | IV 16 | AES-256-CBC(PKCS#7(plaintext))`, no MAC.
//!
//! Unauthenticated: kept for files of the C++ library only. A wrong key is caught by the padding
//! check (about 255 times in 256) and by the caller parsing the plaintext as a model; a modified
//! file is not detected as such. Padding is checked without data-dependent branches, and a
//! padding failure and a parse failure give the same error, to avoid a padding oracle.

// Without the `encryption` feature only the format constants are used (the ciphers are not
// compiled; `super::seal_oneshot` and friends fail with `Error::Unsupported` instead).
#![cfg_attr(not(feature = "encryption"), allow(dead_code, unused_imports))]

use std::ops::Range;

#[cfg(feature = "encryption")]
use aes::Aes256;
#[cfg(feature = "encryption")]
use cbc::cipher::block_padding::NoPadding;
#[cfg(feature = "encryption")]
use cbc::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use zeroize::Zeroize;

use super::Params;
use super::format::{MAGIC_CBC, MAGIC_LEN};
use super::kdf::{SALT_LEN, derive_key};
use crate::error::{Error, Result};

/// Length of the IV.
pub const IV_LEN: usize = 16;
/// Bytes before the ciphertext.
pub const HEADER_LEN: usize = MAGIC_LEN + SALT_LEN + IV_LEN;
const BLOCK: usize = 16;

/// The error of a wrong key or modified data (identical for padding and parse failures).
pub(crate) fn auth_error() -> Error {
    Error::Authentication(
        "ONNXCRY1 (AES-256-CBC, unauthenticated): the decrypted data is not a valid model".into(),
    )
}

/// Bytes of capacity needed beyond the plaintext (padding).
pub(crate) const EXTRA: usize = BLOCK;

/// Encrypts `buf[HEADER_LEN..]` in place, padding it, and writes the header into
/// `buf[..HEADER_LEN]`. `buf` should have `EXTRA` bytes of spare capacity (else it is moved to a
/// larger allocation and the old one is zeroed).
#[cfg(feature = "encryption")]
pub(crate) fn seal(passphrase: &[u8], params: &Params, buf: &mut Vec<u8>) -> Result<()> {
    debug_assert!(buf.len() >= HEADER_LEN);
    let pt_len = buf.len() - HEADER_LEN;
    let pad = BLOCK - pt_len % BLOCK;
    if buf.capacity() - buf.len() < pad {
        let mut bigger = Vec::new();
        bigger
            .try_reserve_exact(buf.len() + pad)
            .map_err(|_| Error::alloc_failed(buf.len() + pad, "the encrypted data"))?;
        bigger.extend_from_slice(buf);
        buf.zeroize();
        *buf = bigger;
    }
    buf.resize(buf.len() + pad, pad as u8);
    buf[..MAGIC_LEN].copy_from_slice(MAGIC_CBC);
    buf[MAGIC_LEN..MAGIC_LEN + SALT_LEN].copy_from_slice(&params.salt);
    buf[MAGIC_LEN + SALT_LEN..HEADER_LEN].copy_from_slice(&params.iv);
    let key = derive_key(passphrase, &params.salt);
    let body = &mut buf[HEADER_LEN..];
    let len = body.len();
    cbc::Encryptor::<Aes256>::new(key.bytes().into(), (&params.iv).into())
        .encrypt_padded_mut::<NoPadding>(body, len)
        .map_err(|_| Error::Crypto("ONNXCRY1: internal padding error".into()))?;
    Ok(())
}

/// Decrypts `data` (a whole ONNXCRY1 file) in place; returns the range of the plaintext in
/// `data` and whether its padding was valid. The caller must still parse the plaintext, and
/// report an invalid padding or a parse failure with [`auth_error`] only AFTER that parse: with
/// an invalid padding the range strips a padding length taken from the last byte (clamped to
/// 1 ..= 16), so both failures cost a decryption and a parse of about the whole plaintext and
/// timing does not tell them apart (no padding oracle).
#[cfg(feature = "encryption")]
pub(crate) fn open(passphrase: &[u8], data: &mut [u8]) -> Result<(Range<usize>, bool)> {
    if data.len() < HEADER_LEN {
        return Err(Error::Crypto(format!(
            "truncated: ONNXCRY1 data of {} bytes is shorter than its {HEADER_LEN}-byte header",
            data.len()
        )));
    }
    let ct_len = data.len() - HEADER_LEN;
    if ct_len == 0 || ct_len % BLOCK != 0 {
        return Err(Error::Crypto(format!(
            "truncated: ONNXCRY1 ciphertext of {ct_len} bytes is not a positive multiple of 16"
        )));
    }
    let mut salt = [0u8; SALT_LEN];
    salt.copy_from_slice(&data[MAGIC_LEN..MAGIC_LEN + SALT_LEN]);
    let mut iv = [0u8; IV_LEN];
    iv.copy_from_slice(&data[MAGIC_LEN + SALT_LEN..HEADER_LEN]);
    let key = derive_key(passphrase, &salt);
    let body = &mut data[HEADER_LEN..];
    cbc::Decryptor::<Aes256>::new(key.bytes().into(), (&iv).into())
        .decrypt_padded_mut::<NoPadding>(body)
        .map_err(|_| Error::Crypto("ONNXCRY1: ciphertext is not whole blocks".into()))?;
    let (pad, valid) = padding_len(&body[ct_len - BLOCK..]);
    Ok((HEADER_LEN..data.len() - pad, valid))
}

/// The PKCS#7 padding length of the last block and whether it is valid, computed without
/// branching on the data. An invalid padding's length is the last byte clamped to 1 ..= 16.
fn padding_len(last: &[u8]) -> (usize, bool) {
    debug_assert_eq!(last.len(), BLOCK);
    let n = u32::from(last[BLOCK - 1]);
    // n == 0 or n > 16 is invalid.
    let mut bad = n.wrapping_sub(1) >> 8 | (BLOCK as u32).wrapping_sub(n) >> 8;
    for i in 0..BLOCK as u32 {
        let b = u32::from(last[BLOCK - 1 - i as usize]);
        // 1 when i < n (the byte is part of the padding), else 0.
        let in_pad = i.wrapping_sub(n) >> 31;
        bad |= in_pad * (b ^ n);
    }
    let valid = std::hint::black_box(bad) == 0;
    // 1 ..= 16 without a data-dependent branch: (n - 1) mod 16 + 1.
    let clamped = (n.wrapping_sub(1) & (BLOCK as u32 - 1)) + 1;
    (clamped as usize, valid)
}

#[cfg(all(test, feature = "encryption"))]
mod tests {
    use super::*;

    #[test]
    fn padding_rules() {
        let mut b = [7u8; 16];
        b[15] = 1;
        assert_eq!(padding_len(&b), (1, true));
        assert_eq!(padding_len(&[16u8; 16]), (16, true));
        let mut b = [0u8; 16];
        b[13..].copy_from_slice(&[3, 3, 3]);
        assert_eq!(padding_len(&b), (3, true));
        b[13] = 2;
        assert!(!padding_len(&b).1);
        assert!(!padding_len(&[0u8; 16]).1);
        assert!(!padding_len(&[17u8; 16]).1);
        let mut b = [16u8; 16];
        b[0] = 15;
        assert!(!padding_len(&b).1);
    }
}
