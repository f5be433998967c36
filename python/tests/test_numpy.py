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
