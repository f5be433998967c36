//! Encrypted models and files: the C++ library's ONNXCRY1 / ONNXCRY2 / ONNXCRY3 formats, byte
//! for byte, and this library's chunked streaming format ONNXCRYS for data of any size with
//! bounded memory. Specification and security notes: `docs/encryption.md`.
//!
//! | format | cipher | authenticated | layout after the 8-byte magic |
//! |---|---|---|---|
//! | `ONNXCRY1` | AES-256-CBC + PKCS#7 | **no** (compatibility only) | salt 16, IV 16, ciphertext |
//! | `ONNXCRY2` | ChaCha20-Poly1305, no AAD | yes | salt 16, nonce 12, tag 16, ciphertext |
//! | `ONNXCRY3` (default) | AES-256-GCM, AAD = first 36 bytes | yes | salt 16, nonce 12, tag 16, ciphertext |
//! | `ONNXCRYS` | per-chunk AES-256-GCM or ChaCha20-Poly1305 | yes | see [`StreamEncryptor`] |
//!
//! The key of every format is PBKDF2-HMAC-SHA256(passphrase, 16-byte random salt, 100 000
//! iterations, 32 bytes); the passphrase is any bytes (empty included). Decryption dispatches on
//! the magic. Errors: [`Error::Crypto`] for malformed data (empty, bad magic, truncated header,
//! bad parameters) and [`Error::Authentication`] for a wrong key or modified data; neither ever
//! carries key material. Derived keys and plaintext buffers are zeroed when dropped.
//!
//! Files: one concern each — [`format`](EncryptionFormat) (magics, dispatch), `kdf` (PBKDF2,
//! random bytes), `cbc` (ONNXCRY1), `aead` (ONNXCRY2/3), `stream` (ONNXCRYS), `model` (model
//! entry points), `testing` (fixed salt/IV hooks for known-answer tests; only with the `test-hooks` feature).
//! Passphrases and plaintext buffers ([`Passphrase`], [`SecretBytes`]) live a layer below, in
//! `secret`, so that options can hold a passphrase without depending on the ciphers.

mod aead;
mod cbc;
mod format;
mod kdf;
mod model;
mod stream;
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod testing;

use std::io::{Read, Write};
use std::path::Path;

pub use crate::secret::{Passphrase, SecretBytes};
pub use format::{ChunkCipher, EncryptionFormat};
pub(crate) use kdf::{DerivedKey, derive_key};
pub use kdf::{KEY_LEN, PBKDF2_ITERATIONS, SALT_LEN};
pub(crate) use model::save_encrypted_model_with;
pub(crate) use model::{decrypt_model, decrypt_model_from_bytes};
pub use model::{save_encrypted_model, save_encrypted_model_to_bytes};
pub(crate) use stream::KeyCache;
pub use stream::{
    DEFAULT_CHUNK_SIZE, EncryptedFile, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE, StreamDecryptor,
    StreamEncryptor,
};

use crate::codec::{FileLoadMode, ParseOptions, SerializeOptions, parse_bytes, parse_file};
use crate::error::{Error, Result};
use crate::proto::ModelProto;
use crate::storage::AtomicFile;
use crate::wire::Spill;

/// Options of encrypting (the C++ `encryption` argument, plus this library's chunked format).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncryptionOptions {
    /// The format to write (default `AesGcm`, i.e. ONNXCRY3).
    pub format: EncryptionFormat,
    /// Cipher of the chunked format (default AES-256-GCM); ignored by the other formats.
    pub chunk_cipher: ChunkCipher,
    /// Plaintext bytes per chunk of the chunked format (default 1 MiB, 64 ..= 64 MiB); ignored
    /// by the other formats.
    pub chunk_size: u32,
    /// How a model is serialized before it is encrypted.
    pub serialize: SerializeOptions,
}

impl Default for EncryptionOptions {
    fn default() -> Self {
        Self {
            format: EncryptionFormat::default(),
            chunk_cipher: ChunkCipher::default(),
            chunk_size: DEFAULT_CHUNK_SIZE,
            serialize: SerializeOptions::default(),
        }
    }
}

