//! Saving with external data: one [`SaveRequest`] (the model, the destination, the options, and
//! optionally pre-packed blobs, an encrypted `.onnx` and a progress callback), carried out in
//! phases, one file each:
//!
//! - the save lock (`storage::SaveLock`): saves to one destination are serialized across
//!   processes;
//! - [`plan`]: which tensors go where (one file, split files or one file per tensor; aligned
//!   offsets), under which names;
//! - [`write`]: the weight files (pre-sized, positional writes in parallel, temporary file +
//!   rename, checksums computed from the bytes written);
//! - [`commit`]: the `.onnx` from a rewritten copy of the METADATA only (the commit point),
//!   the move to the wanted names (a second commit), the removal of obsolete files;
//! - [`convert`]: the same plan applied in memory (`convert_model_to_external_data`), and the
//!   bytes of external tensors read in or dropped (`populate_external_data`,
//!   `clear_external_data`).
//!
//! The in-memory model is never changed, and no tensor payload is copied.

mod commit;
mod convert;
mod plan;
mod write;

use std::path::Path;

use crate::error::{Error, Result};
use crate::external::options::SaveExternalOptions;
use crate::external::paths::{OpenError, check_writable, model_dir, remove_stale_temps};
use crate::external::prepacked::PrepackedBlobs;
use crate::proto::ModelProto;
use crate::storage::SaveLock;

pub use convert::{
    ConvertExternalOptions, clear_external_data, convert_model_to_external_data,
    populate_external_data,
};

/// One weight file written by a save.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedFile {
    /// Its location as recorded in the tensors (relative to the model's directory).
    pub location: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-1 (hex) when `checksum` was asked for.
    pub sha1: Option<String>,
    /// Number of tensors in it.
    pub tensors: usize,
    /// Number of pre-packed blob buffers in it.
    pub prepacked_buffers: usize,
}

/// What a save with external data wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SaveReport {
    /// The weight files, in the order they were planned.
    pub files: Vec<SavedFile>,
    /// Tensors written to weight files.
    pub external_tensors: usize,
    /// Their payload bytes.
    pub external_bytes: u64,
    /// Pre-packed blobs written (see [`save_model_with_prepacked`]).
    pub prepacked_blobs: usize,
    /// Their bytes (all buffers, padding excluded).
    pub prepacked_bytes: u64,
}

/// A progress callback: `progress(done, total)` with the weight bytes written.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// One save of a model with external data: build it with [`SaveRequest::new`], add what you
/// need, then [`SaveRequest::save`]. It saves `model` to `path` with every tensor of at least
/// `size_threshold` raw bytes (attribute tensors only with `convert_attribute`, sparse tensors
/// only with `externalize_sparse`) in external files beside it:
///
/// - one file `location` (default `<model file name>.data`; an absolute location is reduced to
///   its file name), split into `location.1`, ... at `max_external_file_size`; or, without
///   `all_tensors_to_one_file`, one file per tensor named after the tensor (made safe and
///   unique);
/// - offsets of tensors of at least `align_threshold` bytes are multiples of `alignment`
///   (zero padding);
/// - entries `location`, `offset`, `length` (and `checksum`, the SHA-1 of the whole file, with
///   `checksum`); never `basepath`;
/// - the names asked for are kept, and the save is crash-safe as a whole: each file is written
///   to a temporary file in its directory (pre-sized, positional writes, in parallel with
///   `num_threads`), synced and renamed to a name the model being replaced does not reference
///   (an alternate name, `w.bin` -> `w_1.bin`, when the wanted one is in use); the `.onnx` is
///   renamed over the old one (the commit point); alternates then move to the wanted names in a
///   second commit; last, the replaced model's files of the same name family that the new one
///   does not use are removed. A kill at any point leaves the old model with all its files or
///   the new one with all of its files; a failure removes what this save wrote, and the next
///   save removes what a killed one left. Re-saving a model over the very files it borrows from
///   (no-copy load) is safe: the old files stay mapped;
/// - saves to one destination wait for each other (an advisory lock beside the model, see
///   `docs/hardening.md`);
/// - the model itself is NOT changed: the `.onnx` is written from a copy of the metadata.
///
/// Tensors that are still external in memory (not loaded) are read from `opts.source_dir`.
/// Locations obey the path rules; nothing is written outside the model's directory.
#[derive(Clone, Copy)]
pub struct SaveRequest<'a> {
    model: &'a ModelProto,
    path: &'a Path,
    options: &'a SaveExternalOptions,
    prepacked: Option<&'a PrepackedBlobs>,
    model_encryption: Option<&'a crate::crypto::EncryptionOptions>,
    progress: Option<Progress<'a>>,
}

