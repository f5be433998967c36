/* The C ABI of the onnx component (onnx_light_onnx.h) from C:
 *   onnx_c_abi MODEL.onnx... --bad-shapes BAD.onnx
 *     checks each valid model (plain and full), infers its shapes (copy and in place: the same
 *     bytes), converts it, then checks the errors: a model without ir_version, strict inference
 *     of BAD.onnx (Add of shapes [2] and [3]), a
 *                          conversion to an unknown opset, unknown schemas, NULL arguments,
 *                          too-small options, and the schema accessors; and onnx's text format:
 *                          parse and print a model, graph, function and node (the texts are
 *                          the onnx wheel's), and a text onnx's parser refuses. */
#include <onnx_light_onnx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond)                                                           \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, \
              __LINE__, #cond, onnxl_last_error_message());                   \
      ++failures;                                                             \
    }                                                                         \
  } while (0)

static int same_bytes(const OnnxlModelProto *a, const OnnxlModelProto *b) {
  OnnxlBuffer *x = NULL, *y = NULL;
  int same = onnxl_model_proto_serialize(a, NULL, &x) == ONNXL_STATUS_OK &&
             onnxl_model_proto_serialize(b, NULL, &y) == ONNXL_STATUS_OK &&
             onnxl_buffer_size(x) == onnxl_buffer_size(y) &&
             memcmp(onnxl_buffer_data(x), onnxl_buffer_data(y), onnxl_buffer_size(x)) == 0;
  onnxl_buffer_free(x);
  onnxl_buffer_free(y);
  return same;
}

static void test_model(const char *path) {
  OnnxlModelProto *m = NULL;
  CHECK(onnxl_load_model(path, NULL, &m) == ONNXL_STATUS_OK);
  if (m == NULL) return;
  OnnxlCheckOptions full = onnxl_check_options_default();
  CHECK(full.struct_size == sizeof full && !full.full_check);
  CHECK(onnxl_check_model(m, NULL) == ONNXL_STATUS_OK);
  full.full_check = true;
  CHECK(onnxl_check_model(m, &full) == ONNXL_STATUS_OK);
  CHECK(onnxl_check_model_path(path, &full) == ONNXL_STATUS_OK);
  /* The checker's payload copies go back; the model reads the same. */
  OnnxlBuffer *before = NULL;
  CHECK(onnxl_model_proto_serialize(m, NULL, &before) == ONNXL_STATUS_OK);
  CHECK(onnxl_model_proto_release_cxx_copies(m) == ONNXL_STATUS_OK);
  CHECK(onnxl_model_proto_release_cxx_copies(NULL) == ONNXL_STATUS_NULL_POINTER);
  OnnxlModelProto *again = NULL;
  CHECK(onnxl_load_model_from_bytes(onnxl_buffer_data(before), onnxl_buffer_size(before), NULL, &again) == ONNXL_STATUS_OK);
  CHECK(again != NULL && same_bytes(again, m));
  onnxl_model_proto_free(again);
  onnxl_buffer_free(before);

  OnnxlModelProto *inferred = NULL;
  CHECK(onnxl_infer_shapes(m, NULL, &inferred) == ONNXL_STATUS_OK);
  CHECK(onnxl_infer_shapes_in_place(m, NULL) == ONNXL_STATUS_OK);
  CHECK(inferred != NULL && same_bytes(inferred, m));
  onnxl_model_proto_free(inferred);

  OnnxlModelProto *converted = NULL;
  CHECK(onnxl_convert_version(m, 18, &converted) == ONNXL_STATUS_OK);
  CHECK(converted != NULL);
  onnxl_model_proto_free(converted);
  converted = NULL;
  /* onnx's assertion (a std::runtime_error, Python's RuntimeError): ONNXL_STATUS_INTERNAL with
   * onnx's message, which names the source file as onnx's wheels do. */
  CHECK(onnxl_convert_version(m, 10000, &converted) == ONNXL_STATUS_INTERNAL);
  CHECK(converted == NULL);
  CHECK(strncmp(onnxl_last_error_message(), "/project/onnx/version_converter/convert.h:", 42) == 0);
  CHECK(strstr(onnxl_last_error_message(), "invalid version (must be between 1 and ") != NULL);
  CHECK(onnxl_convert_version(m, -1, &converted) == ONNXL_STATUS_INVALID_ARGUMENT);

  /* The inliner: a model without functions comes back as a copy of itself. */
  OnnxlModelProto *inlined = NULL;
  CHECK(onnxl_inline_local_functions(m, 0, &inlined) == ONNXL_STATUS_OK);
  CHECK(inlined != NULL);
  onnxl_model_proto_free(inlined);
  inlined = NULL;
  const char *domains[] = {"local"};
  const char *names[] = {"f"};
  CHECK(onnxl_inline_selected_functions(m, domains, names, 1, 1, 1, &inlined) == ONNXL_STATUS_OK);
  onnxl_model_proto_free(inlined);
  inlined = NULL;
  CHECK(onnxl_inline_selected_functions(m, NULL, names, 1, 0, 0, &inlined) == ONNXL_STATUS_NULL_POINTER);
  CHECK(inlined == NULL);
  CHECK(onnxl_inline_local_functions(NULL, 0, &inlined) == ONNXL_STATUS_NULL_POINTER);
  onnxl_model_proto_free(m);
}

