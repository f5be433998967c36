//! Options structs of the C ABI, mirroring [`crate::ParseOptions`] and
//! [`crate::SerializeOptions`].
//!
//! ABI growth rule: every struct starts with `size_t struct_size`, which the caller sets to
//! `sizeof` the struct it was compiled with (the `*_default()` functions do). New fields are only
//! ever appended (in place of `reserved` bytes, or after them), and the library accepts every
//! size it has ever published, taking defaults for the fields an older caller does not have. The
//! structs have no implicit tail padding (explicit `reserved` bytes, which must be zero), so an
//! older size always ends exactly at a field boundary. A size the library does not know (e.g.
//! from a newer header) is `ONNXL_STATUS_INVALID_ARGUMENT`.

use std::ffi::{c_char, c_void};
use std::path::PathBuf;

use super::handle::{c_path, check_enum};
use super::status::FfiError;
use crate::codec::{FileLoadMode, ParseOptions, SerializeOptions};
use crate::external::{LoadOptions, LoadProgress};

/// How `onnxl_load_model` reads a file (the `file_load_mode` field of `OnnxlParseOptions`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnnxlFileLoadMode {
    /// Memory-map files of at least 64 KiB, read smaller ones.
    Auto = 0,
    /// Always memory-map.
    Mmap = 1,
    /// Always read into memory.
    Buffered = 2,
}

/// Options of parsing (C++ `ParseOptions`). Get the defaults with
/// `onnxl_parse_options_default()`, then change fields. A NULL options pointer means defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OnnxlParseOptions {
    /// `sizeof(OnnxlParseOptions)` as compiled by the caller (set by the default function).
    pub struct_size: usize,
    /// Payloads of at least this many bytes are borrowed (with `no_copy`) or dropped (with
    /// `skip_raw_data`); smaller ones are always copied. Default 1024.
    pub raw_data_threshold: u64,
    /// Every tensor payload pointer a load hands out (`onnxl_tensor_proto_raw_data`, DLPack)
    /// is a multiple of this. Default 64 (a cache line and the widest SIMD load). Copies are
    /// placed there; no-copy loads borrow aligned payloads and copy the others (count them
    /// with `onnxl_model_realigned_tensors`). A power of two up to 65536; 0/1 = no requirement.
    pub alignment: u64,
    /// Parse initializers in parallel only when the graph holds at least this many bytes of
    /// them (0 = whenever there are two or more). Default 4194304 (4 MiB: below that, threads
    /// cost more than they save).
    pub min_parallel_block_size: u64,
    /// Largest tensor payload accepted, checked before allocating (0 = no limit). Default 0.
    pub max_tensor_size_bytes: u64,
    /// 1 = sequential (default), n > 1 = exactly n threads, negative = all cores; 0 is invalid.
    pub num_threads: i32,
    /// Deepest nesting of messages accepted (default 100, at most 1000).
    pub max_recursion_depth: u32,
    /// One of `OnnxlFileLoadMode` (default `ONNXL_FILE_LOAD_MODE_AUTO`); other values are
    /// `ONNXL_STATUS_INVALID_ARGUMENT`.
    pub file_load_mode: u32,
    /// Borrow tensor payloads from the input instead of copying them (default false). From a
    /// file or mapped stream the payloads keep the input alive through owner tokens; from caller
    /// bytes they borrow WITHOUT an owner: the caller keeps the bytes alive while the message is
    /// used. A boolean byte: 0 or 1, any other value is `ONNXL_STATUS_INVALID_ARGUMENT`.
    pub no_copy: u8,
    /// Keep the structure, drop payloads of at least `raw_data_threshold` bytes (default 0).
    /// 0 or 1.
    pub skip_raw_data: u8,
    /// Refuse encrypted models in a format without authentication (ONNXCRY1) on load
    /// (`ONNXL_STATUS_AUTHENTICATION`); default 0. 0 or 1. (A former reserved byte: callers that
    /// zeroed it keep the old behaviour.)
    pub reject_unauthenticated: u8,
    /// Must be zero (room for later options).
    pub reserved: u8,
    /// (Since struct size 64.) Memory budget of the parsed structure besides tensor payloads,
    /// enforced while parsing (`ONNXL_STATUS_LIMIT_EXCEEDED` past it): 0 (default) = automatic,
    /// 16 MiB + 32 × the input size; `UINT64_MAX` = no limit.
    pub max_metadata_bytes: u64,
    /// (Since struct size 80.) Called as a load goes, with the bytes of each piece done: the
    /// model file's size once it is parsed, then each piece of external data as it is read (at
    /// most 8 MiB; with `no_copy`, each range as it is mapped); a URL load reports each piece
    /// received. The calls of a file load sum to the bytes it brought in (ranges named by
    /// several tensors count once); loads from bytes or streams report their external data
    /// only. Called from the loading threads, possibly several at once; it must return (no
    /// `longjmp`, no C++ exception). Default NULL: none.
    pub progress: Option<unsafe extern "C" fn(bytes: u64, user_data: *mut c_void)>,
    /// (Since struct size 80.) Passed to `progress` as it is (default NULL).
    pub progress_user_data: *mut c_void,
    /// (Since struct size 88.) Options of a load from a URL (`s3://`, `https://`, ...): NULL
    /// (default), or a NULL-terminated array of key and value strings, e.g. `{"aws_endpoint",
    /// "http://127.0.0.1:9000", "concurrency", "16", NULL}`, applied over the environment's
    /// (docs/remote.md); read during the call only. Ignored for local paths, and by a library
    /// without the `"remote"` feature (which refuses URLs).
    pub storage_options: *const *const c_char,
}

