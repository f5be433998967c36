"""Writes the inputs of the text-format check (c_tests/text_format/debug_string_check.cpp) and
their manifest (lines of "MESSAGE<TAB>PATH"):
- every model (*.onnx) and serialized TensorProto (*.pb) of the onnx wheel's backend test data;
- the all-fields inputs of c_tests/make_walk_inputs.py (every field of every message set,
  unknown fields everywhere, hand-made non-canonical encodings), already written to WALK_DIR;
- the empty encoding of every message of onnx.proto and onnx-data.proto;
- edge cases made here: every class of float and double, integer extremes, strings of every
  byte value and of multi-byte (and invalid) UTF-8, out-of-range and negative closed-enum values,
  unknown fields of every wire type (nested, groups, length-delimited values that are and are not
  messages, the nesting limits of the printer), empty sub-messages, and malformed encodings
  (which protobuf and onnx_light must both refuse).

Usage: python make_inputs.py BACKEND_DATA_DIR WALK_DIR OUT_DIR
"""
import os
import pathlib
import random
import struct
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "compat"))

import onnx  # noqa: E402
from all_fields import ld, tag, varint  # noqa: E402


def f32(bits: int) -> bytes:
    return struct.pack("<I", bits)


def f64(bits: int) -> bytes:
    return struct.pack("<Q", bits)


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f64_bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def all_messages():
    """Full names (without the package) of every message of onnx.proto and onnx-data.proto."""
    from onnx import onnx_data_pb2, onnx_ml_pb2

    names = []

    def walk(d, prefix):
        name = prefix + d.name
        names.append(name)
        for n in d.nested_types:
            walk(n, name + ".")

    for module in (onnx_ml_pb2, onnx_data_pb2):
        for d in module.DESCRIPTOR.message_types_by_name.values():
            walk(d, "")
    return names


def float_cases():
    special = [
        0, 0x80000000,  # +-0
        1, 0x80000001, 0x00000002, 0x007FFFFF, 0x00400000, 0x00012345,  # subnormals
        0x00800000, 0x00800001, 0x80800000,  # smallest normals
        0x7F7FFFFF, 0xFF7FFFFF,  # largest
        0x7F800000, 0xFF800000,  # inf
        0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF, 0xFFFFFFFF,  # nan payloads and signs
        0x3DCCCCCD, 0x3DCCCCCC, 0x3DCCCCCE,  # 0.1 and its neighbours (9 digits)
        0x3F800001, 0x3EAAAAAB, 0x4B800001,
    ]
    special += [f32_bits(x) for x in (
        1e-5, 123456789.0, 123456.5, 123457.5, 0.3, 1e10, 1e-10, 100000.0, 1000000.0, 999999.5,
        0.0001, 0.00001, 1.5, -2.0, 16777216.0, 3.14159265, 2.718281828, 1e38, 1e-38, 65504.0,
    )]
    rng = random.Random(7)
    special += [rng.getrandbits(32) for _ in range(4000)]
    special += [f32_bits(rng.randint(-10**6, 10**6) / 8) for _ in range(500)]
    return special


def double_cases():
    special = [
        0, 0x8000000000000000,
        1, 0x8000000000000001, 0x000FFFFFFFFFFFFF, 0x0000000123456789,  # subnormals
        0x0010000000000000, 0x0010000000000001,  # smallest normals
        0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF,
        0x7FF0000000000000, 0xFFF0000000000000,
        0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0xFFFFFFFFFFFFFFFF,
    ]
    special += [f64_bits(x) for x in (
        0.1, 0.1 + 0.2, 1 / 3, 2 / 3, 123456789012345.5, 123456789012346.5, 1e21, 1e-7, 1e15, 1e16,
        1e17, 1e300, 1e-300, 2.0**53, 2.0**53 + 2, 5e-324, 1e-5, 123456789.0, 0.5, 100.0,
    )]
    rng = random.Random(11)
    special += [rng.getrandbits(64) for _ in range(4000)]
    special += [f64_bits(rng.randint(-10**12, 10**12) / 1024) for _ in range(500)]
    return special


