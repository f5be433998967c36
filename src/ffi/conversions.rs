//! In-memory conversions of a model's tensor bytes through the C ABI: the C++ library's
//! `TensorBufferOptions` (`OnnxlTensorBufferOptions`) and `ConsolidateTensorsToBuffer`, and
//! external data converted without writing (`ConvertModelToExternalData`,
//! `PopulateExternalData`, `ClearExternalData`).

use std::ffi::c_char;

use super::accessors::OnnxlModelProto;
use super::handle::{c_path, try_mut, write_out};
use super::options::{OnnxlParseOptions, flag, load_options, opt_path, read_versioned};
use super::owner::{OnnxlOwner, new_token};
use super::panic::ffi_status;
use super::status::{FfiError, OnnxlStatus};
use crate::codec::TensorBufferOptions;
use crate::external::{self, ConvertExternalOptions};

/// Options of operations that place tensor bytes in one buffer (C++ `TensorBufferOptions`).
/// Get the defaults with `onnxl_tensor_buffer_options_default()`; a NULL pointer means
/// defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OnnxlTensorBufferOptions {
    /// `sizeof(OnnxlTensorBufferOptions)` as compiled by the caller (set by the default
    /// function).
    pub struct_size: usize,
    /// Tensors with fewer payload bytes than this are left alone. Default 0.
    pub raw_data_threshold: u64,
    /// The buffer's start and every tensor offset in it are multiples of this: 0/1 = packed,
    /// otherwise a power of two. Default 0.
    pub alignment: u64,
}

/// Every published `struct_size` of `OnnxlTensorBufferOptions`.
const TENSOR_BUFFER_OPTIONS_SIZES: &[usize] = &[size_of::<OnnxlTensorBufferOptions>()];

/// The default tensor buffer options (the C++ library's), with `struct_size` set.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_tensor_buffer_options_default() -> OnnxlTensorBufferOptions {
    let d = TensorBufferOptions::default();
    OnnxlTensorBufferOptions {
        struct_size: size_of::<OnnxlTensorBufferOptions>(),
        raw_data_threshold: d.raw_data_threshold,
        alignment: d.alignment,
    }
}

/// The tensor buffer options behind a C pointer (NULL = defaults), validated.
///
/// # Safety
/// `p` is NULL or points at options whose `struct_size` bytes are readable.
pub(crate) unsafe fn tensor_buffer_options(
    p: *const OnnxlTensorBufferOptions,
) -> Result<TensorBufferOptions, FfiError> {
    if p.is_null() {
        return Ok(TensorBufferOptions::default());
    }
    // SAFETY: non-NULL, `struct_size` bytes readable (contract).
    let o = unsafe {
        read_versioned(
            p,
            onnxl_tensor_buffer_options_default(),
            TENSOR_BUFFER_OPTIONS_SIZES,
            "OnnxlTensorBufferOptions",
        )
    }?;
    let opts = TensorBufferOptions {
        raw_data_threshold: o.raw_data_threshold,
        alignment: o.alignment,
    };
    opts.validate()?;
    Ok(opts)
}

/// Moves every tensor payload of at least `threshold` bytes into ONE new buffer whose start and
/// every tensor offset are multiples of `alignment` (0/1 = packed; otherwise a power of two), and
/// makes those tensors borrow from it (C++ `ConsolidateTensorsToBuffer`); the same as
/// `onnxl_consolidate_tensors_to_buffer_with_options` with these two options.
///
/// # Safety
/// `model` NULL or a live handle used by no one else; `owner_out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_consolidate_tensors_to_buffer(
    model: *mut OnnxlModelProto,
    threshold: u64,
    alignment: u64,
    owner_out: *mut *const OnnxlOwner,
) -> OnnxlStatus {
    let opts = OnnxlTensorBufferOptions {
        raw_data_threshold: threshold,
        alignment,
        ..onnxl_tensor_buffer_options_default()
    };
    // SAFETY: forwarded contract; `opts` is valid for the call.
    unsafe { onnxl_consolidate_tensors_to_buffer_with_options(model, &opts, owner_out) }
}

/// Moves every tensor payload of at least `opts->raw_data_threshold` bytes into ONE new buffer
/// whose start and every tensor offset are multiples of `opts->alignment`, and makes those
/// tensors borrow from it (C++ `ConsolidateTensorsToBuffer(model, TensorBufferOptions)`).
/// Reaches every tensor of the model. `opts` may be NULL (defaults: every tensor, packed).
///
/// Ownership: each consolidated tensor holds the buffer's owner token, so the buffer lives as
/// long as any of them. When `owner_out` is not NULL, a retained `OnnxlOwner` for the whole
/// buffer is written there (NULL when no tensor qualified); the caller may release it at once
/// (`onnxl_owner_release`) or keep it to use the bytes after the model is freed. `owner_out` may
/// be NULL.
///
/// # Safety
/// `model` NULL or a live handle used by no one else; `opts` NULL or valid; `owner_out` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_consolidate_tensors_to_buffer_with_options(
    model: *mut OnnxlModelProto,
    opts: *const OnnxlTensorBufferOptions,
    owner_out: *mut *const OnnxlOwner,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { try_mut(model, "model") }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { tensor_buffer_options(opts) }?;
        let buffer = external::consolidate_tensors_to_buffer(m, &opts)?;
        if !owner_out.is_null() {
            let token = match buffer {
                Some(b) => {
                    let bytes: *const [u8] = b.as_slice();
                    // SAFETY: `bytes` points into `b`, which the token keeps alive.
                    new_token(b, unsafe { &*bytes })
                }
                None => std::ptr::null(),
            };
            // SAFETY: `owner_out` is non-NULL and writable (contract).
            unsafe { write_out(owner_out, token) };
        }
        Ok(())
    })
}