/// Options of serializing (C++ `SerializeOptions`). Get the defaults with
/// `onnxl_serialize_options_default()`, then change fields. A NULL options pointer means
/// defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OnnxlSerializeOptions {
    /// `sizeof(OnnxlSerializeOptions)` as compiled by the caller (set by the default function).
    pub struct_size: usize,
    /// Tensors with at least this many payload bytes count as large (external data). Default 64.
    pub raw_data_threshold: u64,
    /// Offset alignment of every tensor the model + weights stream writes to the weights file:
    /// 0 = the default, 4096 (the page size the ONNX external-data format recommends); 1 =
    /// packed; otherwise a power of two. Default 0.
    pub alignment: u64,
    /// Refuse to write more than this many bytes (0 = no limit). Default 0.
    pub max_serialized_size_bytes: u64,
    /// 1 = sequential (default), n > 1 = n threads, negative = all cores; 0 is invalid.
    pub num_threads: i32,
    /// Write the structure only: tensors with at least `raw_data_threshold` payload bytes are
    /// written without them (the message is not changed), as `OnnxlParseOptions.skip_raw_data`
    /// drops them on reading. Default 0. 0 or 1. (A former reserved byte: callers that zeroed it
    /// keep the old behaviour.)
    pub skip_raw_data: u8,
    /// The model + weights stream: tensors still external in memory (data_location EXTERNAL,
    /// bytes not loaded) keep their external_data references as they are instead of being read
    /// and rewritten; their files must not be ones the save writes. Default 0 (such a tensor
    /// is an error). 0 or 1. Other writers write every tensor as it is. (A former reserved byte.)
    pub use_external_data_location: u8,
    /// Must be zero (room for later options).
    pub reserved: u16,
    /// (Since struct size 48.) The model + weights stream: start a new weights file
    /// (`WEIGHTS.1`, `WEIGHTS.2`, ...) when the next tensor would take the current one past
    /// this many bytes. Default 0 (no limit). Other writers write one file.
    pub max_external_file_size: u64,
    /// (Since struct size 56.) Offset alignment of the `raw_data` payloads left in the
    /// serialized model, a power of two from 64 to 65536: every payload of at least
    /// `raw_data_threshold` bytes starts at a multiple of it from the start of the output,
    /// after a padding field no onnx.proto message uses, so that a no-copy load borrows it from
    /// the file's map (docs/aligned-models.md). Default 0: none, the bytes protobuf writes. A
    /// library without the `"inline-alignment"` feature refuses other values
    /// (`ONNXL_STATUS_UNSUPPORTED`).
    pub inline_alignment: u64,
    /// (Since struct size 64.) Options of a save to a URL, as
    /// `OnnxlParseOptions.storage_options` (default NULL).
    pub storage_options: *const *const c_char,
}

