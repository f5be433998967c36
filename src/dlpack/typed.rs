//! The bytes of a tensor as DLPack (and the params format) see them: `raw_data` as it is, or
//! the typed fields (`float_data`, `int32_data`, ...) converted to the same little-endian layout,
//! exactly as `onnx.numpy_helper.to_array` reads them.

use std::borrow::Cow;

use super::{DLDataType, exportable_type};
use crate::error::{Error, Result};
use crate::proto::{DataType, TensorProto};

/// `TensorProto.DataLocation.EXTERNAL`.
const DATA_LOCATION_EXTERNAL: i32 = 1;

/// Number of elements of a tensor with extents `dims`; fails for a negative extent or a count
/// that overflows `u64`.
pub fn element_count(dims: &[i64]) -> Result<u64> {
    dims.iter().try_fold(1u64, |n, &d| {
        let d = u64::try_from(d)
            .map_err(|_| Error::InvalidArgument(format!("negative dimension {d} in {dims:?}")))?;
        n.checked_mul(d).ok_or_else(|| {
            Error::LimitExceeded(format!("the element count of shape {dims:?} overflows"))
        })
    })
}

/// Bytes of `n` elements of `bits` bits each, packed (sub-byte elements share bytes, low bits
/// first, the last byte padded): `ceil(n × bits / 8)`, checked for overflow.
pub fn packed_byte_len(bits: u32, n: u64) -> Result<u64> {
    n.checked_mul(u64::from(bits))
        .map(|b| b.div_ceil(8))
        .ok_or_else(|| {
            Error::LimitExceeded(format!(
                "{n} elements of {bits} bits overflow a 64-bit size"
            ))
        })
}

/// A tensor checked for export: its types, element count and byte length.
pub(crate) struct Checked {
    pub(crate) data_type: DataType,
    pub(crate) dl_type: DLDataType,
    pub(crate) elements: u64,
    pub(crate) byte_len: usize,
}

fn tensor_label(t: &TensorProto) -> String {
    if t.has_name() {
        format!("tensor '{}'", t.name())
    } else {
        "tensor".to_string()
    }
}

/// Checks what DLPack and the params format need: a known type with a DLPack code, no segment,
/// no unloaded external data, sane dims, and `raw_data` (when set) of exactly the right length.
pub(crate) fn check(t: &TensorProto) -> Result<Checked> {
    let label = tensor_label(t);
    let (data_type, dl_type) = exportable_type(t.data_type())
        .map_err(|e| Error::Unsupported(format!("{label}: {}", strip(e))))?;
    if t.has_segment() {
        return Err(Error::Unsupported(format!(
            "{label} is a segment of a larger tensor"
        )));
    }
    if t.rare.data_location == Some(DATA_LOCATION_EXTERNAL) {
        return Err(Error::Unsupported(format!(
            "{label} has its data in an external file that is not loaded (load the model with \
             its external data first)"
        )));
    }
    let elements = element_count(&t.dims).map_err(|e| with_label(e, &label))?;
    let byte_len = packed_byte_len(data_type.bits(), elements)?;
    let byte_len = usize::try_from(byte_len)
        .ok()
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| {
            Error::LimitExceeded(format!("{label}: {byte_len} bytes do not fit in memory"))
        })?;
    if let Some(raw) = &t.raw_data
        && raw.len() != byte_len
    {
        return Err(Error::InvalidArgument(format!(
            "{label}: raw_data has {} bytes, but {} elements of {} need {byte_len}",
            raw.len(),
            elements,
            data_type.name()
        )));
    }
    Ok(Checked {
        data_type,
        dl_type,
        elements,
        byte_len,
    })
}

/// The message of an error without its variant prefix.
fn strip(e: Error) -> String {
    match e {
        Error::Unsupported(s) | Error::InvalidArgument(s) | Error::LimitExceeded(s) => s,
        other => other.to_string(),
    }
}

fn with_label(e: Error, label: &str) -> Error {
    match e {
        Error::InvalidArgument(s) => Error::InvalidArgument(format!("{label}: {s}")),
        Error::LimitExceeded(s) => Error::LimitExceeded(format!("{label}: {s}")),
        other => other,
    }
}

