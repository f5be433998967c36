"""External data of a model in memory: ``onnx.external_data_helper``, function for function.

The functions of onnx's module behave as onnx's do, on the same tensors, in the same order:
:func:`convert_model_to_external_data` marks tensors external (``location`` only; their bytes
stay), :func:`write_external_data_tensors` writes the bytes of marked tensors to their files
(appending, as onnx does) and drops them from the model, :func:`load_external_data_for_model`
reads external tensors and makes them inline. Two more, from onnx's C++ library:
:func:`populate_external_data` reads the bytes of external tensors and keeps their references,
:func:`clear_external_data` drops them and keeps the references.

Locations obey the library's path rules for reads and writes: nothing outside the base
directory, no absolute paths, no ``..``, no symbolic links leading out.
"""
from __future__ import annotations

import os
import re
import sys
import uuid
import warnings
from itertools import chain
from typing import Callable, Iterable, Optional, Union

import numpy as np

from . import _native
from ._native import (
    AttributeProto,
    FunctionProto,
    GraphProto,
    ModelProto,
    PathRefusedError,
    TensorProto,
    ValidationError,
)

PathLike = Union[str, "os.PathLike[str]"]

_ALLOWED_KEYS = frozenset({"location", "offset", "length", "checksum", "basepath"})
# The most zeros a write pads before a tensor's recorded offset (onnx's limit: one alignment).
_MAX_PADDING = 64 * 1024


class ExternalDataInfo:
    """The ``external_data`` entries of a tensor: ``location``, ``offset``, ``length``,
    ``checksum``, ``basepath`` (unknown keys are ignored with a warning, as onnx does)."""

    def __init__(self, tensor: TensorProto) -> None:
        self.location = ""
        self.offset: Optional[int] = None
        self.length: Optional[int] = None
        self.checksum = None
        self.basepath = ""
        unknown = []
        for entry in tensor.external_data:
            if entry.key in _ALLOWED_KEYS:
                setattr(self, entry.key, entry.value)
            else:
                unknown.append(entry.key[:100])
        if unknown:
            warnings.warn(f"Ignoring unknown external data key(s) {sorted(set(unknown))!r} for "
                          f"tensor {tensor.name!r}. Allowed keys: {sorted(_ALLOWED_KEYS)}",
                          stacklevel=2)
        for key in ("offset", "length"):
            value = getattr(self, key)
            if value is not None:
                value = int(value)
                if value < 0:
                    raise ValueError(f"External data {key} must be non-negative, got {value} "
                                     f"for tensor {tensor.name!r}")
                setattr(self, key, value)


def uses_external_data(tensor: TensorProto) -> bool:
    """Whether the tensor's data is stored in an external file."""
    return tensor.HasField("data_location") and tensor.data_location == TensorProto.EXTERNAL


def set_external_data(tensor: TensorProto, location: str, offset: Optional[int] = None,
                      length: Optional[int] = None, checksum: Optional[str] = None,
                      basepath: Optional[str] = None) -> None:
    """Marks a tensor that holds ``raw_data`` as external with these entries."""
    if not tensor.HasField("raw_data"):
        raise ValueError(f"Tensor {tensor.name} does not have raw_data field. Cannot set "
                         "external data for this tensor.")
    del tensor.external_data[:]
    tensor.data_location = TensorProto.EXTERNAL
    values = {"location": location, "offset": None if offset is None else int(offset),
              "length": None if length is None else int(length), "checksum": checksum,
              "basepath": basepath}
    for k, v in values.items():
        if v is not None:
            tensor.external_data.add(key=k, value=str(v))


def remove_external_data_field(tensor: TensorProto, field_key: str) -> None:
    """Removes the entries of ``field_key`` from a tensor's ``external_data``."""
    for i in reversed(range(len(tensor.external_data))):
        if tensor.external_data[i].key == field_key:
            del tensor.external_data[i]


