//! External data through the C ABI: loading with explicit external-data options, loading after
//! the fact, saving with external data, checking, and `ConsolidateTensorsToBuffer`.
//!
//! `onnxl_load_model` already loads external data automatically (like `onnx.load`): external
//! tensors are read from files relative to the model file's directory, under every path rule,
//! and become inline (`raw_data`, DEFAULT location); with `no_copy` each weight file is mapped
//! once and the tensors borrow from it under one shared owner token per file. Use
//! `onnxl_load_model_with_external_data` to choose the directory, override the weight file, skip
//! the external data or verify checksums.
//!
//! Errors: a refused path is `ONNXL_STATUS_PATH_REFUSED`; a missing file, a range outside its
//! file, a bad entry or a checksum mismatch is `ONNXL_STATUS_EXTERNAL_DATA`; the message names
//! the tensor and the path.

use std::ffi::c_char;
use std::path::PathBuf;

use super::accessors::OnnxlModelProto;
use super::handle::{c_path, check_out, into_raw, try_mut, try_ref, write_out};
use super::options::{OnnxlParseOptions, parse_options};
use super::owner::{OnnxlOwner, new_token};
use super::panic::ffi_status;
use super::status::{FfiError, OnnxlStatus};
use crate::error::Error;
use crate::external;
use crate::options::{ParseOptions, SaveExternalOptions, TensorBufferOptions};

/// Options of saving with external data (`SaveExternalOptions`; the onnx package's
/// `save_model(..., save_as_external_data=True, ...)`). Get the defaults with
/// `onnxl_external_data_options_default()`, then change fields. A NULL options pointer means
/// defaults. The string fields are borrowed for the call only.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OnnxlExternalDataOptions {
    /// `sizeof(OnnxlExternalDataOptions)` as compiled by the caller (set by the default function).
    pub struct_size: usize,
    /// Weight file name relative to the model's directory (NUL-terminated); NULL = the model file
    /// name plus `.data`. Split parts are `LOCATION.1`, `LOCATION.2`, ...
    pub location: *const c_char,
    /// Directory to read tensors that are still external in memory (not loaded) from; NULL = none
    /// (such tensors are then an error).
    pub source_dir: *const c_char,
    /// Tensors with at least this many `raw_data` bytes go to external files. Default 1024.
    pub size_threshold: u64,
    /// Offset alignment of tensors of at least `align_threshold` bytes (power of two; 0/1 =
    /// packed). Default 4096; 65536 suits Windows mappings.
    pub alignment: u64,
    /// Tensors of at least this many bytes are aligned to `alignment` (smaller ones to at most
    /// 16 bytes). Default 1 MiB.
    pub align_threshold: u64,
    /// Start a new file when the next tensor would pass this size (0 = no limit). Default 0.
    pub max_external_file_size: u64,
    /// 1 = sequential (default), n > 1 = n threads, negative = all cores; 0 is invalid.
    pub num_threads: i32,
    /// One weight file (true, default) or one file per tensor, named after the tensor.
    pub all_tensors_to_one_file: bool,
    /// Also move node-attribute tensors (default false).
    pub convert_attribute: bool,
    /// Write the SHA-1 of each weight file as the `checksum` entry (default false).
    pub checksum: bool,
    /// fsync every file before it replaces the old one (default true).
    pub sync: bool,
}

/// Options of loading external data. Get the defaults with
/// `onnxl_external_load_options_default()`. A NULL pointer means defaults. The string fields are
/// borrowed for the call only.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OnnxlExternalLoadOptions {
    /// `sizeof(OnnxlExternalLoadOptions)` as compiled by the caller (set by the default function).
    pub struct_size: usize,
    /// Base directory of the weight files (NUL-terminated); NULL = the model file's directory.
    pub base_dir: *const c_char,
    /// A trusted path that replaces the model's primary weight file (and `THIS.1`, ... its split
    /// parts); NULL = the locations recorded in the model.
    pub location: *const c_char,
    /// Read the external data (default true); false keeps the references as they are.
    pub load_external_data: bool,
    /// Verify the `checksum` entries (SHA-1 of each file; reads every byte). Default false.
    pub verify_checksums: bool,
    /// Must be zero (room for later options).
    pub reserved: [u8; 6],
}

const EXTERNAL_DATA_OPTIONS_SIZES: &[usize] = &[size_of::<OnnxlExternalDataOptions>()];
const EXTERNAL_LOAD_OPTIONS_SIZES: &[usize] = &[size_of::<OnnxlExternalLoadOptions>()];

