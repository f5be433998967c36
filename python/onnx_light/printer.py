"""onnx's text format printer on onnx_light: ``onnx.printer.to_text``, run by onnx's own C++
printer (built against onnx_light) on the message in place, without the GIL. The text is onnx's,
character for character."""

from __future__ import annotations

from typing import Any

from ._onnx_cxx import native

__all__ = ["to_text"]

_PRINTABLE = ("ModelProto", "FunctionProto", "GraphProto", "NodeProto")


def to_text(proto: Any) -> str:
    """onnx's text of a ModelProto, FunctionProto, GraphProto or NodeProto (onnx_light's, or
    onnx's, which is converted through its bytes); TypeError for anything else, as onnx. As in
    onnx, a string attribute that is not UTF-8 makes the text undecodable (UnicodeDecodeError)."""
    from . import FunctionProto, GraphProto, ModelProto, NodeProto

    if not isinstance(proto, (ModelProto, FunctionProto, GraphProto, NodeProto)):
        name = type(proto).__name__
        if name not in _PRINTABLE or not hasattr(proto, "SerializeToString"):
            raise TypeError("Unsupported argument type.")
        cls = {
            "ModelProto": ModelProto,
            "FunctionProto": FunctionProto,
            "GraphProto": GraphProto,
            "NodeProto": NodeProto,
        }[name]
        if cls is ModelProto:
            from . import from_onnx

            proto = from_onnx(proto)
        else:
            proto = cls.FromString(proto.SerializeToString())
    return native().to_text(proto).decode("utf-8")
