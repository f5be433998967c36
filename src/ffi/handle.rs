//! Handle plumbing: the `Castable` link between an opaque C type and its Rust type, checked
//! pointer-to-reference conversions, (pointer, length) views, and the small generic bodies the
//! generated accessors (`accessors.rs`) call.
//!
//! Every helper here that takes a raw pointer is `unsafe` with one contract: the pointer is NULL
//! or was produced by this library for the same type and is still alive, and no other thread
//! mutates the object during the call. NULL is always detected and reported as
//! `ONNXL_STATUS_NULL_POINTER`.

use crate::proto::RepeatedField;
use std::ffi::{CStr, c_char};
use std::path::PathBuf;

use super::panic::{ffi_status, ffi_status_on, ffi_value_on};
use super::status::{FfiError, OnnxlStatus};

/// Ties an opaque C-facing type to the Rust type its pointers really point at.
pub(crate) trait Castable {
    /// The Rust type behind the handle.
    type Rust;
}

/// A borrowed view of a `string` field: `len` bytes at `data`, NOT NUL-terminated and not
/// necessarily UTF-8 (proto2 strings are not validated).
///
/// `data` is never NULL for a successful read (an empty value points at a static empty string);
/// it is NULL (with `len` 0) only when the read failed (NULL handle, index out of range), and the
/// last error then says why. Lifetime: stated by the function that returns the view.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OnnxlStr {
    /// First byte (not NUL-terminated).
    pub data: *const c_char,
    /// Number of bytes.
    pub len: usize,
}

/// A borrowed view of a `bytes` field: `len` bytes at `data`.
///
/// `data` is never NULL for a successful read (an empty value points at a static empty array);
/// it is NULL (with `len` 0) only when the read failed. Lifetime: stated by the function that
/// returns the view.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OnnxlBytes {
    /// First byte.
    pub data: *const u8,
    /// Number of bytes.
    pub len: usize,
}

static EMPTY: [u8; 1] = [0];

impl OnnxlStr {
    pub(crate) const FAILED: Self = Self {
        data: std::ptr::null(),
        len: 0,
    };
    pub(crate) fn of(b: &[u8]) -> Self {
        let data = if b.is_empty() {
            EMPTY.as_ptr()
        } else {
            b.as_ptr()
        };
        Self {
            data: data.cast(),
            len: b.len(),
        }
    }
}

impl OnnxlBytes {
    pub(crate) const FAILED: Self = Self {
        data: std::ptr::null(),
        len: 0,
    };
    pub(crate) fn of(b: &[u8]) -> Self {
        let data = if b.is_empty() {
            EMPTY.as_ptr()
        } else {
            b.as_ptr()
        };
        Self { data, len: b.len() }
    }
}

/// `&T` from a handle pointer.
///
/// # Safety
/// See the module contract; the reference must not outlive the call.
pub(crate) unsafe fn try_ref<'a, C: Castable>(
    p: *const C,
    what: &str,
) -> Result<&'a C::Rust, FfiError> {
    if p.is_null() {
        return Err(FfiError::null(what));
    }
    // SAFETY: non-NULL handles point at a live `C::Rust` (module contract).
    Ok(unsafe { &*p.cast::<C::Rust>() })
}

/// `&mut T` from a handle pointer.
///
/// # Safety
/// See the module contract; the caller has exclusive access during the call.
pub(crate) unsafe fn try_mut<'a, C: Castable>(
    p: *mut C,
    what: &str,
) -> Result<&'a mut C::Rust, FfiError> {
    if p.is_null() {
        return Err(FfiError::null(what));
    }
    // SAFETY: non-NULL handles point at a live `C::Rust` with no other user (module contract).
    Ok(unsafe { &mut *p.cast::<C::Rust>() })
}

/// Moves `v` to the heap and returns its owning handle (freed by [`free_box`]).
pub(crate) fn into_raw<C: Castable>(v: C::Rust) -> *mut C {
    Box::into_raw(Box::new(v)).cast()
}

