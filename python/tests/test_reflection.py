"""Reflection as protobuf has it (DESCRIPTOR, ListFields with full field descriptors, enum
descriptors), onnx's names outside the messages (Version, IR_VERSION, OperatorStatus), checked
against the onnx package's generated classes; load's alignment and in-place serialization."""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper as onh

import onnx_light as ol
from onnx_light import numpy_helper as nh
from onnx_light.descriptor import FieldDescriptor


def message_pairs():
    """(onnx class, onnx_light class) of every message, nested ones included."""
    out = []

    def walk(ocls, lcls):
        out.append((ocls, lcls))
        for d in ocls.DESCRIPTOR.nested_types:
            walk(getattr(ocls, d.name), getattr(lcls, d.name))

    for name in onnx.onnx_ml_pb2.DESCRIPTOR.message_types_by_name:
        walk(getattr(onnx, name), getattr(ol, name))
    for name in onnx.onnx_data_pb2.DESCRIPTOR.message_types_by_name:
        walk(getattr(onnx, name), getattr(ol, name))
    return out


def field_facts(f):
    return (
        f.name, f.number, f.index, f.full_name, f.type, f.cpp_type, f.is_repeated, f.has_presence,
        f.default_value, f.camelcase_name, f.json_name,
        f.message_type.full_name if f.message_type else None,
        f.enum_type.full_name if f.enum_type else None,
        f.containing_oneof.full_name if f.containing_oneof else None,
        f.containing_type.full_name,
    )


def enum_facts(e):
    return (e.name, e.full_name, [(v.name, v.number, v.index) for v in e.values],
            e.containing_type.full_name if e.containing_type else None)


@pytest.mark.parametrize("ocls,lcls", message_pairs(), ids=lambda c: getattr(c, "__qualname__", str(c)))
def test_descriptors_match_onnx(ocls, lcls):
    o, d = ocls.DESCRIPTOR, lcls.DESCRIPTOR
    assert lcls().DESCRIPTOR is d
    assert (d.name, d.full_name) == (o.name, o.full_name)
    assert d._concrete_class is lcls
    assert (d.containing_type.full_name if d.containing_type else None) == (
        o.containing_type.full_name if o.containing_type else None)
    assert [field_facts(f) for f in d.fields] == [field_facts(f) for f in o.fields]
    assert sorted(d.fields_by_name) == sorted(o.fields_by_name)
    assert sorted(d.fields_by_number) == sorted(o.fields_by_number)
    assert sorted(d.fields_by_camelcase_name) == sorted(o.fields_by_camelcase_name)
    assert [(x.name, x.full_name, x.index, [f.name for f in x.fields]) for x in d.oneofs] == [
        (x.name, x.full_name, x.index, [f.name for f in x.fields]) for x in o.oneofs]
    assert sorted(d.oneofs_by_name) == sorted(o.oneofs_by_name)
    assert [x.full_name for x in d.nested_types] == [x.full_name for x in o.nested_types]
    assert sorted(d.nested_types_by_name) == sorted(o.nested_types_by_name)
    assert [enum_facts(e) for e in d.enum_types] == [enum_facts(e) for e in o.enum_types]
    assert sorted(d.enum_values_by_name) == sorted(o.enum_values_by_name)
    for f in d.fields:
        assert f.TYPE_MESSAGE == o.fields[0].TYPE_MESSAGE and f.CPPTYPE_STRING == o.fields[0].CPPTYPE_STRING


def test_enum_wrappers_match_onnx():
    for name in ("Version", "OperatorStatus"):
        assert getattr(ol, name).items() == getattr(onnx, name).items()
        assert enum_facts(getattr(ol, name).DESCRIPTOR) == enum_facts(getattr(onnx, name).DESCRIPTOR)
    for k, v in onnx.Version.items() + onnx.OperatorStatus.items():
        if not k.startswith("_"):
            assert getattr(ol, k) == v, k
            if hasattr(onnx, k):
                assert getattr(onnx, k) == v, k
    assert ol.IR_VERSION == onnx.IR_VERSION
    for cls, enum in [("TensorProto", "DataType"), ("TensorProto", "DataLocation"),
                      ("AttributeProto", "AttributeType")]:
        ours, theirs = getattr(getattr(ol, cls), enum), getattr(getattr(onnx, cls), enum)
        assert ours.items() == theirs.items()
        assert enum_facts(ours.DESCRIPTOR) == enum_facts(theirs.DESCRIPTOR)
        assert ours.DESCRIPTOR.values_by_number[1].name == theirs.Name(1)
    assert ol.TensorProto.DataType.Name(ol.TensorProto.BFLOAT16) == "BFLOAT16"
    assert ol.TensorProto.DataType.Value("FLOAT16") == onnx.TensorProto.FLOAT16
    with pytest.raises(ValueError):
        ol.TensorProto.DataType.Value("NOPE")


