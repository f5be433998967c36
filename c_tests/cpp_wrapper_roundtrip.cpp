// Round-trips a model through the C++ wrapper (include/onnx_light.hpp) over the C ABI:
// load, walk, serialize byte-identically, copy, edit, build from scratch, streams, owner tokens
// outliving the model, lent memory, and the error paths (exceptions carrying the status).
//
// Usage: cpp_wrapper_roundtrip MODEL.onnx TEMP_DIR   (run by scripts/test.d/10-c-header.sh)
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "cpp_test_util.h"
#include "onnx_light.hpp"

namespace onnx = onnx_light;

static int released = 0;
static void release_cb(void* user_data) {
  released += 1;
  delete static_cast<std::vector<uint8_t>*>(user_data);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL.onnx TEMP_DIR\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const std::string tmp = argv[2];
  const std::string file_bytes = read_file(path);
  CHECK(!file_bytes.empty());

  // Load and walk, protobuf style.
  onnx::ModelProto model = onnx::LoadModel(path);
  CHECK(model.ir_version() == 8);
  CHECK(model.has_graph());
  const onnx::GraphProto& graph = model.graph();
  CHECK(graph.name() == "mlp");
  CHECK(graph.node_size() == 6);
  int matmuls = 0;
  for (const auto& node : graph.node()) {
    if (node.op_type() == "MatMul") {
      matmuls += 1;
      CHECK(node.input_size() == 2);
    }
  }
  CHECK(matmuls == 2);
  CHECK(graph.initializer_size() == 4);
  std::size_t raw_bytes = 0;
  for (int i = 0; i < graph.initializer_size(); ++i) {
    raw_bytes += model.graph().initializer(i).raw_data().size();
  }
  CHECK(raw_bytes == 268);
  const onnx::TensorProto& t0 = graph.initializer(0);
  CHECK(t0.data_type() == onnx::TensorProto::FLOAT);
  CHECK(t0.dims().size() == t0.dims_size());
  const auto& input_type = graph.input(0).type();
  CHECK(input_type.value_case() == onnx::TypeProto::kTensorType);
  CHECK(input_type.tensor_type().shape().dim(0).dim_param() == "batch");
  CHECK(input_type.tensor_type().shape().dim(0).value_case() == onnx::TensorShapeProto::Dimension::kDimParam);
  std::string producer = model.producer_name();
  CHECK(producer == "onnx_light-sample");

  // Serialize: byte-identical to the file.
  CHECK(model.SerializeAsString() == file_bytes);
  std::string out;
  CHECK(model.SerializeToString(&out) && out == file_bytes);
  CHECK(model.ByteSizeLong() == file_bytes.size());

  // Parse, copy, edit the copy: the original is unchanged.
  onnx::ModelProto parsed;
  CHECK(parsed.ParseFromString(file_bytes));
  onnx::ModelProto copy = parsed;
  copy.mutable_graph()->set_name("edited");
  copy.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(4, '\0'));
  CHECK(parsed.graph().name() == "mlp");
  CHECK(copy.graph().name() == "edited");
  CHECK(copy.graph().initializer(0).raw_data().size() == 4);
  *copy.mutable_graph() = parsed.graph();
  CHECK(copy.SerializeAsString() == file_bytes);

  // Build from scratch.
  onnx::ModelProto built;
  built.set_ir_version(10);
  auto opset = built.add_opset_import();
  opset->set_domain("");
  opset->set_version(21);
  auto g = built.mutable_graph();
  g->set_name("tiny");
  auto node = g->add_node();
  node->set_op_type("Relu");
  node->add_input("x");
  node->add_output("y");
  auto attr = node->add_attribute();
  attr->set_name("alpha");
  attr->set_type(onnx::AttributeProto::FLOAT);
  attr->set_f(0.5f);
  auto init = g->add_initializer();
  init->set_name("w");
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_dims(2);
  const float w[2] = {1.0f, 2.0f};
  init->set_raw_data(w, sizeof w);
  auto in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::ModelProto back;
  back.ParseFromString(built.SerializeAsString());
  CHECK(back.graph().node(0).attribute(0).f() == 0.5f);
  CHECK(back.graph().node(0).attribute(0).type() == onnx::AttributeProto::FLOAT);
  CHECK(std::memcmp(back.graph().initializer(0).raw_data().data(), w, sizeof w) == 0);
  CHECK(back.graph().input(0).type().tensor_type().elem_type() == onnx::TensorProto::FLOAT);
  CHECK(back.SerializeAsString() == built.SerializeAsString());
  g->mutable_node()->DeleteSubrange(0, 1);
  CHECK(built.graph().node_size() == 0);

  // Save and load a file.
  const std::string saved = tmp + "/cpp_wrapper_copy.onnx";
  onnx::SaveModel(model, saved);
  CHECK(read_file(saved) == file_bytes);

  // Owner tokens: the bytes outlive the model (no_copy + memory map, and owned bytes).
  for (int no_copy = 0; no_copy <= 1; ++no_copy) {
    onnx::ParseOptions opts;
    opts.no_copy = no_copy != 0;
    opts.raw_data_threshold = 0;
    opts.file_load_mode = ONNXL_FILE_LOAD_MODE_MMAP;
    opts.alignment = 1;  // borrow wherever the payload lies (64, the default, copies misaligned ones)
    std::string expected;
    onnx::Owner owner(nullptr);
    {
      onnx::ModelProto m = onnx::LoadModel(path, opts);
      auto t = m.mutable_graph()->mutable_initializer(1);
      CHECK(t->raw_data_is_borrowed() == (no_copy != 0));
      expected = std::string(t->raw_data_view());
      owner = t->raw_data_owner();
    }
    CHECK(owner.bytes() == expected);
    onnx::Owner second = owner;
    CHECK(second.bytes().data() == owner.bytes().data());
  }

  // Lent memory: released exactly once, after the last user.
  {
    auto* lent = new std::vector<uint8_t>(16, 7);
    onnx::Owner keep(nullptr);
    {
      onnx::TensorProto t;
      t.set_raw_data_borrowed(lent->data(), lent->size(), release_cb, lent);
      onnx::TensorProto t2 = t;
      keep = t2.raw_data_owner();
    }
    CHECK(released == 0);
    CHECK(keep.bytes().size() == 16 && keep.bytes()[3] == 7);
  }
  CHECK(released == 1);

  // Streams.
  onnx::Stream mem = onnx::Stream::Memory();
  onnx::SerializeProtoToStream(model, mem);
  CHECK(mem.bytes() == file_bytes);
  onnx::ModelProto from_stream;
  onnx::ParseProtoFromStream(from_stream, mem);
  CHECK(from_stream.SerializeAsString() == file_bytes);
  onnx::Stream bytes = onnx::Stream::Bytes(file_bytes.data(), file_bytes.size());
  CHECK(status_of([&] { onnx::SerializeProtoToStream(model, bytes); }) == ONNXL_STATUS_UNSUPPORTED);
  onnx::Stream mapped = onnx::Stream::Mmap(path);
  onnx::TensorProto tensor;
  onnx::Stream tmem = onnx::Stream::Memory();
  onnx::SerializeProtoToStream(model.graph().initializer(2), tmem);
  onnx::ParseProtoFromStream(tensor, tmem);
  CHECK(tensor.raw_data() == model.graph().initializer(2).raw_data());

  // Pre-packed blobs: attach, save beside the initializer, load back with no copy.
  {
    const std::string init = model.graph().initializer(0).name();
    onnx::PrepackedBlobs blobs;
    blobs.add(init, "gemm", std::string(5000, 'x'));
    blobs.add(init, "gemm", "tail");
    CHECK(blobs.size() == 1 && blobs.buffer_count(init, "gemm") == 2);
    CHECK(blobs.at(0).initializer == init && blobs.at(0).key == "gemm" && blobs.at(0).num_buffers == 2);
    onnx::ExternalDataOptions eo;
    eo.checksum = true;
    onnx::SaveModelWithPrepacked(model, blobs, tmp + "/pp_cpp.onnx", eo);
    onnx::ParseOptions po;
    po.no_copy = true;
    onnx::ExternalLoadOptions lo;
    lo.verify_checksums = true;
    auto loaded = onnx::LoadModelWithPrepacked(tmp + "/pp_cpp.onnx", po, lo);
    CHECK(loaded.first.graph().initializer(0).raw_data() == model.graph().initializer(0).raw_data());
    CHECK(loaded.second.contains(init, "gemm") && !loaded.second.contains(init, "other"));
    CHECK(loaded.second.get(init, "gemm", 0) == std::string(5000, 'x'));
    CHECK(loaded.second.get(init, "gemm", 1) == "tail");
    onnx::Owner keep = loaded.second.owner(init, "gemm", 1);
    loaded.second.remove(init, "gemm");
    CHECK(loaded.second.size() == 0);
    CHECK(keep.bytes() == "tail");
    CHECK(status_of([&] { (void)loaded.second.get(init, "gemm"); }) == ONNXL_STATUS_OUT_OF_RANGE);
    CHECK(status_of([&] { blobs.add(init, "a|b", "x"); }) == ONNXL_STATUS_INVALID_ARGUMENT);
    // The model first, its external data (and blobs) after the fact.
    onnx::ExternalLoadOptions later;
    later.load_external_data = false;
    onnx::ModelProto lazy = onnx::LoadModelWithPrepacked(tmp + "/pp_cpp.onnx", onnx::ParseOptions(), later).first;
    onnx::PrepackedBlobs found = onnx::LoadExternalDataForModelWithPrepacked(lazy, tmp);
    CHECK(lazy.graph().initializer(0).raw_data() == model.graph().initializer(0).raw_data());
    CHECK(found.size() == 1 && found.get(init, "gemm", 0) == std::string(5000, 'x'));
    CHECK(found.get(init, "gemm", 1) == "tail");
  }

  // Errors carry the status.
  CHECK(status_of([&] { onnx::LoadModel(tmp + "/does-not-exist.onnx"); }) == ONNXL_STATUS_IO);
  {
    // protobuf's contract: Parse* returns false; the library's last error says why.
    onnx::ModelProto m;
    CHECK(!m.ParseFromString(file_bytes.substr(0, file_bytes.size() - 9)));
    CHECK(onnxl_last_error_status() == ONNXL_STATUS_PARSE);
  }
  {
    bool thrown = false;
    try {
      (void)model.graph().initializer(99);
    } catch (const std::out_of_range&) {
      thrown = true;
    }
    CHECK(thrown);
  }
  {
    onnx::ModelProto m = onnx::LoadModelFromString(file_bytes, [] {
      onnx::ParseOptions o;
      o.no_copy = true;
      o.raw_data_threshold = 0;
      return o;
    }());
    CHECK(status_of([&] { (void)m.mutable_graph()->mutable_initializer(0)->raw_data_owner(); }) ==
          ONNXL_STATUS_UNSUPPORTED);
  }
  try {
    onnx::LoadModel(tmp + "/does-not-exist.onnx");
  } catch (const onnx::Error& e) {
    CHECK(std::string(e.what()).find("does-not-exist.onnx") != std::string::npos);
  }

  if (failures != 0) {
    std::fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("cpp_wrapper_roundtrip: all checks passed\n");
  return 0;
}
