// onnx_light_onnx.hpp: the C++ names of the onnx component's functions (onnx_light_onnx.h) on
// onnx_light's C++ classes: check a model, infer its shapes, convert its opset, look up operator
// schemas, parse and print onnx's text format. Each is a thin layer over one C function; a failure throws onnx_light::Error with the
// C status (ONNXL_STATUS_VALIDATION, _INFERENCE, _CONVERSION, _NOT_FOUND, _PARSE, ...) and onnx's
// message. Programs written for onnx's own C++ API (<onnx/checker.h>, ...) use that directly;
// both need the onnx component (CMake: onnx_light::onnx). See docs/cpp.md.
#ifndef ONNX_LIGHT_ONNX_HPP
#define ONNX_LIGHT_ONNX_HPP

#include <cstdint>
#include <string>

#include "onnx_light.hpp"
#include "onnx_light_onnx.h"

namespace onnx_light {

/// Options of check_model: OnnxlCheckOptions at its defaults (all false).
struct CheckOptions : OnnxlCheckOptions {
  CheckOptions() : OnnxlCheckOptions(onnxl_check_options_default()) {}
};

/// Options of shape inference: OnnxlShapeInferenceOptions at its defaults (all false).
struct ShapeInferenceOptions : OnnxlShapeInferenceOptions {
  ShapeInferenceOptions() : OnnxlShapeInferenceOptions(onnxl_shape_inference_options_default()) {}
};

/// Runs onnx's checker over `model` (onnx.checker.check_model); throws on an invalid model.
inline void check_model(const ModelProto& model, const CheckOptions& opts = CheckOptions()) {
  detail::check(onnxl_check_model(model.c_ptr(), &opts));
}

/// Runs onnx's checker over the model file at `path` (external data checked against its directory).
inline void check_model(const std::string& path, const CheckOptions& opts = CheckOptions()) {
  detail::check(onnxl_check_model_path(path.c_str(), &opts));
}

/// A copy of `model` with the inferred types in graph.value_info (onnx.shape_inference.infer_shapes).
inline ModelProto infer_shapes(const ModelProto& model, const ShapeInferenceOptions& opts = ShapeInferenceOptions()) {
  OnnxlModelProto* out = nullptr;
  detail::check(onnxl_infer_shapes(model.c_ptr(), &opts, &out));
  return detail::adopt<ModelProto>(out, onnxl_model_proto_free);
}

/// Infers shapes into `model` itself: no copy.
inline void infer_shapes_in_place(ModelProto& model, const ShapeInferenceOptions& opts = ShapeInferenceOptions()) {
  detail::check(onnxl_infer_shapes_in_place(model.c_ptr(), &opts));
}

/// Infers the shapes of the model file `model_path` into `output_path`.
inline void infer_shapes_path(const std::string& model_path, const std::string& output_path,
                              const ShapeInferenceOptions& opts = ShapeInferenceOptions()) {
  detail::check(onnxl_infer_shapes_path(model_path.c_str(), output_path.c_str(), &opts));
}

/// `model` converted to the default domain's opset `target_version` (onnx.version_converter).
inline ModelProto convert_version(const ModelProto& model, int64_t target_version) {
  OnnxlModelProto* out = nullptr;
  detail::check(onnxl_convert_version(model.c_ptr(), target_version, &out));
  return detail::adopt<ModelProto>(out, onnxl_model_proto_free);
}

/// The schema of `op_type` in `domain` ("" is the default domain) with the highest since_version
/// not above `max_inclusive_version` (negative: the latest); throws ONNXL_STATUS_NOT_FOUND.
inline const OnnxlOpSchema& get_schema(const std::string& op_type, int64_t max_inclusive_version = -1,
                                       const std::string& domain = "") {
  const OnnxlOpSchema* s = nullptr;
  detail::check(onnxl_get_schema(op_type.c_str(), max_inclusive_version, domain.c_str(), &s));
  return *s;
}

/// The scalar facts of a schema (name, domain, since_version, counts, ...).
inline OnnxlOpSchemaInfo schema_info(const OnnxlOpSchema& schema) {
  OnnxlOpSchemaInfo info{};
  detail::check(onnxl_op_schema_info(&schema, &info));
  return info;
}

namespace detail {
template <class M, class C>
M parse_text(const std::string& text, OnnxlStatus (*parse)(const char*, C**), void (*free_handle)(C*)) {
  C* out = nullptr;
  check(parse(text.c_str(), &out));
  return adopt<M>(out, free_handle);
}

template <class C>
std::string print_text(const C* message, OnnxlStatus (*print)(const C*, char**, size_t*)) {
  char* text = nullptr;
  size_t length = 0;
  check(print(message, &text, &length));
  std::string out(text, length);
  onnxl_text_free(text);
  return out;
}
}  // namespace detail

/// onnx's text format parsed into a model (onnx.parser.parse_model); a text onnx refuses throws
/// ONNXL_STATUS_PARSE with onnx's message. The text is read up to its first NUL, as onnx's.
inline ModelProto parse_model(const std::string& text) {
  return detail::parse_text<ModelProto>(text, onnxl_parse_model_text, onnxl_model_proto_free);
}
/// onnx.parser.parse_graph.
inline GraphProto parse_graph(const std::string& text) {
  return detail::parse_text<GraphProto>(text, onnxl_parse_graph_text, onnxl_graph_proto_free);
}
/// onnx.parser.parse_function.
inline FunctionProto parse_function(const std::string& text) {
  return detail::parse_text<FunctionProto>(text, onnxl_parse_function_text, onnxl_function_proto_free);
}
/// onnx.parser.parse_node.
inline NodeProto parse_node(const std::string& text) {
  return detail::parse_text<NodeProto>(text, onnxl_parse_node_text, onnxl_node_proto_free);
}

/// onnx's text of a message (onnx.printer.to_text).
inline std::string to_text(const ModelProto& m) { return detail::print_text(m.c_ptr(), onnxl_model_to_text); }
inline std::string to_text(const GraphProto& m) { return detail::print_text(m.c_ptr(), onnxl_graph_to_text); }
inline std::string to_text(const FunctionProto& m) { return detail::print_text(m.c_ptr(), onnxl_function_to_text); }
inline std::string to_text(const NodeProto& m) { return detail::print_text(m.c_ptr(), onnxl_node_to_text); }

}  // namespace onnx_light

#endif  // ONNX_LIGHT_ONNX_HPP
