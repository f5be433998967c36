//! Export: a [`TensorProto`] as a DLPack managed tensor, zero-copy where the tensor has
//! `raw_data`.
//!
//! One allocation per export holds the managed struct, the shape and the owner token; the
//! deleter frees it, which drops the token (exactly once: the consumer calls the deleter once).

use std::ffi::c_void;
use std::sync::Arc;

use super::typed::{check, typed_bytes, typed_field};
use super::{
    DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPACK_FLAG_BITMASK_IS_COPIED,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPackVersion, DLTensor, OwnedDlpack,
};
use crate::bytes::Owner;
use crate::error::{Error, Result};
use crate::proto::TensorProto;

/// When an export may copy the tensor's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CopyMode {
    /// Never: tensors whose data is in typed fields, or in caller memory without an owner
    /// token, are refused (`Error::Unsupported`).
    #[default]
    Never,
    /// Only when zero-copy is impossible (typed fields, bytes without an owner token); the
    /// copy is flagged `IS_COPIED`.
    IfNeeded,
    /// Always: a private, writable copy (`IS_COPIED`), even of `raw_data`.
    Always,
}

/// Options of [`to_dlpack_versioned`] and [`to_dlpack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExportOptions {
    /// When the bytes may be copied.
    pub copy: CopyMode,
}

/// What an export shares or copies.
struct Prepared {
    dtype: super::DLDataType,
    shape: Box<[i64]>,
    data: *mut c_void,
    flags: u64,
    owner: Option<Owner>,
}

/// Decides how to export `t`; may move owned `raw_data` into shared storage (no copy).
fn prepare(t: &mut TensorProto, opts: &ExportOptions) -> Result<Prepared> {
    let c = check(t)?;
    if i32::try_from(t.dims.len()).is_err() {
        return Err(Error::LimitExceeded(format!(
            "{} dimensions do not fit DLPack's int32 ndim",
            t.dims.len()
        )));
    }
    let shape: Box<[i64]> = t.dims.to_vec().into_boxed_slice();
    let copied = |shape: Box<[i64]>, bytes: Vec<u8>| -> Prepared {
        let shared = Arc::new(bytes);
        let data = if shared.is_empty() {
            std::ptr::null_mut()
        } else {
            shared.as_ptr().cast_mut().cast()
        };
        Prepared {
            dtype: c.dl_type,
            shape,
            data,
            flags: DLPACK_FLAG_BITMASK_IS_COPIED,
            owner: Some(shared),
        }
    };
    let name = if t.has_name() {
        format!("tensor '{}'", t.name())
    } else {
        "the tensor".to_string()
    };
    match &mut t.raw_data {
        Some(span) => {
            if opts.copy == CopyMode::Always {
                return Ok(copied(shape, span.as_slice().to_vec()));
            }
            if c.byte_len == 0 {
                // Nothing to share: DLPack wants NULL data for an empty tensor.
                return Ok(Prepared {
                    dtype: c.dl_type,
                    shape,
                    data: std::ptr::null_mut(),
                    flags: DLPACK_FLAG_BITMASK_READ_ONLY,
                    owner: None,
                });
            }
            match span.share() {
                Some(owner) => Ok(Prepared {
                    dtype: c.dl_type,
                    shape,
                    data: span.as_ptr().cast_mut().cast(),
                    // Shared bytes are never modified (the model, other exports and owner
                    // tokens read them): every zero-copy export is read-only.
                    flags: DLPACK_FLAG_BITMASK_READ_ONLY,
                    owner: Some(owner),
                }),
                None if opts.copy == CopyMode::IfNeeded => {
                    Ok(copied(shape, span.as_slice().to_vec()))
                }
                None => Err(Error::Unsupported(format!(
                    "{name}: its raw_data is borrowed from caller memory without an owner token \
                     (no_copy from caller bytes, or lent without a release callback), so a \
                     DLPack consumer could outlive it; ask for a copy"
                ))),
            }
        }
        None => {
            if opts.copy == CopyMode::Never && c.elements > 0 {
                let field = typed_field(t).unwrap_or("no field");
                return Err(Error::Unsupported(format!(
                    "{name} has its data in {field}, not raw_data: zero-copy export is \
                     impossible; ask for a copy"
                )));
            }
            Ok(copied(shape, typed_bytes(t, &c)?))
        }
    }
}

fn dl_tensor(p: &mut Prepared) -> DLTensor {
    DLTensor {
        data: p.data,
        device: DLDevice::CPU,
        ndim: p.shape.len() as i32,
        dtype: p.dtype,
        shape: if p.shape.is_empty() {
            std::ptr::null_mut()
        } else {
            p.shape.as_mut_ptr()
        },
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

/// The allocation behind an exported versioned tensor (the managed struct first, so a pointer
/// to it is a pointer to the whole).
#[repr(C)]
struct VersionedCtx {
    managed: DLManagedTensorVersioned,
    _shape: Box<[i64]>,
    _owner: Option<Owner>,
}

/// The allocation behind an exported legacy tensor.
#[repr(C)]
struct LegacyCtx {
    managed: DLManagedTensor,
    _shape: Box<[i64]>,
    _owner: Option<Owner>,
}

/// Frees an exported context; panics (there are none in practice: dropping a token runs a
/// release callback at most) must not unwind into C.
///
/// # Safety
/// `ctx` came from `Box::into_raw` in this module and is freed once.
unsafe fn free_ctx<T>(ctx: *mut T) {
    // SAFETY: forwarded contract.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
        drop(Box::from_raw(ctx))
    }));
}

