//! The bodies of the generated field accessors (`accessors.rs`): one per kind of field, shared
//! by every field of that kind.
//!
//! An exported accessor is a shim: it passes its handle and the field's *projection* (a
//! non-capturing closure from the message to the field: the only code that names the field) to a
//! function here. The `#[inline(always)]` wrappers erase the projection's message type (a
//! `fn(&M) -> &F` is called as an `unsafe fn(*mut ()) -> *mut F`: the same ABI), so each body is
//! compiled once per field TYPE instead of once per field. The bodies that modify run inside the
//! one panic catcher (`panic::run_caught`); the reads, which cannot panic, check the handle
//! themselves ([`read_on`]): the C walk reads every field. The behaviour (values, errors and their messages) is that of the
//! closures over `handle::read` / `write` these shims replaced.
//!
//! The bodies are `extern "C"` (Rust calls them, never C) because such functions cannot unwind:
//! a panic inside is caught before it leaves them, and an exported shim calling one needs no
//! landing pad of its own and ends in a tail call (hence `improper_ctypes_definitions`: the
//! types are Rust's on both sides).
//!
//! Every function takes a raw handle and is `unsafe` with the contract of the `handle` module:
//! the handle is NULL or a live handle of its type that no other thread modifies (for the writing
//! functions: uses) during the call.

#![allow(improper_ctypes_definitions)]

use std::mem::transmute;

use super::handle::{
    Castable, OnnxlBytes, OnnxlStr, Seq, c_bytes, check_enum, elem, elem_mut, remove_at,
};
use super::panic::{ffi_status, ffi_status_on, ffi_value_on};
use super::status::{FfiError, OnnxlStatus, set_last_error};
use crate::bytes::ProtoString;
use crate::proto::{InlineVec, RepeatedField};

/// A projection with its message type erased: the field of the message at the (non-NULL)
/// argument.
pub(crate) type Field<F> = unsafe fn(*mut ()) -> *mut F;

/// `f` as a [`Field`].
#[inline(always)]
pub(crate) fn erase<M, F>(f: fn(&M) -> &F) -> Field<F> {
    // SAFETY: `&M` and `*mut ()`, `&F` and `*mut F` are ABI-compatible (thin pointers), so `f`
    // may be called through the other signature. Callers pass only pointers to a live `M` and use
    // the result as `&F` for no longer than the handle is borrowed.
    unsafe { transmute::<fn(&M) -> &F, Field<F>>(f) }
}

/// `f` as a [`Field`] (a projection that may create the field's storage).
#[inline(always)]
pub(crate) fn erase_mut<M, F>(f: fn(&mut M) -> &mut F) -> Field<F> {
    // SAFETY: as in `erase`; callers pass only pointers to a live `M` they may modify.
    unsafe { transmute::<fn(&mut M) -> &mut F, Field<F>>(f) }
}

/// The field of the handle `m` (non-NULL: the catcher checked it).
///
/// # Safety
/// `m` is a live message of the type `field` was erased from, not modified during `'a`.
#[inline(always)]
unsafe fn get<'a, F>(m: *mut (), field: Field<F>) -> &'a F {
    // SAFETY: contract above.
    unsafe { &*field(m) }
}

/// The field of the handle `m`, for writing.
///
/// # Safety
/// `m` is a live message of the type `field` was erased from, used by no one else during `'a`.
#[inline(always)]
unsafe fn get_mut<'a, F>(m: *mut (), field: Field<F>) -> &'a mut F {
    // SAFETY: contract above.
    unsafe { &mut *field(m) }
}

/// Copies `len` elements at `data` (before the handle is touched: `data` may point into it),
/// checks `m`, then stores the copy with `store`; the status.
///
/// # Safety
/// The module contract for `m`; `data..data+len` is readable (NULL only with `len` 0).
#[inline(always)]
unsafe fn store_copied<T: Copy>(
    m: *mut (),
    data: *const T,
    len: usize,
    store: impl FnOnce(*mut (), Vec<T>) -> Result<(), FfiError>,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let copy = unsafe { c_bytes(data, len, "data") }?.to_vec();
        if m.is_null() {
            return Err(FfiError::null("message"));
        }
        store(m, copy)
    })
}

