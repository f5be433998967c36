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

pub use bytes::{ByteSpan, Owner, ProtoString, UnknownFields};
pub use codec::{
    FileLoadMode, LoadProgress, ParseOptions, SerializeOptions, TensorBufferOptions,
    parse_from_bytes, parse_from_bytes_unowned, parse_from_reader, parse_from_shared, save_to_file,
    serialize_into, serialize_to_vec, serialize_to_writer,
};
pub use crypto::{
    EncryptionFormat, EncryptionOptions, Passphrase, save_encrypted_model,
    save_encrypted_model_to_bytes,
};
pub use error::{DecodeError, DecodeErrorKind, Error, Result, has_feature};
pub use external::{
    ExternalEncryption, PrepackedBlob, PrepackedBlobs, SaveExternalOptions, check_external_data,
    consolidate_tensors_to_buffer, load_external_data_for_model, save_model_with_external_data,
    save_model_with_prepacked,
};
pub use package::{
    load_encrypted_model, load_encrypted_model_from_bytes, load_model, load_model_from_bytes,
    load_model_with_prepacked, parse_from_file, save_model,
};
pub use proto::Message;
pub use proto::{GraphProto, ModelProto, NodeProto, TensorProto};
pub use storage::{max_threads, release_thread_pools};
/// The list type of repeated scalar and string fields; the short ones (`NodeProto.input`/`output`,
/// `TensorProto.dims`, `AttributeProto.ints`) keep their first elements inline.
///
/// ```
/// use onnx_light::{NodeProto, TensorProto, inline_vec};
///
/// let mut t = TensorProto::new();
/// t.dims = inline_vec![2, 3];
/// t.dims.push(4);
/// assert_eq!(t.dims[..], [2, 3, 4]);
/// t.dims = vec![5].into();
/// assert_eq!(t.dims.as_slice(), &[5]);
///
/// let mut n = NodeProto::new();
/// n.input.extend(["x".into(), "w".into(), "b".into()]); // the third one moves to the heap
/// assert_eq!(n.input.len(), 3);
/// assert!(n.input.spilled());
/// ```
pub use wire::InlineVec;
/// The box of a sub-message field (`Option<MsgBox<M>>`), used as `Box` is; a parse cuts it from
/// its metadata blocks instead of allocating it.
///
/// ```
/// use onnx_light::{GraphProto, Message, ModelProto, MsgBox, ParseOptions};
///
/// let mut m = ModelProto::new();
/// m.graph = Some(MsgBox::new(GraphProto::new()));
/// m.graph.as_mut().unwrap().set_name("g");
/// let bytes = m.serialize_to_vec();
///
/// let mut parsed: ModelProto = onnx_light::parse_from_bytes(&bytes, &ParseOptions::default())?;
/// let graph = parsed.graph.take().unwrap();
/// assert!(MsgBox::in_block(&graph)); // cut from the parse's blocks
/// drop(parsed); // the graph keeps its block alive
/// assert_eq!(graph.name(), "g");
/// let owned: GraphProto = MsgBox::into_inner(graph);
/// assert_eq!(owned.name(), "g");
/// # Ok::<(), onnx_light::Error>(())
/// ```
pub use wire::MsgBox;
pub use wire::{
    memory_held_for_reuse, memory_reuse_limit, release_memory_held_for_reuse,
    set_memory_reuse_limit,
};
