//! Loading external data: resolve every external tensor's file under the path rules, check its
//! range against the file size before anything is allocated, verify checksums when asked, then
//! either copy (one arena for the whole model, filled by parallel positional reads) or, with
//! `no_copy`, map each file once and lend ranges of it under one shared owner per file.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use super::checksum::{matches, sha1_hex, sha1_of_file};
use super::info::{
    DATA_LOCATION_DEFAULT, ExternalDataInfo, PrepackedRange, prepacked_blobs_of, split_part_of,
    uses_external_data,
};
use super::options::LoadOptions;
use super::paths::{OpenError, SafeFile, model_dir, normalize_location, open_beneath};
use super::prepacked::{PrepackedBlob, PrepackedBlobs};
use crate::bytes::{ByteSpan, Owner};
use crate::crypto::{EncryptedFile, EncryptionFormat, KeyCache};
use crate::error::{Error, Result};
use crate::mem::ReusableMap;
use crate::proto::{DataType, ModelProto, TensorProto};
use crate::storage::read_exact_at;

/// One external data file that a load or check opened.
#[derive(Clone)]
pub struct ExternalFileInfo {
    /// The location as normalised (or the override path).
    pub location: String,
    /// The file's path (base directory joined with the location).
    pub path: PathBuf,
    /// Size in bytes when it was opened (of the plaintext, for an encrypted file).
    pub size: u64,
    /// An encrypted (ONNXCRYS) file, read through its passphrase.
    pub encrypted: bool,
    /// SHA-1 (hex) when it was computed (checksum verification).
    pub sha1: Option<String>,
    /// The owner token of the file's memory map (no-copy loads only): every tensor borrowing
    /// from this file holds a clone of it.
    pub owner: Option<Owner>,
}

impl std::fmt::Debug for ExternalFileInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalFileInfo")
            .field("location", &self.location)
            .field("path", &self.path)
            .field("size", &self.size)
            .field("encrypted", &self.encrypted)
            .field("sha1", &self.sha1)
            .field("mapped", &self.owner.is_some())
            .finish()
    }
}

/// The `prepacked*` entries of one tensor (ONNX Runtime pre-packed blobs), kept for callers that
/// use them: the offsets are absolute in `files[file]`.
#[derive(Debug, Clone)]
pub struct PrepackedEntries {
    /// The tensor's name.
    pub tensor: String,
    /// Index in [`ExternalLoadReport::files`].
    pub file: usize,
    /// The entries as recorded (`key`, `value`), validated.
    pub entries: Vec<(String, String)>,
}

/// What [`load_external_data_for_model`] did.
#[derive(Debug, Clone, Default)]
pub struct ExternalLoadReport {
    /// Every file opened, once each.
    pub files: Vec<ExternalFileInfo>,
    /// Number of tensors loaded.
    pub tensors: usize,
    /// Total bytes of those tensors.
    pub bytes: u64,
    /// Tensors that were lent from a memory map (no-copy loads).
    pub borrowed: usize,
    /// `prepacked*` entries found (dropped from the tensors, which become inline).
    pub prepacked: Vec<PrepackedEntries>,
    /// The pre-packed blobs those entries describe, keyed by (tensor name, blob key): with
    /// `no_copy` each buffer borrows from the weight file's memory map and holds the SAME owner
    /// token as the tensors of that file (`files[i].owner`); in copy mode each buffer is a
    /// private copy. When two tensors of one name carry the same key, the first one (visitor
    /// order) wins, as in ONNX Runtime's shared container.
    pub blobs: PrepackedBlobs,
}

/// What [`check_external_data`] found.
#[derive(Debug, Default)]
pub struct ExternalCheckReport {
    /// Every file opened, once each (with its SHA-1 when checksums were verified).
    pub files: Vec<ExternalFileInfo>,
    /// External tensors seen.
    pub tensors: usize,
    /// Total bytes they reference.
    pub bytes: u64,
    /// `checksum` entries verified.
    pub checksums_verified: usize,
    /// Every problem found (empty: all references resolvable, in bounds, sized right, and
    /// matching their checksums).
    pub problems: Vec<Error>,
}

/// One external tensor, resolved.
struct Ref {
    /// Position among all tensors, in visitor order.
    index: usize,
    tensor: String,
    file: usize,
    offset: u64,
    len: u64,
    checksum: Option<String>,
    prepacked: Vec<(String, String)>,
    /// The pre-packed blobs of `prepacked`, merged by key, every range checked against the file.
    blobs: Vec<(String, Vec<PrepackedRange>)>,
}

struct OpenedFile {
    info: ExternalFileInfo,
    /// Kept open for the first [`KEEP_OPEN`] files; later ones (models with one file per tensor
    /// can have thousands) are closed after their checks and opened again, under the same rules,
    /// when their bytes are needed, so a load never holds more than a bounded number of
    /// descriptors.
    file: Option<File>,
    /// An encrypted file kept open (the first [`KEEP_OPEN`] files), authenticated.
    enc: Option<EncryptedFile>,
    /// Chunk size of an encrypted file (reads are cut at its multiples).
    chunk_size: Option<u64>,
    reopen: Reopen,
}

/// Reads plaintext ranges of one file: positional reads, or authenticated decryption.
enum Reader<'a> {
    Plain(Handle<'a>),
    KeptEnc(&'a EncryptedFile),
    Enc(Box<EncryptedFile>),
}

impl Reader<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64, tensor: &str, path: &Path) -> Result<()> {
        match self {
            Reader::Plain(f) => read_exact_at(f, buf, offset)
                .map_err(|e| ext_err(tensor, path, format!("read failed: {e}"))),
            Reader::KeptEnc(f) => f
                .read_exact_at(offset, buf)
                .map_err(|e| crypto_err(e, path)),
            Reader::Enc(f) => f
                .read_exact_at(offset, buf)
                .map_err(|e| crypto_err(e, path)),
        }
    }
}

