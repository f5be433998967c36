//! Runtime of the C++ message classes of `include/onnx_light.hpp`: the functions their inline
//! code calls (declared by that header, not by the C header).
//!
//! A C++ message object IS the Rust message: its storage has the Rust type's size and
//! alignment (from the layout table, [`crate::ffi::cxx_messages::layout_text`], which the header
//! was generated from and checks at start-up), and `this` is the Rust value's address. The
//! C++ code reads lists, sub-message pointers, optional scalars and already converted strings
//! in place; everything that allocates, frees or converts comes here. Field functions take
//! the address of the field (`this` + its offset), so one function serves every field of a
//! kind; the per-message ones (construction, copy, parse, ...) are generated in
//! `cxx_messages.rs` on the generic bodies of this module.
//!
//! Strings: protobuf's getters return `const std::string&` that alias the field. Every string
//! and payload field ends in a slot for a heap `std::string` (made by the C++ layer's
//! functions, registered by `onnxl_cxx_init`), which the C++ getters read in place with acquire
//! ordering. A field the C++ classes parsed or set holds its value there; for any other, the
//! first const read publishes a copy there with compare-and-swap and leaves the value as it is
//! (`bytes::CxxSlot`): no read changes what another read sees, so const access from any number
//! of threads, and from Rust and C at the same time, is safe, and pointers handed out before
//! stay valid.

use std::ffi::c_void;
use std::sync::Arc;

use super::panic::ffi_value;
use super::status::FfiError;
use crate::bytes::{CxxString, CxxStringPool};
use crate::codec::sparse::{Image, sparse_input};
use crate::error::TryClone;
use crate::proto::{Message, MsgBox, Recycle, Recycler, RepeatedField};
use crate::wire::{
    DecodeConfig, DynMessage, InlineVec, ReadSource, Reader, SizeCursor, SizeTable, SliceWriter,
};
use crate::{ByteSpan, ProtoString};

/// Memory for a C++ message object (`operator new`): a heap `MsgBox`'s memory (its origin word
/// written), so that objects made by `new` can be owned by Rust (`set_allocated_x`) and Rust
/// boxes, heap or cut from a parse's blocks, deleted by C++ (`release_x`). NULL on failure.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_cxx_alloc(size: usize, align: usize) -> *mut c_void {
    crate::mem::alloc_raw(size, align).cast()
}

/// Frees the memory of a C++ message object whose value is dropped (`operator delete`): a heap
/// allocation, or the share of a parse's block the object held.
///
/// # Safety
/// `p` came from `onnxl_cxx_alloc(size, align)` or is the value of a `MsgBox` of that size and
/// alignment, and is not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_free(p: *mut c_void, size: usize, align: usize) {
    if !p.is_null() && align.is_power_of_two() {
        // SAFETY: the caller's contract.
        unsafe { crate::mem::free_raw(p.cast(), size, align) }
    }
}

// ---------------------------------------------------------------------------------------------
// Strings.

/// The bytes of a string (its `std::string` is made and published by the C++ header's
/// `string_at`: see `bytes::CxxSlot`).
///
/// # Safety
/// `s` is a live string that no other thread modifies; `len` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_str_bytes(s: *const ProtoString, len: *mut usize) -> *const u8 {
    // SAFETY: contract.
    unsafe {
        let b = (*s).as_bytes();
        *len = b.len();
        b.as_ptr()
    }
}

/// A string element's `std::string`, for writes through it (`mutable_x(i)`): the value moves
/// into it.
///
/// # Safety
/// `s` is a live element that nothing else accesses.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_str_mutable(s: *mut ProtoString) -> *mut c_void {
    // SAFETY: contract.
    unsafe { (*s).make_cxx() }
}

/// Sets a string element to a copy of `len` bytes at `data`.
///
/// # Safety
/// `s` is a live element, not accessed by others; `data` is readable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_str_set(s: *mut ProtoString, data: *const u8, len: usize) {
    // SAFETY: contract.
    unsafe { (*s).set_bytes(bytes(data, len)) }
}

/// `len` bytes at `data` (any pointer when `len` is 0).
///
/// # Safety
/// `data` is readable for `len` bytes when `len > 0`.
unsafe fn bytes<'a>(data: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: contract.
        unsafe { std::slice::from_raw_parts(data, len) }
    }
}

