"""onnx's C++ library on onnx_light (checker, shape inference, version converter, schemas)
against the onnx wheel, which runs the same onnx release over protobuf: on every model of the
wheel's backend test data and every node test model (generated from the wheel's test cases),
the verdicts, exception types and messages, and the serialized results are the same."""
import gc
import os
import threading

import numpy as np
import onnx
import onnx.backend.test.case.node as node_cases
import pytest
from onnx import helper

import onnx_light as ol
from onnx_light import checker, defs, shape_inference, version_converter

from conftest import backend_data


def _node_models() -> list:
    return [(c.name, c.model.SerializeToString()) for c in node_cases.collect_testcases()]


def _all_models() -> list:
    files = [(str(p.relative_to(backend_data.DATA)), p.read_bytes()) for p in backend_data.models()]
    return files + _node_models()


MODELS = _all_models()


def _outcome(f):
    """What a call did: ("ok", result) or (exception type name, message)."""
    try:
        return ("ok", f())
    except Exception as e:  # noqa: BLE001 - the type is part of the outcome
        return (type(e).__name__, str(e))


def test_the_models_are_many():
    assert len(MODELS) >= 149 + 1800


def test_the_library_is_onnx_release_of_the_wheel():
    assert ol._native.onnx_cxx_version() == onnx.__version__
    assert defs.onnx_opset_version() == onnx.defs.onnx_opset_version()
    assert defs.onnx_ml_opset_version() == onnx.defs.onnx_ml_opset_version()


@pytest.mark.parametrize("full_check", [False, True])
def test_check_model_same_verdicts_and_messages(full_check):
    differ = []
    invalid = 0
    for name, data in MODELS:
        theirs = _outcome(lambda: onnx.checker.check_model(data, full_check=full_check))
        model = ol.load_from_string(data)
        ours = _outcome(lambda: checker.check_model(model, full_check=full_check))
        invalid += theirs[0] != "ok"
        if theirs != ours:
            differ.append((name, theirs, ours))
    assert differ == []
    # Some node models are invalid on purpose under the full check: the errors are compared too.
    assert full_check is False or invalid > 0


@pytest.mark.parametrize(
    "options",
    [dict(), dict(check_type=True, strict_mode=True, data_prop=True)],
    ids=["defaults", "strict"],
)
def test_infer_shapes_same_bytes(options):
    differ = []
    for name, data in MODELS:
        theirs = _outcome(lambda: onnx.shape_inference.infer_shapes(data, **options).SerializeToString())
        model = ol.load_from_string(data)
        ours = _outcome(lambda: shape_inference.infer_shapes(model, **options).SerializeToString())
        if theirs != ours:
            differ.append((name, theirs[0], ours[0], theirs[1][:200] if theirs[0] != "ok" else ""))
        # The input model is left as it was.
        assert model.SerializeToString() == data
    assert differ == []


def test_infer_shapes_in_place_and_path(tmp_path):
    name, data = MODELS[0]
    model = ol.load_from_string(data)
    expected = onnx.shape_inference.infer_shapes(data).SerializeToString()
    shape_inference.infer_shapes_in_place(model)
    assert model.SerializeToString() == expected
    src = tmp_path / "m.onnx"
    src.write_bytes(data)
    shape_inference.infer_shapes_path(src, tmp_path / "out.onnx")
    assert (tmp_path / "out.onnx").read_bytes() == expected
    shape_inference.infer_shapes_path(str(src))  # in place, as onnx
    assert src.read_bytes() == expected


@pytest.mark.parametrize(
    "target, models",
    [(11, MODELS[0::2]), (18, MODELS[1::2]), (onnx.defs.onnx_opset_version(), MODELS)],
    ids=["11", "18", "latest"],
)
def test_convert_version_same_bytes(target, models):
    """Every model to the latest opset, and each to 11 or 18 (a call costs onnx's converter ~5
    ms of setup, so not every model to every target)."""
    differ = []
    converted = 0
    for name, data in models:
        theirs = _outcome(
            lambda: onnx.version_converter.convert_version(onnx.load_from_string(data), target).SerializeToString()
        )
        model = ol.load_from_string(data)
        ours = _outcome(lambda: version_converter.convert_version(model, target).SerializeToString())
        converted += theirs[0] == "ok"
        if theirs != ours:
            differ.append((name, theirs[0], ours[0]))
    assert differ == []
    assert converted > 100