impl EncryptionOptions {
    /// Options writing `format` (other fields default).
    pub fn with_format(format: EncryptionFormat) -> Self {
        Self {
            format,
            ..Self::default()
        }
    }

    /// Checks every value.
    pub fn validate(&self) -> Result<()> {
        if self.format == EncryptionFormat::Chunked
            && !(MIN_CHUNK_SIZE..=MAX_CHUNK_SIZE).contains(&self.chunk_size)
        {
            return Err(Error::InvalidOption {
                name: "chunk_size",
                reason: format!(
                    "{} is outside {MIN_CHUNK_SIZE} ..= {MAX_CHUNK_SIZE}",
                    self.chunk_size
                ),
            });
        }
        self.serialize.validate()
    }
}

/// Salt and IV / nonce of one encryption (random, or fixed by the [`testing`] hooks). AEAD
/// formats use `iv[..12]` as the nonce, the chunked format `iv[..4]` as the nonce prefix.
#[derive(Clone, Copy)]
pub(crate) struct Params {
    pub(crate) salt: [u8; SALT_LEN],
    pub(crate) iv: [u8; 16],
}

impl Params {
    pub(crate) fn random() -> Result<Self> {
        Ok(Self {
            salt: kdf::random()?,
            iv: kdf::random()?,
        })
    }
}

/// Bytes before the ciphertext of a one-shot format, and spare capacity its sealing needs.
fn oneshot_layout(format: EncryptionFormat) -> (usize, usize) {
    match format {
        EncryptionFormat::AesCbc => (cbc::HEADER_LEN, cbc::EXTRA),
        _ => (aead::HEADER_LEN, 0),
    }
}

/// `Ok` in builds with the `encryption` feature. Every entry point of this module calls it first,
/// so that without the feature the format code behind it is left out of the library.
#[inline(always)]
pub(crate) fn require_encryption() -> Result<()> {
    crate::error::require_feature(cfg!(feature = "encryption"), "encryption")
}

/// Encrypts `len` plaintext bytes written by `produce` into a new buffer, in `opts.format`.
/// The plaintext only ever exists in the output buffer, where it is encrypted in place (or in
/// one chunk buffer), and is zeroed if anything fails.
pub(crate) fn encrypt_to_vec(
    len: u64,
    produce: impl FnOnce(&mut dyn Spill),
    key: &[u8],
    opts: &EncryptionOptions,
    params: &Params,
) -> Result<Vec<u8>> {
    require_encryption()?;
    opts.validate()?;
    let too_big = || Error::LimitExceeded(format!("{len} bytes do not fit in memory"));
    if opts.format == EncryptionFormat::Chunked {
        let cap = usize::try_from(StreamEncryptor::<Vec<u8>>::encrypted_len(
            len,
            opts.chunk_size,
        ))
        .map_err(|_| too_big())?;
        let mut out = Vec::new();
        out.try_reserve_exact(cap)
            .map_err(|_| Error::alloc_failed(cap, "the encrypted data"))?;
        let mut enc =
            StreamEncryptor::with_params(out, key, opts.chunk_cipher, opts.chunk_size, params)?;
        produce(&mut enc);
        if enc.plaintext_len() != len {
            return Err(Error::Crypto(
                "plaintext length changed while encrypting".into(),
            ));
        }
        return enc.finish();
    }
    let (header, extra) = oneshot_layout(opts.format);
    let total = usize::try_from(len)
        .ok()
        .and_then(|l| l.checked_add(header + extra))
        .ok_or_else(too_big)?;
    let mut out = zeroize::Zeroizing::new(Vec::new());
    out.try_reserve_exact(total)
        .map_err(|_| Error::alloc_failed(total, "the encrypted data"))?;
    out.resize(header, 0);
    produce(&mut *out);
    if out.len() as u64 != header as u64 + len {
        return Err(Error::Crypto(
            "plaintext length changed while encrypting".into(),
        ));
    }
    seal_oneshot(opts.format, key, params, &mut out)?;
    // The buffer now holds ciphertext only: hand it out without zeroing.
    Ok(std::mem::take(&mut *out))
}

