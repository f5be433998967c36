"""DLPack and parameter dictionaries against the official onnx package and NumPy.

- numpy.from_dlpack over onnx_light tensors of every numeric type NumPy has equals
  onnx.numpy_helper.to_array of the same tensors, shares their memory (the array's data pointer
  IS the tensor's raw_data pointer) and stays valid after the model is freed; the types NumPy
  cannot import (bfloat16, float8, 4- and 2-bit) are checked byte for byte through the capsule's
  DLPack struct;
- the capsule protocol: names, consumed capsules, the deleter runs exactly once (seen through
  the reference count of a NumPy array whose memory an onnx_light tensor borrows);
- params files written by `onnx-light params export` read back by an independent reader
  (`struct`, formats.md §4); params files written here load with `onnx-light params import`;
  every malformed file is refused with a clear message.

Uses target/release/libonnx_light.so (or $ONNXL_LIBRARY) and the CLI ($ONNX_LIGHT_BIN).
"""
import ctypes
import gc
import math
import os
import pathlib
import struct
import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import ROOT, binary

sys.path.insert(0, str(ROOT / "examples" / "python"))
import onnx_light_dlpack as dl  # noqa: E402

LIB = dl.Library(os.environ.get("ONNXL_LIBRARY") or str(ROOT / "target" / "release" / "libonnx_light.so"))

# formats.md §3: ONNX type -> (DLPack code, bits).
DL_TYPE = {
    TensorProto.FLOAT: (2, 32), TensorProto.UINT8: (1, 8), TensorProto.INT8: (0, 8),
    TensorProto.UINT16: (1, 16), TensorProto.INT16: (0, 16), TensorProto.INT32: (0, 32),
    TensorProto.INT64: (0, 64), TensorProto.BOOL: (6, 8), TensorProto.FLOAT16: (2, 16),
    TensorProto.DOUBLE: (2, 64), TensorProto.UINT32: (1, 32), TensorProto.UINT64: (1, 64),
    TensorProto.COMPLEX64: (5, 64), TensorProto.COMPLEX128: (5, 128), TensorProto.BFLOAT16: (4, 16),
    TensorProto.FLOAT8E4M3FN: (10, 8), TensorProto.FLOAT8E4M3FNUZ: (11, 8),
    TensorProto.FLOAT8E5M2: (12, 8), TensorProto.FLOAT8E5M2FNUZ: (13, 8), TensorProto.UINT4: (1, 4),
    TensorProto.INT4: (0, 4), TensorProto.FLOAT4E2M1: (17, 4), TensorProto.FLOAT8E8M0: (14, 8),
    TensorProto.UINT2: (1, 2), TensorProto.INT2: (0, 2),
}

NUMPY_TYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
               np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128]
BYTE_LEVEL_TYPES = [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
                    ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e8m0fnu,
                    ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.float4_e2m1fn, ml_dtypes.int2,
                    ml_dtypes.uint2]
SHAPES = [(3, 4), (7,), (), (2, 0, 3), (2, 3, 5)]


def sample(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, n).astype(np.bool_).reshape(shape)
    if dtype.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype).reshape(shape)
    if dtype.kind == "f":
        return rng.standard_normal(n).astype(dtype).reshape(shape)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True).reshape(shape)
    # ml_dtypes: small values every type can hold (float8_e8m0 holds powers of two only).
    if dtype == ml_dtypes.float8_e8m0fnu:
        return (2.0 ** rng.integers(-4, 5, n)).astype(dtype).reshape(shape)
    lo, hi = (0, 3) if dtype == ml_dtypes.uint2 else (-2, 1) if dtype == ml_dtypes.int2 else (-6, 6)
    if dtype in (ml_dtypes.uint4,):
        lo, hi = 0, 15
    if dtype in (ml_dtypes.int4,):
        lo, hi = -8, 7
    return rng.integers(lo, hi, n, endpoint=True).astype(np.float32).astype(dtype).reshape(shape)


def tensors_of(types):
    out = []
    for i, t in enumerate(types):
        for j, shape in enumerate(SHAPES):
            out.append(numpy_helper.from_array(sample(t, shape, 31 * i + j), f"t{i}_{j}"))
    return out


def model_of(tensors):
    graph = helper.make_graph([], "g", [], [], initializer=tensors)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def same(a, b):
    """Equal values, dtypes and shapes (bit patterns for floats, so NaN == NaN)."""
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    return a.tobytes() == b.tobytes()


