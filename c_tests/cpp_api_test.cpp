// The onnx_light C++ API (include/onnx_light.hpp, after the message classes) against the C
// functions it wraps: each C++ function's result is compared with the C function's on the same
// input (bytes, files, statuses), and its error paths throw onnx_light::Error with the C status.
//
// Usage: cpp_api_test MODEL.onnx TEMP_DIR   (registered in c_tests/CMakeLists.txt)
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "cpp_test_util.h"
#include "onnx_light.hpp"

namespace onnx = onnx_light;

static void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

static bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

// The C serialization of a model handle.
static std::string c_serialize(const OnnxlModelProto* m) {
  OnnxlBuffer* b = nullptr;
  if (onnxl_serialize_model(m, nullptr, &b) != ONNXL_STATUS_OK) return "<serialize failed>";
  std::string out(reinterpret_cast<const char*>(onnxl_buffer_data(b)), onnxl_buffer_size(b));
  onnxl_buffer_free(b);
  return out;
}

// A model loaded by the C function (the reference result of the C++ calls).
struct CModel {
  OnnxlModelProto* m = nullptr;
  CModel() = default;
  explicit CModel(const std::string& path) {
    if (onnxl_load_model(path.c_str(), nullptr, &m) != ONNXL_STATUS_OK) m = nullptr;
  }
  CModel(const CModel&) = delete;
  CModel& operator=(const CModel&) = delete;
  ~CModel() { onnxl_model_proto_free(m); }
};

// Same initializer names and payloads (compared without converting them to std::string).
static bool same_payloads(const onnx::ModelProto& a, const onnx::ModelProto& b) {
  if (a.graph().initializer_size() != b.graph().initializer_size()) return false;
  for (int i = 0; i < a.graph().initializer_size(); ++i) {
    const onnx::TensorProto& x = a.graph().initializer(i);
    const onnx::TensorProto& y = b.graph().initializer(i);
    if (x.name() != y.name() || x.raw_data_view() != y.raw_data_view()) return false;
  }
  return true;
}

static std::string tmp;
static std::string model_path;
static std::string file_bytes;

static void test_consolidate() {
  // The C++ function and the C function on two loads of the same file: same buffer bytes.
  onnx::ModelProto model = onnx::LoadModel(model_path);
  onnx::TensorBufferOptions opts;
  opts.alignment = 64;
  onnx::Owner buffer = onnx::ConsolidateTensorsToBuffer(model, opts);
  CHECK(buffer.c_ptr() != nullptr);
  CModel c(model_path);
  const OnnxlOwner* c_owner = nullptr;
  CHECK(onnxl_consolidate_tensors_to_buffer(c.m, 0, 64, &c_owner) == ONNXL_STATUS_OK);
  const uint8_t* c_data = nullptr;
  std::size_t c_len = 0;
  CHECK(onnxl_owner_data(c_owner, &c_data, &c_len) == ONNXL_STATUS_OK);
  std::string_view bytes = buffer.bytes();
  CHECK(bytes.size() == c_len && std::memcmp(bytes.data(), c_data, c_len) == 0);
  onnxl_owner_release(c_owner);
  // Every initializer now borrows from that buffer, at a multiple of 64 from its start.
  const onnx::GraphProto& g = model.graph();
  CHECK(g.initializer_size() == 4);
  for (int i = 0; i < g.initializer_size(); ++i) {
    const onnx::TensorProto& t = g.initializer(i);
    std::string_view view = t.raw_data_view();  // raw_data() would copy into a std::string
    CHECK(t.raw_data_is_borrowed());
    CHECK(view.data() >= bytes.data() && view.data() + view.size() <= bytes.data() + bytes.size());
    CHECK((view.data() - bytes.data()) % 64 == 0);
  }
  CHECK(model.SerializeAsString() == file_bytes);
  // The tensors keep the buffer alive without the token.
  buffer = onnx::Owner(nullptr);
  CHECK(model.SerializeAsString() == file_bytes);

  // ParseOptions and SerializeOptions are TensorBufferOptions: with the parse default (1024
  // bytes) no initializer of the sample qualifies (the largest has 128 bytes).
  onnx::ModelProto again = onnx::LoadModel(model_path);
  onnx::Owner none = onnx::ConsolidateTensorsToBuffer(again, onnx::ParseOptions());
  CHECK(none.c_ptr() == nullptr);
  CHECK(!again.graph().initializer(0).raw_data_is_borrowed());
  onnx::SerializeOptions so;
  so.raw_data_threshold = 100;
  onnx::Owner some = onnx::ConsolidateTensorsToBuffer(again, so);
  int borrowed = 0;
  for (const auto& t : again.graph().initializer()) borrowed += t.raw_data_is_borrowed() ? 1 : 0;
  CHECK(some.c_ptr() != nullptr && borrowed == 1);  // w1, 128 bytes
  CHECK(again.SerializeAsString() == file_bytes);
  // An alignment that is not a power of two: the C status.
  onnx::TensorBufferOptions bad;
  bad.alignment = 3;
  CHECK(status_of([&] { onnx::ConsolidateTensorsToBuffer(again, bad); }) == ONNXL_STATUS_INVALID_ARGUMENT);
}

