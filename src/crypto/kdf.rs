//! Key derivation (PBKDF2-HMAC-SHA256, 100 000 iterations, 16-byte salt, 32-byte key) and random
//! bytes from the operating system, as the C++ library does for every format.

// Without the `encryption` feature nothing derives or uses a key (see `derive_key`).
#![cfg_attr(
    not(feature = "encryption"),
    allow(dead_code, unused_imports, unused_mut)
)]

use std::num::NonZeroU32;

#[cfg(feature = "encryption")]
use ring::rand::{SecureRandom, SystemRandom};
use zeroize::Zeroizing;

use crate::error::{Error, Result};

/// Length of the PBKDF2 salt stored in every header.
pub const SALT_LEN: usize = 16;
/// Length of the derived key (AES-256 / ChaCha20).
pub const KEY_LEN: usize = 32;
/// PBKDF2-HMAC-SHA256 iterations (fixed by the ONNXCRY formats; not stored in the files).
pub const PBKDF2_ITERATIONS: u32 = 100_000;

/// A key derived from a passphrase; zeroed when dropped. Never printed (no `Debug`).
pub(crate) struct DerivedKey(Zeroizing<[u8; KEY_LEN]>);

impl DerivedKey {
    /// The key bytes (to hand to a cipher, which copies them into its own key schedule).
    pub(crate) fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

/// Derives the 32-byte key of `passphrase` (any bytes, empty included) and `salt`.
pub(crate) fn derive_key(passphrase: &[u8], salt: &[u8; SALT_LEN]) -> DerivedKey {
    derive_key_with(passphrase, salt, iterations())
}

/// The PBKDF2 iteration count of a derivation: [`PBKDF2_ITERATIONS`], except in fuzz builds
/// (`--cfg fuzzing`, set by cargo-fuzz: one iteration, so that the decryption target is not
/// bound by the KDF) and in this crate's tests under an emulator (`test-hooks` builds only, see
/// `crypto::testing::pbkdf2_iterations`); the formats' code paths are otherwise the same.
fn iterations() -> u32 {
    #[cfg(feature = "test-hooks")]
    let n = pbkdf2_iterations();
    #[cfg(not(feature = "test-hooks"))]
    let n = PBKDF2_ITERATIONS;
    if cfg!(fuzzing) { 1 } else { n }
}

/// [`derive_key`] with `n` iterations.
fn derive_key_with(passphrase: &[u8], salt: &[u8; SALT_LEN], n: u32) -> DerivedKey {
    let mut key = Zeroizing::new([0u8; KEY_LEN]);
    let iterations = NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
    // Without the `encryption` feature no cipher can use a key (every entry point of the ciphers
    // fails first with `Error::Unsupported`): the key stays zero.
    #[cfg(not(feature = "encryption"))]
    let _ = (iterations, salt, passphrase);
    #[cfg(feature = "encryption")]
    ring::pbkdf2::derive(
        ring::pbkdf2::PBKDF2_HMAC_SHA256,
        iterations,
        salt,
        passphrase,
        &mut key[..],
    );
    DerivedKey(key)
}

// Test hooks (the `test-hooks` feature only; `crypto::testing` re-exports them): fewer
// iterations for this crate's tests run under an emulator and for its exhaustive tests.
/// PBKDF2 iterations of the derivations of a test process run under an emulator (see
/// [`emulated`]) and of [`with_few_pbkdf2`]: 1/100 of the formats' count. Under qemu-user a
/// derivation with the real count takes about a second; the exhaustive tests make thousands.
#[cfg(feature = "test-hooks")]
pub const FEW_PBKDF2_ITERATIONS: u32 = PBKDF2_ITERATIONS / 100;

/// Whether this test process runs under an emulator: the environment variable
/// `ONNXL_TEST_EMULATED` is `1` (read once; the cross-target test step sets it for its
/// qemu-user runs).
#[cfg(feature = "test-hooks")]
pub fn emulated() -> bool {
    static EMULATED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *EMULATED.get_or_init(|| std::env::var_os("ONNXL_TEST_EMULATED").is_some_and(|v| v == "1"))
}

#[cfg(feature = "test-hooks")]
thread_local! {
    /// The count set by [`with_pbkdf2_iterations`] on this thread, if inside it.
    static COUNT: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
}

/// The PBKDF2 iteration count of a derivation made now on this thread: the one of an enclosing
/// [`with_pbkdf2_iterations`]; else [`FEW_PBKDF2_ITERATIONS`] under an emulator and the
/// formats' 100 000 otherwise. Keys derived with one count agree with each other, so
/// encrypting and decrypting in one test process run the formats' code paths unchanged.
#[cfg(feature = "test-hooks")]
pub fn pbkdf2_iterations() -> u32 {
    COUNT.with(std::cell::Cell::get).unwrap_or(if emulated() {
        FEW_PBKDF2_ITERATIONS
    } else {
        PBKDF2_ITERATIONS
    })
}

/// Runs `f` with `n` PBKDF2 iterations for the derivations it makes on this thread.
#[cfg(feature = "test-hooks")]
pub fn with_pbkdf2_iterations<T>(n: u32, f: impl FnOnce() -> T) -> T {
    /// Restores the previous state, also when `f` panics.
    struct Restore(Option<u32>);
    impl Drop for Restore {
        fn drop(&mut self) {
            COUNT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(COUNT.with(|c| c.replace(Some(n))));
    f()
}

/// Runs `f` with the formats' iteration count for the derivations it makes on this thread
/// (vectors that must decrypt as written: known answers, files of the reference
/// implementation).
#[cfg(feature = "test-hooks")]
pub fn with_real_pbkdf2<T>(f: impl FnOnce() -> T) -> T {
    with_pbkdf2_iterations(PBKDF2_ITERATIONS, f)
}

/// Runs `f` with [`FEW_PBKDF2_ITERATIONS`] for the derivations it makes on this thread: tests
/// of what a derivation's count does not change (tampering, truncation, wrong keys), which
/// make thousands.
#[cfg(feature = "test-hooks")]
pub fn with_few_pbkdf2<T>(f: impl FnOnce() -> T) -> T {
    with_pbkdf2_iterations(FEW_PBKDF2_ITERATIONS, f)
}

/// `N` bytes from the operating system's random number generator.
pub(crate) fn random<const N: usize>() -> Result<[u8; N]> {
    crate::error::require_feature(cfg!(feature = "encryption"), "encryption")?;
    let mut out = [0u8; N];
    #[cfg(feature = "encryption")]
    SystemRandom::new()
        .fill(&mut out)
        .map_err(|_| Error::Crypto("the system random number generator failed".into()))?;
    Ok(out)
}

#[cfg(all(test, feature = "encryption"))]
mod tests {
    use super::*;

    #[test]
    fn pbkdf2_matches_python_hashlib() {
        // Computed independently with Python:
        // hashlib.pbkdf2_hmac("sha256", b"password", b"0123456789abcdef", 100000, 32).hex()
        let salt: [u8; SALT_LEN] = *b"0123456789abcdef";
        let key = derive_key_with(b"password", &salt, PBKDF2_ITERATIONS);
        assert_eq!(
            hex(key.bytes()),
            "a75190a792cd59d6d9c8c3a63b11c276ad449972b7886e1c2d819c286053366f",
        );
    }

    /// Derivations use the formats' count: always without the test hooks; with them, unless
    /// the test process runs under an emulator (then only inside `with_real_pbkdf2`).
    #[test]
    fn derivations_use_100_000_iterations() {
        #[cfg(not(feature = "test-hooks"))]
        assert_eq!(iterations(), PBKDF2_ITERATIONS);
        #[cfg(feature = "test-hooks")]
        {
            let expected = if emulated() {
                FEW_PBKDF2_ITERATIONS
            } else {
                PBKDF2_ITERATIONS
            };
            assert_eq!(iterations(), expected);
            assert_eq!(with_real_pbkdf2(iterations), PBKDF2_ITERATIONS);
            assert_eq!(iterations(), expected, "restored");
            assert_eq!(with_few_pbkdf2(iterations), FEW_PBKDF2_ITERATIONS);
            assert_eq!(
                with_few_pbkdf2(|| with_real_pbkdf2(iterations)),
                PBKDF2_ITERATIONS,
                "the innermost count"
            );
        }
        assert_eq!(PBKDF2_ITERATIONS, 100_000);
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn random_is_random() {
        let a: [u8; 16] = random().unwrap();
        let b: [u8; 16] = random().unwrap();
        assert_ne!(a, b);
    }
}
