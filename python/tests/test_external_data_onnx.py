"""The scenarios of the onnx package's own external-data tests (tests/python/external_data_test.py
of onnx), reproduced against onnx_light and cross-checked with onnx: files written by one package
are read by the other with the same values, and where onnx refuses (paths outside the model's
directory, links, ranges past the end of a file, bad offsets) onnx_light refuses too, with its
documented exceptions."""
import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import checker, helper, parser
from onnx.external_data_helper import load_external_data_for_model as onnx_load_external, set_external_data
from onnx.numpy_helper import from_array, to_array as onnx_to_array

import onnx_light as ol
from onnx_light import numpy_helper as nh

INIT = np.arange(6).reshape(3, 2).astype(np.float32) + 512
ATTR = np.arange(6).reshape(2, 3).astype(np.float32) + 256


def external_tensor(d, value, name, location="", offset=None):
    """A tensor whose bytes onnx's test writes to `location` (default: one file per tensor)."""
    t = from_array(np.array(value), name)
    location = location or f"{name}.bin"
    with open(os.path.join(d, location), "ab") as f:
        start = f.tell()
        if offset is not None and start < offset:
            f.write(b"\0" * (offset - start))
            start = offset
        f.write(t.raw_data)
        length = f.tell() - start
    if offset is None:
        set_external_data(t, location=location)
    else:
        set_external_data(t, location=location, offset=start, length=length)
    t.ClearField("raw_data")
    t.data_location = onnx.TensorProto.EXTERNAL
    return t


def external_model(d, location="", single_file=False):
    """onnx's TestLoadExternalData model: a Constant node's tensor and an initializer, both
    external (one file each, or one file at 4096-aligned offsets)."""
    kw = dict(location="tensors.bin", offset=0) if single_file else {}
    attr = external_tensor(d, ATTR, "attribute_value", **kw)
    if single_file:
        kw = dict(location="tensors.bin", offset=4096)
    init = external_tensor(d, INIT, "input_value", location or kw.get("location", ""),
                           kw.get("offset"))
    node = helper.make_node("Constant", [], ["values"], value=attr)
    g = helper.make_graph([node], "test_graph",
                          [helper.make_tensor_value_info("input_value", 1, INIT.shape)], [],
                          initializer=[init])
    path = os.path.join(d, "model.onnx")
    onnx.save_model(helper.make_model(g), path)
    return path


def values(m, base_dir=""):
    return nh.to_array(m.graph.initializer[0], base_dir), nh.to_array(m.graph.node[0].attribute[0].t, base_dir)


def assert_values(m, base_dir=""):
    init, attr = values(m, base_dir)
    assert np.array_equal(init, INIT) and np.array_equal(attr, ATTR)


@pytest.mark.parametrize("single_file", [False, True])
def test_load_external_data(tmp_path, single_file):
    path = external_model(tmp_path, single_file=single_file)
    for no_copy in (False, True):
        m = ol.load(path, no_copy=no_copy)
        assert_values(m)
        assert m.SerializeToString() == onnx.load(path).SerializeToString()
    # In place, after a load without external data (onnx.load_external_data_for_model).
    m = ol.load(path, load_external_data=False)
    assert m.graph.initializer[0].data_location == ol.TensorProto.EXTERNAL
    assert ol.load_external_data_for_model(m, tmp_path) == 2
    ref = onnx.load(path, load_external_data=False)
    onnx_load_external(ref, str(tmp_path))
    assert m.SerializeToString() == ref.SerializeToString()
    assert_values(m)
    # Saved elsewhere: the loaded tensors are written inline, as onnx.save writes them.
    (tmp_path / "save_copy").mkdir()
    ol.save(ol.load(path), tmp_path / "save_copy" / "model.onnx")
    onnx.save_model(onnx.load(path), str(tmp_path / "save_copy" / "ref.onnx"))
    assert (tmp_path / "save_copy" / "model.onnx").read_bytes() == (tmp_path / "save_copy" / "ref.onnx").read_bytes()
    assert_values(ol.load(tmp_path / "save_copy" / "model.onnx"))


