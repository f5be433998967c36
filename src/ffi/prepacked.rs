//! ONNX Runtime pre-packed blobs through the C ABI: a store of blobs keyed by (initializer,
//! key), held beside the model (`OnnxlPrepackedBlobs`), filled by a load or by the caller, and
//! written by a save with external data. See docs/prepacked.md.
//!
//! Lifetimes: views returned by `onnxl_prepacked_blobs_get` / `_at` are valid until the store is
//! changed or freed; a retained `OnnxlOwner` keeps a buffer's bytes valid after that (after a
//! no-copy load it is the weight file's memory map, the same one the model's tensors borrow).

use std::ffi::{CStr, c_char, c_void};

use super::accessors::OnnxlModelProto;
use super::external::{
    OnnxlExternalDataOptions, OnnxlExternalLoadOptions, save_options, with_external_options,
};
use super::handle::{
    Castable, OnnxlStr, c_bytes, c_path, check_out, free_box, into_raw, try_mut, try_ref, write_out,
};
use super::options::OnnxlParseOptions;
use super::owner::{OnnxlOwner, OnnxlReleaseCallback, borrowed_span, new_token};
use super::panic::{ffi_status, ffi_value};
use super::status::{FfiError, OnnxlStatus};
use crate::bytes::ByteSpan;
use crate::external::{self, PrepackedBlobs};

/// A store of pre-packed blobs: named binary blobs (one or more buffers each) attached to
/// initializers by name, kept beside a model (never inside its tensors). Create with
/// `onnxl_prepacked_blobs_new` or get one from `onnxl_load_model_with_prepacked`; free with
/// `onnxl_prepacked_blobs_free`.
///
/// Thread safety: like the message handles — any number of threads may read it at once
/// (`_count`, `_at`, `_buffer_count`, `_get`, and saving with it); `_add`, `_add_borrowed`,
/// `_remove` and `_free` need exclusive access. Owner tokens taken from it may be used on any
/// thread.
pub struct OnnxlPrepackedBlobs {
    _private: [u8; 0],
}

impl Castable for OnnxlPrepackedBlobs {
    type Rust = PrepackedBlobs;
}

/// A NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `p` is NULL or NUL-terminated and readable for the call.
unsafe fn c_utf8<'a>(p: *const c_char, what: &str) -> Result<&'a str, FfiError> {
    if p.is_null() {
        return Err(FfiError::null(what));
    }
    // SAFETY: non-NULL and NUL-terminated (contract).
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| FfiError::invalid(format!("{what} is not UTF-8")))
}

fn not_found(initializer: &str, key: &str) -> FfiError {
    FfiError::new(
        OnnxlStatus::OutOfRange,
        format!("no pre-packed blob {key:?} of initializer '{initializer}'"),
    )
}

/// A new, empty store. Ownership: the caller frees it with `onnxl_prepacked_blobs_free`.
/// Returns NULL only on allocation failure.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_prepacked_blobs_new() -> *mut OnnxlPrepackedBlobs {
    ffi_value(std::ptr::null_mut(), || {
        Ok(into_raw::<OnnxlPrepackedBlobs>(PrepackedBlobs::new()))
    })
}

/// Frees a store (NULL is ignored). Buffers whose owner tokens are retained elsewhere stay
/// valid until those tokens are released.
///
/// # Safety
/// `blobs` is NULL or a live store not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_prepacked_blobs_free(blobs: *mut OnnxlPrepackedBlobs) {
    let _ = ffi_status(|| {
        // SAFETY: forwarded contract.
        unsafe { free_box(blobs) };
        Ok(())
    });
}

/// Number of blobs (0 when `blobs` is NULL).
///
/// # Safety
/// `blobs` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_prepacked_blobs_count(blobs: *const OnnxlPrepackedBlobs) -> usize {
    ffi_value(0, || {
        // SAFETY: forwarded contract.
        Ok(unsafe { try_ref(blobs, "blobs") }?.len())
    })
}

