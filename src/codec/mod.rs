//! Parse and serialize any message from and to bytes, files and streams, with
//! [`ParseOptions`] / [`SerializeOptions`]: the copy, arena and no-copy payload modes, parallel
//! initializer parsing and parallel payload writing. Loading a model's external data on top of
//! a parse is the job of [`crate::package`].

mod options;
mod parallel;
mod parallel_write;
pub(crate) mod sparse;

pub use options::TensorBufferOptions;
pub use options::{
    FileLoadMode, MAX_ALIGNMENT, MAX_INLINE_ALIGNMENT, MAX_PARSE_ALIGNMENT,
    MAX_RECURSION_DEPTH_LIMIT, MIN_INLINE_ALIGNMENT, ParseOptions, SerializeOptions,
};
pub(crate) use options::{resolve_threads, validate_alignment, validate_threads};

/// Test hook: parses cut no repeated-field chunks from blocks of their own while `off` is set
/// (every chunk then comes from the global allocator).
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn set_metadata_regions_off(off: bool) {
    crate::mem::set_regions_off(off);
}

/// Test hook: where a parsed graph's metadata lives, counted over its `value_info` type boxes
/// (`type` and the tensor type's `shape`), its attributes' tensor boxes (`t`), and its nodes'
/// input lists and attributes' ints lists that outgrew their inline slots.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
#[derive(Debug, Default, PartialEq, Eq)]
pub struct BlockProbe {
    /// Boxes counted, and of them the ones cut from a parse's blocks.
    pub boxes: usize,
    pub boxes_in_block: usize,
    /// Lists past their inline slots counted, and of them the ones cut from the blocks.
    pub spilled_lists: usize,
    pub lists_in_block: usize,
}

/// Test hook: see [`BlockProbe`].
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn block_probe(g: &crate::proto::GraphProto) -> BlockProbe {
    use crate::wire::MsgBox;
    let mut p = BlockProbe::default();
    let mut count_box = |in_block: bool| {
        p.boxes += 1;
        p.boxes_in_block += usize::from(in_block);
    };
    for v in g.value_info.iter() {
        if let Some(ty) = &v.r#type {
            count_box(MsgBox::in_block(ty));
            if let Some(crate::proto::TypeProtoValue::TensorType(t)) = &ty.value
                && let Some(shape) = &t.shape
            {
                count_box(MsgBox::in_block(shape));
            }
        }
    }
    for n in g.node.iter() {
        for a in n.attribute.iter() {
            if let Some(t) = &a.t {
                count_box(MsgBox::in_block(t));
            }
        }
    }
    for n in g.node.iter() {
        let lists = [(n.input.spilled(), n.input.in_block())].into_iter().chain(
            n.attribute
                .iter()
                .map(|a| (a.ints.spilled(), a.ints.in_block())),
        );
        for (spilled, in_block) in lists {
            p.spilled_lists += usize::from(spilled);
            p.lists_in_block += usize::from(spilled && in_block);
        }
    }
    p
}

/// Test hook: files the atomic writer synced so far (see `storage::atomic::FILE_SYNCS`).
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn file_sync_count() -> usize {
    crate::storage::FILE_SYNCS.load(std::sync::atomic::Ordering::Relaxed)
}

/// How many parses this thread made so far parsed initializers in parallel (a test hook: tests
/// check that the parallel path is exercised).
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn parallel_parse_count() -> usize {
    parallel::PARALLEL_PARSES.with(std::cell::Cell::get)
}

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use crate::bytes::Owner;
use crate::error::{Error, Result};
use crate::proto::{Message, ModelProto, encode_into_spare};
use crate::storage::{AUTO_MMAP_MIN_BYTES, Arena, AtomicFile, MappedFile, WriteSink, thread_pool};
use crate::wire::{
    DecodeConfig, DynMessage, PayloadMode, Reader, ReleaseSource, SizeTable, Spill,
    encode_streaming,
};

fn decode_config(opts: &ParseOptions, payload: PayloadMode) -> Result<DecodeConfig> {
    opts.validate()?;
    Ok(DecodeConfig {
        max_depth: opts.max_recursion_depth,
        payload,
        raw_data_threshold: usize::try_from(opts.raw_data_threshold).unwrap_or(usize::MAX),
        skip_raw_data: opts.skip_raw_data,
        max_tensor_size_bytes: opts.max_tensor_size_bytes,
        max_metadata_bytes: opts.max_metadata_bytes,
        alignment: usize::try_from(opts.payload_alignment()).unwrap_or(usize::MAX),
        ..DecodeConfig::default()
    })
}

