//! The crate's one error type.
//!
//! Every failure is an [`Error`] value; decoding errors carry the absolute byte offset and the
//! field path (e.g. `graph.initializer[12].dims`) where they happened.

use std::fmt::{self, Write as _};
use std::path::PathBuf;

/// What went wrong while decoding the protobuf wire format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The input ends in the middle of a field.
    Truncated,
    /// A varint longer than 10 bytes, or a 10th byte above 1.
    VarintOverflow,
    /// A tag with field number 0, or a field number above 2^29-1.
    InvalidFieldNumber(u64),
    /// Wire type 6 or 7.
    InvalidWireType(u8),
    /// A length prefix that runs past the end of its enclosing message.
    LengthPastEnd {
        /// The declared length.
        length: u64,
        /// Bytes left in the enclosing message.
        available: u64,
    },
    /// A length prefix encoded in more than 5 bytes without need (protobuf refuses these).
    OverlongLength,
    /// Messages (or groups) nested deeper than `max_recursion_depth`.
    RecursionLimit(u32),
    /// An end-group tag without a matching start group, or a group left open.
    UnmatchedGroup(u32),
    /// A packed field whose length is not a multiple of its element size, or whose last varint
    /// crosses its end.
    BadPackedLength,
    /// A tensor payload larger than `max_tensor_size_bytes`.
    TensorTooLarge {
        /// The payload size.
        size: u64,
        /// The configured limit.
        limit: u64,
    },
    /// The decoded structure (everything but tensor payloads) would take more memory than
    /// `max_metadata_bytes` (see [`crate::wire::metadata_budget`]).
    MetadataLimit {
        /// The budget in bytes.
        limit: u64,
    },
    /// A repeated field with more elements than its list holds (2^31 − 1, see
    /// [`crate::wire::inline_vec::MAX_LEN`]; protobuf's limit too).
    TooManyElements {
        /// The most elements the field holds.
        limit: u64,
    },
    /// An allocation sized by the input failed (the process is out of memory or address
    /// space); converted to [`Error::OutOfMemory`].
    OutOfMemory {
        /// The size asked for.
        bytes: u64,
    },
}

impl fmt::Display for DecodeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => f.write_str("input truncated"),
            Self::VarintOverflow => f.write_str("malformed varint (more than 64 bits)"),
            Self::InvalidFieldNumber(n) => write!(f, "invalid field number {n}"),
            Self::InvalidWireType(w) => write!(f, "invalid wire type {w}"),
            Self::LengthPastEnd { length, available } => {
                write!(
                    f,
                    "length {length} runs past the end ({available} bytes left)"
                )
            }
            Self::OverlongLength => f.write_str("length prefix encoded in more than 5 bytes"),
            Self::RecursionLimit(d) => write!(f, "nesting deeper than the recursion limit {d}"),
            Self::UnmatchedGroup(n) => write!(f, "unmatched group for field {n}"),
            Self::BadPackedLength => f.write_str("packed field length does not match its elements"),
            Self::TensorTooLarge { size, limit } => {
                write!(
                    f,
                    "tensor payload of {size} bytes exceeds max_tensor_size_bytes {limit}"
                )
            }
            Self::MetadataLimit { limit } => write!(
                f,
                "parsed metadata would take more than max_metadata_bytes {limit} bytes of memory"
            ),
            Self::TooManyElements { limit } => {
                write!(f, "repeated field with more than {limit} elements")
            }
            Self::OutOfMemory { bytes } => write!(f, "cannot allocate {bytes} bytes"),
        }
    }
}

/// One step of a field path: a field name and, for repeated fields, the element index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSegment {
    /// Field name as in onnx.proto.
    pub field: &'static str,
    /// Index in a repeated field.
    pub index: Option<usize>,
}

/// A decoding error: what, at which absolute byte offset, under which field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// What went wrong.
    pub kind: DecodeErrorKind,
    /// Absolute byte offset in the input where the faulty item starts (or where input ran out).
    pub offset: u64,
    /// Segments from the innermost outwards (reversed when displayed).
    segments_inner_first: Vec<PathSegment>,
    /// The top-level message type being decoded.
    pub message: &'static str,
    /// Outer segments were left off (no memory to record them).
    path_cut: bool,
}

impl DecodeError {
    /// A new error at `offset`, with an empty path.
    pub fn new(kind: DecodeErrorKind, offset: u64) -> Box<Self> {
        let oom = matches!(kind, DecodeErrorKind::OutOfMemory { .. });
        let e = Self {
            kind,
            offset,
            segments_inner_first: Vec::new(),
            message: "",
            path_cut: false,
        };
        if oom {
            reserve::release();
        }
        // (Any error may come when memory is short: another thread may have taken it all.)
        reserve::boxed(e)
    }