def test_check_model_path_same_messages(tmp_path):
    for name, data in MODELS[:40]:
        p = tmp_path / "m.onnx"
        p.write_bytes(data)
        assert _outcome(lambda: checker.check_model(p, True)) == _outcome(lambda: onnx.checker.check_model(p, True))
    missing = tmp_path / "missing.onnx"
    theirs = _outcome(lambda: onnx.checker.check_model(missing))
    ours = _outcome(lambda: checker.check_model(str(missing)))
    assert ours == theirs and ours[0] == "ValidationError"


def _bad_models() -> list:
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])
    z = helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, None)
    add = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "g", [x, y], [z])
    unknown = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["z"])], "g", [x], [z])
    dangling = helper.make_graph([helper.make_node("Relu", ["nothing"], ["z"])], "g", [x], [z])
    opset = [helper.make_opsetid("", 18)]
    no_ir = helper.make_model(add, opset_imports=opset)
    no_ir.ClearField("ir_version")
    dup_meta = helper.make_model(add, opset_imports=opset)
    helper.set_model_props(dup_meta, {"a": "1"})
    dup_meta.metadata_props.add(key="a", value="2")
    return [
        helper.make_model(add, opset_imports=opset),
        helper.make_model(unknown, opset_imports=opset),
        helper.make_model(dangling, opset_imports=opset),
        no_ir,
        dup_meta,
        helper.make_model(add, opset_imports=[helper.make_opsetid("", 10000)]),
        onnx.ModelProto(),
    ]


def test_bad_models_same_errors():
    for bad in _bad_models():
        data = bad.SerializeToString()
        model = ol.load_from_string(data)
        for full in (False, True):
            theirs = _outcome(lambda: onnx.checker.check_model(bad, full_check=full))
            ours = _outcome(lambda: checker.check_model(model, full_check=full))
            assert ours == theirs
        theirs = _outcome(lambda: onnx.shape_inference.infer_shapes(bad, strict_mode=True).SerializeToString())
        ours = _outcome(lambda: shape_inference.infer_shapes(model, strict_mode=True).SerializeToString())
        assert ours == theirs
        theirs = _outcome(lambda: onnx.version_converter.convert_version(bad, 17).SerializeToString())
        ours = _outcome(lambda: version_converter.convert_version(model, 17).SerializeToString())
        assert ours == theirs
    # Every one fails the full check; onnx's kinds of failure are all met.
    loaded = [ol.load_from_string(b.SerializeToString()) for b in _bad_models()]
    assert {_outcome(lambda: checker.check_model(m, True))[0] for m in loaded} == {"ValidationError"}
    assert "InferenceError" in {_outcome(lambda: shape_inference.infer_shapes(m, strict_mode=True))[0] for m in loaded}
    assert "RuntimeError" in {_outcome(lambda: version_converter.convert_version(m, 17))[0] for m in loaded}


def test_argument_errors_as_onnx():
    model = ol.load_from_string(MODELS[0][1])
    for ours, theirs in [
        (lambda: shape_inference.infer_shapes("model.onnx"), lambda: onnx.shape_inference.infer_shapes("model.onnx")),
        (lambda: shape_inference.infer_shapes(3), lambda: onnx.shape_inference.infer_shapes(3)),
        (lambda: version_converter.convert_version(b"", 3), lambda: onnx.version_converter.convert_version(b"", 3)),
        (lambda: version_converter.convert_version(model, "3"),
         lambda: onnx.version_converter.convert_version(onnx.load_from_string(MODELS[0][1]), "3")),
        (lambda: shape_inference.infer_shapes_path(model), lambda: onnx.shape_inference.infer_shapes_path(
            onnx.load_from_string(MODELS[0][1]))),
    ]:
        a, b = _outcome(ours), _outcome(theirs)
        assert a[0] == b[0] == "TypeError"
        # The same text, with onnx_light's class names where onnx names its own.
        assert a[1].replace("onnx_light._native", "onnx.onnx_ml_pb2").replace("onnx_light", "onnx") == b[1]