/// Every `struct_size` of `OnnxlParseOptions` ever published (oldest first).
/// 56: the first; 64: `max_metadata_bytes` appended; 80: `progress` and its user data; 88:
/// `storage_options`.
const PARSE_OPTIONS_SIZES: &[usize] = &[56, 64, 80, size_of::<OnnxlParseOptions>()];
/// Every `struct_size` of `OnnxlSerializeOptions` ever published (oldest first).
/// 40: the first; 48: `max_external_file_size` appended (and two reserved bytes became
/// `skip_raw_data` and `use_external_data_location`); 56: `inline_alignment` appended; 64:
/// `storage_options`.
const SERIALIZE_OPTIONS_SIZES: &[usize] = &[40, 48, 56, size_of::<OnnxlSerializeOptions>()];

/// The default parse options (same values as the C++ library), with `struct_size` set.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_parse_options_default() -> OnnxlParseOptions {
    let d = ParseOptions::default();
    let load = LoadOptions::default();
    OnnxlParseOptions {
        struct_size: size_of::<OnnxlParseOptions>(),
        raw_data_threshold: d.raw_data_threshold,
        alignment: d.alignment,
        min_parallel_block_size: d.min_parallel_block_size,
        max_tensor_size_bytes: d.max_tensor_size_bytes,
        num_threads: d.num_threads,
        max_recursion_depth: d.max_recursion_depth,
        file_load_mode: OnnxlFileLoadMode::Auto as u32,
        no_copy: d.no_copy.into(),
        skip_raw_data: d.skip_raw_data.into(),
        reject_unauthenticated: load.reject_unauthenticated.into(),
        reserved: 0,
        max_metadata_bytes: d.max_metadata_bytes,
        progress: None,
        progress_user_data: std::ptr::null_mut(),
        storage_options: std::ptr::null(),
    }
}

/// The default serialize options (same values as the C++ library), with `struct_size` set.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_serialize_options_default() -> OnnxlSerializeOptions {
    let d = SerializeOptions::default();
    OnnxlSerializeOptions {
        struct_size: size_of::<OnnxlSerializeOptions>(),
        raw_data_threshold: d.raw_data_threshold,
        alignment: d.alignment,
        max_serialized_size_bytes: d.max_serialized_size_bytes,
        num_threads: d.num_threads,
        skip_raw_data: d.skip_raw_data.into(),
        use_external_data_location: d.use_external_data_location.into(),
        reserved: 0,
        max_external_file_size: d.max_external_file_size,
        inline_alignment: d.inline_alignment,
        storage_options: std::ptr::null(),
    }
}

/// The most threads a `num_threads` field may ask for: 4 × the cores the OS reports, at least
/// 16. A larger value is `ONNXL_STATUS_INVALID_ARGUMENT` (negative values still mean "all
/// cores").
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_max_threads() -> u32 {
    u32::try_from(crate::storage::max_threads()).unwrap_or(u32::MAX)
}

/// Drops the worker thread pools kept between operations (at most two, of the last two thread
/// counts used): their threads exit once the operations still running on them are done. Call it
/// when the host is done with parallel loads and saves and wants no library thread left; later
/// operations start pools again as needed. Thread safety: callable from any thread at any time.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_release_thread_pools() {
    let _ = std::panic::catch_unwind(crate::storage::release_thread_pools);
}

/// A boolean field of an options struct, declared `uint8_t` so that any byte a C caller stores
/// is a valid value to read: 0 or 1, anything else is `INVALID_ARGUMENT` naming `field`.
pub(crate) fn flag(v: u8, field: &str) -> Result<bool, FfiError> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(FfiError::invalid(format!(
            "{field} is {v}: a boolean field must be 0 or 1"
        ))),
    }
}

