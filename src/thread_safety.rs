//! Which types may cross or be shared between threads (docs/hardening.md, "Concurrency and
//! thread safety"). This module holds no code: it states the rules and checks them at compile
//! time.
//!
//! `Send + Sync` (checked below, so a change that loses either fails to compile):
//! - every message type ([`crate::proto::ModelProto`] and the 30 others): shared read-only
//!   access from any number of threads (`Arc<ModelProto>`: walk, read tensors, serialize, save
//!   at once); mutation needs `&mut`, i.e. exclusive access — protobuf's rule;
//! - [`crate::ByteSpan`] (tensor payloads, owned, arena ranges or borrowed with an owner token),
//!   [`crate::ProtoString`], [`crate::UnknownFields`], [`crate::proto::RepeatedField`];
//! - owner tokens ([`crate::Owner`] = `Arc<dyn KeepAlive>`, `KeepAlive: Send + Sync`): clone and
//!   drop them on any thread; the memory goes with the last clone, on that thread;
//! - what owner tokens point at: [`crate::storage::MappedFile`], [`crate::storage::Arena`],
//!   [`crate::external::TensorBuffer`], [`crate::dlpack::OwnedDlpack`] (whose deleter may run on
//!   any thread — a documented requirement on imported tensors);
//! - options, reports, [`crate::Error`], [`crate::crypto::SecretBytes`] and
//!   [`crate::crypto::EncryptionOptions`], the streaming [`crate::crypto::StreamEncryptor`] /
//!   [`crate::crypto::StreamDecryptor`] over `Send + Sync` writers / readers.
//!
//! NOT `Send`, NOT `Sync` (on purpose): the DLPack C structs [`crate::dlpack::DLTensor`],
//! [`crate::dlpack::DLManagedTensor`] and [`crate::dlpack::DLManagedTensorVersioned`] — raw views
//! of someone else's memory with no lifetime, exactly as in C; wrap a managed tensor in
//! [`crate::dlpack::OwnedDlpack`] to move or share it. The checks (doc tests that must fail to
//! compile):
//!
//! ```compile_fail
//! fn send<T: Send>() {}
//! send::<onnx_light::dlpack::DLTensor>();
//! ```
//! ```compile_fail
//! fn sync<T: Sync>() {}
//! sync::<onnx_light::dlpack::DLTensor>();
//! ```
//! ```compile_fail
//! fn send<T: Send>() {}
//! send::<onnx_light::dlpack::DLManagedTensorVersioned>();
//! ```
//! ```compile_fail
//! fn sync<T: Sync>() {}
//! sync::<onnx_light::dlpack::DLManagedTensor>();
//! ```
//! and the positive counterpart, so the negative ones fail for the right reason:
//! ```
//! fn send_sync<T: Send + Sync>() {}
//! send_sync::<onnx_light::dlpack::OwnedDlpack<onnx_light::dlpack::DLManagedTensorVersioned>>();
//! send_sync::<std::sync::Arc<onnx_light::ModelProto>>();
//! // The types named by the negative checks exist (those fail on Send / Sync only).
//! let _ = std::mem::size_of::<onnx_light::dlpack::DLTensor>();
//! let _ = std::mem::size_of::<onnx_light::dlpack::DLManagedTensor>();
//! let _ = std::mem::size_of::<onnx_light::dlpack::DLManagedTensorVersioned>();
//! ```
//!
//! The C ABI states the rule of each handle type in its documentation (`Thread safety:` lines
//! in `include/onnx_light.h`, checked by `tests/integration/generated_files.rs`): message handles
//! as above, `OnnxlOwner` and `OnnxlBuffer` fully thread-safe, `OnnxlStream` one thread at a time,
//! the last error thread-local.

#[allow(dead_code)]
fn assert_send_sync<T: Send + Sync + ?Sized>() {}

/// Compile-time checks: this function is never called; it fails to compile when a type listed
/// here stops being `Send + Sync`.
#[allow(dead_code)]
fn checks() {
    use crate::proto::*;
    macro_rules! send_sync {
        ($($t:ty),* $(,)?) => { $(assert_send_sync::<$t>();)* };
    }
    // Every message type.
    send_sync!(
        AttributeProto,
        ValueInfoProto,
        NodeProto,
        IntIntListEntryProto,
        NodeDeviceConfigurationProto,
        ShardingSpecProto,
        ShardedDimProto,
        SimpleShardedDimProto,
        TrainingInfoProto,
        ModelProto,
        DeviceConfigurationProto,
        StringStringEntryProto,
        TensorAnnotation,
        GraphProto,
        TensorProto,
        TensorProtoSegment,
        SparseTensorProto,
        TensorShapeProto,
        TensorShapeProtoDimension,
        TypeProto,
        TypeProtoTensor,
        TypeProtoSequence,
        TypeProtoMap,
        TypeProtoOptional,
        TypeProtoSparseTensor,
        TypeProtoOpaque,
        OperatorSetIdProto,
        FunctionProto,
        SequenceProto,
        MapProto,
        OptionalProto,
        RepeatedField<NodeProto>,
    );
    // Bytes and owner tokens, and what the tokens hold.
    send_sync!(
        crate::ByteSpan,
        crate::ProtoString,
        crate::UnknownFields,
        crate::Owner,
        dyn crate::bytes::KeepAlive,
        crate::storage::MappedFile,
        crate::storage::Arena,
        crate::external::TensorBuffer,
        crate::dlpack::OwnedDlpack<crate::dlpack::DLManagedTensor>,
        crate::dlpack::OwnedDlpack<crate::dlpack::DLManagedTensorVersioned>,
    );
    // Options, reports, errors, secrets, streams.
    send_sync!(
        crate::ParseOptions,
        crate::LoadOptions,
        crate::SerializeOptions,
        crate::SaveExternalOptions,
        crate::TensorBufferOptions,
        crate::external::SaveReport,
        crate::external::ExternalLoadReport,
        crate::external::ExternalCheckReport,
        crate::external::ExternalDataInfo,
        crate::Error,
        crate::DecodeError,
        crate::crypto::SecretBytes,
        crate::crypto::EncryptionOptions,
        crate::crypto::StreamEncryptor<std::fs::File>,
        crate::crypto::StreamDecryptor<std::fs::File>,
        crate::storage::AtomicFile,
    );
}