# ---- numpy.from_dlpack --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["bytes", "file", "file-no-copy-mmap"])
def test_from_dlpack_every_numpy_type_zero_copy(tmp_path, mode):
    tensors = tensors_of(NUMPY_TYPES)
    model = model_of(tensors)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    if mode == "bytes":
        m = dl.Model.from_bytes(LIB, model.SerializeToString())
    else:
        m = dl.Model.load(LIB, path, no_copy=mode.endswith("mmap"), mmap=mode.endswith("mmap"))
    arrays = []
    for view, t in zip(m.initializers(), tensors):
        assert view.name == t.name
        expected = numpy_helper.to_array(t)
        ptr, n = view.raw_data_pointer()
        a = np.from_dlpack(view)
        assert same(a, expected), t.name
        if n:
            assert a.ctypes.data == ptr, f"{t.name}: copied"
            assert np.lib.array_utils.byte_bounds(a) == (ptr, ptr + n)
            assert not a.flags.writeable, "zero-copy exports are read-only"
        arrays.append((a, expected, ptr))
    m.close()
    # The arrays keep the bytes alive: overwrite freed memory, then compare again.
    gc.collect()
    junk = [np.full(1 << 16, 0xAB, np.uint8) for _ in range(64)]
    for a, expected, ptr in arrays:
        assert same(a, expected)
        if a.size:
            assert a.ctypes.data == ptr
    del junk
    with pytest.raises(ValueError, match="closed"):
        view.raw_data_pointer()


def managed_of(capsule):
    address, versioned = dl.capsule_pointer(capsule)
    cls = dl.DLManagedTensorVersioned if versioned else dl.DLManagedTensor
    return cls.from_address(address), versioned