static void test_encryption() {
  onnx::ModelProto model = onnx::LoadModel(model_path);
  const std::string key = std::string("pass\0word", 9);  // any bytes, a NUL included
  // Every cipher name of the C++ library, to memory: the magic, and a load back.
  const char* names[] = {"AES-256-GCM", "ChaCha20-Poly1305", "AES-256-CBC", "chunked"};
  const char* magics[] = {"ONNXCRY3", "ONNXCRY2", "ONNXCRY1", "ONNXCRYS"};
  for (int i = 0; i < 4; ++i) {
    std::string blob = onnx::SaveEncryptedModelToString(model, key, names[i]);
    CHECK(blob.compare(0, 8, magics[i]) == 0);
    onnx::ModelProto back;
    back.set_ir_version(99);  // replaced by the load
    onnx::LoadEncryptedModelFromString(back, blob, key);
    CHECK(back.SerializeAsString() == file_bytes);
    if (i == 0) {
      // The C function decrypts what the C++ one wrote.
      OnnxlModelProto* c = nullptr;
      CHECK(onnxl_load_encrypted_model_from_string(reinterpret_cast<const uint8_t*>(blob.data()), blob.size(),
                                                   reinterpret_cast<const uint8_t*>(key.data()), key.size(),
                                                   nullptr, &c) == ONNXL_STATUS_OK);
      CHECK(c_serialize(c) == file_bytes);
      onnxl_model_proto_free(c);
      // Wrong key, modified byte: authentication errors; `back` unchanged.
      CHECK(status_of([&] { onnx::LoadEncryptedModelFromString(back, blob, "wrong"); }) ==
            ONNXL_STATUS_AUTHENTICATION);
      std::string tampered = blob;
      tampered[tampered.size() - 1] = static_cast<char>(tampered[tampered.size() - 1] ^ 1);
      CHECK(status_of([&] { onnx::LoadEncryptedModelFromString(back, tampered, key); }) ==
            ONNXL_STATUS_AUTHENTICATION);
      CHECK(back.SerializeAsString() == file_bytes);
      // The default cipher is AES-256-GCM.
      CHECK(onnx::SaveEncryptedModelToString(model, key).compare(0, 8, "ONNXCRY3") == 0);
    }
  }
  CHECK(status_of([&] { onnx::SaveEncryptedModelToString(model, key, "ROT13"); }) == ONNXL_STATUS_INVALID_ARGUMENT);
  // Serialize options reach the serializer: a size limit below the model's size.
  onnx::SerializeOptions tight;
  tight.max_serialized_size_bytes = 16;
  CHECK(status_of([&] { onnx::SaveEncryptedModelToString(model, key, tight); }) == ONNXL_STATUS_LIMIT_EXCEEDED);

  // To a file, and back; the C loader reads the C++ file and the C++ loader the C file.
  const std::string path = tmp + "/encrypted.onnx";
  onnx::SaveEncryptedModel(model, path, key, "ChaCha20-Poly1305");
  CHECK(read_file(path).compare(0, 8, "ONNXCRY2") == 0);
  onnx::ModelProto loaded;
  onnx::LoadEncryptedModel(loaded, path, key);
  CHECK(loaded.SerializeAsString() == file_bytes);
  OnnxlModelProto* c = nullptr;
  CHECK(onnxl_load_encrypted_model(path.c_str(), reinterpret_cast<const uint8_t*>(key.data()), key.size(), nullptr,
                                   &c) == ONNXL_STATUS_OK);
  CHECK(c_serialize(c) == file_bytes);
  const std::string c_path = tmp + "/encrypted_by_c.onnx";
  CHECK(onnxl_save_encrypted_model(c, c_path.c_str(), reinterpret_cast<const uint8_t*>(key.data()), key.size(),
                                   nullptr) == ONNXL_STATUS_OK);
  onnxl_model_proto_free(c);
  onnx::ModelProto from_c;
  onnx::LoadEncryptedModel(from_c, c_path, key);
  CHECK(from_c.SerializeAsString() == file_bytes);
  // Every option: the chunked format with small chunks.
  onnx::EncryptionOptions eo;
  eo.format = ONNXL_ENCRYPTION_FORMAT_CHUNKED;
  eo.chunk_size = 64;
  onnx::SaveEncryptedModel(model, path, key, eo);
  CHECK(read_file(path).compare(0, 8, "ONNXCRYS") == 0);
  onnx::ParseOptions reject;
  reject.reject_unauthenticated = 1;
  onnx::LoadEncryptedModel(loaded, path, key, reject);
  CHECK(loaded.SerializeAsString() == file_bytes);
  CHECK(status_of([&] { onnx::LoadEncryptedModel(loaded, tmp + "/missing.onnx", key); }) == ONNXL_STATUS_IO);
  // ONNXCRY1 is refused when unauthenticated formats are.
  onnx::SaveEncryptedModel(model, path, key, onnx::SerializeOptions(), "AES-256-CBC");
  CHECK(status_of([&] { onnx::LoadEncryptedModel(loaded, path, key, reject); }) == ONNXL_STATUS_AUTHENTICATION);

  // Files: encrypt and decrypt any bytes.
  const std::string plain = tmp + "/plain.bin", sealed = tmp + "/sealed.bin", opened = tmp + "/opened.bin";
  write_file(plain, std::string(3000, 'q') + "end");
  onnx::EncryptionOptions chunked;
  chunked.format = ONNXL_ENCRYPTION_FORMAT_CHUNKED;
  onnx::EncryptFile(plain, sealed, key, chunked);
  CHECK(read_file(sealed).compare(0, 8, "ONNXCRYS") == 0);
  onnx::DecryptFile(sealed, opened, key);
  CHECK(read_file(opened) == read_file(plain));
  CHECK(status_of([&] { onnx::DecryptFile(sealed, opened, "nope"); }) == ONNXL_STATUS_AUTHENTICATION);
}