/// Runs a read `f` on the handle `m` without the panic catcher: `f`'s value, or `failure` with
/// the error recorded (a NULL `m`: "message is NULL", as the catcher reports it).
///
/// Only for reads, which cannot panic (address arithmetic, loads, a recorded error): being
/// called from `extern "C"` bodies, a panic would abort instead of unwinding into C. Skipping
/// `catch_unwind` keeps a read a call and a projection (the C walk reads every field).
#[inline(always)]
fn read_on<R>(m: *mut (), failure: R, f: impl FnOnce(*mut ()) -> Result<R, FfiError>) -> R {
    if m.is_null() {
        set_last_error(FfiError::null("message"));
        return failure;
    }
    match f(m) {
        Ok(v) => v,
        Err(e) => {
            set_last_error(e);
            failure
        }
    }
}

// ---- optional fields ----

/// True when the optional field is set.
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn has<C: Castable, T>(m: *const C, field: fn(&C::Rust) -> &Option<T>) -> bool {
    // SAFETY: forwarded contract.
    unsafe { has_body(m.cast_mut().cast(), erase(field)) }
}

#[inline(never)]
unsafe extern "C" fn has_body<T>(m: *mut (), field: Field<Option<T>>) -> bool {
    // SAFETY: `read_on` passes a non-NULL live handle.
    read_on(m, false, |m| Ok(unsafe { get(m, field) }.is_some()))
}

/// Unsets the optional field.
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn clear<C: Castable, T>(
    m: *mut C,
    field: fn(&mut C::Rust) -> &mut Option<T>,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { clear_body(m.cast(), erase_mut(field)) }
}

#[inline(never)]
unsafe extern "C" fn clear_body<T>(m: *mut (), field: Field<Option<T>>) -> OnnxlStatus {
    ffi_status_on(m, |m| {
        // SAFETY: the catcher passes a non-NULL live handle.
        *unsafe { get_mut(m, field) } = None;
        Ok(())
    })
}

/// The value of an optional number or enum field; 0 when unset or `m` is NULL.
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn value<C: Castable, T: Copy + Default>(
    m: *const C,
    field: fn(&C::Rust) -> &Option<T>,
) -> T {
    // SAFETY: forwarded contract.
    unsafe { value_body(m.cast_mut().cast(), erase(field)) }
}

#[inline(never)]
unsafe extern "C" fn value_body<T: Copy + Default>(m: *mut (), field: Field<Option<T>>) -> T {
    // SAFETY: `read_on` passes a non-NULL live handle.
    read_on(m, T::default(), |m| {
        Ok(unsafe { get(m, field) }.unwrap_or_default())
    })
}

/// Sets an optional number field to `v`.
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn set_value<C: Castable, T: Copy>(
    m: *mut C,
    v: T,
    field: fn(&mut C::Rust) -> &mut Option<T>,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { set_value_body(m.cast(), v, erase_mut(field)) }
}

#[inline(never)]
unsafe extern "C" fn set_value_body<T: Copy>(
    m: *mut (),
    v: T,
    field: Field<Option<T>>,
) -> OnnxlStatus {
    ffi_status_on(m, |m| {
        // SAFETY: the catcher passes a non-NULL live handle.
        *unsafe { get_mut(m, field) } = Some(v);
        Ok(())
    })
}

/// Sets an optional enum field to `v`, one of `values` (else `ONNXL_STATUS_INVALID_ARGUMENT`
/// naming `name`, the field).
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn set_enum<C: Castable>(
    m: *mut C,
    v: i32,
    values: &'static [i32],
    name: &'static str,
    field: fn(&mut C::Rust) -> &mut Option<i32>,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { set_enum_body(m.cast(), v, values, name, erase_mut(field)) }
}

#[inline(never)]
unsafe extern "C" fn set_enum_body(
    m: *mut (),
    v: i32,
    values: &'static [i32],
    name: &'static str,
    field: Field<Option<i32>>,
) -> OnnxlStatus {
    ffi_status_on(m, |m| {
        // SAFETY: the catcher passes a non-NULL live handle.
        *unsafe { get_mut(m, field) } = Some(check_enum(v, values, name)?);
        Ok(())
    })
}

/// A view of an optional `bytes` field (empty when unset; `data` NULL only when `m` is NULL).
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn bytes<C: Castable>(
    m: *const C,
    field: fn(&C::Rust) -> &Option<ProtoString>,
) -> OnnxlBytes {
    // SAFETY: forwarded contract.
    unsafe { bytes_body(m.cast_mut().cast(), erase(field)) }
}