def _raw_size(tensor: TensorProto) -> int:
    """``len(tensor.raw_data)`` without copying the bytes out."""
    return len(_native.tensor_raw_buffer(tensor) or ())


def _is_valid_filename(filename: str) -> bool:
    return re.match('^[^<>:;,?"*|/]+$', filename) is not None


def convert_model_to_external_data(model: ModelProto, all_tensors_to_one_file: bool = True,
                                   location: Optional[str] = None, size_threshold: int = 1024,
                                   convert_attribute: bool = False) -> None:
    """Marks the tensors with ``raw_data`` of at least ``size_threshold`` as external, as onnx does
    (the bytes stay until a save writes them, see :func:`write_external_data_tensors`).

    Initializers (of subgraphs too), and with ``convert_attribute`` attribute tensors, whose
    ``sys.getsizeof(raw_data)`` (the length plus 33) reaches the threshold get ``location``: the
    one file ``location`` (default: a new UUID + ``.data``), or without
    ``all_tensors_to_one_file`` the tensor's name (a UUID when it is not a valid file name).
    ``ValueError`` for an absolute location; ``FileExistsError`` when ``location`` exists
    (relative to the working directory, as onnx checks).
    """
    tensors = _get_all_tensors(model) if convert_attribute else _get_initializer_tensors(model)
    overhead = sys.getsizeof(b"")
    if all_tensors_to_one_file:
        file_name = str(uuid.uuid1()) + ".data"
        if location:
            if os.path.isabs(location):
                raise ValueError(
                    "location must be a relative path that is relative to the model path.")
            if os.path.exists(location):
                raise FileExistsError(f"External data file exists in {location}.")
            file_name = location
    for tensor in tensors:
        if tensor.HasField("raw_data") and _raw_size(tensor) + overhead >= size_threshold:
            if all_tensors_to_one_file:
                set_external_data(tensor, file_name)
            else:
                name = tensor.name
                set_external_data(tensor, name if _is_valid_filename(name) else str(uuid.uuid1()))


def convert_model_from_external_data(model: ModelProto) -> None:
    """Makes every external tensor inline, in place: each must hold its bytes (a ``ValueError``
    otherwise, and nothing changes)."""
    _native.convert_model_from_external_data(model)


def load_external_data_for_tensor(tensor: TensorProto, base_dir: str) -> None:
    """Reads an external tensor's bytes from ``base_dir`` into ``raw_data`` and makes it inline."""
    buf = _native.tensor_external_buffer(tensor, os.fspath(base_dir) or ".")
    tensor.raw_data = memoryview(np.asarray(buf))  # (one copy: the setter's)
    tensor.data_location = TensorProto.DEFAULT
    del tensor.external_data[:]


def load_external_data_for_model(model: ModelProto, base_dir: PathLike) -> None:
    """Reads the external data of every tensor and makes it inline (``data_location`` DEFAULT,
    no ``external_data`` entries), in place."""
    _native.load_external_data_for_model(model, os.fspath(base_dir))


def _writable(base_path: str, location: str, tensor_name: str) -> str:
    """The path of ``location`` in ``base_path`` when the path rules allow writing it."""
    parts = location.replace("\\", "/").split("/")
    if not location or os.path.isabs(location) or ".." in parts or ":" in parts[0]:
        raise PathRefusedError(f"tensor {tensor_name!r}: external data location {location!r} "
                               "must be a relative path inside the model's directory")
    base = os.path.realpath(base_path or ".")
    path = os.path.join(base, *parts)
    if os.path.commonpath([os.path.realpath(path), base]) != base:
        raise PathRefusedError(f"tensor {tensor_name!r}: external data location {location!r} "
                               "leads out of the model's directory")
    return path