    /// Adds an enclosing field to the path (called while unwinding out of nested messages).
    /// When memory runs out, the outer segments are left off (the path then starts with `…`):
    /// an error is reported, never an abort.
    #[cold]
    pub fn at(mut self: Box<Self>, field: &'static str, index: Option<usize>) -> Box<Self> {
        if self.segments_inner_first.try_reserve(1).is_ok() {
            self.segments_inner_first.push(PathSegment { field, index });
        } else {
            self.path_cut = true;
        }
        self
    }

    /// The field path, outermost first, e.g. `graph.initializer[12].dims`.
    pub fn path(&self) -> String {
        let mut out = String::new();
        let _ = self.write_path(&mut out);
        out
    }

    /// Writes [`DecodeError::path`] without building it.
    fn write_path(&self, out: &mut impl fmt::Write) -> fmt::Result {
        if self.path_cut {
            out.write_str("…")?;
        }
        for (n, seg) in self.segments_inner_first.iter().rev().enumerate() {
            if n > 0 || self.path_cut {
                out.write_char('.')?;
            }
            out.write_str(seg.field)?;
            if let Some(i) = seg.index {
                write!(out, "[{i}]")?;
            }
        }
        Ok(())
    }

    /// Path segments, outermost first.
    pub fn segments(&self) -> impl Iterator<Item = &PathSegment> {
        self.segments_inner_first.iter().rev()
    }

    pub(crate) fn set_message(&mut self, message: &'static str) {
        self.message = message;
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = if self.message.is_empty() {
            "message"
        } else {
            self.message
        };
        f.write_str(msg)?;
        if !self.segments_inner_first.is_empty() || self.path_cut {
            f.write_char('.')?;
            self.write_path(f)?;
        }
        write!(f, ": {} at byte {}", self.kind, self.offset)
    }
}

impl std::error::Error for DecodeError {}

/// Every failure of the library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes are not a valid protobuf encoding of the message.
    #[error("parse error: {0}")]
    Decode(Box<DecodeError>),
    /// An I/O operation failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file involved (empty for streams).
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An option has an invalid value.
    #[error("invalid option {name}: {reason}")]
    InvalidOption {
        /// Option name.
        name: &'static str,
        /// Why it is invalid.
        reason: String,
    },
    /// An argument is invalid (not an option).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A configured limit was exceeded.
    #[error("limit exceeded: {0}")]
    LimitExceeded(String),
    /// Memory could not be allocated: a size taken from the input (a file, a tensor, a
    /// serialized model) was reserved fallibly and the allocator refused it (see
    /// [`Error::alloc_failed`]).
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// The operation is not supported.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// External tensor data could not be resolved, read, verified or written.
    #[error("external data of tensor '{tensor}' in {}: {reason}", path.display())]
    ExternalData {
        /// Name of the tensor (empty when the failure concerns a whole file).
        tensor: String,
        /// The external data file involved.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A path was refused by the path-safety rules (absolute, `..`, symbolic link, hard link,
    /// not a regular file, outside the model directory, ...).
    #[error("path refused: {}: {reason}", path.display())]
    PathRefused {
        /// The path as given (e.g. an external data `location`).
        path: PathBuf,
        /// Which rule refused it (and for which tensor).
        reason: String,
    },
    /// Encrypted data is malformed: empty input, bad magic, unsupported version, truncated
    /// header or ciphertext, invalid parameters. The message never contains key material.
    #[error("encryption: {0}")]
    Crypto(String),
    /// Decryption failed authentication: wrong key, or the encrypted data was modified (for
    /// ONNXCRY1, which has no MAC: bad padding or a plaintext that is not a model). The message
    /// says which format and never contains key material.
    #[error("authentication failed (wrong key, or the data was modified or truncated): {0}")]
    Authentication(String),
    /// A parameter dictionary (TVM/CVM params file, `crate::params`) is malformed: bad magic,
    /// non-zero reserved word, unequal counts, non-CPU device, bad ndim or type, byte size that
    /// does not match the shape, truncated or trailing bytes, ...
    #[error("params: {reason} (at byte {offset})")]
    Params {
        /// Byte offset in the params data where the faulty item starts.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
}

impl From<Box<DecodeError>> for Error {
    fn from(e: Box<DecodeError>) -> Self {
        if matches!(e.kind, DecodeErrorKind::OutOfMemory { .. }) {
            return Error::OutOfMemory(e.to_string());
        }
        Error::Decode(e)
    }
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// The error of an allocation of `bytes` bytes for `what` that failed (the one helper for
    /// every fallible reservation; C status `ONNXL_STATUS_OUT_OF_MEMORY`).
    pub fn alloc_failed(bytes: impl fmt::Display, what: &str) -> Self {
        reserve::release();
        Error::OutOfMemory(format!("cannot allocate {bytes} bytes for {what}"))
    }

    /// The error of an operation whose cargo feature this build was compiled without
    /// ([`Error::Unsupported`]; C status `ONNXL_STATUS_UNSUPPORTED`): see [`require_feature`].
    pub fn feature_missing(feature: &str) -> Self {
        Error::Unsupported(format!(
            "this build of onnx_light was compiled without the `{feature}` feature"
        ))
    }

    /// The decoding error, when this is one.
    pub fn as_decode(&self) -> Option<&DecodeError> {
        match self {
            Error::Decode(d) => Some(d),
            _ => None,
        }
    }
}

/// Whether the optional part `name` (`"parallel"`, `"encryption"`, `"dlpack"`, `"params"`,
/// `"prepacked"`, `"text-format"`, `"inline-alignment"`, `"remote"`) is compiled into this build;
/// false for any other name.
pub fn has_feature(name: &str) -> bool {
    const OPTIONAL: [(&str, bool); 8] = [
        ("parallel", cfg!(feature = "parallel")),
        ("encryption", cfg!(feature = "encryption")),
        ("dlpack", cfg!(feature = "dlpack")),
        ("params", cfg!(feature = "params")),
        ("prepacked", cfg!(feature = "prepacked")),
        ("text-format", cfg!(feature = "text-format")),
        ("inline-alignment", cfg!(feature = "inline-alignment")),
        ("remote", cfg!(feature = "remote")),
    ];
    OPTIONAL.iter().any(|&(n, on)| on && n == name)
}

/// `Ok` when the optional part `feature` (`encryption`, `dlpack`, `params`, `prepacked`,
/// `text-format`) is compiled in, else [`Error::feature_missing`]. The entry points of each
/// optional part call it first: without the feature the rest of their body is dead code the
/// compiler drops, while the API (and the C header) stays the same in every build.
#[inline(always)]
pub fn require_feature(enabled: bool, feature: &str) -> Result<()> {
    if enabled {
        Ok(())
    } else {
        Err(Error::feature_missing(feature))
    }
}

/// A vector with room for `n` elements, or [`Error::OutOfMemory`] naming `what` (for sizes
/// taken from input: a failed allocation must be an error, not an abort of the host).
pub fn try_vec_with_capacity<T>(n: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| Error::alloc_failed(n.saturating_mul(std::mem::size_of::<T>()), what))?;
    Ok(v)
}

