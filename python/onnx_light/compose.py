"""``onnx.compose`` on onnx_light models: onnx's own functions (the onnx package must be
installed), each argument and result converted through its bytes (a copy of each)."""
from __future__ import annotations

import onnx.compose as _theirs

from ._onnx_python import wrap as _wrap

add_prefix = _wrap(_theirs.add_prefix)
add_prefix_graph = _wrap(_theirs.add_prefix_graph)
check_overlapping_names = _wrap(_theirs.check_overlapping_names)
expand_out_dim = _wrap(_theirs.expand_out_dim)
expand_out_dim_graph = _wrap(_theirs.expand_out_dim_graph)
merge_graphs = _wrap(_theirs.merge_graphs)
merge_models = _wrap(_theirs.merge_models)

__all__ = ["add_prefix", "add_prefix_graph", "check_overlapping_names", "expand_out_dim",
           "expand_out_dim_graph", "merge_graphs", "merge_models"]
