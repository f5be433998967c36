//! Model and tensor entry points (C++ `LoadModel`, `SaveModel`, ...): load / save / serialize
//! models and standalone tensors.

use std::ffi::c_char;

use super::accessors::{OnnxlModelProto, OnnxlTensorProto};
use super::buffer::OnnxlBuffer;
use super::handle::{Castable, c_path, check_out, into_raw, try_ref, write_out};
use super::message::{msg_serialize, parse_bytes};
use super::options::{OnnxlParseOptions, OnnxlSerializeOptions, load_options, serialize_options};
use super::panic::{ffi_status, ffi_value};
use super::status::OnnxlStatus;
use crate::proto::{Message, ModelProto, TensorProto};
use crate::{codec, package};

/// # Safety
/// `path` NULL or NUL-terminated; `opts` NULL or valid; `out` NULL or writable.
unsafe fn load_file<M: Message, C: Castable<Rust = M>>(
    path: *const c_char,
    opts: *const OnnxlParseOptions,
    out: *mut *mut C,
) -> OnnxlStatus {
    ffi_status(|| {
        check_out(out, "out")?;
        // SAFETY: `path` is NULL or NUL-terminated (contract).
        let path = unsafe { c_path(path, "path") }?;
        // SAFETY: `opts` is NULL or valid (contract).
        let opts = unsafe { load_options(opts) }?;
        let m: M = package::parse_from_file(&path, &opts)?;
        // SAFETY: `out` checked above.
        unsafe { write_out(out, into_raw::<C>(m)) };
        Ok(())
    })
}

/// # Safety
/// `m` NULL or live; `path` NULL or NUL-terminated; `opts` NULL or valid.
unsafe fn save_file<M: Message, C: Castable<Rust = M>>(
    m: *const C,
    path: *const c_char,
    opts: *const OnnxlSerializeOptions,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { try_ref(m, "message") }?;
        // SAFETY: forwarded contract.
        let path = unsafe { c_path(path, "path") }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { serialize_options(opts) }?;
        Ok(codec::save_to_file(m, &path, &opts)?)
    })
}

/// Loads a model file (C++ `LoadModel`): memory-mapped or read per `opts->file_load_mode`. On
/// success writes a new model to `*out` (untouched on failure).
///
/// Ownership: the caller owns `*out` and frees it with `onnxl_model_proto_free`. With
/// `opts->no_copy`, tensor bytes borrow from the file's mapping (or read buffer) through owner
/// tokens, so they stay valid after the file is closed, as long as the model (or a retained
/// `OnnxlOwner`) lives. `opts` may be NULL (defaults).
///
/// # Safety
/// `path` is NULL or a NUL-terminated path; `opts` NULL or valid options; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_load_model(
    path: *const c_char,
    opts: *const OnnxlParseOptions,
    out: *mut *mut OnnxlModelProto,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { load_file::<ModelProto, _>(path, opts, out) }
}

/// Parses a model from `len` bytes at `data` (C++ `LoadModelFromString`). On success writes a new
/// model to `*out` (untouched on failure).
///
/// Ownership: the caller owns `*out` (free with `onnxl_model_proto_free`). Without `no_copy` the
/// bytes are copied and may be freed after the call. With `opts->no_copy`, large tensor payloads
/// BORROW `data` without an owner token (like the C++ no-copy `StringStream`): the caller must
/// keep `data` valid and unchanged while the model, or any pointer taken from it, is used, and
/// `onnxl_tensor_proto_raw_data_owner` cannot extend that lifetime. `opts` may be NULL.
///
/// # Safety
/// `data..data+len` readable (NULL only with `len` 0) and, with `no_copy`, kept alive as above;
/// `opts` NULL or valid; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_load_model_from_bytes(
    data: *const u8,
    len: usize,
    opts: *const OnnxlParseOptions,
    out: *mut *mut OnnxlModelProto,
) -> OnnxlStatus {
    ffi_status(|| {
        check_out(out, "out")?;
        // SAFETY: forwarded contract.
        let m = unsafe { parse_bytes::<ModelProto>(data, len, opts) }?;
        // SAFETY: `out` checked above.
        unsafe { write_out(out, into_raw::<OnnxlModelProto>(m)) };
        Ok(())
    })
}

