"""onnx's version converter on onnx_light models (``onnx.version_converter.convert_version``'s
name, arguments and exception), run by onnx's own C++ code on the model in place, without the
GIL."""

from __future__ import annotations

from typing import Any

from ._native import ConvertError
from ._onnx_cxx import native

__all__ = ["ConvertError", "convert_version"]


def convert_version(model: Any, target_version: int) -> Any:
    """A new model with the default domain's opset converted to ``target_version``."""
    from . import ModelProto

    if not isinstance(model, ModelProto):
        raise TypeError(
            f"VersionConverter only accepts ModelProto as model, incorrect type: {type(model)}"
        )
    if not isinstance(target_version, int):
        raise TypeError(
            "VersionConverter only accepts int as target_version, incorrect type: "
            f"{type(target_version)}"
        )
    return native().convert_version(model, target_version)
