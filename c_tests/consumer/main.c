/* Consumer of the installed onnx_light package (C, shared library): prints a model summary. */
#include <stdio.h>

#include <onnx_light.h>

int main(int argc, char **argv) {
  OnnxlModelProto *model = NULL;
  const OnnxlGraphProto *graph;
  size_t payload = 0;
  OnnxlStatus st;
  if (argc != 2) {
    fprintf(stderr, "usage: %s model.onnx\n", argv[0]);
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
  onnxl_model_proto_free(model);
  return 0;
}
