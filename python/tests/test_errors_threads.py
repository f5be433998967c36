"""Errors are the documented exceptions with the library's message; operations without the GIL
never race with Python code that changes the model."""
import contextlib
import sys
import threading
import time

import numpy as np
import onnx
import pytest
from onnx import numpy_helper as onh

import onnx_light as ol


def model_bytes():
    g = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"], name=f"n{i}") for i in range(50)],
        "g", [], [], [onh.from_array(np.ones((256, 256), np.float32), "w")],
    )
    return onnx.helper.make_model(g).SerializeToString()


def test_decode_errors_name_the_field_and_offset():
    data = model_bytes()
    with pytest.raises(ol.DecodeError) as e:
        ol.load_from_string(data[:-3])
    assert isinstance(e.value, ValueError)
    assert "ModelProto" in str(e.value) and "byte" in str(e.value)
    bad = bytearray(data)
    # Corrupt the length of the first node's name (inside graph.node[0]).
    i = bad.find(b"n0")
    bad[i - 1] = 0x7F
    with pytest.raises(ol.DecodeError, match=r"graph\.node\[0\].*at byte \d+"):
        ol.load_from_string(bytes(bad))
    with pytest.raises(ol.DecodeError):
        ol.NodeProto.FromString(b"\xff\xff\xff")


def test_io_errors_are_oserrors(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        ol.load(tmp_path / "missing.onnx")
    assert "missing.onnx" in str(e.value)
    m = ol.load_from_string(model_bytes())
    with pytest.raises(OSError):
        ol.save(m, tmp_path / "no" / "such" / "dir" / "m.onnx")


def test_bad_options_and_arguments():
    with pytest.raises(ol.InvalidArgumentError):
        ol.load_from_string(model_bytes(), num_threads=0)
    with pytest.raises(TypeError):
        ol.save(ol.GraphProto(), "x.onnx")
    with pytest.raises(TypeError):
        ol.load_from_string(12345)


def test_wrong_key(tmp_path):
    m = ol.load_from_string(model_bytes())
    p = tmp_path / "enc.onnx"
    ol.save(m, p, key="secret")
    assert ol.load(p, key="secret").SerializeToString() == m.SerializeToString()
    with pytest.raises(ol.WrongKeyError):
        ol.load(p, key="wrong")
    with pytest.raises(ValueError):
        ol.load(p)


def test_save_waits_for_nothing_and_writers_wait_for_save(tmp_path):
    m = ol.load_from_string(model_bytes())
    n0 = len(m.graph.node)
    errors = []

    def save(i):
        try:
            for k in range(5):
                ol.save(m, tmp_path / f"m{i}_{k}.onnx")
                ol._native.serialize(m)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=save, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for k in range(300):
        m.graph.node.add(op_type="Extra", name=f"x{k}")
        view = m.graph.node[0]
        del m.graph.node[0]
        assert view.op_type in ("Relu", "Extra")
        _ = [n.op_type for n in m.graph.node[:5]]
    for t in threads:
        t.join()
    assert not errors
    assert len(m.graph.node) == n0
    for p in tmp_path.glob("*.onnx"):
        saved = onnx.load(p)
        assert len(saved.graph.node) in (n0, n0 + 1)
        assert all(n.op_type in ("Relu", "Extra") for n in saved.graph.node)


def big_model_bytes():
    """~48 MiB of weights in 6 tensors, so that each operation below takes a while."""
    inits = [onh.from_array(np.full(2 << 20, i, np.float32), f"w{i}") for i in range(6)]
    g = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [], [], inits)
    return onnx.helper.make_model(g).SerializeToString()


def save_to_file_object(m, path):
    with open(path, "wb") as f:
        ol.save(m, f)


@contextlib.contextmanager
def counting_thread():
    """A thread counting while it holds the GIL, running; yields its counter. Inside, the switch
    interval is far longer than any call, so the main thread keeps the GIL (and the counter stands
    still) unless a call releases it."""
    counter = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1
            time.sleep(0)  # hands the GIL back at once when the main thread wants it

    old = sys.getswitchinterval()
    t = threading.Thread(target=count)
    t.start()
    try:
        while counter[0] == 0:  # the counting thread is running
            time.sleep(0.001)
        sys.setswitchinterval(100.0)
        time.sleep(0)  # from here the main thread keeps the GIL unless a call releases it
        yield counter
    finally:
        sys.setswitchinterval(old)
        stop.set()
        t.join()


