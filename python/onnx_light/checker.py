"""onnx's checker on onnx_light models: ``onnx_light.checker.check_model`` with the arguments
and the exception of ``onnx.checker.check_model``. The model is read in place by onnx's own C++
checker (built against onnx_light), without the GIL: nothing is serialized, and models over
2 GB are checked in memory, which onnx refuses."""

from __future__ import annotations

import os
from typing import Any, Union

from ._native import ValidationError
from ._onnx_cxx import as_model, native

__all__ = ["MAXIMUM_PROTOBUF", "ValidationError", "check_model"]

# onnx's limit for in-memory checks; kept for code that reads it (onnx_light has none).
MAXIMUM_PROTOBUF = 2147483648


def check_model(
    model: Union[Any, str, bytes, os.PathLike],
    full_check: bool = False,
    skip_opset_compatibility_check: bool = False,
    check_custom_domain: bool = False,
) -> None:
    """Checks a model (an onnx_light or onnx ModelProto, its bytes, or a path) as
    ``onnx.checker.check_model`` does; raises ValidationError with onnx's message."""
    if isinstance(model, (str, os.PathLike)):
        native().check_model_path(
            os.fspath(model), full_check, skip_opset_compatibility_check, check_custom_domain
        )
        return
    native().check_model(
        as_model(model, "check_model"),
        full_check,
        skip_opset_compatibility_check,
        check_custom_domain,
    )
