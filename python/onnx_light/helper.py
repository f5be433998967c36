"""Builders of ONNX messages with ``onnx.helper``'s names, arguments and results.

``make_node``, ``make_graph``, ``make_model``, ``make_tensor``, ``make_tensor_value_info``,
``make_attribute``, ``make_opsetid``, ... build the same messages as the onnx package's
functions of the same name (the same bytes from ``SerializeToString``), as onnx_light classes.
Arguments that are messages may be onnx_light messages or the onnx package's (converted through
their bytes). ``printable_graph`` prints a graph as onnx's does. See docs/python.md.
"""

from __future__ import annotations

import collections.abc
import math
import numbers
from typing import Any, Optional, Sequence, Union

import ml_dtypes
import numpy as np

from . import numpy_helper as _nh
from ._native import (
    AttributeProto,
    FunctionProto,
    GraphProto,
    MapProto,
    ModelProto,
    NodeProto,
    OperatorSetIdProto,
    OptionalProto,
    SequenceProto,
    SparseTensorProto,
    TensorProto,
    TrainingInfoProto,
    TypeProto,
    ValueInfoProto,
)

#: The opset version ``make_model`` imports when given no ``opset_imports``: the latest of the
#: ONNX release whose onnx.proto the library follows (``onnx.defs.onnx_opset_version()`` there).
ONNX_OPSET_VERSION = 28
#: The IR version ``make_model`` writes (``onnx.IR_VERSION``).
IR_VERSION = 14

T = TensorProto
A = AttributeProto

Shape = Optional[Sequence[Union[str, int, None]]]


def _ours(value: Any, cls: type) -> Any:
    """``value`` as an onnx_light message of class ``cls``: itself, or a message of the onnx
    package (or any protobuf message of the same name) converted through its bytes."""
    if isinstance(value, cls):
        return value
    if type(value).__name__ == cls.__name__ and hasattr(value, "SerializeToString"):
        return cls.FromString(value.SerializeToString())
    raise TypeError(f"expected a {cls.__name__}, got {type(value).__name__}")


def _as_bytes(value: Union[str, bytes]) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


# ---- nodes, graphs, functions, models


def make_node(
    op_type: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    name: Optional[str] = None,
    doc_string: Optional[str] = None,
    domain: Optional[str] = None,
    overload: Optional[str] = None,
    **kwargs: Any,
) -> NodeProto:
    """A NodeProto; keyword arguments are its attributes (sorted by name, ``None`` skipped; see
    :func:`make_attribute` for the accepted values)."""
    node = NodeProto()
    node.op_type = op_type
    node.input.extend(inputs)
    node.output.extend(outputs)
    if name:
        node.name = name
    if doc_string:
        node.doc_string = doc_string
    if domain is not None:
        node.domain = domain
    if overload is not None:
        node.overload = overload
    node.attribute.extend(
        make_attribute(k, v) for k, v in sorted(kwargs.items()) if v is not None
    )
    return node


def make_opsetid(domain: str, version: int) -> OperatorSetIdProto:
    """An OperatorSetIdProto."""
    opset = OperatorSetIdProto()
    opset.domain = domain
    opset.version = version
    return opset


make_operatorsetid = make_opsetid


def make_graph(
    nodes: Sequence[NodeProto],
    name: str,
    inputs: Sequence[ValueInfoProto],
    outputs: Sequence[ValueInfoProto],
    initializer: Optional[Sequence[TensorProto]] = None,
    doc_string: Optional[str] = None,
    value_info: Optional[Sequence[ValueInfoProto]] = None,
    sparse_initializer: Optional[Sequence[SparseTensorProto]] = None,
) -> GraphProto:
    """A GraphProto holding copies of the given nodes, value infos and initializers."""
    graph = GraphProto()
    graph.node.extend(_ours(n, NodeProto) for n in nodes)
    graph.name = name
    graph.input.extend(_ours(v, ValueInfoProto) for v in inputs)
    graph.output.extend(_ours(v, ValueInfoProto) for v in outputs)
    graph.initializer.extend(_ours(t, TensorProto) for t in initializer or ())
    graph.sparse_initializer.extend(_ours(t, SparseTensorProto) for t in sparse_initializer or ())
    graph.value_info.extend(_ours(v, ValueInfoProto) for v in value_info or ())
    if doc_string:
        graph.doc_string = doc_string
    return graph


def make_function(
    domain: str,
    fname: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    nodes: Sequence[NodeProto],
    opset_imports: Sequence[OperatorSetIdProto],
    attributes: Optional[Sequence[str]] = None,
    attribute_protos: Optional[Sequence[AttributeProto]] = None,
    doc_string: Optional[str] = None,
    overload: Optional[str] = None,
    value_info: Optional[Sequence[ValueInfoProto]] = None,
) -> FunctionProto:
    """A FunctionProto."""
    f = FunctionProto()
    f.domain = domain
    f.name = fname
    f.input.extend(inputs)
    f.output.extend(outputs)
    f.node.extend(_ours(n, NodeProto) for n in nodes)
    f.opset_import.extend(_ours(o, OperatorSetIdProto) for o in opset_imports)
    f.attribute.extend(attributes or ())
    f.attribute_proto.extend(_ours(a, AttributeProto) for a in attribute_protos or ())
    if doc_string:
        f.doc_string = doc_string
    if overload is not None:
        f.overload = overload
    f.value_info.extend(_ours(v, ValueInfoProto) for v in value_info or ())
    return f