def small_model():
    """onnx's TestSaveAllTensorsAsExternalData model (24-byte tensors, inline)."""
    attr, init = from_array(ATTR, "attribute_value"), from_array(INIT, "input_value")
    node = helper.make_node("Constant", [], ["values"], value=attr)
    g = helper.make_graph([node], "test_graph",
                          [helper.make_tensor_value_info("input_value", 1, INIT.shape)], [],
                          initializer=[init])
    return helper.make_model(g)


def saved_both(tmp_path, **kw):
    """The model saved by onnx and by onnx_light with the same keywords, in two directories."""
    ref, ours = tmp_path / "ref", tmp_path / "ours"
    ref.mkdir()
    ours.mkdir()
    onnx.save_model(small_model(), str(ref / "model.onnx"), save_as_external_data=True, **kw)
    ol.save(ol.from_onnx(small_model()), ours / "model.onnx", save_as_external_data=True, **kw)
    return ref, ours


def locations(path):
    m = onnx.load(str(path), load_external_data=False)
    tensors = [m.graph.initializer[0], m.graph.node[0].attribute[0].t]
    return [(t.name, {e.key: e.value for e in t.external_data}.get("location")) for t in tensors]


@pytest.mark.parametrize("kw", [
    dict(size_threshold=1024),
    dict(size_threshold=0),
    dict(size_threshold=0, all_tensors_to_one_file=True, location="weights-file"),
    dict(size_threshold=0, all_tensors_to_one_file=True),
    dict(size_threshold=0, all_tensors_to_one_file=False, convert_attribute=False),
    dict(size_threshold=0, all_tensors_to_one_file=False, convert_attribute=True),
    dict(size_threshold=0, convert_attribute=True),
], ids=["threshold", "no_threshold", "one_file_location", "one_file_default_name",
        "file_per_tensor", "file_per_tensor_attributes", "attributes"])
def test_save_as_external_data_like_onnx(tmp_path, kw):
    ref, ours = saved_both(tmp_path, **kw)
    # The same tensors go out, to files of the same names (without a location, onnx names the
    # one file with a UUID, onnx_light after the model: model.onnx.data).
    if kw.get("all_tensors_to_one_file", True) and not kw.get("location"):
        out = [loc is not None for _, loc in locations(ref / "model.onnx")]
        assert [loc is not None for _, loc in locations(ours / "model.onnx")] == out
        assert {loc for _, loc in locations(ours / "model.onnx") if loc} <= {"model.onnx.data"}
        assert len(os.listdir(ours)) == len(os.listdir(ref)) == 1 + any(out)
    else:
        assert locations(ours / "model.onnx") == locations(ref / "model.onnx")
        assert sorted(os.listdir(ours)) == sorted(os.listdir(ref))
    if kw.get("location"):
        assert (ours / kw["location"]).is_file()
    for d in (ref, ours):
        # Each package reads what either wrote.
        assert_values(ol.load(d / "model.onnx"))
        m = onnx.load(str(d / "model.onnx"))
        assert np.array_equal(onnx_to_array(m.graph.initializer[0]), INIT)
        assert np.array_equal(onnx_to_array(m.graph.node[0].attribute[0].t), ATTR)
        # Not loaded: to_array reads the file given the base directory, as onnx's does.
        lazy = ol.load(d / "model.onnx", load_external_data=False)
        assert_values(lazy, str(d))
        attr = lazy.graph.node[0].attribute[0].t
        assert attr.HasField("data_location") == bool(kw.get("convert_attribute") and kw["size_threshold"] == 0)


