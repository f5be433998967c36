"""onnx_light.helper against onnx.helper: every builder builds the same message (compared by
SerializeToString bytes), raises the same exception types, and printable_graph prints the same
text."""
import warnings

import ml_dtypes
import numpy as np
import onnx
import onnx.helper as oh
import pytest

import onnx_light as ol
import onnx_light.helper as lh

OT, LT = onnx.TensorProto, ol.TensorProto


def same(a, b):
    assert a.SerializeToString() == b.SerializeToString(), (a, b)
    return a


def both(function, /, *args, **kwargs):
    """The result of onnx.helper.<function> and of onnx_light.helper.<function> for the same
    arguments, checked to serialize to the same bytes."""
    return same(getattr(oh, function)(*args, **kwargs), getattr(lh, function)(*args, **kwargs))


def ours(msg):
    """An onnx message as the onnx_light message of the same bytes."""
    return getattr(ol, type(msg).__name__).FromString(msg.SerializeToString())


def test_versions_are_those_of_the_onnx_release():
    assert lh.IR_VERSION == onnx.IR_VERSION == ol.IR_VERSION
    assert lh.ONNX_OPSET_VERSION == onnx.defs.onnx_opset_version()


def sub_graph(name):
    return oh.make_graph([oh.make_node("Identity", ["a"], ["b"])], name,
                         [oh.make_tensor_value_info("a", OT.FLOAT, [1])],
                         [oh.make_tensor_value_info("b", OT.FLOAT, [1])])


ATTRIBUTE_VALUES = [
    3, -(2**40), True, np.int64(7), np.int32(-2), 1.5, np.float32(0.25), float("inf"), "relu",
    "ünïcode", b"\x00\xffbytes", [1, 2, 3], (4, 5), [1.5, 2], [np.float32(1.5), 2.25], ["a", "b"],
    [b"x", "y"], np.array([1, 2, 3]), range(3),
]


@pytest.mark.parametrize("value", ATTRIBUTE_VALUES, ids=repr)
def test_make_attribute_scalars_and_lists(value):
    both("make_attribute", "k", value)
    both("make_attribute", "k", value, doc_string="about k")


def test_make_attribute_messages():
    t = oh.make_tensor("t", OT.FLOAT, [2], [1.0, 2.0])
    sp = oh.make_sparse_tensor(t, oh.make_tensor("i", OT.INT64, [2], [0, 3]), [5])
    g = sub_graph("body")
    tp = oh.make_tensor_type_proto(OT.INT64, [None, "N"])
    for value in [t, sp, g, tp, [t, t], [sp], [g, sub_graph("other")], [tp, tp]]:
        expected = oh.make_attribute("k", value)
        # onnx_light's messages ...
        mine = value if not isinstance(value, list) else [ours(v) for v in value]
        mine = ours(mine) if not isinstance(mine, list) else mine
        same(expected, lh.make_attribute("k", mine))
        # ... and the onnx package's, converted.
        same(expected, lh.make_attribute("k", value))


def test_make_attribute_types_and_errors():
    for attr_type in (ol.AttributeProto.INTS, ol.AttributeProto.FLOATS, ol.AttributeProto.STRINGS,
                      ol.AttributeProto.TENSORS, ol.AttributeProto.GRAPHS):
        both("make_attribute", "empty", [], attr_type=attr_type)
    both("make_attribute", "k", [1, 2], attr_type=ol.AttributeProto.FLOATS)
    for args, kwargs in [
        (("k", []), {}),  # empty list without a type
        (("k", [1, "a"]), {}),  # mixed elements
        (("k", 1.5), {"attr_type": ol.AttributeProto.INT}),  # mismatch
        (("k", {"a": 1}.keys() and object()), {}),  # not a value at all
    ]:
        with pytest.raises(Exception) as theirs:
            oh.make_attribute(*args, **kwargs)
        with pytest.raises(type(theirs.value)):
            lh.make_attribute(*args, **kwargs)
    ref = both("make_attribute_ref", "alpha", ol.AttributeProto.FLOAT, doc_string="d",
               ref_attr_name="parent_alpha")
    assert ref.ref_attr_name == "parent_alpha"
    both("make_attribute_ref", "beta", ol.AttributeProto.INTS)