def test_the_gil_is_released(tmp_path):
    """Another Python thread runs while load, parse, serialize, save and the conversions work:
    with a switch interval far longer than any of them, a thread that held the GIL would never
    let the counting thread run during the call."""
    data = big_model_bytes()
    (tmp_path / "m.onnx").write_bytes(data)
    m = ol.load_from_string(data)
    operations = {
        "load": lambda: ol.load(tmp_path / "m.onnx", num_threads=1),
        "load_from_string": lambda: ol.load_from_string(data, num_threads=1),
        "ParseFromString": lambda: ol.ModelProto().ParseFromString(data),
        "SerializeToString": lambda: m.SerializeToString(),
        "save": lambda: ol.save(m, tmp_path / "out.onnx", num_threads=1),
        "save external": lambda: ol.save(m, tmp_path / "ext.onnx", save_as_external_data=True,
                                         num_threads=1),
        "serialize to a file object": lambda: save_to_file_object(m, tmp_path / "f.onnx"),
    }
    with counting_thread() as counter:
        for name, op in operations.items():
            ran = 0
            for _ in range(5):  # a few tries: the counting thread must get the GIL once
                before = counter[0]
                op()
                ran = max(ran, counter[0] - before)
            assert ran > 0, name


def test_small_calls_keep_the_gil():
    """Parses and serializations of less than 64 KiB keep the GIL (taking it back after a release
    waits for whichever thread took it, which would make a call of microseconds last far longer
    in a program with a busy thread): with a switch interval far longer than the loop, a thread
    waiting for the GIL never runs during 100 small calls of each kind."""
    g = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [], [],
        [onh.from_array(np.arange(1000, dtype=np.float32), "w")])
    data = onnx.helper.make_model(g).SerializeToString()
    assert len(data) < 64 << 10
    m = ol.load_from_string(data)
    operations = {
        "load_from_string": lambda: ol.load_from_string(data),
        "ParseFromString": lambda: ol.ModelProto().ParseFromString(data),
        "SerializeToString": lambda: m.SerializeToString(),
        "TensorProto.SerializeToString": lambda: m.graph.initializer[0].SerializeToString(),
    }
    with counting_thread() as counter:
        for name, op in operations.items():
            before = counter[0]
            for _ in range(100):
                op()
            assert counter[0] == before, name


@pytest.mark.parametrize("operation", ["save", "SerializeToString"])
def test_a_write_waits_only_for_the_operation_in_progress(tmp_path, operation):
    """A thread saving (or serializing) a 48 MiB model back to back does not starve a write from
    another thread: once the write waits, the next save waits behind it, so the write waits at
    most for the save in progress; and the saver keeps going afterwards."""
    m = ol.load_from_string(big_model_bytes())
    if operation == "save":
        def op():
            ol.save(m, tmp_path / "m.onnx", num_threads=1)
    else:
        def op():
            m.SerializeToString()
    durations = []
    stop = threading.Event()
    errors = []

    def saver():
        try:
            while not stop.is_set():
                t0 = time.perf_counter()
                op()
                durations.append(time.perf_counter() - t0)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    waits = []
    progress = []

    def writer():
        for k in range(5):
            t0 = time.perf_counter()
            m.graph.name = f"g{k}"  # waits for the save in progress
            waits.append(time.perf_counter() - t0)
            done = len(durations)
            deadline = time.perf_counter() + 30
            while len(durations) < done + 2 and time.perf_counter() < deadline:
                time.sleep(0.001)
            progress.append(len(durations) - done)

    t = threading.Thread(target=saver)
    t.start()
    try:
        while len(durations) < 3:
            time.sleep(0.01)
        w = threading.Thread(target=writer)
        w.start()
        # A starved write would wait forever: stopping the saver lets it end, then fail below.
        w.join(timeout=120)
    finally:
        stop.set()
        t.join()
        w.join()
    assert not errors
    one = max(durations)
    assert len(waits) == 5 and max(waits) < 3 * one, (waits, one)
    assert min(progress) >= 2, progress  # the saver kept saving after each write
    assert m.graph.name == "g4"