def test_convert_back_from_external_data(tmp_path):
    """onnx's convert_model_from_external_data: a loaded model saved without external data has
    its tensors inline, no external_data entries, data_location DEFAULT."""
    _, ours = saved_both(tmp_path, size_threshold=0, all_tensors_to_one_file=True, location="w.bin",
                         convert_attribute=True)
    ol.save(ol.load(ours / "model.onnx"), tmp_path / "inline.onnx")
    m = onnx.load(str(tmp_path / "inline.onnx"), load_external_data=False)
    for t in (m.graph.initializer[0], m.graph.node[0].attribute[0].t):
        assert len(t.external_data) == 0 and t.data_location == onnx.TensorProto.DEFAULT
    assert np.array_equal(onnx_to_array(m.graph.initializer[0]), INIT)


def test_save_without_loading_external_data(tmp_path):
    """A model loaded without its external data is saved again with external data to the same
    path: the tensors are read from the files being replaced, and the result loads."""
    _, ours = saved_both(tmp_path, size_threshold=0)
    path = ours / "model.onnx"
    m = ol.load(path, load_external_data=False)
    ol.save(m, path, save_as_external_data=True, size_threshold=0)
    assert_values(ol.load(path))
    assert np.array_equal(onnx_to_array(onnx.load(str(path)).graph.initializer[0]), INIT)


def test_save_external_data_multiple_times(tmp_path):
    """onnx's test_save_model_with_external_data_multiple_times: first only the large tensor
    goes out, then (from a model whose large tensor was not loaded) the small one too."""
    large = np.random.default_rng(0).random((10, 60, 100)).astype(np.float32)
    small = np.array((200, 300), np.int64)
    g = helper.make_graph([helper.make_node("Reshape", ["X", "Shape"], ["Y"])], "t",
                          [helper.make_tensor_value_info("X", 1, large.shape)],
                          [helper.make_tensor_value_info("Y", 1, [200, 300])],
                          [from_array(large, "X"), from_array(small, "Shape")])
    m = ol.from_onnx(helper.make_model(g))
    path = tmp_path / "model.onnx"
    kw = dict(save_as_external_data=True, all_tensors_to_one_file=False, convert_attribute=True)
    ol.save(m, path, size_threshold=1024, **kw)
    lazy = ol.load(path, load_external_data=False)
    assert lazy.graph.initializer[0].HasField("data_location")
    assert not lazy.graph.initializer[1].HasField("data_location")
    assert np.array_equal(nh.to_array(lazy.graph.initializer[0], str(tmp_path)), large)
    ol.save(lazy, path, size_threshold=0, **kw)
    again = onnx.load(str(path), load_external_data=False)
    assert all(t.HasField("data_location") for t in again.graph.initializer)
    assert np.array_equal(onnx_to_array(again.graph.initializer[0], str(tmp_path)), large)
    assert np.array_equal(onnx_to_array(again.graph.initializer[1], str(tmp_path)), small)
    assert np.array_equal(nh.to_array(ol.load(path).graph.initializer[1]), small)


def test_raw_data_is_replaced_by_the_external_data(tmp_path):
    _, ours = saved_both(tmp_path, size_threshold=0)
    m = ol.load(ours / "model.onnx", load_external_data=False)
    m.graph.initializer[0].raw_data = b"dummy_raw_data"
    ol.load_external_data_for_model(m, ours)
    assert m.graph.initializer[0].raw_data == from_array(INIT).raw_data


@pytest.mark.parametrize("location", ["../../file.bin", "../test/../file.bin", "//file.bin", "/etc/passwd"])
def test_locations_outside_the_model_directory_are_refused(tmp_path, location):
    d = tmp_path / "a" / "b"
    d.mkdir(parents=True)
    (tmp_path / "file.bin").write_bytes(from_array(INIT).raw_data)
    t = from_array(INIT, "input_value")
    set_external_data(t, location=location)
    t.ClearField("raw_data")
    t.data_location = onnx.TensorProto.EXTERNAL
    g = helper.make_graph([], "g", [], [], initializer=[t])
    onnx.save_model(helper.make_model(g), str(d / "model.onnx"))
    with pytest.raises(onnx.checker.ValidationError):
        checker.check_model(str(d / "model.onnx"))
    with pytest.raises(ol.PathRefusedError, match="file.bin|passwd"):
        ol.load(d / "model.onnx")
    m = ol.load(d / "model.onnx", load_external_data=False)
    with pytest.raises(ol.PathRefusedError):
        ol.load_external_data_for_model(m, d)
    with pytest.raises(ol.PathRefusedError):
        nh.to_array(m.graph.initializer[0], str(d))


