//! The generic per-message bodies (`_new`, `_free`, `_parse_from_bytes`, `_serialize`,
//! `_copy_from`, `_clear`, `_byte_size`, unknown fields) that the generated accessors call, one
//! generic function each. The unknown-fields ones are, as the field accessors (`fields.rs`), one
//! body for every message type, given the projection to the message's unknown fields.

// The bodies are `extern "C"` to be nounwind (see `fields.rs`).
#![allow(improper_ctypes_definitions)]

use super::buffer::{OnnxlBuffer, new_buffer};
use super::fields::{Field, erase, erase_mut};
use super::handle::{
    Castable, OnnxlBytes, c_bytes, check_out, free_box, into_raw, read, try_mut, try_ref, write_out,
};
use super::options::{OnnxlParseOptions, OnnxlSerializeOptions, load_options, serialize_options};
use super::panic::{ffi_status, ffi_status_on, ffi_value, ffi_value_on};
use super::status::{FfiError, OnnxlStatus};
use crate::bytes::UnknownFields;
use crate::codec;
use crate::proto::Message;
use crate::wire::{DecodeConfig, DynMessage, Reader};

/// `onnxl_<message>_new`.
pub(crate) fn msg_new<C: Castable>() -> *mut C
where
    C::Rust: Message,
{
    ffi_value(std::ptr::null_mut(), || {
        Ok(into_raw::<C>(C::Rust::default()))
    })
}

/// `onnxl_<message>_free`.
///
/// # Safety
/// `m` is NULL or a handle from `_new` / a load or parse function, not freed yet.
pub(crate) unsafe fn msg_free<C: Castable>(m: *mut C) {
    let _ = ffi_status(|| {
        // SAFETY: forwarded contract.
        unsafe { free_box(m) };
        Ok(())
    });
}

/// `onnxl_<message>_clear`.
///
/// # Safety
/// `m` is NULL or a live handle, used by no one else during the call.
pub(crate) unsafe fn msg_clear<C: Castable>(m: *mut C) -> OnnxlStatus
where
    C::Rust: Message,
{
    // SAFETY: forwarded contract.
    ffi_status(|| {
        *unsafe { try_mut(m, "message") }? = C::Rust::default();
        Ok(())
    })
}

/// `onnxl_<message>_copy_from`: `dst` becomes a deep copy of `src` (borrowed tensor bytes stay
/// borrowed and share their owner); `ONNXL_STATUS_OUT_OF_MEMORY`, `dst` unchanged, when memory
/// runs out.
///
/// # Safety
/// `dst` and `src` are NULL or live handles; `dst` is used by no one else during the call.
pub(crate) unsafe fn msg_copy_from<C: Castable>(dst: *mut C, src: *const C) -> OnnxlStatus
where
    C::Rust: Message + crate::error::TryClone,
{
    ffi_status(|| {
        if dst.is_null() {
            return Err(FfiError::null("dst"));
        }
        if std::ptr::eq(dst.cast_const(), src) {
            return Ok(());
        }
        // SAFETY: live, distinct handles (contract; equal pointers handled above).
        let copy = crate::error::TryClone::try_clone(unsafe { try_ref(src, "src") }?)
            .map_err(|l| crate::Error::alloc_failed(l.size(), "a copy of the message"))?;
        // SAFETY: see above.
        *unsafe { try_mut(dst, "dst") }? = copy;
        Ok(())
    })
}

/// `onnxl_<message>_byte_size`.
///
/// # Safety
/// `m` is NULL or a live handle.
pub(crate) unsafe fn msg_byte_size<C: Castable>(m: *const C) -> u64
where
    C::Rust: Message,
{
    // SAFETY: forwarded contract.
    unsafe { read(m, 0, |m| Ok(m.encoded_len())) }
}