/// A decryption error of an external-data file, naming the file.
fn crypto_err(e: Error, path: &Path) -> Error {
    match e {
        Error::Crypto(m) => Error::Crypto(format!("external data file {}: {m}", path.display())),
        Error::Authentication(m) => {
            Error::Authentication(format!("external data file {}: {m}", path.display()))
        }
        other => other,
    }
}

/// The encryption format whose magic starts `file`, if any.
fn sniff(file: &File, len: u64) -> std::io::Result<Option<EncryptionFormat>> {
    if len < 8 {
        return Ok(None);
    }
    let mut magic = [0u8; 8];
    read_exact_at(file, &mut magic, 0)?;
    Ok(EncryptionFormat::ALL
        .into_iter()
        .find(|f| f.magic() == &magic))
}

/// Opens `file` as encrypted external data when it starts with an encryption magic: `Ok(None)`
/// for a plaintext file, the authenticated ONNXCRYS file otherwise; an error for an encrypted
/// file without a passphrase, the wrong one, a truncated or modified file, or a one-shot format
/// (ONNXCRY1/2/3, which cannot be read by range).
fn open_encrypted(
    file: &File,
    len: u64,
    path: &Path,
    tensor: &str,
    keys: Option<&KeyCache>,
) -> Result<Option<EncryptedFile>> {
    let format =
        sniff(file, len).map_err(|e| ext_err(tensor, path, format!("cannot read: {e}")))?;
    match (format, keys) {
        (None, _) => Ok(None),
        (Some(EncryptionFormat::Chunked), None) => Err(ext_err(
            tensor,
            path,
            "the file is encrypted (ONNXCRYS) and no passphrase was given \
             (LoadOptions::external_data_key)",
        )),
        (Some(EncryptionFormat::Chunked), Some(keys)) => {
            let dup = file
                .try_clone()
                .map_err(|e| ext_err(tensor, path, format!("cannot open: {e}")))?;
            EncryptedFile::from_file(dup, len, path, keys)
                .map(Some)
                .map_err(|e| crypto_err(e, path))
        }
        (Some(f), _) => Err(Error::Crypto(format!(
            "external data file {}: {f} data cannot be read by range; encrypt external data \
             with the chunked format (ONNXCRYS)",
            path.display()
        ))),
    }
}

/// A file kept open by the plan, or opened again for a while.
enum Handle<'a> {
    Kept(&'a File),
    Reopened(File),
}

impl std::ops::Deref for Handle<'_> {
    type Target = File;
    fn deref(&self) -> &File {
        match self {
            Handle::Kept(f) => f,
            Handle::Reopened(f) => f,
        }
    }
}

/// Files kept open between planning and reading.
const KEEP_OPEN: usize = 64;

/// How to open a file again.
enum Reopen {
    Beneath { dir: PathBuf, rel: PathBuf },
    Trusted(PathBuf),
}

impl OpenedFile {
    /// The open file, or the file opened again under the same rules.
    fn handle(&self) -> Result<Handle<'_>> {
        if let Some(f) = &self.file {
            return Ok(Handle::Kept(f));
        }
        self.reopen().map(|f| Handle::Reopened(f.file))
    }

    /// The reader of the file's (plaintext) bytes.
    fn reader(&self, keys: Option<&KeyCache>) -> Result<Reader<'_>> {
        if let Some(e) = &self.enc {
            return Ok(Reader::KeptEnc(e));
        }
        if !self.info.encrypted {
            return self.handle().map(Reader::Plain);
        }
        let f = self.reopen()?;
        match open_encrypted(&f.file, f.len, &self.info.path, "", keys)? {
            Some(e) if e.len() == self.info.size => Ok(Reader::Enc(Box::new(e))),
            _ => Err(ext_err(
                "",
                &self.info.path,
                "the encrypted file changed while loading",
            )),
        }
    }

    /// Opens the file again, under the same rules.
    fn reopen(&self) -> Result<SafeFile> {
        let opened = match &self.reopen {
            Reopen::Beneath { dir, rel } => open_beneath(dir, rel),
            Reopen::Trusted(p) => open_trusted(p),
        };
        match opened {
            Ok(f) => Ok(f),
            Err(OpenError::Refused(reason)) => Err(Error::PathRefused {
                path: self.info.path.clone(),
                reason: format!("opened again: {reason}"),
            }),
            Err(OpenError::Io(e)) => Err(ext_err("", &self.info.path, format!("cannot open: {e}"))),
        }
    }
}

#[derive(Default)]
struct Plan {
    files: Vec<OpenedFile>,
    refs: Vec<Ref>,
    /// Keys of encrypted files (from the passphrase of the options).
    keys: Option<KeyCache>,
}

/// An external tensor seen by the visitor: (index, name, parsed entries).
type Pending = (usize, String, std::result::Result<ExternalDataInfo, String>);

/// Where problems go: `load` stops at the first, `check` collects them all.
type Sink<'a> = &'a mut dyn FnMut(Error) -> Result<()>;