def test_save_never_writes_outside_the_model_directory(tmp_path):
    """onnx refuses these save locations; onnx_light's save refuses them too (`..` with
    PathRefusedError, an absolute one with onnx's ValueError), and write_model reduces an absolute
    location to its file name, written beside the model (as its C++ library does)."""
    (tmp_path / "save_copy").mkdir()
    (tmp_path / "invalid_external_data").mkdir()
    m = ol.from_onnx(small_model())
    path = tmp_path / "save_copy" / "model.onnx"
    with pytest.raises(ol.PathRefusedError):
        ol.save(m, path, save_as_external_data=True, size_threshold=0,
                location="../invalid_external_data/tensors.bin")
    assert os.listdir(tmp_path / "save_copy") == []
    absolute = str(tmp_path / "invalid_external_data" / "tensors.bin")
    with pytest.raises(ValueError):
        onnx.save_model(small_model(), str(tmp_path / "save_copy" / "ref.onnx"), save_as_external_data=True,
                        size_threshold=0, location=absolute)
    with pytest.raises(ValueError, match="relative path"):
        ol.save(m, path, save_as_external_data=True, size_threshold=0, location=absolute)
    ol.write_model(m, path, save_as_external_data=True, size_threshold=0, location=absolute)
    assert os.listdir(tmp_path / "invalid_external_data") == []
    assert sorted(os.listdir(tmp_path / "save_copy")) == ["model.onnx", "tensors.bin"]
    assert [loc for _, loc in locations(path)] == ["tensors.bin", None]
    assert_values(ol.load(path))


def test_functions_and_subgraphs(tmp_path):
    """onnx's TestFunctionsAndSubGraphs: Constant tensors inside a function and inside the
    branches of an If go out with convert_attribute."""
    big = from_array(np.arange(4096).astype(np.float32), "tensor")
    m = parser.parse_model("""
       <ir_version: 7,  opset_import: ["": 15, "local": 1]>
       agraph (bool flag, float[N] X) => (float[N] Y)
        {
          Y = If (flag) <
            then_branch = g1 () => (float[N] Y_then) {
                B = Constant <value = float[1] {0.0}> ()
                Y_then = local.add (X)
            },
            else_branch = g2 () => (float[N] Y_else) {
                C = Constant <value = float[1] {1.0}> ()
                Y_else = Add (X, C)
            }
          >
        }
        <opset_import: ["" : 15],  domain: "local">
        add (float[N] X) => (float[N] Y) {
          C = Constant <value = float[1] {1.0}> ()
          Y = Add (X, C)
       }
    """)
    nodes = [m.functions[0].node[0]] + [a.g.node[0] for a in m.graph.node[0].attribute]
    for n in nodes:
        n.attribute[0].t.CopyFrom(big)
    ol.save(ol.from_onnx(m), tmp_path / "model.onnx", save_as_external_data=True, size_threshold=0,
            convert_attribute=True)
    lazy = onnx.load(str(tmp_path / "model.onnx"), load_external_data=False)
    saved = [lazy.functions[0].node[0]] + [a.g.node[0] for a in lazy.graph.node[0].attribute]
    for n in saved:
        assert n.attribute[0].t.data_location == onnx.TensorProto.EXTERNAL
    full = onnx.load(str(tmp_path / "model.onnx"))
    for n in [full.functions[0].node[0]] + [a.g.node[0] for a in full.graph.node[0].attribute]:
        assert np.array_equal(onnx_to_array(n.attribute[0].t), onnx_to_array(big))
    ours = ol.load(tmp_path / "model.onnx")
    assert ours.SerializeToString() == full.SerializeToString()


