// The C ABI of the onnx component (include/onnx_light_onnx.h): onnx's checker, shape inference,
// version converter, schema registry, parser and printer, called on onnx_light models in place. Every entry point
// catches what onnx throws and reports it through the core library's last error
// (onnxl_set_last_error), so no exception crosses the C boundary.
#include "onnx_light_onnx.h"

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "onnx/checker.h"
#include "onnx/common/ir_pb_converter.h"
#include "onnx/common/version.h"
#include "onnx/defs/parser.h"
#include "onnx/defs/printer.h"
#include "onnx/defs/schema.h"
#include "onnx/defs/shape_inference.h"
#include "onnx/inliner/inliner.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/version_converter/convert.h"

namespace {

OnnxlStatus fail(OnnxlStatus status, const char* message) {
  return onnxl_set_last_error(status, message, std::strlen(message));
}

OnnxlStatus fail(OnnxlStatus status, const std::string& message) {
  return onnxl_set_last_error(status, message.data(), message.size());
}

// Runs `body` and turns what it throws into a status and message: onnx's own error types keep
// their text (what() carries onnx's context lines, as its Python exceptions do).
template <class F>
OnnxlStatus guarded(F&& body) noexcept {
  try {
    body();
    return ONNXL_STATUS_OK;
  } catch (const ONNX_NAMESPACE::checker::ValidationError& e) {
    return fail(ONNXL_STATUS_VALIDATION, e.what());
  } catch (const ONNX_NAMESPACE::InferenceError& e) {
    return fail(ONNXL_STATUS_INFERENCE, e.what());
  } catch (const ONNX_NAMESPACE::ConvertError& e) {
    return fail(ONNXL_STATUS_CONVERSION, e.what());
  } catch (const ONNX_NAMESPACE::SchemaError& e) {
    return fail(ONNXL_STATUS_VALIDATION, e.what());
  } catch (const onnx_light::Error& e) {
    return fail(e.status(), e.what());
  } catch (const std::bad_alloc&) {
    return fail(ONNXL_STATUS_OUT_OF_MEMORY, "out of memory in onnx's C++ library");
  } catch (const std::exception& e) {
    return fail(ONNXL_STATUS_INTERNAL, e.what());
  } catch (...) {
    return fail(ONNXL_STATUS_INTERNAL, "an unknown C++ exception in onnx's C++ library");
  }
}

// An options struct from the caller: NULL means the defaults; a struct_size below the first
// version's size is refused. Fields added later are read only when the caller's struct has them.
template <class T>
bool read_options(const T* in, T* out, const char* what) {
  *out = T{};
  out->struct_size = sizeof(T);
  if (in == nullptr) return true;
  if (in->struct_size < sizeof(T)) {
    fail(ONNXL_STATUS_INVALID_ARGUMENT, std::string(what) + ": struct_size " + std::to_string(in->struct_size) +
                                            " is smaller than " + std::to_string(sizeof(T)));
    return false;
  }
  std::memcpy(out, in, sizeof(T));
  out->struct_size = sizeof(T);
  return true;
}

ONNX_NAMESPACE::ShapeInferenceOptions inference_options(const OnnxlShapeInferenceOptions& o) {
  return ONNX_NAMESPACE::ShapeInferenceOptions{o.check_type, o.strict_mode ? 1 : 0, o.data_prop};
}

const ONNX_NAMESPACE::OpSchema* schema_of(const OnnxlOpSchema* s) {
  return reinterpret_cast<const ONNX_NAMESPACE::OpSchema*>(s);
}

const OnnxlOpSchema* handle_of(const ONNX_NAMESPACE::OpSchema* s) {
  return reinterpret_cast<const OnnxlOpSchema*>(s);
}

// Every schema of the registry, every version, in onnx's order (get_all_schemas_with_history
// copies them; this keeps pointers into the registry, which lives as long as the process).
const std::vector<const ONNX_NAMESPACE::OpSchema*>& all_schemas() {
  static const std::vector<const ONNX_NAMESPACE::OpSchema*> list = [] {
    std::vector<const ONNX_NAMESPACE::OpSchema*> r;
    for (const auto& copy : ONNX_NAMESPACE::OpSchemaRegistry::get_all_schemas_with_history()) {
      r.push_back(ONNX_NAMESPACE::OpSchemaRegistry::Schema(copy.Name(), copy.since_version(), copy.domain()));
    }
    return r;
  }();
  return list;
}

// The attributes of a schema in name order (onnx keeps them in a hash map).
std::vector<const ONNX_NAMESPACE::OpSchema::Attribute*> sorted_attributes(const ONNX_NAMESPACE::OpSchema& s) {
  std::vector<const ONNX_NAMESPACE::OpSchema::Attribute*> r;
  r.reserve(s.attributes().size());
  for (const auto& kv : s.attributes()) r.push_back(&kv.second);
  std::sort(r.begin(), r.end(), [](auto* a, auto* b) { return a->name < b->name; });
  return r;
}

OnnxlStatus formal_parameter(const OnnxlOpSchema* schema, size_t i, OnnxlFormalParameter* out, bool input) {
  if (schema == nullptr || out == nullptr) return fail(ONNXL_STATUS_NULL_POINTER, "schema or out is NULL");
  const auto& list = input ? schema_of(schema)->inputs() : schema_of(schema)->outputs();
  if (i >= list.size()) {
    return fail(ONNXL_STATUS_OUT_OF_RANGE, std::string(input ? "input " : "output ") + std::to_string(i) + " of " +
                                               std::to_string(list.size()) + " of " + schema_of(schema)->Name());
  }
  const auto& p = list[i];
  out->name = p.GetName().c_str();
  out->type_str = p.GetTypeStr().c_str();
  out->description = p.GetDescription().c_str();
  out->option = static_cast<OnnxlParameterOption>(p.GetOption());
  out->is_homogeneous = p.GetIsHomogeneous();
  out->min_arity = p.GetMinArity();
  out->differentiation_category = static_cast<int32_t>(p.GetDifferentiationCategory());
  return ONNXL_STATUS_OK;
}

// Parses `text` with onnx's OnnxParser into a new message of `New()` (freed with `Free` on
// failure). A refused text is ONNXL_STATUS_PARSE with onnx's message; what the parser throws
// keeps its kind where onnx's Python tells it apart (std::out_of_range: IndexError,
// std::invalid_argument: ValueError), the rest goes through `guarded`.
template <class Proto, class C>
OnnxlStatus parse_text(const char* text, C** out, C* (*make)(), void (*destroy)(C*)) {
  if (text == nullptr || out == nullptr) return fail(ONNXL_STATUS_NULL_POINTER, "text or out is NULL");
  C* result = make();
  if (result == nullptr) return onnxl_last_error_status();
  OnnxlStatus thrown = ONNXL_STATUS_OK;
  OnnxlStatus status = guarded([&] {
    try {
      ONNX_NAMESPACE::OnnxParser parser(text);
      auto parsed = parser.Parse(*Proto::from_c(result));
      if (!parsed.IsOK()) thrown = fail(ONNXL_STATUS_PARSE, parsed.ErrorMessage());
    } catch (const std::out_of_range& e) {
      thrown = fail(ONNXL_STATUS_OUT_OF_RANGE, e.what());
    } catch (const std::invalid_argument& e) {
      thrown = fail(ONNXL_STATUS_INVALID_ARGUMENT, e.what());
    }
  });
  if (status == ONNXL_STATUS_OK) status = thrown;
  if (status != ONNXL_STATUS_OK) {
    destroy(result);
    return status;
  }
  *out = result;
  return ONNXL_STATUS_OK;
}

// onnx's text of `message` (ONNX_NAMESPACE::ProtoToString) into a malloc'ed NUL-terminated string.
template <class Proto, class C>
OnnxlStatus to_text(const C* message, char** out, size_t* length) {
  if (message == nullptr || out == nullptr) return fail(ONNXL_STATUS_NULL_POINTER, "message or out is NULL");
  std::string text;
  OnnxlStatus status = guarded([&] { text = ONNX_NAMESPACE::ProtoToString(*Proto::from_c(message)); });
  if (status != ONNXL_STATUS_OK) return status;
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (copy == nullptr) return fail(ONNXL_STATUS_OUT_OF_MEMORY, "out of memory for the text");
  std::memcpy(copy, text.data(), text.size());
  copy[text.size()] = '\0';
  *out = copy;
  if (length != nullptr) *length = text.size();
  return ONNXL_STATUS_OK;
}

// A copy of `model` changed by `change` (onnx code run on the copy); `*out` only on success.
template <class F>
OnnxlStatus on_copy(const OnnxlModelProto* model, OnnxlModelProto** out, F&& change) {
  if (model == nullptr || out == nullptr) return fail(ONNXL_STATUS_NULL_POINTER, "model or out is NULL");
  OnnxlModelProto* result = onnxl_model_proto_new();
  if (result == nullptr) return onnxl_last_error_status();
  OnnxlStatus status = guarded([&] {
    ONNX_NAMESPACE::ModelProto* copy = ONNX_NAMESPACE::ModelProto::from_c(result);
    copy->CopyFrom(*ONNX_NAMESPACE::ModelProto::from_c(model));
    change(*copy);
  });
  if (status != ONNXL_STATUS_OK) {
    onnxl_model_proto_free(result);
    return status;
  }
  *out = result;
  return ONNXL_STATUS_OK;
}

}  // namespace

