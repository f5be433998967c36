"""str() of a message is protobuf's text format exactly as the onnx wheel's messages print it
(upb's text encoder): on every model and every serialized proto of the wheel's backend test data,
every node test model, and hand-made messages with edge values. protobuf's text parser reads
each text back to the same message."""
import math
import struct

import numpy as np
import onnx
import onnx.backend.test.case.node as node_cases
import pytest
from google.protobuf import text_format

import onnx_light as ol

from conftest import backend_data


def _models() -> list:
    files = [(str(p.relative_to(backend_data.DATA)), p.read_bytes()) for p in backend_data.models()]
    nodes = [(c.name, c.model.SerializeToString()) for c in node_cases.collect_testcases()]
    return files + nodes


def _same_text(cls_name: str, data: bytes, *, reads_back: bool = True) -> None:
    theirs = getattr(onnx, cls_name).FromString(data)
    ours = getattr(ol, cls_name).FromString(data)
    text = str(ours)
    assert text == str(theirs)
    if reads_back:
        parsed = text_format.Parse(text, getattr(onnx, cls_name)())
        assert parsed == theirs


def test_the_data_is_there():
    assert len(_models()) > 1500
    assert len(backend_data.protos()) > 300


def test_every_model_prints_the_same():
    for name, data in _models():
        try:
            _same_text("ModelProto", data)
        except AssertionError:
            raise AssertionError(name) from None


def test_models_loaded_without_copy_print_the_same():
    """Payloads viewed in a memory-mapped file print as copied ones do."""
    for path in backend_data.models():
        ours = ol.load(path, load_external_data=False, no_copy=True)
        assert str(ours) == str(onnx.load(path, load_external_data=False)), str(path)


def test_every_proto_file_prints_the_same():
    for path, cls_name in backend_data.protos():
        try:
            _same_text(cls_name, path.read_bytes())
        except AssertionError:
            raise AssertionError(str(path)) from None


def test_node_test_tensors_print_the_same():
    """The inputs and outputs of every node test case, as onnx.numpy_helper.from_array makes them."""
    count = 0
    for case in node_cases.collect_testcases():
        for inputs, outputs in case.data_sets or []:
            for value in list(inputs) + list(outputs):
                if not isinstance(value, np.ndarray):
                    continue
                try:
                    tensor = onnx.numpy_helper.from_array(value)
                except Exception:  # dtypes onnx cannot store
                    continue
                _same_text("TensorProto", tensor.SerializeToString())
                count += 1
    assert count > 3000


def _tensor_bytes(**fields) -> bytes:
    t = onnx.TensorProto()
    for k, v in fields.items():
        if isinstance(v, list):
            getattr(t, k).extend(v)
        else:
            setattr(t, k, v)
    return t.SerializeToString()


def _floats_from_bits(bits: np.ndarray) -> bytes:
    """A TensorProto with float_data holding exactly these float32 bit patterns (packed)."""
    t = onnx.TensorProto(data_type=onnx.TensorProto.FLOAT, name="x")
    head = t.SerializeToString()
    payload = bits.astype("<u4").tobytes()
    return head + b"\x22" + _varint(len(payload)) + payload  # field 4 (float_data), packed


def _doubles_from_bits(bits: np.ndarray) -> bytes:
    payload = bits.astype("<u8").tobytes()
    return b"\x52" + _varint(len(payload)) + payload  # field 10 (double_data), packed


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _float_edges() -> np.ndarray:
    f32 = [
        0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF,
        0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x3F800000, 0x3DCCCCCD, 0x3EAAAAAB, 0x4B000001,
        0x4CBEBC20, 0x5F5E1000, 0x33D6BF95, 0x38D1B717,
    ]
    # Dyadic values with few significant bits: their decimal expansions end in exact ties.
    small = [
        struct.unpack("<I", struct.pack("<f", k * 2.0**e))[0]
        for k in range(1, 4096, 7)
        for e in range(-149, 105, 13)
        if math.isfinite(np.float32(k * 2.0**e)) and k * 2.0**e >= 2.0**-149
    ]
    return np.array(f32 + small, dtype=np.uint32)