/// Tensors of `model` whose bytes a no-copy load copied (instead of borrowing them) because
/// their address in the input was not aligned to `ParseOptions::alignment`.
pub fn realigned_tensors(model: &ModelProto) -> usize {
    let mut n = 0;
    model.visit_tensors(&mut |t| {
        n += usize::from(t.raw_data.as_ref().is_some_and(|r| r.is_realigned()))
    });
    n
}

/// Tensors of `model` whose `raw_data` is not empty and does not start at a multiple of
/// `alignment` (for models parsed from caller bytes without an owner, whose layout decides).
pub fn misaligned_tensors(model: &ModelProto, alignment: u64) -> usize {
    let align = alignment.max(1);
    let mut n = 0;
    model.visit_tensors(&mut |t| {
        n += usize::from(
            t.raw_data
                .as_ref()
                .is_some_and(|r| !r.is_empty() && (r.as_ptr() as u64) % align != 0),
        )
    });
    n
}

/// Decodes `M` from a reader, parsing a model's initializers in parallel when asked to.
fn decode<M: Message>(r: Reader<'_>, opts: &ParseOptions) -> Result<M> {
    let mut m = M::default();
    decode_any(&mut m, &mut { r }, opts)?;
    Ok(m)
}

/// [`decode`] into a default message (one copy for every message type).
fn decode_any(m: &mut dyn DynMessage, r: &mut Reader<'_>, opts: &ParseOptions) -> Result<()> {
    let read_through = r.config().read_through_overruns;
    // Reading through overruns walks the input in one sequential pass (the same work wherever
    // the input is cut); parts parsed ahead would stop at a cut.
    if !read_through && m.is_model() && opts.threads() > 1 {
        if let Some(pre) = parallel::preparse_initializers(r, opts) {
            r.set_preparsed(pre);
        }
    }
    let parsed = m.decode_from(r);
    if let Some(mut e) = r.take_overrun() {
        e.set_message(m.message_name());
        return Err(e.into());
    }
    parsed
}

/// Parses `bytes`, copying tensor payloads (the safe form for bytes without an owner; see
/// [`parse_from_shared`] for no-copy parsing). Each payload is copied once, straight to an
/// address aligned to `ParseOptions::alignment` (see `docs/design.md`, "Aligned tensor bytes").
pub fn parse_from_bytes<M: Message>(bytes: &[u8], opts: &ParseOptions) -> Result<M> {
    parse_bytes(bytes, opts, false)
}

/// [`parse_from_bytes`], reading through overruns when `read_through` is set: for an input that
/// may be cut at an unknown point, a length prefix that runs past the end of its message is read
/// through, and the parse fails after walking the whole input (see
/// `DecodeConfig::read_through_overruns`); its work then does not depend on where the cut falls.
pub(crate) fn parse_bytes<M: Message>(
    bytes: &[u8],
    opts: &ParseOptions,
    read_through: bool,
) -> Result<M> {
    let mut cfg = decode_config(opts, PayloadMode::Copy)?;
    cfg.read_through_overruns = read_through;
    decode(Reader::new(bytes, &cfg), opts)
}

/// [`parse_bytes`] through a sparse image of `bytes` (`sparse.rs`) without its payloads of at
/// least `min` bytes, which the parse reads back from `bytes`: the fuzz targets' oracle of the
/// path the C++ classes' `ParseFromIstream` takes.
#[cfg(feature = "test-hooks")]
pub(crate) fn parse_through_sparse_image<M: Message>(
    bytes: &[u8],
    opts: &ParseOptions,
    min: usize,
) -> Result<M> {
    let source = bytes.to_vec();
    let read: crate::wire::ReadSource = Arc::new(move |at, dst: &mut [u8]| {
        dst.copy_from_slice(&source[at..][..dst.len()]);
        true
    });
    let image = sparse::sparse_input(
        M::NAME,
        bytes.len() as u64,
        min,
        opts.max_recursion_depth,
        &read,
        "bytes",
    )?;
    let mut cfg = decode_config(opts, PayloadMode::Copy)?;
    cfg.read_source = Some(read);
    let mut r = Reader::new(image.as_ref(), &cfg);
    r.sparse_input(min);
    decode(r, opts)
}

