//! Saving with external data: plan where each large tensor goes (one file, split files, or one
//! file per tensor; aligned offsets), write the weight files (pre-sized, positional writes in
//! parallel, temporary file + rename, checksums computed from the bytes written), then write the
//! `.onnx` from a rewritten copy of the METADATA only. The in-memory model is never changed, and
//! no tensor payload is copied.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::checksum::{Sha1Hasher, sha1_hex};
use super::info::{DATA_LOCATION_DEFAULT, ExternalDataInfo, uses_external_data};
use super::load::{has_external_data, map_external_tensors};
use super::options::SaveExternalOptions;
use super::paths::{
    AtomicOut, OpenError, model_dir, normalize_location, remove_beneath, remove_stale_temps,
};
use super::prepacked::PrepackedBlobs;
use crate::bytes::ByteSpan;
use crate::codec::SerializeOptions;
use crate::error::{Error, Result};
use crate::proto::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, SparseTensorProto,
    TensorProto, TrainingInfoProto,
};
use crate::storage::write_all_at;
use crate::wire::guard_stack;

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

/// Where a tensor sits in the model: graph/function data, or a node attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Initializer,
    Attribute,
}

// ---------------------------------------------------------------------------------------------
// Traversals. Both follow the generated visitor's order (`visit_tensors`), and reach the same
// places: graph initializers and sparse initializers (values, indices), node attributes `t`,
// `tensors`, `sparse_tensor(s)`, subgraphs `g` / `graphs` recursively, function bodies (default
// attributes and nodes), and training graphs. The tests compare them with `visit_tensors`.

/// Calls `f` on every tensor of `m` with its kind.
pub(crate) fn walk_model<'a>(m: &'a ModelProto, f: &mut dyn FnMut(&'a TensorProto, Kind)) {
    if let Some(g) = &m.graph {
        walk_graph(g, f);
    }
    for t in &m.training_info {
        if let Some(g) = &t.initialization {
            walk_graph(g, f);
        }
        if let Some(g) = &t.algorithm {
            walk_graph(g, f);
        }
    }
    for func in &m.functions {
        for a in &func.attribute_proto {
            walk_attr(a, f);
        }
        for n in &func.node {
            walk_node(n, f);
        }
    }
}

fn walk_sparse<'a>(s: &'a SparseTensorProto, kind: Kind, f: &mut dyn FnMut(&'a TensorProto, Kind)) {
    if let Some(v) = &s.values {
        f(v, kind);
    }
    if let Some(i) = &s.indices {
        f(i, kind);
    }
}

fn walk_graph<'a>(g: &'a GraphProto, f: &mut dyn FnMut(&'a TensorProto, Kind)) {
    for n in &g.node {
        walk_node(n, f);
    }
    for t in &g.initializer {
        f(t, Kind::Initializer);
    }
    for s in &g.sparse_initializer {
        walk_sparse(s, Kind::Initializer, f);
    }
}

fn walk_node<'a>(n: &'a NodeProto, f: &mut dyn FnMut(&'a TensorProto, Kind)) {
    for a in &n.attribute {
        walk_attr(a, f);
    }
}

fn walk_attr<'a>(a: &'a AttributeProto, f: &mut dyn FnMut(&'a TensorProto, Kind)) {
    if let Some(t) = &a.t {
        f(t, Kind::Attribute);
    }
    // Subgraphs close a cycle of the schema: the stack is guarded there (see `wire::stack`).
    if let Some(g) = &a.g {
        guard_stack(|| walk_graph(g, f));
    }
    if let Some(s) = &a.sparse_tensor {
        walk_sparse(s, Kind::Attribute, f);
    }
    for t in &a.tensors {
        f(t, Kind::Attribute);
    }
    for g in &a.graphs {
        guard_stack(|| walk_graph(g, f));
    }
    for s in &a.sparse_tensors {
        walk_sparse(s, Kind::Attribute, f);
    }
}

/// A tensor-by-tensor rewriter used by [`clone_model`].
type TensorFn<'f> = dyn FnMut(&TensorProto) -> TensorProto + 'f;

