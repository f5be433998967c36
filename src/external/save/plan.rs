//! The plan of a save: which tensors go to which weight file at which (aligned) offset, under
//! which names. Names are chosen so that no file the model being replaced references is written
//! over before the new model is committed: a wanted name in use gets an alternate name
//! (`w.bin` -> `w_1.bin`) for the first commit, and the commit phase moves the files back to the
//! wanted names afterwards.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::bytes::ByteSpan;
use crate::error::{Error, Result};
use crate::external::checksum::sha1_hex;
use crate::external::info::{ExternalDataInfo, split_part_of, uses_external_data};
use crate::external::load::{has_external_data, map_external_tensors};
use crate::external::options::SaveExternalOptions;
use crate::external::paths::normalize_location;
use crate::external::prepacked::PrepackedBlobs;
use crate::proto::{ModelProto, TensorPlace, TensorProto};

/// What a save's options ask about a tensor's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    /// In a node attribute, or the values or indices of a sparse tensor in one (else graph or
    /// function data: an initializer).
    attribute: bool,
    /// The values or indices of a sparse tensor.
    sparse: bool,
}

impl Place {
    fn of(p: TensorPlace) -> Self {
        let sparse = p.field.message() == "SparseTensorProto";
        // A sparse tensor's values and indices are where the sparse tensor is.
        let holder = if sparse { p.parent } else { Some(p.field) };
        Place {
            attribute: holder.is_some_and(|h| h.message() == "AttributeProto"),
            sparse,
        }
    }
}

/// Calls `f` on every tensor of `model` with its place (the order of `visit_tensors`).
fn walk_model<'a>(model: &'a ModelProto, f: &mut dyn FnMut(&'a TensorProto, Place)) {
    model.visit_tensors_placed(None, &mut |t, p| f(t, Place::of(p)));
}

/// Where an externalized tensor goes.
#[derive(Clone, Copy)]
pub(crate) struct Placement {
    pub(crate) file: usize,
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

/// A weight file being planned.
pub(crate) struct OutFile<'a> {
    /// The name written by the first commit (the wanted name, or an alternate of it).
    pub(crate) rel: PathBuf,
    /// `rel` as recorded in the model.
    pub(crate) location: String,
    /// The name the user asked for (the final name after the second commit).
    pub(crate) wanted: PathBuf,
    pub(crate) size: u64,
    /// Byte ranges and their offsets in the file.
    pub(crate) items: Vec<(&'a [u8], u64)>,
    pub(crate) tensors: usize,
}

impl<'a> OutFile<'a> {
    fn new(rel: PathBuf) -> Self {
        Self {
            location: location_string(&rel),
            wanted: rel.clone(),
            rel,
            size: 0,
            items: Vec::new(),
            tensors: 0,
        }
    }

    fn place(&mut self, bytes: &'a [u8], offset: u64) {
        self.items.push((bytes, offset));
        self.size = self.size.max(offset + bytes.len() as u64);
    }

