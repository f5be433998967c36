//! DLPack through the C ABI: export a tensor as a `DLManagedTensorVersioned` (DLPack 1.1) or a
//! legacy `DLManagedTensor` without copying, and build a tensor from either (copy or borrow).
//!
//! The DLPack structs are declared in `onnx_light.h` under their standard names, inside
//! `#ifndef DLPACK_DLPACK_H_` (the guard of dlpack.h): include dlpack.h first to use its own
//! declarations (e.g. a newer minor version), or rely on the ones of `onnx_light.h`.

use std::mem::ManuallyDrop;

use super::accessors::OnnxlTensorProto;
use super::handle::{check_out, into_raw, try_mut, write_out};
use super::panic::ffi_status;
use super::status::{FfiError, OnnxlStatus};
use crate::dlpack::{
    self, CopyMode, DLManagedTensor, DLManagedTensorVersioned, ExportOptions, ImportMode,
    ManagedTensor, OwnedDlpack,
};

/// Export flag: copy the bytes when a zero-copy export is impossible (data in typed fields such
/// as `float_data`, or `raw_data` borrowed from caller memory without an owner token). The copy
/// is flagged `DLPACK_FLAG_BITMASK_IS_COPIED` and writable.
pub const ONNXL_DLPACK_COPY_IF_NEEDED: u32 = 1;

/// Export flag: always copy (a private, writable copy flagged `DLPACK_FLAG_BITMASK_IS_COPIED`),
/// even when the bytes could be shared.
pub const ONNXL_DLPACK_COPY_ALWAYS: u32 = 2;

fn export_options(flags: u32) -> Result<ExportOptions, FfiError> {
    let known = ONNXL_DLPACK_COPY_IF_NEEDED | ONNXL_DLPACK_COPY_ALWAYS;
    if flags & !known != 0 {
        return Err(FfiError::invalid(format!(
            "unknown DLPack export flags {:#x}",
            flags & !known
        )));
    }
    let copy = if flags & ONNXL_DLPACK_COPY_ALWAYS != 0 {
        CopyMode::Always
    } else if flags & ONNXL_DLPACK_COPY_IF_NEEDED != 0 {
        CopyMode::IfNeeded
    } else {
        CopyMode::Never
    };
    Ok(ExportOptions { copy })
}

/// Exports `t` as a DLPack 1.1 `DLManagedTensorVersioned` on the CPU; writes it to `*out` on
/// success (untouched on failure).
///
/// Zero-copy for tensors with `raw_data`: `dl_tensor.data` is the pointer
/// `onnxl_tensor_proto_raw_data` returns (owned bytes are moved, not copied, into shared storage,
/// which is why `t` is not const), and the managed tensor holds a reference to the bytes' owner
/// (the model's buffer, the memory map of a no_copy load, memory lent with a release callback),
/// so the data stays valid after `t` and its model are freed, until the deleter runs. Zero-copy
/// exports are flagged `DLPACK_FLAG_BITMASK_READ_ONLY`: the bytes are shared with the model and
/// never modified. `strides` is NULL (compact row-major), `byte_offset` 0; sub-byte types
/// (INT4, UINT4, FLOAT4E2M1, INT2, UINT2) are packed, low bits first, as in ONNX.
///
/// `flags`: 0 (never copy), `ONNXL_DLPACK_COPY_IF_NEEDED` or `ONNXL_DLPACK_COPY_ALWAYS`. Without
/// a copy flag, tensors whose data is in typed fields (`float_data`, ...) and bytes borrowed from
/// caller memory without an owner (`no_copy` parse of caller bytes, or lent without a release
/// callback) fail with `ONNXL_STATUS_UNSUPPORTED`.
///
/// Errors: `ONNXL_STATUS_UNSUPPORTED` for UNDEFINED, STRING, FLOAT6E2M3, FLOAT6E3M2 and unknown
/// types, segments, and external data that is not loaded; `ONNXL_STATUS_INVALID_ARGUMENT` for
/// negative dims, `raw_data` whose length does not match dims and type, unknown flags.
///
/// Ownership: the caller owns `*out` and must call `(*out)->deleter(*out)` exactly once (any
/// thread); this frees the struct and releases the bytes' owner.
///
/// # Safety
/// `t` is NULL or a live tensor used by no one else during the call; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_tensor_proto_to_dlpack_versioned(
    t: *mut OnnxlTensorProto,
    flags: u32,
    out: *mut *mut DLManagedTensorVersioned,
) -> OnnxlStatus {
    ffi_status(|| {
        crate::error::require_feature(cfg!(feature = "dlpack"), "dlpack")?;
        check_out(out, "out")?;
        let opts = export_options(flags)?;
        // SAFETY: forwarded contract.
        let t = unsafe { try_mut(t, "tensor") }?;
        let managed = dlpack::to_dlpack_versioned(t, &opts)?;
        // SAFETY: `out` checked above.
        unsafe { write_out(out, managed.into_raw()) };
        Ok(())
    })
}

/// Exports `t` as a legacy `DLManagedTensor`: as `onnxl_tensor_proto_to_dlpack_versioned`, but
/// the legacy struct carries no flags, so the consumer cannot see that a zero-copy export is
/// read-only: it must not write the data (ask for `ONNXL_DLPACK_COPY_ALWAYS` to get a writable
/// copy).
///
/// Ownership: the caller owns `*out` and must call `(*out)->deleter(*out)` exactly once.
///
/// # Safety
/// `t` is NULL or a live tensor used by no one else during the call; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_tensor_proto_to_dlpack(
    t: *mut OnnxlTensorProto,
    flags: u32,
    out: *mut *mut DLManagedTensor,
) -> OnnxlStatus {
    ffi_status(|| {
        crate::error::require_feature(cfg!(feature = "dlpack"), "dlpack")?;
        check_out(out, "out")?;
        let opts = export_options(flags)?;
        // SAFETY: forwarded contract.
        let t = unsafe { try_mut(t, "tensor") }?;
        let managed = dlpack::to_dlpack(t, &opts)?;
        // SAFETY: `out` checked above.
        unsafe { write_out(out, managed.into_raw()) };
        Ok(())
    })
}