/// The default options of `onnxl_save_model_with_external_data`, with `struct_size` set.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_external_data_options_default() -> OnnxlExternalDataOptions {
    let d = SaveExternalOptions::default();
    OnnxlExternalDataOptions {
        struct_size: size_of::<OnnxlExternalDataOptions>(),
        location: std::ptr::null(),
        source_dir: std::ptr::null(),
        size_threshold: d.size_threshold,
        alignment: d.alignment,
        align_threshold: d.align_threshold,
        max_external_file_size: d.max_external_file_size,
        num_threads: d.num_threads,
        all_tensors_to_one_file: d.all_tensors_to_one_file,
        convert_attribute: d.convert_attribute,
        checksum: d.checksum,
        sync: d.sync,
    }
}

/// The default external-data load options, with `struct_size` set.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_external_load_options_default() -> OnnxlExternalLoadOptions {
    let d = ParseOptions::default();
    OnnxlExternalLoadOptions {
        struct_size: size_of::<OnnxlExternalLoadOptions>(),
        base_dir: std::ptr::null(),
        location: std::ptr::null(),
        load_external_data: d.load_external_data,
        verify_checksums: d.verify_external_checksums,
        reserved: [0; 6],
    }
}

/// Checks `struct_size` against the published sizes.
///
/// # Safety
/// `p` is non-NULL and readable for at least a `usize`.
unsafe fn checked_size<T>(p: *const T, known: &[usize], what: &str) -> Result<(), FfiError> {
    // SAFETY: every options struct starts with `size_t struct_size` (contract).
    let size = unsafe { p.cast::<usize>().read() };
    if known.contains(&size) {
        Ok(())
    } else {
        Err(FfiError::invalid(format!(
            "{what}.struct_size is {size}, this library knows {known:?} (initialize the struct with \
             its _default() function)"
        )))
    }
}

/// An optional NUL-terminated path.
///
/// # Safety
/// `p` is NULL or NUL-terminated.
unsafe fn opt_path(p: *const c_char, what: &str) -> Result<Option<PathBuf>, FfiError> {
    if p.is_null() {
        Ok(None)
    } else {
        // SAFETY: non-NULL and NUL-terminated (contract).
        unsafe { c_path(p, what) }.map(Some)
    }
}

/// The save options behind a C pointer (NULL = defaults), validated.
///
/// # Safety
/// `p` is NULL or points at options whose `struct_size` bytes are readable, with valid strings.
pub(crate) unsafe fn save_options(
    p: *const OnnxlExternalDataOptions,
) -> Result<SaveExternalOptions, FfiError> {
    if p.is_null() {
        return Ok(SaveExternalOptions::default());
    }
    // SAFETY: non-NULL (contract).
    unsafe { checked_size(p, EXTERNAL_DATA_OPTIONS_SIZES, "OnnxlExternalDataOptions") }?;
    // SAFETY: the size is the full current struct.
    let o = unsafe { &*p };
    // SAFETY: the string fields are NULL or NUL-terminated (contract).
    let location = unsafe { opt_path(o.location, "OnnxlExternalDataOptions.location") }?
        .map(|l| l.to_string_lossy().into_owned());
    // SAFETY: as above.
    let source_dir = unsafe { opt_path(o.source_dir, "OnnxlExternalDataOptions.source_dir") }?;
    let opts = SaveExternalOptions {
        location,
        size_threshold: o.size_threshold,
        all_tensors_to_one_file: o.all_tensors_to_one_file,
        alignment: o.alignment,
        align_threshold: o.align_threshold,
        max_external_file_size: o.max_external_file_size,
        convert_attribute: o.convert_attribute,
        checksum: o.checksum,
        num_threads: o.num_threads,
        source_dir,
        sync: o.sync,
    };
    opts.validate()?;
    Ok(opts)
}

/// Parse options with the external-data load options applied.
///
/// # Safety
/// `popts` as for `parse_options`; `eopts` NULL or valid with valid strings.
pub(crate) unsafe fn load_options(
    popts: *const OnnxlParseOptions,
    eopts: *const OnnxlExternalLoadOptions,
) -> Result<ParseOptions, FfiError> {
    // SAFETY: forwarded contract.
    let mut opts = unsafe { parse_options(popts) }?;
    if eopts.is_null() {
        return Ok(opts);
    }
    // SAFETY: non-NULL (contract).
    unsafe {
        checked_size(
            eopts,
            EXTERNAL_LOAD_OPTIONS_SIZES,
            "OnnxlExternalLoadOptions",
        )
    }?;
    // SAFETY: the size is the full current struct.
    let e = unsafe { &*eopts };
    if e.reserved != [0; 6] {
        return Err(FfiError::invalid(
            "OnnxlExternalLoadOptions.reserved must be zero",
        ));
    }
    opts.load_external_data = e.load_external_data;
    opts.verify_external_checksums = e.verify_checksums;
    // SAFETY: the string fields are NULL or NUL-terminated (contract).
    opts.external_data_dir = unsafe { opt_path(e.base_dir, "OnnxlExternalLoadOptions.base_dir") }?;
    // SAFETY: as above.
    opts.external_data_location =
        unsafe { opt_path(e.location, "OnnxlExternalLoadOptions.location") }?;
    Ok(opts)
}

