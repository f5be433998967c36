"""ONNX Runtime sessions whose kernels read the weights from onnx_light's memory.

``InferenceSession(path_or_model, sess_options=None, providers=None, ...)`` is an
``onnxruntime.InferenceSession`` built from an onnx_light model (a path, bytes, an onnx_light or
onnx ``ModelProto``): every payload of 1 KiB or more of the main graph's initializers is handed to
ONNX Runtime as an ``OrtValue`` over onnx_light's memory (``SessionOptions.add_initializer``) —
the memory map of the model's files for a path, the model's own buffers for a model object — and
kept alive with the session, so ONNX Runtime allocates no memory of its own for them.

A path whose large payloads are all in external files is handed to ONNX Runtime as it is, with
no shared values: ONNX Runtime maps those files itself (no copy; processes share the pages) and
uses the pre-packed blobs an optimized model saved with them
(``session.save_external_prepacked_constant_initializers``), which shared values would make it
pre-pack again while a second map stays alive.

ONNX Runtime still needs the bytes in the model it parses: its graph transformers (constant
folding, operator fusions, layout changes) read initializers from there, not from the shared
values. So for a single file or a model object, ONNX Runtime parses a copy of the model whose
large payloads are in a temporary data file (written once: page cache, not the process's
memory; removed once the session exists). Where copies remain: the temporary data file; ONNX Runtime's
pre-packing (its own packed copy of the weights of MatMul, Gemm, Conv, ... on CPU) and whatever a
transformer rewrites; initializers that are also graph inputs, of element types other than
numbers and bool, under 1 KiB, in subgraphs, attribute and sparse tensors (ONNX Runtime's own
copies from the model it parses).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Optional, Sequence, Union

import numpy as np
import onnxruntime as _ort

from . import _native, load, load_from_string, numpy_helper, write_model
from ._native import ModelProto, TensorProto

__all__ = ["InferenceSession", "shared_initializers"]

_STUB_DATA = "weights.data"
# Payloads smaller than this stay inline (not worth an OrtValue each).
_MIN_SHARED = 1024
_MARK = "onnx_light:"
# Element types ONNX Runtime's Python binding takes as NumPy arrays without conversion.
_SHAREABLE = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT8,
              TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8,
              TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64, TensorProto.BOOL}


def _as_model(path_or_model: Any) -> ModelProto:
    if isinstance(path_or_model, ModelProto):
        return path_or_model
    if isinstance(path_or_model, (bytes, bytearray, memoryview)):
        return load_from_string(bytes(path_or_model), no_copy=True)
    if isinstance(path_or_model, (str, os.PathLike)):
        return load(path_or_model, no_copy=True, alignment=1)
    if getattr(getattr(path_or_model, "DESCRIPTOR", None), "full_name", None) == "onnx.ModelProto":
        from . import from_onnx

        return from_onnx(path_or_model)
    raise TypeError(f"expected a path, bytes, or a ModelProto, got {type(path_or_model).__name__}")


def _shareable(graph: Any) -> set:
    """Names of the main graph's initializers ONNX Runtime takes as shared values: not also
    graph inputs (those are defaults a caller may override, which ONNX Runtime reads from the
    model), of an element type it takes as a NumPy array, of at least ``_MIN_SHARED`` bytes."""
    inputs = {i.name for i in graph.input}
    return {t.name for t in graph.initializer
            if t.name not in inputs and t.data_type in _SHAREABLE}


def _arrays(model: ModelProto, names: set) -> dict:
    """``{name: NumPy array over the initializer's bytes in onnx_light's memory}``."""
    out = {}
    for t in model.graph.initializer:
        if t.name in names and t.HasField("raw_data"):
            a = numpy_helper.to_array(t)
            # (a view, not a conversion, at an address its element type may be read from)
            if a.nbytes >= _MIN_SHARED and a.base is not None and a.ctypes.data % a.itemsize == 0:
                out[t.name] = a
    return out


def _stub(model: ModelProto, directory: str) -> str:
    """Writes ``directory/model.onnx``: the model with every payload of at least
    ``_MIN_SHARED`` bytes in ``directory/weights.data`` (ONNX Runtime reads from it only what it
    transforms: the shared initializers' values come from onnx_light's memory)."""
    data, buffers = _native.split_large_payloads(model, _MIN_SHARED)
    stub = load_from_string(data, load_external_data=False)
    offset = 0
    with open(os.path.join(directory, _STUB_DATA), "wb") as f:
        for t in list(_marked(stub)):
            raw = np.asarray(buffers[int(t.external_data[0].value[len(_MARK):])])
            offset = -(-offset // 64) * 64
            f.seek(offset)
            f.write(memoryview(raw))
            del t.external_data[:]
            for k, v in (("location", _STUB_DATA), ("offset", str(offset)),
                         ("length", str(raw.size))):
                t.external_data.add(key=k, value=v)
            offset += raw.size
    path = os.path.join(directory, "model.onnx")
    write_model(stub, path)
    return path


def _all_large_payloads_external(lazy: ModelProto) -> bool:
    """Whether a model loaded without its external data keeps every payload of ``_MIN_SHARED``
    bytes or more in external files (which ONNX Runtime maps itself, without a copy)."""
    from . import _iter_tensors

    return all(len(_native.tensor_raw_buffer(t) or ()) < _MIN_SHARED for t in _iter_tensors(lazy))


def _has_external_data(lazy: ModelProto) -> bool:
    from . import _iter_tensors

    return any(len(t.external_data) for t in _iter_tensors(lazy))


def _marked(stub: ModelProto):
    from . import _iter_tensors

    for t in _iter_tensors(stub):
        if len(t.external_data) == 1 and t.external_data[0].value.startswith(_MARK):
            yield t


def shared_initializers(session: Any) -> dict:
    """``{name: OrtValue}`` of the initializers an onnx_light session hands to ONNX Runtime."""
    return dict(session._onnx_light_values)


class InferenceSession(_ort.InferenceSession):
    """``onnxruntime.InferenceSession`` over an onnx_light model (a path, bytes, an onnx_light or
    onnx ``ModelProto``) whose weights ONNX Runtime uses in place. Arguments after the model are
    ``onnxruntime.InferenceSession``'s; ``sess_options`` gets the initializers added (a new
    ``SessionOptions`` when None)."""

    def __init__(self, path_or_model: Union[str, "os.PathLike[str]", bytes, Any],
                 sess_options: Optional[_ort.SessionOptions] = None,
                 providers: Optional[Sequence[Any]] = None,
                 provider_options: Optional[Sequence[dict]] = None, **kwargs: Any) -> None:
        options = sess_options if sess_options is not None else _ort.SessionOptions()
        self._onnx_light_values: dict = {}
        if isinstance(path_or_model, (str, os.PathLike)):
            # Every payload borrowed from the file's map where it is (no aligned copies).
            lazy = load(path_or_model, load_external_data=False, no_copy=True, alignment=1)
            if _all_large_payloads_external(lazy):
                # ONNX Runtime maps the weight files itself (and reads their pre-packed blobs).
                super().__init__(os.fspath(path_or_model), options, providers, provider_options,
                                 **kwargs)
                return
            # (a single file is already whole: no second parse)
            model = _as_model(path_or_model) if _has_external_data(lazy) else lazy
        else:
            model = _as_model(path_or_model)
        values = {name: _ort.OrtValue.ortvalue_from_numpy(a)
                  for name, a in _arrays(model, _shareable(model.graph)).items()}
        for name, value in values.items():
            options.add_initializer(name, value)
        # ONNX Runtime keeps raw pointers to these: they (and the model owning the bytes) live
        # as long as the session.
        self._onnx_light_values = values
        self._onnx_light_model = model
        directory = tempfile.mkdtemp(prefix="onnx_light_ort_")
        try:
            super().__init__(_stub(model, directory), options, providers, provider_options,
                             **kwargs)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
