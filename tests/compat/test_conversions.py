"""External data converted in memory (`onnx-light external-data convert|populate|clear`, the
library's convert_model_to_external_data / populate_external_data / clear_external_data)
against onnx's own helpers on the same models:

- convert: the same tensors become EXTERNAL with the same location as onnx's
  `convert_model_to_external_data` (one file or one file per tensor, with and without attribute
  tensors); the bytes stay in memory as with onnx; onnx_light also records the offset and length
  a save would write (4096-aligned);
- convert + clear: exactly the .onnx that `onnx-light convert --external-data` writes, and it
  loads in onnx (`onnx.load` resolves every tensor) once the weights are there;
- populate: the bytes are those onnx's `load_external_data_for_model` reads, and the references
  stay.
"""
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, external_data_helper

from conftest import binary
from test_external_data import all_tensors, make_model


def cli(*args):
    proc = subprocess.run([str(binary()), *map(str, args)], capture_output=True, text=True)
    assert proc.returncode == 0, f"onnx-light {args} failed: {proc.stderr}{proc.stdout}"
    return proc


def every_tensor(m: onnx.ModelProto):
    """name -> TensorProto of initializers and attribute tensors, subgraphs included."""
    out = {}

    def graph(g):
        for t in g.initializer:
            out[t.name] = t
        for n in g.node:
            for a in n.attribute:
                if a.HasField("t"):
                    out[a.t.name] = a.t
                for t in a.tensors:
                    out[t.name] = t
                if a.HasField("g"):
                    graph(a.g)
                for sub in a.graphs:
                    graph(sub)

    graph(m.graph)
    return out


def entries(t: TensorProto):
    return {e.key: e.value for e in t.external_data}


@pytest.mark.parametrize("one_file", [True, False], ids=["one_file", "per_tensor"])
@pytest.mark.parametrize("convert_attribute", [False, True], ids=["initializers", "attributes"])
def test_convert_matches_onnx(one_file, convert_attribute, tmp_path):
    src = tmp_path / "src.onnx"
    onnx.save(make_model(), str(src))
    # Sizes of the model's tensors are far from 100 bytes, so onnx's sys.getsizeof (33 bytes
    # more than the length) and onnx_light's byte count select the same tensors.
    theirs = onnx.load(str(src))
    external_data_helper.convert_model_to_external_data(
        theirs, all_tensors_to_one_file=one_file, location="w.bin" if one_file else None,
        size_threshold=100, convert_attribute=convert_attribute)
    args = ["external-data", "convert", src, tmp_path / "ours.onnx", "--size-threshold", "100"]
    args += ["--location", "w.bin"] if one_file else ["--per-tensor-files"]
    if convert_attribute:
        args.append("--convert-attribute")
    cli(*args)
    ours = onnx.load(str(tmp_path / "ours.onnx"), load_external_data=False)

    a, b = every_tensor(theirs), every_tensor(ours)
    assert a.keys() == b.keys()
    converted = [n for n, t in a.items() if t.data_location == TensorProto.EXTERNAL]
    assert converted and len(converted) < len(a)
    for name, t in a.items():
        o = b[name]
        assert o.data_location == t.data_location, name
        assert o.raw_data == t.raw_data, f"{name}: the bytes stay in memory"
        if t.data_location == TensorProto.EXTERNAL:
            assert entries(o)["location"] == entries(t)["location"], name
            assert int(entries(o)["length"]) == len(o.raw_data), name
            assert int(entries(o)["offset"]) % 4096 == 0, name
        else:
            assert not o.external_data, name


def test_convert_and_clear_is_what_a_save_writes(tmp_path):
    src = tmp_path / "src.onnx"
    original = make_model()
    onnx.save(original, str(src))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    cli("convert", src, out_dir / "m.onnx", "--external-data", "w.bin", "--size-threshold", "100")
    cli("external-data", "convert", src, tmp_path / "cleared.onnx", "--location", "w.bin",
        "--size-threshold", "100", "--clear")
    assert (tmp_path / "cleared.onnx").read_bytes() == (out_dir / "m.onnx").read_bytes()
    # The cleared model beside the weights loads in onnx with every tensor.
    shutil.copy(tmp_path / "cleared.onnx", out_dir / "cleared.onnx")
    loaded = onnx.load(str(out_dir / "cleared.onnx"))
    onnx.checker.check_model(loaded)
    for name, value in all_tensors(original).items():
        np.testing.assert_array_equal(all_tensors(loaded)[name], value, err_msg=name)
    # clear on its own: the external tensors lose their bytes, nothing else changes.
    cli("external-data", "clear", out_dir / "cleared.onnx", tmp_path / "again.onnx")
    assert (tmp_path / "again.onnx").read_bytes() == (out_dir / "m.onnx").read_bytes()


def test_populate_reads_what_onnx_reads(tmp_path):
    src = tmp_path / "src.onnx"
    onnx.save(make_model(), str(src))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    model = out_dir / "m.onnx"
    cli("convert", src, model, "--external-data", "w.bin", "--size-threshold", "100",
        "--convert-attribute")
    cli("external-data", "populate", model, tmp_path / "populated.onnx", "--base-dir", out_dir)
    ours = onnx.load(str(tmp_path / "populated.onnx"), load_external_data=False)
    theirs = onnx.load(str(model), load_external_data=False)
    external_data_helper.load_external_data_for_model(theirs, str(out_dir))
    references = every_tensor(onnx.load(str(model), load_external_data=False))
    a, b = every_tensor(theirs), every_tensor(ours)
    assert a.keys() == b.keys()
    populated = 0
    for name, t in a.items():
        assert b[name].raw_data == t.raw_data, name
        if references[name].data_location == TensorProto.EXTERNAL:
            populated += 1
            # The references stay (onnx's loader makes the tensor inline instead).
            assert b[name].data_location == TensorProto.EXTERNAL, name
            assert entries(b[name]) == entries(references[name]), name
    assert populated >= 5
