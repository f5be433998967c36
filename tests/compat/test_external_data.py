"""External data against the real thing, both ways:

- models saved by onnx_light with external data (one file, split files, per-tensor files,
  64 KiB-aligned, checksummed, attribute tensors moved) load in the onnx package (`onnx.load`,
  `onnx.checker`) and in onnxruntime (`InferenceSession(path)`) and give the same outputs as the
  originals;
- models the onnx package saved with external data load in onnx_light (through the CLI:
  `onnx-light convert --inline`, `onnx-light check`) with identical tensor bytes;
- the path rules hold through the CLI: refused, nothing read or written outside.
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


def make_model() -> onnx.ModelProto:
    """x[1,64] -> MatMul W -> Add B -> Mul c (Constant attribute) -> If(cond) with large
    initializers in both branches -> Add small -> out. Large tensors of several types live in
    initializers, a node attribute and two subgraphs."""
    rng = np.random.default_rng(0)
    W = numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "W")
    B = numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "B")
    small = numpy_helper.from_array(np.float32([0.5]), "small")
    shape = numpy_helper.from_array(np.int64([1, 64]), "shape")
    big_i64 = numpy_helper.from_array(rng.integers(-5, 5, 300).astype(np.int64), "big_i64")
    half = numpy_helper.from_array(rng.standard_normal(1000).astype(np.float16), "half")
    cond = numpy_helper.from_array(np.array(True), "cond")
    const = helper.make_node(
        "Constant", [], ["c"],
        value=numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "c_value"))

    def branch(name, seed):
        T = numpy_helper.from_array(
            np.random.default_rng(seed).standard_normal((64, 64)).astype(np.float32), f"{name}_T")
        return helper.make_graph(
            [helper.make_node("MatMul", ["z", f"{name}_T"], [f"{name}_out"])], name, [],
            [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [1, 64])], [T])

    nodes = [
        const,
        helper.make_node("MatMul", ["x", "W"], ["y"]),
        helper.make_node("Add", ["y", "B"], ["y2"]),
        helper.make_node("Mul", ["y2", "c"], ["z"]),
        helper.make_node("If", ["cond"], ["w"], then_branch=branch("then", 1),
                         else_branch=branch("else", 2)),
        helper.make_node("Add", ["w", "small"], ["out"]),
        helper.make_node("Reshape", ["big_i64", "shape_len"], ["ints"]),
        helper.make_node("Cast", ["half"], ["halves"], to=TensorProto.FLOAT),
    ]
    shape_len = numpy_helper.from_array(np.int64([300]), "shape_len")
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 64]),
         helper.make_tensor_value_info("ints", TensorProto.INT64, [300]),
         helper.make_tensor_value_info("halves", TensorProto.FLOAT, [1000])],
        [W, B, small, shape, big_i64, half, cond, shape_len])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    onnx.checker.check_model(m)
    return m


def all_tensors(m: onnx.ModelProto):
    """name -> numpy array of every tensor: initializers, attribute tensors, subgraphs."""
    out = {}

    def graph(g):
        for t in g.initializer:
            out[t.name] = numpy_helper.to_array(t)
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    out[a.t.name or n.output[0]] = numpy_helper.to_array(a.t)
                if a.type == onnx.AttributeProto.GRAPH:
                    graph(a.g)

    graph(m.graph)
    return out


def raw_tensors(m: onnx.ModelProto):
    """name -> raw bytes (or typed-field serialization) of every tensor."""
    out = {}

    def graph(g):
        for t in g.initializer:
            out[t.name] = t.raw_data or t.SerializeToString()
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    out[a.t.name] = a.t.raw_data or a.t.SerializeToString()
                if a.type == onnx.AttributeProto.GRAPH:
                    graph(a.g)

    graph(m.graph)
    return out


def run(path):
    x = np.random.default_rng(7).standard_normal((1, 64)).astype(np.float32)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})


def external_entries(path):
    m = onnx.load(str(path), load_external_data=False)
    out = {}

    def graph(g):
        for t in g.initializer:
            if t.data_location == TensorProto.EXTERNAL:
                out[t.name] = {e.key: e.value for e in t.external_data}
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR and a.t.data_location == TensorProto.EXTERNAL:
                    out[a.t.name] = {e.key: e.value for e in a.t.external_data}
                if a.type == onnx.AttributeProto.GRAPH:
                    graph(a.g)

    graph(m.graph)
    return out


LAYOUTS = {
    "one_file": ["--external-data", "weights.bin", "--size-threshold", "100"],
    "per_tensor": ["--per-tensor-files", "--size-threshold", "100", "--convert-attribute"],
    "aligned_64k": ["--external-data", "w.bin", "--align", "65536", "--align-threshold", "0",
                    "--size-threshold", "100", "--convert-attribute"],
    "split": ["--external-data", "w.bin", "--max-file-size", "20000", "--size-threshold", "100",
              "--checksum"],
    "packed_default_threshold": ["--align", "0"],
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_onnx_light_external_data_loads_in_onnx_and_onnxruntime(layout, tmp_path):
    src = tmp_path / "src.onnx"
    original = make_model()
    onnx.save(original, str(src))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "model.onnx"
    cli("convert", src, out, *LAYOUTS[layout])

    entries = external_entries(out)
    assert entries, "some tensors are external"
    assert all("basepath" not in e for e in entries.values())
    if layout != "packed_default_threshold":
        # Every tensor of at least 100 bytes is external (attributes only when converted).
        assert {"W", "B", "then_T", "else_T", "big_i64", "half"} <= set(entries)
    if "--convert-attribute" in LAYOUTS[layout]:
        assert "c_value" in entries
    else:
        assert "c_value" not in entries
    if layout == "aligned_64k":
        assert all(int(e["offset"]) % 65536 == 0 for e in entries.values())
    if layout == "split":
        files = {e["location"] for e in entries.values()}
        assert len(files) >= 2 and "w.bin.1" in files
        assert all((out_dir / f).stat().st_size <= 20000 for f in files)
        assert all("checksum" in e for e in entries.values())
    if layout == "per_tensor":
        assert len({e["location"] for e in entries.values()}) == len(entries)
    assert not any(f.name.startswith(".") for f in out_dir.iterdir()), "no temporary files left"

    # The onnx package: same tensors, checker passes (it resolves the external files).
    onnx.checker.check_model(str(out))
    loaded = onnx.load(str(out))
    expected, got = all_tensors(original), all_tensors(loaded)
    assert expected.keys() == got.keys()
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)

    # onnxruntime: same outputs as the original.
    for a, b in zip(run(src), run(out)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("one_file", [True, False], ids=["one_file", "per_tensor"])
@pytest.mark.parametrize("threshold", [0, 1024])
def test_onnx_saved_external_data_loads_in_onnx_light(one_file, threshold, tmp_path):
    original = make_model()
    plain = tmp_path / "plain.onnx"
    onnx.save(original, str(plain))  # before: the onnx package's external save mutates the model
    path = tmp_path / "onnx_saved.onnx"
    onnx.save_model(original, str(path), save_as_external_data=True,
                    all_tensors_to_one_file=one_file, location="weights.data" if one_file else None,
                    size_threshold=threshold, convert_attribute=True)
    reference = onnx.load(str(path))  # the onnx package's own view, external data loaded
    assert external_entries(path), "the onnx package wrote external data"

    check = cli("check", path)
    assert "OK" in check.stdout

    inline = tmp_path / "inline.onnx"
    cli("convert", path, inline, "--inline")
    got = onnx.load(str(inline))
    assert not external_entries(inline)
    assert raw_tensors(got) == raw_tensors(reference)
    # (onnxruntime cannot read shape inputs from external data, so the onnx-saved model itself
    # is run only when small tensors stayed inline.)
    sources = [plain, path] if threshold else [plain]
    for src in sources:
        for a, b in zip(run(src), run(inline)):
            np.testing.assert_array_equal(a, b)

    # And re-saved by onnx_light with external data, still the same bytes.
    again = tmp_path / "again" / "m.onnx"
    again.parent.mkdir()
    cli("convert", path, again, "--size-threshold", "0", "--checksum")
    assert raw_tensors(onnx.load(str(again))) == raw_tensors(reference)


def test_check_detects_corruption_and_missing_files(tmp_path):
    src = tmp_path / "src.onnx"
    onnx.save(make_model(), str(src))
    out = tmp_path / "m.onnx"
    cli("convert", src, out, "--external-data", "w.bin", "--size-threshold", "100", "--checksum")
    assert "OK" in cli("check", out).stdout
    data = bytearray((tmp_path / "w.bin").read_bytes())
    data[10] ^= 0xFF
    (tmp_path / "w.bin").write_bytes(bytes(data))
    bad = cli("check", out, ok=False)
    assert bad.returncode != 0
    assert "checksum mismatch" in bad.stdout
    assert "OK" in cli("check", out, "--no-checksum").stdout
    (tmp_path / "w.bin").unlink()
    missing = cli("check", out, ok=False)
    assert missing.returncode != 0 and "w.bin" in missing.stdout


@pytest.mark.parametrize("location", ["../outside/secret.bin", "/ABS", "link.bin",
                                      "*/_ORT_MEM_ADDR_/*", "..\\outside\\secret.bin"])
def test_path_attacks_are_refused_through_the_cli(location, tmp_path):
    model_dir, outside = tmp_path / "model", tmp_path / "outside"
    model_dir.mkdir()
    outside.mkdir()
    secret = outside / "secret.bin"
    secret.write_bytes(np.arange(64 * 64, dtype=np.float32).tobytes())
    (model_dir / "link.bin").symlink_to(secret)
    if location == "/ABS":
        location = str(secret)
    m = make_model()
    w = next(t for t in m.graph.initializer if t.name == "W")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value=location)
    path = model_dir / "evil.onnx"
    onnx.save(m, str(path))
    before = {p: p.read_bytes() for p in outside.iterdir()}

    for args in (["check", path], ["convert", path, model_dir / "out.onnx", "--inline"]):
        proc = cli(*args, ok=False)
        assert proc.returncode != 0
        assert "path refused" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
        assert location in proc.stdout + proc.stderr
    assert not (model_dir / "out.onnx").exists()
    assert {p: p.read_bytes() for p in outside.iterdir()} == before


@pytest.mark.parametrize("location", ["../escaped.bin", "sub/../../escaped.bin"])
def test_convert_never_writes_outside_the_directory(location, tmp_path):
    src = tmp_path / "src.onnx"
    onnx.save(make_model(), str(src))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = cli("convert", src, out_dir / "m.onnx", "--external-data", location, ok=False)
    assert proc.returncode != 0 and "path refused" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert list(out_dir.iterdir()) == []


def test_absolute_location_is_reduced_to_its_file_name(tmp_path):
    """As the C++ library does: an absolute location names a file in the model's directory."""
    src = tmp_path / "src.onnx"
    onnx.save(make_model(), str(src))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    elsewhere = tmp_path / "elsewhere" / "w.bin"
    cli("convert", src, out_dir / "m.onnx", "--external-data", elsewhere)
    assert not elsewhere.exists()
    assert {e["location"] for e in external_entries(out_dir / "m.onnx").values()} == {"w.bin"}
    onnx.checker.check_model(str(out_dir / "m.onnx"), full_check=True)


