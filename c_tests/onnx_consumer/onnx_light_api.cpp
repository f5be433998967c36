// The onnx component through onnx_light's C++ names (onnx_light_onnx.hpp):
//   onnx_light_api MODEL.onnx   checks, infers (copy and in place: the same bytes), converts,
//                               looks up a schema, parses and prints onnx's text format, and
//                               checks the errors' statuses and messages.
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

  // onnx's text format: the model's text parses back to a model of the same text; a refused text
  // throws ONNXL_STATUS_PARSE with onnx's message.
  std::string text = onnx_light::to_text(model);
  CHECK(text.find(" => (") != std::string::npos);
  CHECK(onnx_light::to_text(onnx_light::parse_model(text)) == text);
  std::string graph_text = onnx_light::to_text(model.graph());
  CHECK(onnx_light::to_text(onnx_light::parse_graph(graph_text)) == graph_text);
  onnx_light::NodeProto node = onnx_light::parse_node("x = Foo <alpha = 2.5> (y)");
  CHECK(node.op_type() == "Foo" && onnx_light::to_text(node) == "   x = Foo <alpha: float = 2.5> (y)\n");
  onnx_light::FunctionProto f = onnx_light::parse_function("<domain: \"d\"> f (x) => (y) { y = Neg(x) }");
  CHECK(f.domain() == "d" && onnx_light::to_text(f).find("f (x) => (y)") != std::string::npos);
  CHECK(status_of([&] { onnx_light::parse_node("x = Foo("); }, &message) == ONNXL_STATUS_PARSE);
  CHECK(message.find("[ParseError at position (line: 1 column: 9)]\nError context: x = Foo(\nExpected character ) not "
                     "found.") != std::string::npos);
  if (failures) return 1;
  std::cout << "onnx_light_api: all checks passed\n";
  return 0;
}
