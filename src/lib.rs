//! onnx_light: load and save ONNX models without libprotobuf.
//!
//! Layers (each uses only the ones above it): [`wire`] (protobuf wire format), [`proto`] (the
//! ONNX messages, generated from one schema table), [`io`] (where bytes come from and go to),
//! [`model`] (load / save with options), [`external`] (external data: load, save, split, align,
//! map, verify, consolidate), [`crypto`] (encrypted models and files), [`dlpack`] (DLPack export
//! and import), [`params`] (TVM/CVM parameter dictionaries).

/// The Rust examples of the README and the docs, compiled by `cargo test --doc` so that they
/// stay correct (they read files that do not exist here, so they are `no_run`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeQuickStart;
#[cfg(doctest)]
#[doc = include_str!("../docs/encryption.md")]
struct EncryptionDocExamples;
#[cfg(doctest)]
#[doc = include_str!("../docs/external-data.md")]
struct ExternalDataDocExamples;
#[cfg(doctest)]
#[doc = include_str!("../docs/prepacked.md")]
struct PrepackedDocExamples;

#[cfg(feature = "global-mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod bytes;
pub mod crypto;
pub mod dlpack;
pub mod error;
pub mod external;
pub mod ffi;
#[doc(hidden)]
pub mod fuzzing;
pub mod params;
pub mod proto;
pub mod thread_safety;
pub mod wire;

pub use bytes::{ByteSpan, Owner, ProtoString, UnknownFields};
pub use error::{DecodeError, DecodeErrorKind, Error, Result};
pub use proto::Message;
pub mod io;
pub mod model;
pub mod options;

pub use crypto::{
    EncryptionFormat, EncryptionOptions, Passphrase, load_encrypted_model,
    load_encrypted_model_from_bytes, save_encrypted_model, save_encrypted_model_to_bytes,
};
pub use external::{
    PrepackedBlob, PrepackedBlobs, check_external_data, consolidate_tensors_to_buffer,
    load_external_data_for_model, save_model_with_external_data, save_model_with_prepacked,
};
pub use model::{
    load_model, load_model_from_bytes, load_model_with_prepacked, parse_from_bytes,
    parse_from_bytes_unowned, parse_from_file, parse_from_reader, parse_from_shared,
    release_thread_pools, save_model, save_to_file, serialize_to_vec, serialize_to_writer,
};
pub use options::{
    ExternalEncryption, FileLoadMode, ParseOptions, SaveExternalOptions, SerializeOptions,
    TensorBufferOptions, max_threads,
};
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
pub use proto::InlineVec;
pub use proto::{GraphProto, ModelProto, NodeProto, TensorProto};