/// Sets an optional string field (which becomes set) and returns its `std::string`.
///
/// # Safety
/// `f` is a live field that nothing else accesses.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_ostr_mutable(f: *mut Option<ProtoString>) -> *mut c_void {
    // SAFETY: contract.
    unsafe { (*f).get_or_insert_with(ProtoString::new).make_cxx() }
}

/// Sets an optional string field to a copy of `len` bytes at `data`.
///
/// # Safety
/// As [`onnxl_cxx_ostr_mutable`]; `data` is readable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_ostr_set(
    f: *mut Option<ProtoString>,
    data: *const u8,
    len: usize,
) {
    // SAFETY: contract.
    unsafe {
        let b = bytes(data, len);
        match &mut *f {
            Some(s) => s.set_bytes(b),
            None => *f = Some(ProtoString::from_bytes(b)),
        }
    }
}

/// Unsets an optional string field.
///
/// # Safety
/// As [`onnxl_cxx_ostr_mutable`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_ostr_clear(f: *mut Option<ProtoString>) {
    // SAFETY: contract.
    unsafe { *f = None }
}

/// Unsets an optional string field and returns its value as a heap `std::string` the caller
/// deletes (NULL when it was unset).
///
/// # Safety
/// As [`onnxl_cxx_ostr_mutable`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_ostr_release(f: *mut Option<ProtoString>) -> *mut c_void {
    // SAFETY: contract.
    unsafe {
        (*f).take()
            .map_or(std::ptr::null_mut(), ProtoString::into_cxx)
    }
}

/// Gives the field the heap `std::string` `s` (NULL: unsets it).
///
/// # Safety
/// As [`onnxl_cxx_ostr_mutable`]; `s` is NULL or a `new std::string` nobody else owns.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_ostr_set_allocated(f: *mut Option<ProtoString>, s: *mut c_void) {
    // SAFETY: contract.
    unsafe {
        *f = std::ptr::NonNull::new(s).map(|p| ProtoString::from_cxx(CxxString::adopt(p)));
    }
}

/// True when the optional string field is set.
///
/// # Safety
/// `f` is a live field.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_ostr_has(f: *const Option<ProtoString>) -> bool {
    // SAFETY: contract.
    unsafe { (*f).is_some() }
}

// ---------------------------------------------------------------------------------------------
// Tensor payloads (`optional bytes raw_data`).

/// The `std::string` slot of a payload field (see `bytes::CxxSlot`; the C++ header's `payload`
/// reads it and publishes a copy of the bytes there the first time), NULL when unset.
///
/// # Safety
/// `f` is a live payload field that no other thread modifies.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_payload_slot(f: *const Option<ByteSpan>) -> *mut c_void {
    // SAFETY: contract.
    unsafe {
        (*f).as_ref()
            .map_or(std::ptr::null_mut(), ByteSpan::cxx_slot)
    }
}

/// The bytes of a set payload field.
///
/// # Safety
/// `f` is a live, set payload field that no other thread modifies; `len` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_payload_bytes(
    f: *const Option<ByteSpan>,
    len: *mut usize,
) -> *const u8 {
    // SAFETY: contract.
    unsafe {
        let b = (*f).as_ref().map_or(&[][..], ByteSpan::as_slice);
        *len = b.len();
        b.as_ptr()
    }
}

/// Sets a payload field (which becomes set) and returns its `std::string`.
///
/// # Safety
/// `f` is a live field that nothing else accesses.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_payload_mutable(f: *mut Option<ByteSpan>) -> *mut c_void {
    // SAFETY: contract.
    unsafe { (*f).get_or_insert_with(ByteSpan::new).make_cxx() }
}

/// Sets a payload field to a copy of `len` bytes at `data`.
///
/// # Safety
/// As [`onnxl_cxx_payload_mutable`]; `data` is readable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_payload_set(
    f: *mut Option<ByteSpan>,
    data: *const u8,
    len: usize,
) {
    // SAFETY: contract.
    unsafe {
        let b = bytes(data, len);
        match &mut *f {
            Some(s) => s.assign(b),
            None => *f = Some(ByteSpan::from_vec(b.to_vec())),
        }
    }
}

/// Unsets a payload field.
///
/// # Safety
/// As [`onnxl_cxx_payload_mutable`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_payload_clear(f: *mut Option<ByteSpan>) {
    // SAFETY: contract.
    unsafe { *f = None }
}

