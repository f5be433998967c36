"""The package's own walks over nested messages (text format for str/repr, ==, copy, CopyFrom,
MergeFrom, construction from nested dicts) are guarded like the library's: at the deepest
nesting a parse accepts (max_recursion_depth 1000: 333 graph-in-attribute levels) and far
beyond it, on a thread with a 256 KiB stack, none overflows the native stack. Serializing a
model nested past what any parse accepts is refused."""
import copy
import threading

import pytest

import onnx_light as ol

SMALL_STACK = 256 << 10


def on_small_stack(fn):
    """Runs fn() on a new thread with a 256 KiB stack; returns its result or raises its error."""
    old = threading.stack_size(SMALL_STACK)
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 (re-raised on the caller's thread)
            out["error"] = e

    try:
        t = threading.Thread(target=run)
        t.start()
    finally:
        threading.stack_size(old)
    t.join()
    if "error" in out:
        raise out["error"]
    return out.get("value")


def nested_graphs(levels):
    """A model whose graph holds a node whose attribute holds a graph ... `levels` times
    (nesting depth 3 * levels + 1 below the model)."""
    m = ol.ModelProto(ir_version=10)
    g = m.graph
    for i in range(levels):
        g.name = f"g{i}"
        a = g.node.add(op_type="If").attribute.add(name="then_branch")
        g = a.g
    g.name = "innermost"
    return m


def depth_of(m):
    n, g = 0, m.graph
    while len(g.node):
        g = g.node[0].attribute[0].g
        n += 1
    return n


def nested_types(levels):
    d = {"tensor_type": {"elem_type": 1}}
    for _ in range(levels):
        d = {"sequence_type": {"elem_type": d}}
    return d


def walks(m, full_text):
    """Every walk of the package over `m`; returns what the checks need."""
    text = str(m) if full_text else None
    r = repr(m.graph.node[0])
    c = copy.copy(m)
    d = copy.deepcopy(m)
    same = c == m and d == m
    e = ol.ModelProto()
    e.CopyFrom(m)
    f = ol.ModelProto()
    f.MergeFrom(m)
    f.MergeFrom(m)
    return text, r, same, e == m, depth_of(f), m.ByteSize()


def test_walks_at_the_maximum_parse_depth_on_a_small_stack():
    m = nested_graphs(333)  # depth 1000: the deepest max_recursion_depth allows
    text, r, same, copied, merged_depth, size = on_small_stack(lambda: walks(m, True))
    assert text.count("innermost") == 1 and text.count("g {") == 333
    assert r.startswith("NodeProto(") and "..." in r
    assert same and copied and merged_depth == 333
    data = on_small_stack(m.SerializeToString)
    assert len(data) == size
    # The bytes are those of the same model: parsed back by the library with
    # max_recursion_depth 1000 in tests/integration/deep_nesting.rs; here, the innermost name is
    # there once.
    assert data.count(b"innermost") == 1


def test_walks_far_past_the_maximum_depth_on_a_small_stack():
    m = nested_graphs(3000)  # depth 9001
    assert depth_of(m) == 3000
    _, r, same, copied, merged_depth, _ = on_small_stack(lambda: walks(m, False))
    assert r.startswith("NodeProto(") and same and copied and merged_depth == 3000
    # No parse accepts such a model: serializing it is refused, not written.
    with pytest.raises(ol.LimitExceededError, match="1000 levels"):
        on_small_stack(m.SerializeToString)


def test_messages_built_from_deeply_nested_dicts():
    t = on_small_stack(lambda: ol.TypeProto(**nested_types(5000)))
    n, x = 0, t
    while x.HasField("sequence_type"):
        x = x.sequence_type.elem_type
        n += 1
    assert n == 5000 and x.tensor_type.elem_type == 1
    assert on_small_stack(lambda: copy.deepcopy(t) == t)
    assert on_small_stack(lambda: repr(t)).startswith("TypeProto(")