fn ext_err(tensor: &str, path: &Path, reason: impl Into<String>) -> Error {
    Error::ExternalData {
        tensor: tensor.to_string(),
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Bytes that `dims` × `data_type` need in `raw_data`, when both are known.
pub(crate) fn expected_bytes(t: &TensorProto) -> Option<u64> {
    let dt = DataType::from_i32(t.data_type?)?;
    let bits = u64::from(dt.bits());
    if bits == 0 {
        return None;
    }
    let mut n: u64 = 1;
    for &d in &t.dims {
        n = n.checked_mul(u64::try_from(d).ok()?)?;
    }
    n.checked_mul(bits).map(|b| b.div_ceil(8))
}

/// How locations map to files: relative to `dir`, or the caller's override for the primary
/// location and its split parts.
struct Resolver<'a> {
    dir: &'a Path,
    override_path: Option<&'a Path>,
    primary: Option<PathBuf>,
    /// (override path?, path) → file index (`None`: failed, already reported).
    by_key: HashMap<(bool, PathBuf), Option<usize>>,
}

impl Resolver<'_> {
    /// The file index of `location` (opening it the first time), `None` after a reported
    /// failure.
    fn file_of(
        &mut self,
        plan: &mut Plan,
        tensor: &str,
        location: &str,
        sink: Sink<'_>,
    ) -> Result<Option<usize>> {
        let rel = match normalize_location(location) {
            Ok(r) => r,
            Err(reason) => {
                sink(Error::PathRefused {
                    path: location.into(),
                    reason: format!("location of tensor '{tensor}': {reason}"),
                })?;
                return Ok(None);
            }
        };
        // The caller's override replaces the primary location (the first one seen) and its
        // split parts `PRIMARY.N`.
        let mut target: Option<PathBuf> = None;
        if let Some(o) = self.override_path {
            let primary = self.primary.get_or_insert_with(|| rel.clone()).clone();
            if rel == primary {
                target = Some(o.to_path_buf());
            } else if let Some((base, n)) = split_part_of(&rel.to_string_lossy())
                && Path::new(base) == primary
            {
                let mut p = o.as_os_str().to_os_string();
                p.push(format!(".{n}"));
                target = Some(PathBuf::from(p));
            }
        }
        let key = (
            target.is_some(),
            target.clone().unwrap_or_else(|| rel.clone()),
        );
        if let Some(idx) = self.by_key.get(&key) {
            return Ok(*idx);
        }
        let (opened, path) = match &target {
            Some(p) => (open_trusted(p), p.clone()),
            None => (open_beneath(self.dir, &rel), self.dir.join(&rel)),
        };
        let idx = match opened {
            Ok(SafeFile { file, len }) => {
                let enc = match open_encrypted(&file, len, &path, tensor, plan.keys.as_ref()) {
                    Ok(e) => e,
                    Err(e) => {
                        sink(e)?;
                        self.by_key.insert(key, None);
                        return Ok(None);
                    }
                };
                let keep = plan.files.len() < KEEP_OPEN;
                let reopen = match &target {
                    Some(p) => Reopen::Trusted(p.clone()),
                    None => Reopen::Beneath {
                        dir: self.dir.to_path_buf(),
                        rel: rel.clone(),
                    },
                };
                plan.files.push(OpenedFile {
                    info: ExternalFileInfo {
                        location: key.1.to_string_lossy().into_owned(),
                        path,
                        size: enc.as_ref().map_or(len, EncryptedFile::len),
                        encrypted: enc.is_some(),
                        sha1: None,
                        owner: None,
                    },
                    file: (keep && enc.is_none()).then_some(file),
                    chunk_size: enc.as_ref().map(|e| e.chunk_size() as u64),
                    enc: enc.filter(|_| keep),
                    reopen,
                });
                Some(plan.files.len() - 1)
            }
            Err(OpenError::Refused(reason)) => {
                sink(Error::PathRefused {
                    path: location.into(),
                    reason: format!("location of tensor '{tensor}': {reason}"),
                })?;
                None
            }
            Err(OpenError::Io(e)) => {
                sink(ext_err(tensor, &path, format!("cannot open: {e}")))?;
                None
            }
        };
        self.by_key.insert(key, idx);
        Ok(idx)
    }
}

/// Opens a caller-given path (trusted: links are followed), still requiring a regular file.
fn open_trusted(path: &Path) -> Result<SafeFile, OpenError> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    let file = o.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(OpenError::Refused("not a regular file".into()));
    }
    Ok(SafeFile {
        len: meta.len(),
        file,
    })
}

/// Resolves every external tensor of `model`: file (path rules), range (bounds, before any
/// allocation), limits; problems go to `sink`.
fn plan(
    model: &ModelProto,
    dir: &Path,
    opts: &LoadOptions,
    only_unloaded: bool,
    sink: Sink<'_>,
) -> Result<Plan> {
    // (index, name, entries) of every external tensor, in visitor order.
    let mut externals: Vec<Pending> = Vec::new();
    let mut index = 0usize;
    model.visit_tensors(&mut |t| {
        if uses_external_data(t) && !(only_unloaded && t.raw_data.is_some()) {
            let name = t.name().to_string_lossy().into_owned();
            externals.push((index, name, ExternalDataInfo::parse(t)));
        }
        index += 1;
    });
    let mut plan = Plan {
        keys: opts
            .external_data_key
            .as_ref()
            .map(|k| KeyCache::new(k.as_bytes())),
        ..Plan::default()
    };
    let mut resolver = Resolver {
        dir,
        override_path: opts.external_data_location.as_deref(),
        primary: None,
        by_key: HashMap::new(),
    };
    for (index, name, info) in externals {
        let name = name.as_str();
        let info = match info {
            Ok(i) => i,
            Err(reason) => {
                sink(ext_err(name, dir, reason))?;
                continue;
            }
        };
        let Some(file) = resolver.file_of(&mut plan, name, &info.location, sink)? else {
            continue;
        };
        let f = &plan.files[file].info;
        let size = f.size;
        if info.offset > size {
            sink(ext_err(
                name,
                &f.path,
                format!(
                    "offset {} is past the end of the file ({size} bytes)",
                    info.offset
                ),
            ))?;
            continue;
        }
        let len = info.length.unwrap_or(size - info.offset);
        if info.offset.checked_add(len).is_none_or(|end| end > size) {
            sink(ext_err(
                name,
                &f.path,
                format!(
                    "offset {} + length {len} runs past the end of the file ({size} bytes)",
                    info.offset
                ),
            ))?;
            continue;
        }
        if usize::try_from(len).is_err() {
            sink(ext_err(
                name,
                &f.path,
                format!("{len} bytes do not fit in memory"),
            ))?;
            continue;
        }
        if opts.parse.max_tensor_size_bytes > 0 && len > opts.parse.max_tensor_size_bytes {
            sink(Error::LimitExceeded(format!(
                "external data of tensor '{name}' ({len} bytes in {}) exceeds \
                 max_tensor_size_bytes {}",
                f.path.display(),
                opts.parse.max_tensor_size_bytes
            )))?;
            continue;
        }
        let blobs = match prepacked_blobs_of(&info.prepacked) {
            Ok(b) => b,
            Err(reason) => {
                sink(ext_err(name, &f.path, reason))?;
                continue;
            }
        };
        if let Some(reason) = blobs
            .iter()
            .flat_map(|(key, ranges)| ranges.iter().map(move |r| (key, r)))
            .find_map(|(key, r)| blob_range_problem(r, size, opts.parse.max_tensor_size_bytes, key))
        {
            sink(ext_err(name, &f.path, reason))?;
            continue;
        }
        plan.refs.push(Ref {
            index,
            tensor: name.to_string(),
            file,
            offset: info.offset,
            len,
            checksum: info.checksum,
            prepacked: info.prepacked,
            blobs,
        });
    }
    Ok(plan)
}

