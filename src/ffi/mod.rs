//! The C ABI: a thin layer over the model operations, exported as `onnxl_*` functions and
//! declared in the cbindgen-generated `include/onnx_light.h`.
//!
//! Conventions (modelled on rustls-ffi):
//! - functions are `onnxl_*`, types `Onnxl*`, constants and enumerators `ONNXL_*`;
//! - fallible functions return [`OnnxlStatus`] and write their outputs through out-pointers only
//!   on success; functions returning a pointer return NULL on failure, getters their zero value;
//!   in every case `onnxl_last_error_message()` (thread-local) says what went wrong;
//! - no panic crosses the boundary (every body runs under `catch_unwind`: a panic becomes
//!   `ONNXL_STATUS_PANIC`); every pointer argument is checked for NULL; options pointers may be
//!   NULL, meaning defaults;
//! - messages are opaque handles (`OnnxlModelProto`, `OnnxlTensorProto`, ...): the caller owns
//!   handles from `_new`, load and parse functions and frees them with `_free`; child handles are
//!   borrowed from their parent (see `accessors` for their lifetimes);
//! - tensor bytes come back as (pointer, length) without copying, with an optional retained
//!   [`owner::OnnxlOwner`] token that keeps them alive after the model is freed.
//!
//! Modules: [`status`] (status codes, error mapping, last error), [`panic`] (the panic boundary),
//! [`handle`] (pointer plumbing, views), [`owner`] (owner tokens), [`prepacked`] (pre-packed
//! blobs), [`buffer`] (library-made
//! bytes), [`options`] (options structs), [`model`] (load / save / serialize), [`stream`]
//! (streams), [`accessors`] (generated: handles and per-field accessors of every message),
//! [`cxx`], [`cxx_init`] and [`cxx_messages`] (generated) (the runtime of the C++ message classes) and
//! [`cxx_text`] (protobuf's text format for them), declared in `include/onnx_light.hpp` only.
//!
//! `unsafe` in this crate lives only here: every block carries a `// SAFETY:` comment, and every
//! exported function documents its pointer contract under `# Safety`.

#[rustfmt::skip]
pub mod accessors;
pub mod buffer;
pub mod conversions;
pub mod crypto;
/// cbindgen:ignore
pub mod cxx;
/// cbindgen:ignore
pub mod cxx_init;
/// cbindgen:ignore
#[rustfmt::skip]
pub mod cxx_messages;
/// cbindgen:ignore
pub mod cxx_text;
pub mod dlpack;
pub mod external;
pub(crate) mod fields;
pub mod handle;
pub mod message;
pub mod model;
pub mod options;
pub mod owner;
pub(crate) mod panic;
pub mod params;
pub mod prepacked;
pub mod status;
pub mod stream;

pub use buffer::OnnxlBuffer;
pub use handle::{OnnxlBytes, OnnxlStr};
pub use options::{OnnxlFileLoadMode, OnnxlParseOptions, OnnxlSerializeOptions};
pub use owner::{OnnxlOwner, OnnxlReleaseCallback};
pub use prepacked::OnnxlPrepackedBlobs;
pub use status::OnnxlStatus;
pub use stream::OnnxlStream;

#[cfg(test)]
mod tests;