def sample_model():
    w = onh.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    n = helper.make_node("Gemm", ["x", "w"], ["y"], name="g", alpha=0.5, doc_string="gemm")
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", 1, [1, 2])],
                          [helper.make_tensor_value_info("y", 1, [1, 3])], [w], doc_string="graph")
    return helper.make_model(g, doc_string="model", opset_imports=[helper.make_opsetid("", 17)])


def test_list_fields_gives_full_descriptors():
    proto = sample_model()
    ours = ol.from_onnx(proto)

    def facts(m):
        return [(f.full_name, f.type, f.is_repeated) for f, _ in m.ListFields()]

    for o, m in [(proto, ours), (proto.graph, ours.graph), (proto.graph.node[0], ours.graph.node[0]),
                 (proto.graph.input[0].type, ours.graph.input[0].type)]:
        assert facts(m) == facts(o)
        for f, v in m.ListFields():
            assert f is m.DESCRIPTOR.fields_by_name[f.name]
            assert isinstance(f, FieldDescriptor)


def strip_doc_string(proto):
    """onnx.helper.strip_doc_string, minus its isinstance check on protobuf's Message."""
    for descriptor in proto.DESCRIPTOR.fields:
        if descriptor.name == "doc_string":
            proto.ClearField(descriptor.name)
        elif descriptor.type == descriptor.TYPE_MESSAGE:
            if descriptor.is_repeated:
                for x in getattr(proto, descriptor.name):
                    strip_doc_string(x)
            elif proto.HasField(descriptor.name):
                strip_doc_string(getattr(proto, descriptor.name))


def test_generic_code_over_descriptors_works_as_with_onnx():
    proto = sample_model()
    ours = ol.from_onnx(proto)
    # (onnx.helper.strip_doc_string itself still reads `label`, which protobuf 7 removed.)
    strip_doc_string(proto)
    strip_doc_string(ours)
    assert ours.SerializeToString() == proto.SerializeToString()
    assert "doc_string" not in str(ours)


def misaligned_model(tmp_path):
    """A model whose one large payload starts at an odd file offset."""
    m = sample_model()
    m.graph.initializer[0].CopyFrom(onh.from_array(np.arange(4096, dtype=np.float32), "w"))
    for pad in range(64):
        m.producer_name = "p" * pad
        data = m.SerializeToString()
        raw = m.graph.initializer[0].raw_data
        if data.find(raw) % 64 != 0 and data.find(raw) % 4 != 0:
            break
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    return path, onh.to_array(m.graph.initializer[0])


def test_load_alignment(tmp_path):
    path, expected = misaligned_model(tmp_path)
    for kw in [dict(), dict(no_copy=True), dict(no_copy=True, alignment=4096), dict(alignment=16)]:
        a = nh.to_array(ol.load(path, **kw).graph.initializer[0])
        assert a.ctypes.data % kw.get("alignment", 64) == 0, kw
        assert np.array_equal(a, expected)
    # alignment=1: a no_copy load borrows the payload where the file has it (not aligned).
    for m in (ol.load(path, no_copy=True, alignment=1),
              ol.load_from_string(path.read_bytes(), no_copy=True, alignment=1)):
        a = nh.to_array(m.graph.initializer[0])
        assert a.ctypes.data % 4 != 0 and not a.flags.writeable
        assert np.array_equal(a, expected)
    with pytest.raises(ol.InvalidArgumentError):
        ol.load(path, alignment=3)


def test_serialize_in_place_large_payloads(tmp_path):
    # Payloads above the library's deferral size (1 MiB) are copied after the metadata.
    proto = sample_model()
    for i, n in enumerate([300_000, 3_000_000]):
        proto.graph.initializer.append(onh.from_array(np.full(n, i + 1, np.float32), f"big{i}"))
    ours = ol.from_onnx(proto)
    expected = proto.SerializeToString()
    assert ours.SerializeToString() == expected
    assert ours.graph.initializer[2].SerializeToString() == proto.graph.initializer[2].SerializeToString()
    with open(tmp_path / "f.onnx", "wb") as f:
        ol.save(ours, f)
    assert (tmp_path / "f.onnx").read_bytes() == expected
    # The default instance of an unset sub-message serializes too.
    assert ol.ModelProto().graph.SerializeToString() == b""


