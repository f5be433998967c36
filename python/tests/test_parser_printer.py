"""onnx's text format on onnx_light (onnx_light.parser, onnx_light.printer, run by onnx's own C++
parser and printer) against the onnx wheel, which runs the same onnx release over protobuf:
every model of the wheel's backend test data and every node test model prints to the same text
(models, graphs, functions, nodes); those texts, and hand-written valid and malformed ones,
parse to the same bytes or fail with the same exception type and arguments; argument type
errors are onnx's."""
import threading

import numpy as np
import onnx
import onnx.backend.test.case.node as node_cases
import onnx.parser
import onnx.printer
import pytest
from onnx import helper

import onnx_light as ol
from onnx_light import parser, printer

from conftest import backend_data


def _models() -> list:
    files = [(str(p.relative_to(backend_data.DATA)), p.read_bytes()) for p in backend_data.models()]
    nodes = [(c.name, c.model.SerializeToString()) for c in node_cases.collect_testcases()]
    return files + nodes


MODELS = _models()

PARSERS = [
    ("model", onnx.parser.parse_model, parser.parse_model),
    ("graph", onnx.parser.parse_graph, parser.parse_graph),
    ("function", onnx.parser.parse_function, parser.parse_function),
    ("node", onnx.parser.parse_node, parser.parse_node),
]


def _outcome(f, *args):
    """What a call did: ("ok", its result) or (exception type name, exception args)."""
    try:
        return ("ok", f(*args))
    except Exception as e:  # noqa: BLE001 - the type is part of the outcome
        return (type(e).__name__, e.args)


def _parsed(f, text):
    """A parse's outcome, the message as its bytes."""
    kind, value = _outcome(f, text)
    return (kind, value.SerializeToString()) if kind == "ok" else (kind, value)


def _parts(model):
    """(label, part) of a model to print: the model, its graph, its functions, its first nodes
    and those of its functions, and the graphs of graph attributes."""
    parts = [("model", model), ("graph", model.graph)]
    parts += [(f"function {f.name}", f) for f in model.functions]
    parts += [(f"node {i}", n) for i, n in enumerate(model.graph.node[:8])]
    for f in model.functions:
        parts += [(f"node {i} of {f.name}", n) for i, n in enumerate(f.node[:4])]
    for i, n in enumerate(model.graph.node):
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                parts.append((f"graph of node {i} {a.name}", a.g))
    return parts


def test_the_models_are_many():
    assert len(MODELS) >= 149 + 1800


def test_every_model_prints_as_onnx():
    differ = []
    printed = 0
    for name, data in MODELS:
        theirs_model = onnx.load_from_string(data)
        ours_model = ol.load_from_string(data)
        theirs_parts, ours_parts = _parts(theirs_model), _parts(ours_model)
        assert [label for label, _ in theirs_parts] == [label for label, _ in ours_parts]
        for (label, theirs), (_, ours) in zip(theirs_parts, ours_parts):
            expected = _outcome(onnx.printer.to_text, theirs)
            got = _outcome(printer.to_text, ours)
            printed += 1
            if expected != got:
                differ.append((name, label, expected, got))
        # Printing reads the model in place and leaves it as it was.
        assert ours_model.SerializeToString() == data, name
    assert differ == []
    assert printed > 4 * len(MODELS)


def test_onnx_messages_print_as_onnx():
    """onnx's own messages are taken too (converted through their bytes)."""
    for name, data in MODELS[::25]:
        model = onnx.load_from_string(data)
        for label, part in _parts(model)[:4]:
            assert printer.to_text(part) == onnx.printer.to_text(part), (name, label)


def _texts():
    """(kind, name, text) of every printed model, graph, function and node of the models."""
    out = []
    for name, data in MODELS:
        model = onnx.load_from_string(data)
        out.append(("model", name, onnx.printer.to_text(model)))
        out.append(("graph", name, onnx.printer.to_text(model.graph)))
        out += [("function", name, onnx.printer.to_text(f)) for f in model.functions]
        out += [("node", name, onnx.printer.to_text(n)) for n in model.graph.node[:3]]
    return out


