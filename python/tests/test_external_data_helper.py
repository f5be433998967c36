"""onnx_light.external_data_helper against onnx.external_data_helper on the same models: the same
tensors converted with the same locations (the bytes staying in memory), the same bytes loaded,
the same inline models after convert_model_from_external_data; populate / clear keep the
references; a save leaves the model as onnx's does, write_model leaves it as it was."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, external_data_helper as theirs_helper, helper, numpy_helper

import onnx_light
from onnx_light import external_data_helper as ours_helper


def tensors(model):
    """name -> TensorProto of every tensor onnx's helper walks (initializers, attributes,
    subgraphs; the names of the test model are unique)."""
    out = {t.name: t for t in theirs_helper._get_all_tensors(model)}
    assert len(out) == len(list(theirs_helper._get_all_tensors(model)))
    return out


def entries(t):
    return {e.key: e.value for e in t.external_data}


def make_model():
    """Initializers of many sizes (around the default threshold and its 33-byte getsizeof
    offset), a Constant attribute tensor, an If with subgraph initializers."""
    inits = [numpy_helper.from_array(np.arange(n, dtype=np.uint8), f"w{n}")
             for n in (1, 40, 100, 990, 991, 992, 1024, 3000, 70000)]
    const = helper.make_node("Constant", [], ["c"],
                             value=numpy_helper.from_array(np.ones(600, np.float32), "c_value"))
    def branch(prefix, value):
        return helper.make_graph(
            [helper.make_node("Identity", [f"{prefix}_w"], [f"{prefix}_out"])], prefix,
            [], [helper.make_tensor_value_info(f"{prefix}_out", TensorProto.FLOAT, [300])],
            [numpy_helper.from_array(np.full(300, value, np.float32), f"{prefix}_w")])

    cond = helper.make_node("If", ["cond"], ["y"], then_branch=branch("then", 2.0),
                            else_branch=branch("else", 3.0))
    graph = helper.make_graph(
        [const, cond], "g",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [300])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def both(model):
    """(onnx's copy, onnx_light's copy) of `model`."""
    return (onnx.ModelProto.FromString(model.SerializeToString()),
            onnx_light.load_from_string(model.SerializeToString(), load_external_data=False))


@pytest.mark.parametrize("one_file", [True, False], ids=["one_file", "per_tensor"])
@pytest.mark.parametrize("convert_attribute", [False, True], ids=["initializers", "attributes"])
@pytest.mark.parametrize("threshold", [1024, 100, 0])
def test_convert_matches_onnx(one_file, convert_attribute, threshold):
    theirs, ours = both(make_model())
    kwargs = dict(all_tensors_to_one_file=one_file, location="w.bin" if one_file else None,
                  size_threshold=threshold, convert_attribute=convert_attribute)
    theirs_helper.convert_model_to_external_data(theirs, **kwargs)
    assert ours_helper.convert_model_to_external_data(ours, **kwargs) is None
    a, b = tensors(theirs), tensors(onnx_light.to_onnx(ours))
    assert a.keys() == b.keys()
    converted = [n for n, t in a.items() if theirs_helper.uses_external_data(t)]
    assert converted
    for name, t in a.items():
        o = b[name]
        assert o.data_location == t.data_location, name
        assert o.raw_data == t.raw_data, f"{name}: the bytes stay in memory"
        # The same entries: the location only (no offset or length until a save writes them).
        assert entries(o) == entries(t), name


def test_absolute_location_is_refused_as_onnx_does(tmp_path):
    theirs, ours = both(make_model())
    location = str(tmp_path / "w.bin")
    with pytest.raises(ValueError):
        theirs_helper.convert_model_to_external_data(theirs, location=location)
    with pytest.raises(ValueError):
        ours_helper.convert_model_to_external_data(ours, location=location)


def test_convert_from_external_data_matches_onnx():
    original = make_model()
    theirs, ours = both(original)
    for m, h in ((theirs, theirs_helper), (ours, ours_helper)):
        h.convert_model_to_external_data(m, location="w.bin", size_threshold=0, convert_attribute=True)
        h.convert_model_from_external_data(m)
    assert onnx_light.to_onnx(ours).SerializeToString() == theirs.SerializeToString()
    assert not any(ours_helper.uses_external_data(t) for t in tensors(onnx_light.to_onnx(ours)).values())
    # A tensor without its bytes: ValueError, and the model is unchanged.
    _, lazy = both(original)
    ours_helper.convert_model_to_external_data(lazy, location="w.bin", size_threshold=0)
    ours_helper.clear_external_data(lazy)
    before = lazy.SerializeToString()
    with pytest.raises(ValueError, match="raw_data"):
        ours_helper.convert_model_from_external_data(lazy)
    assert lazy.SerializeToString() == before


def test_load_populate_and_clear(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(make_model(), str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.data", size_threshold=100, convert_attribute=True)
    references = tensors(onnx.load(str(path), load_external_data=False))
    external = [n for n, t in references.items() if theirs_helper.uses_external_data(t)]
    assert len(external) >= 5

    # load_external_data_for_model: onnx's result, byte for byte.
    theirs = onnx.load(str(path), load_external_data=False)
    theirs_helper.load_external_data_for_model(theirs, str(tmp_path))
    ours = onnx_light.load(str(path), load_external_data=False)
    assert ours_helper.load_external_data_for_model(ours, tmp_path) is None
    assert onnx_light.to_onnx(ours).SerializeToString() == theirs.SerializeToString()

    # populate: the same bytes, the references stay.
    populated = onnx_light.load(str(path), load_external_data=False)
    assert ours_helper.populate_external_data(populated, tmp_path) == len(external)
    p = tensors(onnx_light.to_onnx(populated))
    for name, t in tensors(theirs).items():
        assert p[name].raw_data == t.raw_data, name
        if name in external:
            assert ours_helper.uses_external_data(p[name]), name
            assert entries(p[name]) == entries(references[name]), name

    # clear: the bytes go, the references stay: the model file as written.
    assert ours_helper.clear_external_data(populated) == len(external)
    assert populated.SerializeToString() == path.read_bytes()
    assert ours_helper.clear_external_data(populated) == 0


def test_save_leaves_the_model_as_it_saved_it(tmp_path):
    """After a save with external data, the model in memory is what the .onnx holds (tensors
    external, without their bytes), in onnx as in onnx_light; each package loads both."""
    original = make_model()
    theirs, ours = both(original)
    kwargs = dict(save_as_external_data=True, location="w.bin", size_threshold=100)
    (tmp_path / "theirs").mkdir()
    onnx.save(theirs, str(tmp_path / "theirs" / "m.onnx"), **kwargs)
    onnx_light.save(ours, str(tmp_path / "m.onnx"), **kwargs)
    assert theirs.SerializeToString() == (tmp_path / "theirs" / "m.onnx").read_bytes()
    assert ours.SerializeToString() == (tmp_path / "m.onnx").read_bytes()
    external = {n for n, t in tensors(theirs).items() if theirs_helper.uses_external_data(t)}
    assert external == {n for n, t in tensors(onnx_light.to_onnx(ours)).items()
                        if theirs_helper.uses_external_data(t)}
    for name in external:
        assert not tensors(onnx_light.to_onnx(ours))[name].HasField("raw_data"), name
    for path in (tmp_path / "m.onnx", tmp_path / "theirs" / "m.onnx"):
        loaded = onnx.load(str(path))
        onnx.checker.check_model(loaded)
        for name, t in tensors(original).items():
            assert tensors(loaded)[name].raw_data == t.raw_data, name
            assert tensors(onnx_light.to_onnx(onnx_light.load(path)))[name].raw_data == t.raw_data


def test_write_model_leaves_the_model_unchanged(tmp_path):
    _, ours = both(make_model())
    before = ours.SerializeToString()
    onnx_light.write_model(ours, tmp_path / "m.onnx", save_as_external_data=True, size_threshold=0)
    assert ours.SerializeToString() == before
    loaded = tensors(onnx_light.to_onnx(onnx_light.load(tmp_path / "m.onnx")))
    for name, t in tensors(onnx.ModelProto.FromString(before)).items():
        assert loaded[name].raw_data == t.raw_data, name
    # A tensor marked external that holds its bytes: write_model refuses it, naming the tensor.
    ours_helper.convert_model_to_external_data(ours, location="w.bin", size_threshold=0)
    with pytest.raises(ValueError, match="w1.*w.bin"):
        onnx_light.write_model(ours, tmp_path / "n.onnx")
    assert not (tmp_path / "n.onnx").exists()


def test_save_progress(tmp_path):
    """progress(done, total) reports the weight bytes as they are written: increasing, ending at
    the total; an exception it raises comes out of save, after the save."""
    _, ours = both(make_model())
    calls = []
    onnx_light.write_model(ours, tmp_path / "m.onnx", save_as_external_data=True, size_threshold=0,
                           progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1]
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    total = sum(len(t.raw_data) for t in tensors(onnx_light.to_onnx(ours)).values()
                if t.name != "c_value")
    assert calls[-1][1] == total

    def fail(done, total):
        raise KeyError("stop")

    with pytest.raises(KeyError, match="stop"):
        onnx_light.save(ours, tmp_path / "n.onnx", save_as_external_data=True, size_threshold=0,
                        progress=fail)


@pytest.mark.parametrize("no_copy", [False, True])
@pytest.mark.parametrize("num_threads", [1, 2])
def test_load_progress(tmp_path, no_copy, num_threads):
    """load(progress=) reports the model file's size, then the external data as it is read: the
    calls sum to the file's size plus every recorded range; an exception it raises comes out of
    load, after the load."""
    _, ours = both(make_model())
    path = tmp_path / "m.onnx"
    onnx_light.save(ours, path, save_as_external_data=True, location="m.data", size_threshold=0)
    calls = []
    onnx_light.load(path, no_copy=no_copy, num_threads=num_threads, progress=calls.append)
    assert calls[0] == os.path.getsize(path)
    lengths = _recorded(path, "length")
    assert len(lengths) >= 2
    assert sum(calls) == os.path.getsize(path) + sum(lengths)

    def fail(n):
        raise KeyError("stop")

    with pytest.raises(KeyError, match="stop"):
        onnx_light.load(path, no_copy=no_copy, num_threads=num_threads, progress=fail)


def _recorded(path, key):
    """The ``key`` values of the external_data entries of the model at ``path``, as integers."""
    m = onnx_light.load(path, load_external_data=False)
    return [int(e.value) for t in tensors(onnx_light.to_onnx(m)).values()
            for e in t.external_data if e.key == key]
