//! Byte containers of the message types: [`ByteSpan`] for tensor payloads (owned or borrowed,
//! with an optional [`Owner`] token), [`ProtoString`] for proto2 `string`/`bytes` fields, and
//! [`UnknownFields`] for fields this schema does not know.

use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

mod cxx;
pub use cxx::CxxStringOps;
pub(crate) use cxx::{CxxSlot, CxxString, CxxStringPool, register_cxx_string_ops};

/// Anything that can keep bytes alive: a memory map, a `Vec<u8>`, a caller's buffer.
pub trait KeepAlive: Send + Sync + 'static {}
impl<T: Send + Sync + 'static + ?Sized> KeepAlive for T {}

/// A shared owner token: while one clone of it lives, the bytes it guards stay valid.
pub type Owner = Arc<dyn KeepAlive>;

/// Storage of a [`ByteSpan`].
enum Repr {
    /// A private buffer.
    Owned(Vec<u8>),
    /// A range of a shared allocation that no other span aliases (used by fast copy-mode loads):
    /// behaves as owned, the allocation is freed when its last range is dropped.
    OwnedRange {
        ptr: *mut u8,
        len: usize,
        arena: Owner,
        /// Copied by a no-copy load because the source address was not aligned.
        realigned: bool,
    },
    /// Bytes that belong to someone else; `owner`, when present, keeps them alive.
    Borrowed {
        ptr: *const u8,
        len: usize,
        owner: Option<Owner>,
    },
    /// The bytes are the `std::string` of the span's [`CxxSlot`] (made by the C++ layer).
    Cxx,
}

/// Tensor payload bytes (`TensorProto.raw_data`): owned, or borrowed pointer + length with an
/// optional shared [`Owner`] token.
///
/// Ownership rules:
/// - owned bytes are freed with the span; cloning an owned span copies the bytes;
/// - borrowed bytes with an owner stay valid while any clone of the owner lives (cloning the
///   span clones the token);
/// - borrowed bytes without an owner (only from the `unsafe` constructor) are valid only while
///   the caller keeps them alive.
pub struct ByteSpan {
    repr: Repr,
    /// The `std::string` the C++ classes read `raw_data()` through (see [`CxxSlot`]).
    cxx: CxxSlot,
}

// SAFETY: every variant either owns its bytes (Vec, or an exclusive range of an arena kept alive
// by a `Send + Sync` owner) or points at immutable bytes kept alive by a `Send + Sync` owner (or,
// for the unowned variant, by the caller, who promised so in `from_raw_parts`). Shared access
// only reads; mutation needs `&mut self`.
unsafe impl Send for ByteSpan {}
// SAFETY: see `Send`: `&ByteSpan` gives read-only access to bytes nobody mutates concurrently.
unsafe impl Sync for ByteSpan {}

impl Default for ByteSpan {
    fn default() -> Self {
        Self::new()
    }
}

impl ByteSpan {
    /// An empty owned span.
    pub const fn new() -> Self {
        Self {
            cxx: CxxSlot::empty(),
            repr: Repr::Owned(Vec::new()),
        }
    }

    /// Takes ownership of `bytes`.
    pub fn from_vec(bytes: Vec<u8>) -> Self {
        Self {
            cxx: CxxSlot::empty(),
            repr: Repr::Owned(bytes),
        }
    }

    /// Borrows `range` of `data`, keeping `data` alive through the span's owner token.
    ///
    /// Panics if `range` is outside `data`.
    pub fn from_shared<T>(data: Arc<T>, range: std::ops::Range<usize>) -> Self
    where
        T: AsRef<[u8]> + Send + Sync + 'static,
    {
        let slice = &(*data).as_ref()[range];
        let (ptr, len) = (slice.as_ptr(), slice.len());
        Self {
            cxx: CxxSlot::empty(),
            repr: Repr::Borrowed {
                ptr,
                len,
                owner: Some(data as Owner),
            },
        }
    }

    /// Borrows `len` bytes at `ptr`, with an owner token that keeps them alive.
    ///
    /// # Safety
    /// The bytes must stay valid and unmodified while any clone of `owner` lives.
    pub unsafe fn from_owner_raw(ptr: *const u8, len: usize, owner: Owner) -> Self {
        Self {
            cxx: CxxSlot::empty(),
            repr: Repr::Borrowed {
                ptr,
                len,
                owner: Some(owner),
            },
        }
    }