def make_model(graph: GraphProto, **kwargs: Any) -> ModelProto:
    """A ModelProto of ``graph`` (copied) with ``ir_version`` :data:`IR_VERSION`, the given
    ``opset_imports`` (default: the ONNX domain at :data:`ONNX_OPSET_VERSION`) and
    ``functions``; any other keyword sets the field of that name (``producer_name=...``)."""
    model = ModelProto()
    model.ir_version = IR_VERSION
    model.graph.CopyFrom(_ours(graph, GraphProto))
    opset_imports = kwargs.pop("opset_imports", None)
    if opset_imports is None:
        model.opset_import.add().version = ONNX_OPSET_VERSION
    else:
        model.opset_import.extend(_ours(o, OperatorSetIdProto) for o in opset_imports)
    functions = kwargs.pop("functions", None)
    if functions is not None:
        model.functions.extend(_ours(f, FunctionProto) for f in functions)
    for k, v in kwargs.items():
        setattr(model, k, v)
    return model


VersionRowType = Union[tuple[str, int, int, int], tuple[str, int, int, int, int]]
VersionTableType = list[VersionRowType]
VersionMapType = dict[tuple[str, int], int]
AssignmentBindingType = list[tuple[str, str]]

#: onnx's releases (``onnx.helper.VERSION_TABLE``): release, IR version, ai.onnx opset,
#: ai.onnx.ml opset and (from 1.7.0) ai.onnx.training opset.
VERSION_TABLE: VersionTableType = [
    ("1.0", 3, 1, 1),
    ("1.1", 3, 5, 1),
    ("1.1.2", 3, 6, 1),
    ("1.2", 3, 7, 1),
    ("1.3", 3, 8, 1),
    ("1.4.1", 4, 9, 1),
    ("1.5.0", 5, 10, 1),
    ("1.6.0", 6, 11, 2),
    ("1.7.0", 7, 12, 2, 1),
    ("1.8.0", 7, 13, 2, 1),
    ("1.8.1", 7, 13, 2, 1),
    ("1.9.0", 7, 14, 2, 1),
    ("1.10.0", 8, 15, 2, 1),
    ("1.10.1", 8, 15, 2, 1),
    ("1.10.2", 8, 15, 2, 1),
    ("1.11.0", 8, 16, 3, 1),
    ("1.12.0", 8, 17, 3, 1),
    ("1.13.0", 8, 18, 3, 1),
    ("1.13.1", 8, 18, 3, 1),
    ("1.14.0", 9, 19, 3, 1),
    ("1.14.1", 9, 19, 3, 1),
    ("1.15.0", 9, 20, 4, 1),
    ("1.16.0", 10, 21, 5, 1),
    ("1.16.1", 10, 21, 5, 1),
    ("1.16.2", 10, 21, 5, 1),
    ("1.17.0", 10, 22, 5, 1),
    ("1.18.0", 11, 23, 5, 1),
    ("1.19.0", 12, 24, 5, 1),
    ("1.19.1", 12, 24, 5, 1),
    ("1.20.0", 13, 25, 5, 1),
    ("1.20.1", 13, 25, 5, 1),
    ("1.21.0", 13, 26, 5, 1),
    ("1.22.0", 13, 27, 5, 1),
    ("1.23.0", 14, 28, 5, 1),
]


def _op_set_id_version_map(table: VersionTableType) -> VersionMapType:
    """(domain, opset version) -> the first IR version released with it; the preview domains
    follow ai.onnx and ai.onnx.training."""
    result: VersionMapType = {}
    for row in table:
        ir_version = row[1]
        for key in zip(("ai.onnx", "ai.onnx.ml", "ai.onnx.training"), row[2:]):
            if key in result:
                continue
            result[key] = ir_version
            if key[0] == "ai.onnx":
                result["ai.onnx.preview", key[1]] = ir_version
            elif key[0] == "ai.onnx.training":
                result["ai.onnx.preview.training", key[1]] = ir_version
    return result


#: (domain, opset version) -> minimum IR version (``onnx.helper.OP_SET_ID_VERSION_MAP``).
OP_SET_ID_VERSION_MAP = _op_set_id_version_map(VERSION_TABLE)


