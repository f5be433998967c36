// Consumer of the installed onnx_light package (C++17 wrapper, static library): prints a model
// summary and round-trips it in memory.
#include <iostream>
#include <string>

#include <onnx_light.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " model.onnx\n";
    return 2;
  }
  try {
    const onnx_light::ModelProto model = onnx_light::LoadModel(argv[1]);
    const auto& graph = model.graph();
    std::cout << "consumer_static_cpp (onnx_light " << onnxl_version() << ", static): " << argv[1] << ": graph "
              << graph.name() << ": " << graph.node_size() << " nodes:";
    for (int i = 0; i < graph.node_size(); ++i) {
      std::cout << ' ' << graph.node(i).op_type();
    }
    onnx_light::ModelProto again;
    again.ParseFromString(model.SerializeAsString());
    const bool same = again.SerializeAsString() == model.SerializeAsString();
    std::cout << "; round trip " << (same ? "identical" : "DIFFERENT") << "\n";
    return same ? 0 : 1;
  } catch (const onnx_light::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
