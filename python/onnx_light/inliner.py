"""onnx's inliner on onnx_light models (``onnx.inliner``'s names, arguments and results), run
by onnx's own C++ code on the model in place, without the GIL."""

from __future__ import annotations

from typing import Any

from ._onnx_cxx import as_model, native

__all__ = ["inline_local_functions", "inline_selected_functions"]


def inline_local_functions(model: Any, convert_version: bool = False) -> Any:
    """A new model with every call to a model-local function inlined (recursively); with
    ``convert_version``, functions of another default-domain opset are converted first."""
    return native().inline_local_functions(as_model(model, "inline_local_functions"),
                                           bool(convert_version))


def inline_selected_functions(model: Any, function_ids: list, exclude: bool = False,
                              inline_schema_functions: bool = False) -> Any:
    """A new model with the calls to the functions ``function_ids`` ((domain, name) pairs)
    inlined, or with ``exclude`` to every function but those; functions of operator schemas
    too with ``inline_schema_functions``."""
    ids = [(str(domain), str(name)) for domain, name in function_ids]
    return native().inline_selected_functions(as_model(model, "inline_selected_functions"), ids,
                                              bool(exclude),
                                              bool(inline_schema_functions))
