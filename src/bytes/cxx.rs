//! C++ strings: what lets the C++ classes return `const std::string&` for a field. The C++
//! layer registers its `std::string` functions once ([`CxxStringOps`]); a [`ProtoString`] or
//! [`ByteSpan`] read from C++ keeps its `std::string` in a slot ([`CxxSlot`]) that is filled
//! once and never changed by a read, and the C++ classes' parse takes strings from a
//! [`CxxStringPool`] of the `std::string`s of the content it replaces.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, Ordering};

use super::{ByteSpan, ProtoString, Repr, StrRepr, StringHook, slice_or_empty};

/// The C++ layer's functions on its `std::string` (registered once, at start-up, by
/// `include/onnx_light.hpp` through `onnxl_cxx_init`).
#[repr(C)]
pub struct CxxStringOps {
    /// `new std::string(data, len)`.
    pub create: unsafe extern "C" fn(data: *const u8, len: usize) -> *mut c_void,
    /// `delete s`.
    pub destroy: unsafe extern "C" fn(s: *mut c_void),
    /// `s->assign(data, len)`.
    pub assign: unsafe extern "C" fn(s: *mut c_void, data: *const u8, len: usize),
    /// `s->data()`.
    pub data: unsafe extern "C" fn(s: *const c_void) -> *mut u8,
    /// `s->size()`.
    pub size: unsafe extern "C" fn(s: *const c_void) -> usize,
    /// `s` made `len` bytes long, written in order by `read(ctx, dst, n)` without a zero fill
    /// first; false when it could not grow or a read said false.
    pub fill: unsafe extern "C" fn(
        s: *mut c_void,
        len: usize,
        read: unsafe extern "C" fn(ctx: *mut c_void, dst: *mut u8, n: usize) -> bool,
        ctx: *mut c_void,
    ) -> bool,
}

static CXX_STRING_OPS: OnceLock<&'static CxxStringOps> = OnceLock::new();

/// Registers the C++ layer's string functions; the first registration wins (every copy of the
/// header makes the same `std::string`s). Returns the functions in use.
pub(crate) fn register_cxx_string_ops(ops: &'static CxxStringOps) -> &'static CxxStringOps {
    CXX_STRING_OPS.get_or_init(|| ops)
}

fn cxx_ops() -> &'static CxxStringOps {
    CXX_STRING_OPS
        .get()
        .expect("C++ strings exist only after the C++ layer registered its functions")
}

/// A heap `std::string` made by the C++ layer (or adopted from C++: `set_allocated_x`), owned
/// by the holder of this value.
#[repr(C)]
pub(crate) struct CxxString(NonNull<c_void>);

impl CxxString {
    /// A new `std::string` holding a copy of `bytes`.
    pub(crate) fn new(bytes: &[u8]) -> Self {
        // SAFETY: `create` copies `bytes.len()` readable bytes.
        let p = unsafe { (cxx_ops().create)(bytes.as_ptr(), bytes.len()) };
        Self(NonNull::new(p).expect("std::string allocation"))
    }

    /// Takes ownership of a `std::string` made by the C++ layer (`new std::string`).
    ///
    /// # Safety
    /// `p` is a live heap `std::string` that nothing else owns.
    pub(crate) unsafe fn adopt(p: NonNull<c_void>) -> Self {
        Self(p)
    }

    /// Gives up ownership: the caller deletes the `std::string`.
    pub(crate) fn into_raw(self) -> *mut c_void {
        std::mem::ManuallyDrop::new(self).0.as_ptr()
    }

    /// Deletes the `std::string` at `p`.
    ///
    /// # Safety
    /// `p` is a live heap `std::string` owned by the caller, not used again.
    pub(super) unsafe fn destroy(p: *mut c_void) {
        // SAFETY: the caller's contract.
        unsafe { (cxx_ops().destroy)(p) }
    }

    /// The bytes of the `std::string` at `p`.
    ///
    /// # Safety
    /// `p` is a live `std::string` that stays alive and unmodified for `'a`.
    pub(super) unsafe fn bytes_at<'a>(p: *mut c_void) -> &'a [u8] {
        let ops = cxx_ops();
        // SAFETY: the caller's contract; `data()` points at `size()` bytes.
        unsafe { slice_or_empty((ops.data)(p), (ops.size)(p)) }
    }

