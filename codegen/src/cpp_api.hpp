// The onnx_light C++ API over the C functions: options, streams (files, memory maps, bytes,
// model + weights pairs, callbacks), pre-packed blobs, loading / saving models and tensors,
// external data, consolidation, encryption, parameter dictionaries and DLPack. Copied into
// include/onnx_light.hpp by the code generator (codegen/src/cpp_classes.rs), after the message
// classes. docs/cpp.md, "The onnx_light API", lists it.
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

/// The bytes of a library buffer as a std::string; frees the buffer.
inline std::string take_buffer(OnnxlBuffer* buffer) {
  std::string out(reinterpret_cast<const char*>(onnxl_buffer_data(buffer)), onnxl_buffer_size(buffer));
  onnxl_buffer_free(buffer);
  return out;
}

inline const uint8_t* bytes_of(std::string_view s) noexcept { return reinterpret_cast<const uint8_t*>(s.data()); }

/// The callables of a callback stream (Stream::Callbacks), owned by the C stream: the release
/// callback deletes them. Exceptions are stopped here: the library sees an error return.
template <class Read, class Write>
struct StreamCallbacks {
  Read read_fn;
  Write write_fn;
  static std::ptrdiff_t read(void* self, uint8_t* buffer, std::size_t capacity) noexcept {
    if constexpr (std::is_same<Read, std::nullptr_t>::value) {
      return -1;
    } else {
      try {
        return static_cast<std::ptrdiff_t>(static_cast<StreamCallbacks*>(self)->read_fn(buffer, capacity));
      } catch (...) {
        return -1;
      }
    }
  }
  static std::ptrdiff_t write(void* self, const uint8_t* data, std::size_t len) noexcept {
    if constexpr (std::is_same<Write, std::nullptr_t>::value) {
      return -1;
    } else {
      try {
        return static_cast<std::ptrdiff_t>(static_cast<StreamCallbacks*>(self)->write_fn(data, len));
      } catch (...) {
        return -1;
      }
    }
  }
  static void release(void* self) noexcept { delete static_cast<StreamCallbacks*>(self); }
};

/// Reads a std::istream for a callback stream: the end of the data is the stream's end of
/// file; a stream that fails before it (e.g. a file that did not open) is an error, as
/// protobuf's ParseFromIstream has it.
struct IstreamReader {
  std::istream* in;
  std::ptrdiff_t operator()(uint8_t* buffer, std::size_t capacity) const {
    in->read(reinterpret_cast<char*>(buffer), static_cast<std::streamsize>(capacity));
    std::streamsize n = in->gcount();
    if (n == 0) return in->eof() && !in->bad() ? 0 : -1;
    return static_cast<std::ptrdiff_t>(n);
  }
};

/// Writes a std::ostream for a callback stream.
struct OstreamWriter {
  std::ostream* out;
  std::ptrdiff_t operator()(const uint8_t* data, std::size_t len) const {
    out->write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(len));
    return out->good() ? static_cast<std::ptrdiff_t>(len) : -1;
  }
};

/// The C encryption format of a cipher name of the C++ library (or of this library's formats).
inline uint32_t encryption_format(std::string_view name) {
  if (name == "AES-256-GCM" || name == "ONNXCRY3") return ONNXL_ENCRYPTION_FORMAT_ONNXCRY3;
  if (name == "ChaCha20-Poly1305" || name == "ONNXCRY2") return ONNXL_ENCRYPTION_FORMAT_ONNXCRY2;
  if (name == "AES-256-CBC" || name == "ONNXCRY1") return ONNXL_ENCRYPTION_FORMAT_ONNXCRY1;
  if (name == "chunked" || name == "ONNXCRYS") return ONNXL_ENCRYPTION_FORMAT_CHUNKED;
  throw Error(ONNXL_STATUS_INVALID_ARGUMENT,
              "ONNXL_STATUS_INVALID_ARGUMENT: unknown encryption '" + std::string(name) +
                  "' (AES-256-GCM, ChaCha20-Poly1305, AES-256-CBC or chunked)");
}
}  // namespace detail