    /// Borrows `len` bytes at `ptr` with no owner: the caller keeps them alive.
    ///
    /// # Safety
    /// The bytes must stay valid and unmodified for as long as this span (or a clone) is used.
    pub unsafe fn from_raw_parts(ptr: *const u8, len: usize) -> Self {
        Self {
            cxx: CxxSlot::empty(),
            repr: Repr::Borrowed {
                ptr,
                len,
                owner: None,
            },
        }
    }

    /// An exclusive range of an arena, treated as owned.
    ///
    /// # Safety
    /// `ptr..ptr+len` must lie in memory kept alive by `arena`, writable, and not be reachable
    /// through any other span or reference.
    pub(crate) unsafe fn from_arena_range(ptr: *mut u8, len: usize, arena: Owner) -> Self {
        Self::owned_range(ptr, len, arena, false)
    }

    /// As [`ByteSpan::from_arena_range`], for bytes that a no-copy load copied only because
    /// their source address was not aligned ([`ByteSpan::is_realigned`]).
    ///
    /// # Safety
    /// As [`ByteSpan::from_arena_range`].
    pub(crate) unsafe fn from_realigned_range(ptr: *mut u8, len: usize, arena: Owner) -> Self {
        Self::owned_range(ptr, len, arena, true)
    }

    /// The span of an exclusive range of an arena (the contract of
    /// [`ByteSpan::from_arena_range`], which the callers carry).
    fn owned_range(ptr: *mut u8, len: usize, arena: Owner, realigned: bool) -> Self {
        Self {
            cxx: CxxSlot::empty(),
            repr: Repr::OwnedRange {
                ptr,
                len,
                arena,
                realigned,
            },
        }
    }

    /// True when a no-copy load copied these bytes (instead of borrowing them) because their
    /// address in the input was not aligned to `ParseOptions::alignment`.
    pub fn is_realigned(&self) -> bool {
        matches!(
            self.repr,
            Repr::OwnedRange {
                realigned: true,
                ..
            }
        )
    }

    /// The bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        match &self.repr {
            Repr::Owned(v) => v,
            // SAFETY: the range is kept alive by `arena` and not aliased mutably (constructor
            // contract); a zero-length range may have a dangling but non-null pointer.
            Repr::OwnedRange { ptr, len, .. } => unsafe { slice_or_empty(*ptr, *len) },
            // SAFETY: kept alive by `owner`, or by the caller for unowned spans (constructor
            // contract).
            Repr::Borrowed { ptr, len, .. } => unsafe { slice_or_empty(*ptr, *len) },
            Repr::Cxx => self.cxx.bytes(),
        }
    }

    /// Mutable access; borrowed bytes are first copied into an owned buffer. With a C++
    /// `std::string` present, the bytes move into it (C++ references see the writes).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.cxx.is_set() {
            self.repr = Repr::Cxx;
        } else if let Repr::Borrowed { .. } = self.repr {
            self.repr = Repr::Owned(self.as_slice().to_vec());
        }
        match &mut self.repr {
            Repr::Owned(v) => v,
            // SAFETY: the range is exclusive to this span and writable (constructor contract).
            Repr::OwnedRange { ptr, len, .. } => unsafe {
                if *len == 0 {
                    &mut []
                } else {
                    std::slice::from_raw_parts_mut(*ptr, *len)
                }
            },
            Repr::Cxx => self.cxx.bytes_mut(),
            Repr::Borrowed { .. } => unreachable!("converted to owned above"),
        }
    }

    /// Number of bytes.
    #[inline]
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Owned(v) => v.len(),
            Repr::OwnedRange { len, .. } | Repr::Borrowed { len, .. } => *len,
            Repr::Cxx => self.cxx.bytes().len(),
        }
    }

    /// True when there are no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when the bytes are not owned by this span (pointer mode, with or without owner).
    pub fn is_borrowed(&self) -> bool {
        matches!(self.repr, Repr::Borrowed { .. })
    }

    /// The token that keeps the bytes alive: the owner of borrowed bytes, or the arena of a
    /// range; `None` for a private buffer and for unowned borrowed bytes.
    pub fn owner(&self) -> Option<Owner> {
        match &self.repr {
            Repr::Owned(_) | Repr::Cxx => None,
            Repr::OwnedRange { arena, .. } => Some(arena.clone()),
            Repr::Borrowed { owner, .. } => owner.clone(),
        }
    }

    /// Makes the bytes shareable and returns the token that keeps them alive, for callers that
    /// must hold the bytes beyond the span's life (the C ABI's
    /// `onnxl_tensor_proto_raw_data_owner`).
    ///
    /// - owned bytes are moved, not copied, into a shared allocation that the span then borrows:
    ///   the data pointer and the bytes do not change;
    /// - an arena range becomes a borrow of its arena;
    /// - borrowed bytes with an owner return a clone of that owner.
    ///
    /// Afterwards the span is borrowed, so the bytes behind the token are never modified through
    /// it ([`ByteSpan::as_mut_slice`] copies first). Returns `None`, and leaves the span as it is,
    /// for borrowed bytes without an owner: their lifetime is the caller's (see
    /// [`ByteSpan::from_raw_parts`]) and no token can extend it.
    pub fn share(&mut self) -> Option<Owner> {
        if let Repr::Cxx = self.repr {
            // The `std::string` stays, as a copy C++ references still read.
            self.repr = Repr::Owned(self.cxx.bytes().to_vec());
        }
        match &mut self.repr {
            Repr::Owned(v) => {
                let shared = Arc::new(std::mem::take(v));
                let (ptr, len) = (shared.as_ptr(), shared.len());
                let owner: Owner = shared;
                self.repr = Repr::Borrowed {
                    ptr,
                    len,
                    owner: Some(owner.clone()),
                };
                Some(owner)
            }
            Repr::OwnedRange {
                ptr, len, arena, ..
            } => {
                let owner = arena.clone();
                self.repr = Repr::Borrowed {
                    ptr: *ptr,
                    len: *len,
                    owner: Some(owner.clone()),
                };
                Some(owner)
            }
            Repr::Borrowed { owner, .. } => owner.clone(),
            Repr::Cxx => unreachable!("converted to owned above"),
        }
    }

    /// True for borrowed bytes without an owner token (the caller keeps them alive).
    pub fn is_unowned_borrow(&self) -> bool {
        matches!(self.repr, Repr::Borrowed { owner: None, .. })
    }

    /// Converts into an owned `Vec`, copying if needed.
    pub fn into_vec(mut self) -> Vec<u8> {
        match &mut self.repr {
            Repr::Owned(v) => std::mem::take(v),
            _ => self.as_slice().to_vec(),
        }
    }
}

