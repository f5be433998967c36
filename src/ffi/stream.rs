//! Streams (`OnnxlStream`): where `onnxl_parse_proto_from_stream` reads from and
//! `onnxl_serialize_proto_to_stream` writes to (C++ `FileStream`, `MmapFileStream`,
//! `StringStream`, `TwoFilesStream` (a model file + its weights file), and caller callbacks).

use std::ffi::{c_char, c_void};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use super::accessors::{OnnxlModelProto, OnnxlTensorProto};
use super::handle::{
    Castable, c_bytes, c_path, check_out, free_box, into_raw, try_mut, try_ref, write_out,
};
use super::options::{OnnxlParseOptions, OnnxlSerializeOptions, load_options, serialize_options};
use super::panic::ffi_status;
use super::status::{FfiError, OnnxlStatus};
use crate::codec::{self, FileLoadMode, SerializeOptions};
use crate::external::LoadOptions;
use crate::external::SaveExternalOptions;
use crate::package;
use crate::proto::{Message, ModelProto};
use crate::storage::MappedFile;

/// A source or destination of serialized messages.
///
/// Kinds: a file (`onnxl_stream_open_file`: read whole, written atomically), a memory-mapped
/// file (`onnxl_stream_open_mmap`: read-only), caller bytes (`onnxl_stream_from_bytes`:
/// read-only, borrowed), a library-owned memory buffer (`onnxl_stream_new_memory`: written,
/// then read back or inspected), caller callbacks (`onnxl_stream_from_callbacks`), and a model
/// file with its weights file (`onnxl_stream_open_model_with_weights`).
///
/// Ownership: the caller owns it and frees it with `onnxl_stream_free`. Tensor bytes parsed
/// with `no_copy` from a mapped file or a memory stream keep that memory alive through owner
/// tokens, so the model stays valid after the stream is freed; from caller bytes they borrow
/// the caller's memory without an owner.
///
/// Thread safety: not thread-safe; use a stream from one thread at a time.
pub struct OnnxlStream {
    _private: [u8; 0],
}

/// Reads up to `capacity` bytes into `buffer`; returns the number read, 0 at the end of the
/// data, or a negative value on error.
///
/// Thread safety: called only on the thread that is using the stream, never concurrently.
pub type OnnxlReadCallback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, buffer: *mut u8, capacity: usize) -> isize>;

/// Writes `len` bytes from `data`; returns the number written (at least 1 when `len` > 0), or a
/// negative value on error.
///
/// Thread safety: called only on the thread that is using the stream, never concurrently.
pub type OnnxlWriteCallback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, data: *const u8, len: usize) -> isize>;

/// Called once with `user_data` when the stream is freed.
///
/// Thread safety: called on the thread that calls `onnxl_stream_free`.
pub type OnnxlStreamReleaseCallback = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// Caller callbacks of a stream.
pub(crate) struct Callbacks {
    read: OnnxlReadCallback,
    write: OnnxlWriteCallback,
    release: OnnxlStreamReleaseCallback,
    user_data: *mut c_void,
}

impl Drop for Callbacks {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: the caller gave this callback for this `user_data`; Drop runs once.
            unsafe { release(self.user_data) }
        }
    }
}

impl Read for &mut Callbacks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self
            .read
            .ok_or_else(|| std::io::Error::other("the stream has no read callback"))?;
        // SAFETY: `buf` is writable for `buf.len()` bytes; the callback contract says it writes at
        // most `capacity` bytes.
        let n = unsafe { read(self.user_data, buf.as_mut_ptr(), buf.len()) };
        match usize::try_from(n) {
            Ok(n) if n <= buf.len() => Ok(n),
            Ok(n) => Err(std::io::Error::other(format!(
                "read callback returned {n} > capacity {}",
                buf.len()
            ))),
            Err(_) => Err(std::io::Error::other(format!("read callback failed ({n})"))),
        }
    }
}