/// Options of the buffers tensor payloads are gathered into (C++ TensorBufferOptions): the C
/// struct OnnxlTensorBufferOptions at its defaults (payloads of at least `raw_data_threshold`
/// bytes, each at a multiple of `alignment`: 0/1 = packed, otherwise a power of two), so it is
/// accepted wherever the C functions take one. ParseOptions and SerializeOptions convert to it.
struct TensorBufferOptions : OnnxlTensorBufferOptions {
  TensorBufferOptions() : OnnxlTensorBufferOptions(onnxl_tensor_buffer_options_default()) {}
  TensorBufferOptions(uint64_t threshold, uint64_t align) : TensorBufferOptions() {
    raw_data_threshold = threshold;
    alignment = align;
  }
  /// A copy of C options (initialized by onnxl_tensor_buffer_options_default()).
  explicit TensorBufferOptions(const OnnxlTensorBufferOptions& c) : OnnxlTensorBufferOptions(c) {}
};

/// Parse options (C++ ParseOptions), initialized to the library defaults.
struct ParseOptions : OnnxlParseOptions {
  ParseOptions() : OnnxlParseOptions(onnxl_parse_options_default()) {}
  /// Its threshold and alignment, as the reference's base class TensorBufferOptions.
  operator TensorBufferOptions() const { return TensorBufferOptions{raw_data_threshold, alignment}; }
};

/// Serialize options (C++ SerializeOptions), initialized to the library defaults: the fields of
/// OnnxlSerializeOptions (raw_data_threshold, alignment, max_serialized_size_bytes,
/// num_threads, skip_raw_data, use_external_data_location, max_external_file_size,
/// inline_alignment: e.g. `opts.inline_alignment = 4096;` before SaveModel aligns every
/// embedded payload in the file, see docs/aligned-models.md).
struct SerializeOptions : OnnxlSerializeOptions {
  SerializeOptions() : OnnxlSerializeOptions(onnxl_serialize_options_default()) {}
  /// Its threshold and alignment, as the reference's base class TensorBufferOptions.
  operator TensorBufferOptions() const { return TensorBufferOptions{raw_data_threshold, alignment}; }
};

/// A stream (OnnxlStream): file, memory-mapped file, caller bytes, memory buffer, model + weights
/// file pair, caller callbacks (std::istream / std::ostream among them). The reference's stream
/// classes (FileStream, MmapFileStream, StringStream, TwoFilesStream, CallbackStream) are
/// Streams made by their constructors.
class Stream {
 public:
  /// A file: parsing reads it whole, serializing replaces it atomically.
  static Stream File(const std::string& path) { return Stream(open(onnxl_stream_open_file, path)); }
  /// A read-only memory map of a file (no_copy payloads keep the mapping alive).
  static Stream Mmap(const std::string& path) { return Stream(open(onnxl_stream_open_mmap, path)); }
  /// Caller bytes, not copied: keep them alive while the stream (and no_copy messages) live.
  static Stream Bytes(const void* data, std::size_t len) { return Stream(open_bytes(data, len)); }
  /// An empty library-owned memory buffer (written by serializing, read by parsing).
  static Stream Memory() {
    OnnxlStream* s = nullptr;
    detail::check(onnxl_stream_new_memory(&s));
    return Stream(s);
  }
  /// A model file and its weights file (C++ TwoFilesStream): parsing reads the model and its
  /// external data from `weights_path` (no_copy maps it once); serializing a ModelProto writes
  /// every tensor of at least raw_data_threshold bytes to `weights_path` (in the model's
  /// directory).
  static Stream ModelWithWeights(const std::string& model_path, const std::string& weights_path) {
    return Stream(open_pair(model_path, weights_path));
  }
  /// A stream over callables: `read(uint8_t* buffer, std::size_t capacity) -> std::ptrdiff_t`
  /// (bytes read, 0 at the end, negative on error) for parsing, `write(const uint8_t* data,
  /// std::size_t len) -> std::ptrdiff_t` (bytes written, negative on error) for serializing;
  /// either may be nullptr. An exception thrown by a callable is caught and the parse or
  /// serialize call fails (ONNXL_STATUS_IO); it never crosses the library.
  template <class Read, class Write>
  static Stream Callbacks(Read read, Write write) {
    return Stream(open_callbacks(std::move(read), std::move(write)));
  }
  /// Parsing reads `in` to its end (the stream must outlive this Stream).
  static Stream FromIstream(std::istream& in) { return Callbacks(detail::IstreamReader{&in}, nullptr); }
  /// Serializing writes to `out` (the stream must outlive this Stream).
  static Stream ToOstream(std::ostream& out) { return Callbacks(nullptr, detail::OstreamWriter{&out}); }

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