def test_get_attribute_value_matches_onnx():
    t = oh.make_tensor("t", OT.FLOAT, [2], [1.0, 2.0])
    values = ATTRIBUTE_VALUES + [t, [t, t], sub_graph("g"), [sub_graph("g")],
                                 oh.make_tensor_type_proto(OT.FLOAT, [2])]
    for value in values:
        attr = oh.make_attribute("k", value)
        expected = oh.get_attribute_value(attr)
        got = lh.get_attribute_value(ours(attr))
        if isinstance(expected, list) and expected and hasattr(expected[0], "SerializeToString"):
            assert [e.SerializeToString() for e in expected] == [g.SerializeToString() for g in got]
        elif hasattr(expected, "SerializeToString"):
            same(expected, got)
        else:
            assert got == expected and type(got) is type(expected), (value, got, expected)
    undefined = onnx.AttributeProto(name="u")
    assert lh.get_attribute_value(ours(undefined)) is oh.get_attribute_value(undefined) is None
    ref = oh.make_attribute_ref("r", OT.FLOAT)
    with pytest.raises(ValueError):
        lh.get_attribute_value(ours(ref))
    node = oh.make_node("Conv", ["x"], ["y"], strides=[1, 2], group=3)
    assert lh.get_node_attr_value(ours(node), "strides") == oh.get_node_attr_value(node, "strides")
    with pytest.raises(ValueError):
        lh.get_node_attr_value(ours(node), "missing")


def test_make_node():
    t = oh.make_tensor("t", OT.FLOAT, [1], [1.0])
    both("make_node", "Relu", ["x"], ["y"])
    both("make_node", "Conv", ["x", "w", ""], ["y"], name="conv1", doc_string="a conv",
         domain="", kernel_shape=[3, 3], pads=(1, 1, 1, 1), group=1, auto_pad="NOTSET",
         alpha=0.5, skipped=None)
    both("make_node", "Custom", [], ["y"], domain="com.example", overload="v2", value=t,
         body=sub_graph("body"), names=["a", "b"])
    # Attributes are sorted by name whatever the keyword order.
    n = lh.make_node("X", [], [], zeta=1, alpha=2, mid=3)
    assert [a.name for a in n.attribute] == ["alpha", "mid", "zeta"]


@pytest.mark.parametrize("shape", [None, [], [1, 3, 224, 224], ["N", 3, None], [0]])
def test_value_infos_and_type_protos(shape):
    both("make_tensor_value_info", "x", OT.FLOAT, shape)
    both("make_tensor_value_info", "x", OT.INT64, shape, doc_string="an input")
    both("make_tensor_type_proto", OT.FLOAT16, shape)
    both("make_sparse_tensor_type_proto", OT.FLOAT, shape)
    both("make_sparse_tensor_value_info", "s", OT.FLOAT, shape, "doc")
    both("make_tensor_sequence_value_info", "q", OT.FLOAT, shape)
    if shape:
        den = [f"d{i}" for i in range(len(shape))]
        both("make_tensor_value_info", "x", OT.FLOAT, shape, shape_denotation=den)
        with pytest.raises(ValueError):
            lh.make_tensor_value_info("x", OT.FLOAT, shape, shape_denotation=den + ["extra"])
    inner = oh.make_tensor_type_proto(OT.FLOAT, shape)
    both("make_sequence_type_proto", inner)
    both("make_optional_type_proto", inner)
    both("make_map_type_proto", OT.INT64, inner)
    both("make_value_info", "v", inner, "doc")
    both("make_empty_tensor_value_info", "e")
    with pytest.raises(ValueError):
        lh.make_tensor_value_info("x", OT.FLOAT, [1.5])