def saved_with_one_data_file(d):
    model = parser.parse_model("""
        <ir_version: 7, opset_import: ["": 17]>
        agraph (float[100, 100] input) => (float[100, 100] output) {
            output = Identity(input)
        }
    """)
    model.graph.initializer.append(from_array(np.ones((100, 100), np.float32), name="weight"))
    path = os.path.join(d, "model.onnx")
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="data.bin", size_threshold=1024)
    return path


@pytest.mark.skipif(os.name == "nt", reason="symbolic links need privileges on Windows")
def test_symlinks_out_of_the_model_directory_are_refused(tmp_path):
    d = tmp_path / "model_dir"
    d.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    path = saved_with_one_data_file(str(d))
    shutil.move(str(d / "data.bin"), str(outside / "data.bin"))
    os.symlink(outside / "data.bin", d / "data.bin")
    with pytest.raises(checker.ValidationError):
        onnx.load(path)
    with pytest.raises(ol.PathRefusedError):
        ol.load(path)
    m = ol.load(path, load_external_data=False)
    with pytest.raises(ol.PathRefusedError):
        ol.load_external_data_for_model(m, d)
    # A directory on the way that is a link out of the model's directory.
    os.remove(d / "data.bin")
    (d / "sub").symlink_to(outside, target_is_directory=True)
    m.graph.initializer[0].external_data[0].value = "sub/data.bin"
    with pytest.raises(ol.PathRefusedError):
        ol.load_external_data_for_model(m, d)


@pytest.mark.skipif(os.name == "nt", reason="symbolic links need privileges on Windows")
def test_save_never_writes_through_a_symlink(tmp_path):
    sensitive = tmp_path / "sensitive.txt"
    sensitive.write_text("SENSITIVE DATA")
    d = tmp_path / "m"
    d.mkdir()
    path = saved_with_one_data_file(str(d))
    os.remove(d / "data.bin")
    os.symlink(sensitive, d / "data.bin")
    m = ol.from_onnx(onnx.load(path, load_external_data=False))
    m.graph.initializer[0].ClearField("data_location")
    del m.graph.initializer[0].external_data[:]
    m.graph.initializer[0].raw_data = np.ones((100, 100), np.float32).tobytes()
    try:
        ol.save(m, path, save_as_external_data=True, location="data.bin", size_threshold=1024)
    except ol.PathRefusedError:
        pass
    assert sensitive.read_text() == "SENSITIVE DATA"


@pytest.mark.parametrize("entries,match", [
    ({"location": "weights.bin", "offset": "-1"}, "offset"),
    ({"location": "weights.bin", "length": "-100"}, "length"),
    ({"location": "weights.bin", "offset": "abc"}, "offset"),
    ({"location": "weights.bin", "length": "not_a_number"}, "length"),
    ({"location": "weights.bin", "offset": "64"}, "offset|past|end|exceed"),
    ({"location": "weights.bin", "length": "16000"}, "length|past|end|exceed"),
])
def test_bad_offsets_and_lengths(tmp_path, entries, match):
    (tmp_path / "weights.bin").write_bytes(np.ones(4, np.float32).tobytes())
    t = ol.TensorProto(name="w", data_type=ol.TensorProto.FLOAT, dims=[4],
                       data_location=ol.TensorProto.EXTERNAL)
    for k, v in entries.items():
        t.external_data.add(key=k, value=v)
    m = ol.ModelProto(ir_version=10)
    m.graph.initializer.append(t)
    with pytest.raises(ol.ExternalDataError, match=match):
        ol.load_external_data_for_model(m, tmp_path)
    with pytest.raises(ValueError):
        ol.load_from_string(m.SerializeToString(), base_dir=tmp_path)


