// A program written for onnx's C++ API only: it includes onnx's headers at their own paths and
// never names onnx_light. Built through find_package(onnx_light COMPONENTS onnx).
//
//   onnx_api MODEL.onnx...   for each model: the checker's verdict (full check), then the
//                            size and FNV-1a hash of the serialized model after shape
//                            inference, then those of the model converted to opset 18 (or
//                            the first line of each error). The output is compared with the same
//                            program built against protobuf (scripts/test.d/16-onnx-cxx.sh).
//   onnx_api --schema OP     a schema of the default domain: since_version, inputs, attributes
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

static std::string digest(const onnx::ModelProto& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%zu bytes %016llx", bytes.size(), static_cast<unsigned long long>(h));
  return buf;
}

static std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--schema") == 0) {
    const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(argv[2], "");
    if (s == nullptr) {
      std::cout << "no schema " << argv[2] << "\n";
      return 1;
    }
    std::cout << s->Name() << " since " << s->since_version() << " inputs";
    for (const auto& p : s->inputs()) std::cout << " " << p.GetName() << ":" << p.GetTypeStr();
    std::cout << " attributes " << s->attributes().size() << "\n";
    return 0;
  }
  int failures = 0;
  for (int i = 1; i < argc; ++i) {
    onnx::ModelProto model;
    std::ifstream in(argv[i], std::ios::binary);
    if (!model.ParseFromIstream(&in)) {
      std::cout << argv[i] << ": parse failed\n";
      ++failures;
      continue;
    }
    std::cout << argv[i] << ": ";
    try {
      onnx::checker::check_model(model, true, false, false);
      std::cout << "valid";
    } catch (const onnx::checker::ValidationError& e) {
      std::cout << "invalid (" << first_line(e.what()) << ")";
    }
    try {
      onnx::shape_inference::InferShapes(model);
      std::cout << ", inferred " << digest(model);
    } catch (const std::exception& e) {
      std::cout << ", inference failed (" << first_line(e.what()) << ")";
    }
    try {
      onnx::ModelProto converted = onnx::version_conversion::ConvertVersion(model, 18);
      std::cout << ", converted " << digest(converted) << "\n";
    } catch (const std::exception& e) {
      std::cout << ", not converted (" << first_line(e.what()) << ")\n";
    }
  }
  return failures == 0 ? 0 : 1;
}
