"""The package against the onnx package and onnxruntime: to_onnx/from_onnx identity (also over
the protobuf size limit), onnx's external-data scenarios reproduced and cross-checked, models
saved by the package run in onnxruntime with identical outputs, and the thin wrappers."""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper as onh

import onnx_light as ol
from backend_data import models
from onnx_light import numpy_helper as nh


def test_to_onnx_from_onnx_identity():
    for path in models():
        data = path.read_bytes()
        ours = ol.load_from_string(data, load_external_data=False)
        proto = ours.to_onnx()
        assert isinstance(proto, onnx.ModelProto)
        assert proto.SerializeToString() == onnx.load_from_string(data).SerializeToString()
        back = ol.from_onnx(proto)
        assert back.SerializeToString() == ours.SerializeToString()


def weights_model(n=4, size=4096, attr=True):
    rng = np.random.default_rng(0)
    inits = [onh.from_array(rng.standard_normal((size,)).astype(np.float32), f"w{i}") for i in range(n)]
    inits.append(onh.from_array(np.arange(3, dtype=np.float32), "small"))
    nodes = [helper.make_node("Add", ["x", "w0"], ["y"])]
    if attr:
        nodes.append(helper.make_node("Constant", [], ["c"], value=onh.from_array(
            rng.standard_normal((size,)).astype(np.float32), "cval")))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [size])],
                          [helper.make_tensor_value_info("y", 1, [size])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_to_onnx_over_the_protobuf_limit():
    """The >2 GB path, forced with a small limit: payloads travel outside protobuf's parse."""
    m = weights_model()
    ours = ol.from_onnx(m, _limit=1000)
    assert ours.SerializeToString() == m.SerializeToString()
    # from_onnx left the onnx model as it was.
    assert m.SerializeToString() == weights_model().SerializeToString()
    back = ol.to_onnx(ours, _limit=1000)
    assert back.SerializeToString() == m.SerializeToString()


def external_names(path):
    m = onnx.load(path, load_external_data=False)
    tensors = list(m.graph.initializer) + [a.t for n in m.graph.node for a in n.attribute if a.HasField("t")]
    return sorted(t.name for t in tensors if t.data_location == onnx.TensorProto.EXTERNAL)


def arrays(path, **kw):
    m = onnx.load(path, **kw)
    tensors = list(m.graph.initializer) + [a.t for n in m.graph.node for a in n.attribute if a.HasField("t")]
    return {t.name: onh.to_array(t) for t in tensors}


@pytest.mark.parametrize("case", [
    dict(size_threshold=1024),
    dict(size_threshold=0),
    dict(size_threshold=1024, all_tensors_to_one_file=False),
    dict(size_threshold=1024, location="weights.bin"),
    dict(size_threshold=1024, convert_attribute=True),
])
def test_external_data_scenarios_match_onnx(tmp_path, case):
    m = weights_model()
    expected = arrays_of(m)
    ref_dir, our_dir = tmp_path / "ref", tmp_path / "ours"
    ref_dir.mkdir()
    our_dir.mkdir()
    # (onnx.save converts the model it is given to external data in place: give it its own.)
    ol.save(ol.from_onnx(m), our_dir / "m.onnx", save_as_external_data=True, **case)
    onnx.save(m, ref_dir / "m.onnx", save_as_external_data=True, **case)
    assert external_names(our_dir / "m.onnx") == external_names(ref_dir / "m.onnx")
    if "location" in case:
        assert (our_dir / case["location"]).exists()
    if case.get("all_tensors_to_one_file") is False:
        assert len(list(our_dir.iterdir())) == 1 + len(external_names(ref_dir / "m.onnx"))
    # Each package loads what the other wrote, with the same values.
    for d in (ref_dir, our_dir):
        assert_arrays(arrays(d / "m.onnx"), expected)
        ours = ol.load(d / "m.onnx")
        assert_arrays({t.name: nh.to_array(t) for t in ol._iter_tensors(ours)}, expected)


def arrays_of(m):
    tensors = list(m.graph.initializer) + [a.t for n in m.graph.node for a in n.attribute if a.HasField("t")]
    return {t.name: onh.to_array(t) for t in tensors}


def assert_arrays(got, expected):
    assert sorted(got) == sorted(expected)
    for k in expected:
        assert np.array_equal(got[k], expected[k]), k


def test_load_with_base_dir_and_in_place(tmp_path):
    m = weights_model()
    (tmp_path / "data").mkdir()
    onnx.save(m, tmp_path / "data" / "m.onnx", save_as_external_data=True, size_threshold=1024)
    shutil.move(tmp_path / "data" / "m.onnx", tmp_path / "m.onnx")
    with pytest.raises((OSError, ValueError)):
        ol.load(tmp_path / "m.onnx")
    ours = ol.load(tmp_path / "m.onnx", base_dir=tmp_path / "data")
    ref = onnx.load(tmp_path / "m.onnx", load_external_data=False)
    onnx.load_external_data_for_model(ref, str(tmp_path / "data"))
    assert ours.SerializeToString() == ref.SerializeToString()
    # In place, as onnx.load_external_data_for_model; views of the entries keep their content.
    lazy = ol.load(tmp_path / "m.onnx", load_external_data=False)
    t = lazy.graph.initializer[0]
    entry = t.external_data[0]
    assert ol.load_external_data_for_model(lazy, tmp_path / "data") == 4
    assert entry.key == "location" and len(t.external_data) == 0
    assert lazy.SerializeToString() == ref.SerializeToString()


def test_checksums(tmp_path):
    m = ol.from_onnx(weights_model())
    ol.save(m, tmp_path / "m.onnx", save_as_external_data=True, checksum=True)
    lazy = ol.load(tmp_path / "m.onnx", load_external_data=False)
    report = ol.check_external_data(lazy, tmp_path, verify_checksums=True)
    assert report["problems"] == [] and report["checksums_verified"] >= 1 and report["tensors"] == 4
    # onnx ignores the checksum entries and loads the same values.
    assert_arrays(arrays(tmp_path / "m.onnx"), arrays_of(weights_model()))
    data = tmp_path / "m.onnx.data"
    b = bytearray(data.read_bytes())
    b[100] ^= 0xFF
    data.write_bytes(bytes(b))
    report = ol.check_external_data(lazy, tmp_path, verify_checksums=True)
    assert report["problems"] and "checksum" in report["problems"][0].lower()
    with pytest.raises(ol.ExternalDataError):
        ol.load_external_data_for_model(lazy, tmp_path, verify_checksums=True)


def run_ort(path, x):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x})


