"""onnx_light from Python through ctypes: no compiled extension, just the shared library.

Loads a model with no_copy from a memory map, and views each tensor's raw_data as a NumPy array
WITHOUT copying: np.frombuffer over a ctypes array placed at the library's pointer. Each array
keeps the tensor bytes alive through a retained OnnxlOwner token, released by weakref.finalize
when the last array (or view) over them is gone, so the arrays stay valid after the model is
freed. Payloads whose bytes sit at a 64-byte-aligned address of the mapping are borrowed from it;
the library copied the others to aligned memory of their own at load time
(ParseOptions.alignment, default 64; onnxl_model_realigned_tensors counts them), so every array
can be read with aligned SIMD loads.

    python onnx_light_ctypes.py [--library PATH] [--alignment N] [--check] MODEL.onnx...

--library  the shared library (default: $ONNXL_LIBRARY, then the system's libonnx_light, then
           target/release/libonnx_light.so of this repository)
--alignment  ParseOptions.alignment (default: the library's, 64; 1 borrows every payload from
           the mapping wherever it lies)
--check    also compare every array with onnx.numpy_helper.to_array of the same initializer and
           check it shares memory with the model's raw_data (pointer comparison); exit 1 on a
           mismatch
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import os
import pathlib
import sys
import weakref

import numpy as np

# ---- the C ABI (the few functions used here; see include/onnx_light.h) -----------------------

c_status = ctypes.c_uint32
c_handle = ctypes.c_void_p


class OnnxlParseOptions(ctypes.Structure):
    # The fields this script knows, then room for fields a newer library appends: the struct is
    # returned by value, so the buffer must be at least as large as the library's struct, whose
    # real size the library writes to struct_size.
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
        ("_room_for_later_fields", ctypes.c_uint8 * 256),
    ]


KNOWN_PARSE_OPTIONS_SIZE = OnnxlParseOptions._room_for_later_fields.offset


class OnnxlStr(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    def __str__(self) -> str:
        return ctypes.string_at(self.data, self.len).decode("utf-8", "replace") if self.len else ""


ONNXL_FILE_LOAD_MODE_MMAP = 1
ONNXL_TENSOR_PROTO_DATA_LOCATION_EXTERNAL = 1

# TensorProto.DataType -> NumPy dtype of raw_data (little-endian, as onnx stores it).
DTYPES = {
    1: "<f4", 2: "u1", 3: "i1", 4: "<u2", 5: "<i2", 6: "<i4", 7: "<i8", 9: "?", 10: "<f2",
    11: "<f8", 12: "<u4", 13: "<u8", 14: "<c8", 15: "<c16",
}


class OnnxLightError(RuntimeError):
    pass


def find_library(explicit: str | None) -> str:
    if explicit:
        return explicit
    if os.environ.get("ONNXL_LIBRARY"):
        return os.environ["ONNXL_LIBRARY"]
    found = ctypes.util.find_library("onnx_light")
    if found:
        return found
    return str(pathlib.Path(__file__).resolve().parents[2] / "target" / "release" / "libonnx_light.so")


class Library:
    """The loaded shared library with typed signatures."""

    def __init__(self, path: str) -> None:
        self.path = path
        lib = self.lib = ctypes.CDLL(path)
        sig = {
            "onnxl_version": (ctypes.c_char_p, []),
            "onnxl_status_name": (ctypes.c_char_p, [ctypes.c_uint32]),
            "onnxl_last_error_message": (ctypes.c_char_p, []),
            "onnxl_parse_options_default": (OnnxlParseOptions, []),
            "onnxl_load_model": (c_status, [ctypes.c_char_p, ctypes.POINTER(OnnxlParseOptions), ctypes.POINTER(c_handle)]),
            "onnxl_model_proto_free": (None, [c_handle]),
            "onnxl_model_realigned_tensors": (ctypes.c_size_t, [c_handle]),
            "onnxl_model_proto_graph": (c_handle, [c_handle]),
            "onnxl_model_proto_mutable_graph": (c_handle, [c_handle]),
            "onnxl_model_proto_ir_version": (ctypes.c_int64, [c_handle]),
            "onnxl_model_proto_producer_name": (OnnxlStr, [c_handle]),
            "onnxl_graph_proto_name": (OnnxlStr, [c_handle]),
            "onnxl_graph_proto_node_size": (ctypes.c_size_t, [c_handle]),
            "onnxl_graph_proto_initializer_size": (ctypes.c_size_t, [c_handle]),
            "onnxl_graph_proto_mutable_initializer": (c_handle, [c_handle, ctypes.c_size_t]),
            "onnxl_tensor_proto_name": (OnnxlStr, [c_handle]),
            "onnxl_tensor_proto_data_type": (ctypes.c_int32, [c_handle]),
            "onnxl_tensor_proto_data_location": (ctypes.c_int32, [c_handle]),
            "onnxl_tensor_proto_dims_size": (ctypes.c_size_t, [c_handle]),
            "onnxl_tensor_proto_dims_data": (ctypes.POINTER(ctypes.c_int64), [c_handle]),
            "onnxl_tensor_proto_has_raw_data": (ctypes.c_bool, [c_handle]),
            "onnxl_tensor_proto_raw_data_is_borrowed": (ctypes.c_bool, [c_handle]),
            "onnxl_tensor_proto_raw_data": (c_status, [c_handle, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]),
            "onnxl_tensor_proto_raw_data_owner": (c_handle, [c_handle]),
            "onnxl_owner_data": (c_status, [c_handle, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]),
            "onnxl_owner_release": (None, [c_handle]),
        }
        for name, (restype, argtypes) in sig.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
            setattr(self, name[len("onnxl_"):], fn)

        self.tokens_released = 0

    def release_token(self, owner: int) -> None:
        self.owner_release(owner)
        self.tokens_released += 1

    def check(self, status: int, what: str) -> None:
        if status != 0:
            raise OnnxLightError(f"{what}: {self.status_name(status).decode()}: {self.last_error_message().decode()}")


class Model:
    """A model loaded no_copy from a memory map; tensor_array() gives zero-copy NumPy arrays."""

    def __init__(self, lib: Library, path: str, alignment: int | None) -> None:
        self.lib = lib
        opts = lib.parse_options_default()
        if not KNOWN_PARSE_OPTIONS_SIZE <= opts.struct_size <= ctypes.sizeof(OnnxlParseOptions):
            raise OnnxLightError(f"OnnxlParseOptions is {opts.struct_size} bytes in the library, "
                                 f"this script knows {KNOWN_PARSE_OPTIONS_SIZE}")
        opts.no_copy = True
        opts.file_load_mode = ONNXL_FILE_LOAD_MODE_MMAP
        opts.raw_data_threshold = 0  # borrow every (aligned) payload from the mapping, even small ones
        if alignment is not None:
            opts.alignment = alignment
        self.alignment = max(1, opts.alignment)
        handle = c_handle()
        lib.check(lib.load_model(os.fsencode(path), ctypes.byref(opts), ctypes.byref(handle)), f"load {path}")
        self.handle = handle
        self._free = weakref.finalize(self, lib.model_proto_free, handle)

    def free(self) -> None:
        """Frees the model now (arrays taken from it stay valid: they hold owner tokens)."""
        self._free()

    def initializers(self) -> list[int]:
        graph = self.lib.model_proto_mutable_graph(self.handle)
        n = self.lib.graph_proto_initializer_size(graph)
        return [self.lib.graph_proto_mutable_initializer(graph, i) for i in range(n)]

    def tensor_array(self, tensor: int) -> np.ndarray:
        """The tensor's raw_data as an array over the library's memory (no copy)."""
        lib = self.lib
        dtype = DTYPES.get(lib.tensor_proto_data_type(tensor))
        if dtype is None or not lib.tensor_proto_has_raw_data(tensor):
            raise OnnxLightError(f"{lib.tensor_proto_name(tensor)}: no raw_data of a NumPy type")
        # A retained token: the bytes stay valid (and unchanged) until it is released.
        owner = lib.tensor_proto_raw_data_owner(tensor)
        if not owner:
            raise OnnxLightError(f"raw_data_owner: {lib.last_error_message().decode()}")
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        try:
            lib.check(lib.owner_data(owner, ctypes.byref(data), ctypes.byref(size)), "owner_data")
        except OnnxLightError:
            lib.owner_release(owner)
            raise
        buf = (ctypes.c_ubyte * size.value).from_address(data.value or 0)
        # Every array made from `buf` (this one and any view of it) keeps `buf` alive; the token is
        # released when `buf` itself goes away.
        weakref.finalize(buf, lib.release_token, owner)
        dims = lib.tensor_proto_dims_data(tensor)
        shape = tuple(dims[i] for i in range(lib.tensor_proto_dims_size(tensor)))
        return np.frombuffer(buf, dtype=dtype).reshape(shape)


def is_mapped(path: str) -> bool | None:
    """Whether the file at `path` is mapped in this process (/proc/self/maps); None if unknown."""
    target = os.path.realpath(path)
    try:
        with open("/proc/self/maps") as maps:
            return any(line.split(maxsplit=5)[5:] == [target + "\n"] or
                       line.rstrip("\n").endswith(" " + target) for line in maps)
    except OSError:
        return None


def show(lib: Library, path: str, check: bool, alignment: int | None) -> int:
    model = Model(lib, path, alignment)
    graph = lib.model_proto_graph(model.handle)
    print(f"{path}: ir_version {lib.model_proto_ir_version(model.handle)}, producer "
          f"'{lib.model_proto_producer_name(model.handle)}', graph '{lib.graph_proto_name(graph)}' "
          f"with {lib.graph_proto_node_size(graph)} nodes")
    arrays: dict[str, np.ndarray] = {}
    pointers: dict[str, int] = {}
    borrowed = 0
    # Counted before any owner token is taken (taking one makes the payload shareable).
    realigned = lib.model_realigned_tensors(model.handle)
    for t in model.initializers():
        name = str(lib.tensor_proto_name(t))
        borrowed += bool(lib.tensor_proto_raw_data_is_borrowed(t))
        if lib.tensor_proto_data_location(t) == ONNXL_TENSOR_PROTO_DATA_LOCATION_EXTERNAL:
            print(f"  {name}: external data (not in the model file)")
            continue
        try:
            arrays[name] = model.tensor_array(t)
        except OnnxLightError as e:
            print(f"  {name}: skipped ({e})")
            continue
        ptr, size = ctypes.c_void_p(), ctypes.c_size_t()
        lib.check(lib.tensor_proto_raw_data(t, ctypes.byref(ptr), ctypes.byref(size)), "raw_data")
        pointers[name] = ptr.value or 0
    # The file is mapped while something borrows from it (the model's long strings, its tensors).
    mapped = is_mapped(path)

    # The model is freed; the arrays still read the mapped file through their owner tokens.
    model.free()
    gc.collect()
    for i, (name, a) in enumerate(arrays.items()):
        if i == 8:
            print(f"  ... and {len(arrays) - 8} more")
            break
        values = np.array2string(a.ravel()[:4], precision=4, separator=", ")
        print(f"  {name}: {a.dtype} {list(a.shape)} {values}{' ...' if a.size > 4 else ''}")
    print(f"  (zero-copy views: {borrowed} of the memory-mapped file, {realigned} of aligned copies "
          "the library made at load time)")

    failures = 0
    a = expected = None
    if check:
        import onnx
        from onnx import numpy_helper

        reference = {t.name: t for t in onnx.load(path).graph.initializer}  # external data loaded
        for name, a in arrays.items():
            expected = numpy_helper.to_array(reference[name])
            same_values = np.array_equal(a, expected.reshape(a.shape), equal_nan=a.dtype.kind in "fc")
            same_memory = a.__array_interface__["data"][0] == pointers[name]
            if not (same_values and same_memory and not a.flags.owndata):
                print(f"  MISMATCH {name}: values equal {same_values}, shares the model's memory {same_memory}")
                failures += 1
        misaligned = [n for n, p in pointers.items() if p % model.alignment]
        if misaligned:
            print(f"  MISMATCH: {len(misaligned)} arrays not at a multiple of {model.alignment}: {misaligned[:3]}")
            failures += 1
        # Dropping the arrays releases their owner tokens (and, with the last one, the mapping).
        before = lib.tokens_released
        count = len(arrays)
        arrays.clear()
        a = expected = None  # the last references to the arrays
        gc.collect()
        if lib.tokens_released - before != count:
            print(f"  MISMATCH: {lib.tokens_released - before} of {count} owner tokens released")
            failures += 1
        if mapped and is_mapped(path):
            print("  MISMATCH: the file is still mapped after every array was released")
            failures += 1
        print(f"  check: {count} arrays equal onnx.numpy_helper.to_array and share the model's memory; "
              f"{count} owner tokens released with them"
              f"{', and the mapping with the last one' if mapped else ''}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library")
    parser.add_argument("--alignment", type=int)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    lib = Library(find_library(args.library))
    print(f"onnx_light {lib.version().decode()} from {lib.path}")
    failures = sum(show(lib, path, args.check, args.alignment) for path in args.models)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