/// Parses bytes held by `data`. With `no_copy`, tensor payloads borrow from `data` and keep it
/// alive through their owner tokens — those whose address is aligned to
/// `ParseOptions::alignment`; the others are copied to an aligned address
/// ([`crate::ByteSpan::is_realigned`]). Without `no_copy` they are copied.
pub fn parse_from_shared<M, T>(data: Arc<T>, opts: &ParseOptions) -> Result<M>
where
    M: Message,
    T: AsRef<[u8]> + Send + Sync + 'static,
{
    parse_shared(data, opts, None, false)
}

/// [`parse_from_shared`], reading through overruns when `read_through` is set (see
/// [`parse_bytes`]).
pub(crate) fn parse_shared_bytes<M, T>(
    data: Arc<T>,
    opts: &ParseOptions,
    read_through: bool,
) -> Result<M>
where
    M: Message,
    T: AsRef<[u8]> + Send + Sync + 'static,
{
    parse_shared(data, opts, None, read_through)
}

/// [`parse_from_shared`], handing the input range of each large payload it copies (a
/// misaligned one, with `no_copy`) to `release` (see `DecodeConfig::release_source`).
fn parse_shared<M, T>(
    data: Arc<T>,
    opts: &ParseOptions,
    release: Option<ReleaseSource>,
    read_through: bool,
) -> Result<M>
where
    M: Message,
    T: AsRef<[u8]> + Send + Sync + 'static,
{
    let mut m = M::default();
    let bytes: &[u8] = (*data).as_ref();
    parse_shared_any(&mut m, bytes, data.clone(), opts, release, read_through)?;
    Ok(m)
}

/// [`parse_shared`] into a default message (one copy for every message type): `bytes` are
/// those `owner` keeps alive.
fn parse_shared_any(
    m: &mut dyn DynMessage,
    bytes: &[u8],
    owner: Owner,
    opts: &ParseOptions,
    release: Option<ReleaseSource>,
    read_through: bool,
) -> Result<()> {
    let payload = if opts.no_copy {
        PayloadMode::Borrow {
            owner: Some(owner.clone()),
        }
    } else {
        PayloadMode::Copy
    };
    let mut cfg = decode_config(opts, payload)?;
    cfg.release_source = release;
    cfg.read_through_overruns = read_through;
    if opts.no_copy {
        // SAFETY: the bytes are shared immutably and kept alive by the token.
        unsafe { cfg.share_strings(owner) };
    }
    decode_any(m, &mut Reader::new(bytes, &cfg), opts)
}

/// Drops the pages of a range of `map` from this process (they are read again from the file
/// if anything touches them later).
fn releaser(map: &Arc<MappedFile>) -> ReleaseSource {
    let source = map.clone();
    Arc::new(move |offset, len| source.release_range(offset, len))
}

/// Parses `bytes`; with `no_copy`, tensor payloads borrow from `bytes` WITHOUT an owner token
/// (the caller keeps the bytes alive), exactly like the C++ library's no-copy `StringStream`.
/// Their alignment is the caller's layout: they are borrowed wherever they are (a copy would
/// have no owner to live in); count the misaligned ones with `crate::codec::misaligned_tensors`.
///
/// # Safety
/// With `opts.no_copy`, `bytes` must stay valid and unmodified while the returned message, or
/// any tensor payload taken from it, is in use.
pub unsafe fn parse_from_bytes_unowned<M: Message>(bytes: &[u8], opts: &ParseOptions) -> Result<M> {
    let mut m = M::default();
    // SAFETY: forwarded contract.
    unsafe { parse_unowned_replacing(&mut m, bytes, opts) }?;
    Ok(m)
}

