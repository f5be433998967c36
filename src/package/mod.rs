//! Models as users load and save them: a parse ([`crate::codec`]) followed by the model's
//! external data ([`crate::external`]), for plain and encrypted ([`crate::crypto`]) models.
//! This is the one place where the three meet.

use std::path::Path;

use crate::codec::{SerializeOptions, parse_file, parse_from_bytes, save_to_file};
use crate::crypto::{decrypt_model, decrypt_model_from_bytes};
use crate::error::Result;
use crate::external::{LoadOptions, PrepackedBlobs, load_after_parse};
use crate::proto::{Message, ModelProto};

/// Parses a file.
///
/// - copy mode (default): the file is read once, with `num_threads` parallel readers, into one
///   huge-page arena, and each tensor payload owns its range of it (no per-tensor allocation,
///   no second copy; peak memory about the file size);
/// - `no_copy`: payloads borrow from the file's bytes under a shared owner token (the memory
///   map, or the read buffer in `Buffered` mode), so they stay valid after the loader is gone.
///
/// A `ModelProto`'s external data is then loaded (`LoadOptions::load_external_data`, see
/// [`crate::external`]).
///
/// With the `remote` feature, `path` may be an `s3://`, `http://` or `https://` URL (see the
/// `remote` module).
pub fn parse_from_file<M: Message>(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<M> {
    let path = path.as_ref();
    #[cfg(feature = "remote")]
    if let Some(url) = remote_url(path) {
        return crate::remote::parse(url, opts, &remote_options(opts)?);
    }
    let m = parse_file(path, &opts.parse)?;
    report_file(path, opts);
    with_external_data(m, Some(path), opts)
}

/// Reports a parsed model file's size to the progress callback, if any.
fn report_file(path: &Path, opts: &LoadOptions) {
    if opts.progress.is_some() {
        opts.report(std::fs::metadata(path).map_or(0, |m| m.len()));
    }
}

/// `path` as a remote URL, when it is one.
#[cfg(feature = "remote")]
fn remote_url(path: &Path) -> Option<&str> {
    crate::remote::is_url(path).then(|| path.to_str()).flatten()
}

/// The remote options of a load: from the environment and `opts.storage_options`, reporting
/// to `opts.progress`.
#[cfg(feature = "remote")]
fn remote_options(opts: &LoadOptions) -> Result<crate::remote::RemoteOptions> {
    Ok(crate::remote::RemoteOptions {
        progress: opts.progress.as_ref().map(|p| p.0.clone()),
        ..crate::remote::RemoteOptions::from_env()?
            .with_options(opts.storage_options.iter().cloned())?
    })
}

/// External data of a parsed `ModelProto`: loaded when `opts.load_external_data` and a base
/// directory is known (`opts.external_data_dir`, else the model file's directory). Other
/// messages pass through.
fn with_external_data<M: Message>(
    mut m: M,
    model_path: Option<&Path>,
    opts: &LoadOptions,
) -> Result<M> {
    if let Some(model) = (&mut m as &mut dyn std::any::Any).downcast_mut::<ModelProto>() {
        load_after_parse(model, model_path, opts)?;
    }
    Ok(m)
}

/// Loads a model file (see [`parse_from_file`]).
pub fn load_model(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<ModelProto> {
    parse_from_file(path, opts)
}

/// Loads a model file and its external data, and returns the pre-packed blobs recorded in the
/// weight files (`prepacked_N` entries, see [`PrepackedBlobs`]) beside it.
/// With `opts.parse.no_copy` the blobs borrow from the same memory map as the tensors of their file
/// (one map, one owner token per file); otherwise they are copies. A model without external
/// data (or loaded with `load_external_data: false`) has no blobs.
pub fn load_model_with_prepacked(
    path: impl AsRef<Path>,
    opts: &LoadOptions,
) -> Result<(ModelProto, PrepackedBlobs)> {
    crate::error::require_feature(cfg!(feature = "prepacked"), "prepacked")?;
    let path = path.as_ref();
    // (pre-packed blobs are read from local weight files only)
    #[cfg(feature = "remote")]
    if remote_url(path).is_some() {
        return Ok((parse_from_file(path, opts)?, PrepackedBlobs::default()));
    }
    let mut model: ModelProto = parse_file(path, &opts.parse)?;
    report_file(path, opts);
    let blobs = load_after_parse(&mut model, Some(path), opts)?
        .map(|r| r.blobs)
        .unwrap_or_default();
    Ok((model, blobs))
}

/// Loads a model from bytes, copying payloads (see [`crate::parse_from_shared`] for no-copy); external
/// data is loaded only when `opts.external_data_dir` (or `external_data_location`) is set.
pub fn load_model_from_bytes(bytes: &[u8], opts: &LoadOptions) -> Result<ModelProto> {
    let mut model = parse_from_bytes(bytes, &opts.parse)?;
    load_after_parse(&mut model, None, opts)?;
    Ok(model)
}

/// Saves a model atomically (see [`save_to_file`]), after any other save to the same path of
/// this library has finished (the save lock, see `docs/hardening.md`).
pub fn save_model(
    model: &ModelProto,
    path: impl AsRef<Path>,
    opts: &SerializeOptions,
) -> Result<()> {
    #[cfg(feature = "remote")]
    if let Some(url) = remote_url(path.as_ref()) {
        let ro = crate::remote::RemoteOptions::from_env()?
            .with_options(opts.storage_options.iter().cloned())?;
        return crate::remote::save_model(model, url, opts, None, &ro);
    }
    save_to_file(model, path, opts)
}

/// Decrypts and parses an encrypted model held in memory (C++ `LoadEncryptedModelFromString`),
/// in any format (by its magic). `data` is not borrowed by the model. External data, if the
/// model refers to any, is loaded only when `opts.external_data_dir` is set (as for
/// [`load_model_from_bytes`]).
///
/// With `no_copy`, tensor payloads borrow from the decrypted buffer (no second copy; the buffer
/// is zeroed when the last of them is dropped); otherwise they are copied and the buffer is
/// zeroed at once. For ONNXCRY1 a parse failure, or a model that ONNXCRY1 cannot hold, is an
/// authentication failure (wrong key or modified data), never a model.
pub fn load_encrypted_model_from_bytes(
    data: &[u8],
    key: &[u8],
    opts: &LoadOptions,
) -> Result<ModelProto> {
    let mut model = decrypt_model_from_bytes(data, key, &opts.parse, opts.reject_unauthenticated)?;
    load_after_parse(&mut model, None, opts)?;
    Ok(model)
}

/// Decrypts and parses an encrypted model file (C++ `LoadEncryptedModel`), in any format (by
/// its magic). ONNXCRYS files are decrypted chunk by chunk straight into one buffer of the
/// plaintext's size (the ciphertext is never held whole). External data, if the model refers to
/// any, resolves as for [`load_model`]: relative to `opts.external_data_dir`, else to the
/// encrypted file's directory. Payloads are kept as [`load_encrypted_model_from_bytes`] says.
pub fn load_encrypted_model(
    path: impl AsRef<Path>,
    key: &[u8],
    opts: &LoadOptions,
) -> Result<ModelProto> {
    let path = path.as_ref();
    #[cfg(feature = "remote")]
    if let Some(url) = remote_url(path) {
        return crate::remote::load_encrypted_model(url, key, opts, &remote_options(opts)?);
    }
    let mut model = decrypt_model(path, key, &opts.parse, opts.reject_unauthenticated)?;
    report_file(path, opts);
    load_after_parse(&mut model, Some(path), opts)?;
    Ok(model)
}
