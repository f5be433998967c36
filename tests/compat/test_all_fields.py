"""Every message and field, both directions: bytes written by onnx_light equal the onnx
package's, and what onnx_light writes reads back in onnx equal, field by field."""
import all_fields as af
import backend_data as bd


def _check(roundtrip, message, msgs):
    blobs = [m.SerializeToString() for m in msgs]
    outputs = roundtrip.blobs(blobs, message)
    cls = bd.message_class(message)
    for original, blob, got in zip(msgs, blobs, outputs):
        assert got == blob, f"{message}: bytes differ"
        back = cls.FromString(got)
        assert back == original, f"{message}: fields differ after reading our output"
        assert back.SerializeToString() == blob


def test_model_with_every_field(roundtrip):
    model = af.build_model()
    # sanity: the model really does use every message type of onnx.proto
    text = str(model)
    for needle in ["training_info", "sparse_initializer", "functions", "configuration", "segment",
                   "string_data", "uint64_data", "double_data", "external_data", "sharding_spec",
                   "opaque_type", "optional_type", "map_type", "sparse_tensor_type", "quantization_annotation",
                   "type_protos", "sparse_tensors", "graphs", "ref_attr_name", "metadata_props"]:
        assert needle in text, needle
    assert model.SerializeToString().endswith(af.UNKNOWN), "unknown fields were not kept by protobuf"
    _check(roundtrip, "ModelProto", [model])
    for flags in (["--threads", "3"], ["--no-copy"]):
        blob = model.SerializeToString()
        assert roundtrip.one(blob, "ModelProto", *flags) == blob


def test_data_protos(roundtrip):
    for message, msgs in af.build_data_protos().items():
        _check(roundtrip, message, msgs)


def test_every_submessage_alone(roundtrip):
    model = af.build_model()
    node = model.graph.node[0]
    parts = {
        "NodeProto": [node],
        "GraphProto": [model.graph],
        "TensorProto": list(model.graph.initializer),
        "SparseTensorProto": list(model.graph.sparse_initializer),
        "TypeProto": [v.type for v in model.graph.input],
    }
    for message, msgs in parts.items():
        _check(roundtrip, message, msgs)


def test_hand_made_encodings_match_protobuf(roundtrip):
    cases = af.hand_encodings()
    by_type = {}
    for message, blob in cases:
        by_type.setdefault(message, []).append(blob)
    n = 0
    for message, blobs in by_type.items():
        cls = bd.message_class(message)
        outputs = roundtrip.blobs(blobs, message, keep_going=True)
        for blob, got in zip(blobs, outputs):
            expected = cls.FromString(blob).SerializeToString()
            assert not isinstance(got, Exception), f"{message} {blob.hex()}: {got}"
            assert got == expected, f"{message} {blob.hex()}:\n got {got.hex()}\n exp {expected.hex()}"
            n += 1
    print(f"\n{n} hand-made encodings identical to protobuf")
    assert n == len(cases)