static void test_external_data() {
  onnx::ModelProto model = onnx::LoadModel(model_path);
  const std::string dir = tmp + "/ext";
  const std::string path = dir + "/model.onnx";
  CHECK(mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST);
  onnx::ExternalDataOptions eo;
  eo.size_threshold = 0;
  eo.location = "weights.bin";
  eo.checksum = 1;
  onnx::SaveModelWithExternalData(model, path, eo);
  CHECK(file_exists(dir + "/weights.bin"));

  // Loading with external-data options: the references kept, then loaded after the fact.
  onnx::ExternalLoadOptions keep;
  keep.load_external_data = 0;
  onnx::ModelProto lazy = onnx::LoadModel(path, onnx::ParseOptions(), keep);
  const onnx::TensorProto& w1 = lazy.graph().initializer(0);
  CHECK(w1.data_location() == onnx::TensorProto::EXTERNAL);
  CHECK(w1.raw_data().empty() && w1.external_data_size() >= 3);
  onnx::CheckExternalData(lazy, dir);
  CHECK(status_of([&] { onnx::CheckExternalData(lazy, tmp); }) == ONNXL_STATUS_EXTERNAL_DATA);
  CHECK(status_of([&] { onnx::LoadExternalDataForModel(lazy, tmp); }) == ONNXL_STATUS_EXTERNAL_DATA);
  CHECK(lazy.graph().initializer(0).data_location() == onnx::TensorProto::EXTERNAL);  // unchanged
  onnx::ParseOptions no_copy;
  no_copy.no_copy = 1;
  no_copy.raw_data_threshold = 0;
  onnx::LoadExternalDataForModel(lazy, dir, no_copy);
  CHECK(lazy.graph().initializer(0).raw_data_is_borrowed());
  // As a plain load of the saved model (data_location DEFAULT, as the onnx package leaves it).
  const std::string loaded_bytes = onnx::LoadModel(path).SerializeAsString();
  CHECK(lazy.SerializeAsString() == loaded_bytes);
  CHECK(same_payloads(lazy, model));
  // The C function on the same input gives the same model.
  CModel c_lazy;
  {
    OnnxlExternalLoadOptions ck = onnxl_external_load_options_default();
    ck.load_external_data = 0;
    CHECK(onnxl_load_model_with_external_data(path.c_str(), nullptr, &ck, &c_lazy.m) == ONNXL_STATUS_OK);
    CHECK(onnxl_load_external_data_for_model(c_lazy.m, dir.c_str(), nullptr, nullptr) == ONNXL_STATUS_OK);
    CHECK(c_serialize(c_lazy.m) == lazy.SerializeAsString());
  }

  // A trusted weight file replacing the recorded location; checksums verified.
  (void)std::rename((dir + "/weights.bin").c_str(), (dir + "/moved.bin").c_str());
  CHECK(status_of([&] { onnx::LoadModel(path); }) == ONNXL_STATUS_EXTERNAL_DATA);
  onnx::ExternalLoadOptions moved;
  const std::string moved_path = dir + "/moved.bin";
  moved.location = moved_path.c_str();
  moved.verify_checksums = 1;
  CHECK(onnx::LoadModel(path, onnx::ParseOptions(), moved).SerializeAsString() == loaded_bytes);
  // A corrupted weight file fails its checksum.
  std::string weights = read_file(moved_path);
  weights[0] = static_cast<char>(weights[0] ^ 0x55);
  write_file(moved_path, weights);
  CHECK(status_of([&] { onnx::LoadModel(path, onnx::ParseOptions(), moved); }) == ONNXL_STATUS_EXTERNAL_DATA);
  moved.verify_checksums = 0;
  CHECK(!same_payloads(onnx::LoadModel(path, onnx::ParseOptions(), moved), model));
}

static void test_params() {
  onnx::ModelProto model = onnx::LoadModel(model_path);
  // Bytes equal to the C function's, for every initializer and for a chosen list.
  std::string all = onnx::SaveParams(model);
  OnnxlBuffer* c_all = nullptr;
  CHECK(onnxl_save_params(model.c_ptr(), nullptr, 0, &c_all) == ONNXL_STATUS_OK);
  CHECK(all == std::string(reinterpret_cast<const char*>(onnxl_buffer_data(c_all)), onnxl_buffer_size(c_all)));
  onnxl_buffer_free(c_all);
  std::string two = onnx::SaveParams(model, {"b2", "w1"});
  const char* names[] = {"b2", "w1"};
  OnnxlBuffer* c_two = nullptr;
  CHECK(onnxl_save_params(model.c_ptr(), names, 2, &c_two) == ONNXL_STATUS_OK);
  CHECK(two == std::string(reinterpret_cast<const char*>(onnxl_buffer_data(c_two)), onnxl_buffer_size(c_two)));
  onnxl_buffer_free(c_two);
  CHECK(two.size() < all.size());
  // Loaded into an empty model: the initializers, in the dictionary's order.
  onnx::ModelProto fresh;
  onnx::LoadParamsIntoModel(fresh, two);
  CHECK(fresh.graph().initializer_size() == 2);
  CHECK(fresh.graph().initializer(0).name() == "b2" && fresh.graph().initializer(1).name() == "w1");
  CHECK(fresh.graph().initializer(1).raw_data() == model.graph().initializer(0).raw_data());
  CHECK(fresh.graph().initializer(1).dims_size() == 2 && fresh.graph().initializer(1).dims(1) == 8);
  // Files.
  const std::string file = tmp + "/mlp.params";
  onnx::SaveParamsFile(model, file);
  CHECK(read_file(file) == all);
  onnx::ModelProto from_file;
  onnx::LoadParamsFileIntoModel(from_file, file);
  CHECK(from_file.graph().initializer_size() == 4);
  CHECK(onnx::SaveParams(from_file) == all);
  // Errors: an unknown name, a truncated dictionary (nothing changed), a missing file.
  CHECK(status_of([&] { onnx::SaveParams(model, {"nope"}); }) == ONNXL_STATUS_INVALID_ARGUMENT);
  CHECK(status_of([&] { onnx::LoadParamsIntoModel(fresh, std::string_view(all).substr(0, all.size() - 3)); }) ==
        ONNXL_STATUS_PARSE);
  CHECK(fresh.graph().initializer_size() == 2);
  CHECK(status_of([&] { onnx::LoadParamsFileIntoModel(fresh, tmp + "/missing.params"); }) == ONNXL_STATUS_IO);
}