impl Write for &mut Callbacks {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let write = self
            .write
            .ok_or_else(|| std::io::Error::other("the stream has no write callback"))?;
        if buf.is_empty() {
            return Ok(0);
        }
        // SAFETY: `buf` is readable for `buf.len()` bytes during the call.
        let n = unsafe { write(self.user_data, buf.as_ptr(), buf.len()) };
        match usize::try_from(n) {
            Ok(0) => Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) if n <= buf.len() => Ok(n),
            Ok(n) => Err(std::io::Error::other(format!(
                "write callback returned {n} > length {}",
                buf.len()
            ))),
            Err(_) => Err(std::io::Error::other(format!(
                "write callback failed ({n})"
            ))),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What an `OnnxlStream*` points at.
pub(crate) enum Stream {
    File(PathBuf),
    Mapped(Arc<MappedFile>),
    /// Caller bytes, borrowed without an owner.
    Bytes {
        data: *const u8,
        len: usize,
    },
    Memory(Arc<Vec<u8>>),
    Callbacks(Callbacks),
    /// A model file and the one weights file that holds its external data.
    ModelWithWeights {
        model: PathBuf,
        weights: PathBuf,
    },
}

/// The `ModelProto` behind a generic message, if it is one.
fn as_model<M: Message>(m: &M) -> Option<&ModelProto> {
    (m as &dyn std::any::Any).downcast_ref::<ModelProto>()
}

/// The weights file's name relative to the model's directory (it must lie in that directory,
/// as an external-data `location` does).
fn weights_location(
    model: &std::path::Path,
    weights: &std::path::Path,
) -> Result<String, FfiError> {
    let dir = |p: &std::path::Path| p.parent().map(|d| d.to_path_buf()).unwrap_or_default();
    let name = weights
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    match name {
        Some(name) if dir(model) == dir(weights) => Ok(name),
        _ => Err(FfiError::invalid(format!(
            "the weights file {} must be in the directory of the model {}",
            weights.display(),
            model.display()
        ))),
    }
}

impl Castable for OnnxlStream {
    type Rust = Stream;
}

fn read_only(kind: &str) -> FfiError {
    FfiError::new(
        OnnxlStatus::Unsupported,
        format!("{kind} stream is read-only"),
    )
}

impl Stream {
    fn parse<M: Message>(&mut self, load: &LoadOptions) -> Result<M, FfiError> {
        let opts = &load.parse;
        Ok(match self {
            Stream::File(path) => {
                let mut load = load.clone();
                load.parse.file_load_mode = FileLoadMode::Buffered;
                package::parse_from_file(path, &load)?
            }
            Stream::Mapped(map) => codec::parse_from_shared(map.clone(), opts)?,
            Stream::Bytes { data, len } => {
                // SAFETY: the caller of `onnxl_stream_from_bytes` keeps the bytes valid while the
                // stream lives (and, with no_copy, while the parsed message is used).
                let bytes = unsafe { c_bytes(*data, *len, "data") }?;
                // SAFETY: same contract: with no_copy the caller keeps the bytes alive.
                unsafe { codec::parse_from_bytes_unowned(bytes, opts) }?
            }
            Stream::Memory(buf) if opts.no_copy => codec::parse_from_shared(buf.clone(), opts)?,
            Stream::Memory(buf) => codec::parse_from_bytes(buf, opts)?,
            Stream::Callbacks(cb) => codec::parse_from_reader(cb, opts)?,
            Stream::ModelWithWeights {
                model: path,
                weights,
            } => {
                let load = LoadOptions {
                    load_external_data: true,
                    external_data_location: Some(weights.clone()),
                    ..load.clone()
                };
                package::parse_from_file(path, &load)?
            }
        })
    }

