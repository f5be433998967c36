//! Encrypted models through the C ABI (C++ `SaveEncryptedModel`, `LoadEncryptedModel`,
//! `SaveEncryptedModelToString`, `LoadEncryptedModelFromString`), plus file encryption in the
//! chunked format (e.g. for external-data files).
//!
//! The key is always a (pointer, length) pair, so any bytes are a key (an empty key is allowed:
//! `key` may be NULL when `key_len` is 0). The library never keeps the key after the call, and
//! never puts key material in an error message.
//!
//! Errors: malformed encrypted data (empty, bad magic, truncated, unsupported version, bad
//! parameters) is `ONNXL_STATUS_CRYPTO`; a wrong key or modified data is
//! `ONNXL_STATUS_AUTHENTICATION` (for the unauthenticated ONNXCRY1 format: bad padding, or a
//! plaintext that is not a model).

use std::ffi::c_char;

use super::accessors::OnnxlModelProto;
use super::buffer::{OnnxlBuffer, new_buffer};
use super::handle::{c_bytes, c_path, check_out, into_raw, try_ref, write_out};
use super::options::{
    OnnxlParseOptions, OnnxlSerializeOptions, load_options, read_versioned, serialize_options,
};
use super::panic::ffi_status;
use super::status::{FfiError, OnnxlStatus};
use crate::crypto::{self, ChunkCipher, DEFAULT_CHUNK_SIZE, EncryptionFormat, EncryptionOptions};

/// `OnnxlEncryptionOptions.format`: ONNXCRY1, AES-256-CBC + PKCS#7 with NO authentication (a
/// modified file is not detected; a wrong key is caught by the padding and model-parse checks).
/// For compatibility with files of the C++ library only.
pub const ONNXL_ENCRYPTION_FORMAT_ONNXCRY1: u32 = 1;
/// `OnnxlEncryptionOptions.format`: ONNXCRY2, ChaCha20-Poly1305 (authenticated).
pub const ONNXL_ENCRYPTION_FORMAT_ONNXCRY2: u32 = 2;
/// `OnnxlEncryptionOptions.format`: ONNXCRY3, AES-256-GCM with the header as AAD
/// (authenticated). The default.
pub const ONNXL_ENCRYPTION_FORMAT_ONNXCRY3: u32 = 3;
/// `OnnxlEncryptionOptions.format`: ONNXCRYS, this library's chunked streaming format
/// (authenticated, any size, memory bounded by one chunk; docs/encryption.md). Not readable by
/// the C++ library.
pub const ONNXL_ENCRYPTION_FORMAT_CHUNKED: u32 = 4;
/// `OnnxlEncryptionOptions.chunk_cipher`: ChaCha20-Poly1305.
pub const ONNXL_CHUNK_CIPHER_CHACHA20_POLY1305: u32 = 2;
/// `OnnxlEncryptionOptions.chunk_cipher`: AES-256-GCM (the default).
pub const ONNXL_CHUNK_CIPHER_AES_256_GCM: u32 = 3;

/// Options of encrypting. Get the defaults with `onnxl_encryption_options_default()`, then change
/// fields. A NULL options pointer means defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OnnxlEncryptionOptions {
    /// `sizeof(OnnxlEncryptionOptions)` as compiled by the caller (set by the default function).
    pub struct_size: usize,
    /// How the model is serialized before encryption; NULL = defaults. Borrowed for the call.
    pub serialize_options: *const OnnxlSerializeOptions,
    /// One of `ONNXL_ENCRYPTION_FORMAT_*` (default `ONNXL_ENCRYPTION_FORMAT_ONNXCRY3`); other
    /// values are `ONNXL_STATUS_INVALID_ARGUMENT`.
    pub format: u32,
    /// Cipher of the chunked format: one of `ONNXL_CHUNK_CIPHER_*` (default AES-256-GCM).
    pub chunk_cipher: u32,
    /// Plaintext bytes per chunk of the chunked format (default 1 MiB; 64 ..= 64 MiB).
    pub chunk_size: u32,
    /// Must be zero (room for later options).
    pub reserved: u32,
}

