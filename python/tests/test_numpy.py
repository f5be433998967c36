"""numpy_helper: to_array equals onnx's for every tensor of the test data and every data type,
zero-copy views that outlive the model, from_array equals onnx's, DLPack."""
import gc

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import numpy_helper as onh

import onnx_light as ol
from backend_data import models, protos
from onnx_light import numpy_helper as nh


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype == object:
        assert a.tolist() == b.tolist()
    else:
        assert a.tobytes() == b.tobytes()


def all_tensors(m):
    out = list(m.graph.initializer)
    for n in m.graph.node:
        for a in n.attribute:
            if a.HasField("t"):
                out.append(a.t)
    return out


def test_every_tensor_of_the_test_data():
    count = 0
    for path in models():
        ours = ol.load(path, load_external_data=False)
        ref = onnx.load(path, load_external_data=False)
        for a, b in zip(all_tensors(ours), all_tensors(ref)):
            same(nh.to_array(a), onh.to_array(b))
            count += 1
    for path, kind in protos():
        if kind != "TensorProto":
            continue
        data = path.read_bytes()
        same(nh.to_array(ol.TensorProto.FromString(data)), onh.to_array(onnx.TensorProto.FromString(data)))
        count += 1
    assert count > 500


DTYPES = [
    np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.uint16, np.int32,
    np.uint32, np.int64, np.uint64, np.bool_, np.complex64, np.complex128,
    ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
    ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e8m0fnu,
    ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.float4_e2m1fn, ml_dtypes.int2, ml_dtypes.uint2,
    ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn,
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(0,), (1,), (3, 5), (2, 3, 7)])
def test_every_data_type_raw_and_from_array(dtype, shape):
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype=np.uint8)
    x = raw.view(dtype).reshape(shape) if np.dtype(dtype).itemsize else raw
    if np.dtype(dtype) == np.bool_:
        x = (raw % 2).astype(np.bool_).reshape(shape)
    if np.dtype(dtype) in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4), np.dtype(ml_dtypes.float4_e2m1fn)):
        x = (raw & 0x0F).view(dtype).reshape(shape)
    if np.dtype(dtype) in (np.dtype(ml_dtypes.int2), np.dtype(ml_dtypes.uint2)):
        x = (raw & 0x03).view(dtype).reshape(shape)
    if np.dtype(dtype) in (np.dtype(ml_dtypes.float6_e2m3fn), np.dtype(ml_dtypes.float6_e3m2fn)):
        x = (raw & 0x3F).view(dtype).reshape(shape)
    ref = onh.from_array(x, name="x")
    ours = nh.from_array(x, name="x")
    assert ours.SerializeToString() == ref.SerializeToString()
    same(nh.to_array(ours), onh.to_array(ref))
    parsed = ol.TensorProto.FromString(ref.SerializeToString())
    same(nh.to_array(parsed), onh.to_array(ref))


@pytest.mark.parametrize("data_type", [
    onnx.TensorProto.FLOAT, onnx.TensorProto.INT32, onnx.TensorProto.INT64, onnx.TensorProto.DOUBLE,
    onnx.TensorProto.UINT64, onnx.TensorProto.UINT32, onnx.TensorProto.FLOAT16,
    onnx.TensorProto.BFLOAT16, onnx.TensorProto.BOOL, onnx.TensorProto.INT8, onnx.TensorProto.UINT8,
    onnx.TensorProto.INT16, onnx.TensorProto.UINT16, onnx.TensorProto.FLOAT8E4M3FN,
    onnx.TensorProto.FLOAT8E5M2, onnx.TensorProto.INT4, onnx.TensorProto.UINT4,
    onnx.TensorProto.INT2, onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128,
    onnx.TensorProto.FLOAT6E2M3, onnx.TensorProto.FLOAT8E8M0, onnx.TensorProto.FLOAT4E2M1,
])
def test_typed_fields(data_type):
    """Tensors whose values are in float_data/int32_data/... (as onnx.helper.make_tensor writes them)."""
    np_dtype = onnx.helper.tensor_dtype_to_np_dtype(data_type)
    rng = np.random.default_rng(data_type)
    vals = rng.integers(0, 4, size=6)
    if np_dtype.kind == "c":
        vals = vals.astype(np_dtype)
    ref = onnx.helper.make_tensor("t", data_type, [2, 3], vals.astype(np_dtype) if np_dtype.kind != "c" else vals)
    ours = ol.TensorProto.FromString(ref.SerializeToString())
    assert not ours.HasField("raw_data")
    same(nh.to_array(ours), onh.to_array(ref))