    fn serialize<M: Message>(&mut self, m: &M, opts: &SerializeOptions) -> Result<(), FfiError> {
        match self {
            Stream::File(path) => codec::save_to_file(m, path, opts)?,
            Stream::Mapped(_) => return Err(read_only("a memory-mapped")),
            Stream::Bytes { .. } => return Err(read_only("a caller-bytes")),
            Stream::Memory(buf) => *buf = Arc::new(codec::serialize_to_vec(m, opts)?),
            Stream::Callbacks(cb) => {
                codec::serialize_to_writer(m, cb, opts)?;
            }
            Stream::ModelWithWeights {
                model: path,
                weights,
            } => {
                let m = as_model(m).ok_or_else(|| {
                    FfiError::new(
                        OnnxlStatus::Unsupported,
                        "a model + weights stream holds a ModelProto only".to_string(),
                    )
                })?;
                // `skip_raw_data`: the dropped payloads are written nowhere.
                let skipped = codec::skip_payloads(m, opts);
                let m = skipped.as_ref().map_or(m, |(copy, _)| copy);
                // `SerializeOptions.alignment`: 0 = the default (4096), 1 = packed.
                let defaults = SaveExternalOptions::default();
                let save = SaveExternalOptions {
                    location: Some(weights_location(path, weights)?),
                    size_threshold: opts.raw_data_threshold,
                    num_threads: opts.num_threads,
                    alignment: match opts.alignment {
                        0 => defaults.alignment,
                        a => a,
                    },
                    align_threshold: 0,
                    max_external_file_size: opts.max_external_file_size,
                    use_external_data_location: opts.use_external_data_location,
                    ..defaults
                };
                crate::external::save_model_with_external_data(m, path.as_path(), &save)?;
            }
        }
        Ok(())
    }
}

/// # Safety
/// `out` NULL or writable.
unsafe fn new_stream(
    out: *mut *mut OnnxlStream,
    make: impl FnOnce() -> Result<Stream, FfiError>,
) -> OnnxlStatus {
    ffi_status(|| {
        check_out(out, "out")?;
        let s = make()?;
        // SAFETY: checked above.
        unsafe { write_out(out, into_raw::<OnnxlStream>(s)) };
        Ok(())
    })
}

/// A stream over the file at `path` (C++ `FileStream`): parsing reads the whole file into
/// memory; serializing replaces the file atomically. The file is opened when used, not here.
///
/// Ownership: the caller owns `*out` (free with `onnxl_stream_free`); `path` is copied.
///
/// # Safety
/// `path` NULL or NUL-terminated; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_stream_open_file(
    path: *const c_char,
    out: *mut *mut OnnxlStream,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { new_stream(out, || Ok(Stream::File(c_path(path, "path")?))) }
}

/// A read-only stream over a memory map of the file at `path` (C++ `MmapFileStream`), mapped
/// now. With `no_copy`, parsed tensor bytes borrow from the mapping and keep it alive through
/// owner tokens (valid after the stream is freed). Writing to it is `ONNXL_STATUS_UNSUPPORTED`.
///
/// Ownership: the caller owns `*out` (free with `onnxl_stream_free`).
///
/// # Safety
/// `path` NULL or NUL-terminated; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_stream_open_mmap(
    path: *const c_char,
    out: *mut *mut OnnxlStream,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe {
        new_stream(out, || {
            Ok(Stream::Mapped(MappedFile::open(&c_path(path, "path")?)?))
        })
    }
}

/// A stream over a model file and its weights file (C++ `TwoFilesStream`). Parsing reads the
/// model at `model_path` and its external data from `weights_path` (which replaces the primary
/// `location` of the model's tensors; split parts `NAME.1`, … follow it); with `no_copy` the
/// weights file is mapped once and every tensor borrows from it under a shared owner token.
/// Serializing a `ModelProto` writes the model with every tensor of at least the serialize
/// options' `raw_data_threshold` bytes in `weights_path`, which must then be in the model's
/// directory (each file replaced atomically). Other messages: `ONNXL_STATUS_UNSUPPORTED` on write.
///
/// Ownership: the caller owns `*out` (free with `onnxl_stream_free`); the paths are copied. The
/// files are opened when used, not here.
///
/// # Safety
/// `model_path` and `weights_path` NULL or NUL-terminated; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_stream_open_model_with_weights(
    model_path: *const c_char,
    weights_path: *const c_char,
    out: *mut *mut OnnxlStream,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe {
        new_stream(out, || {
            Ok(Stream::ModelWithWeights {
                model: c_path(model_path, "model_path")?,
                weights: c_path(weights_path, "weights_path")?,
            })
        })
    }
}

