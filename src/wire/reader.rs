//! A parse in progress: [`Reader`], a wire [`Cursor`] and what the parse does with the values it
//! reads (budget, payload placement, string sharing, metadata blocks, C++ hooks).

use std::any::Any;
use std::collections::HashMap;
use std::ptr::NonNull;

use super::VARINT;
use super::cursor::Cursor;
use super::repeated::RepeatedField;
use crate::bytes::{
    ByteSpan, INLINE_CAPACITY, Owner, ProtoString, StringHook, ThinOwner, UnknownFields,
};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::mem::{ChunkRegion, MAP_MIN_BYTES, PayloadPool};

/// Copied payloads of at least this size are released from a mapped source.
const RELEASE_MIN_BYTES: usize = 1 << 20;

type DResult<T> = Result<T, Box<DecodeError>>;

/// How tensor payloads (`raw_data`) are taken from the input.
#[derive(Clone)]
pub enum PayloadMode {
    /// Copied, each to an address aligned to [`DecodeConfig::alignment`].
    Copy,
    /// Borrowed from the input; `owner` (if any) keeps the input alive. With an owner, a payload
    /// whose address is not aligned to [`DecodeConfig::alignment`] is copied instead (an aligned
    /// copy, [`ByteSpan::is_realigned`]). Without an owner the caller keeps the input alive and
    /// its layout decides the alignment (only reachable through `unsafe` constructors).
    Borrow {
        /// Token that keeps the input bytes alive.
        owner: Option<Owner>,
    },
}

/// Called with (offset in the input, length) of each large payload once it is copied (a file
/// mapping drops those pages from the process).
pub type ReleaseSource = std::sync::Arc<dyn Fn(usize, usize) + Send + Sync>;

/// Fills the destination with the input's bytes at an offset (a positional read of the file
/// the input maps); `false` when it could not.
pub type ReadSource = std::sync::Arc<dyn Fn(usize, &mut [u8]) -> bool + Send + Sync>;

/// Deepest nesting a decode may be allowed (`max_recursion_depth`): deeper would risk the
/// native stack.
pub const MAX_RECURSION_DEPTH_LIMIT: u32 = 1000;

/// Settings of one decode.
#[derive(Clone)]
pub struct DecodeConfig {
    /// Maximum nesting of messages and groups below the top-level message.
    pub max_depth: u32,
    /// How payloads are taken.
    pub payload: PayloadMode,
    /// Payloads shorter than this are always copied (borrowing tiny ones costs more than it
    /// saves); also the size from which `skip_raw_data` drops payloads.
    pub raw_data_threshold: usize,
    /// Drop payloads of at least `raw_data_threshold` bytes (keep the structure only).
    pub skip_raw_data: bool,
    /// Largest accepted payload (0 = no limit).
    pub max_tensor_size_bytes: u64,
    /// When set, strings longer than the inline capacity point into the input instead of being
    /// copied; the token must keep the input alive and unmodified (see [`DecodeConfig::share_strings`]).
    pub(crate) string_owner: Option<ThinOwner>,
    /// Heap budget of the decoded structure (see [`metadata_budget`]): 0 = automatic,
    /// `u64::MAX` = no limit.
    pub max_metadata_bytes: u64,
    /// Every payload pointer handed out (copied, or borrowed with an owner) is a multiple of
    /// this (a power of two; default 64; copies are aligned to at least 16).
    pub alignment: usize,
    /// Copy mode: called after each payload of at least 1 MiB is copied.
    pub release_source: Option<ReleaseSource>,
    /// Copy mode: payloads of at least 2 MiB are read from here into their aligned home
    /// instead of copied from the input, so the input's pages of them are never touched (for a
    /// mapped file: no page faults, nothing to release); when it fails, they are copied. Also
    /// the source of the payloads a sparse input lacks (an image of the message with its
    /// large payloads left out).
    pub read_source: Option<ReadSource>,
    /// A length prefix that runs past the end of its enclosing message does not stop the
    /// parse: the value is read to that end and the parse fails when it is done (with the
    /// first such error, naming the top-level message but not the field path). The parse of an input cut at an unknown point then does the same
    /// work wherever the cut falls (ONNXCRY1's plaintext check: no timing signal of the
    /// padding byte that decides the cut).
    pub(crate) read_through_overruns: bool,
}

impl DecodeConfig {
    /// Lets long strings borrow from the input, kept alive by `owner`.
    ///
    /// # Safety
    /// `owner` must keep every input this config is used with alive, and those bytes must not be
    /// modified while it lives (payload ranges of an arena are disjoint from string bytes).
    pub(crate) unsafe fn share_strings(&mut self, owner: Owner) {
        self.string_owner = Some(ThinOwner::new(owner));
    }
}

/// Automatic metadata budget: this much ...
pub const AUTO_METADATA_BASE_BYTES: u64 = 16 << 20;
/// ... plus this many bytes per input byte.
pub const AUTO_METADATA_BYTES_PER_INPUT_BYTE: u64 = 32;

/// The metadata budget of a decode of `input_len` bytes: `max_metadata_bytes` when set, else
/// [`AUTO_METADATA_BASE_BYTES`] + [`AUTO_METADATA_BYTES_PER_INPUT_BYTE`] × `input_len`.
///
/// The budget bounds the memory of everything a decode allocates besides tensor payloads
/// (which are bounded by the input size and `max_tensor_size_bytes`): each embedded message is
/// charged its struct size plus a pointer and an allocation header, each string or bytes field
/// its length plus its container, each packed varint byte 8 bytes (one element), each packed
/// fixed-size and unknown-field byte 1 byte. Unpacked repeated scalars are not charged (at most
/// 8 bytes of memory per 2 bytes of input). Growing containers may hold up to twice what was
/// charged.
pub fn metadata_budget(max_metadata_bytes: u64, input_len: usize) -> u64 {
    if max_metadata_bytes != 0 {
        return max_metadata_bytes;
    }
    AUTO_METADATA_BASE_BYTES
        .saturating_add(AUTO_METADATA_BYTES_PER_INPUT_BYTE.saturating_mul(input_len as u64))
}

/// Charge of an embedded message of type `M` (struct, box pointer, allocation header).
#[inline(always)]
const fn message_charge<M>() -> u64 {
    (std::mem::size_of::<M>() + 8 + 16) as u64
}

/// Charge of a string or bytes field of `len` bytes (the value in its container, its bytes and
/// their allocation header).
#[inline(always)]
const fn string_charge(len: usize) -> u64 {
    (std::mem::size_of::<ProtoString>() + 16 + len) as u64
}