/// A slice from raw parts, or an empty slice for length 0.
///
/// # Safety
/// For `len > 0`, `ptr..ptr+len` must be valid for reads for the returned lifetime.
#[inline]
pub(super) unsafe fn slice_or_empty<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

impl Clone for ByteSpan {
    /// Owned bytes are copied; borrowed bytes stay borrowed and share the owner token.
    fn clone(&self) -> Self {
        match &self.repr {
            Repr::Owned(v) => Self::from_vec(v.clone()),
            Repr::OwnedRange { .. } | Repr::Cxx => Self::from_vec(self.as_slice().to_vec()),
            Repr::Borrowed { ptr, len, owner } => Self {
                cxx: CxxSlot::empty(),
                repr: Repr::Borrowed {
                    ptr: *ptr,
                    len: *len,
                    owner: owner.clone(),
                },
            },
        }
    }
}

impl crate::error::TryClone for ByteSpan {
    /// [`ByteSpan::clone`] (owned bytes copied, borrowed ones shared), reporting a refused
    /// allocation.
    #[inline(never)] // one copy per type: the callers are many (every field of every message)
    fn try_clone(&self) -> Result<Self, std::alloc::Layout> {
        match &self.repr {
            Repr::Borrowed { .. } => Ok(self.clone()),
            _ => Ok(Self::from_vec(try_copy(self.as_slice())?)),
        }
    }
}

