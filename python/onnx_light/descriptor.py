"""Descriptors of the message classes, as protobuf's Python API has them (``ModelProto.DESCRIPTOR``,
``m.DESCRIPTOR.fields``, ``FieldDescriptor.TYPE_MESSAGE``, ...), built from the library's schema
table: the reflection that generic code over onnx messages uses (walking every field with
``DESCRIPTOR.fields`` and ``getattr``, telling messages from scalars in ``ListFields``).

Names, numbers, types, C++ types, presence, default values, oneofs and nested types are those of
onnx's generated classes (checked against them by the tests). Options, files, extensions and
``CopyToProto`` are not there.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["Descriptor", "EnumDescriptor", "EnumValueDescriptor", "FieldDescriptor", "OneofDescriptor"]

_PACKAGE = "onnx"

#: Every enum's descriptor by its name without the package (``TensorProto.DataType``), filled
#: when the package is imported (``EnumTypeWrapper.DESCRIPTOR`` reads it).
ENUMS: dict = {}


class FieldDescriptor:
    """One field of a message (protobuf's ``FieldDescriptor``)."""

    TYPE_DOUBLE, TYPE_FLOAT, TYPE_INT64, TYPE_UINT64, TYPE_INT32 = 1, 2, 3, 4, 5
    TYPE_FIXED64, TYPE_FIXED32, TYPE_BOOL, TYPE_STRING, TYPE_GROUP = 6, 7, 8, 9, 10
    TYPE_MESSAGE, TYPE_BYTES, TYPE_UINT32, TYPE_ENUM, TYPE_SFIXED32 = 11, 12, 13, 14, 15
    TYPE_SFIXED64, TYPE_SINT32, TYPE_SINT64 = 16, 17, 18
    CPPTYPE_INT32, CPPTYPE_INT64, CPPTYPE_UINT32, CPPTYPE_UINT64, CPPTYPE_DOUBLE = 1, 2, 3, 4, 5
    CPPTYPE_FLOAT, CPPTYPE_BOOL, CPPTYPE_ENUM, CPPTYPE_STRING, CPPTYPE_MESSAGE = 6, 7, 8, 9, 10
    CPPTYPE_BYTES = 9  # protobuf gives bytes fields CPPTYPE_STRING too
    LABEL_OPTIONAL, LABEL_REQUIRED, LABEL_REPEATED = 1, 2, 3

    is_extension = False
    extension_scope = None
    has_options = False
    is_required = False
    is_packed = False

    def __init__(self, name: str, number: int, index: int, kind: str, repeated: bool,
                 packed: bool, containing_type: "Descriptor"):
        self.name = name
        self.number = number
        self.index = index
        self.full_name = f"{containing_type.full_name}.{name}"
        self.type, self.cpp_type = _TYPES[kind]
        self.is_repeated = repeated
        self.label = self.LABEL_REPEATED if repeated else self.LABEL_OPTIONAL
        self.is_packed = packed
        self.containing_type = containing_type
        self.containing_oneof: Optional[OneofDescriptor] = None
        self.message_type: Optional[Descriptor] = None
        self.enum_type: Optional[EnumDescriptor] = None
        self.has_presence = not repeated
        self.has_default_value = False
        self.camelcase_name = _camel(name)
        self.json_name = self.camelcase_name

    @property
    def default_value(self) -> Any:
        if self.is_repeated:
            return []
        if self.type == self.TYPE_MESSAGE:
            return None
        if self.type == self.TYPE_ENUM:
            return self.enum_type.values[0].number
        return _DEFAULTS[self.type]

    def GetOptions(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"<FieldDescriptor {self.full_name}>"


class OneofDescriptor:
    """A oneof of a message."""

    has_options = False

    def __init__(self, name: str, index: int, containing_type: "Descriptor"):
        self.name = name
        self.index = index
        self.full_name = f"{containing_type.full_name}.{name}"
        self.containing_type = containing_type
        self.fields: list = []

    def __repr__(self) -> str:
        return f"<OneofDescriptor {self.full_name}>"


class EnumValueDescriptor:
    """One value of an enum."""

    has_options = False

    def __init__(self, name: str, number: int, index: int, type: "EnumDescriptor"):
        self.name, self.number, self.index, self.type = name, number, index, type

    def __repr__(self) -> str:
        return f"<EnumValueDescriptor {self.type.full_name}.{self.name} = {self.number}>"


class EnumDescriptor:
    """An enum (``TensorProto.DataType``, ``AttributeProto.AttributeType``, ...)."""

    has_options = False

    def __init__(self, name: str, values: list, containing_type: Optional["Descriptor"], closed: bool):
        self.name = name.rsplit(".", 1)[-1]
        self.full_name = f"{_PACKAGE}.{name}"
        self.containing_type = containing_type
        self.is_closed = closed
        self.values = [EnumValueDescriptor(k, v, i, self) for i, (k, v) in enumerate(values)]
        self.values_by_name = {v.name: v for v in self.values}
        self.values_by_number: dict = {}
        for v in self.values:
            self.values_by_number.setdefault(v.number, v)

    def __repr__(self) -> str:
        return f"<EnumDescriptor {self.full_name}>"


class FileDescriptor:
    """The file the message types come from (protobuf's ``FileDescriptor``: name and package,
    which ``json_format`` reads to tell well-known types)."""

    name = "onnx/onnx-ml.proto"
    package = _PACKAGE
    syntax = "proto2"

    def __repr__(self) -> str:
        return f"<FileDescriptor {self.name}>"


_FILE = FileDescriptor()


class Descriptor:
    """A message type (protobuf's ``Descriptor``): ``ModelProto.DESCRIPTOR``."""

    file = _FILE

    has_options = False
    is_extendable = False
    extensions: list = []
    extensions_by_name: dict = {}
    extension_ranges: list = []

    def __init__(self, name: str, cls: type):
        self.name = name.rsplit(".", 1)[-1]
        self.full_name = f"{_PACKAGE}.{name}"
        self._concrete_class = cls
        self.containing_type: Optional[Descriptor] = None
        self.fields: list = []
        self.oneofs: list = []
        self.nested_types: list = []
        self.enum_types: list = []

    def _index(self) -> None:
        self.fields_by_name = {f.name: f for f in self.fields}
        self.fields_by_number = {f.number: f for f in self.fields}
        self.fields_by_camelcase_name = {f.camelcase_name: f for f in self.fields}
        self.oneofs_by_name = {o.name: o for o in self.oneofs}
        self.nested_types_by_name = {d.name: d for d in self.nested_types}
        self.enum_types_by_name = {e.name: e for e in self.enum_types}
        self.enum_values_by_name = {v.name: v for e in self.enum_types for v in e.values}

    def EnumValueName(self, enum: str, value: int) -> str:
        return self.enum_types_by_name[enum].values_by_number[value].name

    def GetOptions(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"<Descriptor {self.full_name}>"


F = FieldDescriptor
_TYPES = {
    "double": (F.TYPE_DOUBLE, F.CPPTYPE_DOUBLE),
    "float": (F.TYPE_FLOAT, F.CPPTYPE_FLOAT),
    "int64": (F.TYPE_INT64, F.CPPTYPE_INT64),
    "uint64": (F.TYPE_UINT64, F.CPPTYPE_UINT64),
    "int32": (F.TYPE_INT32, F.CPPTYPE_INT32),
    "string": (F.TYPE_STRING, F.CPPTYPE_STRING),
    "bytes": (F.TYPE_BYTES, F.CPPTYPE_STRING),
    "enum": (F.TYPE_ENUM, F.CPPTYPE_ENUM),
    "message": (F.TYPE_MESSAGE, F.CPPTYPE_MESSAGE),
}
_DEFAULTS = {F.TYPE_DOUBLE: 0.0, F.TYPE_FLOAT: 0.0, F.TYPE_INT64: 0, F.TYPE_UINT64: 0,
             F.TYPE_INT32: 0, F.TYPE_STRING: "", F.TYPE_BYTES: b""}
del F


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def build(messages: list, enums: list, classes: dict, open_enums: dict) -> dict:
    """Descriptors of every message class, keyed by name without the package
    (``TensorProto.Segment``); the enums' go to :data:`ENUMS`.

    ``messages``: ``(name, [(field, number, kind, repeated, packed, type name, oneof)])`` from
    the library's schema; ``enums``: ``(name, [(value name, number)])`` of its closed enums;
    ``classes``: name → class; ``open_enums``: name → ``(name, number)`` pairs of the enums that
    the schema stores as plain integers (``TensorProto.DataType``), described all the same.
    """
    descs = {name: Descriptor(name, classes[name]) for name, _ in messages}
    enum_descs = {}
    # (the open enums first: onnx.proto declares TensorProto.DataType before DataLocation)
    for name, values, closed in [(n, v, False) for n, v in open_enums.items()] + [(n, v, True) for n, v in enums]:
        parent = descs.get(name.rsplit(".", 1)[0]) if "." in name else None
        e = EnumDescriptor(name, values, parent, closed)
        enum_descs[name] = e
        if parent is not None:
            parent.enum_types.append(e)
    for name, fields in messages:
        d = descs[name]
        if "." in name:
            d.containing_type = descs[name.rsplit(".", 1)[0]]
            d.containing_type.nested_types.append(d)
        oneofs = {}
        for index, (fname, number, kind, repeated, packed, tname, oneof) in enumerate(fields):
            f = FieldDescriptor(fname, number, index, kind, repeated, packed, d)
            if kind == "message":
                f.message_type = descs[tname]
            elif kind == "enum":
                f.enum_type = enum_descs[tname]
            if oneof is not None:
                if oneof not in oneofs:
                    oneofs[oneof] = OneofDescriptor(oneof, len(d.oneofs), d)
                    d.oneofs.append(oneofs[oneof])
                oneofs[oneof].fields.append(f)
                f.containing_oneof = oneofs[oneof]
            d.fields.append(f)
    for d in descs.values():
        d._index()
    ENUMS.update(enum_descs)
    return descs
