/*
 * onnx_light_onnx.h: onnx's checker, shape inference, version converter, operator schemas and
 * text format (parser, printer) over onnx_light models, as a C ABI. The functions live in the
 * optional onnx component (library onnx_light_onnx: onnx's own C++ sources built against
 * <onnx_light/onnx_pb.h>; CMake find_package(onnx_light COMPONENTS onnx), target
 * onnx_light::onnx), not in the core library. See docs/cpp.md, "onnx's C++ library on
 * onnx_light".
 *
 * Conventions are the core library's (onnx_light.h): fallible functions return OnnxlStatus and
 * write out-parameters only on success; onnxl_last_error_message() describes the failure, with
 * onnx's own message where onnx gives one (ONNXL_STATUS_VALIDATION for onnx's ValidationError,
 * ONNXL_STATUS_INFERENCE for InferenceError, ONNXL_STATUS_CONVERSION for ConvertError,
 * ONNXL_STATUS_NOT_FOUND for an unknown schema, ONNXL_STATUS_PARSE for text onnx's parser
 * refuses). No C++ exception crosses the boundary. Options pointers may be NULL (defaults).
 * Models are read in place: nothing is serialized or copied to check them, and models over 2 GB
 * work.
 */
#ifndef ONNX_LIGHT_ONNX_H
#define ONNX_LIGHT_ONNX_H

#include "onnx_light.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The onnx release whose C++ library the component is built from, e.g. "1.23.2". */
const char *onnxl_onnx_version(void);

/**
 * The highest opset version of `domain` ("" is the default domain, as in onnx) that onnx's
 * registry knows (onnx.defs.onnx_opset_version() for the default domain); -1 and
 * ONNXL_STATUS_NOT_FOUND for an unknown domain.
 */
int64_t onnxl_onnx_opset_version(const char *domain);

/** Options of onnxl_check_model (onnx.checker.check_model's arguments). */
typedef struct OnnxlCheckOptions {
  /** sizeof(OnnxlCheckOptions) as compiled by the caller (set by the default function). */
  size_t struct_size;
  /** Also run strict shape inference over the model (onnx's full_check). */
  bool full_check;
  /** Skip the check that each node's opset exists for its operator. */
  bool skip_opset_compatibility_check;
  /** Also check nodes of custom domains against the schemas registered for them. */
  bool check_custom_domain;
} OnnxlCheckOptions;

/** The defaults: everything false (onnx's). */
OnnxlCheckOptions onnxl_check_options_default(void);

/**
 * Runs onnx's checker (onnx::checker::check_model) over `model`, in place; any number of threads
 * may check the same model at once. onnx's code reads tensor payloads as `const std::string&`:
 * each payload not already held in a std::string is copied into one that stays with the model
 * (see onnxl_model_proto_release_cxx_copies, which gives that memory back once no thread reads
 * the model through the C++ classes).
 */
OnnxlStatus onnxl_check_model(const OnnxlModelProto *model, const OnnxlCheckOptions *options);

/**
 * Runs onnx's checker over the model file at `path` (NUL-terminated), as
 * onnx.checker.check_model(path): external data is checked against the model's directory.
 */
OnnxlStatus onnxl_check_model_path(const char *path, const OnnxlCheckOptions *options);

/** Options of shape inference (onnx.shape_inference.infer_shapes' arguments). */
typedef struct OnnxlShapeInferenceOptions {
  /** sizeof(OnnxlShapeInferenceOptions) as compiled by the caller. */
  size_t struct_size;
  /** Check the types of inputs and outputs against the schemas. */
  bool check_type;
  /** Fail on the first inference error instead of skipping the node. */
  bool strict_mode;
  /** Propagate constant data for shape computations (data propagation). */
  bool data_prop;
} OnnxlShapeInferenceOptions;

/** The defaults: everything false (onnx's). */
OnnxlShapeInferenceOptions onnxl_shape_inference_options_default(void);

/**
 * Infers shapes into `model` itself (onnx::shape_inference::InferShapes): value_info gains the
 * inferred types. The model is not copied; the payload copies onnx's reads make (see
 * onnxl_check_model) are freed before the call returns.
 */
OnnxlStatus onnxl_infer_shapes_in_place(OnnxlModelProto *model, const OnnxlShapeInferenceOptions *options);

