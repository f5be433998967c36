"""onnx_light: load and save ONNX models fast, without protobuf.

Messages are views into a Rust model (nothing is copied into Python objects at load); tensors
give zero-copy NumPy arrays (``numpy_helper.to_array``); load, save, serialize and conversions run
without the GIL. Names follow the ``onnx`` package: ``load``, ``save``, ``ModelProto``,
``TensorProto.FLOAT``, ``numpy_helper``. See docs/python.md.
"""

from __future__ import annotations

import os
from typing import IO, Any, Callable, Dict, Optional, Union

from . import _native
from ._native import (  # noqa: F401
    AttributeProto,
    DecodeError,
    DeviceConfigurationProto,
    EncryptionError,
    EnumTypeWrapper,
    ExternalDataError,
    FunctionProto,
    GraphProto,
    IntIntListEntryProto,
    InvalidArgumentError,
    LimitExceededError,
    MapProto,
    Message,
    ModelProto,
    NodeDeviceConfigurationProto,
    NodeProto,
    OperatorSetIdProto,
    OptionalProto,
    ParamsError,
    PathRefusedError,
    RepeatedCompositeContainer,
    RepeatedScalarContainer,
    SequenceProto,
    ShardedDimProto,
    ShardingSpecProto,
    SimpleShardedDimProto,
    SparseTensorProto,
    StringStringEntryProto,
    TensorAnnotation,
    TensorProto,
    TensorShapeProto,
    TrainingInfoProto,
    TypeProto,
    UnsupportedError,
    ValueInfoProto,
    WrongKeyError,
    memory_held_for_reuse,
    memory_reuse_limit,
    release_memory_held_for_reuse,
    set_memory_reuse_limit,
)

__version__: str = _native.__version__

#: onnx's operator sets of the ai.onnx.ml domain are there (the onnx component is built with them).
ONNX_ML = True

# ---- reflection and the names of onnx.proto outside its messages

from . import descriptor as _descriptor  # noqa: E402

#: onnx.proto's ``Version`` (the IR versions) and ``OperatorStatus`` enums, as the onnx package has them.
Version = EnumTypeWrapper("Version", [
    ("_START_VERSION", 0), ("IR_VERSION_2017_10_10", 1), ("IR_VERSION_2017_10_30", 2),
    ("IR_VERSION_2017_11_3", 3), ("IR_VERSION_2019_1_22", 4), ("IR_VERSION_2019_3_18", 5),
    ("IR_VERSION_2019_9_19", 6), ("IR_VERSION_2020_5_8", 7), ("IR_VERSION_2021_7_30", 8),
    ("IR_VERSION_2023_5_5", 9), ("IR_VERSION_2024_3_25", 10), ("IR_VERSION_2025_05_12", 11),
    ("IR_VERSION_2025_08_26", 12), ("IR_VERSION_2025_11_06", 13), ("IR_VERSION", 14),
])
OperatorStatus = EnumTypeWrapper("OperatorStatus", [("EXPERIMENTAL", 0), ("STABLE", 1)])
for _k, _v in Version.items() + OperatorStatus.items():
    if not _k.startswith("_"):
        globals()[_k] = _v

# onnx-data.proto's element kinds (`elem_type` is a plain int32 field, as `data_type` is).
_ELEM_TYPES = [("UNDEFINED", 0), ("TENSOR", 1), ("SPARSE_TENSOR", 2), ("SEQUENCE", 3), ("MAP", 4),
               ("OPTIONAL", 5)]
for _cls in (SequenceProto, OptionalProto):
    _cls.DataType = EnumTypeWrapper(f"{_cls.__name__}.DataType", _ELEM_TYPES)
    for _k, _v in _ELEM_TYPES:
        setattr(_cls, _k, _v)


def _install_descriptors() -> None:
    messages, enums = _native.schema_table()
    classes = {}
    for name, _ in messages:
        cls = getattr(_native, name.split(".")[0])
        for part in name.split(".")[1:]:
            cls = getattr(cls, part)
        classes[name] = cls
    open_enums = {"TensorProto.DataType": TensorProto.DataType.items(),
                  "SequenceProto.DataType": _ELEM_TYPES, "OptionalProto.DataType": _ELEM_TYPES,
                  "Version": Version.items(), "OperatorStatus": OperatorStatus.items()}
    for name, d in _descriptor.build(messages, enums, classes, open_enums).items():
        classes[name].DESCRIPTOR = d
    native_list_fields = Message.ListFields

    def ListFields(self: Message) -> list:
        """``(FieldDescriptor, value)`` pairs of the fields that are set, by field number."""
        by_name = self.DESCRIPTOR.fields_by_name
        return [(by_name[f.name], v) for f, v in native_list_fields(self)]

    Message.ListFields = ListFields


