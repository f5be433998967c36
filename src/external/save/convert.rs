//! External data converted in memory, as the C++ library's `ConvertModelToExternalData`,
//! `PopulateExternalData` and `ClearExternalData`: nothing is written.
//!
//! - [`convert_model_to_external_data`] marks the tensors a save would move to weight files
//!   (location, offset and length as [`super::SaveRequest`] would record them, aligned the
//!   same way; `data_location` EXTERNAL) and keeps their bytes in memory, like onnx's
//!   `convert_model_to_external_data` (which records the location only);
//! - [`populate_external_data`] reads the bytes of external tensors into memory and keeps their
//!   references;
//! - [`clear_external_data`] drops the bytes of external tensors and keeps their references.
//!
//! `convert` then `clear` gives the `.onnx` a save writes (without `checksum`); `populate`
//! brings the bytes back.

use std::collections::HashMap;
use std::path::Path;

use super::SaveReport;
use super::plan::{self, Previous, Unloaded};
use crate::error::Result;
use crate::external::LoadOptions;
use crate::external::info::{ExternalDataInfo, uses_external_data};
use crate::external::load::load_external_data_for_model;
use crate::external::options::SaveExternalOptions;
use crate::proto::{ModelProto, RepeatedField, StringStringEntryProto, TensorProto};

/// The model file name conversions plan for (weight files default to `model.onnx.data`).
const MODEL_NAME: &str = "model.onnx";

/// Options of [`convert_model_to_external_data`]: the arguments of onnx's
/// `convert_model_to_external_data`, with the same defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertExternalOptions {
    /// One weight file for every tensor (true, default), or one file per tensor named after
    /// the tensor (made safe and unique).
    pub all_tensors_to_one_file: bool,
    /// The weight file, relative to the model's directory (default `model.onnx.data`; onnx
    /// picks a random name). An absolute path is reduced to its file name.
    pub location: Option<String>,
    /// Tensors with at least this many `raw_data` bytes are converted (default 1024; onnx
    /// compares Python's `sys.getsizeof` of the bytes, 33 more than their length).
    pub size_threshold: u64,
    /// Also convert tensors of node attributes (default false).
    pub convert_attribute: bool,
}

impl Default for ConvertExternalOptions {
    fn default() -> Self {
        Self {
            all_tensors_to_one_file: true,
            location: None,
            size_threshold: 1024,
            convert_attribute: false,
        }
    }
}

/// Marks every tensor of `model` that a save with these options would move to a weight file
/// (every tensor with at least `size_threshold` bytes in `raw_data`; attribute tensors only
/// with `convert_attribute`; sparse tensors never) as external: `data_location` EXTERNAL and
/// the entries `location`, `offset`, `length` a save would record (offsets aligned as a save
/// aligns them), replacing older entries. The bytes stay in `raw_data`; nothing is written.
/// Returns the planned weight files (sizes, tensor counts; no checksums).
pub fn convert_model_to_external_data(
    model: &mut ModelProto,
    opts: &ConvertExternalOptions,
) -> Result<SaveReport> {
    let save = SaveExternalOptions {
        location: opts.location.clone(),
        size_threshold: opts.size_threshold,
        all_tensors_to_one_file: opts.all_tensors_to_one_file,
        convert_attribute: opts.convert_attribute,
        ..Default::default()
    };
    let (infos, report) = {
        let unloaded = Unloaded::new();
        let previous = Previous {
            refs: HashMap::new(),
            unknown: false,
        };
        let planned = plan::plan(plan::PlanInput {
            model,
            model_name: MODEL_NAME,
            dir: Path::new("."),
            opts: &save,
            blobs: None,
            unloaded: &unloaded,
            previous: &previous,
        })?;
        let infos: HashMap<*const TensorProto, ExternalDataInfo> = planned
            .placements
            .iter()
            .map(|(&t, p)| {
                let info = ExternalDataInfo {
                    location: planned.files[p.file].location.clone(),
                    offset: p.offset,
                    length: Some(p.len),
                    ..Default::default()
                };
                (t, info)
            })
            .collect();
        let report = SaveReport {
            files: planned
                .files
                .iter()
                .map(|f| super::SavedFile {
                    location: f.location.clone(),
                    size: f.size,
                    sha1: None,
                    tensors: f.tensors,
                    prepacked_buffers: 0,
                })
                .collect(),
            external_tensors: planned.externals,
            external_bytes: planned.external_bytes,
            prepacked_blobs: 0,
            prepacked_bytes: 0,
        };
        (infos, report)
    };
    model.visit_tensors_mut(&mut |t| {
        if let Some(info) = infos.get(&(t as *const TensorProto)) {
            // The bytes stay in memory (`apply_to` would drop them).
            let bytes = t.raw_data.take();
            info.apply_to(t);
            t.raw_data = bytes;
        }
    });
    Ok(report)
}

/// Reads the bytes of every external tensor of `model` into `raw_data` (from files relative to
/// `base_dir`, under every path rule, as [`load_external_data_for_model`] reads them: copied,
/// or borrowed from one map per file with `opts.parse.no_copy`, aligned to `opts.parse.alignment`), and
/// keeps the tensors' references (`external_data`, `data_location` EXTERNAL). Returns the
/// number of tensors read. On error the model is unchanged.
pub fn populate_external_data(
    model: &mut ModelProto,
    base_dir: impl AsRef<Path>,
    opts: &LoadOptions,
) -> Result<usize> {
    let mut references: HashMap<*const TensorProto, RepeatedField<StringStringEntryProto>> =
        HashMap::new();
    model.visit_tensors(&mut |t| {
        if uses_external_data(t) {
            references.insert(t as *const _, t.rare.external_data.clone());
        }
    });
    let report = load_external_data_for_model(model, base_dir, opts)?;
    model.visit_tensors_mut(&mut |t| {
        if let Some(entries) = references.remove(&(t as *const TensorProto)) {
            t.rare.external_data = entries;
            t.rare.data_location = Some(crate::external::info::DATA_LOCATION_EXTERNAL);
        }
    });
    Ok(report.tensors)
}

/// Drops the bytes (`raw_data`) of every external tensor of `model` and keeps its references:
/// the model as a save writes its `.onnx`. Returns the number of tensors whose bytes were
/// dropped.
pub fn clear_external_data(model: &mut ModelProto) -> usize {
    let mut cleared = 0;
    model.visit_tensors_mut(&mut |t| {
        if uses_external_data(t) && t.raw_data.take().is_some() {
            cleared += 1;
        }
    });
    cleared
}
