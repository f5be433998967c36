//! Test hooks, NOT public API: encryption with a fixed salt and IV / nonce, for known-answer
//! vectors. Never use a fixed salt or nonce for real data (a repeated nonce under the same key
//! breaks AES-GCM and ChaCha20-Poly1305). And fewer PBKDF2 iterations for tests run under an
//! emulator and for the exhaustive tests.

use std::path::Path;

pub use super::kdf::{
    FEW_PBKDF2_ITERATIONS, emulated, pbkdf2_iterations, with_few_pbkdf2, with_pbkdf2_iterations,
    with_real_pbkdf2,
};
use super::{EncryptionOptions, Params};
use crate::error::Result;
use crate::proto::ModelProto;

fn params(salt: [u8; 16], iv: [u8; 16]) -> Params {
    Params { salt, iv }
}

/// [`super::encrypt_bytes`] with a fixed salt and IV. ONNXCRY1 uses all 16 IV bytes, ONNXCRY2/3
/// the first 12 as the nonce, ONNXCRYS the first 4 as the nonce prefix.
pub fn encrypt_bytes_with(
    plaintext: &[u8],
    key: &[u8],
    opts: &EncryptionOptions,
    salt: [u8; 16],
    iv: [u8; 16],
) -> Result<Vec<u8>> {
    super::encrypt_bytes_with(plaintext, key, opts, &params(salt, iv))
}

/// [`super::save_encrypted_model_to_bytes`] with a fixed salt and IV.
pub fn save_encrypted_model_to_bytes_with(
    model: &ModelProto,
    key: &[u8],
    opts: &EncryptionOptions,
    salt: [u8; 16],
    iv: [u8; 16],
) -> Result<Vec<u8>> {
    super::model::save_to_bytes_with(model, key, opts, &params(salt, iv))
}

/// [`super::encrypt_file`] with a fixed salt and IV.
pub fn encrypt_file_with(
    input: &Path,
    output: &Path,
    key: &[u8],
    opts: &EncryptionOptions,
    salt: [u8; 16],
    iv: [u8; 16],
) -> Result<u64> {
    super::encrypt_file_with(input, output, key, opts, &params(salt, iv))
}