/// [`parse_from_bytes_unowned`] into `m`, which is replaced by the parsed message on success
/// and unchanged on failure (one copy for every message type).
///
/// # Safety
/// As [`parse_from_bytes_unowned`].
pub(crate) unsafe fn parse_unowned_replacing(
    m: &mut dyn DynMessage,
    bytes: &[u8],
    opts: &ParseOptions,
) -> Result<()> {
    let payload = if opts.no_copy {
        PayloadMode::Borrow { owner: None }
    } else {
        PayloadMode::Copy
    };
    let cfg = decode_config(opts, payload)?;
    // SAFETY: the caller guarantees that `bytes` outlives the payloads borrowed from it.
    let mut r = unsafe { Reader::new_unowned(bytes, &cfg) };
    m.replace_with(&mut |fresh| decode_any(fresh, &mut r, opts))
}

/// Parses a file.
///
/// - copy mode (default): the file is mapped and each tensor payload is copied once, straight
///   to an address aligned to `ParseOptions::alignment`: payloads of at least 2 MiB by a
///   positional read of the file into their home (their pages of the mapping are never
///   touched), smaller ones from the mapping (whose pages are dropped after a payload of at
///   least 1 MiB is copied: peak memory about the file size); other bytes are read from the
///   mapping, which is gone after the parse;
/// - `no_copy`: payloads borrow from the file's bytes under a shared owner token (the memory
///   map, or the read buffer in `Buffered` mode), so they stay valid after the loader is gone;
///   a payload whose address is not aligned is copied instead.
///
/// A `ModelProto`'s external data is not loaded here (see [`crate::parse_from_file`]).
pub(crate) fn parse_file<M: Message>(path: &Path, opts: &ParseOptions) -> Result<M> {
    let mut m = M::default();
    parse_file_any(&mut m, path, opts)?;
    Ok(m)
}

/// [`parse_file`] into a default message (one copy for every message type).
fn parse_file_any(m: &mut dyn DynMessage, path: &Path, opts: &ParseOptions) -> Result<()> {
    opts.validate()?;
    if !opts.no_copy {
        let map = MappedFile::open(path)?;
        let mut cfg = decode_config(opts, PayloadMode::Copy)?;
        cfg.release_source = Some(releaser(&map));
        let source = map.clone();
        cfg.read_source = Some(Arc::new(move |offset, buf| source.read_at(offset, buf)));
        return decode_any(m, &mut Reader::new(map.bytes(), &cfg), opts);
    }
    let use_mmap = match opts.file_load_mode {
        FileLoadMode::Mmap => true,
        FileLoadMode::Buffered => false,
        FileLoadMode::Auto => {
            let len = std::fs::metadata(path)
                .map_err(|e| Error::io(path, e))?
                .len();
            len >= AUTO_MMAP_MIN_BYTES
        }
    };
    if use_mmap {
        // Payloads copied for alignment release their pages of the map, as in copy mode;
        // borrowed ones are unaffected (the map is a read-only file mapping: released pages are
        // read from the file again when touched).
        let map = MappedFile::open(path)?;
        let release = releaser(&map);
        parse_shared_any(m, map.bytes(), map.clone(), opts, Some(release), false)
    } else {
        let arena = Arena::read_file(path, opts.threads())?;
        parse_shared_any(m, (*arena).as_ref(), arena.clone(), opts, None, false)
    }
}

/// Parses everything `reader` yields. With `no_copy`, payloads borrow from the buffer the
/// stream was read into (kept alive by their owner tokens).
pub fn parse_from_reader<M: Message>(mut reader: impl Read, opts: &ParseOptions) -> Result<M> {
    let mut buf = Vec::new();
    reader
        .read_to_end(&mut buf)
        .map_err(|e| Error::io("<stream>", e))?;
    if opts.no_copy {
        parse_from_shared(Arc::new(buf), opts)
    } else {
        parse_from_bytes(&buf, opts)
    }
}

