// Consumer of the installed onnx_light package (C++ API through the protobuf drop-in header,
// static library): prints a model summary and round-trips it in memory. The project sets no C++
// standard: the imported target requires C++17 itself.
#include <iostream>
#include <string>

#include <onnx_light/onnx_pb.h>

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
    for (const onnx::NodeProto& node : graph.node()) {
      std::cout << ' ' << node.op_type().c_str();
    }
    onnx::ModelProto again;
    if (!again.ParseFromString(model.SerializeAsString())) {
      std::cerr << "ParseFromString failed\n";
      return 1;
    }
    const bool same = again.SerializeAsString() == model.SerializeAsString();
    std::cout << "; round trip " << (same ? "identical" : "DIFFERENT") << "\n";
    return same ? 0 : 1;
  } catch (const onnx_light::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