def test_resave_keeps_the_weight_file_name(tmp_path):
    """Re-saving over a model with external data keeps the name asked for, and leaves no
    alternate, temporary or lock file."""
    src = tmp_path / "src.onnx"
    original = make_model()
    onnx.save(original, str(src))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "m.onnx"
    for source in (src, out, out):
        cli("convert", source, out, "--external-data", "weights.bin", "--size-threshold", "100")
        assert sorted(p.name for p in out_dir.iterdir()) == ["m.onnx", "weights.bin"]
        assert {e["location"] for e in external_entries(out).values()} == {"weights.bin"}
        loaded = onnx.load(str(out))
        for name, value in all_tensors(original).items():
            np.testing.assert_array_equal(all_tensors(loaded)[name], value, err_msg=name)


def sparse_model(consumed: bool) -> onnx.ModelProto:
    """A 64x64 sparse initializer S (500 values, large enough to be externalized): consumed,
    out = x + dense(S) (onnxruntime densifies it; onnx's shape inference has no sparse inputs,
    so only the basic checker applies), or unused, out = x (the full checker applies)."""
    rng = np.random.default_rng(3)
    idx = np.sort(rng.choice(64 * 64, 500, replace=False)).astype(np.int64)
    values = numpy_helper.from_array(rng.standard_normal(500).astype(np.float32), "S")
    indices = numpy_helper.from_array(idx, "S_indices")
    S = helper.make_sparse_tensor(values, indices, [64, 64])
    node = (helper.make_node("Add", ["x", "S"], ["out"]) if consumed
            else helper.make_node("Identity", ["x"], ["out"]))
    g = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [64, 64])],
        sparse_initializer=[S])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    onnx.checker.check_model(m, full_check=not consumed)
    return m


