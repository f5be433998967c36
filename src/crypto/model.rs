//! Model entry points, mirroring the C++ library: `SaveEncryptedModel`,
//! `SaveEncryptedModelToString`, and the decrypt-and-parse half of `LoadEncryptedModel` /
//! `LoadEncryptedModelFromString` (the crate root's [`crate::load_encrypted_model`] adds the
//! model's external data).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use super::format::EncryptionFormat;
use super::stream::{EncryptedFile, StreamEncryptor};
use super::{
    EncryptionOptions, Params, cbc, decrypt_any, detect_file_format, encrypt_to_vec,
    onnxcry1_plausible, onnxcry1_refused, read_oneshot, require_encryption,
};
use crate::codec::{ParseOptions, parse_bytes, parse_shared_bytes, plan, skip_payloads};
use crate::error::{Error, Result};
use crate::proto::ModelProto;
use crate::secret::SecretBytes;
use crate::storage::AtomicFile;
use crate::wire::encode_streaming;

/// Serializes and encrypts `model` into a new buffer (C++ `SaveEncryptedModelToString`), in
/// `opts.format` (default ONNXCRY3) with a random salt and IV / nonce. The plaintext exists only
/// inside the output buffer, where it is encrypted in place (or one chunk at a time).
pub fn save_encrypted_model_to_bytes(
    model: &ModelProto,
    key: &[u8],
    opts: &EncryptionOptions,
) -> Result<Vec<u8>> {
    save_to_bytes_with(model, key, opts, &Params::random()?)
}

pub(crate) fn save_to_bytes_with(
    model: &ModelProto,
    key: &[u8],
    opts: &EncryptionOptions,
    params: &Params,
) -> Result<Vec<u8>> {
    opts.validate()?;
    if let Some((copy, serialize)) = skip_payloads(model, &opts.serialize) {
        let opts = EncryptionOptions {
            serialize,
            ..opts.clone()
        };
        return save_to_bytes_with(&copy, key, &opts, params);
    }
    if opts.format == EncryptionFormat::AesCbc && !onnxcry1_plausible(model) {
        return Err(onnxcry1_refused("this model has unknown fields"));
    }
    let (len, sizes) = plan(model, &opts.serialize)?;
    encrypt_to_vec(
        len,
        |s| {
            encode_streaming(model, &sizes, len, s);
        },
        key,
        opts,
        params,
    )
}

/// Serializes and encrypts `model` to `path` atomically (C++ `SaveEncryptedModel`): a temporary
/// file beside `path` is written, synced and renamed over it. With the chunked format the model
/// is serialized straight into the encryptor, one chunk of memory at a time, at any size.
pub fn save_encrypted_model(
    model: &ModelProto,
    path: impl AsRef<Path>,
    key: &[u8],
    opts: &EncryptionOptions,
) -> Result<()> {
    save_encrypted_model_with(model, path.as_ref(), key, opts, true)
}

/// [`save_encrypted_model`]; `sync`: fsync the file before it replaces the old one.
pub(crate) fn save_encrypted_model_with(
    model: &ModelProto,
    path: &Path,
    key: &[u8],
    opts: &EncryptionOptions,
    sync: bool,
) -> Result<()> {
    require_encryption()?;
    opts.validate()?;
    if let Some((copy, serialize)) = skip_payloads(model, &opts.serialize) {
        let opts = EncryptionOptions {
            serialize,
            ..opts.clone()
        };
        return save_encrypted_model_with(&copy, path, key, &opts, sync);
    }
    let params = Params::random()?;
    if opts.format != EncryptionFormat::Chunked {
        let bytes = save_to_bytes_with(model, key, opts, &params)?;
        let mut out = AtomicFile::create_with(path, sync)?;
        out.file()
            .write_all(&bytes)
            .map_err(|e| Error::io(path, e))?;
        return out.commit();
    }
    let (len, sizes) = plan(model, &opts.serialize)?;
    let mut out = AtomicFile::create_with(path, sync)?;
    {
        let mut enc = StreamEncryptor::with_params(
            std::io::BufWriter::with_capacity(1 << 16, &mut *out.file()),
            key,
            opts.chunk_cipher,
            opts.chunk_size,
            &params,
        )?;
        enc.set_label(path);
        encode_streaming(model, &sizes, len, &mut enc);
        if enc.plaintext_len() != len {
            return Err(Error::Crypto(
                "serialized size differs from the planned size".into(),
            ));
        }
        enc.finish()?
            .into_inner()
            .map_err(|e| Error::io(path, e.into_error()))?;
    }
    out.commit()
}