/// Unsets a payload field and returns its bytes as a heap `std::string` (NULL when unset).
///
/// # Safety
/// As [`onnxl_cxx_payload_mutable`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_payload_release(f: *mut Option<ByteSpan>) -> *mut c_void {
    // SAFETY: contract.
    unsafe { (*f).take().map_or(std::ptr::null_mut(), ByteSpan::into_cxx) }
}

/// Gives the payload field the heap `std::string` `s` (NULL: unsets it).
///
/// # Safety
/// As [`onnxl_cxx_ostr_set_allocated`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_payload_set_allocated(f: *mut Option<ByteSpan>, s: *mut c_void) {
    // SAFETY: contract.
    unsafe {
        *f = std::ptr::NonNull::new(s).map(|p| ByteSpan::from_cxx(CxxString::adopt(p)));
    }
}

/// True when the payload field is set.
///
/// # Safety
/// `f` is a live field.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_payload_has(f: *const Option<ByteSpan>) -> bool {
    // SAFETY: contract.
    unsafe { (*f).is_some() }
}

// ---------------------------------------------------------------------------------------------
// Repeated strings and scalars (`InlineVec`, whatever its inline capacity: through its header).

type StrList = InlineVec<ProtoString>;

/// Appends a copy of `len` bytes at `data` to a repeated string field; returns the element, or
/// NULL and the last error when the list cannot grow (`ONNXL_STATUS_LIMIT_EXCEEDED` past 2^31 − 1
/// elements, `ONNXL_STATUS_OUT_OF_MEMORY`).
///
/// # Safety
/// `f` is a live repeated string field that nothing else accesses; `data` readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_strs_add(
    f: *mut StrList,
    data: *const u8,
    len: usize,
) -> *mut ProtoString {
    use crate::wire::inline_vec::raw;
    let h = f.cast::<raw::Header<ProtoString>>();
    // SAFETY: contract; every `InlineVec<ProtoString, N>` starts with this header.
    unsafe {
        if let Err(e) = raw::reserve(h, 1, false) {
            grow_failed(e);
            return std::ptr::null_mut();
        }
        let s = ProtoString::from_bytes(bytes(data, len));
        raw::push(h, s).expect("room reserved");
        raw::data(h).add(raw::len(h) - 1)
    }
}

/// Records why a list could not grow as the last error; false.
#[cold]
#[inline(never)]
fn grow_failed(e: crate::wire::inline_vec::raw::GrowError) -> bool {
    super::status::set_last_error(e.into());
    false
}

/// Keeps the first `n` elements of a repeated string field.
///
/// # Safety
/// As [`onnxl_cxx_strs_add`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_strs_truncate(f: *mut StrList, n: usize) {
    use crate::wire::inline_vec::raw;
    // SAFETY: contract.
    unsafe { raw::truncate(f.cast::<raw::Header<ProtoString>>(), n) }
}

/// Removes `n` elements from `start` of a repeated string field.
///
/// # Safety
/// As [`onnxl_cxx_strs_add`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_strs_delete(f: *mut StrList, start: usize, n: usize) {
    use crate::wire::inline_vec::raw;
    // SAFETY: contract.
    unsafe { raw::delete_range(f.cast::<raw::Header<ProtoString>>(), start, n) }
}

/// Makes room for `n` more elements of a repeated string field; false (and the last error) as
/// [`onnxl_cxx_strs_add`].
///
/// # Safety
/// As [`onnxl_cxx_strs_add`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_strs_reserve(f: *mut StrList, n: usize) -> bool {
    // SAFETY: contract.
    unsafe { reserve_list::<ProtoString>(f.cast(), n) }
}

/// Appends `value` (the bits of a 4-byte scalar) to a repeated 4-byte scalar field; false (and
/// the last error) when the list cannot grow (`ONNXL_STATUS_LIMIT_EXCEEDED` past 2^31 − 1
/// elements, `ONNXL_STATUS_OUT_OF_MEMORY`).
///
/// # Safety
/// `f` is a live `InlineVec` of a 4-byte scalar that nothing else accesses.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_scalars32_add(f: *mut c_void, value: u32) -> bool {
    // SAFETY: contract; i32 / f32 lists have the layout of u32 lists.
    unsafe { push_scalar::<u32>(f, value) }
}

