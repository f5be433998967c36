//! Options of parsing and serializing, mirroring the C++ library's `TensorBufferOptions`,
//! `ParseOptions` and `SerializeOptions` (same names, same defaults), and the checks of the
//! values they share with other options (alignment, thread counts).

use crate::error::{Error, Result};
use crate::storage::{MIN_THREAD_CAP, max_threads};

pub use crate::wire::MAX_RECURSION_DEPTH_LIMIT;

/// Options shared by operations that place tensor bytes in buffers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TensorBufferOptions {
    /// Tensors with fewer payload bytes than this are left alone (default 0).
    pub raw_data_threshold: u64,
    /// Alignment of each tensor in the buffer: 0 or 1 = none, otherwise a power of two.
    pub alignment: u64,
}

impl TensorBufferOptions {
    /// Checks the values (alignment must be 0, 1 or a power of two).
    pub fn validate(&self) -> Result<()> {
        validate_alignment(self.alignment)
    }
}

/// Largest alignment of tensors in weight files and buffers (16 MiB: above every page size in
/// use, 2 MiB huge pages included). Larger values only add padding (a 2^40 alignment wrote a
/// 1 TiB sparse file).
pub const MAX_ALIGNMENT: u64 = 16 << 20;

pub(crate) fn validate_alignment(alignment: u64) -> Result<()> {
    if alignment > 1 && !alignment.is_power_of_two() {
        return Err(Error::InvalidOption {
            name: "alignment",
            reason: format!("{alignment} is not 0, 1 or a power of two"),
        });
    }
    if alignment > MAX_ALIGNMENT {
        return Err(Error::InvalidOption {
            name: "alignment",
            reason: format!("{alignment} is above the maximum {MAX_ALIGNMENT}"),
        });
    }
    Ok(())
}

/// How a model file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FileLoadMode {
    /// Memory-map files of at least 64 KiB, read smaller ones.
    #[default]
    Auto,
    /// Always memory-map.
    Mmap,
    /// Always read into memory.
    Buffered,
}

/// Options of parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseOptions {
    /// Payloads of at least this many bytes are borrowed (with `no_copy`) or dropped (with
    /// `skip_raw_data`); smaller ones are always copied (default 1024).
    pub raw_data_threshold: u64,
    /// Every tensor payload pointer a load hands out is a multiple of this (default 64: a
    /// cache line and the widest SIMD load, so `raw_data` can be read as `float*` with aligned
    /// vector loads). Copies are placed there (at least 16 bytes, the natural alignment of
    /// every element type); no-copy loads borrow aligned payloads and copy the others. A power
    /// of two up to [`MAX_PARSE_ALIGNMENT`]; 0 or 1 = no requirement (no-copy loads borrow
    /// every payload wherever it is).
    pub alignment: u64,
    /// Borrow tensor payloads from the input instead of copying them.
    pub no_copy: bool,
    /// 1 = sequential, n > 1 = exactly n threads, negative = all cores; 0 is invalid.
    pub num_threads: i32,
    /// Parse initializers in parallel only when the graph holds at least this many bytes of
    /// them (default 4 MiB: below that, threads cost more than they save; 0 = whenever there
    /// are two or more).
    pub min_parallel_block_size: u64,
    /// Keep the structure, drop payloads of at least `raw_data_threshold` bytes.
    pub skip_raw_data: bool,
    /// Deepest nesting of messages accepted (default 100, as protobuf; at most 1000).
    pub max_recursion_depth: u32,
    /// Largest tensor payload accepted, checked before allocating (0 = no limit). Payloads
    /// read from the input are bounded by its size anyway; external data by its file's size.
    pub max_tensor_size_bytes: u64,
    /// Memory budget of the parsed structure besides tensor payloads (messages, strings,
    /// repeated scalars, unknown fields), enforced while parsing: 0 (default) = automatic,
    /// 16 MiB + 32 × the input size; `u64::MAX` = no limit. See `docs/hardening.md`.
    pub max_metadata_bytes: u64,
    /// How files are read.
    pub file_load_mode: FileLoadMode,
}