/// Every `struct_size` of `OnnxlEncryptionOptions` ever published (oldest first).
const ENCRYPTION_OPTIONS_SIZES: &[usize] = &[size_of::<OnnxlEncryptionOptions>()];

/// The default encryption options (ONNXCRY3), with `struct_size` set.
#[unsafe(no_mangle)]
pub extern "C" fn onnxl_encryption_options_default() -> OnnxlEncryptionOptions {
    OnnxlEncryptionOptions {
        struct_size: size_of::<OnnxlEncryptionOptions>(),
        serialize_options: std::ptr::null(),
        format: ONNXL_ENCRYPTION_FORMAT_ONNXCRY3,
        chunk_cipher: ONNXL_CHUNK_CIPHER_AES_256_GCM,
        chunk_size: DEFAULT_CHUNK_SIZE,
        reserved: 0,
    }
}

/// The encryption options behind a C pointer (NULL = defaults), validated.
///
/// # Safety
/// `p` is NULL or points at options whose `struct_size` bytes are readable, with a NULL or valid
/// `serialize_options`.
unsafe fn encryption_options(
    p: *const OnnxlEncryptionOptions,
) -> Result<EncryptionOptions, FfiError> {
    if p.is_null() {
        return Ok(EncryptionOptions::default());
    }
    // SAFETY: non-NULL with `struct_size` readable bytes (contract).
    let current = unsafe {
        read_versioned(
            p,
            onnxl_encryption_options_default(),
            ENCRYPTION_OPTIONS_SIZES,
            "OnnxlEncryptionOptions",
        )
    }?;
    let o = &current;
    if o.reserved != 0 {
        return Err(FfiError::invalid(
            "OnnxlEncryptionOptions.reserved must be zero",
        ));
    }
    let format = match o.format {
        ONNXL_ENCRYPTION_FORMAT_ONNXCRY1 => EncryptionFormat::AesCbc,
        ONNXL_ENCRYPTION_FORMAT_ONNXCRY2 => EncryptionFormat::ChaCha20Poly1305,
        ONNXL_ENCRYPTION_FORMAT_ONNXCRY3 => EncryptionFormat::AesGcm,
        ONNXL_ENCRYPTION_FORMAT_CHUNKED => EncryptionFormat::Chunked,
        other => {
            return Err(FfiError::invalid(format!(
                "OnnxlEncryptionOptions.format {other} is not an ONNXL_ENCRYPTION_FORMAT_* value"
            )));
        }
    };
    let chunk_cipher = match o.chunk_cipher {
        ONNXL_CHUNK_CIPHER_CHACHA20_POLY1305 => ChunkCipher::ChaCha20Poly1305,
        ONNXL_CHUNK_CIPHER_AES_256_GCM => ChunkCipher::AesGcm,
        other => {
            return Err(FfiError::invalid(format!(
                "OnnxlEncryptionOptions.chunk_cipher {other} is not an ONNXL_CHUNK_CIPHER_* value"
            )));
        }
    };
    // SAFETY: NULL or valid (contract).
    let serialize = unsafe { serialize_options(o.serialize_options) }?;
    let opts = EncryptionOptions {
        format,
        chunk_cipher,
        chunk_size: o.chunk_size,
        serialize,
    };
    opts.validate()?;
    Ok(opts)
}

/// The key bytes.
///
/// # Safety
/// `key..key+key_len` readable (NULL only with `key_len` 0).
unsafe fn c_key<'a>(key: *const u8, key_len: usize) -> Result<&'a [u8], FfiError> {
    // SAFETY: forwarded contract.
    unsafe { c_bytes(key, key_len, "key") }
}