def test_onnxruntime_runs_what_the_package_saves(tmp_path):
    sample = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "mlp.onnx")
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    expected = run_ort(sample, x)
    m = ol.load(sample)
    ol.save(m, tmp_path / "a.onnx")
    ol.save(m, tmp_path / "b.onnx", save_as_external_data=True, size_threshold=0)
    with open(tmp_path / "c.onnx", "wb") as f:
        ol.save(m, f)
    for p in ("a.onnx", "b.onnx", "c.onnx"):
        got = run_ort(tmp_path / p, x)
        assert all(np.array_equal(a, b) for a, b in zip(got, expected)), p
    # A model built and edited through the views.
    m2 = ol.from_onnx(weights_model(attr=False))
    m2.graph.node[0].op_type = "Sub"
    ol.save(m2, tmp_path / "d.onnx", save_as_external_data=True)
    xs = np.ones(4096, np.float32)
    got = run_ort(tmp_path / "d.onnx", xs)[0]
    assert np.array_equal(got, xs - onh.to_array(weights_model().graph.initializer[0]))


def test_info_and_main(tmp_path):
    sample = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "mlp.onnx")
    text = ol.info(sample)
    assert "MatMul x2" in text and "initializers: 4" in text
    r = subprocess.run([sys.executable, "-m", "onnx_light", "info", sample], capture_output=True, text=True)
    assert r.returncode == 0 and "MatMul x2" in r.stdout
    r = subprocess.run([sys.executable, "-m", "onnx_light", "info", str(tmp_path / "none.onnx")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "none.onnx" in r.stderr


def test_encrypt_params_consolidate(tmp_path):
    sample = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "mlp.onnx")
    ol.encrypt_file(sample, tmp_path / "e.bin", "k")
    with pytest.raises(ol.WrongKeyError):
        ol.decrypt_file(tmp_path / "e.bin", tmp_path / "d.onnx", "bad")
    ol.decrypt_file(tmp_path / "e.bin", tmp_path / "d.onnx", "k")
    assert (tmp_path / "d.onnx").read_bytes() == open(sample, "rb").read()
    m = ol.load(sample)
    blob = ol.save_params(m)
    tensors = ol.load_params(blob)
    assert [t.name for t in tensors] == [t.name for t in m.graph.initializer]
    for a, b in zip(tensors, m.graph.initializer):
        assert np.array_equal(nh.to_array(a), nh.to_array(b))
    before = m.SerializeToString()
    assert ol.consolidate_tensors(m, alignment=64) > 0
    assert m.SerializeToString() == before
