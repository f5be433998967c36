//! Parameter dictionaries: the TVM / CVM "params" format, a list of named DLPack-typed arrays.
//!
//! ```text
//! list:  u64 0xF7E58D4F05049CB7, u64 0 (reserved), u64 N, N × (u64 length, UTF-8 name),
//!        u64 M (= N), M arrays in name order
//! array: u64 0xDD5E40F096B4A13F, u64 0 (reserved), DLDevice (i32 1, i32 0: CPU),
//!        i32 ndim, DLDataType (u8 code, u8 bits, u16 lanes = 1), ndim × i64 shape,
//!        i64 byte size = ((bits + 7) / 8) × prod(shape), the row-major bytes
//! ```
//! All integers little-endian, no padding. Element types are those of the DLPack map
//! ([`crate::dlpack::TYPE_MAP`]); on load, TVM's boolean (UINT, 1 bit) is accepted as BOOL too.
//! Sub-byte types (INT4, UINT4, FLOAT4E2M1, INT2, UINT2) take one byte per element in this
//! format (its size rule rounds bits up to bytes): they are unpacked on save (signed types
//! sign-extended) and packed again on load, where a byte outside the type's range is refused.
//!
//! Loading checks everything before it allocates or changes anything: both magics, both reserved
//! words, name and array counts equal, every name UTF-8, non-empty and unique, CPU device,
//! `ndim` in `0..=`[`MAX_NDIM`], no negative extent, the type in the map, the byte size equal to
//! the size rule (with overflow checks), nothing read past the end and nothing left after the
//! last array. Every violation is an [`Error::Params`] naming the byte offset. No allocation is
//! larger than the input.

use std::collections::HashSet;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use crate::bytes::ByteSpan;
use crate::dlpack::{self, DL_CPU, DLDataType, type_code};
use crate::error::{Error, Result};
use crate::proto::{DataType, ModelProto, TensorProto};
use crate::storage::{AtomicFile, MappedFile};

/// Magic number of a parameter list (`kTVMNDArrayListMagic`).
pub const LIST_MAGIC: u64 = 0xF7E5_8D4F_0504_9CB7;
/// Magic number of one array (`kTVMNDArrayMagic`).
pub const ARRAY_MAGIC: u64 = 0xDD5E_40F0_96B4_A13F;
/// Largest `ndim` accepted on load (DLPack's is an `int32`; real tensors have a handful).
pub const MAX_NDIM: i32 = 1024;

/// Options of the loading functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamsLoadOptions {
    /// Borrow the bytes from the input instead of copying them (the input, e.g. a memory map,
    /// is kept alive by the tensors' owner tokens). Sub-byte types are always repacked (copied).
    pub no_copy: bool,
    /// When loading into a model: add arrays whose name matches no initializer (true), or refuse
    /// the whole file (false).
    pub add_missing: bool,
}

impl Default for ParamsLoadOptions {
    fn default() -> Self {
        Self {
            no_copy: false,
            add_missing: true,
        }
    }
}

/// What [`load_params_into_model`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParamsLoadReport {
    /// Initializers whose data was replaced.
    pub replaced: usize,
    /// Initializers added.
    pub added: usize,
}

// ---------------------------------------------------------------------------------------------
// Writing

/// The DLPack type written for an ONNX type.
fn params_dtype(t: DataType) -> Result<DLDataType> {
    dlpack::dl_data_type(t)
}

/// Bytes per element in this format: `(bits + 7) / 8`.
fn element_bytes(dt: DLDataType) -> u64 {
    (u64::from(dt.bits) * u64::from(dt.lanes)).div_ceil(8)
}

/// Unpacks packed sub-byte elements to one byte each (signed types sign-extended).
fn unpack_sub_byte(packed: &[u8], bits: u32, signed: bool, n: usize) -> Vec<u8> {
    let mask = (1u16 << bits) as u8 - 1;
    (0..n)
        .map(|i| {
            let bit = i * bits as usize;
            let v = (packed[bit / 8] >> (bit % 8)) & mask;
            if signed && v & (1 << (bits - 1)) != 0 {
                v | !mask
            } else {
                v
            }
        })
        .collect()
}

