"""onnx's shape inference on onnx_light models, with the names, arguments and exception of
``onnx.shape_inference``: onnx's own C++ code reads and extends the model in place, without the
GIL and without serializing it (models over 2 GB included)."""

from __future__ import annotations

import os
from typing import Any, Union

from ._native import InferenceError
from ._onnx_cxx import as_model, native

__all__ = ["InferenceError", "infer_shapes", "infer_shapes_in_place", "infer_shapes_path"]


def infer_shapes(
    model: Union[Any, bytes],
    check_type: bool = False,
    strict_mode: bool = False,
    data_prop: bool = False,
) -> Any:
    """A copy of ``model`` with the inferred types in ``graph.value_info``
    (``onnx.shape_inference.infer_shapes``)."""
    if isinstance(model, (str, os.PathLike)):
        raise TypeError(
            "infer_shapes only accepts ModelProto or bytes,"
            " For Model paths (str or os.PathLike), use infer_shapes_path()."
        )
    return native().infer_shapes(
        as_model(model, "infer_shapes"), check_type, strict_mode, data_prop
    )


def infer_shapes_in_place(
    model: Any,
    check_type: bool = False,
    strict_mode: bool = False,
    data_prop: bool = False,
) -> None:
    """Like infer_shapes, into ``model`` itself: no copy of the model (onnx_light only)."""
    from . import ModelProto

    if not isinstance(model, ModelProto):
        raise TypeError(
            f"infer_shapes_in_place only accepts onnx_light.ModelProto, incorrect type: {type(model)}"
        )
    native().infer_shapes_in_place(model, check_type, strict_mode, data_prop)


def infer_shapes_path(
    model_path: Union[str, os.PathLike],
    output_path: Union[str, os.PathLike] = "",
    check_type: bool = False,
    strict_mode: bool = False,
    data_prop: bool = False,
) -> None:
    """Infers the shapes of the model file ``model_path`` into ``output_path`` (default: the
    model file itself), as ``onnx.shape_inference.infer_shapes_path``."""
    from . import ModelProto

    if isinstance(model_path, ModelProto):
        raise TypeError(
            "infer_shapes_path only accepts model Path (String),"
            "you can use infer_shapes for the ModelProto."
        )
    try:
        model_path = os.fspath(model_path)
    except TypeError as exp:
        raise TypeError(
            "infer_shapes_path only accepts model path as a string or PathLike, "
            f"incorrect model path type: {type(model_path)}"
        ) from exp
    try:
        output_path = os.fspath(output_path)
    except TypeError as exp:
        raise TypeError(
            "infer_shapes_path only accepts output path as a string or PathLike, "
            f"incorrect output path type: {type(output_path)}"
        ) from exp
    if output_path == "":
        output_path = model_path
    native().infer_shapes_path(model_path, output_path, check_type, strict_mode, data_prop)