_install_descriptors()

PathLike = Union[str, "os.PathLike[str]"]


def _key_bytes(key: Any) -> Optional[bytes]:
    if key is None:
        return None
    if isinstance(key, str):
        return key.encode("utf-8")
    return bytes(key)


def _is_url(path: str) -> bool:
    """Whether ``path`` is the URL of a remote model (docs/remote.md)."""
    return path.lower().startswith(("s3://", "s3a://", "az://", "azure://", "http://", "https://"))


def _file_path(f: Any) -> Optional[str]:
    """The absolute path of ``f``: a path, or the ``name`` of a file object (as onnx finds it);
    a URL of a remote model (``s3://``, ``az://``, ``http://``, ``https://``) as it is."""
    if isinstance(f, str) and _is_url(f):
        return f
    if isinstance(f, (str, os.PathLike)):
        return os.path.abspath(f)
    if hasattr(f, "name"):
        return os.path.abspath(f.name)
    return None


def _serializer(fmt: Optional[str], f: Any = None) -> Any:
    """The serializer of ``fmt``, else of the extension of ``f``'s path, else protobuf's."""
    if fmt is None:
        path = _file_path(f)
        if path is not None:
            fmt = serialization.registry.get_format_from_file_extension(os.path.splitext(path)[1])
    return serialization.registry.get(fmt or "protobuf")


def _is_binary(serializer: Any) -> bool:
    return serializer.supported_format == "protobuf"


def load(
    f: Union[PathLike, bytes, IO[bytes]],
    format: Optional[str] = None,  # noqa: A002
    load_external_data: bool = True,
    *,
    base_dir: Optional[PathLike] = None,
    no_copy: bool = False,
    num_threads: Optional[int] = None,
    key: Any = None,
    alignment: Optional[int] = None,
    progress: Optional[Callable[[int], Any]] = None,
    storage_options: Optional[Dict[str, Any]] = None,
) -> ModelProto:
    """Loads a model from a path, bytes, or a binary file object (``onnx.load``).

    Args:
        f: a path, the model's bytes, or a file object opened for binary reading; a path may be
            an ``s3://``, ``az://``, ``http://`` or ``https://`` URL (docs/remote.md: credentials from the
            ``AWS_*`` environment, options from ``ONNXL_REMOTE_*``).
        format: ``"protobuf"``, ``"textproto"``, ``"json"`` or ``"onnxtxt"``
            (:mod:`onnx_light.serialization`); default: from the file's extension, else protobuf.
        load_external_data: read the tensors stored in external files (resolved against
            ``base_dir``, else the model's directory).
        base_dir: directory of the external data.
        no_copy: tensors borrow from a memory map of the file (or from the ``bytes`` object)
            instead of being copied; the map stays alive while any tensor or array uses it.
        num_threads: threads for copying and parsing (default: all cores).
        key: passphrase (str or bytes) of an encrypted model.
        alignment: every tensor's bytes start at a multiple of this (a power of two; default
            64, a cache line and the widest SIMD load). With ``no_copy``, a tensor the file does
            not place at such an address is copied to one; ``alignment=1`` borrows every
            tensor where it is (NumPy handles any address).
        progress: for a path or URL, called as ``progress(bytes)`` with the bytes of each
            piece done: the model file's size once it is parsed, then each piece of external
            data as it is read (at most 8 MiB; with ``no_copy``, each range as it is mapped);
            for a URL, each piece received. The calls sum to the bytes loaded (ranges shared by
            several tensors count once). Called from the loading threads; what it raises is
            raised after the load.
        storage_options: for a URL, options of this call over the environment's
            (docs/remote.md): ``concurrency``, ``part_size``, ``retries``, ``timeout``,
            ``connect_timeout``, and ``object_store`` keys such as ``aws_endpoint``,
            ``aws_region``, ``aws_access_key_id``, ``aws_secret_access_key``, ``allow_http``.
    """
    storage = _storage_pairs(f, storage_options)
    opts = dict(load_external_data=load_external_data, base_dir=base_dir, no_copy=no_copy,
                num_threads=num_threads, key=key, alignment=alignment)
    if isinstance(f, (bytes, bytearray, memoryview)):
        return load_from_string(f, format or "protobuf", **opts)
    serializer = _serializer(format, f)
    if not _is_binary(serializer):
        model = serializer.deserialize_proto(_read_all(f), ModelProto())
        path = _file_path(f)
        if load_external_data and (base_dir is not None or path is not None):
            load_external_data_for_model(model, base_dir or os.path.dirname(path))
        return model
    if isinstance(f, (str, os.PathLike)):
        return _native.load_path(os.fspath(f), progress=progress, storage_options=storage,
                                 **_native_opts(**opts))
    if base_dir is None and isinstance(getattr(f, "name", None), str):
        opts["base_dir"] = os.path.dirname(os.path.abspath(f.name))
    return load_from_string(f.read(), **opts)


