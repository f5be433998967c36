"""onnx_light tensors for NumPy (and any DLPack consumer) without copying, through ctypes.

A TensorView implements the DLPack Python protocol (``__dlpack__`` / ``__dlpack_device__``), so

    import numpy as np
    from onnx_light_dlpack import Library, Model

    lib = Library()                                   # see Library for where it looks
    with Model.load(lib, "model.onnx", no_copy=True) as model:
        w = np.from_dlpack(model.initializer("w"))    # no copy: w's memory IS the tensor's bytes
    print(w.sum())                                    # still valid: the array holds the owner

``__dlpack__`` asks the library for a DLManagedTensorVersioned (``max_version`` >= (1, 0)) or a
legacy DLManagedTensor (no ``max_version``) and wraps it in a PyCapsule named
``"dltensor_versioned"`` / ``"dltensor"``. The capsule's destructor calls the DLPack deleter only
if no consumer took the tensor (a consumer renames the capsule to ``"used_..."`` and calls the
deleter itself), as the DLPack Python specification requires. The exported tensor holds the
owner of the bytes (the model's buffer, or the file's memory map with ``no_copy``), so arrays stay
valid after the model is closed.

Zero-copy exports are READ_ONLY (NumPy makes them non-writeable); ``copy=True`` gives a private,
writable copy. Tensors stored in typed fields (``float_data``, ...) cannot be shared: they are
copied when ``copy`` is None (the default) and refused (BufferError) with ``copy=False``.

``Tensor.from_dlpack(obj)`` goes the other way: an onnx_light TensorProto whose raw_data borrows
the memory of any DLPack producer (e.g. a NumPy array), kept alive by the producer's deleter.

Self-contained: only ctypes, the shared library and (for the demo below) NumPy.

    python onnx_light_dlpack.py [--library PATH] MODEL.onnx
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import pathlib
import sys
from typing import Iterator

# ---- DLPack v1.1 structs (dlpack.h) ----------------------------------------------------------

kDLCPU = 1
DLPACK_FLAG_BITMASK_READ_ONLY = 1
DLPACK_FLAG_BITMASK_IS_COPIED = 2
DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED = 4


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensor(ctypes.Structure):
    pass


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))),
]
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]
assert ctypes.sizeof(DLTensor) == 48 or ctypes.sizeof(ctypes.c_void_p) != 8

# ---- PyCapsule (the DLPack Python exchange object) -------------------------------------------

_api = ctypes.pythonapi
_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CapsuleDestructor]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
# The destructor gets the capsule as a raw PyObject* (it is being destroyed: no new reference).
_IsValidRaw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_GetPointerRaw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))

# Capsule names live as long as the module (capsules keep pointers to them).
VERSIONED_NAME = ctypes.create_string_buffer(b"dltensor_versioned")
LEGACY_NAME = ctypes.create_string_buffer(b"dltensor")
_USED_VERSIONED = ctypes.create_string_buffer(b"used_dltensor_versioned")
_USED_LEGACY = ctypes.create_string_buffer(b"used_dltensor")


def _name(buf: ctypes.Array) -> ctypes.c_char_p:
    return ctypes.cast(buf, ctypes.c_char_p)


def _delete_versioned(address: int) -> None:
    m = DLManagedTensorVersioned.from_address(address)
    if m.deleter:
        m.deleter(ctypes.cast(address, ctypes.POINTER(DLManagedTensorVersioned)))


def _delete_legacy(address: int) -> None:
    m = DLManagedTensor.from_address(address)
    if m.deleter:
        m.deleter(ctypes.cast(address, ctypes.POINTER(DLManagedTensor)))


@_CapsuleDestructor
def _capsule_destructor(capsule: int) -> None:
    # Called by Python (GIL held) when a capsule dies. A consumer that took the tensor renamed
    # the capsule ("used_dltensor...") and owns the deleter call; otherwise it is ours.
    try:
        if _IsValidRaw(capsule, _name(VERSIONED_NAME)):
            _delete_versioned(_GetPointerRaw(capsule, _name(VERSIONED_NAME)))
        elif _IsValidRaw(capsule, _name(LEGACY_NAME)):
            _delete_legacy(_GetPointerRaw(capsule, _name(LEGACY_NAME)))
    except BaseException:  # never raise from a destructor
        pass


def capsule_pointer(capsule: object) -> tuple[int, bool]:
    """The managed tensor in an unconsumed DLPack capsule: (address, versioned)."""
    if _api.PyCapsule_IsValid(capsule, _name(VERSIONED_NAME)):
        return _api.PyCapsule_GetPointer(capsule, _name(VERSIONED_NAME)), True
    if _api.PyCapsule_IsValid(capsule, _name(LEGACY_NAME)):
        return _api.PyCapsule_GetPointer(capsule, _name(LEGACY_NAME)), False
    raise ValueError("not an unconsumed DLPack capsule")


# ---- the C ABI (the functions used here; see include/onnx_light.h) ---------------------------

c_status = ctypes.c_uint32
c_handle = ctypes.c_void_p

ONNXL_DLPACK_COPY_IF_NEEDED = 1
ONNXL_DLPACK_COPY_ALWAYS = 2
ONNXL_FILE_LOAD_MODE_MMAP = 1
ONNXL_STATUS_UNSUPPORTED = 9


class OnnxlParseOptions(ctypes.Structure):
    # The fields used here, then room for fields later versions append: the struct comes back by
    # value and the library writes its real size to struct_size.
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("raw_data_threshold", ctypes.c_uint64),
        ("alignment", ctypes.c_uint64),
        ("min_parallel_block_size", ctypes.c_uint64),
        ("max_tensor_size_bytes", ctypes.c_uint64),
        ("num_threads", ctypes.c_int32),
        ("max_recursion_depth", ctypes.c_uint32),
        ("file_load_mode", ctypes.c_uint32),
        ("no_copy", ctypes.c_uint8),  # boolean byte: 0 or 1
        ("skip_raw_data", ctypes.c_uint8),
        ("reject_unauthenticated", ctypes.c_uint8),
        ("reserved", ctypes.c_uint8),
        ("_room", ctypes.c_uint8 * 512),
    ]


class OnnxlStr(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    def bytes(self) -> bytes:
        return ctypes.string_at(self.data, self.len) if self.len else b""


class OnnxLightError(RuntimeError):
    """A failed onnxl_* call: `status` is the ONNXL_STATUS_* name."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


