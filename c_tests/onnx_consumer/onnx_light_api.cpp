// The onnx component through onnx_light's C++ names (onnx_light_onnx.hpp):
//   onnx_light_api MODEL.onnx   checks, infers (copy and in place: the same bytes), converts,
//                               looks up a schema, and checks the errors' statuses and messages.
#include <onnx_light_onnx.hpp>

#include <cstring>
#include <iostream>
#include <string>

static int failures = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::cerr << __FILE__ << ":" << __LINE__ << ": CHECK(" #cond ") failed\n"; \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

template <class F>
static OnnxlStatus status_of(F&& f, std::string* message = nullptr) {
  try {
    f();
    return ONNXL_STATUS_OK;
  } catch (const onnx_light::Error& e) {
    if (message) *message = e.what();
    return e.status();
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: onnx_light_api MODEL.onnx\n";
    return 2;
  }
  onnx_light::ModelProto model = onnx_light::LoadModel(argv[1]);
  onnx_light::CheckOptions full;
  full.full_check = true;
  onnx_light::check_model(model, full);
  onnx_light::check_model(std::string(argv[1]), full);
  onnx_light::ModelProto inferred = onnx_light::infer_shapes(model);
  onnx_light::infer_shapes_in_place(model);
  CHECK(inferred.SerializeAsString() == model.SerializeAsString());
  onnx_light::ModelProto converted = onnx_light::convert_version(model, 18);
  CHECK(converted.opset_import_size() >= 1);

  std::string message;
  onnx_light::ModelProto empty;
  CHECK(status_of([&] { onnx_light::check_model(empty); }, &message) == ONNXL_STATUS_VALIDATION);
  CHECK(message.find("The model does not have an ir_version set properly.") != std::string::npos);
  CHECK(status_of([&] { onnx_light::get_schema("NoSuchOp"); }) == ONNXL_STATUS_NOT_FOUND);

  OnnxlOpSchemaInfo info = onnx_light::schema_info(onnx_light::get_schema("Conv", 10));
  CHECK(std::strcmp(info.name, "Conv") == 0 && info.since_version == 1 && info.input_count == 3);
  if (failures) return 1;
  std::cout << "onnx_light_api: all checks passed\n";
  return 0;
}
