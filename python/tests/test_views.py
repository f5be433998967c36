"""Views into the Rust model: they never dangle. Every operation that removes or replaces a
message leaves the views of it showing the content they had (as protobuf's Python objects do),
checked side by side with onnx's objects; the model never shows a detached view's changes."""
import gc

import onnx
import pytest

import onnx_light as ol


def build(mod):
    g = mod.GraphProto(name="g")
    for i in range(5):
        n = g.node.add(op_type=f"Op{i}", input=[f"a{i}", f"b{i}"], output=[f"c{i}"], name=f"n{i}")
        n.attribute.add(name="k", i=i, type=mod.AttributeProto.INT)
        t = n.attribute.add(name="t", type=mod.AttributeProto.TENSOR).t
        t.name = f"t{i}"
        t.dims.extend([i, 2])
    vi = g.input.add(name="x")
    vi.type.tensor_type.elem_type = 1
    vi.type.tensor_type.shape.dim.add(dim_value=3)
    m = mod.ModelProto(ir_version=9, graph=g)
    return m


def both():
    return build(ol), build(onnx)


def snap(x):
    """What a view shows, compared across the two implementations."""
    return x.SerializeToString()


def check_same(ours, ref):
    assert snap(ours) == snap(ref)


def test_identity_and_cache():
    m = build(ol)
    assert m.graph is m.graph
    assert m.graph.node[1] is m.graph.node[1]
    assert m.graph.node[1] is not m.graph.node[2]


@pytest.mark.parametrize("op", ["del", "pop", "slice", "clear", "ClearField", "remove"])
def test_removed_elements_keep_their_content(op):
    ours, ref = both()
    views = []
    for m in (ours, ref):
        n1, n3 = m.graph.node[1], m.graph.node[3]
        t3 = n3.attribute[1].t
        dims = t3.dims
        if op == "del":
            del m.graph.node[3]
        elif op == "pop":
            assert snap(m.graph.node.pop(3)) == snap(n3)
        elif op == "slice":
            del m.graph.node[1:4:2]
        elif op == "clear":
            if m is ours:
                m.graph.node.clear()
            else:
                del m.graph.node[:]
        elif op == "ClearField":
            m.graph.ClearField("node")
        elif op == "remove":
            m.graph.node.remove(n3)
        views.append((n1, n3, t3, dims))
    gc.collect()
    for (a1, a3, at, ad), (b1, b3, bt, bd) in [views]:
        check_same(a3, b3)
        check_same(at, bt)
        assert list(ad) == list(bd)
        check_same(a1, b1)
    check_same(ours, ref)
    # Writing to a detached view does not change the model.
    n3 = views[0][1]
    before = snap(ours)
    n3.op_type = "Changed"
    views[0][2].name = "changed"
    assert snap(ours) == before
    assert n3.op_type == "Changed"


def test_slots_are_reused_without_confusing_views():
    m = build(ol)
    old = m.graph.node[2]
    del m.graph.node[2]
    fresh = [m.graph.node.add(op_type=f"New{i}") for i in range(3)]
    assert old.op_type == "Op2"
    assert [n.op_type for n in fresh] == ["New0", "New1", "New2"]
    assert [n.op_type for n in m.graph.node] == ["Op0", "Op1", "Op3", "Op4", "New0", "New1", "New2"]


def test_clear_sub_message_and_copy_from():
    ours, ref = both()
    got = []
    for m in (ours, ref):
        g = m.graph
        n0 = g.node[0]
        tt = g.input[0].type.tensor_type
        dim = tt.shape.dim[0]
        m.ClearField("graph")
        assert not m.HasField("graph")
        got.append((g, n0, tt, dim))
    for a, b in zip(got[0], got[1]):
        check_same(a, b)
    check_same(ours, ref)

    ours, ref = both()
    got = []
    for mod, m in ((ol, ours), (onnx, ref)):
        n0 = m.graph.node[0]
        t = n0.attribute[1].t
        n0.CopyFrom(mod.NodeProto(op_type="Fresh", input=["z"]))
        got.append((n0, t))
    check_same(got[0][0], got[1][0])
    assert got[0][0] is ours.graph.node[0]
    # The removed attribute tensor keeps its content.
    assert got[0][1].name == "t0" and list(got[0][1].dims) == [0, 2]
    check_same(ours, ref)