/// Appends `value` (the bits of an 8-byte scalar) to a repeated 8-byte scalar field; false as
/// [`onnxl_cxx_scalars32_add`].
///
/// # Safety
/// As [`onnxl_cxx_scalars32_add`], for 8-byte scalars.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_scalars64_add(f: *mut c_void, value: u64) -> bool {
    // SAFETY: contract; i64 / u64 / f64 lists have the layout of u64 lists.
    unsafe { push_scalar::<u64>(f, value) }
}

/// Makes room for `n` more elements of a repeated 4-byte scalar field; false as
/// [`onnxl_cxx_scalars32_add`].
///
/// # Safety
/// As [`onnxl_cxx_scalars32_add`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_scalars32_reserve(f: *mut c_void, n: usize) -> bool {
    // SAFETY: contract.
    unsafe { reserve_list::<u32>(f, n) }
}

/// Makes room for `n` more elements of a repeated 8-byte scalar field; false as
/// [`onnxl_cxx_scalars32_add`].
///
/// # Safety
/// As [`onnxl_cxx_scalars64_add`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_scalars64_reserve(f: *mut c_void, n: usize) -> bool {
    // SAFETY: contract.
    unsafe { reserve_list::<u64>(f, n) }
}

/// # Safety
/// `f` is a live `InlineVec<T, N>` (any `N`) that nothing else accesses.
unsafe fn push_scalar<T>(f: *mut c_void, value: T) -> bool {
    use crate::wire::inline_vec::raw;
    // SAFETY: contract.
    unsafe { raw::push(f.cast::<raw::Header<T>>(), value).map_or_else(grow_failed, |()| true) }
}

/// # Safety
/// As [`push_scalar`].
unsafe fn reserve_list<T>(f: *mut c_void, n: usize) -> bool {
    use crate::wire::inline_vec::raw;
    // SAFETY: contract.
    unsafe { raw::reserve(f.cast::<raw::Header<T>>(), n, true).map_or_else(grow_failed, |()| true) }
}

// ---------------------------------------------------------------------------------------------
// Generic bodies of the per-message functions (cxx_messages.rs).

/// A seekable C++ stream (`ParseFromIstream`), read in the ranges a parse needs.
#[repr(C)]
pub struct OnnxlCxxSource {
    /// Reads `len` bytes at `offset` (from where the stream was when the parse began) into
    /// `dst`; false unless it read all of them.
    read: unsafe extern "C" fn(ctx: *mut c_void, offset: u64, dst: *mut u8, len: usize) -> bool,
    ctx: *mut c_void,
    /// The bytes from there to the stream's end.
    size: u64,
}

/// Tensor payloads of at least this many bytes are read from a C++ stream straight into their
/// `std::string`s: the parse never reads them into the image of the stream (one pass over
/// their memory, as protobuf's parse from a stream).
const STREAM_PAYLOAD_MIN: usize = 32 << 10;

/// An [`OnnxlCxxSource`] for the decode settings.
struct StreamReader(*const OnnxlCxxSource);

// SAFETY: the C++ classes' parse runs on the calling thread only (it never parses in parallel),
// which is the thread that owns the stream.
unsafe impl Send for StreamReader {}
// SAFETY: see `Send`.
unsafe impl Sync for StreamReader {}

impl StreamReader {
    fn read(&self, offset: u64, dst: &mut [u8]) -> bool {
        // SAFETY: `parse`'s contract: the source is live for the parse; `dst` is writable.
        unsafe { ((*self.0).read)((*self.0).ctx, offset, dst.as_mut_ptr(), dst.len()) }
    }
}

/// Parses `len` bytes at `data` — or, when `source` is not NULL, the stream it reads — into
/// `m` (cleared first unless `merge`), payloads copied; false (and the last error) when
/// protobuf would refuse the bytes.
///
/// Strings are decoded as `std::string`s (so that the getters never convert them), and, as
/// protobuf does when it parses into a message again, the memory of the content the parse
/// replaces is reused: its `std::string`s, boxed sub-messages and list buffers, taken in the
/// order the parse meets them (a parse of the same bytes puts every value where it was).
///
/// # Safety
/// `m` is a live message that nothing else accesses; `data` readable for `len` bytes, or
/// `source` a live source used by this thread only.
pub(crate) unsafe fn parse<M: Message + Recycle>(
    m: *mut M,
    data: *const u8,
    len: usize,
    merge: bool,
    source: *const OnnxlCxxSource,
) -> bool {
    // SAFETY: contract.
    unsafe { parse_any(m, data, len, merge, source) }
}