def test_type_stubs_name_every_public_attribute():
    """_native.pyi (generated) declares every public name the classes and module have at run
    time, the Python layer's additions included."""
    import ast
    import pathlib

    tree = ast.parse((pathlib.Path(ol.__file__).parent / "_native.pyi").read_text())

    def declared(body):
        names = set()
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.AnnAssign):
                names.add(node.target.id)
        return names

    classes = {}

    def collect(body, prefix=""):
        for node in body:
            if isinstance(node, ast.ClassDef):
                classes[prefix + node.name] = declared(node.body)
                collect(node.body, prefix + node.name + ".")

    collect(tree.body)
    base = classes["Message"]
    for ocls, lcls in message_pairs():
        name = lcls.DESCRIPTOR.full_name[len("onnx."):]
        public = {a for a in dir(lcls) if not a.startswith("_") or a in ("__dlpack__", "__dlpack_device__")}
        missing = public - classes[name] - base
        assert not missing, (name, missing)
    module_names = declared(tree.body)
    for a in dir(ol._native):
        if not a.startswith("_"):
            assert a in module_names, a


def _stub_classes() -> dict:
    """Every class of _native.pyi by dotted name: its ast.ClassDef."""
    import ast
    import pathlib

    tree = ast.parse((pathlib.Path(ol.__file__).parent / "_native.pyi").read_text())
    classes = {}

    def collect(body, prefix=""):
        for node in body:
            if isinstance(node, ast.ClassDef):
                classes[prefix + node.name] = node
                collect(node.body, prefix + node.name + ".")

    collect(tree.body)
    return classes


def _expected_annotation(field) -> str:
    """The stub annotation of an onnx field descriptor: element types of repeated fields,
    message and enum types by their names relative to the onnx package."""
    from google.protobuf.descriptor import FieldDescriptor as FD

    if field.type == FD.TYPE_MESSAGE:
        t = field.message_type.full_name[len("onnx."):]
    elif field.type == FD.TYPE_ENUM:
        t = field.enum_type.full_name[len("onnx."):]
    elif field.type in (FD.TYPE_FLOAT, FD.TYPE_DOUBLE):
        t = "float"
    elif field.type == FD.TYPE_STRING:
        t = "str"
    elif field.type == FD.TYPE_BYTES:
        t = "bytes"
    elif field.type == FD.TYPE_BOOL:
        t = "bool"
    else:
        t = "int"
    if field.is_repeated:
        kind = "Composite" if field.type == FD.TYPE_MESSAGE else "Scalar"
        return f"Repeated{kind}Container[{t}]"
    return t


def test_type_stubs_type_every_field_as_the_schema():
    """Each field of each message class in _native.pyi is annotated with its type from onnx's
    descriptors: repeated fields with their element type, sub-messages and enums by name."""
    import ast

    classes = _stub_classes()
    checked = 0
    for ocls, _ in message_pairs():
        name = ocls.DESCRIPTOR.full_name[len("onnx."):]
        stub = classes[name]
        annotations = {
            n.target.id: ast.unparse(n.annotation) for n in stub.body if isinstance(n, ast.AnnAssign)
        }
        for field in ocls.DESCRIPTOR.fields:
            assert annotations.get(field.name) == _expected_annotation(field), (name, field.name)
            checked += 1
        # Every type a field names is a class of the stubs.
        for field in ocls.DESCRIPTOR.fields:
            for sub in (field.message_type, field.enum_type):
                if sub is not None:
                    assert sub.full_name[len("onnx."):] in classes
    assert checked > 100


def test_type_stubs_declare_enums_with_their_values():
    """Each enum of onnx's messages is an int class with metaclass EnumTypeWrapper in the stubs,
    declaring every value in the enum and in its message, and the containers are generic."""
    import ast

    classes = _stub_classes()
    enums = []
    for ocls, _ in message_pairs():
        for e in ocls.DESCRIPTOR.enum_types:
            enums.append((ocls.DESCRIPTOR.full_name[len("onnx."):], e))
    assert {e.name for _, e in enums} >= {"DataType", "DataLocation", "AttributeType"}
    for owner, e in enums:
        full = f"{owner}.{e.name}"
        stub = classes[full]
        assert [ast.unparse(b) for b in stub.bases] == ["int"]
        assert [(k.arg, ast.unparse(k.value)) for k in stub.keywords] == [("metaclass", "EnumTypeWrapper")]
        inner = {n.target.id: ast.unparse(n.annotation) for n in stub.body if isinstance(n, ast.AnnAssign)}
        outer = {
            n.target.id: ast.unparse(n.annotation) for n in classes[owner].body if isinstance(n, ast.AnnAssign)
        }
        for v in e.values:
            assert inner[v.name] == f"ClassVar[{full}]", (full, v.name)
            assert outer[v.name] == full, (full, v.name)
        assert set(inner) == {v.name for v in e.values}
    for container in ("RepeatedScalarContainer", "RepeatedCompositeContainer"):
        assert [ast.unparse(b) for b in classes[container].bases][0].startswith("Generic[")
    assert [ast.unparse(b) for b in classes["EnumTypeWrapper"].bases] == ["type"]