/// Saves `model` to `path` atomically (C++ `SaveModel`): a temporary file beside `path` is
/// written, synced and renamed over it; on failure `path` is left as it was.
///
/// Ownership: borrows `model` for the call only. `opts` may be NULL (defaults).
///
/// # Safety
/// `model` NULL or live; `path` NULL or NUL-terminated; `opts` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_save_model(
    model: *const OnnxlModelProto,
    path: *const c_char,
    opts: *const OnnxlSerializeOptions,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { try_ref(model, "message") }?;
        // SAFETY: forwarded contract.
        let path = unsafe { c_path(path, "path") }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { serialize_options(opts) }?;
        // (a URL too, with the `remote` feature)
        Ok(package::save_model(m, &path, &opts)?)
    })
}

/// Serializes `model` into a new buffer (byte-identical to protobuf's `SerializeToString`). On
/// success writes the buffer to `*out` (untouched on failure).
///
/// Ownership: the caller owns `*out` and frees it with `onnxl_buffer_free`. `opts` may be NULL.
///
/// # Safety
/// `model` NULL or live; `opts` NULL or valid; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_serialize_model(
    model: *const OnnxlModelProto,
    opts: *const OnnxlSerializeOptions,
    out: *mut *mut OnnxlBuffer,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { msg_serialize(model, opts, out) }
}

/// Loads a file holding one serialized `TensorProto` (e.g. an onnx test-data `.pb` file), like
/// `onnxl_load_model`.
///
/// Ownership: the caller owns `*out` (free with `onnxl_tensor_proto_free`); `no_copy` as for
/// `onnxl_load_model`. `opts` may be NULL.
///
/// # Safety
/// `path` NULL or NUL-terminated; `opts` NULL or valid; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_load_tensor_proto(
    path: *const c_char,
    opts: *const OnnxlParseOptions,
    out: *mut *mut OnnxlTensorProto,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { load_file::<TensorProto, _>(path, opts, out) }
}

/// Saves a standalone `TensorProto` to `path` atomically, like `onnxl_save_model`.
///
/// Ownership: borrows `tensor` for the call only. `opts` may be NULL.
///
/// # Safety
/// `tensor` NULL or live; `path` NULL or NUL-terminated; `opts` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_save_tensor_proto(
    tensor: *const OnnxlTensorProto,
    path: *const c_char,
    opts: *const OnnxlSerializeOptions,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { save_file::<TensorProto, _>(tensor, path, opts) }
}

/// The number of tensors of `model` whose bytes a no-copy load copied (instead of borrowing
/// them from the file or buffer) because their address there was not a multiple of
/// `OnnxlParseOptions.alignment`. 0 for copy-mode loads (every payload is placed aligned), and
/// on error (NULL `model`; the last error says so).
///
/// # Safety
/// `model` NULL or a live model handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_model_realigned_tensors(model: *const OnnxlModelProto) -> usize {
    ffi_value(0, || {
        // SAFETY: forwarded contract.
        let m = unsafe { try_ref(model, "model") }?;
        Ok(codec::realigned_tensors(m))
    })
}

/// The number of tensors of `model` whose `raw_data` is not empty and does not start at a
/// multiple of `alignment` (a power of two; 0/1 count nothing). Loads place or copy every
/// payload at `OnnxlParseOptions.alignment`, except parses of caller bytes without an owner
/// (`onnxl_parse_*` no-copy from a caller's buffer), where the caller's layout decides: count
/// them here. 0 on error (NULL `model`; the last error says so).
///
/// # Safety
/// `model` NULL or a live model handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_model_misaligned_tensors(
    model: *const OnnxlModelProto,
    alignment: u64,
) -> usize {
    ffi_value(0, || {
        // SAFETY: forwarded contract.
        let m = unsafe { try_ref(model, "model") }?;
        Ok(codec::misaligned_tensors(m, alignment))
    })
}

/// Frees the `std::string` copies of tensor payloads (`raw_data`) that const reads through the
/// C++ classes made, in every tensor of `m` (initializers, attributes, subgraphs, functions).
/// A const read of a payload that was not set or parsed through C++ (`raw_data()`, e.g. by
/// onnx's checker or shape inference) copies it into a `std::string` that lives as long as the
/// model, so that the reference it returns stays valid; after such a call on a large model this
/// gives the memory back. The model is unchanged otherwise.
///
/// # Safety
/// `m` is NULL or a live model that no other thread uses during the call, and no reference a
/// C++ getter returned for one of its payloads is used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_model_proto_release_cxx_copies(
    m: *mut OnnxlModelProto,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe {
        super::handle::write(m, |m: &mut ModelProto| {
            m.visit_tensors_mut(&mut |t| {
                if let Some(d) = t.raw_data.as_mut() {
                    d.release_cxx_copy();
                }
            });
            Ok(())
        })
    }
}