UTF8 = "é ü 中文 😀 \u00a0 \u2028 \ufeff \uffff \U0010ffff end".encode()
INVALID_UTF8 = b"lone \x80, truncated \xc3, overlong \xc0\xaf, surrogate \xed\xa0\x80, big \xf4\x90\x80\x80, \xff\xfe"
ALL_BYTES = bytes(range(256))


def nested_ld(depth: int, inner: bytes) -> bytes:
    """`depth` levels of length-delimited field 1 around `inner`."""
    for _ in range(depth):
        inner = ld(1, inner)
    return inner


def nested_group(depth: int, inner: bytes) -> bytes:
    """`depth` levels of group 2 around `inner`."""
    for _ in range(depth):
        inner = tag(2, 3) + inner + tag(2, 4)
    return inner


def unknown_cases():
    """Unknown fields of every kind, as the unknown part of an OperatorSetIdProto (fields 1, 2
    known) or ModelProto."""
    every_type = (
        tag(100, 0) + varint(0) + tag(101, 0) + varint(2**64 - 1) + tag(102, 0) + varint(-1)
        + tag(103, 5) + f32(0) + tag(104, 5) + f32(0xFFFFFFFF) + tag(105, 5) + f32(0x12AB)
        + tag(106, 1) + f64(0) + tag(107, 1) + f64(2**64 - 1) + tag(108, 1) + f64(0xABCDEF)
        + ld(109, b"") + ld(110, b"hello") + ld(111, tag(1, 0) + varint(150))
        + tag(112, 3) + tag(112, 4)
        + tag(113, 3) + tag(1, 0) + varint(1) + ld(2, b"in group") + tag(3, 5) + f32(7) + tag(113, 4)
        + tag(2**29 - 1, 0) + varint(5)
    )
    ld_values = [
        b"\x08\x96\x01",  # 1: 150
        tag(1, 0) + varint(1) + ld(2, ld(3, tag(4, 5) + f32(1))),  # messages in messages
        b"\x0b\x0c",  # an empty group
        b"\x0b\x08\x01\x0c",  # a group
        b"\x88\x80\x80\x80\x80\x80\x80\x80\x80\x01\x05",  # a 10-byte tag (low 32 bits used)
        b"\x08\x80\x80\x80\x80\x80\x80\x80\x80\x7f",  # a 10-byte varint with a big last byte
        b"\x0a\x80\x80\x80\x80\x80\x80\x80\x80\x00",  # a 10-byte length (0)
        b"\x00",  # a zero tag
        b"\x08\x01\x00",  # a zero tag after a field
        b"\x80\x80\x80\x80\x10\x01",  # a tag whose low 32 bits are zero
        b"\x08",  # truncated
        b"\x0e\x00", b"\x0f\x00",  # wire types 6, 7
        b"\x0c",  # an end-group tag at the top
        b"\x0b\x14",  # a group ended by another field's end tag
        b"\x0b\x08\x01",  # a group never ended
        b"\x02\x00",  # field number 0
        b"\x0b\x02\x00\x0c",  # field number 0 inside a group
        b"\x0a\x05ab",  # a length past the end
        b"\x0a\x80\x80\x80\x80\x08",  # a length of 2^31
        b"\x0d\x01\x02",  # fixed32 truncated
        b"\x09\x01\x02\x03\x04\x05\x06\x07",  # fixed64 truncated
        ALL_BYTES, UTF8, b"plain text, not a message", b"\n\t\"'\\",
        nested_group(10, b"\x08\x01"),  # groups as deep as the budget of 10 allows
        nested_group(11, b"\x08\x01"),  # one level deeper: a string
        nested_group(3, ld(1, ld(1, b"\x08\x01"))),
    ]
    cases = [("OperatorSetIdProto", ld(1, b"ai") + tag(2, 0) + varint(3) + every_type)]
    for v in ld_values:
        cases.append(("OperatorSetIdProto", ld(1000, v)))
    # Length-delimited values nested past the budget of 10 (deeper ones print as strings), and
    # inside groups (each group level uses one unit of the budget too).
    for depth in (9, 10, 11, 13):
        cases.append(("OperatorSetIdProto", ld(1000, nested_ld(depth - 1, tag(1, 0) + varint(1)))))
    for depth in (1, 8, 9, 10, 12):
        inner = nested_group(depth - 1, nested_ld(3, tag(1, 0) + varint(1)))
        cases.append(("OperatorSetIdProto", tag(1000, 3) + inner + tag(1000, 4)))
    # Known field numbers with another wire type are unknown fields.
    cases.append(("ModelProto", ld(1, b"x") + tag(7, 0) + varint(1) + tag(8, 5) + f32(1) + tag(2, 1) + f64(5)))
    cases.append(("TensorProto", tag(4, 0) + varint(1) + tag(10, 5) + f32(1) + tag(8, 0) + varint(2)))
    # Unknown fields deep inside known messages, after known ones.
    node = ld(1, b"x") + every_type + ld(5, ld(1, b"attr") + tag(20, 0) + varint(-1) + every_type)
    graph = ld(1, node) + ld(2, b"g") + every_type
    cases.append(("ModelProto", tag(1, 0) + varint(8) + ld(7, graph) + every_type))
    return cases