static int dl_deleted = 0;
static void count_deleter(DLManagedTensorVersioned* m) {
  dl_deleted += 1;
  delete[] static_cast<float*>(m->dl_tensor.data);
  delete[] m->dl_tensor.shape;
  delete m;
}

static void test_dlpack() {
  onnx::ModelProto model = onnx::LoadModel(model_path);
  onnx::TensorProto& w2 = *model.mutable_graph()->mutable_initializer(2);  // FLOAT [8, 3]
  const std::string w2_bytes = w2.raw_data();
  {
    // Zero-copy: the tensor's own bytes, read-only, valid after the model is gone.
    auto dl = onnx::ToDLPackVersioned(w2);
    CHECK(dl->dl_tensor.data == static_cast<const void*>(w2.raw_data_view().data()));
    CHECK(dl->dl_tensor.ndim == 2 && dl->dl_tensor.shape[0] == 8 && dl->dl_tensor.shape[1] == 3);
    CHECK(dl->dl_tensor.dtype.code == kDLFloat && dl->dl_tensor.dtype.bits == 32);
    CHECK((dl->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
    CHECK(dl->version.major == 1);
    onnx::ModelProto gone = std::move(model);
    gone.Clear();
    CHECK(std::memcmp(dl->dl_tensor.data, w2_bytes.data(), w2_bytes.size()) == 0);
    // Import: a copy (the deleter runs now) equal to the original tensor's data.
    onnx::TensorProto copy = onnx::FromDLPack(dl);
    CHECK(dl.get() == nullptr);
    CHECK(copy.raw_data() == w2_bytes && copy.data_type() == onnx::TensorProto::FLOAT && copy.dims_size() == 2);
  }
  // Typed fields: refused without a copy flag (the C status), copied with one.
  onnx::TensorProto typed;
  typed.set_data_type(onnx::TensorProto::FLOAT);
  typed.add_dims(2);
  typed.add_float_data(1.5f);
  typed.add_float_data(-2.0f);
  CHECK(status_of([&] { onnx::ToDLPackVersioned(typed); }) == ONNXL_STATUS_UNSUPPORTED);
  {
    auto dl = onnx::ToDLPackVersioned(typed, onnx::DLPackCopy::kIfNeeded);
    CHECK((dl->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0 && (dl->flags & DLPACK_FLAG_BITMASK_READ_ONLY) == 0);
    const float* f = static_cast<const float*>(dl->dl_tensor.data);
    CHECK(f[0] == 1.5f && f[1] == -2.0f);
  }
  // Legacy struct, and a borrowing import of a caller's tensor: its deleter runs once, when the
  // last user of the bytes is gone.
  {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.add_dims(3);
    const float v[3] = {1, 2, 3};
    t.set_raw_data(v, sizeof v);
    auto legacy = onnx::ToDLPack(t);
    CHECK(legacy->dl_tensor.ndim == 1 && legacy->dl_tensor.shape[0] == 3);
    onnx::TensorProto back = onnx::FromDLPack(legacy, false);
    CHECK(back.raw_data() == t.raw_data());
  }
  {
    auto* m = new DLManagedTensorVersioned();
    m->version.major = 1;
    m->deleter = count_deleter;
    m->dl_tensor.data = new float[4]{1, 2, 3, 4};
    m->dl_tensor.device.device_type = kDLCPU;
    m->dl_tensor.ndim = 2;
    m->dl_tensor.shape = new int64_t[2]{2, 2};
    m->dl_tensor.dtype.code = kDLFloat;
    m->dl_tensor.dtype.bits = 32;
    m->dl_tensor.dtype.lanes = 1;
    onnx::DLPackTensor<DLManagedTensorVersioned> producer(m);
    onnx::Owner keep(nullptr);
    {
      onnx::TensorProto borrowed = onnx::FromDLPack(producer, true);
      CHECK(borrowed.raw_data_view().data() == static_cast<const char*>(m->dl_tensor.data));
      keep = borrowed.raw_data_owner();
    }
    CHECK(dl_deleted == 0);
    CHECK(keep.bytes().size() == 16);
    keep = onnx::Owner(nullptr);
    CHECK(dl_deleted == 1);
    // A refused import leaves the producer's tensor with the caller.
    auto* gpu = new DLManagedTensorVersioned();
    gpu->version.major = 1;
    gpu->deleter = count_deleter;
    gpu->dl_tensor.data = new float[1]{0};
    gpu->dl_tensor.device.device_type = kDLCUDA;
    gpu->dl_tensor.ndim = 1;
    gpu->dl_tensor.shape = new int64_t[1]{1};
    gpu->dl_tensor.dtype.code = kDLFloat;
    gpu->dl_tensor.dtype.bits = 32;
    gpu->dl_tensor.dtype.lanes = 1;
    onnx::DLPackTensor<DLManagedTensorVersioned> on_gpu(gpu);
    CHECK(status_of([&] { onnx::FromDLPack(on_gpu); }) == ONNXL_STATUS_UNSUPPORTED);
    CHECK(on_gpu.get() == gpu && dl_deleted == 1);
  }
  CHECK(dl_deleted == 2);
  // The reference's destructive export: the bytes leave the tensor.
  {
    onnx::ModelProto m2 = onnx::LoadModel(model_path);
    onnx::TensorProto* b1 = m2.mutable_graph()->mutable_initializer(1);
    const std::string b1_bytes = b1->raw_data();
    DLManagedTensor* out = onnx::ReleaseDLPack(*b1);
    CHECK(!b1->has_raw_data() && b1->raw_data().empty());
    m2.Clear();
    CHECK(out->dl_tensor.shape[0] == 8 && std::memcmp(out->dl_tensor.data, b1_bytes.data(), b1_bytes.size()) == 0);
    out->deleter(out);
    CHECK(status_of([&] { onnx::ReleaseDLPack(typed); }) == ONNXL_STATUS_UNSUPPORTED);
    CHECK(typed.float_data_size() == 2);
  }
}

static void test_tensor_files() {
  onnx::ModelProto model = onnx::LoadModel(model_path);
  const onnx::TensorProto& w1 = model.graph().initializer(0);
  const std::string path = tmp + "/w1.pb";
  onnx::SaveTensorProto(w1, path);
  CHECK(read_file(path) == w1.SerializeAsString());
  onnx::TensorProto back = onnx::LoadTensorProto(path);
  CHECK(back.SerializeAsString() == w1.SerializeAsString());
  OnnxlTensorProto* c = nullptr;
  CHECK(onnxl_load_tensor_proto(path.c_str(), nullptr, &c) == ONNXL_STATUS_OK);
  CHECK(onnx::TensorProto::from_c(c)->SerializeAsString() == back.SerializeAsString());
  onnxl_tensor_proto_free(c);
  onnx::ParseOptions no_copy;
  no_copy.no_copy = 1;
  no_copy.raw_data_threshold = 0;
  no_copy.file_load_mode = ONNXL_FILE_LOAD_MODE_MMAP;
  no_copy.alignment = 1;  // borrow wherever the payload lies (64, the default, copies misaligned ones)
  onnx::TensorProto mapped = onnx::LoadTensorProto(path, no_copy);
  CHECK(mapped.raw_data_is_borrowed() && mapped.raw_data() == w1.raw_data());
  CHECK(status_of([&] { onnx::LoadTensorProto(tmp + "/missing.pb"); }) == ONNXL_STATUS_IO);
  write_file(tmp + "/bad.pb", "\x0a\x05xy");
  CHECK(status_of([&] { onnx::LoadTensorProto(tmp + "/bad.pb"); }) == ONNXL_STATUS_PARSE);
  onnx::SerializeOptions tight;
  tight.max_serialized_size_bytes = 8;
  CHECK(status_of([&] { onnx::SaveTensorProto(w1, path, tight); }) == ONNXL_STATUS_LIMIT_EXCEEDED);
  CHECK(read_file(path) == w1.SerializeAsString());  // the failed save left the file
}

static void test_streams() {
  onnx::ModelProto model = onnx::LoadModel(model_path);
  // Model + weights pair: the weights go to their own file; read back, no-copy.
  const std::string dir = tmp + "/pair";
  CHECK(mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST);
  {
    onnx::Stream pair = onnx::TwoFilesStream(dir + "/m.onnx", dir + "/m.weights");
    onnx::SerializeOptions so;
    so.raw_data_threshold = 0;
    onnx::SerializeProtoToStream(model, pair, so);
  }
  CHECK(file_exists(dir + "/m.weights") && read_file(dir + "/m.weights").size() >= 268);
  CHECK(read_file(dir + "/m.onnx").size() < file_bytes.size());
  {
    onnx::TwoFilesStream pair(dir + "/m.onnx", dir + "/m.weights");
    onnx::ParseOptions po;
    po.no_copy = 1;
    po.raw_data_threshold = 0;
    onnx::ModelProto back;
    onnx::ParseProtoFromStream(back, pair, po);
    CHECK(same_payloads(back, model));
    CHECK(back.graph().initializer(0).raw_data_is_borrowed());
    CHECK(back.graph().initializer(0).data_location() != onnx::TensorProto::EXTERNAL);
    // The same files through the C stream.
    OnnxlStream* cs = nullptr;
    CHECK(onnxl_stream_open_model_with_weights((dir + "/m.onnx").c_str(), (dir + "/m.weights").c_str(), &cs) ==
          ONNXL_STATUS_OK);
    OnnxlModelProto* cm = onnxl_model_proto_new();
    CHECK(onnxl_parse_proto_from_stream(cm, cs, nullptr) == ONNXL_STATUS_OK);
    CHECK(c_serialize(cm) == back.SerializeAsString());
    onnxl_model_proto_free(cm);
    onnxl_stream_free(cs);
  }
  // Callbacks: short writes and reads of a few bytes at a time.
  std::string sink;
  int released = 0;
  {
    onnx::Stream out = onnx::Stream::Callbacks(nullptr, [&sink](const uint8_t* data, std::size_t len) {
      std::size_t n = len < 7 ? len : 7;
      sink.append(reinterpret_cast<const char*>(data), n);
      return static_cast<std::ptrdiff_t>(n);
    });
    onnx::SerializeProtoToStream(model, out);
  }
  CHECK(sink == file_bytes);
  {
    struct Reader {
      const std::string* src;
      std::size_t pos;
      int* released;
      Reader(const std::string* s, int* r) : src(s), pos(0), released(r) {}
      Reader(Reader&& o) noexcept : src(o.src), pos(o.pos), released(std::exchange(o.released, nullptr)) {}
      ~Reader() {
        if (released != nullptr) *released += 1;
      }
      std::ptrdiff_t operator()(uint8_t* buffer, std::size_t capacity) {
        std::size_t n = std::min<std::size_t>({capacity, 5, src->size() - pos});
        std::memcpy(buffer, src->data() + pos, n);
        pos += n;
        return static_cast<std::ptrdiff_t>(n);
      }
    };
    onnx::Stream in = onnx::Stream::Callbacks(Reader(&sink, &released), nullptr);
    onnx::ModelProto back;
    onnx::ParseProtoFromStream(back, in);
    CHECK(back.SerializeAsString() == file_bytes);
    CHECK(released == 0);
    // Writing to a callback stream without a write callable: the C status.
    CHECK(status_of([&] { onnx::SerializeProtoToStream(model, in); }) == ONNXL_STATUS_IO);
  }
  CHECK(released == 1);  // the callables are destroyed with the stream, once
  // A callable that throws: the exception stops at the boundary, the call fails with IO.
  {
    onnx::Stream failing = onnx::Stream::Callbacks(nullptr, [](const uint8_t*, std::size_t) -> std::ptrdiff_t {
      throw std::runtime_error("disk full");
    });
    CHECK(status_of([&] { onnx::SerializeProtoToStream(model, failing); }) == ONNXL_STATUS_IO);
    onnx::Stream negative = onnx::Stream::Callbacks([](uint8_t*, std::size_t) { return std::ptrdiff_t(-1); }, nullptr);
    onnx::ModelProto untouched;
    untouched.set_producer_name("kept");
    CHECK(status_of([&] { onnx::ParseProtoFromStream(untouched, negative); }) == ONNXL_STATUS_IO);
    CHECK(untouched.producer_name() == "kept");
  }
  // std::istream / std::ostream.
  {
    std::ostringstream os;
    onnx::Stream out = onnx::Stream::ToOstream(os);
    onnx::SerializeProtoToStream(model.graph().initializer(0), out);
    CHECK(os.str() == model.graph().initializer(0).SerializeAsString());
    std::ifstream file(model_path, std::ios::binary);
    onnx::Stream in = onnx::Stream::FromIstream(file);
    onnx::ModelProto back;
    onnx::ParseProtoFromStream(back, in);
    CHECK(back.SerializeAsString() == file_bytes);
    // A stream that fails before its end is an error, not an empty model.
    std::ifstream missing(tmp + "/missing.onnx", std::ios::binary);
    onnx::Stream bad = onnx::Stream::FromIstream(missing);
    CHECK(status_of([&] { onnx::ParseProtoFromStream(back, bad); }) == ONNXL_STATUS_IO);
    CHECK(back.SerializeAsString() == file_bytes);
    // An empty stream at its end is an empty model (as protobuf parses empty input).
    std::istringstream empty("");
    onnx::Stream at_end = onnx::Stream::FromIstream(empty);
    onnx::ParseProtoFromStream(back, at_end);
    CHECK(back.ByteSizeLong() == 0);
  }
  // The reference's stream classes are Streams.
  {
    const std::string f = tmp + "/stream_classes.onnx";
    onnx::FileStream fs(f);
    onnx::SerializeProtoToStream(model, fs);
    CHECK(read_file(f) == file_bytes);
    onnx::MmapFileStream ms(f);
    CHECK(ms.bytes() == file_bytes);
    onnx::StringStream ss(file_bytes.data(), file_bytes.size());
    onnx::ModelProto back;
    onnx::ParseProtoFromStream(back, ss);
    CHECK(back.SerializeAsString() == file_bytes);
    CHECK(status_of([&] { onnx::MmapFileStream missing(tmp + "/missing.onnx"); }) == ONNXL_STATUS_IO);
  }
}

// ref_x(), the C++ onnx_light library's accessor of the field itself.
static void test_ref_accessors() {
  onnx::ModelProto model = onnx::LoadModel(model_path);
  const onnx::ModelProto& cmodel = model;
  CHECK(&cmodel.ref_graph() == &model.graph());
  CHECK(cmodel.ref_ir_version() == model.ir_version() && model.ref_ir_version() == 8);
  onnx::NodeProto& node = model.ref_graph().ref_node()[0];
  CHECK(&node == &model.graph().node(0));
  CHECK(&node.ref_op_type() == &node.op_type());
  node.ref_op_type() = "Gemm";  // writes the field
  CHECK(model.graph().node(0).op_type() == "Gemm");
  onnx::TensorProto& t = model.ref_graph().ref_initializer()[0];
  CHECK(t.ref_dims().size() == 2 && t.ref_dims()[1] == 8);
  t.ref_dims()[1] = 9;
  CHECK(model.graph().initializer(0).dims(1) == 9);
  CHECK(t.ref_data_type() == onnx::TensorProto::FLOAT);
  // Mutable ref_x() of an unset field sets it, as mutable_x() does; the const one does not.
  onnx::ModelProto empty;
  const onnx::ModelProto& cempty = empty;
  CHECK(cempty.ref_doc_string().empty() && !empty.has_doc_string());
  empty.ref_doc_string() += "doc";
  CHECK(empty.has_doc_string() && empty.doc_string() == "doc");
  CHECK(!cempty.has_graph() && cempty.ref_graph().node_size() == 0 && !empty.has_graph());
  empty.ref_graph().set_name("g");
  CHECK(empty.has_graph() && empty.graph().name() == "g");
  empty.ref_opset_import().Add()->set_version(21);
  CHECK(empty.opset_import_size() == 1 && empty.opset_import(0).version() == 21);
  onnx::AttributeProto a;
  a.ref_strings().Add()->assign("s");
  CHECK(a.strings_size() == 1 && a.ref_strings()[0] == "s");
  a.ref_ref_attr_name() = "outer";  // field ref_attr_name
  CHECK(a.ref_attr_name() == "outer");
}

static void test_options_and_misc() {
  onnx::ModelProto model = onnx::LoadModel(model_path);
  // The option structs start at the C defaults.
  OnnxlParseOptions pd = onnxl_parse_options_default();
  onnx::ParseOptions po;
  CHECK(std::memcmp(static_cast<const OnnxlParseOptions*>(&po), &pd, sizeof pd) == 0);
  OnnxlSerializeOptions sd = onnxl_serialize_options_default();
  onnx::SerializeOptions so;
  CHECK(std::memcmp(static_cast<const OnnxlSerializeOptions*>(&so), &sd, sizeof sd) == 0);
  CHECK(so.raw_data_threshold == 64 && po.raw_data_threshold == 1024);
  onnx::TensorBufferOptions tb = so;
  CHECK(tb.raw_data_threshold == 64 && tb.alignment == 0);
  onnx::TensorBufferOptions tb0;
  CHECK(tb0.raw_data_threshold == 0 && tb0.alignment == 0);
  // SerializeOptions fields reach the C function.
  so.num_threads = 2;
  onnx::SaveModel(model, tmp + "/threads.onnx", so);
  CHECK(read_file(tmp + "/threads.onnx") == file_bytes);
  so.num_threads = 0;
  CHECK(status_of([&] { onnx::SaveModel(model, tmp + "/threads.onnx", so); }) == ONNXL_STATUS_INVALID_ARGUMENT);
  // ParseOptions.skip_raw_data: the structure without the payloads.
  po.skip_raw_data = 1;
  po.raw_data_threshold = 64;
  onnx::ModelProto skeleton = onnx::LoadModel(model_path, po);
  CHECK(skeleton.graph().initializer(0).raw_data().empty());   // w1, 128 bytes: dropped
  CHECK(skeleton.graph().initializer(3).raw_data().size() == 12);  // b2, kept
  // SerializeOptions has the C++ library's skip_raw_data, use_external_data_location and
  // max_external_file_size (defaults 0); skip_raw_data reaches the C function and writes what
  // the skipping parse above read.
  onnx::SerializeOptions skip;
  CHECK(skip.skip_raw_data == 0 && skip.use_external_data_location == 0 && skip.max_external_file_size == 0);
  skip.skip_raw_data = 1;
  onnx::SaveModel(model, tmp + "/skip.onnx", skip);
  OnnxlBuffer* cb = nullptr;
  CHECK(onnxl_serialize_model(model.c_ptr(), &skip, &cb) == ONNXL_STATUS_OK);
  std::string c_bytes(reinterpret_cast<const char*>(onnxl_buffer_data(cb)), onnxl_buffer_size(cb));
  onnxl_buffer_free(cb);
  CHECK(read_file(tmp + "/skip.onnx") == c_bytes && c_bytes == skeleton.SerializeAsString());
  CHECK(model.SerializeAsString() == file_bytes);  // the model keeps its bytes
  skip.skip_raw_data = 2;
  CHECK(status_of([&] { onnx::SaveModel(model, tmp + "/skip.onnx", skip); }) == ONNXL_STATUS_INVALID_ARGUMENT);
  // TensorBufferOptions is OnnxlTensorBufferOptions at its defaults, passed as is to the C
  // function; (threshold, alignment) sets both.
  OnnxlTensorBufferOptions bd = onnxl_tensor_buffer_options_default();
  CHECK(std::memcmp(static_cast<const OnnxlTensorBufferOptions*>(&tb0), &bd, sizeof bd) == 0);
  onnx::TensorBufferOptions tb2(100, 64);
  CHECK(tb2.struct_size == sizeof(OnnxlTensorBufferOptions) && tb2.raw_data_threshold == 100 && tb2.alignment == 64);
  onnx::ModelProto consolidated = onnx::LoadModel(model_path);
  onnx::Owner one = onnx::ConsolidateTensorsToBuffer(consolidated, tb2);
  CHECK(one.c_ptr() != nullptr && one.bytes().size() == 128);  // w1 only
  CHECK(consolidated.graph().initializer(0).raw_data_is_borrowed());
  CHECK(consolidated.SerializeAsString() == file_bytes);
  const OnnxlTensorBufferOptions& as_c = tb2;
  onnx::TensorBufferOptions from_c(as_c);
  CHECK(from_c.raw_data_threshold == 100 && from_c.alignment == 64);
  CHECK(onnx::LibraryVersion() == onnxl_version());
  CHECK(onnx::MaxThreads() >= 16);
  onnx::ReleaseThreadPools();
}

// The in-memory external-data conversions: the same result as the C functions they wrap.
static void test_external_conversions() {
  onnx::ModelProto base;
  base.set_ir_version(8);
  onnx::TensorProto* t = base.mutable_graph()->add_initializer();
  t->set_name("big");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(1024);
  t->set_raw_data(std::string(4096, '\x5a'));
  onnx::TensorProto* small = base.mutable_graph()->add_initializer();
  small->set_name("small");
  small->set_data_type(onnx::TensorProto::FLOAT);
  small->add_dims(1);
  small->set_raw_data(std::string(4, '\x01'));

  onnx::ConvertExternalDataOptions opts;
  opts.location = "weights.bin";
  opts.size_threshold = 1024;
  onnx::ModelProto cpp = base;
  const std::size_t converted = onnx::ConvertModelToExternalData(cpp, opts);
  onnx::ModelProto c = base;
  std::size_t c_converted = 0;
  CHECK(onnxl_convert_model_to_external_data(c.c_ptr(), &opts, &c_converted) == ONNXL_STATUS_OK);
  CHECK(converted == 1 && c_converted == 1);
  CHECK(cpp.SerializeAsString() == c.SerializeAsString());
  CHECK(cpp.graph().initializer(0).data_location() == onnx::TensorProto::EXTERNAL);
  CHECK(cpp.graph().initializer(1).data_location() != onnx::TensorProto::EXTERNAL);

  std::size_t c_cleared = 0;
  CHECK(onnx::ClearExternalData(cpp) == 1);
  CHECK(onnxl_clear_external_data(c.c_ptr(), &c_cleared) == ONNXL_STATUS_OK && c_cleared == 1);
  CHECK(cpp.SerializeAsString() == c.SerializeAsString());
  CHECK(cpp.graph().initializer(0).raw_data_view().empty());

  // Populate from a file holding the bytes where the conversion placed them.
  const onnx::TensorProto& ext = cpp.graph().initializer(0);
  std::size_t offset = 0;
  for (const auto& e : ext.external_data()) {
    if (e.key() == "offset") offset = static_cast<std::size_t>(std::stoull(e.value()));
  }
  std::string file(offset, '\0');
  file += std::string(4096, '\x5a');
  write_file(tmp + "/weights.bin", file);
  CHECK(onnx::PopulateExternalData(cpp, tmp) == 1);
  CHECK(cpp.graph().initializer(0).raw_data_view() == std::string(4096, '\x5a'));
  bool thrown = false;
  try {
    onnx::PopulateExternalData(c, tmp + "/does-not-exist");
  } catch (const onnx::Error&) {
    thrown = true;
  }
  CHECK(thrown);
}

/* The copies under an address-space limit run in the plain and Valgrind builds of this test:
 * AddressSanitizer's allocator reports running out of memory as an error instead of failing the
 * allocation, and reserves terabytes of shadow address space. */
#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
#define ONNXL_TEST_COPY_OUT_OF_MEMORY 1
#include <sys/resource.h>

/* The process's address space now (VmSize), in bytes. */
static rlim_t address_space_now() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmSize:", 0) == 0) return static_cast<rlim_t>(std::stoull(line.substr(7))) << 10;
  return 0;
}

/* Copies that run out of memory throw std::bad_alloc (as protobuf's do) and leave the
 * destination unchanged: a model holding a 64 MiB payload copied (copy construction, CopyFrom,
 * MergeFrom, a copy added to a repeated field) with 16 MiB of address space left. */
static void test_copy_out_of_memory() {
  onnx::ModelProto m;
  m.set_producer_name("big");
  m.mutable_graph()->add_initializer()->set_raw_data(std::string(64u << 20, 'w'));
  onnx::ModelProto dst;
  dst.set_producer_name("kept");
  struct rlimit old;
  CHECK(getrlimit(RLIMIT_AS, &old) == 0);
  struct rlimit tight = old;
  tight.rlim_cur = address_space_now() + (16u << 20);
  CHECK(setrlimit(RLIMIT_AS, &tight) == 0);
  bool thrown = false;
  try {
    onnx::ModelProto copy(m);
  } catch (const std::bad_alloc&) {
    thrown = true;
  }
  CHECK(thrown);
  thrown = false;
  try {
    dst.CopyFrom(m);
  } catch (const std::bad_alloc&) {
    thrown = true;
  }
  CHECK(thrown);
  thrown = false;
  try {
    dst.MergeFrom(m);
  } catch (const std::bad_alloc&) {
    thrown = true;
  }
  CHECK(thrown);
  onnx::GraphProto graph;
  thrown = false;
  try {
    graph.mutable_initializer()->Add(m.graph().initializer(0));
  } catch (const std::bad_alloc&) {
    thrown = true;
  }
  CHECK(thrown);
  CHECK(setrlimit(RLIMIT_AS, &old) == 0);
  CHECK(graph.initializer_size() == 0);
  CHECK(dst.producer_name() == "kept" && dst.graph().initializer_size() == 0);
  dst.CopyFrom(m);
  CHECK(dst.SerializeAsString() == m.SerializeAsString());
  onnx::ModelProto copy(m);
  CHECK(copy.graph().initializer(0).raw_data().size() == (64u << 20));
}
#endif

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL.onnx TEMP_DIR\n", argv[0]);
    return 2;
  }
  model_path = argv[1];
  tmp = argv[2];
  file_bytes = read_file(model_path);
  CHECK(!file_bytes.empty());
  test_consolidate();
  test_encryption();
  test_external_data();
  test_params();
  test_dlpack();
  test_tensor_files();
  test_streams();
  test_ref_accessors();
  test_options_and_misc();
  test_external_conversions();
#ifdef ONNXL_TEST_COPY_OUT_OF_MEMORY
  test_copy_out_of_memory();
#endif
  if (failures != 0) {
    std::fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("cpp_api_test: all checks passed\n");
  return 0;
}