/// Why the buffer `r` of pre-packed blob `key` cannot be read from a file of `size` bytes, if it
/// cannot: a negative offset, a range past the end (overflow-checked), or a length over
/// `max_len` (when not 0) or over the address space.
fn blob_range_problem(r: &PrepackedRange, size: u64, max_len: u64, key: &str) -> Option<String> {
    let Ok(offset) = u64::try_from(r.offset) else {
        return Some(format!(
            "pre-packed blob {key:?}: offset {} is negative",
            r.offset
        ));
    };
    if offset.checked_add(r.length).is_none_or(|end| end > size) {
        return Some(format!(
            "pre-packed blob {key:?}: offset {offset} + length {} runs past the end of the file \
             ({size} bytes)",
            r.length
        ));
    }
    if usize::try_from(r.length).is_err() || (max_len > 0 && r.length > max_len) {
        return Some(format!(
            "pre-packed blob {key:?}: {} bytes exceed the size limit",
            r.length
        ));
    }
    None
}

/// Reads (copy mode) or lends from the maps (no-copy: `maps[file]`) every pre-packed blob of
/// the plan, verifying SHA-1 checksum fields when `verify` (a field of 40 hex digits; ONNX
/// Runtime's `0` means none).
fn load_blobs(
    plan: &Plan,
    maps: Option<&[Option<Arc<WeightMap>>]>,
    verify: bool,
) -> Result<PrepackedBlobs> {
    let mut store = PrepackedBlobs::new();
    // Each distinct (file, offset, length) is read (or decrypted) and verified once and shared
    // by every buffer that names it: a small model cannot make a load copy a range many times.
    let mut read: HashMap<(usize, u64, usize), (ByteSpan, Option<String>)> = HashMap::new();
    for r in plan.refs.iter().filter(|r| !r.blobs.is_empty()) {
        let f = &plan.files[r.file];
        for (key, ranges) in &r.blobs {
            if store.get(&r.tensor, key).is_some() {
                continue;
            }
            let mut buffers = Vec::with_capacity(ranges.len());
            for range in ranges {
                // Checked in `plan`: non-negative, inside the file, fits in memory.
                let (start, len) = (range.offset as u64, range.length as usize);
                if let Some((span, digest)) = read.get_mut(&(r.file, start, len)) {
                    verify_blob(r, &f.info.path, key, range, span, digest, verify)?;
                    buffers.push(span.clone());
                    continue;
                }
                let span = match maps.and_then(|m| m[r.file].clone()) {
                    Some(map) => {
                        let end = start as usize + len;
                        if end > (*map).as_ref().len() {
                            return Err(ext_err(
                                &r.tensor,
                                &f.info.path,
                                "the file shrank while loading",
                            ));
                        }
                        // Zero-length buffers too: every buffer carries the file's token.
                        ByteSpan::from_shared(map, start as usize..end)
                    }
                    None => {
                        // Copy mode, or a file with no map (encrypted: decrypted here).
                        let mut v = crate::error::try_vec_with_capacity(len, "a pre-packed blob")?;
                        v.resize(len, 0);
                        if len > 0 {
                            f.reader(plan.keys.as_ref())?.read_at(
                                &mut v,
                                start,
                                &r.tensor,
                                &f.info.path,
                            )?;
                        }
                        let mut span = ByteSpan::from_vec(v);
                        let _ = span.share();
                        span
                    }
                };
                let mut digest = None;
                verify_blob(r, &f.info.path, key, range, &span, &mut digest, verify)?;
                buffers.push(span.clone());
                read.insert((r.file, start, len), (span, digest));
            }
            store.insert_first(&r.tensor, key, PrepackedBlob { buffers });
        }
    }
    Ok(store)
}

/// With `verify`, checks the recorded SHA-1 of one pre-packed buffer (entries without one, e.g.
/// `0`, are not checked); `digest` is the bytes' SHA-1 once computed (each range is hashed once).
fn verify_blob(
    r: &Ref,
    path: &Path,
    key: &str,
    range: &PrepackedRange,
    span: &ByteSpan,
    digest: &mut Option<String>,
    verify: bool,
) -> Result<()> {
    if !verify || !is_sha1_hex(&range.checksum) {
        return Ok(());
    }
    let digest = digest.get_or_insert_with(|| sha1_hex(span.as_slice()));
    if matches(&range.checksum, digest) {
        return Ok(());
    }
    Err(ext_err(
        &r.tensor,
        path,
        format!(
            "pre-packed blob {key:?}: checksum mismatch at offset {}: recorded SHA-1 {}, the \
             bytes have {digest}",
            range.offset, range.checksum
        ),
    ))
}