/// Computes the sizes of `m` (with the paddings of `inline_alignment`), checking
/// `max_serialized_size_bytes` and refusing messages nested deeper than any parse accepts
/// ([`MAX_RECURSION_DEPTH_LIMIT`]: only a model built through the API can be); the sizes are
/// then read with `sizes.cursor()`.
pub(crate) fn plan(m: &dyn DynMessage, opts: &SerializeOptions) -> Result<(u64, SizeTable)> {
    opts.validate()?;
    let mut sizes = SizeTable::with_max_depth(MAX_RECURSION_DEPTH_LIMIT);
    #[cfg_attr(not(feature = "inline-alignment"), allow(unused_mut))]
    let mut len = m.size_into(&mut sizes);
    if sizes.too_deep() {
        return Err(Error::LimitExceeded(format!(
            "{} nests messages more than {} levels deep: no parse would accept it (the largest \
             max_recursion_depth is {})",
            m.message_name(),
            sizes.max_depth(),
            MAX_RECURSION_DEPTH_LIMIT
        )));
    }
    #[cfg(feature = "inline-alignment")]
    if opts.inline_alignment != 0 {
        let align = opts.inline_alignment;
        len = crate::wire::align_payloads(m, &mut sizes, len, align, opts.raw_data_threshold)
            .ok_or_else(|| {
                Error::LimitExceeded(format!(
                    "no layout of {} aligns its payloads to {align} (inline_alignment)",
                    m.message_name()
                ))
            })?;
    }
    if opts.max_serialized_size_bytes > 0 && len > opts.max_serialized_size_bytes {
        return Err(Error::LimitExceeded(format!(
            "serialized size {len} exceeds max_serialized_size_bytes {}",
            opts.max_serialized_size_bytes
        )));
    }
    Ok((len, sizes))
}

/// With `opts.skip_raw_data`: a copy of `m` without the payloads it drops, and the options to
/// write it with; `None` when nothing is to be dropped.
pub(crate) fn skip_payloads<M: Message>(
    m: &M,
    opts: &SerializeOptions,
) -> Option<(M, SerializeOptions)> {
    if !opts.skip_raw_data {
        return None;
    }
    let copy = m.without_payloads(opts.raw_data_threshold)?;
    Some((
        copy,
        SerializeOptions {
            skip_raw_data: false,
            ..opts.clone()
        },
    ))
}

/// Serializes `m` into a new buffer (byte-identical to protobuf's `SerializeToString`).
pub fn serialize_to_vec<M: Message>(m: &M, opts: &SerializeOptions) -> Result<Vec<u8>> {
    serialize_dyn_to_vec(m, opts)
}

/// [`serialize_to_vec`] for every message type (one body).
pub(crate) fn serialize_dyn_to_vec(m: &dyn DynMessage, opts: &SerializeOptions) -> Result<Vec<u8>> {
    if opts.skip_raw_data
        && let Some(copy) = m.without_payloads_dyn(opts.raw_data_threshold)
    {
        let opts = SerializeOptions {
            skip_raw_data: false,
            ..opts.clone()
        };
        return serialize_any_to_vec(&*copy, &opts);
    }
    serialize_any_to_vec(m, opts)
}

/// [`serialize_to_vec`] once the payloads to skip are gone (one copy for every message type).
fn serialize_any_to_vec(m: &dyn DynMessage, opts: &SerializeOptions) -> Result<Vec<u8>> {
    let (len, sizes) = plan(m, opts)?;
    let cap = usize::try_from(len)
        .map_err(|_| Error::LimitExceeded(format!("{len} bytes do not fit in memory")))?;
    if opts.threads() > 1
        && let Some(pool) = thread_pool(opts.threads())
    {
        return Ok(parallel_write::serialize_to_vec_parallel(
            m, cap, &sizes, &pool,
        ));
    }
    let mut out = Vec::new();
    out.try_reserve_exact(cap)
        .map_err(|_| Error::alloc_failed(len, "the serialized model"))?;
    encode_into_spare(m, &sizes, &mut out, cap);
    Ok(out)
}

/// Serializes `m` into a buffer of the caller's, asked for once the size is known: `alloc(len)`
/// returns exactly `len` writable bytes (e.g. the storage of a Python `bytes` object), which are
/// filled in place, without the intermediate buffer a copy of [`serialize_to_vec`]'s result
/// would cost. Large payloads are copied by `opts.num_threads` threads.
pub fn serialize_into<'b, M: Message>(
    m: &M,
    opts: &SerializeOptions,
    alloc: impl FnOnce(usize) -> Result<&'b mut [u8]>,
) -> Result<()> {
    match skip_payloads(m, opts) {
        Some((copy, opts)) => serialize_any_into(&copy, &opts, &mut Some(alloc)),
        None => serialize_any_into(m, opts, &mut Some(alloc)),
    }
}

