"""Aligned single-file saves (``ol.save(..., align=N)``, docs/aligned-models.md): the payloads
start at multiples of N in the file; the file loads in the onnx package (the same tensors, the
checker passes) and in onnxruntime (the same outputs as the unaligned file); a re-save by
protobuf (``onnx.save(onnx.load(...))``) stays loadable by onnx_light and onnxruntime; without
``align`` the bytes are protobuf's."""
import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import backend_data

import onnx_light as ol
from onnx_light import numpy_helper
from ort_outputs import same as _same

PROVIDERS = ["CPUExecutionProvider"]
# The padding field's tag (field 536870911, wire type 2).
PADDING_TAG = bytes([0xFA, 0xFF, 0xFF, 0xFF, 0x0F])


def _feed(model_path):
    """The first test data set's tensor inputs of a backend model (None if it has others)."""
    data = model_path.parent / "test_data_set_0"
    m = onnx.load(str(model_path), load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    feed = {}
    for k, vi in enumerate(i for i in m.graph.input if i.name not in inits):
        f = data / f"input_{k}.pb"
        if not f.exists() or not vi.type.HasField("tensor_type"):
            return None
        feed[vi.name] = onnx.numpy_helper.to_array(onnx.load_tensor(str(f)))
    return feed


def _run(path, feed):
    try:
        return [np.asarray(o) for o in ort.InferenceSession(str(path), providers=PROVIDERS).run(None, feed)]
    except Exception as e:  # noqa: BLE001 - compared by type
        return type(e).__name__


def _tensors(m):
    """Every TensorProto of an onnx model (graphs, attributes, subgraphs, functions, sparse)."""
    out = []

    def graph(g):
        out.extend(g.initializer)
        for s in g.sparse_initializer:
            out.extend([s.values, s.indices])
        for n in g.node:
            node(n)

    def node(n):
        for a in n.attribute:
            if a.HasField("t"):
                out.append(a.t)
            out.extend(a.tensors)
            if a.HasField("sparse_tensor"):
                out.extend([a.sparse_tensor.values, a.sparse_tensor.indices])
            if a.HasField("g"):
                graph(a.g)
            for g in a.graphs:
                graph(g)

    graph(m.graph)
    for f in m.functions:
        for n in f.node:
            node(n)
    return out


def _check_onnx_loads_the_same(aligned, original):
    """onnx.load of the aligned file: the checker passes, every tensor's array equals the
    original's, and the model is the original once the unknown fields (the paddings) are
    dropped."""
    a, o = onnx.load(str(aligned)), onnx.load(str(original))
    onnx.checker.check_model(a)
    ta, to = _tensors(a), _tensors(o)
    assert len(ta) == len(to)
    for x, y in zip(ta, to):
        assert x.name == y.name
        assert np.array_equal(onnx.numpy_helper.to_array(x), onnx.numpy_helper.to_array(y), equal_nan=True)
    a.DiscardUnknownFields()
    assert a == o


def _aligned_offsets(data, align, min_len=64):
    """The offsets of the payloads of at least ``min_len`` bytes in ``data``, which must all
    be multiples of ``align``."""
    offsets = []
    for t in _tensors(onnx.load_from_string(data)):
        raw = t.raw_data
        if len(raw) >= min_len:
            at = data.find(raw)
            assert at >= 0
            offsets.append(at)
    assert all(o % align == 0 for o in offsets), (align, offsets)
    return offsets


def test_backend_models_load_aligned_in_onnx_and_onnxruntime(tmp_path):
    ran = padded = 0
    for k, path in enumerate(backend_data.models()):
        feed = _feed(path)
        if feed is None:
            continue
        theirs = _run(path, feed)
        model = ol.load(path)
        original = tmp_path / f"{k}.onnx"
        ol.save(model, original)
        assert original.read_bytes() == path.read_bytes(), path  # the default: protobuf's bytes
        for align in (64, 4096):
            out = tmp_path / f"{k}-{align}.onnx"
            ol.save(model, out, align=align, size_threshold=64)
            data = out.read_bytes()
            _aligned_offsets(data, align)
            padded += data.count(PADDING_TAG)
            _check_onnx_loads_the_same(out, path)
            assert _same(theirs, _run(out, feed)), (path, align)
            if align != 4096:
                continue
            # A re-save by protobuf (the paddings move after raw_data as unknown fields).
            resaved = tmp_path / f"{k}-{align}-protobuf.onnx"
            onnx.save(onnx.load(str(out)), str(resaved))
            assert ol.load(resaved) == model, path
            assert _same(theirs, _run(resaved, feed)), (path, align)
        ran += not isinstance(theirs, str)
    assert ran >= 50 and padded >= 50, (ran, padded)


def _sparse_and_attribute_model():
    """y = x + Constant(value) + w + Constant(sparse_value) + s: tensors in an initializer, a
    sparse initializer, and a Constant's dense and sparse attributes; 4096 floats each."""
    h, n = ol.helper, 4096
    rng = np.random.default_rng(3)
    dense = lambda name: numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), name)  # noqa: E731

    def sparse(name):
        idx = np.sort(rng.choice(n, 1500, replace=False)).astype(np.int64)
        values = numpy_helper.from_array(rng.standard_normal(1500).astype(np.float32), name)
        return h.make_sparse_tensor(values, numpy_helper.from_array(idx, name + "_indices"), [n])

    nodes = [h.make_node("Constant", [], ["c"], value=dense("cv")),
             h.make_node("Constant", [], ["cs"], sparse_value=sparse("csv")),
             h.make_node("Add", ["x", "c"], ["a"]),
             h.make_node("Add", ["a", "w"], ["b"]),
             h.make_node("Add", ["b", "cs"], ["d"]),
             h.make_node("Add", ["d", "s"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", 1, [n])],
                     [h.make_tensor_value_info("y", 1, [n])], [dense("w")])
    g.sparse_initializer.append(sparse("s"))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 10
    return m


def test_a_model_with_sparse_and_attribute_tensors(tmp_path):
    model = _sparse_and_attribute_model()
    plain, out = tmp_path / "plain.onnx", tmp_path / "aligned.onnx"
    ol.save(model, plain)
    ol.save(model, out, align=4096)
    data = out.read_bytes()
    assert len(_aligned_offsets(data, 4096, min_len=1024)) == 6
    assert data.count(PADDING_TAG) >= 6
    _check_onnx_loads_the_same(out, plain)
    feed = {"x": np.arange(4096, dtype=np.float32)}
    theirs = _run(plain, feed)
    assert not isinstance(theirs, str), theirs
    assert _same(theirs, _run(out, feed))
    resaved = tmp_path / "protobuf.onnx"
    onnx.save(onnx.load(str(out)), str(resaved))
    assert ol.load(resaved) == model
    assert _same(theirs, _run(resaved, feed))
    # A no-copy load maps the file and borrows every payload at its aligned place.
    m = ol.load(out, no_copy=True)
    assert ol.load(out) == model and m == model
    # The same bytes to a file object, and from write_model.
    buf = io.BytesIO()
    ol.save(model, buf, align=4096)
    assert buf.getvalue() == data
    ol.write_model(model, tmp_path / "w.onnx", align=4096)
    assert (tmp_path / "w.onnx").read_bytes() == data


def test_align_pads_payloads_of_at_least_size_threshold(tmp_path):
    """Payloads under ``size_threshold`` (default 1024, the CLI's too) keep protobuf's places."""
    h = ol.helper
    inits = [numpy_helper.from_array(np.full(n, 1, np.uint8), f"w{n}") for n in (100, 1023, 1024, 5000)]
    g = h.make_graph([], "g", [], [h.make_tensor_value_info("w100", 2, [100])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    by_threshold = {}
    for threshold in (None, 64, 2000):
        kw = {} if threshold is None else {"size_threshold": threshold}
        out = tmp_path / f"t{threshold}.onnx"
        ol.save(m, out, align=4096, **kw)
        data = out.read_bytes()
        by_threshold[threshold] = data.count(PADDING_TAG)
        _aligned_offsets(data, 4096, min_len=threshold or 1024)
        assert ol.load(out) == m
        buf = io.BytesIO()
        ol.save(m, buf, align=4096, **kw)
        assert buf.getvalue() == data
    assert by_threshold == {None: 2, 64: 4, 2000: 1}, by_threshold


def test_bad_align_values_are_errors(tmp_path):
    model = _sparse_and_attribute_model()
    for bad in (1, 32, 100, 1 << 17):
        with pytest.raises(ValueError, match="inline_alignment"):
            ol.save(model, tmp_path / "bad.onnx", align=bad)
    assert not (tmp_path / "bad.onnx").exists()
    with pytest.raises(ValueError, match="save_as_external_data"):
        ol.save(model, tmp_path / "x.onnx", align=4096, save_as_external_data=True)
    with pytest.raises(ValueError, match="protobuf format"):
        ol.save(model, tmp_path / "x.txt", format="textproto", align=4096)