/// Common body of the imports: ownership moves to the library only on success.
///
/// # Safety
/// `managed` NULL or a valid managed tensor owned by the caller; `out` NULL or writable.
unsafe fn import<M: ManagedTensor>(
    managed: *mut M,
    borrow: bool,
    out: *mut *mut OnnxlTensorProto,
) -> OnnxlStatus {
    ffi_status(|| {
        crate::error::require_feature(cfg!(feature = "dlpack"), "dlpack")?;
        check_out(out, "out")?;
        // Not dropped on failure (nor on a panic): the caller keeps the tensor then.
        // SAFETY: forwarded contract.
        let m = ManuallyDrop::new(
            unsafe { OwnedDlpack::from_raw(managed) }.ok_or_else(|| FfiError::null("managed"))?,
        );
        let layout = dlpack::check_import(&m)?;
        let mode = if borrow {
            ImportMode::Borrow
        } else {
            ImportMode::Copy
        };
        let t = dlpack::build_import(ManuallyDrop::into_inner(m), layout, mode);
        // SAFETY: `out` checked above.
        unsafe { write_out(out, into_raw::<OnnxlTensorProto>(t)) };
        Ok(())
    })
}

/// Builds a new tensor (dims, data_type, raw_data; no name) from a DLPack 1.x
/// `DLManagedTensorVersioned`; writes it to `*out` on success (untouched on failure).
///
/// Accepted: DLPack major version 1, CPU memory (`kDLCPU`), a type of the ONNX map with
/// `lanes` 1, packed sub-byte elements (not `DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`), compact
/// row-major layout (NULL strides, or strides equal to the row-major ones). Otherwise
/// `ONNXL_STATUS_UNSUPPORTED` (or `ONNXL_STATUS_INVALID_ARGUMENT` for a malformed tensor).
///
/// Ownership: on success the library owns `managed`. With `borrow` false the bytes are copied
/// and the deleter runs before this function returns; with `borrow` true, `raw_data` points at
/// the producer's memory and the deleter runs exactly once when the last user of the bytes (the
/// tensor, its copies, retained `OnnxlOwner` tokens) is gone, on that user's thread (immediately
/// for an empty tensor). On failure the caller still owns `managed` (the deleter was not called).
/// The caller owns `*out` (free with `onnxl_tensor_proto_free`).
///
/// # Safety
/// `managed` NULL or a valid managed tensor owned by the caller, whose data stays valid and
/// unchanged until its deleter runs, and whose deleter may be called from any thread; `out`
/// NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_tensor_proto_from_dlpack_versioned(
    managed: *mut DLManagedTensorVersioned,
    borrow: bool,
    out: *mut *mut OnnxlTensorProto,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { import(managed, borrow, out) }
}

/// Builds a new tensor from a legacy `DLManagedTensor`: as
/// `onnxl_tensor_proto_from_dlpack_versioned` (the legacy struct has no version and no flags).
///
/// Ownership: as `onnxl_tensor_proto_from_dlpack_versioned`.
///
/// # Safety
/// As `onnxl_tensor_proto_from_dlpack_versioned`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_tensor_proto_from_dlpack(
    managed: *mut DLManagedTensor,
    borrow: bool,
    out: *mut *mut OnnxlTensorProto,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { import(managed, borrow, out) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::status::last_error;
    use crate::proto::TensorProto;

    #[test]
    fn flags_and_nulls() {
        assert!(export_options(4).is_err());
        assert_eq!(export_options(0).unwrap().copy, CopyMode::Never);
        assert_eq!(export_options(3).unwrap().copy, CopyMode::Always);
        let mut t = TensorProto::new();
        t.set_data_type(1);
        t.add_dims(2);
        t.add_float_data(1.0);
        t.add_float_data(2.0);
        let h: *mut OnnxlTensorProto = (&mut t as *mut TensorProto).cast();
        let mut out: *mut DLManagedTensorVersioned = std::ptr::null_mut();
        // SAFETY: live tensor, valid out-pointer; NULLs are detected.
        unsafe {
            assert_eq!(
                onnxl_tensor_proto_to_dlpack_versioned(std::ptr::null_mut(), 0, &mut out),
                OnnxlStatus::NullPointer
            );
            assert_eq!(
                onnxl_tensor_proto_to_dlpack_versioned(h, 0, std::ptr::null_mut()),
                OnnxlStatus::NullPointer
            );
            assert_eq!(
                onnxl_tensor_proto_to_dlpack_versioned(h, 0, &mut out),
                OnnxlStatus::Unsupported
            );
            assert!(last_error().contains("float_data"), "{}", last_error());
            assert!(out.is_null());
            assert_eq!(
                onnxl_tensor_proto_to_dlpack_versioned(h, ONNXL_DLPACK_COPY_IF_NEEDED, &mut out),
                OnnxlStatus::Ok
            );
            assert_eq!((*out).flags, dlpack::DLPACK_FLAG_BITMASK_IS_COPIED);
            ((*out).deleter.unwrap())(out);
            let mut tp: *mut OnnxlTensorProto = std::ptr::null_mut();
            assert_eq!(
                onnxl_tensor_proto_from_dlpack(std::ptr::null_mut(), false, &mut tp),
                OnnxlStatus::NullPointer
            );
        }
    }
}
