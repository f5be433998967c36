"""ONNX Runtime pre-packed blobs against the real thing (onnxruntime), through the CLI:

- a model whose initializers carry blobs attached and saved by onnx_light (several keys, several
  buffers, checksums, packed or aligned) loads and runs in onnxruntime with the outputs of the
  model without blobs, and still loads in the onnx package;
- a model onnxruntime saved with its own pre-packed weights
  (`session.save_external_prepacked_constant_initializers`) loads in onnx_light: the blob and its
  bytes are those of onnxruntime's file;
- onnx_light re-saves that model (`convert`) and onnxruntime USES the blob from the new file:
  the same outputs; a blob replaced by zeros through onnx_light changes them (so onnxruntime
  really reads what onnx_light wrote, where onnx_light recorded it).
"""
import pathlib
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import binary


def cli(*args, ok=True):
    proc = subprocess.run([str(binary()), *map(str, args)], capture_output=True, text=True)
    if ok:
        assert proc.returncode == 0, f"onnx-light {args} failed: {proc.stderr}{proc.stdout}"
    return proc


def make_model(n=256) -> onnx.ModelProto:
    """x[4,n] -> MatMul W -> Add B -> Relu -> MatMul W2 -> out."""
    rng = np.random.default_rng(0)
    W = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "W")
    B = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "B")
    W2 = numpy_helper.from_array(rng.standard_normal((n, 8)).astype(np.float32), "W2")
    g = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["y"]),
            helper.make_node("Add", ["y", "B"], ["y2"]),
            helper.make_node("Relu", ["y2"], ["y3"]),
            helper.make_node("MatMul", ["y3", "W2"], ["out"]),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, n])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [4, 8])],
        [W, B, W2],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


X = np.random.default_rng(1).standard_normal((4, 256)).astype(np.float32)


def run(path) -> np.ndarray:
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": X})[0]


def entries(path) -> dict:
    m = onnx.load(str(path), load_external_data=False)
    return {t.name: [(e.key, e.value) for e in t.external_data] for t in m.graph.initializer}


def prepacked_ranges(value: str):
    key, *triples = value.split("|")
    return key, [tuple(int(x) if i < 2 else x for i, x in enumerate(t.split(";"))) for t in triples]


@pytest.fixture
def plain(tmp_path) -> pathlib.Path:
    p = tmp_path / "plain.onnx"
    onnx.save(make_model(), str(p))
    return p