/**
 * Infers shapes into a copy of `model`, written to `*out` (free with onnxl_model_proto_free),
 * as onnx.shape_inference.infer_shapes. The copy is a full one (payloads borrowed from a no-copy
 * load stay borrowed); onnxl_infer_shapes_in_place avoids it.
 */
OnnxlStatus onnxl_infer_shapes(const OnnxlModelProto *model, const OnnxlShapeInferenceOptions *options,
                               OnnxlModelProto **out);

/** Infers shapes of the model file `model_path` and writes the result to `output_path`. */
OnnxlStatus onnxl_infer_shapes_path(const char *model_path, const char *output_path,
                                    const OnnxlShapeInferenceOptions *options);

/**
 * Converts `model` to the default domain's opset `target_version`
 * (onnx::version_conversion::ConvertVersion); the result goes to `*out` (free with
 * onnxl_model_proto_free).
 */
OnnxlStatus onnxl_convert_version(const OnnxlModelProto *model, int64_t target_version, OnnxlModelProto **out);

/**
 * A copy of `model` with its calls to model-local functions inlined, recursively
 * (onnx::inliner::InlineLocalFunctions); with `convert_version` non-zero, functions of another
 * default-domain opset are converted first. The result goes to `*out` (free with
 * onnxl_model_proto_free).
 */
OnnxlStatus onnxl_inline_local_functions(const OnnxlModelProto *model, int convert_version, OnnxlModelProto **out);

/**
 * A copy of `model` with the calls to the `count` functions (`domains[i]`, `names[i]`) inlined
 * (with `exclude` non-zero: every function but those); model-local functions only, or also the
 * functions of operator schemas with `inline_schema_functions` non-zero
 * (onnx::inliner::InlineSelectedLocalFunctions / InlineSelectedFunctions).
 */
OnnxlStatus onnxl_inline_selected_functions(const OnnxlModelProto *model, const char *const *domains,
                                            const char *const *names, size_t count, int exclude,
                                            int inline_schema_functions, OnnxlModelProto **out);

/** An operator schema of onnx's registry; lives as long as the process. */
typedef struct OnnxlOpSchema OnnxlOpSchema;

/**
 * The schema of `op_type` in `domain` ("" is the default domain; NULL means "") with the highest
 * since_version not above `max_inclusive_version` (negative: the latest). ONNXL_STATUS_NOT_FOUND,
 * with onnx's message, when there is none.
 */
OnnxlStatus onnxl_get_schema(const char *op_type, int64_t max_inclusive_version, const char *domain,
                             const OnnxlOpSchema **out);

/** The number of schemas of every operator and every version (onnx's get_all_schemas_with_history). */
size_t onnxl_schema_count(void);

/** Schema `i` of that list (NULL and ONNXL_STATUS_OUT_OF_RANGE past the end); the order is onnx's. */
const OnnxlOpSchema *onnxl_schema_at(size_t i);

/** How a formal parameter takes values (onnx's OpSchema.FormalParameterOption). */
typedef enum OnnxlParameterOption {
  ONNXL_PARAMETER_SINGLE = 0,
  ONNXL_PARAMETER_OPTIONAL = 1,
  ONNXL_PARAMETER_VARIADIC = 2,
} OnnxlParameterOption;

/** An input or output of an operator. The strings belong to the schema. */
typedef struct OnnxlFormalParameter {
  const char *name;
  /** A type ("tensor(float)") or the name of a type constraint ("T"). */
  const char *type_str;
  const char *description;
  OnnxlParameterOption option;
  /** Variadic only: whether all values have the same type. */
  bool is_homogeneous;
  /** Variadic only: the minimum number of values. */
  int32_t min_arity;
  /** onnx's OpSchema.DifferentiationCategory: 0 unknown, 1 differentiable, 2 not. */
  int32_t differentiation_category;
} OnnxlFormalParameter;

/** A type constraint: a type parameter and the types it allows. */
typedef struct OnnxlTypeConstraint {
  const char *type_param_str;
  const char *description;
  /** The number of allowed types (onnxl_op_schema_allowed_type). */
  size_t allowed_type_count;
} OnnxlTypeConstraint;

/** An attribute of an operator. */
typedef struct OnnxlAttributeSchema {
  const char *name;
  const char *description;
  /** The AttributeProto type (ONNXL_ATTRIBUTE_PROTO_ATTRIBUTE_TYPE_*). */
  int32_t type;
  bool required;
  /** The default value, or NULL when the attribute has none; belongs to the schema. */
  const OnnxlAttributeProto *default_value;
} OnnxlAttributeSchema;

