//! ONNXCRY2 (ChaCha20-Poly1305, no AAD) and ONNXCRY3 (AES-256-GCM, AAD = the first 36 bytes):
//! `magic 8 | salt 16 | nonce 12 | tag 16 | ciphertext` — the tag comes BEFORE the ciphertext.

// Without the `encryption` feature only the format constants are used (the ciphers are not
// compiled; `super::seal_oneshot` and friends fail with `Error::Unsupported` instead).
#![cfg_attr(not(feature = "encryption"), allow(dead_code, unused_imports))]

use std::ops::Range;

#[cfg(feature = "encryption")]
use ring::aead::{AES_256_GCM, Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, Tag, UnboundKey};

use super::Params;
use super::format::{EncryptionFormat, MAGIC_LEN};
use super::kdf::{SALT_LEN, derive_key};
use crate::error::{Error, Result};

/// Length of the nonce.
pub const NONCE_LEN: usize = 12;
/// Length of the tag.
pub const TAG_LEN: usize = 16;
/// Bytes bound as AAD by ONNXCRY3: magic, salt and nonce.
pub const AAD_LEN: usize = MAGIC_LEN + SALT_LEN + NONCE_LEN;
/// Bytes before the ciphertext.
pub const HEADER_LEN: usize = AAD_LEN + TAG_LEN;

#[cfg(feature = "encryption")]
fn key_for(
    format: EncryptionFormat,
    passphrase: &[u8],
    salt: &[u8; SALT_LEN],
) -> Result<LessSafeKey> {
    let alg = match format {
        EncryptionFormat::ChaCha20Poly1305 => &CHACHA20_POLY1305,
        _ => &AES_256_GCM,
    };
    let key = derive_key(passphrase, salt);
    // A 32-byte key is always valid for both algorithms.
    let key = UnboundKey::new(alg, key.bytes())
        .map_err(|_| Error::Crypto(format!("{format}: cannot set up the cipher")))?;
    Ok(LessSafeKey::new(key))
}

fn aad(format: EncryptionFormat, header: &[u8]) -> [u8; AAD_LEN] {
    let mut aad = [0u8; AAD_LEN];
    if format == EncryptionFormat::AesGcm {
        aad.copy_from_slice(&header[..AAD_LEN]);
    }
    aad
}

fn aad_slice(format: EncryptionFormat, aad: &[u8; AAD_LEN]) -> &[u8] {
    if format == EncryptionFormat::AesGcm {
        aad
    } else {
        &[]
    }
}

/// Encrypts `buf[HEADER_LEN..]` in place and writes the header (magic, salt, nonce, tag) into
/// `buf[..HEADER_LEN]`.
#[cfg(feature = "encryption")]
pub(crate) fn seal(
    format: EncryptionFormat,
    passphrase: &[u8],
    params: &Params,
    buf: &mut [u8],
) -> Result<()> {
    debug_assert!(buf.len() >= HEADER_LEN);
    buf[..MAGIC_LEN].copy_from_slice(format.magic());
    buf[MAGIC_LEN..MAGIC_LEN + SALT_LEN].copy_from_slice(&params.salt);
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&params.iv[..NONCE_LEN]);
    buf[MAGIC_LEN + SALT_LEN..AAD_LEN].copy_from_slice(&nonce);
    let aad = aad(format, buf);
    let key = key_for(format, passphrase, &params.salt)?;
    let tag = key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad_slice(format, &aad)),
            &mut buf[HEADER_LEN..],
        )
        .map_err(|_| {
            Error::Crypto(format!(
                "{format}: {} bytes are too many for one message of this cipher (use the chunked \
                 format)",
                buf.len() - HEADER_LEN
            ))
        })?;
    buf[AAD_LEN..HEADER_LEN].copy_from_slice(tag.as_ref());
    Ok(())
}

/// Decrypts and authenticates `data` (a whole ONNXCRY2/3 file) in place; returns the range of
/// the plaintext in `data`.
#[cfg(feature = "encryption")]
pub(crate) fn open(
    format: EncryptionFormat,
    passphrase: &[u8],
    data: &mut [u8],
) -> Result<Range<usize>> {
    if data.len() < HEADER_LEN {
        return Err(Error::Crypto(format!(
            "truncated: {format} data of {} bytes is shorter than its {HEADER_LEN}-byte header",
            data.len()
        )));
    }
    let mut salt = [0u8; SALT_LEN];
    salt.copy_from_slice(&data[MAGIC_LEN..MAGIC_LEN + SALT_LEN]);
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&data[MAGIC_LEN + SALT_LEN..AAD_LEN]);
    let mut tag = [0u8; TAG_LEN];
    tag.copy_from_slice(&data[AAD_LEN..HEADER_LEN]);
    let aad = aad(format, data);
    let key = key_for(format, passphrase, &salt)?;
    let body = &mut data[HEADER_LEN..];
    let opened = key.open_in_place_separate_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::from(aad_slice(format, &aad)),
        Tag::from(tag),
        body,
        0..,
    );
    if opened.is_err() {
        // Leave no unauthenticated plaintext behind.
        body.fill(0);
        return Err(Error::Authentication(format!(
            "{format} tag does not match"
        )));
    }
    Ok(HEADER_LEN..data.len())
}