def test_copy_from_itself_and_from_a_descendant():
    ours, ref = both()
    for m in (ours, ref):
        g = m.graph
        g.CopyFrom(g)
        inner = g.node[2]
        inner.CopyFrom(inner)
        # Copy a sub-message over one of its ancestors.
        t = g.node[4].attribute[1].t
        keep = g.node[4]
        m.graph.node[4].attribute[1].t.CopyFrom(t)
    check_same(ours, ref)
    ours.graph.CopyFrom(ours.graph.node[0].attribute[1].t.__class__ and ol.GraphProto(name="x"))
    assert ours.graph.name == "x" and len(ours.graph.node) == 0


def test_parse_from_string_and_clear_detach():
    m = build(ol)
    n = m.graph.node[0]
    g = m.graph
    m.ParseFromString(ol.ModelProto(ir_version=3).SerializeToString())
    assert m.ir_version == 3 and not m.HasField("graph")
    assert n.op_type == "Op0" and g.name == "g" and len(g.node) == 5
    g2 = build(ol).graph
    n2 = g2.node[4]
    g2.Clear()
    assert len(g2.node) == 0 and n2.op_type == "Op4"


def test_oneof_switch_detaches_the_old_member():
    ours_tp, ref_tp = ol.TypeProto(), onnx.TypeProto()
    got = []
    for tp in (ours_tp, ref_tp):
        tp.tensor_type.elem_type = 7
        tp.tensor_type.shape.dim.add(dim_value=4)
        tt = tp.tensor_type
        dim = tt.shape.dim[0]
        tp.sequence_type.elem_type.tensor_type.elem_type = 1  # switches the oneof
        got.append((tt, dim))
        assert tp.WhichOneof("value") == "sequence_type"
    check_same(got[0][0], got[1][0])
    check_same(got[0][1], got[1][1])
    check_same(ours_tp, ref_tp)
    # MergeFrom switching the oneof too.
    a, b = ol.TypeProto(), onnx.TypeProto()
    for tp, mod in ((a, ol), (b, onnx)):
        tp.map_type.key_type = 7
        mt = tp.map_type
        src = mod.TypeProto()
        src.optional_type.elem_type.tensor_type.elem_type = 3
        tp.MergeFrom(src)
        assert mt.key_type == 7
    check_same(a, b)


def test_merge_from_keeps_views_attached():
    ours, ref = both()
    for mod, m in ((ol, ours), (onnx, ref)):
        g = m.graph
        n0 = g.node[0]
        extra = mod.ModelProto(producer_name="p")
        extra.graph.node.add(op_type="Extra")
        m.MergeFrom(extra)
        m.MergeFromString(extra.SerializeToString())
        n0.name = "still-attached"
        assert g.node[0].name == "still-attached"
    check_same(ours, ref)


def test_unset_sub_messages_read_as_default_without_setting():
    ours, ref = ol.ModelProto(), onnx.ModelProto()
    for m in (ours, ref):
        assert m.graph.name == ""
        assert len(m.graph.node) == 0
        assert m.graph.input[:] == []
        assert not m.HasField("graph")
        g = m.graph
        g.name = "set"
        assert m.HasField("graph") and m.graph.name == "set"
    check_same(ours, ref)
    # A stub written through a container sets every level.
    m = ol.ModelProto()
    m.graph.node.add(op_type="A")
    assert m.HasField("graph") and m.graph.node[0].op_type == "A"


def test_views_survive_the_model_object():
    m = build(ol)
    n = m.graph.node[3]
    attrs = n.attribute
    del m
    gc.collect()
    assert n.op_type == "Op3" and attrs[1].t.name == "t3"


def test_repeated_scalars_behave_like_protobuf():
    ours, ref = ol.NodeProto(), onnx.NodeProto()
    for n in (ours, ref):
        n.input.extend(["a", "b", "c", "d"])
        n.input[1] = "B"
        n.input[1:3] = ["x", "y", "z"]
        del n.input[::2]
        n.input.append("tail")
        n.input.insert(0, "head")
        assert n.input.pop() == "tail"
        n.input.remove("head")
        n.output.extend(["o"])
        n.input.sort()
    assert list(ours.input) == list(ref.input)
    assert ours.input == list(ref.input)
    check_same(ours, ref)
    for n in (ours, ref):
        with pytest.raises(TypeError):
            n.input.append(5)
        with pytest.raises(IndexError):
            n.input[99]


