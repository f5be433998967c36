"""``onnx.utils`` on onnx_light models: onnx's own code (the onnx package must be installed).

``extract_model`` reads and writes files as onnx's does; ``Extractor`` takes an onnx_light (or
onnx) model, converted through its bytes (a copy), and returns onnx_light models.
"""
from __future__ import annotations

from typing import Any

import onnx.utils as _theirs

from ._onnx_python import from_pb as _from_pb, to_pb as _to_pb

extract_model = _theirs.extract_model


class Extractor(_theirs.Extractor):
    """onnx's ``Extractor`` of sub-models, over an onnx_light model."""

    def __init__(self, model: Any) -> None:
        super().__init__(_to_pb(model))

    def extract_model(self, input_names: list, output_names: list) -> Any:
        return _from_pb(super().extract_model(input_names, output_names))


__all__ = ["Extractor", "extract_model"]