def test_zero_offset_and_length_and_extra_keys(tmp_path):
    """offset 0 / length 0 are valid; keys onnx does not know are ignored (onnx warns)."""
    (tmp_path / "weights.bin").write_bytes(b"")
    t = ol.TensorProto(name="w", data_type=ol.TensorProto.FLOAT, dims=[0],
                       data_location=ol.TensorProto.EXTERNAL)
    for k, v in {"location": "weights.bin", "offset": "0", "length": "0", "__class__": "x"}.items():
        t.external_data.add(key=k, value=v)
    m = ol.ModelProto(ir_version=10)
    m.graph.initializer.append(t)
    ol.load_external_data_for_model(m, tmp_path)
    assert nh.to_array(m.graph.initializer[0]).shape == (0,)


def test_load_from_string_loads_external_data_only_with_a_base_dir(tmp_path):
    """Bytes have no directory: without base_dir the references stay as they are (no file is
    read, as onnx.load_from_string), with it the data is loaded; any keyword set or not."""
    value = np.arange(6, dtype=np.float32)
    (tmp_path / "weights.bin").write_bytes(value.tobytes())
    t = ol.TensorProto(name="w", data_type=ol.TensorProto.FLOAT, dims=[6],
                       data_location=ol.TensorProto.EXTERNAL)
    t.external_data.add(key="location", value="weights.bin")
    m = ol.ModelProto(ir_version=10)
    m.graph.initializer.append(t)
    data = m.SerializeToString()
    for kw in ({}, {"num_threads": 1}, {"alignment": 64}):
        kept = ol.load_from_string(data, **kw)
        assert kept.SerializeToString() == data
        assert kept.graph.initializer[0].data_location == ol.TensorProto.EXTERNAL
        assert not kept.graph.initializer[0].HasField("raw_data")
        loaded = ol.load_from_string(data, base_dir=tmp_path, **kw)
        assert loaded.graph.initializer[0].data_location == ol.TensorProto.DEFAULT
        np.testing.assert_array_equal(nh.to_array(loaded.graph.initializer[0]), value)
        assert onnx.load_from_string(data).SerializeToString() == data
    # A missing file is an error only when there is a directory to look in.
    (tmp_path / "weights.bin").unlink()
    assert ol.load_from_string(data).SerializeToString() == data
    with pytest.raises(ol.ExternalDataError):
        ol.load_from_string(data, base_dir=tmp_path)


@pytest.mark.parametrize("external", [False, True])
@pytest.mark.parametrize("no_copy", [False, True])
def test_large_saves_read_back_by_onnx(tmp_path, external, no_copy):
    """Saves of more than 32 MiB of weights (written past the page cache where the file system
    allows, docs/design.md "Encoding"): onnx reads the same values, and a save of the model
    loaded back (copied, or mapped with no_copy) writes the same bytes again."""
    rng = np.random.default_rng(7)
    # Sizes that are not multiples of 512 or 4096, so every payload has unaligned ends.
    weights = [rng.standard_normal(n).astype(np.float32) for n in (3_000_001, 5_200_003, 1_000, 2_500_000)]
    graph = helper.make_graph(
        [helper.make_node("Identity", [f"w{i}"], [f"y{i}"]) for i in range(len(weights))],
        "large",
        [],
        [helper.make_tensor_value_info(f"y{i}", onnx.TensorProto.FLOAT, [w.size]) for i, w in enumerate(weights)],
        [from_array(w, f"w{i}") for i, w in enumerate(weights)],
    )
    m = ol.from_onnx(helper.make_model(graph))
    first = tmp_path / "first"
    first.mkdir()
    ol.save(m, str(first / "m.onnx"), save_as_external_data=external)
    back = onnx.load(str(first / "m.onnx"))
    for i, w in enumerate(weights):
        np.testing.assert_array_equal(onnx_to_array(back.graph.initializer[i]), w)
    again = tmp_path / "again"
    again.mkdir()
    ol.save(ol.load(str(first / "m.onnx"), no_copy=no_copy), str(again / "m.onnx"), save_as_external_data=external)
    names = sorted(os.listdir(first))
    assert names == sorted(os.listdir(again))
    for name in names:
        assert (first / name).read_bytes() == (again / name).read_bytes(), name
