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

use super::accessors::OnnxlModelProto;
use super::handle::{c_bytes, c_path, check_out, into_raw, try_mut, try_ref, write_out};
use super::options::{OnnxlParseOptions, flag, load_options, opt_path, read_versioned};
use super::panic::ffi_status;
use super::status::{FfiError, OnnxlStatus};
use crate::error::Error;
use crate::external;
use crate::external::{LoadOptions, SaveExternalOptions};

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
    /// packed). Default 4096 (the page size the ONNX external-data format recommends); 65536
    /// suits Windows mappings.
    pub alignment: u64,
    /// Tensors of at least this many bytes are aligned to `alignment` (smaller ones to at most
    /// 16 bytes). Default 0 (every tensor; ONNX Runtime uses 1 MiB).
    pub align_threshold: u64,
    /// Start a new file when the next tensor would pass this size (0 = no limit). Default 0.
    pub max_external_file_size: u64,
    /// 1 = sequential (default), n > 1 = n threads, negative = all cores; 0 is invalid.
    pub num_threads: i32,
    /// One weight file (true, default) or one file per tensor, named after the tensor.
    pub all_tensors_to_one_file: u8,
    /// Also move node-attribute tensors (default false).
    pub convert_attribute: u8,
    /// Write the SHA-1 of each weight file as the `checksum` entry (default false).
    pub checksum: u8,
    /// fsync every file before it replaces the old one (default true).
    pub sync: u8,
    // ---- version 2 (struct_size 96): encrypted weight files. A caller compiled with the
    // 64-byte version gets no encryption.
    /// Passphrase of the weight files (`encryption_key_len` bytes, any bytes; NULL only with
    /// length 0). Borrowed for the call only. Used when `encrypt` is true.
    pub encryption_key: *const u8,
    /// Length of `encryption_key`.
    pub encryption_key_len: usize,
    /// Plaintext bytes per chunk (default 1 MiB; 64 ..= 64 MiB).
    pub encryption_chunk_size: u32,
    /// One of `ONNXL_CHUNK_CIPHER_*` (default AES-256-GCM).
    pub encryption_chunk_cipher: u32,
    /// Write every weight file encrypted (ONNXCRYS chunked format; default false). Offsets,
    /// lengths, alignment, splitting and checksums refer to the plaintext.
    pub encrypt: u8,
    /// Also move the values and indices of sparse tensors (default false: the onnx package
    /// does not read sparse tensors from external data, so they stay inline).
    pub externalize_sparse: u8,
    /// Tensors still external in memory (not loaded) keep their external_data references as
    /// they are instead of being read from `source_dir` and rewritten (default false); a kept
    /// reference naming a file this save writes is `ONNXL_STATUS_PATH_REFUSED`. 0 or 1. (A
    /// former reserved byte.)
    pub use_external_data_location: u8,
    /// Must be zero (room for later options).
    pub reserved: [u8; 5],
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
    pub load_external_data: u8,
    /// Verify the `checksum` entries (SHA-1 of each file; reads every byte). Default false.
    pub verify_checksums: u8,
    /// A passphrase for encrypted (ONNXCRYS) weight files is given in `key` / `key_len`
    /// (default false: an encrypted weight file is `ONNXL_STATUS_EXTERNAL_DATA`). Version 2
    /// (struct_size 48) only; zero in the 32-byte version 1.
    pub has_key: u8,
    /// Must be zero (room for later options).
    pub reserved: [u8; 5],
    // ---- version 2 (struct_size 48)
    /// Passphrase of encrypted weight files (`key_len` bytes; NULL only with length 0),
    /// borrowed for the call only. Used when `has_key` is true.
    pub key: *const u8,
    /// Length of `key`.
    pub key_len: usize,
}

/// Every published `struct_size` of `OnnxlExternalDataOptions` (64: without encryption).
const EXTERNAL_DATA_OPTIONS_SIZES: &[usize] = &[
    std::mem::offset_of!(OnnxlExternalDataOptions, encryption_key),
    size_of::<OnnxlExternalDataOptions>(),
];
/// Every published `struct_size` of `OnnxlExternalLoadOptions` (32: without a key).
const EXTERNAL_LOAD_OPTIONS_SIZES: &[usize] = &[
    std::mem::offset_of!(OnnxlExternalLoadOptions, key),
    size_of::<OnnxlExternalLoadOptions>(),
];

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
        all_tensors_to_one_file: d.all_tensors_to_one_file.into(),
        convert_attribute: d.convert_attribute.into(),
        checksum: d.checksum.into(),
        sync: d.sync.into(),
        encryption_key: std::ptr::null(),
        encryption_key_len: 0,
        encryption_chunk_size: crate::crypto::DEFAULT_CHUNK_SIZE,
        encryption_chunk_cipher: super::crypto::ONNXL_CHUNK_CIPHER_AES_256_GCM,
        encrypt: 0,
        externalize_sparse: d.externalize_sparse.into(),
        use_external_data_location: d.use_external_data_location.into(),
        reserved: [0; 5],
    }
}