/// A view of an optional `string` field (as [`bytes`]).
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn string<C: Castable>(
    m: *const C,
    field: fn(&C::Rust) -> &Option<ProtoString>,
) -> OnnxlStr {
    // SAFETY: forwarded contract.
    str_of(unsafe { bytes_body(m.cast_mut().cast(), erase(field)) })
}

/// The same view as an [`OnnxlStr`].
#[inline(always)]
fn str_of(b: OnnxlBytes) -> OnnxlStr {
    OnnxlStr {
        data: b.data.cast(),
        len: b.len,
    }
}

#[inline(never)]
unsafe extern "C" fn bytes_body(m: *mut (), field: Field<Option<ProtoString>>) -> OnnxlBytes {
    read_on(m, OnnxlBytes::FAILED, |m| {
        // SAFETY: `read_on` passes a non-NULL live handle.
        let v = unsafe { get(m, field) };
        Ok(OnnxlBytes::of(v.as_deref().unwrap_or_default()))
    })
}

/// Sets an optional `string` / `bytes` field to a copy of `len` bytes at `data` (which may point
/// into `m`).
///
/// # Safety
/// See the module contract; `data..data+len` is readable (NULL only with `len` 0).
#[inline(always)]
pub(crate) unsafe fn set_bytes<C: Castable, P>(
    m: *mut C,
    data: *const P,
    len: usize,
    field: fn(&mut C::Rust) -> &mut Option<ProtoString>,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { set_bytes_body(m.cast(), data.cast(), len, erase_mut(field)) }
}

#[inline(never)]
unsafe extern "C" fn set_bytes_body(
    m: *mut (),
    data: *const u8,
    len: usize,
    field: Field<Option<ProtoString>>,
) -> OnnxlStatus {
    // SAFETY: forwarded contract; `store_copied` passes a non-NULL live handle.
    unsafe {
        store_copied(m, data, len, |m, v| {
            *get_mut(m, field) = Some(ProtoString::from(v));
            Ok(())
        })
    }
}

/// A sub-message (`field` returns the default instance when unset); NULL only when `m` is NULL.
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn message<C: Castable, D: Castable>(
    m: *const C,
    field: fn(&C::Rust) -> &D::Rust,
) -> *const D {
    // SAFETY: forwarded contract.
    unsafe { message_body(m.cast_mut().cast(), erase(field)) }.cast()
}

#[inline(never)]
unsafe extern "C" fn message_body<F>(m: *mut (), field: Field<F>) -> *const F {
    // SAFETY: `read_on` passes a non-NULL live handle.
    read_on(
        m,
        std::ptr::null(),
        |m| Ok(unsafe { field(m) }.cast_const()),
    )
}

/// A sub-message for writing (`field` creates it when unset); NULL only when `m` is NULL.
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn mutable_message<C: Castable, D: Castable>(
    m: *mut C,
    field: fn(&mut C::Rust) -> &mut D::Rust,
) -> *mut D {
    // SAFETY: forwarded contract.
    unsafe { mutable_message_body(m.cast(), erase_mut(field)) }.cast()
}

#[inline(never)]
unsafe extern "C" fn mutable_message_body<F>(m: *mut (), field: Field<F>) -> *mut F {
    // SAFETY: the catcher passes a non-NULL live handle.
    ffi_value_on(m, std::ptr::null_mut(), |m| Ok(unsafe { field(m) }))
}

// ---- repeated fields ----

/// Number of elements (0 when `m` is NULL).
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn len<C: Castable, S: Seq>(m: *const C, field: fn(&C::Rust) -> &S) -> usize {
    // SAFETY: forwarded contract.
    unsafe { len_body(m.cast_mut().cast(), erase(field)) }
}

#[inline(never)]
unsafe extern "C" fn len_body<S: Seq>(m: *mut (), field: Field<S>) -> usize {
    // SAFETY: `read_on` passes a non-NULL live handle.
    read_on(m, 0, |m| Ok(unsafe { get(m, field) }.seq_len()))
}

/// Removes every element.
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn clear_all<C: Castable, S: Seq>(
    m: *mut C,
    field: fn(&mut C::Rust) -> &mut S,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { clear_all_body(m.cast(), erase_mut(field)) }
}