/// [`Recycle`] without the message type (for [`parse_any`]).
trait DynRecycle: DynMessage {
    fn recycle_any(&mut self, rec: &mut Recycler, strings: &mut CxxStringPool);
}

impl<M: Recycle> DynRecycle for M {
    fn recycle_any(&mut self, rec: &mut Recycler, strings: &mut CxxStringPool) {
        self.recycle(rec, strings);
    }
}

/// [`parse`] for every message type.
///
/// # Safety
/// As [`parse`].
unsafe fn parse_any(
    m: *mut dyn DynRecycle,
    data: *const u8,
    len: usize,
    merge: bool,
    source: *const OnnxlCxxSource,
) -> bool {
    ffi_value(false, || {
        // SAFETY: contract.
        let m = unsafe { &mut *m };
        let mut config = DecodeConfig::default();
        let image;
        let b = if source.is_null() {
            // SAFETY: contract.
            unsafe { bytes(data, len) }
        } else {
            image = stream_image(m.message_name(), source, &mut config)?;
            image.as_ref()
        };
        let mut strings = CxxStringPool::default();
        let mut recycler = Recycler::default();
        if !merge {
            m.recycle_any(&mut recycler, &mut strings);
        }
        let mut r = Reader::new(b, &config);
        if !source.is_null() {
            r.sparse_input(STREAM_PAYLOAD_MIN);
        }
        // SAFETY: both pools outlive the reader (dropped after it, below) and are used only
        // through it.
        unsafe { r.recycle_from(&mut strings, (&raw mut recycler).cast()) };
        let result = m.decode_from(&mut r);
        drop(r);
        result.map_err(FfiError::from)?;
        Ok(true)
    })
}

/// The sparse image of the stream `source` holds (a `name` message) without its large
/// payloads, which `config` then reads from the stream.
#[inline(never)]
fn stream_image(
    name: &str,
    source: *const OnnxlCxxSource,
    config: &mut DecodeConfig,
) -> Result<Image, FfiError> {
    let stream = StreamReader(source);
    // SAFETY: `parse`'s contract: the source is live.
    let size = unsafe { (*source).size };
    let read: ReadSource = Arc::new(move |offset, dst| stream.read(offset as u64, dst));
    let image = sparse_input(
        name,
        size,
        STREAM_PAYLOAD_MIN,
        config.max_depth,
        &read,
        "<stream>",
    )?;
    config.read_source = Some(read);
    Ok(image)
}

/// Serializes `m` into the buffer `alloc(ctx, size)` returns; false (and the last error) when it
/// returns NULL for a non-empty message.
///
/// # Safety
/// `m` is a live message; `alloc` returns NULL or `size` writable bytes.
pub(crate) unsafe fn serialize<M: Message>(
    m: *const M,
    alloc: super::cxx_text::OnnxlCxxAlloc,
    ctx: *mut c_void,
) -> bool {
    // SAFETY: contract.
    unsafe { serialize_any(&*m, alloc, ctx) }
}

/// [`serialize`] for every message type.
///
/// # Safety
/// As [`serialize`].
unsafe fn serialize_any(
    m: &dyn DynMessage,
    alloc: super::cxx_text::OnnxlCxxAlloc,
    ctx: *mut c_void,
) -> bool {
    ffi_value(false, || {
        let mut sizes = SizeTable::new();
        let len = usize::try_from(m.size_into(&mut sizes))
            .map_err(|_| FfiError::invalid("message too large for this platform"))?;
        // SAFETY: the caller's allocator (contract).
        let p = unsafe { alloc(ctx, len) };
        if len == 0 {
            return Ok(true);
        }
        if p.is_null() {
            return Err(crate::Error::alloc_failed(len, "the serialized message").into());
        }
        // SAFETY: `p` is writable for `len` bytes (contract).
        let buf = unsafe { std::slice::from_raw_parts_mut(p, len) };
        let mut sink = SliceWriter::new(buf);
        m.encode_into(&mut sink, &mut SizeCursor::new(sizes.as_slice()));
        debug_assert_eq!(sink.written(), len);
        Ok(true)
    })
}

