//! External data: tensors whose bytes live
//! in files beside the `.onnx`.
//!
//! - [`load_external_data_for_model`]: read them (copy, or no-copy: one map per file, one shared
//!   owner token per file); file loads call it automatically (`LoadOptions::load_external_data`);
//! - [`save_model_with_external_data`]: write a model with its large tensors in one file, split
//!   files or one file per tensor, aligned, with checksums, without changing the model;
//! - [`PrepackedBlobs`]: ONNX Runtime pre-packed blobs attached to initializers, saved after
//!   their tensor's bytes ([`save_model_with_prepacked`]) and mapped back on load
//!   ([`ExternalLoadReport::blobs`], [`crate::load_model_with_prepacked`]);
//! - [`consolidate_tensors_to_buffer`]: the C++ library's `ConsolidateTensorsToBuffer`;
//! - [`convert_model_to_external_data`], [`populate_external_data`], [`clear_external_data`]:
//!   external data converted in memory (nothing written);
//! - [`check_external_data`]: resolve and verify every reference without loading;
//! - the path rules ([`normalize_location`] and the safe opens of `paths`), on load and on save;
//! - [`ExternalDataInfo`]: the `external_data` entries.
//!
//! Every operation reaches every tensor of a model through the generated tensor visitor
//! (`visit_tensors` / `visit_tensors_mut`): initializers, sparse initializers (values and
//! indices), node attributes `t`, `tensors`, `sparse_tensor(s)`, subgraphs `g` / `graphs`
//! recursively, function bodies and training graphs. See `docs/external-data.md`.

mod checksum;
mod consolidate;
mod info;
mod load;
mod options;
mod paths;
mod prepacked;
mod save;

pub use checksum::{Sha1Hasher, sha1_hex};
pub use consolidate::{TensorBuffer, consolidate_tensors_to_buffer};
pub use info::{
    DATA_LOCATION_DEFAULT, DATA_LOCATION_EXTERNAL, ExternalDataInfo, PrepackedRange, parse_number,
    parse_prepacked, prepacked_blobs_of, split_file_name, split_part_of, uses_external_data,
};
pub use load::{
    ExternalCheckReport, ExternalFileInfo, ExternalLoadReport, PrepackedEntries,
    check_external_data, has_external_data, load_external_data_for_model,
};
pub use options::{ExternalEncryption, LoadOptions, LoadProgress, SaveExternalOptions};
pub use paths::{ORT_MEM_ADDR_TAG, model_dir, normalize_location};
pub use prepacked::{PrepackedBlob, PrepackedBlobs};
pub use save::{
    ConvertExternalOptions, Progress, SaveReport, SaveRequest, SavedFile, clear_external_data,
    convert_model_to_external_data, populate_external_data,
    save_encrypted_model_with_external_data, save_model_with_external_data,
    save_model_with_prepacked,
};

#[cfg(feature = "remote")]
pub(crate) use checksum::matches as checksum_matches;
pub(crate) use load::load_after_parse;