/// The default external-data load options, with `struct_size` set.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_external_load_options_default() -> OnnxlExternalLoadOptions {
    let d = LoadOptions::default();
    OnnxlExternalLoadOptions {
        struct_size: size_of::<OnnxlExternalLoadOptions>(),
        base_dir: std::ptr::null(),
        location: std::ptr::null(),
        load_external_data: d.load_external_data.into(),
        verify_checksums: d.verify_external_checksums.into(),
        has_key: 0,
        reserved: [0; 5],
        key: std::ptr::null(),
        key_len: 0,
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
    // SAFETY: non-NULL, `struct_size` bytes readable (contract).
    let o = unsafe {
        read_versioned(
            p,
            onnxl_external_data_options_default(),
            EXTERNAL_DATA_OPTIONS_SIZES,
            "OnnxlExternalDataOptions",
        )
    }?;
    if o.reserved != [0; 5] {
        return Err(FfiError::invalid(
            "OnnxlExternalDataOptions.reserved must be zero",
        ));
    }
    // SAFETY: the string fields are NULL or NUL-terminated (contract).
    let location = unsafe { opt_path(o.location, "OnnxlExternalDataOptions.location") }?
        .map(|l| l.to_string_lossy().into_owned());
    // SAFETY: as above.
    let source_dir = unsafe { opt_path(o.source_dir, "OnnxlExternalDataOptions.source_dir") }?;
    let opts = SaveExternalOptions {
        location,
        size_threshold: o.size_threshold,
        all_tensors_to_one_file: flag(
            o.all_tensors_to_one_file,
            "OnnxlExternalDataOptions.all_tensors_to_one_file",
        )?,
        alignment: o.alignment,
        align_threshold: o.align_threshold,
        max_external_file_size: o.max_external_file_size,
        convert_attribute: flag(
            o.convert_attribute,
            "OnnxlExternalDataOptions.convert_attribute",
        )?,
        externalize_sparse: flag(
            o.externalize_sparse,
            "OnnxlExternalDataOptions.externalize_sparse",
        )?,
        checksum: flag(o.checksum, "OnnxlExternalDataOptions.checksum")?,
        num_threads: o.num_threads,
        source_dir,
        use_external_data_location: flag(
            o.use_external_data_location,
            "OnnxlExternalDataOptions.use_external_data_location",
        )?,
        sync: flag(o.sync, "OnnxlExternalDataOptions.sync")?,
        encryption: if flag(o.encrypt, "OnnxlExternalDataOptions.encrypt")? {
            let cipher = match o.encryption_chunk_cipher {
                super::crypto::ONNXL_CHUNK_CIPHER_AES_256_GCM => crate::crypto::ChunkCipher::AesGcm,
                super::crypto::ONNXL_CHUNK_CIPHER_CHACHA20_POLY1305 => {
                    crate::crypto::ChunkCipher::ChaCha20Poly1305
                }
                other => {
                    return Err(FfiError::invalid(format!(
                        "OnnxlExternalDataOptions.encryption_chunk_cipher {other} is not an \
                         ONNXL_CHUNK_CIPHER_* value"
                    )));
                }
            };
            // SAFETY: `encryption_key..+len` readable, NULL only with length 0 (contract).
            let key = unsafe {
                c_bytes(
                    o.encryption_key,
                    o.encryption_key_len,
                    "OnnxlExternalDataOptions.encryption_key",
                )
            }?;
            Some(crate::external::ExternalEncryption {
                key: crate::secret::Passphrase::new(key),
                cipher,
                chunk_size: o.encryption_chunk_size,
            })
        } else {
            None
        },
    };
    opts.validate()?;
    Ok(opts)
}

