"""Checks the model written by examples/cpp/build_model.cpp with the official tools: the onnx
package loads it (external data included) and its checker accepts it, and onnxruntime runs it and
agrees with NumPy.

Usage: python check_with_onnxruntime.py OUT_DIR/mlp_cpp.onnx
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def main() -> None:
    path = sys.argv[1]
    model = onnx.load(path)  # resolves W from mlp_cpp.weights
    onnx.checker.check_model(path, full_check=True)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    W, b = inits["W"], inits["b"]
    assert W.shape == (4, 3) and np.array_equal(W.ravel(), 0.25 * np.arange(12, dtype=np.float32) - 1)
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 4
    (y,) = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    expected = np.maximum(x @ W + b, 0)
    np.testing.assert_allclose(y, expected, rtol=1e-6)
    print(f"onnx.checker: ok; onnxruntime: y{list(y.shape)} matches NumPy:\n{y}")


if __name__ == "__main__":
    main()
