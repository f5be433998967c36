"""onnx_light.inliner against onnx.inliner (the same C++ code over onnx's protobuf build): the
bytes of every inlined model, on models with model-local functions (nested, with attributes,
of another opset) and on the onnx wheel's models that use functions; the same errors."""
import onnx
import onnx.inliner
import pytest
from conftest import backend_data
from onnx import helper

import onnx_light as ol
from onnx_light import inliner


def local_function_model(opset=18, function_opset=18):
    """A graph calling a local function that calls another local function and Clip with an
    attribute reference; one function of another default-domain opset."""
    inner = helper.make_function(
        "local", "square", ["x"], ["y"], [helper.make_node("Mul", ["x", "x"], ["y"])],
        [helper.make_opsetid("", function_opset)])
    leaky = helper.make_node("LeakyRelu", ["t"], ["y"])
    leaky.attribute.append(helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    outer = helper.make_function(
        "local", "square_plus", ["x"], ["y"],
        [helper.make_node("square", ["x"], ["s"], domain="local"),
         helper.make_node("Add", ["s", "x"], ["t"]), leaky],
        [helper.make_opsetid("", function_opset), helper.make_opsetid("local", 1)],
        attributes=["alpha"])
    graph = helper.make_graph(
        [helper.make_node("square_plus", ["a"], ["b"], domain="local", alpha=0.5),
         helper.make_node("square", ["b"], ["c"], domain="local")],
        "g", [helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("c", onnx.TensorProto.FLOAT, [3])])
    return helper.make_model(graph, functions=[inner, outer],
                             opset_imports=[helper.make_opsetid("", opset),
                                            helper.make_opsetid("local", 1)])


def models():
    out = [("local", local_function_model()), ("local_other_opset", local_function_model(18, 13))]
    for path in backend_data.models():
        m = onnx.load(str(path), load_external_data=False)
        if m.functions or any(n.domain not in ("", "ai.onnx") for n in m.graph.node):
            out.append((str(path), m))
    return out


def outcome(f):
    try:
        return f().SerializeToString()
    except Exception as e:  # noqa: BLE001 - compared by type and text
        return (type(e).__name__, str(e))


@pytest.mark.parametrize("convert_version", [False, True])
def test_inline_local_functions_as_onnx(convert_version):
    for name, m in models():
        theirs = outcome(lambda: onnx.inliner.inline_local_functions(m, convert_version))
        ours = outcome(lambda: inliner.inline_local_functions(ol.from_onnx(m), convert_version))
        assert ours == theirs, name


@pytest.mark.parametrize("exclude", [False, True])
@pytest.mark.parametrize("schema_functions", [False, True])
def test_inline_selected_functions_as_onnx(exclude, schema_functions):
    for name, m in models():
        for ids in ([], [("local", "square")], [("local", "square_plus"), ("", "Clip")]):
            theirs = outcome(lambda: onnx.inliner.inline_selected_functions(
                m, ids, exclude=exclude, inline_schema_functions=schema_functions))
            ours = outcome(lambda: inliner.inline_selected_functions(
                ol.from_onnx(m), ids, exclude=exclude, inline_schema_functions=schema_functions))
            assert ours == theirs, (name, ids)


def test_inlining_inlines_and_leaves_the_model():
    m = ol.from_onnx(local_function_model())
    before = m.SerializeToString()
    out = inliner.inline_local_functions(m)
    assert isinstance(out, ol.ModelProto)
    assert not [n for n in out.graph.node if n.domain == "local"]
    assert m.SerializeToString() == before
    # onnx's messages and model bytes are taken too; anything else is a TypeError.
    assert inliner.inline_local_functions(local_function_model()) == out
    assert inliner.inline_local_functions(before) == out
    with pytest.raises(TypeError):
        inliner.inline_local_functions(ol.GraphProto())