/// Serializes `model`, encrypts it with the passphrase `key[0..key_len]` and writes it to `path`
/// atomically (C++ `SaveEncryptedModel`): a temporary file beside `path` is written, synced and
/// renamed over it; on failure `path` is left as it was. With the chunked format the model is
/// serialized straight into the encryptor (memory: one chunk), at any size.
///
/// Ownership: borrows `model`, `key` and `opts` for the call only. `opts` may be NULL (ONNXCRY3,
/// default serialize options).
///
/// # Safety
/// `model` NULL or live; `path` NULL or NUL-terminated; `key..key+key_len` readable (NULL only
/// with `key_len` 0); `opts` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_save_encrypted_model(
    model: *const OnnxlModelProto,
    path: *const c_char,
    key: *const u8,
    key_len: usize,
    opts: *const OnnxlEncryptionOptions,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { try_ref(model, "model") }?;
        // SAFETY: forwarded contract.
        let path = unsafe { c_path(path, "path") }?;
        // SAFETY: forwarded contract.
        let key = unsafe { c_key(key, key_len) }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { encryption_options(opts) }?;
        Ok(crypto::save_encrypted_model(m, &path, key, &opts)?)
    })
}

/// Decrypts and parses the encrypted model file at `path` (C++ `LoadEncryptedModel`), in any
/// format (ONNXCRY1/2/3 or the chunked format, by its magic). On success writes a new model to
/// `*out` (untouched on failure).
///
/// Ownership: the caller owns `*out` (free with `onnxl_model_proto_free`). With
/// `opts->no_copy`, tensor bytes borrow from the library's decrypted buffer (kept alive by owner
/// tokens and zeroed when the last one is released), never from the file. `opts` may be NULL.
///
/// # Safety
/// `path` NULL or NUL-terminated; `key..key+key_len` readable (NULL only with `key_len` 0);
/// `opts` NULL or valid; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_load_encrypted_model(
    path: *const c_char,
    key: *const u8,
    key_len: usize,
    opts: *const OnnxlParseOptions,
    out: *mut *mut OnnxlModelProto,
) -> OnnxlStatus {
    ffi_status(|| {
        check_out(out, "out")?;
        // SAFETY: forwarded contract.
        let path = unsafe { c_path(path, "path") }?;
        // SAFETY: forwarded contract.
        let key = unsafe { c_key(key, key_len) }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { load_options(opts) }?;
        let m = crate::package::load_encrypted_model(&path, key, &opts)?;
        // SAFETY: `out` checked above.
        unsafe { write_out(out, into_raw::<OnnxlModelProto>(m)) };
        Ok(())
    })
}

/// Serializes and encrypts `model` into a new buffer (C++ `SaveEncryptedModelToString`). On
/// success writes the buffer to `*out` (untouched on failure).
///
/// Ownership: the caller owns `*out` and frees it with `onnxl_buffer_free`. `opts` may be NULL.
///
/// # Safety
/// `model` NULL or live; `key..key+key_len` readable (NULL only with `key_len` 0); `opts` NULL
/// or valid; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_save_encrypted_model_to_string(
    model: *const OnnxlModelProto,
    key: *const u8,
    key_len: usize,
    opts: *const OnnxlEncryptionOptions,
    out: *mut *mut OnnxlBuffer,
) -> OnnxlStatus {
    ffi_status(|| {
        check_out(out, "out")?;
        // SAFETY: forwarded contract.
        let m = unsafe { try_ref(model, "model") }?;
        // SAFETY: forwarded contract.
        let key = unsafe { c_key(key, key_len) }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { encryption_options(opts) }?;
        let bytes = crypto::save_encrypted_model_to_bytes(m, key, &opts)?;
        // SAFETY: `out` checked above.
        unsafe { write_out(out, new_buffer(bytes)) };
        Ok(())
    })
}

/// Decrypts and parses an encrypted model from `len` bytes at `data` (C++
/// `LoadEncryptedModelFromString`), in any format by its magic. On success writes a new model to
/// `*out` (untouched on failure).
///
/// Ownership: the caller owns `*out` (free with `onnxl_model_proto_free`). `data` is only read
/// during the call (never borrowed by the model, even with `no_copy`: payloads then borrow from
/// the library's own decrypted buffer). `opts` may be NULL.
///
/// # Safety
/// `data..data+len` readable (NULL only with `len` 0); `key..key+key_len` readable (NULL only
/// with `key_len` 0); `opts` NULL or valid; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_load_encrypted_model_from_string(
    data: *const u8,
    len: usize,
    key: *const u8,
    key_len: usize,
    opts: *const OnnxlParseOptions,
    out: *mut *mut OnnxlModelProto,
) -> OnnxlStatus {
    ffi_status(|| {
        check_out(out, "out")?;
        // SAFETY: forwarded contract.
        let data = unsafe { c_bytes(data, len, "data") }?;
        // SAFETY: forwarded contract.
        let key = unsafe { c_key(key, key_len) }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { load_options(opts) }?;
        let m = crate::package::load_encrypted_model_from_bytes(data, key, &opts)?;
        // SAFETY: `out` checked above.
        unsafe { write_out(out, into_raw::<OnnxlModelProto>(m)) };
        Ok(())
    })
}

