"""Common onnx workflows, run with the module named on the command line as ``onnx``.

``python onnx_workflow.py onnx OUT.json`` and ``python onnx_workflow.py onnx_light OUT.json``
run the same code: ``onnx = importlib.import_module(argv[1])``, nothing else differs. Each row
records what it produced (values, the bytes of files written, text) or the exception type it
raised; test_workflow.py compares the two runs row by row. Run in an empty directory.
"""
import hashlib
import importlib
import json
import os
import sys
import traceback

import numpy as np

onnx = importlib.import_module(sys.argv[1])
helper, numpy_helper, external_data_helper = onnx.helper, onnx.numpy_helper, onnx.external_data_helper
TensorProto = onnx.TensorProto

ROWS = {}


def row(fn):
    """Runs `fn` and records its result (or the type of what it raised) under its name."""
    try:
        ROWS[fn.__name__] = fn()
    except Exception as e:  # noqa: BLE001 - the exception type is the row's result
        ROWS[fn.__name__] = {"raised": type(e).__name__}
        if os.environ.get("WORKFLOW_TRACE"):
            traceback.print_exc()
    return fn


def digest(data):
    return hashlib.sha256(data).hexdigest()[:16]


def file_digests(directory="."):
    """name -> sha256 of every file under `directory`."""
    out = {}
    for root, _, files in os.walk(directory):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, directory)] = digest(fh.read())
    return dict(sorted(out.items()))


def values(model):
    """name -> (dtype, shape, sha256 of the bytes) of every initializer."""
    out = {}
    for t in model.graph.initializer:
        a = numpy_helper.to_array(t)
        out[t.name] = [str(a.dtype), list(a.shape), digest(np.ascontiguousarray(a).tobytes())]
    return out


def external_entries(model, with_offsets=True):
    return {t.name: [(e.key, e.value) for e in t.external_data
                     if with_offsets or e.key == "location"] + [t.data_location, t.HasField("raw_data")]
            for t in model.graph.initializer}