/// True for 40 hexadecimal digits (a SHA-1).
fn is_sha1_hex(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Verifies the `checksum` entries (SHA-1 of the whole file), each file hashed once; returns the
/// number of entries verified.
fn verify_checksums(
    plan: &mut Plan,
    sink: Sink<'_>,
    progress: Option<&(dyn Fn(u64) + Sync)>,
) -> Result<usize> {
    let mut verified = 0;
    let mut digests: HashMap<usize, Option<String>> = HashMap::new();
    for r in &plan.refs {
        let Some(recorded) = &r.checksum else {
            continue;
        };
        let f = &mut plan.files[r.file];
        let digest = match digests.get(&r.file) {
            Some(d) => d.clone(),
            None => {
                let hashed = if f.info.encrypted {
                    sha1_of_plaintext(f, plan.keys.as_ref(), progress)
                } else {
                    f.handle().and_then(|h| {
                        sha1_of_file(&h, f.info.size, progress).map_err(|e| {
                            ext_err(&r.tensor, &f.info.path, format!("cannot read: {e}"))
                        })
                    })
                };
                let d = match hashed {
                    Ok(d) => Some(d),
                    Err(e) => {
                        sink(e)?;
                        None
                    }
                };
                f.info.sha1 = d.clone();
                digests.insert(r.file, d.clone());
                d
            }
        };
        let Some(digest) = digest else { continue };
        if matches(recorded, &digest) {
            verified += 1;
        } else {
            sink(ext_err(
                &r.tensor,
                &f.info.path,
                format!("checksum mismatch: recorded SHA-1 {recorded}, the file has {digest}"),
            ))?;
        }
    }
    Ok(verified)
}

/// SHA-1 of the plaintext of an encrypted file (decrypted one chunk at a time).
fn sha1_of_plaintext(
    f: &OpenedFile,
    keys: Option<&KeyCache>,
    progress: Option<&(dyn Fn(u64) + Sync)>,
) -> Result<String> {
    let reader = f.reader(keys)?;
    let mut h = super::checksum::Sha1Hasher::new();
    let mut buf = zeroize::Zeroizing::new(vec![0u8; 1 << 20]);
    let mut pos = 0u64;
    while pos < f.info.size {
        let n = (f.info.size - pos).min(buf.len() as u64) as usize;
        reader.read_at(&mut buf[..n], pos, "", &f.info.path)?;
        h.update(&buf[..n]);
        pos += n as u64;
        if let Some(p) = progress {
            p(n as u64);
        }
    }
    Ok(h.finish_hex())
}

/// The copy-mode destination of every tensor: one anonymous region (huge pages where the kernel
/// allows) freed when the last tensor range is dropped; zeroed first when it holds decrypted
/// data.
struct LoadArena {
    map: ReusableMap,
    secret: bool,
}

impl Drop for LoadArena {
    fn drop(&mut self) {
        if self.secret {
            use zeroize::Zeroize;
            self.map[..].zeroize();
        }
    }
}

/// A read-only map of one weight file: the owner token of every tensor borrowing from it.
struct WeightMap {
    map: Option<Mmap>,
}

impl AsRef<[u8]> for WeightMap {
    fn as_ref(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

const PIECE: usize = 8 << 20;

/// One read of a copy-mode load: (index in `Plan::refs`, file offset, destination).
type Task<'a> = (usize, u64, &'a mut [u8]);

/// Where a read of up to [`PIECE`] bytes at `off` (ending at most at `end`) should stop. Reads
/// of encrypted files stop at chunk boundaries, so each chunk is decrypted once (except those
/// shared by two tensors).
fn piece_end(off: u64, end: u64, chunk: Option<u64>) -> u64 {
    match chunk {
        None => end.min(off + PIECE as u64),
        Some(cs) => {
            let step = cs * (PIECE as u64 / cs).max(1);
            end.min((off / step + 1) * step)
        }
    }
}

/// Copy mode: every tensor gets an exclusive range of one arena, filled by positional reads
/// (in parallel on `opts.parse.num_threads` threads).
fn fill_copy(plan: &Plan, which: &[usize], opts: &LoadOptions) -> Result<Vec<ByteSpan>> {
    // (each tensor at the payload alignment, at least a cache line)
    let (threads, align) = (opts.parse.threads(), opts.parse.payload_alignment().max(64));
    let refs: Vec<&Ref> = which.iter().map(|&i| &plan.refs[i]).collect();
    let mut starts = Vec::with_capacity(refs.len());
    let mut total = 0u64;
    for r in &refs {
        let start = total
            .checked_next_multiple_of(align.max(1))
            .ok_or_else(too_big)?;
        starts.push(start);
        total = start.checked_add(r.len).ok_or_else(too_big)?;
    }
    let total = usize::try_from(total).map_err(|_| too_big())?;
    if total == 0 {
        return Ok(refs.iter().map(|_| ByteSpan::new()).collect());
    }
    let secret = refs.iter().any(|r| plan.files[r.file].info.encrypted);
    let mut map =
        ReusableMap::new(total).map_err(|_| Error::alloc_failed(total, "the external data"))?;
    {
        // Split the arena into (ref, file offset, destination piece) tasks.
        let mut tasks: Vec<Task<'_>> = Vec::new();
        let mut rest: &mut [u8] = &mut map;
        let mut consumed = 0usize;
        for (i, r) in refs.iter().enumerate() {
            let start = starts[i] as usize;
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(start - consumed);
            let (mut dst, tail) = tail.split_at_mut(r.len as usize);
            rest = tail;
            consumed = start + r.len as usize;
            let f = &plan.files[r.file];
            let chunk = f.chunk_size;
            let mut off = r.offset;
            while !dst.is_empty() {
                let n = (piece_end(off, r.offset + r.len, chunk) - off) as usize;
                let (piece, more) = std::mem::take(&mut dst).split_at_mut(n);
                tasks.push((i, off, piece));
                off += n as u64;
                dst = more;
            }
        }
        // Pieces of files kept open are read in any order; the others are grouped per file
        // (each opened again once, at most one per thread at a time).
        let kept = |f: &OpenedFile| f.file.is_some() || f.enc.is_some();
        let (mut open, closed): (Vec<_>, Vec<_>) = tasks
            .into_iter()
            .partition(|(i, _, _)| kept(&plan.files[refs[*i].file]));
        let mut groups: HashMap<usize, Vec<Task<'_>>> = HashMap::new();
        for t in closed {
            groups.entry(refs[t.0].file).or_default().push(t);
        }
        let mut groups: Vec<_> = groups.into_iter().collect();
        let keys = plan.keys.as_ref();
        let read = |reader: &Reader<'_>, (i, off, piece): &mut Task<'_>| -> Result<()> {
            let r = refs[*i];
            reader.read_at(piece, *off, &r.tensor, &plan.files[r.file].info.path)?;
            opts.report(piece.len() as u64);
            Ok(())
        };
        let read_open = |t: &mut Task<'_>| -> Result<()> {
            let reader = plan.files[refs[t.0].file].reader(keys)?;
            read(&reader, t)
        };
        let read_group = |(file, tasks): &mut (usize, Vec<Task<'_>>)| -> Result<()> {
            let reader = plan.files[*file].reader(keys)?;
            tasks.iter_mut().try_for_each(|t| read(&reader, t))
        };
        let pool = if threads > 1 && open.len() + groups.len() > 1 {
            crate::storage::thread_pool(threads)
        } else {
            None
        };
        match pool {
            Some(pool) => {
                use crate::storage::par::prelude::*;
                pool.install(|| {
                    open.par_iter_mut().try_for_each(read_open)?;
                    groups.par_iter_mut().try_for_each(read_group)
                })?
            }
            None => {
                open.iter_mut().try_for_each(read_open)?;
                groups.iter_mut().try_for_each(read_group)?
            }
        }
    }
    let base = map.as_mut_ptr();
    let owner: Owner = Arc::new(LoadArena { map, secret });
    Ok(refs
        .iter()
        .zip(&starts)
        .map(|(r, &start)| {
            // SAFETY: `start..start+len` lies inside the arena (sizes computed above), the
            // ranges are pairwise disjoint, the arena is writable and kept alive by `owner`, and
            // no other reference to it remains (the task slices are gone).
            unsafe {
                ByteSpan::from_arena_range(base.add(start as usize), r.len as usize, owner.clone())
            }
        })
        .collect())
}

/// For each ref, the index (in `refs`) of the first ref naming the same (file, offset, length):
/// returns the indices of those first refs, in order, and for every ref the position of its
/// first ref in that list. (Plain loops and the map type of `check_external_data`: this code
/// is in the minimal library, which has a size budget.)
fn first_of_each_range(refs: &[Ref]) -> (Vec<usize>, Vec<usize>) {
    // Keyed by a hash of the range; a collision of two different ranges only means that they
    // are not shared.
    let mut seen: HashMap<usize, &Ref> = HashMap::new();
    // `Ref::index` of each first ref (increasing, as refs are in visitor order).
    let mut first_index = Vec::new();
    let mut firsts = Vec::new();
    let mut dup_of = Vec::with_capacity(refs.len());
    for (i, r) in refs.iter().enumerate() {
        let mut h = (r.file as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ r.offset;
        h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ r.len;
        let k = h as usize;
        match seen.get(&k) {
            Some(first) if (first.file, first.offset, first.len) == (r.file, r.offset, r.len) => {
                let at = first_index.binary_search(&first.index).unwrap_or_default();
                dup_of.push(at);
                continue;
            }
            Some(_) => {}
            None => {
                seen.insert(k, r);
            }
        }
        dup_of.push(firsts.len());
        firsts.push(i);
        first_index.push(r.index);
    }
    (firsts, dup_of)
}

/// One span per ref from the spans of the distinct ranges. When some range is named more than
/// once, every span becomes shared (read-only: a write to a tensor copies its bytes first) and
/// the tensors naming one range get views of one span: never a second copy.
fn spread(mut unique: Vec<ByteSpan>, dup_of: &[usize]) -> Vec<ByteSpan> {
    if unique.len() == dup_of.len() {
        return unique; // (no range named twice)
    }
    for span in &mut unique {
        span.share();
    }
    let mut out = Vec::with_capacity(dup_of.len());
    for &u in dup_of {
        out.push(unique[u].clone());
    }
    out
}

fn too_big() -> Error {
    Error::LimitExceeded("external data does not fit in memory".into())
}

/// No-copy mode: each file is mapped once; tensors of at least `threshold` bytes whose offset
/// suits their element type borrow from the map (holding its owner), others are copied.
type Maps = Vec<Option<Arc<WeightMap>>>;

fn fill_no_copy(
    plan: &mut Plan,
    which: &[usize],
    opts: &LoadOptions,
) -> Result<(Vec<ByteSpan>, usize, Maps)> {
    let (threshold, align) = (
        opts.parse.raw_data_threshold,
        opts.parse.payload_alignment(),
    );
    let mut pool =
        crate::mem::PayloadPool::new(usize::try_from(align.max(16)).unwrap_or(64), 64 << 10);
    let mut maps: Maps = vec![None; plan.files.len()];
    let mut out = Vec::with_capacity(which.len());
    let mut borrowed = 0;
    for r in which.iter().map(|&i| &plan.refs[i]) {
        let f = &mut plan.files[r.file];
        let map = match &maps[r.file] {
            Some(m) => m.clone(),
            None => {
                let m = if f.info.size == 0 {
                    WeightMap { map: None }
                } else {
                    // SAFETY: a read-only, private mapping of a file this library never writes
                    // in place (saves write a temporary file and rename it). Another process
                    // truncating the file while it is mapped is outside the contract (SIGBUS),
                    // as for every mmap-based loader; documented in docs/external-data.md.
                    let handle = f.handle()?;
                    let map = unsafe { Mmap::map(&*handle) }.map_err(|e| {
                        ext_err(&r.tensor, &f.info.path, format!("cannot map: {e}"))
                    })?;
                    WeightMap { map: Some(map) }
                };
                let m = Arc::new(m);
                f.info.owner = Some(m.clone() as Owner);
                maps[r.file] = Some(m.clone());
                m
            }
        };
        let (start, end) = (r.offset as usize, (r.offset + r.len) as usize);
        let bytes = (*map).as_ref();
        if end > bytes.len() {
            return Err(ext_err(
                &r.tensor,
                &f.info.path,
                format!("the file shrank to {} bytes while loading", bytes.len()),
            ));
        }
        let large = r.len >= threshold;
        if large && (bytes[start..].as_ptr() as u64) % align == 0 {
            out.push(ByteSpan::from_shared(map.clone(), start..end));
            borrowed += 1;
        } else {
            // Small, or not aligned in the file: an aligned copy (counted as realigned when
            // it would have been borrowed).
            let copy = pool
                .copy(&bytes[start..end], large && r.len > 0)
                .ok_or_else(|| Error::alloc_failed(r.len, "a tensor payload"))?;
            out.push(copy);
        }
        opts.report(r.len);
    }
    Ok((out, borrowed, maps))
}

/// The bytes of every planned tensor (in `plan.refs` order): copy mode, or no-copy mode with
/// the tensors of encrypted files decrypted into memory (copy mode for those: a map of an
/// encrypted file would be ciphertext).
///
/// Also returns, in no-copy mode, the map of each plaintext file that has one.
fn fill(plan: &mut Plan, opts: &LoadOptions) -> Result<(Vec<ByteSpan>, usize, Option<Maps>)> {
    // Tensors that name the same range of the same file share one copy (or view) of it, so a
    // small model cannot make a load copy or decrypt one range many times over.
    let (firsts, dup_of) = first_of_each_range(&plan.refs);
    if !opts.parse.no_copy {
        let unique = fill_copy(plan, &firsts, opts)?;
        return Ok((spread(unique, &dup_of), 0, None));
    }
    // (positions in `firsts`, and the refs there, of the plaintext and the encrypted ranges)
    let (mut plain, mut plain_refs, mut enc, mut enc_refs) = (vec![], vec![], vec![], vec![]);
    for (u, &i) in firsts.iter().enumerate() {
        if plan.files[plan.refs[i].file].info.encrypted {
            enc.push(u);
            enc_refs.push(i);
        } else {
            plain.push(u);
            plain_refs.push(i);
        }
    }
    let (plain_spans, mut borrowed, maps) = fill_no_copy(plan, &plain_refs, opts)?;
    let enc_spans = fill_copy(plan, &enc_refs, opts)?;
    let mut unique: Vec<ByteSpan> = Vec::with_capacity(firsts.len());
    unique.resize_with(firsts.len(), ByteSpan::default);
    for (u, s) in plain
        .into_iter()
        .zip(plain_spans)
        .chain(enc.into_iter().zip(enc_spans))
    {
        unique[u] = s;
    }
    // (a tensor sharing a borrowed range borrows too)
    for (i, &u) in dup_of.iter().enumerate() {
        if firsts[u] != i && unique[u].is_borrowed() {
            borrowed += 1;
        }
    }
    Ok((spread(unique, &dup_of), borrowed, Some(maps)))
}

/// Loads the external data of every tensor of `model` (initializers, sparse initializers,
/// attribute tensors, subgraphs, functions, training graphs) from files relative to `base_dir`
/// (or `opts.external_data_location` for the primary file), like onnx's
/// `load_external_data_for_model`: each loaded tensor gets its bytes in `raw_data`, its
/// `external_data` entries are removed and `data_location` becomes DEFAULT.
///
/// - copy mode: one arena for all tensors, filled by positional reads on `opts.parse.num_threads`
///   threads; each tensor owns its range;
/// - `opts.parse.no_copy`: each file is mapped ONCE and tensors of at least `raw_data_threshold` bytes
///   borrow from the map under one shared owner token per file (the data stays valid after the
///   model is dropped while a token is held). A tensor whose offset is not a multiple of its
///   element size is copied instead (a borrowed pointer would be misaligned for its type).
///
/// Every location obeys the path rules (see `paths`); every range is checked against the file
/// size before anything is allocated; `opts.verify_external_checksums` verifies `checksum`
/// entries. On error the model is unchanged.
pub fn load_external_data_for_model(
    model: &mut ModelProto,
    base_dir: impl AsRef<Path>,
    opts: &LoadOptions,
) -> Result<ExternalLoadReport> {
    load_external_data_in(model, base_dir.as_ref(), opts)
}

/// [`load_external_data_for_model`] (one body for every path type).
fn load_external_data_in(
    model: &mut ModelProto,
    dir: &Path,
    opts: &LoadOptions,
) -> Result<ExternalLoadReport> {
    opts.validate()?;
    let mut stop = |e: Error| Err(e);
    let mut plan = plan(model, dir, opts, false, &mut stop)?;
    if plan.refs.is_empty() {
        return Ok(ExternalLoadReport::default());
    }
    if opts.verify_external_checksums {
        verify_checksums(&mut plan, &mut stop, None)?;
    }
    let (spans, borrowed, maps) = fill(&mut plan, opts)?;
    let blobs = load_blobs(&plan, maps.as_deref(), opts.verify_external_checksums)?;
    let mut report = ExternalLoadReport {
        tensors: plan.refs.len(),
        bytes: plan.refs.iter().map(|r| r.len).sum(),
        borrowed,
        blobs,
        ..Default::default()
    };
    // Apply, in visitor order.
    let mut slots: Vec<Option<ByteSpan>> = Vec::new();
    for (r, span) in plan.refs.iter_mut().zip(spans) {
        if slots.len() <= r.index {
            slots.resize_with(r.index + 1, || None);
        }
        slots[r.index] = Some(span);
        if !r.prepacked.is_empty() {
            report.prepacked.push(PrepackedEntries {
                tensor: r.tensor.clone(),
                file: r.file,
                entries: std::mem::take(&mut r.prepacked),
            });
        }
    }
    let mut index = 0usize;
    model.visit_tensors_mut(&mut |t| {
        if let Some(span) = slots.get_mut(index).and_then(Option::take) {
            t.raw_data = Some(span);
            t.rare.external_data.clear();
            t.rare.data_location = Some(DATA_LOCATION_DEFAULT);
        }
        index += 1;
    });
    report.files = plan.files.into_iter().map(|f| f.info).collect();
    Ok(report)
}

/// Checks every external reference of `model` without loading anything: each location obeys the
/// path rules and opens, each range lies inside its file, each `length` matches the tensor's
/// dims × element type, and (with `verify`) each `checksum` matches its file. All
/// problems are collected in the report. `progress` gets the bytes hashed.
pub fn check_external_data(
    model: &ModelProto,
    base_dir: impl AsRef<Path>,
    opts: &LoadOptions,
    verify: bool,
    progress: Option<&(dyn Fn(u64) + Sync)>,
) -> ExternalCheckReport {
    let mut report = ExternalCheckReport::default();
    let mut problems = Vec::new();
    let mut collect = |e: Error| {
        problems.push(e);
        Ok(())
    };
    let Ok(mut plan) = plan(model, base_dir.as_ref(), opts, false, &mut collect) else {
        unreachable!("the collecting sink never fails");
    };
    // dims × type against the referenced length.
    let mut index = 0usize;
    let mut by_index: HashMap<usize, &Ref> = plan.refs.iter().map(|r| (r.index, r)).collect();
    model.visit_tensors(&mut |t| {
        let r = by_index.remove(&index);
        if let Some(r) = r
            && expected_bytes(t).is_none()
            && t.data_type
                .and_then(DataType::from_i32)
                .is_some_and(|d| d.bits() > 0)
        {
            // A fixed-size type whose dims are negative or whose byte size overflows 64 bits:
            // no length can match.
            collect(ext_err(
                &r.tensor,
                &plan.files[r.file].info.path,
                format!(
                    "dims {:?} are negative or their byte size overflows 64 bits (length {})",
                    t.dims, r.len
                ),
            ))
            .ok();
        }
        if let Some(r) = r
            && let Some(want) = expected_bytes(t)
            && want != r.len
        {
            collect(ext_err(
                &r.tensor,
                &plan.files[r.file].info.path,
                format!(
                    "length {} does not match dims {:?} of its element type ({want} bytes)",
                    r.len, t.dims
                ),
            ))
            .ok();
        }
        index += 1;
    });
    drop(by_index);
    report.tensors = plan.refs.len();
    report.bytes = plan.refs.iter().map(|r| r.len).sum();
    if verify {
        report.checksums_verified =
            verify_checksums(&mut plan, &mut collect, progress).unwrap_or(0);
    }
    report.files = plan.files.into_iter().map(|f| f.info).collect();
    report.problems = problems;
    report
}

/// Maps the external data of every still-external tensor of `model` (relative to `dir`, under
/// the same rules as a load) without changing the model: the spans are keyed by the tensor's
/// address and borrow from one map per file (misaligned ranges are copied). Used by saves of
/// models whose external data was not loaded.
pub(crate) fn map_external_tensors(
    model: &ModelProto,
    dir: &Path,
    key: Option<&crate::secret::Passphrase>,
) -> Result<HashMap<*const TensorProto, ByteSpan>> {
    let opts = LoadOptions {
        external_data_key: key.cloned(),
        ..LoadOptions::from(crate::codec::ParseOptions {
            no_copy: true,
            raw_data_threshold: 0,
            ..Default::default()
        })
    };
    let mut stop = |e: Error| Err(e);
    let mut plan = plan(model, dir, &opts, true, &mut stop)?;
    let (spans, _, _) = fill(&mut plan, &opts)?;
    let mut by_index: HashMap<usize, ByteSpan> =
        plan.refs.iter().map(|r| r.index).zip(spans).collect();
    let mut out = HashMap::new();
    let mut index = 0usize;
    model.visit_tensors(&mut |t| {
        if let Some(span) = by_index.remove(&index) {
            out.insert(t as *const TensorProto, span);
        }
        index += 1;
    });
    Ok(out)
}

/// Whether any tensor of `model` uses external data.
pub fn has_external_data(model: &ModelProto) -> bool {
    let mut any = false;
    model.visit_tensors(&mut |t| any |= uses_external_data(t));
    any
}

/// The hook of file (and bytes) loads: loads external data when `opts.load_external_data` and a
/// base directory is known (`external_data_dir`, else the model file's directory).
pub(crate) fn load_after_parse(
    model: &mut ModelProto,
    model_path: Option<&Path>,
    opts: &LoadOptions,
) -> Result<Option<ExternalLoadReport>> {
    if !opts.load_external_data || opts.parse.skip_raw_data {
        return Ok(None);
    }
    // Without a directory nothing is loaded: the model's tensors are not even walked (a fixed
    // cost that showed in parses of small models from memory).
    let dir = match (
        &opts.external_data_dir,
        model_path,
        &opts.external_data_location,
    ) {
        (Some(d), _, _) => d.clone(),
        (None, Some(p), _) => model_dir(p),
        (None, None, Some(o)) => model_dir(o),
        (None, None, None) => return Ok(None),
    };
    if !has_external_data(model) {
        return Ok(None);
    }
    load_external_data_for_model(model, dir, opts).map(Some)
}
