//! Parameter dictionaries (the TVM / CVM params format) through the C ABI: save a model's
//! initializers, load a params file into a model's initializers.

use std::ffi::{CStr, c_char};

use super::accessors::OnnxlModelProto;
use super::buffer::{OnnxlBuffer, new_buffer};
use super::handle::{c_bytes, c_path, check_out, try_mut, try_ref, write_out};
use super::panic::ffi_status;
use super::status::{FfiError, OnnxlStatus};
use crate::params::{self, ParamsLoadOptions};

/// The chosen names: NULL with `n` 0 means every initializer.
///
/// # Safety
/// `names` is NULL or points at `n` NUL-terminated strings.
unsafe fn c_names<'a>(
    names: *const *const c_char,
    n: usize,
) -> Result<Option<Vec<&'a str>>, FfiError> {
    if names.is_null() && n == 0 {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    let ptrs = unsafe { c_bytes(names, n, "names") }?;
    ptrs.iter()
        .enumerate()
        .map(|(i, &p)| {
            if p.is_null() {
                return Err(FfiError::null(&format!("names[{i}]")));
            }
            // SAFETY: a NUL-terminated string (contract).
            unsafe { CStr::from_ptr(p) }
                .to_str()
                .map_err(|_| FfiError::invalid(format!("names[{i}] is not UTF-8")))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Saves initializers of `model` as a parameter dictionary (TVM/CVM params format: names, then
/// DLPack-typed arrays; see docs/dlpack-params.md) into a new buffer written to `*out`.
///
/// `names`: `n_names` NUL-terminated UTF-8 names chosen in that order, or NULL with `n_names` 0
/// for every initializer in model order. Each tensor needs a numeric type of the DLPack map and
/// its data in `raw_data` or typed fields (external data loaded); names must be UTF-8, non-empty
/// and unique. Errors: `ONNXL_STATUS_INVALID_ARGUMENT` (unknown name, bad tensor),
/// `ONNXL_STATUS_UNSUPPORTED` (type without a DLPack code, external data not loaded).
///
/// Ownership: the caller owns `*out` (free with `onnxl_buffer_free`).
///
/// # Safety
/// `model` NULL or live; `names` NULL or `n_names` NUL-terminated strings; `out` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_save_params(
    model: *const OnnxlModelProto,
    names: *const *const c_char,
    n_names: usize,
    out: *mut *mut OnnxlBuffer,
) -> OnnxlStatus {
    ffi_status(|| {
        crate::error::require_feature(cfg!(feature = "params"), "params")?;
        check_out(out, "out")?;
        // SAFETY: forwarded contract.
        let model = unsafe { try_ref(model, "model") }?;
        // SAFETY: forwarded contract.
        let names = unsafe { c_names(names, n_names) }?;
        let bytes = params::save_params(model, names.as_deref())?;
        // SAFETY: `out` checked above.
        unsafe { write_out(out, new_buffer(bytes)) };
        Ok(())
    })
}

/// As `onnxl_save_params`, into the file `path`, atomically (a temporary file beside `path`,
/// synced and renamed over it; on failure `path` is left as it was).
///
/// # Safety
/// `model` NULL or live; `path` NULL or NUL-terminated; `names` as for `onnxl_save_params`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_save_params_file(
    model: *const OnnxlModelProto,
    path: *const c_char,
    names: *const *const c_char,
    n_names: usize,
) -> OnnxlStatus {
    ffi_status(|| {
        crate::error::require_feature(cfg!(feature = "params"), "params")?;
        // SAFETY: forwarded contract.
        let model = unsafe { try_ref(model, "model") }?;
        // SAFETY: forwarded contract.
        let path = unsafe { c_path(path, "path") }?;
        // SAFETY: forwarded contract.
        let names = unsafe { c_names(names, n_names) }?;
        params::save_params_file(model, &path, names.as_deref())?;
        Ok(())
    })
}

/// Loads a parameter dictionary (`len` bytes at `data`, copied) into `model`'s initializers: an
/// initializer with the same name gets the array's dims, type and bytes (its typed fields and
/// external data references are cleared); arrays with new names are appended as initializers.
/// Load into a fresh `onnxl_model_proto_new()` to get the arrays as standalone tensors.
///
/// Every check of the format runs before `model` is changed: a malformed dictionary (bad magic,
/// non-zero reserved word, name and array counts differ, non-CPU device, bad ndim or type, byte
/// size that does not match the shape, truncated or trailing bytes, bad or duplicate names)
/// fails with `ONNXL_STATUS_PARSE` and a message naming the byte offset, leaving `model` as it
/// was.
///
/// # Safety
/// `model` NULL or a live model used by no one else during the call; `data..data+len` readable
/// (NULL only with `len` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_load_params_into_model(
    model: *mut OnnxlModelProto,
    data: *const u8,
    len: usize,
) -> OnnxlStatus {
    ffi_status(|| {
        crate::error::require_feature(cfg!(feature = "params"), "params")?;
        // SAFETY: forwarded contract.
        let bytes = unsafe { c_bytes(data, len, "data") }?;
        // SAFETY: forwarded contract.
        let model = unsafe { try_mut(model, "model") }?;
        params::load_params_into_model(model, bytes, &ParamsLoadOptions::default())?;
        Ok(())
    })
}

/// As `onnxl_load_params_into_model`, from the file `path` (read through a memory map; the
/// bytes are copied into the model, so the file may change or go away afterwards).
///
/// # Safety
/// `model` NULL or a live model used by no one else during the call; `path` NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_load_params_file_into_model(
    model: *mut OnnxlModelProto,
    path: *const c_char,
) -> OnnxlStatus {
    ffi_status(|| {
        crate::error::require_feature(cfg!(feature = "params"), "params")?;
        // SAFETY: forwarded contract.
        let path = unsafe { c_path(path, "path") }?;
        // SAFETY: forwarded contract.
        let model = unsafe { try_mut(model, "model") }?;
        params::load_params_file_into_model(model, &path, &ParamsLoadOptions::default())?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::status::last_error;
    use crate::proto::ModelProto;

    #[test]
    fn save_and_load_through_the_c_abi() {
        let mut m = ModelProto::new();
        let t = m.mutable_graph().add_initializer();
        t.set_name("w");
        t.set_data_type(1);
        t.add_dims(2);
        t.set_raw_data(vec![0u8, 0, 128, 63, 0, 0, 0, 64]);
        let h: *mut OnnxlModelProto = (&mut m as *mut ModelProto).cast();
        let mut buf: *mut OnnxlBuffer = std::ptr::null_mut();
        let w = c"w".as_ptr();
        let missing = c"nope".as_ptr();
        // SAFETY: live handles, valid strings and out-pointers.
        unsafe {
            assert_eq!(onnxl_save_params(h, &w, 1, &mut buf), OnnxlStatus::Ok);
            let bytes = (*buf.cast::<Vec<u8>>()).clone();
            crate::ffi::buffer::onnxl_buffer_free(buf);
            assert_eq!(
                onnxl_save_params(h, &missing, 1, &mut buf),
                OnnxlStatus::InvalidArgument
            );
            assert!(last_error().contains("nope"), "{}", last_error());
            assert_eq!(
                onnxl_save_params(h, std::ptr::null(), 1, &mut buf),
                OnnxlStatus::NullPointer
            );
            let mut fresh = ModelProto::new();
            let f: *mut OnnxlModelProto = (&mut fresh as *mut ModelProto).cast();
            assert_eq!(
                onnxl_load_params_into_model(f, bytes.as_ptr(), bytes.len()),
                OnnxlStatus::Ok
            );
            assert_eq!(
                fresh.graph().initializer[0].raw_data(),
                m.graph().initializer[0].raw_data()
            );
            assert_eq!(
                onnxl_load_params_into_model(f, bytes.as_ptr(), bytes.len() - 1),
                OnnxlStatus::Parse
            );
            assert!(last_error().contains("truncated"), "{}", last_error());
        }
    }
}