/// Load options with the external-data load options applied.
///
/// # Safety
/// `popts` as for `load_options`; `eopts` NULL or valid with valid strings.
pub(crate) unsafe fn with_external_options(
    popts: *const OnnxlParseOptions,
    eopts: *const OnnxlExternalLoadOptions,
) -> Result<LoadOptions, FfiError> {
    // SAFETY: forwarded contract.
    let mut opts = unsafe { load_options(popts) }?;
    if eopts.is_null() {
        return Ok(opts);
    }
    // SAFETY: non-NULL, `struct_size` bytes readable (contract).
    let e = unsafe {
        read_versioned(
            eopts,
            onnxl_external_load_options_default(),
            EXTERNAL_LOAD_OPTIONS_SIZES,
            "OnnxlExternalLoadOptions",
        )
    }?;
    let has_key = flag(e.has_key, "OnnxlExternalLoadOptions.has_key")?;
    if has_key && e.struct_size < size_of::<OnnxlExternalLoadOptions>() {
        return Err(FfiError::invalid(
            "OnnxlExternalLoadOptions.has_key needs the 48-byte struct (key, key_len)",
        ));
    }
    if e.reserved != [0; 5] {
        return Err(FfiError::invalid(
            "OnnxlExternalLoadOptions.reserved must be zero",
        ));
    }
    opts.load_external_data = flag(
        e.load_external_data,
        "OnnxlExternalLoadOptions.load_external_data",
    )?;
    opts.verify_external_checksums = flag(
        e.verify_checksums,
        "OnnxlExternalLoadOptions.verify_checksums",
    )?;
    if has_key {
        // SAFETY: `key..key+key_len` readable, NULL only with length 0 (contract).
        let key = unsafe { c_bytes(e.key, e.key_len, "OnnxlExternalLoadOptions.key") }?;
        opts.external_data_key = Some(crate::secret::Passphrase::new(key));
    }
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
        let opts = unsafe { with_external_options(popts, eopts) }?;
        let m = crate::package::load_model(&path, &opts)?;
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
        let opts = unsafe { with_external_options(popts, eopts) }?;
        external::load_external_data_for_model(m, &dir, &opts)?;
        Ok(())
    })
}

/// Saves `model` to `path` with its large tensors in external files beside it (C++ `SaveModel`
/// with a location; the onnx package's `save_as_external_data=True`): one file (split at
/// `max_external_file_size`) or one file per tensor, offsets aligned, optional SHA-1 checksums.
/// Crash-safe as a whole: weight files are written to temporary files and renamed to names the
/// model being replaced does not reference (`w.bin` becomes `w_1.bin` when the old model uses
/// `w.bin`), then the model is renamed over the old one (the commit point), then the old
/// model's files of that name family are removed; a kill or failure at any point leaves the old
/// model with all its files or the new one with all of its files (docs/hardening.md). Re-saving
/// a model over the weight files it borrows from (no-copy load) is safe. The model is NOT
/// changed. Thread safety: `model` is only read (other threads may read it too); saves of
/// different models may run at once, into different directories or different file names.
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
/// of the first problem with a message listing every problem. Encrypted weight files need a key:
/// see `onnxl_check_external_data_with_options`.
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
        check(m, &dir, &LoadOptions::default(), verify_checksums)
    })
}

/// `onnxl_check_external_data` with external-data load options: `verify_checksums` and the
/// passphrase of encrypted (ONNXCRYS) weight files (`has_key`, `key`, `key_len`) are taken from
/// `opts` (NULL = the defaults of `onnxl_external_load_options_default`: checksums not
/// verified, no key).
///
/// # Safety
/// `model` NULL or live; `dir` NULL or NUL-terminated; `opts` NULL or a valid options struct
/// (its `struct_size` bytes readable, its strings and key valid).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_check_external_data_with_options(
    model: *const OnnxlModelProto,
    dir: *const c_char,
    opts: *const OnnxlExternalLoadOptions,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { try_ref(model, "model") }?;
        // SAFETY: forwarded contract.
        let dir = unsafe { c_path(dir, "dir") }?;
        // SAFETY: forwarded contract (no parse options).
        let popts = unsafe { with_external_options(std::ptr::null(), opts) }?;
        let verify = popts.verify_external_checksums;
        check(m, &dir, &popts, verify)
    })
}

