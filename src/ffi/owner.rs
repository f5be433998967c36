//! Owner tokens (`OnnxlOwner`): reference-counted handles that keep tensor bytes alive after the
//! model they came from is freed, and caller memory lent to the library with a release callback.

use std::ffi::c_void;
use std::sync::Arc;

use super::handle::{Castable, c_bytes, check_out, try_ref, write_out};
use super::panic::{ffi_status, ffi_value};
use super::status::{FfiError, OnnxlStatus};
use crate::bytes::{ByteSpan, Owner};

/// A retained reference to the memory behind some tensor bytes (a memory map, a shared buffer,
/// caller memory lent with a release callback, ...). While it lives, the bytes it was taken
/// for stay valid and unchanged, even after the model, the tensor or the stream is gone.
///
/// Thread safety: `onnxl_owner_retain`, `onnxl_owner_release` and `onnxl_owner_data` may be
/// called from any thread at any time (atomic reference count). The memory is released on the
/// thread that drops the last reference.
pub struct OnnxlOwner {
    _private: [u8; 0],
}

/// What an `OnnxlOwner*` points at (inside an `Arc`).
pub(crate) struct OwnerToken {
    _keep: Owner,
    data: *const u8,
    len: usize,
}

// SAFETY: `data..data+len` is read-only memory kept alive by `_keep`, which is `Send + Sync`.
unsafe impl Send for OwnerToken {}
// SAFETY: see `Send`: shared access only reads.
unsafe impl Sync for OwnerToken {}

impl Castable for OnnxlOwner {
    type Rust = OwnerToken;
}

/// A new retained token for `bytes`, kept alive by `owner`.
pub(crate) fn new_token(owner: Owner, bytes: &[u8]) -> *const OnnxlOwner {
    Arc::into_raw(Arc::new(OwnerToken {
        _keep: owner,
        data: bytes.as_ptr(),
        len: bytes.len(),
    }))
    .cast()
}

/// Adds a reference to `owner` and returns it (the same pointer), so it can be released
/// independently; returns NULL when `owner` is NULL.
///
/// Ownership: the caller owns the new reference and must pass it to `onnxl_owner_release`
/// once. Thread-safe.
///
/// # Safety
/// `owner` is NULL or a live token returned by this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_owner_retain(owner: *const OnnxlOwner) -> *const OnnxlOwner {
    ffi_value(std::ptr::null(), || {
        if owner.is_null() {
            return Err(FfiError::null("owner"));
        }
        // SAFETY: `owner` came from `Arc::into_raw` of an `Arc<OwnerToken>` (new_token) and has
        // at least one live reference (contract).
        unsafe { Arc::increment_strong_count(owner.cast::<OwnerToken>()) };
        Ok(owner)
    })
}

/// Drops one reference to `owner`; the memory is released with the last one (the release
/// callback of lent memory runs then, on this thread). NULL is ignored.
///
/// Ownership: consumes the caller's reference; `owner` must not be used afterwards by this
/// caller. Thread-safe.
///
/// # Safety
/// `owner` is NULL or a token returned by this library, released at most once per reference.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_owner_release(owner: *const OnnxlOwner) {
    let _ = ffi_status(|| {
        if !owner.is_null() {
            // SAFETY: `owner` holds one reference from `Arc::into_raw` (contract).
            unsafe { Arc::decrement_strong_count(owner.cast::<OwnerToken>()) };
        }
        Ok(())
    });
}

/// The bytes the token was taken for (e.g. a tensor's `raw_data`): writes the first byte to
/// `*data` and the length to `*len` (both only on success).
///
/// Lifetime: the bytes stay valid and unchanged while this reference to `owner` is held. They
/// are read-only.
///
/// # Safety
/// `owner` is NULL or a live token; `data` and `len` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_owner_data(
    owner: *const OnnxlOwner,
    data: *mut *const u8,
    len: *mut usize,
) -> OnnxlStatus {
    ffi_status(|| {
        check_out(data, "data")?;
        check_out(len, "len")?;
        // SAFETY: live token (contract).
        let token = unsafe { try_ref(owner, "owner") }?;
        // SAFETY: both out-pointers checked non-NULL above.
        unsafe {
            write_out(data, token.data);
            write_out(len, token.len);
        }
        Ok(())
    })
}