/// Frees a handle made by [`into_raw`]; NULL is ignored.
///
/// # Safety
/// `p` is NULL or came from [`into_raw`] for the same type and was not freed yet.
pub(crate) unsafe fn free_box<C: Castable>(p: *mut C) {
    if !p.is_null() {
        // SAFETY: `p` came from `Box::into_raw` of a `Box<C::Rust>` (contract).
        drop(unsafe { Box::from_raw(p.cast::<C::Rust>()) });
    }
}

/// Checks an out-pointer before any work is done.
pub(crate) fn check_out<T>(out: *mut T, what: &str) -> Result<(), FfiError> {
    if out.is_null() {
        Err(FfiError::null(what))
    } else {
        Ok(())
    }
}

/// Writes a result through a checked out-pointer.
///
/// # Safety
/// `out` is non-NULL (see [`check_out`]) and valid for a write of `T`.
pub(crate) unsafe fn write_out<T>(out: *mut T, v: T) {
    // SAFETY: guaranteed by the caller; `write` does not drop the (uninitialized) old value.
    unsafe { out.write(v) }
}

/// `len` bytes at `data` supplied by C; NULL is allowed only with `len` 0.
///
/// # Safety
/// For `len > 0`, `data..data+len` is readable and unchanged for `'a`.
pub(crate) unsafe fn c_bytes<'a, T>(
    data: *const T,
    len: usize,
    what: &str,
) -> Result<&'a [T], FfiError> {
    if len == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(FfiError::null(what));
    }
    if len
        .checked_mul(size_of::<T>())
        .is_none_or(|n| n > isize::MAX as usize)
    {
        return Err(FfiError::invalid(format!(
            "{what}: length {len} is too large"
        )));
    }
    // SAFETY: non-NULL, `len` elements readable (caller contract), size checked above.
    Ok(unsafe { std::slice::from_raw_parts(data, len) })
}

/// A path given as a NUL-terminated C string (bytes as they are on Unix; UTF-8 elsewhere).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string readable for the call.
pub(crate) unsafe fn c_path(p: *const c_char, what: &str) -> Result<PathBuf, FfiError> {
    if p.is_null() {
        return Err(FfiError::null(what));
    }
    // SAFETY: non-NULL and NUL-terminated (contract).
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    if bytes.is_empty() {
        return Err(FfiError::invalid(format!("{what} is empty")));
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Ok(PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
    }
    #[cfg(not(unix))]
    {
        std::str::from_utf8(bytes)
            .map(PathBuf::from)
            .map_err(|_| FfiError::invalid(format!("{what} is not valid UTF-8")))
    }
}

/// The operations accessors need from a repeated field ([`InlineVec`](crate::proto::InlineVec)
/// for scalars and strings, [`RepeatedField`] for messages).
pub(crate) trait Seq {
    /// The element type.
    type Elem;
    /// The most elements the field holds.
    const MAX_LEN: usize;
    fn seq_len(&self) -> usize;
    fn seq_get(&self, i: usize) -> Option<&Self::Elem>;
    fn seq_get_mut(&mut self, i: usize) -> Option<&mut Self::Elem>;
    fn seq_remove(&mut self, i: usize);
    /// Appends `v`; `ONNXL_STATUS_LIMIT_EXCEEDED` when the field already holds
    /// [`Seq::MAX_LEN`] elements.
    fn seq_push(&mut self, v: Self::Elem) -> Result<(), FfiError> {
        if self.seq_len() >= Self::MAX_LEN {
            return Err(FfiError::too_many_elements(Self::MAX_LEN));
        }
        self.seq_push_unchecked(v);
        Ok(())
    }
    /// Appends `v` (panics past [`Seq::MAX_LEN`] elements).
    fn seq_push_unchecked(&mut self, v: Self::Elem);
    fn seq_clear(&mut self);
}

/// [`Seq`] of the types that are one: the same methods under the same names.
macro_rules! impl_seq {
    ($([$($g:tt)*] $t:ty => $max_len:expr),*) => {$(
        impl<$($g)*> Seq for $t {
            type Elem = T;
            const MAX_LEN: usize = $max_len;
            fn seq_len(&self) -> usize {
                self.len()
            }
            fn seq_get(&self, i: usize) -> Option<&T> {
                self.get(i)
            }
            fn seq_get_mut(&mut self, i: usize) -> Option<&mut T> {
                self.get_mut(i)
            }
            fn seq_remove(&mut self, i: usize) {
                self.remove(i);
            }
            fn seq_push_unchecked(&mut self, v: T) {
                self.push(v);
            }
            fn seq_clear(&mut self) {
                self.clear();
            }
        }
    )*};
}
impl_seq!(
    [T] Vec<T> => crate::wire::inline_vec::vec_max_len::<T>(),
    [T, const N: usize] crate::proto::InlineVec<T, N> => crate::wire::inline_vec::MAX_LEN,
    [T] RepeatedField<T> => crate::wire::inline_vec::vec_max_len::<T>()
);

/// Element `i` of a repeated field.
pub(crate) fn elem<'a, S: Seq>(v: &'a S, i: usize, field: &str) -> Result<&'a S::Elem, FfiError> {
    let len = v.seq_len();
    v.seq_get(i)
        .ok_or_else(|| FfiError::out_of_range(field, i, len))
}