/// The check of both entry points: OK, or the first problem's status with every problem listed.
fn check(
    m: &crate::proto::ModelProto,
    dir: &std::path::Path,
    opts: &LoadOptions,
    verify: bool,
) -> Result<(), FfiError> {
    let report = external::check_external_data(m, dir, opts, verify, None);
    let Some(first) = report.problems.first() else {
        return Ok(());
    };
    let status = super::status::status_of(first);
    let text: Vec<String> = report.problems.iter().map(Error::to_string).collect();
    Err(FfiError::new(
        status,
        format!("{} problem(s): {}", text.len(), text.join("; ")),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::conversions::{
        onnxl_consolidate_tensors_to_buffer_with_options, onnxl_tensor_buffer_options_default,
    };
    use crate::ffi::model::{onnxl_load_model, onnxl_save_model};
    use crate::ffi::owner::{onnxl_owner_data, onnxl_owner_release};
    use crate::ffi::status::last_error;
    use crate::proto::{ModelProto, TensorProto};
    use std::ffi::CString;
    use std::ptr::{null, null_mut};

    fn temp_dir(tag: &str) -> std::path::PathBuf {
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
        o.checksum = 1;
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
        e.load_external_data = 0;
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
        e.verify_checksums = 1;
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
        let mut bo = onnxl_tensor_buffer_options_default();
        (bo.raw_data_threshold, bo.alignment) = (1000, 64);
        let s = unsafe { onnxl_consolidate_tensors_to_buffer_with_options(lazy, &bo, &mut owner) };
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
        assert!(unsafe { with_external_options(null(), &e) }.is_err());
        assert_eq!(size_of::<OnnxlExternalDataOptions>(), 96);
        assert_eq!(size_of::<OnnxlExternalLoadOptions>(), 48);
        assert_eq!(EXTERNAL_DATA_OPTIONS_SIZES, &[64, 96]);
        assert_eq!(EXTERNAL_LOAD_OPTIONS_SIZES, &[32, 48]);
        // Version 1 callers (the 64 / 32-byte structs): the newer fields are not read.
        let mut o = onnxl_external_data_options_default();
        o.struct_size = 64;
        o.encrypt = 1; // beyond the caller's struct: ignored
        o.checksum = 1;
        // SAFETY: valid struct on the stack (larger than its struct_size).
        let v1 = unsafe { save_options(&o) }.unwrap();
        assert!(v1.checksum && v1.encryption.is_none());
        let mut e = onnxl_external_load_options_default();
        e.struct_size = 32;
        e.verify_checksums = 1;
        // SAFETY: as above.
        let v1 = unsafe { with_external_options(null(), &e) }.unwrap();
        assert!(v1.verify_external_checksums && v1.external_data_key.is_none());
        e.has_key = 1;
        // SAFETY: as above.
        assert!(unsafe { with_external_options(null(), &e) }.is_err());
        // Version 2: the key and the encryption.
        let key = b"k3y";
        let mut o = onnxl_external_data_options_default();
        o.encrypt = 1;
        o.encryption_key = key.as_ptr();
        o.encryption_key_len = key.len();
        o.encryption_chunk_size = 128;
        o.encryption_chunk_cipher = super::super::crypto::ONNXL_CHUNK_CIPHER_CHACHA20_POLY1305;
        // SAFETY: valid struct on the stack, key readable.
        let v2 = unsafe { save_options(&o) }.unwrap();
        let enc = v2.encryption.unwrap();
        assert_eq!(enc.key.as_bytes(), key);
        assert_eq!(enc.chunk_size, 128);
        assert_eq!(enc.cipher, crate::crypto::ChunkCipher::ChaCha20Poly1305);
        o.encryption_chunk_cipher = 9;
        // SAFETY: as above.
        assert!(unsafe { save_options(&o) }.is_err());
        o.encryption_chunk_cipher = super::super::crypto::ONNXL_CHUNK_CIPHER_AES_256_GCM;
        o.encryption_chunk_size = 32;
        // SAFETY: as above.
        assert!(unsafe { save_options(&o) }.is_err());
        o.encryption_chunk_size = 1 << 20;
        o.encryption_key = null();
        // SAFETY: as above (NULL key with a non-zero length is detected).
        assert!(unsafe { save_options(&o) }.is_err());
        o.encryption_key_len = 0;
        o.reserved[4] = 1;
        // SAFETY: as above.
        assert!(unsafe { save_options(&o) }.is_err());
        let mut e = onnxl_external_load_options_default();
        e.has_key = 1;
        e.key = key.as_ptr();
        e.key_len = key.len();
        // SAFETY: as above.
        let v2 = unsafe { with_external_options(null(), &e) }.unwrap();
        assert_eq!(v2.external_data_key.unwrap().as_bytes(), key);
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
                onnxl_consolidate_tensors_to_buffer_with_options(null_mut(), null(), null_mut()),
                OnnxlStatus::NullPointer
            );
            assert_eq!(
                onnxl_load_external_data_for_model(null_mut(), null(), null(), null()),
                OnnxlStatus::NullPointer
            );
        }
    }
}
