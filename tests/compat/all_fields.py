"""Messages built with the onnx package that use every message and field of onnx.proto and
onnx-data.proto, plus hand-made wire encodings protobuf accepts (unknown fields of every wire
type, groups, packed/unpacked variants, merges, oneof switches, unknown closed-enum values)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def tag(field: int, wt: int) -> bytes:
    return varint(field << 3 | wt)


def ld(field: int, payload: bytes) -> bytes:
    return tag(field, 2) + varint(len(payload)) + payload


# Unknown fields of every wire type (a group included, nested).
UNKNOWN = (
    tag(1000, 0) + varint(300)
    + tag(1001, 1) + (12345).to_bytes(8, "little")
    + ld(1002, b"opaque bytes")
    + tag(1003, 3) + tag(1, 0) + varint(7) + tag(2, 3) + tag(5, 5) + b"\x01\x02\x03\x04" + tag(2, 4) + tag(1003, 4)
    + tag(1004, 5) + b"\xff\xff\xff\x7f"
)


def with_unknown(msg):
    """A copy of `msg` carrying UNKNOWN (protobuf keeps it and writes it back last)."""
    out = type(msg)()
    out.ParseFromString(msg.SerializeToString() + UNKNOWN)
    return out


def _type_protos():
    shape_tensor = helper.make_tensor_type_proto(TensorProto.FLOAT, [2, "N", None])
    shape_tensor.tensor_type.shape.dim[0].denotation = "BATCH"
    shape_tensor.denotation = "IMAGE"
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.INT64, [3]))
    mp = helper.make_map_type_proto(TensorProto.STRING, helper.make_tensor_type_proto(TensorProto.DOUBLE, []))
    opt = helper.make_optional_type_proto(seq)
    sparse = helper.make_sparse_tensor_type_proto(TensorProto.FLOAT16, [4, 4])
    opaque = onnx.TypeProto()
    opaque.opaque_type.domain = "custom.domain"
    opaque.opaque_type.name = "Blob"
    return [shape_tensor, seq, mp, opt, sparse, opaque]


def _tensors():
    rng = np.random.default_rng(1)
    raw = numpy_helper.from_array(rng.standard_normal((3, 5)).astype(np.float32), "raw_f32")
    raw.doc_string = "raw"
    helper.set_metadata_props if hasattr(helper, "set_metadata_props") else None
    md = raw.metadata_props.add()
    md.key, md.value = "k", "v"
    typed = [
        helper.make_tensor("floats", TensorProto.FLOAT, [3], [1.5, -2.0, float("inf")]),
        helper.make_tensor("int32s", TensorProto.INT32, [4], [1, -1, 2**31 - 1, -(2**31)]),
        helper.make_tensor("int64s", TensorProto.INT64, [2], [2**62, -(2**63)]),
        helper.make_tensor("doubles", TensorProto.DOUBLE, [2], [1e300, -0.0]),
        helper.make_tensor("uint64s", TensorProto.UINT64, [2], [2**64 - 1, 0]),
        helper.make_tensor("strings", TensorProto.STRING, [3], [b"a", b"", b"\xff\xfe non-utf8"]),
        helper.make_tensor("f16", TensorProto.FLOAT16, [2], [1.0, 2.0]),
        helper.make_tensor("bools", TensorProto.BOOL, [3], [True, False, True]),
        helper.make_tensor("int4", TensorProto.INT4, [3], [1, -2, 7]),
    ]
    seg = helper.make_tensor("segmented", TensorProto.FLOAT, [2], [1.0, 2.0])
    seg.segment.begin, seg.segment.end = 0, 2
    ext = TensorProto()
    ext.name = "external"
    ext.data_type = TensorProto.FLOAT
    ext.dims.extend([1024])
    ext.data_location = TensorProto.EXTERNAL
    for k, v in [("location", "weights.bin"), ("offset", "4096"), ("length", "4096"), ("checksum", "0" * 40)]:
        e = ext.external_data.add()
        e.key, e.value = k, v
    empty = TensorProto()
    empty.data_type = 0
    return [raw, *typed, seg, ext, empty]


def _sparse():
    values = helper.make_tensor("sp_values", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    indices = helper.make_tensor("sp_indices", TensorProto.INT64, [3], [0, 5, 9])
    return helper.make_sparse_tensor(values, indices, [10])


def _subgraph(name):
    n = helper.make_node("Identity", ["a"], ["b"], name=f"{name}_id")
    return helper.make_graph(
        [n], name,
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])],
        initializer=[helper.make_tensor(f"{name}_c", TensorProto.FLOAT, [1], [3.0])],
    )


def _device_config():
    dc = onnx.NodeDeviceConfigurationProto()
    dc.configuration_id = "cfg0"
    dc.pipeline_stage = -3
    spec = dc.sharding_spec.add()
    spec.tensor_name = "x"
    spec.device.extend([0, 1, 2**40])
    m = spec.index_to_device_group_map.add()
    m.key = 1
    m.value.extend([0, 1])
    sd = spec.sharded_dim.add()
    sd.axis = -1
    s1 = sd.simple_sharding.add()
    s1.dim_value = 8
    s1.num_shards = 2
    s2 = sd.simple_sharding.add()
    s2.dim_param = "N"
    return dc


def build_model() -> onnx.ModelProto:
    """A model using every message and field."""
    tensors = _tensors()
    types = _type_protos()
    attrs = [
        helper.make_attribute("f", 0.25),
        helper.make_attribute("i", -7),
        helper.make_attribute("s", b"bytes\x00\xff"),
        helper.make_attribute("t", tensors[1]),
        helper.make_attribute("g", _subgraph("then")),
        helper.make_attribute("sparse", _sparse()),
        helper.make_attribute("tp", types[1]),
        helper.make_attribute("floats", [1.0, 2.5]),
        helper.make_attribute("ints", [1, -2, 2**40]),
        helper.make_attribute("strings", [b"x", b"yz"]),
        helper.make_attribute("tensors", tensors[2:4]),
        helper.make_attribute("graphs", [_subgraph("g1"), _subgraph("g2")]),
        helper.make_attribute("sparse_tensors", [_sparse()]),
        helper.make_attribute("type_protos", types[:3]),
    ]
    ref = onnx.AttributeProto()
    ref.name, ref.ref_attr_name, ref.type = "alpha", "outer_alpha", onnx.AttributeProto.FLOAT
    attrs.append(ref)
    attrs[0].doc_string = "attr doc"
    node = helper.make_node("Custom", ["x", "", "w"], ["y", "z"], name="n0", domain="custom.domain", doc_string="nd")
    node.attribute.extend(attrs)
    node.overload = "v2"
    md = node.metadata_props.add()
    md.key, md.value = "nk", "nv"
    node.device_configurations.append(_device_config())
    nodes = [with_unknown(node), helper.make_node("Relu", ["y"], ["out"])]

    inputs = [helper.make_value_info(f"in{i}", t, doc_string=f"input {i}") for i, t in enumerate(types)]
    inputs[0].metadata_props.add().key = "vk"
    graph = helper.make_graph(
        nodes, "main", inputs,
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N"])],
        initializer=tensors,
        doc_string="graph doc",
        value_info=[helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        sparse_initializer=[_sparse()],
    )
    qa = graph.quantization_annotation.add()
    qa.tensor_name = "y"
    p = qa.quant_parameter_tensor_names.add()
    p.key, p.value = "SCALE_TENSOR", "s"
    graph.metadata_props.add().key = "gk"

    fn = helper.make_function(
        "custom.domain", "MyFn", ["a"], ["b"],
        [helper.make_node("Neg", ["a"], ["b"])],
        [helper.make_opsetid("", 21)],
        attributes=["alpha"],
        attribute_protos=[helper.make_attribute("beta", 2)],
        doc_string="fn doc",
        overload="ov",
        value_info=[helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])],
    )
    fn.metadata_props.add().key = "fk"

    model = helper.make_model(graph, producer_name="all-fields", producer_version="1.0",
                              opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("custom.domain", 1)],
                              functions=[fn])
    model.domain = "ai.test"
    model.model_version = 42
    model.doc_string = "model doc"
    helper.set_model_props(model, {"a": "1", "b": "2"})
    ti = model.training_info.add()
    ti.initialization.CopyFrom(_subgraph("init"))
    ti.algorithm.CopyFrom(_subgraph("algo"))
    b = ti.initialization_binding.add()
    b.key, b.value = "w", "w0"
    b = ti.update_binding.add()
    b.key, b.value = "w", "w1"
    cfg = model.configuration.add()
    cfg.name, cfg.num_devices = "mesh", 4
    cfg.device.extend(["gpu0", "gpu1"])
    return with_unknown(model)


def build_data_protos():
    """SequenceProto, MapProto and OptionalProto values of every kind."""
    t = helper.make_tensor("t", TensorProto.FLOAT, [2], [1.0, 2.0])
    seq = helper.make_sequence("seq", onnx.SequenceProto.TENSOR, [t, t])
    seq_sparse = onnx.SequenceProto(name="sps", elem_type=onnx.SequenceProto.SPARSE_TENSOR)
    seq_sparse.sparse_tensor_values.append(_sparse())
    mp = helper.make_map("m", TensorProto.INT64, [1, 2], seq)
    mp_str = onnx.MapProto(name="ms", key_type=TensorProto.STRING)
    mp_str.string_keys.extend([b"a", b"b"])
    mp_str.values.CopyFrom(seq)
    seq_nested = onnx.SequenceProto(name="nested", elem_type=onnx.SequenceProto.SEQUENCE)
    seq_nested.sequence_values.append(seq)
    seq_nested.map_values.append(mp)
    opt = helper.make_optional("o", onnx.OptionalProto.TENSOR, t)
    seq_nested.optional_values.append(opt)
    opt_all = onnx.OptionalProto(name="oa", elem_type=onnx.OptionalProto.OPTIONAL)
    opt_all.sparse_tensor_value.CopyFrom(_sparse())
    opt_all.sequence_value.CopyFrom(seq)
    opt_all.map_value.CopyFrom(mp)
    opt_all.optional_value.CopyFrom(opt)
    opt_all.tensor_value.CopyFrom(t)
    return {
        "SequenceProto": [seq, seq_sparse, with_unknown(seq_nested)],
        "MapProto": [mp, with_unknown(mp_str)],
        "OptionalProto": [opt, with_unknown(opt_all)],
    }


def hand_encodings():
    """(message type, bytes) pairs that protobuf accepts, written by hand."""
    f32 = (1.5).hex()  # noqa: F841 (documentation)
    cases = []
    # TensorProto: float_data ([packed]) sent unpacked; dims (unpacked) sent packed; both mixed.
    t = tag(1, 2) + varint(3) + varint(2) + varint(300)[:2] + tag(1, 0) + varint(5)
    t += tag(4, 5) + np.float32(1.5).tobytes() + ld(4, np.array([2.0, 3.0], np.float32).tobytes())
    t += tag(2, 0) + varint(1) + tag(8, 2) + varint(1) + b"n"
    cases.append(("TensorProto", t))
    # int32 field with a 10-byte negative value, and a value above 2^31 (truncated to 32 bits).
    cases.append(("TensorProto", tag(2, 0) + varint(-5) + tag(5, 0) + varint(2**33 + 7)))
    # Overlong varint encodings (non-canonical) of known and unknown fields.
    cases.append(("TensorProto", tag(2, 0) + b"\x81\x80\x80\x00" + tag(900, 0) + b"\x81\x80\x00"))
    # Optional scalar repeated: last one wins; string repeated: last wins.
    cases.append(("TensorProto", tag(2, 0) + varint(1) + ld(8, b"a") + tag(2, 0) + varint(7) + ld(8, b"b")))
    # Optional message twice: merged.
    seg1 = ld(3, tag(1, 0) + varint(4))
    seg2 = ld(3, tag(2, 0) + varint(9))
    cases.append(("TensorProto", seg1 + seg2))
    # Oneof: dim_value then dim_param then dim_value (last wins); message oneof switching.
    dim = tag(1, 0) + varint(3) + ld(2, b"N") + tag(1, 0) + varint(5)
    cases.append(("TensorShapeProto", ld(1, dim) + ld(1, ld(2, b"M") + ld(3, b"den"))))
    tp = ld(1, tag(1, 0) + varint(1)) + ld(4, ld(1, ld(1, tag(1, 0) + varint(7)))) + ld(1, tag(1, 0) + varint(2))
    cases.append(("TypeProto", tp))
    tp2 = ld(1, tag(1, 0) + varint(1)) + ld(1, ld(2, ld(1, tag(1, 0) + varint(3))))
    cases.append(("TypeProto", tp2))
    # Closed enums with unknown values (AttributeProto.type, TensorProto.data_location), and a
    # known field with the wrong wire type (kept as unknown).
    cases.append(("AttributeProto", ld(1, b"a") + tag(20, 0) + varint(99) + tag(20, 0) + varint(2) + tag(20, 0) + varint(-1)))
    for v in (2**32 + 99, 2**32 + 1, 2**31 + 5, -(2**40)):
        cases.append(("AttributeProto", tag(20, 0) + varint(v)))
    cases.append(("TensorProto", tag(14, 0) + varint(5) + tag(14, 0) + varint(1) + ld(2, b"wrong wire type")))
    cases.append(("ModelProto", tag(1, 5) + b"\x01\x02\x03\x04" + tag(7, 0) + varint(3)))
    # Empty packed field, empty message, empty strings, zero-valued optionals (presence kept).
    cases.append(("TensorProto", ld(4, b"") + ld(7, b"") + tag(2, 0) + varint(0) + ld(8, b"") + ld(9, b"")))
    cases.append(("ModelProto", b""))
    cases.append(("ModelProto", ld(7, b"") + tag(1, 0) + varint(0)))
    # Unknown fields everywhere, including inside a nested group with every wire type.
    cases.append(("ModelProto", UNKNOWN + ld(7, UNKNOWN + ld(1, UNKNOWN)) + UNKNOWN))
    # Deep but legal nesting: 99 levels of TypeProto.sequence_type.elem_type.
    deep = ld(1, tag(1, 0) + varint(1))
    for _ in range(49):
        deep = ld(4, ld(1, deep))
    cases.append(("TypeProto", deep))
    return cases