def test_float_fields_print_the_same():
    rng = np.random.default_rng(7)
    random_bits = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    finite = random_bits[np.isfinite(random_bits.view(np.float32))]
    for bits in (_float_edges(), finite):
        _same_text("TensorProto", _floats_from_bits(bits))
    # Integers near float32's precision limit, and decimal fractions.
    ints = np.arange(16_000_000, 16_800_000, 997, dtype=np.float32).view(np.uint32)
    fracs = (np.arange(1, 20_000, dtype=np.float64) / 1000).astype(np.float32).view(np.uint32)
    for bits in (ints, fracs):
        _same_text("TensorProto", _floats_from_bits(bits))


def test_nan_and_infinity_print_the_same():
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF, 0x7FBFFFFF], dtype=np.uint32)
    data = _floats_from_bits(nans)
    theirs, ours = onnx.TensorProto.FromString(data), ol.TensorProto.FromString(data)
    assert str(ours) == str(theirs)
    parsed = text_format.Parse(str(ours), onnx.TensorProto())
    assert all(math.isnan(v) for v in parsed.float_data) and len(parsed.float_data) == 5
    dnans = np.array([0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001], dtype=np.uint64)
    data = _doubles_from_bits(dnans)
    assert str(ol.TensorProto.FromString(data)) == str(onnx.TensorProto.FromString(data))
    inf = np.array([0x7F800000, 0xFF800000], dtype=np.uint32)
    _same_text("TensorProto", _floats_from_bits(inf))
    a = onnx.AttributeProto(name="f", f=float("nan"), type=onnx.AttributeProto.FLOAT)
    assert str(ol.AttributeProto.FromString(a.SerializeToString())) == str(a)


def test_double_fields_print_the_same():
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 2**64, size=100_000, dtype=np.uint64)
    bits = bits[np.isfinite(bits.view(np.float64))]
    edges = np.array(
        [0, 1 << 63, 1, 0x000FFFFFFFFFFFFF, 0x0010000000000000, 0x7FEFFFFFFFFFFFFF,
         0x7FF0000000000000, 0xFFF0000000000000, 0x3FB999999999999A, 0x4340000000000000],
        dtype=np.uint64,
    )
    values = np.array([0.1, 1e15, 1e16, 1e17, 123456789.0, 1e-5, 1e-4, 1e300, 5e-324, 2.0**53 + 2,
                       1 / 3, 2 / 3, 100.0, 0.5, 1e22, 9007199254740993.0], dtype=np.float64)
    for b in (bits, edges, values.view(np.uint64)):
        _same_text("TensorProto", _doubles_from_bits(b))


def test_integer_fields_print_the_same():
    data = _tensor_bytes(
        dims=[0, -1, 2**63 - 1, -(2**63)],
        int32_data=[0, -1, 2**31 - 1, -(2**31)],
        int64_data=[2**63 - 1, -(2**63)],
        uint64_data=[0, 2**64 - 1, 2**63],
        data_type=onnx.TensorProto.UINT64,
    )
    _same_text("TensorProto", data)
    a = onnx.AttributeProto(name="i", i=-(2**63), ints=[2**63 - 1, -5], type=onnx.AttributeProto.INTS)
    _same_text("AttributeProto", a.SerializeToString())


def test_out_of_range_enum_values_print_the_same():
    # Out-of-range values of a closed enum are unknown fields (not printed); data_type is int32.
    data = _tensor_bytes(data_type=999) + b"\x70\x07"  # field 14 (data_location) = 7
    _same_text("TensorProto", data, reads_back=False)
    assert text_format.Parse(str(ol.TensorProto.FromString(data)), onnx.TensorProto()) == (
        onnx.TensorProto(data_type=999)
    )
    a = onnx.AttributeProto(name="x", type=onnx.AttributeProto.TYPE_PROTOS)
    raw = a.SerializeToString() + b"\xa0\x01\x63"  # field 20 (type) = 99
    _same_text("AttributeProto", raw, reads_back=False)


def _string_field(payload: bytes) -> bytes:
    """A TensorProto whose name (a string field) and raw_data (bytes) are `payload`."""
    return b"\x42" + _varint(len(payload)) + payload + b"\x4a" + _varint(len(payload)) + payload