def test_repeated_composite_behave_like_protobuf():
    ours, ref = both()
    for mod, m in ((ol, ours), (onnx, ref)):
        nodes = m.graph.node
        nodes.append(mod.NodeProto(op_type="App"))
        nodes.extend([mod.NodeProto(op_type="E1"), mod.NodeProto(op_type="E2")])
        nodes.insert(1, mod.NodeProto(op_type="Ins"))
        nodes.sort(key=lambda n: n.op_type)
        with pytest.raises(TypeError):
            nodes[0] = mod.NodeProto()
        assert [n.op_type for n in nodes[1:3]] == [n.op_type for n in list(nodes)[1:3]]
    check_same(ours, ref)
    before = snap(ours)
    with pytest.raises(TypeError):
        ours.graph.node.append(ol.GraphProto())  # (protobuf appends an empty node first)
    assert snap(ours) == before
    assert ours.graph.node == ol.load_from_string(ours.SerializeToString()).graph.node


def test_assignment_rules():
    m = ol.ModelProto()
    with pytest.raises(AttributeError):
        m.graph = ol.GraphProto()
    with pytest.raises(AttributeError):
        m.opset_import = []
    with pytest.raises(AttributeError):
        m.no_such_field = 1
    with pytest.raises(TypeError):
        m.ir_version = "x"
    with pytest.raises(ValueError):
        ol.TensorProto().data_type = 2 ** 40
    with pytest.raises(ValueError):
        ol.AttributeProto().type = 99
    with pytest.raises(ValueError):
        ol.NodeProto(no_such_field=1)
    with pytest.raises(ValueError):
        m.HasField("opset_import")
    with pytest.raises(ValueError):
        m.ClearField("nope")
    with pytest.raises(TypeError):
        m.CopyFrom(ol.GraphProto())
    with pytest.raises(TypeError):
        hash(m)


def test_enums_and_classes_match_onnx():
    for name in ["TensorProto", "AttributeProto"]:
        ours, ref = getattr(ol, name), getattr(onnx, name)
        for enum_name in {"TensorProto": ["DataType", "DataLocation"], "AttributeProto": ["AttributeType"]}[name]:
            e_ours, e_ref = getattr(ours, enum_name), getattr(ref, enum_name)
            assert e_ours.items() == list(e_ref.items())
            for k, v in e_ref.items():
                assert getattr(ours, k) == v and e_ours.Name(v) == k and e_ours.Value(k) == v
    assert ol.TensorProto.Segment().__class__.__name__ == "Segment"
    assert ol.TypeProto.Tensor is not None and ol.TensorShapeProto.Dimension is not None


def test_pickle_copy_and_repr():
    import copy
    import pickle

    m = build(ol)
    assert snap(pickle.loads(pickle.dumps(m))) == snap(m)
    c = copy.deepcopy(m.graph.node[0])
    c.op_type = "X"
    assert m.graph.node[0].op_type == "Op0"
    assert "op_type" in repr(m.graph.node[0])
    t = ol.TensorProto(raw_data=b"\x01" * 100000)
    assert len(repr(t)) < 1000 and "100000 bytes" in repr(t)
    assert len(str(t)) > 100000


def test_sub_messages_of_a_parsed_model():
    """A parse cuts its sub-messages (a value_info's type, tensor_type and shape, an attribute's
    tensor) from its metadata blocks: views of them outlive the model, and removing, replacing,
    switching and merging them behaves as protobuf does."""
    data = build(onnx)
    for i in range(30):
        vi = data.graph.value_info.add(name=f"v{i}")
        vi.type.tensor_type.elem_type = 1
        vi.type.tensor_type.shape.dim.add(dim_value=i)
        vi.type.tensor_type.shape.dim.add(dim_param="batch")
    blob = data.SerializeToString()
    ours, ref = ol.ModelProto.FromString(blob), onnx.ModelProto.FromString(blob)
    got = []
    for mod, m in ((ol, ours), (onnx, ref)):
        g = m.graph
        shape = g.value_info[3].type.tensor_type.shape
        tensor = g.node[2].attribute[1].t
        tt = g.value_info[4].type.tensor_type
        g.value_info[3].ClearField("type")
        g.node[2].attribute[1].ClearField("t")
        g.value_info[4].type.sequence_type.elem_type.tensor_type.elem_type = 7  # switches the oneof
        g.value_info[5].type.CopyFrom(g.value_info[6].type)
        src = mod.TypeProto()
        src.optional_type.elem_type.tensor_type.elem_type = 3
        g.value_info[7].type.MergeFrom(src)
        got.append((shape, tensor, tt, g.value_info[8].type.tensor_type.shape))
    check_same(ours, ref)
    views, ref_views = got
    del ours, got
    gc.collect()
    for a, b in zip(views, ref_views):
        check_same(a, b)
    assert views[3].dim[0].dim_value == 8 and views[3].dim[1].dim_param == "batch"