def test_graph_function_model():
    nodes = [oh.make_node("Add", ["x", "w"], ["s"]), oh.make_node("Relu", ["s"], ["y"])]
    inputs = [oh.make_tensor_value_info("x", OT.FLOAT, [2])]
    outputs = [oh.make_tensor_value_info("y", OT.FLOAT, [2])]
    init = [oh.make_tensor("w", OT.FLOAT, [2], [1.0, 2.0])]
    vi = [oh.make_tensor_value_info("s", OT.FLOAT, [2])]
    sparse = [oh.make_sparse_tensor(oh.make_tensor("v", OT.FLOAT, [1], [3.0]),
                                    oh.make_tensor("i", OT.INT64, [1], [1]), [4])]
    g = both("make_graph", nodes, "g", inputs, outputs, init, "graph doc", vi, sparse)
    both("make_graph", nodes, "g", inputs, outputs)
    # onnx_light messages as arguments give the same graph.
    same(g, lh.make_graph([ours(n) for n in nodes], "g", [ours(v) for v in inputs],
                          [ours(v) for v in outputs], [ours(t) for t in init], "graph doc",
                          [ours(v) for v in vi], [ours(s) for s in sparse]))
    opsets = [oh.make_opsetid("", 17), oh.make_opsetid("com.example", 1)]
    both("make_opsetid", "ai.onnx.ml", 3)
    both("make_operatorsetid", "", 21)
    f = both("make_function", "com.example", "F", ["a"], ["b"],
             [oh.make_node("Identity", ["a"], ["b"])], opsets[:1], attributes=["alpha"],
             attribute_protos=[oh.make_attribute("beta", 2)], doc_string="fn",
             overload="o", value_info=vi)
    both("make_function", "d", "G", [], [], [], [])
    both("make_model", g)
    both("make_model", g, opset_imports=opsets, functions=[f], producer_name="test",
         producer_version="1.0", ir_version=9, doc_string="model doc", model_version=3)
    same(oh.make_model(g), lh.make_model(ours(g)))
    m, m2 = oh.make_model(g), lh.make_model(ours(g))
    oh.set_model_props(m, {"a": "1", "b": "2"})
    lh.set_model_props(m2, {"a": "1", "b": "2"})
    same(m, m2)
    ti = both("make_training_info", g, [("w", "s")], g, [("w", "x")])
    both("make_training_info", g, [], None, None)
    assert ti.HasField("initialization")


def test_sequences_maps_optionals():
    t = oh.make_tensor("t", OT.FLOAT, [1], [1.0])
    seq = both("make_sequence", "s", onnx.SequenceProto.TENSOR, [t, t])
    both("make_sequence", "e", onnx.SequenceProto.UNDEFINED, [])
    both("make_map", "m", OT.INT64, [1, 2], seq)
    both("make_map", "m", OT.STRING, [b"a", b"b"], seq)
    both("make_optional", "o", onnx.OptionalProto.TENSOR, t)
    both("make_optional", "o", onnx.OptionalProto.SEQUENCE, seq)
    both("make_optional", "o", onnx.OptionalProto.UNDEFINED, None)
    both("make_sparse_tensor", t, oh.make_tensor("i", OT.INT64, [1], [0]), [3])


def values_for(data_type, n, rng):
    """Sample values of a type, including out-of-range ones for the saturating float8 types."""
    dtype = oh.tensor_dtype_to_np_dtype(data_type)
    if data_type == OT.STRING:
        return ["a", "ünï", "", "x" * 70][:n] + ["s"] * max(0, n - 4)
    if data_type == OT.BOOL:
        return rng.integers(0, 2, n).astype(bool)
    if data_type in (OT.COMPLEX64, OT.COMPLEX128):
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    if np.issubdtype(dtype, np.integer) or dtype in (ml_dtypes.int4, ml_dtypes.uint4,
                                                      ml_dtypes.int2, ml_dtypes.uint2):
        info = ml_dtypes.iinfo(dtype)
        if np.issubdtype(dtype, np.integer):
            return rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype)
        return rng.integers(int(info.min), int(info.max), n, endpoint=True).astype(dtype)
    v = (rng.standard_normal(n) * 4).astype(np.float32)
    if n >= 4:
        v[:4] = [1e6, -1e6, np.nan, np.inf]
    return v


ALL_TYPES = [t for t in oh.get_all_tensor_dtypes() if t != OT.UNDEFINED]