/// Element `i` of a repeated field, for writing.
pub(crate) fn elem_mut<'a, S: Seq>(
    v: &'a mut S,
    i: usize,
    field: &str,
) -> Result<&'a mut S::Elem, FfiError> {
    let len = v.seq_len();
    v.seq_get_mut(i)
        .ok_or_else(|| FfiError::out_of_range(field, i, len))
}

/// Removes element `i` of a repeated field (later elements move down by one).
pub(crate) fn remove_at<S: Seq>(v: &mut S, i: usize, field: &str) -> Result<(), FfiError> {
    if i >= v.seq_len() {
        return Err(FfiError::out_of_range(field, i, v.seq_len()));
    }
    v.seq_remove(i);
    Ok(())
}

/// Checks a value of a closed enum field.
pub(crate) fn check_enum(v: i32, values: &[i32], field: &str) -> Result<i32, FfiError> {
    if values.contains(&v) {
        Ok(v)
    } else {
        Err(FfiError::invalid(format!(
            "{v} is not a value of the enum of {field}"
        )))
    }
}

/// Reads from a handle: `f`'s value, or `failure` when `p` is NULL, `f` fails or panics.
///
/// # Safety
/// See the module contract.
pub(crate) unsafe fn read<C: Castable, R>(
    p: *const C,
    failure: R,
    f: impl FnOnce(&C::Rust) -> Result<R, FfiError>,
) -> R {
    // SAFETY: the catcher passes `p` on only when it is not NULL: a live `C::Rust` (contract).
    ffi_value_on(p.cast_mut().cast(), failure, |m| {
        f(unsafe { &*m.cast::<C::Rust>() })
    })
}

/// Modifies a handle; returns the status.
///
/// # Safety
/// See the module contract.
pub(crate) unsafe fn write<C: Castable>(
    p: *mut C,
    f: impl FnOnce(&mut C::Rust) -> Result<(), FfiError>,
) -> OnnxlStatus {
    // SAFETY: the catcher passes `p` on only when it is not NULL: a live `C::Rust` that no one
    // else uses (contract).
    ffi_status_on(p.cast(), |m| f(unsafe { &mut *m.cast::<C::Rust>() }))
}

/// Copies `len` elements at `data` (before touching the handle, so `data` may point into the
/// handle itself), then modifies the handle with the copy.
///
/// # Safety
/// See the module contract; `data..data+len` readable (NULL only with `len` 0).
pub(crate) unsafe fn write_copied<C: Castable, T: Copy>(
    p: *mut C,
    data: *const T,
    len: usize,
    f: impl FnOnce(&mut C::Rust, Vec<T>) -> Result<(), FfiError>,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let copy = unsafe { c_bytes(data, len, "data") }?.to_vec();
        // SAFETY: forwarded contract.
        f(unsafe { try_mut(p, "message") }?, copy)
    })
}