static void test_errors(const char *bad_shapes) {
  OnnxlModelProto *empty = onnxl_model_proto_new();
  /* onnx's own message. */
  CHECK(onnxl_check_model(empty, NULL) == ONNXL_STATUS_VALIDATION);
  CHECK(strcmp(onnxl_last_error_message(), "The model does not have an ir_version set properly.") == 0);
  CHECK(onnxl_last_error_status() == ONNXL_STATUS_VALIDATION);
  CHECK(onnxl_check_model(NULL, NULL) == ONNXL_STATUS_NULL_POINTER);
  CHECK(onnxl_check_model_path("/nonexistent/model.onnx", NULL) != ONNXL_STATUS_OK);
  CHECK(strstr(onnxl_last_error_message(), "/nonexistent/model.onnx") != NULL);
  OnnxlCheckOptions small = onnxl_check_options_default();
  small.struct_size = 1;
  CHECK(onnxl_check_model(empty, &small) == ONNXL_STATUS_INVALID_ARGUMENT);
  OnnxlModelProto *out = NULL;
  CHECK(onnxl_infer_shapes(NULL, NULL, &out) == ONNXL_STATUS_NULL_POINTER && out == NULL);
  CHECK(onnxl_infer_shapes_path("/nonexistent/model.onnx", "/nonexistent/out.onnx", NULL) != ONNXL_STATUS_OK);

  /* Strict inference of a graph adding shapes [2] and [3]: onnx's InferenceError. */
  if (bad_shapes != NULL) {
    OnnxlModelProto *bad = NULL;
    CHECK(onnxl_load_model(bad_shapes, NULL, &bad) == ONNXL_STATUS_OK);
    OnnxlShapeInferenceOptions strict = onnxl_shape_inference_options_default();
    strict.strict_mode = true;
    CHECK(onnxl_infer_shapes(bad, &strict, &out) == ONNXL_STATUS_INFERENCE && out == NULL);
    CHECK(strstr(onnxl_last_error_message(), "Incompatible dimensions") != NULL);
    /* Without strict mode the node is skipped, as onnx does. */
    CHECK(onnxl_infer_shapes(bad, NULL, &out) == ONNXL_STATUS_OK && out != NULL);
    onnxl_model_proto_free(out);
    onnxl_model_proto_free(bad);
  }
  onnxl_model_proto_free(empty);
}

