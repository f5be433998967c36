/* Example: load an ONNX model through the onnx_light C ABI, print its graph, and read a tensor
 * WITHOUT copying it (no_copy load of a memory-mapped file + an owner token that keeps the bytes
 * alive after the model is freed).
 *
 *   print_graph model.onnx
 *
 * Build: cc -std=c11 print_graph.c $(pkg-config --cflags --libs onnx_light)
 *    or: CMake, find_package(onnx_light) + target_link_libraries(... onnx_light::onnx_light)
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "onnx_light.h"

/* Views are (pointer, length), not NUL-terminated: print them with %.*s. */
#define STR(view) (int)(view).len, (view).data

static int fail(const char *what, OnnxlStatus st) {
  fprintf(stderr, "%s failed: %s: %s\n", what, onnxl_status_name((uint32_t)st), onnxl_last_error_message());
  return 1;
}

static void print_value_info(const char *kind, const OnnxlValueInfoProto *v) {
  const OnnxlTypeProto *type = onnxl_value_info_proto_type(v);
  printf("  %s %.*s", kind, STR(onnxl_value_info_proto_name(v)));
  if (onnxl_type_proto_value_case(type) == ONNXL_TYPE_PROTO_VALUE_CASE_TENSOR_TYPE) {
    const OnnxlTypeProtoTensor *tt = onnxl_type_proto_tensor_type(type);
    const OnnxlTensorShapeProto *shape = onnxl_type_proto_tensor_shape(tt);
    printf(": tensor(elem_type %" PRId32 ") [", onnxl_type_proto_tensor_elem_type(tt));
    for (size_t i = 0; i < onnxl_tensor_shape_proto_dim_size(shape); ++i) {
      const OnnxlTensorShapeProtoDimension *d = onnxl_tensor_shape_proto_dim(shape, i);
      if (i > 0) {
        printf(", ");
      }
      switch (onnxl_tensor_shape_proto_dimension_value_case(d)) {
        case ONNXL_TENSOR_SHAPE_PROTO_DIMENSION_VALUE_CASE_DIM_VALUE:
          printf("%" PRId64, onnxl_tensor_shape_proto_dimension_dim_value(d));
          break;
        case ONNXL_TENSOR_SHAPE_PROTO_DIMENSION_VALUE_CASE_DIM_PARAM:
          printf("%.*s", STR(onnxl_tensor_shape_proto_dimension_dim_param(d)));
          break;
        default:
          printf("?");
      }
    }
    printf("]");
  }
  printf("\n");
}