impl Deref for ByteSpan {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for ByteSpan {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for ByteSpan {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl From<Vec<u8>> for ByteSpan {
    fn from(v: Vec<u8>) -> Self {
        Self::from_vec(v)
    }
}

impl From<&[u8]> for ByteSpan {
    fn from(v: &[u8]) -> Self {
        Self::from_vec(v.to_vec())
    }
}

impl fmt::Debug for ByteSpan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match &self.repr {
            Repr::Owned(_) | Repr::OwnedRange { .. } | Repr::Cxx => "owned",
            Repr::Borrowed { owner: Some(_), .. } => "borrowed+owner",
            Repr::Borrowed { owner: None, .. } => "borrowed",
        };
        write!(f, "ByteSpan({} bytes, {mode})", self.len())
    }
}

/// Bytes stored inline in a [`ProtoString`] (no allocation): most ONNX names fit.
pub(crate) const INLINE_CAPACITY: usize = 22;

/// The value of a [`ProtoString`]: 24 bytes, `repr(u8)` (the tag is the first byte, which
/// `Option<ProtoString>` uses for `None`; the C++ layer reads that byte).
#[repr(u8)]
enum StrRepr {
    Inline {
        len: u8,
        buf: [u8; INLINE_CAPACITY],
    },
    Heap(Box<[u8]>),
    /// Immutable bytes of a parse input, kept alive by `owner` (longer strings of a model
    /// parsed in no-copy mode point into its input instead of allocating each).
    Shared {
        len: u32,
        ptr: *const u8,
        /// Held only to keep the bytes alive.
        _owner: ThinOwner,
    },
    /// The value is the `std::string` of the string's [`CxxSlot`] (made by the C++ layer).
    Cxx,
    /// Bytes cut from a block of a parse's metadata memory (longer strings of a model parsed
    /// in copy mode: no allocation of their own); one share of `block`.
    Block {
        len: u32,
        bytes: BlockShare,
    },
    /// Bytes of the program (statics: the shared presets of rare fields).
    Static(&'static [u8]),
}

/// The start of bytes inside a [`SharedBlock`] and one share of it (a [`BlockBytes`] whose
/// length is kept by its owner).
struct BlockShare {
    ptr: NonNull<u8>,
    block: NonNull<SharedBlock>,
}

impl Drop for BlockShare {
    fn drop(&mut self) {
        // SAFETY: the value holds one share of the live block (`ProtoString::from_block`),
        // given back once.
        unsafe { SharedBlock::release(self.block, 1) }
    }
}

/// The live count of a block of memory that a parse cuts parts of its model from (the
/// metadata blocks of `wire`): each part holds one share, and the block's `free` runs when
/// the last share is given back.
#[repr(C)]
pub(crate) struct SharedBlock {
    pub(crate) live: AtomicUsize,
    /// Frees the block (its count is zero).
    pub(crate) free: unsafe fn(NonNull<SharedBlock>),
}

impl SharedBlock {
    /// Takes `shares` off the live count of `block`, and frees the block when none is left.
    ///
    /// # Safety
    /// `block` is live and the caller holds `shares` of its count, not used again.
    #[inline]
    pub(crate) unsafe fn release(block: NonNull<Self>, shares: usize) {
        // SAFETY: the block is live until its count reaches zero, which only this call can see.
        unsafe {
            let live = &(*block.as_ptr()).live;
            if live.fetch_sub(shares, Ordering::Release) != shares {
                return;
            }
            // Every other thread's use of the block happened before their release (a load
            // rather than a fence, which ThreadSanitizer does not model, as `Arc` does).
            live.load(Ordering::Acquire);
            ((*block.as_ptr()).free)(block);
        }
    }
}

/// Immutable bytes inside a [`SharedBlock`], holding one share of it.
pub(crate) struct BlockBytes {
    ptr: NonNull<u8>,
    len: usize,
    block: NonNull<SharedBlock>,
}

impl BlockBytes {
    /// # Safety
    /// `len` bytes at `ptr`, written and never modified again, lie in `block`, and the caller
    /// hands this value one share of the block's count.
    pub(crate) unsafe fn new(ptr: NonNull<u8>, len: usize, block: NonNull<SharedBlock>) -> Self {
        Self { ptr, len, block }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        // SAFETY: `new`'s contract: the share held keeps the bytes alive and unmodified.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for BlockBytes {
    fn drop(&mut self) {
        // SAFETY: this value holds one share of the live block (see `new`), given back once.
        unsafe { SharedBlock::release(self.block, 1) }
    }
}

impl Clone for ProtoString {
    /// A clone of a borrowing string is a private copy: clones (names put in maps, say) never
    /// keep a whole parse input alive after its model is dropped. Clones have no `std::string`.
    fn clone(&self) -> Self {
        match &self.repr {
            StrRepr::Inline { len, buf } => Self::of(StrRepr::Inline {
                len: *len,
                buf: *buf,
            }),
            StrRepr::Heap(b) => Self::of(StrRepr::Heap(b.clone())),
            StrRepr::Static(b) => Self::of(StrRepr::Static(b)),
            StrRepr::Shared { .. } | StrRepr::Block { .. } => {
                Self::of(StrRepr::Heap(self.as_bytes().into()))
            }
            StrRepr::Cxx => Self::from_bytes(self.as_bytes()),
        }
    }
}

impl crate::error::TryClone for ProtoString {
    /// [`ProtoString::clone`], reporting a refused allocation.
    #[inline(never)] // one copy per type: the callers are many (every field of every message)
    fn try_clone(&self) -> Result<Self, std::alloc::Layout> {
        match &self.repr {
            StrRepr::Inline { .. } | StrRepr::Static(_) => Ok(self.clone()),
            _ => Self::try_from_bytes(self.as_bytes())
                .map_err(|_| layout_of_bytes(self.as_bytes().len())),
        }
    }
}

/// The layout of a byte buffer of `len` bytes (what a refused copy reports).
fn layout_of_bytes(len: usize) -> std::alloc::Layout {
    std::alloc::Layout::array::<u8>(len).unwrap_or(std::alloc::Layout::new::<u8>())
}

/// A copy of `bytes` in a vector of exactly their length, or the layout the allocator refused.
fn try_copy(bytes: &[u8]) -> Result<Vec<u8>, std::alloc::Layout> {
    let mut v = Vec::new();
    v.try_reserve_exact(bytes.len())
        .map_err(|_| layout_of_bytes(bytes.len()))?;
    v.extend_from_slice(bytes);
    Ok(v)
}

/// A one-word handle on an [`Owner`] (an `Arc` of the token), so a [`ProtoString`] that borrows
/// stays 32 bytes. One is made per parse and cloned into every borrowing string.
#[derive(Clone)]
pub struct ThinOwner(#[allow(dead_code)] Arc<Owner>);

impl ThinOwner {
    /// Wraps `owner`.
    pub fn new(owner: Owner) -> Self {
        Self(Arc::new(owner))
    }
}

/// A proto2 `string` or `bytes` value. proto2 does not require UTF-8, so the bytes are kept as
/// they are; [`ProtoString::as_str`] checks. Values up to 22 bytes are stored inline, without an
/// allocation (models hold millions of short names); longer values of a model parsed in copy or
/// no-copy mode point into the parse's memory or input (kept alive by the string), and a clone
/// of such a value is a private copy.
///
/// 32 bytes, `repr(C)`: the value (24 bytes, its tag first), then the slot (`CxxSlot`) that the C++
/// classes read their `const std::string&` from (offset `CXX_SLOT_AT`).
#[repr(C)]
pub struct ProtoString {
    repr: StrRepr,
    cxx: CxxSlot,
}

const _: () = assert!(size_of::<ProtoString>() == 32 && size_of::<StrRepr>() == 24);
const _: () = assert!(size_of::<Option<ProtoString>>() == 32);

/// Offset of a [`ProtoString`]'s [`CxxSlot`] (the C++ layer reads it in place).
pub(crate) const CXX_SLOT_AT: usize = std::mem::offset_of!(ProtoString, cxx);

/// The first byte of a [`ProtoString`] whose value is the `std::string` of its slot (the C++
/// layer reads it in place: such a string is written through that `std::string`).
pub(crate) const STRING_TAG_CXX: u8 = {
    let s = ProtoString::of(StrRepr::Cxx);
    // SAFETY: `StrRepr` is `repr(u8)`: its first byte is the tag, initialized.
    let b = unsafe { *(&raw const s).cast::<u8>() };
    std::mem::forget(s);
    b
};

/// The first byte of an unset `Option<ProtoString>` (the C++ layer reads it in place): the
/// first value after the tags of [`StrRepr`]'s variants.
pub(crate) const OPTIONAL_STRING_NONE: u8 = {
    let none: Option<ProtoString> = None;
    // SAFETY: the first byte of `None` is its niche tag, initialized (`StrRepr` is `repr(u8)`).
    let b = unsafe { *(&raw const none).cast::<u8>() };
    std::mem::forget(none);
    b
};

// SAFETY: the `Shared` variant points at immutable bytes kept alive by a `Send + Sync` owner,
// the `Block` variant at immutable bytes kept alive by its share of an atomically counted
// block; the other variants own their bytes, and the slot's `std::string` is published
// atomically. Shared access only reads (and fills an empty slot with compare-and-swap);
// mutation needs `&mut`.
unsafe impl Send for ProtoString {}
// SAFETY: see `Send`.
unsafe impl Sync for ProtoString {}

impl ProtoString {
    /// A string of `repr`, without a `std::string`.
    #[inline(always)]
    const fn of(repr: StrRepr) -> Self {
        Self {
            repr,
            cxx: CxxSlot::empty(),
        }
    }

    /// An empty string.
    pub const fn new() -> Self {
        Self::of(StrRepr::Inline {
            len: 0,
            buf: [0; INLINE_CAPACITY],
        })
    }

    /// A string holding `s`, for statics: inline up to 22 bytes, else pointing at `s`.
    pub(crate) const fn inline_const(s: &'static str) -> Self {
        let b = s.as_bytes();
        if b.len() > INLINE_CAPACITY {
            return Self::of(StrRepr::Static(b));
        }
        let mut buf = [0; INLINE_CAPACITY];
        let mut i = 0;
        while i < b.len() {
            buf[i] = b[i];
            i += 1;
        }
        Self::of(StrRepr::Inline {
            len: b.len() as u8,
            buf,
        })
    }

    /// A string holding the first `len` bytes of `window` (at most [`INLINE_CAPACITY`]), copied
    /// as one fixed-size block; the bytes of `window` past `len` are kept but never read.
    #[inline(always)]
    pub(crate) fn inline_from_window(window: &[u8; INLINE_CAPACITY], len: usize) -> Self {
        debug_assert!(len <= INLINE_CAPACITY);
        Self::of(StrRepr::Inline {
            len: len as u8,
            buf: *window,
        })
    }

    /// Makes this string the first `len` bytes of `window` (as [`ProtoString::inline_from_window`])
    /// in place: the bytes are copied straight from the input into the string. (A string built
    /// elsewhere and then moved here is copied through a temporary whose loads span several
    /// stores, which the CPU cannot forward: the largest cost of a metadata parse.)
    #[inline(always)]
    pub(crate) fn set_inline_from_window(&mut self, window: &[u8; INLINE_CAPACITY], len: usize) {
        debug_assert!(len <= INLINE_CAPACITY);
        if self.cxx.is_set() {
            return self.set_bytes(&window[..len]);
        }
        match &mut self.repr {
            StrRepr::Inline { len: l, buf } => {
                *l = len as u8;
                buf.copy_from_slice(window);
            }
            other => *other = Self::inline_from_window(window, len).into_repr(),
        }
    }

    /// The value, for a string without a `std::string`.
    #[inline(always)]
    fn into_repr(self) -> StrRepr {
        debug_assert!(!self.cxx.is_set());
        self.repr
    }

    /// A string holding a copy of `bytes`.
    #[inline]
    pub fn from_bytes(bytes: &[u8]) -> Self {
        if bytes.len() <= INLINE_CAPACITY {
            let mut buf = [0u8; INLINE_CAPACITY];
            buf[..bytes.len()].copy_from_slice(bytes);
            Self::of(StrRepr::Inline {
                len: bytes.len() as u8,
                buf,
            })
        } else {
            Self::of(StrRepr::Heap(bytes.into()))
        }
    }

    /// [`ProtoString::from_bytes`], or an error when the copy cannot be allocated.
    pub fn try_from_bytes(bytes: &[u8]) -> Result<Self, std::collections::TryReserveError> {
        if bytes.len() <= INLINE_CAPACITY {
            return Ok(Self::from_bytes(bytes));
        }
        let mut v = Vec::new();
        v.try_reserve_exact(bytes.len())?;
        v.extend_from_slice(bytes);
        Ok(Self::of(StrRepr::Heap(v.into())))
    }

    /// A string of bytes cut from a shared block; only for values longer than
    /// [`INLINE_CAPACITY`] (shorter ones are stored inline, never cut from a block).
    pub(crate) fn from_block(bytes: BlockBytes) -> Self {
        debug_assert!(bytes.len > INLINE_CAPACITY);
        match u32::try_from(bytes.len) {
            Ok(len) => {
                let bytes = std::mem::ManuallyDrop::new(bytes);
                // The share `bytes` held moves to the value.
                Self::of(StrRepr::Block {
                    len,
                    bytes: BlockShare {
                        ptr: bytes.ptr,
                        block: bytes.block,
                    },
                })
            }
            Err(_) => Self::of(StrRepr::Heap(bytes.as_bytes().into())),
        }
    }

    /// A string over `len` bytes at `ptr` that `owner` keeps alive (short values, and values
    /// of 4 GiB or more, are copied instead).
    ///
    /// # Safety
    /// The bytes must stay valid and unmodified while any clone of `owner` lives.
    #[inline]
    pub(crate) unsafe fn from_owned_by(ptr: *const u8, len: usize, owner: &ThinOwner) -> Self {
        match u32::try_from(len) {
            Ok(l) if len > INLINE_CAPACITY => Self::of(StrRepr::Shared {
                len: l,
                ptr,
                _owner: owner.clone(),
            }),
            // SAFETY: the caller guarantees `len` readable bytes at `ptr`.
            _ => Self::from_bytes(unsafe { std::slice::from_raw_parts(ptr, len) }),
        }
    }

    /// The raw bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match &self.repr {
            StrRepr::Inline { len, buf } => &buf[..*len as usize],
            StrRepr::Heap(b) => b,
            // SAFETY: `from_owned_by`'s contract: the owner held here keeps the bytes alive and
            // unmodified.
            StrRepr::Shared { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts(*ptr, *len as usize)
            },
            StrRepr::Cxx => self.cxx.bytes(),
            StrRepr::Static(b) => b,
            // SAFETY: `from_block`: the share held keeps the bytes alive and unmodified.
            StrRepr::Block { len, bytes } => unsafe {
                std::slice::from_raw_parts(bytes.ptr.as_ptr(), *len as usize)
            },
        }
    }

