//! Options of saving a model with external data, and of encrypting its weight files.

use crate::codec::{resolve_threads, validate_alignment, validate_threads};
use crate::crypto::{ChunkCipher, DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE};
use crate::error::{Error, Result};
use crate::secret::Passphrase;

/// Options of saving a model with external data (`save_model_with_external_data`), after the
/// onnx package's `save_model(..., save_as_external_data=True, ...)` with this project's
/// additions (alignment, split files, checksums). See `docs/external-data.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaveExternalOptions {
    /// Weight file name, relative to the model's directory (default: the model file name plus
    /// `.data`; an absolute path is reduced to its file name). Split parts are `LOCATION.1`,
    /// `LOCATION.2`, ...
    pub location: Option<String>,
    /// Tensors with at least this many `raw_data` bytes go to external files (default 1024).
    pub size_threshold: u64,
    /// One weight file (true, default) or one file per tensor, named after the tensor.
    pub all_tensors_to_one_file: bool,
    /// Offset alignment of tensors of at least `align_threshold` bytes (default 4096, the page
    /// size the ONNX external-data format recommends, so every tensor can be mapped; 65536
    /// suits Windows mappings; 0 or 1 = packed, no alignment at all). Smaller tensors are
    /// aligned to `min(alignment, 16)` so every element is naturally aligned.
    pub alignment: u64,
    /// Tensors of at least this many bytes are aligned to `alignment` (default 0: every
    /// tensor; ONNX Runtime uses 1 MiB to save padding on small tensors).
    pub align_threshold: u64,
    /// Start a new weight file (`LOCATION.1`, ...) when the next tensor would take the current
    /// one past this size (0 = no limit). A tensor larger than the limit gets a file of its own.
    pub max_external_file_size: u64,
    /// Also move tensors of node attributes (default false, like onnx).
    pub convert_attribute: bool,
    /// Also move the values and indices of sparse tensors (default false: the onnx package
    /// does not read sparse tensors from external data, so they stay inline).
    pub externalize_sparse: bool,
    /// Write the SHA-1 of each weight file as the `checksum` entry (default false).
    pub checksum: bool,
    /// Write threads: 1 = sequential, n > 1 = n threads, negative = all cores; 0 is invalid.
    pub num_threads: i32,
    /// Directory to read tensors that are still external in memory (not loaded) from; without
    /// it such tensors are an error (unless `use_external_data_location`).
    pub source_dir: Option<std::path::PathBuf>,
    /// Tensors still external in memory (`data_location` EXTERNAL, bytes not loaded) keep their
    /// `external_data` references as they are, relative to the new model's directory, instead
    /// of being read and written to the new weight files (default false). A kept reference
    /// that names a file this save writes (its weight files, their alternates and split parts,
    /// or the model) is an error.
    pub use_external_data_location: bool,
    /// fsync every file before it replaces the old one (default true).
    pub sync: bool,
    /// Encrypt every weight file written (ONNXCRYS chunked format; default None: plaintext).
    /// Offsets and lengths recorded in the model, alignment, splitting and checksums all refer
    /// to the plaintext. See `docs/encryption.md`.
    pub encryption: Option<ExternalEncryption>,
}

/// How [`SaveExternalOptions::encryption`] encrypts weight files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalEncryption {
    /// The passphrase (any bytes).
    pub key: Passphrase,
    /// The chunk cipher (default AES-256-GCM).
    pub cipher: ChunkCipher,
    /// Plaintext bytes per chunk (default 1 MiB; 64 ..= 64 MiB).
    pub chunk_size: u32,
}

impl ExternalEncryption {
    /// Default cipher and chunk size with `key`.
    pub fn new(key: impl Into<Passphrase>) -> Self {
        Self {
            key: key.into(),
            cipher: ChunkCipher::default(),
            chunk_size: DEFAULT_CHUNK_SIZE,
        }
    }
}

impl Default for SaveExternalOptions {
    fn default() -> Self {
        Self {
            location: None,
            size_threshold: 1024,
            all_tensors_to_one_file: true,
            alignment: 4096,
            align_threshold: 0,
            max_external_file_size: 0,
            convert_attribute: false,
            externalize_sparse: false,
            checksum: false,
            num_threads: 1,
            source_dir: None,
            use_external_data_location: false,
            sync: true,
            encryption: None,
        }
    }
}

impl SaveExternalOptions {
    /// Checks every value.
    pub fn validate(&self) -> Result<()> {
        validate_alignment(self.alignment)?;
        validate_threads(self.num_threads)?;
        if let Some(e) = &self.encryption {
            let (lo, hi) = (MIN_CHUNK_SIZE, MAX_CHUNK_SIZE);
            if !(lo..=hi).contains(&e.chunk_size) {
                return Err(Error::InvalidOption {
                    name: "encryption.chunk_size",
                    reason: format!("{} is outside {lo} ..= {hi}", e.chunk_size),
                });
            }
        }
        Ok(())
    }

    /// The number of threads to use (resolving negative values to all cores).
    pub fn threads(&self) -> usize {
        resolve_threads(self.num_threads)
    }
}