#[inline(never)]
unsafe extern "C" fn clear_all_body<S: Seq>(m: *mut (), field: Field<S>) -> OnnxlStatus {
    ffi_status_on(m, |m| {
        // SAFETY: the catcher passes a non-NULL live handle.
        unsafe { get_mut(m, field) }.seq_clear();
        Ok(())
    })
}

/// Removes element `i` (`ONNXL_STATUS_OUT_OF_RANGE` naming `name` when `i` >= size).
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn remove<C: Castable, S: Seq>(
    m: *mut C,
    i: usize,
    name: &'static str,
    field: fn(&mut C::Rust) -> &mut S,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { remove_body(m.cast(), i, name, erase_mut(field)) }
}

#[inline(never)]
unsafe extern "C" fn remove_body<S: Seq>(
    m: *mut (),
    i: usize,
    name: &'static str,
    field: Field<S>,
) -> OnnxlStatus {
    // SAFETY: the catcher passes a non-NULL live handle.
    ffi_status_on(m, |m| remove_at(unsafe { get_mut(m, field) }, i, name))
}

/// Element `i` of a repeated number field; 0 (with `ONNXL_STATUS_OUT_OF_RANGE` as last error)
/// when `i` >= size or `m` is NULL.
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn elem_value<C: Castable, S: Seq<Elem: Copy + Default>>(
    m: *const C,
    i: usize,
    name: &'static str,
    field: fn(&C::Rust) -> &S,
) -> S::Elem {
    // SAFETY: forwarded contract.
    unsafe { elem_value_body(m.cast_mut().cast(), i, name, erase(field)) }
}

#[inline(never)]
unsafe extern "C" fn elem_value_body<S: Seq<Elem: Copy + Default>>(
    m: *mut (),
    i: usize,
    name: &'static str,
    field: Field<S>,
) -> S::Elem {
    // SAFETY: `read_on` passes a non-NULL live handle.
    read_on(m, Default::default(), |m| {
        Ok(*elem(unsafe { get(m, field) }, i, name)?)
    })
}

/// The elements of a repeated number field as an array (NULL only when `m` is NULL).
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn data<C: Castable, T, const N: usize>(
    m: *const C,
    field: fn(&C::Rust) -> &InlineVec<T, N>,
) -> *const T {
    // SAFETY: forwarded contract.
    unsafe { data_body(m.cast_mut().cast(), erase(field)) }
}

#[inline(never)]
unsafe extern "C" fn data_body<T, const N: usize>(
    m: *mut (),
    field: Field<InlineVec<T, N>>,
) -> *const T {
    // SAFETY: `read_on` passes a non-NULL live handle.
    read_on(m, std::ptr::null(), |m| {
        Ok(unsafe { get(m, field) }.as_ptr())
    })
}

/// The elements of a repeated number field for in-place writing (NULL only when `m` is NULL).
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn mutable_data<C: Castable, T, const N: usize>(
    m: *mut C,
    field: fn(&mut C::Rust) -> &mut InlineVec<T, N>,
) -> *mut T {
    // SAFETY: forwarded contract.
    unsafe { mutable_data_body(m.cast(), erase_mut(field)) }
}

#[inline(never)]
unsafe extern "C" fn mutable_data_body<T, const N: usize>(
    m: *mut (),
    field: Field<InlineVec<T, N>>,
) -> *mut T {
    // SAFETY: the catcher passes a non-NULL live handle.
    ffi_value_on(m, std::ptr::null_mut(), |m| {
        Ok(unsafe { get_mut(m, field) }.as_mut_ptr())
    })
}

/// Sets element `i` of a repeated number field to `v` (`ONNXL_STATUS_OUT_OF_RANGE` when `i` >=
/// size).
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn set_elem_value<C: Castable, S: Seq<Elem: Copy>>(
    m: *mut C,
    i: usize,
    v: S::Elem,
    name: &'static str,
    field: fn(&mut C::Rust) -> &mut S,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { set_elem_value_body(m.cast(), i, v, name, erase_mut(field)) }
}

#[inline(never)]
unsafe extern "C" fn set_elem_value_body<S: Seq<Elem: Copy>>(
    m: *mut (),
    i: usize,
    v: S::Elem,
    name: &'static str,
    field: Field<S>,
) -> OnnxlStatus {
    ffi_status_on(m, |m| {
        // SAFETY: the catcher passes a non-NULL live handle.
        *elem_mut(unsafe { get_mut(m, field) }, i, name)? = v;
        Ok(())
    })
}

