"""onnx_light.onnxruntime.InferenceSession against onnxruntime's own loading: identical outputs
on the onnx wheel's backend test models, and weights that ONNX Runtime uses in place (the
OrtValues point into onnx_light's buffers; the process's anonymous memory does not grow by the
weights' size)."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import backend_data

import onnx_light as ol
from onnx_light import numpy_helper
from onnx_light.onnxruntime import InferenceSession, shared_initializers
from ort_outputs import same as _same

PROVIDERS = ["CPUExecutionProvider"]


def _inputs(model_path):
    """The first test data set's inputs of a backend model, as ORT feeds (None when it has
    inputs of other kinds than tensors)."""
    data = model_path.parent / "test_data_set_0"
    m = onnx.load(str(model_path), load_external_data=False)
    names = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
    feed = {}
    for k, name in enumerate(names):
        f = data / f"input_{k}.pb"
        if not f.exists() or not m.graph.input[k].type.HasField("tensor_type"):
            return None
        feed[name] = onnx.numpy_helper.to_array(onnx.load_tensor(str(f)))
    return feed


def _outcome(make, feed, sessions=None):
    try:
        s = make()
        if sessions is not None:
            sessions.append(s)
        return [np.asarray(o) for o in s.run(None, feed)]
    except Exception as e:  # noqa: BLE001 - compared by type
        return type(e).__name__


def _without_initializer_inputs(path, out):
    """The model with its initializers removed from the graph inputs (as IR >= 4 exporters
    write them): ONNX Runtime then treats them as constants, and onnx_light shares them."""
    m = onnx.load(str(path))
    names = {t.name for t in m.graph.initializer}
    kept = [i for i in m.graph.input if i.name not in names]
    del m.graph.input[:]
    m.graph.input.extend(kept)
    m.ir_version = max(m.ir_version, 4)
    onnx.save(m, str(out))
    return len(names)


def test_backend_models_give_ort_outputs(tmp_path):
    """Both forms of every model (initializers listed as inputs or not), from a path and from a
    model object: ONNX Runtime's outputs, bit for bit, or the same exception type."""
    ran = shared = 0
    for k, path in enumerate(backend_data.models()):
        feed = _inputs(path)
        if feed is None:
            continue
        constants = tmp_path / f"{k}.onnx"
        _without_initializer_inputs(path, constants)
        for p in (path, constants):
            theirs = _outcome(lambda: ort.InferenceSession(str(p), providers=PROVIDERS), feed)
            for source in (lambda: str(p), lambda: ol.load(p)):
                sessions = []
                ours = _outcome(lambda: InferenceSession(source(), providers=PROVIDERS), feed, sessions)
                assert _same(theirs, ours), (p, path, theirs if isinstance(theirs, str) else "outputs",
                                             ours if isinstance(ours, str) else "outputs")
                shared += sum(len(shared_initializers(s)) for s in sessions)
            ran += not isinstance(theirs, str)
    assert ran >= 200 and shared >= 4, (ran, shared)


def weights_model(n=4, size=1 << 22):
    """x + w0 + w1 + ...: every weight used at run time, nothing ORT packs or folds."""
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(n):
        inits.append(numpy_helper.from_array(rng.standard_normal(size).astype(np.float32), f"w{i}"))
        nodes.append(ol.helper.make_node("Add", [x, f"w{i}"], [f"y{i}"]))
        x = f"y{i}"
    g = ol.helper.make_graph(nodes, "g", [ol.helper.make_tensor_value_info("x", 1, [size])],
                             [ol.helper.make_tensor_value_info(x, 1, [size])], inits)
    m = ol.helper.make_model(g, opset_imports=[ol.helper.make_opsetid("", 17)])
    m.ir_version = 10
    return m


def test_the_weights_are_onnx_lights_buffers():
    m = weights_model(n=2, size=1024)
    s = InferenceSession(m, providers=PROVIDERS)
    values = shared_initializers(s)
    assert sorted(values) == ["w0", "w1"]
    for t in m.graph.initializer:
        assert values[t.name].data_ptr() == numpy_helper.to_array(t).ctypes.data
    x = np.ones(1024, np.float32)
    expected = x + numpy_helper.to_array(m.graph.initializer[0]) + numpy_helper.to_array(m.graph.initializer[1])
    assert np.array_equal(s.run(None, {"x": x})[0], expected)


