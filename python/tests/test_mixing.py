"""onnx_light's messages mixed with the onnx package's: every function and container that takes
a message accepts onnx's message of the same type (converted through its serialization), and
gives what onnx gives with its own; equality compares content across the two; errors name the
module of each type; protobuf's json_format and text_format work on onnx_light's messages with
the same output."""
import numpy as np
import onnx
import pytest
from google.protobuf import json_format, text_format
from onnx import helper, numpy_helper as onh

import onnx_light as ol
import onnx_light.checker  # noqa: F401
import onnx_light.external_data_helper  # noqa: F401
import onnx_light.shape_inference  # noqa: F401
from conftest import backend_data


def onnx_nodes():
    return [
        helper.make_node("Relu", ["x"], ["y"], name="r"),
        helper.make_node("LeakyRelu", ["y"], ["z"], name="l", alpha=0.5),
        helper.make_node("Constant", [], ["c"], value=onh.from_array(np.arange(4.0), "v")),
    ]


def onnx_graph():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    z = helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [2, 3])
    w = onh.from_array(np.ones((2, 3), np.float32), "w")
    return helper.make_graph(onnx_nodes()[:2], "g", [x], [z], [w])


def onnx_model():
    return helper.make_model(onnx_graph(), opset_imports=[helper.make_opsetid("", 17)])


def same(ours, theirs):
    """Same content: same bytes and equal in both directions."""
    assert ours.SerializeToString() == theirs.SerializeToString()
    assert ours == theirs and theirs == ours
    assert not (ours != theirs) and not (theirs != ours)


@pytest.mark.parametrize("operation", [
    lambda g, nodes: g.node.append(nodes[0]),
    lambda g, nodes: g.node.extend(nodes),
    lambda g, nodes: g.node.insert(1, nodes[2]),
    lambda g, nodes: g.node.insert(-5, nodes[1]),
    lambda g, nodes: g.node.MergeFrom(nodes),
    lambda g, nodes: g.node.remove(g.node[0]) or g.node.append(nodes[2]),
])
def test_repeated_fields_take_onnx_messages(operation):
    theirs = onnx_graph()
    ours = ol.GraphProto.FromString(theirs.SerializeToString())
    operation(theirs, onnx_nodes())
    operation(ours, onnx_nodes())
    same(ours, theirs)


def test_remove_and_membership_with_onnx_messages():
    theirs = onnx_graph()
    ours = ol.GraphProto.FromString(theirs.SerializeToString())
    node = onnx_nodes()[1]
    assert node in ours.node and node in theirs.node
    ours.node.remove(node)
    theirs.node.remove(node)
    same(ours, theirs)
    with pytest.raises(ValueError):
        ours.node.remove(node)
    with pytest.raises(ValueError):
        theirs.node.remove(node)


@pytest.mark.parametrize("method", ["CopyFrom", "MergeFrom"])
def test_copy_and_merge_from_onnx_messages(method):
    theirs = onnx_graph()
    ours = ol.GraphProto.FromString(theirs.SerializeToString())
    other = onnx_graph()
    other.name = "other"
    getattr(theirs, method)(other)
    getattr(ours, method)(other)
    same(ours, theirs)
    # A sub-message view, too.
    m_theirs, m_ours = onnx_model(), ol.load_from_string(onnx_model().SerializeToString())
    getattr(m_theirs.graph.node[0], method)(onnx_nodes()[2])
    getattr(m_ours.graph.node[0], method)(onnx_nodes()[2])
    same(m_ours, m_theirs)


def test_keyword_construction_with_onnx_messages():
    attr = helper.make_attribute("alpha", 0.25)
    same(ol.NodeProto(op_type="Elu", attribute=[attr]), onnx.NodeProto(op_type="Elu", attribute=[attr]))
    nodes = onnx_nodes()
    same(ol.GraphProto(name="g", node=nodes), onnx.GraphProto(name="g", node=nodes))
    g = onnx_graph()
    same(ol.ModelProto(ir_version=9, graph=g), onnx.ModelProto(ir_version=9, graph=g))
    same(ol.helper.make_graph(nodes, "g", [], []), helper.make_graph(nodes, "g", [], []))


@pytest.mark.parametrize("array", [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.arange(5, dtype=np.int64),
    np.array([1.5, -2.0], np.float16),
    np.array([True, False]),
    np.array(["a", "bc"], dtype=object),
])
def test_to_array_of_onnx_tensors(array):
    tensor = onh.from_array(array, "t")
    ours = ol.numpy_helper.to_array(tensor)
    theirs = onh.to_array(tensor)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    assert (ours == theirs).all()


