"""The same workflow script run with `import onnx` and with `import onnx_light as onnx`: every
row (values, bytes of the files written, text, exception types) must be identical."""
import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "workflow", "onnx_workflow.py")
# Rows whose onnx run is expected to raise (the exception type is what they compare).
RAISING = {"format_unknown", "external_absolute_location_refused", "parser_error"}


def run(module, tmp_path):
    work = tmp_path / module
    work.mkdir()
    out = tmp_path / f"{module}.json"
    subprocess.run([sys.executable, SCRIPT, module, str(out)], cwd=work, check=True)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("workflow")
    return run("onnx", tmp), run("onnx_light", tmp)


def test_every_row_ran_with_onnx(rows):
    theirs, _ = rows
    assert len(theirs) >= 30
    raised = {k for k, v in theirs.items() if isinstance(v, dict) and set(v) == {"raised"}}
    assert raised == RAISING, raised ^ RAISING


def test_rows_identical(rows):
    theirs, ours = rows
    assert ours.keys() == theirs.keys()
    different = [k for k in theirs if theirs[k] != ours[k]]
    assert not different, "\n".join(f"{k}:\n  onnx:       {theirs[k]!r:.600}\n  onnx_light: {ours[k]!r:.600}"
                                    for k in different)


def test_dir_shows_no_imports():
    import onnx_light
    assert not {"os", "typing", "Any", "Union", "IO", "Optional"} & set(dir(onnx_light))
    assert {"checker", "helper", "load", "save", "TensorProto", "compose"} <= set(dir(onnx_light))