/// The deleter of versioned exports: frees the struct, the shape and the owner token.
unsafe extern "C" fn delete_versioned(p: *mut DLManagedTensorVersioned) {
    if !p.is_null() {
        // SAFETY: `p` is the first field of a `VersionedCtx` leaked by `to_dlpack_versioned`,
        // and the consumer calls the deleter once (DLPack's contract).
        unsafe { free_ctx(p.cast::<VersionedCtx>()) }
    }
}

/// The deleter of legacy exports.
unsafe extern "C" fn delete_legacy(p: *mut DLManagedTensor) {
    if !p.is_null() {
        // SAFETY: as for `delete_versioned`, with a `LegacyCtx` leaked by `to_dlpack`.
        unsafe { free_ctx(p.cast::<LegacyCtx>()) }
    }
}

/// Exports `t` as a `DLManagedTensorVersioned` (DLPack 1.1) on the CPU.
///
/// - `raw_data` is shared, not copied: owned bytes are moved into shared storage (the tensor's
///   data pointer does not change), memory-mapped and borrowed bytes keep their owner token;
///   the managed tensor holds a reference to that token, released by its deleter, so the data
///   stays valid after `t` and its model are gone. Such exports are `READ_ONLY`: the bytes are
///   shared with the model (and possibly other exports and owner tokens), which never change
///   them. The data pointer has the alignment the bytes have in memory (`byte_offset` is 0).
/// - Typed fields (`float_data`, ...) and bytes borrowed from caller memory without an owner
///   token are refused unless `opts.copy` allows a copy; `CopyMode::Always` copies even
///   `raw_data`. Copies are flagged `IS_COPIED` and writable; the copy is the owner.
/// - `strides` is NULL (compact row-major); sub-byte types (INT4, UINT4, FLOAT4E2M1, INT2,
///   UINT2) are packed, low bits first, as in ONNX and by DLPack's default.
/// - Refused: UNDEFINED, STRING, FLOAT6 and unknown types, segments, external data that was not
///   loaded, negative dims, and `raw_data` whose length does not match dims and type.
pub fn to_dlpack_versioned(
    t: &mut TensorProto,
    opts: &ExportOptions,
) -> Result<OwnedDlpack<DLManagedTensorVersioned>> {
    crate::error::require_feature(cfg!(feature = "dlpack"), "dlpack")?;
    let mut p = prepare(t, opts)?;
    let managed = DLManagedTensorVersioned {
        version: DLPackVersion::CURRENT,
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete_versioned),
        flags: p.flags,
        dl_tensor: dl_tensor(&mut p),
    };
    let ctx = Box::into_raw(Box::new(VersionedCtx {
        managed,
        _shape: p.shape,
        _owner: p.owner,
    }));
    // SAFETY: `ctx` is a fresh, valid allocation; `manager_ctx` points at it (the deleter frees
    // it through the managed pointer, which is the same address).
    unsafe { (*ctx).managed.manager_ctx = ctx.cast() };
    // SAFETY: a valid managed tensor owned by nobody else; its deleter frees it once.
    Ok(
        unsafe { OwnedDlpack::from_raw(ctx.cast::<DLManagedTensorVersioned>()) }
            .expect("Box::into_raw is never NULL"),
    )
}

/// Exports `t` as a legacy `DLManagedTensor`: as [`to_dlpack_versioned`], but the legacy
/// struct has no flags, so consumers cannot see that zero-copy exports are read-only: they must
/// not write them.
pub fn to_dlpack(
    t: &mut TensorProto,
    opts: &ExportOptions,
) -> Result<OwnedDlpack<DLManagedTensor>> {
    crate::error::require_feature(cfg!(feature = "dlpack"), "dlpack")?;
    let mut p = prepare(t, opts)?;
    let managed = DLManagedTensor {
        dl_tensor: dl_tensor(&mut p),
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete_legacy),
    };
    let ctx = Box::into_raw(Box::new(LegacyCtx {
        managed,
        _shape: p.shape,
        _owner: p.owner,
    }));
    // SAFETY: as in `to_dlpack_versioned`.
    unsafe { (*ctx).managed.manager_ctx = ctx.cast() };
    // SAFETY: as in `to_dlpack_versioned`.
    Ok(
        unsafe { OwnedDlpack::from_raw(ctx.cast::<DLManagedTensor>()) }
            .expect("Box::into_raw is never NULL"),
    )
}