 protected:
  explicit Stream(OnnxlStream* p) noexcept : p_(p) {}
  static OnnxlStream* open(OnnxlStatus (*open_path)(const char*, OnnxlStream**), const std::string& path) {
    OnnxlStream* s = nullptr;
    detail::check(open_path(path.c_str(), &s));
    return s;
  }
  static OnnxlStream* open_bytes(const void* data, std::size_t len) {
    OnnxlStream* s = nullptr;
    detail::check(onnxl_stream_from_bytes(static_cast<const uint8_t*>(data), len, &s));
    return s;
  }
  static OnnxlStream* open_pair(const std::string& model_path, const std::string& weights_path) {
    OnnxlStream* s = nullptr;
    detail::check(onnxl_stream_open_model_with_weights(model_path.c_str(), weights_path.c_str(), &s));
    return s;
  }
  template <class Read, class Write>
  static OnnxlStream* open_callbacks(Read read, Write write) {
    using Holder = detail::StreamCallbacks<Read, Write>;
    constexpr bool can_read = !std::is_same<Read, std::nullptr_t>::value;
    constexpr bool can_write = !std::is_same<Write, std::nullptr_t>::value;
    static_assert(can_read || can_write, "a callback stream needs a read or a write callable");
    Holder* holder = new Holder{std::move(read), std::move(write)};
    OnnxlStream* s = nullptr;
    OnnxlStatus status = onnxl_stream_from_callbacks(can_read ? &Holder::read : nullptr,
                                                     can_write ? &Holder::write : nullptr, &Holder::release,
                                                     holder, &s);
    if (status != ONNXL_STATUS_OK) {
      delete holder;  // not handed over: the release callback was not called
      detail::check(status);
    }
    return s;
  }

 private:
  OnnxlStream* p_;
};