/// Packs one-byte elements into sub-byte elements (low bits first); refuses values outside the
/// type's range. `offset` is the file offset of the first element (for errors).
fn pack_sub_byte(bytes: &[u8], t: DataType, offset: u64) -> Result<Vec<u8>> {
    let bits = t.bits() as usize;
    let signed = matches!(t, DataType::Int4 | DataType::Int2);
    let mask = (1u16 << bits) as u8 - 1;
    let mut out = vec![0u8; (bytes.len() * bits).div_ceil(8)];
    for (i, &b) in bytes.iter().enumerate() {
        let low = b & mask;
        let fits = if signed {
            // A sign extension of the low bits.
            let ext = if low & (1 << (bits - 1)) != 0 {
                low | !mask
            } else {
                low
            };
            ext == b
        } else {
            low == b
        };
        if !fits {
            return Err(Error::Params {
                offset: offset + i as u64,
                reason: format!(
                    "element {i} of a {} array is {b:#04x}, outside the type",
                    t.name()
                ),
            });
        }
        let bit = i * bits;
        out[bit / 8] |= low << (bit % 8);
    }
    Ok(out)
}

/// Writes a parameter list of `tensors` (name, tensor) to `w`; returns the number of bytes.
///
/// Each tensor must be exportable as DLPack is (a known numeric type, data in `raw_data` or
/// typed fields, loaded external data); names must be non-empty, UTF-8 and unique. On failure
/// `w` may have received part of the list ([`save_params_file`] then leaves no file behind).
pub fn write_params<W: Write>(w: &mut W, tensors: &[(&str, &TensorProto)]) -> Result<u64> {
    crate::error::require_feature(cfg!(feature = "params"), "params")?;
    let mut seen = HashSet::new();
    for (name, _) in tensors {
        if name.is_empty() {
            return Err(Error::InvalidArgument(
                "a parameter needs a non-empty name".into(),
            ));
        }
        if !seen.insert(*name) {
            return Err(Error::InvalidArgument(format!(
                "parameter name '{name}' appears twice"
            )));
        }
    }
    let mut out = CountingWriter { inner: w, n: 0 };
    let io = |e| Error::io("", e);
    let n = tensors.len() as u64;
    out.put(&LIST_MAGIC.to_le_bytes()).map_err(io)?;
    out.put(&0u64.to_le_bytes()).map_err(io)?;
    out.put(&n.to_le_bytes()).map_err(io)?;
    for (name, _) in tensors {
        out.put(&(name.len() as u64).to_le_bytes()).map_err(io)?;
        out.put(name.as_bytes()).map_err(io)?;
    }
    out.put(&n.to_le_bytes()).map_err(io)?;
    for (name, t) in tensors {
        let (c, bytes) = dlpack::tensor_bytes(t).map_err(|e| match e {
            Error::Unsupported(s) => Error::Unsupported(format!("parameter '{name}': {s}")),
            Error::InvalidArgument(s) => Error::InvalidArgument(format!("parameter '{name}': {s}")),
            Error::LimitExceeded(s) => Error::LimitExceeded(format!("parameter '{name}': {s}")),
            other => other,
        })?;
        let dt = params_dtype(c.data_type)?;
        let bits = c.data_type.bits();
        let unpacked;
        let data: &[u8] = if bits < 8 {
            let signed = dt.code == type_code::INT;
            unpacked = unpack_sub_byte(&bytes, bits, signed, c.elements as usize);
            &unpacked
        } else {
            &bytes
        };
        debug_assert_eq!(data.len() as u64, element_bytes(dt) * c.elements);
        out.put(&ARRAY_MAGIC.to_le_bytes()).map_err(io)?;
        out.put(&0u64.to_le_bytes()).map_err(io)?;
        out.put(&DL_CPU.to_le_bytes()).map_err(io)?;
        out.put(&0i32.to_le_bytes()).map_err(io)?;
        out.put(&(t.dims.len() as i32).to_le_bytes()).map_err(io)?;
        out.put(&[dt.code, dt.bits]).map_err(io)?;
        out.put(&dt.lanes.to_le_bytes()).map_err(io)?;
        for d in &t.dims {
            out.put(&d.to_le_bytes()).map_err(io)?;
        }
        out.put(&(data.len() as i64).to_le_bytes()).map_err(io)?;
        out.put(data).map_err(io)?;
    }
    out.inner.flush().map_err(io)?;
    Ok(out.n)
}