/// Blob number `index` (in (initializer, key) order): its initializer name, key and number of
/// buffers, each out-pointer written when not NULL. `ONNXL_STATUS_OUT_OF_RANGE` past the end.
/// The strings are valid until the store is changed or freed.
///
/// # Safety
/// `blobs` NULL or live; out-pointers NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_prepacked_blobs_at(
    blobs: *const OnnxlPrepackedBlobs,
    index: usize,
    initializer: *mut OnnxlStr,
    key: *mut OnnxlStr,
    num_buffers: *mut usize,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let store = unsafe { try_ref(blobs, "blobs") }?;
        let (i, k, b) = store
            .at(index)
            .ok_or_else(|| FfiError::out_of_range("blobs", index, store.len()))?;
        // SAFETY: each out-pointer is written only when non-NULL (contract: writable).
        unsafe {
            if !initializer.is_null() {
                write_out(initializer, OnnxlStr::of(i.as_bytes()));
            }
            if !key.is_null() {
                write_out(key, OnnxlStr::of(k.as_bytes()));
            }
            if !num_buffers.is_null() {
                write_out(num_buffers, b.buffers.len());
            }
        }
        Ok(())
    })
}

/// The number of buffers of blob `key` of `initializer` into `*out`;
/// `ONNXL_STATUS_OUT_OF_RANGE` when there is no such blob.
///
/// # Safety
/// `blobs` NULL or live; the strings NULL or NUL-terminated; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_prepacked_blobs_buffer_count(
    blobs: *const OnnxlPrepackedBlobs,
    initializer: *const c_char,
    key: *const c_char,
    out: *mut usize,
) -> OnnxlStatus {
    ffi_status(|| {
        check_out(out, "out")?;
        // SAFETY: forwarded contract.
        let store = unsafe { try_ref(blobs, "blobs") }?;
        // SAFETY: forwarded contract.
        let (i, k) = unsafe { (c_utf8(initializer, "initializer")?, c_utf8(key, "key")?) };
        let b = store.get(i, k).ok_or_else(|| not_found(i, k))?;
        // SAFETY: `out` checked above.
        unsafe { write_out(out, b.buffers.len()) };
        Ok(())
    })
}

/// Buffer `buffer` of blob `key` of `initializer`, without copying: the first byte into `*data`
/// and the length into `*len`. With `owner` non-NULL, a retained `OnnxlOwner` that keeps the
/// bytes valid after the store (and the model) are freed is written there (release it with
/// `onnxl_owner_release`); after a no-copy load it is the memory map of the weight file, shared
/// with the model's tensors. `ONNXL_STATUS_OUT_OF_RANGE` when there is no such blob or buffer;
/// `ONNXL_STATUS_UNSUPPORTED` when an owner is asked for bytes lent without a release callback.
///
/// Lifetime of `*data` without an owner: until the store is changed or freed.
///
/// # Safety
/// `blobs` NULL or live; the strings NULL or NUL-terminated; `data`, `len` NULL or writable;
/// `owner` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_prepacked_blobs_get(
    blobs: *const OnnxlPrepackedBlobs,
    initializer: *const c_char,
    key: *const c_char,
    buffer: usize,
    data: *mut *const u8,
    len: *mut usize,
    owner: *mut *const OnnxlOwner,
) -> OnnxlStatus {
    ffi_status(|| {
        check_out(data, "data")?;
        check_out(len, "len")?;
        // SAFETY: forwarded contract.
        let store = unsafe { try_ref(blobs, "blobs") }?;
        // SAFETY: forwarded contract.
        let (i, k) = unsafe { (c_utf8(initializer, "initializer")?, c_utf8(key, "key")?) };
        let b = store.get(i, k).ok_or_else(|| not_found(i, k))?;
        let span = b
            .buffers
            .get(buffer)
            .ok_or_else(|| FfiError::out_of_range("buffers", buffer, b.buffers.len()))?;
        let token = if owner.is_null() {
            None
        } else {
            let o = span.owner().ok_or_else(|| {
                FfiError::new(
                    OnnxlStatus::Unsupported,
                    "the buffer was lent without a release callback: no token can keep it alive",
                )
            })?;
            Some(new_token(o, span.as_slice()))
        };
        let view = super::handle::OnnxlBytes::of(span.as_slice());
        // SAFETY: `data` and `len` checked above; `owner` written only when non-NULL.
        unsafe {
            write_out(data, view.data);
            write_out(len, view.len);
            if let Some(t) = token {
                write_out(owner, t);
            }
        }
        Ok(())
    })
}

