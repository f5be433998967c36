// A model over 2 GB through onnx's checker and shape inference, by the C ABI and by onnx_light's
// C++ names (protobuf cannot serialize such a model; onnx's Python check_model refuses one in
// memory):
//   onnx_large   builds a model with a 2 GiB + 4 KiB float initializer in memory, checks it
//                (plain and full), infers its shapes in place, and checks that the bytes stayed.
#include <onnx_light_onnx.hpp>

#include <cstdint>
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

int main() {
  const int64_t n = (int64_t(1) << 29) + 1024;  // floats: 2 GiB + 4 KiB
  onnx_light::ModelProto model;
  model.set_ir_version(10);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  auto* graph = model.mutable_graph();
  graph->set_name("large");
  auto* w = graph->add_initializer();
  w->set_name("w");
  w->set_data_type(1);  // FLOAT
  w->add_dims(n);
  std::string* bytes = w->mutable_raw_data();
  bytes->resize(static_cast<size_t>(n) * 4);
  (*bytes)[0] = 1;
  (*bytes)[bytes->size() - 1] = 2;
  auto* node = graph->add_node();
  node->set_op_type("Neg");
  node->add_input("w");
  node->add_output("y");
  auto* y = graph->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(1);
  y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("N");
  CHECK(model.ByteSizeLong() > (size_t(1) << 31));

  // The C ABI.
  OnnxlCheckOptions opts = onnxl_check_options_default();
  if (onnxl_check_model(model.c_ptr(), &opts) != ONNXL_STATUS_OK) {
    std::cerr << "check_model: " << onnxl_last_error_message() << "\n";
    ++failures;
  }
  opts.full_check = 1;
  CHECK(onnxl_check_model(model.c_ptr(), &opts) == ONNXL_STATUS_OK);
  // The C++ names: inference gives y's dimension N its value.
  onnx_light::CheckOptions full;
  full.full_check = true;
  onnx_light::check_model(model, full);
  onnx_light::infer_shapes_in_place(model);
  const auto& shape = model.graph().output(0).type().tensor_type().shape();
  CHECK(shape.dim_size() == 1 && shape.dim(0).dim_value() == n);
  // onnx's code read the payload as a std::string copy; the model's own bytes are intact.
  const std::string& after = model.graph().initializer(0).raw_data();
  CHECK(after.size() == static_cast<size_t>(n) * 4 && after[0] == 1 && after[after.size() - 1] == 2);
  // A broken large model is refused with onnx's message.
  model.mutable_graph()->mutable_node(0)->set_op_type("NoSuchOp");
  CHECK(onnxl_check_model(model.c_ptr(), &opts) == ONNXL_STATUS_VALIDATION);
  const char* message = onnxl_last_error_message();
  CHECK(message && std::string(message).find("NoSuchOp") != std::string::npos);
  if (failures) return 1;
  std::cout << "onnx_large: all checks passed\n";
  return 0;
}
