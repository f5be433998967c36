"""onnx_light: load and save ONNX models fast, without protobuf.

Messages are views into a Rust model (nothing is copied into Python objects at load); tensors
give zero-copy NumPy arrays (``numpy_helper.to_array``); load, save, serialize and conversions run
without the GIL. Names follow the ``onnx`` package: ``load``, ``save``, ``ModelProto``,
``TensorProto.FLOAT``, ``numpy_helper``. See docs/python.md.
"""

from __future__ import annotations

import os
from typing import IO, Any, Optional, Union

from . import _native
from ._native import (  # noqa: F401
    AttributeProto,
    DecodeError,
    DeviceConfigurationProto,
    EncryptionError,
    EnumTypeWrapper,
    ExternalDataError,
    FunctionProto,
    GraphProto,
    IntIntListEntryProto,
    InvalidArgumentError,
    LimitExceededError,
    MapProto,
    Message,
    ModelProto,
    NodeDeviceConfigurationProto,
    NodeProto,
    OperatorSetIdProto,
    OptionalProto,
    ParamsError,
    PathRefusedError,
    RepeatedCompositeContainer,
    RepeatedScalarContainer,
    SequenceProto,
    ShardedDimProto,
    ShardingSpecProto,
    SimpleShardedDimProto,
    SparseTensorProto,
    StringStringEntryProto,
    TensorAnnotation,
    TensorProto,
    TensorShapeProto,
    TrainingInfoProto,
    TypeProto,
    UnsupportedError,
    ValueInfoProto,
    WrongKeyError,
)

__version__ = "0.1.0"

PathLike = Union[str, "os.PathLike[str]"]


def _key_bytes(key: Any) -> Optional[bytes]:
    if key is None:
        return None
    if isinstance(key, str):
        return key.encode("utf-8")
    return bytes(key)


def load(
    f: Union[PathLike, bytes, IO[bytes]],
    *,
    load_external_data: bool = True,
    base_dir: Optional[PathLike] = None,
    no_copy: bool = False,
    num_threads: Optional[int] = None,
    key: Any = None,
) -> ModelProto:
    """Loads a model from a path, bytes, or a binary file object (``onnx.load``).

    Args:
        f: a path, the model's bytes, or a file object opened for binary reading.
        load_external_data: read the tensors stored in external files (resolved against
            ``base_dir``, else the model's directory).
        base_dir: directory of the external data.
        no_copy: tensors borrow from a memory map of the file (or from the ``bytes`` object)
            instead of being copied; the map stays alive while any tensor or array uses it.
        num_threads: threads for copying and parsing (default: all cores).
        key: passphrase (str or bytes) of an encrypted model.
    """
    key = _key_bytes(key)
    opts = dict(
        no_copy=no_copy,
        num_threads=num_threads,
        load_external_data=load_external_data,
        base_dir=os.fspath(base_dir) if base_dir is not None else None,
        key=key,
    )
    if isinstance(f, (bytes, bytearray, memoryview)):
        return _native.load_bytes(f, **opts)
    if isinstance(f, (str, os.PathLike)):
        return _native.load_path(os.fspath(f), **opts)
    data = f.read()
    if opts["base_dir"] is None and isinstance(getattr(f, "name", None), str):
        opts["base_dir"] = os.path.dirname(os.path.abspath(f.name))
    return _native.load_bytes(data, **opts)


load_model = load


def load_from_string(
    s: bytes,
    *,
    load_external_data: bool = True,
    base_dir: Optional[PathLike] = None,
    no_copy: bool = False,
    num_threads: Optional[int] = None,
    key: Any = None,
) -> ModelProto:
    """Parses a model from bytes (``onnx.load_from_string``); see :func:`load`."""
    return _native.load_bytes(
        s,
        no_copy=no_copy,
        num_threads=num_threads,
        load_external_data=load_external_data,
        base_dir=os.fspath(base_dir) if base_dir is not None else None,
        key=_key_bytes(key),
    )


load_model_from_string = load_from_string


def load_tensor(f: Union[PathLike, IO[bytes]]) -> TensorProto:
    """Loads a serialized TensorProto from a path or a file object (``onnx.load_tensor``)."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            data = fh.read()
    else:
        data = f.read()
    return load_tensor_from_string(data)


def load_tensor_from_string(s: bytes) -> TensorProto:
    """Parses a serialized TensorProto (``onnx.load_tensor_from_string``)."""
    return _native.load_bytes(s, cls=TensorProto)


def save(
    model: ModelProto,
    f: Union[PathLike, IO[bytes]],
    *,
    save_as_external_data: bool = False,
    all_tensors_to_one_file: bool = True,
    location: Optional[str] = None,
    size_threshold: int = 1024,
    convert_attribute: bool = False,
    max_file_size: Optional[int] = None,
    alignment: Optional[int] = None,
    checksum: bool = False,
    key: Any = None,
    num_threads: Optional[int] = None,
) -> None:
    """Saves a model (``onnx.save``), atomically when ``f`` is a path.

    With ``save_as_external_data``, tensors of at least ``size_threshold`` bytes go to weight
    files beside the model (``location``, default: the model file name + ``.data``; one file per
    tensor when ``all_tensors_to_one_file`` is false; a new part ``LOCATION.1``, ... when a file
    would exceed ``max_file_size``; offsets aligned to ``alignment``; SHA-1 ``checksum``
    entries). The model object is not modified. ``key`` encrypts the model (and its weight files).
    """
    key = _key_bytes(key)
    if not isinstance(f, (str, os.PathLike)):
        if save_as_external_data:
            raise ValueError("save_as_external_data needs a path, not a file object")
        f.write(_native.serialize(model, key=key, num_threads=num_threads))
        return
    external = None
    if save_as_external_data:
        external = dict(
            location=location,
            size_threshold=size_threshold,
            all_tensors_to_one_file=all_tensors_to_one_file,
            convert_attribute=convert_attribute,
            max_file_size=max_file_size,
            alignment=alignment,
            checksum=checksum,
        )
    _native.save_path(model, os.fspath(f), external=external, key=key, num_threads=num_threads)


save_model = save


def save_tensor(tensor: TensorProto, f: Union[PathLike, IO[bytes]]) -> None:
    """Saves a serialized TensorProto to a path or a file object (``onnx.save_tensor``)."""
    data = tensor.SerializeToString()
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(data)
    else:
        f.write(data)


# ---- NumPy, DLPack and onnx interoperability

from . import numpy_helper  # noqa: E402


def _tensor_dlpack(self: TensorProto, *, stream: Any = None, max_version: Any = None,
                   dl_device: Any = None, copy: Optional[bool] = None) -> Any:
    """DLPack capsule of the tensor (zero-copy and read-only for ``raw_data``)."""
    if dl_device is not None and tuple(dl_device) != (1, 0):
        raise BufferError("onnx_light tensors live on the CPU")
    return _native.tensor_dlpack(self, max_version=max_version, copy=copy)


def _tensor_dlpack_device(self: TensorProto) -> tuple:
    return (1, 0)


TensorProto.__dlpack__ = _tensor_dlpack
TensorProto.__dlpack_device__ = _tensor_dlpack_device