extern "C" {

const char* onnxl_onnx_version(void) {
  return ONNX_VERSION_STRING;
}

int64_t onnxl_onnx_opset_version(const char* domain) {
  std::string d = domain == nullptr ? std::string() : std::string(domain);
  const auto& map = ONNX_NAMESPACE::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = map.find(d);
  if (it == map.end()) {
    fail(ONNXL_STATUS_NOT_FOUND, "no opset of domain '" + d + "' is registered");
    return -1;
  }
  return it->second.second;
}

OnnxlCheckOptions onnxl_check_options_default(void) {
  OnnxlCheckOptions o{};
  o.struct_size = sizeof o;
  return o;
}

OnnxlStatus onnxl_check_model(const OnnxlModelProto* model, const OnnxlCheckOptions* options) {
  if (model == nullptr) return fail(ONNXL_STATUS_NULL_POINTER, "model is NULL");
  OnnxlCheckOptions o;
  if (!read_options(options, &o, "OnnxlCheckOptions")) return onnxl_last_error_status();
  return guarded([&] {
    ONNX_NAMESPACE::checker::check_model(*ONNX_NAMESPACE::ModelProto::from_c(model), o.full_check, o.skip_opset_compatibility_check,
                               o.check_custom_domain);
  });
}

OnnxlStatus onnxl_check_model_path(const char* path, const OnnxlCheckOptions* options) {
  if (path == nullptr) return fail(ONNXL_STATUS_NULL_POINTER, "path is NULL");
  OnnxlCheckOptions o;
  if (!read_options(options, &o, "OnnxlCheckOptions")) return onnxl_last_error_status();
  return guarded([&] {
    ONNX_NAMESPACE::checker::check_model(std::string(path), o.full_check, o.skip_opset_compatibility_check,
                               o.check_custom_domain);
  });
}

OnnxlShapeInferenceOptions onnxl_shape_inference_options_default(void) {
  OnnxlShapeInferenceOptions o{};
  o.struct_size = sizeof o;
  return o;
}

OnnxlStatus onnxl_infer_shapes_in_place(OnnxlModelProto* model, const OnnxlShapeInferenceOptions* options) {
  if (model == nullptr) return fail(ONNXL_STATUS_NULL_POINTER, "model is NULL");
  OnnxlShapeInferenceOptions o;
  if (!read_options(options, &o, "OnnxlShapeInferenceOptions")) return onnxl_last_error_status();
  OnnxlStatus status = guarded([&] {
    ONNX_NAMESPACE::shape_inference::InferShapes(*ONNX_NAMESPACE::ModelProto::from_c(model), ONNX_NAMESPACE::OpSchemaRegistry::Instance(),
                                       inference_options(o));
  });
  // The payload copies inference's reads made are dropped: the model is this call's alone.
  onnxl_model_proto_release_cxx_copies(model);
  return status;
}

OnnxlStatus onnxl_infer_shapes(const OnnxlModelProto* model, const OnnxlShapeInferenceOptions* options,
                               OnnxlModelProto** out) {
  if (model == nullptr || out == nullptr) return fail(ONNXL_STATUS_NULL_POINTER, "model or out is NULL");
  OnnxlModelProto* copy = onnxl_model_proto_new();
  if (copy == nullptr) return onnxl_last_error_status();
  OnnxlStatus status = onnxl_model_proto_copy_from(copy, model);
  if (status == ONNXL_STATUS_OK) status = onnxl_infer_shapes_in_place(copy, options);
  if (status != ONNXL_STATUS_OK) {
    onnxl_model_proto_free(copy);
    return status;
  }
  *out = copy;
  return ONNXL_STATUS_OK;
}

OnnxlStatus onnxl_infer_shapes_path(const char* model_path, const char* output_path,
                                    const OnnxlShapeInferenceOptions* options) {
  if (model_path == nullptr || output_path == nullptr) {
    return fail(ONNXL_STATUS_NULL_POINTER, "model_path or output_path is NULL");
  }
  OnnxlShapeInferenceOptions o;
  if (!read_options(options, &o, "OnnxlShapeInferenceOptions")) return onnxl_last_error_status();
  return guarded([&] {
    ONNX_NAMESPACE::shape_inference::InferShapes(std::string(model_path), std::string(output_path),
                                       ONNX_NAMESPACE::OpSchemaRegistry::Instance(), inference_options(o));
  });
}

OnnxlStatus onnxl_convert_version(const OnnxlModelProto* model, int64_t target_version, OnnxlModelProto** out) {
  if (model == nullptr || out == nullptr) return fail(ONNXL_STATUS_NULL_POINTER, "model or out is NULL");
  if (target_version < 0 || target_version > INT32_MAX) {
    return fail(ONNXL_STATUS_INVALID_ARGUMENT, "target_version " + std::to_string(target_version) + " is out of range");
  }
  OnnxlModelProto* result = onnxl_model_proto_new();
  if (result == nullptr) return onnxl_last_error_status();
  OnnxlStatus status = guarded([&] {
    ONNX_NAMESPACE::ModelProto converted =
        ONNX_NAMESPACE::version_conversion::ConvertVersion(*ONNX_NAMESPACE::ModelProto::from_c(model), static_cast<int>(target_version));
    ONNX_NAMESPACE::ModelProto::from_c(result)->Swap(&converted);
  });
  if (status != ONNXL_STATUS_OK) {
    onnxl_model_proto_free(result);
    return status;
  }
  *out = result;
  return ONNXL_STATUS_OK;
}

OnnxlStatus onnxl_inline_local_functions(const OnnxlModelProto* model, int convert_version, OnnxlModelProto** out) {
  return on_copy(model, out, [&](ONNX_NAMESPACE::ModelProto& m) { ONNX_NAMESPACE::inliner::InlineLocalFunctions(m, convert_version != 0); });
}

OnnxlStatus onnxl_inline_selected_functions(const OnnxlModelProto* model, const char* const* domains,
                                            const char* const* names, size_t count, int exclude,
                                            int inline_schema_functions, OnnxlModelProto** out) {
  if (count != 0 && (domains == nullptr || names == nullptr)) {
    return fail(ONNXL_STATUS_NULL_POINTER, "domains or names is NULL");
  }
  ONNX_NAMESPACE::inliner::FunctionIdVector ids;
  for (size_t i = 0; i < count; ++i) {
    if (domains[i] == nullptr || names[i] == nullptr) {
      return fail(ONNXL_STATUS_NULL_POINTER, "domains[" + std::to_string(i) + "] or names[" + std::to_string(i) + "] is NULL");
    }
    ids.emplace_back(domains[i], names[i]);
  }
  return on_copy(model, out, [&](ONNX_NAMESPACE::ModelProto& m) {
    auto selected = ONNX_NAMESPACE::inliner::FunctionIdSet::Create(std::move(ids), exclude != 0);
    if (inline_schema_functions != 0) {
      ONNX_NAMESPACE::inliner::InlineSelectedFunctions(m, *selected, nullptr);
    } else {
      ONNX_NAMESPACE::inliner::InlineSelectedLocalFunctions(m, *selected);
    }
  });
}

OnnxlStatus onnxl_get_schema(const char* op_type, int64_t max_inclusive_version, const char* domain,
                             const OnnxlOpSchema** out) {
  if (op_type == nullptr || out == nullptr) return fail(ONNXL_STATUS_NULL_POINTER, "op_type or out is NULL");
  std::string d = domain == nullptr ? std::string() : std::string(domain);
  const ONNX_NAMESPACE::OpSchema* s = nullptr;
  OnnxlStatus status = guarded([&] {
    if (max_inclusive_version < 0) {
      s = ONNX_NAMESPACE::OpSchemaRegistry::Schema(op_type, d);
    } else {
      int v = static_cast<int>(std::min<int64_t>(max_inclusive_version, INT32_MAX));
      s = ONNX_NAMESPACE::OpSchemaRegistry::Schema(op_type, v, d);
    }
  });
  if (status != ONNXL_STATUS_OK) return status;
  if (s == nullptr) {
    // onnx.defs.get_schema's messages.
    if (max_inclusive_version < 0) {
      return fail(ONNXL_STATUS_NOT_FOUND,
                  "No schema registered for '" + std::string(op_type) + "' and domain '" + d + "'!");
    }
    return fail(ONNXL_STATUS_NOT_FOUND, "No schema registered for '" + std::string(op_type) + "' version '" +
                                            std::to_string(max_inclusive_version) + "' and domain '" + d + "'!");
  }
  *out = handle_of(s);
  return ONNXL_STATUS_OK;
}

size_t onnxl_schema_count(void) {
  try {
    return all_schemas().size();
  } catch (...) {
    fail(ONNXL_STATUS_OUT_OF_MEMORY, "listing onnx's schemas");
    return 0;
  }
}

const OnnxlOpSchema* onnxl_schema_at(size_t i) {
  size_t n = onnxl_schema_count();
  if (i >= n) {
    fail(ONNXL_STATUS_OUT_OF_RANGE, "schema " + std::to_string(i) + " of " + std::to_string(n));
    return nullptr;
  }
  return handle_of(all_schemas()[i]);
}

OnnxlStatus onnxl_op_schema_info(const OnnxlOpSchema* schema, OnnxlOpSchemaInfo* out) {
  if (schema == nullptr || out == nullptr) return fail(ONNXL_STATUS_NULL_POINTER, "schema or out is NULL");
  const ONNX_NAMESPACE::OpSchema& s = *schema_of(schema);
  OnnxlOpSchemaInfo r{};
  r.name = s.Name().c_str();
  r.domain = s.domain().c_str();
  r.doc = s.doc() != nullptr ? s.doc() : "";
  r.since_version = s.since_version();
  r.deprecated = s.deprecated();
  r.support_level = static_cast<int32_t>(s.support_level());
  r.min_input = s.min_input();
  r.max_input = s.max_input();
  r.min_output = s.min_output();
  r.max_output = s.max_output();
  r.has_function = s.HasFunction();
  r.has_context_dependent_function = s.HasContextDependentFunction();
  r.has_type_and_shape_inference_function = s.has_type_and_shape_inference_function();
  r.input_count = s.inputs().size();
  r.output_count = s.outputs().size();
  r.type_constraint_count = s.typeConstraintParams().size();
  r.attribute_count = s.attributes().size();
  *out = r;
  return ONNXL_STATUS_OK;
}

OnnxlStatus onnxl_op_schema_input(const OnnxlOpSchema* schema, size_t i, OnnxlFormalParameter* out) {
  return formal_parameter(schema, i, out, true);
}

OnnxlStatus onnxl_op_schema_output(const OnnxlOpSchema* schema, size_t i, OnnxlFormalParameter* out) {
  return formal_parameter(schema, i, out, false);
}

OnnxlStatus onnxl_op_schema_type_constraint(const OnnxlOpSchema* schema, size_t i, OnnxlTypeConstraint* out) {
  if (schema == nullptr || out == nullptr) return fail(ONNXL_STATUS_NULL_POINTER, "schema or out is NULL");
  const auto& list = schema_of(schema)->typeConstraintParams();
  if (i >= list.size()) {
    return fail(ONNXL_STATUS_OUT_OF_RANGE, "type constraint " + std::to_string(i) + " of " +
                                               std::to_string(list.size()) + " of " + schema_of(schema)->Name());
  }
  out->type_param_str = list[i].type_param_str.c_str();
  out->description = list[i].description.c_str();
  out->allowed_type_count = list[i].allowed_type_strs.size();
  return ONNXL_STATUS_OK;
}

const char* onnxl_op_schema_allowed_type(const OnnxlOpSchema* schema, size_t i, size_t j) {
  if (schema == nullptr) {
    fail(ONNXL_STATUS_NULL_POINTER, "schema is NULL");
    return nullptr;
  }
  const auto& list = schema_of(schema)->typeConstraintParams();
  if (i >= list.size() || j >= list[i].allowed_type_strs.size()) {
    fail(ONNXL_STATUS_OUT_OF_RANGE, "allowed type " + std::to_string(j) + " of type constraint " + std::to_string(i));
    return nullptr;
  }
  return list[i].allowed_type_strs[j].c_str();
}

OnnxlStatus onnxl_op_schema_attribute(const OnnxlOpSchema* schema, size_t i, OnnxlAttributeSchema* out) {
  if (schema == nullptr || out == nullptr) return fail(ONNXL_STATUS_NULL_POINTER, "schema or out is NULL");
  std::vector<const ONNX_NAMESPACE::OpSchema::Attribute*> attrs;
  OnnxlStatus status = guarded([&] { attrs = sorted_attributes(*schema_of(schema)); });
  if (status != ONNXL_STATUS_OK) return status;
  if (i >= attrs.size()) {
    return fail(ONNXL_STATUS_OUT_OF_RANGE, "attribute " + std::to_string(i) + " of " + std::to_string(attrs.size()) +
                                               " of " + schema_of(schema)->Name());
  }
  const auto& a = *attrs[i];
  out->name = a.name.c_str();
  out->description = a.description.c_str();
  out->type = static_cast<int32_t>(a.type);
  out->required = a.required;
  // onnx stores an attribute without a default as an AttributeProto with no name.
  out->default_value = a.default_value.has_name() ? a.default_value.c_ptr() : nullptr;
  return ONNXL_STATUS_OK;
}

OnnxlStatus onnxl_parse_model_text(const char* text, OnnxlModelProto** out) {
  return parse_text<ONNX_NAMESPACE::ModelProto>(text, out, onnxl_model_proto_new, onnxl_model_proto_free);
}

OnnxlStatus onnxl_parse_graph_text(const char* text, OnnxlGraphProto** out) {
  return parse_text<ONNX_NAMESPACE::GraphProto>(text, out, onnxl_graph_proto_new, onnxl_graph_proto_free);
}

OnnxlStatus onnxl_parse_function_text(const char* text, OnnxlFunctionProto** out) {
  return parse_text<ONNX_NAMESPACE::FunctionProto>(text, out, onnxl_function_proto_new, onnxl_function_proto_free);
}

OnnxlStatus onnxl_parse_node_text(const char* text, OnnxlNodeProto** out) {
  return parse_text<ONNX_NAMESPACE::NodeProto>(text, out, onnxl_node_proto_new, onnxl_node_proto_free);
}

OnnxlStatus onnxl_model_to_text(const OnnxlModelProto* model, char** out, size_t* length) {
  return to_text<ONNX_NAMESPACE::ModelProto>(model, out, length);
}

OnnxlStatus onnxl_graph_to_text(const OnnxlGraphProto* graph, char** out, size_t* length) {
  return to_text<ONNX_NAMESPACE::GraphProto>(graph, out, length);
}

OnnxlStatus onnxl_function_to_text(const OnnxlFunctionProto* function, char** out, size_t* length) {
  return to_text<ONNX_NAMESPACE::FunctionProto>(function, out, length);
}

OnnxlStatus onnxl_node_to_text(const OnnxlNodeProto* node, char** out, size_t* length) {
  return to_text<ONNX_NAMESPACE::NodeProto>(node, out, length);
}

void onnxl_text_free(char* text) {
  std::free(text);
}

}  // extern "C"