/// The reference's stream classes: Streams opened by their constructors.
/// A file (C++ FileStream): parsing reads it whole, serializing replaces it atomically.
class FileStream : public Stream {
 public:
  explicit FileStream(const std::string& path) : Stream(open(onnxl_stream_open_file, path)) {}
};
/// A read-only memory map of a file, mapped now (C++ MmapFileStream).
class MmapFileStream : public Stream {
 public:
  explicit MmapFileStream(const std::string& path) : Stream(open(onnxl_stream_open_mmap, path)) {}
};
/// Caller bytes, not copied (C++ StringStream): keep them alive while the stream and no_copy
/// messages parsed from it live.
class StringStream : public Stream {
 public:
  StringStream(const void* data, std::size_t len) : Stream(open_bytes(data, len)) {}
  explicit StringStream(std::string_view bytes) : Stream(open_bytes(bytes.data(), bytes.size())) {}
};
/// A model file and its weights file (C++ TwoFilesStream); see Stream::ModelWithWeights.
class TwoFilesStream : public Stream {
 public:
  TwoFilesStream(const std::string& file_path, const std::string& weights_file)
      : Stream(open_pair(file_path, weights_file)) {}
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


/// Loads a model file and its external data with explicit external-data options (base
/// directory, a trusted weight file replacing the recorded location, checksums, the key of
/// encrypted weight files, or load_external_data = false to keep the references).
inline ModelProto LoadModel(const std::string& path, const ParseOptions& opts, const ExternalLoadOptions& eopts) {
  OnnxlModelProto* m = nullptr;
  detail::check(onnxl_load_model_with_external_data(path.c_str(), &opts, &eopts, &m));
  return detail::adopt<ModelProto>(m, onnxl_model_proto_free);
}

/// Loads the external data of every tensor of `model` (initializers, sparse initializers,
/// attributes, subgraphs, functions) from files relative to `base_dir` (C++
/// LoadExternalDataForModel). On failure the model is unchanged.
inline void LoadExternalDataForModel(ModelProto& model, const std::string& base_dir,
                                     const ParseOptions& opts = ParseOptions(),
                                     const ExternalLoadOptions& eopts = ExternalLoadOptions()) {
  detail::check(onnxl_load_external_data_for_model(model.c_ptr(), base_dir.c_str(), &opts, &eopts));
}

/// Options of ConvertModelToExternalData: the arguments of onnx's
/// `convert_model_to_external_data`, with its defaults (OnnxlConvertExternalDataOptions).
struct ConvertExternalDataOptions : OnnxlConvertExternalDataOptions {
  ConvertExternalDataOptions() : OnnxlConvertExternalDataOptions(onnxl_convert_external_data_options_default()) {}
};

/// Records in `model` where a save would put each large tensor (location / offset / length, as
/// onnx's convert_model_to_external_data) without writing anything; returns how many tensors
/// were converted.
inline std::size_t ConvertModelToExternalData(ModelProto& model,
                                              const ConvertExternalDataOptions& opts = ConvertExternalDataOptions()) {
  std::size_t n = 0;
  detail::check(onnxl_convert_model_to_external_data(model.c_ptr(), &opts, &n));
  return n;
}

/// Reads the bytes of every external tensor of `model` from files relative to `base_dir` into
/// the model (they stay marked external); returns how many tensors were filled.
inline std::size_t PopulateExternalData(ModelProto& model, const std::string& base_dir,
                                        const ParseOptions& opts = ParseOptions()) {
  std::size_t n = 0;
  detail::check(onnxl_populate_external_data(model.c_ptr(), base_dir.c_str(), &opts, &n));
  return n;
}

/// Drops the bytes of every external tensor of `model` (their references stay); returns how
/// many tensors were cleared.
inline std::size_t ClearExternalData(ModelProto& model) {
  std::size_t n = 0;
  detail::check(onnxl_clear_external_data(model.c_ptr(), &n));
  return n;
}

/// Checks every external reference of `model` relative to `dir` without loading anything
/// (paths, ranges, lengths; checksums and encrypted files per `eopts`); throws on the first
/// problem, with a message listing every problem.
inline void CheckExternalData(const ModelProto& model, const std::string& dir,
                              const ExternalLoadOptions& eopts = ExternalLoadOptions()) {
  detail::check(onnxl_check_external_data_with_options(model.c_ptr(), dir.c_str(), &eopts));
}

/// Moves every tensor payload of at least opts.raw_data_threshold bytes into ONE new buffer
/// (each at a multiple of opts.alignment) that the tensors then borrow from (C++
/// ConsolidateTensorsToBuffer). Returns an owner token of the whole buffer, null (c_ptr() ==
/// nullptr) when no tensor qualified; the tensors keep the buffer alive without it.
inline Owner ConsolidateTensorsToBuffer(ModelProto& model, const TensorBufferOptions& opts = TensorBufferOptions()) {
  const OnnxlOwner* owner = nullptr;
  detail::check(onnxl_consolidate_tensors_to_buffer_with_options(model.c_ptr(), &opts, &owner));
  return Owner(owner);
}

/// Encryption options (OnnxlEncryptionOptions), initialized to the library defaults (ONNXCRY3,
/// AES-256-GCM): format, chunk cipher and size of the chunked format, serialize options.
struct EncryptionOptions : OnnxlEncryptionOptions {
  EncryptionOptions() : OnnxlEncryptionOptions(onnxl_encryption_options_default()) {}
};

namespace detail {
/// Encryption options of a cipher name and serialize options (borrowed: keep `opts` alive).
inline EncryptionOptions encryption_options(const SerializeOptions& opts, std::string_view encryption) {
  EncryptionOptions eo;
  eo.format = encryption_format(encryption);
  eo.serialize_options = &opts;
  return eo;
}
}  // namespace detail

/// Encrypts `model` with the passphrase `key` (any bytes) and writes `file_path` atomically,
/// with every encryption option (format, chunk size and cipher, serialize options).
inline void SaveEncryptedModel(const ModelProto& model, const std::string& file_path, std::string_view key,
                               const EncryptionOptions& opts) {
  detail::check(onnxl_save_encrypted_model(model.c_ptr(), file_path.c_str(), detail::bytes_of(key), key.size(), &opts));
}
/// Serializes `model` per `opts`, encrypts it with the passphrase `key` (any bytes) and writes
/// `file_path` atomically (C++ SaveEncryptedModel). `encryption`: "AES-256-GCM" (ONNXCRY3,
/// the default), "ChaCha20-Poly1305" (ONNXCRY2), "AES-256-CBC" (ONNXCRY1, not authenticated)
/// or "chunked" (ONNXCRYS, any size).
inline void SaveEncryptedModel(const ModelProto& model, const std::string& file_path, std::string_view key,
                               const SerializeOptions& opts = SerializeOptions(),
                               std::string_view encryption = "AES-256-GCM") {
  SaveEncryptedModel(model, file_path, key, detail::encryption_options(opts, encryption));
}
/// SaveEncryptedModel with the default serialize options.
inline void SaveEncryptedModel(const ModelProto& model, const std::string& file_path, std::string_view key,
                               std::string_view encryption) {
  SaveEncryptedModel(model, file_path, key, SerializeOptions(), encryption);
}

/// Decrypts and parses the encrypted model file `file_path` (any format, by its magic) into
/// `model`, replacing its content (C++ LoadEncryptedModel). On failure `model` is unchanged.
inline void LoadEncryptedModel(ModelProto& model, const std::string& file_path, std::string_view key,
                               const ParseOptions& opts = ParseOptions()) {
  OnnxlModelProto* m = nullptr;
  detail::check(onnxl_load_encrypted_model(file_path.c_str(), detail::bytes_of(key), key.size(), &opts, &m));
  model = detail::adopt<ModelProto>(m, onnxl_model_proto_free);
}

/// Encrypts `model` into memory (C++ SaveEncryptedModelToString), with every encryption option.
inline std::string SaveEncryptedModelToString(const ModelProto& model, std::string_view key,
                                              const EncryptionOptions& opts) {
  OnnxlBuffer* out = nullptr;
  detail::check(onnxl_save_encrypted_model_to_string(model.c_ptr(), detail::bytes_of(key), key.size(), &opts, &out));
  return detail::take_buffer(out);
}
/// SaveEncryptedModel into memory (C++ SaveEncryptedModelToString): the encrypted bytes.
inline std::string SaveEncryptedModelToString(const ModelProto& model, std::string_view key,
                                              const SerializeOptions& opts = SerializeOptions(),
                                              std::string_view encryption = "AES-256-GCM") {
  return SaveEncryptedModelToString(model, key, detail::encryption_options(opts, encryption));
}
/// SaveEncryptedModelToString with the default serialize options.
inline std::string SaveEncryptedModelToString(const ModelProto& model, std::string_view key,
                                              std::string_view encryption) {
  return SaveEncryptedModelToString(model, key, SerializeOptions(), encryption);
}

/// Decrypts and parses encrypted bytes into `model`, replacing its content (C++
/// LoadEncryptedModelFromString). The bytes are only read during the call. On failure `model`
/// is unchanged.
inline void LoadEncryptedModelFromString(ModelProto& model, std::string_view encrypted_data, std::string_view key,
                                         const ParseOptions& opts = ParseOptions()) {
  OnnxlModelProto* m = nullptr;
  detail::check(onnxl_load_encrypted_model_from_string(detail::bytes_of(encrypted_data), encrypted_data.size(),
                                                       detail::bytes_of(key), key.size(), &opts, &m));
  model = detail::adopt<ModelProto>(m, onnxl_model_proto_free);
}

/// Encrypts the file `input` (any bytes, e.g. a weight file) into `output` atomically.
inline void EncryptFile(const std::string& input, const std::string& output, std::string_view key,
                        const EncryptionOptions& opts = EncryptionOptions()) {
  detail::check(onnxl_encrypt_file(input.c_str(), output.c_str(), detail::bytes_of(key), key.size(), &opts));
}

/// Decrypts the file `input` (any format) into `output`, replaced only when every byte
/// authenticated.
inline void DecryptFile(const std::string& input, const std::string& output, std::string_view key) {
  detail::check(onnxl_decrypt_file(input.c_str(), output.c_str(), detail::bytes_of(key), key.size()));
}

/// Loads a file holding one serialized TensorProto (e.g. an onnx test-data .pb file).
inline TensorProto LoadTensorProto(const std::string& path, const ParseOptions& opts = ParseOptions()) {
  OnnxlTensorProto* t = nullptr;
  detail::check(onnxl_load_tensor_proto(path.c_str(), &opts, &t));
  return detail::adopt<TensorProto>(t, onnxl_tensor_proto_free);
}

/// Saves a standalone TensorProto to `path` atomically.
inline void SaveTensorProto(const TensorProto& tensor, const std::string& path,
                            const SerializeOptions& opts = SerializeOptions()) {
  detail::check(onnxl_save_tensor_proto(tensor.c_ptr(), path.c_str(), &opts));
}

namespace detail {
/// C strings of a list of names, for the params functions (NULL with 0 = every initializer).
struct NameList {
  std::vector<const char*> ptrs;
  explicit NameList(const std::vector<std::string>& names) {
    ptrs.reserve(names.size());
    for (const std::string& n : names) ptrs.push_back(n.c_str());
  }
  const char* const* data() const noexcept { return ptrs.empty() ? nullptr : ptrs.data(); }
};
}  // namespace detail

/// The initializers of `model` named in `names` (all, in model order, when empty) as a
/// parameter dictionary (TVM/CVM params format; docs/dlpack-params.md).
inline std::string SaveParams(const ModelProto& model, const std::vector<std::string>& names = {}) {
  detail::NameList list(names);
  OnnxlBuffer* out = nullptr;
  detail::check(onnxl_save_params(model.c_ptr(), list.data(), list.ptrs.size(), &out));
  return detail::take_buffer(out);
}

/// SaveParams into the file `path`, atomically.
inline void SaveParamsFile(const ModelProto& model, const std::string& path,
                           const std::vector<std::string>& names = {}) {
  detail::NameList list(names);
  detail::check(onnxl_save_params_file(model.c_ptr(), path.c_str(), list.data(), list.ptrs.size()));
}

/// Loads a parameter dictionary (copied) into `model`'s initializers: same name = replaced
/// data, new names appended. A malformed dictionary changes nothing (ONNXL_STATUS_PARSE).
inline void LoadParamsIntoModel(ModelProto& model, std::string_view params) {
  detail::check(onnxl_load_params_into_model(model.c_ptr(), detail::bytes_of(params), params.size()));
}

/// LoadParamsIntoModel from the file `path`.
inline void LoadParamsFileIntoModel(ModelProto& model, const std::string& path) {
  detail::check(onnxl_load_params_file_into_model(model.c_ptr(), path.c_str()));
}

/// Copy modes of the DLPack export (flags of onnxl_tensor_proto_to_dlpack).
enum class DLPackCopy : uint32_t {
  kNever = 0,                               ///< zero-copy or an error
  kIfNeeded = ONNXL_DLPACK_COPY_IF_NEEDED,  ///< copy typed fields and owner-less borrowed bytes
  kAlways = ONNXL_DLPACK_COPY_ALWAYS,       ///< always a private, writable copy
};

/// A DLPack managed tensor owned by C++: the deleter runs once, when this object dies, unless
/// release() handed it over to a consumer. M is DLManagedTensorVersioned or DLManagedTensor.
template <class M>
class DLPackTensor {
 public:
  explicit DLPackTensor(M* managed = nullptr) noexcept : p_(managed) {}
  DLPackTensor(DLPackTensor&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  DLPackTensor& operator=(DLPackTensor&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  DLPackTensor(const DLPackTensor&) = delete;
  DLPackTensor& operator=(const DLPackTensor&) = delete;
  ~DLPackTensor() {
    if (p_ != nullptr && p_->deleter != nullptr) p_->deleter(p_);
  }
  M* get() const noexcept { return p_; }
  M* operator->() const noexcept { return p_; }
  /// Gives up ownership: the caller (or a consumer) calls the deleter once.
  M* release() noexcept { return std::exchange(p_, nullptr); }

 private:
  M* p_;
};

/// Exports `tensor` as a DLPack 1.1 DLManagedTensorVersioned on the CPU: zero-copy for raw_data
/// (flagged read-only; the bytes stay valid after the tensor and its model are freed), copies
/// per `copy` (flagged IS_COPIED). `tensor` keeps its data.
inline DLPackTensor<DLManagedTensorVersioned> ToDLPackVersioned(TensorProto& tensor, DLPackCopy copy = DLPackCopy::kNever) {
  DLManagedTensorVersioned* out = nullptr;
  detail::check(onnxl_tensor_proto_to_dlpack_versioned(tensor.c_ptr(), static_cast<uint32_t>(copy), &out));
  return DLPackTensor<DLManagedTensorVersioned>(out);
}

/// ToDLPackVersioned as a legacy DLManagedTensor (no flags: never write a zero-copy export).
inline DLPackTensor<DLManagedTensor> ToDLPack(TensorProto& tensor, DLPackCopy copy = DLPackCopy::kNever) {
  DLManagedTensor* out = nullptr;
  detail::check(onnxl_tensor_proto_to_dlpack(tensor.c_ptr(), static_cast<uint32_t>(copy), &out));
  return DLPackTensor<DLManagedTensor>(out);
}

namespace detail {
inline OnnxlStatus from_dlpack(DLManagedTensorVersioned* m, bool borrow, OnnxlTensorProto** out) {
  return onnxl_tensor_proto_from_dlpack_versioned(m, borrow, out);
}
inline OnnxlStatus from_dlpack(DLManagedTensor* m, bool borrow, OnnxlTensorProto** out) {
  return onnxl_tensor_proto_from_dlpack(m, borrow, out);
}
}  // namespace detail

/// A new tensor (dims, data_type, raw_data) from a DLPack CPU tensor (versioned or legacy),
/// which the library takes over on success: copied (the deleter runs now) or, with `borrow`,
/// lent (the deleter runs when the last user of the bytes is gone, on that user's thread). On
/// failure `managed` keeps it.
template <class M>
inline TensorProto FromDLPack(DLPackTensor<M>& managed, bool borrow = false) {
  OnnxlTensorProto* t = nullptr;
  detail::check(detail::from_dlpack(managed.get(), borrow, &t));
  managed.release();
  return detail::adopt<TensorProto>(t, onnxl_tensor_proto_free);
}

/// The reference's destructive export (C++ ReleaseDLPack): `tensor`'s raw_data, without a copy,
/// as a legacy DLManagedTensor the caller owns (call its deleter once); the tensor's raw_data is
/// then cleared. Typed-field data and owner-less borrowed bytes are refused
/// (ONNXL_STATUS_UNSUPPORTED); on failure the tensor is unchanged.
inline DLManagedTensor* ReleaseDLPack(TensorProto& tensor) {
  DLPackTensor<DLManagedTensor> out = ToDLPack(tensor);
  tensor.clear_raw_data();
  return out.release();
}

/// The most threads a num_threads option may ask for.
inline uint32_t MaxThreads() noexcept { return onnxl_max_threads(); }

/// Drops the library's idle worker thread pools (later operations start them again).
inline void ReleaseThreadPools() noexcept { onnxl_release_thread_pools(); }

/// The library version, "MAJOR.MINOR.PATCH" (not `Version`: that is onnx's enum of IR versions).
inline std::string LibraryVersion() { return onnxl_version(); }