STRINGS = [
    b"",
    bytes(range(256)),
    "plain é ü 中文 😀 \u2028 \u00a0 \ufeff".encode(),
    b"\"quoted\" 'single' back\\slash \n\r\t\x00\x07\x1b\x7f",
    b"\xff\xfe invalid \x80 lone continuation",
    b"\xc3 truncated \xe4\xb8 and \xf0\x9f\x98",
    b"\xc0\x80 overlong \xe0\x80\x80 \xf0\x80\x80\x80",
    b"\xed\xa0\x80 surrogate \xed\xbf\xbf",
    b"\xf4\x90\x80\x80 beyond U+10FFFF \xf5\x80\x80\x80 \xf4\x8f\xbf\xbf",
    "mixed \xe9".encode() + b"\xe9" + "\U0010ffff".encode() + b"\xc3\x28",
]


@pytest.mark.parametrize("payload", STRINGS, ids=range(len(STRINGS)))
def test_string_and_bytes_escapes_print_the_same(payload):
    data = _string_field(payload)
    theirs = onnx.TensorProto.FromString(data)
    ours = ol.TensorProto.FromString(data)
    assert str(ours) == str(theirs)
    raw_only = ol.TensorProto(raw_data=payload)
    assert text_format.Parse(str(raw_only), onnx.TensorProto()).raw_data == payload
    # protobuf's Python parser reads a string field's text as UTF-8: where the payload is not,
    # it rejects the onnx wheel's text as it rejects ours.
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError:
        for text in (str(ours), str(theirs)):
            with pytest.raises(text_format.ParseError):
                text_format.Parse(text, onnx.TensorProto())
        return
    assert text_format.Parse(str(ours), onnx.TensorProto()) == theirs


def test_attribute_strings_and_nested_messages_print_the_same():
    g = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"], name="n\"1\"", doc_string="é\n\t")],
        "g'",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, "N", None])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    node = onnx.helper.make_node(
        "Loop", ["a"], ["b"], body=g, floats=[0.1, -0.0, 1e-45, 3.4e38], strings=[b"\x00\xff", b"ok"],
        f=0.3, s="ü",
    )
    node.attribute.add(name="empty", type=onnx.AttributeProto.TENSOR).t.SetInParent()
    model = onnx.helper.make_model(g, doc_string="\\")
    model.metadata_props.add(key="", value="")
    model.graph.node.append(node)
    model.graph.value_info.add().type.optional_type.elem_type.sequence_type.elem_type.map_type.key_type = 7
    _same_text("ModelProto", model.SerializeToString())


def test_unknown_fields_are_not_printed():
    t = onnx.TensorProto(name="t", dims=[2])
    raw = t.SerializeToString() + b"\xf8\x07\x05" + b"\xfa\x07\x02ab" + b"\xfd\x07\x01\x02\x03\x04"
    _same_text("TensorProto", raw, reads_back=False)
    assert text_format.Parse(str(ol.TensorProto.FromString(raw)), onnx.TensorProto()) == t


def test_repr_body_is_the_text():
    data = _string_field("é\x01".encode()) + _tensor_bytes(float_data=[0.1, 1e-45], dims=[3])
    ours = ol.TensorProto.FromString(data)
    theirs = onnx.TensorProto.FromString(data)
    assert repr(ours) == "TensorProto(\n" + str(theirs).rstrip("\n") + "\n)"
    assert repr(ol.TensorProto()) == "TensorProto()"


@pytest.mark.parametrize("cls_name, fields", [
    ("TensorProto", dict(data_type=0, name="", raw_data=b"", data_location=0, dims=[0])),
    ("AttributeProto", dict(f=0.0, i=0, s=b"", type=0, floats=[0.0, -0.0])),
    ("TypeProto", dict(denotation="")),
    ("ModelProto", dict(ir_version=0, graph=dict(node=[dict()]))),
], ids=lambda x: x if isinstance(x, str) else "")
def test_fields_set_to_defaults_print_the_same(cls_name, fields):
    """Fields present with their default values print (proto2 presence), as in protobuf."""
    theirs = getattr(onnx, cls_name)(**fields)
    ours = getattr(ol, cls_name)(**fields)
    assert str(ours) == str(theirs)
    _same_text(cls_name, theirs.SerializeToString())