    /// The text, when it is valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(self.as_bytes()).ok()
    }

    /// The text, with invalid UTF-8 replaced by U+FFFD.
    pub fn to_string_lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(self.as_bytes())
    }

    /// Replaces the value with a copy of `bytes` (inside its `std::string` when C++ has one:
    /// C++ references to the field see the new value, as with protobuf).
    pub fn set_bytes(&mut self, bytes: &[u8]) {
        if self.cxx.is_set() {
            self.cxx.assign(bytes);
            self.repr = StrRepr::Cxx;
        } else {
            self.repr = Self::from_bytes(bytes).into_repr();
        }
    }

    /// Appends `bytes`.
    pub fn push_bytes(&mut self, bytes: &[u8]) {
        let mut v = self.as_bytes().to_vec();
        v.extend_from_slice(bytes);
        if self.cxx.is_set() {
            self.set_bytes(&v);
        } else {
            self.repr = Self::from(v).into_repr();
        }
    }

    /// The bytes, by value.
    pub fn into_bytes(self) -> Vec<u8> {
        match self.repr {
            StrRepr::Heap(b) => b.into_vec(),
            _ => self.as_bytes().to_vec(),
        }
    }
}

impl Default for ProtoString {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for ProtoString {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}
impl Eq for ProtoString {}
impl std::hash::Hash for ProtoString {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}
impl PartialOrd for ProtoString {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ProtoString {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl Deref for ProtoString {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Debug for ProtoString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string_lossy(), f)
    }
}

impl fmt::Display for ProtoString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_string_lossy())
    }
}