def dense_of(m: onnx.ModelProto) -> np.ndarray:
    s = m.graph.sparse_initializer[0]
    dense = np.zeros(64 * 64, np.float32)
    dense[numpy_helper.to_array(s.indices)] = numpy_helper.to_array(s.values)
    return dense.reshape(64, 64)


def test_sparse_initializers_stay_readable_by_onnx_and_onnxruntime(tmp_path):
    """A default save keeps sparse initializers inline: onnx.load gives their values and the
    checker passes (the full checker on the model that does not consume them); onnxruntime
    runs it. `--externalize-sparse` moves them (onnxruntime and onnx_light read them)."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    unused = tmp_path / "unused.onnx"
    onnx.save(sparse_model(False), str(unused))
    cli("convert", unused, out_dir / "unused.onnx", "--size-threshold", "100")
    onnx.checker.check_model(onnx.load(str(out_dir / "unused.onnx")), full_check=True)
    onnx.checker.check_model(str(out_dir / "unused.onnx"), full_check=True)

    src = tmp_path / "src.onnx"
    original = sparse_model(True)
    onnx.save(original, str(src))
    x = np.random.default_rng(5).standard_normal((64, 64)).astype(np.float32)
    expected = x + dense_of(original)
    out = out_dir / "m.onnx"
    cli("convert", src, out, "--size-threshold", "100")
    loaded = onnx.load(str(out))
    onnx.checker.check_model(loaded)
    np.testing.assert_array_equal(dense_of(loaded), dense_of(original))
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], expected, rtol=1e-6)

    ext = out_dir / "ext.onnx"
    cli("convert", src, ext, "--size-threshold", "100", "--externalize-sparse")
    raw = onnx.load(str(ext), load_external_data=False)
    assert raw.graph.sparse_initializer[0].values.data_location == TensorProto.EXTERNAL
    sess = ort.InferenceSession(str(ext), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], expected, rtol=1e-6)
    back = out_dir / "back.onnx"
    cli("convert", ext, back, "--inline")
    np.testing.assert_array_equal(dense_of(onnx.load(str(back))), dense_of(original))
