"""Runs functions of the onnx package's Python code on onnx_light messages.

Message arguments (also in lists, tuples and dicts) become the onnx package's messages and
message results come back as onnx_light's, each through its binary encoding: a copy of the
message, tensor payloads included (models over 2 GB too, see ``to_onnx`` / ``from_onnx``).
A call with ``inplace=True`` writes the result back into the argument it changed.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from . import _native


def _is_ours(x: Any) -> bool:
    return isinstance(x, _native.Message)


def _is_protobuf(x: Any) -> bool:
    return hasattr(x, "DESCRIPTOR") and hasattr(x, "SerializeToString") and not _is_ours(x)


def _class_of(module: Any, full_name: str) -> Any:
    """The message class of ``module`` (onnx or onnx_light's native module) named ``full_name``
    (``onnx.TensorProto.Segment`` -> ``module.TensorProto.Segment``)."""
    cls = module
    for part in full_name.split(".")[1:]:
        cls = getattr(cls, part)
    return cls


def to_pb(x: Any) -> Any:
    """``x`` with every onnx_light message replaced by the onnx package's."""
    if _is_ours(x):
        if isinstance(x, _native.ModelProto):
            from . import to_onnx

            return to_onnx(x)
        import onnx

        return _class_of(onnx, x.DESCRIPTOR.full_name).FromString(x.SerializeToString())
    if isinstance(x, (list, tuple)):
        return type(x)(to_pb(v) for v in x)
    if isinstance(x, dict):
        return {k: to_pb(v) for k, v in x.items()}
    return x


def from_pb(x: Any) -> Any:
    """``x`` with every onnx package message replaced by onnx_light's."""
    if _is_protobuf(x):
        from . import from_onnx

        if x.DESCRIPTOR.full_name == "onnx.ModelProto":
            return from_onnx(x)
        return _class_of(_native, x.DESCRIPTOR.full_name).FromString(x.SerializeToString())
    if isinstance(x, (list, tuple)):
        return type(x)(from_pb(v) for v in x)
    if isinstance(x, dict):
        return {k: from_pb(v) for k, v in x.items()}
    return x


def wrap(fn: Callable) -> Callable:
    """``fn`` of the onnx package, taking and returning onnx_light messages."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        result = fn(*to_pb(bound.args), **to_pb(bound.kwargs))
        if bound.arguments.get("inplace"):
            first = next(iter(bound.arguments.values()))
            if _is_ours(first):
                first.CopyFrom(from_pb(result))
                return first
        return from_pb(result)

    call.__module__ = "onnx_light"
    return call