struct CountingWriter<'a, W: Write> {
    inner: &'a mut W,
    n: u64,
}

impl<W: Write> CountingWriter<'_, W> {
    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.inner.write_all(b)?;
        self.n += b.len() as u64;
        Ok(())
    }
}

/// The (name, tensor) pairs of `tensors`, named by their `name` fields (which must be UTF-8).
fn named<'a>(
    tensors: impl IntoIterator<Item = &'a TensorProto>,
) -> Result<Vec<(&'a str, &'a TensorProto)>> {
    tensors
        .into_iter()
        .map(|t| {
            t.name().as_str().map(|n| (n, t)).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "tensor name {:?} is not UTF-8, which the params format needs",
                    t.name()
                ))
            })
        })
        .collect()
}

/// Chooses the initializers of `model` to save: all of them in order, or `names` in that order.
fn chosen<'a>(
    model: &'a ModelProto,
    names: Option<&[&'a str]>,
) -> Result<Vec<(&'a str, &'a TensorProto)>> {
    let inits = || {
        model
            .graph
            .as_deref()
            .into_iter()
            .flat_map(|g| g.initializer.iter())
    };
    match names {
        None => named(inits()),
        Some(names) => names
            .iter()
            .map(|want| {
                inits()
                    .find(|t| t.name() == want)
                    .map(|t| (*want, t))
                    .ok_or_else(|| {
                        Error::InvalidArgument(format!("the model has no initializer '{want}'"))
                    })
            })
            .collect(),
    }
}

/// Standalone tensors as a parameter list (named by their `name` fields).
pub fn save_tensors(tensors: &[&TensorProto]) -> Result<Vec<u8>> {
    let list = named(tensors.iter().copied())?;
    let mut out = Vec::new();
    write_params(&mut out, &list)?;
    Ok(out)
}

/// The initializers of `model` (all, or those named in `names`, in that order) as a parameter
/// list.
pub fn save_params(model: &ModelProto, names: Option<&[&str]>) -> Result<Vec<u8>> {
    let list = chosen(model, names)?;
    let mut out = Vec::new();
    write_params(&mut out, &list)?;
    Ok(out)
}

/// [`save_params`] into a file, atomically (temporary file beside `path`, synced, renamed).
pub fn save_params_file(
    model: &ModelProto,
    path: impl AsRef<Path>,
    names: Option<&[&str]>,
) -> Result<u64> {
    let path = path.as_ref();
    let list = chosen(model, names)?;
    let mut file = AtomicFile::create(path)?;
    let n = {
        let mut w = BufWriter::with_capacity(1 << 20, file.file());
        write_params(&mut w, &list).map_err(|e| match e {
            Error::Io { source, .. } => Error::io(path, source),
            other => other,
        })?
    };
    file.commit()?;
    Ok(n)
}

// ---------------------------------------------------------------------------------------------
// Reading

/// A bounded little-endian reader that reports malformed input with its offset.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

fn bad(offset: usize, reason: impl Into<String>) -> Error {
    Error::Params {
        offset: offset as u64,
        reason: reason.into(),
    }
}

impl<'a> Cursor<'a> {
    fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.left() {
            return Err(bad(
                self.pos,
                format!(
                    "truncated: {what} needs {n} bytes, only {} left",
                    self.left()
                ),
            ));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }
    fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }
    fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }
}

/// One array of a checked parameter list.
struct Entry<'a> {
    name: &'a str,
    data_type: DataType,
    dims: Vec<i64>,
    /// Offset of the data in the input.
    offset: usize,
    data: &'a [u8],
}