impl Default for ParseOptions {
    fn default() -> Self {
        Self {
            raw_data_threshold: 1024,
            alignment: 64,
            no_copy: false,
            num_threads: 1,
            min_parallel_block_size: 4 << 20,
            skip_raw_data: false,
            max_recursion_depth: 100,
            max_tensor_size_bytes: 0,
            max_metadata_bytes: 0,
            file_load_mode: FileLoadMode::Auto,
        }
    }
}

/// Largest `ParseOptions::alignment` (a page of 64 KiB, the largest in use).
pub const MAX_PARSE_ALIGNMENT: u64 = 64 << 10;

impl ParseOptions {
    /// Checks every value (and readies the memory reserve that lets an operation report
    /// running out of memory).
    pub fn validate(&self) -> Result<()> {
        crate::error::reserve::arm();
        validate_alignment(self.alignment)?;
        if self.alignment > MAX_PARSE_ALIGNMENT {
            return Err(Error::InvalidOption {
                name: "alignment",
                reason: format!(
                    "{} is above the maximum {MAX_PARSE_ALIGNMENT}",
                    self.alignment
                ),
            });
        }
        validate_threads(self.num_threads)?;
        if self.max_recursion_depth > MAX_RECURSION_DEPTH_LIMIT {
            return Err(Error::InvalidOption {
                name: "max_recursion_depth",
                reason: format!(
                    "{} is above the supported maximum {MAX_RECURSION_DEPTH_LIMIT}",
                    self.max_recursion_depth
                ),
            });
        }
        Ok(())
    }

    /// The number of threads to use (resolving negative values to all cores).
    pub fn threads(&self) -> usize {
        resolve_threads(self.num_threads)
    }

    /// The alignment every payload pointer gets (1 = none).
    pub fn payload_alignment(&self) -> u64 {
        self.alignment.max(1)
    }
}

/// Options of serializing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SerializeOptions {
    /// Tensors with at least this many payload bytes count as large (external data; default
    /// 64, `kSmallTensorDataThresholdBytes`).
    pub raw_data_threshold: u64,
    /// Offset alignment of every tensor written to a weight file (the model + weights stream):
    /// 0 = the default, 4096 (the page size the ONNX external-data format recommends); 1 =
    /// packed; otherwise a power of two.
    pub alignment: u64,
    /// 1 = sequential, n > 1 = n threads, negative = all cores; 0 is invalid.
    pub num_threads: i32,
    /// Refuse to write more than this many bytes (0 = no limit).
    pub max_serialized_size_bytes: u64,
    /// Write the structure only: tensors with at least `raw_data_threshold` (and at least 1)
    /// `raw_data` bytes are written without them, as [`ParseOptions::skip_raw_data`] drops them
    /// on reading (default false). The message in memory is not changed.
    pub skip_raw_data: bool,
    /// The model + weights stream: tensors still external in memory (`data_location`
    /// EXTERNAL, bytes not loaded) keep their `external_data` references as they are instead of
    /// being read and written to the new weights file; their files must not be ones this save
    /// writes (default false: such a tensor is an error unless its bytes can be read). Other
    /// writers write every tensor as it is, references included.
    pub use_external_data_location: bool,
    /// The model + weights stream: start a new weights file (`WEIGHTS.1`, `WEIGHTS.2`, ...)
    /// when the next tensor would take the current one past this size (0 = no limit, the
    /// default). Other writers write one file.
    pub max_external_file_size: u64,
    /// Offset alignment of the `raw_data` payloads left in the serialized model: 0 (the
    /// default) = none, the bytes protobuf writes; otherwise a power of two from 64 to 65536,
    /// and every payload of at least `raw_data_threshold` (and 1) bytes starts at a multiple of
    /// it from the start of the output, after a padding field no `onnx.proto` message uses, so
    /// that a no-copy load of the file borrows every payload from the file's map
    /// (docs/aligned-models.md). Feature `inline-alignment`.
    pub inline_alignment: u64,
    /// Options of a save to a URL given where a path is taken (`save_model`, the C ABI), as
    /// `LoadOptions::storage_options`. Feature `remote`.
    #[cfg(feature = "remote")]
    pub storage_options: Vec<(String, String)>,
}

/// Smallest non-zero [`SerializeOptions::inline_alignment`] (a cache line; the padding field
/// takes at least 6 bytes).
pub const MIN_INLINE_ALIGNMENT: u64 = 64;