impl<'a> SaveRequest<'a> {
    /// A save of `model` to `path` with `options`.
    pub fn new(
        model: &'a ModelProto,
        path: &'a Path,
        options: &'a SaveExternalOptions,
    ) -> SaveRequest<'a> {
        Self {
            model,
            path,
            options,
            prepacked: None,
            model_encryption: None,
            progress: None,
        }
    }

    /// Also writes the pre-packed `blobs` of the model's initializers the way ONNX Runtime
    /// does (see `docs/prepacked.md`):
    ///
    /// - each blob goes into its initializer's weight file RIGHT AFTER the initializer's bytes,
    ///   each buffer aligned like a tensor of its size;
    /// - the initializer gets one entry per blob, `prepacked_0`, `prepacked_1`, … in key order,
    ///   valued `KEY|OFFSET;LENGTH;CHECKSUM[|…]` (offsets absolute in that file; the checksum is
    ///   `0`, or the SHA-1 of the buffer with `checksum`);
    /// - an initializer with blobs is written externally whatever its size (the entries need an
    ///   external reference); it must have its bytes in `raw_data` (or be still external);
    /// - when several initializers share a name (subgraphs), the first in visitor order carries
    ///   the blobs.
    ///
    /// Blobs naming no initializer are an error (`Error::InvalidArgument`), before anything is
    /// written. The store is not changed.
    pub fn prepacked(self, blobs: &'a PrepackedBlobs) -> Self {
        Self {
            prepacked: Some(blobs),
            ..self
        }
    }

    /// A fully encrypted model directory in one save: every weight file encrypted
    /// (`SaveExternalOptions::encryption`, ONNXCRYS, which is required), and the `.onnx`
    /// itself encrypted with the SAME passphrase in `encryption.format` (any format). It is
    /// what saving with encrypted weights and then [`crate::crypto::encrypt_file`] on the
    /// `.onnx` produce, without the plaintext `.onnx` ever being written; crash-safe the same
    /// way. An encrypted model being replaced is read with the passphrase to learn the weight
    /// files it references. Load the result with [`crate::load_encrypted_model`] and
    /// `LoadOptions::external_data_key` set to the same passphrase.
    pub fn encrypt_model(self, encryption: &'a crate::crypto::EncryptionOptions) -> Self {
        Self {
            model_encryption: Some(encryption),
            ..self
        }
    }

    /// Calls `progress(done, total)` with the bytes written (tensors and blobs).
    pub fn progress(self, progress: Progress<'a>) -> Self {
        Self {
            progress: Some(progress),
            ..self
        }
    }

    /// Carries out the save (see [`SaveRequest`]).
    pub fn save(self) -> Result<SaveReport> {
        let opts = self.options;
        opts.validate()?;
        if self.prepacked.is_some_and(|b| !b.is_empty()) {
            crate::error::require_feature(cfg!(feature = "prepacked"), "prepacked")?;
        }
        if let Some(me) = self.model_encryption {
            if opts.encryption.is_none() {
                return Err(Error::InvalidArgument(
                    "a fully encrypted model directory needs SaveExternalOptions::encryption \
                     (the passphrase of the weight files and of the model)"
                        .into(),
                ));
            }
            me.validate()?;
        }
        let path = self.path;
        let dir = model_dir(path);
        let model_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| {
                Error::InvalidArgument(format!("{} is not a file path", path.display()))
            })?;
        let unloaded = plan::unloaded_tensors(self.model, &dir, opts)?;
        let _lock = SaveLock::acquire(&dir, &model_name)?;
        // The model this save replaces, and the weight files it references: none of them is
        // written before the new model is committed (see `docs/hardening.md`, "Crash-safe
        // saves").
        let previous = plan::previous_references(path, opts.encryption.as_ref().map(|e| &e.key));
        let mut plan = plan::plan(plan::PlanInput {
            model: self.model,
            model_name: &model_name,
            dir: &dir,
            opts,
            blobs: self.prepacked,
            unloaded: &unloaded,
            previous: &previous,
        })?;
        commit::remove_strays(&dir, &plan, &previous, &model_name);
        // Every destination is checked (and its directories created) before anything is
        // written or removed.
        for f in &plan.files {
            check_writable(&dir, &f.rel).map_err(|e| match e {
                OpenError::Refused(r) => plan::refused(&f.location, format!("save: {r}")),
                OpenError::Io(e) => Error::io(dir.join(&f.rel), e),
            })?;
        }
        // Temporary files left by saves that were killed (their process is gone).
        let mut ours: Vec<_> = plan.files.iter().map(|f| f.rel.clone()).collect();
        ours.push(model_name.clone().into());
        remove_stale_temps(&dir, &ours);

        let (digests, placed) = write::write_weight_files(&plan.files, &dir, opts, self.progress)?;
        let commit_input = commit::CommitInput {
            model: self.model,
            path,
            dir: &dir,
            model_name: &model_name,
            opts,
            model_encryption: self.model_encryption,
            unloaded: &unloaded,
            previous: &previous,
        };
        let finals = commit::commit(&commit_input, &mut plan, &digests, || placed.keep())?;
        Ok(SaveReport {
            files: plan
                .files
                .iter()
                .zip(digests)
                .zip(finals)
                .map(|((f, sha1), location)| SavedFile {
                    location,
                    size: f.size,
                    sha1,
                    tensors: f.tensors,
                    prepacked_buffers: f.items.len() - f.tensors,
                })
                .collect(),
            external_tensors: plan.externals,
            external_bytes: plan.external_bytes,
            prepacked_blobs: plan.prepacked_blobs,
            prepacked_bytes: plan.prepacked_bytes,
        })
    }
}