@pytest.mark.filterwarnings("ignore:Ignoring unknown external data key")
@pytest.mark.parametrize("flags", [[], ["--checksum"], ["--align", "0"], ["--align", "65536", "--align-threshold", "0"]])
def test_onnxruntime_runs_a_model_with_onnx_light_blobs(tmp_path, plain, flags):
    rng = np.random.default_rng(7)
    blobs = {name: rng.integers(0, 256, size, dtype=np.uint8).tobytes()
             for name, size in [("a", 5000), ("b", 3), ("c", 70000), ("d", 1 << 20)]}
    for name, data in blobs.items():
        (tmp_path / name).write_bytes(data)
    out = tmp_path / "out"
    out.mkdir()
    cli("prepack", "attach", plain, out / "m.onnx",
        "--blob", "W", "Gemm+123", tmp_path / "a",
        "--blob", "W", "Gemm+123", tmp_path / "b",
        "--blob", "W", "other", tmp_path / "c",
        "--blob", "B", "kb", tmp_path / "b",
        "--blob", "W2", "big", tmp_path / "d", *flags)
    # onnxruntime: loads, runs, same outputs as the model without blobs.
    np.testing.assert_array_equal(run(out / "m.onnx"), run(plain))
    # The onnx package still loads it (with its data) and checks it.
    loaded = onnx.load(str(out / "m.onnx"))
    onnx.checker.check_model(loaded)
    for t in make_model().graph.initializer:
        got = next(x for x in loaded.graph.initializer if x.name == t.name)
        assert numpy_helper.to_array(got).tobytes() == numpy_helper.to_array(t).tobytes()
    # The entries are ONNX Runtime's, the bytes where they say.
    e = entries(out / "m.onnx")
    data = (out / "m.onnx.data").read_bytes()
    w = dict(e["W"])
    assert [k for k, _ in e["W"]][:3] == ["location", "offset", "length"]
    assert ("prepacked_0" in w) and ("prepacked_1" in w)
    key, triples = prepacked_ranges(w["prepacked_0"])
    assert key == "Gemm+123" and len(triples) == 2
    assert data[triples[0][0]:triples[0][0] + triples[0][1]] == blobs["a"]
    assert data[triples[1][0]:triples[1][0] + triples[1][1]] == blobs["b"]
    w_end = int(w["offset"]) + int(w["length"])
    assert triples[0][0] >= w_end, "right after the initializer"
    key, (big,) = prepacked_ranges(dict(e["W2"])["prepacked_0"])
    if flags[:2] == ["--align", "0"]:
        assert triples[0][0] == w_end, "packed"
    elif "--align-threshold" in flags:
        assert big[0] % 65536 == 0 and triples[0][0] % 65536 == 0
    else:
        assert big[0] % 4096 == 0 and triples[0][0] % 16 == 0
    checksums = {t[2] for v in [w["prepacked_0"], w["prepacked_1"]] for t in prepacked_ranges(v)[1]}
    if "--checksum" in flags:
        assert all(len(c) == 40 for c in checksums)
    else:
        assert checksums == {"0"}
    # onnx_light reads them back: list and extract, verifying checksums.
    listing = cli("prepack", "list", out / "m.onnx").stdout
    assert "pre-packed blobs: 4" in listing and "Gemm+123: 2 buffer(s), 5003 bytes" in listing
    for init, key, buf, want in [("W", "Gemm+123", 1, "b"), ("W2", "big", 0, "d"), ("B", "kb", 0, "b")]:
        cli("prepack", "extract", out / "m.onnx", init, key, tmp_path / "x.bin",
            "--buffer", buf, "--verify")
        assert (tmp_path / "x.bin").read_bytes() == blobs[want]
    assert "pre-packed blobs: 4" in cli("info", out / "m.onnx").stdout


@pytest.fixture
def ort_saved(tmp_path, plain) -> pathlib.Path:
    """The model optimized and saved by onnxruntime with its pre-packed weights."""
    out = tmp_path / "ort"
    out.mkdir()
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(out / "opt.onnx")
    so.add_session_config_entry("session.optimized_model_external_initializers_file_name", "opt.onnx.data")
    so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "100")
    so.add_session_config_entry("session.save_external_prepacked_constant_initializers", "1")
    ort.InferenceSession(str(plain), so, providers=["CPUExecutionProvider"])
    e = entries(out / "opt.onnx")
    if not any(k.startswith("prepacked") for v in e.values() for k, _ in v):
        pytest.skip("this onnxruntime build wrote no pre-packed weights")
    return out / "opt.onnx"


def test_onnxruntime_blobs_load_in_onnx_light(tmp_path, ort_saved):
    e = entries(ort_saved)
    data = (ort_saved.parent / "opt.onnx.data").read_bytes()
    listing = cli("prepack", "list", ort_saved).stdout
    n = 0
    for name, kv in e.items():
        for k, v in kv:
            if not k.startswith("prepacked"):
                continue
            key, triples = prepacked_ranges(v)
            assert f"{key}: {len(triples)} buffer(s)" in listing
            for i, (off, length, _) in enumerate(triples):
                cli("prepack", "extract", ort_saved, name, key, tmp_path / "x.bin", "--buffer", i)
                assert (tmp_path / "x.bin").read_bytes() == data[off:off + length]
                n += 1
    assert n > 0