/// Largest [`SerializeOptions::inline_alignment`] (a page of 64 KiB, the largest in use).
pub const MAX_INLINE_ALIGNMENT: u64 = 64 << 10;

impl Default for SerializeOptions {
    fn default() -> Self {
        Self {
            raw_data_threshold: 64,
            alignment: 0,
            num_threads: 1,
            max_serialized_size_bytes: 0,
            skip_raw_data: false,
            use_external_data_location: false,
            max_external_file_size: 0,
            inline_alignment: 0,
            #[cfg(feature = "remote")]
            storage_options: Vec::new(),
        }
    }
}

impl SerializeOptions {
    /// Checks every value (and readies the memory reserve, as [`ParseOptions::validate`]).
    pub fn validate(&self) -> Result<()> {
        crate::error::reserve::arm();
        validate_alignment(self.alignment)?;
        if self.inline_alignment != 0 {
            validate_inline_alignment(self.inline_alignment)?;
        }
        validate_threads(self.num_threads)
    }

    /// The number of threads to use (resolving negative values to all cores): with more than
    /// one, large tensor payloads are copied / written in parallel.
    pub fn threads(&self) -> usize {
        resolve_threads(self.num_threads)
    }
}

/// A non-zero `inline_alignment`: a power of two in range, in a build that can write it.
fn validate_inline_alignment(a: u64) -> Result<()> {
    crate::error::require_feature(cfg!(feature = "inline-alignment"), "inline-alignment")?;
    if !a.is_power_of_two() || !(MIN_INLINE_ALIGNMENT..=MAX_INLINE_ALIGNMENT).contains(&a) {
        return Err(Error::InvalidOption {
            name: "inline_alignment",
            reason: format!(
                "{a} is not 0 or a power of two from {MIN_INLINE_ALIGNMENT} to {MAX_INLINE_ALIGNMENT}"
            ),
        });
    }
    Ok(())
}

pub(crate) fn validate_threads(n: i32) -> Result<()> {
    if n == 0 {
        return Err(Error::InvalidOption {
            name: "num_threads",
            reason:
                "0 is not a thread count (1 = sequential, n > 1 = n threads, negative = all cores)"
                    .into(),
        });
    }
    // Counts up to the fewest the cap allows need no look at the cores (which reads files).
    if n <= MIN_THREAD_CAP as i32 {
        return Ok(());
    }
    let cap = max_threads();
    if n as usize > cap {
        return Err(Error::InvalidOption {
            name: "num_threads",
            reason: format!(
                "{n} is above the maximum {cap} (4 x the cores, at least {MIN_THREAD_CAP}; \
                 negative = all cores)"
            ),
        });
    }
    Ok(())
}

pub(crate) fn resolve_threads(n: i32) -> usize {
    if n < 0 {
        crate::storage::cores()
    } else {
        n.max(1) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_cpp_library() {
        let p = ParseOptions::default();
        assert_eq!(
            (p.raw_data_threshold, p.num_threads, p.max_recursion_depth),
            (1024, 1, 100)
        );
        assert_eq!(SerializeOptions::default().raw_data_threshold, 64);
        assert_eq!(
            TensorBufferOptions::default(),
            TensorBufferOptions {
                raw_data_threshold: 0,
                alignment: 0
            }
        );
    }

    #[test]
    fn invalid_values_are_errors() {
        let bad_align = ParseOptions {
            alignment: 48,
            ..Default::default()
        };
        assert!(matches!(
            bad_align.validate(),
            Err(Error::InvalidOption {
                name: "alignment",
                ..
            })
        ));
        let zero_threads = SerializeOptions {
            num_threads: 0,
            ..Default::default()
        };
        assert!(matches!(
            zero_threads.validate(),
            Err(Error::InvalidOption {
                name: "num_threads",
                ..
            })
        ));
        let deep = ParseOptions {
            max_recursion_depth: 5000,
            ..Default::default()
        };
        assert!(deep.validate().is_err());
        assert!(
            ParseOptions {
                alignment: 64,
                num_threads: -1,
                ..Default::default()
            }
            .validate()
            .is_ok()
        );
    }
}
