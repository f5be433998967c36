"""The native functions of onnx's C++ library (checker, shape inference, version converter,
schemas), present when the extension was built with its ``onnx`` feature."""

from __future__ import annotations

from typing import Any

from . import _native


def native() -> Any:
    """The native module, or a clear error when onnx's C++ library is not linked in."""
    if not _native.HAS_ONNX_CXX:
        raise RuntimeError(
            "this onnx_light build does not include onnx's C++ library (checker, shape "
            "inference, version converter, schemas): build the extension with its `onnx` "
            "feature (docs/python.md)"
        )
    return _native


def as_model(model: Any, caller: str) -> Any:
    """An onnx_light.ModelProto for ``model``: itself, parsed from bytes, or converted from an
    onnx.ModelProto; TypeError for anything else."""
    from . import ModelProto, from_onnx, load_from_string

    if isinstance(model, ModelProto):
        return model
    if isinstance(model, (bytes, bytearray, memoryview)):
        return load_from_string(bytes(model))
    if type(model).__name__ == "ModelProto" and hasattr(model, "SerializeToString"):
        return from_onnx(model)
    raise TypeError(f"{caller} only accepts ModelProto or bytes, incorrect type: {type(model)}")