def find_min_ir_version_for(opsetidlist: Sequence[OperatorSetIdProto], ignore_unknown: bool = False) -> int:
    """The lowest IR version that supports every opset of ``opsetidlist`` (3 for none); an
    unknown (domain, version) raises ValueError, or counts as 3 with ``ignore_unknown``."""
    def one(domain: Optional[str], version: int) -> int:
        key = (domain or "ai.onnx", version)
        if key in OP_SET_ID_VERSION_MAP:
            return OP_SET_ID_VERSION_MAP[key]
        if ignore_unknown:
            return 3
        raise ValueError("Unsupported opset-version.")

    if not opsetidlist:
        return 3
    return max(one(o.domain, o.version) for o in opsetidlist)


def make_model_gen_version(graph: GraphProto, **kwargs: Any) -> ModelProto:
    """:func:`make_model` with ``ir_version`` (unless given) the lowest one supporting the
    ``opset_imports`` (see :func:`find_min_ir_version_for`)."""
    if "ir_version" not in kwargs:
        kwargs["ir_version"] = find_min_ir_version_for(kwargs.get("opset_imports", []))
    return make_model(graph, **kwargs)


def set_metadata_props(proto: Any, dict_value: dict) -> None:
    """Replaces the ``metadata_props`` of ``proto`` by the entries of ``dict_value``."""
    del proto.metadata_props[:]
    for k, v in dict_value.items():
        entry = proto.metadata_props.add()
        entry.key = k
        entry.value = v


def set_model_props(model: ModelProto, dict_value: dict) -> None:
    """Replaces the ``metadata_props`` of ``model``."""
    set_metadata_props(model, dict_value)


def make_training_info(
    algorithm: GraphProto,
    algorithm_bindings: Sequence[tuple],
    initialization: Optional[GraphProto],
    initialization_bindings: Optional[Sequence[tuple]],
) -> TrainingInfoProto:
    """A TrainingInfoProto (bindings are ``(key, value)`` pairs)."""
    info = TrainingInfoProto()
    info.algorithm.CopyFrom(_ours(algorithm, GraphProto))
    for k, v in algorithm_bindings:
        info.update_binding.add(key=k, value=v)
    if initialization:
        info.initialization.CopyFrom(_ours(initialization, GraphProto))
    for k, v in initialization_bindings or ():
        info.initialization_binding.add(key=k, value=v)
    return info


# ---- tensors

_FLOAT8 = {T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ}
# Bits per element of the packed types (the others: the NumPy item size).
_PACKED_BITS = {
    T.INT4: 4, T.UINT4: 4, T.FLOAT4E2M1: 4, T.INT2: 2, T.UINT2: 2,
    T.FLOAT6E2M3: 6, T.FLOAT6E3M2: 6,
}
# The field a data type's values go to when not in raw_data (onnx.proto's comments).
_FIELDS = {
    T.FLOAT: "float_data", T.COMPLEX64: "float_data",
    T.DOUBLE: "double_data", T.COMPLEX128: "double_data",
    T.INT64: "int64_data", T.UINT32: "uint64_data", T.UINT64: "uint64_data",
    T.STRING: "string_data",
}


def tensor_dtype_to_np_dtype(tensor_dtype: int) -> np.dtype:
    """The NumPy dtype of an ONNX data type."""
    return _nh.tensor_dtype_to_np_dtype(tensor_dtype)


def np_dtype_to_tensor_dtype(np_dtype: Any) -> int:
    """The ONNX data type of a NumPy dtype (str and object arrays are STRING)."""
    dtype = np.dtype(np_dtype)
    if dtype == object or np.issubdtype(dtype, np.str_):
        return T.STRING
    try:
        return _nh.np_dtype_to_tensor_dtype(dtype)
    except ValueError:
        raise ValueError(f"Unable to convert type {dtype!r} into TensorProto element type.") from None


_STORAGE_TYPES = {
    "float_data": T.FLOAT, "int32_data": T.INT32, "int64_data": T.INT64, "double_data": T.DOUBLE,
    "uint64_data": T.UINT64, "string_data": T.STRING,
}


def tensor_dtype_to_storage_tensor_dtype(tensor_dtype: int) -> int:
    """The data type whose field stores values of ``tensor_dtype`` outside ``raw_data`` (INT32
    for the 8- and 16-bit and smaller types, FLOAT for COMPLEX64, ...); KeyError if unknown."""
    return _STORAGE_TYPES[_nh._TYPES[tensor_dtype][1]]


def get_all_tensor_dtypes() -> Any:
    """Every data type with a NumPy dtype (a keys view, in onnx's order)."""
    return _nh._TYPES.keys()


def tensor_dtype_to_field(tensor_dtype: int) -> str:
    """The field of TensorProto holding values of ``tensor_dtype`` outside ``raw_data``."""
    tensor_dtype_to_np_dtype(tensor_dtype)  # unknown types raise
    return _FIELDS.get(tensor_dtype, "int32_data")


def tensor_dtype_to_string(tensor_dtype: int) -> str:
    """``TensorProto.<NAME>`` of a data type."""
    tensor_dtype_to_np_dtype(tensor_dtype)  # unknown types (UNDEFINED too) raise KeyError
    return f"TensorProto.{T.DataType.Name(tensor_dtype)}"


