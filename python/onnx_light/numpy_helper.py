"""NumPy conversions of tensors (``onnx.numpy_helper``'s names).

``to_array`` returns a read-only view of the tensor's ``raw_data`` without copying it: the
array's base keeps the bytes' owner token alive, so the array stays valid after the model is
deleted, and later changes to the tensor never change it. Values equal
``onnx.numpy_helper.to_array`` for every data type (sub-byte and 6-bit types are unpacked, a
copy; typed fields such as ``float_data`` are copied; strings give an object array).
"""

from __future__ import annotations

import math
import sys
from typing import Any, Optional

import ml_dtypes
import numpy as np

from . import _native
from ._native import MapProto, OptionalProto, SequenceProto, TensorProto

T = TensorProto

# data type -> (NumPy dtype, storage field when not in raw_data)
_TYPES: dict[int, tuple[np.dtype, str]] = {
    T.FLOAT: (np.dtype("float32"), "float_data"),
    T.UINT8: (np.dtype("uint8"), "int32_data"),
    T.INT8: (np.dtype("int8"), "int32_data"),
    T.UINT16: (np.dtype("uint16"), "int32_data"),
    T.INT16: (np.dtype("int16"), "int32_data"),
    T.INT32: (np.dtype("int32"), "int32_data"),
    T.INT64: (np.dtype("int64"), "int64_data"),
    T.BOOL: (np.dtype("bool"), "int32_data"),
    T.FLOAT16: (np.dtype("float16"), "int32_data"),
    T.BFLOAT16: (np.dtype(ml_dtypes.bfloat16), "int32_data"),
    T.DOUBLE: (np.dtype("float64"), "double_data"),
    T.COMPLEX64: (np.dtype("complex64"), "float_data"),
    T.COMPLEX128: (np.dtype("complex128"), "double_data"),
    T.UINT32: (np.dtype("uint32"), "uint64_data"),
    T.UINT64: (np.dtype("uint64"), "uint64_data"),
    T.STRING: (np.dtype("object"), "string_data"),
    T.FLOAT8E4M3FN: (np.dtype(ml_dtypes.float8_e4m3fn), "int32_data"),
    T.FLOAT8E4M3FNUZ: (np.dtype(ml_dtypes.float8_e4m3fnuz), "int32_data"),
    T.FLOAT8E5M2: (np.dtype(ml_dtypes.float8_e5m2), "int32_data"),
    T.FLOAT8E5M2FNUZ: (np.dtype(ml_dtypes.float8_e5m2fnuz), "int32_data"),
    T.UINT4: (np.dtype(ml_dtypes.uint4), "int32_data"),
    T.INT4: (np.dtype(ml_dtypes.int4), "int32_data"),
    T.FLOAT4E2M1: (np.dtype(ml_dtypes.float4_e2m1fn), "int32_data"),
    T.FLOAT8E8M0: (np.dtype(ml_dtypes.float8_e8m0fnu), "int32_data"),
    T.UINT2: (np.dtype(ml_dtypes.uint2), "int32_data"),
    T.INT2: (np.dtype(ml_dtypes.int2), "int32_data"),
    T.FLOAT6E2M3: (np.dtype(ml_dtypes.float6_e2m3fn), "int32_data"),
    T.FLOAT6E3M2: (np.dtype(ml_dtypes.float6_e3m2fn), "int32_data"),
}
_FOUR_BIT = {T.INT4, T.UINT4, T.FLOAT4E2M1}
_TWO_BIT = {T.INT2, T.UINT2}
_SIX_BIT = {T.FLOAT6E2M3, T.FLOAT6E3M2}
_FIELD_DTYPES = {
    "float_data": np.float32,
    "int32_data": np.int32,
    "int64_data": np.int64,
    "double_data": np.float64,
    "uint64_data": np.uint64,
}


def tensor_dtype_to_np_dtype(data_type: int) -> np.dtype:
    """The NumPy dtype of an ONNX data type (``onnx.helper.tensor_dtype_to_np_dtype``); KeyError
    for an unknown one."""
    return _TYPES[data_type][0]  # KeyError for an unknown type, as onnx


def _bytes_array(buf: Any) -> np.ndarray:
    """A read-only uint8 array over a native buffer (no copy)."""
    if len(buf) == 0:
        return np.zeros(0, dtype=np.uint8)
    return np.asarray(buf)