def test_strings():
    ref = onh.from_array(np.array(["a", "bc", "é"], dtype=object), "s")
    ours = nh.from_array(np.array(["a", "bc", "é"], dtype=object), "s")
    assert ours.SerializeToString() == ref.SerializeToString()
    same(nh.to_array(ours), onh.to_array(ref))


def test_zero_copy_view_outlives_the_model(tmp_path):
    x = np.arange(100000, dtype=np.float32).reshape(100, 1000)
    m = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], [], [onh.from_array(x, "w")]))
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    for no_copy in (False, True):
        model = ol.load(p, no_copy=no_copy)
        t = model.graph.initializer[0]
        a = nh.to_array(t)
        b = nh.to_array(t)
        # The same bytes, not a copy.
        assert np.shares_memory(a, b)
        assert not a.flags.writeable
        with pytest.raises(ValueError):
            a[0, 0] = 1
        # Changing the tensor afterwards never changes the array.
        t.raw_data = b"\0" * 400000
        assert np.array_equal(a, x)
        del model, t
        gc.collect()
        assert np.array_equal(a, x) and np.array_equal(b, x)


def test_external_data_not_loaded(tmp_path):
    x = np.arange(4096, dtype=np.float32)
    m = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], [], [onh.from_array(x, "w")]))
    onnx.save(m, tmp_path / "m.onnx", save_as_external_data=True, location="w.bin", size_threshold=0)
    ours = ol.load(tmp_path / "m.onnx", load_external_data=False)
    t = ours.graph.initializer[0]
    assert t.data_location == ol.TensorProto.EXTERNAL
    same(nh.to_array(t, base_dir=str(tmp_path)), x)
    with pytest.raises(ol.PathRefusedError):
        bad = ol.TensorProto()
        bad.CopyFrom(t)
        bad.external_data[0].value = "../w.bin"
        nh.to_array(bad, base_dir=str(tmp_path))


def test_dlpack():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = nh.from_array(x)
    y = np.from_dlpack(t)
    assert np.array_equal(x, y) and not y.flags.writeable
    assert np.shares_memory(y, nh.to_array(t))
    del t
    gc.collect()
    assert np.array_equal(x, y)


# ---- sequences, maps, optionals and the dtype helpers, against onnx.numpy_helper ----------


def _bytes_equal(theirs, ours):
    assert ours.SerializeToString() == theirs.SerializeToString()


def _outcome(f):
    try:
        return ("ok", f())
    except Exception as e:  # noqa: BLE001 - the exception type is what is compared
        return (type(e), None)


def _sample(dtype, n=5):
    rng = np.random.default_rng(3)
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, n).astype(np.bool_)
    if np.dtype(dtype).kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    if np.dtype(dtype).kind in "iu" or dtype in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2):
        return rng.integers(0, 2, n).astype(dtype)
    return rng.standard_normal(n).astype(np.float32).astype(dtype)


def _same_values(theirs, ours):
    """Nested lists/dicts of arrays: equal structure, keys, dtypes and bytes."""
    assert type(theirs) is type(ours)
    if isinstance(theirs, list):
        assert len(theirs) == len(ours)
        for a, b in zip(theirs, ours):
            _same_values(a, b)
    elif isinstance(theirs, dict):
        assert list(theirs) == list(ours)
        for k in theirs:
            _same_values(theirs[k], ours[k])
    elif theirs is None:
        assert ours is None
    else:
        same(np.asarray(ours), np.asarray(theirs))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_from_list_to_list_every_data_type(dtype):
    values = [_sample(dtype), _sample(dtype, 0), _sample(dtype, 3).reshape(1, 3)]
    theirs = onh.from_list(values, name="seq")
    ours = nh.from_list(values, name="seq")
    _bytes_equal(theirs, ours)
    _same_values(onh.to_list(theirs), nh.to_list(ours))
    # The onnx package's messages are accepted too.
    _same_values(onh.to_list(theirs), nh.to_list(theirs))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_from_optional_to_optional_every_data_type(dtype):
    value = _sample(dtype)
    theirs = onh.from_optional(value, name="opt")
    ours = nh.from_optional(value, name="opt")
    _bytes_equal(theirs, ours)
    _same_values(onh.to_optional(theirs), nh.to_optional(ours))