def _saturate(values: Any, dtype: np.dtype) -> np.ndarray:
    """Values cast to a float8 type, clamped to its finite range (NaN stays NaN)."""
    info = ml_dtypes.finfo(dtype)
    return np.clip(np.asarray(values), info.min, info.max).astype(dtype)


def _to_e8m0(values: Any) -> np.ndarray:
    """FLOAT8E8M0 codes: the float32 exponent, rounded up when a fraction is left (never past
    254), 255 for NaN and infinities; the sign is dropped."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == 0xFF
    up = ((bits & 0x7FFFFF) != 0) & ~special & (exponent != 0xFE)
    out = (exponent + up).astype(np.uint8)
    out[special] = 0xFF
    return out.view(ml_dtypes.float8_e8m0fnu)


def _packed(values: np.ndarray, data_type: int) -> np.ndarray:
    bits = _PACKED_BITS[data_type]
    if bits == 6:
        return _nh._pack_6bit(values)
    return _nh._pack(values, bits)


def make_tensor(
    name: str,
    data_type: int,
    dims: Sequence[int],
    vals: Any,
    raw: bool = False,
) -> TensorProto:
    """A TensorProto of ``data_type`` and shape ``dims``. With ``raw``, ``vals`` are the bytes of
    ``raw_data`` (or an array whose bytes are taken, packed for sub-byte types); otherwise values
    converted to the type and stored in its field (``float_data``, ``int32_data``, ...; float8
    types saturate, FLOAT8E8M0 rounds up, sub-byte types are packed)."""
    tensor = TensorProto()
    tensor.data_type = data_type
    tensor.name = name
    tensor.dims.extend(dims)
    if data_type == T.STRING and raw:
        raise TypeError("Can not use raw_data to store string type.")
    dtype = tensor_dtype_to_np_dtype(data_type)
    count = math.prod(dims)
    if raw:
        bits = _PACKED_BITS.get(data_type, dtype.itemsize * 8)
        expected = -(-count * bits // 8)
        if isinstance(vals, np.ndarray):
            if data_type in _PACKED_BITS:
                vals = _packed(vals, data_type)
            elif vals.dtype.byteorder == ">":
                vals = vals.astype(vals.dtype.newbyteorder("<"))
            data = np.ascontiguousarray(vals).tobytes()
        elif isinstance(vals, bytes):
            data = vals
        else:
            raise TypeError(f"Raw data must be bytes or numpy.ndarray, but got {type(vals)}.")
        if len(data) != expected:
            raise ValueError(
                f"Raw data size does not match tensor's size. Expected {expected} bytes, "
                f"but got {len(data)} bytes."
            )
        tensor.raw_data = data
        return tensor

    if data_type == T.STRING:
        values = np.array(vals).flatten()
        if len(values):
            values = [_as_bytes(v) for v in values.tolist()]
    elif data_type in _FLOAT8:
        values = _saturate(vals, dtype).flatten()
    elif data_type == T.FLOAT8E8M0:
        values = _to_e8m0(vals).flatten()
    elif data_type in (T.FLOAT6E2M3, T.FLOAT6E3M2):
        values = np.asarray(vals, dtype=dtype).flatten().view(np.uint8)
    else:
        values = np.asarray(vals, dtype=dtype).flatten()
    if len(values) != count:
        raise ValueError(
            f"Number of values ({len(values)}) does not match tensor dimensions requiring "
            f"{count} elements."
        )
    if data_type in (T.COMPLEX64, T.COMPLEX128):
        values = values.view(np.float32 if data_type == T.COMPLEX64 else np.float64)
    elif data_type in (T.FLOAT16, T.BFLOAT16):
        values = values.view(np.uint16)
    elif data_type in _FLOAT8 or data_type == T.FLOAT8E8M0:
        values = values.view(np.uint8)
    elif data_type in _PACKED_BITS and _PACKED_BITS[data_type] != 6:
        values = _packed(values, data_type)
    elif data_type == T.BOOL:
        values = values.astype(np.uint8)
    getattr(tensor, tensor_dtype_to_field(data_type)).extend(values)
    return tensor


def make_sparse_tensor(
    values: TensorProto, indices: TensorProto, dims: Sequence[int]
) -> SparseTensorProto:
    """A SparseTensorProto of (copies of) ``values`` and ``indices`` with shape ``dims``."""
    sparse = SparseTensorProto()
    sparse.values.CopyFrom(_ours(values, TensorProto))
    sparse.indices.CopyFrom(_ours(indices, TensorProto))
    sparse.dims.extend(dims)
    return sparse


def make_sequence(name: str, elem_type: int, values: Sequence[Any]) -> SequenceProto:
    """A SequenceProto of ``values`` (tensors, sparse tensors, sequences, maps or optionals as
    ``elem_type`` says)."""
    seq = SequenceProto()
    seq.name = name
    seq.elem_type = elem_type
    if elem_type == SequenceProto.UNDEFINED:
        return seq
    fields = {
        SequenceProto.TENSOR: ("tensor_values", TensorProto),
        SequenceProto.SPARSE_TENSOR: ("sparse_tensor_values", SparseTensorProto),
        SequenceProto.SEQUENCE: ("sequence_values", SequenceProto),
        SequenceProto.MAP: ("map_values", MapProto),
        SequenceProto.OPTIONAL: ("optional_values", OptionalProto),
    }
    if elem_type not in fields:
        raise TypeError("The element type in the input sequence is not supported.")
    field, cls = fields[elem_type]
    getattr(seq, field).extend(_ours(v, cls) for v in values)
    return seq


def make_map(name: str, key_type: int, keys: list, values: SequenceProto) -> MapProto:
    """A MapProto: ``keys`` (strings for STRING, integers for the integer types) and the
    sequence of their values."""
    m = MapProto()
    m.name = name
    m.key_type = key_type
    if key_type == T.STRING:
        m.string_keys.extend(_as_bytes(k) for k in keys)
    elif key_type in (T.INT8, T.INT16, T.INT32, T.INT64, T.UINT8, T.UINT16, T.UINT32, T.UINT64):
        m.keys.extend(keys)
    m.values.CopyFrom(_ours(values, SequenceProto))
    return m


def make_optional(name: str, elem_type: int, value: Any) -> OptionalProto:
    """An OptionalProto holding ``value`` (of the kind ``elem_type`` says)."""
    opt = OptionalProto()
    opt.name = name
    opt.elem_type = elem_type
    if elem_type == OptionalProto.UNDEFINED:
        return opt
    fields = {
        OptionalProto.TENSOR: ("tensor_value", TensorProto),
        OptionalProto.SPARSE_TENSOR: ("sparse_tensor_value", SparseTensorProto),
        OptionalProto.SEQUENCE: ("sequence_value", SequenceProto),
        OptionalProto.MAP: ("map_value", MapProto),
        OptionalProto.OPTIONAL: ("optional_value", OptionalProto),
    }
    if elem_type not in fields:
        raise TypeError("The element type in the input optional is not supported.")
    if value is None:
        raise ValueError("an optional of a type needs a value")
    field, cls = fields[elem_type]
    getattr(opt, field).CopyFrom(_ours(value, cls))
    return opt


# ---- attributes

_ATTR_NAMES = {v: k for k, v in A.AttributeType.items()}
# (element class, list type) in the order the element type of a list is decided.
_LIST_KINDS = (
    (numbers.Integral, A.INTS),
    (numbers.Real, A.FLOATS),
    ((str, bytes), A.STRINGS),
    (TensorProto, A.TENSORS),
    (SparseTensorProto, A.SPARSE_TENSORS),
    (GraphProto, A.GRAPHS),
    (TypeProto, A.TYPE_PROTOS),
)
_LIST_FIELDS = {
    A.INTS: "ints", A.FLOATS: "floats", A.STRINGS: "strings", A.TENSORS: "tensors",
    A.SPARSE_TENSORS: "sparse_tensors", A.GRAPHS: "graphs", A.TYPE_PROTOS: "type_protos",
}
_MESSAGE_KINDS = (
    (TensorProto, "t", A.TENSOR),
    (SparseTensorProto, "sparse_tensor", A.SPARSE_TENSOR),
    (GraphProto, "g", A.GRAPH),
    (TypeProto, "tp", A.TYPE_PROTO),
)


def _message_kind(value: Any) -> Optional[tuple]:
    """(field, type, class) when ``value`` is a TensorProto, SparseTensorProto, GraphProto or
    TypeProto (of onnx_light or of the onnx package)."""
    for cls, field, kind in _MESSAGE_KINDS:
        if isinstance(value, cls) or (
            type(value).__name__ == cls.__name__ and hasattr(value, "SerializeToString")
        ):
            return field, kind, cls
    return None


def _attr_type_name(t: int) -> str:
    return _ATTR_NAMES.get(t, "UNDEFINED")


def make_attribute(
    key: str,
    value: Any,
    doc_string: Optional[str] = None,
    attr_type: Optional[int] = None,
) -> AttributeProto:
    """An AttributeProto whose type follows the value: int (INT), float (FLOAT), str or bytes
    (STRING, UTF-8), a TensorProto, SparseTensorProto, GraphProto or TypeProto, or an iterable
    of one of these (the list types; ``attr_type`` is needed for an empty one, and is checked
    against the type found otherwise)."""
    attr = AttributeProto()
    attr.name = key
    if doc_string:
        attr.doc_string = doc_string
    kind = _message_kind(value)
    if isinstance(value, numbers.Integral):
        attr.i = int(value)
        attr.type = A.INT
    elif isinstance(value, numbers.Real):
        attr.f = float(value)
        attr.type = A.FLOAT
    elif isinstance(value, (str, bytes)):
        attr.s = _as_bytes(value)
        attr.type = A.STRING
    elif kind is not None:
        field, t, cls = kind
        getattr(attr, field).CopyFrom(_ours(value, cls))
        attr.type = t
    elif isinstance(value, collections.abc.Iterable):
        value = list(value)
        if not value and attr_type is None:
            raise ValueError(f"Could not infer attribute `{key}` type from empty iterator")
        if attr_type is None:
            for classes, list_type in _LIST_KINDS:
                if all(
                    isinstance(v, classes)
                    or (
                        not isinstance(classes, tuple)
                        and type(v).__name__ == classes.__name__
                        and hasattr(v, "SerializeToString")
                    )
                    for v in value
                ):
                    attr_type = list_type
                    break
            else:
                raise ValueError(
                    "Could not infer the attribute type from the elements of the passed "
                    "Iterable value."
                )
        if attr_type not in _LIST_FIELDS:
            raise TypeError(
                f"Inferred attribute type '{_attr_type_name(A.UNDEFINED)}'({A.UNDEFINED}) "
                f"mismatched with specified type '{_attr_type_name(attr_type)}'({attr_type})"
            )
        target = getattr(attr, _LIST_FIELDS[attr_type])
        if attr_type == A.STRINGS:
            target.extend(_as_bytes(v) for v in value)
        elif attr_type in (A.INTS, A.FLOATS):
            target.extend(value)
        else:
            cls = {A.TENSORS: TensorProto, A.SPARSE_TENSORS: SparseTensorProto,
                   A.GRAPHS: GraphProto, A.TYPE_PROTOS: TypeProto}[attr_type]
            target.extend(_ours(v, cls) for v in value)
        attr.type = attr_type
    else:
        raise TypeError(f"'{value}' is not an accepted attribute value.")
    if attr_type is not None and attr.type != attr_type:
        raise TypeError(
            f"Inferred attribute type '{_attr_type_name(attr.type)}'({attr.type}) mismatched "
            f"with specified type '{_attr_type_name(attr_type)}'({attr_type})"
        )
    return attr


def make_attribute_ref(
    name: str,
    attr_type: int,
    doc_string: Optional[str] = None,
    *,
    ref_attr_name: Optional[str] = None,
) -> AttributeProto:
    """An AttributeProto referring to the attribute ``ref_attr_name`` (default: ``name``) of the
    function it is used in."""
    if ref_attr_name is None:
        ref_attr_name = name
    if not ref_attr_name:
        raise ValueError("ref_attr_name must be non-empty")
    attr = AttributeProto()
    attr.name = name
    attr.type = attr_type
    attr.ref_attr_name = ref_attr_name
    if doc_string:
        attr.doc_string = doc_string
    return attr


def get_attribute_value(attr: AttributeProto) -> Any:
    """The value of an attribute by its type: a scalar, bytes, a message, or a list."""
    if attr.ref_attr_name:
        raise ValueError(f"Cannot get value of reference attribute: {attr}")
    t = attr.type
    single = {A.FLOAT: "f", A.INT: "i", A.STRING: "s", A.TENSOR: "t",
              A.SPARSE_TENSOR: "sparse_tensor", A.GRAPH: "g", A.TYPE_PROTO: "tp"}
    if t in single:
        return getattr(attr, single[t])
    if t in _LIST_FIELDS:
        return list(getattr(attr, _LIST_FIELDS[t]))
    if t == A.UNDEFINED:
        return None
    raise ValueError(f"Unsupported ONNX attribute: {attr}")


def get_node_attr_value(node: NodeProto, attr_name: str) -> Any:
    """The value of the node's one attribute named ``attr_name``."""
    matching = [a for a in node.attribute if a.name == attr_name]
    if len(matching) > 1:
        raise ValueError(f"Node has multiple attributes with name {attr_name}")
    if not matching:
        raise ValueError(f"Node has no attribute with name {attr_name}")
    return get_attribute_value(matching[0])