/// Merges `src` into `dst` as protobuf's `MergeFrom` does (scalars overwritten, lists appended,
/// messages merged): by parsing `src`'s encoding into `dst`, which is that rule by definition.
/// False when memory runs out (the C++ side throws `std::bad_alloc`).
///
/// # Safety
/// `dst` and `src` are live; nothing else accesses `dst`; they may be the same object.
pub(crate) unsafe fn merge_from<M: Message>(dst: *mut M, src: *const M) -> bool {
    // SAFETY: contract; the bytes are taken before `dst` is borrowed mutably.
    unsafe {
        // (a message's own encoding parses: the one failure is running out of memory)
        let Ok(bytes) = crate::codec::serialize_to_vec(&*src, &Default::default()) else {
            return false;
        };
        (*dst)
            .merge_from_bytes(&bytes, &DecodeConfig::default())
            .is_ok()
    }
}

/// Adds an empty element to a repeated message field; returns it.
///
/// # Safety
/// `f` is a live field that nothing else accesses.
pub(crate) unsafe fn list_add<M: Message>(f: *mut RepeatedField<M>) -> *mut M {
    // SAFETY: contract.
    unsafe { (*f).push_default() }
}

/// Removes `n` elements from `start` (clamped) of a repeated message field.
///
/// # Safety
/// As [`list_add`].
pub(crate) unsafe fn list_delete<M: Message>(f: *mut RepeatedField<M>, start: usize, n: usize) {
    // SAFETY: contract.
    let f = unsafe { &mut *f };
    let start = start.min(f.len());
    let n = n.min(f.len() - start);
    for i in start..f.len() - n {
        f.swap(i, i + n);
    }
    f.truncate(f.len() - n);
}

/// Swaps elements `i` and `j` of a repeated message field (both in range).
///
/// # Safety
/// As [`list_add`].
pub(crate) unsafe fn list_swap<M: Message>(f: *mut RepeatedField<M>, i: usize, j: usize) {
    // SAFETY: contract.
    unsafe { (*f).swap(i, j) }
}

/// Keeps the first `n` elements of a repeated message field.
///
/// # Safety
/// As [`list_add`].
pub(crate) unsafe fn list_truncate<M: Message>(f: *mut RepeatedField<M>, n: usize) {
    // SAFETY: contract.
    unsafe { (*f).truncate(n) }
}

/// Makes room for `n` more elements of a repeated message field.
///
/// # Safety
/// As [`list_add`].
pub(crate) unsafe fn list_reserve<M: Message>(f: *mut RepeatedField<M>, n: usize) {
    // SAFETY: contract.
    unsafe { (*f).reserve(n) }
}

/// Writes a copy of `*src` to the uninitialized `p` (C++ copy construction); false, with nothing
/// written, when memory runs out (the constructor throws `std::bad_alloc`).
///
/// # Safety
/// `p` is writable memory of an `M`; `src` is live.
pub(crate) unsafe fn init_copy<M: TryClone>(p: *mut M, src: *const M) -> bool {
    // SAFETY: contract.
    match unsafe { (*src).try_clone() } {
        Ok(v) => {
            // SAFETY: contract.
            unsafe { p.write(v) };
            true
        }
        Err(_) => false,
    }
}

/// Replaces `*p` with a copy of `*src` (`CopyFrom`); false, with `*p` unchanged, when memory runs
/// out (`CopyFrom` throws `std::bad_alloc`).
///
/// # Safety
/// `p` and `src` are live.
pub(crate) unsafe fn copy_from<M: TryClone>(p: *mut M, src: *const M) -> bool {
    if std::ptr::eq(p, src) {
        return true;
    }
    // SAFETY: contract.
    match unsafe { (*src).try_clone() } {
        Ok(v) => {
            // SAFETY: contract.
            unsafe { *p = v };
            true
        }
        Err(_) => false,
    }
}

/// Appends a copy of `*src` to a repeated message field; returns it, or NULL with the field
/// unchanged when memory runs out (the C++ side throws `std::bad_alloc`).
///
/// # Safety
/// As [`list_add`]; `src` is live.
pub(crate) unsafe fn list_add_copy<M: Message + TryClone>(
    f: *mut RepeatedField<M>,
    src: *const M,
) -> *mut M {
    // SAFETY: contract; the copy is made before the field is borrowed mutably.
    unsafe {
        let Ok(v) = (*src).try_clone() else {
            return std::ptr::null_mut();
        };
        let p = (*f).push_default();
        *p = v;
        p
    }
}

