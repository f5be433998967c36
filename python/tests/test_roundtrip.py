"""Every model and every serialized proto of the onnx wheel's test data round-trips
byte-identically through the package (load, views, SerializeToString), in every load mode."""
import onnx
import pytest

import onnx_light as ol
from backend_data import message_class, models, protos

MODELS = models()
PROTOS = protos()


def test_data_is_there():
    assert len(MODELS) > 100 and len(PROTOS) > 300


@pytest.mark.parametrize("mode", ["path", "bytes", "path_no_copy", "bytes_no_copy", "file"])
def test_every_model_round_trips(mode):
    for path in MODELS:
        data = path.read_bytes()
        expected = onnx.load_from_string(data).SerializeToString()
        if mode == "path":
            m = ol.load(path, load_external_data=False)
        elif mode == "path_no_copy":
            m = ol.load(str(path), load_external_data=False, no_copy=True)
        elif mode == "bytes":
            m = ol.load_from_string(data, load_external_data=False)
        elif mode == "bytes_no_copy":
            m = ol.load(data, load_external_data=False, no_copy=True)
        else:
            with open(path, "rb") as f:
                m = ol.load(f, load_external_data=False)
        assert m.SerializeToString() == expected, path
        assert m.ByteSize() == len(expected), path


def test_every_proto_round_trips():
    for path, kind in PROTOS:
        data = path.read_bytes()
        expected = message_class(kind).FromString(data).SerializeToString()
        cls = getattr(ol, kind)
        assert cls.FromString(data).SerializeToString() == expected, path
        m = cls()
        assert m.ParseFromString(data) == len(data)
        assert m.SerializeToString() == expected, path


def test_views_read_what_onnx_reads():
    """Every node's fields read through the views equal onnx's Python objects."""
    for path in MODELS[::7]:
        ours = ol.load(path, load_external_data=False)
        ref = onnx.load(path, load_external_data=False)
        assert ours.ir_version == ref.ir_version
        assert [(o.domain, o.version) for o in ours.opset_import] == [
            (o.domain, o.version) for o in ref.opset_import
        ]
        for a, b in zip(ours.graph.node, ref.graph.node):
            assert (a.op_type, a.name, a.domain) == (b.op_type, b.name, b.domain)
            assert list(a.input) == list(b.input) and list(a.output) == list(b.output)
            for x, y in zip(a.attribute, b.attribute):
                assert (x.name, x.type, x.i, x.s, list(x.ints), list(x.strings)) == (
                    y.name, y.type, y.i, y.s, list(y.ints), list(y.strings)
                )
                assert x.f == y.f or (x.f != x.f and y.f != y.f)
        for a, b in zip(ours.graph.input, ref.graph.input):
            assert a.name == b.name
            assert a.type.WhichOneof("value") == b.type.WhichOneof("value")
            assert a.type.tensor_type.elem_type == b.type.tensor_type.elem_type
            assert [d.dim_value for d in a.type.tensor_type.shape.dim] == [
                d.dim_value for d in b.type.tensor_type.shape.dim
            ]


def test_built_messages_serialize_as_onnx_does():
    def build(mod):
        n = mod.NodeProto(op_type="Conv", input=["x", "w"], output=["y"], name="conv")
        a = n.attribute.add(name="strides", type=mod.AttributeProto.INTS, ints=[1, 2])
        a2 = n.attribute.add()
        a2.name = "alpha"
        a2.f = 0.5
        a2.type = mod.AttributeProto.FLOAT
        g = mod.GraphProto(name="g", node=[n])
        vi = g.input.add(name="x")
        vi.type.tensor_type.elem_type = mod.TensorProto.FLOAT
        d = vi.type.tensor_type.shape.dim.add()
        d.dim_param = "N"
        vi.type.tensor_type.shape.dim.add(dim_value=3)
        t = g.initializer.add(name="w", data_type=mod.TensorProto.FLOAT, dims=[2])
        t.float_data.extend([1.5, -2.0])
        m = mod.ModelProto(ir_version=10, producer_name="p", graph=g)
        m.opset_import.add(domain="", version=21)
        return m, a

    ours, _ = build(ol)
    ref, _ = build(onnx)
    assert ours.SerializeToString() == ref.SerializeToString()
    assert str(ours) == str(ref)
