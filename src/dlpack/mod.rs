//! DLPack v1.1: hand tensors to other runtimes without
//! copying, and take theirs.
//!
//! - the C structs with their exact layout ([`DLDevice`], [`DLDataType`], [`DLTensor`],
//!   [`DLManagedTensor`] (legacy), [`DLManagedTensorVersioned`], [`DLPackVersion`]) and the flags;
//! - the ONNX → DLPack type map ([`dl_data_type`], [`onnx_data_type`]);
//! - export ([`to_dlpack_versioned`], [`to_dlpack`]): zero-copy for tensors with `raw_data`, the
//!   bytes kept alive by the tensor's owner token, held by the managed tensor and released by its
//!   deleter (exactly once); an explicit copy for typed fields (`float_data`, ...) when asked;
//! - import ([`tensor_from_dlpack`]): a [`TensorProto`](crate::TensorProto) from a DLPack tensor, copied, or borrowing
//!   the producer's memory with the producer's deleter as the owner token;
//! - [`OwnedDlpack`]: an owning handle of a managed tensor (calls its deleter once on drop).
//!
//! See `docs/dlpack-params.md` for the rules (read-only exports, what is copied and when).

mod export;
mod import;
mod typed;

pub use export::{CopyMode, ExportOptions, to_dlpack, to_dlpack_versioned};
pub use import::{ImportMode, tensor_from_dlpack};
pub(crate) use import::{build as build_import, check as check_import};
pub(crate) use typed::tensor_bytes;
pub use typed::{element_count, packed_byte_len};

use std::ffi::c_void;
use std::ptr::NonNull;

use crate::error::{Error, Result};
use crate::proto::DataType;

/// Major version of DLPack implemented here (`DLPACK_MAJOR_VERSION`).
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// Minor version of DLPack implemented here (`DLPACK_MINOR_VERSION`).
pub const DLPACK_MINOR_VERSION: u32 = 1;

/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write the data.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the data is a copy made for this consumer alone.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;
/// `DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`: sub-byte elements are padded to one byte each
/// (never set by this library: ONNX packs them, low bits first, as DLPack's default does).
pub const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// `kDLCPU`: the device type of host memory.
pub const DL_CPU: i32 = 1;

/// `DLDataTypeCode` values (`kDLInt`, `kDLUInt`, ...).
pub mod type_code {
    /// `kDLInt`: signed integer.
    pub const INT: u8 = 0;
    /// `kDLUInt`: unsigned integer.
    pub const UINT: u8 = 1;
    /// `kDLFloat`: IEEE floating point.
    pub const FLOAT: u8 = 2;
    /// `kDLOpaqueHandle`.
    pub const OPAQUE_HANDLE: u8 = 3;
    /// `kDLBfloat`: bfloat16.
    pub const BFLOAT: u8 = 4;
    /// `kDLComplex`: complex (a compact pair of floats).
    pub const COMPLEX: u8 = 5;
    /// `kDLBool`: boolean, one byte per element.
    pub const BOOL: u8 = 6;
    /// `kDLFloat8_e4m3fn`.
    pub const FLOAT8_E4M3FN: u8 = 10;
    /// `kDLFloat8_e4m3fnuz`.
    pub const FLOAT8_E4M3FNUZ: u8 = 11;
    /// `kDLFloat8_e5m2`.
    pub const FLOAT8_E5M2: u8 = 12;
    /// `kDLFloat8_e5m2fnuz`.
    pub const FLOAT8_E5M2FNUZ: u8 = 13;
    /// `kDLFloat8_e8m0fnu`.
    pub const FLOAT8_E8M0FNU: u8 = 14;
    /// `kDLFloat4_e2m1fn`.
    pub const FLOAT4_E2M1FN: u8 = 17;
}

/// `DLDevice`: where the data lives.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDevice {
    /// `DLDeviceType` (`kDLCPU` = 1).
    pub device_type: i32,
    /// Device index (0 for host memory).
    pub device_id: i32,
}