def test_printed_texts_parse_as_onnx():
    differ = []
    outcomes = {}
    parsers = {kind: (theirs, ours) for kind, theirs, ours in PARSERS}
    for kind, name, text in _texts():
        theirs, ours = parsers[kind]
        expected, got = _parsed(theirs, text), _parsed(ours, text)
        outcomes[expected[0]] = outcomes.get(expected[0], 0) + 1
        if expected != got:
            differ.append((kind, name, expected, got))
    assert differ == []
    # The texts parse back (errors, were there any, would be compared too; the written texts
    # below cover them).
    assert outcomes["ok"] > 3 * len(MODELS)


# Hand-written texts, valid and malformed, each given to all four parse functions.
TEXTS = [
    "",
    "   \n\t ",
    "# only a comment",
    "x = Foo(y)",
    "x = Foo(y)\n",
    "x, y2 = com.microsoft.Foo (a, , b)",
    "x = Foo:overload(y)",
    "x = Foo <alpha = 2.5, beta = -3, gamma = \"s\", delta = [1, 2, 3]> (y)",
    "x = Foo <f = [1.5, 2.5e3, -1e-2], s = [\"a\", \"b\\\"c\"], t = int64[2] {1, 2}> (y)",
    "x = Foo <a: int = 1.5> (y)",
    "x = Foo <a: float = 3> (y)",
    "x = Foo <a: ints = []> (y)",
    "x = Foo <a = []> (y)",
    "x = Foo <a = @b> (y)",
    "x = Foo <a: int = @b> (y)",
    "x = Foo <body = g (float t) => (float u) { u = Neg(t) }> (y)",
    "x = Foo <tp: type = float[N, 3]> (y)",
    "x = Foo <tp: types = [float, seq(int64)]> (y)",
    "x = Foo <a = 99999999999999999999> (y)",
    "x = Foo <a = -99999999999999999999> (y)",
    "x = Foo <a = 1e999> (y)",
    "x = Foo <a = 1e-999> (y)",
    "x = Foo <a = float[1] {1e999}> (y)",
    "x = Foo <a = int32[2] {1}> (y)",
    "x = Foo <a = string[2] {\"p\", \"q\"}> (y)",
    "x = Foo <a = \"unterminated> (y)",
    "x = Foo <a =",
    "x = Foo(",
    "x = Foo(y",
    "x = (y)",
    "= Foo(y)",
    "x Foo(y)",
    "x = Foo(y) <a = 1>",
    "x = Foo(y) trailing",
    "\u00e9 = Foo(y)",
    "x = F\u20ac(y)",
    "x = Foo <a = \"\u00e9\u20ac\"> (y)",
    "x = Foo <a = \"\\xff\"> (y)",
    "x = Foo(y) # comment\n",
    "agraph (float[N] x, float[N] y) => (float[N] z) { t = Add(x, y) z = Relu(t) }",
    "agraph (float[N] x) => (float[N] z) <float[N] t> { t = Neg(x) z = Relu(t) }",
    "g (float[2] x) => (float[2] y) <float[2] w = {1.0, 2.0}> { y = Add(x, w) }",
    "g (float[2] x, float[2] w = {1.0, 2.0}) => (float[2] y) { y = Add(x, w) }",
    "g (seq(float[N]) s, map(int64, string) m, optional(float) o) => (float r) "
    "{ r = Foo(s, m, o) }",
    "g (sparse_tensor(float)[2] s, bfloat16[1] b, float8e4m3fn[1] f, int4[2] i, uint2[4] u) "
    "=> () {}",
    "g (float[] x) => (float[?, unk_dim] y) { y = Identity(x) }",
    "g (float x) => (float y) { y = Neg(x) ",
    "g (float x) => (float y) y = Neg(x) }",
    "g (floaty x) => (float y) { y = Neg(x) }",
    "g (float[N x) => (float y) { y = Neg(x) }",
    "g (float x) => (float y) { y = If(c) <then_branch = t () => (float z) { z = Neg(x) }, "
    "else_branch = e () => (float z) { z = Abs(x) }> }",
    "g () => () { }",
    "g () => ()",
    "<ir_version: 8, opset_import: [\"\" : 18]>\ng (float[N] x) => (float[N] y) { y = Neg(x) }",
    "<ir_version: 10, opset_import: [\"\" : 21, \"custom\" : 1], producer_name: \"p\", "
    "producer_version: \"1.0\", domain: \"d\", model_version: 3, doc_string: \"doc\", "
    "metadata_props: [\"k\" : \"v\", \"k2\" : \"v2\"]>\n"
    "g (float[N] x) => (float[N] y) { y = custom.Sq(x) }\n"
    "<domain: \"custom\", opset_import: [\"\" : 21]>\nSq (a) => (b) { b = Mul(a, a) }",
    "<ir_version: 10, opset_import: [\"\" : 21, \"local\" : 1]>\n"
    "g (float x) => (float y) { y = local.F <k = 2.0> (x) }\n"
    "<domain: \"local\", opset_import: [\"\" : 21]>\n"
    "F <k> (a) => (b) { c = Constant <value_float: float = @k> () "
    "b = Mul(a, c) }\n"
    "<domain: \"local\", opset_import: [\"\" : 21], overload: \"o\">\nF (a) => (b) { b = Neg(a) }",
    "<ir_version: 8>",
    "<ir_version: 8",
    "<ir_version: \"8\"> g () => () {}",
    "<ir_version: 99999999999999999999> g () => () {}",
    "<opset_import: [\"\" 18]> g () => () {}",
    "<unknown_key: 1> g () => () {}",
    "<ir_version: 8, ir_version: 9> g () => () {}",
    "<domain: \"d\", opset_import: [\"\" : 18]>\nf (x, y) => (z) { z = Add(x, y) }",
    "<domain: \"d\", opset_import: [\"\" : 18]>\n"
    "f <alpha, beta: float = 1.5> (x) => (z) { z = Foo <a = @alpha> (x) }",
    "<domain: \"d\", opset_import: [\"\" : 18]>\nf (float x) => (float z) { z = Neg(x) }",
    "<domain: \"d\", opset_import: [\"\" : 18]>\nf (x) => (z) <float t> { t = Neg(x) z = Abs(t) }",
    "<domain: \"d\">\nf (x) => (z) { z = Neg(x)",
    "f (x) => (z) { z = Neg(x) }",
    "<domain: \"d\", bad: 1>\nf (x) => (z) { z = Neg(x) }",
    "x = Foo(y)\0 garbage after a NUL",
    "x = Foo(y\0)",
]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_written_texts_parse_as_onnx(text):
    for kind, theirs, ours in PARSERS:
        assert _parsed(ours, text) == _parsed(theirs, text), kind