def _write_all(f: Union[PathLike, IO[bytes]], data: bytes) -> None:
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(data)
    else:
        f.write(data)


def _read_all(f: Union[PathLike, IO[bytes]]) -> bytes:
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return fh.read()
    return f.read()


def _storage_pairs(f: Any, storage_options: Optional[Dict[str, Any]]) -> Optional[list]:
    """``storage_options`` as the (key, text) pairs of the native calls; they apply to URLs only."""
    if storage_options is None:
        return None
    if not (isinstance(f, str) and _is_url(f)):
        raise ValueError("storage_options apply to s3://, az://, http:// and https:// URLs only")
    return [(str(k), str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in storage_options.items()]


def _native_opts(load_external_data, base_dir, no_copy, num_threads, key, alignment) -> dict:
    return dict(
        alignment=alignment,
        no_copy=no_copy,
        num_threads=num_threads,
        load_external_data=load_external_data,
        base_dir=os.fspath(base_dir) if base_dir is not None else None,
        key=_key_bytes(key),
    )


load_model = load


def load_from_string(
    s: bytes,
    format: str = "protobuf",  # noqa: A002
    *,
    load_external_data: bool = True,
    base_dir: Optional[PathLike] = None,
    no_copy: bool = False,
    num_threads: Optional[int] = None,
    key: Any = None,
    alignment: Optional[int] = None,
) -> ModelProto:
    """Parses a model from bytes (``onnx.load_from_string``), or from the text of ``format``;
    see :func:`load`."""
    if format != "protobuf":
        return serialization.registry.get(format).deserialize_proto(s, ModelProto())
    if (base_dir is None and not no_copy and num_threads is None and key is None
            and alignment is None):
        # The common call, without building keyword arguments (a small model parses in a few
        # microseconds, so this shows).
        return _native.load_bytes(s, load_external_data=load_external_data)
    return _native.load_bytes(
        s, **_native_opts(load_external_data, base_dir, no_copy, num_threads, key, alignment))


load_model_from_string = load_from_string


def load_tensor(f: Union[PathLike, IO[bytes]], format: Optional[str] = None) -> TensorProto:  # noqa: A002
    """Loads a serialized TensorProto from a path or a file object (``onnx.load_tensor``)."""
    return _serializer(format, f).deserialize_proto(_read_all(f), TensorProto())


def load_tensor_from_string(s: bytes, format: str = "protobuf") -> TensorProto:  # noqa: A002
    """Parses a serialized TensorProto (``onnx.load_tensor_from_string``)."""
    if format == "protobuf":
        return _native.load_bytes(s, cls=TensorProto)
    return serialization.registry.get(format).deserialize_proto(s, TensorProto())


def save(
    proto: Union[ModelProto, bytes],
    f: Union[PathLike, IO[bytes]],
    format: Optional[str] = None,  # noqa: A002
    *,
    save_as_external_data: bool = False,
    all_tensors_to_one_file: bool = True,
    location: Optional[str] = None,
    size_threshold: int = 1024,
    convert_attribute: bool = False,
    max_file_size: Optional[int] = None,
    alignment: Optional[int] = None,
    checksum: bool = False,
    key: Any = None,
    num_threads: Optional[int] = None,
    source_dir: Optional[PathLike] = None,
    progress: Optional[Callable[[int, int], Any]] = None,
    align: Optional[int] = None,
    storage_options: Optional[Dict[str, Any]] = None,
) -> None:
    """Saves a model (``onnx.save``), atomically when ``f`` is a path, and leaves the model as
    onnx's save does (:func:`write_model` saves without changing it).

    ``align`` (a power of two from 64 to 65536; default None: protobuf's bytes) makes every
    embedded ``raw_data`` payload of at least ``size_threshold`` bytes (default 1024, the size
    from which a no-copy load borrows instead of copying) start at a multiple of it in the saved
    bytes, after a padding field no ``onnx.proto`` message uses: a no-copy :func:`load` of the
    file then borrows every payload from the file's map, and the file still loads in onnx and
    onnxruntime (docs/aligned-models.md). Single-file protobuf saves only (not with
    ``save_as_external_data``, whose weight files ``alignment`` aligns).

    With ``save_as_external_data``, tensors whose ``sys.getsizeof(raw_data)`` (the length plus
    33) is at least ``size_threshold`` go to weight files beside the model (``location``,
    default: the model file name + ``.data``; one file per tensor when
    ``all_tensors_to_one_file`` is false; a new part ``LOCATION.1``, ... when a file would exceed
    ``max_file_size``; offsets aligned to ``alignment``, default 4096; SHA-1 ``checksum``
    entries), and in the model object they become external references without their bytes, as
    onnx leaves them. Without it, tensors the model marks external that hold their bytes
    (:func:`convert_model_to_external_data`) are written to their files first, as onnx does.
    ``key`` encrypts the model (and its weight files). Tensors whose external data was not
    loaded are read from ``source_dir`` (default: the directory ``f`` is in). ``progress``
    (with ``save_as_external_data``) is called as ``progress(bytes_written, total_bytes)`` while
    the weight files are written (from the writing threads; it must not change the model; what it
    raises is raised after the save). ``format``, ``storage_options`` (a URL): see :func:`load`.
    """
    storage = _storage_pairs(f, storage_options)
    model = _as_model(proto)
    path = _file_path(f)
    serializer = _serializer(format, path)
    _check_align(align, save_as_external_data, serializer)
    if save_as_external_data:
        if location is not None and os.path.isabs(location):
            raise ValueError("location must be a relative path that is relative to the model path.")
        if path is None:
            raise ValueError("save_as_external_data needs a path or a file object with a name")
    if isinstance(f, (str, os.PathLike)) and _is_binary(serializer):
        if save_as_external_data:
            external = _external_options(path, location, size_threshold, all_tensors_to_one_file,
                                         convert_attribute, max_file_size, alignment, checksum,
                                         source_dir)
            _native.save_path(model, path, external=external, key=_key_bytes(key),
                              num_threads=num_threads, progress=progress, storage_options=storage)
            _mark_as_saved(model, path, key, storage)
            return
        if _native.has_marked_external_bytes(model):
            external_data_helper.write_external_data_tensors(model, os.path.dirname(path))
        _native.save_path(model, path, external=None, key=_key_bytes(key), num_threads=num_threads,
                          align=align, align_min=size_threshold, storage_options=storage)
        return
    # A file object, or a text format: onnx's sequence.
    if save_as_external_data:
        external_data_helper.convert_model_to_external_data(
            model, all_tensors_to_one_file, location, size_threshold, convert_attribute)
    if path is not None and _native.has_marked_external_bytes(model):
        external_data_helper.write_external_data_tensors(model, os.path.dirname(path))
    _write_all(f, _serialized(model, serializer, key, num_threads, align, size_threshold))


def _check_align(align: Optional[int], save_as_external_data: bool, serializer: Any) -> None:
    """``align`` applies to single-file saves in the protobuf format."""
    if align is None:
        return
    if save_as_external_data:
        raise ValueError("align aligns the payloads of a single-file save; the weight files of "
                         "save_as_external_data are aligned by alignment")
    if not _is_binary(serializer):
        raise ValueError(f"align applies to the protobuf format, not {serializer.supported_format}")


def _serialized(model: ModelProto, serializer: Any, key: Any, num_threads: Optional[int],
                align: Optional[int] = None, align_min: Optional[int] = None) -> bytes:
    """The model in the serializer's format (encrypted with ``key``: protobuf only; payloads of
    at least ``align_min`` bytes aligned to ``align``)."""
    if _is_binary(serializer):
        return _native.serialize(model, key=_key_bytes(key), num_threads=num_threads, align=align,
                                 align_min=align_min)
    if key is not None:
        raise ValueError(f"key encrypts the protobuf format only, not {serializer.supported_format}")
    return serializer.serialize_proto(model)


save_model = save


def write_model(
    proto: Union[ModelProto, bytes],
    f: Union[PathLike, IO[bytes]],
    format: Optional[str] = None,  # noqa: A002
    *,
    save_as_external_data: bool = False,
    all_tensors_to_one_file: bool = True,
    location: Optional[str] = None,
    size_threshold: int = 1024,
    convert_attribute: bool = False,
    max_file_size: Optional[int] = None,
    alignment: Optional[int] = None,
    checksum: bool = False,
    key: Any = None,
    num_threads: Optional[int] = None,
    source_dir: Optional[PathLike] = None,
    progress: Optional[Callable[[int, int], Any]] = None,
    align: Optional[int] = None,
    storage_options: Optional[Dict[str, Any]] = None,
) -> None:
    """Saves a model as :func:`save` does (``align``, ``storage_options`` too) but never changes
    the model object.

    With ``save_as_external_data`` (a path only) the model stays as it was: tensors keep their
    bytes. Without it, a tensor the model marks external while holding its bytes is a
    ``ValueError`` (writing its weight file would mean recording where it went: use
    :func:`save`, or ``save_as_external_data``), so no saved model references a file that was
    not written. An absolute ``location`` is reduced to its file name.
    """
    storage = _storage_pairs(f, storage_options)
    model = _as_model(proto)
    path = _file_path(f)
    serializer = _serializer(format, path)
    _check_align(align, save_as_external_data, serializer)
    if save_as_external_data:
        if not isinstance(f, (str, os.PathLike)) or not _is_binary(serializer):
            raise ValueError("save_as_external_data needs a path and the protobuf format")
        external = _external_options(path, location, size_threshold, all_tensors_to_one_file,
                                     convert_attribute, max_file_size, alignment, checksum,
                                     source_dir)
        _native.save_path(model, path, external=external, key=_key_bytes(key),
                          num_threads=num_threads, progress=progress, storage_options=storage)
        return
    for t in (external_data_helper._get_all_tensors(model)
              if _native.has_marked_external_bytes(model) else ()):
        if external_data_helper.uses_external_data(t) and t.HasField("raw_data"):
            where = external_data_helper.ExternalDataInfo(t).location
            raise ValueError(
                f"tensor {t.name!r} is marked external (location {where!r}) and holds its bytes: "
                "write_model does not write weight files for such marks; use save (which writes "
                "them, as onnx does) or save_as_external_data=True")
    if isinstance(f, (str, os.PathLike)) and _is_binary(serializer):
        _native.save_path(model, path, external=None, key=_key_bytes(key), num_threads=num_threads,
                          align=align, align_min=size_threshold, storage_options=storage)
        return
    _write_all(f, _serialized(model, serializer, key, num_threads, align, size_threshold))


def _as_model(proto: Any) -> ModelProto:
    if isinstance(proto, (bytes, bytearray, memoryview)):
        return load_from_string(proto, load_external_data=False)
    if isinstance(proto, ModelProto):
        return proto
    if getattr(getattr(proto, "DESCRIPTOR", None), "full_name", None) == "onnx.ModelProto":
        return from_onnx(proto)  # the onnx package's model (a copy: see to_onnx)
    raise TypeError(f"expected onnx_light.ModelProto, got "
                    f"{type(proto).__module__}.{type(proto).__qualname__} (an onnx.ModelProto or "
                    "the bytes of a model are taken too)")


# onnx's size threshold counts sys.getsizeof(raw_data): the length plus this.
_BYTES_OBJECT_OVERHEAD = 33


def _external_options(path, location, size_threshold, all_tensors_to_one_file, convert_attribute,
                      max_file_size, alignment, checksum, source_dir) -> dict:
    return dict(
        location=location,
        size_threshold=max(size_threshold - _BYTES_OBJECT_OVERHEAD, 0),
        all_tensors_to_one_file=all_tensors_to_one_file,
        convert_attribute=convert_attribute,
        max_file_size=max_file_size,
        alignment=alignment,
        checksum=checksum,
        source_dir=os.fspath(source_dir) if source_dir is not None else os.path.dirname(path),
    )


def _mark_as_saved(model: ModelProto, path: str, key: Any, storage: Optional[list]) -> None:
    """Makes the tensors that a save put in weight files external references without their
    bytes, with the entries the saved model has (what onnx's save leaves in memory)."""
    saved = _native.load_path(path, storage_options=storage,
                              **_native_opts(False, None, True, None, key, None))
    _native.adopt_external_references(model, saved)


def save_tensor(proto: TensorProto, f: Union[PathLike, IO[bytes]], format: Optional[str] = None) -> None:  # noqa: A002
    """Saves a serialized TensorProto to a path or a file object (``onnx.save_tensor``)."""
    data = _serializer(format, f).serialize_proto(proto)
    _write_all(f, data)


# ---- NumPy, DLPack and onnx interoperability

from . import external_data_helper, helper, numpy_helper, serialization  # noqa: E402
from .external_data_helper import (  # noqa: E402
    convert_model_to_external_data,
    write_external_data_tensors,
)


def _tensor_dlpack(self: TensorProto, *, stream: Any = None, max_version: Any = None,
                   dl_device: Any = None, copy: Optional[bool] = None) -> Any:
    """DLPack capsule of the tensor (zero-copy and read-only for ``raw_data``)."""
    if dl_device is not None and tuple(dl_device) != (1, 0):
        raise BufferError("onnx_light tensors live on the CPU")
    return _native.tensor_dlpack(self, max_version=max_version, copy=copy)


def _tensor_dlpack_device(self: TensorProto) -> tuple:
    return (1, 0)


TensorProto.__dlpack__ = _tensor_dlpack
TensorProto.__dlpack_device__ = _tensor_dlpack_device


# ---- thin wrappers of the library's operations

def load_external_data_for_model(model: ModelProto, base_dir: PathLike, *, no_copy: bool = False,
                                 verify_checksums: bool = False) -> int:
    """Reads the external data of ``model`` into it, in place (``onnx.load_external_data_for_model``).

    Locations obey the library's path rules (no absolute paths, no ``..``, no links out of
    ``base_dir``); ranges are checked against the files. Returns the number of tensors loaded.
    """
    return _native.load_external_data_for_model(
        model, os.fspath(base_dir), no_copy=no_copy, verify_checksums=verify_checksums
    )


def check_external_data(model: ModelProto, base_dir: PathLike, *, verify_checksums: bool = False) -> dict:
    """Checks every external reference without loading anything; returns a report dict with
    ``tensors``, ``bytes``, ``files``, ``checksums_verified`` and ``problems`` (messages)."""
    return _native.check_external_data(model, os.fspath(base_dir), verify_checksums=verify_checksums)


def consolidate_tensors(model: ModelProto, *, threshold: int = 0, alignment: int = 64) -> int:
    """Moves every tensor payload of at least ``threshold`` bytes into one buffer, at
    ``alignment``-aligned offsets; returns the buffer's size."""
    return _native.consolidate_tensors(model, threshold=threshold, alignment=alignment)


def encrypt_file(input: PathLike, output: PathLike, key: Any) -> int:
    """Encrypts a file (e.g. an .onnx or a weight file) with a passphrase."""
    return _native.encrypt_file(os.fspath(input), os.fspath(output), _key_bytes(key))


def decrypt_file(input: PathLike, output: PathLike, key: Any) -> int:
    """Decrypts a file encrypted by onnx_light; raises ``WrongKeyError`` for a wrong key."""
    return _native.decrypt_file(os.fspath(input), os.fspath(output), _key_bytes(key))


def load_params(f: Union[PathLike, bytes]) -> list:
    """The tensors of a TVM/CVM parameter dictionary (a path or its bytes)."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            f = fh.read()
    return _native.load_params(f)


def save_params(model: ModelProto, names: Optional[list] = None) -> bytes:
    """The initializers of ``model`` (all, or those named) as a parameter dictionary."""
    return _native.save_params(model, names)


def load_with_prepacked(path: PathLike, *, no_copy: bool = False) -> tuple:
    """Loads a model and the ONNX Runtime pre-packed blobs of its weight files: returns
    ``(model, {(initializer, key): [numpy uint8 array, ...]})`` (arrays are zero-copy)."""
    import numpy as np

    model, blobs = _native.load_with_prepacked(os.fspath(path), no_copy=no_copy)
    return model, {(i, k): [np.asarray(b) if len(b) else np.zeros(0, np.uint8) for b in bufs]
                   for i, k, bufs in blobs}


# ---- the onnx package

_PROTOBUF_LIMIT = 2**31 - 1
_MARK = "onnx_light:"


def _marked_tensors(proto: Any) -> list:
    from onnx.external_data_helper import _get_all_tensors

    out = []
    for t in _get_all_tensors(proto):
        if len(t.external_data) == 1 and t.external_data[0].value.startswith(_MARK):
            out.append((int(t.external_data[0].value[len(_MARK):]), t))
    return out


def to_onnx(model: ModelProto, *, _limit: int = _PROTOBUF_LIMIT) -> Any:
    """The model as an ``onnx.ModelProto`` (needs the onnx package).

    Models over 2 GB (which protobuf cannot parse) are handed over without their large
    payloads, which are then set tensor by tensor, so any size works.
    """
    import onnx

    if model.ByteSize() <= _limit:
        return onnx.ModelProto.FromString(model.SerializeToString())
    import numpy as np

    data, buffers = _native.split_large_payloads(model, 1024)
    proto = onnx.ModelProto.FromString(data)
    for i, t in _marked_tensors(proto):
        del t.external_data[:]
        t.ClearField("data_location")
        t.raw_data = np.asarray(buffers[i]).tobytes()
    return proto


def from_onnx(proto: Any, *, _limit: int = _PROTOBUF_LIMIT) -> ModelProto:
    """An ``onnx.ModelProto`` as an onnx_light model (a copy); models over 2 GB work too."""
    if proto.ByteSize() <= _limit:
        return load_from_string(proto.SerializeToString(), load_external_data=False)
    from onnx.external_data_helper import _get_all_tensors

    moved = []
    for t in _get_all_tensors(proto):
        if t.HasField("raw_data") and len(t.raw_data) >= 1024:
            raw = t.raw_data
            location = t.data_location if t.HasField("data_location") else None
            t.ClearField("raw_data")
            t.data_location = TensorProto.EXTERNAL
            t.external_data.add(key="location", value=f"{_MARK}{len(moved)}")
            moved.append((t, raw, location))
    try:
        ours = load_from_string(proto.SerializeToString(), load_external_data=False)
    finally:
        for t, raw, location in moved:
            del t.external_data[-1]
            if location is None:
                t.ClearField("data_location")
            else:
                t.data_location = location
            t.raw_data = raw
    from . import numpy_helper as _nh  # noqa: F401

    for t in _iter_tensors(ours):
        if len(t.external_data) == 1 and t.external_data[0].value.startswith(_MARK):
            i = int(t.external_data[0].value[len(_MARK):])
            del t.external_data[:]
            t.ClearField("data_location")
            if moved[i][2] is not None:
                t.data_location = moved[i][2]
            t.raw_data = moved[i][1]
    return ours


def _iter_tensors(model: ModelProto):
    """Every tensor of a model: initializers, sparse initializers, attributes, subgraphs,
    functions, training graphs."""

    def graph(g):
        yield from g.initializer
        for s in g.sparse_initializer:
            yield s.values
            yield s.indices
        for n in g.node:
            yield from node(n)

    def node(n):
        for a in n.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            if a.HasField("g"):
                yield from graph(a.g)
            for g in a.graphs:
                yield from graph(g)
            if a.HasField("sparse_tensor"):
                yield a.sparse_tensor.values
                yield a.sparse_tensor.indices
            for s in a.sparse_tensors:
                yield s.values
                yield s.indices

    if model.HasField("graph"):
        yield from graph(model.graph)
    for f in model.functions:
        for n in f.node:
            yield from node(n)
    for ti in model.training_info:
        if ti.HasField("initialization"):
            yield from graph(ti.initialization)
        if ti.HasField("algorithm"):
            yield from graph(ti.algorithm)


def _model_to_onnx(self: ModelProto) -> Any:
    """The model as an ``onnx.ModelProto`` (see :func:`to_onnx`)."""
    return to_onnx(self)


ModelProto.to_onnx = _model_to_onnx


def info(f: Union[PathLike, ModelProto]) -> str:
    """A summary of a model: IR version, producer, opsets, graph inputs/outputs, node counts
    by operator, initializers and their bytes (the file is mapped, not read, for a path)."""
    m = load(f, no_copy=True, load_external_data=False) if not isinstance(f, ModelProto) else f
    g = m.graph
    ops: dict = {}
    for n in g.node:
        key = f"{n.domain}::{n.op_type}" if n.domain else n.op_type
        ops[key] = ops.get(key, 0) + 1
    # (the length of each tensor's bytes, read in place: `raw_data` would copy them)
    init_bytes = sum(len(_native.tensor_raw_buffer(t) or ()) for t in g.initializer)
    external = sum(1 for t in g.initializer if t.data_location == TensorProto.EXTERNAL)
    lines = [
        f"ir_version: {m.ir_version}",
        f"producer: {m.producer_name} {m.producer_version}".rstrip(),
        "opsets: " + ", ".join(f"{o.domain or 'ai.onnx'}:{o.version}" for o in m.opset_import),
        f"graph: {g.name!r}, {len(g.node)} nodes, {len(g.input)} inputs, {len(g.output)} outputs",
        f"initializers: {len(g.initializer)} ({init_bytes} bytes inline, {external} external)",
        f"functions: {len(m.functions)}",
        "operators: " + ", ".join(f"{k} x{v}" for k, v in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
    ]
    return "\n".join(lines)


# ---- onnx's short repr of models, graphs and functions (their text can be megabytes)

def _opsets_repr(protos: Any) -> str:
    return repr({p.domain: p.version for p in protos})


def _model_repr(self: ModelProto) -> str:
    parts = [f"ir_version={self.ir_version}"]
    if self.opset_import:
        parts.append(f"opset_import={_opsets_repr(self.opset_import)}")
    for name in ("domain", "producer_name", "producer_version"):
        if getattr(self, name):
            parts.append(f"{name}='{getattr(self, name)}'")
    parts.append(f"graph={self.graph!r}")
    if self.functions:
        parts.append(f"functions=<{len(self.functions)} functions>")
    return f"ModelProto({', '.join(parts)})"


def _counts(self: Any, fields: list) -> str:
    return "".join(f", {field}=<{len(getattr(self, field))} {label}>"
                   for field, label in fields if len(getattr(self, field)))


def _graph_repr(self: GraphProto) -> str:
    return f"GraphProto('{self.name}'" + _counts(self, [
        ("input", "inputs"), ("output", "outputs"), ("initializer", "initializers"),
        ("node", "nodes"), ("value_info", "value_info")]) + ")"


def _function_repr(self: FunctionProto) -> str:
    out = f"FunctionProto('{self.name}'"
    if self.domain:
        out += f", domain='{self.domain}'"
    if self.overload:
        out += f", overload='{self.overload}'"
    if self.opset_import:
        out += f", opset_import={_opsets_repr(self.opset_import)}"
    out += _counts(self, [("input", "inputs"), ("output", "outputs")])
    if self.attribute:
        out += f", attribute={self.attribute}"
    return out + _counts(self, [("node", "nodes")]) + ")"


ModelProto.__repr__ = _model_repr
GraphProto.__repr__ = _graph_repr
FunctionProto.__repr__ = _function_repr


# ---- onnx's modules

from . import checker, defs, inliner, parser, printer, shape_inference, version_converter  # noqa: E402

# Modules that run the onnx package's Python code: imported on first use (they need onnx).
_ONNX_PYTHON_MODULES = ("compose", "reference", "utils")


def __getattr__(name: str) -> Any:
    if name in _ONNX_PYTHON_MODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'onnx_light' has no attribute {name!r}")


__all__ = [
    # onnx's names
    "AttributeProto", "DeviceConfigurationProto", "EXPERIMENTAL", "FunctionProto", "GraphProto",
    "IR_VERSION", "IntIntListEntryProto", "ONNX_ML", "MapProto", "ModelProto", "NodeDeviceConfigurationProto",
    "NodeProto", "OperatorSetIdProto", "OperatorStatus", "OptionalProto", "STABLE",
    "SequenceProto", "ShardedDimProto", "ShardingSpecProto", "SimpleShardedDimProto",
    "SparseTensorProto", "StringStringEntryProto", "TensorAnnotation", "TensorProto",
    "TensorShapeProto", "TrainingInfoProto", "TypeProto", "ValueInfoProto", "Version",
    *[k for k, _ in Version.items() if k.startswith("IR_VERSION_")],
    "checker", "compose", "convert_model_to_external_data", "defs", "external_data_helper",
    "helper", "inliner", "load", "load_external_data_for_model", "load_from_string", "load_model",
    "load_model_from_string", "load_tensor", "load_tensor_from_string", "numpy_helper", "parser",
    "printer",
    "reference", "save", "save_model", "save_tensor", "serialization", "shape_inference",
    "utils", "version_converter", "write_external_data_tensors",
    # onnx_light's own
    "DecodeError", "EncryptionError", "EnumTypeWrapper", "ExternalDataError",
    "InvalidArgumentError", "LimitExceededError", "Message", "ParamsError", "PathRefusedError",
    "RepeatedCompositeContainer", "RepeatedScalarContainer", "UnsupportedError", "WrongKeyError",
    "check_external_data", "consolidate_tensors", "decrypt_file", "descriptor", "encrypt_file",
    "from_onnx", "info", "load_params", "load_with_prepacked", "memory_held_for_reuse",
    "memory_reuse_limit", "release_memory_held_for_reuse", "save_params",
    "set_memory_reuse_limit", "to_onnx", "write_model",
]


def __dir__() -> list:
    return sorted(set(__all__) | {"__version__"})