/// Parses and checks a whole parameter list (see the module doc for the checks).
fn parse(bytes: &[u8]) -> Result<Vec<Entry<'_>>> {
    crate::error::require_feature(cfg!(feature = "params"), "params")?;
    let mut r = Cursor { bytes, pos: 0 };
    let magic = r.u64("the list magic")?;
    if magic != LIST_MAGIC {
        return Err(bad(
            0,
            format!("bad list magic {magic:#018x}, expected {LIST_MAGIC:#018x}: not a params file"),
        ));
    }
    let reserved = r.u64("the list's reserved word")?;
    if reserved != 0 {
        return Err(bad(
            8,
            format!("the list's reserved word is {reserved}, expected 0"),
        ));
    }
    let at = r.pos;
    let n = r.u64("the name count")?;
    // Each name takes at least its 8-byte length: bound the count before allocating.
    if n > (r.left() / 8) as u64 {
        return Err(bad(
            at,
            format!("{n} names cannot fit in the {} bytes left", r.left()),
        ));
    }
    let mut names = Vec::with_capacity(n as usize);
    let mut seen = HashSet::with_capacity(n as usize);
    for i in 0..n {
        let at = r.pos;
        let len = r.u64(&format!("the length of name {i}"))?;
        if len > r.left() as u64 {
            return Err(bad(
                at,
                format!(
                    "truncated: name {i} has length {len}, but only {} bytes are left",
                    r.left()
                ),
            ));
        }
        let raw = r.take(len as usize, "a name")?;
        let name = std::str::from_utf8(raw)
            .map_err(|e| bad(at + 8, format!("name {i} is not UTF-8: {e}")))?;
        if name.is_empty() {
            return Err(bad(at, format!("name {i} is empty")));
        }
        if !seen.insert(name) {
            return Err(bad(at, format!("name '{name}' appears twice")));
        }
        names.push(name);
    }
    let at = r.pos;
    let m = r.u64("the array count")?;
    if m != n {
        return Err(bad(
            at,
            format!("{m} arrays for {n} names: the counts must be equal"),
        ));
    }
    let mut entries = Vec::with_capacity(names.len());
    for name in names {
        let entry = parse_array(&mut r, name).map_err(|e| match e {
            Error::Params { offset, reason } => Error::Params {
                offset,
                reason: format!("array '{name}': {reason}"),
            },
            other => other,
        })?;
        entries.push(entry);
    }
    if r.left() != 0 {
        return Err(bad(
            r.pos,
            format!("{} unexpected bytes after the last array", r.left()),
        ));
    }
    Ok(entries)
}