def test_model_functions_take_onnx_models(tmp_path):
    model = onnx_model()
    ol.save(model, tmp_path / "a.onnx")
    onnx.save(model, tmp_path / "b.onnx")
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()
    with open(tmp_path / "c.onnx", "wb") as f:
        ol.save(model, f)
    assert (tmp_path / "c.onnx").read_bytes() == model.SerializeToString()
    ol.save(model, tmp_path / "e.onnx", key="k")
    same(ol.load(tmp_path / "e.onnx", key="k"), model)
    ol.checker.check_model(model)
    inferred = ol.shape_inference.infer_shapes(model)
    same(inferred, onnx.shape_inference.infer_shapes(model))
    # In-place operations on an onnx model change that model, as on an onnx_light model.
    theirs = onnx_model()
    ours = ol.load_from_string(theirs.SerializeToString())
    for m in (ours, theirs):
        ol.external_data_helper.convert_model_to_external_data(m, location="w.bin",
                                                               size_threshold=0)
    assert theirs.graph.initializer[0].data_location == onnx.TensorProto.EXTERNAL
    same(ours, theirs)


def test_equality_compares_content_both_ways():
    node = onnx_nodes()[1]
    ours = ol.NodeProto.FromString(node.SerializeToString())
    assert ours == node and node == ours
    # protobuf's __eq__ returns NotImplemented for other classes, so Python asks ours.
    assert node.__eq__(ours) is NotImplemented
    ours.name = "changed"
    assert ours != node and node != ours
    assert not (ours == node) and not (node == ours)
    # Other types are not equal, as protobuf's messages of different types are not.
    assert ours != onnx.GraphProto() and onnx.GraphProto() != ours
    assert ol.GraphProto() != onnx.NodeProto()
    # Inside containers too.
    g = onnx_graph()
    ours_g = ol.GraphProto.FromString(g.SerializeToString())
    assert list(ours_g.node) == list(g.node)
    assert ours_g.node == g.node and g.node == ours_g.node
    assert ours_g.node[0].input == g.node[0].input and g.node[0].input == ours_g.node[0].input


def test_wrong_types_raise_protobufs_errors_naming_modules():
    g = ol.GraphProto()
    tensor = onh.from_array(np.ones(2, np.float32))
    for call, onnx_call in [
        (lambda: g.node.append(tensor), lambda: onnx.GraphProto().node.append(tensor)),
        (lambda: g.node.extend([tensor]), lambda: onnx.GraphProto().node.extend([tensor])),
        (lambda: g.node.insert(0, tensor), lambda: onnx.GraphProto().node.insert(0, tensor)),
    ]:
        with pytest.raises(TypeError):
            onnx_call()
        with pytest.raises(TypeError, match=r"onnx_light\.NodeProto, got onnx\.onnx_ml_pb2\.TensorProto"):
            call()
    with pytest.raises(TypeError):
        onnx.GraphProto().CopyFrom(tensor)
    with pytest.raises(TypeError, match=r"expected onnx_light\.GraphProto got onnx\.onnx_ml_pb2\.TensorProto"):
        g.CopyFrom(tensor)
    with pytest.raises(TypeError, match=r"expected onnx_light\.GraphProto got onnx\.onnx_ml_pb2\.TensorProto"):
        g.MergeFrom(tensor)
    with pytest.raises(TypeError, match=r"expected onnx_light\.ModelProto, got onnx\.onnx_ml_pb2\.GraphProto"):
        ol.save(onnx_graph(), "never.onnx")
    with pytest.raises(TypeError, match=r"expected onnx_light\.ModelProto, got onnx_light\.GraphProto"):
        ol.save(ol.GraphProto(), "never.onnx")
    with pytest.raises(TypeError, match=r"expected onnx_light\.ModelProto, got onnx\.onnx_ml_pb2\.NodeProto"):
        ol._native.serialize(onnx_nodes()[0])


def sample_models():
    """The backend test models (real models: they cover the message types and field kinds)."""
    return backend_data.models()


def test_the_sample_is_large():
    assert len(sample_models()) > 100


@pytest.mark.parametrize("path", sample_models(), ids=lambda p: p.parent.name)
def test_json_and_text_format_same_output_and_parse_back(path):
    data = path.read_bytes()
    theirs = onnx.ModelProto.FromString(data)
    ours = ol.ModelProto.FromString(data)
    js = json_format.MessageToJson(theirs)
    assert json_format.MessageToJson(ours) == js
    assert json_format.MessageToDict(ours) == json_format.MessageToDict(theirs)
    txt = text_format.MessageToString(theirs)
    assert text_format.MessageToString(ours) == txt
    assert text_format.MessageToString(ours, as_one_line=True) == \
        text_format.MessageToString(theirs, as_one_line=True)
    same(json_format.Parse(js, ol.ModelProto()), theirs)
    same(json_format.ParseDict(json_format.MessageToDict(theirs), ol.ModelProto()), theirs)
    same(text_format.Parse(txt, ol.ModelProto()), theirs)
    merged = ol.ModelProto(doc_string="kept")
    expected = onnx.ModelProto(doc_string="kept")
    text_format.Merge(txt, merged)
    text_format.Merge(txt, expected)
    same(merged, expected)
