//! Status codes, the mapping of [`crate::Error`] to them (in ONE place: `status_of`), and the
//! thread-local message of the last failure.

use std::cell::RefCell;
use std::ffi::{CString, c_char};

use crate::error::{DecodeErrorKind, Error};

/// Result of every fallible `onnxl_*` function.
///
/// The values are stable: they never change and new ones are only appended (later issues add
/// codes after the last one). `onnxl_last_error_message()` gives the text of the last failure
/// on the calling thread.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnnxlStatus {
    /// Success.
    Ok = 0,
    /// An argument or option has an invalid value (bad enum value in an options struct,
    /// unknown `struct_size`, non-UTF-8 path on a platform that needs UTF-8, ...).
    InvalidArgument = 1,
    /// A required pointer argument is NULL.
    NullPointer = 2,
    /// Reading or writing a file or stream failed.
    Io = 3,
    /// The bytes are not a valid protobuf encoding of the message (or not a valid file of the
    /// format read, e.g. a malformed parameter dictionary).
    Parse = 4,
    /// External tensor data could not be resolved, read or written.
    ExternalData = 5,
    /// A path was refused (outside the model directory, symlink, ...).
    PathRefused = 6,
    /// A cryptographic operation failed.
    Crypto = 7,
    /// Decryption failed authentication: wrong key, or the data was tampered with.
    Authentication = 8,
    /// The operation is not supported (e.g. writing to a read-only stream).
    Unsupported = 9,
    /// A configured limit was exceeded (recursion depth, tensor size, serialized size), or a
    /// repeated field would hold more than its 2^31 - 1 elements.
    LimitExceeded = 10,
    /// Memory could not be allocated.
    OutOfMemory = 11,
    /// The library panicked (a bug); the objects involved are still valid to free.
    Panic = 12,
    /// An index is outside its repeated field.
    OutOfRange = 13,
    /// An error the C ABI does not classify yet.
    Internal = 14,
    /// The model failed onnx's checker (the onnx component's `onnxl_check_model`; onnx's
    /// `ValidationError`).
    Validation = 15,
    /// Shape inference failed (the onnx component's `onnxl_infer_shapes`; onnx's
    /// `InferenceError`).
    Inference = 16,
    /// The version converter failed (the onnx component's `onnxl_convert_version`; onnx's
    /// `ConvertError`).
    Conversion = 17,
    /// No such entry: no operator schema of that name, domain and version.
    NotFound = 18,
}

impl OnnxlStatus {
    /// Every status, in value order (used by `onnxl_status_name` and the tests).
    pub(crate) const ALL: [OnnxlStatus; 19] = [
        Self::Ok,
        Self::InvalidArgument,
        Self::NullPointer,
        Self::Io,
        Self::Parse,
        Self::ExternalData,
        Self::PathRefused,
        Self::Crypto,
        Self::Authentication,
        Self::Unsupported,
        Self::LimitExceeded,
        Self::OutOfMemory,
        Self::Panic,
        Self::OutOfRange,
        Self::Internal,
        Self::Validation,
        Self::Inference,
        Self::Conversion,
        Self::NotFound,
    ];

    /// The C enumerator name, NUL-terminated.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Ok => "ONNXL_STATUS_OK\0",
            Self::InvalidArgument => "ONNXL_STATUS_INVALID_ARGUMENT\0",
            Self::NullPointer => "ONNXL_STATUS_NULL_POINTER\0",
            Self::Io => "ONNXL_STATUS_IO\0",
            Self::Parse => "ONNXL_STATUS_PARSE\0",
            Self::ExternalData => "ONNXL_STATUS_EXTERNAL_DATA\0",
            Self::PathRefused => "ONNXL_STATUS_PATH_REFUSED\0",
            Self::Crypto => "ONNXL_STATUS_CRYPTO\0",
            Self::Authentication => "ONNXL_STATUS_AUTHENTICATION\0",
            Self::Unsupported => "ONNXL_STATUS_UNSUPPORTED\0",
            Self::LimitExceeded => "ONNXL_STATUS_LIMIT_EXCEEDED\0",
            Self::OutOfMemory => "ONNXL_STATUS_OUT_OF_MEMORY\0",
            Self::Panic => "ONNXL_STATUS_PANIC\0",
            Self::OutOfRange => "ONNXL_STATUS_OUT_OF_RANGE\0",
            Self::Internal => "ONNXL_STATUS_INTERNAL\0",
            Self::Validation => "ONNXL_STATUS_VALIDATION\0",
            Self::Inference => "ONNXL_STATUS_INFERENCE\0",
            Self::Conversion => "ONNXL_STATUS_CONVERSION\0",
            Self::NotFound => "ONNXL_STATUS_NOT_FOUND\0",
        }
    }
}