fn parse_array<'a>(r: &mut Cursor<'a>, name: &'a str) -> Result<Entry<'a>> {
    let at = r.pos;
    let magic = r.u64("an array magic")?;
    if magic != ARRAY_MAGIC {
        return Err(bad(
            at,
            format!("bad array magic {magic:#018x}, expected {ARRAY_MAGIC:#018x}"),
        ));
    }
    let at = r.pos;
    let reserved = r.u64("an array's reserved word")?;
    if reserved != 0 {
        return Err(bad(at, format!("reserved word is {reserved}, expected 0")));
    }
    let at = r.pos;
    let device_type = r.i32("the device type")?;
    let device_id = r.i32("the device id")?;
    if (device_type, device_id) != (DL_CPU, 0) {
        return Err(bad(
            at,
            format!("device ({device_type}, {device_id}): only the CPU (1, 0) is supported"),
        ));
    }
    let at = r.pos;
    let ndim = r.i32("ndim")?;
    if !(0..=MAX_NDIM).contains(&ndim) {
        return Err(bad(at, format!("ndim {ndim} is outside 0..={MAX_NDIM}")));
    }
    let at = r.pos;
    let t = r.take(4, "the data type")?;
    let dt = DLDataType {
        code: t[0],
        bits: t[1],
        lanes: u16::from_le_bytes([t[2], t[3]]),
    };
    let data_type = if dt
        == (DLDataType {
            code: type_code::UINT,
            bits: 1,
            lanes: 1,
        }) {
        DataType::Bool // TVM's bool
    } else {
        dlpack::onnx_data_type(dt).map_err(|e| {
            bad(
                at,
                match e {
                    Error::Unsupported(s) => s,
                    other => other.to_string(),
                },
            )
        })?
    };
    let at = r.pos;
    if ndim as usize > r.left() / 8 {
        return Err(bad(
            at,
            format!(
                "truncated: the shape needs {} bytes, only {} left",
                ndim as usize * 8,
                r.left()
            ),
        ));
    }
    let mut dims = Vec::with_capacity(ndim as usize);
    for i in 0..ndim {
        let at = r.pos;
        let d = r.i64("an extent")?;
        if d < 0 {
            return Err(bad(at, format!("extent {i} is negative ({d})")));
        }
        dims.push(d);
    }
    let at = r.pos;
    let size = r.i64("the byte size")?;
    let expected = dims
        .iter()
        .try_fold(element_bytes(dt), |acc, &d| acc.checked_mul(d as u64))
        .filter(|&e| e <= i64::MAX as u64)
        .ok_or_else(|| {
            bad(
                at,
                format!("the size of shape {dims:?} overflows a 64-bit size"),
            )
        })?;
    if size < 0 || size as u64 != expected {
        return Err(bad(
            at,
            format!(
                "byte size {size} does not match shape {dims:?} of {} ({expected} bytes)",
                data_type.name()
            ),
        ));
    }
    if expected > r.left() as u64 {
        return Err(bad(
            at,
            format!(
                "truncated: the data needs {expected} bytes, only {} left",
                r.left()
            ),
        ));
    }
    let offset = r.pos;
    let data = r.take(expected as usize, "the data")?;
    Ok(Entry {
        name,
        data_type,
        dims,
        offset,
        data,
    })
}

/// Builds the tensors of checked entries; `borrow` gives the span of a byte range (no copy),
/// `None` to copy.
fn tensors_of(
    entries: Vec<Entry<'_>>,
    borrow: Option<&dyn Fn(usize, usize) -> ByteSpan>,
) -> Result<Vec<TensorProto>> {
    entries
        .into_iter()
        .map(|e| {
            let mut t = TensorProto::new();
            t.set_name(e.name);
            t.set_data_type(e.data_type as i32);
            t.dims = e.dims.into();
            let span = if e.data_type.bits() < 8 {
                ByteSpan::from_vec(pack_sub_byte(e.data, e.data_type, e.offset as u64)?)
            } else {
                match borrow {
                    Some(b) if !e.data.is_empty() => b(e.offset, e.data.len()),
                    _ => ByteSpan::from(e.data),
                }
            };
            t.raw_data = Some(span);
            Ok(t)
        })
        .collect()
}

/// The arrays of a parameter list as named tensors (bytes copied).
pub fn load_params(bytes: &[u8]) -> Result<Vec<TensorProto>> {
    tensors_of(parse(bytes)?, None)
}

/// The arrays of a parameter list held by `data`, as named tensors whose `raw_data` borrows
/// from `data` (kept alive by their owner tokens; sub-byte types are repacked, i.e. copied).
pub fn load_params_shared<T>(data: Arc<T>) -> Result<Vec<TensorProto>>
where
    T: AsRef<[u8]> + Send + Sync + 'static,
{
    let bytes: &[u8] = (*data).as_ref();
    let entries = parse(bytes)?;
    let borrow = |off: usize, len: usize| ByteSpan::from_shared(data.clone(), off..off + len);
    tensors_of(entries, Some(&borrow))
}

/// The arrays of a params file as named tensors: copied, or with `opts.no_copy` borrowed from
/// a memory map of the file (one mapping, shared by the tensors' owner tokens).
pub fn load_params_file(
    path: impl AsRef<Path>,
    opts: &ParamsLoadOptions,
) -> Result<Vec<TensorProto>> {
    let path = path.as_ref();
    let map = MappedFile::open(path)?;
    let with_path = |e: Error| match e {
        Error::Params { offset, reason } => Error::Params {
            offset,
            reason: format!("{}: {reason}", path.display()),
        },
        other => other,
    };
    if opts.no_copy {
        load_params_shared(map).map_err(with_path)
    } else {
        load_params(map.bytes()).map_err(with_path)
    }
}