/// Appends a COPY of `len` bytes at `data` as the next buffer of blob `key` of `initializer`
/// (creating the blob). Keys must be non-empty and contain no `|`.
///
/// # Safety
/// `blobs` NULL or live and used by no one else; the strings NULL or NUL-terminated;
/// `data..data+len` readable (NULL only with `len` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_prepacked_blobs_add(
    blobs: *mut OnnxlPrepackedBlobs,
    initializer: *const c_char,
    key: *const c_char,
    data: *const u8,
    len: usize,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let store = unsafe { try_mut(blobs, "blobs") }?;
        // SAFETY: forwarded contract.
        let (i, k) = unsafe { (c_utf8(initializer, "initializer")?, c_utf8(key, "key")?) };
        // SAFETY: forwarded contract.
        let bytes = unsafe { c_bytes(data, len, "data") }?.to_vec();
        store.push_buffer(i, k, bytes)?;
        Ok(())
    })
}

/// Appends `len` bytes at `data` WITHOUT copying as the next buffer of blob `key` of
/// `initializer`. With `release` non-NULL the library owns a reference to the memory:
/// `release(user_data)` runs exactly once, on any thread, when the last user is gone (the store,
/// retained owner tokens); until then the bytes must stay valid and unchanged. With `release`
/// NULL the caller keeps them valid while the store uses them. On failure nothing is borrowed and
/// `release` is not called.
///
/// # Safety
/// As `onnxl_prepacked_blobs_add`, and the bytes stay valid for the lifetime stated above.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_prepacked_blobs_add_borrowed(
    blobs: *mut OnnxlPrepackedBlobs,
    initializer: *const c_char,
    key: *const c_char,
    data: *const u8,
    len: usize,
    release: OnnxlReleaseCallback,
    user_data: *mut c_void,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let store = unsafe { try_mut(blobs, "blobs") }?;
        // SAFETY: forwarded contract.
        let (i, k) = unsafe { (c_utf8(initializer, "initializer")?, c_utf8(key, "key")?) };
        if i.is_empty() || k.is_empty() || k.contains('|') {
            // Checked before the span exists, so `release` never runs on failure.
            return Err(FfiError::invalid(format!(
                "pre-packed blob key {k:?} of '{i}': names must be non-empty, keys without '|'"
            )));
        }
        // Built last: from here on, the callback is owned by the span.
        // SAFETY: forwarded contract.
        let span: ByteSpan = unsafe { borrowed_span(data, len, release, user_data) }?;
        store.push_buffer(i, k, span)?;
        Ok(())
    })
}

/// Removes blob `key` of `initializer`; `ONNXL_STATUS_OUT_OF_RANGE` when there is none.
///
/// # Safety
/// `blobs` NULL or live and used by no one else; the strings NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_prepacked_blobs_remove(
    blobs: *mut OnnxlPrepackedBlobs,
    initializer: *const c_char,
    key: *const c_char,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let store = unsafe { try_mut(blobs, "blobs") }?;
        // SAFETY: forwarded contract.
        let (i, k) = unsafe { (c_utf8(initializer, "initializer")?, c_utf8(key, "key")?) };
        store
            .remove(i, k)
            .map(|_| ())
            .ok_or_else(|| not_found(i, k))
    })
}