/// A failure inside the C ABI: a status and its message.
#[derive(Debug)]
pub(crate) struct FfiError {
    pub(crate) status: OnnxlStatus,
    pub(crate) message: String,
}

impl FfiError {
    pub(crate) fn new(status: OnnxlStatus, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
    // The constructors of failures are out of line: ~1,700 `onnxl_*` functions reach them, and
    // inlined copies of their formatting would be most of the C ABI's code.
    #[cold]
    #[inline(never)]
    pub(crate) fn null(what: &str) -> Self {
        Self::new(OnnxlStatus::NullPointer, format!("{what} is NULL"))
    }
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(OnnxlStatus::InvalidArgument, message)
    }
    /// A list that already holds `max_len` elements, or would hold more.
    #[cold]
    #[inline(never)]
    pub(crate) fn too_many_elements(max_len: usize) -> Self {
        Self::new(
            OnnxlStatus::LimitExceeded,
            format!("a repeated field holds at most {max_len} elements"),
        )
    }
    #[cold]
    #[inline(never)]
    pub(crate) fn out_of_range(field: &str, index: usize, len: usize) -> Self {
        Self::new(
            OnnxlStatus::OutOfRange,
            format!("index {index} out of range for {field} (size {len})"),
        )
    }
}

impl From<crate::wire::inline_vec::raw::GrowError> for FfiError {
    /// A list that could not grow: `ONNXL_STATUS_LIMIT_EXCEEDED` past its 2^31 − 1 elements,
    /// else `ONNXL_STATUS_OUT_OF_MEMORY`.
    #[cold]
    #[inline(never)]
    fn from(e: crate::wire::inline_vec::raw::GrowError) -> Self {
        use crate::wire::inline_vec::{MAX_LEN, raw::GrowError};
        match e {
            GrowError::CapacityOverflow => Self::too_many_elements(MAX_LEN),
            GrowError::Alloc(layout) => {
                crate::Error::alloc_failed(layout.size(), "a repeated field").into()
            }
        }
    }
}

/// The status of a library error: the ONE place where [`Error`] variants map to [`OnnxlStatus`].
pub(crate) fn status_of(e: &Error) -> OnnxlStatus {
    match e {
        Error::Decode(d) => match d.kind {
            DecodeErrorKind::RecursionLimit(_)
            | DecodeErrorKind::TensorTooLarge { .. }
            | DecodeErrorKind::MetadataLimit { .. }
            | DecodeErrorKind::TooManyElements { .. } => OnnxlStatus::LimitExceeded,
            DecodeErrorKind::OutOfMemory { .. } => OnnxlStatus::OutOfMemory,
            _ => OnnxlStatus::Parse,
        },
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::OutOfMemory => {
            OnnxlStatus::OutOfMemory
        }
        Error::Io { .. } => OnnxlStatus::Io,
        Error::InvalidOption { .. } | Error::InvalidArgument(_) => OnnxlStatus::InvalidArgument,
        Error::LimitExceeded(_) => OnnxlStatus::LimitExceeded,
        Error::OutOfMemory(_) => OnnxlStatus::OutOfMemory,
        Error::Unsupported(_) => OnnxlStatus::Unsupported,
        Error::ExternalData { .. } => OnnxlStatus::ExternalData,
        Error::PathRefused { .. } => OnnxlStatus::PathRefused,
        Error::Crypto(_) => OnnxlStatus::Crypto,
        Error::Authentication(_) => OnnxlStatus::Authentication,
        Error::Params { .. } => OnnxlStatus::Parse,
        // No wildcard: a variant added to `Error` fails to compile here until it has a status.
    }
}

impl From<Error> for FfiError {
    #[cold]
    #[inline(never)]
    fn from(e: Error) -> Self {
        Self {
            status: status_of(&e),
            message: e.to_string(),
        }
    }
}

thread_local! {
    /// Message of the last failure on this thread (NUL-terminated).
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
    /// Status of the last failure on this thread.
    static LAST_STATUS: std::cell::Cell<OnnxlStatus> = const { std::cell::Cell::new(OnnxlStatus::Ok) };
}