/** Scalar facts of a schema (onnx's OpSchema properties of the same names). */
typedef struct OnnxlOpSchemaInfo {
  const char *name;
  /** "" for the default domain, as onnx reports it. */
  const char *domain;
  /** The documentation text ("" when the build dropped it). */
  const char *doc;
  int32_t since_version;
  bool deprecated;
  /** 0 common, 1 experimental (onnx's OpSchema.SupportType). */
  int32_t support_level;
  int32_t min_input;
  int32_t max_input;
  int32_t min_output;
  int32_t max_output;
  bool has_function;
  bool has_context_dependent_function;
  bool has_type_and_shape_inference_function;
  size_t input_count;
  size_t output_count;
  size_t type_constraint_count;
  /** Attributes are indexed in name order. */
  size_t attribute_count;
} OnnxlOpSchemaInfo;

OnnxlStatus onnxl_op_schema_info(const OnnxlOpSchema *schema, OnnxlOpSchemaInfo *out);
OnnxlStatus onnxl_op_schema_input(const OnnxlOpSchema *schema, size_t i, OnnxlFormalParameter *out);
OnnxlStatus onnxl_op_schema_output(const OnnxlOpSchema *schema, size_t i, OnnxlFormalParameter *out);
OnnxlStatus onnxl_op_schema_type_constraint(const OnnxlOpSchema *schema, size_t i, OnnxlTypeConstraint *out);
/** Allowed type `j` of type constraint `i` ("tensor(float)"); NULL past the end. */
const char *onnxl_op_schema_allowed_type(const OnnxlOpSchema *schema, size_t i, size_t j);
OnnxlStatus onnxl_op_schema_attribute(const OnnxlOpSchema *schema, size_t i, OnnxlAttributeSchema *out);

/*
 * onnx's text format (onnx.parser / onnx.printer): onnx's OnnxParser and printer
 * (onnx/defs/parser.h, onnx/defs/printer.h) on onnx_light messages.
 *
 * The parse functions read NUL-terminated text, as onnx's OnnxParser(const char*) does, and write
 * a new message to `*out` (free it with the message's _free function). Text that does not parse
 * is ONNXL_STATUS_PARSE with onnx's message ("[ParseError at position (line: 1 column: 9)]\n
 * Error context: ...\n..."). Where onnx's parser throws instead, the status says what it threw:
 * ONNXL_STATUS_OUT_OF_RANGE for std::out_of_range (an integer literal past int64, onnx's Python
 * raises IndexError), ONNXL_STATUS_INVALID_ARGUMENT for std::invalid_argument,
 * ONNXL_STATUS_INTERNAL for other runtime errors (an unrepresentable float literal, RuntimeError).
 */
OnnxlStatus onnxl_parse_model_text(const char *text, OnnxlModelProto **out);
OnnxlStatus onnxl_parse_graph_text(const char *text, OnnxlGraphProto **out);
OnnxlStatus onnxl_parse_function_text(const char *text, OnnxlFunctionProto **out);
OnnxlStatus onnxl_parse_node_text(const char *text, OnnxlNodeProto **out);

/*
 * onnx's text of a message (onnx.printer.to_text; onnx::ProtoToString), written to `*out`: a
 * NUL-terminated string of `*length` bytes (`length` may be NULL; the text holds a NUL byte only
 * where a string attribute does), freed with onnxl_text_free. The message is read in place; as
 * with onnxl_check_model, tensor payloads the printer reads are copied into std::strings that stay
 * with the message (onnxl_model_proto_release_cxx_copies gives a model's back).
 */
OnnxlStatus onnxl_model_to_text(const OnnxlModelProto *model, char **out, size_t *length);
OnnxlStatus onnxl_graph_to_text(const OnnxlGraphProto *graph, char **out, size_t *length);
OnnxlStatus onnxl_function_to_text(const OnnxlFunctionProto *function, char **out, size_t *length);
OnnxlStatus onnxl_node_to_text(const OnnxlNodeProto *node, char **out, size_t *length);

/** Frees a text of onnxl_*_to_text (NULL is ignored). */
void onnxl_text_free(char *text);

#ifdef __cplusplus
}
#endif

#endif /* ONNX_LIGHT_ONNX_H */