/// As `onnxl_load_model_with_external_data`, and also returns the pre-packed blobs recorded in
/// the weight files (`prepacked_N` entries) in a new store written to `*blobs_out` (empty when
/// there are none). With `popts->no_copy` every blob buffer borrows from the weight file's ONE
/// memory map and holds the same owner token as the tensors of that file; otherwise the buffers
/// are copies. Malformed entries are handled as ONNX Runtime handles them: incomplete triples
/// are skipped, a bad number or a range outside the file is `ONNXL_STATUS_EXTERNAL_DATA`.
///
/// Ownership: the caller owns `*out` (`onnxl_model_proto_free`) and `*blobs_out`
/// (`onnxl_prepacked_blobs_free`); both are written only on success.
///
/// # Safety
/// `path` NULL or NUL-terminated; options NULL or valid; `out`, `blobs_out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_load_model_with_prepacked(
    path: *const c_char,
    popts: *const OnnxlParseOptions,
    eopts: *const OnnxlExternalLoadOptions,
    out: *mut *mut OnnxlModelProto,
    blobs_out: *mut *mut OnnxlPrepackedBlobs,
) -> OnnxlStatus {
    ffi_status(|| {
        crate::error::require_feature(cfg!(feature = "prepacked"), "prepacked")?;
        check_out(out, "out")?;
        check_out(blobs_out, "blobs_out")?;
        // SAFETY: forwarded contract.
        let path = unsafe { c_path(path, "path") }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { with_external_options(popts, eopts) }?;
        let (m, blobs) = crate::package::load_model_with_prepacked(&path, &opts)?;
        // SAFETY: both out-pointers checked above.
        unsafe {
            write_out(out, into_raw::<OnnxlModelProto>(m));
            write_out(blobs_out, into_raw::<OnnxlPrepackedBlobs>(blobs));
        }
        Ok(())
    })
}

/// As `onnxl_load_external_data_for_model` (the external data of every tensor of `model`,
/// from files relative to `dir`), and also returns the pre-packed blobs recorded in those weight
/// files (`prepacked_N` entries, which are dropped from the tensors as they become inline) in a
/// new store written to `*blobs_out` (empty when there are none), as
/// `onnxl_load_model_with_prepacked` does for a whole load: e.g. after a load with
/// `load_external_data` false, or from bytes. With `popts->no_copy` every blob buffer borrows
/// from the weight file's ONE memory map and holds the same owner token as the tensors of that
/// file; otherwise the buffers are copies. Encrypted (ONNXCRYS) weight files are read with the
/// key of `eopts` (and copied). Malformed entries are handled as ONNX Runtime handles them:
/// incomplete triples are skipped, a bad number or a range outside the file is
/// `ONNXL_STATUS_EXTERNAL_DATA`. Either options pointer may be NULL (defaults; `eopts->base_dir`
/// and `load_external_data` are ignored here).
///
/// Ownership: the caller owns `*blobs_out` (`onnxl_prepacked_blobs_free`), written only on
/// success. On failure the model is unchanged and `*blobs_out` is untouched. Thread safety:
/// `model` is modified (exclusive access, as `onnxl_load_external_data_for_model`); the new
/// store follows the `OnnxlPrepackedBlobs` rule.
///
/// # Safety
/// `model` NULL or a live handle used by no one else; `dir` NULL or NUL-terminated; options NULL
/// or valid; `blobs_out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_load_external_data_for_model_with_prepacked(
    model: *mut OnnxlModelProto,
    dir: *const c_char,
    popts: *const OnnxlParseOptions,
    eopts: *const OnnxlExternalLoadOptions,
    blobs_out: *mut *mut OnnxlPrepackedBlobs,
) -> OnnxlStatus {
    ffi_status(|| {
        crate::error::require_feature(cfg!(feature = "prepacked"), "prepacked")?;
        check_out(blobs_out, "blobs_out")?;
        // SAFETY: forwarded contract.
        let m = unsafe { try_mut(model, "model") }?;
        // SAFETY: forwarded contract.
        let dir = unsafe { c_path(dir, "dir") }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { with_external_options(popts, eopts) }?;
        let report = external::load_external_data_for_model(m, &dir, &opts)?;
        // SAFETY: `blobs_out` checked above.
        unsafe { write_out(blobs_out, into_raw::<OnnxlPrepackedBlobs>(report.blobs)) };
        Ok(())
    })
}