impl Default for DecodeConfig {
    fn default() -> Self {
        Self {
            max_depth: 100,
            payload: PayloadMode::Copy,
            raw_data_threshold: 0,
            skip_raw_data: false,
            max_tensor_size_bytes: 0,
            string_owner: None,
            max_metadata_bytes: 0,
            alignment: 64,
            release_source: None,
            read_source: None,
            read_through_overruns: false,
        }
    }
}

/// A parse in progress: a wire [`Cursor`] over the input, and what the parse does with the
/// values it reads — the metadata budget it charges, the aligned homes of the payloads it copies
/// or borrows, the metadata blocks its lists, boxes and strings are cut from, the messages
/// parsed ahead of time in parallel, and the hooks of the C++ classes' parse.
// `repr(C)`, the cursor and the budget first: the fields every read touches sit at small
// offsets, which x86-64 addresses with one displacement byte instead of four (the generated
// parse code reads them everywhere: 3.9 KB of the minimal library when Rust's order put them
// last).
#[repr(C)]
pub struct Reader<'a> {
    cur: Cursor<'a>,
    /// What is left of the metadata budget.
    meta_left: u64,
    config: &'a DecodeConfig,
    /// When set, strings and payloads come from this hook (the C++ classes' parse; see
    /// [`Reader::recycle_from`]).
    strings: Option<NonNull<dyn StringHook>>,
    /// When not null, the memory of a message's old content that sub-messages reuse (the
    /// generated `Recycler` of `crate::proto`, read by its code only).
    recycler: *mut (),
    /// When not 0, see [`Reader::sparse_input`].
    sparse_min: usize,
    /// Where the chunks of the repeated message fields this reader fills come from.
    chunks: ChunkRegion,
    /// Aligned homes of the payloads this reader copies.
    pool: PayloadPool,
    /// The whole metadata budget (for error messages and parallel shares).
    meta_budget: u64,
    /// Messages parsed ahead of time (in parallel), keyed by the position of their length
    /// prefix; each value is a `(Result<M, Box<DecodeError>>, u64)`: the message and the
    /// metadata bytes its parse was charged.
    preparsed: Option<HashMap<usize, Box<dyn Any + Send>>>,
}

// SAFETY: the reader's own fields are `Send`; its hook and recycler pointers are unset except
// in a reader made by `recycle_from`, whose caller keeps it on its thread (its contract).
unsafe impl Send for Reader<'_> {}

impl<'a> Reader<'a> {
    /// A reader over all of `buf` (payloads are copied unless `config` borrows with an owner).
    ///
    /// A `PayloadMode::Borrow` without owner is refused here (use [`Reader::new_unowned`]).
    pub fn new(buf: &'a [u8], config: &'a DecodeConfig) -> Self {
        assert!(
            !matches!(config.payload, PayloadMode::Borrow { owner: None }),
            "borrowing without an owner needs Reader::new_unowned"
        );
        Self::make(buf, config)
    }

    /// A reader whose payloads may borrow from `buf` without an owner token.
    ///
    /// # Safety
    /// `buf` must outlive every `ByteSpan` produced from it (and their clones).
    pub unsafe fn new_unowned(buf: &'a [u8], config: &'a DecodeConfig) -> Self {
        Self::make(buf, config)
    }

    fn make(buf: &'a [u8], config: &'a DecodeConfig) -> Self {
        let budget = metadata_budget(config.max_metadata_bytes, buf.len());
        Self {
            cur: Cursor::new(buf, config.max_depth, config.read_through_overruns),
            config,
            meta_left: budget,
            meta_budget: budget,
            preparsed: None,
            pool: PayloadPool::new(config.alignment.max(16), buf.len()),
            chunks: ChunkRegion::new(),
            strings: None,
            recycler: std::ptr::null_mut(),
            sparse_min: 0,
        }
    }

