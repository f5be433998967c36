"""The serialization formats of ``load`` and ``save`` (``onnx.serialization``).

``registry.get(fmt)`` gives the serializer of a format name, and
``registry.get_format_from_file_extension(ext)`` the format of a file extension, as in onnx:

- ``"protobuf"`` (``.onnx``, ``.pb``): the binary encoding, by onnx_light;
- ``"textproto"`` (``.txtpb``, ``.textproto``, ``.prototxt``, ``.pbtxt``): protobuf's text format;
- ``"json"`` (``.json``, ``.onnxjson``): protobuf's JSON mapping, field names as in onnx.proto;
- ``"onnxtxt"`` (``.onnxtxt``, ``.onnxtext``): onnx's textual syntax, by onnx's own C++ parser
  and printer (:mod:`onnx_light.parser`, :mod:`onnx_light.printer`).

The text and JSON formats are written and read by protobuf's ``text_format`` and
``json_format`` (the protobuf package) on onnx_light's messages themselves, through their
protobuf-style reflection; they are meant for small models and tests.
"""
from __future__ import annotations

import typing
import warnings
from typing import Any, Collection, Protocol

from . import _native

_ENCODING = "utf-8"

__all__ = ["ProtoSerializer", "registry"]


class ProtoSerializer(Protocol):
    """A serialization format: its name, its file extensions, and both directions."""

    supported_format: str
    file_extensions: Collection[str]

    def serialize_proto(self, proto: Any) -> Any: ...

    def deserialize_proto(self, serialized: Any, proto: Any) -> Any: ...


class _Registry:
    def __init__(self) -> None:
        self._serializers: dict = {}
        self._extension_to_format: dict = {}

    def register(self, serializer: ProtoSerializer) -> None:
        self._serializers[serializer.supported_format] = serializer
        self._extension_to_format.update(
            dict.fromkeys(serializer.file_extensions, serializer.supported_format))

    def get(self, fmt: str) -> ProtoSerializer:
        """The serializer of ``fmt``; a ``ValueError`` names the formats there are."""
        try:
            return self._serializers[fmt]
        except KeyError:
            raise ValueError(
                f"Unsupported format: '{fmt}'. Supported formats are: {self._serializers.keys()}"
            ) from None

    def get_format_from_file_extension(self, file_extension: str) -> str | None:
        """The format of a file extension (with its dot), or None."""
        return self._extension_to_format.get(file_extension)


def _text(serialized: Any) -> str:
    if not isinstance(serialized, (bytes, str)):
        raise TypeError(
            f"Parameter 'serialized' must be bytes or str, but got type: {type(serialized)}")
    return serialized.decode(_ENCODING) if isinstance(serialized, bytes) else serialized


class _ProtobufSerializer:
    supported_format = "protobuf"
    file_extensions = frozenset({".onnx", ".pb"})

    def serialize_proto(self, proto: Any) -> bytes:
        if not callable(getattr(proto, "SerializeToString", None)):
            raise TypeError(f"No SerializeToString method is detected.\ntype is {type(proto)}")
        return proto.SerializeToString()

    def deserialize_proto(self, serialized: bytes, proto: Any) -> Any:
        if not isinstance(serialized, bytes):
            raise TypeError(
                f"Parameter 'serialized' must be bytes, but got type: {type(serialized)}")
        proto.ParseFromString(serialized)
        return proto


class _TextProtoSerializer:
    supported_format = "textproto"
    file_extensions = frozenset({".txtpb", ".textproto", ".prototxt", ".pbtxt"})

    def serialize_proto(self, proto: Any) -> bytes:
        from google.protobuf import text_format

        return text_format.MessageToString(proto).encode(_ENCODING)

    def deserialize_proto(self, serialized: Any, proto: Any) -> Any:
        from google.protobuf import text_format

        return text_format.Parse(_text(serialized), proto)


class _JsonSerializer:
    supported_format = "json"
    file_extensions = frozenset({".json", ".onnxjson"})

    def serialize_proto(self, proto: Any) -> bytes:
        from google.protobuf import json_format

        text = json_format.MessageToJson(proto, preserving_proto_field_name=True)
        return text.encode(_ENCODING)

    def deserialize_proto(self, serialized: Any, proto: Any) -> Any:
        from google.protobuf import json_format

        return json_format.Parse(_text(serialized), proto)


class _TextualSerializer:
    supported_format = "onnxtxt"
    file_extensions = frozenset({".onnxtxt", ".onnxtext"})

    def serialize_proto(self, proto: Any) -> bytes:
        from . import printer

        return printer.to_text(proto).encode(_ENCODING)

    def deserialize_proto(self, serialized: Any, proto: Any) -> Any:
        from . import parser

        warnings.warn(
            "The onnxtxt format is experimental. Please report any errors to the ONNX GitHub "
            "repository.", stacklevel=2)
        text = _text(serialized)
        parse = {_native.ModelProto: parser.parse_model, _native.GraphProto: parser.parse_graph,
                 _native.FunctionProto: parser.parse_function,
                 _native.NodeProto: parser.parse_node}.get(type(proto))
        if parse is None:
            raise ValueError(f"Unsupported proto type: {type(proto)}")
        return typing.cast(Any, parse(text))


registry = _Registry()
for _s in (_ProtobufSerializer(), _TextProtoSerializer(), _JsonSerializer(), _TextualSerializer()):
    registry.register(_s)
del _s