/// Parses `len` bytes at `data` into a new message; with `no_copy`, payloads borrow from the
/// bytes without an owner.
///
/// # Safety
/// `data..data+len` readable; with `no_copy`, it stays valid while the message is used.
pub(super) unsafe fn parse_bytes<M: Message>(
    data: *const u8,
    len: usize,
    opts: *const OnnxlParseOptions,
) -> Result<M, FfiError> {
    // SAFETY: forwarded contract.
    let opts = unsafe { load_options(opts) }?;
    // SAFETY: forwarded contract.
    let bytes = unsafe { c_bytes(data, len, "data") }?;
    // SAFETY: with no_copy the caller keeps `bytes` alive while the message is used (contract).
    Ok(unsafe { codec::parse_from_bytes_unowned::<M>(bytes, &opts.parse) }?)
}

/// `onnxl_<message>_parse_from_bytes`: replaces `m` with the parsed message; `m` is unchanged on
/// failure.
///
/// # Safety
/// As [`parse_bytes`], and `m` is NULL or a live handle used by no one else during the call.
pub(crate) unsafe fn msg_parse_from_bytes<C: Castable>(
    m: *mut C,
    data: *const u8,
    len: usize,
    opts: *const OnnxlParseOptions,
) -> OnnxlStatus
where
    C::Rust: Message,
{
    // SAFETY: forwarded contract.
    unsafe { parse_replacing(m.cast::<C::Rust>(), data, len, opts) }
}

/// [`msg_parse_from_bytes`] for every message type.
///
/// # Safety
/// As [`msg_parse_from_bytes`].
unsafe fn parse_replacing(
    m: *mut dyn DynMessage,
    data: *const u8,
    len: usize,
    opts: *const OnnxlParseOptions,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: NULL or a live handle used by no one else during the call (contract).
        let m = unsafe { m.as_mut() }.ok_or_else(|| FfiError::null("message"))?;
        // SAFETY: forwarded contract.
        let opts = unsafe { load_options(opts) }?;
        // SAFETY: forwarded contract.
        let bytes = unsafe { c_bytes(data, len, "data") }?;
        // SAFETY: with no_copy the caller keeps `bytes` alive while the message is used (contract).
        Ok(unsafe { codec::parse_unowned_replacing(m, bytes, &opts.parse) }?)
    })
}

/// `onnxl_<message>_serialize`: a new buffer with the encoded message.
///
/// # Safety
/// `m` is NULL or a live handle; `opts` NULL or valid; `out` NULL or writable.
pub(crate) unsafe fn msg_serialize<C: Castable>(
    m: *const C,
    opts: *const OnnxlSerializeOptions,
    out: *mut *mut OnnxlBuffer,
) -> OnnxlStatus
where
    C::Rust: Message,
{
    // SAFETY: forwarded contract.
    unsafe { serialize_body(m.cast::<C::Rust>(), opts, out) }
}

/// [`msg_serialize`] for every message type.
///
/// # Safety
/// As [`msg_serialize`].
unsafe fn serialize_body(
    m: *const dyn DynMessage,
    opts: *const OnnxlSerializeOptions,
    out: *mut *mut OnnxlBuffer,
) -> OnnxlStatus {
    ffi_status(|| {
        check_out(out, "out")?;
        // SAFETY: forwarded contract.
        let opts = unsafe { serialize_options(opts) }?;
        // SAFETY: NULL or a live handle (contract).
        let m = unsafe { m.as_ref() }.ok_or_else(|| FfiError::null("message"))?;
        let bytes = codec::serialize_dyn_to_vec(m, &opts)?;
        // SAFETY: `out` checked above.
        unsafe { write_out(out, new_buffer(bytes)) };
        Ok(())
    })
}

/// `onnxl_<message>_unknown_fields`: the raw wire bytes of the fields the schema does not know.
///
/// # Safety
/// `m` is NULL or a live handle.
pub(crate) unsafe fn msg_unknown_fields<C: Castable>(m: *const C) -> OnnxlBytes
where
    C::Rust: Message,
{
    // SAFETY: forwarded contract.
    unsafe { unknown_fields_body(m.cast_mut().cast(), erase(|m: &C::Rust| m.unknown_fields())) }
}

/// [`msg_unknown_fields`] for every message type, given the projection to its unknown fields.
#[inline(never)]
unsafe extern "C" fn unknown_fields_body(m: *mut (), field: Field<UnknownFields>) -> OnnxlBytes {
    ffi_value_on(m, OnnxlBytes::FAILED, |m| {
        // SAFETY: the catcher passes a non-NULL live handle.
        Ok(OnnxlBytes::of(unsafe { &*field(m) }.as_bytes()))
    })
}