    /// Writes this file under `rel` in the first commit (the wanted name stays).
    fn rename_to(&mut self, rel: PathBuf) {
        self.location = location_string(&rel);
        self.rel = rel;
    }
}

/// A normalised location as recorded in a model: components joined by `/`.
pub(crate) fn location_string(rel: &Path) -> String {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Alignment of a tensor of `len` bytes: `alignment` for large ones, up to 16 bytes (natural
/// alignment of every element type) for the others, 1 (none) when alignment is off; never 0.
pub(crate) fn alignment_for(len: u64, opts: &SaveExternalOptions) -> u64 {
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

/// Names made unique case-insensitively (for case-insensitive file systems): `w`, `w_1`, `w_2`,
/// ... Each base name remembers its next suffix, so `n` equal names cost O(n), not O(n²).
#[derive(Default)]
pub(crate) struct UniqueNames {
    taken: HashSet<String>,
    next: HashMap<String, usize>,
    /// Candidates tried so far (at most about two per name: the work is linear).
    probes: usize,
}

impl UniqueNames {
    /// Marks `name` as used.
    pub(crate) fn reserve(&mut self, name: &str) {
        self.taken.insert(name.to_ascii_lowercase());
    }

    /// `name`, or `name_N` with the first free `N`, marked as used.
    pub(crate) fn unique(&mut self, name: String) -> String {
        let lower = name.to_ascii_lowercase();
        if self.taken.insert(lower.clone()) {
            return name;
        }
        let next = self.next.entry(lower).or_insert(1);
        loop {
            let candidate = format!("{name}_{next}");
            *next += 1;
            self.probes += 1;
            if self.taken.insert(candidate.to_ascii_lowercase()) {
                return candidate;
            }
        }
    }
}

/// A save `location` as recorded: an absolute path (`/x/w.bin`, `C:\x\w.bin`) is reduced to
/// its file name, as the C++ library does; anything else is kept (and checked by
/// [`normalize_location`]: `..` leaving the directory stays refused).
pub(crate) fn save_location(location: &str) -> &str {
    let b = location.as_bytes();
    let absolute = location.starts_with(['/', '\\'])
        || (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':');
    if absolute {
        location.rsplit(['/', '\\']).next().unwrap_or_default()
    } else {
        location
    }
}

/// The bytes of `t`: its `raw_data`, else (still external in memory) its mapped file range.
pub(crate) fn bytes_of<'b>(t: &'b TensorProto, unloaded: &'b Unloaded) -> Option<&'b [u8]> {
    match &t.raw_data {
        Some(r) => Some(r.as_slice()),
        None => unloaded
            .get(&(t as *const TensorProto))
            .map(|s| s.as_slice()),
    }
}

/// The bytes of tensors that are still external in memory, by tensor address.
pub(crate) type Unloaded = HashMap<*const TensorProto, ByteSpan>;

/// Maps the bytes of the tensors of `model` that are still external in memory (from
/// `opts.source_dir`; an error names the first such tensor when it is not set).
pub(crate) fn unloaded_tensors(
    model: &ModelProto,
    dir: &Path,
    opts: &SaveExternalOptions,
) -> Result<Unloaded> {
    if !has_external_data(model) {
        return Ok(HashMap::new());
    }
    let mut first: Option<String> = None;
    model.visit_tensors(&mut |t| {
        if first.is_none() && uses_external_data(t) && t.raw_data.is_none() {
            first = Some(t.name().to_string_lossy().into_owned());
        }
    });
    match (&opts.source_dir, first) {
        // Kept as references (checked by `plan`), never read.
        _ if opts.use_external_data_location => Ok(HashMap::new()),
        (_, None) => Ok(HashMap::new()),
        (Some(src), Some(_)) => {
            map_external_tensors(model, src, opts.encryption.as_ref().map(|e| &e.key))
        }
        (None, Some(tensor)) => Err(Error::ExternalData {
            tensor,
            path: dir.to_path_buf(),
            reason: "the tensor's external data is not loaded; load it \
                     (load_external_data_for_model) or set source_dir"
                .into(),
        }),
    }
}

pub(crate) fn refused(location: &str, reason: String) -> Error {
    Error::PathRefused {
        path: location.into(),
        reason,
    }
}

/// What [`previous_references`] learned of the model a save replaces.
pub(crate) struct Previous {
    /// The external locations it references (lower-cased normalised form -> the location as
    /// written).
    pub(crate) refs: HashMap<String, String>,
    /// It is an encrypted model that could not be read (no passphrase, or another one): its
    /// references are unknown, so every file already in the directory is treated as one.
    pub(crate) unknown: bool,
}

/// The external locations referenced by the model at `path`, or none when there is no readable
/// model there. An encrypted model is read with `key` (the save's passphrase), when there is
/// one; otherwise its references are `unknown`.
pub(crate) fn previous_references(
    path: &Path,
    key: Option<&crate::secret::Passphrase>,
) -> Previous {
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
        ..Default::default()
    };
    let old = match crate::codec::parse_file::<ModelProto>(path, &opts) {
        Ok(old) => old,
        Err(_) if crate::crypto::detect_file_format(path).is_ok() => {
            match key.map(|k| crate::crypto::decrypt_model(path, k.as_bytes(), &opts, false)) {
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
pub(crate) fn alternate_name(rel: &Path, k: usize) -> PathBuf {
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

/// `name` without a trailing `_DIGITS` (the suffix of [`UniqueNames::unique`]).
pub(crate) fn strip_unique_suffix(name: &str) -> &str {
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
pub(crate) fn in_family(location: &str, base: &str) -> bool {
    let whole = split_part_of(location).map(|(b, _)| b).unwrap_or(location);
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

/// The weight file names a save owns: the files of the model it replaces that belong to this
/// family and end up unreferenced are removed, and so are unreferenced members left by a save
/// that was killed.
pub(crate) enum Family {
    /// One weight file `base` (lower case): itself, its alternates, their split parts.
    OneFile(String),
    /// One file per tensor: these names (lower case) and their `_N` alternates.
    PerTensor(HashSet<String>),
}

impl Family {
    /// Whether `location` (normalised, lower case) belongs to the family.
    pub(crate) fn contains(&self, location: &str) -> bool {
        match self {
            Family::OneFile(base) => in_family(location, base),
            Family::PerTensor(names) => {
                names.contains(location) || names.contains(strip_unique_suffix(location))
            }
        }
    }

    /// The directory (relative to the model's) whose entries may belong to the family.
    pub(crate) fn subdir(&self) -> PathBuf {
        match self {
            Family::OneFile(base) => Path::new(base).parent().unwrap_or(Path::new("")).into(),
            Family::PerTensor(_) => PathBuf::new(),
        }
    }
}

/// Everything a save writes, decided before anything is written.
pub(crate) struct Plan<'a> {
    pub(crate) files: Vec<OutFile<'a>>,
    pub(crate) placements: HashMap<*const TensorProto, Placement>,
    /// (prepacked_N, value) entries per carrier tensor.
    pub(crate) blob_entries: HashMap<*const TensorProto, Vec<(String, String)>>,
    pub(crate) family: Family,
    pub(crate) externals: usize,
    pub(crate) external_bytes: u64,
    pub(crate) prepacked_blobs: usize,
    pub(crate) prepacked_bytes: u64,
}

/// What the planner needs to know besides the model and the options.
pub(crate) struct PlanInput<'a, 'b> {
    pub(crate) model: &'a ModelProto,
    pub(crate) model_name: &'b str,
    pub(crate) dir: &'b Path,
    pub(crate) opts: &'b SaveExternalOptions,
    pub(crate) blobs: Option<&'a PrepackedBlobs>,
    pub(crate) unloaded: &'a Unloaded,
    pub(crate) previous: &'b Previous,
}

/// The initializer that carries each name's blobs: the first of that name, in visitor order.
fn blob_carriers<'a>(
    model: &'a ModelProto,
    store: &'a PrepackedBlobs,
    unloaded: &'a Unloaded,
) -> Result<HashMap<*const TensorProto, &'a str>> {
    let mut carriers = HashMap::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let wanted: HashSet<&str> = store.initializers().into_iter().collect();
    let mut problem: Option<String> = None;
    walk_model(model, &mut |t, place| {
        let name = t.name().as_str().unwrap_or_default();
        if place.attribute || !wanted.contains(name) || !seen.insert(name) {
            return;
        }
        let name = wanted.get(name).copied().unwrap_or_default();
        if bytes_of(t, unloaded).is_none() {
            problem.get_or_insert_with(|| {
                format!(
                    "initializer '{name}' has pre-packed blobs but no raw_data (its data is in \
                     typed fields or missing)"
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
    match problem {
        Some(p) => Err(Error::InvalidArgument(p)),
        None => Ok(carriers),
    }
}

/// Plans a save: walks the tensors, places each externalized one (and its pre-packed blobs) in
/// its file at an aligned offset, and names the files.
pub(crate) fn plan<'a>(input: PlanInput<'a, '_>) -> Result<Plan<'a>> {
    let PlanInput {
        model,
        model_name,
        dir,
        opts,
        blobs,
        unloaded,
        previous,
    } = input;
    let blobs = blobs.filter(|b| !b.is_empty());
    let carriers = match blobs {
        Some(store) => blob_carriers(model, store, unloaded)?,
        None => HashMap::new(),
    };
    let primary = if opts.all_tensors_to_one_file {
        let location = opts
            .location
            .clone()
            .unwrap_or_else(|| format!("{model_name}.data"));
        let rel = normalize_location(save_location(&location))
            .map_err(|r| refused(&location, format!("save location: {r}")))?;
        if location_string(&rel).eq_ignore_ascii_case(model_name) {
            return Err(refused(
                &location,
                "save location: names the model file itself".into(),
            ));
        }
        Some(rel)
    } else {
        None
    };
    let mut out = Plan {
        files: Vec::new(),
        placements: HashMap::new(),
        blob_entries: HashMap::new(),
        family: match &primary {
            Some(base) => Family::OneFile(location_string(base).to_ascii_lowercase()),
            None => Family::PerTensor(HashSet::new()),
        },
        externals: 0,
        external_bytes: 0,
        prepacked_blobs: 0,
        prepacked_bytes: 0,
    };
    // Per-tensor file names, unique among themselves (and never the model's).
    let mut wanted_names = UniqueNames::default();
    wanted_names.reserve(model_name);
    let mut current: Option<usize> = None;
    let mut split_index = 0usize;
    let mut plan_error: Option<Error> = None;
    let mut placed_once: HashMap<*const TensorProto, Placement> = HashMap::new();
    walk_model(model, &mut |t, place| {
        if plan_error.is_some() {
            return;
        }
        let Some(bytes) = bytes_of(t, unloaded) else {
            return;
        };
        let len = bytes.len() as u64;
        let carried = carriers.get(&(t as *const TensorProto)).copied();
        let wanted = len >= opts.size_threshold
            && (!place.attribute || opts.convert_attribute)
            && (!place.sparse || opts.externalize_sparse);
        if carried.is_none() && !wanted {
            return;
        }
        // The tensor and its blobs stay together in one file.
        let blob_len: u64 = match (carried, blobs) {
            (Some(name), Some(store)) => store.blobs_of(name).map(|(_, b)| b.total_len()).sum(),
            _ => 0,
        };
        let files = &mut out.files;
        // Bytes that another tensor already placed in the weight file (tensors sharing one
        // range of a loaded file) are referenced there, not written again. (Keyed by the
        // bytes' address in the map type of `placements`, which keeps the library small.)
        // A tensor that carries blobs reuses bytes only in the file its blobs go to.
        let key = bytes.as_ptr().cast::<TensorProto>();
        let reused = placed_once
            .get(&key)
            .filter(|p| {
                primary.is_some()
                    && len > 0
                    && p.len == len
                    && (carried.is_none() || Some(p.file) == current)
            })
            .copied();
        if let Some(p) = reused {
            files[p.file].tensors += 1;
            out.placements.insert(t as *const _, p);
            out.externals += 1;
        }
        let (file, offset) = match (reused, &primary) {
            (Some(p), _) => (p.file, p.offset),
            (None, Some(rel)) => {
                let a = alignment_for(len, opts);
                let mut idx = match current {
                    Some(i) => i,
                    None => {
                        files.push(OutFile::new(rel.clone()));
                        files.len() - 1
                    }
                };
                let mut start = files[idx].size.next_multiple_of(a);
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
            (None, None) => {
                let safe = safe_file_name(&t.name().to_string_lossy());
                let name = wanted_names.unique(safe);
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
        if reused.is_none() {
            files[file].place(bytes, offset);
            files[file].tensors += 1;
            if primary.is_some() && len > 0 {
                placed_once.insert(key, Placement { file, offset, len });
            }
            out.placements
                .insert(t as *const _, Placement { file, offset, len });
            out.externals += 1;
            out.external_bytes += len;
        }
        // Its blobs, right after it, in key order: ONNX Runtime's `prepacked_N` entries.
        if let (Some(name), Some(store)) = (carried, blobs) {
            let mut entries = Vec::new();
            for (n, (key, blob)) in store.blobs_of(name).enumerate() {
                let mut value = key.to_string();
                for buf in &blob.buffers {
                    let b = buf.as_slice();
                    let blen = b.len() as u64;
                    // Bytes already written to this file (blobs sharing one loaded range) are
                    // referenced again, as tensors are.
                    let bkey = b.as_ptr().cast::<TensorProto>();
                    let f = &mut files[file];
                    let at = match placed_once.get(&bkey) {
                        Some(p) if blen > 0 && p.len == blen && p.file == file => p.offset,
                        _ => {
                            let at = if b.is_empty() {
                                f.size
                            } else {
                                f.size.next_multiple_of(alignment_for(blen, opts))
                            };
                            f.place(b, at);
                            if blen > 0 {
                                placed_once.insert(
                                    bkey,
                                    Placement {
                                        file,
                                        offset: at,
                                        len: blen,
                                    },
                                );
                            }
                            at
                        }
                    };
                    let checksum = if opts.checksum {
                        sha1_hex(b)
                    } else {
                        "0".to_string()
                    };
                    value.push_str(&format!("|{at};{};{checksum}", b.len()));
                    out.prepacked_bytes += b.len() as u64;
                }
                entries.push((format!("prepacked_{n}"), value));
                out.prepacked_blobs += 1;
            }
            out.blob_entries.insert(t as *const _, entries);
        }
    });
    if let Some(e) = plan_error {
        return Err(e);
    }
    if let Family::PerTensor(names) = &mut out.family {
        names.extend(out.files.iter().map(|f| f.location.to_ascii_lowercase()));
    }
    if opts.use_external_data_location {
        check_kept_references(model, unloaded, &out.family, model_name)?;
    }
    choose_first_commit_names(
        &mut out.files,
        primary.as_deref(),
        model_name,
        dir,
        previous,
    );
    Ok(out)
}

/// With `use_external_data_location`: the references kept as they are (tensors still external
/// in memory) must not name a file this save writes or may remove (its weight file family) or
/// the model itself; they must be valid relative locations.
fn check_kept_references(
    model: &ModelProto,
    unloaded: &Unloaded,
    family: &Family,
    model_name: &str,
) -> Result<()> {
    let mut problem: Option<Error> = None;
    model.visit_tensors(&mut |t| {
        if problem.is_some() || !uses_external_data(t) || bytes_of(t, unloaded).is_some() {
            return;
        }
        let tensor = t.name().to_string_lossy().into_owned();
        let location = match ExternalDataInfo::parse(t) {
            Ok(info) => info.location,
            Err(reason) => {
                problem = Some(Error::ExternalData {
                    tensor,
                    path: model_name.into(),
                    reason: format!("kept external reference: {reason}"),
                });
                return;
            }
        };
        let lower = match normalize_location(&location) {
            Ok(rel) => location_string(&rel).to_ascii_lowercase(),
            Err(r) => {
                problem = Some(refused(&location, format!("kept external reference: {r}")));
                return;
            }
        };
        if family.contains(&lower) || lower == model_name.to_ascii_lowercase() {
            problem = Some(refused(
                &location,
                format!(
                    "tensor '{tensor}' keeps this external reference \
                     (use_external_data_location), but this save writes that file: choose \
                     another location, or load the tensor's data first"
                ),
            ));
        }
    });
    problem.map_or(Ok(()), Err)
}

/// Names of the first commit: a wanted name the previous model references (or, when its
/// references are unknown, and on Windows, one that exists) is not written over before the new
/// model is committed; the file is written under an alternate name instead (the commit phase moves it to
/// the wanted name afterwards). One weight file and its split parts move together, to the first
/// alternate `k` that is free for all of them (`w.bin` -> `w_1.bin`, `w_1.bin.1`, ...).
fn choose_first_commit_names(
    files: &mut [OutFile<'_>],
    primary: Option<&Path>,
    model_name: &str,
    dir: &Path,
    previous: &Previous,
) {
    // On Windows also any existing file: one mapped (by this process or another) cannot be
    // replaced, so it is never written over in place; the second commit replaces it when it can.
    let exists = |rel: &Path| std::fs::symlink_metadata(dir.join(rel)).is_ok();
    let clash = |rel: &Path| {
        let l = location_string(rel).to_ascii_lowercase();
        previous.refs.contains_key(&l)
            || l == model_name.to_ascii_lowercase()
            || ((previous.unknown || cfg!(windows)) && exists(rel))
    };
    match primary {
        Some(base) => {
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
            if files.iter().any(|f| clash(&f.rel)) {
                let k = (1..)
                    .find(|&k| !names_of(k).iter().any(|n| clash(n)))
                    .expect("finitely many previous names");
                for (f, rel) in files.iter_mut().zip(names_of(k)) {
                    f.rename_to(rel);
                }
            }
        }
        None => {
            let mut taken = UniqueNames::default();
            taken.reserve(model_name);
            for f in files.iter() {
                taken.reserve(&f.location);
            }
            for l in previous.refs.keys() {
                taken.reserve(l);
            }
            for f in files.iter_mut() {
                if clash(&f.rel) {
                    let mut alt = taken.unique(f.location.clone());
                    while clash(Path::new(&alt)) {
                        alt = taken.unique(f.location.clone());
                    }
                    if let Ok(rel) = normalize_location(&alt) {
                        f.rename_to(rel);
                    }
                }
            }
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
        let mut taken = UniqueNames::default();
        assert_eq!(taken.unique("w".into()), "w");
        assert_eq!(taken.unique("W".into()), "W_1");
        assert_eq!(taken.unique("w".into()), "w_2");
        taken.reserve("x_1");
        assert_eq!(taken.unique("x".into()), "x");
        assert_eq!(taken.unique("x".into()), "x_2");
        assert_eq!(taken.unique("X".into()), "X_3");
    }

    /// Unique names are found in one pass: `n` equal names, or names that already hold the
    /// suffixes the next ones would take, cost O(n) candidates (a count, not a timing: retrying
    /// `_1, _2, ...` from 1 for every name would try n²/2).
    #[test]
    fn unique_names_are_linear() {
        let n = 20_000;
        let mut names = UniqueNames::default();
        for _ in 0..n {
            names.unique("w".into());
        }
        assert_eq!(names.unique("w".into()), format!("w_{n}"));
        assert!(
            names.probes <= n + 1,
            "{} candidates for {n} names",
            names.probes
        );
        let mut names = UniqueNames::default();
        for i in 1..=n {
            names.reserve(&format!("x_{i}"));
        }
        for _ in 0..n {
            names.unique("x".into());
        }
        assert!(
            names.probes <= 3 * n,
            "{} candidates for {n} names",
            names.probes
        );
    }

    #[test]
    fn absolute_locations_keep_their_file_name() {
        assert_eq!(save_location("/tmp/x/w.bin"), "w.bin");
        assert_eq!(save_location("C:\\models\\w.bin"), "w.bin");
        assert_eq!(save_location("\\\\server\\share\\w.bin"), "w.bin");
        assert_eq!(save_location("sub/w.bin"), "sub/w.bin");
        assert_eq!(save_location("../w.bin"), "../w.bin");
        assert!(normalize_location(save_location("/tmp/dir/")).is_err());
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
        let per_tensor = Family::PerTensor(["w0".to_string()].into());
        assert!(per_tensor.contains("w0") && per_tensor.contains("w0_3"));
        assert!(!per_tensor.contains("w1") && !per_tensor.contains("w0_x"));
    }

    /// The generated placed walk reaches every tensor `visit_tensors` reaches, in its order, and
    /// tells initializers from attributes and dense from sparse at every depth.
    #[test]
    fn places_of_every_tensor() {
        let mut m = ModelProto::new();
        let g = m.mutable_graph();
        let a = g.add_node().add_attribute();
        a.mutable_t().set_name("attr_t");
        let sub = a.mutable_g();
        sub.add_initializer().set_name("sub_init");
        sub.add_node()
            .add_attribute()
            .add_tensors()
            .set_name("sub_attr_tensors");
        a.mutable_sparse_tensor()
            .mutable_values()
            .set_name("attr_sparse_values");
        a.add_tensors().set_name("attr_tensors");
        a.add_graphs().add_initializer().set_name("graphs_init");
        a.add_sparse_tensors()
            .mutable_indices()
            .set_name("attr_sparse_indices");
        g.add_initializer().set_name("init");
        let s = g.add_sparse_initializer();
        s.mutable_values().set_name("sparse_init_values");
        s.mutable_indices().set_name("sparse_init_indices");
        let ti = m.add_training_info();
        ti.mutable_initialization()
            .add_initializer()
            .set_name("training_init");
        ti.mutable_algorithm()
            .add_node()
            .add_attribute()
            .mutable_t()
            .set_name("training_attr");
        let f = m.add_functions();
        f.add_attribute_proto()
            .mutable_t()
            .set_name("function_default");
        let fa = f.add_node().add_attribute();
        fa.add_sparse_tensors()
            .mutable_values()
            .set_name("function_sparse");
        let (init, attr) = (false, true);
        let expected = [
            ("attr_t", attr, false),
            ("sub_attr_tensors", attr, false),
            ("sub_init", init, false),
            ("attr_sparse_values", attr, true),
            ("attr_tensors", attr, false),
            ("graphs_init", init, false),
            ("attr_sparse_indices", attr, true),
            ("init", init, false),
            ("sparse_init_values", init, true),
            ("sparse_init_indices", init, true),
            ("training_init", init, false),
            ("training_attr", attr, false),
            ("function_default", attr, false),
            ("function_sparse", attr, true),
        ];
        let mut seen = Vec::new();
        walk_model(&m, &mut |t, p| {
            seen.push((t.name().to_string(), p.attribute, p.sparse));
        });
        let expected: Vec<_> = expected
            .iter()
            .map(|&(n, a, s)| (n.to_string(), a, s))
            .collect();
        assert_eq!(seen, expected);
        let mut visited = Vec::new();
        m.visit_tensors(&mut |t| visited.push(t.name().to_string()));
        let names: Vec<_> = seen.into_iter().map(|(n, _, _)| n).collect();
        assert_eq!(names, visited);
    }

    #[test]
    fn alignment_rules() {
        let o = SaveExternalOptions {
            align_threshold: 1 << 20,
            ..Default::default()
        };
        assert_eq!(alignment_for(1 << 20, &o), 4096);
        assert_eq!(alignment_for(100, &o), 16);
        let packed = SaveExternalOptions {
            alignment: 0,
            ..Default::default()
        };
        assert_eq!(alignment_for(1 << 30, &packed), 1);
    }
}