def test_written_texts_cover_successes_and_each_error_type():
    kinds = {}
    for text in TEXTS:
        for _, theirs, _ in PARSERS:
            k = _parsed(theirs, text)[0]
            kinds[k] = kinds.get(k, 0) + 1
    assert kinds["ok"] >= 25 and kinds["ParseError"] >= 100
    assert kinds["IndexError"] > 0 and kinds["RuntimeError"] > 0


def test_results_are_onnx_light_messages():
    model = parser.parse_model(
        "<ir_version: 8, opset_import: [\"\" : 18]> g (float[2] x) => (float[2] y) { y = Neg(x) }"
    )
    assert isinstance(model, ol.ModelProto)
    assert model.graph.node[0].op_type == "Neg"
    assert isinstance(parser.parse_graph("g () => () {}"), ol.GraphProto)
    assert isinstance(parser.parse_function("f (x) => (y) { y = Neg(x) }"), ol.FunctionProto)
    assert isinstance(parser.parse_node("x = Foo(y)"), ol.NodeProto)
    # Keyword arguments with onnx's names.
    assert parser.parse_node(node_text="x = Foo(y)").SerializeToString() == onnx.parser.parse_node(
        node_text="x = Foo(y)"
    ).SerializeToString()
    theirs = onnx.parser.parse_model("g () => () {}")
    assert parser.parse_model(model_text="g () => () {}").SerializeToString() == theirs.SerializeToString()


