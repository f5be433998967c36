"""External data of a model in memory, with the names of ``onnx.external_data_helper``.

Every function changes the model in place and writes no file:

- :func:`convert_model_to_external_data` marks the tensors a save would move to weight files
  (``data_location`` EXTERNAL, ``location``), keeping their bytes, as onnx's function does; it also
  records the ``offset`` and ``length`` that a save with the same options writes (4096-aligned);
- :func:`load_external_data_for_model` reads the bytes of external tensors and makes them
  inline, as onnx's function does;
- :func:`convert_model_from_external_data` makes external tensors that hold their bytes inline,
  as onnx's function does;
- :func:`populate_external_data` reads the bytes of external tensors and keeps their references
  (C++ ``PopulateExternalData``); :func:`clear_external_data` drops the bytes of external tensors
  and keeps their references (C++ ``ClearExternalData``, what onnx's
  ``write_external_data_tensors`` does after writing).

``convert_model_to_external_data`` then ``clear_external_data`` gives the ``.onnx`` that a save
with external data writes; ``populate_external_data`` brings the bytes back.
"""
from __future__ import annotations

import os
from typing import Optional, Union

from . import _native
from ._native import ModelProto, TensorProto

PathLike = Union[str, "os.PathLike[str]"]

# onnx compares sys.getsizeof(tensor.raw_data), which is the length plus this, with size_threshold.
_BYTES_OBJECT_OVERHEAD = 33


def uses_external_data(tensor: TensorProto) -> bool:
    """Whether the tensor's data is stored in an external file (onnx's function)."""
    return tensor.HasField("data_location") and tensor.data_location == TensorProto.EXTERNAL


def convert_model_to_external_data(model: ModelProto, all_tensors_to_one_file: bool = True,
                                   location: Optional[str] = None, size_threshold: int = 1024,
                                   convert_attribute: bool = False) -> None:
    """Marks the tensors that a save would move to weight files as external, in place.

    The arguments and the tensors selected are onnx's: tensors with ``raw_data`` whose
    ``sys.getsizeof`` is at least ``size_threshold`` (the length plus 33), initializers, and
    attribute tensors with ``convert_attribute``; an absolute ``location`` is a ``ValueError``.
    Unlike onnx, ``location`` defaults to ``model.onnx.data`` (onnx: a random name), one file per
    tensor is named after the tensor made a safe file name (onnx: the name if valid, else a random
    one), and ``offset`` / ``length`` are recorded as a save would write them.
    """
    if location is not None and os.path.isabs(location):
        raise ValueError("location must be a relative path that is relative to the model path.")
    _native.convert_model_to_external_data(
        model,
        all_tensors_to_one_file=all_tensors_to_one_file,
        location=location,
        size_threshold=max(size_threshold - _BYTES_OBJECT_OVERHEAD, 0),
        convert_attribute=convert_attribute,
    )


def load_external_data_for_model(model: ModelProto, base_dir: PathLike) -> None:
    """Reads the external data of every tensor and makes it inline (``data_location`` DEFAULT,
    no ``external_data`` entries), in place, as onnx's function does. Locations obey the
    library's path rules (nothing outside ``base_dir`` is read)."""
    _native.load_external_data_for_model(model, os.fspath(base_dir))


def convert_model_from_external_data(model: ModelProto) -> None:
    """Makes every external tensor inline, in place, as onnx's function does: each must hold its
    bytes (a ``ValueError`` otherwise, and nothing changes)."""
    _native.convert_model_from_external_data(model)


def populate_external_data(model: ModelProto, base_dir: PathLike, *, no_copy: bool = False) -> int:
    """Reads the bytes of every external tensor into the model and keeps its references;
    returns the number of tensors read (C++ ``PopulateExternalData``)."""
    return _native.populate_external_data(model, os.fspath(base_dir), no_copy=no_copy)


def clear_external_data(model: ModelProto) -> int:
    """Drops the bytes of every external tensor and keeps its references; returns the number of
    tensors cleared (C++ ``ClearExternalData``)."""
    return _native.clear_external_data(model)


__all__ = [
    "clear_external_data",
    "convert_model_from_external_data",
    "convert_model_to_external_data",
    "load_external_data_for_model",
    "populate_external_data",
    "uses_external_data",
]