@pytest.mark.parametrize("data_type", ALL_TYPES, ids=lambda t: OT.DataType.Name(t))
def test_make_tensor_every_data_type(data_type):
    rng = np.random.default_rng(data_type)
    for dims in ([], [5], [2, 3], [0]):
        n = int(np.prod(dims))
        vals = values_for(data_type, n, rng)
        both("make_tensor", "t", data_type, dims, vals)
        if data_type == OT.STRING:
            for raw_vals in (b"", vals):
                with pytest.raises(TypeError):
                    lh.make_tensor("t", data_type, dims, raw_vals, raw=True)
            continue
        # raw: the array's bytes (packed for sub-byte types), and the same as bytes.
        dtype = oh.tensor_dtype_to_np_dtype(data_type)
        arr = np.asarray(vals).astype(dtype) if data_type not in (
            OT.FLOAT8E8M0,) else np.asarray(vals)
        try:
            expected = oh.make_tensor("t", data_type, dims, arr, raw=True)
        except (ValueError, TypeError) as e:
            with pytest.raises(type(e)):
                lh.make_tensor("t", data_type, dims, arr, raw=True)
            continue
        same(expected, lh.make_tensor("t", data_type, dims, arr, raw=True))
        same(expected, lh.make_tensor("t", data_type, dims, expected.raw_data, raw=True))
    # Wrong counts and sizes raise the same errors.
    with pytest.raises(ValueError):
        lh.make_tensor("t", data_type, [3], values_for(data_type, 2, rng))
    if data_type != OT.STRING:
        with pytest.raises(ValueError):
            lh.make_tensor("t", data_type, [3], b"\x00" * 1000, raw=True)
        with pytest.raises(TypeError):
            lh.make_tensor("t", data_type, [1], [1], raw=True)


def test_make_tensor_from_python_lists():
    both("make_tensor", "f", OT.FLOAT, [2, 2], [1, 2.5, -3, 4])
    both("make_tensor", "i", OT.INT64, [3], [1, -(2**40), 7])
    both("make_tensor", "h", OT.FLOAT16, [2], [0.5, 65504.0])
    both("make_tensor", "b", OT.BFLOAT16, [2], [1.0, -2.0])
    both("make_tensor", "e", OT.FLOAT8E4M3FN, [3], [1000.0, -1000.0, 0.1])
    both("make_tensor", "m", OT.FLOAT8E8M0, [4], [1.0, 3.0, 0.3, 2.0**127 * 1.5])
    both("make_tensor", "q", OT.INT4, [3], [-8, 7, 1])
    both("make_tensor", "s", OT.STRING, [2], ["a", b"b"])
    both("make_tensor", "c", OT.COMPLEX64, [1], [1 + 2j])
    both("make_tensor", "n", OT.BOOL, [3], [True, False, True])
    both("make_tensor", "r", OT.FLOAT, [2], np.array([1, 2], np.float32).tobytes(), raw=True)


def test_dtype_mappings():
    for t in ALL_TYPES:
        assert lh.tensor_dtype_to_np_dtype(t) == oh.tensor_dtype_to_np_dtype(t)
        assert lh.tensor_dtype_to_field(t) == oh.tensor_dtype_to_field(t)
        assert lh.tensor_dtype_to_string(t) == oh.tensor_dtype_to_string(t)
    for d in (np.float32, np.int8, np.uint64, np.bool_, np.float16, ml_dtypes.bfloat16,
              ml_dtypes.float8_e5m2, np.dtype("<U3"), np.complex128):
        assert lh.np_dtype_to_tensor_dtype(np.dtype(d)) == oh.np_dtype_to_tensor_dtype(np.dtype(d))


def printable_model():
    then_g = sub_graph("then_branch")
    else_g = sub_graph("else_branch")
    nodes = [
        oh.make_node("If", ["c"], ["r"], then_branch=then_g, else_branch=else_g),
        oh.make_node("Conv", ["x", "w"], ["y"], strides=[1, 2], alpha=0.1, mode="long " * 20,
                     names=["a", "b"], value=oh.make_tensor("v", OT.FLOAT, [], [2.0]),
                     tv=oh.make_tensor("tv", OT.FLOAT, [1], [2.0]),
                     tp=oh.make_tensor_type_proto(OT.FLOAT, [1])),
        oh.make_node("Loop", ["n"], [], bodies=[sub_graph("b1"), sub_graph("b2")]),
        oh.make_node("NoAttrs", [], ["z"]),
    ]
    inputs = [oh.make_tensor_value_info("c", OT.BOOL, []),
              oh.make_tensor_value_info("x", OT.FLOAT, ["N", 3, None]),
              oh.make_tensor_value_info("w", OT.FLOAT, [3, 3]),
              oh.make_tensor_value_info("n", OT.INT64, None)]
    init = [oh.make_tensor("w", OT.FLOAT, [3, 3], np.zeros(9)),
            oh.make_tensor("extra", OT.INT64, [], [1])]
    outputs = [oh.make_tensor_value_info("y", OT.FLOAT, None), oh.make_tensor_value_info("r", OT.FLOAT, [1])]
    return oh.make_graph(nodes, "main", inputs, outputs, init)