/// Encrypts `buf[header..]` in place (one-shot formats) and writes the header.
fn seal_oneshot(
    format: EncryptionFormat,
    key: &[u8],
    params: &Params,
    buf: &mut Vec<u8>,
) -> Result<()> {
    #[cfg(not(feature = "encryption"))]
    {
        let _ = (format, key, params, buf);
        Err(Error::feature_missing("encryption"))
    }
    #[cfg(feature = "encryption")]
    match format {
        EncryptionFormat::AesCbc => cbc::seal(key, params, buf),
        EncryptionFormat::ChaCha20Poly1305 | EncryptionFormat::AesGcm => {
            aead::seal(format, key, params, buf)
        }
        EncryptionFormat::Chunked => Err(Error::Crypto(
            "internal: the chunked format is not one-shot".into(),
        )),
    }
}

/// Decrypts a whole one-shot file in place; returns the plaintext range and whether the
/// format's own check passed (always true for the authenticated formats, which fail instead;
/// for ONNXCRY1 the padding, to be reported only after the plaintext was parsed, see
/// [`cbc::open`]).
fn open_oneshot(
    format: EncryptionFormat,
    key: &[u8],
    data: &mut [u8],
) -> Result<(std::ops::Range<usize>, bool)> {
    #[cfg(not(feature = "encryption"))]
    {
        let _ = (format, key, data);
        Err(Error::feature_missing("encryption"))
    }
    #[cfg(feature = "encryption")]
    match format {
        EncryptionFormat::AesCbc => cbc::open(key, data),
        EncryptionFormat::ChaCha20Poly1305 | EncryptionFormat::AesGcm => {
            Ok((aead::open(format, key, data)?, true))
        }
        EncryptionFormat::Chunked => Err(Error::Crypto(
            "internal: the chunked format is not one-shot".into(),
        )),
    }
}

/// ONNXCRY1's wrong-key check beyond the padding: the plaintext must be a model without unknown
/// fields in `ModelProto` and `GraphProto`. Files of the C++ library never have any (its parser
/// refuses them), while the random bytes a wrong key yields almost always do: this cuts the
/// chance that a wrong key passes the padding and parse checks by a further ~15x (see
/// docs/encryption.md for the measured rates).
pub(crate) fn onnxcry1_plausible(m: &ModelProto) -> bool {
    use crate::proto::Message;
    m.unknown_fields().is_empty()
        && m.graph
            .as_deref()
            .is_none_or(|g| g.unknown_fields().is_empty())
}

/// Whether `plaintext` is an acceptable ONNXCRY1 plaintext (structure only; payloads are
/// skipped, not copied). The parse reads through a cut (see `crate::codec::parse_bytes`):
/// where a decrypted plaintext ends depends on its padding byte, and the check's work must not.
fn onnxcry1_plaintext_ok(plaintext: &[u8]) -> bool {
    let opts = ParseOptions {
        skip_raw_data: true,
        ..ParseOptions::default()
    };
    parse_bytes::<ModelProto>(plaintext, &opts, true).is_ok_and(|m| onnxcry1_plausible(&m))
}

/// The error of writing ONNXCRY1 for something it cannot hold.
pub(crate) fn onnxcry1_refused(what: &str) -> Error {
    Error::InvalidArgument(format!(
        "ONNXCRY1 holds models without unknown fields in ModelProto / GraphProto only (the C++ \
         library's format; its wrong-key check relies on it), and {what}; use ONNXCRY3"
    ))
}

/// Refuses a file that ONNXCRY1 cannot hold (see [`onnxcry1_plausible`]); cheap: the file is
/// mapped and only its structure is parsed.
fn check_model_file(path: &Path) -> Result<()> {
    let opts = ParseOptions {
        no_copy: true,
        file_load_mode: FileLoadMode::Mmap,
        ..ParseOptions::default()
    };
    match parse_file::<ModelProto>(path, &opts) {
        Ok(m) if onnxcry1_plausible(&m) => Ok(()),
        Ok(_) => Err(onnxcry1_refused(&format!(
            "{} has unknown fields",
            path.display()
        ))),
        Err(Error::Decode(e)) => Err(onnxcry1_refused(&format!(
            "{} is not a valid model: {e}",
            path.display()
        ))),
        Err(e) => Err(e),
    }
}

