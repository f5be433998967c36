//! When the GIL is released: only around work large enough to be worth it. Releasing costs
//! little by itself, but taking the GIL back waits for whichever thread took it meanwhile (up to
//! the switch interval), so a call of a few microseconds released in a program with another busy
//! thread would take tens of microseconds or more. Parses of inputs, and serializations of
//! outputs, below [`RELEASE_GIL_MIN_BYTES`] keep the GIL, as protobuf's do.

use pyo3::Python;
use pyo3::marker::Ungil;

/// Parses and serializations of at least this many bytes run without the GIL.
pub const RELEASE_GIL_MIN_BYTES: usize = 64 << 10;

/// Runs `f` without the GIL when `work_bytes` is at least [`RELEASE_GIL_MIN_BYTES`], else with
/// it (without the round trip).
pub fn detach_if_large<T: Ungil, F: Ungil + FnOnce() -> T>(
    py: Python<'_>,
    work_bytes: usize,
    f: F,
) -> T {
    if work_bytes < RELEASE_GIL_MIN_BYTES {
        f()
    } else {
        py.detach(f)
    }
}

/// The GIL released by hand in the middle of a call, once the size of the remaining work is
/// known (a serialization: the size is computed with the GIL, the bytes written without it);
/// taken back when dropped, also while unwinding.
pub struct Released(*mut pyo3::ffi::PyThreadState);

impl Released {
    /// Releases the GIL.
    ///
    /// # Safety
    /// The GIL is held, and until the value is dropped the thread makes no Python call of any
    /// kind: no `Python::attach`, no reference count change, no drop of a Python object (PyO3
    /// still counts the thread as attached).
    pub unsafe fn new() -> Self {
        // SAFETY: the caller holds the GIL.
        Self(unsafe { pyo3::ffi::PyEval_SaveThread() })
    }
}

impl Drop for Released {
    fn drop(&mut self) {
        // SAFETY: the state comes from `PyEval_SaveThread` and was not restored since.
        unsafe { pyo3::ffi::PyEval_RestoreThread(self.0) }
    }
}