    /// A reader over `buf[start..end]` at nesting `depth` with a metadata budget of `budget`
    /// bytes (used to parse parts in parallel).
    pub(crate) fn sub_reader(
        &self,
        start: usize,
        end: usize,
        depth: u32,
        budget: u64,
    ) -> Reader<'a> {
        let config = self.config;
        let mut cur = Cursor::part(
            self.cur.buf,
            start,
            end,
            config.max_depth.saturating_sub(depth),
            config.max_depth,
            config.read_through_overruns,
        );
        cur.base = self.cur.base;
        Reader {
            cur,
            config,
            meta_left: budget,
            meta_budget: budget,
            preparsed: None,
            pool: PayloadPool::new(config.alignment.max(16), end.saturating_sub(start)),
            chunks: ChunkRegion::new(),
            // Parts parsed in parallel (on other threads) make their own strings and messages.
            strings: None,
            recycler: std::ptr::null_mut(),
            sparse_min: self.sparse_min,
        }
    }

    /// Makes this reader decode strings as `std::string`s taken from `strings`, and hand the
    /// generated message code `recycler` (a `crate::proto::Recycler`) to take sub-messages
    /// from: the C++ classes' parse, which reuses the memory of the content it replaces.
    ///
    /// # Safety
    /// Both outlive the reader and are not accessed otherwise while it is used; `recycler` is
    /// a live `crate::proto::Recycler`; the reader stays on this thread.
    pub(crate) unsafe fn recycle_from(
        &mut self,
        strings: &mut (dyn StringHook + 'static),
        recycler: *mut (),
    ) {
        self.strings = Some(NonNull::from(strings));
        self.recycler = recycler;
    }

    /// The hook of [`Reader::recycle_from`], when set.
    #[inline]
    fn hook(&mut self) -> Option<&mut dyn StringHook> {
        // SAFETY: `recycle_from`'s contract: the hook outlives the reader, is used through it
        // only, and on this thread; the reference borrows the reader mutably, so it is the only
        // one.
        self.strings.map(|mut h| unsafe { h.as_mut() })
    }

    /// Makes this reader take its input for a sparse image of [`DecodeConfig::read_source`]
    /// (`codec::sparse`) without the payloads of at least `min` (> 0) bytes: those are read from
    /// the source, in every payload mode, and a failed read fails the parse.
    pub(crate) fn sparse_input(&mut self, min: usize) {
        self.sparse_min = min;
    }

    /// The `crate::proto::Recycler` of [`Reader::recycle_from`], or null.
    #[inline]
    pub(crate) fn recycler(&self) -> *mut () {
        self.recycler
    }

    /// The whole metadata budget of this reader.
    pub(crate) fn metadata_budget(&self) -> u64 {
        self.meta_budget
    }

    /// Metadata bytes charged so far.
    pub fn metadata_used(&self) -> u64 {
        self.meta_budget - self.meta_left
    }

    /// Charges `n` bytes to the metadata budget; the error points at `at`.
    #[inline(always)]
    fn charge(&mut self, n: u64, at: usize) -> DResult<()> {
        match self.meta_left.checked_sub(n) {
            Some(left) => {
                self.meta_left = left;
                Ok(())
            }
            None => Err(self.metadata_error(at)),
        }
    }

    #[cold]
    fn metadata_error(&self, at: usize) -> Box<DecodeError> {
        self.err(
            DecodeErrorKind::MetadataLimit {
                limit: self.meta_budget,
            },
            at,
        )
    }

    /// Installs messages parsed ahead of time, keyed by the position of their length prefix.
    pub(crate) fn set_preparsed(&mut self, map: HashMap<usize, Box<dyn Any + Send>>) {
        self.preparsed = Some(map);
    }

    /// The decode settings.
    pub fn config(&self) -> &DecodeConfig {
        self.config
    }

    /// Reads a `string` / `bytes` field (charged to the metadata budget). Inlined into every
    /// field's decoder, so that a short string is built in its destination, not moved there
    /// (out of line in size-optimized builds, `cfg(onnxl_small)`: see build.rs).
    #[cfg_attr(not(onnxl_small), inline(always))]
    #[cfg_attr(onnxl_small, inline(never))]
    pub fn read_string(&mut self) -> DResult<ProtoString> {
        match self.string_source()? {
            StringSource::Short(window, len) => Ok(ProtoString::inline_from_window(window, len)),
            StringSource::Other(bytes, at) => {
                let mut s = ProtoString::new();
                self.string_value_into(bytes, at, &mut s)?;
                Ok(s)
            }
        }
    }

    /// [`Reader::read_string`] into an optional string field, in place (see
    /// [`Reader::read_string_in`]).
    #[cfg_attr(not(onnxl_small), inline(always))]
    #[cfg_attr(onnxl_small, inline(never))]
    pub fn read_string_into(&mut self, slot: &mut Option<ProtoString>) -> DResult<()> {
        self.read_string_in(|| slot.get_or_insert_with(ProtoString::new))
    }

    /// [`Reader::read_string`] appended to a repeated string field, in place (see
    /// [`Reader::read_string_in`]).
    #[cfg_attr(not(onnxl_small), inline(always))]
    #[cfg_attr(onnxl_small, inline(never))]
    pub fn push_string<V: GrowableList<Item = ProtoString>>(
        &mut self,
        list: &mut V,
    ) -> DResult<()> {
        self.read_string_in(|| list.push_with(ProtoString::new))
    }

    /// [`Reader::read_string`] into the string `slot()` returns (called once, when the value is
    /// read without error). A short string is copied from the input straight into it
    /// (`ProtoString::set_inline_from_window`), never built elsewhere and moved.
    #[cfg_attr(not(onnxl_small), inline(always))]
    #[cfg_attr(onnxl_small, inline(never))]
    pub fn read_string_in<'s>(
        &mut self,
        slot: impl FnOnce() -> &'s mut ProtoString,
    ) -> DResult<()> {
        match self.string_source()? {
            StringSource::Short(window, len) => slot().set_inline_from_window(window, len),
            StringSource::Other(bytes, at) => self.string_value_into(bytes, at, slot())?,
        }
        Ok(())
    }

    /// Reads and charges a string's bytes: a short one as the fixed-size window of the input
    /// that starts with it (the window may run past the string, not past the input).
    #[cfg_attr(not(onnxl_small), inline(always))]
    #[cfg_attr(onnxl_small, inline(never))]
    fn string_source(&mut self) -> DResult<StringSource<'a>> {
        let at = self.cur.pos;
        let bytes = self.read_bytes()?;
        self.charge(string_charge(bytes.len()), at)?;
        if bytes.len() <= INLINE_CAPACITY && self.strings.is_none() {
            let start = self.cur.pos - bytes.len();
            if let Some(window) = self.cur.buf.get(start..start + INLINE_CAPACITY) {
                let window = window.try_into().expect("window of INLINE_CAPACITY bytes");
                return Ok(StringSource::Short(window, bytes.len()));
            }
        }
        Ok(StringSource::Other(bytes, at))
    }

    /// The value of a string other than [`StringSource::Short`] (`bytes`, read at `at`), written
    /// into `dest`: built where it goes, not returned and then moved (the stores that build it
    /// and the loads of the move do not line up, which stalls the CPU on every long name). On
    /// an error `dest` is left as it was.
    #[inline]
    fn string_value_into(
        &mut self,
        bytes: &[u8],
        at: usize,
        dest: &mut ProtoString,
    ) -> DResult<()> {
        if let Some(hook) = self.hook() {
            *dest = hook.string(bytes);
            return Ok(());
        }
        self.long_string_into(bytes, at, dest)
    }

    /// A string longer than the inline capacity (or at the very end of the input), written into
    /// `dest`: borrowed from the input when the decode settings share strings, else copied
    /// (fallibly) into the reader's metadata blocks, or on its own when they cannot hold it.
    #[inline(never)]
    fn long_string_into(&self, bytes: &[u8], at: usize, dest: &mut ProtoString) -> DResult<()> {
        *dest = match &self.config.string_owner {
            // SAFETY: `share_strings`' contract: the owner keeps the input alive and these bytes
            // unmodified.
            Some(owner) => unsafe {
                ProtoString::from_owned_by(bytes.as_ptr(), bytes.len(), owner)
            },
            None => match (bytes.len() > INLINE_CAPACITY)
                .then(|| self.chunks.copy_bytes(bytes))
                .flatten()
            {
                Some(copy) => ProtoString::from_block(copy),
                None => ProtoString::try_from_bytes(bytes)
                    .map_err(|_| self.alloc_error(bytes.len(), at))?,
            },
        };
        Ok(())
    }

    /// Reads a tensor payload, copied or borrowed per the decode settings. Returns `None` when
    /// `skip_raw_data` drops it.
    pub fn read_payload(&mut self) -> DResult<Option<ByteSpan>> {
        let start = self.cur.pos;
        let bytes = self.read_bytes()?;
        let cfg = self.config;
        let len = bytes.len();
        if cfg.max_tensor_size_bytes > 0 && len as u64 > cfg.max_tensor_size_bytes {
            return Err(self.err(
                DecodeErrorKind::TensorTooLarge {
                    size: len as u64,
                    limit: cfg.max_tensor_size_bytes,
                },
                start,
            ));
        }
        if cfg.skip_raw_data && len >= cfg.raw_data_threshold && len > 0 {
            return Ok(None);
        }
        if self.sparse_min != 0 && len >= self.sparse_min {
            return self.read_sparse(bytes, start).map(Some);
        }
        let large = len >= cfg.raw_data_threshold && len > 0;
        match &cfg.payload {
            PayloadMode::Borrow { owner: Some(o) } if large => {
                if (bytes.as_ptr() as usize) % cfg.alignment.max(1) == 0 {
                    // SAFETY: the owner keeps the input (and so `bytes`) alive and unmodified.
                    return Ok(Some(unsafe {
                        ByteSpan::from_owner_raw(bytes.as_ptr(), len, o.clone())
                    }));
                }
                let span = self.copy_payload(bytes, true, start)?;
                self.release(bytes);
                Ok(Some(span))
            }
            // SAFETY: this mode is only reachable through `new_unowned`, whose caller promised
            // that the input outlives every span made from it.
            PayloadMode::Borrow { owner: None } if large => Ok(Some(unsafe {
                ByteSpan::from_raw_parts(bytes.as_ptr(), len)
            })),
            // The C++ classes' parse: the bytes go straight into a `std::string`.
            _ if let Some(hook) = self.hook() => Ok(Some(hook.payload(bytes))),
            _ => {
                let span = self.copy_payload(bytes, false, start)?;
                self.release(bytes);
                Ok(Some(span))
            }
        }
    }

    /// A payload missing from a sparse input, read from its source: into a `std::string` for
    /// the C++ classes, else into an aligned home; the error points at `at`.
    #[inline(never)]
    fn read_sparse(&mut self, bytes: &[u8], at: usize) -> DResult<ByteSpan> {
        let offset = bytes.as_ptr() as usize - self.cur.buf.as_ptr() as usize;
        let mut ok = false;
        let config = self.config;
        let Some(read) = &config.read_source else {
            return Err(self.err(DecodeErrorKind::Truncated, at));
        };
        let span = match self.hook() {
            None => self
                .pool
                .fill(bytes.len(), false, |dst| ok = read(offset, dst)),
            Some(hook) => hook
                .payload_read(bytes.len(), offset, &**read)
                .map(|(span, read_ok)| {
                    ok = read_ok;
                    span
                }),
        };
        let span = span.ok_or_else(|| self.alloc_error(bytes.len(), at))?;
        if ok {
            Ok(span)
        } else {
            Err(self.err(DecodeErrorKind::Truncated, at))
        }
    }

    /// Hands the input range of a payload that was just copied to `release_source` (large
    /// payloads only), so that its pages need not stay resident.
    fn release(&self, bytes: &[u8]) {
        if let Some(release) = &self.config.release_source
            && bytes.len() >= RELEASE_MIN_BYTES
        {
            release(
                bytes.as_ptr() as usize - self.cur.buf.as_ptr() as usize,
                bytes.len(),
            );
        }
    }

    /// An aligned copy of a payload (see [`PayloadPool`]), read from
    /// [`DecodeConfig::read_source`] when there is one and the payload is large; the error
    /// points at `at`.
    fn copy_payload(&mut self, bytes: &[u8], realigned: bool, at: usize) -> DResult<ByteSpan> {
        if let Some(read) = &self.config.read_source
            && bytes.len() >= MAP_MIN_BYTES
        {
            let offset = bytes.as_ptr() as usize - self.cur.buf.as_ptr() as usize;
            let span = self.pool.fill(bytes.len(), realigned, |dst| {
                if !read(offset, dst) {
                    dst.copy_from_slice(bytes);
                }
            });
            return span.ok_or_else(|| self.alloc_error(bytes.len(), at));
        }
        match self.pool.copy(bytes, realigned) {
            Some(span) => Ok(span),
            None => Err(self.alloc_error(bytes.len(), at)),
        }
    }

    /// Reads an embedded message (length-delimited) and merges it into `m`.
    #[inline]
    pub fn read_message<M: super::Message>(&mut self, m: &mut M) -> DResult<()> {
        let len_at = self.cur.pos;
        let len = self.read_len()?;
        if self.cur.depth_left == 0 {
            return Err(self.err(
                DecodeErrorKind::RecursionLimit(self.config.max_depth),
                len_at,
            ));
        }
        self.charge(message_charge::<M>(), len_at)?;
        let saved_limit = self.cur.limit;
        self.cur.limit = self.cur.pos + len;
        self.cur.depth_left -= 1;
        let r = m.merge_from(self);
        self.cur.depth_left += 1;
        self.cur.limit = saved_limit;
        r
    }

    /// Takes a message parsed ahead of time for the field at the current position (just after
    /// its tag), skipping its bytes; `None` when there is none — or when its parse ran out of
    /// its share of the metadata budget, or what it was charged does not fit in what is left:
    /// the caller then parses it in place, which fails exactly where a sequential parse does.
    #[inline]
    pub fn take_preparsed<M: 'static>(&mut self) -> Option<DResult<M>> {
        let map = self.preparsed.as_mut()?;
        let boxed = map.remove(&self.cur.pos)?;
        let (result, used) = *boxed.downcast::<(DResult<M>, u64)>().ok()?;
        if let Err(e) = &result
            && matches!(e.kind, DecodeErrorKind::MetadataLimit { .. })
        {
            return None;
        }
        let charge = used + message_charge::<M>();
        if charge > self.meta_left {
            return None;
        }
        self.meta_left -= charge;
        // The length was validated when the part was scheduled; re-read to advance.
        if let Err(e) = self.read_bytes() {
            return Some(Err(e));
        }
        Some(result)
    }

    /// The sub-message of an optional field, made first (fallibly: `OutOfMemory`) when absent.
    #[inline]
    pub fn message_slot<'m, M: super::Message>(
        &self,
        slot: &'m mut Option<super::MsgBox<M>>,
    ) -> DResult<&'m mut M> {
        if slot.is_none() {
            *slot = Some(self.new_boxed()?);
        }
        Ok(slot.as_deref_mut().expect("just made"))
    }

    /// Parses a sub-message into an optional field (merging into the message already there, as
    /// protobuf does), making it first (fallibly) when absent.
    #[inline]
    pub fn read_message_into<M: super::Message>(
        &mut self,
        slot: &mut Option<super::MsgBox<M>>,
    ) -> DResult<()> {
        let m = self.message_slot(slot)?;
        self.read_message(m)
    }

    /// Allocates the box of the rare fields of the message being parsed when it is not (a rare
    /// field was met), or `OutOfMemory`.
    #[inline]
    pub fn alloc_rare<T: super::RareFields>(&self, rare: &mut super::Rare<T>) -> DResult<()> {
        if !rare.is_allocated() {
            return self.alloc_rare_box(rare);
        }
        Ok(())
    }

    /// The allocation of [`Reader::alloc_rare`], out of line: most messages never allocate
    /// their box, and the parse loop of each message stays small.
    #[cold]
    #[inline(never)]
    fn alloc_rare_box<T: super::RareFields>(&self, rare: &mut super::Rare<T>) -> DResult<()> {
        let b = crate::error::try_box(rare.unallocated_value())
            .map_err(|l| self.alloc_error(l.size(), self.cur.tag_start))?;
        rare.put(b);
        Ok(())
    }

    /// Reads preset string `index` (of `RareFields::PRESET_VALUES`), the rare string
    /// `field`, of a message with presets: a value that a preset holds, while the fields are
    /// unallocated or a preset, points them to that preset, allocating nothing; any other value
    /// goes into the box, allocated as by [`Reader::alloc_rare`]. Out of line: inlined, it
    /// makes the parse loop of `NodeProto` slower for every node (measured).
    #[inline(never)]
    pub fn read_preset_string<T: super::RareFields>(
        &mut self,
        rare: &mut super::Rare<T>,
        index: usize,
        field: fn(&mut T) -> &mut Option<ProtoString>,
    ) -> DResult<()> {
        let source = self.string_source()?;
        let value = match &source {
            StringSource::Short(window, len) => &window[..*len],
            StringSource::Other(bytes, _) => bytes,
        };
        if rare.try_set_preset_string(index, value) {
            return Ok(());
        }
        self.alloc_rare(rare)?;
        let fields = rare.get_mut().expect("allocated above");
        let slot = field(fields).get_or_insert_with(ProtoString::new);
        match source {
            StringSource::Short(window, len) => slot.set_inline_from_window(window, len),
            StringSource::Other(bytes, at) => self.string_value_into(bytes, at, slot)?,
        }
        Ok(())
    }

    /// A boxed empty message (a sub-message or oneof member being parsed), or `OutOfMemory`:
    /// one the parse reuses (see `Reader::recycle_from`) when there is one, else one cut from
    /// the parse's blocks (the heap when they have no room).
    #[inline]
    pub fn new_boxed<M: super::Message>(&self) -> DResult<super::MsgBox<M>> {
        if !self.recycler.is_null()
            && let Some(b) = M::take_recycled(self)
        {
            return Ok(b);
        }
        super::MsgBox::try_new_in(M::default(), &self.chunks)
            .map_err(|l| self.alloc_error(l.size(), self.cur.tag_start))
    }

    /// Appends an empty element to a repeated message field for the value whose tag was just
    /// read (a new chunk sized by the run of values ahead, see [`Reader::run_length`]), or
    /// `OutOfMemory`.
    #[cfg_attr(not(onnxl_small), inline(always))]
    #[cfg_attr(onnxl_small, inline(never))]
    pub fn push_message<'f, M: Default>(
        &self,
        field: &'f mut RepeatedField<M>,
        tag: u32,
    ) -> DResult<&'f mut M> {
        let at = self.cur.tag_start;
        field
            .try_push_default_sized_in(|max| self.run_length(tag, max), Some(&self.chunks))
            .map_err(|l| self.alloc_error(l.size(), at))
    }

    /// Appends a message parsed ahead of time to a repeated field, or `OutOfMemory`.
    #[inline]
    pub fn push_parsed<M: Default>(&self, field: &mut RepeatedField<M>, m: M) -> DResult<()> {
        field
            .try_push(m, Some(&self.chunks))
            .map_err(|l| self.alloc_error(l.size(), self.cur.tag_start))
    }

    /// Records a closed-enum value the schema does not know as an unknown varint field, the way
    /// protobuf (upb) does: validity is judged on the low 32 bits, and the field is re-encoded
    /// canonically with the full 64-bit value that was read. A refused allocation is
    /// `OutOfMemory`.
    pub fn push_unknown_enum(
        &self,
        unknown: &mut UnknownFields,
        field: u32,
        value: u64,
    ) -> DResult<()> {
        let mut buf = [0u8; 15];
        let mut n = 0;
        for mut v in [super::tag(field, VARINT) as u64, value] {
            while v >= 0x80 {
                buf[n] = v as u8 | 0x80;
                v >>= 7;
                n += 1;
            }
            buf[n] = v as u8;
            n += 1;
        }
        unknown
            .try_push_raw(&buf[..n])
            .map_err(|()| self.alloc_error(n, self.cur.tag_start))
    }

    /// Runs `f` (the parse of a sub-message of a field that closes a cycle of the schema) on a
    /// new stack segment when the stack runs low (see [`super::stack`]); a segment that cannot
    /// be mapped is `OutOfMemory`.
    #[cfg_attr(not(onnxl_small), inline(always))]
    #[cfg_attr(onnxl_small, inline(never))]
    pub fn guarded<R>(&mut self, f: impl FnOnce(&mut Self) -> DResult<R>) -> DResult<R> {
        match super::try_guard_stack(|| f(self)) {
            Ok(r) => r,
            Err(bytes) => Err(self.alloc_error(bytes, self.cur.tag_start)),
        }
    }

    /// Makes room in `v` for the run of field `tag` values that starts here (see
    /// [`Reader::run_length`]) when `v` is full: exactly the run when `v` has no memory of its own
    /// yet (empty, or full inline slots), else at least the run (amortized growth). A refused
    /// allocation is `OutOfMemory`.
    #[cfg_attr(not(onnxl_small), inline(always))]
    #[cfg_attr(onnxl_small, inline(never))]
    pub fn reserve_run<V: GrowableList>(&self, v: &mut V, tag: u32) -> DResult<()> {
        if v.len() == v.capacity() {
            return self.grow_for_run(v, tag);
        }
        Ok(())
    }

    #[inline(never)]
    fn grow_for_run<V: GrowableList>(&self, v: &mut V, tag: u32) -> DResult<()> {
        // Never more than what is left of the metadata budget: each element is charged when it is
        // parsed, and a refused parse must not have reserved more than the budget first.
        let affordable = self.meta_left / V::ELEMENT_BYTES.max(1) as u64;
        let max = usize::try_from(affordable).unwrap_or(usize::MAX).max(1);
        let n = self.run_length(tag, max);
        self.check_room(v, n)?;
        v.try_reserve_for(n, !v.spilled(), self)
            .map_err(|_| self.alloc_error(n.saturating_mul(V::ELEMENT_BYTES), self.cur.tag_start))
    }

    /// Makes room in `v` for `n` more elements (the elements of a packed field just read), or
    /// `OutOfMemory`.
    #[inline]
    pub fn reserve_elements<V: GrowableList>(&self, v: &mut V, n: usize) -> DResult<()> {
        self.check_room(v, n)?;
        v.try_reserve_for(n, !v.spilled(), self)
            .map_err(|_| self.alloc_error(n.saturating_mul(V::ELEMENT_BYTES), self.cur.tag_start))
    }

    /// `TooManyElements` (at the field's tag) when `n` more elements would not fit in `v`, before
    /// anything is reserved.
    #[inline]
    fn check_room<V: GrowableList>(&self, v: &V, n: usize) -> DResult<()> {
        if n > V::MAX_LEN - v.len() {
            return Err(self.too_many_elements::<V>());
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn too_many_elements<V: GrowableList>(&self) -> Box<DecodeError> {
        self.err(
            DecodeErrorKind::TooManyElements {
                limit: V::MAX_LEN as u64,
            },
            self.cur.tag_start,
        )
    }

    /// Reads a packed run of varints into `v`, converting each with `conv`; the room for all of
    /// them is reserved first (fallibly: a refused allocation is `OutOfMemory`).
    #[inline]
    pub fn read_packed_varints_into<V: GrowableList>(
        &mut self,
        v: &mut V,
        conv: impl Fn(u64) -> V::Item,
    ) -> DResult<()> {
        let len = self.packed_varints_start()?;
        let body = &self.cur.buf[self.cur.pos..self.cur.pos + len];
        // One element per byte below 0x80 (the last byte of each varint).
        let count = body.iter().filter(|&&b| b < 0x80).count();
        self.reserve_elements(v, count)?;
        self.cur.packed_varints_body(len, |x| v.push(conv(x)))
    }

    /// Reads a packed run of varints, calling `f` for each.
    #[inline]
    pub fn read_packed_varints(&mut self, f: impl FnMut(u64)) -> DResult<()> {
        let len = self.packed_varints_start()?;
        self.cur.packed_varints_body(len, f)
    }

    /// Reads the length of a packed varint run and charges it; returns the length.
    #[inline]
    fn packed_varints_start(&mut self) -> DResult<usize> {
        let at = self.cur.pos;
        let len = self.read_len()?;
        // At most one element per byte, each up to 8 bytes in memory.
        self.charge(8 * len as u64, at)?;
        Ok(len)
    }

    /// Reads a packed run of fixed-size elements of `n` bytes; returns its bytes after checking
    /// that the length is a multiple of `n`.
    #[inline]
    pub fn read_packed_fixed(&mut self, n: usize) -> DResult<&'a [u8]> {
        let at = self.cur.pos;
        let bytes = self.read_bytes()?;
        if bytes.len() % n != 0 {
            return Err(self.err(DecodeErrorKind::BadPackedLength, at));
        }
        self.charge(bytes.len() as u64, at)?;
        Ok(bytes)
    }

    /// Skips the field whose tag was just read, appending its exact bytes (tag included) to
    /// `unknown` (fallibly: a refused allocation is `OutOfMemory`).
    pub fn skip_unknown(&mut self, tag: u32, unknown: &mut UnknownFields) -> DResult<()> {
        let start = self.cur.tag_start;
        self.skip_value(tag)?;
        self.charge((self.cur.pos - start) as u64, start)?;
        unknown
            .try_push_raw(&self.cur.buf[start..self.cur.pos])
            .map_err(|_| self.alloc_error(self.cur.pos - start, start))
    }

    /// [`Reader::skip_unknown`] into the unknown fields that a message keeps in its rare box
    /// (`unknown` projects the box's fields to them), allocating the box first. Out of line: an
    /// unknown field is rare, and the parse's loop over the known ones stays small.
    #[cold]
    #[inline(never)]
    pub fn skip_unknown_into_rare<T: super::RareFields>(
        &mut self,
        tag: u32,
        rare: &mut super::Rare<T>,
        unknown: fn(&mut T) -> &mut UnknownFields,
    ) -> DResult<()> {
        if T::SKIPS_PADDING && tag == super::PADDING_TAG {
            // Layout, not content: not kept (see `RareFields::SKIPS_PADDING`).
            return self.read_bytes().map(drop);
        }
        self.alloc_rare(rare)?;
        let fields = rare.get_mut().expect("allocated above");
        self.skip_unknown(tag, unknown(fields))
    }

    /// Sets the absolute offset of the input's first byte in the whole input (for errors).
    pub fn set_base_offset(&mut self, base: u64) {
        self.cur.set_base_offset(base);
    }

    /// The whole input slice.
    pub(crate) fn input(&self) -> &'a [u8] {
        self.cur.input()
    }

    /// Current position in the input slice.
    #[inline]
    pub fn position(&self) -> usize {
        self.cur.position()
    }

    /// True when the current message has no more bytes.
    #[inline]
    pub fn at_end(&self) -> bool {
        self.cur.at_end()
    }

    /// See [`Cursor::read_tag`].
    #[inline(always)]
    pub fn read_tag(&mut self) -> DResult<Option<u32>> {
        self.cur.read_tag()
    }

    /// See [`Cursor::read_varint`].
    #[inline]
    pub fn read_varint(&mut self) -> DResult<u64> {
        self.cur.read_varint()
    }

    /// See [`Cursor::read_fixed32`].
    #[inline]
    pub fn read_fixed32(&mut self) -> DResult<u32> {
        self.cur.read_fixed32()
    }

    /// See [`Cursor::read_fixed64`].
    #[inline]
    pub fn read_fixed64(&mut self) -> DResult<u64> {
        self.cur.read_fixed64()
    }

    /// See [`Cursor::read_len`].
    #[inline(always)]
    pub fn read_len(&mut self) -> DResult<usize> {
        self.cur.read_len()
    }

    /// See [`Cursor::read_bytes`].
    #[inline]
    pub fn read_bytes(&mut self) -> DResult<&'a [u8]> {
        self.cur.read_bytes()
    }

    /// See [`Cursor::skip_value`].
    pub fn skip_value(&mut self, tag: u32) -> DResult<()> {
        self.cur.skip_value(tag)
    }

    /// See [`Cursor::run_length`].
    #[inline]
    pub fn run_length(&self, tag: u32, max: usize) -> usize {
        self.cur.run_length(tag, max)
    }

    /// See [`Cursor::take_overrun`].
    pub(crate) fn take_overrun(&mut self) -> Option<Box<DecodeError>> {
        self.cur.take_overrun()
    }

    #[cold]
    fn err(&self, kind: DecodeErrorKind, at: usize) -> Box<DecodeError> {
        self.cur.err(kind, at)
    }

    /// The error of a refused allocation of `bytes` bytes for the item at `at`.
    #[cold]
    fn alloc_error(&self, bytes: usize, at: usize) -> Box<DecodeError> {
        self.cur.alloc_error(bytes, at)
    }
}