static void test_schemas(void) {
  const OnnxlOpSchema *s = NULL;
  CHECK(onnxl_get_schema("Conv", -1, "", &s) == ONNXL_STATUS_OK);
  OnnxlOpSchemaInfo info;
  CHECK(onnxl_op_schema_info(s, &info) == ONNXL_STATUS_OK);
  CHECK(strcmp(info.name, "Conv") == 0 && strcmp(info.domain, "") == 0 && info.since_version >= 22);
  CHECK(info.input_count == 3 && info.output_count == 1 && info.min_input == 2 && info.max_input == 3);
  OnnxlFormalParameter p;
  CHECK(onnxl_op_schema_input(s, 2, &p) == ONNXL_STATUS_OK);
  CHECK(strcmp(p.name, "B") == 0 && p.option == ONNXL_PARAMETER_OPTIONAL && strcmp(p.type_str, "T") == 0);
  CHECK(onnxl_op_schema_input(s, 3, &p) == ONNXL_STATUS_OUT_OF_RANGE);
  OnnxlTypeConstraint c;
  CHECK(onnxl_op_schema_type_constraint(s, 0, &c) == ONNXL_STATUS_OK);
  CHECK(strcmp(c.type_param_str, "T") == 0 && c.allowed_type_count >= 3);
  CHECK(onnxl_op_schema_allowed_type(s, 0, c.allowed_type_count) == NULL);
  /* Attributes in name order; auto_pad defaults to "NOTSET", kernel_shape has no default. */
  int seen_default = 0, seen_plain = 0;
  for (size_t i = 0; i < info.attribute_count; ++i) {
    OnnxlAttributeSchema a;
    CHECK(onnxl_op_schema_attribute(s, i, &a) == ONNXL_STATUS_OK);
    if (strcmp(a.name, "auto_pad") == 0) {
      seen_default = a.default_value != NULL && !a.required && a.type == 3;
    }
    if (strcmp(a.name, "kernel_shape") == 0) seen_plain = a.default_value == NULL && a.type == 7;
  }
  CHECK(seen_default && seen_plain);
  /* A version before Conv's latest; the ML domain; unknown names with onnx's message. */
  const OnnxlOpSchema *old = NULL;
  CHECK(onnxl_get_schema("Conv", 10, NULL, &old) == ONNXL_STATUS_OK);
  CHECK(onnxl_op_schema_info(old, &info) == ONNXL_STATUS_OK && info.since_version == 1);
  CHECK(onnxl_get_schema("LinearClassifier", -1, "ai.onnx.ml", &old) == ONNXL_STATUS_OK);
  /* As in onnx, the default domain is "", not "ai.onnx". */
  CHECK(onnxl_get_schema("Conv", 10, "ai.onnx", &old) == ONNXL_STATUS_NOT_FOUND);
  CHECK(onnxl_get_schema("NoSuchOp", 5, "", &old) == ONNXL_STATUS_NOT_FOUND);
  CHECK(strcmp(onnxl_last_error_message(), "No schema registered for 'NoSuchOp' version '5' and domain ''!") == 0);
  CHECK(onnxl_get_schema(NULL, 5, "", &old) == ONNXL_STATUS_NULL_POINTER);
  size_t n = onnxl_schema_count();
  CHECK(n > 500 && onnxl_schema_at(0) != NULL && onnxl_schema_at(n) == NULL);
  CHECK(onnxl_last_error_status() == ONNXL_STATUS_OUT_OF_RANGE);
  CHECK(onnxl_onnx_opset_version("") >= 23 && onnxl_onnx_opset_version("ai.onnx.ml") >= 5);
  CHECK(onnxl_onnx_opset_version("no.such.domain") == -1);
  printf("onnx %s: %zu schemas, default opset %lld\n", onnxl_onnx_version(), n,
         (long long)onnxl_onnx_opset_version(""));
}

/* onnx's text format: the expected texts and message are what the onnx wheel's onnx.printer and
 * onnx.parser give for the same input. */
static const char MODEL_TEXT[] =
    "<\n   ir_version: 8,\n   opset_import: [\"\" : 18]\n>\n"
    "agraph (float[N] x, float[N] y) => (float[N] z) {\n   t = Add (x, y)\n   z = Relu (t)\n}";