# ---- types and value infos


def _fill_shape(shape_proto: Any, shape: Shape, denotation: Optional[list]) -> None:
    if shape is None:
        return
    # An explicitly empty shape is present (a scalar), unlike no shape at all: extending the
    # (empty) list of dimensions sets it.
    shape_proto.dim.extend([])
    if denotation and len(denotation) != len(shape):
        raise ValueError("Invalid shape_denotation. Must be of the same length as shape.")
    for i, d in enumerate(shape):
        dim = shape_proto.dim.add()
        if d is None:
            pass
        elif isinstance(d, int):
            dim.dim_value = d
        elif isinstance(d, str):
            dim.dim_param = d
        else:
            raise ValueError(f"Invalid item in shape: {d}. Needs to be of int or str.")
        if denotation:
            dim.denotation = denotation[i]


def make_tensor_type_proto(
    elem_type: int, shape: Shape, shape_denotation: Optional[list] = None
) -> TypeProto:
    """A tensor TypeProto: element type and shape (ints, names for symbolic dimensions, None
    for unknown ones; ``shape=None``: no shape, ``[]``: a scalar)."""
    tp = TypeProto()
    tp.tensor_type.elem_type = elem_type
    _fill_shape(tp.tensor_type.shape, shape, shape_denotation)
    return tp