/// A copy of `m` in which every tensor is `f(original)`; every other field is cloned. The
/// structs are destructured exhaustively, so a field added to the schema fails to compile here
/// instead of being silently deep-copied.
pub(crate) fn clone_model(m: &ModelProto, f: &mut TensorFn<'_>) -> ModelProto {
    let ModelProto {
        ir_version,
        opset_import,
        producer_name,
        producer_version,
        domain,
        model_version,
        doc_string,
        graph,
        metadata_props,
        training_info,
        functions,
        configuration,
        unknown_fields,
    } = m;
    ModelProto {
        ir_version: *ir_version,
        opset_import: opset_import.clone(),
        producer_name: producer_name.clone(),
        producer_version: producer_version.clone(),
        domain: domain.clone(),
        model_version: *model_version,
        doc_string: doc_string.clone(),
        graph: graph.as_ref().map(|g| Box::new(clone_graph(g, f))),
        metadata_props: metadata_props.clone(),
        training_info: training_info.iter().map(|t| clone_training(t, f)).collect(),
        functions: functions.iter().map(|x| clone_function(x, f)).collect(),
        configuration: configuration.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

fn clone_training(t: &TrainingInfoProto, f: &mut TensorFn<'_>) -> TrainingInfoProto {
    let TrainingInfoProto {
        initialization,
        algorithm,
        initialization_binding,
        update_binding,
        unknown_fields,
    } = t;
    TrainingInfoProto {
        initialization: initialization.as_ref().map(|g| Box::new(clone_graph(g, f))),
        algorithm: algorithm.as_ref().map(|g| Box::new(clone_graph(g, f))),
        initialization_binding: initialization_binding.clone(),
        update_binding: update_binding.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

fn clone_function(x: &FunctionProto, f: &mut TensorFn<'_>) -> FunctionProto {
    let FunctionProto {
        name,
        input,
        output,
        attribute,
        attribute_proto,
        node,
        doc_string,
        opset_import,
        domain,
        overload,
        value_info,
        metadata_props,
        unknown_fields,
    } = x;
    FunctionProto {
        name: name.clone(),
        input: input.clone(),
        output: output.clone(),
        attribute: attribute.clone(),
        attribute_proto: attribute_proto.iter().map(|a| clone_attr(a, f)).collect(),
        node: node.iter().map(|n| clone_node(n, f)).collect(),
        doc_string: doc_string.clone(),
        opset_import: opset_import.clone(),
        domain: domain.clone(),
        overload: overload.clone(),
        value_info: value_info.clone(),
        metadata_props: metadata_props.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

fn clone_graph(g: &GraphProto, f: &mut TensorFn<'_>) -> GraphProto {
    let GraphProto {
        node,
        name,
        initializer,
        sparse_initializer,
        doc_string,
        input,
        output,
        value_info,
        quantization_annotation,
        metadata_props,
        unknown_fields,
    } = g;
    // Field order of the visitor: nodes, then initializers, then sparse initializers.
    let node = node.iter().map(|n| clone_node(n, f)).collect();
    let initializer = initializer.iter().map(&mut *f).collect();
    let sparse_initializer = sparse_initializer
        .iter()
        .map(|s| clone_sparse(s, f))
        .collect();
    GraphProto {
        node,
        name: name.clone(),
        initializer,
        sparse_initializer,
        doc_string: doc_string.clone(),
        input: input.clone(),
        output: output.clone(),
        value_info: value_info.clone(),
        quantization_annotation: quantization_annotation.clone(),
        metadata_props: metadata_props.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

fn clone_sparse(s: &SparseTensorProto, f: &mut TensorFn<'_>) -> SparseTensorProto {
    let SparseTensorProto {
        values,
        indices,
        dims,
        unknown_fields,
    } = s;
    SparseTensorProto {
        values: values.as_ref().map(|t| Box::new(f(t))),
        indices: indices.as_ref().map(|t| Box::new(f(t))),
        dims: dims.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

fn clone_node(n: &NodeProto, f: &mut TensorFn<'_>) -> NodeProto {
    let NodeProto {
        input,
        output,
        name,
        op_type,
        domain,
        overload,
        attribute,
        doc_string,
        metadata_props,
        device_configurations,
        unknown_fields,
    } = n;
    NodeProto {
        input: input.clone(),
        output: output.clone(),
        name: name.clone(),
        op_type: op_type.clone(),
        domain: domain.clone(),
        overload: overload.clone(),
        attribute: attribute.iter().map(|a| clone_attr(a, f)).collect(),
        doc_string: doc_string.clone(),
        metadata_props: metadata_props.clone(),
        device_configurations: device_configurations.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

fn clone_attr(a: &AttributeProto, f: &mut TensorFn<'_>) -> AttributeProto {
    let AttributeProto {
        name,
        ref_attr_name,
        doc_string,
        r#type,
        f: float,
        i,
        s,
        t,
        g,
        sparse_tensor,
        tp,
        floats,
        ints,
        strings,
        tensors,
        graphs,
        sparse_tensors,
        type_protos,
        unknown_fields,
    } = a;
    // Visitor order: t, g, sparse_tensor, tensors, graphs, sparse_tensors.
    let t = t.as_ref().map(|t| Box::new(f(t)));
    let g = g
        .as_ref()
        .map(|g| Box::new(guard_stack(|| clone_graph(g, f))));
    let sparse_tensor = sparse_tensor.as_ref().map(|s| Box::new(clone_sparse(s, f)));
    let tensors = tensors.iter().map(&mut *f).collect();
    let graphs = graphs
        .iter()
        .map(|g| guard_stack(|| clone_graph(g, f)))
        .collect();
    let sparse_tensors = sparse_tensors.iter().map(|s| clone_sparse(s, f)).collect();
    AttributeProto {
        name: name.clone(),
        ref_attr_name: ref_attr_name.clone(),
        doc_string: doc_string.clone(),
        r#type: *r#type,
        f: *float,
        i: *i,
        s: s.clone(),
        t,
        g,
        sparse_tensor,
        tp: tp.clone(),
        floats: floats.clone(),
        ints: ints.clone(),
        strings: strings.clone(),
        tensors,
        graphs,
        sparse_tensors,
        type_protos: type_protos.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

/// `t` without its payload: every field cloned except `raw_data`.
fn clone_without_payload(t: &TensorProto) -> TensorProto {
    let TensorProto {
        dims,
        data_type,
        segment,
        float_data,
        int32_data,
        string_data,
        int64_data,
        name,
        doc_string,
        raw_data: _,
        external_data,
        data_location,
        double_data,
        uint64_data,
        metadata_props,
        unknown_fields,
    } = t;
    TensorProto {
        dims: dims.clone(),
        data_type: *data_type,
        segment: segment.clone(),
        float_data: float_data.clone(),
        int32_data: int32_data.clone(),
        string_data: string_data.clone(),
        int64_data: int64_data.clone(),
        name: name.clone(),
        doc_string: doc_string.clone(),
        raw_data: None,
        external_data: external_data.clone(),
        data_location: *data_location,
        double_data: double_data.clone(),
        uint64_data: uint64_data.clone(),
        metadata_props: metadata_props.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// Planning.

/// Where an externalized tensor goes.
#[derive(Clone, Copy)]
struct Placement {
    file: usize,
    offset: u64,
    len: u64,
}

/// A weight file being planned.
struct OutFile<'a> {
    rel: PathBuf,
    location: String,
    size: u64,
    items: Vec<(&'a [u8], u64)>,
    tensors: usize,
}

impl<'a> OutFile<'a> {
    fn new(rel: PathBuf) -> Self {
        let location = location_string(&rel);
        Self {
            rel,
            location,
            size: 0,
            items: Vec::new(),
            tensors: 0,
        }
    }

    fn place(&mut self, bytes: &'a [u8], offset: u64) {
        self.items.push((bytes, offset));
        self.size = self.size.max(offset + bytes.len() as u64);
    }
}

/// A normalised location as recorded in a model: components joined by `/`.
fn location_string(rel: &Path) -> String {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

fn align_up(v: u64, a: u64) -> u64 {
    if a <= 1 { v } else { v.div_ceil(a) * a }
}

/// Alignment of a tensor of `len` bytes: `alignment` for large ones, up to 16 bytes (natural
/// alignment of every element type) for the others, none when alignment is off.
fn alignment_for(len: u64, opts: &SaveExternalOptions) -> u64 {
    if opts.alignment <= 1 {
        1
    } else if len >= opts.align_threshold {
        opts.alignment
    } else {
        opts.alignment.min(16)
    }
}

/// A file name made from a tensor name: `[A-Za-z0-9._-]` kept, everything else `_`, no leading
/// dot, at most 120 bytes, never a Windows device name, never empty.
pub(crate) fn safe_file_name(tensor: &str) -> String {
    let mut s: String = tensor
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.starts_with('.') {
        s.replace_range(0..1, "_");
    }
    s.truncate(120);
    if s.is_empty() {
        s = "tensor".into();
    }
    let stem = s.split('.').next().unwrap_or_default().to_ascii_uppercase();
    let reserved = matches!(stem.as_str(), "CON" | "PRN" | "AUX" | "NUL")
        || ((stem.starts_with("COM") || stem.starts_with("LPT"))
            && stem.len() == 4
            && stem.as_bytes()[3].is_ascii_digit());
    if reserved {
        s.insert(0, '_');
    }
    s
}

/// Makes `name` unique (case-insensitively, for case-insensitive file systems) in `taken`.
fn unique_name(name: String, taken: &mut HashSet<String>) -> String {
    let mut candidate = name.clone();
    let mut n = 1;
    while !taken.insert(candidate.to_ascii_lowercase()) {
        candidate = format!("{name}_{n}");
        n += 1;
    }
    candidate
}

/// The bytes of `t`: its `raw_data`, else (still external in memory) its mapped file range.
fn bytes_of<'b>(
    t: &'b TensorProto,
    unloaded: &'b HashMap<*const TensorProto, ByteSpan>,
) -> Option<&'b [u8]> {
    match &t.raw_data {
        Some(r) => Some(r.as_slice()),
        None => unloaded
            .get(&(t as *const TensorProto))
            .map(|s| s.as_slice()),
    }
}

fn refused(location: &str, reason: String) -> Error {
    Error::PathRefused {
        path: location.into(),
        reason,
    }
}

// ---------------------------------------------------------------------------------------------

/// Saves `model` to `path` with its large tensors in external files (see
/// [`save_model_with_external_data_progress`]).
pub fn save_model_with_external_data(
    model: &ModelProto,
    path: impl AsRef<Path>,
    opts: &SaveExternalOptions,
) -> Result<SaveReport> {
    save_model_with_external_data_progress(model, path, opts, None)
}

/// Saves `model` to `path` with every tensor of at least `size_threshold` raw bytes (attribute
/// tensors only with `convert_attribute`) in external files beside it:
///
/// - one file `location` (default `<model file name>.data`), split into `location.1`, ... at
///   `max_external_file_size`; or, without `all_tensors_to_one_file`, one file per tensor named
///   after the tensor (made safe and unique);
/// - offsets of tensors of at least `align_threshold` bytes are multiples of `alignment`
///   (zero padding);
/// - entries `location`, `offset`, `length` (and `checksum`, the SHA-1 of the whole file, with
///   `checksum`); never `basepath`;
/// - crash-safe as a whole: each file is written to a temporary file in its directory
///   (pre-sized, positional writes, in parallel with `num_threads`), synced and renamed to a
///   name the model being replaced does not reference (the first free alternate name,
///   `w.bin` -> `w_1.bin`, when the wanted one is in use); the `.onnx` is renamed over the old
///   one last (the commit point); then the replaced model's files of the same name family that
///   the new one does not use are removed. A kill at any point leaves the old model with all
///   its files or the new one with all of its files; a failure removes what this save wrote.
///   Re-saving a model over the very files it borrows from (no-copy load) is safe: the old
///   files stay mapped;
/// - the model itself is NOT changed: the `.onnx` is written from a copy of the metadata.
///
/// Tensors that are still external in memory (not loaded) are read from `opts.source_dir`.
/// Locations obey the path rules; nothing is written outside the model's directory.
/// `progress(done, total)` is called with the weight bytes written.
pub fn save_model_with_external_data_progress(
    model: &ModelProto,
    path: impl AsRef<Path>,
    opts: &SaveExternalOptions,
    progress: Option<&(dyn Fn(u64, u64) + Sync)>,
) -> Result<SaveReport> {
    save_impl(model, path.as_ref(), opts, progress, None, None)
}

/// As [`save_model_with_external_data`], and writes the pre-packed `blobs` of the model's
/// initializers the way ONNX Runtime does (`../shared/reference/formats.md` §2):
///
/// - each blob goes into its initializer's weight file RIGHT AFTER the initializer's bytes, each
///   buffer aligned like a tensor of its size (`alignment` from `align_threshold` bytes, else
///   `min(alignment, 16)`);
/// - the initializer gets one entry per blob, `prepacked_0`, `prepacked_1`, … in key order,
///   valued `KEY|OFFSET;LENGTH;CHECKSUM[|…]` (offsets absolute in that file; the checksum is
///   `0`, or the SHA-1 of the buffer with `opts.checksum`);
/// - an initializer with blobs is written externally whatever its size (the entries need an
///   external reference); it must have its bytes in `raw_data` (or be still external);
/// - when several initializers share a name (subgraphs), the first in visitor order carries
///   the blobs.
///
/// Blobs naming no initializer are an error (`Error::InvalidArgument`), before anything is
/// written. The model and the store are not changed.
pub fn save_model_with_prepacked(
    model: &ModelProto,
    blobs: &PrepackedBlobs,
    path: impl AsRef<Path>,
    opts: &SaveExternalOptions,
) -> Result<SaveReport> {
    save_impl(model, path.as_ref(), opts, None, Some(blobs), None)
}

/// As [`save_model_with_prepacked`], with `progress(done, total)` called with the bytes written
/// (tensors and blobs).
pub fn save_model_with_prepacked_progress(
    model: &ModelProto,
    blobs: &PrepackedBlobs,
    path: impl AsRef<Path>,
    opts: &SaveExternalOptions,
    progress: Option<&(dyn Fn(u64, u64) + Sync)>,
) -> Result<SaveReport> {
    save_impl(model, path.as_ref(), opts, progress, Some(blobs), None)
}

/// A fully encrypted model directory in one save: as [`save_model_with_prepacked_progress`]
/// (`blobs` may be empty) with every weight file encrypted (`opts.encryption`, ONNXCRYS, which
/// is required), and the `.onnx` itself encrypted with the SAME passphrase in
/// `model_encryption.format` (ONNXCRY3 by default; any format). It is what saving with
/// encrypted weights and then [`crate::crypto::encrypt_file`] on the `.onnx` produce, without
/// the plaintext `.onnx` ever being written: the encrypted model is written to a temporary file
/// and renamed over `path` as the commit point, so the save is crash-safe exactly like
/// [`save_model_with_external_data_progress`] (a kill leaves the old directory or the new one,
/// each whole). An encrypted model being replaced is read with the passphrase to learn the
/// weight files it references (they are not overwritten before the commit).
///
/// Load the result with [`crate::load_encrypted_model`] and
/// `ParseOptions::external_data_key` set to the same passphrase.
pub fn save_encrypted_model_with_external_data(
    model: &ModelProto,
    blobs: &PrepackedBlobs,
    path: impl AsRef<Path>,
    opts: &SaveExternalOptions,
    model_encryption: &crate::crypto::EncryptionOptions,
    progress: Option<&(dyn Fn(u64, u64) + Sync)>,
) -> Result<SaveReport> {
    if opts.encryption.is_none() {
        return Err(Error::InvalidArgument(
            "a fully encrypted model directory needs SaveExternalOptions::encryption (the \
             passphrase of the weight files and of the model)"
                .into(),
        ));
    }
    model_encryption.validate()?;
    save_impl(
        model,
        path.as_ref(),
        opts,
        progress,
        Some(blobs),
        Some(model_encryption),
    )
}

fn save_impl(
    model: &ModelProto,
    path: &Path,
    opts: &SaveExternalOptions,
    progress: Option<&(dyn Fn(u64, u64) + Sync)>,
    blobs: Option<&PrepackedBlobs>,
    model_encryption: Option<&crate::crypto::EncryptionOptions>,
) -> Result<SaveReport> {
    opts.validate()?;
    let dir = model_dir(path);
    let model_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| Error::InvalidArgument(format!("{} is not a file path", path.display())))?;

    // Bytes of tensors that are still external in memory.
    let unloaded: HashMap<*const TensorProto, ByteSpan> = if has_external_data(model) {
        let mut any_unloaded = false;
        model.visit_tensors(&mut |t| any_unloaded |= uses_external_data(t) && t.raw_data.is_none());
        match (&opts.source_dir, any_unloaded) {
            (_, false) => HashMap::new(),
            (Some(src), true) => {
                map_external_tensors(model, src, opts.encryption.as_ref().map(|e| &e.key))?
            }
            (None, true) => {
                let mut name = String::new();
                model.visit_tensors(&mut |t| {
                    if name.is_empty() && uses_external_data(t) && t.raw_data.is_none() {
                        name = t.name().to_string_lossy().into_owned();
                    }
                });
                return Err(Error::ExternalData {
                    tensor: name,
                    path: dir.clone(),
                    reason: "the tensor's external data is not loaded; load it \
                             (load_external_data_for_model) or set source_dir"
                        .into(),
                });
            }
        }
    } else {
        HashMap::new()
    };
    // The initializer that carries each name's blobs: the first of that name, in visitor order.
    let blobs = blobs.filter(|b| !b.is_empty());
    let mut carriers: HashMap<*const TensorProto, &str> = HashMap::new();
    if let Some(store) = blobs {
        let mut seen: HashSet<&str> = HashSet::new();
        let wanted: HashSet<&str> = store.initializers().into_iter().collect();
        let mut problem: Option<String> = None;
        walk_model(model, &mut |t, kind| {
            let name = t.name().as_str().unwrap_or_default();
            if kind != Kind::Initializer || !wanted.contains(name) || !seen.insert(name) {
                return;
            }
            let name = wanted.get(name).copied().unwrap_or_default();
            if bytes_of(t, &unloaded).is_none() {
                problem.get_or_insert_with(|| {
                    format!(
                        "initializer '{name}' has pre-packed blobs but no raw_data (its data is \
                         in typed fields or missing)"
                    )
                });
            }
            carriers.insert(t as *const _, name);
        });
        if let Some(missing) = wanted.iter().find(|n| !seen.contains(*n)) {
            problem.get_or_insert_with(|| {
                format!("pre-packed blobs name initializer '{missing}', which the model lacks")
            });
        }
        if let Some(p) = problem {
            return Err(Error::InvalidArgument(p));
        }
    }
    // (prepacked_N, value) entries per carrier tensor.
    let mut blob_entries: HashMap<*const TensorProto, Vec<(String, String)>> = HashMap::new();
    let mut prepacked_blobs = 0usize;
    let mut prepacked_bytes = 0u64;

    // Plan.
    let mut files: Vec<OutFile<'_>> = Vec::new();
    let mut placements: HashMap<*const TensorProto, Placement> = HashMap::new();
    let mut taken: HashSet<String> = HashSet::new();
    taken.insert(model_name.to_ascii_lowercase());
    let primary = if opts.all_tensors_to_one_file {
        let location = opts
            .location
            .clone()
            .unwrap_or_else(|| format!("{model_name}.data"));
        let rel = normalize_location(&location)
            .map_err(|r| refused(&location, format!("save location: {r}")))?;
        if rel == Path::new(&model_name) {
            return Err(refused(
                &location,
                "save location: names the model file itself".into(),
            ));
        }
        Some(rel)
    } else {
        None
    };
    // The model this save replaces, and the weight files it references: none of them is
    // written before the new model is committed (see `docs/hardening.md`, "Crash-safe saves").
    let previous = previous_references(path, opts.encryption.as_ref().map(|e| &e.key));
    let mut natural_names: HashSet<String> = HashSet::new();
    let mut natural_taken = taken.clone();
    taken.extend(previous.refs.keys().cloned());
    if previous.unknown {
        // An encrypted previous model this save cannot read: none of the names already in the
        // directory is written over (its weight files stay, unreferenced, after the commit).
        if let Ok(entries) = std::fs::read_dir(&dir) {
            taken.extend(
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().to_ascii_lowercase()),
            );
        }
    }
    let mut current: Option<usize> = None;
    let mut split_index = 0usize;
    let mut externals = 0usize;
    let mut external_bytes = 0u64;
    let mut plan_error: Option<Error> = None;
    walk_model(model, &mut |t, kind| {
        if plan_error.is_some() {
            return;
        }
        let Some(bytes) = bytes_of(t, &unloaded) else {
            return;
        };
        let len = bytes.len() as u64;
        let carried = carriers.get(&(t as *const TensorProto)).copied();
        if carried.is_none()
            && (len < opts.size_threshold || (kind == Kind::Attribute && !opts.convert_attribute))
        {
            return;
        }
        // The tensor and its blobs stay together in one file.
        let blob_len: u64 = match (carried, blobs) {
            (Some(name), Some(store)) => store.blobs_of(name).map(|(_, b)| b.total_len()).sum(),
            _ => 0,
        };
        let (file, offset) = match &primary {
            Some(rel) => {
                let a = alignment_for(len, opts);
                let mut idx = match current {
                    Some(i) => i,
                    None => {
                        files.push(OutFile::new(rel.clone()));
                        files.len() - 1
                    }
                };
                let mut start = align_up(files[idx].size, a);
                if opts.max_external_file_size > 0
                    && files[idx].size > 0
                    && start + len + blob_len > opts.max_external_file_size
                {
                    split_index += 1;
                    let mut name = rel.as_os_str().to_os_string();
                    name.push(format!(".{split_index}"));
                    files.push(OutFile::new(PathBuf::from(name)));
                    idx = files.len() - 1;
                    start = 0;
                }
                current = Some(idx);
                (idx, start)
            }
            None => {
                let safe = safe_file_name(&t.name().to_string_lossy());
                natural_names.insert(safe.to_ascii_lowercase());
                unique_name(safe.clone(), &mut natural_taken);
                let name = unique_name(safe, &mut taken);
                match normalize_location(&name) {
                    Ok(rel) => files.push(OutFile::new(rel)),
                    Err(r) => {
                        plan_error = Some(refused(&name, format!("tensor file name: {r}")));
                        return;
                    }
                }
                (files.len() - 1, 0)
            }
        };
        files[file].place(bytes, offset);
        files[file].tensors += 1;
        placements.insert(t as *const _, Placement { file, offset, len });
        externals += 1;
        external_bytes += len;
        // Its blobs, right after it, in key order: ONNX Runtime's `prepacked_N` entries.
        if let (Some(name), Some(store)) = (carried, blobs) {
            let mut entries = Vec::new();
            for (n, (key, blob)) in store.blobs_of(name).enumerate() {
                let mut value = key.to_string();
                for buf in &blob.buffers {
                    let b = buf.as_slice();
                    let f = &mut files[file];
                    let at = if b.is_empty() {
                        f.size
                    } else {
                        align_up(f.size, alignment_for(b.len() as u64, opts))
                    };
                    f.place(b, at);
                    let checksum = if opts.checksum {
                        sha1_hex(b)
                    } else {
                        "0".to_string()
                    };
                    value.push_str(&format!("|{at};{};{checksum}", b.len()));
                    prepacked_bytes += b.len() as u64;
                }
                entries.push((format!("prepacked_{n}"), value));
                prepacked_blobs += 1;
            }
            blob_entries.insert(t as *const _, entries);
        }
    });
    if let Some(e) = plan_error {
        return Err(e);
    }
    // One weight file (and its split parts): when a name the previous model references would
    // be written, the whole set moves to the first alternate name (`w.bin` -> `w_1.bin`) that
    // it does not reference, so the previous model's files are never replaced under it.
    if let Some(base) = &primary {
        let count = files.len();
        let names_of = |k: usize| -> Vec<PathBuf> {
            let alt = alternate_name(base, k);
            (0..count)
                .map(|i| {
                    let mut n = alt.clone().into_os_string();
                    if i > 0 {
                        n.push(format!(".{i}"));
                    }
                    PathBuf::from(n)
                })
                .collect()
        };
        let clash = |names: &[PathBuf]| {
            names.iter().any(|n| {
                let l = location_string(n).to_ascii_lowercase();
                previous.refs.contains_key(&l)
                    || l == model_name.to_ascii_lowercase()
                    || (previous.unknown && std::fs::symlink_metadata(dir.join(n)).is_ok())
            })
        };
        if !files.is_empty() && clash(&names_of(0)) {
            let k = (1..)
                .find(|&k| !clash(&names_of(k)))
                .expect("finitely many previous names");
            for (f, rel) in files.iter_mut().zip(names_of(k)) {
                *f = OutFile {
                    location: location_string(&rel),
                    rel,
                    size: f.size,
                    items: std::mem::take(&mut f.items),
                    tensors: f.tensors,
                };
            }
        }
    }
    // Files of the previous model in this save's naming family that the new model will not
    // reference: removed once the new model is committed (they are what an in-place save would
    // have overwritten).
    let new_names: HashSet<String> = files
        .iter()
        .map(|f| f.location.to_ascii_lowercase())
        .collect();
    let obsolete: Vec<String> = previous
        .refs
        .iter()
        .filter(|(lower, _)| !new_names.contains(*lower))
        .filter(|(lower, _)| match &primary {
            Some(base) => in_family(lower, &location_string(base).to_ascii_lowercase()),
            None => natural_names.contains(strip_unique_suffix(lower)),
        })
        .map(|(_, original)| original.clone())
        .collect();

    // Write the weight files. Every destination is checked (and its directories created)
    // before anything is written; then the files are written and committed in batches, so a
    // model with thousands of per-tensor files never holds more than a few descriptors.
    let err = |f: &OutFile<'_>, e: OpenError| match e {
        OpenError::Refused(r) => refused(&f.location, format!("save: {r}")),
        OpenError::Io(e) => Error::io(dir.join(&f.rel), e),
    };
    for f in &files {
        AtomicOut::check(&dir, &f.rel).map_err(|e| err(f, e))?;
    }
    // Temporary files left by saves that were killed (their process is gone).
    let mut ours: Vec<PathBuf> = files.iter().map(|f| f.rel.clone()).collect();
    ours.push(PathBuf::from(&model_name));
    remove_stale_temps(&dir, &ours);
    let progress = Progress {
        done: AtomicU64::new(0),
        total: files
            .iter()
            .flat_map(|f| &f.items)
            .map(|(b, _)| b.len() as u64)
            .sum(),
        report: progress,
    };
    // Encrypted weight files share one random salt (one key derivation per save) and have
    // distinct nonce prefixes (their index), so no (key, nonce) pair is ever used twice.
    let sealing = match &opts.encryption {
        Some(e) => {
            if u32::try_from(files.len()).is_err() {
                return Err(Error::LimitExceeded(
                    "more than 2^32 encrypted weight files".into(),
                ));
            }
            let params = crate::crypto::Params::random()?;
            let key = crate::crypto::derive_key(e.key.as_bytes(), &params.salt);
            Some((e, key, params))
        }
        None => None,
    };
    let mut digests = Vec::with_capacity(files.len());
    // Weight files already renamed into place are removed again if the save fails before the
    // new model is committed (no model references them).
    let mut committed = Committed {
        dir: &dir,
        rels: Vec::with_capacity(files.len()),
    };
    for (b, batch) in files.chunks(OPEN_FILES).enumerate() {
        let outs = batch
            .iter()
            .map(|f| AtomicOut::create(&dir, &f.rel).map_err(|e| err(f, e)))
            .collect::<Result<Vec<_>>>()?;
        digests.extend(match &sealing {
            None => write_files(batch, &outs, opts, &progress, &dir)?,
            Some((e, key, params)) => {
                let seal = Seal {
                    enc: e,
                    key,
                    params,
                    first: b * OPEN_FILES,
                };
                write_encrypted_files(batch, &outs, opts, &progress, &dir, &seal)?
            }
        });
        for (out, f) in outs.into_iter().zip(batch) {
            out.commit(opts.sync)
                .map_err(|e| Error::io(dir.join(&f.rel), e))?;
            committed.rels.push(f.rel.clone());
        }
    }

    // The `.onnx`: a copy of the metadata with the new external references.
    let copy = clone_model(model, &mut |t| {
        let mut c = clone_without_payload(t);
        let key = t as *const TensorProto;
        if let Some(p) = placements.get(&key) {
            let f = &files[p.file];
            ExternalDataInfo {
                location: f.location.clone(),
                offset: p.offset,
                length: Some(p.len),
                checksum: digests[p.file].clone(),
                prepacked: blob_entries.remove(&key).unwrap_or_default(),
                ..Default::default()
            }
            .apply_to(&mut c);
        } else if let Some(span) = unloaded.get(&key) {
            // Still external in memory, small enough to go inline now.
            c.raw_data = Some(ByteSpan::from_vec(span.to_vec()));
            c.external_data.clear();
            c.data_location = Some(DATA_LOCATION_DEFAULT);
        } else if let Some(r) = &t.raw_data {
            // SAFETY: the copy lives only inside this function, while `model` (which keeps these
            // bytes alive and unchanged) is borrowed; the span is dropped with the copy.
            c.raw_data = Some(unsafe { ByteSpan::from_raw_parts(r.as_ptr(), r.len()) });
            if uses_external_data(t) {
                // Bytes in memory win over stale external metadata.
                c.external_data.clear();
                c.data_location = Some(DATA_LOCATION_DEFAULT);
            }
        }
        c
    });
    let sopts = SerializeOptions {
        num_threads: opts.num_threads,
        ..SerializeOptions::default()
    };
    // The commit point: every weight file is in place (synced, under a name the previous
    // model does not use); renaming the new model over the old one switches atomically. An
    // encrypted model goes the same way (temporary file, sync, rename): only its bytes differ.
    match (model_encryption, &opts.encryption) {
        (Some(me), Some(e)) => {
            crate::crypto::save_encrypted_model(&copy, path, e.key.as_bytes(), me)?;
        }
        _ => crate::codec::save_to_file(&copy, path, &sopts)?,
    }
    committed.rels.clear();
    drop(copy);
    for location in &obsolete {
        if let Ok(rel) = normalize_location(location) {
            remove_beneath(&dir, &rel);
        }
    }

    Ok(SaveReport {
        files: files
            .iter()
            .zip(digests)
            .map(|(f, sha1)| SavedFile {
                location: f.location.clone(),
                size: f.size,
                sha1,
                tensors: f.tensors,
                prepacked_buffers: f.items.len() - f.tensors,
            })
            .collect(),
        external_tensors: externals,
        external_bytes,
        prepacked_blobs,
        prepacked_bytes,
    })
}

/// Weight files renamed into place by a save whose model is not committed yet; dropped, it
/// removes them (the save failed or panicked: no model references them).
struct Committed<'d> {
    dir: &'d Path,
    rels: Vec<PathBuf>,
}

impl Drop for Committed<'_> {
    fn drop(&mut self) {
        for rel in &self.rels {
            remove_beneath(self.dir, rel);
        }
    }
}

/// What [`previous_references`] learned of the model a save replaces.
struct Previous {
    /// The external locations it references (lower-cased normalised form -> the location as
    /// written).
    refs: HashMap<String, String>,
    /// It is an encrypted model that could not be read (no passphrase, or another one): its
    /// references are unknown, so every file already in the directory is treated as one.
    unknown: bool,
}

/// The external locations referenced by the model at `path`, or none when there is no readable
/// model there. An encrypted model is read with `key` (the save's passphrase), when there is
/// one; otherwise its references are `unknown`.
fn previous_references(path: &Path, key: Option<&crate::secret::Passphrase>) -> Previous {
    let mut out = Previous {
        refs: HashMap::new(),
        unknown: false,
    };
    if !path.is_file() {
        return out;
    }
    let opts = crate::codec::ParseOptions {
        no_copy: true,
        skip_raw_data: true,
        load_external_data: false,
        ..Default::default()
    };
    let old = match crate::codec::parse_file::<ModelProto>(path, &opts) {
        Ok(old) => old,
        Err(_) if crate::crypto::detect_file_format(path).is_ok() => {
            match key.map(|k| crate::crypto::decrypt_model(path, k.as_bytes(), &opts)) {
                Some(Ok(old)) => old,
                _ => {
                    out.unknown = true;
                    return out;
                }
            }
        }
        // An unreadable previous model has nothing loadable to protect.
        Err(_) => return out,
    };
    old.visit_tensors(&mut |t| {
        if uses_external_data(t)
            && let Ok(info) = ExternalDataInfo::parse(t)
            && let Ok(rel) = normalize_location(&info.location)
        {
            let l = location_string(&rel);
            out.refs.insert(l.to_ascii_lowercase(), l);
        }
    });
    out
}

/// Alternate `k` of a weight file name: `k` = 0 is the name itself; `w.bin` -> `w_1.bin`,
/// `m.onnx.data` -> `m.onnx_1.data`, `weights` -> `weights_1`.
fn alternate_name(rel: &Path, k: usize) -> PathBuf {
    if k == 0 {
        return rel.to_path_buf();
    }
    let name = rel
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let alt = match name.rfind('.') {
        Some(i) if i > 0 => format!("{}_{k}{}", &name[..i], &name[i..]),
        _ => format!("{name}_{k}"),
    };
    rel.with_file_name(alt)
}

/// `name` without a trailing `_DIGITS` (the suffix of [`unique_name`]).
fn strip_unique_suffix(name: &str) -> &str {
    match name.rsplit_once('_') {
        Some((stem, n))
            if !stem.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            stem
        }
        _ => name,
    }
}

/// Whether `location` (lower case) is `base` (lower case), one of its alternate names, or a
/// split part of either.
fn in_family(location: &str, base: &str) -> bool {
    let whole = super::info::split_part_of(location)
        .map(|(b, _)| b)
        .unwrap_or(location);
    if whole == base {
        return true;
    }
    // `alternate_name(base, 1)` is PREFIX `1` SUFFIX; alternates are PREFIX DIGITS SUFFIX.
    let one = location_string(&alternate_name(Path::new(base), 1));
    let Some(i) = one.rfind("_1") else {
        return false;
    };
    let (prefix, suffix) = (&one[..i + 1], &one[i + 2..]);
    whole
        .strip_prefix(prefix)
        .and_then(|r| r.strip_suffix(suffix))
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

const PIECE: usize = 8 << 20;

/// The encryption of one save's weight files.
struct Seal<'a> {
    enc: &'a super::options::ExternalEncryption,
    key: &'a crate::crypto::DerivedKey,
    params: &'a crate::crypto::Params,
    /// Index (in the save) of the first file of the batch.
    first: usize,
}

/// Writes every planned file of a batch through an ONNXCRYS encryptor (sequentially per file,
/// files in parallel with `num_threads`): the plaintext is exactly what `write_files` would
/// write (tensors at their offsets, zero padding), so offsets, lengths and checksums are the
/// plaintext's. Memory: one chunk per file being written.
fn write_encrypted_files(
    files: &[OutFile<'_>],
    outs: &[AtomicOut],
    opts: &SaveExternalOptions,
    progress: &Progress<'_>,
    dir: &Path,
    seal: &Seal<'_>,
) -> Result<Vec<Option<String>>> {
    static ZEROS: [u8; 4096] = [0; 4096];
    let write_one = |i: usize| -> Result<Option<String>> {
        let f = &files[i];
        let path = dir.join(&f.rel);
        let mut params = *seal.params;
        let index = u32::try_from(seal.first + i).unwrap_or(u32::MAX);
        params.iv[..4].copy_from_slice(&index.to_be_bytes());
        let mut w = crate::crypto::StreamEncryptor::with_derived(
            outs[i].file(),
            seal.key,
            seal.enc.cipher,
            seal.enc.chunk_size,
            &params,
        )?;
        w.set_label(&path);
        let mut h = opts.checksum.then(Sha1Hasher::new);
        let mut items = f.items.clone();
        items.sort_by_key(|&(_, off)| off);
        let mut pos = 0u64;
        let mut put = |bytes: &[u8]| -> Result<()> {
            w.write_plaintext(bytes)?;
            if let Some(h) = h.as_mut() {
                h.update(bytes);
            }
            Ok(())
        };
        let zeros = |put: &mut dyn FnMut(&[u8]) -> Result<()>, mut n: u64| -> Result<()> {
            while n > 0 {
                let k = n.min(ZEROS.len() as u64) as usize;
                put(&ZEROS[..k])?;
                n -= k as u64;
            }
            Ok(())
        };
        for (bytes, off) in items {
            // Items never overlap (the planner places them apart).
            zeros(&mut put, off.saturating_sub(pos))?;
            for piece in bytes.chunks(PIECE) {
                put(piece)?;
                if let Some(p) = progress.report {
                    let n = piece.len() as u64;
                    p(
                        progress.done.fetch_add(n, Ordering::Relaxed) + n,
                        progress.total,
                    );
                }
            }
            pos = pos.max(off + bytes.len() as u64);
        }
        zeros(&mut put, f.size - pos)?;
        w.finish()?;
        Ok(h.map(Sha1Hasher::finish_hex))
    };
    let threads = opts.threads();
    let pool = if threads > 1 && files.len() > 1 {
        crate::storage::thread_pool(threads)
    } else {
        None
    };
    match pool {
        Some(pool) => {
            use rayon::prelude::*;
            pool.install(|| (0..files.len()).into_par_iter().map(write_one).collect())
        }
        None => (0..files.len()).map(write_one).collect(),
    }
}

/// Weight files open at once while saving (each holds two descriptors).
const OPEN_FILES: usize = 32;

/// Progress of the weight writes.
struct Progress<'a> {
    done: AtomicU64,
    total: u64,
    report: Option<&'a (dyn Fn(u64, u64) + Sync)>,
}

/// Writes every planned file into its temporary file (pre-sized; pieces of at most 8 MiB written
/// at their offsets, in parallel with `num_threads`), and computes each file's SHA-1 from the
/// same bytes (padding included) when `checksum` is set.
fn write_files(
    files: &[OutFile<'_>],
    outs: &[AtomicOut],
    opts: &SaveExternalOptions,
    progress: &Progress<'_>,
    dir: &Path,
) -> Result<Vec<Option<String>>> {
    let mut tasks: Vec<(usize, u64, &[u8])> = Vec::new();
    for (i, (f, out)) in files.iter().zip(outs).enumerate() {
        out.file()
            .set_len(f.size)
            .map_err(|e| Error::io(dir.join(&f.rel), e))?;
        for &(bytes, offset) in &f.items {
            for (k, piece) in bytes.chunks(PIECE).enumerate() {
                tasks.push((i, offset + (k * PIECE) as u64, piece));
            }
        }
    }
    let write = |&(i, offset, piece): &(usize, u64, &[u8])| -> Result<()> {
        write_all_at(outs[i].file(), piece, offset)
            .map_err(|e| Error::io(dir.join(&files[i].rel), e))?;
        if let Some(p) = progress.report {
            let n = piece.len() as u64;
            p(
                progress.done.fetch_add(n, Ordering::Relaxed) + n,
                progress.total,
            );
        }
        Ok(())
    };
    let hash = || -> Vec<Option<String>> {
        files
            .iter()
            .map(|f| {
                opts.checksum.then(|| {
                    let mut items = f.items.clone();
                    items.sort_by_key(|&(_, off)| off);
                    let mut h = Sha1Hasher::new();
                    let mut pos = 0u64;
                    for (bytes, off) in items {
                        h.update_zeros(off.saturating_sub(pos));
                        h.update(bytes);
                        pos = pos.max(off + bytes.len() as u64);
                    }
                    h.update_zeros(f.size - pos);
                    h.finish_hex()
                })
            })
            .collect()
    };
    let threads = opts.threads();
    let pool = if threads > 1 {
        crate::storage::thread_pool(threads)
    } else {
        None
    };
    match pool {
        Some(pool) => {
            use rayon::prelude::*;
            let (written, digests) =
                pool.install(|| rayon::join(|| tasks.par_iter().try_for_each(write), hash));
            written?;
            Ok(digests)
        }
        None => {
            tasks.iter().try_for_each(write)?;
            Ok(hash())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_names() {
        assert_eq!(safe_file_name("conv1.weight"), "conv1.weight");
        assert_eq!(safe_file_name("../../etc/passwd"), "_._.._etc_passwd");
        assert_eq!(safe_file_name("a/b\\c:d"), "a_b_c_d");
        assert_eq!(safe_file_name(""), "tensor");
        assert_eq!(safe_file_name("con.x"), "_con.x");
        assert_eq!(safe_file_name("COM1"), "_COM1");
        assert_eq!(safe_file_name(".hidden"), "_hidden");
        let mut taken = HashSet::new();
        assert_eq!(unique_name("w".into(), &mut taken), "w");
        assert_eq!(unique_name("W".into(), &mut taken), "W_1");
        assert_eq!(unique_name("w".into(), &mut taken), "w_2");
    }

    #[test]
    fn alternate_names_and_families() {
        let alt = |s: &str, k| location_string(&alternate_name(Path::new(s), k));
        assert_eq!(alt("m.onnx.data", 0), "m.onnx.data");
        assert_eq!(alt("m.onnx.data", 1), "m.onnx_1.data");
        assert_eq!(alt("w.bin", 2), "w_2.bin");
        assert_eq!(alt("weights", 1), "weights_1");
        assert_eq!(alt("sub/w.bin", 1), "sub/w_1.bin");
        assert_eq!(alt(".hidden", 1), ".hidden_1");
        for member in [
            "m.onnx.data",
            "m.onnx.data.3",
            "m.onnx_1.data",
            "m.onnx_12.data.2",
        ] {
            assert!(in_family(member, "m.onnx.data"), "{member}");
        }
        for other in [
            "m.onnx_x.data",
            "m.onnx_.data",
            "w.bin",
            "m.onnx.data_1",
            "m.onnx",
        ] {
            assert!(!in_family(other, "m.onnx.data"), "{other}");
        }
        assert!(in_family("weights_3", "weights") && in_family("weights.2", "weights"));
        assert_eq!(strip_unique_suffix("w0_1"), "w0");
        assert_eq!(strip_unique_suffix("w_0_12"), "w_0");
        assert_eq!(strip_unique_suffix("w0"), "w0");
        assert_eq!(strip_unique_suffix("_1"), "_1");
    }

    #[test]
    fn alignment_rules() {
        let o = SaveExternalOptions::default();
        assert_eq!(alignment_for(1 << 20, &o), 4096);
        assert_eq!(alignment_for(100, &o), 16);
        let packed = SaveExternalOptions {
            alignment: 0,
            ..Default::default()
        };
        assert_eq!(alignment_for(1 << 30, &packed), 1);
        assert_eq!(align_up(4097, 4096), 8192);
        assert_eq!(align_up(5, 1), 5);
    }
}