/// Options of `onnxl_convert_model_to_external_data`: the arguments of onnx's
/// `convert_model_to_external_data`, with the same defaults. Get them with
/// `onnxl_convert_external_data_options_default()`; a NULL pointer means defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OnnxlConvertExternalDataOptions {
    /// `sizeof(OnnxlConvertExternalDataOptions)` as compiled by the caller (set by the default
    /// function).
    pub struct_size: usize,
    /// The weight file, relative to the model's directory (NUL-terminated; NULL = default
    /// `model.onnx.data`; an absolute path is reduced to its file name). Borrowed for the call.
    pub location: *const c_char,
    /// Tensors with at least this many `raw_data` bytes are converted. Default 1024.
    pub size_threshold: u64,
    /// One weight file for every tensor (1, default) or one file per tensor (0).
    pub all_tensors_to_one_file: u8,
    /// Also convert tensors of node attributes (default 0).
    pub convert_attribute: u8,
    /// Must be zero (room for later options).
    pub reserved: [u8; 6],
}

/// Every published `struct_size` of `OnnxlConvertExternalDataOptions`.
const CONVERT_OPTIONS_SIZES: &[usize] = &[size_of::<OnnxlConvertExternalDataOptions>()];

/// The default conversion options (onnx's), with `struct_size` set.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_convert_external_data_options_default() -> OnnxlConvertExternalDataOptions {
    let d = ConvertExternalOptions::default();
    OnnxlConvertExternalDataOptions {
        struct_size: size_of::<OnnxlConvertExternalDataOptions>(),
        location: std::ptr::null(),
        size_threshold: d.size_threshold,
        all_tensors_to_one_file: d.all_tensors_to_one_file.into(),
        convert_attribute: d.convert_attribute.into(),
        reserved: [0; 6],
    }
}

/// The conversion options behind a C pointer (NULL = defaults), validated.
///
/// # Safety
/// `p` is NULL or points at options whose `struct_size` bytes are readable, with a valid string.
pub(crate) unsafe fn convert_options(
    p: *const OnnxlConvertExternalDataOptions,
) -> Result<ConvertExternalOptions, FfiError> {
    if p.is_null() {
        return Ok(ConvertExternalOptions::default());
    }
    // SAFETY: non-NULL, `struct_size` bytes readable (contract).
    let o = unsafe {
        read_versioned(
            p,
            onnxl_convert_external_data_options_default(),
            CONVERT_OPTIONS_SIZES,
            "OnnxlConvertExternalDataOptions",
        )
    }?;
    if o.reserved != [0; 6] {
        return Err(FfiError::invalid(
            "OnnxlConvertExternalDataOptions.reserved must be zero",
        ));
    }
    // SAFETY: `location` is NULL or NUL-terminated (contract).
    let location = unsafe { opt_path(o.location, "OnnxlConvertExternalDataOptions.location") }?
        .map(|l| l.to_string_lossy().into_owned());
    Ok(ConvertExternalOptions {
        all_tensors_to_one_file: flag(
            o.all_tensors_to_one_file,
            "OnnxlConvertExternalDataOptions.all_tensors_to_one_file",
        )?,
        location,
        size_threshold: o.size_threshold,
        convert_attribute: flag(
            o.convert_attribute,
            "OnnxlConvertExternalDataOptions.convert_attribute",
        )?,
    })
}

/// Marks every tensor a save with external data would move to a weight file as external (C++
/// `ConvertModelToExternalData`, onnx's `convert_model_to_external_data`): `data_location`
/// EXTERNAL and the `location`, `offset`, `length` entries a save would record (aligned as a
/// save aligns); the bytes stay in `raw_data` and nothing is written. Sparse tensors are never
/// converted. `opts` may be NULL (defaults). `converted_out`, when not NULL, receives the
/// number of tensors converted.
///
/// # Safety
/// `model` NULL or a live handle used by no one else; `opts` NULL or valid; `converted_out`
/// NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_convert_model_to_external_data(
    model: *mut OnnxlModelProto,
    opts: *const OnnxlConvertExternalDataOptions,
    converted_out: *mut usize,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { try_mut(model, "model") }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { convert_options(opts) }?;
        let report = external::convert_model_to_external_data(m, &opts)?;
        if !converted_out.is_null() {
            // SAFETY: non-NULL and writable (contract).
            unsafe { write_out(converted_out, report.external_tensors) };
        }
        Ok(())
    })
}