int main(int argc, char **argv) {
  OnnxlParseOptions opts = onnxl_parse_options_default();
  OnnxlModelProto *model = NULL;
  const OnnxlGraphProto *graph;
  OnnxlStatus st;
  if (argc != 2) {
    fprintf(stderr, "usage: %s model.onnx\n", argv[0]);
    return 2;
  }

  /* no_copy + mmap: tensor bytes stay in the file's mapping; nothing is copied. */
  opts.no_copy = true;
  opts.file_load_mode = ONNXL_FILE_LOAD_MODE_MMAP;
  opts.raw_data_threshold = 0; /* borrow even the small payloads */
  st = onnxl_load_model(argv[1], &opts, &model);
  if (st != ONNXL_STATUS_OK) {
    return fail("onnxl_load_model", st);
  }

  printf("onnx_light %s\n", onnxl_version());
  printf("model: ir_version %" PRId64 ", producer \"%.*s\" %.*s\n", onnxl_model_proto_ir_version(model),
         STR(onnxl_model_proto_producer_name(model)), STR(onnxl_model_proto_producer_version(model)));
  for (size_t i = 0; i < onnxl_model_proto_opset_import_size(model); ++i) {
    const OnnxlOperatorSetIdProto *op = onnxl_model_proto_opset_import(model, i);
    OnnxlStr domain = onnxl_operator_set_id_proto_domain(op);
    if (domain.len == 0) {
      domain.data = "ai.onnx";
      domain.len = strlen(domain.data);
    }
    printf("opset: %.*s %" PRId64 "\n", STR(domain), onnxl_operator_set_id_proto_version(op));
  }

  graph = onnxl_model_proto_graph(model);
  printf("graph \"%.*s\": %zu nodes, %zu initializers\n", STR(onnxl_graph_proto_name(graph)),
         onnxl_graph_proto_node_size(graph), onnxl_graph_proto_initializer_size(graph));
  for (size_t i = 0; i < onnxl_graph_proto_input_size(graph); ++i) {
    print_value_info("input ", onnxl_graph_proto_input(graph, i));
  }
  for (size_t i = 0; i < onnxl_graph_proto_output_size(graph); ++i) {
    print_value_info("output", onnxl_graph_proto_output(graph, i));
  }
  for (size_t i = 0; i < onnxl_graph_proto_node_size(graph); ++i) {
    const OnnxlNodeProto *node = onnxl_graph_proto_node(graph, i);
    printf("  node %-8.*s %-8.*s (", STR(onnxl_node_proto_name(node)), STR(onnxl_node_proto_op_type(node)));
    for (size_t j = 0; j < onnxl_node_proto_input_size(node); ++j) {
      printf("%s%.*s", j ? ", " : "", STR(onnxl_node_proto_input(node, j)));
    }
    printf(") -> (");
    for (size_t j = 0; j < onnxl_node_proto_output_size(node); ++j) {
      printf("%s%.*s", j ? ", " : "", STR(onnxl_node_proto_output(node, j)));
    }
    printf(")");
    for (size_t j = 0; j < onnxl_node_proto_attribute_size(node); ++j) {
      const OnnxlAttributeProto *a = onnxl_node_proto_attribute(node, j);
      printf(" %.*s=", STR(onnxl_attribute_proto_name(a)));
      if (onnxl_attribute_proto_type(a) == ONNXL_ATTRIBUTE_PROTO_ATTRIBUTE_TYPE_INT) {
        printf("%" PRId64, onnxl_attribute_proto_i(a));
      } else if (onnxl_attribute_proto_type(a) == ONNXL_ATTRIBUTE_PROTO_ATTRIBUTE_TYPE_FLOAT) {
        printf("%g", (double)onnxl_attribute_proto_f(a));
      } else {
        printf("<type %" PRId32 ">", onnxl_attribute_proto_type(a));
      }
    }
    printf("\n");
  }

  /* Read the first FLOAT initializer without copying; keep its bytes with an owner token. */
  for (size_t i = 0; i < onnxl_graph_proto_initializer_size(graph); ++i) {
    /* raw_data_owner needs the mutable handle (it may move owned bytes into a shared buffer). */
    OnnxlTensorProto *t = onnxl_graph_proto_mutable_initializer(onnxl_model_proto_mutable_graph(model), i);
    const uint8_t *data = NULL;
    size_t len = 0;
    const OnnxlOwner *owner;
    size_t count;
    if (onnxl_tensor_proto_data_type(t) != ONNXL_TENSOR_PROTO_DATA_TYPE_FLOAT || !onnxl_tensor_proto_has_raw_data(t)) {
      continue;
    }
    st = onnxl_tensor_proto_raw_data(t, &data, &len);
    if (st != ONNXL_STATUS_OK) {
      onnxl_model_proto_free(model);
      return fail("onnxl_tensor_proto_raw_data", st);
    }
    printf("tensor %.*s: dims [", STR(onnxl_tensor_proto_name(t)));
    for (size_t d = 0; d < onnxl_tensor_proto_dims_size(t); ++d) {
      printf("%s%" PRId64, d ? ", " : "", onnxl_tensor_proto_dims(t, d));
    }
    printf("], %zu bytes at %p, borrowed from the mapping: %s\n", len, (const void *)data,
           onnxl_tensor_proto_raw_data_is_borrowed(t) ? "yes" : "no");

    owner = onnxl_tensor_proto_raw_data_owner(t);
    if (owner == NULL) {
      onnxl_model_proto_free(model);
      return fail("onnxl_tensor_proto_raw_data_owner", onnxl_last_error_status());
    }
    onnxl_model_proto_free(model); /* the model is gone ... */
    model = NULL;

    count = len / sizeof(float); /* ... the bytes are not: the token holds the mapping */
    printf("  values (read after the model was freed):");
    for (size_t k = 0; k < count && k < 6; ++k) {
      float v;
      memcpy(&v, data + k * sizeof v, sizeof v); /* raw_data is little-endian, maybe unaligned */
      printf(" %.4f", (double)v);
    }
    printf("%s\n", count > 6 ? " ..." : "");
    onnxl_owner_release(owner); /* the mapping goes away with the last token */
    break;
  }
  onnxl_model_proto_free(model);
  return 0;
}