def test_printable_graph_and_friends():
    g = printable_model()
    mine = ours(g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert lh.printable_graph(mine) == oh.printable_graph(g)
        assert lh.printable_graph(mine, prefix="  ") == oh.printable_graph(g, prefix="  ")
        empty = oh.make_graph([], "e", [], [])
        assert lh.printable_graph(ours(empty)) == oh.printable_graph(empty)
    for n, n2 in zip(g.node, mine.node):
        assert lh.printable_node(n2, "> ") == oh.printable_node(n, "> ")
        for a, a2 in zip(n.attribute, n2.attribute):
            assert lh.printable_attribute(a2) == oh.printable_attribute(a)
    for v, v2 in zip(g.input, mine.input):
        assert lh.printable_value_info(v2) == oh.printable_value_info(v)
    for t, t2 in zip(g.initializer, mine.initializer):
        assert lh.printable_tensor_proto(t2) == oh.printable_tensor_proto(t)


def test_strip_doc_string():
    """(onnx's own strip_doc_string fails with protobuf 7: its field descriptors lost `label`;
    the expected model is built without doc strings instead.)"""
    def model(doc):
        d = (lambda s: s) if doc else (lambda s: None)
        g = oh.make_graph([oh.make_node("Relu", ["x"], ["y"], doc_string=d("node doc"))], "g",
                          [oh.make_tensor_value_info("x", OT.FLOAT, [1], d("in doc") or "")], [],
                          doc_string=d("graph doc"))
        return oh.make_model(g, **({"doc_string": "model doc"} if doc else {}))

    m = ours(model(True))
    assert str(m).count("doc_string") == 4
    lh.strip_doc_string(m)
    same(model(False), m)
    assert "doc_string" not in str(m)


def test_a_built_model_runs_in_onnxruntime(tmp_path):
    import onnxruntime as ort

    w = lh.make_tensor("w", LT.FLOAT, [3], [1.0, -2.0, 0.5])
    g = lh.make_graph(
        [lh.make_node("Mul", ["x", "w"], ["m"]), lh.make_node("LeakyRelu", ["m"], ["y"], alpha=0.1)],
        "g", [lh.make_tensor_value_info("x", LT.FLOAT, ["N", 3])],
        [lh.make_tensor_value_info("y", LT.FLOAT, ["N", 3])], [w])
    m = lh.make_model(g, ir_version=10, opset_imports=[lh.make_opsetid("", 21)])
    ol.save(m, tmp_path / "m.onnx")
    x = np.array([[1.0, 1.0, -4.0], [2.0, -1.0, 2.0]], np.float32)
    (y,) = ort.InferenceSession(str(tmp_path / "m.onnx")).run(None, {"x": x})
    expected = x * np.array([1.0, -2.0, 0.5], np.float32)
    np.testing.assert_allclose(y, np.where(expected > 0, expected, 0.1 * expected), rtol=1e-6)


def test_version_table_and_opset_map_are_onnx_s():
    assert lh.VERSION_TABLE == oh.VERSION_TABLE
    assert lh.OP_SET_ID_VERSION_MAP == oh.OP_SET_ID_VERSION_MAP


def _opsets(pairs):
    return [oh.make_opsetid(d, v) for d, v in pairs]


OPSET_LISTS = [
    [],
    [("", 1)],
    [("", 13)],
    [("ai.onnx", 28)],
    [("", 21), ("ai.onnx.ml", 5)],
    [("ai.onnx.ml", 3), ("ai.onnx.training", 1)],
    [("ai.onnx.preview", 19)],
    [("ai.onnx.preview.training", 1), ("", 9)],
]


@pytest.mark.parametrize("pairs", OPSET_LISTS, ids=repr)
def test_find_min_ir_version_for(pairs):
    theirs = oh.find_min_ir_version_for(_opsets(pairs))
    assert lh.find_min_ir_version_for(_opsets(pairs)) == theirs
    assert lh.find_min_ir_version_for([ours(o) for o in _opsets(pairs)]) == theirs


def test_find_min_ir_version_for_unknown_opsets():
    for pairs in ([("", 99)], [("com.example", 1)], [("", 13), ("custom", 2)]):
        with pytest.raises(ValueError):
            oh.find_min_ir_version_for(_opsets(pairs))
        with pytest.raises(ValueError):
            lh.find_min_ir_version_for(_opsets(pairs))
        assert lh.find_min_ir_version_for(_opsets(pairs), ignore_unknown=True) == (
            oh.find_min_ir_version_for(_opsets(pairs), ignore_unknown=True)
        )
        assert lh.find_min_ir_version_for(_opsets(pairs), True) == oh.find_min_ir_version_for(_opsets(pairs), True)


@pytest.mark.parametrize("pairs", OPSET_LISTS, ids=repr)
def test_make_model_gen_version(pairs):
    g = sub_graph("g")
    both("make_model_gen_version", g, opset_imports=_opsets(pairs))
    both("make_model_gen_version", g, opset_imports=_opsets(pairs), ir_version=5, producer_name="p")
    theirs = oh.make_model_gen_version(g, opset_imports=_opsets(pairs))
    same(theirs, lh.make_model_gen_version(ours(g), opset_imports=[ours(o) for o in _opsets(pairs)]))


def test_make_model_gen_version_defaults_and_errors():
    g = sub_graph("g")
    both("make_model_gen_version", g)
    both("make_model_gen_version", g, doc_string="d")
    with pytest.raises(ValueError):
        oh.make_model_gen_version(g, opset_imports=_opsets([("", 99)]))
    with pytest.raises(ValueError):
        lh.make_model_gen_version(g, opset_imports=_opsets([("", 99)]))


def test_dtype_helpers_for_every_data_type():
    assert list(lh.get_all_tensor_dtypes()) == list(oh.get_all_tensor_dtypes())
    for t in oh.get_all_tensor_dtypes():
        assert lh.tensor_dtype_to_storage_tensor_dtype(t) == oh.tensor_dtype_to_storage_tensor_dtype(t)
        assert lh.tensor_dtype_to_np_dtype(t) == oh.tensor_dtype_to_np_dtype(t)
        assert lh.tensor_dtype_to_field(t) == oh.tensor_dtype_to_field(t)
        assert lh.tensor_dtype_to_string(t) == oh.tensor_dtype_to_string(t)
    for bad in (0, 99, -1):
        for f in ("tensor_dtype_to_storage_tensor_dtype", "tensor_dtype_to_np_dtype",
                  "tensor_dtype_to_field", "tensor_dtype_to_string"):
            with pytest.raises(KeyError):
                getattr(oh, f)(bad)
            with pytest.raises(KeyError):
                getattr(lh, f)(bad)
        t = OT(data_type=bad, dims=[1], raw_data=b"\x00" * 8)
        expected = KeyError if bad else TypeError  # UNDEFINED has its own message
        with pytest.raises(expected):
            onnx.numpy_helper.to_array(t)
        with pytest.raises(expected):
            ol.numpy_helper.to_array(ours(t))


@pytest.mark.parametrize("dtype", ["<U3", "O", "S2", "datetime64[s]", "V4", ">f4", "float32", "int4"])
def test_np_dtype_to_tensor_dtype_values_and_errors(dtype):
    dtype = np.dtype(getattr(ml_dtypes, dtype, dtype))

    def outcome(module):
        try:
            return module.np_dtype_to_tensor_dtype(dtype)
        except Exception as e:  # noqa: BLE001 - type and message are compared
            return type(e), str(e)

    assert outcome(lh) == outcome(oh)


def test_public_functions_of_onnx_helper():
    import types

    theirs = {n for n, v in vars(oh).items() if not n.startswith("_")
              and isinstance(v, types.FunctionType) and v.__module__ == oh.__name__}
    missing = {n for n in theirs if not callable(getattr(lh, n, None))}
    assert not missing
    # Same parameters: names, kinds and defaults.
    import inspect

    def params(f):
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]

    for n in sorted(theirs):
        assert params(getattr(lh, n)) == params(getattr(oh, n)), n
    for name in ("VERSION_TABLE", "OP_SET_ID_VERSION_MAP", "VersionRowType", "VersionTableType",
                 "VersionMapType", "AssignmentBindingType"):
        assert hasattr(lh, name), name