def default_library_path() -> str:
    """$ONNXL_LIBRARY, then the system's libonnx_light, then this repository's release build."""
    if os.environ.get("ONNXL_LIBRARY"):
        return os.environ["ONNXL_LIBRARY"]
    found = ctypes.util.find_library("onnx_light")
    if found:
        return found
    return str(pathlib.Path(__file__).resolve().parents[2] / "target" / "release" / "libonnx_light.so")


class Library:
    """libonnx_light loaded with the signatures this module uses."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path or default_library_path()
        lib = self.lib = ctypes.CDLL(self.path)
        P = ctypes.POINTER
        for name, restype, argtypes in [
            ("onnxl_status_name", ctypes.c_char_p, [ctypes.c_uint32]),
            ("onnxl_last_error_message", ctypes.c_char_p, []),
            ("onnxl_parse_options_default", OnnxlParseOptions, []),
            ("onnxl_load_model", c_status, [ctypes.c_char_p, P(OnnxlParseOptions), P(c_handle)]),
            ("onnxl_load_model_from_bytes", c_status,
             [ctypes.c_char_p, ctypes.c_size_t, P(OnnxlParseOptions), P(c_handle)]),
            ("onnxl_model_proto_free", None, [c_handle]),
            ("onnxl_model_proto_mutable_graph", c_handle, [c_handle]),
            ("onnxl_graph_proto_initializer_size", ctypes.c_size_t, [c_handle]),
            ("onnxl_graph_proto_mutable_initializer", c_handle, [c_handle, ctypes.c_size_t]),
            ("onnxl_tensor_proto_new", c_handle, []),
            ("onnxl_tensor_proto_free", None, [c_handle]),
            ("onnxl_tensor_proto_parse_from_bytes", c_status,
             [c_handle, ctypes.c_char_p, ctypes.c_size_t, P(OnnxlParseOptions)]),
            ("onnxl_tensor_proto_name", OnnxlStr, [c_handle]),
            ("onnxl_tensor_proto_set_name", c_status, [c_handle, ctypes.c_char_p, ctypes.c_size_t]),
            ("onnxl_tensor_proto_data_type", ctypes.c_int32, [c_handle]),
            ("onnxl_tensor_proto_dims_size", ctypes.c_size_t, [c_handle]),
            ("onnxl_tensor_proto_dims", ctypes.c_int64, [c_handle, ctypes.c_size_t]),
            ("onnxl_tensor_proto_has_raw_data", ctypes.c_bool, [c_handle]),
            ("onnxl_tensor_proto_raw_data", c_status,
             [c_handle, P(ctypes.c_void_p), P(ctypes.c_size_t)]),
            ("onnxl_tensor_proto_serialize", c_status, [c_handle, ctypes.c_void_p, P(c_handle)]),
            ("onnxl_buffer_data", ctypes.c_void_p, [c_handle]),
            ("onnxl_buffer_size", ctypes.c_size_t, [c_handle]),
            ("onnxl_buffer_free", None, [c_handle]),
            ("onnxl_tensor_proto_to_dlpack_versioned", c_status,
             [c_handle, ctypes.c_uint32, P(ctypes.c_void_p)]),
            ("onnxl_tensor_proto_to_dlpack", c_status,
             [c_handle, ctypes.c_uint32, P(ctypes.c_void_p)]),
            ("onnxl_tensor_proto_from_dlpack_versioned", c_status,
             [ctypes.c_void_p, ctypes.c_bool, P(c_handle)]),
            ("onnxl_tensor_proto_from_dlpack", c_status,
             [ctypes.c_void_p, ctypes.c_bool, P(c_handle)]),
        ]:
            f = getattr(lib, name)
            f.restype, f.argtypes = restype, argtypes

    def check(self, status: int) -> None:
        if status != 0:
            raise OnnxLightError(self.lib.onnxl_status_name(status).decode(),
                                 self.lib.onnxl_last_error_message().decode("utf-8", "replace"))


# ---- models, tensors and DLPack views --------------------------------------------------------


class _Owner:
    """Something that owns a C handle and can be closed (a model or a standalone tensor)."""

    lib: Library
    _handle: int | None

    @property
    def closed(self) -> bool:
        return self._handle is None

    def _live(self) -> int:
        if self._handle is None:
            raise ValueError(f"{type(self).__name__} is closed")
        return self._handle

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def close(self) -> None:
        raise NotImplementedError


class TensorView:
    """A TensorProto of a live Model or Tensor, exported to DLPack consumers on request.

    The view itself needs its model (or tensor) open; what ``__dlpack__`` returns does not.
    """

    def __init__(self, owner: _Owner, handle: int) -> None:
        self._owner = owner
        self._handle = handle

    @property
    def lib(self) -> Library:
        return self._owner.lib

    def _h(self) -> int:
        self._owner._live()
        return self._handle

    @property
    def name(self) -> str:
        return self.lib.lib.onnxl_tensor_proto_name(self._h()).bytes().decode("utf-8", "replace")

    @property
    def data_type(self) -> int:
        return self.lib.lib.onnxl_tensor_proto_data_type(self._h())

    @property
    def dims(self) -> tuple[int, ...]:
        h, lib = self._h(), self.lib.lib
        return tuple(lib.onnxl_tensor_proto_dims(h, i) for i in range(lib.onnxl_tensor_proto_dims_size(h)))

    def raw_data_pointer(self) -> tuple[int, int]:
        """(address, length) of raw_data as onnxl_tensor_proto_raw_data returns it."""
        data, n = ctypes.c_void_p(), ctypes.c_size_t()
        self.lib.check(self.lib.lib.onnxl_tensor_proto_raw_data(self._h(), ctypes.byref(data), ctypes.byref(n)))
        return data.value or 0, n.value

    def __dlpack_device__(self) -> tuple[int, int]:
        return (kDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule: "dltensor_versioned" when max_version >= (1, 0), else "dltensor".

        stream must be None (CPU data); dl_device None or (kDLCPU, 0); copy True (a private
        copy), False (share or fail) or None (share when possible, else copy).
        """
        if stream is not None:
            raise BufferError("onnx_light tensors are CPU data: stream must be None")
        if dl_device is not None and tuple(dl_device) != (kDLCPU, 0):
            raise BufferError(f"onnx_light tensors live on the CPU (1, 0), not {tuple(dl_device)}")
        flags = {True: ONNXL_DLPACK_COPY_ALWAYS, None: ONNXL_DLPACK_COPY_IF_NEEDED, False: 0}[copy]
        versioned = max_version is not None and max_version[0] >= 1
        lib = self.lib.lib
        out = ctypes.c_void_p()
        export = lib.onnxl_tensor_proto_to_dlpack_versioned if versioned else lib.onnxl_tensor_proto_to_dlpack
        status = export(self._h(), flags, ctypes.byref(out))
        if status != 0:
            message = lib.onnxl_last_error_message().decode("utf-8", "replace")
            name = lib.onnxl_status_name(status).decode()
            raise BufferError(f"{name}: {message}")
        try:
            return _api.PyCapsule_New(out.value, _name(VERSIONED_NAME if versioned else LEGACY_NAME),
                                      _capsule_destructor)
        except BaseException:
            (_delete_versioned if versioned else _delete_legacy)(out.value)
            raise


