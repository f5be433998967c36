//! Options of loading a model (its parse, then its external data, encrypted weight files and
//! progress) and of saving one with external data, encrypting its weight files.

use std::path::PathBuf;
use std::sync::Arc;

use crate::codec::{ParseOptions, resolve_threads, validate_alignment, validate_threads};
use crate::crypto::{ChunkCipher, DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE};
use crate::error::{Error, Result};
use crate::secret::Passphrase;

/// Options of loading a model (`load_model`, `load_model_from_bytes`, the encrypted and URL
/// loads): how its bytes are parsed, then what a load adds to the parse — the model's external
/// data, encrypted weight files, progress, remote storage. Made from parse options with
/// `LoadOptions::from(parse)` (the rest at their defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// How the model's bytes are parsed (payload copies, no-copy, threads, limits).
    pub parse: ParseOptions,
    /// Read the external data of `ModelProto` loads (default true, like `onnx.load`): the
    /// tensors become inline (`raw_data`, `data_location` DEFAULT). Files resolve relative to
    /// `external_data_dir`, else to the model file's directory; loads from bytes read external
    /// data only when `external_data_dir` is set. See `docs/external-data.md`.
    pub load_external_data: bool,
    /// Base directory of external data (default: the model file's directory).
    pub external_data_dir: Option<PathBuf>,
    /// Read the model's primary weight file from this path instead (a trusted, caller-given
    /// path; split parts `NAME.1`, `NAME.2`, ... become `THIS.1`, `THIS.2`, ...).
    pub external_data_location: Option<PathBuf>,
    /// Verify the SHA-1 `checksum` entries of external data files (default false: it reads
    /// every byte, which a no-copy load otherwise never does).
    pub verify_external_checksums: bool,
    /// Passphrase of encrypted external-data files (`ONNXCRYS`, recognized by their magic;
    /// default None: such a file is an error). Their tensors are decrypted into memory (also
    /// with `no_copy`); ranges are plaintext offsets. See `docs/encryption.md`.
    pub external_data_key: Option<Passphrase>,
    /// Refuse encrypted models in a format without authentication (ONNXCRY1, whose tampering
    /// cannot be detected) when loading them (default false: read, as the C++ library does).
    pub reject_unauthenticated: bool,
    /// Called as a load goes (default None); see [`LoadProgress`].
    pub progress: Option<LoadProgress>,
    /// Options of a load from a URL given where a path is taken (`load_model`, the C ABI):
    /// `(key, value)` pairs applied over the environment's, as
    /// `remote::RemoteOptions::with_options` reads them (`aws_endpoint`, `aws_region`,
    /// `concurrency`, `part_size`, ...). Ignored for local paths. Feature `remote`.
    #[cfg(feature = "remote")]
    pub storage_options: Vec<(String, String)>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self::from(ParseOptions::default())
    }
}

impl From<ParseOptions> for LoadOptions {
    fn from(parse: ParseOptions) -> Self {
        Self {
            parse,
            load_external_data: true,
            external_data_dir: None,
            external_data_location: None,
            verify_external_checksums: false,
            external_data_key: None,
            reject_unauthenticated: false,
            progress: None,
            #[cfg(feature = "remote")]
            storage_options: Vec::new(),
        }
    }
}

impl LoadOptions {
    /// Checks every value (see [`ParseOptions::validate`]).
    pub fn validate(&self) -> Result<()> {
        self.parse.validate()
    }

    /// Reports `bytes` done to the progress callback, if any.
    pub(crate) fn report(&self, bytes: u64) {
        if let Some(p) = &self.progress {
            p.report(bytes);
        }
    }
}

/// The progress callback of a load: called with the number of bytes of each piece done, from
/// the threads doing the work (possibly several at once). The calls of a file load sum to the
/// bytes it brought in: the model file's size once it is parsed, then every range of external
/// data as it is read (copy mode, in pieces of at most 8 MiB) or mapped (no-copy mode, one
/// call per range); a URL load reports each piece received instead. Ranges named by several
/// tensors count once. Loads from bytes or streams report their external data only.
#[derive(Clone)]
pub struct LoadProgress(pub Arc<dyn Fn(u64) + Send + Sync>);

impl LoadProgress {
    /// A callback from a closure.
    pub fn new(f: impl Fn(u64) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Reports `bytes` done.
    pub(crate) fn report(&self, bytes: u64) {
        (self.0)(bytes)
    }
}

impl std::fmt::Debug for LoadProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoadProgress(..)")
    }
}

/// Two callbacks are equal when they are the same one.
impl PartialEq for LoadProgress {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for LoadProgress {}

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