/// Loads a model file and its external data with explicit external-data options (see
/// `OnnxlExternalLoadOptions`; `onnxl_load_model` is this with default ones). On success writes
/// a new model to `*out` (untouched on failure).
///
/// Ownership: as `onnxl_load_model`: the caller owns `*out` (free with `onnxl_model_proto_free`);
/// with `popts->no_copy` the tensors of each weight file borrow from ONE memory map of it and
/// hold its owner token, so the bytes stay valid after the model is freed while a retained
/// `OnnxlOwner` lives. Either options pointer may be NULL (defaults).
///
/// # Safety
/// `path` NULL or NUL-terminated; options NULL or valid; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_load_model_with_external_data(
    path: *const c_char,
    popts: *const OnnxlParseOptions,
    eopts: *const OnnxlExternalLoadOptions,
    out: *mut *mut OnnxlModelProto,
) -> OnnxlStatus {
    ffi_status(|| {
        check_out(out, "out")?;
        // SAFETY: forwarded contract.
        let path = unsafe { c_path(path, "path") }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { load_options(popts, eopts) }?;
        let m = crate::model::load_model(&path, &opts)?;
        // SAFETY: `out` checked above.
        unsafe { write_out(out, into_raw::<OnnxlModelProto>(m)) };
        Ok(())
    })
}

/// Loads the external data of every tensor of `model` (initializers, sparse initializers,
/// attributes, subgraphs, functions) from files relative to `dir` (C++
/// `LoadExternalDataForModel`; e.g. after a load with `load_external_data` false, or from
/// bytes). `popts` gives `no_copy`, `num_threads`, `raw_data_threshold` and
/// `max_tensor_size_bytes`; `eopts` may override the primary weight file and verify checksums
/// (its `base_dir` and `load_external_data` are ignored here). Either may be NULL. On failure
/// the model is unchanged.
///
/// # Safety
/// `model` NULL or a live handle used by no one else; `dir` NULL or NUL-terminated; options NULL
/// or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_load_external_data_for_model(
    model: *mut OnnxlModelProto,
    dir: *const c_char,
    popts: *const OnnxlParseOptions,
    eopts: *const OnnxlExternalLoadOptions,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { try_mut(model, "model") }?;
        // SAFETY: forwarded contract.
        let dir = unsafe { c_path(dir, "dir") }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { load_options(popts, eopts) }?;
        external::load_external_data_for_model(m, &dir, &opts)?;
        Ok(())
    })
}

/// Saves `model` to `path` with its large tensors in external files beside it (C++ `SaveModel`
/// with a location; the onnx package's `save_as_external_data=True`): one file (split at
/// `max_external_file_size`) or one file per tensor, offsets aligned, optional SHA-1 checksums.
/// Every file is written to a temporary file and renamed over the old one, so re-saving a model
/// over the weight files it borrows from (no-copy load) is safe. The model is NOT changed.
/// Locations obey the path rules: nothing is written outside the model's directory
/// (`ONNXL_STATUS_PATH_REFUSED`). `opts` may be NULL (defaults).
///
/// # Safety
/// `model` NULL or live; `path` NULL or NUL-terminated; `opts` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_save_model_with_external_data(
    model: *const OnnxlModelProto,
    path: *const c_char,
    opts: *const OnnxlExternalDataOptions,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { try_ref(model, "model") }?;
        // SAFETY: forwarded contract.
        let path = unsafe { c_path(path, "path") }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { save_options(opts) }?;
        external::save_model_with_external_data(m, &path, &opts)?;
        Ok(())
    })
}