def make_sparse_tensor_type_proto(
    elem_type: int, shape: Shape, shape_denotation: Optional[list] = None
) -> TypeProto:
    """A sparse tensor TypeProto (as :func:`make_tensor_type_proto`)."""
    tp = TypeProto()
    tp.sparse_tensor_type.elem_type = elem_type
    _fill_shape(tp.sparse_tensor_type.shape, shape, shape_denotation)
    return tp


def make_sequence_type_proto(inner_type_proto: TypeProto) -> TypeProto:
    """A sequence TypeProto of elements of ``inner_type_proto``."""
    tp = TypeProto()
    tp.sequence_type.elem_type.CopyFrom(_ours(inner_type_proto, TypeProto))
    return tp


def make_optional_type_proto(inner_type_proto: TypeProto) -> TypeProto:
    """An optional TypeProto of ``inner_type_proto``."""
    tp = TypeProto()
    tp.optional_type.elem_type.CopyFrom(_ours(inner_type_proto, TypeProto))
    return tp


def make_map_type_proto(key_type: int, value_type: TypeProto) -> TypeProto:
    """A map TypeProto."""
    tp = TypeProto()
    tp.map_type.key_type = key_type
    tp.map_type.value_type.CopyFrom(_ours(value_type, TypeProto))
    return tp