/// Reads the bytes of every external tensor into `raw_data` from files relative to `base_dir`
/// (under every path rule; copied, or borrowed from one map per file with `opts->no_copy`) and
/// keeps the tensors' references (C++ `PopulateExternalData`). `opts` may be NULL (defaults).
/// `populated_out`, when not NULL, receives the number of tensors read. On error the model is
/// unchanged.
///
/// # Safety
/// `model` NULL or a live handle used by no one else; `base_dir` NULL or NUL-terminated; `opts`
/// NULL or valid; `populated_out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_populate_external_data(
    model: *mut OnnxlModelProto,
    base_dir: *const c_char,
    opts: *const OnnxlParseOptions,
    populated_out: *mut usize,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { try_mut(model, "model") }?;
        // SAFETY: forwarded contract.
        let dir = unsafe { c_path(base_dir, "base_dir") }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { load_options(opts) }?;
        let n = external::populate_external_data(m, &dir, &opts)?;
        if !populated_out.is_null() {
            // SAFETY: non-NULL and writable (contract).
            unsafe { write_out(populated_out, n) };
        }
        Ok(())
    })
}

/// Drops the bytes (`raw_data`) of every external tensor and keeps its references (C++
/// `ClearExternalData`): the model as a save writes its `.onnx`. `cleared_out`, when not NULL,
/// receives the number of tensors whose bytes were dropped.
///
/// # Safety
/// `model` NULL or a live handle used by no one else; `cleared_out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_clear_external_data(
    model: *mut OnnxlModelProto,
    cleared_out: *mut usize,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { try_mut(model, "model") }?;
        let n = external::clear_external_data(m);
        if !cleared_out.is_null() {
            // SAFETY: non-NULL and writable (contract).
            unsafe { write_out(cleared_out, n) };
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{ModelProto, TensorProto};
    use std::ptr::{null, null_mut};

    fn model() -> ModelProto {
        let mut m = ModelProto::new();
        for (name, n) in [("big", 5000usize), ("small", 10)] {
            let mut t = TensorProto::new();
            t.set_name(name);
            t.set_data_type(2);
            t.add_dims(n as i64);
            t.set_raw_data(vec![7u8; n]);
            m.mutable_graph().initializer.push(t);
        }
        m
    }

    #[test]
    fn convert_clear_and_populate_through_the_c_abi() {
        let dir = std::env::temp_dir().join(format!("onnxl-ffi-conv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("model.onnx");
        crate::external::save_model_with_external_data(&model(), &path, &Default::default())
            .unwrap();
        let handle = super::super::handle::into_raw::<OnnxlModelProto>(model());
        let (mut converted, mut cleared, mut populated) = (0usize, 0usize, 0usize);
        let c_dir = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
        // SAFETY: a live handle and writable out-pointers.
        unsafe {
            assert_eq!(
                onnxl_convert_model_to_external_data(handle, null(), &mut converted),
                OnnxlStatus::Ok
            );
            assert_eq!(
                onnxl_clear_external_data(handle, &mut cleared),
                OnnxlStatus::Ok
            );
            assert_eq!((converted, cleared), (1, 1));
            // The converted and cleared model is the `.onnx` the save wrote.
            let m = super::super::handle::try_ref(handle, "m").unwrap();
            let saved: ModelProto = crate::package::load_model(
                &path,
                &crate::external::LoadOptions {
                    load_external_data: false,
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(*m, saved);
            assert_eq!(
                onnxl_populate_external_data(handle, c_dir.as_ptr(), null(), &mut populated),
                OnnxlStatus::Ok
            );
            assert_eq!(populated, 1);
            let m = super::super::handle::try_ref(handle, "m").unwrap();
            assert_eq!(m.graph().initializer[0].raw_data(), &[7u8; 5000][..]);
            assert!(crate::external::uses_external_data(
                &m.graph().initializer[0]
            ));
            let mut bad = onnxl_convert_external_data_options_default();
            bad.reserved[0] = 1;
            assert_eq!(
                onnxl_convert_model_to_external_data(handle, &bad, null_mut()),
                OnnxlStatus::InvalidArgument
            );
            let mut bad = onnxl_tensor_buffer_options_default();
            bad.alignment = 3;
            assert_eq!(
                onnxl_consolidate_tensors_to_buffer_with_options(handle, &bad, null_mut()),
                OnnxlStatus::InvalidArgument
            );
            assert_eq!(
                onnxl_consolidate_tensors_to_buffer(handle, 0, 3, null_mut()),
                OnnxlStatus::InvalidArgument
            );
            assert_eq!(
                onnxl_clear_external_data(null_mut(), null_mut()),
                OnnxlStatus::NullPointer
            );
            crate::ffi::accessors::onnxl_model_proto_free(handle);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