/// Records `e` as the last failure of this thread and returns its status.
#[cold]
#[inline(never)]
pub(crate) fn set_last_error(e: FfiError) -> OnnxlStatus {
    let text = CString::new(e.message.replace('\0', "\\0")).unwrap_or_default();
    // `try_with`: during thread teardown the slot may be gone; the status is still returned.
    let _ = LAST_ERROR.try_with(|slot| *slot.borrow_mut() = Some(text));
    let _ = LAST_STATUS.try_with(|slot| slot.set(e.status));
    e.status
}

/// Status of the last failed `onnxl_*` call on the calling thread (`ONNXL_STATUS_OK` when none
/// has failed): the status behind a NULL or zero result of a function that returns a pointer or a
/// value (e.g. `ONNXL_STATUS_OUT_OF_RANGE` for an index past the end). Like
/// `onnxl_last_error_message`, successful calls do not reset it.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_last_error_status() -> OnnxlStatus {
    LAST_STATUS
        .try_with(|slot| slot.get())
        .unwrap_or(OnnxlStatus::Ok)
}

/// Message of the last failed `onnxl_*` call on the calling thread, NUL-terminated UTF-8 (empty
/// when no call has failed on this thread).
///
/// Lifetime: the string is owned by the library (thread-local storage) and stays valid until the
/// next `onnxl_*` call on the same thread (other than `onnxl_last_error_message`,
/// `onnxl_last_error_message_length`, `onnxl_last_error_status` and `onnxl_status_name`); copy it
/// to keep it. Never NULL,
/// never to be freed. Successful calls do not clear it, so read it only after a failure.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_last_error_message() -> *const c_char {
    static EMPTY: &[u8] = b"\0";
    let p = std::panic::catch_unwind(|| {
        LAST_ERROR
            .try_with(|slot| slot.borrow().as_ref().map(|s| s.as_ptr()))
            .ok()
            .flatten()
    });
    match p {
        Ok(Some(p)) => p,
        _ => EMPTY.as_ptr().cast(),
    }
}

/// Records a failure as the calling thread's last error and returns `status`: for libraries
/// built on this one (the onnx component) whose functions report through
/// `onnxl_last_error_message` like the library's own. `message` is `len` bytes of UTF-8 (invalid
/// sequences are replaced); NULL means an empty message. `ONNXL_STATUS_OK` or an unknown value is
/// recorded as `ONNXL_STATUS_INTERNAL`.
///
/// # Safety
/// `message` is NULL or points at `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_set_last_error(
    status: u32,
    message: *const c_char,
    len: usize,
) -> OnnxlStatus {
    let status = OnnxlStatus::ALL
        .iter()
        .copied()
        .find(|s| *s as u32 == status && *s != OnnxlStatus::Ok)
        .unwrap_or(OnnxlStatus::Internal);
    let text = if message.is_null() {
        String::new()
    } else {
        // SAFETY: non-NULL, `len` readable bytes (contract above).
        let bytes = unsafe { std::slice::from_raw_parts(message.cast::<u8>(), len) };
        String::from_utf8_lossy(bytes).into_owned()
    };
    set_last_error(FfiError::new(status, text))
}

/// Length in bytes (without the terminating NUL) of `onnxl_last_error_message()`.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_last_error_message_length() -> usize {
    std::panic::catch_unwind(|| {
        LAST_ERROR
            .try_with(|slot| slot.borrow().as_ref().map_or(0, |s| s.as_bytes().len()))
            .unwrap_or(0)
    })
    .unwrap_or(0)
}

/// The enumerator name of a status value (e.g. `"ONNXL_STATUS_PARSE"`), or
/// `"ONNXL_STATUS_UNKNOWN"` for a value this library does not define.
///
/// Lifetime: a static string; never NULL, never to be freed.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_status_name(status: u32) -> *const c_char {
    let name = OnnxlStatus::ALL
        .iter()
        .find(|s| **s as u32 == status)
        .map(|s| s.name())
        .unwrap_or("ONNXL_STATUS_UNKNOWN\0");
    name.as_ptr().cast()
}