/// Appends `v` to a repeated number field.
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn push_value<C: Castable, S: Seq<Elem: Copy>>(
    m: *mut C,
    v: S::Elem,
    field: fn(&mut C::Rust) -> &mut S,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { push_value_body(m.cast(), v, erase_mut(field)) }
}

#[inline(never)]
unsafe extern "C" fn push_value_body<S: Seq<Elem: Copy>>(
    m: *mut (),
    v: S::Elem,
    field: Field<S>,
) -> OnnxlStatus {
    ffi_status_on(m, |m| {
        // SAFETY: the catcher passes a non-NULL live handle.
        unsafe { get_mut(m, field) }.seq_push(v)
    })
}

/// Replaces every element of a repeated number field with a copy of the `count` values at
/// `data` (which may point into `m`); `ONNXL_STATUS_LIMIT_EXCEEDED`, before anything is read,
/// when `count` is more than the field holds.
///
/// # Safety
/// See the module contract; `data` is readable for `count` values (NULL only with `count` 0).
#[inline(always)]
pub(crate) unsafe fn assign<C: Castable, T: Copy, S: Seq<Elem = T> + From<Vec<T>>>(
    m: *mut C,
    data: *const T,
    count: usize,
    field: fn(&mut C::Rust) -> &mut S,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { assign_body(m.cast(), data, count, erase_mut(field)) }
}

#[inline(never)]
unsafe extern "C" fn assign_body<T: Copy, S: Seq<Elem = T> + From<Vec<T>>>(
    m: *mut (),
    data: *const T,
    count: usize,
    field: Field<S>,
) -> OnnxlStatus {
    if count > S::MAX_LEN {
        return set_last_error(FfiError::too_many_elements(S::MAX_LEN));
    }
    // SAFETY: forwarded contract; `store_copied` passes a non-NULL live handle.
    unsafe {
        store_copied(m, data, count, |m, v| {
            *get_mut(m, field) = v.into();
            Ok(())
        })
    }
}

/// A view of element `i` of a repeated `bytes` field (`data` NULL when `i` >= size or `m` is
/// NULL).
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn elem_bytes<C: Castable, S: Seq<Elem = ProtoString>>(
    m: *const C,
    i: usize,
    name: &'static str,
    field: fn(&C::Rust) -> &S,
) -> OnnxlBytes {
    // SAFETY: forwarded contract.
    unsafe { elem_bytes_body(m.cast_mut().cast(), i, name, erase(field)) }
}

/// A view of element `i` of a repeated `string` field (as [`elem_bytes`]).
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn elem_string<C: Castable, S: Seq<Elem = ProtoString>>(
    m: *const C,
    i: usize,
    name: &'static str,
    field: fn(&C::Rust) -> &S,
) -> OnnxlStr {
    // SAFETY: forwarded contract.
    str_of(unsafe { elem_bytes_body(m.cast_mut().cast(), i, name, erase(field)) })
}

#[inline(never)]
unsafe extern "C" fn elem_bytes_body<S: Seq<Elem = ProtoString>>(
    m: *mut (),
    i: usize,
    name: &'static str,
    field: Field<S>,
) -> OnnxlBytes {
    // SAFETY: `read_on` passes a non-NULL live handle.
    read_on(m, OnnxlBytes::FAILED, |m| {
        Ok(OnnxlBytes::of(elem(unsafe { get(m, field) }, i, name)?))
    })
}

/// Sets element `i` of a repeated `string` / `bytes` field to a copy of `len` bytes at `data`
/// (`ONNXL_STATUS_OUT_OF_RANGE` when `i` >= size).
///
/// # Safety
/// See the module contract; `data..data+len` is readable (NULL only with `len` 0).
#[inline(always)]
pub(crate) unsafe fn set_elem_bytes<C: Castable, S: Seq<Elem = ProtoString>, P>(
    m: *mut C,
    i: usize,
    data: *const P,
    len: usize,
    name: &'static str,
    field: fn(&mut C::Rust) -> &mut S,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { set_elem_bytes_body(m.cast(), i, data.cast(), len, name, erase_mut(field)) }
}

