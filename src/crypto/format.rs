//! The formats: magic numbers, the format enum, and dispatch on the magic.

use crate::error::{Error, Result};

/// Length of every magic.
pub const MAGIC_LEN: usize = 8;
/// ONNXCRY1: AES-256-CBC + PKCS#7, no MAC (C++ onnx_light).
pub const MAGIC_CBC: &[u8; MAGIC_LEN] = b"ONNXCRY1";
/// ONNXCRY2: ChaCha20-Poly1305, no AAD (C++ onnx_light).
pub const MAGIC_CHACHA: &[u8; MAGIC_LEN] = b"ONNXCRY2";
/// ONNXCRY3: AES-256-GCM, AAD = magic + salt + nonce (C++ onnx_light).
pub const MAGIC_GCM: &[u8; MAGIC_LEN] = b"ONNXCRY3";
/// ONNXCRYS: this library's chunked streaming AEAD format (docs/encryption.md).
pub const MAGIC_CHUNKED: &[u8; MAGIC_LEN] = b"ONNXCRYS";

/// An encrypted file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[repr(u32)]
pub enum EncryptionFormat {
    /// `ONNXCRY1`: AES-256-CBC with PKCS#7 padding and NO authentication. For compatibility
    /// with files of the C++ library only: a modified file is not detected as such, and a wrong
    /// key is caught only by the padding check and by parsing the result as a model.
    AesCbc = 1,
    /// `ONNXCRY2`: ChaCha20-Poly1305 (authenticated; the header is not bound as AAD, but every
    /// header byte still feeds the key, nonce or tag, so any change is detected).
    ChaCha20Poly1305 = 2,
    /// `ONNXCRY3`: AES-256-GCM with the header as AAD (authenticated). The default.
    #[default]
    AesGcm = 3,
    /// `ONNXCRYS`: this library's chunked format (authenticated, streaming with bounded memory,
    /// any size; truncation, reordering and extension are detected). Not readable by the C++
    /// library.
    Chunked = 4,
}

impl EncryptionFormat {
    /// Every format, in value order.
    pub const ALL: [EncryptionFormat; 4] = [
        Self::AesCbc,
        Self::ChaCha20Poly1305,
        Self::AesGcm,
        Self::Chunked,
    ];

    /// The 8-byte magic that starts files of this format.
    pub fn magic(self) -> &'static [u8; MAGIC_LEN] {
        match self {
            Self::AesCbc => MAGIC_CBC,
            Self::ChaCha20Poly1305 => MAGIC_CHACHA,
            Self::AesGcm => MAGIC_GCM,
            Self::Chunked => MAGIC_CHUNKED,
        }
    }

    /// The format's name (its magic as text).
    pub fn name(self) -> &'static str {
        match self {
            Self::AesCbc => "ONNXCRY1",
            Self::ChaCha20Poly1305 => "ONNXCRY2",
            Self::AesGcm => "ONNXCRY3",
            Self::Chunked => "ONNXCRYS",
        }
    }

    /// Whether a wrong key or a modification is always detected (all but `AesCbc`).
    pub fn is_authenticated(self) -> bool {
        self != Self::AesCbc
    }

    /// The format starting `data` (the first 8 bytes), or why there is none: empty input, a
    /// prefix of a magic (truncated), or an unknown magic. Only the magic is checked.
    pub fn detect(data: &[u8]) -> Result<Self> {
        if data.is_empty() {
            return Err(Error::Crypto("empty input (no encrypted data)".into()));
        }
        let head = &data[..data.len().min(MAGIC_LEN)];
        for f in Self::ALL {
            let magic = f.magic();
            if data.len() >= MAGIC_LEN && head == magic {
                return Ok(f);
            }
        }
        if data.len() < MAGIC_LEN && Self::ALL.iter().any(|f| f.magic().starts_with(head)) {
            return Err(Error::Crypto(format!(
                "truncated: {} bytes, shorter than the 8-byte magic",
                data.len()
            )));
        }
        Err(Error::Crypto(
            "bad magic: not an encrypted model (expected ONNXCRY1, ONNXCRY2, ONNXCRY3 or ONNXCRYS)"
                .into(),
        ))
    }
}

impl std::fmt::Display for EncryptionFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The AEAD cipher of the chunked format (`ONNXCRYS`); the values are stored in its header and
/// match the digit of the one-shot format with the same cipher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[repr(u8)]
pub enum ChunkCipher {
    /// ChaCha20-Poly1305 (fast without AES instructions).
    ChaCha20Poly1305 = 2,
    /// AES-256-GCM (the default).
    #[default]
    AesGcm = 3,
}

impl ChunkCipher {
    pub(crate) fn from_id(id: u8) -> Option<Self> {
        match id {
            2 => Some(Self::ChaCha20Poly1305),
            3 => Some(Self::AesGcm),
            _ => None,
        }
    }

    #[cfg(feature = "encryption")]
    pub(crate) fn algorithm(self) -> &'static ring::aead::Algorithm {
        match self {
            Self::ChaCha20Poly1305 => &ring::aead::CHACHA20_POLY1305,
            Self::AesGcm => &ring::aead::AES_256_GCM,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_distinguishes_empty_truncated_and_bad_magic() {
        let msg = |d: &[u8]| EncryptionFormat::detect(d).unwrap_err().to_string();
        assert!(msg(b"").contains("empty input"));
        assert!(msg(b"ONNXC").contains("truncated"));
        assert!(msg(b"ONNXCRY").contains("truncated"));
        assert!(msg(b"ONNXCRY9").contains("bad magic"));
        assert!(msg(b"\x08\x07").contains("bad magic"));
        for f in EncryptionFormat::ALL {
            assert_eq!(EncryptionFormat::detect(f.magic()).unwrap(), f);
        }
    }
}