/// As `onnxl_save_model_with_external_data`, and writes the pre-packed `blobs` (NULL = none)
/// the way ONNX Runtime does: each blob right after its initializer's bytes in the same weight
/// file, each buffer aligned like a tensor of its size, recorded as `prepacked_0`,
/// `prepacked_1`, … entries `KEY|OFFSET;LENGTH;CHECKSUM[|…]` (checksum `0`, or the buffer's
/// SHA-1 with `opts->checksum`). An initializer with blobs is always written externally.
/// Blobs naming no initializer, or an initializer without `raw_data`, are
/// `ONNXL_STATUS_INVALID_ARGUMENT` before anything is written. Neither the model nor the store
/// is changed.
///
/// # Safety
/// `model` NULL or live; `blobs` NULL or live; `path` NULL or NUL-terminated; `opts` NULL or
/// valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_save_model_with_prepacked(
    model: *const OnnxlModelProto,
    blobs: *const OnnxlPrepackedBlobs,
    path: *const c_char,
    opts: *const OnnxlExternalDataOptions,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { try_ref(model, "model") }?;
        let empty = PrepackedBlobs::new();
        let store = if blobs.is_null() {
            &empty
        } else {
            // SAFETY: non-NULL and live (contract).
            unsafe { try_ref(blobs, "blobs") }?
        };
        // SAFETY: forwarded contract.
        let path = unsafe { c_path(path, "path") }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { save_options(opts) }?;
        external::save_model_with_prepacked(m, store, &path, &opts)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::owner::onnxl_owner_release;
    use std::ffi::CString;
    use std::ptr::{null, null_mut};

    #[test]
    fn store_through_the_c_abi() {
        let b = onnxl_prepacked_blobs_new();
        let (w, k) = (CString::new("W").unwrap(), CString::new("k").unwrap());
        // SAFETY: live handles, NUL-terminated strings, readable bytes, writable outs.
        unsafe {
            assert_eq!(
                onnxl_prepacked_blobs_add(b, w.as_ptr(), k.as_ptr(), b"abc".as_ptr(), 3),
                OnnxlStatus::Ok
            );
            assert_eq!(onnxl_prepacked_blobs_count(b), 1);
            let (mut data, mut len, mut owner) = (null(), 0usize, null());
            assert_eq!(
                onnxl_prepacked_blobs_get(
                    b,
                    w.as_ptr(),
                    k.as_ptr(),
                    0,
                    &mut data,
                    &mut len,
                    &mut owner
                ),
                OnnxlStatus::Ok
            );
            assert_eq!(std::slice::from_raw_parts(data, len), b"abc");
            assert!(!owner.is_null());
            assert_eq!(
                onnxl_prepacked_blobs_get(
                    b,
                    w.as_ptr(),
                    k.as_ptr(),
                    1,
                    &mut data,
                    &mut len,
                    null_mut()
                ),
                OnnxlStatus::OutOfRange
            );
            let bad = CString::new("a|b").unwrap();
            assert_eq!(
                onnxl_prepacked_blobs_add(b, w.as_ptr(), bad.as_ptr(), null(), 0),
                OnnxlStatus::InvalidArgument
            );
            assert_eq!(
                onnxl_prepacked_blobs_add(b, null(), k.as_ptr(), null(), 0),
                OnnxlStatus::NullPointer
            );
            onnxl_prepacked_blobs_free(b);
            // The token outlives the store.
            assert_eq!(std::slice::from_raw_parts(data, len), b"abc");
            onnxl_owner_release(owner);
        }
    }

    #[test]
    fn external_data_for_model_returns_the_blobs() {
        use crate::ffi::accessors::onnxl_model_proto_free;
        use crate::ffi::external::{
            onnxl_external_load_options_default, onnxl_load_model_with_external_data,
        };
        use crate::ffi::status::last_error;
        use crate::proto::{ModelProto, TensorProto};
        let dir = std::env::temp_dir().join(format!("onnxl-ffi-pp-ext-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut m = ModelProto::new();
        m.set_ir_version(10);
        let mut t = TensorProto::new();
        t.set_name("W");
        t.set_data_type(2);
        t.add_dims(3000);
        t.set_raw_data(vec![7u8; 3000]);
        m.mutable_graph().initializer.push(t);
        let mut store = PrepackedBlobs::new();
        store.push_buffer("W", "k", b"packed!".to_vec()).unwrap();
        store.push_buffer("W", "k", vec![9u8; 100]).unwrap();
        let path = dir.join("m.onnx");
        external::save_model_with_prepacked(&m, &store, &path, &Default::default()).unwrap();
        let (cpath, cdir) = (
            CString::new(path.to_str().unwrap()).unwrap(),
            CString::new(dir.to_str().unwrap()).unwrap(),
        );
        let (w, k) = (CString::new("W").unwrap(), CString::new("k").unwrap());
        let mut e = onnxl_external_load_options_default();
        e.load_external_data = 0;
        let mut lazy = null_mut();
        // SAFETY: valid arguments, writable out-pointers, handles freed once.
        unsafe {
            let s = onnxl_load_model_with_external_data(cpath.as_ptr(), null(), &e, &mut lazy);
            assert_eq!(s, OnnxlStatus::Ok, "{}", last_error());
            // NULL arguments: a status and a message, nothing written.
            let mut b = null_mut();
            assert_eq!(
                onnxl_load_external_data_for_model_with_prepacked(
                    lazy,
                    cdir.as_ptr(),
                    null(),
                    null(),
                    null_mut()
                ),
                OnnxlStatus::NullPointer
            );
            assert!(last_error().contains("blobs_out"), "{}", last_error());
            assert_eq!(
                onnxl_load_external_data_for_model_with_prepacked(
                    null_mut(),
                    cdir.as_ptr(),
                    null(),
                    null(),
                    &mut b
                ),
                OnnxlStatus::NullPointer
            );
            assert_eq!(
                onnxl_load_external_data_for_model_with_prepacked(
                    lazy,
                    null(),
                    null(),
                    null(),
                    &mut b
                ),
                OnnxlStatus::NullPointer
            );
            assert!(b.is_null());
            // A directory without the weight file: EXTERNAL_DATA, the model unchanged.
            let empty = CString::new(dir.join("none").to_str().unwrap()).unwrap();
            assert_eq!(
                onnxl_load_external_data_for_model_with_prepacked(
                    lazy,
                    empty.as_ptr(),
                    null(),
                    null(),
                    &mut b
                ),
                OnnxlStatus::ExternalData
            );
            assert!(b.is_null());
            let s = onnxl_load_external_data_for_model_with_prepacked(
                lazy,
                cdir.as_ptr(),
                null(),
                null(),
                &mut b,
            );
            assert_eq!(s, OnnxlStatus::Ok, "{}", last_error());
            assert_eq!(onnxl_prepacked_blobs_count(b), 1);
            let (mut data, mut len) = (null(), 0usize);
            for (i, want) in [b"packed!".to_vec(), vec![9u8; 100]].iter().enumerate() {
                let s = onnxl_prepacked_blobs_get(
                    b,
                    w.as_ptr(),
                    k.as_ptr(),
                    i,
                    &mut data,
                    &mut len,
                    null_mut(),
                );
                assert_eq!(s, OnnxlStatus::Ok, "{}", last_error());
                assert_eq!(std::slice::from_raw_parts(data, len), &want[..]);
            }
            let loaded = try_ref(lazy as *const OnnxlModelProto, "m").unwrap();
            assert_eq!(loaded.graph().initializer[0].raw_data(), &[7u8; 3000][..]);
            onnxl_prepacked_blobs_free(b);
            onnxl_model_proto_free(lazy);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