def save_external_data(tensor: TensorProto, base_path: str) -> None:
    """Writes the tensor's ``raw_data`` to its ``location`` in ``base_path`` as onnx does: at the
    end of the file, or at the recorded ``offset`` when that is at most 64 KiB past the end
    (zeros in between); records the ``offset`` and ``length`` written."""
    info = ExternalDataInfo(tensor)
    if not tensor.HasField("raw_data"):
        raise ValidationError("raw_data field doesn't exist.")
    path = _writable(base_path, info.location, tensor.name)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(path, flags, 0o666), "r+b") as f:
        end = f.seek(0, os.SEEK_END)
        if info.offset is not None:
            padding = info.offset - end
            if not 0 <= padding <= _MAX_PADDING:
                raise ValidationError(
                    f"External data offset ({info.offset}) for tensor {tensor.name!r} must be "
                    f"between the current file size ({end}) and {end + _MAX_PADDING}.")
            f.write(b"\0" * padding)
        offset = f.tell()
        buf = _native.tensor_raw_buffer(tensor)
        if buf is not None and len(buf):
            f.write(memoryview(np.asarray(buf)))  # (a view of the bytes: no copy)
        length = f.tell() - offset
    set_external_data(tensor, info.location, offset, length)


def write_external_data_tensors(model: ModelProto, filepath: str) -> ModelProto:
    """Writes the bytes of every tensor that is marked external and holds ``raw_data`` to its file
    in ``filepath`` (:func:`save_external_data`) and drops them from the model; returns it."""
    for tensor in _get_all_tensors(model):
        if uses_external_data(tensor) and tensor.HasField("raw_data"):
            save_external_data(tensor, filepath)
            tensor.ClearField("raw_data")
    return model


def populate_external_data(model: ModelProto, base_dir: PathLike, *, no_copy: bool = False) -> int:
    """Reads the bytes of every external tensor into the model and keeps its references;
    returns the number of tensors read (C++ ``PopulateExternalData``)."""
    return _native.populate_external_data(model, os.fspath(base_dir), no_copy=no_copy)


def clear_external_data(model: ModelProto) -> int:
    """Drops the bytes of every external tensor and keeps its references; returns the number of
    tensors cleared (C++ ``ClearExternalData``)."""
    return _native.clear_external_data(model)


# ---- the tensors of a model, in onnx's order

def _subgraphs(attribute: AttributeProto,
               walk: Callable[[GraphProto], Iterable[TensorProto]]) -> Iterable[TensorProto]:
    if attribute.type == AttributeProto.GRAPH:
        yield from walk(attribute.g)
    if attribute.type == AttributeProto.GRAPHS:
        for graph in attribute.graphs:
            yield from walk(graph)


def _get_initializer_tensors_from_graph(graph: GraphProto, /) -> Iterable[TensorProto]:
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            yield from _subgraphs(attribute, _get_initializer_tensors_from_graph)


def _get_initializer_tensors(model: ModelProto) -> Iterable[TensorProto]:
    yield from _get_initializer_tensors_from_graph(model.graph)


def _get_attribute_tensors_from_graph(
        graph_or_function: Union[GraphProto, FunctionProto], /) -> Iterable[TensorProto]:
    for node in graph_or_function.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            yield from _subgraphs(attribute, _get_attribute_tensors_from_graph)


def _get_attribute_tensors(model: ModelProto) -> Iterable[TensorProto]:
    yield from _get_attribute_tensors_from_graph(model.graph)
    for function in model.functions:
        yield from _get_attribute_tensors_from_graph(function)


def _get_all_tensors(model: ModelProto) -> Iterable[TensorProto]:
    """Every tensor onnx's helpers walk: initializers (subgraphs too), then attribute tensors."""
    return chain(_get_initializer_tensors(model), _get_attribute_tensors(model))


__all__ = [
    "ExternalDataInfo",
    "clear_external_data",
    "convert_model_from_external_data",
    "convert_model_to_external_data",
    "load_external_data_for_model",
    "load_external_data_for_tensor",
    "populate_external_data",
    "remove_external_data_field",
    "save_external_data",
    "set_external_data",
    "uses_external_data",
    "write_external_data_tensors",
]
