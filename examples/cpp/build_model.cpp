// Example: build an ONNX model from scratch with the C++ wrapper (include/onnx_light.hpp), save
// it with its large weight as external data, load it back and verify it.
//
//   build_model OUT_DIR      writes OUT_DIR/mlp_cpp.onnx and OUT_DIR/mlp_cpp.weights
//
// The model computes y = Relu(x @ W + b) for x: float[batch, 4], W: float[4, 3], b: float[3].
// The code reads like protobuf-generated C++ (onnx::ModelProto, mutable_graph(), add_node(), ...)
// because the wrapper mirrors those names. W is written to the weights file by hand, with the
// external_data fields onnx defines; LoadModel resolves it when loading (if a loader leaves
// external data alone, the example reads the file itself).
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "onnx_light.hpp"

namespace onnx = onnx_light;

namespace {

const int64_t kIn = 4, kOut = 3;

std::vector<float> weights() {
  std::vector<float> w(kIn * kOut);
  for (std::size_t i = 0; i < w.size(); ++i) {
    w[i] = 0.25f * static_cast<float>(i) - 1.0f;
  }
  return w;
}

void add_value_info(onnx::ValueInfoProto* v, const char* name, const char* batch_param) {
  v->set_name(name);
  auto tensor_type = v->mutable_type()->mutable_tensor_type();
  tensor_type->set_elem_type(onnx::TensorProto::FLOAT);
  auto shape = tensor_type->mutable_shape();
  shape->add_dim()->set_dim_param(batch_param);
  shape->add_dim()->set_dim_value(std::strcmp(name, "x") == 0 ? kIn : kOut);
}

onnx::ModelProto build(const std::string& weights_file) {
  onnx::ModelProto model;
  model.set_ir_version(10);
  model.set_producer_name("onnx_light-example");
  model.set_producer_version(onnxl_version());
  auto opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(21);

  auto graph = model.mutable_graph();
  graph->set_name("mlp_cpp");
  add_value_info(graph->add_input(), "x", "batch");
  add_value_info(graph->add_output(), "y", "batch");

  auto matmul = graph->add_node();
  matmul->set_op_type("MatMul");
  matmul->set_name("fc");
  matmul->add_input("x");
  matmul->add_input("W");
  matmul->add_output("xW");
  auto add = graph->add_node();
  add->set_op_type("Add");
  add->set_name("bias");
  add->add_input("xW");
  add->add_input("b");
  add->add_output("z");
  auto relu = graph->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->add_input("z");
  relu->add_output("y");

  // W: stored in the weights file (external data), described by key/value pairs.
  const std::vector<float> w = weights();
  auto W = graph->add_initializer();
  W->set_name("W");
  W->set_data_type(onnx::TensorProto::FLOAT);
  W->add_dims(kIn);
  W->add_dims(kOut);
  W->set_data_location(onnx::TensorProto::EXTERNAL);
  const std::pair<const char*, std::string> entries[] = {
      {"location", weights_file}, {"offset", "0"}, {"length", std::to_string(w.size() * sizeof(float))}};
  for (const auto& [key, value] : entries) {
    auto e = W->add_external_data();
    e->set_key(key);
    e->set_value(value);
  }

  // b: inline raw_data (little-endian floats, as onnx stores them).
  const float b[kOut] = {0.5f, -0.5f, 0.0f};
  auto bias = graph->add_initializer();
  bias->set_name("b");
  bias->set_data_type(onnx::TensorProto::FLOAT);
  bias->add_dims(kOut);
  bias->set_raw_data(b, sizeof b);

  auto meta = model.add_metadata_props();
  meta->set_key("example");
  meta->set_value("examples/cpp/build_model.cpp");
  return model;
}

int check(bool ok, const char* what) {
  if (!ok) {
    std::cerr << "FAILED: " << what << "\n";
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " OUT_DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  const std::string model_path = dir + "/mlp_cpp.onnx";
  const std::string weights_name = "mlp_cpp.weights";  // relative to the model's directory
  try {
    // Build, then write the external weights and the model (atomically).
    onnx::ModelProto model = build(weights_name);
    const std::vector<float> w = weights();
    {
      std::ofstream out(dir + "/" + weights_name, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(w.data()), static_cast<std::streamsize>(w.size() * sizeof(float)));
      if (!out) {
        std::cerr << "cannot write " << dir << "/" << weights_name << "\n";
        return 1;
      }
    }
    onnx::SaveModel(model, model_path);
    const std::string bytes = model.SerializeAsString();
    std::cout << "saved " << model_path << " (" << bytes.size() << " bytes) + " << weights_name << " ("
              << w.size() * sizeof(float) << " bytes)\n";

    // The file holds exactly the model's bytes, and parsing them gives the same model back.
    int failures = 0;
    std::string file;
    {
      std::ifstream in(model_path, std::ios::binary);
      file.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    failures += check(file == bytes, "the file holds the serialized model");
    failures += check(onnx::LoadModelFromString(file).SerializeAsString() == bytes, "byte-identical round trip");

    // Load it back from the file (memory-mapped, no copy) and verify it field by field.
    onnx::ParseOptions opts;
    opts.no_copy = true;
    const onnx::ModelProto loaded = onnx::LoadModel(model_path, opts);
    failures += check(loaded.ir_version() == 10 && loaded.opset_import(0).version() == 21, "ir_version / opset");
    const auto& graph = loaded.graph();
    failures += check(graph.node_size() == 3 && graph.node(2).op_type() == "Relu", "nodes");
    failures += check(graph.input(0).type().tensor_type().shape().dim(0).dim_param() == "batch", "input shape");
    const auto& b = graph.initializer(1);
    failures += check(b.raw_data().size() == kOut * sizeof(float), "b raw_data");
    // W's values: loaded from the weights file by the loader, or (a loader that leaves external
    // data alone) read from the file its external_data entries name.
    const auto& W = graph.initializer(0);
    std::string w_bytes, how;
    if (W.has_raw_data()) {
      w_bytes = W.raw_data();
      how = "loaded from " + weights_name + " by LoadModel";
    } else {
      for (int i = 0; i < W.external_data_size(); ++i) {
        if (W.external_data(i).key() == "location") {
          std::ifstream in(dir + "/" + std::string(W.external_data(i).value()), std::ios::binary);
          w_bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        }
      }
      how = "left external by LoadModel, read from " + weights_name;
    }
    failures += check(w_bytes.size() == w.size() * sizeof(float) &&
                          std::memcmp(w_bytes.data(), w.data(), w_bytes.size()) == 0,
                      "W's values");

    std::cout << "loaded back: " << graph.node_size() << " nodes, " << graph.initializer_size()
              << " initializers (W " << how << "), metadata " << loaded.metadata_props(0).key() << "="
              << loaded.metadata_props(0).value() << "\n";
    if (failures != 0) {
      return 1;
    }
    std::cout << "verified: byte-identical round trip, every field and value as built\n";
  } catch (const onnx::Error& e) {
    std::cerr << "onnx_light error " << onnxl_status_name(e.status()) << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