    pub(super) fn assign(&mut self, bytes: &[u8]) {
        // SAFETY: live string, exclusive; `assign` copies (and copes with overlap).
        unsafe { (cxx_ops().assign)(self.0.as_ptr(), bytes.as_ptr(), bytes.len()) }
    }
}

impl Drop for CxxString {
    fn drop(&mut self) {
        // SAFETY: the string is owned by `self` and dropped once.
        unsafe { Self::destroy(self.0.as_ptr()) }
    }
}

// SAFETY: a `std::string` is plain owned memory, usable from any thread; shared access reads.
unsafe impl Send for CxxString {}
// SAFETY: see `Send`.
unsafe impl Sync for CxxString {}

/// The `std::string` through which the C++ classes read a string or payload field, one pointer
/// word at the end of a [`ProtoString`] / [`ByteSpan`]: null until C++ asks for the field.
///
/// The design rule (protobuf's thread contract): no read changes what another read sees, and no
/// read invalidates a pointer handed out before.
/// - A const C++ getter on a field without a `std::string` makes one holding a copy of the
///   value and publishes it with compare-and-swap (the header's `detail::publish`, so that
///   ThreadSanitizer sees both sides of it in the program's own code). The value itself
///   is not touched, so Rust and C readers of it (a serializer on another thread, a pointer
///   from `onnxl_node_proto_name` or `raw_data_view()` taken before) are unaffected; the
///   `std::string` is a second copy, freed with the field.
/// - When the value lives in the `std::string` (strings of the C++ classes' parse and setters,
///   `mutable_x()`, `set_allocated_x()`), the holder's tag says so (`StrRepr::Cxx`,
///   `Repr::Cxx`) and Rust reads it there.
/// - Writes (`&mut`) with a `std::string` present assign into it, so C++ references taken
///   before see the new value, as with protobuf.
#[repr(transparent)]
pub(crate) struct CxxSlot(AtomicPtr<c_void>);

