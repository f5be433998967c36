"""Shared helpers of the Python package's tests: the onnx wheel's backend test data (the same
enumeration as tests/compat) and small model builders."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "compat"))

import backend_data  # noqa: E402,F401