def edge_cases():
    cases = []
    floats = float_cases()
    cases.append(("TensorProto", ld(4, b"".join(f32(b) for b in floats))))  # packed
    cases.append(("AttributeProto", b"".join(tag(7, 5) + f32(b) for b in floats[:200])))  # unpacked
    for b in floats[:40]:
        cases.append(("AttributeProto", tag(2, 5) + f32(b)))  # singular
    doubles = double_cases()
    cases.append(("TensorProto", ld(10, b"".join(f64(b) for b in doubles))))
    cases.append(("TensorProto", b"".join(tag(10, 1) + f64(b) for b in doubles[:200])))
    ints32 = [0, 1, -1, 2**31 - 1, -(2**31), 2**32 + 5, 2**63 + 9, -(2**40) - 3]
    ints64 = [0, 1, -1, 2**63 - 1, -(2**63), 2**62, 2**64 - 1]
    cases.append(("TensorProto",
                  b"".join(tag(1, 0) + varint(v) for v in ints64)
                  + ld(5, b"".join(varint(v) for v in ints32))
                  + ld(7, b"".join(varint(v) for v in ints64))
                  + ld(11, b"".join(varint(v) for v in ints64))))
    for v in ints32:
        cases.append(("TensorProto", tag(2, 0) + varint(v)))  # int32 data_type
        cases.append(("NodeDeviceConfigurationProto", tag(3, 0) + varint(v)))
        cases.append(("DeviceConfigurationProto", tag(2, 0) + varint(v)))
    # Closed enums: named values, out-of-range and negative ones (unknown fields), values whose
    # low 32 bits are in range.
    for v in [0, 1, 4, 14, 15, -1, -(2**31), 2**31 - 1, 2**32 + 2, 2**32, 2**63, 2**64 - 1, 99]:
        cases.append(("AttributeProto", tag(20, 0) + varint(v)))
        cases.append(("TensorProto", tag(14, 0) + varint(v)))
    # Strings (string fields: escaped differently by Utf8DebugString) and bytes fields.
    for s in (ALL_BYTES, UTF8, INVALID_UTF8, b"", b"\x00", "e\u0301".encode()):
        cases.append(("TensorProto", ld(8, s) + ld(12, s) + ld(6, s) + ld(9, s) + ld(13, ld(1, s) + ld(2, s))))
        cases.append(("AttributeProto", ld(1, s) + ld(4, s) + ld(9, s) + ld(9, s) + ld(13, s)))
        cases.append(("ModelProto", ld(2, s) + ld(6, s) + ld(14, ld(1, s) + ld(2, s))))
        cases.append(("MapProto", ld(1, s) + ld(4, s) + ld(4, s)))
    # Empty sub-messages and empty repeated elements.
    cases.append(("ModelProto", ld(7, b"") + ld(8, b"") + ld(8, b"") + ld(20, ld(1, b""))))
    cases.append(("GraphProto", ld(1, b"") + ld(1, ld(5, b"")) + ld(5, ld(3, b""))))
    cases.append(("TypeProto", ld(1, b"")))
    cases.append(("TypeProto", ld(4, ld(1, ld(5, ld(2, ld(9, b"")))))))
    cases.append(("TensorShapeProto", ld(1, b"") + ld(1, b"") + ld(1, tag(1, 0) + varint(0))))
    cases += unknown_cases()
    return cases


