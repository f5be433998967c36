// The onnx_light C++ API over the C functions: options, streams, pre-packed blobs, and loading /
// saving models. Copied into include/onnx_light.hpp by the code generator
// (codegen/src/cpp_classes.rs), after the message classes.
//@CUT@
namespace detail {
/// Moves a message the C API allocated into a C++ value and frees the handle.
template <class M, class C>
M adopt(C* handle, void (*free_handle)(C*)) {
  M out;
  out.Swap(M::from_c(handle));
  free_handle(handle);
  return out;
}
}  // namespace detail

/// Parse options (C++ ParseOptions), initialized to the library defaults.
struct ParseOptions : OnnxlParseOptions {
  ParseOptions() : OnnxlParseOptions(onnxl_parse_options_default()) {}
};

/// Serialize options (C++ SerializeOptions), initialized to the library defaults.
struct SerializeOptions : OnnxlSerializeOptions {
  SerializeOptions() : OnnxlSerializeOptions(onnxl_serialize_options_default()) {}
};

/// A stream (OnnxlStream): file, memory-mapped file, caller bytes, memory buffer.
class Stream {
 public:
  /// A file: parsing reads it whole, serializing replaces it atomically.
  static Stream File(const std::string& path) { return make(onnxl_stream_open_file, path.c_str()); }
  /// A read-only memory map of a file (no_copy payloads keep the mapping alive).
  static Stream Mmap(const std::string& path) { return make(onnxl_stream_open_mmap, path.c_str()); }
  /// Caller bytes, not copied: keep them alive while the stream (and no_copy messages) live.
  static Stream Bytes(const void* data, std::size_t len) {
    OnnxlStream* s = nullptr;
    detail::check(onnxl_stream_from_bytes(static_cast<const uint8_t*>(data), len, &s));
    return Stream(s);
  }
  /// An empty library-owned memory buffer (written by serializing, read by parsing).
  static Stream Memory() {
    OnnxlStream* s = nullptr;
    detail::check(onnxl_stream_new_memory(&s));
    return Stream(s);
  }
  Stream(Stream&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { onnxl_stream_free(p_); }
  /// The bytes of a memory, bytes or mapped stream (valid until it is written or freed).
  std::string_view bytes() const {
    const uint8_t* data = nullptr;
    std::size_t len = 0;
    detail::check(onnxl_stream_bytes(p_, &data, &len));
    return std::string_view(reinterpret_cast<const char*>(data), len);
  }
  OnnxlStream* c_ptr() noexcept { return p_; }

 private:
  explicit Stream(OnnxlStream* p) noexcept : p_(p) {}
  static Stream make(OnnxlStatus (*open)(const char*, OnnxlStream**), const char* path) {
    OnnxlStream* s = nullptr;
    detail::check(open(path, &s));
    return Stream(s);
  }
  OnnxlStream* p_;
};

/// External-data save options (OnnxlExternalDataOptions), initialized to the library defaults.
struct ExternalDataOptions : OnnxlExternalDataOptions {
  ExternalDataOptions() : OnnxlExternalDataOptions(onnxl_external_data_options_default()) {}
};

/// External-data load options (OnnxlExternalLoadOptions), initialized to the library defaults.
struct ExternalLoadOptions : OnnxlExternalLoadOptions {
  ExternalLoadOptions() : OnnxlExternalLoadOptions(onnxl_external_load_options_default()) {}
};

/// ONNX Runtime pre-packed blobs (OnnxlPrepackedBlobs): binary blobs of one or more buffers,
/// keyed by (initializer name, blob key), held beside a model. See docs/prepacked.md.
class PrepackedBlobs {
 public:
  /// An empty store.
  PrepackedBlobs() : p_(detail::check_ptr(onnxl_prepacked_blobs_new())) {}
  /// Takes ownership of a C handle.
  static PrepackedBlobs adopt(OnnxlPrepackedBlobs* p) { return PrepackedBlobs(detail::check_ptr(p), 0); }
  PrepackedBlobs(PrepackedBlobs&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  PrepackedBlobs& operator=(PrepackedBlobs&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  PrepackedBlobs(const PrepackedBlobs&) = delete;
  PrepackedBlobs& operator=(const PrepackedBlobs&) = delete;
  ~PrepackedBlobs() { onnxl_prepacked_blobs_free(p_); }

  /// One blob of the store (views valid until the store changes).
  struct Entry {
    std::string_view initializer;
    std::string_view key;
    std::size_t num_buffers;
  };
  /// Number of blobs.
  std::size_t size() const noexcept { return onnxl_prepacked_blobs_count(p_); }
  /// Blob number i, in (initializer, key) order.
  Entry at(std::size_t i) const {
    OnnxlStr init{}, key{};
    std::size_t n = 0;
    detail::check(onnxl_prepacked_blobs_at(p_, i, &init, &key, &n));
    return Entry{std::string_view(init.data, init.len), std::string_view(key.data, key.len), n};
  }
  /// True when blob `key` of `initializer` exists.
  bool contains(const std::string& initializer, const std::string& key) const {
    std::size_t n = 0;
    return onnxl_prepacked_blobs_buffer_count(p_, initializer.c_str(), key.c_str(), &n) == ONNXL_STATUS_OK;
  }
  /// Number of buffers of blob `key` of `initializer` (throws when there is none).
  std::size_t buffer_count(const std::string& initializer, const std::string& key) const {
    std::size_t n = 0;
    detail::check(onnxl_prepacked_blobs_buffer_count(p_, initializer.c_str(), key.c_str(), &n));
    return n;
  }
  /// Buffer `buffer` of a blob, not copied (valid until the store changes or is freed).
  std::string_view get(const std::string& initializer, const std::string& key, std::size_t buffer = 0) const {
    const uint8_t* data = nullptr;
    std::size_t len = 0;
    detail::check(onnxl_prepacked_blobs_get(p_, initializer.c_str(), key.c_str(), buffer, &data, &len, nullptr));
    return std::string_view(reinterpret_cast<const char*>(data), len);
  }
  /// A retained owner token for a buffer: keeps its bytes valid after the store and the model
  /// are freed (after a no-copy load: the weight file's map, shared with the tensors).
  Owner owner(const std::string& initializer, const std::string& key, std::size_t buffer = 0) const {
    const uint8_t* data = nullptr;
    std::size_t len = 0;
    const OnnxlOwner* o = nullptr;
    detail::check(onnxl_prepacked_blobs_get(p_, initializer.c_str(), key.c_str(), buffer, &data, &len, &o));
    return Owner(o);
  }
  /// Appends a copy of the bytes as the next buffer of blob `key` of `initializer`.
  void add(const std::string& initializer, const std::string& key, std::string_view bytes) {
    detail::check(onnxl_prepacked_blobs_add(p_, initializer.c_str(), key.c_str(),
                                            reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }
  /// Removes blob `key` of `initializer` (throws when there is none).
  void remove(const std::string& initializer, const std::string& key) {
    detail::check(onnxl_prepacked_blobs_remove(p_, initializer.c_str(), key.c_str()));
  }
  const OnnxlPrepackedBlobs* c_ptr() const noexcept { return p_; }
  OnnxlPrepackedBlobs* c_ptr() noexcept { return p_; }

 private:
  PrepackedBlobs(OnnxlPrepackedBlobs* p, int) noexcept : p_(p) {}
  OnnxlPrepackedBlobs* p_;
};

/// Loads a model file (C++ LoadModel).
inline ModelProto LoadModel(const std::string& path, const ParseOptions& opts = ParseOptions()) {
  OnnxlModelProto* m = nullptr;
  detail::check(onnxl_load_model(path.c_str(), &opts, &m));
  return detail::adopt<ModelProto>(m, onnxl_model_proto_free);
}

/// Parses a model from bytes; with opts.no_copy the bytes must outlive the model.
inline ModelProto LoadModelFromString(std::string_view bytes, const ParseOptions& opts = ParseOptions()) {
  OnnxlModelProto* m = nullptr;
  detail::check(onnxl_load_model_from_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &opts, &m));
  return detail::adopt<ModelProto>(m, onnxl_model_proto_free);
}

/// Saves a model atomically (C++ SaveModel).
inline void SaveModel(const ModelProto& model, const std::string& path, const SerializeOptions& opts = SerializeOptions()) {
  detail::check(onnxl_save_model(model.c_ptr(), path.c_str(), &opts));
}

/// Saves a model with its large tensors in external files (onnx's save_as_external_data).
inline void SaveModelWithExternalData(const ModelProto& model, const std::string& path,
                                      const ExternalDataOptions& opts = ExternalDataOptions()) {
  detail::check(onnxl_save_model_with_external_data(model.c_ptr(), path.c_str(), &opts));
}

/// Loads a model file, its external data and the pre-packed blobs recorded beside its tensors;
/// with opts.no_copy the blobs borrow from the weight files' memory maps.
inline std::pair<ModelProto, PrepackedBlobs> LoadModelWithPrepacked(
    const std::string& path, const ParseOptions& opts = ParseOptions(),
    const ExternalLoadOptions& eopts = ExternalLoadOptions()) {
  OnnxlModelProto* m = nullptr;
  OnnxlPrepackedBlobs* b = nullptr;
  detail::check(onnxl_load_model_with_prepacked(path.c_str(), &opts, &eopts, &m, &b));
  return {detail::adopt<ModelProto>(m, onnxl_model_proto_free), PrepackedBlobs::adopt(b)};
}

/// Loads the external data of every tensor of `model` from files relative to `dir` (C++
/// LoadExternalDataForModel) and returns the pre-packed blobs recorded beside its tensors; with
/// opts.no_copy the tensors and blobs borrow from the weight files' memory maps.
inline PrepackedBlobs LoadExternalDataForModelWithPrepacked(
    ModelProto& model, const std::string& dir, const ParseOptions& opts = ParseOptions(),
    const ExternalLoadOptions& eopts = ExternalLoadOptions()) {
  OnnxlPrepackedBlobs* b = nullptr;
  detail::check(onnxl_load_external_data_for_model_with_prepacked(model.c_ptr(), dir.c_str(), &opts, &eopts, &b));
  return PrepackedBlobs::adopt(b);
}

/// Saves a model with external data and its pre-packed blobs, each right after its
/// initializer's bytes, recorded as ONNX Runtime does (prepacked_N entries).
inline void SaveModelWithPrepacked(const ModelProto& model, const PrepackedBlobs& blobs, const std::string& path,
                                   const ExternalDataOptions& opts = ExternalDataOptions()) {
  detail::check(onnxl_save_model_with_prepacked(model.c_ptr(), blobs.c_ptr(), path.c_str(), &opts));
}

/// Parses a model from a stream into `model` (C++ ParseProtoFromStream).
inline void ParseProtoFromStream(ModelProto& model, Stream& stream, const ParseOptions& opts = ParseOptions()) {
  detail::check(onnxl_parse_proto_from_stream(model.c_ptr(), stream.c_ptr(), &opts));
}

/// Serializes a model to a stream (C++ SerializeProtoToStream).
inline void SerializeProtoToStream(const ModelProto& model, Stream& stream, const SerializeOptions& opts = SerializeOptions()) {
  detail::check(onnxl_serialize_proto_to_stream(model.c_ptr(), stream.c_ptr(), &opts));
}

/// Parses a standalone tensor from a stream.
inline void ParseProtoFromStream(TensorProto& tensor, Stream& stream, const ParseOptions& opts = ParseOptions()) {
  detail::check(onnxl_parse_tensor_proto_from_stream(tensor.c_ptr(), stream.c_ptr(), &opts));
}

/// Serializes a standalone tensor to a stream.
inline void SerializeProtoToStream(const TensorProto& tensor, Stream& stream, const SerializeOptions& opts = SerializeOptions()) {
  detail::check(onnxl_serialize_tensor_proto_to_stream(tensor.c_ptr(), stream.c_ptr(), &opts));
}