/// An FNV-1a hash being fed (the layout fingerprint), usable in constants: the layout table's
/// sizes and offsets are hashed at compile time, as the text `layout_text` prints.
#[derive(Clone, Copy)]
pub(crate) struct Fnv1a(u64);

impl Fnv1a {
    /// The hash of no bytes.
    pub(crate) const NEW: Fnv1a = Fnv1a(0xcbf2_9ce4_8422_2325);

    /// The hash after `bytes` more.
    pub(crate) const fn bytes(self, bytes: &[u8]) -> Fnv1a {
        let mut h = self.0;
        let mut i = 0;
        while i < bytes.len() {
            h ^= bytes[i] as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
            i += 1;
        }
        Fnv1a(h)
    }

    /// The hash after `text` more.
    pub(crate) const fn text(self, text: &str) -> Fnv1a {
        self.bytes(text.as_bytes())
    }

    /// The hash after `n` in decimal (as `{}` prints it).
    pub(crate) const fn decimal(self, mut n: usize) -> Fnv1a {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let (_, used) = digits.split_at(start);
        self.bytes(used)
    }

    /// The hash value.
    pub(crate) const fn finish(self) -> u64 {
        self.0
    }
}

/// Where the layout table goes: its text (`String`, for the checked-in copy) or its FNV-1a hash
/// (the fingerprint); one description of the table feeds both.
pub(crate) trait LayoutSink: Sized {
    /// `text` appended.
    fn text(self, text: &str) -> Self;
    /// `n` in decimal appended.
    fn decimal(self, n: usize) -> Self;
    /// `b` as two lowercase hex digits appended.
    fn hex_byte(self, b: u8) -> Self {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let pair = [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]];
        self.text(std::str::from_utf8(&pair).unwrap_or("??"))
    }
    /// `true` or `false` appended.
    fn boolean(self, b: bool) -> Self {
        self.text(if b { "true" } else { "false" })
    }
}

impl LayoutSink for Fnv1a {
    fn text(self, text: &str) -> Self {
        Fnv1a::text(self, text)
    }
    fn decimal(self, n: usize) -> Self {
        Fnv1a::decimal(self, n)
    }
}

impl LayoutSink for String {
    fn text(mut self, text: &str) -> Self {
        self.push_str(text);
        self
    }
    fn decimal(mut self, n: usize) -> Self {
        use std::fmt::Write;
        let _ = write!(self, "{n}");
        self
    }
}

/// The representation facts the C++ header relies on, one per line (the end of the layout
/// table), fed to `o`: where a converted string keeps its `std::string`, how an optional string
/// and an optional scalar say "unset", and the headers of the list types.
pub(crate) fn layout_facts<S: LayoutSink>(o: S) -> S {
    // A string: its tag byte first, the `std::string*` that C++ reads at `cxx_slot_at`; the
    // first byte of an unset optional string.
    let some = Some(ProtoString::new());
    let payload = some.as_ref().map_or(0, |s| offset_in(&some, s));
    let mut o = o
        .text("string size=")
        .decimal(size_of::<ProtoString>())
        .text(" cxx_slot_at=")
        .decimal(crate::bytes::CXX_SLOT_AT)
        .text(" tag_cxx=")
        .decimal(crate::bytes::STRING_TAG_CXX.into())
        .text(" option_size=")
        .decimal(size_of::<Option<ProtoString>>())
        .text(" option_payload=")
        .decimal(payload)
        .text(" none_byte0=")
        .decimal(crate::bytes::OPTIONAL_STRING_NONE.into())
        .text("\n");
    o = option_scalar::<i32, S>(o, "i32", 7);
    o = option_scalar::<i64, S>(o, "i64", 7);
    o = option_scalar::<u64, S>(o, "u64", 7);
    o = option_scalar::<f32, S>(o, "f32", 7.0);
    o = option_scalar::<f64, S>(o, "f64", 7.0);
    let boxed = size_of::<Option<MsgBox<crate::proto::ModelProto>>>();
    o = o
        .text("option_box size=")
        .decimal(boxed)
        .text(" null_is_none=")
        .boolean(boxed == size_of::<usize>())
        // The box's origin word (`wire::MsgBox`), right before every message object: written
        // by `onnxl_cxx_alloc`, read by `onnxl_cxx_free`.
        .text(" origin_word_before=")
        .decimal(crate::mem::ORIGIN_WORD_BEFORE)
        .text("\n");
    let list: InlineVec<u64, 2> = [7].into();
    // SAFETY: the header is two u32 (repr(C): len, cap), then the inline elements.
    let (len, cap, first) = unsafe {
        let p = (&list as *const InlineVec<u64, 2>).cast::<u32>();
        (p.read(), p.add(1).read(), p.add(2).cast::<u64>().read())
    };
    let (order, rlen) = RepeatedField::<u64>::layout();
    o.text("inline_vec size_n0=")
        .decimal(size_of::<InlineVec<u64>>())
        .text(" size_u64_n2=")
        .decimal(size_of::<InlineVec<u64, 2>>())
        .text(" len_u32_at0=")
        .decimal(len as usize)
        .text(" cap_u32_at4=")
        .decimal(cap as usize)
        .text(" data_at8=")
        .decimal(first as usize)
        .text(" max_len=")
        .decimal(crate::wire::inline_vec::MAX_LEN)
        .text("\nrepeated_field size=")
        .decimal(size_of::<RepeatedField<u64>>())
        .text(" order=")
        .decimal(order)
        .text(" len=")
        .decimal(rlen)
        // The functions the header registers (`OnnxlCxxStringOps`, in this order), and which
        // contract they follow: `fill` (a stream payload written in place), which replaced a
        // `resize` of the same size, so that a header of the other contract is refused.
        .text("\nstring_ops size=")
        .decimal(size_of::<crate::bytes::CxxStringOps>())
        .text(" payload=fill\n")
}