/// `Box::new(value)`, or the layout the allocator refused (`value` dropped): for boxes whose
/// number comes from input (sub-messages of a parse).
pub(crate) fn try_box<T>(value: T) -> std::result::Result<Box<T>, std::alloc::Layout> {
    let layout = std::alloc::Layout::new::<T>();
    if layout.size() == 0 {
        return Ok(Box::new(value));
    }
    // SAFETY: `layout` has a non-zero size.
    let p = unsafe { std::alloc::alloc(layout) }.cast::<T>();
    if p.is_null() {
        return Err(layout);
    }
    // SAFETY: `p` is fresh memory of `T`'s layout from the global allocator, which is what
    // `Box` owns and frees; it is initialized before the box is made.
    unsafe {
        p.write(value);
        Ok(Box::from_raw(p))
    }
}

/// A deep copy that reports a refused allocation (the layout the allocator refused) instead of
/// aborting the process: the C++ classes' copies throw `std::bad_alloc` with it. Every message
/// type has it; its `Clone` is this, aborting on a refusal as `Clone` allocations always do.
pub trait TryClone: Sized {
    /// A deep copy, or the layout of the allocation that was refused (nothing leaks).
    fn try_clone(&self) -> std::result::Result<Self, std::alloc::Layout>;

    /// Copies `self` into `dst`, which holds the default value (on a refusal, `dst` holds part
    /// of the copy: dropping it frees that part). A message copies each field into its own:
    /// one call and one check per field.
    fn try_clone_into(&self, dst: &mut Self) -> std::result::Result<(), std::alloc::Layout> {
        *dst = self.try_clone()?;
        Ok(())
    }
}

macro_rules! try_clone_by_copy {
    ($($t:ty),*) => {$(
        impl TryClone for $t {
            #[inline]
            fn try_clone(&self) -> std::result::Result<Self, std::alloc::Layout> {
                Ok(*self)
            }
        }
    )*};
}
try_clone_by_copy!(bool, i32, i64, u32, u64, f32, f64);

