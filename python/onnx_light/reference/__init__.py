"""``onnx.reference`` on onnx_light models: onnx's reference evaluator (the onnx package must be
installed); the model (or graph, function, node) and ``functions`` are converted through their
bytes (a copy)."""
from __future__ import annotations

from typing import Any

import onnx.reference as _theirs

from .._onnx_python import to_pb as _to_pb


class ReferenceEvaluator(_theirs.ReferenceEvaluator):
    """onnx's ``ReferenceEvaluator`` (same arguments), over onnx_light messages too."""

    def __init__(self, proto: Any, opsets: Any = None, functions: Any = None,
                 verbose: int = 0, new_ops: Any = None, check_shape_annotations: bool = False) -> None:
        super().__init__(_to_pb(proto), opsets=opsets, functions=_to_pb(functions),
                         verbose=verbose, new_ops=new_ops,
                         check_shape_annotations=check_shape_annotations)


__all__ = ["ReferenceEvaluator"]