impl CxxSlot {
    /// No `std::string`.
    pub(crate) const fn empty() -> CxxSlot {
        CxxSlot(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// A slot owning `s`.
    pub(super) fn with(s: CxxString) -> Self {
        Self(AtomicPtr::new(s.into_raw()))
    }

    /// The `std::string`, if there is one.
    #[inline]
    pub(super) fn get(&self) -> Option<NonNull<c_void>> {
        NonNull::new(self.0.load(Ordering::Acquire))
    }

    /// True when there is a `std::string`.
    #[inline(always)]
    pub(super) fn is_set(&self) -> bool {
        !self.0.load(Ordering::Relaxed).is_null()
    }

    /// The `std::string`, made of `bytes` if there is none (exclusive access).
    pub(super) fn get_or_make(&mut self, bytes: &[u8]) -> *mut c_void {
        let p = self.0.get_mut();
        if p.is_null() {
            *p = CxxString::new(bytes).into_raw();
        }
        *p
    }

    /// The address of the slot, where the C++ header reads the `std::string` and publishes the
    /// one it makes with compare-and-swap (shared access).
    pub(super) fn as_ptr(&self) -> *mut c_void {
        self.0.as_ptr().cast()
    }

    /// The bytes of the `std::string` (which must exist).
    #[inline]
    pub(super) fn bytes(&self) -> &[u8] {
        let p = self.get().expect("a Cxx value has its std::string");
        // SAFETY: owned by this slot, alive while `self` is; changed only through `&mut`.
        unsafe { CxxString::bytes_at(p.as_ptr()) }
    }

    /// The writable bytes of the `std::string` (which must exist).
    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        let p = *self.0.get_mut();
        assert!(!p.is_null(), "a Cxx value has its std::string");
        let ops = cxx_ops();
        // SAFETY: owned by this slot and borrowed exclusively; `data()` of a non-const string is
        // writable for `size()` bytes.
        unsafe {
            let (d, n) = ((ops.data)(p), (ops.size)(p));
            if n == 0 {
                &mut []
            } else {
                std::slice::from_raw_parts_mut(d, n)
            }
        }
    }

    /// Assigns `bytes` to the `std::string` (which must exist).
    pub(super) fn assign(&mut self, bytes: &[u8]) {
        let p = *self.0.get_mut();
        assert!(!p.is_null(), "assign needs a std::string");
        // SAFETY: owned by this slot, borrowed exclusively; `assign` copies.
        unsafe { (cxx_ops().assign)(p, bytes.as_ptr(), bytes.len()) }
    }

    /// Takes the `std::string` out (the slot becomes empty).
    pub(super) fn take(&mut self) -> Option<CxxString> {
        let p = std::mem::replace(self.0.get_mut(), std::ptr::null_mut());
        // SAFETY: the slot owned it; now the returned value does.
        NonNull::new(p).map(|p| unsafe { CxxString::adopt(p) })
    }
}

impl Drop for CxxSlot {
    fn drop(&mut self) {
        let p = *self.0.get_mut();
        if !p.is_null() {
            // SAFETY: owned by this slot, dropped once.
            unsafe { CxxString::destroy(p) }
        }
    }
}

/// The `std::string`s of the strings a C++ parse replaces, in the order it met them, reused
/// first-in first-out by the strings it decodes: a parse of the same bytes into the same
/// message puts each value into the `std::string` that held it before (protobuf reuses a
/// message's strings the same way). Those left over are deleted with the pool.
#[derive(Default)]
pub(crate) struct CxxStringPool(std::collections::VecDeque<CxxString>);

impl CxxStringPool {
    /// Keeps the `std::string` of `s`, if it has one (`s` becomes empty).
    pub(crate) fn keep(&mut self, s: &mut ProtoString) {
        if let Some(c) = s.cxx.take() {
            s.repr = ProtoString::new().into_repr();
            self.0.push_back(c);
        }
    }

    /// Keeps the `std::string` of tensor bytes `b`, if they have one (`b` becomes empty).
    pub(crate) fn keep_payload(&mut self, b: &mut ByteSpan) {
        if let Some(c) = b.cxx.take() {
            b.repr = Repr::Owned(Vec::new());
            self.0.push_back(c);
        }
    }

    /// The next kept `std::string`, assigned `bytes`, or a new one.
    pub(super) fn take(&mut self, bytes: &[u8]) -> CxxString {
        match self.0.pop_front() {
            Some(mut s) => {
                s.assign(bytes);
                s
            }
            None => CxxString::new(bytes),
        }
    }
}

/// The C++ classes' parse takes its strings and payloads from the `std::string`s of the
/// content it replaces: each is held in a `std::string` from the start, where the getters find
/// it in place.
impl StringHook for CxxStringPool {
    fn string(&mut self, bytes: &[u8]) -> ProtoString {
        ProtoString::from_cxx(self.take(bytes))
    }

    fn payload(&mut self, bytes: &[u8]) -> ByteSpan {
        ByteSpan::from_cxx(self.take(bytes))
    }

    /// A payload read from a stream: written into its `std::string`, no other copy made.
    fn payload_read(
        &mut self,
        len: usize,
        offset: usize,
        read: &dyn Fn(usize, &mut [u8]) -> bool,
    ) -> Option<(ByteSpan, bool)> {
        let s = self.0.pop_front().unwrap_or_else(|| CxxString::new(&[]));
        let mut fill = StreamFill {
            read,
            offset,
            failed: false,
        };
        // SAFETY: a live string owned by `s`; `fill` outlives the call, which is the only user
        // of the pointer.
        let filled = unsafe {
            (cxx_ops().fill)(s.0.as_ptr(), len, StreamFill::piece, (&raw mut fill).cast())
        };
        match (filled, fill.failed) {
            (false, false) => None,
            _ => Some((ByteSpan::from_cxx(s), filled)),
        }
    }
}

/// The reads of one [`CxxStringPool::payload_read`]: the pieces the C++ layer asks for, in
/// order from `offset`.
struct StreamFill<'a> {
    read: &'a dyn Fn(usize, &mut [u8]) -> bool,
    offset: usize,
    /// A read said false (else a failed fill ran out of memory).
    failed: bool,
}