impl<T: TryClone> TryClone for Option<T> {
    fn try_clone(&self) -> std::result::Result<Self, std::alloc::Layout> {
        match self {
            Some(v) => Ok(Some(v.try_clone()?)),
            None => Ok(None),
        }
    }

    #[inline(never)] // one copy per type: the callers are many (every field of every message)
    fn try_clone_into(&self, dst: &mut Self) -> std::result::Result<(), std::alloc::Layout> {
        if let Some(v) = self {
            *dst = Some(v.try_clone()?);
        }
        Ok(())
    }
}

/// [`TryClone::try_clone`] of a type that copies into a default value with `try_clone_into`.
pub(crate) fn try_clone_via_default<T: TryClone + Default>(
    v: &T,
) -> std::result::Result<T, std::alloc::Layout> {
    let mut out = T::default();
    v.try_clone_into(&mut out)?;
    Ok(out)
}

/// `Clone` through [`TryClone`]: a refused allocation aborts, as in every `Clone`.
#[inline]
pub(crate) fn clone_or_abort<T: TryClone>(v: &T) -> T {
    v.try_clone()
        .unwrap_or_else(|layout| std::alloc::handle_alloc_error(layout))
}

/// `Result` with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Memory held back for reporting a failed allocation. When an allocation sized by the input
/// fails, the process may have no room left even for the error (its message, its field path,
/// the C ABI's copy of it): the reserve is given back to the allocator first, so that reporting
/// succeeds instead of aborting the host. Every operation re-arms it when it starts (the options'
/// `validate`), once the failed one has released what it held.
pub(crate) mod reserve {
    use super::DecodeError;
    use std::alloc::{Layout, alloc, dealloc};
    use std::sync::atomic::{AtomicPtr, Ordering};

    /// The reserve: address space (nothing is written to it, so it takes no memory) for the
    /// allocator to grow by once more. Large enough that allocators map it on its own and give
    /// it back to the system when it is released (glibc from 128 KiB; a smaller block returned
    /// to its heap did not make room for the heap's next growth step).
    const LAYOUT: Layout = match Layout::from_size_align(2 << 20, 16) {
        Ok(l) => l,
        Err(_) => panic!("a valid layout"),
    };

    static HELD: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());

    /// Memory for the errors themselves, for threads that run out while another one already
    /// released the reserve (parallel parses): one per thread that may fail at once.
    static SPARES: [AtomicPtr<u8>; 4] = [const { AtomicPtr::new(std::ptr::null_mut()) }; 4];

    const SPARE: Layout = Layout::new::<DecodeError>();

    /// Takes the reserve and the spares from the allocator when they are not held (a failure
    /// to is not an error: the next operation tries again).
    #[inline]
    pub(crate) fn arm() {
        if HELD.load(Ordering::Relaxed).is_null() {
            arm_slow();
        }
    }

    #[cold]
    fn arm_slow() {
        hold(&HELD, LAYOUT);
        for spare in &SPARES {
            if spare.load(Ordering::Relaxed).is_null() {
                hold(spare, SPARE);
            }
        }
    }

    /// Allocates `layout` into an empty `slot`.
    fn hold(slot: &AtomicPtr<u8>, layout: Layout) {
        // SAFETY: both layouts have a non-zero size.
        let p = unsafe { alloc(layout) };
        if !p.is_null()
            && slot
                .compare_exchange(std::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            // SAFETY: `p` came from `alloc(layout)` above and was not published.
            unsafe { dealloc(p, layout) };
        }
    }

    /// `Box::new(e)`, from a spare when the allocator has no room left.
    pub(crate) fn boxed(e: DecodeError) -> Box<DecodeError> {
        // SAFETY: SPARE has a non-zero size.
        let mut p = unsafe { alloc(SPARE) };
        for spare in &SPARES {
            if p.is_null() {
                p = spare.swap(std::ptr::null_mut(), Ordering::AcqRel);
            }
        }
        if p.is_null() {
            std::alloc::handle_alloc_error(SPARE);
        }
        let p = p.cast::<DecodeError>();
        // SAFETY: `p` is memory of DecodeError's layout from the global allocator (fresh, or a
        // spare allocated so and taken out of its slot by the swap), which is what `Box` owns
        // and frees; it is initialized before the box is made.
        unsafe {
            p.write(e);
            Box::from_raw(p)
        }
    }

    /// Gives the reserve back to the allocator (an allocation just failed).
    #[cold]
    pub(crate) fn release() {
        let p = HELD.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            // SAFETY: a non-null HELD was allocated with LAYOUT by `arm_slow`, and the swap
            // made this call its only owner.
            unsafe { dealloc(p, LAYOUT) };
        }
    }
}