KEY_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("key_type", KEY_TYPES + [int], ids=lambda d: np.dtype(d).name)
def test_from_dict_to_dict_every_key_type(key_type):
    d = {key_type(k): _sample(np.float32, 2) * k for k in (3, 1, 2)}
    theirs = onh.from_dict(d, name="m")
    ours = nh.from_dict(d, name="m")
    _bytes_equal(theirs, ours)
    _same_values(onh.to_dict(theirs), nh.to_dict(ours))


def test_nested_sequences_maps_optionals():
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    cases = [
        [[a, a], [a]],
        [{1: a}, {2: a, 3: a}],
        {np.int64(1): a, np.int64(2): a},
        [[]],
    ]
    for value in cases:
        maker = "from_dict" if isinstance(value, dict) else "from_list"
        theirs = getattr(onh, maker)(value)
        ours = getattr(nh, maker)(value)
        _bytes_equal(theirs, ours)
        reader = "to_dict" if isinstance(value, dict) else "to_list"
        _same_values(getattr(onh, reader)(theirs), getattr(nh, reader)(ours))
        t_opt, o_opt = onh.from_optional(value), nh.from_optional(value)
        _bytes_equal(t_opt, o_opt)
        _same_values(onh.to_optional(t_opt), nh.to_optional(o_opt))
    for dtype in (ol.SequenceProto.TENSOR, ol.SequenceProto.SEQUENCE, ol.SequenceProto.MAP):
        _bytes_equal(onh.from_list([], dtype=dtype), nh.from_list([], dtype=dtype))
    for kind in (0, 1, 3, 4, 5):
        t_opt, o_opt = onh.from_optional(None, dtype=kind), nh.from_optional(None, dtype=kind)
        _bytes_equal(t_opt, o_opt)
        assert nh.to_optional(o_opt) is None if kind == 0 else True
    _bytes_equal(onh.from_optional(None), nh.from_optional(None))
    assert nh.to_optional(nh.from_optional(None)) is None
    # An optional of an optional, read back.
    inner = onh.from_optional(a)
    outer = onnx.OptionalProto(elem_type=5, optional_value=inner)
    _same_values(onh.to_optional(outer), nh.to_optional(ol.OptionalProto.FromString(outer.SerializeToString())))


BAD = [
    ("from_list", ([np.array(1), [1]],), {}),  # mixed element types
    ("from_list", ([1], None, 99), {}),  # unknown element kind
    ("from_list", ([1], None, 2), {}),  # SPARSE_TENSOR is not built
    ("from_dict", ({},), {}),
    ("from_dict", ({1: np.array(1), "b": np.array(2)},), {}),
    ("from_dict", ({1: np.array(1.0), 2: np.array(1)},), {}),
    ("from_dict", ({1.5: np.array(1)},), {}),
    ("from_dict", ({True: np.array(1)},), {}),
    ("from_dict", ({"a": np.array(1)},), {}),
    ("from_dict", ({1: [np.array(1)]},), {}),  # values that are lists
    ("from_dict", ({1: {2: np.array(1)}},), {}),
    ("from_optional", (None, None, 42), {}),
    ("from_optional", (np.array(1), None, 2), {}),
    ("from_optional", (np.array(1), None, 5), {}),
]


@pytest.mark.parametrize("function, args, kwargs", BAD, ids=lambda x: repr(x)[:40])
def test_bad_input_raises_the_same(function, args, kwargs):
    theirs = _outcome(lambda: getattr(onh, function)(*args, **kwargs))
    ours = _outcome(lambda: getattr(nh, function)(*args, **kwargs))
    assert theirs[0] != "ok" and ours[0] == theirs[0], (theirs, ours)