/// Encrypts the file `input` (any bytes, e.g. an external-data file) into `output` atomically,
/// in `opts->format` (use `ONNXL_ENCRYPTION_FORMAT_CHUNKED` for files of any size with memory
/// bounded by one chunk; the one-shot formats read the file whole, and ONNXCRY1 accepts models
/// only). `opts` may be NULL (ONNXCRY3).
///
/// # Safety
/// `input`, `output` NULL or NUL-terminated; `key..key+key_len` readable (NULL only with
/// `key_len` 0); `opts` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_encrypt_file(
    input: *const c_char,
    output: *const c_char,
    key: *const u8,
    key_len: usize,
    opts: *const OnnxlEncryptionOptions,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let input = unsafe { c_path(input, "input") }?;
        // SAFETY: forwarded contract.
        let output = unsafe { c_path(output, "output") }?;
        // SAFETY: forwarded contract.
        let key = unsafe { c_key(key, key_len) }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { encryption_options(opts) }?;
        crypto::encrypt_file(&input, &output, key, &opts)?;
        Ok(())
    })
}

/// Decrypts the file `input` (any format, by its magic) into `output` atomically: `output` is
/// replaced only when every byte authenticated (ONNXCRY1: when the plaintext is a model). The
/// chunked format streams with memory bounded by one chunk.
///
/// # Safety
/// `input`, `output` NULL or NUL-terminated; `key..key+key_len` readable (NULL only with
/// `key_len` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_decrypt_file(
    input: *const c_char,
    output: *const c_char,
    key: *const u8,
    key_len: usize,
) -> OnnxlStatus {
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let input = unsafe { c_path(input, "input") }?;
        // SAFETY: forwarded contract.
        let output = unsafe { c_path(output, "output") }?;
        // SAFETY: forwarded contract.
        let key = unsafe { c_key(key, key_len) }?;
        crypto::decrypt_file(&input, &output, key)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::buffer::{onnxl_buffer_data, onnxl_buffer_free, onnxl_buffer_size};
    use crate::ffi::status::last_error;
    use crate::proto::{Message, ModelProto};

    fn model() -> ModelProto {
        let mut m = ModelProto::new();
        m.set_ir_version(10);
        m.set_producer_name("ffi-crypto");
        m
    }

    #[test]
    fn layout_has_no_tail_padding() {
        assert_eq!(
            size_of::<OnnxlEncryptionOptions>(),
            2 * size_of::<usize>() + 16
        );
    }

    #[test]
    fn round_trip_through_the_c_abi_in_every_format() {
        let m = model();
        let key = b"k\0ey with a NUL";
        for format in 1..=4u32 {
            let mut opts = onnxl_encryption_options_default();
            opts.format = format;
            opts.chunk_size = 64;
            let handle: *const OnnxlModelProto = (&m as *const ModelProto).cast();
            let mut buf: *mut OnnxlBuffer = std::ptr::null_mut();
            // SAFETY: live model, key and options on the stack, writable out-pointers; the
            // buffer and model are freed once.
            unsafe {
                assert_eq!(
                    onnxl_save_encrypted_model_to_string(
                        handle,
                        key.as_ptr(),
                        key.len(),
                        &opts,
                        &mut buf
                    ),
                    OnnxlStatus::Ok
                );
                let data = onnxl_buffer_data(buf);
                let len = onnxl_buffer_size(buf);
                let mut out: *mut OnnxlModelProto = std::ptr::null_mut();
                assert_eq!(
                    onnxl_load_encrypted_model_from_string(
                        data,
                        len,
                        key.as_ptr(),
                        key.len(),
                        std::ptr::null(),
                        &mut out
                    ),
                    OnnxlStatus::Ok
                );
                let back = Box::from_raw(out.cast::<ModelProto>());
                assert_eq!(back.producer_name(), "ffi-crypto");
                let wrong = onnxl_load_encrypted_model_from_string(
                    data,
                    len,
                    key.as_ptr(),
                    key.len() - 1,
                    std::ptr::null(),
                    &mut out,
                );
                assert_eq!(wrong, OnnxlStatus::Authentication, "{}", last_error());
                assert!(!last_error().contains("ey with"), "{}", last_error());
                let truncated = onnxl_load_encrypted_model_from_string(
                    data,
                    20,
                    key.as_ptr(),
                    key.len(),
                    std::ptr::null(),
                    &mut out,
                );
                assert_eq!(truncated, OnnxlStatus::Crypto, "{}", last_error());
                onnxl_buffer_free(buf);
            }
        }
    }

    #[test]
    fn files_empty_key_and_bad_arguments() {
        let dir = std::env::temp_dir().join(format!("onnxl-ffi-crypto-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = std::ffi::CString::new(dir.join("m.onnxc").to_str().unwrap()).unwrap();
        let m = model();
        let handle: *const OnnxlModelProto = (&m as *const ModelProto).cast();
        // SAFETY: live model, NUL-terminated path, NULL key with length 0 (the empty key),
        // writable out-pointers; the model is freed once.
        unsafe {
            assert_eq!(
                onnxl_save_encrypted_model(
                    handle,
                    path.as_ptr(),
                    std::ptr::null(),
                    0,
                    std::ptr::null()
                ),
                OnnxlStatus::Ok
            );
            let data = std::fs::read(dir.join("m.onnxc")).unwrap();
            assert_eq!(&data[..8], b"ONNXCRY3");
            let mut out: *mut OnnxlModelProto = std::ptr::null_mut();
            assert_eq!(
                onnxl_load_encrypted_model(
                    path.as_ptr(),
                    std::ptr::null(),
                    0,
                    std::ptr::null(),
                    &mut out
                ),
                OnnxlStatus::Ok
            );
            let back = Box::from_raw(out.cast::<ModelProto>());
            assert_eq!(back.encoded_len(), m.encoded_len());
            assert_eq!(
                onnxl_load_encrypted_model(
                    path.as_ptr(),
                    std::ptr::null(),
                    3,
                    std::ptr::null(),
                    &mut out
                ),
                OnnxlStatus::NullPointer
            );
            let mut opts = onnxl_encryption_options_default();
            opts.format = 9;
            assert_eq!(
                onnxl_save_encrypted_model(handle, path.as_ptr(), std::ptr::null(), 0, &opts),
                OnnxlStatus::InvalidArgument
            );
            opts = onnxl_encryption_options_default();
            opts.format = ONNXL_ENCRYPTION_FORMAT_CHUNKED;
            opts.chunk_size = 3;
            assert_eq!(
                onnxl_save_encrypted_model(handle, path.as_ptr(), std::ptr::null(), 0, &opts),
                OnnxlStatus::InvalidArgument
            );
            opts = onnxl_encryption_options_default();
            opts.struct_size = 8;
            assert_eq!(
                onnxl_save_encrypted_model(handle, path.as_ptr(), std::ptr::null(), 0, &opts),
                OnnxlStatus::InvalidArgument
            );
            let empty = dir.join("empty");
            std::fs::write(&empty, b"").unwrap();
            let empty = std::ffi::CString::new(empty.to_str().unwrap()).unwrap();
            assert_eq!(
                onnxl_load_encrypted_model(
                    empty.as_ptr(),
                    std::ptr::null(),
                    0,
                    std::ptr::null(),
                    &mut out
                ),
                OnnxlStatus::Crypto
            );
            assert!(last_error().contains("empty"), "{}", last_error());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