class Model(_Owner):
    """An onnx_light ModelProto (closed with close() or a with block)."""

    def __init__(self, lib: Library, handle: int) -> None:
        self.lib, self._handle = lib, handle

    @classmethod
    def load(cls, lib: Library, path: str | os.PathLike, no_copy: bool = False, mmap: bool = False) -> "Model":
        opts = lib.lib.onnxl_parse_options_default()
        opts.no_copy = int(no_copy)
        if mmap:
            opts.file_load_mode = ONNXL_FILE_LOAD_MODE_MMAP
        out = c_handle()
        lib.check(lib.lib.onnxl_load_model(os.fsencode(path), ctypes.byref(opts), ctypes.byref(out)))
        return cls(lib, out.value)

    @classmethod
    def from_bytes(cls, lib: Library, data: bytes) -> "Model":
        """A model parsed from bytes (copied: the model owns its tensor bytes)."""
        out = c_handle()
        lib.check(lib.lib.onnxl_load_model_from_bytes(data, len(data), None, ctypes.byref(out)))
        return cls(lib, out.value)

    def initializers(self) -> Iterator[TensorView]:
        lib = self.lib.lib
        graph = lib.onnxl_model_proto_mutable_graph(self._live())
        for i in range(lib.onnxl_graph_proto_initializer_size(graph)):
            yield TensorView(self, lib.onnxl_graph_proto_mutable_initializer(graph, i))

    def initializer(self, name: str) -> TensorView:
        for view in self.initializers():
            if view.name == name:
                return view
        raise KeyError(name)

    def close(self) -> None:
        if self._handle is not None:
            self.lib.lib.onnxl_model_proto_free(self._handle)
            self._handle = None