#[inline(never)]
unsafe extern "C" fn set_elem_bytes_body<S: Seq<Elem = ProtoString>>(
    m: *mut (),
    i: usize,
    data: *const u8,
    len: usize,
    name: &'static str,
    field: Field<S>,
) -> OnnxlStatus {
    // SAFETY: forwarded contract; `store_copied` passes a non-NULL live handle.
    unsafe {
        store_copied(m, data, len, |m, v| {
            *elem_mut(get_mut(m, field), i, name)? = ProtoString::from(v);
            Ok(())
        })
    }
}

/// Appends a copy of `len` bytes at `data` to a repeated `string` / `bytes` field.
///
/// # Safety
/// See the module contract; `data..data+len` is readable (NULL only with `len` 0).
#[inline(always)]
pub(crate) unsafe fn push_bytes<C: Castable, S: Seq<Elem = ProtoString>, P>(
    m: *mut C,
    data: *const P,
    len: usize,
    field: fn(&mut C::Rust) -> &mut S,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { push_bytes_body(m.cast(), data.cast(), len, erase_mut(field)) }
}

#[inline(never)]
unsafe extern "C" fn push_bytes_body<S: Seq<Elem = ProtoString>>(
    m: *mut (),
    data: *const u8,
    len: usize,
    field: Field<S>,
) -> OnnxlStatus {
    // SAFETY: forwarded contract; `store_copied` passes a non-NULL live handle.
    unsafe {
        store_copied(m, data, len, |m, v| {
            get_mut(m, field).seq_push(ProtoString::from(v))
        })
    }
}

/// Element `i` of a repeated message field (NULL when `i` >= size or `m` is NULL).
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn elem_message<C: Castable, D: Castable>(
    m: *const C,
    i: usize,
    name: &'static str,
    field: fn(&C::Rust) -> &RepeatedField<D::Rust>,
) -> *const D {
    // SAFETY: forwarded contract.
    unsafe { elem_message_body(m.cast_mut().cast(), i, name, erase(field)) }.cast()
}

#[inline(never)]
unsafe extern "C" fn elem_message_body<T>(
    m: *mut (),
    i: usize,
    name: &'static str,
    field: Field<RepeatedField<T>>,
) -> *const T {
    // SAFETY: `read_on` passes a non-NULL live handle.
    read_on(m, std::ptr::null(), |m| {
        Ok(std::ptr::from_ref(elem(unsafe { get(m, field) }, i, name)?))
    })
}

/// Element `i` of a repeated message field for writing (NULL when `i` >= size or `m` is NULL).
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn mutable_elem_message<C: Castable, D: Castable>(
    m: *mut C,
    i: usize,
    name: &'static str,
    field: fn(&mut C::Rust) -> &mut RepeatedField<D::Rust>,
) -> *mut D {
    // SAFETY: forwarded contract.
    unsafe { mutable_elem_message_body(m.cast(), i, name, erase_mut(field)) }.cast()
}

#[inline(never)]
unsafe extern "C" fn mutable_elem_message_body<T>(
    m: *mut (),
    i: usize,
    name: &'static str,
    field: Field<RepeatedField<T>>,
) -> *mut T {
    // SAFETY: the catcher passes a non-NULL live handle.
    ffi_value_on(m, std::ptr::null_mut(), |m| {
        Ok(std::ptr::from_mut(elem_mut(
            unsafe { get_mut(m, field) },
            i,
            name,
        )?))
    })
}

/// Appends an empty message to a repeated message field and returns it for writing; NULL only
/// when `m` is NULL.
///
/// # Safety
/// See the module contract.
#[inline(always)]
pub(crate) unsafe fn add_message<C: Castable, D: Castable<Rust: Default>>(
    m: *mut C,
    field: fn(&mut C::Rust) -> &mut RepeatedField<D::Rust>,
) -> *mut D {
    // SAFETY: forwarded contract.
    unsafe { add_message_body(m.cast(), erase_mut(field)) }.cast()
}

#[inline(never)]
unsafe extern "C" fn add_message_body<T: Default>(
    m: *mut (),
    field: Field<RepeatedField<T>>,
) -> *mut T {
    ffi_value_on(m, std::ptr::null_mut(), |m| {
        // SAFETY: the catcher passes a non-NULL live handle.
        let v = unsafe { get_mut(m, field) };
        v.push(T::default());
        Ok(std::ptr::from_mut(v.last_mut().expect("just pushed")))
    })
}