# Encodings protobuf refuses (onnx_light must refuse them too).
MALFORMED = [
    ("ModelProto", b"\x0a"),  # truncated tag and value
    ("ModelProto", b"\x3a\x05\x0a"),  # graph longer than the input
    ("ModelProto", b"\x07"),  # wire type 7
    ("ModelProto", b"\x0c"),  # end group at the top
    ("ModelProto", b"\x08" + b"\xff" * 10 + b"\x01"),  # 11-byte varint
    ("TensorProto", b"\x25\x00\x00"),  # truncated fixed32
    ("TensorProto", ld(4, b"\x00\x00\x00")),  # packed floats of 3 bytes
    ("OperatorSetIdProto", tag(1000, 3) + tag(1, 0) + varint(1)),  # group never ended
    ("OperatorSetIdProto", b"\x00"),  # field number 0
]


def backend_inputs(data_dir: pathlib.Path):
    """(message, path) of every model and serialized value of the backend test data; a value of
    test_x/test_data_set_N/ is typed by the corresponding input or output of test_x/model.onnx."""
    kinds = {"tensor_type": "TensorProto", "sequence_type": "SequenceProto",
             "optional_type": "OptionalProto", "map_type": "MapProto",
             "sparse_tensor_type": "SparseTensorProto"}
    out = [("ModelProto", p) for p in sorted(data_dir.rglob("*.onnx"))]
    models = {}
    for pb in sorted(data_dir.rglob("*.pb")):
        message = "TensorProto"
        model_path = pb.parent.parent / "model.onnx"
        if model_path.exists():
            if model_path not in models:
                models[model_path] = onnx.load(str(model_path), load_external_data=False).graph
            graph = models[model_path]
            init = {t.name for t in graph.initializer}
            which, _, index = pb.stem.partition("_")
            values = [v for v in graph.input if v.name not in init] if which == "input" else list(graph.output)
            if index.isdigit() and int(index) < len(values):
                message = kinds.get(values[int(index)].type.WhichOneof("value"), "TensorProto")
        out.append((message, pb))
    return out


def main() -> None:
    data_dir, walk_dir, out = (pathlib.Path(a) for a in sys.argv[1:4])
    out.mkdir(parents=True, exist_ok=True)
    entries = backend_inputs(data_dir)
    if sum(1 for m, _ in entries if m == "ModelProto") < 100 or len(entries) < 300:
        sys.exit(f"too few backend inputs under {data_dir}: {len(entries)}")
    entries.append(("ModelProto", walk_dir / "all_fields.onnx"))
    entries.append(("ModelProto", walk_dir / "all_unknown.onnx"))
    for p in sorted((walk_dir / "typed").glob("*.pb")):
        entries.append((p.stem.split("__")[1], p))
    made = [(m, b"") for m in all_messages()] + edge_cases() + MALFORMED
    edge = out / "edge"
    edge.mkdir(exist_ok=True)
    for i, (message, data) in enumerate(made):
        p = edge / f"{i:04d}__{message}.pb"
        p.write_bytes(data)
        entries.append((message, p))
    with open(out / "manifest.tsv", "w") as f:
        for message, p in entries:
            f.write(f"{message}\t{os.path.abspath(p)}\n")
    print(f"{len(entries)} inputs ({len(made)} made here) in {out / 'manifest.tsv'}")


if __name__ == "__main__":
    main()