def mlp(n=3):
    """A small valid model: MatMul + Add + Relu layers with float weights (some over 1 KB)."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x = "x"
    for i in range(n):
        w = rng.standard_normal((64, 64)).astype(np.float32)
        b = rng.standard_normal(64).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"], name=f"matmul{i}"),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
                  helper.make_node("Relu", [f"a{i}"], [f"y{i}"], name=f"relu{i}")]
        x = f"y{i}"
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["N", 64])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="workflow")


# ---- load / save round trips

@row
def save_load_roundtrip():
    m = mlp()
    onnx.save(m, "rt.onnx")
    back = onnx.load("rt.onnx")
    onnx.save_model(back, "rt2.onnx")
    return [file_digests(), values(back), back.SerializeToString() == m.SerializeToString()]


@row
def load_from_string_and_file_object():
    data = mlp().SerializeToString()
    with open("fo.onnx", "wb") as f:
        f.write(data)
    with open("fo.onnx", "rb") as f:
        m = onnx.load(f)
    return [digest(onnx.load_from_string(data).SerializeToString()), digest(m.SerializeToString())]


@row
def save_bytes_and_tensor():
    onnx.save(mlp().SerializeToString(), "from_bytes.onnx")
    t = numpy_helper.from_array(np.arange(6, dtype=np.int64).reshape(2, 3), "t")
    onnx.save_tensor(t, "t.pb")
    return [file_digests(), numpy_helper.to_array(onnx.load_tensor("t.pb")).tolist()]


@row
def formats_textproto_json():
    m = mlp(1)
    onnx.save(m, "m.textproto")
    onnx.save(m, "m.json")
    onnx.save(m, "m.txt", format="textproto")
    a = onnx.load("m.textproto")
    b = onnx.load("m.json")
    c = onnx.load("m.txt", format="textproto")
    d = onnx.load_from_string(open("m.json", "rb").read(), format="json")
    return [file_digests(), [digest(x.SerializeToString()) for x in (a, b, c, d)]]


@row
def format_unknown():
    onnx.save(mlp(1), "x.onnx", format="yaml")


# ---- external data, as onnx's documentation shows it

@row
def external_convert_then_save():
    os.makedirs("ext1", exist_ok=True)
    m = mlp()
    external_data_helper.convert_model_to_external_data(
        m, all_tensors_to_one_file=True, location="weights.bin", size_threshold=1024)
    marked = external_entries(m)
    onnx.save(m, "ext1/model.onnx")
    after = external_entries(m)
    back = onnx.load("ext1/model.onnx")
    return [marked, after, file_digests("ext1"), values(back)]


@row
def external_toplevel_convert_then_save_per_tensor():
    os.makedirs("ext2", exist_ok=True)
    m = mlp(2)
    onnx.convert_model_to_external_data(m, all_tensors_to_one_file=False, size_threshold=0)
    onnx.save_model(m, "ext2/model.onnx")
    return [file_digests("ext2"), values(onnx.load("ext2/model.onnx"))]


@row
def external_save_as_external_data():
    os.makedirs("ext3", exist_ok=True)
    m = mlp()
    onnx.save_model(m, "ext3/model.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
                    location="filename", size_threshold=1024, convert_attribute=False)
    # The files' offsets differ (onnx_light aligns tensors to 4096 bytes): compare the rest.
    return [sorted(os.listdir("ext3")), external_entries(m, with_offsets=False),
            values(onnx.load("ext3/model.onnx"))]


@row
def external_load_without_data_then_load():
    m = onnx.load("ext1/model.onnx", load_external_data=False)
    before = external_entries(m)
    onnx.load_external_data_for_model(m, "ext1")
    return [before, external_entries(m), values(m)]


@row
def external_write_tensors_then_serialize():
    os.makedirs("ext4", exist_ok=True)
    m = mlp()
    external_data_helper.convert_model_to_external_data(m, location="w.data", size_threshold=0)
    returned = onnx.write_external_data_tensors(m, "ext4")
    with open("ext4/model.onnx", "wb") as f:
        f.write(returned.SerializeToString())
    return [file_digests("ext4"), values(onnx.load("ext4/model.onnx"))]


@row
def external_convert_back_to_inline():
    m = onnx.load("ext1/model.onnx")
    external_data_helper.convert_model_from_external_data(m)
    onnx.save(m, "inline.onnx")
    return [digest(open("inline.onnx", "rb").read()), external_entries(m)]


@row
def external_set_and_uses():
    t = numpy_helper.from_array(np.ones(4, np.float32), "t")
    external_data_helper.set_external_data(t, "a.bin", offset=0, length=16)
    info = external_data_helper.ExternalDataInfo(t)
    external_data_helper.remove_external_data_field(t, "length")
    return [external_data_helper.uses_external_data(t), info.location, info.offset, info.length,
            [(e.key, e.value) for e in t.external_data]]


@row
def external_absolute_location_refused():
    m = mlp(1)
    external_data_helper.convert_model_to_external_data(m, location=os.path.abspath("abs.bin"))


@row
def external_save_without_path():
    import io
    m = mlp(1)
    external_data_helper.convert_model_to_external_data(m, location="nowhere.bin", size_threshold=0)
    buf = io.BytesIO()
    onnx.save(m, buf)
    return [len(buf.getvalue()) > 0, os.path.exists("nowhere.bin")]


# ---- numpy_helper

DTYPES = ["float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "bool", "complex64", "complex128"]


@row
def numpy_roundtrip_every_dtype():
    out = {}
    for dt in DTYPES:
        a = (np.arange(12) % 5).astype(dt).reshape(3, 4)
        t = numpy_helper.from_array(a, f"t_{dt}")
        out[dt] = [t.data_type, digest(t.SerializeToString()), numpy_helper.to_array(t).tolist()]
    s = numpy_helper.from_array(np.array(["a", "bc"], dtype=object), "s")
    out["string"] = [digest(s.SerializeToString()), numpy_helper.to_array(s).tolist()]
    return {k: [v[0], v[1], str(v[-1])] if len(v) == 3 else v for k, v in out.items()}


@row
def numpy_typed_fields():
    out = []
    for dt, vals in [(TensorProto.FLOAT, [1.5, 2.5]), (TensorProto.INT32, [1, -2]),
                     (TensorProto.INT64, [3, 4]), (TensorProto.DOUBLE, [0.1]),
                     (TensorProto.FLOAT16, [1.0, 2.0]), (TensorProto.BFLOAT16, [1.0]),
                     (TensorProto.BOOL, [True, False]), (TensorProto.UINT8, [7])]:
        t = helper.make_tensor("t", dt, [len(vals)], vals)
        out.append([digest(t.SerializeToString()), str(numpy_helper.to_array(t).tolist())])
    return out


@row
def numpy_from_list_to_list():
    seq = numpy_helper.from_list([np.arange(3, dtype=np.int64), np.ones(2, np.float32)], "seq")
    return [digest(seq.SerializeToString()), [x.tolist() for x in numpy_helper.to_list(seq)]]


# ---- helper.make_*

@row
def helper_builders():
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[3, 3],
                            pads=[1, 1, 1, 1], alpha=0.1, mode="constant")
    attr = helper.make_attribute("t", numpy_helper.from_array(np.ones(2, np.float32)))
    vi = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, None])
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.INT64, [2])
    func = helper.make_function("local", "f", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                                [helper.make_opsetid("", 17)])
    m = helper.make_model(helper.make_graph([node], "g", [], [vi]), functions=[func],
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    gen = helper.make_model_gen_version(helper.make_graph([], "g2", [], []),
                                        opset_imports=[helper.make_opsetid("", 13)])
    return [digest(x.SerializeToString()) for x in (node, attr, vi, seq, func, m, gen)] + [
        helper.get_attribute_value(node.attribute[2]), helper.printable_graph(m.graph)]


# ---- editing messages

@row
def message_editing():
    m = mlp(2)
    g = m.graph
    n = g.node.add()
    n.op_type = "Identity"
    n.input.extend(["y1"])
    n.output.append("z")
    g.node[0].CopyFrom(helper.make_node("MatMul", ["x", "w0"], ["m0"], name="copied"))
    extra = helper.make_graph([helper.make_node("Relu", ["q"], ["r"])], "extra", [], [])
    g.MergeFrom(extra)
    had = [m.HasField("graph"), g.node[0].HasField("name"), m.HasField("doc_string")]
    m.ClearField("producer_name")
    del g.node[1]
    del g.initializer[-1]
    g.output.extend([helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    g.input[0].name = "x"
    names = sorted(n.name for n in g.node)
    ints = helper.make_attribute("i", [3, 1, 2])
    ints.ints.sort()
    g.node.sort(key=lambda n: n.name) if hasattr(g.node, "sort") else None
    return [had, names, list(ints.ints), digest(m.SerializeToString()), len(g.node),
            [x.name for x in g.node], m.producer_name]


@row
def message_errors():
    out = []
    for fn in (lambda: setattr(onnx.NodeProto(), "op_type", 3),
               lambda: onnx.NodeProto().HasField("input"),
               lambda: onnx.NodeProto().nonexistent,
               lambda: onnx.ModelProto().graph.node[5],
               lambda: setattr(onnx.ModelProto(), "graph", onnx.GraphProto()),
               lambda: onnx.ModelProto.FromString(b"\xff\xff")):
        try:
            fn()
            out.append("ok")
        except Exception as e:  # noqa: BLE001
            out.append(type(e).__name__)
    return out


@row
def text_of_messages():
    m = mlp(1)
    m.graph.node[0].attribute.extend([helper.make_attribute("f", 0.1)])
    return [str(m), str(m.graph.node[0]), repr(m), repr(m.graph)]


# ---- onnx's C++ library

@row
def checker_check_model():
    m = mlp()
    onnx.checker.check_model(m)
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, "checked.onnx")
    onnx.checker.check_model("checked.onnx")
    bad = mlp()
    bad.graph.node[0].op_type = "NoSuchOp"
    try:
        onnx.checker.check_model(bad)
        return "no error"
    except onnx.checker.ValidationError as e:
        return str(e)


@row
def shape_inference_infer_shapes():
    inferred = onnx.shape_inference.infer_shapes(mlp())
    return [digest(inferred.SerializeToString()), str(inferred.graph.value_info[0])]


@row
def version_converter_convert():
    return digest(onnx.version_converter.convert_version(mlp(), 18).SerializeToString())


@row
def printer_and_parser():
    text = onnx.printer.to_text(mlp(1))
    parsed = onnx.parser.parse_model(text)
    graph = onnx.parser.parse_graph("agraph (float[N] x) => (float[N] y) { y = Relu(x) }")
    return [text, digest(parsed.SerializeToString()), digest(graph.SerializeToString())]


@row
def parser_error():
    onnx.parser.parse_model("<ir_version: 8> agraph (float x) => ( { }")


# ---- onnx's Python tools

@row
def compose_merge_models():
    a = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "a",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]), opset_imports=[helper.make_opsetid("", 17)])
    b = helper.make_model(helper.make_graph(
        [helper.make_node("Neg", ["u"], ["v"])], "b",
        [helper.make_tensor_value_info("u", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, [2])]), opset_imports=[helper.make_opsetid("", 17)])
    merged = onnx.compose.merge_models(a, b, io_map=[("y", "u")])
    prefixed = onnx.compose.add_prefix(a, "p_")
    return [digest(merged.SerializeToString()), digest(prefixed.SerializeToString())]


@row
def utils_extract_model():
    onnx.save(mlp(), "full.onnx")
    onnx.utils.extract_model("full.onnx", "part.onnx", ["x"], ["y0"])
    return values(onnx.load("part.onnx"))


@row
def reference_evaluator_run():
    reference = importlib.import_module(sys.argv[1] + ".reference")
    sess = reference.ReferenceEvaluator(mlp())
    x = np.linspace(-1, 1, 128, dtype=np.float32).reshape(2, 64)
    (y,) = sess.run(None, {"x": x})
    return digest(y.tobytes())


# ---- the two worlds together, and protobuf's json_format

@row
def mixing_with_onnx_messages():
    import onnx as real
    theirs = real.helper.make_node("Relu", ["a"], ["b"])
    m = mlp(1)
    m.graph.node.append(theirs)
    g = onnx.GraphProto()
    g.CopyFrom(real.helper.make_graph([theirs], "g", [], []))
    arr = numpy_helper.to_array(real.numpy_helper.from_array(np.arange(3, dtype=np.int32)))
    onnx.save(real.ModelProto.FromString(mlp(1).SerializeToString()), "mixed.onnx")
    same = m.graph.node[-1] == theirs
    return [digest(m.SerializeToString()), digest(g.SerializeToString()), arr.tolist(),
            digest(open("mixed.onnx", "rb").read()), same]


@row
def json_format_message_to_json():
    from google.protobuf import json_format
    m = mlp(1)
    text = json_format.MessageToJson(m)
    back = json_format.Parse(text, onnx.ModelProto())
    return [digest(text.encode()), digest(back.SerializeToString())]


with open(sys.argv[2], "w") as f:
    json.dump(ROWS, f, indent=1, default=repr)