/// A read-only stream over `len` caller bytes at `data` (C++ `StringStream`), NOT copied.
///
/// Lifetime: `data` must stay valid and unchanged while the stream lives and, when parsing with
/// `no_copy`, while the parsed message (or any pointer taken from it) is used: payloads borrow
/// it without an owner token. Ownership: the caller owns `*out` (free with `onnxl_stream_free`).
///
/// # Safety
/// `data..data+len` readable as above (NULL only with `len` 0); `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_stream_from_bytes(
    data: *const u8,
    len: usize,
    out: *mut *mut OnnxlStream,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe {
        new_stream(out, || {
            c_bytes(data, len, "data")?;
            Ok(Stream::Bytes { data, len })
        })
    }
}

/// An empty stream over a library-owned memory buffer: serializing into it replaces its
/// contents; parsing reads them (with `no_copy`, payloads share the buffer through owner tokens);
/// `onnxl_stream_bytes` shows them.
///
/// Ownership: the caller owns `*out` (free with `onnxl_stream_free`).
///
/// # Safety
/// `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_stream_new_memory(out: *mut *mut OnnxlStream) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { new_stream(out, || Ok(Stream::Memory(Arc::new(Vec::new())))) }
}

/// A stream over caller callbacks: `read` (for parsing; it is called until it returns 0) and/or
/// `write` (for serializing); at least one must be non-NULL. `release`, if non-NULL, is called
/// once with `user_data` when the stream is freed; when this function fails it is not called
/// (the caller keeps `user_data`). The callbacks run on the calling thread, during the parse or
/// serialize call; they must not unwind (e.g. throw C++ exceptions) through the library.
///
/// Ownership: the caller owns `*out` (free with `onnxl_stream_free`); `user_data` stays the
/// caller's and is only passed to the callbacks.
///
/// # Safety
/// The callbacks are valid functions for `user_data` until the stream is freed; `out` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_stream_from_callbacks(
    read: OnnxlReadCallback,
    write: OnnxlWriteCallback,
    release: OnnxlStreamReleaseCallback,
    user_data: *mut c_void,
    out: *mut *mut OnnxlStream,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe {
        new_stream(out, || {
            if read.is_none() && write.is_none() {
                return Err(FfiError::null("read and write callbacks"));
            }
            Ok(Stream::Callbacks(Callbacks {
                read,
                write,
                release,
                user_data,
            }))
        })
    }
}

/// The bytes of a memory, caller-bytes or memory-mapped stream: writes the first byte to `*data`
/// and the length to `*len` (only on success). Other kinds are `ONNXL_STATUS_UNSUPPORTED`.
///
/// Lifetime: valid until the stream is written to or freed.
///
/// # Safety
/// `stream` NULL or live; `data` and `len` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_stream_bytes(
    stream: *const OnnxlStream,
    data: *mut *const u8,
    len: *mut usize,
) -> OnnxlStatus {
    ffi_status(|| {
        check_out(data, "data")?;
        check_out(len, "len")?;
        // SAFETY: forwarded contract.
        let (p, n) = match unsafe { try_ref(stream, "stream") }? {
            Stream::Bytes { data, len } => (*data, *len),
            Stream::Memory(buf) => (buf.as_ptr(), buf.len()),
            Stream::Mapped(map) => (map.bytes().as_ptr(), map.bytes().len()),
            Stream::File(_) | Stream::Callbacks(_) | Stream::ModelWithWeights { .. } => {
                return Err(FfiError::new(
                    OnnxlStatus::Unsupported,
                    "file, model + weights and callback streams have no bytes to show",
                ));
            }
        };
        // SAFETY: both checked above.
        unsafe {
            write_out(data, p);
            write_out(len, n);
        }
        Ok(())
    })
}