/// Saves `model` to `path` with its large tensors in external files (shorthand of
/// [`SaveRequest`]).
pub fn save_model_with_external_data(
    model: &ModelProto,
    path: impl AsRef<Path>,
    opts: &SaveExternalOptions,
) -> Result<SaveReport> {
    SaveRequest::new(model, path.as_ref(), opts).save()
}

/// As [`save_model_with_external_data`], with the pre-packed `blobs` of the model's
/// initializers (shorthand of [`SaveRequest::prepacked`]).
pub fn save_model_with_prepacked(
    model: &ModelProto,
    blobs: &PrepackedBlobs,
    path: impl AsRef<Path>,
    opts: &SaveExternalOptions,
) -> Result<SaveReport> {
    SaveRequest::new(model, path.as_ref(), opts)
        .prepacked(blobs)
        .save()
}

/// A fully encrypted model directory (shorthand of [`SaveRequest::encrypt_model`] with
/// `blobs`, which may be empty, and `progress`).
pub fn save_encrypted_model_with_external_data(
    model: &ModelProto,
    blobs: &PrepackedBlobs,
    path: impl AsRef<Path>,
    opts: &SaveExternalOptions,
    model_encryption: &crate::crypto::EncryptionOptions,
    progress: Option<Progress<'_>>,
) -> Result<SaveReport> {
    let mut request = SaveRequest::new(model, path.as_ref(), opts)
        .prepacked(blobs)
        .encrypt_model(model_encryption);
    if let Some(p) = progress {
        request = request.progress(p);
    }
    request.save()
}