class Tensor(_Owner):
    """A standalone onnx_light TensorProto."""

    def __init__(self, lib: Library, handle: int) -> None:
        self.lib, self._handle = lib, handle

    @classmethod
    def parse(cls, lib: Library, data: bytes) -> "Tensor":
        """A TensorProto parsed (copied) from its serialized bytes."""
        handle = lib.lib.onnxl_tensor_proto_new()
        try:
            lib.check(lib.lib.onnxl_tensor_proto_parse_from_bytes(handle, data, len(data), None))
        except BaseException:
            lib.lib.onnxl_tensor_proto_free(handle)
            raise
        return cls(lib, handle)

    @classmethod
    def from_dlpack(cls, lib: Library, obj, copy: bool = False, name: str | None = None) -> "Tensor":
        """A TensorProto from any DLPack producer (an object with __dlpack__, or a capsule).

        copy=False: raw_data borrows the producer's memory (no copy), released through the
        producer's deleter when the tensor (and every owner token of its bytes) is gone.
        """
        capsule = obj.__dlpack__(max_version=(1, 1)) if hasattr(obj, "__dlpack__") else obj
        address, versioned = capsule_pointer(capsule)
        importer = lib.lib.onnxl_tensor_proto_from_dlpack_versioned if versioned else lib.lib.onnxl_tensor_proto_from_dlpack
        out = c_handle()
        # On failure the capsule keeps the tensor (its destructor frees it); on success the
        # library owns it, so the capsule is marked consumed.
        lib.check(importer(address, not copy, ctypes.byref(out)))
        _api.PyCapsule_SetName(capsule, _name(_USED_VERSIONED if versioned else _USED_LEGACY))
        tensor = cls(lib, out.value)
        if name is not None:
            raw = name.encode()
            lib.check(lib.lib.onnxl_tensor_proto_set_name(out.value, raw, len(raw)))
        return tensor

    def view(self) -> TensorView:
        return TensorView(self, self._live())

    def serialize(self) -> bytes:
        lib = self.lib.lib
        buf = c_handle()
        self.lib.check(lib.onnxl_tensor_proto_serialize(self._live(), None, ctypes.byref(buf)))
        try:
            return ctypes.string_at(lib.onnxl_buffer_data(buf), lib.onnxl_buffer_size(buf))
        finally:
            lib.onnxl_buffer_free(buf)

    def close(self) -> None:
        if self._handle is not None:
            self.lib.lib.onnxl_tensor_proto_free(self._handle)
            self._handle = None


def main(argv: list[str]) -> int:
    import numpy as np

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--library", help="libonnx_light shared library")
    p.add_argument("model")
    args = p.parse_args(argv)
    lib = Library(args.library)
    arrays = {}
    with Model.load(lib, args.model, no_copy=True) as model:
        for view in model.initializers():
            try:
                arrays[view.name] = np.from_dlpack(view)
            except (BufferError, TypeError, ValueError) as e:  # e.g. bfloat16, STRING
                print(f"{view.name}: not viewable by NumPy ({e})")
    for name, a in arrays.items():  # the model is closed: the arrays keep their bytes alive
        print(f"{name}: {a.dtype} {a.shape} writeable={a.flags.writeable}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