/// Decrypts `data` in any format without the ONNXCRY1 model check; returns the plaintext, the
/// format and whether an ONNXCRY1 padding was valid (see [`cbc::open`]; true for the others).
fn decrypt_any(data: &[u8], key: &[u8]) -> Result<(SecretBytes, EncryptionFormat, bool)> {
    require_encryption()?;
    let format = EncryptionFormat::detect(data)?;
    if format == EncryptionFormat::Chunked {
        return Ok((stream::decrypt_slice(data, key)?, format, true));
    }
    let mut buf = Vec::new();
    buf.try_reserve_exact(data.len())
        .map_err(|_| Error::alloc_failed(data.len(), "the decrypted data"))?;
    buf.extend_from_slice(data);
    let mut secret = SecretBytes::new(buf, 0..0);
    let (range, padding_ok) = open_oneshot(format, key, secret.buffer_mut())?;
    secret.set_range(range);
    Ok((secret, format, padding_ok))
}

/// Encrypts arbitrary bytes in `opts.format` (random salt and IV / nonce).
///
/// ONNXCRY1 holds a serialized model only (a parse is its only wrong-key check besides the
/// padding): with `AesCbc`, bytes that do not parse as a `ModelProto` without unknown fields
/// (in `ModelProto` and `GraphProto`) are refused.
pub fn encrypt_bytes(plaintext: &[u8], key: &[u8], opts: &EncryptionOptions) -> Result<Vec<u8>> {
    encrypt_bytes_with(plaintext, key, opts, &Params::random()?)
}

pub(crate) fn encrypt_bytes_with(
    plaintext: &[u8],
    key: &[u8],
    opts: &EncryptionOptions,
    params: &Params,
) -> Result<Vec<u8>> {
    if opts.format == EncryptionFormat::AesCbc && !onnxcry1_plaintext_ok(plaintext) {
        return Err(onnxcry1_refused("these bytes are not such a model"));
    }
    encrypt_to_vec(
        plaintext.len() as u64,
        |s| s.take(plaintext),
        key,
        opts,
        params,
    )
}

/// Decrypts data in any format (dispatching on the magic) into a buffer that is zeroed when
/// dropped. For ONNXCRY1 the plaintext must also parse as a model (without unknown fields in
/// `ModelProto` / `GraphProto`), so that a wrong key is not taken for a right one.
pub fn decrypt_bytes(data: &[u8], key: &[u8]) -> Result<SecretBytes> {
    let (plain, format, padding_ok) = decrypt_any(data, key)?;
    // `&`, not `&&`: the plaintext is parsed whatever the padding (see `cbc::open`).
    if format == EncryptionFormat::AesCbc && !(onnxcry1_plaintext_ok(&plain) & padding_ok) {
        return Err(cbc::auth_error());
    }
    Ok(plain)
}