impl From<&str> for ProtoString {
    fn from(s: &str) -> Self {
        Self::from_bytes(s.as_bytes())
    }
}
impl From<String> for ProtoString {
    fn from(s: String) -> Self {
        Self::from(s.into_bytes())
    }
}
impl From<&String> for ProtoString {
    fn from(s: &String) -> Self {
        Self::from_bytes(s.as_bytes())
    }
}
impl From<Vec<u8>> for ProtoString {
    fn from(v: Vec<u8>) -> Self {
        if v.len() <= INLINE_CAPACITY {
            Self::from_bytes(&v)
        } else {
            Self::of(StrRepr::Heap(v.into_boxed_slice()))
        }
    }
}
impl From<&[u8]> for ProtoString {
    fn from(s: &[u8]) -> Self {
        Self::from_bytes(s)
    }
}
impl PartialEq<str> for ProtoString {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}
impl PartialEq<&str> for ProtoString {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

/// Fields of a message that the schema does not know, kept as their exact wire bytes in the
/// order they were read, and written back after the known ones. One pointer wide when empty (the
/// usual case), so it costs every message almost nothing.
#[derive(Clone, Default, PartialEq, Eq)]
#[allow(clippy::box_collection)] // boxed on purpose: 8 bytes per message instead of 24
pub struct UnknownFields(Option<Box<Vec<u8>>>);

impl crate::error::TryClone for UnknownFields {
    #[inline(never)] // one copy per type: the callers are many (every field of every message)
    fn try_clone(&self) -> Result<Self, std::alloc::Layout> {
        match &self.0 {
            None => Ok(Self(None)),
            Some(v) => Ok(Self(Some(crate::error::try_box(try_copy(v)?)?))),
        }
    }
}

impl UnknownFields {
    /// No unknown fields.
    pub const fn new() -> Self {
        Self(None)
    }
    /// The raw wire bytes (tags included).
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_deref().map(|v| v.as_slice()).unwrap_or(&[])
    }
    /// True when there are none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }
    /// Number of raw bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }
    /// [`UnknownFields::push_raw`], or an error (and no change) when the room for `bytes`
    /// cannot be allocated.
    pub(crate) fn try_push_raw(&mut self, bytes: &[u8]) -> Result<(), ()> {
        if self.0.is_none() {
            self.0 = Some(crate::error::try_box(Vec::new()).map_err(|_| ())?);
        }
        let v = self.0.as_mut().expect("just made");
        v.try_reserve(bytes.len()).map_err(|_| ())?;
        v.extend_from_slice(bytes);
        Ok(())
    }
    /// Appends raw wire bytes (one or more complete fields).
    pub fn push_raw(&mut self, bytes: &[u8]) {
        self.0
            .get_or_insert_with(Default::default)
            .extend_from_slice(bytes);
    }
    /// Removes all unknown fields.
    pub fn clear(&mut self) {
        self.0 = None;
    }
}

