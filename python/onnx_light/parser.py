"""onnx's text format parser on onnx_light: ``onnx.parser``'s functions, arguments, results and
exception, run by onnx's own C++ parser (``OnnxParser``, built against onnx_light). Each
``parse_*`` returns a new onnx_light message, byte for byte the one onnx's parser makes; a text
onnx refuses raises ``ParseError`` with onnx's message."""

from __future__ import annotations

from typing import Any

from ._onnx_cxx import native

__all__ = ["ParseError", "parse_function", "parse_graph", "parse_model", "parse_node"]

_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE


class ParseError(Exception):
    """A text onnx's parser refuses. As ``onnx.parser.ParseError``, its argument is onnx's
    message as bytes: ``[ParseError at position (line: L column: C)]``, the line of the text,
    and what was expected."""


def _type_name(t: type) -> str:
    """A type's name as onnx's bindings (nanobind) print it: a class defined in Python (a heap
    type) with its module, a built-in type without."""
    if t.__flags__ & _HEAP_TYPE:
        return f"{t.__module__}.{t.__name__}"
    return t.__name__


def _parse(kind: str, function: str, text: Any) -> Any:
    passable = isinstance(text, str)
    if passable:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            passable = False  # onnx's binding cannot pass it as UTF-8 (lone surrogates)
    if not passable:
        raise TypeError(
            f"{function}(): incompatible function arguments. The following argument types are "
            f"supported:\n    1. {function}(arg: str, /) -> tuple[bool, bytes, bytes]\n\n"
            f"Invoked with types: {_type_name(type(text))}"
        )
    # onnx's binding passes the text as a C string: its parser reads up to the first NUL.
    success, message, proto = native().parse_text(kind, str(text).split("\0", 1)[0])
    if success:
        return proto
    raise ParseError(message)


def parse_model(model_text: str) -> Any:
    """Parses onnx's text format into an onnx_light ModelProto (``onnx.parser.parse_model``)."""
    return _parse("model", "parse_model", model_text)


def parse_graph(graph_text: str) -> Any:
    """Parses onnx's text format into an onnx_light GraphProto (``onnx.parser.parse_graph``)."""
    return _parse("graph", "parse_graph", graph_text)


def parse_function(function_text: str) -> Any:
    """Parses onnx's text format into an onnx_light FunctionProto
    (``onnx.parser.parse_function``)."""
    return _parse("function", "parse_function", function_text)


def parse_node(node_text: str) -> Any:
    """Parses onnx's text format into an onnx_light NodeProto (``onnx.parser.parse_node``)."""
    return _parse("node", "parse_node", node_text)
