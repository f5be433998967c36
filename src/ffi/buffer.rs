//! `OnnxlBuffer`: bytes produced by the library (serialized messages).

use super::handle::{Castable, free_box, into_raw, read};

/// Bytes produced by the library (e.g. a serialized model), owned by the caller.
///
/// Ownership: created by `onnxl_serialize_model`, `onnxl_<message>_serialize`, ...; freed with
/// `onnxl_buffer_free` exactly once. Thread safety: immutable; `onnxl_buffer_data` and
/// `onnxl_buffer_size` may be called from several threads at once.
pub struct OnnxlBuffer {
    _private: [u8; 0],
}

impl Castable for OnnxlBuffer {
    type Rust = Vec<u8>;
}

/// A new owned buffer handle.
pub(crate) fn new_buffer(bytes: Vec<u8>) -> *mut OnnxlBuffer {
    into_raw(bytes)
}

/// The first byte of `buffer`: NULL when `buffer` is NULL; non-NULL (but not to be read) when
/// the buffer is empty.
///
/// Lifetime: valid until `onnxl_buffer_free(buffer)`.
///
/// # Safety
/// `buffer` is NULL or a live buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_buffer_data(buffer: *const OnnxlBuffer) -> *const u8 {
    // SAFETY: NULL or a live buffer (contract).
    unsafe { read(buffer, std::ptr::null(), |b| Ok(b.as_ptr())) }
}

/// Number of bytes in `buffer` (0 when `buffer` is NULL).
///
/// # Safety
/// `buffer` is NULL or a live buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_buffer_size(buffer: *const OnnxlBuffer) -> usize {
    // SAFETY: NULL or a live buffer (contract).
    unsafe { read(buffer, 0, |b| Ok(b.len())) }
}

/// Frees `buffer` (NULL is ignored). Pointers from `onnxl_buffer_data` become invalid.
///
/// # Safety
/// `buffer` is NULL or a live buffer, freed only once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_buffer_free(buffer: *mut OnnxlBuffer) {
    let _ = super::panic::ffi_status(|| {
        // SAFETY: NULL or a buffer from `new_buffer`, freed once (contract).
        unsafe { free_box(buffer) };
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_round_trip_and_null() {
        let b = new_buffer(vec![1, 2, 3]);
        // SAFETY: live buffer, then freed once; NULL is allowed.
        unsafe {
            assert_eq!(onnxl_buffer_size(b), 3);
            assert_eq!(
                std::slice::from_raw_parts(onnxl_buffer_data(b), 3),
                &[1, 2, 3]
            );
            onnxl_buffer_free(b);
            assert_eq!(onnxl_buffer_size(std::ptr::null()), 0);
            assert!(onnxl_buffer_data(std::ptr::null()).is_null());
            onnxl_buffer_free(std::ptr::null_mut());
        }
    }
}
