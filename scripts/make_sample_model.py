"""Builds samples/mlp.onnx, the small model bundled in the `onnx-light` binary.

Run with the test venv's Python: `.venv/bin/python scripts/make_sample_model.py`.
"""
import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
w1 = numpy_helper.from_array(rng.standard_normal((4, 8)).astype(np.float32), "w1")
b1 = numpy_helper.from_array(np.zeros(8, np.float32), "b1")
w2 = numpy_helper.from_array(rng.standard_normal((8, 3)).astype(np.float32), "w2")
b2 = numpy_helper.from_array(np.zeros(3, np.float32), "b2")
nodes = [
    helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
    helper.make_node("Add", ["h0", "b1"], ["h1"], name="bias1"),
    helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
    helper.make_node("MatMul", ["h2", "w2"], ["h3"], name="fc2"),
    helper.make_node("Add", ["h3", "b2"], ["logits"], name="bias2"),
    helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=-1),
]
graph = helper.make_graph(
    nodes,
    "mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
    initializer=[w1, b1, w2, b2],
)
model = helper.make_model(
    graph,
    producer_name="onnx_light-sample",
    producer_version="1",
    opset_imports=[helper.make_opsetid("", 17)],
)
model.ir_version = 8
helper.set_model_props(model, {"purpose": "bundled sample"})
onnx.checker.check_model(model)
out = pathlib.Path(__file__).resolve().parent.parent / "samples" / "mlp.onnx"
onnx.save(model, out)
print(f"wrote {out} ({out.stat().st_size} bytes)")