/// The load options (and in them the parse options) behind a C pointer (NULL = defaults),
/// validated.
///
/// # Safety
/// `p` is NULL or points at options whose `struct_size` bytes are readable.
pub(crate) unsafe fn load_options(p: *const OnnxlParseOptions) -> Result<LoadOptions, FfiError> {
    if p.is_null() {
        return Ok(LoadOptions::default());
    }
    // SAFETY: non-NULL with `struct_size` readable bytes (contract); an older caller's struct
    // is a prefix of the current one, the fields it lacks keep their defaults.
    let current = unsafe {
        read_versioned(
            p,
            onnxl_parse_options_default(),
            PARSE_OPTIONS_SIZES,
            "OnnxlParseOptions",
        )
    }?;
    let o = &current;
    if o.reserved != 0 {
        return Err(FfiError::invalid("OnnxlParseOptions.reserved must be zero"));
    }
    let mode = check_enum(
        o.file_load_mode as i32,
        &[0, 1, 2],
        "OnnxlParseOptions.file_load_mode",
    )
    .map_err(|_| {
        FfiError::invalid(format!(
            "OnnxlParseOptions.file_load_mode {} is not an OnnxlFileLoadMode",
            o.file_load_mode
        ))
    })?;
    let parse = ParseOptions {
        raw_data_threshold: o.raw_data_threshold,
        alignment: o.alignment,
        no_copy: flag(o.no_copy, "OnnxlParseOptions.no_copy")?,
        num_threads: o.num_threads,
        min_parallel_block_size: o.min_parallel_block_size,
        skip_raw_data: flag(o.skip_raw_data, "OnnxlParseOptions.skip_raw_data")?,
        max_recursion_depth: o.max_recursion_depth,
        max_tensor_size_bytes: o.max_tensor_size_bytes,
        max_metadata_bytes: o.max_metadata_bytes,
        file_load_mode: match mode {
            0 => FileLoadMode::Auto,
            1 => FileLoadMode::Mmap,
            _ => FileLoadMode::Buffered,
        },
    };
    let opts = LoadOptions {
        parse,
        reject_unauthenticated: flag(
            o.reject_unauthenticated,
            "OnnxlParseOptions.reject_unauthenticated",
        )?,
        progress: o.progress.map(|f| {
            let c = CProgress {
                f,
                data: o.progress_user_data,
            };
            LoadProgress::new(move |n| c.call(n))
        }),
        #[cfg(feature = "remote")]
        // SAFETY: NULL or a NULL-terminated array of C strings (contract).
        storage_options: unsafe { storage_pairs(o.storage_options, "OnnxlParseOptions") }?,
        // External data: defaults (loaded for file loads); see `ffi::external` for control.
        ..LoadOptions::default()
    };
    opts.validate()?;
    Ok(opts)
}

/// A C progress callback with its user data.
struct CProgress {
    f: unsafe extern "C" fn(u64, *mut c_void),
    data: *mut c_void,
}

// SAFETY: the user data is only passed back to the callback, which the C contract
// (`OnnxlParseOptions.progress`) lets the library call from any thread, several at once.
unsafe impl Send for CProgress {}
// SAFETY: as for `Send`: shared use is calls of the callback, which may run concurrently.
unsafe impl Sync for CProgress {}

impl CProgress {
    fn call(&self, bytes: u64) {
        // SAFETY: a function pointer the caller gave for this load, with its own user data.
        unsafe { (self.f)(bytes, self.data) }
    }
}

/// The serialize options behind a C pointer (NULL = defaults), validated.
///
/// # Safety
/// `p` is NULL or points at options whose `struct_size` bytes are readable.
pub(crate) unsafe fn serialize_options(
    p: *const OnnxlSerializeOptions,
) -> Result<SerializeOptions, FfiError> {
    if p.is_null() {
        return Ok(SerializeOptions::default());
    }
    // SAFETY: non-NULL with `struct_size` readable bytes (contract); an older caller's struct
    // is a prefix of the current one, the fields it lacks keep their defaults.
    let o = unsafe {
        read_versioned(
            p,
            onnxl_serialize_options_default(),
            SERIALIZE_OPTIONS_SIZES,
            "OnnxlSerializeOptions",
        )
    }?;
    if o.reserved != 0 {
        return Err(FfiError::invalid(
            "OnnxlSerializeOptions.reserved must be zero",
        ));
    }
    let opts = SerializeOptions {
        raw_data_threshold: o.raw_data_threshold,
        alignment: o.alignment,
        num_threads: o.num_threads,
        max_serialized_size_bytes: o.max_serialized_size_bytes,
        skip_raw_data: flag(o.skip_raw_data, "OnnxlSerializeOptions.skip_raw_data")?,
        use_external_data_location: flag(
            o.use_external_data_location,
            "OnnxlSerializeOptions.use_external_data_location",
        )?,
        max_external_file_size: o.max_external_file_size,
        inline_alignment: o.inline_alignment,
        #[cfg(feature = "remote")]
        // SAFETY: NULL or a NULL-terminated array of C strings (contract).
        storage_options: unsafe { storage_pairs(o.storage_options, "OnnxlSerializeOptions") }?,
    };
    opts.validate()?;
    Ok(opts)
}

