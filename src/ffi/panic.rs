//! The panic boundary: every `onnxl_*` body runs inside [`ffi_status`] or [`ffi_value`], so no
//! panic unwinds into C. A panic becomes `ONNXL_STATUS_PANIC` (or the function's failure value:
//! NULL, 0, false) with its message recorded as the last error.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::status::{FfiError, OnnxlStatus, set_last_error};

fn panic_message(payload: &(dyn Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic payload".to_string());
    format!("internal panic (a bug in onnx_light): {text}")
}

/// Records a caught panic as the last error (out of line: one copy for every `onnxl_*`
/// function); returns `ONNXL_STATUS_PANIC`.
#[cold]
#[inline(never)]
fn record_panic(payload: Box<dyn Any + Send>) -> OnnxlStatus {
    set_last_error(FfiError::new(OnnxlStatus::Panic, panic_message(&*payload)))
}

/// Runs `f`; returns `ONNXL_STATUS_OK`, or records the error (or panic) and returns its status.
pub(crate) fn ffi_status(f: impl FnOnce() -> Result<(), FfiError>) -> OnnxlStatus {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => OnnxlStatus::Ok,
        Ok(Err(e)) => set_last_error(e),
        Err(payload) => record_panic(payload),
    }
}

/// Runs `f`; returns its value, or records the error (or panic) and returns `failure`.
pub(crate) fn ffi_value<R>(failure: R, f: impl FnOnce() -> Result<R, FfiError>) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            set_last_error(e);
            failure
        }
        Err(payload) => {
            record_panic(payload);
            failure
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::status::last_error;

    #[test]
    fn panics_become_a_status_and_a_message() {
        let s = ffi_status(|| panic!("boom {}", 7));
        assert_eq!(s, OnnxlStatus::Panic);
        assert!(last_error().contains("boom 7"), "{}", last_error());
        let v: *const u8 = ffi_value(std::ptr::null(), || panic!("static str"));
        assert!(v.is_null());
        assert!(last_error().contains("static str"));
    }

    #[test]
    fn errors_and_values_pass_through() {
        assert_eq!(ffi_status(|| Ok(())), OnnxlStatus::Ok);
        assert_eq!(
            ffi_status(|| Err(FfiError::null("model"))),
            OnnxlStatus::NullPointer
        );
        assert_eq!(last_error(), "model is NULL");
        assert_eq!(ffi_value(0, || Ok(5)), 5);
        assert_eq!(ffi_value(-1, || Err(FfiError::invalid("bad"))), -1);
        assert_eq!(last_error(), "bad");
    }
}