def test_onnxruntime_uses_blobs_resaved_by_onnx_light(tmp_path, plain, ort_saved):
    want = run(plain)
    np.testing.assert_allclose(run(ort_saved), want, rtol=1e-5, atol=1e-5)
    # Re-saved by onnx_light (another layout: 64 KiB alignment, another file name).
    re = tmp_path / "re"
    re.mkdir()
    cli("convert", ort_saved, re / "m.onnx", "--external-data", "w.bin", "--align", "65536",
        "--size-threshold", "100")
    before = {n: [v for k, v in kv if k.startswith("prepacked")] for n, kv in entries(ort_saved).items()}
    after = {n: [v for k, v in kv if k.startswith("prepacked")] for n, kv in entries(re / "m.onnx").items()}
    assert {n: [prepacked_ranges(v)[0] for v in vs] for n, vs in before.items()} == \
        {n: [prepacked_ranges(v)[0] for v in vs] for n, vs in after.items()}, "same blob keys"
    np.testing.assert_allclose(run(re / "m.onnx"), want, rtol=1e-5, atol=1e-5)
    # The same blobs replaced by zeros through onnx_light: onnxruntime computes with them.
    bad = tmp_path / "bad"
    bad.mkdir()
    args = []
    for name, vs in before.items():
        for v in vs:
            key, triples = prepacked_ranges(v)
            for i, (_, length, _) in enumerate(triples):
                z = tmp_path / f"zero_{name}_{i}"
                z.write_bytes(bytes(length))
                args += ["--blob", name, key, z]
    cli("prepack", "attach", ort_saved, bad / "m.onnx", "--size-threshold", "100", *args)
    assert not np.allclose(run(bad / "m.onnx"), want, rtol=1e-3, atol=1e-3), \
        "onnxruntime reads the blobs onnx_light wrote"


# Values of a `prepacked_0` entry: onnxruntime's ExternalDataInfo::Create either ignores them
# (empty, no triple, incomplete triples), reads them, or refuses them (a number std::from_chars
# does not take; a range outside the file when the blob is mapped).
MALFORMED = [
    "", "k", "k|", "k|1;2", "k|1;2;3;4", "|||", "k|0;16;0|1;2|x", "k||0;;4;0", "|0;4;0|8;4;0",
    "k|-0;4;0", "k|0;00004;0", "k|0;0x4;0", "k|0;0XaB;0", "k|0;16;0|0;16;0",
    "k|x;16;0", "k|0;16;0|1;-2;0", "k| 1;16;0", "k|1 ;16;0", "k|\t1;2;0", "k|1;2\n;0",
    "k|+0;4;0", "k|0;+4;0", "k|0x4;4;0", "k|1e2;4;0", "k|0;-0;0", "k|0;0x;0", "k|0;0xg;0",
    "k|0;0x-1;0", "k|0;0x0x1;0", "k|99999999999999999999;4;0", "k|0;18446744073709551616;0",
    "k|0;0x10000000000000000;0",
    "k|-5;4;0", "k|999999999;4;0", "k|0;999999999;0", "k|9223372036854775807;1;0",
    "k|1;18446744073709551615;0", "k|-9223372036854775808;1;0", "k|0;0xFFFFFFFFFFFFFFFF;0",
]


@pytest.mark.filterwarnings("ignore:Ignoring unknown external data key")
def test_malformed_entries_as_onnxruntime_handles_them(tmp_path, plain):
    """onnx_light accepts exactly the entries onnxruntime accepts (differential, on the same
    files), and runs stay equal where both accept."""
    out = tmp_path / "m"
    out.mkdir()
    cli("convert", plain, out / "m.onnx", "--size-threshold", "100")
    base = onnx.load(str(out / "m.onnx"), load_external_data=False)
    want = run(plain)
    disagree = []
    for i, value in enumerate(MALFORMED):
        m = onnx.ModelProto()
        m.CopyFrom(base)
        w = next(t for t in m.graph.initializer if t.name == "B")
        e = w.external_data.add()
        e.key, e.value = "prepacked_0", value
        p = out / f"c{i}.onnx"
        onnx.save(m, str(p))
        try:
            np.testing.assert_array_equal(run(p), want)
            ort_ok = True
        except Exception:  # noqa: BLE001 - onnxruntime refused the model
            ort_ok = False
        ours = cli("info", p, ok=False)
        checked = cli("check", p, ok=False)
        assert (ours.returncode == 0) == (checked.returncode == 0), (value, checked.stdout)
        if (ours.returncode == 0) != ort_ok:
            disagree.append((value, ort_ok, ours.stderr))
    assert not disagree, disagree
