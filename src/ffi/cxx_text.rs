//! The text format for the C++ message classes: `DebugString()`, `ShortDebugString()` and
//! `Utf8DebugString()` print through
//! [`onnxl_cxx_debug_string`](crate::ffi::cxx_text::onnxl_cxx_debug_string) (declared in
//! `include/onnx_light.hpp`, not in the C header).

use std::ffi::{CStr, c_char, c_void};

use super::handle::c_bytes;
use super::panic::ffi_value;
use super::status::{FfiError, OnnxlStatus};
use crate::proto::text_format::{TextStyle, debug_bytes};

/// Allocator callback of [`onnxl_cxx_debug_string`]: returns room for `size` bytes, or NULL.
pub type OnnxlCxxAlloc = unsafe extern "C" fn(ctx: *mut c_void, size: usize) -> *mut u8;

/// Prints the message `message` (a schema name such as `"ModelProto"` or
/// `"TensorProto.Segment"`) encoded in the `len` bytes at `data` in protobuf's text format,
/// exactly as protobuf C++ 3.21 prints it: `style` 0 is `DebugString()`, 1 `ShortDebugString()`,
/// 2 `Utf8DebugString()`.
///
/// On success `alloc(ctx, n)` is called exactly once with the length `n` of the text and the text
/// is written into the `n` bytes it returns (not NUL-terminated); it may return NULL only when
/// `n` is 0. Returns false on failure (unknown message name or style, bytes protobuf would not
/// parse, NULL arguments, `alloc` returning NULL; `ONNXL_STATUS_UNSUPPORTED` in a library built
/// without the `text-format` feature), with the reason as the last error
/// (`onnxl_last_error_message`); `alloc` is then not called or its buffer left unwritten.
///
/// # Safety
/// `message` is a NUL-terminated string; `data` is readable for `len` bytes (it may be NULL when
/// `len` is 0); `alloc` returns NULL or a buffer writable for `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_cxx_debug_string(
    message: *const c_char,
    data: *const u8,
    len: usize,
    style: u32,
    alloc: Option<OnnxlCxxAlloc>,
    ctx: *mut c_void,
) -> bool {
    ffi_value(false, || {
        if message.is_null() {
            return Err(FfiError::null("message"));
        }
        // SAFETY: non-NULL and NUL-terminated (contract).
        let name = unsafe { CStr::from_ptr(message) };
        let name = name
            .to_str()
            .map_err(|_| FfiError::invalid("message is not a message name"))?;
        let style = match style {
            0 => TextStyle::Debug,
            1 => TextStyle::Short,
            2 => TextStyle::Utf8,
            _ => return Err(FfiError::invalid(format!("unknown text style {style}"))),
        };
        let alloc = alloc.ok_or_else(|| FfiError::null("alloc"))?;
        // SAFETY: `data` is readable for `len` bytes (contract).
        let bytes = unsafe { c_bytes(data, len, "data") }?;
        let text = debug_bytes(name, bytes, style)?;
        // SAFETY: the caller's allocator (contract); `ctx` is passed through untouched.
        let buf = unsafe { alloc(ctx, text.len()) };
        if buf.is_null() {
            if text.is_empty() {
                return Ok(true);
            }
            return Err(FfiError::new(
                OnnxlStatus::OutOfMemory,
                format!("alloc returned NULL for {} bytes", text.len()),
            ));
        }
        // SAFETY: `buf` is writable for `text.len()` bytes (alloc contract) and is not `text`.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), buf, text.len()) };
        Ok(true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::status::{last_error, onnxl_last_error_status};

    unsafe extern "C" fn into_vec(ctx: *mut c_void, size: usize) -> *mut u8 {
        // SAFETY: the tests pass a `Vec<u8>` as `ctx`.
        let v = unsafe { &mut *ctx.cast::<Vec<u8>>() };
        v.resize(size, 0);
        v.as_mut_ptr()
    }

    unsafe extern "C" fn refuse(_ctx: *mut c_void, _size: usize) -> *mut u8 {
        std::ptr::null_mut()
    }

    fn print(message: &CStr, data: &[u8], style: u32) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let ctx = (&mut out as *mut Vec<u8>).cast();
        // SAFETY: valid name, bytes and allocator.
        let ok = unsafe {
            onnxl_cxx_debug_string(
                message.as_ptr(),
                data.as_ptr(),
                data.len(),
                style,
                Some(into_vec),
                ctx,
            )
        };
        ok.then_some(out)
    }

    #[test]
    fn prints_each_style() {
        // name: "a\xff" (string), dims: 2, dims: 3, 1000: 5 (unknown).
        let data = b"\x42\x02a\xff\x08\x02\x08\x03\xc0\x3e\x05";
        let debug = print(c"TensorProto", data, 0).unwrap();
        assert_eq!(debug, b"dims: 2\ndims: 3\nname: \"a\\377\"\n1000: 5\n");
        let short = print(c"TensorProto", data, 1).unwrap();
        assert_eq!(short, b"dims: 2 dims: 3 name: \"a\\377\" 1000: 5");
        let utf8 = print(c"TensorProto", data, 2).unwrap();
        assert_eq!(utf8, b"dims: 2\ndims: 3\nname: \"a\xff\"\n1000: 5\n");
        assert_eq!(print(c"TensorProto", b"", 0).unwrap(), b"");
    }

    #[test]
    fn failures_are_reported() {
        assert!(print(c"NoSuchProto", b"", 0).is_none());
        assert!(last_error().contains("NoSuchProto"), "{}", last_error());
        assert!(print(c"TensorProto", b"", 3).is_none());
        assert_eq!(onnxl_last_error_status(), OnnxlStatus::InvalidArgument);
        assert!(print(c"TensorProto", b"\x42\x05ab", 0).is_none());
        assert_eq!(onnxl_last_error_status(), OnnxlStatus::Parse);
        let data = b"\x08\x01";
        // SAFETY: valid arguments but a NULL or refusing allocator / a NULL name.
        unsafe {
            let ctx = std::ptr::null_mut();
            assert!(!onnxl_cxx_debug_string(
                c"TensorProto".as_ptr(),
                data.as_ptr(),
                2,
                0,
                None,
                ctx
            ));
            assert_eq!(onnxl_last_error_status(), OnnxlStatus::NullPointer);
            assert!(!onnxl_cxx_debug_string(
                c"TensorProto".as_ptr(),
                data.as_ptr(),
                2,
                0,
                Some(refuse),
                ctx
            ));
            assert_eq!(onnxl_last_error_status(), OnnxlStatus::OutOfMemory);
            // An empty text needs no buffer.
            assert!(onnxl_cxx_debug_string(
                c"TensorProto".as_ptr(),
                std::ptr::null(),
                0,
                0,
                Some(refuse),
                ctx
            ));
            assert!(!onnxl_cxx_debug_string(
                std::ptr::null(),
                data.as_ptr(),
                2,
                0,
                Some(refuse),
                ctx
            ));
            assert_eq!(onnxl_last_error_status(), OnnxlStatus::NullPointer);
        }
    }
}