/// The library version as `"MAJOR.MINOR.PATCH"`.
///
/// Lifetime: a static string; never NULL, never to be freed.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// True when the optional part `name` (NUL-terminated: `"parallel"`, `"encryption"`, `"dlpack"`,
/// `"params"`, `"prepacked"`, `"text-format"`, `"inline-alignment"`, `"remote"`) is compiled into
/// this library; false for other names and NULL. A library built without one (the minimal build,
/// `cargo build --no-default-features`) still exports every function of the header: those of a missing part
/// return `ONNXL_STATUS_UNSUPPORTED`, except that without `"parallel"` a `num_threads` above 1
/// is accepted and the work runs on the calling thread, and without `"remote"` a URL given as a
/// path is a local path (that does not exist).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_has_feature(name: *const c_char) -> bool {
    if name.is_null() {
        return false;
    }
    // SAFETY: non-NULL and NUL-terminated (contract above).
    let name = unsafe { std::ffi::CStr::from_ptr(name) };
    name.to_str().is_ok_and(crate::error::has_feature)
}

#[cfg(test)]
pub(crate) fn last_error() -> String {
    // SAFETY: the pointer is a NUL-terminated thread-local string, valid until the next call.
    unsafe { std::ffi::CStr::from_ptr(onnxl_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::DecodeError;

    #[test]
    fn values_are_stable() {
        for (i, s) in OnnxlStatus::ALL.iter().enumerate() {
            assert_eq!(*s as u32, i as u32, "{s:?}");
        }
        assert_eq!(OnnxlStatus::Ok as u32, 0);
        assert_eq!(OnnxlStatus::Panic as u32, 12);
    }

    #[test]
    fn names() {
        // SAFETY: static NUL-terminated strings.
        let name = |v| {
            unsafe { std::ffi::CStr::from_ptr(onnxl_status_name(v)) }
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(name(0), "ONNXL_STATUS_OK");
        assert_eq!(name(4), "ONNXL_STATUS_PARSE");
        assert_eq!(name(14), "ONNXL_STATUS_INTERNAL");
        assert_eq!(name(18), "ONNXL_STATUS_NOT_FOUND");
        assert_eq!(name(999), "ONNXL_STATUS_UNKNOWN");
    }

    #[test]
    fn errors_map_to_statuses() {
        let dec = |k| Error::Decode(DecodeError::new(k, 3));
        assert_eq!(
            status_of(&dec(DecodeErrorKind::Truncated)),
            OnnxlStatus::Parse
        );
        assert_eq!(
            status_of(&dec(DecodeErrorKind::RecursionLimit(100))),
            OnnxlStatus::LimitExceeded
        );
        let io = Error::io("x", std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(status_of(&io), OnnxlStatus::Io);
        let opt = Error::InvalidOption {
            name: "alignment",
            reason: "3".into(),
        };
        assert_eq!(status_of(&opt), OnnxlStatus::InvalidArgument);
        assert_eq!(
            status_of(&Error::LimitExceeded("x".into())),
            OnnxlStatus::LimitExceeded
        );
        assert_eq!(
            status_of(&Error::alloc_failed(10, "x")),
            OnnxlStatus::OutOfMemory
        );
        assert_eq!(
            status_of(&Error::Unsupported("x".into())),
            OnnxlStatus::Unsupported
        );
        let ext = Error::ExternalData {
            tensor: "w".into(),
            path: "w.bin".into(),
            reason: "x".into(),
        };
        assert_eq!(status_of(&ext), OnnxlStatus::ExternalData);
        let refused = Error::PathRefused {
            path: "../w.bin".into(),
            reason: "x".into(),
        };
        assert_eq!(status_of(&refused), OnnxlStatus::PathRefused);
        assert_eq!(status_of(&Error::Crypto("x".into())), OnnxlStatus::Crypto);
        assert_eq!(
            status_of(&Error::Authentication("x".into())),
            OnnxlStatus::Authentication
        );
    }

    #[test]
    fn last_error_is_thread_local_and_kept_until_replaced() {
        assert_eq!(
            set_last_error(FfiError::invalid("first")),
            OnnxlStatus::InvalidArgument
        );
        assert_eq!(last_error(), "first");
        assert_eq!(onnxl_last_error_message_length(), 5);
        assert_eq!(onnxl_last_error_status(), OnnxlStatus::InvalidArgument);
        std::thread::spawn(|| {
            assert_eq!(last_error(), "");
            set_last_error(FfiError::null("x"));
            assert_eq!(last_error(), "x is NULL");
        })
        .join()
        .unwrap();
        assert_eq!(last_error(), "first");
        set_last_error(FfiError::new(OnnxlStatus::Io, "a\0b"));
        assert_eq!(last_error(), "a\\0b");
        assert_eq!(onnxl_last_error_status(), OnnxlStatus::Io);
    }
}