/// Puts loaded tensors into `model`'s initializers: an initializer of the same name gets the
/// new dims, type and bytes (its typed fields, external data references and segment are
/// cleared; name, doc_string and metadata stay); other tensors are appended when
/// `add_missing`, and refused otherwise (the model is then unchanged).
pub fn merge_into_model(
    model: &mut ModelProto,
    tensors: Vec<TensorProto>,
    add_missing: bool,
) -> Result<ParamsLoadReport> {
    crate::error::require_feature(cfg!(feature = "params"), "params")?;
    let has = |name: &crate::ProtoString| {
        model
            .graph
            .as_deref()
            .is_some_and(|g| g.initializer.iter().any(|i| i.name() == name))
    };
    if !add_missing && let Some(t) = tensors.iter().find(|t| !has(t.name())) {
        return Err(Error::InvalidArgument(format!(
            "the model has no initializer '{}' (and adding is off)",
            t.name()
        )));
    }
    let mut report = ParamsLoadReport::default();
    let graph = model.mutable_graph();
    for t in tensors {
        let found = graph.initializer.iter().position(|i| i.name() == t.name());
        match found {
            Some(at) => {
                let init = graph.initializer.get_mut(at).expect("found above");
                init.dims = t.dims;
                init.data_type = t.data_type;
                init.raw_data = t.raw_data;
                init.float_data.clear();
                init.int64_data.clear();
                if let Some(rare) = init.rare.get_mut() {
                    rare.int32_data.clear();
                    rare.string_data.clear();
                    rare.double_data.clear();
                    rare.uint64_data.clear();
                    rare.segment = None;
                    rare.external_data.clear();
                    rare.data_location = None;
                }
                report.replaced += 1;
            }
            None => {
                graph.initializer.push(t);
                report.added += 1;
            }
        }
    }
    Ok(report)
}

/// Loads a parameter list (copied) into `model`'s initializers (see [`merge_into_model`]): all
/// checks pass before the model is changed.
pub fn load_params_into_model(
    model: &mut ModelProto,
    bytes: &[u8],
    opts: &ParamsLoadOptions,
) -> Result<ParamsLoadReport> {
    merge_into_model(model, load_params(bytes)?, opts.add_missing)
}

/// Loads a params file into `model`'s initializers (see [`load_params_file`] and
/// [`merge_into_model`]).
pub fn load_params_file_into_model(
    model: &mut ModelProto,
    path: impl AsRef<Path>,
    opts: &ParamsLoadOptions,
) -> Result<ParamsLoadReport> {
    merge_into_model(model, load_params_file(path, opts)?, opts.add_missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_byte_round_trip() {
        // INT4 values -8..=7, packed low nibble first.
        let values: Vec<i8> = (-8..8).collect();
        let mut packed = vec![0u8; 8];
        for (i, v) in values.iter().enumerate() {
            packed[i / 2] |= ((*v as u8) & 0xF) << (4 * (i % 2));
        }
        let unpacked = unpack_sub_byte(&packed, 4, true, 16);
        assert_eq!(
            unpacked,
            values.iter().map(|v| *v as u8).collect::<Vec<_>>()
        );
        assert_eq!(pack_sub_byte(&unpacked, DataType::Int4, 0).unwrap(), packed);
        // UINT2, 5 elements (the last byte padded).
        let u2 = [3u8, 0, 1, 2, 3];
        let p = pack_sub_byte(&u2, DataType::Uint2, 0).unwrap();
        assert_eq!(p, vec![0b1001_0011, 0b11]);
        assert_eq!(unpack_sub_byte(&p, 2, false, 5), u2);
        // Out of range.
        assert!(pack_sub_byte(&[16], DataType::Uint4, 0).is_err());
        assert!(
            pack_sub_byte(&[0x08], DataType::Int4, 0).is_err(),
            "8 is not an int4"
        );
        assert!(pack_sub_byte(&[0xF8], DataType::Int4, 0).is_ok(), "-8 is");
    }
}