def unpack(data, bits, n):
    """DLPack's packed sub-byte layout: element i at bits i*bits.. (low bits first)."""
    mask = (1 << bits) - 1
    return np.array([(data[i * bits // 8] >> (i * bits % 8)) & mask for i in range(n)], np.uint8)


def test_byte_level_types_through_the_capsule():
    tensors = tensors_of(BYTE_LEVEL_TYPES)
    m = dl.Model.from_bytes(LIB, model_of(tensors).SerializeToString())
    for view, t in zip(m.initializers(), tensors):
        ptr, n = view.raw_data_pointer()
        capsule = view.__dlpack__(max_version=(1, 1))
        managed, versioned = managed_of(capsule)
        assert versioned
        assert (managed.version.major, managed.version.minor) == (1, 1)
        assert managed.flags == dl.DLPACK_FLAG_BITMASK_READ_ONLY
        d = managed.dl_tensor
        assert (d.device.device_type, d.device.device_id) == (1, 0)
        assert (d.dtype.code, d.dtype.bits, d.dtype.lanes) == (*DL_TYPE[t.data_type], 1), t.name
        assert tuple(d.shape[i] for i in range(d.ndim)) == tuple(t.dims)
        assert not d.strides and d.byte_offset == 0
        assert (d.data or 0) == (ptr if n else 0), f"{t.name}: copied"
        data = ctypes.string_at(d.data, n) if n else b""
        assert data == t.raw_data, t.name
        expected = numpy_helper.to_array(t)
        bits = d.dtype.bits
        if bits >= 8:
            assert same(np.frombuffer(data, expected.dtype).reshape(expected.shape), expected), t.name
        else:
            mask = (1 << bits) - 1
            codes = expected.view(np.uint8).reshape(-1) & mask
            assert np.array_equal(unpack(data, bits, expected.size), codes), t.name
        del capsule  # not consumed: the capsule's destructor calls the deleter
    m.close()


def test_typed_fields_copy_or_refuse():
    t = helper.make_tensor("f", TensorProto.FLOAT, [2, 3], [1.0, -2.0, 3.5, 4.0, 5.0, 6.0])
    i = TensorProto(name="h", data_type=TensorProto.FLOAT16, dims=[3])
    i.int32_data.extend(np.array([1, 2.5, -3], np.float16).view(np.uint16).astype(np.int32).tolist())
    m = dl.Model.from_bytes(LIB, model_of([t, i]).SerializeToString())
    views = list(m.initializers())
    for view, proto in zip(views, [t, i]):
        a = np.from_dlpack(view)  # copy=None: copied because there is no raw_data to share
        assert same(a, numpy_helper.to_array(proto))
        assert a.flags.writeable, "a private copy"
        with pytest.raises(BufferError, match="ONNXL_STATUS_UNSUPPORTED.*(float_data|int32_data)"):
            np.from_dlpack(view, copy=False)
    # copy=True on raw data: a writable copy at another address.
    raw = numpy_helper.from_array(np.arange(6, dtype=np.int32), "r")
    m2 = dl.Model.from_bytes(LIB, model_of([raw]).SerializeToString())
    view = next(m2.initializers())
    a = np.from_dlpack(view, copy=True)
    assert a.flags.writeable and a.ctypes.data != view.raw_data_pointer()[0]
    a[0] = 99
    assert np.from_dlpack(view)[0] == 0
    m.close()
    m2.close()


def test_capsule_protocol_and_deleter_runs_once():
    api = ctypes.pythonapi
    src = np.arange(1000, dtype=np.float64)
    src_ptr = src.ctypes.data
    # (Reference counts are read into variables first: pytest's assertion rewriting keeps the
    # intermediate values of an assert expression alive while it is evaluated.)
    base = sys.getrefcount(src)
    # An onnx_light tensor borrowing src's memory through NumPy's own DLPack export.
    t = dl.Tensor.from_dlpack(LIB, src, name="src")
    view = t.view()
    assert view.raw_data_pointer() == (src_ptr, src.nbytes), "borrowed, not copied"
    refs = sys.getrefcount(src)
    assert refs == base + 1, "NumPy's managed tensor holds src"

    legacy = view.__dlpack__()
    assert api.PyCapsule_IsValid(legacy, dl._name(dl.LEGACY_NAME))
    assert not api.PyCapsule_IsValid(legacy, dl._name(dl.VERSIONED_NAME))
    versioned = view.__dlpack__(max_version=(1, 0))
    assert api.PyCapsule_IsValid(versioned, dl._name(dl.VERSIONED_NAME))
    assert view.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError):
        view.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        view.__dlpack__(stream=1)

    t.close()  # the capsules (our exports) still hold NumPy's tensor
    refs = sys.getrefcount(src)
    assert refs == base + 1

    # A consumer takes the versioned tensor: renames the capsule, calls the deleter itself.
    address, _ = dl.capsule_pointer(versioned)
    api.PyCapsule_SetName(versioned, dl._name(dl._USED_VERSIONED))
    dl._delete_versioned(address)
    refs = sys.getrefcount(src)
    assert refs == base + 1, "the legacy capsule still holds it"
    del versioned
    gc.collect()
    # The unconsumed legacy capsule dies: its destructor calls the deleter, the last owner goes,
    # NumPy's deleter runs, src's reference is returned (exactly once: not below base).
    del legacy
    gc.collect()
    refs = sys.getrefcount(src)
    assert refs == base

    # Through numpy.from_dlpack, the same chain ends when the array goes.
    t = dl.Tensor.from_dlpack(LIB, src)
    a = np.from_dlpack(t.view())
    t.close()
    a_ptr, refs = a.ctypes.data, sys.getrefcount(src)
    assert a_ptr == src_ptr and refs == base + 1
    del a
    gc.collect()
    refs = sys.getrefcount(src)
    assert refs == base


@pytest.mark.parametrize("dtype", NUMPY_TYPES)
def test_import_from_numpy_borrows(dtype):
    src = sample(dtype, (4, 5), 7)
    t = dl.Tensor.from_dlpack(LIB, src, name="x")
    ptr, n = t.view().raw_data_pointer()
    assert (ptr, n) == (src.ctypes.data, src.nbytes)
    proto = onnx.TensorProto.FromString(t.serialize())
    assert proto.name == "x"
    assert same(numpy_helper.to_array(proto), src)
    copied = dl.Tensor.from_dlpack(LIB, src, copy=True)
    assert copied.view().raw_data_pointer()[0] != src.ctypes.data
    t.close()
    copied.close()
    # Not compact row-major: refused, and NumPy's capsule frees its tensor itself.
    with pytest.raises(dl.OnnxLightError, match="UNSUPPORTED.*row-major"):
        dl.Tensor.from_dlpack(LIB, src.T)


# ---- params files -------------------------------------------------------------------------------

LIST_MAGIC = 0xF7E58D4F05049CB7
ARRAY_MAGIC = 0xDD5E40F096B4A13F


def read_params(data: bytes):
    """An independent reader of formats.md §4: name -> (code, bits, lanes, shape, bytes)."""
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return vals

    magic, reserved, n = take("QQQ")
    assert magic == LIST_MAGIC and reserved == 0
    names = []
    for _ in range(n):
        (length,) = take("Q")
        names.append(data[pos:pos + length].decode())
        pos += length
    (m,) = take("Q")
    assert m == n
    out = {}
    for name in names:
        magic, reserved, dev_type, dev_id, ndim, code, bits, lanes = take("QQiiiBBH")
        assert (magic, reserved, dev_type, dev_id) == (ARRAY_MAGIC, 0, 1, 0)
        shape = take("q" * ndim)
        (size,) = take("q")
        assert size == (bits * lanes + 7) // 8 * math.prod(shape)
        out[name] = (code, bits, lanes, tuple(shape), data[pos:pos + size])
        pos += size
    assert pos == len(data)
    return out


def write_params(arrays):
    """An independent writer: arrays is a list of (name, code, bits, shape, bytes)."""
    out = struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays))
    for name, *_ in arrays:
        out += struct.pack("<Q", len(name.encode())) + name.encode()
    out += struct.pack("<Q", len(arrays))
    for _, code, bits, shape, data in arrays:
        out += struct.pack("<QQiiiBBH", ARRAY_MAGIC, 0, 1, 0, len(shape), code, bits, 1)
        out += struct.pack("<" + "q" * len(shape), *shape)
        out += struct.pack("<q", len(data)) + data
    return out


def cli(*args):
    return subprocess.run([str(binary()), *map(str, args)], capture_output=True, text=True)


NP_CODE = {"f": 2, "i": 0, "u": 1, "b": 6, "c": 5}


def test_params_export_read_by_independent_reader(tmp_path):
    tensors = tensors_of(NUMPY_TYPES + BYTE_LEVEL_TYPES)
    tensors.append(helper.make_tensor("typed", TensorProto.INT32, [2, 2], [1, -2, 3, -4]))
    path, out = tmp_path / "m.onnx", tmp_path / "m.params"
    onnx.save(model_of(tensors), path)
    r = cli("params", "export", path, out)
    assert r.returncode == 0, r.stderr
    arrays = read_params(out.read_bytes())
    assert list(arrays) == [t.name for t in tensors], "every initializer, in model order"
    for t in tensors:
        code, bits, lanes, shape, data = arrays[t.name]
        assert (code, bits, lanes) == (*DL_TYPE[t.data_type], 1), t.name
        assert shape == tuple(t.dims)
        expected = numpy_helper.to_array(t)
        if bits >= 8:
            assert same(np.frombuffer(data, expected.dtype).reshape(shape), expected), t.name
        else:
            # One element per byte; signed types sign-extended.
            got = np.frombuffer(data, np.int8 if code == 0 else np.uint8).reshape(shape)
            if t.data_type in (TensorProto.INT4, TensorProto.INT2, TensorProto.UINT4, TensorProto.UINT2):
                want = expected.astype(np.int8 if code == 0 else np.uint8)
            else:  # FLOAT4E2M1: the 4-bit code
                want = expected.view(np.uint8) & 0xF
            assert np.array_equal(got, want), t.name

    chosen = tmp_path / "chosen.params"
    r = cli("params", "export", path, chosen, "--names", "t3_1,t0_0")
    assert r.returncode == 0, r.stderr
    assert list(read_params(chosen.read_bytes())) == ["t3_1", "t0_0"]
    r = cli("params", "export", path, chosen, "--names", "nope")
    assert r.returncode != 0 and "nope" in r.stderr


def python_arrays():
    arrays, expected = [], {}
    for i, t in enumerate(NUMPY_TYPES):
        a = sample(t, (3, 2) if i % 2 else (5,), 100 + i)
        arrays.append((f"p{i}", NP_CODE[a.dtype.kind], a.dtype.itemsize * 8, a.shape, a.tobytes()))
        expected[f"p{i}"] = a
    bf = sample(ml_dtypes.bfloat16, (4,), 5)
    arrays.append(("bf", 4, 16, bf.shape, bf.tobytes()))
    expected["bf"] = bf
    i4 = np.array([-8, 7, -1, 0, 3], np.int8)  # one element per byte, sign-extended
    arrays.append(("i4", 0, 4, i4.shape, i4.tobytes()))
    expected["i4"] = i4.astype(ml_dtypes.int4)
    return arrays, expected


def test_params_written_here_import_into_a_model(tmp_path):
    arrays, expected = python_arrays()
    params = tmp_path / "p.params"
    params.write_bytes(write_params(arrays))
    # The model already has "p0" (replaced, typed fields and all) and "keep" (untouched).
    base = model_of([
        helper.make_tensor("p0", TensorProto.FLOAT, [1], [42.0]),
        numpy_helper.from_array(np.arange(3, dtype=np.int64), "keep"),
    ])
    path, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(base, path)
    r = cli("params", "import", path, params, out)
    assert r.returncode == 0, r.stderr
    assert "1 initializers replaced" in r.stdout and f"{len(arrays) - 1} added" in r.stdout
    loaded = onnx.load(out)
    onnx.checker.check_model(loaded)
    inits = {t.name: t for t in loaded.graph.initializer}
    assert [t.name for t in loaded.graph.initializer] == ["p0", "keep"] + [a[0] for a in arrays[1:]]
    assert same(numpy_helper.to_array(inits["keep"]), np.arange(3, dtype=np.int64))
    for name, a in expected.items():
        assert same(numpy_helper.to_array(inits[name]), a), name
    # --no-add refuses names the model lacks, and writes nothing.
    out2 = tmp_path / "out2.onnx"
    r = cli("params", "import", path, params, out2, "--no-add")
    assert r.returncode != 0 and "p1" in r.stderr and not out2.exists()


def malformed_cases():
    arrays = [("a", 2, 32, (2,), struct.pack("<2f", 1.0, 2.0))]
    good = write_params(arrays)
    names_end = 24 + 8 + 1  # list header, one name
    a0 = names_end + 8  # first array
    size_at = a0 + 32 + 8  # after the header and the one extent

    def patch(offset, fmt, value):
        b = bytearray(good)
        struct.pack_into("<" + fmt, b, offset, value)
        return bytes(b)

    return {
        "empty file": (b"", "truncated"),
        "list magic": (patch(0, "Q", 0x1234), "bad list magic"),
        "list reserved": (patch(8, "Q", 1), "reserved word is 1"),
        "name count": (patch(16, "Q", 1 << 60), "names cannot fit"),
        "name length": (patch(24, "Q", 1000), "name 0 has length 1000"),
        "name utf-8": (patch(32, "B", 0xFF), "not UTF-8"),
        "array count": (patch(names_end, "Q", 2), "2 arrays for 1 names"),
        "array magic": (patch(a0, "Q", 5), "bad array magic"),
        "array reserved": (patch(a0 + 8, "Q", 3), "reserved word is 3"),
        "device type": (patch(a0 + 16, "i", 2), "device (2, 0)"),
        "device id": (patch(a0 + 20, "i", 1), "device (1, 1)"),
        "ndim negative": (patch(a0 + 24, "i", -1), "ndim -1"),
        "ndim huge": (patch(a0 + 24, "i", 1 << 20), "ndim 1048576"),
        "dtype code": (patch(a0 + 28, "B", 3), "no ONNX equivalent"),
        "dtype lanes": (patch(a0 + 30, "H", 4), "lanes 4"),
        "negative extent": (patch(a0 + 32, "q", -2), "negative"),
        "byte size": (patch(size_at, "q", 12), "byte size 12 does not match"),
        "size overflow": (patch(a0 + 32, "q", 1 << 62), "overflows"),
        "truncated data": (good[:-1], "truncated"),
        "trailing bytes": (good + b"\0", "1 unexpected bytes"),
    }


@pytest.mark.parametrize("case", list(malformed_cases()))
def test_malformed_params_refused_by_cli(tmp_path, case):
    data, message = malformed_cases()[case]
    params, path, out = tmp_path / "bad.params", tmp_path / "m.onnx", tmp_path / "out.onnx"
    params.write_bytes(data)
    onnx.save(model_of([]), path)
    r = cli("params", "import", path, params, out)
    assert r.returncode != 0, f"{case}: accepted"
    assert "params:" in r.stderr and message in r.stderr, r.stderr
    assert "at byte" in r.stderr
    assert not out.exists()
    r = cli("params", "list", params)
    assert r.returncode != 0 and message in r.stderr


def test_malformed_sanity_the_good_file_loads(tmp_path):
    # The base of the malformed cases is valid: each refusal is the patched check's.
    arrays = [("a", 2, 32, (2,), struct.pack("<2f", 1.0, 2.0))]
    params = tmp_path / "good.params"
    params.write_bytes(write_params(arrays))
    r = cli("params", "list", params)
    assert r.returncode == 0 and "a\tFLOAT\t[2]\t8 bytes" in r.stdout, r.stdout + r.stderr