/// Frees `stream` (NULL is ignored); runs the release callback of a callback stream. Models
/// parsed from it stay valid (see `OnnxlStream`).
///
/// # Safety
/// `stream` NULL or live, freed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_stream_free(stream: *mut OnnxlStream) {
    let _ = ffi_status(|| {
        // SAFETY: forwarded contract.
        unsafe { free_box(stream) };
        Ok(())
    });
}

/// # Safety
/// `m` NULL or live and not otherwise used; `stream` NULL or live; `opts` NULL or valid.
unsafe fn parse_into<C: Castable>(
    m: *mut C,
    stream: *mut OnnxlStream,
    opts: *const OnnxlParseOptions,
) -> OnnxlStatus
where
    C::Rust: Message,
{
    ffi_status(|| {
        if m.is_null() {
            return Err(FfiError::null("message"));
        }
        // SAFETY: forwarded contract.
        let opts = unsafe { load_options(opts) }?;
        // SAFETY: forwarded contract.
        let parsed = unsafe { try_mut(stream, "stream") }?.parse::<C::Rust>(&opts)?;
        // SAFETY: forwarded contract.
        *unsafe { try_mut(m, "message") }? = parsed;
        Ok(())
    })
}

/// # Safety
/// `m` NULL or live; `stream` NULL or live; `opts` NULL or valid.
unsafe fn serialize_from<C: Castable>(
    m: *const C,
    stream: *mut OnnxlStream,
    opts: *const OnnxlSerializeOptions,
) -> OnnxlStatus
where
    C::Rust: Message,
{
    ffi_status(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { try_ref(m, "message") }?;
        // SAFETY: forwarded contract.
        let opts = unsafe { serialize_options(opts) }?;
        // SAFETY: forwarded contract.
        unsafe { try_mut(stream, "stream") }?.serialize(m, &opts)
    })
}

/// Parses a model from `stream` into `model` (C++ `ParseProtoFromStream`), replacing its
/// contents; `model` is unchanged on failure. `opts->file_load_mode` is ignored: the stream kind
/// decides how bytes are read.
///
/// Ownership: borrows all arguments for the call; see `OnnxlStream` for what `no_copy` tensor
/// bytes keep alive. `opts` may be NULL (defaults).
///
/// # Safety
/// `model` and `stream` NULL or live and not used elsewhere during the call; `opts` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_parse_proto_from_stream(
    model: *mut OnnxlModelProto,
    stream: *mut OnnxlStream,
    opts: *const OnnxlParseOptions,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { parse_into(model, stream, opts) }
}

/// Serializes `model` to `stream` (C++ `SerializeProtoToStream`).
///
/// Ownership: borrows all arguments for the call. `opts` may be NULL (defaults).
///
/// # Safety
/// `model` and `stream` NULL or live; `opts` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_serialize_proto_to_stream(
    model: *const OnnxlModelProto,
    stream: *mut OnnxlStream,
    opts: *const OnnxlSerializeOptions,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { serialize_from(model, stream, opts) }
}

/// Parses a standalone `TensorProto` from `stream` into `tensor`, like
/// `onnxl_parse_proto_from_stream`.
///
/// # Safety
/// `tensor` and `stream` NULL or live and not used elsewhere; `opts` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_parse_tensor_proto_from_stream(
    tensor: *mut OnnxlTensorProto,
    stream: *mut OnnxlStream,
    opts: *const OnnxlParseOptions,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { parse_into(tensor, stream, opts) }
}