def test_bad_messages_raise_the_same():
    cases = [
        onnx.SequenceProto(elem_type=0),
        onnx.SequenceProto(elem_type=5),
        onnx.OptionalProto(elem_type=9),
        onnx.MapProto(key_type=7, keys=[1, 2], values=onh.from_list([np.array(1)])),
    ]
    readers = {"SequenceProto": "to_list", "OptionalProto": "to_optional", "MapProto": "to_dict"}
    for msg in cases:
        reader = readers[type(msg).__name__]
        theirs = _outcome(lambda: getattr(onh, reader)(msg))
        ours = _outcome(lambda: getattr(nh, reader)(getattr(ol, type(msg).__name__).FromString(msg.SerializeToString())))
        assert theirs[0] is not None and theirs[0] != "ok" and ours[0] == theirs[0], msg


SATURATE_TARGETS = [
    np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.float16, ml_dtypes.bfloat16,
    ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
    ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e8m0fnu, ml_dtypes.int4, ml_dtypes.uint4,
    ml_dtypes.int2, ml_dtypes.uint2, ml_dtypes.float4_e2m1fn, ml_dtypes.float6_e2m3fn,
    ml_dtypes.float6_e3m2fn,
]


@pytest.mark.parametrize("dtype", SATURATE_TARGETS, ids=lambda d: np.dtype(d).name)
def test_saturate_cast(dtype):
    x = np.array([-1e10, -300.5, -2.5, -0.5, 0, 0.5, 1.5, 2.5, 7.49, 1e10, np.inf, -np.inf],
                 dtype=np.float32)
    with np.errstate(all="ignore"):
        same(nh.saturate_cast(x, dtype), onh.saturate_cast(x, dtype))


@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
def test_to_float8e8m0(saturate, round_mode):
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0, 0x80000000, 1, 0x7F7FFFFF, 0x7F000000, 0x7F400000, 0x7F400001, 0x7F800000,
                      0x7FC00000, 0xFF800000, 0x00400000, 0x00600000, 0x3FC00000, 0x3FA00000],
                     dtype=np.uint32)
    x = np.concatenate([bits, edges]).view(np.float32)
    same(nh.to_float8e8m0(x, saturate, round_mode), onh.to_float8e8m0(x, saturate, round_mode))
    same(nh.to_float8e8m0([1.5, 3.0]), onh.to_float8e8m0([1.5, 3.0]))


def test_to_float8e8m0_bad_mode():
    with pytest.raises(ValueError):
        onh.to_float8e8m0(np.ones(2, np.float32), round_mode="odd")
    with pytest.raises(ValueError):
        nh.to_float8e8m0(np.ones(2, np.float32), round_mode="odd")


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16,
                                   np.int32, np.int64])
def test_create_random_int(dtype):
    for seed in (1, 7):
        same(nh.create_random_int((3, 4), dtype, seed), onh.create_random_int((3, 4), dtype, seed))
    same(nh.create_random_int((5,), np.dtype(dtype)), onh.create_random_int((5,), np.dtype(dtype)))


def test_create_random_int_rejects_other_types():
    for dtype in (np.float32, np.bool_):
        with pytest.raises(TypeError):
            onh.create_random_int((2,), dtype)
        with pytest.raises(TypeError):
            nh.create_random_int((2,), dtype)


@pytest.mark.parametrize("dtype", [np.float32, ">f4", "<f8", ">i8", ">u2", np.int16, ">c8", np.bool_])
def test_tobytes_little_endian(dtype):
    a = np.arange(7).astype(dtype)
    assert nh.tobytes_little_endian(a) == onh.tobytes_little_endian(a)
    assert nh.tobytes_little_endian(a[::2]) == onh.tobytes_little_endian(a[::2])


def test_public_names_of_onnx_numpy_helper():
    import types

    theirs = {n for n, v in vars(onh).items() if not n.startswith("_")
              and isinstance(v, types.FunctionType) and v.__module__ == onh.__name__}
    missing = {n for n in theirs if not callable(getattr(nh, n, None))}
    assert not missing
    # Same parameters: names, kinds and defaults.
    import inspect

    def params(f):
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]

    for n in sorted(theirs):
        assert params(getattr(nh, n)) == params(getattr(onh, n)), n