impl DLDevice {
    /// The host: `{kDLCPU, 0}`.
    pub const CPU: Self = Self {
        device_type: DL_CPU,
        device_id: 0,
    };
}

/// `DLDataType`: element type as (code, bits, lanes).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDataType {
    /// `DLDataTypeCode`.
    pub code: u8,
    /// Bits per element (per lane).
    pub bits: u8,
    /// Vector lanes (1 for every type of the ONNX map).
    pub lanes: u16,
}

/// `DLTensor`: a plain view of tensor memory (does not manage it).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLTensor {
    /// The data (the first element is at `data + byte_offset`).
    pub data: *mut c_void,
    /// Where the data lives.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or NULL for a compact row-major tensor.
    pub strides: *mut i64,
    /// Offset in bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// `DLManagedTensor` (legacy, DLPack < 0.8): a [`DLTensor`] with its owner and deleter.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Called once by the consumer when it no longer needs the tensor; frees `self`.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Major version (a different major version means a different layout).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl DLPackVersion {
    /// The version implemented here: 1.1.
    pub const CURRENT: Self = Self {
        major: DLPACK_MAJOR_VERSION,
        minor: DLPACK_MINOR_VERSION,
    };
}

/// `DLManagedTensorVersioned` (DLPack ≥ 1.0): version, owner, deleter, flags and the tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The layout version of this struct.
    pub version: DLPackVersion,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Called once by the consumer when it no longer needs the tensor; frees `self`.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*`.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

// Layout of the C structs on 64-bit targets (x86-64, aarch64): checked at compile time.
#[cfg(target_pointer_width = "64")]
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<DLDevice>() == 8);
    assert!(size_of::<DLDataType>() == 4);
    assert!(size_of::<DLTensor>() == 48);
    assert!(offset_of!(DLTensor, device) == 8);
    assert!(offset_of!(DLTensor, ndim) == 16);
    assert!(offset_of!(DLTensor, dtype) == 20);
    assert!(offset_of!(DLTensor, shape) == 24);
    assert!(offset_of!(DLTensor, strides) == 32);
    assert!(offset_of!(DLTensor, byte_offset) == 40);
    assert!(size_of::<DLManagedTensor>() == 64);
    assert!(offset_of!(DLManagedTensor, manager_ctx) == 48);
    assert!(offset_of!(DLManagedTensor, deleter) == 56);
    assert!(size_of::<DLPackVersion>() == 8);
    assert!(size_of::<DLManagedTensorVersioned>() == 80);
    assert!(offset_of!(DLManagedTensorVersioned, manager_ctx) == 8);
    assert!(offset_of!(DLManagedTensorVersioned, deleter) == 16);
    assert!(offset_of!(DLManagedTensorVersioned, flags) == 24);
    assert!(offset_of!(DLManagedTensorVersioned, dl_tensor) == 32);
};

/// The ONNX → DLPack type map of formats.md §3: (ONNX type, DLPack code, bits).
pub const TYPE_MAP: [(DataType, u8, u8); 25] = {
    use DataType::*;
    use type_code::*;
    [
        (Float, FLOAT, 32),
        (Uint8, UINT, 8),
        (Int8, INT, 8),
        (Uint16, UINT, 16),
        (Int16, INT, 16),
        (Int32, INT, 32),
        (Int64, INT, 64),
        (Bool, BOOL, 8),
        (Float16, FLOAT, 16),
        (Double, FLOAT, 64),
        (Uint32, UINT, 32),
        (Uint64, UINT, 64),
        (Complex64, COMPLEX, 64),
        (Complex128, COMPLEX, 128),
        (Bfloat16, BFLOAT, 16),
        (Float8e4m3fn, FLOAT8_E4M3FN, 8),
        (Float8e4m3fnuz, FLOAT8_E4M3FNUZ, 8),
        (Float8e5m2, FLOAT8_E5M2, 8),
        (Float8e5m2fnuz, FLOAT8_E5M2FNUZ, 8),
        (Uint4, UINT, 4),
        (Int4, INT, 4),
        (Float4e2m1, FLOAT4_E2M1FN, 4),
        (Float8e8m0, FLOAT8_E8M0FNU, 8),
        (Uint2, UINT, 2),
        (Int2, INT, 2),
    ]
};

/// The DLPack type of an ONNX element type.
///
/// Fails (`Error::Unsupported`) for UNDEFINED and STRING, which have no DLPack equivalent, and
/// for FLOAT6E2M3 / FLOAT6E3M2, which are outside the project's map (DLPack 1.1 has codes for
/// 6-bit floats, but how ONNX packs them is not settled; see docs/dlpack-params.md).
pub fn dl_data_type(t: DataType) -> Result<DLDataType> {
    TYPE_MAP
        .iter()
        .find(|(d, _, _)| *d == t)
        .map(|&(_, code, bits)| DLDataType {
            code,
            bits,
            lanes: 1,
        })
        .ok_or_else(|| {
            Error::Unsupported(format!(
                "tensors of type {} have no DLPack equivalent",
                t.name()
            ))
        })
}

/// The ONNX element type of a DLPack type (the inverse of [`dl_data_type`]); fails
/// (`Error::Unsupported`) for vector types (`lanes != 1`) and types outside the map.
pub fn onnx_data_type(t: DLDataType) -> Result<DataType> {
    if t.lanes != 1 {
        return Err(Error::Unsupported(format!(
            "DLPack vector type (code {}, bits {}, lanes {}): ONNX has no vector element types",
            t.code, t.bits, t.lanes
        )));
    }
    TYPE_MAP
        .iter()
        .find(|(_, code, bits)| *code == t.code && *bits == t.bits)
        .map(|&(d, _, _)| d)
        .ok_or_else(|| {
            Error::Unsupported(format!(
                "DLPack type (code {}, bits {}) has no ONNX equivalent",
                t.code, t.bits
            ))
        })
}

/// The ONNX element type of a `TensorProto.data_type` value that DLPack can carry.
pub(crate) fn exportable_type(data_type: i32) -> Result<(DataType, DLDataType)> {
    let t = DataType::from_i32(data_type).ok_or_else(|| {
        Error::Unsupported(format!(
            "data_type {data_type} is not an ONNX element type this library knows"
        ))
    })?;
    Ok((t, dl_data_type(t)?))
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::DLManagedTensor {}
    impl Sealed for super::DLManagedTensorVersioned {}
}

/// The two managed-tensor structs: [`DLManagedTensor`] (legacy) and
/// [`DLManagedTensorVersioned`].
pub trait ManagedTensor: sealed::Sealed + 'static {
    /// The tensor.
    fn dl_tensor(&self) -> &DLTensor;
    /// The flags (0 for the legacy struct, which has none).
    fn flags(&self) -> u64;
    /// The version (`None` for the legacy struct).
    fn version(&self) -> Option<DLPackVersion>;
    /// The deleter.
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
}

impl ManagedTensor for DLManagedTensor {
    fn dl_tensor(&self) -> &DLTensor {
        &self.dl_tensor
    }
    fn flags(&self) -> u64 {
        0
    }
    fn version(&self) -> Option<DLPackVersion> {
        None
    }
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
}

impl ManagedTensor for DLManagedTensorVersioned {
    fn dl_tensor(&self) -> &DLTensor {
        &self.dl_tensor
    }
    fn flags(&self) -> u64 {
        self.flags
    }
    fn version(&self) -> Option<DLPackVersion> {
        Some(self.version)
    }
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
}

/// An owned managed tensor: the right (and duty) to call its deleter once. Dropping it calls the
/// deleter; [`OwnedDlpack::into_raw`] hands that duty to someone else (e.g. a C caller).
///
/// Thread safety: `Send` and `Sync`, so that it can serve as an owner token. The deleter may
/// therefore run on any thread: true of this library's deleters and of the usual producers'
/// (NumPy and PyTorch take the GIL in theirs); a producer whose deleter is bound to one thread
/// must not be imported with [`ImportMode::Borrow`].
pub struct OwnedDlpack<M: ManagedTensor> {
    ptr: NonNull<M>,
}

// SAFETY: the struct is only read through `&self` (never written after creation, by DLPack's
// contract the producer does not change it while the consumer holds it), and the deleter may run
// on any thread (documented requirement on imported tensors, see the type's doc).
unsafe impl<M: ManagedTensor> Send for OwnedDlpack<M> {}
// SAFETY: see `Send`; shared access only reads.
unsafe impl<M: ManagedTensor> Sync for OwnedDlpack<M> {}

impl<M: ManagedTensor> OwnedDlpack<M> {
    /// Takes ownership of a managed tensor (`None` for NULL).
    ///
    /// # Safety
    /// `p` is NULL or points at a valid managed tensor of this type that the caller owns (its
    /// deleter has not been called and will not be called by anyone else); for a versioned
    /// tensor of another major version only the deleter may be used (the other fields are not
    /// read before the version is checked). Its `dl_tensor` (shape, strides, data) stays valid
    /// and unchanged until the deleter runs.
    pub unsafe fn from_raw(p: *mut M) -> Option<Self> {
        NonNull::new(p).map(|ptr| Self { ptr })
    }

    /// Gives up ownership without calling the deleter; the caller must call it once.
    pub fn into_raw(self) -> *mut M {
        let p = self.ptr.as_ptr();
        std::mem::forget(self);
        p
    }

    /// The managed tensor, still owned by `self`.
    pub fn as_ptr(&self) -> *mut M {
        self.ptr.as_ptr()
    }

    /// The managed struct.
    pub fn get(&self) -> &M {
        // SAFETY: valid while `self` owns it (from_raw contract).
        unsafe { self.ptr.as_ref() }
    }

    /// The tensor.
    pub fn dl_tensor(&self) -> &DLTensor {
        self.get().dl_tensor()
    }

    /// The flags (0 for a legacy tensor).
    pub fn flags(&self) -> u64 {
        self.get().flags()
    }

    /// The shape (`ndim` extents; empty for a scalar).
    pub fn shape(&self) -> &[i64] {
        let t = self.dl_tensor();
        match usize::try_from(t.ndim) {
            // SAFETY: a valid DLTensor has `ndim` extents at `shape` (from_raw contract).
            Ok(n) if n > 0 && !t.shape.is_null() => unsafe {
                std::slice::from_raw_parts(t.shape, n)
            },
            _ => &[],
        }
    }

    /// The bytes of a compact tensor on the host (checked as [`tensor_from_dlpack`] checks:
    /// CPU, known type, row-major or NULL strides).
    pub fn bytes(&self) -> Result<&[u8]> {
        let layout = import::check(self)?;
        // SAFETY: `check` found `len` readable bytes at `ptr` for a valid tensor, kept alive by
        // `self` (from_raw contract).
        Ok(unsafe { slice_or_empty(layout.ptr, layout.len) })
    }
}

impl<M: ManagedTensor> Drop for OwnedDlpack<M> {
    fn drop(&mut self) {
        if let Some(deleter) = self.get().deleter() {
            // SAFETY: `self` owns the tensor and this is the one call of its deleter.
            unsafe { deleter(self.ptr.as_ptr()) }
        }
    }
}

impl<M: ManagedTensor> std::fmt::Debug for OwnedDlpack<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.dl_tensor();
        f.debug_struct("OwnedDlpack")
            .field("version", &self.get().version())
            .field("flags", &self.flags())
            .field("dtype", &t.dtype)
            .field("shape", &self.shape())
            .field("data", &t.data)
            .finish()
    }
}

/// A slice from raw parts, or an empty slice for length 0.
///
/// # Safety
/// For `len > 0`, `ptr..ptr+len` is readable for the returned lifetime.
unsafe fn slice_or_empty<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}