/// Called once with `user_data` when the library no longer uses memory lent to it (see
/// `onnxl_tensor_proto_set_raw_data_borrowed`). It must not call back into the object that held
/// the memory.
///
/// Thread safety: it runs on whichever thread drops the last reference (a model free, an
/// `onnxl_owner_release`, ...), so it must be safe to call from any thread.
pub type OnnxlReleaseCallback = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// Caller memory lent to the library; runs the release callback when the last reference goes.
struct CallerMemory {
    release: unsafe extern "C" fn(*mut c_void),
    user_data: *mut c_void,
}

// SAFETY: the library never dereferences `user_data`; it only hands it to `release`, which the
// caller documented as callable from any thread (see `OnnxlReleaseCallback`).
unsafe impl Send for CallerMemory {}
// SAFETY: see `Send`; there is no shared-access method.
unsafe impl Sync for CallerMemory {}

impl Drop for CallerMemory {
    fn drop(&mut self) {
        // SAFETY: the caller gave this callback for exactly this `user_data`; Drop runs once.
        unsafe { (self.release)(self.user_data) }
    }
}

/// A span borrowing `len` bytes at `data` from the caller. With `release`, the span carries an
/// owner token that calls `release(user_data)` exactly once when its last reference goes; without
/// it, the span has no owner and the caller keeps the bytes alive as long as they are used.
///
/// # Safety
/// `data..data+len` stays valid and unchanged until `release` runs (or, without `release`, while
/// the span or a copy of it is used).
pub(crate) unsafe fn borrowed_span(
    data: *const u8,
    len: usize,
    release: OnnxlReleaseCallback,
    user_data: *mut c_void,
) -> Result<ByteSpan, FfiError> {
    // SAFETY: validity of the bytes is the caller's contract; checks NULL/len only.
    let bytes = unsafe { c_bytes(data, len, "data") }?;
    let (ptr, len) = (bytes.as_ptr(), bytes.len());
    Ok(match release {
        // The token is built last: once it exists, the callback is guaranteed to run.
        // SAFETY: the bytes stay valid until `release` runs, i.e. while the owner lives.
        Some(release) => unsafe {
            ByteSpan::from_owner_raw(ptr, len, Arc::new(CallerMemory { release, user_data }))
        },
        // SAFETY: the caller keeps the bytes alive while the span is used (contract).
        None => unsafe { ByteSpan::from_raw_parts(ptr, len) },
    })
}

/// A retained owner token for `span`'s bytes (see [`ByteSpan::share`]).
pub(crate) fn span_owner(span: &mut ByteSpan) -> Result<*const OnnxlOwner, FfiError> {
    match span.share() {
        Some(owner) => Ok(new_token(owner, span.as_slice())),
        None => Err(FfiError::new(
            OnnxlStatus::Unsupported,
            "the bytes are borrowed from caller memory without an owner (no_copy from caller \
             bytes, or lent without a release callback): the caller keeps them alive, no token can",
        )),
    }
}

/// `onnxl_<message>_<payload>`: writes a no-copy view of a payload field.
///
/// # Safety
/// `m` NULL or a live handle; `data`, `len` NULL or writable.
pub(crate) unsafe fn payload_view<C: Castable>(
    m: *const C,
    data: *mut *const u8,
    len: *mut usize,
    f: impl FnOnce(&C::Rust) -> &[u8],
) -> OnnxlStatus {
    ffi_status(|| {
        check_out(data, "data")?;
        check_out(len, "len")?;
        // SAFETY: forwarded contract.
        let bytes = f(unsafe { try_ref(m, "message") }?);
        let view = super::handle::OnnxlBytes::of(bytes);
        // SAFETY: both checked above.
        unsafe {
            write_out(data, view.data);
            write_out(len, view.len);
        }
        Ok(())
    })
}

