//! Import: a [`TensorProto`] from a DLPack managed tensor, copied or borrowed.

use std::sync::Arc;

use super::typed::{element_count, packed_byte_len};
use super::{
    DL_CPU, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, DLPACK_MAJOR_VERSION, ManagedTensor,
    OwnedDlpack, onnx_data_type,
};
use crate::bytes::ByteSpan;
use crate::error::{Error, Result};
use crate::proto::{DataType, TensorProto};

/// How [`tensor_from_dlpack`] takes the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ImportMode {
    /// Copy the bytes into the tensor; the producer's deleter runs before the call returns.
    #[default]
    Copy,
    /// Borrow the producer's memory: `raw_data` points at it, and the managed tensor becomes the
    /// owner token of the bytes, its deleter called once when the last user of the bytes (the
    /// tensor, its copies, retained owner tokens) is gone, on that user's thread.
    Borrow,
}

/// Where the bytes of a checked DLPack tensor are, and what they are.
pub(crate) struct Layout {
    pub(crate) data_type: DataType,
    pub(crate) dims: Vec<i64>,
    pub(crate) ptr: *const u8,
    pub(crate) len: usize,
}

/// Checks that a DLPack tensor can become a `TensorProto`: DLPack major version 1 (for the
/// versioned struct), on the CPU, of a type in the map, sub-byte types packed, a sane shape,
/// compact row-major (NULL strides, or strides equal to the row-major ones; extents of 1 may
/// have any stride), and data present when there are bytes.
pub(crate) fn check<M: ManagedTensor>(m: &OwnedDlpack<M>) -> Result<Layout> {
    if let Some(v) = m.get().version()
        && v.major != DLPACK_MAJOR_VERSION
    {
        return Err(Error::Unsupported(format!(
            "DLPack version {}.{}: only major version {DLPACK_MAJOR_VERSION} is supported",
            v.major, v.minor
        )));
    }
    let t = m.dl_tensor();
    if t.device.device_type != DL_CPU {
        return Err(Error::Unsupported(format!(
            "the DLPack tensor is on device ({}, {}), not the CPU (1): copy it to host memory first",
            t.device.device_type, t.device.device_id
        )));
    }
    let data_type = onnx_data_type(t.dtype)?;
    let bits = data_type.bits();
    if bits < 8 && m.flags() & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED != 0 {
        return Err(Error::Unsupported(format!(
            "the DLPack tensor of {} is padded (one element per byte); ONNX needs packed \
             sub-byte elements",
            data_type.name()
        )));
    }
    if t.ndim < 0 {
        return Err(Error::InvalidArgument(format!(
            "DLPack tensor with ndim {}",
            t.ndim
        )));
    }
    if t.ndim > 0 && t.shape.is_null() {
        return Err(Error::InvalidArgument(format!(
            "DLPack tensor with ndim {} and a NULL shape",
            t.ndim
        )));
    }
    let dims = m.shape().to_vec();
    let n = element_count(&dims)?;
    if n > 1 && t.ndim > 0 && !t.strides.is_null() {
        // SAFETY: a valid DLTensor with non-NULL strides has `ndim` of them (from_raw contract).
        let strides = unsafe { std::slice::from_raw_parts(t.strides, dims.len()) };
        let mut expected: i64 = 1;
        for (i, (&d, &s)) in dims.iter().zip(strides).enumerate().rev() {
            if d != 1 && s != expected {
                return Err(Error::Unsupported(format!(
                    "the DLPack tensor is not compact row-major (shape {dims:?}, strides \
                     {strides:?}: dimension {i} has stride {s}, expected {expected}); make it \
                     contiguous first"
                )));
            }
            // Cannot overflow: the product of all extents fits (element_count succeeded).
            expected *= d;
        }
    }
    let len = packed_byte_len(bits, n)?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= isize::MAX as usize)
        .ok_or_else(|| Error::LimitExceeded(format!("a DLPack tensor of {len} bytes")))?;
    let ptr = if len == 0 {
        std::ptr::null()
    } else {
        if t.data.is_null() {
            return Err(Error::InvalidArgument(format!(
                "DLPack tensor of {len} bytes with NULL data"
            )));
        }
        let offset = usize::try_from(t.byte_offset)
            .ok()
            .filter(|o| (t.data as usize).checked_add(*o).is_some())
            .ok_or_else(|| {
                Error::InvalidArgument(format!("DLPack byte_offset {} overflows", t.byte_offset))
            })?;
        t.data.cast::<u8>().cast_const().wrapping_add(offset)
    };
    Ok(Layout {
        data_type,
        dims,
        ptr,
        len,
    })
}

/// Builds the tensor of a checked DLPack tensor (cannot fail).
pub(crate) fn build<M: ManagedTensor>(
    m: OwnedDlpack<M>,
    layout: Layout,
    mode: ImportMode,
) -> TensorProto {
    let mut t = TensorProto::new();
    t.dims = layout.dims.into();
    t.set_data_type(layout.data_type as i32);
    let bytes = if layout.len == 0 {
        drop(m);
        ByteSpan::new()
    } else {
        match mode {
            ImportMode::Copy => {
                // SAFETY: `check` found `len` readable bytes at `ptr`, kept alive by `m` (its
                // deleter has not run: `m` is dropped after the copy).
                let copy = unsafe { std::slice::from_raw_parts(layout.ptr, layout.len) }.to_vec();
                drop(m);
                ByteSpan::from_vec(copy)
            }
            // SAFETY: the bytes stay valid and unchanged until the producer's deleter runs
            // (DLPack's contract), i.e. while the owner (the managed tensor) lives.
            ImportMode::Borrow => unsafe {
                ByteSpan::from_owner_raw(layout.ptr, layout.len, Arc::new(m))
            },
        }
    };
    t.raw_data = Some(bytes);
    t
}

/// A `TensorProto` (dims, data_type, raw_data; no name) from a DLPack tensor.
///
/// Accepted: DLPack major version 1 (versioned struct) or the legacy struct, CPU memory, a type
/// of the map (lanes 1), packed sub-byte elements, compact row-major layout (NULL strides, or
/// strides equal to the row-major ones). `mode` says whether the bytes are copied or borrowed
/// (see [`ImportMode`]). On failure `m` is dropped, which calls its deleter.
pub fn tensor_from_dlpack<M: ManagedTensor>(
    m: OwnedDlpack<M>,
    mode: ImportMode,
) -> Result<TensorProto> {
    crate::error::require_feature(cfg!(feature = "dlpack"), "dlpack")?;
    let layout = check(&m)?;
    Ok(build(m, layout, mode))
}