/// The name of the typed field that holds the data of `t`, when it holds any.
pub(crate) fn typed_field(t: &TensorProto) -> Option<&'static str> {
    [
        (!t.float_data.is_empty(), "float_data"),
        (!t.rare.int32_data.is_empty(), "int32_data"),
        (!t.int64_data.is_empty(), "int64_data"),
        (!t.rare.double_data.is_empty(), "double_data"),
        (!t.rare.uint64_data.is_empty(), "uint64_data"),
        (!t.rare.string_data.is_empty(), "string_data"),
    ]
    .into_iter()
    .find(|(set, _)| *set)
    .map(|(_, name)| name)
}

/// The tensor's bytes: `raw_data` borrowed, or the typed fields converted (a new buffer).
/// A tensor without any data is valid only with zero elements.
pub(crate) fn tensor_bytes(t: &TensorProto) -> Result<(Checked, Cow<'_, [u8]>)> {
    let c = check(t)?;
    if let Some(raw) = &t.raw_data {
        return Ok((c, Cow::Borrowed(raw.as_slice())));
    }
    let bytes = typed_bytes(t, &c)?;
    Ok((c, Cow::Owned(bytes)))
}

/// Converts the typed fields of a checked tensor without `raw_data` into raw little-endian bytes
/// (`onnx.numpy_helper.to_array`'s reading): `float_data` (FLOAT, COMPLEX64), `double_data`
/// (DOUBLE, COMPLEX128), `int64_data` (INT64), `uint64_data` (UINT32, UINT64), `int32_data`
/// (every other type: the low 8 or 16 bits of each value for 8- and 16-bit types, one packed byte
/// per value for 4- and 2-bit types).
pub(crate) fn typed_bytes(t: &TensorProto, c: &Checked) -> Result<Vec<u8>> {
    use DataType::*;
    let n = c.elements;
    if n > 0 && typed_field(t).is_none() {
        return Err(Error::InvalidArgument(format!(
            "{} has no data (neither raw_data nor a typed field) for its {n} elements",
            tensor_label(t)
        )));
    }
    let (field, have, want) = match c.data_type {
        Float => ("float_data", t.float_data.len(), n),
        Complex64 => ("float_data", t.float_data.len(), n.saturating_mul(2)),
        Double => ("double_data", t.rare.double_data.len(), n),
        Complex128 => ("double_data", t.rare.double_data.len(), n.saturating_mul(2)),
        Int64 => ("int64_data", t.int64_data.len(), n),
        Uint64 | Uint32 => ("uint64_data", t.rare.uint64_data.len(), n),
        // One packed byte per value.
        Int4 | Uint4 | Float4e2m1 | Int2 | Uint2 => {
            ("int32_data", t.rare.int32_data.len(), c.byte_len as u64)
        }
        _ => ("int32_data", t.rare.int32_data.len(), n),
    };
    if have as u64 != want {
        return Err(Error::InvalidArgument(format!(
            "{}: {field} has {have} values, but {n} elements of {} need {want}",
            tensor_label(t),
            c.data_type.name()
        )));
    }
    let mut out = Vec::with_capacity(c.byte_len);
    match c.data_type {
        Float | Complex64 => t
            .float_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        Double | Complex128 => t
            .rare
            .double_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        Int64 => t
            .int64_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        Uint64 => t
            .rare
            .uint64_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        // onnx stores UINT32 in uint64_data; to_array truncates with astype.
        Uint32 => t
            .rare
            .uint64_data
            .iter()
            .for_each(|v| out.extend_from_slice(&(*v as u32).to_le_bytes())),
        Int32 => t
            .rare
            .int32_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        Int16 | Uint16 | Float16 | Bfloat16 => t
            .rare
            .int32_data
            .iter()
            .for_each(|v| out.extend_from_slice(&(*v as u16).to_le_bytes())),
        Int8 | Uint8 | Bool | Float8e4m3fn | Float8e4m3fnuz | Float8e5m2 | Float8e5m2fnuz
        | Float8e8m0 | Int4 | Uint4 | Float4e2m1 | Int2 | Uint2 => {
            out.extend(t.rare.int32_data.iter().map(|v| *v as u8))
        }
        Undefined | String | Float6e2m3 | Float6e3m2 => {
            unreachable!("refused by check(): no DLPack type")
        }
    }
    debug_assert_eq!(out.len(), c.byte_len);
    Ok(out)
}