/// The format of the encrypted file at `path` (from its magic).
pub fn detect_file_format(path: impl AsRef<Path>) -> Result<EncryptionFormat> {
    let path = path.as_ref();
    let mut head = [0u8; format::MAGIC_LEN];
    let (mut file, _) = crate::storage::open_regular_file(path)?;
    let mut n = 0;
    while n < head.len() {
        match file.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    EncryptionFormat::detect(&head[..n])
}

/// Reads a whole one-shot file and decrypts it in place (with the padding validity, as
/// [`decrypt_any`]).
fn read_oneshot(path: &Path, key: &[u8], format: EncryptionFormat) -> Result<(SecretBytes, bool)> {
    let data = crate::storage::read_file(path)?;
    let mut secret = SecretBytes::new(data, 0..0);
    let found = EncryptionFormat::detect(secret.buffer_mut())?;
    if found != format {
        return Err(Error::Crypto(format!(
            "{} changed while it was read",
            path.display()
        )));
    }
    let (range, padding_ok) = open_oneshot(format, key, secret.buffer_mut())?;
    secret.set_range(range);
    Ok((secret, padding_ok))
}

/// Encrypts the file `input` (any bytes, e.g. an external-data file) into `output`, atomically
/// (temporary file + rename). With the chunked format the file is streamed with memory bounded
/// by one chunk, at any size; the one-shot formats read it whole. Returns the plaintext length.
pub fn encrypt_file(
    input: impl AsRef<Path>,
    output: impl AsRef<Path>,
    key: &[u8],
    opts: &EncryptionOptions,
) -> Result<u64> {
    encrypt_file_with(
        input.as_ref(),
        output.as_ref(),
        key,
        opts,
        &Params::random()?,
    )
}

pub(crate) fn encrypt_file_with(
    input: &Path,
    output: &Path,
    key: &[u8],
    opts: &EncryptionOptions,
    params: &Params,
) -> Result<u64> {
    require_encryption()?;
    opts.validate()?;
    if opts.format == EncryptionFormat::AesCbc {
        check_model_file(input)?;
    }
    let (mut src, _) = crate::storage::open_regular_file(input)?;
    let mut out = AtomicFile::create(output)?;
    let len = if opts.format == EncryptionFormat::Chunked {
        let mut enc = StreamEncryptor::with_params(
            &mut *out.file(),
            key,
            opts.chunk_cipher,
            opts.chunk_size,
            params,
        )?;
        enc.set_label(output);
        let len = enc.read_from(&mut src).map_err(|e| relabel(e, input))?;
        enc.finish()?;
        len
    } else {
        let len = src.metadata().map_err(|e| Error::io(input, e))?.len();
        let usize_len = usize::try_from(len)
            .map_err(|_| Error::LimitExceeded(format!("{len} bytes do not fit in memory")))?;
        let mut failed = None;
        let bytes = encrypt_to_vec(
            len,
            |sink| {
                // Through a small buffer that is zeroed when dropped.
                let mut piece = zeroize::Zeroizing::new(vec![0u8; (1 << 20).min(usize_len)]);
                let mut left = usize_len;
                while left > 0 && failed.is_none() {
                    let n = left.min(piece.len());
                    match src.read_exact(&mut piece[..n]) {
                        Ok(()) => sink.take(&piece[..n]),
                        Err(e) => failed = Some(Error::io(input, e)),
                    }
                    left -= n;
                }
            },
            key,
            opts,
            params,
        );
        if let Some(e) = failed {
            return Err(e);
        }
        let bytes = bytes?;
        out.file()
            .write_all(&bytes)
            .map_err(|e| Error::io(output, e))?;
        len
    };
    out.commit()?;
    Ok(len)
}

fn relabel(e: Error, path: &Path) -> Error {
    match e {
        Error::Io { path: p, source } if p.as_os_str() == "<plaintext source>" => Error::Io {
            path: path.to_path_buf(),
            source,
        },
        e => e,
    }
}

/// Decrypts the file `input` (any format, by its magic) into `output`, atomically: `output` is
/// written only when every byte authenticated. ONNXCRYS files stream with memory bounded by one
/// chunk; the one-shot formats are read whole (and ONNXCRY1 must decrypt to a model). Returns
/// the plaintext length.
pub fn decrypt_file(input: impl AsRef<Path>, output: impl AsRef<Path>, key: &[u8]) -> Result<u64> {
    require_encryption()?;
    let (input, output) = (input.as_ref(), output.as_ref());
    let format = detect_file_format(input)?;
    let mut out = AtomicFile::create(output)?;
    let len = if format == EncryptionFormat::Chunked {
        let (src, _) = crate::storage::open_regular_file(input)?;
        let mut dec = StreamDecryptor::new(src, key).map_err(|e| relabel_stream(e, input))?;
        dec.set_label(input);
        dec.decrypt_to(&mut out.file(), output)?
    } else {
        let (plain, padding_ok) = read_oneshot(input, key, format)?;
        // `&`, not `&&`: the plaintext is parsed whatever the padding (see `cbc::open`).
        if format == EncryptionFormat::AesCbc && !(onnxcry1_plaintext_ok(&plain) & padding_ok) {
            return Err(cbc::auth_error());
        }
        out.file()
            .write_all(&plain)
            .map_err(|e| Error::io(output, e))?;
        plain.len() as u64
    };
    out.commit()?;
    Ok(len)
}

fn relabel_stream(e: Error, path: &Path) -> Error {
    match e {
        Error::Io { path: p, source } if p.as_os_str() == "<encrypted stream>" => Error::Io {
            path: path.to_path_buf(),
            source,
        },
        e => e,
    }
}
