//! The panic boundary: every `onnxl_*` body runs inside [`ffi_status`] or [`ffi_value`], so no
//! panic unwinds into C. A panic becomes `ONNXL_STATUS_PANIC` (or the function's failure value:
//! NULL, 0, false) with its message recorded as the last error.

// The catchers are `extern "C"` only so that they cannot unwind (see `run_caught`); Rust calls
// them, never C, so Rust types in their signatures are fine.
#![allow(improper_ctypes_definitions)]

use std::any::Any;
use std::mem::{ManuallyDrop, MaybeUninit};
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

/// The type-erased body of an `onnxl_*` function: called with the handle (NULL for functions
/// without one) and the state holding its closure.
type Trampoline = unsafe fn(*mut (), *mut ()) -> Result<(), FfiError>;

/// The one panic catcher every `onnxl_*` body runs in: calls `call(handle, state)` and turns its
/// error or panic into a recorded last error and a status.
///
/// Out of line and not generic, so that the ~2 000 exported functions share ONE landing pad: each
/// of them only packs its closure into `state` and passes the monomorphic trampoline `call`
/// (an inlined `catch_unwind` per function was most of the C ABI's code and unwind tables).
/// `extern "C"`, so that it cannot unwind: its callers need no landing pads.
#[inline(never)]
extern "C" fn run_caught(handle: *mut (), state: *mut (), call: Trampoline) -> OnnxlStatus {
    // SAFETY: `call` is the trampoline made for `state` by the functions below.
    match catch_unwind(AssertUnwindSafe(|| unsafe { call(handle, state) })) {
        Ok(Ok(())) => OnnxlStatus::Ok,
        Ok(Err(e)) => set_last_error(e),
        Err(payload) => record_panic(payload),
    }
}

/// [`run_caught`] for a body that needs a handle: a NULL `handle` fails with
/// `ONNXL_STATUS_NULL_POINTER` ("message is NULL") before the body runs.
#[inline(never)]
extern "C" fn run_caught_on(handle: *mut (), state: *mut (), call: Trampoline) -> OnnxlStatus {
    if handle.is_null() {
        return set_last_error(FfiError::null("message"));
    }
    run_caught(handle, state, call)
}

/// The closure of a body that returns nothing but its status.
type StatusState<F> = ManuallyDrop<F>;

/// Calls the closure in `state` (moving it out: it runs exactly once) with `handle`.
///
/// # Safety
/// `state` points at a live `StatusState<F>` whose closure is not used again.
unsafe fn call_status<F: FnOnce(*mut ()) -> Result<(), FfiError>>(
    handle: *mut (),
    state: *mut (),
) -> Result<(), FfiError> {
    // SAFETY: contract above; the catchers call the trampoline once per call of theirs.
    let f = unsafe { ManuallyDrop::take(&mut *state.cast::<StatusState<F>>()) };
    f(handle)
}

/// The closure of a body that returns a value, the place of that value, and whether it was
/// written (the status alone does not say: an error may carry any status).
struct ValueState<F, R> {
    f: ManuallyDrop<F>,
    value: MaybeUninit<R>,
    written: bool,
}

/// Calls the closure in `state` (moving it out) with `handle` and stores its value.
///
/// # Safety
/// `state` points at a live `ValueState<F, R>` whose closure is not used again.
unsafe fn call_value<F: FnOnce(*mut ()) -> Result<R, FfiError>, R>(
    handle: *mut (),
    state: *mut (),
) -> Result<(), FfiError> {
    // SAFETY: contract above.
    let state = unsafe { &mut *state.cast::<ValueState<F, R>>() };
    // SAFETY: the closure is taken once (contract above).
    let f = unsafe { ManuallyDrop::take(&mut state.f) };
    state.value.write(f(handle)?);
    state.written = true;
    Ok(())
}

/// Runs `f`; returns `ONNXL_STATUS_OK`, or records the error (or panic) and returns its status.
#[inline(always)]
pub(crate) fn ffi_status<F: FnOnce() -> Result<(), FfiError>>(f: F) -> OnnxlStatus {
    status_caught(std::ptr::null_mut(), |_| f(), run_caught)
}

/// Runs `f` with the non-NULL `handle`; returns `ONNXL_STATUS_OK`, or records the error (or
/// panic, or a NULL `handle`) and returns its status.
#[inline(always)]
pub(crate) fn ffi_status_on<F: FnOnce(*mut ()) -> Result<(), FfiError>>(
    handle: *mut (),
    f: F,
) -> OnnxlStatus {
    status_caught(handle, f, run_caught_on)
}

/// Runs `f` through `catcher`.
#[inline(always)]
fn status_caught<F: FnOnce(*mut ()) -> Result<(), FfiError>>(
    handle: *mut (),
    f: F,
    catcher: extern "C" fn(*mut (), *mut (), Trampoline) -> OnnxlStatus,
) -> OnnxlStatus {
    let mut state: StatusState<F> = ManuallyDrop::new(f);
    catcher(handle, (&raw mut state).cast(), call_status::<F>)
}

/// Runs `f`; returns its value, or records the error (or panic) and returns `failure`.
#[inline(always)]
pub(crate) fn ffi_value<R, F: FnOnce() -> Result<R, FfiError>>(failure: R, f: F) -> R {
    value_caught(std::ptr::null_mut(), failure, |_| f(), run_caught)
}

/// Runs `f` with the non-NULL `handle`; returns its value, or records the error (or panic, or a
/// NULL `handle`) and returns `failure`.
#[inline(always)]
pub(crate) fn ffi_value_on<R, F: FnOnce(*mut ()) -> Result<R, FfiError>>(
    handle: *mut (),
    failure: R,
    f: F,
) -> R {
    value_caught(handle, failure, f, run_caught_on)
}

/// Runs `f` through `catcher`; its value, or `failure`.
#[inline(always)]
fn value_caught<R, F: FnOnce(*mut ()) -> Result<R, FfiError>>(
    handle: *mut (),
    failure: R,
    f: F,
    catcher: extern "C" fn(*mut (), *mut (), Trampoline) -> OnnxlStatus,
) -> R {
    let mut state = ValueState {
        f: ManuallyDrop::new(f),
        value: MaybeUninit::uninit(),
        written: false,
    };
    catcher(handle, (&raw mut state).cast(), call_value::<F, R>);
    if state.written {
        // SAFETY: `written` is set right after the value is.
        unsafe { state.value.assume_init() }
    } else {
        failure
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