def convnet():
    """Conv + BatchNormalization + Relu, Gemm, MatMul + Add with weights of several KiB: what
    ONNX Runtime's transformers fuse, fold and re-lay out (reading the weights from the model)."""
    rng = np.random.default_rng(1)
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    inits = {"cw": f(32, 3, 3, 3), "cb": f(32), "s": f(32) + 2, "b": f(32), "mean": f(32),
             "var": np.abs(f(32)) + 1, "shape": np.array([1, -1], np.int64), "gw": f(32 * 8 * 8, 64),
             "gb": f(64), "mw": f(64, 48), "mb": f(48)}
    h = ol.helper
    nodes = [h.make_node("Conv", ["x", "cw", "cb"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node("BatchNormalization", ["c", "s", "b", "mean", "var"], ["n"]),
             h.make_node("Relu", ["n"], ["r"]),
             h.make_node("Reshape", ["r", "shape"], ["flat"]),
             h.make_node("Gemm", ["flat", "gw", "gb"], ["g"]),
             h.make_node("MatMul", ["g", "mw"], ["m"]),
             h.make_node("Add", ["m", "mb"], ["y"])]
    g = h.make_graph(nodes, "convnet", [h.make_tensor_value_info("x", 1, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("y", 1, [1, 48])],
                     [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 10
    return m


@pytest.mark.parametrize("level", ["ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_ALL"])
@pytest.mark.parametrize("external", [False, True], ids=["single_file", "external_data"])
def test_transformed_weights_give_ort_outputs(tmp_path, level, external):
    path = tmp_path / "convnet.onnx"
    ol.save(convnet(), path, save_as_external_data=external)
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)

    def options():
        o = ort.SessionOptions()
        o.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        return o

    theirs = ort.InferenceSession(str(path), options(), providers=PROVIDERS).run(None, {"x": x})
    for source in (str(path), ol.load(path), ol.load(path, no_copy=True)):
        s = InferenceSession(source, options(), providers=PROVIDERS)
        shared = shared_initializers(s)
        if isinstance(source, str) and external:
            assert shared == {}  # ONNX Runtime maps the weight files itself
        elif isinstance(source, str):
            # From the file's map where it is: the payloads the file places at an address their
            # element type may be read from.
            assert set(shared) <= {"cw", "gw", "mw"}
            assert all(v.data_ptr() % 4 == 0 for v in shared.values())
        else:
            assert sorted(shared) == ["cw", "gw", "mw"]  # (the others are under 1 KiB)
        assert _same(theirs, s.run(None, {"x": x}))


def test_a_model_with_ort_prepacked_blobs_is_handed_over(tmp_path):
    """An ONNX Runtime-optimized model whose pre-packed weights were saved beside it: ONNX
    Runtime's outputs, and no shared values (ONNX Runtime maps its files and reads its blobs)."""
    path = tmp_path / "convnet.onnx"
    ol.save(convnet(), path, save_as_external_data=True)
    optimized = tmp_path / "optimized.onnx"
    o = ort.SessionOptions()
    o.optimized_model_filepath = str(optimized)
    o.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                               "optimized.onnx.data")
    o.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    o.add_session_config_entry("session.save_external_prepacked_constant_initializers", "1")
    ort.InferenceSession(str(path), o, providers=PROVIDERS)
    saved = ol.load(optimized, load_external_data=False)
    assert any(len(t.external_data) for t in saved.graph.initializer)
    # onnx_light reads the blobs ONNX Runtime wrote (the pre-packed weights of the Gemm, ...).
    _, blobs = ol.load_with_prepacked(optimized)
    assert blobs and all(sum(b.nbytes for b in bufs) > 0 for bufs in blobs.values()), blobs.keys()
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    theirs = ort.InferenceSession(str(optimized), providers=PROVIDERS).run(None, {"x": x})
    s = InferenceSession(str(optimized), providers=PROVIDERS)
    assert shared_initializers(s) == {}
    assert _same(theirs, s.run(None, {"x": x}))


# Anonymous memory of a fresh process around each way of making a session of a 64 MiB model.
_MEASURE = textwrap.dedent("""
    import json, sys
    import numpy as np, onnxruntime as ort
    sys.path.insert(0, sys.argv[1])
    import onnx_light as ol
    from onnx_light.onnxruntime import InferenceSession
    from test_onnxruntime_session import weights_model
    def anon():
        return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("RssAnon"))
    m = weights_model()
    data = m.SerializeToString() if sys.argv[2] == "ort" else None
    before = anon()
    s = (ort.InferenceSession(data, providers=["CPUExecutionProvider"]) if sys.argv[2] == "ort"
         else InferenceSession(m, providers=["CPUExecutionProvider"]))
    grown = anon() - before
    out = s.run(None, {"x": np.zeros(1 << 22, np.float32)})[0]
    print(json.dumps([grown, float(out[:8].sum())]))
""")


def _grown(how):
    r = subprocess.run([sys.executable, "-c", _MEASURE, os.path.dirname(__file__), how],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_session_does_not_copy_the_weights():
    weights = 4 * (1 << 22) * 4  # 64 MiB
    ours, theirs = _grown("ours"), _grown("ort")
    assert ours[1] == theirs[1]
    assert theirs[0] >= weights  # ORT from bytes owns a copy of every weight
    assert ours[0] < weights // 8, ours[0]


def test_bad_arguments():
    with pytest.raises(TypeError):
        InferenceSession(12345)
    with pytest.raises(FileNotFoundError):
        InferenceSession("/nonexistent/model.onnx")