impl fmt::Debug for UnknownFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UnknownFields({} bytes)", self.len())
    }
}

/// Where a parse takes its strings and payloads from instead of making them (the hook of
/// `wire::Reader`): the C++ classes' parse, whose strings and bytes live in `std::string`s
/// (those of the content it replaces, reused; see `cxx.rs`).
pub(crate) trait StringHook {
    /// A string holding a copy of `bytes`.
    fn string(&mut self, bytes: &[u8]) -> ProtoString;
    /// Tensor bytes holding a copy of `bytes`.
    fn payload(&mut self, bytes: &[u8]) -> ByteSpan;
    /// Tensor bytes of `len` (> 0) bytes that `read(offset, bytes)` fills, and whether it
    /// did; `None` when memory runs out.
    fn payload_read(
        &mut self,
        len: usize,
        offset: usize,
        read: &dyn Fn(usize, &mut [u8]) -> bool,
    ) -> Option<(ByteSpan, bool)>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_strings_borrow_from_their_owner_and_clones_copy() {
        let input: Arc<Vec<u8>> = Arc::new(b"a long name that does not fit inline, 40+".to_vec());
        let owner = ThinOwner::new(input.clone());
        // SAFETY: `input` is kept alive by `owner` and never modified.
        let s = unsafe { ProtoString::from_owned_by(input.as_ptr(), input.len(), &owner) };
        drop(owner);
        assert_eq!(Arc::strong_count(&input), 2, "the string holds the input");
        assert_eq!(s.as_bytes(), input.as_slice());
        assert!(
            std::ptr::eq(s.as_bytes().as_ptr(), input.as_ptr()),
            "borrowed, not copied"
        );
        let c = s.clone();
        assert!(
            !std::ptr::eq(c.as_bytes().as_ptr(), input.as_ptr()),
            "clone is a copy"
        );
        drop(s);
        assert_eq!(
            Arc::strong_count(&input),
            1,
            "the clone does not hold the input"
        );
        assert_eq!(c, ProtoString::from(input.as_slice()));
        // Short values are stored inline even from an owner.
        let owner = ThinOwner::new(input.clone());
        // SAFETY: as above.
        let short = unsafe { ProtoString::from_owned_by(input.as_ptr(), 6, &owner) };
        drop(owner);
        assert_eq!(Arc::strong_count(&input), 1);
        assert_eq!(short, "a long");
    }