/// [`serialize_into`] once the payloads to skip are gone (one copy for every message type but
/// the caller's allocator; `alloc` is called once).
fn serialize_any_into<'b>(
    m: &dyn DynMessage,
    opts: &SerializeOptions,
    alloc: &mut Option<impl FnOnce(usize) -> Result<&'b mut [u8]>>,
) -> Result<()> {
    let (len, sizes) = plan(m, opts)?;
    let cap = usize::try_from(len)
        .map_err(|_| Error::LimitExceeded(format!("{len} bytes do not fit in memory")))?;
    let out = alloc.take().expect("called once")(cap)?;
    if out.len() != cap {
        return Err(Error::InvalidArgument(format!(
            "serialize_into: the buffer has {} bytes, the message {cap}",
            out.len()
        )));
    }
    let pool = if opts.threads() > 1 {
        thread_pool(opts.threads())
    } else {
        None
    };
    parallel_write::serialize_into_slice(m, out, &sizes, pool.as_deref());
    Ok(())
}

/// Serializes `m` into `writer`; returns the number of bytes written.
pub fn serialize_to_writer<M: Message>(
    m: &M,
    writer: impl Write,
    opts: &SerializeOptions,
) -> Result<u64> {
    let mut sink = WriteSink::new(writer);
    let len = match skip_payloads(m, opts) {
        Some((copy, opts)) => serialize_any_to_spill(&copy, &opts, &mut sink),
        None => serialize_any_to_spill(m, opts, &mut sink),
    }?;
    sink.finish().map_err(|e| Error::io("<stream>", e))?;
    Ok(len)
}

/// Serializes `m` through `spill`; returns the number of bytes.
fn serialize_any_to_spill(
    m: &dyn DynMessage,
    opts: &SerializeOptions,
    spill: &mut dyn Spill,
) -> Result<u64> {
    let (len, sizes) = plan(m, opts)?;
    encode_streaming(m, &sizes, len, spill);
    Ok(len)
}

/// Serializes `m` to `path` atomically: a temporary file in the same directory is written,
/// synced and renamed over `path`; on any failure `path` is left as it was. Takes the
/// destination's save lock first, so concurrent saves of this library to one path (any
/// process) run one after the other (`docs/hardening.md`).
pub fn save_to_file<M: Message>(
    m: &M,
    path: impl AsRef<Path>,
    opts: &SerializeOptions,
) -> Result<()> {
    let path = path.as_ref();
    let _lock = crate::storage::SaveLock::for_file(path)?;
    save_to_file_locked(m, path, opts, true)
}

/// [`save_to_file`] for a caller that already holds the destination's save lock (the commit of
/// a save with external data): a second lock from the same process would wait for itself.
/// `sync`: fsync the file before it replaces the old one.
pub(crate) fn save_to_file_locked<M: Message>(
    m: &M,
    path: &Path,
    opts: &SerializeOptions,
    sync: bool,
) -> Result<()> {
    match skip_payloads(m, opts) {
        Some((copy, opts)) => save_any_to_file(&copy, path, &opts, sync),
        None => save_any_to_file(m, path, opts, sync),
    }
}

