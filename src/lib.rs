//! onnx_light: load and save ONNX models without libprotobuf.
//!
//! Layers, bottom up (each uses only the ones before it): [`error`] (the one error type),
//! [`bytes`] (tensor bytes and strings: owned, borrowed, shared), [`wire`] (the protobuf wire
//! format and the [`Message`] trait), [`proto`] (the ONNX messages, generated from one schema
//! table), [`storage`] (files, memory maps, arenas, atomic replacement, thread pools),
//! [`secret`] (passphrases, plaintext buffers), [`codec`] (parse and serialize any message with
//! options), [`crypto`] (encrypted models and files), [`external`] (external data: load, save,
//! split, align, map, verify, consolidate), `remote` (models in object storage and behind
//! HTTP(S): the `remote` feature), [`package`] (a model with its external data, plain
//! or encrypted: [`load_model`] and friends), [`dlpack`] (DLPack export and import),
//! [`params`] (TVM/CVM parameter dictionaries), then the C ABI (`ffi`, private: `include/onnx_light.h` is its interface). The most used items
//! are re-exported here.

/// The Rust examples of the README and the docs, compiled by `cargo test --doc` so that they
/// stay correct (they read files that do not exist here, so they are `no_run`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeQuickStart;
#[cfg(doctest)]
#[doc = include_str!("../docs/rust.md")]
struct RustDocExamples;
#[cfg(doctest)]
#[doc = include_str!("../docs/encryption.md")]
struct EncryptionDocExamples;
#[cfg(doctest)]
#[doc = include_str!("../docs/external-data.md")]
struct ExternalDataDocExamples;
#[cfg(doctest)]
#[doc = include_str!("../docs/prepacked.md")]
struct PrepackedDocExamples;
#[cfg(all(doctest, feature = "remote"))]
#[doc = include_str!("../docs/remote.md")]
struct RemoteDocExamples;
#[cfg(doctest)]
#[doc = include_str!("../docs/aligned-models.md")]
struct AlignedModelsDocExamples;

#[cfg(feature = "global-mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// The layers, bottom up: each module uses only the ones before it (tests/integration/layers.rs
// checks this; docs/design.md describes each one).
pub mod error;

pub mod bytes;

pub mod mem;

pub mod wire;

pub mod proto;

pub mod storage;

pub mod secret;

pub mod codec;

pub mod crypto;

pub mod external;

#[cfg(feature = "remote")]
pub mod remote;

pub mod package;

pub mod dlpack;
pub mod params;

/// The C ABI (`include/onnx_light.h`): `extern "C"` functions exported by the cdylib and
/// staticlib. Rust code uses the crate's API; the module is public only for the crate's own tests.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod ffi;
// Without the hooks the module is private: its constants and re-exports exist for the C header
// (cbindgen reads them from the source), not for Rust code.
#[cfg(not(feature = "test-hooks"))]
#[allow(dead_code, unused_imports)]
mod ffi;

#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod fuzzing;
pub mod thread_safety;

/// The public API holds no memory layout: the message structs' members, their rare-field boxes,
/// inline lists, sub-message boxes and oneof enums are private (each block below fails to
/// compile), and the accessors reach everything (the last one compiles).
///
/// ```compile_fail
/// let t = onnx_light::TensorProto::new();
/// let _ = &t.rare;
/// ```
/// ```compile_fail
/// let t = onnx_light::TensorProto::new();
/// let _ = t.dims.len();
/// ```
/// ```compile_fail
/// let _: Option<&onnx_light::proto::TensorProtoRare> = None;
/// ```
/// ```compile_fail
/// use onnx_light::wire::Rare;
/// ```
/// ```compile_fail
/// let _: onnx_light::InlineVec<i64, 4> = Default::default();
/// ```
/// ```compile_fail
/// let _: Option<onnx_light::proto::MsgBox<onnx_light::GraphProto>> = None;
/// ```
/// ```compile_fail
/// let _: Option<onnx_light::proto::TypeProtoValue> = None;
/// ```
/// ```
/// use onnx_light::{Repeated, TensorProto};
/// use onnx_light::proto::{TypeProto, TypeProtoValueCase};
/// let mut t = TensorProto::new();
/// t.set_dims([1, 2]);
/// t.mutable_dims().push(3);
/// t.set_doc_string("rare");
/// assert_eq!((t.dims().len(), t.doc_string_opt().is_some()), (3, true));
/// let mut ty = TypeProto::new();
/// ty.mutable_sequence_type();
/// assert_eq!(ty.value_case(), Some(TypeProtoValueCase::SequenceType));
/// ```
#[cfg(doctest)]
pub struct PublicApiHasNoRepresentation;

pub use bytes::{ByteSpan, Owner, ProtoString, UnknownFields};
pub use codec::{
    FileLoadMode, ParseOptions, SerializeOptions, TensorBufferOptions, parse_from_bytes,
    parse_from_bytes_unowned, parse_from_reader, parse_from_shared, save_to_file, serialize_into,
    serialize_to_vec, serialize_to_writer,
};
pub use crypto::{
    EncryptionFormat, EncryptionOptions, Passphrase, save_encrypted_model,
    save_encrypted_model_to_bytes,
};
pub use error::{DecodeError, DecodeErrorKind, Error, Result, has_feature};
pub use external::{
    ExternalEncryption, LoadOptions, LoadProgress, PrepackedBlob, PrepackedBlobs,
    SaveExternalOptions, check_external_data, consolidate_tensors_to_buffer,
    load_external_data_for_model, save_model_with_external_data, save_model_with_prepacked,
};
pub use mem::{
    memory_held_for_reuse, memory_reuse_limit, release_memory_held_for_reuse,
    set_memory_reuse_limit,
};
pub use package::{
    load_encrypted_model, load_encrypted_model_from_bytes, load_model, load_model_from_bytes,
    load_model_with_prepacked, parse_from_file, save_model,
};
pub use proto::Message;
pub use proto::{GraphProto, ModelProto, NodeProto, TensorProto};
pub use storage::{max_threads, release_thread_pools};
/// Repeated scalar and string fields, as `mutable_x()` hands them out (the short ones keep
/// their first elements inside the message; that is not part of the type).
///
/// ```
/// use onnx_light::{NodeProto, Repeated, TensorProto};
///
/// let mut t = TensorProto::new();
/// t.set_dims([2, 3]);
/// t.mutable_dims().push(4);
/// assert_eq!(t.dims(), [2, 3, 4]);
///
/// let mut n = NodeProto::new();
/// n.mutable_input().extend(["x".into(), "w".into(), "b".into()]);
/// n.add_input("y");
/// assert_eq!(n.input().len(), 4);
/// n.mutable_input().retain(|s| s != "w");
/// assert_eq!(n.input()[1], "b");
/// ```
pub use wire::Repeated;