def make_value_info(name: str, type_proto: TypeProto, doc_string: str = "") -> ValueInfoProto:
    """A ValueInfoProto of the given type."""
    vi = ValueInfoProto()
    vi.name = name
    if doc_string:
        vi.doc_string = doc_string
    vi.type.CopyFrom(_ours(type_proto, TypeProto))
    return vi


def make_empty_tensor_value_info(name: str) -> ValueInfoProto:
    """A ValueInfoProto with a name only."""
    vi = ValueInfoProto()
    vi.name = name
    return vi


def make_tensor_value_info(
    name: str,
    elem_type: int,
    shape: Shape,
    doc_string: str = "",
    shape_denotation: Optional[list] = None,
) -> ValueInfoProto:
    """A ValueInfoProto of a tensor type (see :func:`make_tensor_type_proto`)."""
    return make_value_info(name, make_tensor_type_proto(elem_type, shape, shape_denotation),
                           doc_string)


def make_sparse_tensor_value_info(
    name: str,
    elem_type: int,
    shape: Shape,
    doc_string: str = "",
    shape_denotation: Optional[list] = None,
) -> ValueInfoProto:
    """A ValueInfoProto of a sparse tensor type."""
    return make_value_info(
        name, make_sparse_tensor_type_proto(elem_type, shape, shape_denotation), doc_string
    )


def make_tensor_sequence_value_info(
    name: str,
    elem_type: int,
    shape: Shape,
    doc_string: str = "",
    elem_shape_denotation: Optional[list] = None,
) -> ValueInfoProto:
    """A ValueInfoProto of a sequence of tensors."""
    inner = make_tensor_type_proto(elem_type, shape, elem_shape_denotation)
    return make_value_info(name, make_sequence_type_proto(inner), doc_string)


def strip_doc_string(proto: Any) -> None:
    """Clears every ``doc_string`` of ``proto`` and of the messages inside it."""
    for field in proto.DESCRIPTOR.fields:
        if field.name == "doc_string":
            proto.ClearField("doc_string")
        elif field.type == field.TYPE_MESSAGE:
            if field.label == field.LABEL_REPEATED:
                for x in getattr(proto, field.name):
                    strip_doc_string(x)
            elif proto.HasField(field.name):
                strip_doc_string(getattr(proto, field.name))


# ---- printing (onnx.helper's printable_* format)


def _short(s: Union[str, bytes]) -> str:
    text = s.decode("utf-8", errors="ignore") if isinstance(s, bytes) else str(s)
    return text if len(text) < 64 else text[:64] + f"...<+len={len(text) - 64}>"


def _float(f: float) -> str:
    return f"{f:.15g}"


def _bracketed(items: Any) -> str:
    """``[ a, b, c ]``."""
    return "[ " + ", ".join(items) + " ]"