/// [`save_to_file`] once the payloads to skip are gone (one copy for every message type).
fn save_any_to_file(
    m: &dyn DynMessage,
    path: &Path,
    opts: &SerializeOptions,
    sync: bool,
) -> Result<()> {
    let (len, sizes) = plan(m, opts)?;
    let mut out = AtomicFile::create_with(path, sync)?;
    let pool = if opts.threads() > 1 {
        thread_pool(opts.threads())
    } else {
        None
    };
    // Payloads written at their offsets (in parallel, and past the page cache when large: see
    // `storage::write_pieces`), or everything in order through one buffer.
    if pool.is_some() || len >= crate::storage::DIRECT_MIN_BYTES {
        parallel_write::write_file_parallel(m, len, &sizes, out.file(), path, pool.as_deref())?;
        return out.commit();
    }
    {
        let mut sink = WriteSink::new(out.file());
        encode_streaming(m, &sizes, len, &mut sink);
        sink.finish().map_err(|e| Error::io(path, e))?;
    }
    out.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::DecodeErrorKind;
    use crate::wire::message::decode_top;

    /// A model whose last top-level field is its graph of `nodes` nodes.
    fn model_bytes(nodes: usize) -> Vec<u8> {
        let mut m = ModelProto::new();
        m.set_ir_version(8);
        let g = m.mutable_graph();
        for i in 0..nodes {
            let n = g.add_node();
            n.set_op_type("Relu");
            n.add_input(format!("x{i}"));
            n.add_output(format!("x{}", i + 1));
        }
        m.serialize_to_vec()
    }

    /// A parse cuts sub-message boxes and lists past their inline slots from its blocks; a
    /// mutation that grows a list or replaces a box uses the heap.
    #[test]
    fn parsed_boxes_and_spilled_lists_live_in_the_parse_blocks() {
        use crate::proto::{AttributeProto, TypeProto, ValueInfoProto};
        use crate::wire::MsgBox;
        let mut m = ModelProto::new();
        let g = m.mutable_graph();
        for i in 0..20i64 {
            let n = g.add_node();
            n.add_input(format!("in{i}"));
            if i % 2 == 0 {
                n.add_input("scale");
                n.add_input("bias");
            }
            let a: &mut AttributeProto = n.add_attribute();
            a.set_name("perm");
            a.set_ints([i, 1, 2]);
            a.mutable_t().set_dims([1]);
            let v: &mut ValueInfoProto = g.add_value_info();
            let d = v
                .mutable_type()
                .mutable_tensor_type()
                .mutable_shape()
                .add_dim();
            d.set_dim_value(i);
        }
        let mut m: ModelProto =
            parse_from_bytes(&m.serialize_to_vec(), &ParseOptions::default()).unwrap();
        let g = m.graph.as_deref_mut().unwrap();
        let ty: &MsgBox<TypeProto> = g.value_info[3].r#type.as_ref().unwrap();
        assert!(MsgBox::in_block(ty));
        let Some(crate::proto::TypeProtoValue::TensorType(tensor)) = &ty.value else {
            panic!("tensor type")
        };
        assert!(MsgBox::in_block(tensor.shape.as_ref().unwrap()));
        assert!(MsgBox::in_block(g.node[5].attribute[0].t.as_ref().unwrap()));
        assert!(g.node[4].input.in_block() && !g.node[5].input.spilled());
        let ints = &mut g.node[5].attribute[0].ints;
        assert!(ints.in_block() && ints.capacity() == 3);
        ints.push(9);
        assert!(ints.spilled() && !ints.in_block());
        assert_eq!(ints[..], [5, 1, 2, 9]);
        g.value_info[4].set_type(TypeProto::new());
        assert!(!MsgBox::in_block(g.value_info[4].r#type.as_ref().unwrap()));
    }

    #[test]
    fn reading_through_overruns_fails_at_the_end_wherever_the_cut_falls() {
        let bytes = model_bytes(300);
        let opts = ParseOptions::default();
        let whole: ModelProto = parse_bytes(&bytes, &opts, true).unwrap();
        assert_eq!(
            whole,
            parse_from_bytes::<ModelProto>(&bytes, &opts).unwrap()
        );
        for cut in 1..=16 {
            let input = &bytes[..bytes.len() - cut];
            // The usual parse stops at the graph's length prefix (byte 2 or 3) ...
            let Err(Error::Decode(stop)) = parse_from_bytes::<ModelProto>(input, &opts) else {
                panic!("a model cut by {cut} bytes parsed");
            };
            assert!(stop.offset < 8, "{stop}");
            // ... reading through reports the same error (without the field path), after
            // walking every node.
            let Err(Error::Decode(through)) = parse_bytes::<ModelProto>(input, &opts, true) else {
                panic!("a model cut by {cut} bytes parsed");
            };
            assert_eq!((&through.kind, through.offset), (&stop.kind, stop.offset));
            assert!(matches!(
                through.kind,
                DecodeErrorKind::LengthPastEnd { .. }
            ));
            // The walk itself: the reader ends at the cut with every whole node parsed.
            let cfg = DecodeConfig {
                read_through_overruns: true,
                ..DecodeConfig::default()
            };
            let mut r = Reader::new(input, &cfg);
            let mut m = ModelProto::new();
            let _ = decode_top(&mut m, &mut r);
            assert!(
                r.position() + 16 >= input.len(),
                "stopped at {}",
                r.position()
            );
            assert!(
                m.graph().node.len() >= 298,
                "{} nodes",
                m.graph().node.len()
            );
            assert!(r.take_overrun().is_some());
        }
    }
}