    #[test]
    fn share_moves_owned_bytes_without_copying() {
        let mut span = ByteSpan::from_vec(vec![1, 2, 3]);
        let before = span.as_ptr();
        let owner = span.share().expect("owned bytes can be shared");
        assert!(span.is_borrowed());
        assert_eq!(span.as_ptr(), before, "the bytes did not move");
        assert_eq!(span.as_slice(), &[1, 2, 3]);
        // Mutation copies: the shared bytes stay as they were.
        span.as_mut_slice()[0] = 9;
        assert_ne!(span.as_ptr(), before);
        // SAFETY: `owner` keeps the original allocation alive.
        assert_eq!(unsafe { std::slice::from_raw_parts(before, 3) }, &[1, 2, 3]);
        drop(owner);
    }

    #[test]
    fn share_of_unowned_borrow_is_none() {
        let data = [5u8; 4];
        // SAFETY: `data` outlives the span.
        let mut span = unsafe { ByteSpan::from_raw_parts(data.as_ptr(), data.len()) };
        assert!(span.share().is_none());
        assert!(span.is_unowned_borrow());
        let mut shared = ByteSpan::from_shared(Arc::new(vec![7u8; 8]), 2..6);
        let owner = shared.share().unwrap();
        assert!(Arc::ptr_eq(&owner, &shared.owner().unwrap()));
    }
}