/// `onnxl_<message>_set_<payload>_borrowed`. On failure the release callback is not called.
///
/// # Safety
/// `m` NULL or a live handle used by no one else; the bytes as for [`borrowed_span`].
pub(crate) unsafe fn payload_set_borrowed<C: Castable>(
    m: *mut C,
    data: *const u8,
    len: usize,
    release: OnnxlReleaseCallback,
    user_data: *mut c_void,
    f: impl FnOnce(&mut C::Rust, ByteSpan),
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { super::handle::try_mut(m, "message") }?;
        // Built last: from here on, the callback is owned by the span.
        // SAFETY: forwarded contract.
        let span = unsafe { borrowed_span(data, len, release, user_data) }?;
        f(m, span);
        Ok(())
    })
}

/// `onnxl_<message>_<payload>_owner`: a retained token for the payload's bytes.
///
/// # Safety
/// `m` NULL or a live handle used by no one else.
pub(crate) unsafe fn payload_owner<C: Castable>(
    m: *mut C,
    f: impl FnOnce(&mut C::Rust) -> Option<&mut ByteSpan>,
) -> *const OnnxlOwner {
    ffi_value(std::ptr::null(), || {
        // SAFETY: forwarded contract.
        let span = f(unsafe { super::handle::try_mut(m, "message") }?)
            .ok_or_else(|| FfiError::invalid("the payload field is not set"))?;
        span_owner(span)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static RELEASED: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn count_release(user_data: *mut c_void) {
        let _ = user_data;
        RELEASED.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn owner_keeps_bytes_after_the_span_is_gone() {
        let mut span = ByteSpan::from_vec(vec![4u8; 100]);
        let token = span_owner(&mut span).unwrap();
        drop(span);
        // SAFETY: `token` is live.
        let again = unsafe { onnxl_owner_retain(token) };
        assert_eq!(again, token);
        // SAFETY: one reference released, one still held.
        unsafe { onnxl_owner_release(again) };
        let (mut p, mut n) = (std::ptr::null(), 0usize);
        // SAFETY: live token, valid out-pointers.
        assert_eq!(
            unsafe { onnxl_owner_data(token, &mut p, &mut n) },
            OnnxlStatus::Ok
        );
        // SAFETY: the token keeps the bytes alive.
        assert_eq!(unsafe { std::slice::from_raw_parts(p, n) }, &[4u8; 100][..]);
        // SAFETY: the last reference.
        unsafe { onnxl_owner_release(token) };
    }

    #[test]
    fn release_callback_runs_once_with_the_last_reference() {
        let data = [1u8, 2, 3];
        RELEASED.store(0, Ordering::SeqCst);
        // SAFETY: `data` outlives the span and its owner.
        let mut span = unsafe {
            borrowed_span(
                data.as_ptr(),
                3,
                Some(count_release),
                std::ptr::dangling_mut::<c_void>(),
            )
        }
        .unwrap();
        let copy = span.clone();
        let token = span_owner(&mut span).unwrap();
        drop(span);
        drop(copy);
        assert_eq!(
            RELEASED.load(Ordering::SeqCst),
            0,
            "the token still holds the memory"
        );
        // SAFETY: the last reference.
        unsafe { onnxl_owner_release(token) };
        assert_eq!(RELEASED.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn null_arguments() {
        // SAFETY: NULL is allowed everywhere.
        unsafe {
            assert!(onnxl_owner_retain(std::ptr::null()).is_null());
            onnxl_owner_release(std::ptr::null());
            let mut n = 0usize;
            assert_eq!(
                onnxl_owner_data(std::ptr::null(), &mut std::ptr::null(), &mut n),
                OnnxlStatus::NullPointer
            );
        }
        // SAFETY: NULL with length > 0 is detected.
        let r = unsafe { borrowed_span(std::ptr::null(), 4, None, std::ptr::null_mut()) };
        assert_eq!(r.unwrap_err().status, OnnxlStatus::NullPointer);
        let data = [1u8];
        // SAFETY: `data` outlives the span.
        let mut unowned =
            unsafe { borrowed_span(data.as_ptr(), 1, None, std::ptr::null_mut()) }.unwrap();
        assert_eq!(
            span_owner(&mut unowned).unwrap_err().status,
            OnnxlStatus::Unsupported
        );
    }
}
