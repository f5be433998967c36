"""onnx_light's schema table (src/proto/schema.rs, dumped by codegen to tests/compat/schema.json and
kept fresh by the stale-file test) against the descriptors of the onnx package's generated
protobuf classes: every message, field name, number, type, label, packing, oneof and the values of
every enum a field uses. A field that onnx adds upstream must fail here: onnx_light would otherwise
keep it as an unknown field and every byte-level test would still pass."""
import copy
import json
import pathlib

import onnx.onnx_data_pb2
import onnx.onnx_ml_pb2

SCHEMA = pathlib.Path(__file__).with_name("schema.json")

# The descriptor type numbers (google.protobuf.descriptor.FieldDescriptor.TYPE_*) by the names
# the schema dump uses.
TYPE_NAMES = {3: "int64", 5: "int32", 4: "uint64", 2: "float", 1: "double", 9: "string", 12: "bytes"}


def onnx_messages():
    """{name without the package: descriptor} of every message of onnx.proto and onnx-data.proto,
    nested ones included (`TensorProto.Segment`)."""
    found = {}

    def visit(desc):
        found[desc.full_name.removeprefix("onnx.")] = desc
        for nested in desc.nested_types:
            visit(nested)

    for module in (onnx.onnx_ml_pb2, onnx.onnx_data_pb2):
        for desc in module.DESCRIPTOR.message_types_by_name.values():
            visit(desc)
    return found


def field_of(desc):
    """A descriptor field in the schema dump's shape."""
    if desc.type == desc.TYPE_MESSAGE:
        ty = "message " + desc.message_type.full_name.removeprefix("onnx.")
    elif desc.type == desc.TYPE_ENUM:
        ty = "enum " + desc.enum_type.full_name.removeprefix("onnx.")
    else:
        ty = TYPE_NAMES.get(desc.type, f"descriptor type {desc.type}")
    return {
        "name": desc.name,
        "number": desc.number,
        "type": ty,
        "repeated": desc.is_repeated,
        "packed": desc.is_packed,
        "oneof": desc.containing_oneof.name if desc.containing_oneof else None,
    }


def differences(schema, messages):
    """Every way `schema` (the dump's dict) differs from the onnx descriptors, as sentences."""
    out = []
    for name in sorted(set(messages) - set(schema["messages"])):
        out.append(f"message {name} is missing from the schema")
    for name in sorted(set(schema["messages"]) - set(messages)):
        out.append(f"message {name} is not in onnx")
    enums = {}
    for name in sorted(set(schema["messages"]) & set(messages)):
        desc = messages[name]
        theirs = {f.number: f for f in desc.fields}
        ours = {f["number"]: f for f in schema["messages"][name]}
        for number in sorted(set(theirs) - set(ours)):
            out.append(f"{name}.{theirs[number].name} = {number} is missing from the schema")
        for number in sorted(set(ours) - set(theirs)):
            out.append(f"{name}.{ours[number]['name']} = {number} is not in onnx")
        for number in sorted(set(ours) & set(theirs)):
            expected = field_of(theirs[number])
            if ours[number] != expected:
                out.append(f"{name} field {number}: schema {ours[number]} != onnx {expected}")
            if theirs[number].type == theirs[number].TYPE_ENUM:
                e = theirs[number].enum_type
                enums[e.full_name.removeprefix("onnx.")] = {v.name: v.number for v in e.values}
        order = [f["number"] for f in schema["messages"][name]]
        if order != [f.number for f in desc.fields if f.number in ours]:
            out.append(f"{name}: fields not in declaration order")
    for name in sorted(set(enums) | set(schema["enums"])):
        if schema["enums"].get(name) != enums.get(name):
            out.append(f"enum {name}: schema {schema['enums'].get(name)} != onnx {enums.get(name)}")
    return out


def test_schema_equals_the_onnx_descriptors():
    schema = json.loads(SCHEMA.read_text())
    messages = onnx_messages()
    assert len(schema["messages"]) == len(messages) > 25
    assert differences(schema, messages) == []


def test_the_comparison_fails_on_a_broken_schema():
    schema = json.loads(SCHEMA.read_text())
    messages = onnx_messages()
    # A field removed (what a schema that lags behind onnx looks like), the highest-numbered one
    # of ModelProto: byte-level round-trips cannot see it, this test must.
    broken = copy.deepcopy(schema)
    fields = broken["messages"]["ModelProto"]
    highest = max(fields, key=lambda f: f["number"])
    fields.remove(highest)
    assert differences(broken, messages) == [
        f"ModelProto.{highest['name']} = {highest['number']} is missing from the schema"
    ]
    # A changed label, a changed packing, a wrong oneof, an enum value and a missing message.
    broken = copy.deepcopy(schema)
    broken["messages"]["NodeProto"][0]["repeated"] = not broken["messages"]["NodeProto"][0]["repeated"]
    broken["messages"]["TensorProto"][0]["packed"] = True
    broken["messages"]["TypeProto"][0]["oneof"] = "other"
    broken["enums"]["AttributeProto.AttributeType"]["FLOAT"] = 99
    del broken["messages"]["OptionalProto"]
    found = differences(broken, messages)
    assert len(found) == 5, found