def _field_array(tensor: TensorProto, field: str) -> np.ndarray:
    buf = _native.tensor_field_buffer(tensor, field)
    return _bytes_array(buf).view(_FIELD_DTYPES[field])


def _unpack(data: np.ndarray, dims: Any, bits: int) -> np.ndarray:
    """Unpacks sub-byte elements (low bits first) into one byte each, shaped as ``dims``."""
    n = math.prod(dims)
    per = 8 // bits
    mask = (1 << bits) - 1
    out = np.empty(data.size * per, dtype=np.uint8)
    for k in range(per):
        out[k::per] = (data >> (k * bits)) & mask
    if out.size < n:
        raise ValueError(
            f"Packed {bits}-bit data ({data.size} bytes, {out.size} elements unpacked) "
            f"is too small for the declared shape {list(dims)} ({n} elements required)."
        )
    return out[:n].reshape(dims)


def _unpack_6bit(data: np.ndarray, dims: Any) -> np.ndarray:
    """Unpacks 6-bit codes (4 in 3 bytes, low bits first), shaped as ``dims``."""
    n = math.prod(dims)
    need = -(-n * 6 // 8)
    if data.size < need:
        raise ValueError(
            f"Packed 6-bit data ({data.size} bytes) is too small for the declared "
            f"shape {list(dims)} ({need} bytes required)."
        )
    groups = -(-n // 4)
    padded = np.zeros(groups * 3, dtype=np.uint8)
    m = min(data.size, groups * 3)
    padded[:m] = data[:m]
    b = padded.reshape(groups, 3).astype(np.uint8)
    out = np.empty((groups, 4), dtype=np.uint8)
    out[:, 0] = b[:, 0] & 0x3F
    out[:, 1] = ((b[:, 0] >> 6) & 0x03) | ((b[:, 1] & 0x0F) << 2)
    out[:, 2] = ((b[:, 1] >> 4) & 0x0F) | ((b[:, 2] & 0x03) << 4)
    out[:, 3] = (b[:, 2] >> 2) & 0x3F
    return out.reshape(-1)[:n].reshape(dims)


def _from_raw(data: np.ndarray, data_type: int, dims: Any) -> np.ndarray:
    dtype = tensor_dtype_to_np_dtype(data_type)
    if data_type in _FOUR_BIT:
        return _unpack(data, dims, 4).view(dtype)
    if data_type in _TWO_BIT:
        return _unpack(data, dims, 2).view(dtype)
    if data_type in _SIX_BIT:
        return _unpack_6bit(data, dims).view(dtype)
    if sys.byteorder == "big":
        return data.view(dtype.newbyteorder("<")).astype(dtype).reshape(dims)
    if data.size % dtype.itemsize:
        raise ValueError(
            f"raw_data of {data.size} bytes is not a whole number of {dtype} elements"
        )
    return data.view(dtype).reshape(dims)


def to_array(tensor: TensorProto, base_dir: str = "") -> np.ndarray:
    """The tensor's values as a NumPy array (``onnx.numpy_helper.to_array``).

    ``raw_data`` (also when the tensor was loaded with ``no_copy``, i.e. from a memory map) is
    returned as a read-only view without a copy. External data that was not loaded is read from
    ``base_dir`` (memory-mapped, also without a copy).
    """
    if tensor.HasField("segment"):
        raise ValueError("Currently not supporting loading segments.")
    data_type = tensor.data_type
    if data_type == T.UNDEFINED:
        raise TypeError("The element type in the input tensor is UNDEFINED.")
    dtype = tensor_dtype_to_np_dtype(data_type)
    dims = tuple(tensor.dims)
    if data_type == T.STRING:
        ss = [s.decode("utf-8") for s in tensor.string_data]
        return np.asarray(ss).astype(dtype).reshape(dims)
    if tensor.data_location == T.EXTERNAL and len(tensor.external_data) > 0:
        buf = _native.tensor_external_buffer(tensor, base_dir or ".")
        return _from_raw(_bytes_array(buf), data_type, dims)
    if tensor.HasField("raw_data"):
        buf = _native.tensor_raw_buffer(tensor)
        return _from_raw(_bytes_array(buf), data_type, dims)
    field = _TYPES[data_type][1]
    if data_type in (
        T.BFLOAT16, T.FLOAT16, T.INT16, T.UINT16,
    ):
        return _field_array(tensor, field).view(np.uint32).astype(np.uint16).reshape(dims).view(dtype)
    if data_type in (
        T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ, T.FLOAT8E8M0, T.BOOL,
    ):
        return _field_array(tensor, field).view(np.uint32).astype(np.uint8).view(dtype).reshape(dims)
    if data_type in _SIX_BIT:
        a = _field_array(tensor, field).view(np.uint32).astype(np.uint8) & 0x3F
        return a.view(dtype).reshape(dims)
    if data_type in _FOUR_BIT or data_type in _TWO_BIT:
        a = _field_array(tensor, field).view(np.uint32).astype(np.uint8)
        bits = 4 if data_type in _FOUR_BIT else 2
        return _unpack(a, dims, bits).view(dtype)
    a = _field_array(tensor, field)
    if data_type in (T.COMPLEX64, T.COMPLEX128):
        return a.view(dtype).reshape(dims)
    return a.astype(dtype).reshape(dims)


def _pack(array: np.ndarray, bits: int) -> np.ndarray:
    per = 8 // bits
    mask = (1 << bits) - 1
    flat = array.ravel().view(np.uint8) & mask
    pad = -flat.size % per
    if pad:
        flat = np.concatenate([flat, np.zeros(pad, dtype=np.uint8)])
    out = np.zeros(flat.size // per, dtype=np.uint8)
    for k in range(per):
        out |= flat[k::per] << (k * bits)
    return out


def _pack_6bit(array: np.ndarray) -> np.ndarray:
    flat = array.ravel().view(np.uint8) & 0x3F
    n = flat.size
    pad = -n % 4
    if pad:
        flat = np.concatenate([flat, np.zeros(pad, dtype=np.uint8)])
    v0, v1, v2, v3 = flat[0::4], flat[1::4], flat[2::4], flat[3::4]
    packed = np.empty((v0.size, 3), dtype=np.uint8)
    packed[:, 0] = v0 | ((v1 & 0x03) << 6)
    packed[:, 1] = (v1 >> 2) | ((v2 & 0x0F) << 4)
    packed[:, 2] = (v2 >> 4) | (v3 << 2)
    return packed.reshape(-1)[: -(-n * 6 // 8)]


def np_dtype_to_tensor_dtype(dtype: np.dtype) -> int:
    """The ONNX data type of a NumPy dtype (``onnx.helper.np_dtype_to_tensor_dtype``)."""
    dtype = np.dtype(dtype)
    for k, (d, _) in _TYPES.items():
        if d == dtype and k != T.STRING:
            return k
    raise ValueError(f"unsupported NumPy dtype {dtype}")


def from_array(array: np.ndarray, /, name: Optional[str] = None) -> TensorProto:
    """A TensorProto holding a copy of ``array`` in ``raw_data`` (``onnx.numpy_helper.from_array``)."""
    array = np.asarray(array)
    tensor = TensorProto()
    tensor.dims.extend(array.shape)
    if name:
        tensor.name = name
    if array.dtype == object or np.issubdtype(array.dtype, np.str_):
        tensor.data_type = T.STRING
        values = []
        for e in array.flatten():
            if isinstance(e, str):
                values.append(e.encode("utf-8"))
            elif isinstance(e, bytes):
                values.append(e)
            else:
                raise NotImplementedError(
                    f"Unrecognized object in the object array, expect a string, or array of bytes: {type(e)}"
                )
        tensor.string_data.extend(values)
        return tensor
    data_type = np_dtype_to_tensor_dtype(array.dtype)
    if data_type in _FOUR_BIT:
        array = _pack(array, 4)
    elif data_type in _TWO_BIT:
        array = _pack(array, 2)
    elif data_type in _SIX_BIT:
        array = _pack_6bit(array)
    elif array.dtype.byteorder == ">" or (sys.byteorder == "big" and array.dtype.byteorder == "="):
        array = array.astype(array.dtype.newbyteorder("<"))
    tensor.raw_data = np.ascontiguousarray(array).tobytes()
    tensor.data_type = data_type
    return tensor


def _message(value: Any, cls: type) -> Any:
    from .helper import _ours

    return _ours(value, cls)


def _same_type(values: list, first: Any) -> bool:
    return all(isinstance(v, type(first)) for v in values)


def from_list(lst: list[Any], name: Optional[str] = None, dtype: Optional[int] = None) -> SequenceProto:
    """A SequenceProto of the list's values (``onnx.numpy_helper.from_list``): arrays become
    tensors, lists sequences and dicts maps; ``dtype`` (a ``SequenceProto.DataType``) gives the
    element kind of an empty list (TENSOR by default)."""
    seq = SequenceProto()
    if name:
        seq.name = name
    if dtype is not None:
        elem_type = dtype
    elif lst and isinstance(lst[0], dict):
        elem_type = SequenceProto.MAP
    elif lst and isinstance(lst[0], list):
        elem_type = SequenceProto.SEQUENCE
    else:
        elem_type = SequenceProto.TENSOR
    seq.elem_type = elem_type
    if lst and not _same_type(lst, lst[0]):
        raise TypeError(
            "The element type in the input list is not the same "
            "for all elements and therefore is not supported as a sequence."
        )
    if elem_type == SequenceProto.TENSOR:
        seq.tensor_values.extend([from_array(np.asarray(v)) for v in lst])
    elif elem_type == SequenceProto.SEQUENCE:
        seq.sequence_values.extend([from_list(v) for v in lst])
    elif elem_type == SequenceProto.MAP:
        seq.map_values.extend([from_dict(v) for v in lst])
    else:
        raise TypeError(
            "The element type in the input list is not a tensor, "
            "sequence, or map and is not supported."
        )
    return seq


def to_list(sequence: SequenceProto) -> list[Any]:
    """The values of a SequenceProto as a list (``onnx.numpy_helper.to_list``)."""
    sequence = _message(sequence, SequenceProto)
    kind = sequence.elem_type
    if kind == SequenceProto.TENSOR:
        return [to_array(v) for v in sequence.tensor_values]
    if kind == SequenceProto.SPARSE_TENSOR:
        return [to_array(v) for v in sequence.sparse_tensor_values]
    if kind == SequenceProto.SEQUENCE:
        return [to_list(v) for v in sequence.sequence_values]
    if kind == SequenceProto.MAP:
        return [to_dict(v) for v in sequence.map_values]
    raise TypeError("The element type in the input sequence is not supported.")


_MAP_INT_KEYS = {T.INT8, T.INT16, T.INT32, T.INT64, T.UINT8, T.UINT16, T.UINT32, T.UINT64}


def from_dict(dict_: dict[Any, Any], name: Optional[str] = None) -> MapProto:
    """A MapProto of the dict (``onnx.numpy_helper.from_dict``): integer or string keys of one
    type, values of one type (stored as a sequence, see :func:`from_list`)."""
    from .helper import np_dtype_to_tensor_dtype as key_dtype

    result = MapProto()
    if name:
        result.name = name
    if not dict_:
        raise ValueError("Cannot convert an empty dictionary to MapProto.")
    keys = list(dict_)
    key_np_type = np.result_type(keys[0])
    key_type = key_dtype(key_np_type)
    if any(np.result_type(k) != key_np_type for k in keys):
        raise TypeError(
            "The key type in the input dictionary is not the same "
            "for all keys and therefore is not valid as a map."
        )
    values = list(dict_.values())
    value_np_type = np.result_type(values[0])
    if any(np.result_type(v) != value_np_type for v in values):
        raise TypeError(
            "The value type in the input dictionary is not the same "
            "for all values and therefore is not valid as a map."
        )
    seq = from_list(values)
    result.key_type = key_type
    if key_type == T.STRING:
        result.string_keys.extend(keys)
    elif key_type in _MAP_INT_KEYS:
        result.keys.extend(keys)
    else:
        raise TypeError(f"Unsupported map key type: {key_type}")
    result.values.CopyFrom(seq)
    return result


def to_dict(map_proto: MapProto) -> dict[Any, Any]:
    """The entries of a MapProto as a dict (``onnx.numpy_helper.to_dict``)."""
    map_proto = _message(map_proto, MapProto)
    keys = list(map_proto.string_keys if map_proto.key_type == T.STRING else map_proto.keys)
    values = to_list(map_proto.values)
    if len(keys) != len(values):
        raise IndexError(
            f"Length of keys and values for MapProto (map name: {map_proto.name}) are not the same."
        )
    return dict(zip(keys, values))


def from_optional(opt: Optional[Any], name: Optional[str] = None, dtype: Optional[int] = None) -> OptionalProto:
    """An OptionalProto of ``opt`` (``onnx.numpy_helper.from_optional``): None is empty (kind
    UNDEFINED unless ``dtype``, an ``OptionalProto.DataType``, says otherwise), dicts are maps,
    lists sequences, anything else a tensor."""
    result = OptionalProto()
    if name:
        result.name = name
    if dtype is not None:
        if dtype not in OptionalProto.DataType.values():
            raise TypeError(f"{dtype} must be a valid OptionalProto.DataType.")
        elem_type = dtype
    elif isinstance(opt, dict):
        elem_type = OptionalProto.MAP
    elif isinstance(opt, list):
        elem_type = OptionalProto.SEQUENCE
    elif opt is None:
        elem_type = OptionalProto.UNDEFINED
    else:
        elem_type = OptionalProto.TENSOR
    result.elem_type = elem_type
    if opt is None:
        return result
    if elem_type == OptionalProto.TENSOR:
        result.tensor_value.CopyFrom(from_array(opt))
    elif elem_type == OptionalProto.SEQUENCE:
        result.sequence_value.CopyFrom(from_list(opt))
    elif elem_type == OptionalProto.MAP:
        result.map_value.CopyFrom(from_dict(opt))
    else:
        raise TypeError(
            "The element type in the input is not a tensor, "
            "sequence, or map and is not supported."
        )
    return result


def to_optional(optional: OptionalProto) -> Optional[Any]:
    """The value of an OptionalProto, None when empty (``onnx.numpy_helper.to_optional``)."""
    optional = _message(optional, OptionalProto)
    kind = optional.elem_type
    if kind == OptionalProto.UNDEFINED:
        return None
    if kind == OptionalProto.TENSOR:
        return to_array(optional.tensor_value)
    if kind == OptionalProto.SPARSE_TENSOR:
        return to_array(optional.sparse_tensor_value)
    if kind == OptionalProto.SEQUENCE:
        return to_list(optional.sequence_value)
    if kind == OptionalProto.MAP:
        return to_dict(optional.map_value)
    if kind == OptionalProto.OPTIONAL:
        return to_optional(optional.optional_value)
    raise TypeError("The element type in the input optional is not supported.")


def tobytes_little_endian(array: np.ndarray) -> bytes:
    """The array's bytes in little-endian order (``onnx.numpy_helper.tobytes_little_endian``)."""
    order = array.dtype.byteorder
    if order == ">" or (order == "=" and sys.byteorder == "big"):
        array = array.astype(array.dtype.newbyteorder("<"))
    return array.tobytes()


_SUB_BYTE_INTS = (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2)


def saturate_cast(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` cast to ``dtype`` with values clamped to its finite range; integer targets round
    first (``onnx.numpy_helper.saturate_cast``)."""
    if np.issubdtype(dtype, np.integer) or dtype in _SUB_BYTE_INTS:
        info: Any = ml_dtypes.iinfo(dtype)
        x = np.round(x)
    else:
        info = ml_dtypes.finfo(dtype)
    return np.clip(x, info.min, info.max).astype(dtype)


def to_float8e8m0(x: np.ndarray, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """float32 values as float8e8m0 (``onnx.numpy_helper.to_float8e8m0``): the exponent of each
    value, rounded by ``round_mode`` ("up", "down" or "nearest"); NaN and infinity become NaN;
    with ``saturate`` rounding never goes past the largest finite value."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == 0xFF
    normal = ~special
    if round_mode == "nearest":
        guard = (bits & 0x400000) != 0
        rest = (bits & 0x3FFFFF) != 0
        up = guard & (rest | (exponent > 0)) & normal
    elif round_mode == "up":
        up = ((bits & 0x7FFFFF) != 0) & normal
    elif round_mode == "down":
        up = np.zeros(exponent.shape, dtype=bool)
    else:
        raise ValueError(f"Unsupported rounding mode: {round_mode}")
    if saturate:
        up &= exponent != 0xFE
    exponent = (exponent + up.astype(np.uint16)).astype(np.uint8)
    out = np.where(special, np.uint8(0xFF), exponent).astype(np.uint8)
    return out.view(ml_dtypes.float8_e8m0fnu)


_RANDOM_INT_TYPES = (np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64)


def create_random_int(input_shape: tuple[int], dtype: np.dtype, seed: int = 1) -> np.ndarray:
    """Random integers of ``dtype`` within int32's range, from ``np.random.seed(seed)``
    (``onnx.numpy_helper.create_random_int``)."""
    np.random.seed(seed)
    if dtype not in _RANDOM_INT_TYPES:
        raise TypeError(f"{dtype} is not supported by create_random_int.")
    i32 = np.iinfo(np.int32)
    high = min(np.iinfo(dtype).max, i32.max)
    low = max(np.iinfo(dtype).min, i32.min)
    return np.random.randint(low, high, size=input_shape).astype(dtype)