impl StreamFill<'_> {
    /// `CxxStringOps::fill`'s `read`: the next `n` bytes into `dst`.
    ///
    /// # Safety
    /// `ctx` is the `StreamFill` of the running fill; `dst` is writable for `n` bytes.
    unsafe extern "C" fn piece(ctx: *mut c_void, dst: *mut u8, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        // SAFETY: contract (`n` > 0, so `dst` is a real pointer).
        let (f, dst) = unsafe {
            (
                &mut *ctx.cast::<Self>(),
                std::slice::from_raw_parts_mut(dst, n),
            )
        };
        let ok = (f.read)(f.offset, dst);
        f.offset += n;
        f.failed |= !ok;
        ok
    }
}

impl ProtoString {
    /// The value moved into its `std::string` (made if needed), for writes through it
    /// (`mutable_x()`): later writes through the `std::string` are the value.
    pub(crate) fn make_cxx(&mut self) -> *mut c_void {
        if matches!(self.repr, StrRepr::Cxx) {
            return self.cxx.get_or_make(&[]);
        }
        let value = std::mem::replace(&mut self.repr, StrRepr::Cxx);
        self.cxx.get_or_make(Self::of(value).as_bytes())
    }

    /// A value that owns the `std::string` `s` (C++ `set_allocated_x`).
    pub(crate) fn from_cxx(s: CxxString) -> Self {
        Self {
            repr: StrRepr::Cxx,
            cxx: CxxSlot::with(s),
        }
    }

    /// The value as a heap `std::string` the caller owns (C++ `release_x`).
    pub(crate) fn into_cxx(mut self) -> *mut c_void {
        match self.cxx.take() {
            // The value, or a copy of it.
            Some(s) => s.into_raw(),
            None => CxxString::new(self.as_bytes()).into_raw(),
        }
    }
}

impl ByteSpan {
    /// The address of the slot of the `std::string` that C++ reads the bytes through (see
    /// [`CxxSlot`]).
    pub(crate) fn cxx_slot(&self) -> *mut c_void {
        self.cxx.as_ptr()
    }

    /// The bytes moved into their `std::string` (made if needed), for writes through it.
    pub(crate) fn make_cxx(&mut self) -> *mut c_void {
        if matches!(self.repr, Repr::Cxx) {
            return self.cxx.get_or_make(&[]);
        }
        let value = std::mem::replace(&mut self.repr, Repr::Cxx);
        let old = ByteSpan {
            repr: value,
            cxx: CxxSlot::empty(),
        };
        self.cxx.get_or_make(old.as_slice())
    }

    /// Replaces the bytes with a copy of `bytes`, inside the same `std::string` when it has one.
    pub(crate) fn assign(&mut self, bytes: &[u8]) {
        if self.cxx.is_set() {
            self.cxx.assign(bytes);
            self.repr = Repr::Cxx;
        } else {
            self.repr = Repr::Owned(bytes.to_vec());
        }
    }

    /// Frees the `std::string` copy that a const read through the C++ classes made of these
    /// bytes (kept until then, so that the reference it returned stays valid). Nothing changes
    /// when the bytes live in their `std::string` (set or parsed through C++) or no copy was
    /// made.
    pub fn release_cxx_copy(&mut self) {
        if !matches!(self.repr, Repr::Cxx) {
            drop(self.cxx.take());
        }
    }

    /// Bytes that own the `std::string` `s`.
    pub(crate) fn from_cxx(s: CxxString) -> Self {
        Self {
            repr: Repr::Cxx,
            cxx: CxxSlot::with(s),
        }
    }

    /// The bytes as a heap `std::string` the caller owns.
    pub(crate) fn into_cxx(mut self) -> *mut c_void {
        match self.cxx.take() {
            Some(s) => s.into_raw(),
            None => CxxString::new(self.as_slice()).into_raw(),
        }
    }
}