/// The tag word of `None` of a oneof enum (`repr(u32)`, the tag first): the niche value the
/// compiler chose, read in a constant.
pub(crate) const fn none_tag<E>() -> usize {
    let none = std::mem::ManuallyDrop::new(None::<E>);
    // SAFETY: `ManuallyDrop` is transparent; the first word of an `Option` of a `repr(u32)`
    // enum is the enum's tag word (`None` stores its niche value there), initialized.
    unsafe { *(&none as *const std::mem::ManuallyDrop<Option<E>>).cast::<u32>() as usize }
}

/// Where the value of a oneof case of type `T` lies in the enum: `repr(u32)` makes each case a
/// `repr(C)` struct of the `u32` tag and the value.
pub(crate) const fn case_value_offset<T>() -> usize {
    size_of::<u32>().next_multiple_of(align_of::<T>())
}

/// Offset of `inner` within `outer`.
fn offset_in<O, I>(outer: &O, inner: &I) -> usize {
    (inner as *const I as usize) - (outer as *const O as usize)
}

/// `option_T size= value= none= some=`: the bytes before the value (the tag) of `None` and of
/// `Some`, in hex.
fn option_scalar<T: Copy, S: LayoutSink>(o: S, name: &str, v: T) -> S {
    let some = Some(v);
    let none: Option<T> = None;
    let at = some.as_ref().map_or(0, |x| offset_in(&some, x));
    let hex = |mut o: S, x: &Option<T>| -> S {
        let p = (x as *const Option<T>).cast::<u8>();
        for i in 0..at {
            // SAFETY: the bytes before the value are the tag, initialized in both variants.
            o = o.hex_byte(unsafe { *p.add(i) });
        }
        o
    };
    let o = o
        .text("option_")
        .text(name)
        .text(" size=")
        .decimal(size_of::<Option<T>>())
        .text(" value=")
        .decimal(at)
        .text(" none=");
    let o = hex(o, &none).text(" some=");
    hex(o, &some).text("\n")
}

#[cfg(test)]
mod tests {
    use super::Fnv1a;

    #[test]
    fn fnv1a_of_a_number_is_that_of_its_decimal_text() {
        for n in [0, 7, 10, 99, 100, 123_456, usize::MAX] {
            let digits = n.to_string();
            assert_eq!(
                Fnv1a::NEW.decimal(n).finish(),
                Fnv1a::NEW.text(&digits).finish(),
                "{n}"
            );
        }
        // FNV-1a's published value for "a".
        assert_eq!(Fnv1a::NEW.text("a").finish(), 0xaf63_dc4c_8601_ec8c);
    }
}