/// Checks every external reference of `model` relative to `dir` without loading anything:
/// locations obey the path rules and open, ranges lie inside their files, lengths match
/// dims × element type, and (with `verify_checksums`) checksums match. Returns OK, or the status
/// of the first problem with a message listing every problem.
///
/// # Safety
/// `model` NULL or live; `dir` NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_check_external_data(
    model: *const OnnxlModelProto,
    dir: *const c_char,
    verify_checksums: bool,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { try_ref(model, "model") }?;
        // SAFETY: forwarded contract.
        let dir = unsafe { c_path(dir, "dir") }?;
        let report = external::check_external_data(
            m,
            &dir,
            &ParseOptions::default(),
            verify_checksums,
            None,
        );
        let Some(first) = report.problems.first() else {
            return Ok(());
        };
        let status = super::status::status_of(first);
        let text: Vec<String> = report.problems.iter().map(Error::to_string).collect();
        Err(FfiError::new(
            status,
            format!("{} problem(s): {}", text.len(), text.join("; ")),
        ))
    })
}

/// Moves every tensor payload of at least `threshold` bytes into ONE new buffer whose start and
/// every tensor offset are multiples of `alignment` (0/1 = packed; otherwise a power of two), and
/// makes those tensors borrow from it (C++ `ConsolidateTensorsToBuffer`, seed 000). Reaches every
/// tensor of the model.
///
/// Ownership: each consolidated tensor holds the buffer's owner token, so the buffer lives as
/// long as any of them. When `owner_out` is not NULL, a retained `OnnxlOwner` for the whole
/// buffer is written there (NULL when no tensor qualified); the caller may release it at once
/// (`onnxl_owner_release`) or keep it to use the bytes after the model is freed. `owner_out` may
/// be NULL.
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
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { try_mut(model, "model") }?;
        let opts = TensorBufferOptions {
            raw_data_threshold: threshold,
            alignment,
        };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::model::{onnxl_load_model, onnxl_save_model};
    use crate::ffi::owner::{onnxl_owner_data, onnxl_owner_release};
    use crate::ffi::status::last_error;
    use crate::proto::{ModelProto, TensorProto};
    use std::ffi::CString;
    use std::ptr::{null, null_mut};

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("onnxl-ffi-ext-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn model() -> ModelProto {
        let mut m = ModelProto::new();
        m.set_ir_version(10);
        for (i, n) in [5000usize, 3000, 10].into_iter().enumerate() {
            let mut t = TensorProto::new();
            t.set_name(format!("w{i}"));
            t.set_data_type(2);
            t.add_dims(n as i64);
            t.set_raw_data((0..n).map(|k| (k * 7 + i) as u8).collect::<Vec<u8>>());
            m.mutable_graph().initializer.push(t);
        }
        m
    }

    fn c(p: &std::path::Path) -> CString {
        CString::new(p.to_str().unwrap()).unwrap()
    }

    #[test]
    fn save_load_check_consolidate() {
        let dir = temp_dir("a");
        let original = model();
        let handle = into_raw::<OnnxlModelProto>(original.clone());
        let path = dir.join("m.onnx");
        let mut o = onnxl_external_data_options_default();
        let loc = CString::new("weights.bin").unwrap();
        o.location = loc.as_ptr();
        o.checksum = true;
        // SAFETY: live handle, valid path and options.
        let s = unsafe { onnxl_save_model_with_external_data(handle, c(&path).as_ptr(), &o) };
        assert_eq!(s, OnnxlStatus::Ok, "{}", last_error());
        assert!(dir.join("weights.bin").exists());

        // Automatic load through onnxl_load_model.
        let mut loaded = null_mut();
        // SAFETY: valid arguments.
        let s = unsafe { onnxl_load_model(c(&path).as_ptr(), null(), &mut loaded) };
        assert_eq!(s, OnnxlStatus::Ok, "{}", last_error());
        // SAFETY: live handle.
        let l = unsafe { try_ref(loaded, "m") }.unwrap();
        assert_eq!(
            l.graph().initializer[0].raw_data(),
            original.graph().initializer[0].raw_data()
        );

        // Without loading, then after the fact with checksum verification.
        let mut e = onnxl_external_load_options_default();
        e.load_external_data = false;
        let mut lazy = null_mut();
        // SAFETY: valid arguments.
        let s = unsafe {
            onnxl_load_model_with_external_data(c(&path).as_ptr(), null(), &e, &mut lazy)
        };
        assert_eq!(s, OnnxlStatus::Ok, "{}", last_error());
        // SAFETY: live handle.
        assert!(
            unsafe { try_ref(lazy, "m") }.unwrap().graph().initializer[0]
                .raw_data
                .is_none()
        );
        // SAFETY: valid arguments.
        assert_eq!(
            unsafe { onnxl_check_external_data(lazy, c(&dir).as_ptr(), true) },
            OnnxlStatus::Ok,
            "{}",
            last_error()
        );
        e.verify_checksums = true;
        // SAFETY: valid arguments.
        let s = unsafe { onnxl_load_external_data_for_model(lazy, c(&dir).as_ptr(), null(), &e) };
        assert_eq!(s, OnnxlStatus::Ok, "{}", last_error());
        // SAFETY: live handle.
        let lz = unsafe { try_ref(lazy, "m") }.unwrap();
        assert_eq!(
            lz.graph().initializer[1].raw_data(),
            original.graph().initializer[1].raw_data()
        );

        // Consolidate: the owner outlives the model.
        let mut owner = null();
        // SAFETY: live handle, writable out-pointer.
        let s = unsafe { onnxl_consolidate_tensors_to_buffer(lazy, 1000, 64, &mut owner) };
        assert_eq!(s, OnnxlStatus::Ok, "{}", last_error());
        assert!(!owner.is_null());
        // SAFETY: handles from this library, freed once.
        unsafe {
            crate::ffi::accessors::onnxl_model_proto_free(lazy);
            crate::ffi::accessors::onnxl_model_proto_free(loaded);
        }
        let (mut p, mut n) = (null(), 0usize);
        // SAFETY: live token and out-pointers.
        assert_eq!(
            unsafe { onnxl_owner_data(owner, &mut p, &mut n) },
            OnnxlStatus::Ok
        );
        assert_eq!(p as usize % 64, 0);
        assert!(n >= 8000);
        // SAFETY: the token keeps the buffer alive.
        let bytes = unsafe { std::slice::from_raw_parts(p, n) };
        assert_eq!(&bytes[..5000], original.graph().initializer[0].raw_data());
        // SAFETY: one reference, released once.
        unsafe { onnxl_owner_release(owner) };

        // A refused path is its own status, and the message names the location.
        let evil = CString::new("../evil.bin").unwrap();
        o.location = evil.as_ptr();
        // SAFETY: valid arguments.
        let s = unsafe { onnxl_save_model_with_external_data(handle, c(&path).as_ptr(), &o) };
        assert_eq!(s, OnnxlStatus::PathRefused);
        assert!(last_error().contains("../evil.bin"), "{}", last_error());
        assert!(!dir.parent().unwrap().join("evil.bin").exists());

        // A missing weight file is EXTERNAL_DATA, naming tensor and path.
        std::fs::remove_file(dir.join("weights.bin")).unwrap();
        let mut m2 = null_mut();
        // SAFETY: valid arguments.
        let s = unsafe { onnxl_load_model(c(&path).as_ptr(), null(), &mut m2) };
        assert_eq!(s, OnnxlStatus::ExternalData);
        assert!(
            last_error().contains("w0") && last_error().contains("weights.bin"),
            "{}",
            last_error()
        );
        // SAFETY: handle from this library.
        unsafe { crate::ffi::accessors::onnxl_model_proto_free(handle) };
        let _ = onnxl_save_model; // the plain save stays available for inline models
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn options_are_checked() {
        let mut o = onnxl_external_data_options_default();
        o.alignment = 3;
        // SAFETY: valid struct on the stack.
        assert_eq!(
            unsafe { save_options(&o) }.unwrap_err().status,
            OnnxlStatus::InvalidArgument
        );
        o = onnxl_external_data_options_default();
        o.struct_size = 8;
        // SAFETY: valid struct on the stack.
        assert!(unsafe { save_options(&o) }.is_err());
        let mut e = onnxl_external_load_options_default();
        e.reserved[0] = 1;
        // SAFETY: valid struct on the stack.
        assert!(unsafe { load_options(null(), &e) }.is_err());
        assert_eq!(size_of::<OnnxlExternalDataOptions>(), 64);
        assert_eq!(size_of::<OnnxlExternalLoadOptions>(), 32);
        // SAFETY: valid struct on the stack; NULL allowed.
        unsafe {
            assert_eq!(
                save_options(null()).unwrap(),
                SaveExternalOptions::default()
            );
            let d = onnxl_external_data_options_default();
            assert_eq!(save_options(&d).unwrap(), SaveExternalOptions::default());
        }
        // NULL arguments.
        // SAFETY: NULL handles are detected.
        unsafe {
            assert_eq!(
                onnxl_save_model_with_external_data(null(), null(), null()),
                OnnxlStatus::NullPointer
            );
            assert_eq!(
                onnxl_consolidate_tensors_to_buffer(null_mut(), 0, 0, null_mut()),
                OnnxlStatus::NullPointer
            );
            assert_eq!(
                onnxl_load_external_data_for_model(null_mut(), null(), null(), null()),
                OnnxlStatus::NullPointer
            );
        }
    }
}