/// Serializes a standalone `TensorProto` to `stream`, like `onnxl_serialize_proto_to_stream`.
///
/// # Safety
/// `tensor` and `stream` NULL or live; `opts` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxl_serialize_tensor_proto_to_stream(
    tensor: *const OnnxlTensorProto,
    stream: *mut OnnxlStream,
    opts: *const OnnxlSerializeOptions,
) -> OnnxlStatus {
    // SAFETY: forwarded contract.
    unsafe { serialize_from(tensor, stream, opts) }
}

/// Parses into a fresh `M` (used by tests of the stream kinds).
#[cfg(test)]
fn parse_new<M: Message>(s: &mut Stream) -> Result<M, FfiError> {
    s.parse(&LoadOptions::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{ModelProto, TensorProto};

    struct Sink {
        out: Vec<u8>,
        pos: usize,
        released: bool,
    }
    unsafe extern "C" fn write_cb(user: *mut c_void, data: *const u8, len: usize) -> isize {
        // SAFETY: `user` is the `Sink` of the test; `data` readable for `len`.
        let sink = unsafe { &mut *user.cast::<Sink>() };
        // SAFETY: see above.
        sink.out
            .extend_from_slice(unsafe { std::slice::from_raw_parts(data, len) });
        len as isize
    }
    unsafe extern "C" fn read_cb(user: *mut c_void, buf: *mut u8, cap: usize) -> isize {
        // SAFETY: `user` is the `Sink` of the test; `buf` writable for `cap`.
        let sink = unsafe { &mut *user.cast::<Sink>() };
        let n = (sink.out.len() - sink.pos).min(cap).min(3);
        // SAFETY: see above.
        unsafe { std::ptr::copy_nonoverlapping(sink.out[sink.pos..].as_ptr(), buf, n) };
        sink.pos += n;
        n as isize
    }
    unsafe extern "C" fn failing_read(_: *mut c_void, _: *mut u8, _: usize) -> isize {
        -1
    }
    unsafe extern "C" fn release_cb(user: *mut c_void) {
        // SAFETY: `user` is the `Sink` of the test.
        unsafe { &mut *user.cast::<Sink>() }.released = true;
    }

    fn sample() -> ModelProto {
        let mut m = ModelProto::new();
        m.set_ir_version(9);
        m.mutable_graph()
            .add_initializer()
            .set_raw_data(vec![1u8; 2000]);
        m
    }

    #[test]
    fn callback_stream_round_trip_and_release() {
        let mut sink = Sink {
            out: Vec::new(),
            pos: 0,
            released: false,
        };
        let mut s: *mut OnnxlStream = std::ptr::null_mut();
        let model = into_raw::<OnnxlModelProto>(sample());
        // SAFETY: valid callbacks for `sink`, which outlives the stream; live handles.
        unsafe {
            let user = (&raw mut sink).cast::<c_void>();
            assert_eq!(
                onnxl_stream_from_callbacks(
                    Some(read_cb),
                    Some(write_cb),
                    Some(release_cb),
                    user,
                    &mut s
                ),
                OnnxlStatus::Ok
            );
            assert_eq!(
                onnxl_serialize_proto_to_stream(model, s, std::ptr::null()),
                OnnxlStatus::Ok
            );
            let back = crate::proto::ModelProto::new();
            let back = into_raw::<OnnxlModelProto>(back);
            assert_eq!(
                onnxl_parse_proto_from_stream(back, s, std::ptr::null()),
                OnnxlStatus::Ok
            );
            assert_eq!(*try_ref(back, "m").unwrap(), sample());
            onnxl_stream_free(s);
            free_box(back);
            free_box(model);
        }
        assert!(sink.released);
    }

    #[test]
    fn failures_and_read_only_kinds() {
        let mut s: *mut OnnxlStream = std::ptr::null_mut();
        let model = into_raw::<OnnxlModelProto>(sample());
        // SAFETY: valid (or NULL) arguments throughout.
        unsafe {
            assert_eq!(
                onnxl_stream_from_callbacks(None, None, None, std::ptr::null_mut(), &mut s),
                OnnxlStatus::NullPointer
            );
            assert!(s.is_null(), "no output on failure");
            onnxl_stream_from_callbacks(
                Some(failing_read),
                None,
                None,
                std::ptr::null_mut(),
                &mut s,
            );
            assert_eq!(
                onnxl_parse_proto_from_stream(model, s, std::ptr::null()),
                OnnxlStatus::Io
            );
            assert_eq!(
                *try_ref(model, "m").unwrap(),
                sample(),
                "unchanged on failure"
            );
            assert_eq!(
                onnxl_serialize_proto_to_stream(model, s, std::ptr::null()),
                OnnxlStatus::Io
            );
            onnxl_stream_free(s);

            let bytes = sample().serialize_to_vec();
            assert_eq!(
                onnxl_stream_from_bytes(bytes.as_ptr(), bytes.len(), &mut s),
                OnnxlStatus::Ok
            );
            assert_eq!(
                onnxl_serialize_proto_to_stream(model, s, std::ptr::null()),
                OnnxlStatus::Unsupported
            );
            assert_eq!(
                parse_new::<ModelProto>(try_mut(s, "s").unwrap()).unwrap(),
                sample()
            );
            onnxl_stream_free(s);
            assert_eq!(
                onnxl_stream_open_file(std::ptr::null(), &mut s),
                OnnxlStatus::NullPointer
            );
            assert_eq!(
                onnxl_stream_open_mmap(c"/nonexistent/x.onnx".as_ptr(), &mut s),
                OnnxlStatus::Io
            );
            free_box(model);
        }
    }

    #[test]
    fn memory_stream_no_copy_shares_the_buffer() {
        let mut s: *mut OnnxlStream = std::ptr::null_mut();
        let model = into_raw::<OnnxlModelProto>(sample());
        let tensor = into_raw::<OnnxlTensorProto>(TensorProto::new());
        let mut opts = super::super::options::onnxl_parse_options_default();
        opts.no_copy = 1;
        // Borrow wherever the payload is (the stream's buffer decides its alignment).
        opts.alignment = 1;
        // SAFETY: valid arguments throughout.
        unsafe {
            assert_eq!(onnxl_stream_new_memory(&mut s), OnnxlStatus::Ok);
            assert_eq!(
                onnxl_serialize_proto_to_stream(model, s, std::ptr::null()),
                OnnxlStatus::Ok
            );
            let (mut p, mut n) = (std::ptr::null(), 0);
            assert_eq!(onnxl_stream_bytes(s, &mut p, &mut n), OnnxlStatus::Ok);
            assert_eq!(
                std::slice::from_raw_parts(p, n),
                &sample().serialize_to_vec()[..]
            );
            let back = into_raw::<OnnxlModelProto>(ModelProto::new());
            assert_eq!(
                onnxl_parse_proto_from_stream(back, s, &opts),
                OnnxlStatus::Ok
            );
            onnxl_stream_free(s);
            let t = &try_ref(back, "m").unwrap().graph().initializer[0];
            let raw = t.raw_data.as_ref().unwrap();
            assert!(
                raw.is_borrowed() && !raw.is_unowned_borrow(),
                "borrows with an owner"
            );
            assert_eq!(raw.as_slice(), &[1u8; 2000][..]);
            // A tensor stream round trip.
            assert_eq!(onnxl_stream_new_memory(&mut s), OnnxlStatus::Ok);
            assert_eq!(
                onnxl_serialize_tensor_proto_to_stream(
                    std::ptr::from_ref(t).cast(),
                    s,
                    std::ptr::null()
                ),
                OnnxlStatus::Ok
            );
            assert_eq!(
                onnxl_parse_tensor_proto_from_stream(tensor, s, std::ptr::null()),
                OnnxlStatus::Ok
            );
            assert_eq!(try_ref(tensor, "t").unwrap().raw_data(), &[1u8; 2000][..]);
            onnxl_stream_free(s);
            free_box(tensor);
            free_box(back);
            free_box(model);
        }
    }
}