/// The `(key, value)` pairs of a `storage_options` array of `what` (at most 512 pairs: a
/// missing terminator is refused, not followed).
///
/// # Safety
/// `p` is NULL or a NULL-terminated array of NUL-terminated strings.
#[cfg(feature = "remote")]
unsafe fn storage_pairs(
    p: *const *const c_char,
    what: &str,
) -> Result<Vec<(String, String)>, FfiError> {
    let mut pairs = Vec::new();
    if p.is_null() {
        return Ok(pairs);
    }
    let text = |c: *const c_char| {
        // SAFETY: a NUL-terminated string of the array (contract).
        let s = unsafe { std::ffi::CStr::from_ptr(c) };
        s.to_str()
            .map(str::to_owned)
            .map_err(|_| FfiError::invalid(format!("{what}.storage_options: {s:?} is not UTF-8")))
    };
    for i in (0..).step_by(2) {
        // SAFETY: the array is read up to its NULL key (contract).
        let key = unsafe { *p.add(i) };
        if key.is_null() {
            break;
        }
        if pairs.len() == 512 {
            return Err(FfiError::invalid(format!(
                "{what}.storage_options has more than 512 pairs (is it NULL-terminated?)"
            )));
        }
        let key = text(key)?;
        // SAFETY: as above; a key is followed by its value.
        let value = unsafe { *p.add(i + 1) };
        if value.is_null() {
            return Err(FfiError::invalid(format!(
                "{what}.storage_options: {key:?} has no value"
            )));
        }
        pairs.push((key, text(value)?));
    }
    Ok(pairs)
}

/// Checks `struct_size` against the published sizes and copies the caller's struct over
/// `defaults` (the fields an older caller does not have keep their default values).
///
/// # Safety
/// `p` is non-NULL and readable for at least a `usize`, and for `struct_size` bytes.
pub(crate) unsafe fn read_versioned<T: Copy>(
    p: *const T,
    mut defaults: T,
    known: &[usize],
    what: &str,
) -> Result<T, FfiError> {
    // SAFETY: every options struct starts with `size_t struct_size` (contract).
    let size = unsafe { p.cast::<usize>().read() };
    if !known.contains(&size) {
        return Err(FfiError::invalid(format!(
            "{what}.struct_size is {size}, this library knows {known:?} (initialize the struct with \
             its _default() function; a larger size means a header newer than the library)"
        )));
    }
    debug_assert!(size <= size_of::<T>());
    // SAFETY: `size` bytes are readable (contract) and at most `size_of::<T>()` (every known
    // size is); a published size ends at a field boundary, so the copy writes whole fields of
    // the caller's (valid) values over the defaults.
    unsafe {
        std::ptr::copy_nonoverlapping(p.cast::<u8>(), (&mut defaults as *mut T).cast::<u8>(), size);
    }
    Ok(defaults)
}