def test_accepts_onnx_models_and_bytes():
    data = MODELS[0][1]
    checker.check_model(onnx.load_from_string(data), full_check=True)
    checker.check_model(data)
    inferred = shape_inference.infer_shapes(onnx.load_from_string(data))
    assert isinstance(inferred, ol.ModelProto)


def _schema_facts(s) -> tuple:
    def param(p):
        return (p.name, p.type_str, p.description, int(p.option), p.is_homogeneous, p.min_arity,
                int(p.differentiation_category))

    attrs = {
        k: (a.name, a.description, int(a.type), a.required, a.default_value.SerializeToString())
        for k, a in s.attributes.items()
    }
    return (
        s.name, s.domain, s.since_version, s.doc, s.deprecated, int(s.support_level),
        s.min_input, s.max_input, s.min_output, s.max_output, s.has_function,
        s.has_context_dependent_function, s.has_type_and_shape_inference_function,
        [param(p) for p in s.inputs], [param(p) for p in s.outputs],
        [(c.type_param_str, c.description, list(c.allowed_type_strs)) for c in s.type_constraints],
        attrs,
    )


def test_schemas_as_onnx():
    ours = [_schema_facts(s) for s in defs.get_all_schemas_with_history()]
    theirs = [_schema_facts(s) for s in onnx.defs.get_all_schemas_with_history()]
    assert len(ours) == len(theirs) > 500
    assert ours == theirs
    assert sorted(_schema_facts(s) for s in defs.get_all_schemas()) == sorted(
        _schema_facts(s) for s in onnx.defs.get_all_schemas())
    for args in [("Conv",), ("Conv", 10), ("Conv", 10, ""), ("Conv", ""), ("LinearClassifier", "ai.onnx.ml"),
                 ("Add", 6, "")]:
        assert _schema_facts(defs.get_schema(*args)) == _schema_facts(onnx.defs.get_schema(*args))
        assert defs.has(*args) == onnx.defs.has(*args) is True
    for args in [("NoSuchOp",), ("NoSuchOp", 3), ("Conv", 0), ("Conv", "no.such.domain"), ("Add", 6, "ai.onnx")]:
        a = _outcome(lambda: defs.get_schema(*args))
        b = _outcome(lambda: onnx.defs.get_schema(*args))
        assert a == b and a[0] == "SchemaError"
        assert defs.has(*args) == onnx.defs.has(*args) is False


def test_gil_is_released():
    """A check of a large graph runs while another Python thread keeps running."""
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(20000)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("t0", 1, [4])],
                          [helper.make_tensor_value_info("t20000", 1, [4])])
    model = ol.load_from_string(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString())
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(1)

    t = threading.Thread(target=tick)
    t.start()
    try:
        before = len(ticks)
        for _ in range(3):
            checker.check_model(model, full_check=True)
        during = len(ticks) - before
    finally:
        done.set()
        t.join()
    assert during > 1000


def test_concurrent_checks_of_one_model():
    model = ol.load_from_string(MODELS[0][1])
    errors = []

    def run():
        try:
            for _ in range(5):
                checker.check_model(model, full_check=True)
                shape_inference.infer_shapes(model)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def _rss_mib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20


def test_model_over_2gb():
    """onnx's check_model refuses a model over 2 GB in memory (its bytes exceed protobuf's limit);
    onnx_light checks it, infers its shapes and converts it where it is, and gives back the
    payload copies onnx's const reads make (no more than a few MiB stay)."""
    n = (2**31 + 2**20) // 4
    w = ol.numpy_helper.from_array(np.ones(n, dtype=np.float32), "w")
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [n])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N"])
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "big", [x], [y])
    small = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    model = ol.load_from_string(small.SerializeToString())
    model.graph.initializer.append(w)
    del w
    gc.collect()
    assert model.ByteSize() > 2**31
    before = _rss_mib()
    checker.check_model(model, full_check=True)
    shape_inference.infer_shapes_in_place(model)
    assert _rss_mib() - before < 64
    converted = version_converter.convert_version(model, 14)
    assert converted.opset_import[0].version == 14 and converted.ByteSize() > 2**31
    del converted
    bad = ol.load_from_string(small.SerializeToString())
    bad.graph.initializer.append(model.graph.initializer[0])
    bad.graph.initializer[0].dims[0] = n + 1  # the payload is 4 bytes short
    with pytest.raises(checker.ValidationError, match="w"):
        checker.check_model(bad)