def printable_attribute(attr: AttributeProto, subgraphs: bool = False) -> Any:
    """``name = value`` of an attribute; with ``subgraphs``, also the graphs it holds."""
    graphs: list = []
    if attr.HasField("f"):
        value = _float(attr.f)
    elif attr.HasField("i"):
        value = str(attr.i)
    elif attr.HasField("s"):
        value = repr(_short(attr.s))
    elif attr.HasField("t"):
        if len(attr.t.dims):
            value = "<Tensor>"
        else:
            field = tensor_dtype_to_field(attr.t.data_type)
            value = f"<Scalar Tensor {getattr(attr.t, field)}>"
    elif attr.HasField("g"):
        value = f"<graph {attr.g.name}>"
        graphs.append(attr.g)
    elif attr.HasField("tp"):
        value = f"<Type Proto {attr.tp}>"
    elif attr.HasField("sparse_tensor"):
        value = "<Sparse Tensor>"
    elif attr.floats:
        value = "[" + ", ".join(_float(f) for f in attr.floats) + "]"
    elif attr.ints:
        value = "[" + ", ".join(str(i) for i in attr.ints) + "]"
    elif attr.strings:
        value = str([_short(s) for s in attr.strings])
    elif attr.tensors:
        value = "[<Tensor>, ...]"
    elif attr.sparse_tensors:
        value = "[<Sparse Tensor>, ...]"
    elif attr.type_protos:
        value = _bracketed(f"<Type Proto {tp}>" for tp in attr.type_protos)
    elif attr.graphs:
        value = _bracketed(f"<graph {g.name}>" for g in attr.graphs)
        graphs.extend(attr.graphs)
    else:
        value = "<Unknown>"
    text = f"{attr.name} = {value}"
    return (text, graphs) if subgraphs else text


def printable_dim(dim: Any) -> str:
    """A dimension: its value, its name, or ``?``."""
    which = dim.WhichOneof("value")
    return "?" if which is None else str(getattr(dim, which))


def printable_type(t: TypeProto) -> str:
    """A tensor type as ``FLOAT, 1x3x?`` (``scalar`` for an empty shape)."""
    which = t.WhichOneof("value")
    if which == "tensor_type":
        s = T.DataType.Name(t.tensor_type.elem_type)
        if t.tensor_type.HasField("shape"):
            dims = t.tensor_type.shape.dim
            s += ", " + "x".join(printable_dim(d) for d in dims) if len(dims) else ", scalar"
        return s
    return "" if which is None else f"Unknown type {which}"


def printable_value_info(v: ValueInfoProto) -> str:
    """``%name[type]``."""
    s = f"%{v.name}"
    if v.type:
        s = f"{s}[{printable_type(v.type)}]"
    return s


def printable_tensor_proto(t: TensorProto) -> str:
    """``%name[TYPE, dims]``."""
    shape = ", " + "x".join(str(d) for d in t.dims) if len(t.dims) else ", scalar"
    return f"%{t.name}[{T.DataType.Name(t.data_type)}{shape}]"


def printable_node(node: NodeProto, prefix: str = "", subgraphs: bool = False) -> Any:
    """``%out = Op[attributes](%in, ...)``; with ``subgraphs``, also the graphs its attributes
    hold."""
    parts = []
    if len(node.output):
        parts += [", ".join(f"%{o}" for o in node.output), "="]
    graphs: list = []
    attrs = []
    for a in node.attribute:
        text, gs = printable_attribute(a, subgraphs=True)
        attrs.append(text)
        graphs.extend(gs)
    inputs = ", ".join(f"%{i}" for i in node.input)
    if len(node.attribute):
        parts.append(f"{node.op_type}[{', '.join(sorted(attrs))}]({inputs})")
    else:
        parts.append(f"{node.op_type}({inputs})")
    text = prefix + " ".join(parts)
    return (text, graphs) if subgraphs else text


def printable_graph(graph: GraphProto, prefix: str = "") -> str:
    """A graph as text, as ``onnx.helper.printable_graph`` prints it: inputs (those with an
    initializer apart), initializers without an input, the nodes, the outputs, then every
    subgraph."""
    lines = []
    header = ["graph", graph.name]
    initializers = {t.name for t in graph.initializer}
    if len(graph.input):
        header.append("(")
        plain = [printable_value_info(i) for i in graph.input if i.name not in initializers]
        with_init = [printable_value_info(i) for i in graph.input if i.name in initializers]
        if plain:
            lines.append(prefix + " ".join(header))
            lines += [prefix + "  " + s for s in plain]
            header = []
        header.append(")")
        if with_init:
            header.append("optional inputs with matching initializers (")
            lines.append(prefix + " ".join(header))
            lines += [prefix + "  " + s for s in with_init]
            header = [")"]
        if len(with_init) < len(initializers):
            inputs = {i.name for i in graph.input}
            header.append("initializers (")
            lines.append(prefix + " ".join(header))
            lines += [prefix + "  " + printable_tensor_proto(t)
                      for t in graph.initializer if t.name not in inputs]
            header = [")"]
    header.append("{")
    lines.append(prefix + " ".join(header))
    graphs: list = []
    for node in graph.node:
        text, gs = printable_node(node, prefix + "  ", subgraphs=True)
        lines.append(text)
        graphs.extend(gs)
    tail = ["return"]
    if len(graph.output):
        tail.append(", ".join(f"%{o.name}" for o in graph.output))
    lines.append(prefix + "  " + " ".join(tail))
    lines.append(prefix + "}")
    lines += ["\n" + printable_graph(g) for g in graphs]
    return "\n".join(lines)