/// Where the value of a string field comes from (see `Reader::string_source`).
enum StringSource<'a> {
    /// A string of `len` bytes at most `INLINE_CAPACITY`: the input window that starts with it.
    Short(&'a [u8; INLINE_CAPACITY], usize),
    /// Any other string: its bytes and their offset in the input.
    Other(&'a [u8], usize),
}

/// The list types of repeated scalar and string fields (`Vec`, `InlineVec`), for
/// [`Reader::reserve_run`].
pub trait GrowableList {
    /// The element type.
    type Item;
    /// Size of one element in memory.
    const ELEMENT_BYTES: usize;
    /// The most elements the list holds.
    const MAX_LEN: usize;
    /// Appends an element.
    fn push(&mut self, x: Self::Item);
    /// Appends `make()`, made once there is room for it, and returns it.
    fn push_with(&mut self, make: impl FnOnce() -> Self::Item) -> &mut Self::Item;
    /// Number of elements.
    fn len(&self) -> usize;
    /// True without elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Elements it holds without growing.
    fn capacity(&self) -> usize;
    /// Whether the elements are in memory of the list's own (not empty or inline).
    fn spilled(&self) -> bool;
    /// Room for `n` more (exactly, or at least `n` with amortized growth) for `reader`'s parse,
    /// which may cut the memory from its blocks where the list type can hold such memory.
    fn try_reserve_for(
        &mut self,
        n: usize,
        exact: bool,
        reader: &Reader,
    ) -> Result<(), std::collections::TryReserveError>;
}

/// `GrowableList` for list types whose inherent methods of those names do the work.
macro_rules! growable_list {
    ($([$($generics:tt)*] $list:ty => $element:ty, $push_with:path, $spilled:path,
        $reserve_in:path, $max_len:expr;)*) => {$(
        impl<$($generics)*> GrowableList for $list {
            type Item = $element;
            const ELEMENT_BYTES: usize = size_of::<$element>();
            const MAX_LEN: usize = $max_len;
            #[inline]
            fn push(&mut self, x: $element) {
                <$list>::push(self, x)
            }
            #[cfg_attr(not(onnxl_small), inline(always))]
            #[cfg_attr(onnxl_small, inline(never))]
            fn push_with(&mut self, make: impl FnOnce() -> $element) -> &mut $element {
                $push_with(self, make)
            }
            fn len(&self) -> usize {
                <$list>::len(self)
            }
            fn capacity(&self) -> usize {
                <$list>::capacity(self)
            }
            fn spilled(&self) -> bool {
                $spilled(self)
            }
            fn try_reserve_for(
                &mut self,
                n: usize,
                exact: bool,
                reader: &Reader,
            ) -> Result<(), std::collections::TryReserveError> {
                $reserve_in(self, n, exact, &reader.chunks)
            }
        }
    )*};
}

growable_list! {
    [T] Vec<T> => T, vec_push_with, vec_spilled, vec_reserve_in,
        super::inline_vec::vec_max_len::<T>();
    [T, const N: usize] super::InlineVec<T, N> => T, super::InlineVec::push_with,
        super::InlineVec::spilled, super::InlineVec::try_reserve_in, super::inline_vec::MAX_LEN;
}

/// `InlineVec::spilled` for a `Vec`: whether it has an allocation.
fn vec_spilled<T>(v: &Vec<T>) -> bool {
    v.capacity() > 0
}

/// `InlineVec::try_reserve_in` for a `Vec` (which holds heap memory only).
fn vec_reserve_in<T>(
    v: &mut Vec<T>,
    n: usize,
    exact: bool,
    _region: &ChunkRegion,
) -> Result<(), std::collections::TryReserveError> {
    if exact {
        v.try_reserve_exact(n)
    } else {
        v.try_reserve(n)
    }
}

/// `InlineVec::push_with` for a `Vec`.
#[cfg_attr(not(onnxl_small), inline(always))]
#[cfg_attr(onnxl_small, inline(never))]
fn vec_push_with<T>(v: &mut Vec<T>, make: impl FnOnce() -> T) -> &mut T {
    v.push(make());
    v.last_mut().expect("just pushed")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader positioned on the value of the first tag of `buf`, as the generated decoders
    /// call `run_length` (the tag just read).
    fn after_first_tag<'a>(buf: &'a [u8], config: &'a DecodeConfig) -> (Reader<'a>, u32) {
        let mut r = Reader::new(buf, config);
        let tag = r.read_tag().unwrap().unwrap();
        (r, tag)
    }

    #[test]
    fn run_length_counts_adjacent_values_of_one_field() {
        let config = DecodeConfig::default();
        // input "a", input "bc", input "", then output "x", then input "d".
        let buf = b"\x0a\x01a\x0a\x02bc\x0a\x00\x12\x01x\x0a\x01d";
        let (r, tag) = after_first_tag(buf, &config);
        assert_eq!(r.run_length(tag, usize::MAX), 3);
        assert_eq!(r.run_length(tag, 2), 2);
        // A two-byte length takes the general path and keeps counting.
        let mut long = b"\x0a\x01a\x0a\x80\x01".to_vec();
        long.extend([b'z'; 128]);
        long.extend(b"\x0a\x00");
        let (r, tag) = after_first_tag(&long, &config);
        assert_eq!(r.run_length(tag, usize::MAX), 3);
        assert_eq!(r.run_length(tag, 2), 2);
        // A first value with a malformed two-byte length still counts as one.
        let (r, tag) = after_first_tag(b"\x0a\x80\x05", &config);
        assert_eq!(r.run_length(tag, usize::MAX), 1);
    }

    #[test]
    fn run_length_handles_every_wire_type_and_multi_byte_tags() {
        let config = DecodeConfig::default();
        // field 1 varint x3 (one of them 10 bytes long), then field 2.
        let buf = b"\x08\x01\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x08\x00\x10\x01";
        let (r, tag) = after_first_tag(buf, &config);
        assert_eq!(r.run_length(tag, usize::MAX), 3);
        // fixed32 x2, fixed64 x2
        let (r, tag) = after_first_tag(b"\x0d\x01\x02\x03\x04\x0d\x01\x02\x03\x04", &config);
        assert_eq!(r.run_length(tag, usize::MAX), 2);
        let (r, tag) = after_first_tag(
            b"\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09\0\0\0\0\0\0\0\0",
            &config,
        );
        assert_eq!(r.run_length(tag, usize::MAX), 2);
        // field 16 (two-byte tag 0x82 0x01), length-delimited, x2
        let (r, tag) = after_first_tag(b"\x82\x01\x01a\x82\x01\x00\x82\x02\x00", &config);
        assert_eq!(r.run_length(tag, usize::MAX), 2);
    }

    #[test]
    fn run_length_stops_at_malformed_or_truncated_values_and_is_at_least_one() {
        let config = DecodeConfig::default();
        for buf in [
            &b"\x0a\x05ab"[..],   // first value runs past the end
            b"\x0a\x01a\x0a\x09", // second value runs past the end
            b"\x0a\x01a\x0a",     // tag without a value
            b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", // varint over 10 bytes
            b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", // absurd length
        ] {
            let (r, tag) = after_first_tag(buf, &config);
            let n = r.run_length(tag, usize::MAX);
            assert!(n <= 1, "{buf:?}: {n}");
            assert_eq!(n.max(1), 1);
        }
        // The count never reads past the reader's limit (a sub-message's end).
        let buf = b"\x0a\x01a\x0a\x01b";
        let mut r = Reader::new(buf, &config);
        r.cur.limit = 3;
        let tag = r.read_tag().unwrap().unwrap();
        assert_eq!(r.run_length(tag, usize::MAX), 1);
    }

    #[test]
    fn reserve_run_sizes_empty_vectors_exactly_and_grows_full_ones() {
        let config = DecodeConfig::default();
        let buf = b"\x0a\x01a\x0a\x01b\x0a\x01c";
        let (r, tag) = after_first_tag(buf, &config);
        let mut v: Vec<u8> = Vec::new();
        r.reserve_run(&mut v, tag).unwrap();
        assert_eq!(v.capacity(), 3);
        v.extend([1, 2, 3]);
        r.reserve_run(&mut v, tag).unwrap();
        assert!(v.capacity() >= 6, "amortized growth, got {}", v.capacity());
        let mut roomy: Vec<u8> = Vec::with_capacity(10);
        r.reserve_run(&mut roomy, tag).unwrap();
        assert_eq!(roomy.capacity(), 10);
    }

    /// A list of at most 3 elements: the element limit of a list, reached without gigabytes.
    struct Capped(Vec<u64>);

    impl GrowableList for Capped {
        type Item = u64;
        const ELEMENT_BYTES: usize = 8;
        const MAX_LEN: usize = 3;
        fn push(&mut self, x: u64) {
            assert!(self.0.len() < Self::MAX_LEN, "pushed past the limit");
            self.0.push(x)
        }
        fn push_with(&mut self, make: impl FnOnce() -> u64) -> &mut u64 {
            vec_push_with(&mut self.0, make)
        }
        fn len(&self) -> usize {
            self.0.len()
        }
        fn capacity(&self) -> usize {
            self.0.capacity()
        }
        fn spilled(&self) -> bool {
            vec_spilled(&self.0)
        }
        fn try_reserve_for(
            &mut self,
            n: usize,
            exact: bool,
            reader: &Reader,
        ) -> Result<(), std::collections::TryReserveError> {
            vec_reserve_in(&mut self.0, n, exact, &reader.chunks)
        }
    }

    #[test]
    fn a_run_past_the_list_limit_is_refused_at_its_tag_before_anything_is_reserved() {
        let config = DecodeConfig::default();
        let too_many = DecodeErrorKind::TooManyElements { limit: 3 };
        // Unpacked: four values of field 1 after a first field.
        let buf = b"\x10\x00\x08\x01\x08\x02\x08\x03\x08\x04";
        let mut r = Reader::new(buf, &config);
        r.read_tag().unwrap();
        r.read_varint().unwrap();
        let tag = r.read_tag().unwrap().unwrap();
        let mut v = Capped(Vec::new());
        let e = r.reserve_run(&mut v, tag).unwrap_err();
        assert_eq!((e.kind, e.offset), (too_many.clone(), 2));
        assert_eq!(v.capacity(), 0, "nothing reserved");
        // Three fit.
        let (r, tag) = after_first_tag(&buf[2..8], &config);
        r.reserve_run(&mut v, tag).unwrap();
        assert_eq!(v.capacity(), 3);

        // Packed varints: four elements refused, three read.
        let mut v = Capped(Vec::new());
        let (mut r, _) = after_first_tag(b"\x12\x04\x01\x02\x03\x04", &config);
        let e = r.read_packed_varints_into(&mut v, |x| x).unwrap_err();
        assert_eq!((e.kind, e.offset), (too_many.clone(), 0));
        assert!(v.0.is_empty() && v.capacity() == 0);
        let (mut r, _) = after_first_tag(b"\x12\x03\x01\x02\x03", &config);
        r.read_packed_varints_into(&mut v, |x| x).unwrap();
        assert_eq!(v.0, [1, 2, 3]);

        // Packed fixed-size elements (the count known from the length): one more than the room.
        let mut v = Capped(vec![9, 9]);
        let (mut r, _) = after_first_tag(b"\x1a\x08\x00\x00\x80\x3f\x00\x00\x00\x40", &config);
        let b = r.read_packed_fixed(4).unwrap();
        let e = r.reserve_elements(&mut v, b.len() / 4).unwrap_err();
        assert!(
            e.to_string()
                .contains("repeated field with more than 3 elements"),
            "{e}"
        );
        assert_eq!((e.kind, e.offset), (too_many, 0));
        r.reserve_elements(&mut v, 1).unwrap();
    }
}