fn check_wire_fields(bytes: &[u8]) -> Result<(), FfiError> {
    let cfg = DecodeConfig::default();
    let mut r = Reader::new(bytes, &cfg);
    let mut scratch = UnknownFields::new();
    let mut step = || -> Result<bool, Box<crate::error::DecodeError>> {
        match r.read_tag()? {
            Some(tag) => {
                r.skip_unknown(tag, &mut scratch)?;
                Ok(true)
            }
            None => Ok(false),
        }
    };
    loop {
        match step() {
            Ok(true) => continue,
            Ok(false) => return Ok(()),
            Err(e) => {
                return Err(FfiError::invalid(format!(
                    "unknown fields are not well-formed protobuf fields: {e}"
                )));
            }
        }
    }
}

/// `onnxl_<message>_add_unknown_fields`: appends raw wire bytes (checked to be complete fields).
///
/// # Safety
/// `m` is NULL or a live handle used by no one else; `data..data+len` readable.
pub(crate) unsafe fn msg_add_unknown_fields<C: Castable>(
    m: *mut C,
    data: *const u8,
    len: usize,
) -> OnnxlStatus
where
    C::Rust: Message,
{
    // SAFETY: forwarded contract.
    unsafe {
        add_unknown_fields_body(
            m.cast(),
            data,
            len,
            erase_mut(|m: &mut C::Rust| m.unknown_fields_mut()),
        )
    }
}

/// [`msg_add_unknown_fields`] for every message type.
#[inline(never)]
unsafe extern "C" fn add_unknown_fields_body(
    m: *mut (),
    data: *const u8,
    len: usize,
    field: Field<UnknownFields>,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let bytes = unsafe { c_bytes(data, len, "data") }?;
        check_wire_fields(bytes)?;
        if m.is_null() {
            return Err(FfiError::null("message"));
        }
        // SAFETY: a non-NULL live handle used by no one else (contract).
        unsafe { &mut *field(m) }.push_raw(bytes);
        Ok(())
    })
}

/// Drops the unknown fields of `m`.
///
/// # Safety
/// `m` is NULL or a live handle used by no one else during the call.
pub(crate) unsafe fn msg_clear_unknown_fields<C: Castable>(m: *mut C) -> OnnxlStatus
where
    C::Rust: Message,
{
    // SAFETY: forwarded contract.
    unsafe { clear_unknown_fields_body(m.cast(), unknown_fields_if_any::<C::Rust>) }
}

/// The unknown fields of the message at `m` for clearing, or NULL when it has none: a message
/// that keeps them in its rare box would otherwise allocate that box only to clear it.
///
/// # Safety
/// `m` points to a live `M` used by no one else during the call.
unsafe fn unknown_fields_if_any<M: Message>(m: *mut ()) -> *mut UnknownFields {
    // SAFETY: the caller's contract.
    let m = unsafe { &mut *m.cast::<M>() };
    if m.unknown_fields().is_empty() {
        std::ptr::null_mut()
    } else {
        m.unknown_fields_mut()
    }
}

/// [`msg_clear_unknown_fields`] for every message type.
#[inline(never)]
unsafe extern "C" fn clear_unknown_fields_body(
    m: *mut (),
    field: Field<UnknownFields>,
) -> OnnxlStatus {
    ffi_status_on(m, |m| {
        // SAFETY: the catcher passes a non-NULL live handle; the field is NULL when it is empty.
        if let Some(unknown) = unsafe { field(m).as_mut() } {
            unknown.clear();
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_field_bytes_are_checked() {
        assert!(check_wire_fields(&[0x08, 0x96, 0x01]).is_ok());
        assert!(check_wire_fields(&[]).is_ok());
        assert!(
            check_wire_fields(&[0x0a, 0x05, 1]).is_err(),
            "truncated length-delimited"
        );
        assert!(
            check_wire_fields(&[0x0c]).is_err(),
            "end group without start"
        );
    }
}