def test_parse_error_is_onnx():
    with pytest.raises(onnx.parser.ParseError) as theirs:
        onnx.parser.parse_node("x = Foo(")
    with pytest.raises(parser.ParseError) as ours:
        parser.parse_node("x = Foo(")
    assert ours.value.args == theirs.value.args
    assert isinstance(ours.value.args[0], bytes)
    assert str(ours.value) == str(theirs.value)
    assert issubclass(parser.ParseError, Exception)


class _Custom:
    pass


class _Str(str):
    pass


ARGUMENTS = [
    None,
    1,
    2.5,
    b"x = Foo(y)",
    bytearray(b"x = Foo(y)"),
    ["x = Foo(y)"],
    np.zeros(2),
    _Custom(),
    onnx.NodeProto(),
    ol.NodeProto(),
    "x = Foo(y)\ud800",
    _Str("x = Foo(y)"),
    np.str_("x = Foo(y)"),
]


@pytest.mark.parametrize("argument", ARGUMENTS, ids=lambda a: type(a).__name__)
def test_argument_types_as_onnx(argument):
    for kind, theirs, ours in PARSERS:
        assert _parsed(ours, argument) == _parsed(theirs, argument), kind


def test_call_errors_as_onnx():
    for _, theirs, ours in PARSERS:
        assert _outcome(ours) == _outcome(theirs)
        assert _outcome(lambda: ours("x", "y")) == _outcome(lambda: theirs("x", "y"))


@pytest.mark.parametrize(
    "argument",
    [None, 1, "text", b"", onnx.TensorProto(), ol.TensorProto(), onnx.AttributeProto(),
     ol.ValueInfoProto()],
    ids=lambda a: type(a).__module__ + "." + type(a).__name__,
)
def test_printer_refuses_what_onnx_refuses(argument):
    assert _outcome(printer.to_text, argument) == _outcome(onnx.printer.to_text, argument)
    assert _outcome(printer.to_text, argument)[0] == "TypeError"


def test_printer_string_attributes():
    """A string attribute that is not UTF-8 makes the text undecodable, as in onnx; NUL bytes and
    quotes are printed as onnx does."""
    for value in [b"\xff\xfe", b"a\x00b", b"q\"uote\\", "\u00e9".encode()]:
        node = helper.make_node("Foo", ["y"], ["x"], a=value)
        ours = ol.NodeProto.FromString(node.SerializeToString())
        assert _outcome(printer.to_text, ours) == _outcome(onnx.printer.to_text, node), value


def test_printing_an_unset_part_leaves_it_unset():
    model = ol.ModelProto()
    assert printer.to_text(model.graph) == onnx.printer.to_text(onnx.ModelProto().graph)
    assert not model.HasField("graph")
    assert printer.to_text(model) == onnx.printer.to_text(onnx.ModelProto())


def test_printing_from_threads():
    name, data = next((n, d) for n, d in MODELS if b"raw_data" in d or len(d) > 10000)
    model = ol.load_from_string(data)
    expected = onnx.printer.to_text(onnx.load_from_string(data))
    results = []

    def run():
        for _ in range(20):
            results.append(printer.to_text(model))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 80, name
    assert model.SerializeToString() == data
