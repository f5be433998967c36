"""onnx's operator schemas (``onnx.defs``) from onnx's own C++ registry, linked into onnx_light:
``get_schema``, ``has``, ``get_all_schemas``, ``get_all_schemas_with_history``,
``onnx_opset_version`` and ``OpSchema`` objects with the onnx package's property names."""

from __future__ import annotations

import enum
from typing import Any, Optional, Union

from ._native import SchemaError
from ._onnx_cxx import native

__all__ = [
    "AI_ONNX_PREVIEW_TRAINING_DOMAIN",
    "ONNX_DOMAIN",
    "ONNX_ML_DOMAIN",
    "OpSchema",
    "SchemaError",
    "get_all_schemas",
    "get_all_schemas_with_history",
    "get_schema",
    "has",
    "onnx_ml_opset_version",
    "onnx_opset_version",
]

ONNX_DOMAIN = ""
ONNX_ML_DOMAIN = "ai.onnx.ml"
AI_ONNX_PREVIEW_DOMAIN = "ai.onnx.preview"
AI_ONNX_PREVIEW_TRAINING_DOMAIN = "ai.onnx.preview.training"


class OpSchema:
    """An operator schema: onnx's ``OpSchema`` properties, read from onnx's registry."""

    class FormalParameterOption(enum.IntEnum):
        Single = 0
        Optional = 1
        Variadic = 2

    class DifferentiationCategory(enum.IntEnum):
        Unknown = 0
        Differentiable = 1
        NonDifferentiable = 2

    class SupportType(enum.IntEnum):
        COMMON = 0
        EXPERIMENTAL = 1

    class AttrType(enum.IntEnum):
        FLOAT = 1
        INT = 2
        STRING = 3
        TENSOR = 4
        GRAPH = 5
        FLOATS = 6
        INTS = 7
        STRINGS = 8
        TENSORS = 9
        GRAPHS = 10
        SPARSE_TENSOR = 11
        SPARSE_TENSORS = 12
        TYPE_PROTO = 13
        TYPE_PROTOS = 14

    class FormalParameter:
        """An input or output of an operator."""

        def __init__(self, d: dict) -> None:
            self.name: str = d["name"]
            self.type_str: str = d["type_str"]
            self.description: str = d["description"]
            self.option = OpSchema.FormalParameterOption(d["option"])
            self.is_homogeneous: bool = d["is_homogeneous"]
            self.min_arity: int = d["min_arity"]
            self.differentiation_category = OpSchema.DifferentiationCategory(
                d["differentiation_category"]
            )

        def __repr__(self) -> str:
            return (
                f"OpSchema.FormalParameter(name={self.name!r}, type_str={self.type_str!r}, "
                f"option={self.option!r})"
            )

    class TypeConstraintParam:
        """A type parameter and the types it allows."""

        def __init__(self, d: dict) -> None:
            self.type_param_str: str = d["type_param_str"]
            self.description: str = d["description"]
            self.allowed_type_strs: list = list(d["allowed_type_strs"])

        def __repr__(self) -> str:
            return (
                f"OpSchema.TypeConstraintParam(type_param_str={self.type_param_str!r}, "
                f"allowed_type_strs={self.allowed_type_strs!r})"
            )

    class Attribute:
        """An attribute of an operator; ``default_value`` is an AttributeProto (empty when the
        attribute has no default, as in onnx)."""

        def __init__(self, d: dict) -> None:
            self.name: str = d["name"]
            self.description: str = d["description"]
            self.type = OpSchema.AttrType(d["type"])
            self.required: bool = d["required"]
            self._default: Optional[bytes] = d["default_value"]

        @property
        def default_value(self) -> Any:
            from . import AttributeProto

            return AttributeProto.FromString(self._default or b"")

        def __repr__(self) -> str:
            return f"OpSchema.Attribute(name={self.name!r}, type={self.type!r}, required={self.required})"

    def __init__(self, d: dict) -> None:
        self.name: str = d["name"]
        self.domain: str = d["domain"]
        self.doc: str = d["doc"]
        self.since_version: int = d["since_version"]
        self.deprecated: bool = d["deprecated"]
        self.support_level = OpSchema.SupportType(d["support_level"])
        self.min_input: int = d["min_input"]
        self.max_input: int = d["max_input"]
        self.min_output: int = d["min_output"]
        self.max_output: int = d["max_output"]
        self.has_function: bool = d["has_function"]
        self.has_context_dependent_function: bool = d["has_context_dependent_function"]
        self.has_type_and_shape_inference_function: bool = d[
            "has_type_and_shape_inference_function"
        ]
        self.inputs = [OpSchema.FormalParameter(p) for p in d["inputs"]]
        self.outputs = [OpSchema.FormalParameter(p) for p in d["outputs"]]
        self.type_constraints = [OpSchema.TypeConstraintParam(c) for c in d["type_constraints"]]
        self.attributes = {a["name"]: OpSchema.Attribute(a) for a in d["attributes"]}

    def __repr__(self) -> str:
        return (
            f"OpSchema(name={self.name!r}, domain={self.domain!r}, "
            f"since_version={self.since_version})"
        )


def get_schema(
    op_type: str,
    max_inclusive_version: Union[int, str, None] = None,
    domain: str = ONNX_DOMAIN,
) -> OpSchema:
    """The schema of ``op_type``: the latest, or the newest not above
    ``max_inclusive_version``; ``get_schema(op_type, domain)`` works too, as in onnx. Raises
    SchemaError with onnx's message when there is none."""
    if isinstance(max_inclusive_version, str):
        domain, max_inclusive_version = max_inclusive_version, None
    version = -1 if max_inclusive_version is None else int(max_inclusive_version)
    return OpSchema(native().get_schema(op_type, version, domain))


def has(
    op_type: str,
    max_inclusive_version: Union[int, str, None] = None,
    domain: str = ONNX_DOMAIN,
) -> bool:
    """Whether a schema of ``op_type`` exists (``onnx.defs.has``)."""
    if isinstance(max_inclusive_version, str):
        domain, max_inclusive_version = max_inclusive_version, None
    version = -1 if max_inclusive_version is None else int(max_inclusive_version)
    return native().has_schema(op_type, version, domain)


def get_all_schemas_with_history() -> list:
    """Every schema of every operator and version, in onnx's order."""
    return [OpSchema(d) for d in native().all_schemas_with_history()]


def get_all_schemas() -> list:
    """The latest schema of every operator."""
    latest: dict = {}
    for s in get_all_schemas_with_history():
        key = (s.name, s.domain)
        if key not in latest or s.since_version > latest[key].since_version:
            latest[key] = s
    return list(latest.values())


def onnx_opset_version() -> int:
    """The highest opset of the default domain that onnx's registry knows."""
    return native().opset_version(ONNX_DOMAIN)


def onnx_ml_opset_version() -> int:
    """The highest opset of the ai.onnx.ml domain that onnx's registry knows."""
    return native().opset_version(ONNX_ML_DOMAIN)
