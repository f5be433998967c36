/* Consumer of the installed onnx_light package (C, shared library): prints a model summary;
 * with a second argument, also saves the model there, loads the saved file back and checks that
 * it encodes to the same bytes. */
#include <stdio.h>
#include <string.h>

#include <onnx_light.h>

/* Saves `model` to `path`, loads it back and compares the encodings; 0 when they are equal. */
static int save_and_reload(const OnnxlModelProto *model, const char *path) {
  OnnxlModelProto *again = NULL;
  OnnxlBuffer *a = NULL, *b = NULL;
  int same;
  if (onnxl_save_model(model, path, NULL) != ONNXL_STATUS_OK ||
      onnxl_load_model(path, NULL, &again) != ONNXL_STATUS_OK ||
      onnxl_serialize_model(model, NULL, &a) != ONNXL_STATUS_OK ||
      onnxl_serialize_model(again, NULL, &b) != ONNXL_STATUS_OK) {
    fprintf(stderr, "%s: %s\n", path, onnxl_last_error_message());
    onnxl_model_proto_free(again);
    onnxl_buffer_free(a);
    return 1;
  }
  same = onnxl_buffer_size(a) == onnxl_buffer_size(b) &&
         memcmp(onnxl_buffer_data(a), onnxl_buffer_data(b), onnxl_buffer_size(a)) == 0;
  printf("consumer_c: saved %s (%lu bytes), loaded back: %s\n", path, (unsigned long)onnxl_buffer_size(b),
         same ? "identical" : "DIFFERENT");
  onnxl_buffer_free(a);
  onnxl_buffer_free(b);
  onnxl_model_proto_free(again);
  return same ? 0 : 1;
}

int main(int argc, char **argv) {
  OnnxlModelProto *model = NULL;
  const OnnxlGraphProto *graph;
  size_t payload = 0;
  OnnxlStatus st;
  int rc = 0;
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: %s model.onnx [saved.onnx]\n", argv[0]);
    return 2;
  }
  st = onnxl_load_model(argv[1], NULL, &model);
  if (st != ONNXL_STATUS_OK) {
    fprintf(stderr, "%s: %s\n", onnxl_status_name((uint32_t)st), onnxl_last_error_message());
    return 1;
  }
  graph = onnxl_model_proto_graph(model);
  for (size_t i = 0; i < onnxl_graph_proto_initializer_size(graph); ++i) {
    const uint8_t *data = NULL;
    size_t len = 0;
    if (onnxl_tensor_proto_raw_data(onnxl_graph_proto_initializer(graph, i), &data, &len) == ONNXL_STATUS_OK) {
      payload += len;
    }
  }
  printf("consumer_c (onnx_light %s, shared): %s: ir_version %lld, producer %.*s, graph %.*s: %zu nodes, "
         "%zu initializers, %zu bytes of raw_data\n",
         onnxl_version(), argv[1], (long long)onnxl_model_proto_ir_version(model),
         (int)onnxl_model_proto_producer_name(model).len, onnxl_model_proto_producer_name(model).data,
         (int)onnxl_graph_proto_name(graph).len, onnxl_graph_proto_name(graph).data,
         onnxl_graph_proto_node_size(graph), onnxl_graph_proto_initializer_size(graph), payload);
  if (argc == 3) {
    rc = save_and_reload(model, argv[2]);
  }
  onnxl_model_proto_free(model);
  return rc;
}