/// Parses decrypted bytes (the model's external data is the caller's: see
/// [`crate::load_encrypted_model`]).
///
/// With `no_copy`, tensor payloads borrow from the decrypted buffer (no second copy; the buffer
/// is zeroed when the last of them is dropped); otherwise they are copied and the buffer is
/// zeroed at once. For ONNXCRY1 a parse failure, or a model that ONNXCRY1 cannot hold, is an
/// authentication failure (wrong key or modified data), never a model.
fn parse_plaintext(
    plain: SecretBytes,
    format: EncryptionFormat,
    padding_ok: bool,
    opts: &ParseOptions,
) -> Result<ModelProto> {
    // ONNXCRY1's plaintext ends where its (unauthenticated) padding byte says: the parse reads
    // through a cut so that its work does not depend on that byte (no padding oracle).
    let cut = format == EncryptionFormat::AesCbc;
    let parsed = if opts.no_copy && !opts.skip_raw_data {
        parse_shared_bytes::<ModelProto, _>(Arc::new(plain), opts, cut)
    } else {
        parse_bytes::<ModelProto>(&plain, opts, cut)
    };
    match parsed {
        Err(Error::Decode(_)) if format == EncryptionFormat::AesCbc => Err(cbc::auth_error()),
        // `&`, not `&&`: the same checks whatever the padding (see `cbc::open`).
        Ok(m) if format == EncryptionFormat::AesCbc && !(onnxcry1_plausible(&m) & padding_ok) => {
            Err(cbc::auth_error())
        }
        other => other,
    }
}

/// Decrypts and parses an encrypted model held in memory, in any format (by its magic),
/// without its external data ([`crate::load_encrypted_model_from_bytes`] adds that).
pub(crate) fn decrypt_model_from_bytes(
    data: &[u8],
    key: &[u8],
    opts: &ParseOptions,
    reject_unauthenticated: bool,
) -> Result<ModelProto> {
    require_encryption()?;
    opts.validate()?;
    refuse_unauthenticated(EncryptionFormat::detect(data)?, reject_unauthenticated)?;
    let (plain, format, padding_ok) = decrypt_any(data, key)?;
    parse_plaintext(plain, format, padding_ok, opts)
}

/// Decrypts and parses an encrypted model file, in any format (by its magic), without its
/// external data ([`crate::load_encrypted_model`] adds that). ONNXCRYS files are decrypted
/// chunk by chunk straight into one buffer of the plaintext's size (the ciphertext is never held
/// whole).
pub(crate) fn decrypt_model(
    path: &Path,
    key: &[u8],
    opts: &ParseOptions,
    reject_unauthenticated: bool,
) -> Result<ModelProto> {
    require_encryption()?;
    opts.validate()?;
    let format = detect_file_format(path)?;
    refuse_unauthenticated(format, reject_unauthenticated)?;
    let (plain, padding_ok) = if format == EncryptionFormat::Chunked {
        (EncryptedFile::open(path, key)?.read_all()?, true)
    } else {
        read_oneshot(path, key, format)?
    };
    parse_plaintext(plain, format, padding_ok, opts)
}

/// `LoadOptions::reject_unauthenticated`: ONNXCRY1 is refused before anything is decrypted.
fn refuse_unauthenticated(format: EncryptionFormat, reject: bool) -> Result<()> {
    if reject && !format.is_authenticated() {
        return Err(Error::Authentication(format!(
            "{format} cannot be authenticated and the options set reject_unauthenticated"
        )));
    }
    Ok(())
}