static void test_text(void) {
  OnnxlModelProto *m = NULL;
  CHECK(onnxl_parse_model_text("<ir_version: 8, opset_import: [\"\" : 18]>\n"
                               "agraph (float[N] x, float[N] y) => (float[N] z) {\n"
                               "  t = Add(x, y)\n  z = Relu(t)\n}",
                               &m) == ONNXL_STATUS_OK);
  CHECK(m != NULL);
  if (m == NULL) return;
  CHECK(onnxl_model_proto_ir_version(m) == 8);
  CHECK(onnxl_check_model(m, NULL) == ONNXL_STATUS_OK);
  char *text = NULL;
  size_t length = 0;
  CHECK(onnxl_model_to_text(m, &text, &length) == ONNXL_STATUS_OK);
  CHECK(text != NULL && length == strlen(MODEL_TEXT) && strcmp(text, MODEL_TEXT) == 0);
  /* The printed text parses back to the same model. */
  OnnxlModelProto *again = NULL;
  CHECK(text != NULL && onnxl_parse_model_text(text, &again) == ONNXL_STATUS_OK);
  CHECK(again != NULL && same_bytes(again, m));
  onnxl_model_proto_free(again);
  onnxl_text_free(text);
  text = NULL;
  const OnnxlGraphProto *g = onnxl_model_proto_graph(m);
  CHECK(onnxl_graph_proto_node_size(g) == 2);
  CHECK(onnxl_node_to_text(onnxl_graph_proto_node(g, 0), &text, NULL) == ONNXL_STATUS_OK);
  CHECK(text != NULL && strcmp(text, "   t = Add (x, y)\n") == 0);
  onnxl_text_free(text);
  onnxl_text_free(NULL);
  onnxl_model_proto_free(m);

  OnnxlGraphProto *graph = NULL;
  CHECK(onnxl_parse_graph_text("g (float x) => (float y) { y = Neg(x) }", &graph) == ONNXL_STATUS_OK);
  text = NULL;
  CHECK(graph != NULL && onnxl_graph_to_text(graph, &text, &length) == ONNXL_STATUS_OK);
  CHECK(text != NULL && strcmp(text, "g (float x) => (float y) {\n   y = Neg (x)\n}") == 0);
  onnxl_text_free(text);
  onnxl_graph_proto_free(graph);
  OnnxlFunctionProto *f = NULL;
  CHECK(onnxl_parse_function_text("<domain: \"d\", opset_import: [\"\" : 18]> f (x) => (y) { y = Neg(x) }", &f) ==
        ONNXL_STATUS_OK);
  text = NULL;
  CHECK(f != NULL && onnxl_function_to_text(f, &text, NULL) == ONNXL_STATUS_OK);
  CHECK(text != NULL && strcmp(text,
                               "<\n  domain: \"d\",\n  opset_import: [\"\" : 18]\n>\n"
                               "f (x) => (y)\n{\n   y = Neg (x)\n}") == 0);
  onnxl_text_free(text);
  onnxl_function_proto_free(f);
  OnnxlNodeProto *node = NULL;
  CHECK(onnxl_parse_node_text("x = Foo(y)", &node) == ONNXL_STATUS_OK);
  OnnxlStr op = onnxl_node_proto_op_type(node);
  CHECK(op.len == 3 && memcmp(op.data, "Foo", 3) == 0);
  onnxl_node_proto_free(node);

  /* A refused text: ONNXL_STATUS_PARSE with onnx's message; nothing is written to out. */
  m = NULL;
  CHECK(onnxl_parse_model_text("<ir_version: 8> g (float x) => (float y) { y = Neg(x ", &m) == ONNXL_STATUS_PARSE);
  CHECK(m == NULL);
  CHECK(strcmp(onnxl_last_error_message(),
               "[ParseError at position (line: 1 column: 54)]\n"
               "Error context: <ir_version: 8> g (float x) => (float y) { y = Neg(x \n"
               "Expected character ) not found.") == 0);
  CHECK(onnxl_last_error_status() == ONNXL_STATUS_PARSE);
  /* An integer literal past int64: onnx's parser throws std::out_of_range. */
  node = NULL;
  CHECK(onnxl_parse_node_text("x = F<a=99999999999999999999>(y)", &node) == ONNXL_STATUS_OUT_OF_RANGE);
  CHECK(node == NULL && strcmp(onnxl_last_error_message(), "stoll") == 0);
  CHECK(onnxl_parse_node_text(NULL, &node) == ONNXL_STATUS_NULL_POINTER);
  CHECK(onnxl_node_to_text(NULL, &text, NULL) == ONNXL_STATUS_NULL_POINTER);
}

int main(int argc, char **argv) {
  const char *bad_shapes = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--bad-shapes") == 0 && i + 1 < argc) {
      bad_shapes = argv[++i];
    } else {
      test_model(argv[i]);
    }
  }
  if (bad_shapes == NULL) {
    fprintf(stderr, "usage: onnx_c_abi MODEL... --bad-shapes MODEL\n");
    return 2;
  }
  test_errors(bad_shapes);
  test_schemas();
  test_text();
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("onnx_c_abi: all checks passed\n");
  return 0;
}
