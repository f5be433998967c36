//! Test hooks, NOT public API: encryption with a fixed salt and IV / nonce, for known-answer
//! vectors. Never use a fixed salt or nonce for real data (a repeated nonce under the same key
//! breaks AES-GCM and ChaCha20-Poly1305). And fewer PBKDF2 iterations for tests run under an
//! emulator.

use std::cell::Cell;
use std::path::Path;
use std::sync::OnceLock;

use super::kdf::PBKDF2_ITERATIONS;
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

/// PBKDF2 iterations of the derivations of a test process run under an emulator (see
/// [`emulated`]): 1/100 of the formats' count. Under qemu-user a derivation with the real count
/// takes about a second, and the encryption tests make hundreds.
pub const EMULATED_PBKDF2_ITERATIONS: u32 = PBKDF2_ITERATIONS / 100;

/// Whether this test process runs under an emulator: the environment variable
/// `ONNXL_TEST_EMULATED` is `1` (read once; the cross-target test step sets it for its
/// qemu-user runs).
pub fn emulated() -> bool {
    static EMULATED: OnceLock<bool> = OnceLock::new();
    *EMULATED.get_or_init(|| std::env::var_os("ONNXL_TEST_EMULATED").is_some_and(|v| v == "1"))
}

thread_local! {
    /// Inside [`with_real_pbkdf2`] on this thread.
    static REAL_COUNT: Cell<bool> = const { Cell::new(false) };
}

/// The PBKDF2 iteration count of a derivation made now on this thread:
/// [`EMULATED_PBKDF2_ITERATIONS`] under an emulator, outside [`with_real_pbkdf2`]; else the
/// formats' 100 000. Keys derived this way agree with each other, so encrypting and decrypting
/// in one test process run the formats' code paths unchanged.
pub fn pbkdf2_iterations() -> u32 {
    if emulated() && !REAL_COUNT.with(Cell::get) {
        EMULATED_PBKDF2_ITERATIONS
    } else {
        PBKDF2_ITERATIONS
    }
}

/// Runs `f` with the formats' iteration count for the derivations it makes on this thread
/// (vectors that must decrypt as written: known answers, files of the reference
/// implementation).
pub fn with_real_pbkdf2<T>(f: impl FnOnce() -> T) -> T {
    /// Restores the previous state, also when `f` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            REAL_COUNT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(REAL_COUNT.with(|c| c.replace(true)));
    f()
}