/// An optional NUL-terminated path.
///
/// # Safety
/// `p` is NULL or NUL-terminated.
pub(crate) unsafe fn opt_path(p: *const c_char, what: &str) -> Result<Option<PathBuf>, FfiError> {
    if p.is_null() {
        Ok(None)
    } else {
        // SAFETY: non-NULL and NUL-terminated (contract).
        unsafe { c_path(p, what) }.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::status::OnnxlStatus;

    #[test]
    fn layout_has_no_tail_padding() {
        assert_eq!(size_of::<OnnxlParseOptions>(), 88);
        assert_eq!(size_of::<OnnxlSerializeOptions>(), 64);
    }

    #[test]
    fn defaults_round_trip() {
        let p = onnxl_parse_options_default();
        // SAFETY: a valid struct on the stack; NULL allowed.
        unsafe {
            assert_eq!(load_options(&p).unwrap(), LoadOptions::default());
            assert_eq!(
                load_options(std::ptr::null()).unwrap(),
                LoadOptions::default()
            );
            let s = onnxl_serialize_options_default();
            assert_eq!(serialize_options(&s).unwrap(), SerializeOptions::default());
        }
    }

    #[cfg(feature = "remote")]
    #[test]
    fn storage_options_are_read_as_pairs_up_to_their_null() {
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        let (k, v, k2, v2) = (c("aws_region"), c("eu-west-1"), c("concurrency"), c("4"));
        let list = [
            k.as_ptr(),
            v.as_ptr(),
            k2.as_ptr(),
            v2.as_ptr(),
            std::ptr::null(),
        ];
        let mut p = onnxl_parse_options_default();
        p.storage_options = list.as_ptr();
        let mut s = onnxl_serialize_options_default();
        s.storage_options = list.as_ptr();
        let want = vec![
            ("aws_region".to_string(), "eu-west-1".to_string()),
            ("concurrency".to_string(), "4".to_string()),
        ];
        // SAFETY: valid structs and a NULL-terminated list of C strings.
        unsafe {
            assert_eq!(load_options(&p).unwrap().storage_options, want);
            assert_eq!(serialize_options(&s).unwrap().storage_options, want);
            // An older caller's struct has no such field: none.
            p.struct_size = 80;
            assert!(load_options(&p).unwrap().storage_options.is_empty());
            // A key without a value, or text that is not UTF-8: invalid.
            let odd = [k.as_ptr(), std::ptr::null()];
            p = onnxl_parse_options_default();
            p.storage_options = odd.as_ptr();
            let e = load_options(&p).unwrap_err();
            assert!(
                e.message.contains("\"aws_region\" has no value"),
                "{}",
                e.message
            );
            let bad = std::ffi::CString::from_vec_unchecked(vec![0xff, 0xfe]);
            let list = [bad.as_ptr(), v.as_ptr(), std::ptr::null()];
            p.storage_options = list.as_ptr();
            assert_eq!(
                load_options(&p).unwrap_err().status,
                OnnxlStatus::InvalidArgument
            );
        }
    }

    #[test]
    fn bad_values_are_invalid_argument() {
        let mut p = onnxl_parse_options_default();
        p.file_load_mode = 7;
        // SAFETY: valid structs on the stack.
        unsafe {
            let e = load_options(&p).unwrap_err();
            assert_eq!(e.status, OnnxlStatus::InvalidArgument);
            assert!(e.message.contains("file_load_mode 7"), "{}", e.message);
            // The first published size (56, before `max_metadata_bytes`) still works, with the
            // default for the missing field.
            p = onnxl_parse_options_default();
            p.max_metadata_bytes = 12345;
            p.struct_size = 56;
            assert_eq!(load_options(&p).unwrap().parse.max_metadata_bytes, 0);
            p.struct_size = 64;
            assert_eq!(load_options(&p).unwrap().parse.max_metadata_bytes, 12345);
            p = onnxl_parse_options_default();
            p.struct_size = 48;
            assert_eq!(
                load_options(&p).unwrap_err().status,
                OnnxlStatus::InvalidArgument
            );
            p = onnxl_parse_options_default();
            p.num_threads = 0;
            assert_eq!(
                load_options(&p).unwrap_err().status,
                OnnxlStatus::InvalidArgument
            );
            p = onnxl_parse_options_default();
            p.reserved = 1;
            assert_eq!(
                load_options(&p).unwrap_err().status,
                OnnxlStatus::InvalidArgument
            );
            let mut s = onnxl_serialize_options_default();
            s.alignment = 3;
            assert_eq!(
                serialize_options(&s).unwrap_err().status,
                OnnxlStatus::InvalidArgument
            );
            // The first published size (40) still works: the fields it lacks take defaults.
            s = onnxl_serialize_options_default();
            s.max_external_file_size = 4096;
            s.skip_raw_data = 1;
            s.struct_size = 40;
            let o = serialize_options(&s).unwrap();
            assert_eq!((o.max_external_file_size, o.skip_raw_data), (0, true));
            s.struct_size = 48;
            s.inline_alignment = 4096;
            let o = serialize_options(&s).unwrap();
            // Size 48 (before `inline_alignment`): the field keeps its default.
            assert_eq!((o.max_external_file_size, o.inline_alignment), (4096, 0));
            s.struct_size = 56;
            assert_eq!(serialize_options(&s).unwrap().inline_alignment, 4096);
            s.inline_alignment = 32;
            let e = serialize_options(&s).unwrap_err();
            assert_eq!(e.status, OnnxlStatus::InvalidArgument);
            assert!(e.message.contains("inline_alignment"), "{}", e.message);
            s.inline_alignment = 0;
            s.use_external_data_location = 2;
            let e = serialize_options(&s).unwrap_err();
            assert!(
                e.message.contains("use_external_data_location"),
                "{}",
                e.message
            );
            p = onnxl_parse_options_default();
            p.file_load_mode = OnnxlFileLoadMode::Mmap as u32;
            p.no_copy = 1;
            let o = load_options(&p).unwrap();
            assert_eq!(
                (o.parse.file_load_mode, o.parse.no_copy),
                (FileLoadMode::Mmap, true)
            );
        }
    }
}
