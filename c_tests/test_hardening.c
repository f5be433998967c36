/* Option values a hostile or careless C caller can pass: thread counts far above the cap
 * (refused, no thread is started), and boolean fields holding a byte other than 0 or 1
 * (refused, naming the field; reading such a byte as a Rust `bool` would be undefined
 * behaviour). Also: onnxl_release_thread_pools() after parallel work; models nested as deep as
 * a parse accepts, and far deeper through the accessors, on a thread with a 256 KiB stack
 * (serialize, parse, copy and free never overflow it; too deep is refused at serialize time).
 *
 * Usage: test_hardening MODEL.onnx TEMP_DIR */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>

#include "test_util.h"

static const char *model_path;
static const char *tmp_dir;

/* Sets the byte of a boolean field to `v` whatever the field's declared type. */
#define SET_BYTE(field, v) memset(&(field), (v), 1)

static void test_thread_counts_are_capped(void) {
  OnnxlModelProto *m = NULL;
  OnnxlBuffer *b = NULL;
  OnnxlParseOptions p = onnxl_parse_options_default();
  OnnxlSerializeOptions s = onnxl_serialize_options_default();
  OnnxlExternalDataOptions e = onnxl_external_data_options_default();

  CHECK_OK(onnxl_load_model(model_path, NULL, &m));
  p.num_threads = INT_MAX;
  CHECK_STATUS(onnxl_load_model(model_path, &p, &m), ONNXL_STATUS_INVALID_ARGUMENT, "num_threads");
  p.num_threads = 1000000;
  CHECK_STATUS(onnxl_load_model(model_path, &p, &m), ONNXL_STATUS_INVALID_ARGUMENT, "num_threads");
  s.num_threads = INT_MAX;
  CHECK_STATUS(onnxl_serialize_model(m, &s, &b), ONNXL_STATUS_INVALID_ARGUMENT, "num_threads");
  CHECK_STATUS(onnxl_save_model(m, test_path(tmp_dir, "t.onnx"), &s), ONNXL_STATUS_INVALID_ARGUMENT,
               "num_threads");
  e.num_threads = INT_MAX;
  CHECK_STATUS(onnxl_save_model_with_external_data(m, test_path(tmp_dir, "e.onnx"), &e),
               ONNXL_STATUS_INVALID_ARGUMENT, "num_threads");
  /* The documented maximum is accepted; parallel work, then the pools are released. */
  s.num_threads = 4;
  CHECK_OK(onnxl_serialize_model(m, &s, &b));
  onnxl_buffer_free(b);
  onnxl_release_thread_pools();
  CHECK_OK(onnxl_serialize_model(m, &s, &b)); /* pools are rebuilt on demand */
  onnxl_buffer_free(b);
  onnxl_release_thread_pools();
  onnxl_model_proto_free(m);
}

static void test_boolean_fields_are_validated(void) {
  OnnxlModelProto *m = NULL, *out = (OnnxlModelProto *)NULL;
  OnnxlParseOptions p;
  OnnxlExternalDataOptions e;
  OnnxlExternalLoadOptions l;
  const char *saved = NULL;

  CHECK_OK(onnxl_load_model(model_path, NULL, &m));

  p = onnxl_parse_options_default();
  SET_BYTE(p.no_copy, 0xFF);
  CHECK_STATUS(onnxl_load_model(model_path, &p, &out), ONNXL_STATUS_INVALID_ARGUMENT, "no_copy");
  p = onnxl_parse_options_default();
  SET_BYTE(p.skip_raw_data, 2);
  CHECK_STATUS(onnxl_load_model(model_path, &p, &out), ONNXL_STATUS_INVALID_ARGUMENT, "skip_raw_data");
  CHECK(out == NULL);

  e = onnxl_external_data_options_default();
  SET_BYTE(e.all_tensors_to_one_file, 0xFF);
  CHECK_STATUS(onnxl_save_model_with_external_data(m, test_path(tmp_dir, "b.onnx"), &e),
               ONNXL_STATUS_INVALID_ARGUMENT, "all_tensors_to_one_file");
  e = onnxl_external_data_options_default();
  SET_BYTE(e.convert_attribute, 0x80);
  CHECK_STATUS(onnxl_save_model_with_external_data(m, test_path(tmp_dir, "b.onnx"), &e),
               ONNXL_STATUS_INVALID_ARGUMENT, "convert_attribute");
  e = onnxl_external_data_options_default();
  SET_BYTE(e.checksum, 0xFF);
  CHECK_STATUS(onnxl_save_model_with_external_data(m, test_path(tmp_dir, "b.onnx"), &e),
               ONNXL_STATUS_INVALID_ARGUMENT, "checksum");
  e = onnxl_external_data_options_default();
  SET_BYTE(e.sync, 0xFF);
  CHECK_STATUS(onnxl_save_model_with_external_data(m, test_path(tmp_dir, "b.onnx"), &e),
               ONNXL_STATUS_INVALID_ARGUMENT, "sync");
  e = onnxl_external_data_options_default();
  SET_BYTE(e.encrypt, 0xFF);
  CHECK_STATUS(onnxl_save_model_with_external_data(m, test_path(tmp_dir, "b.onnx"), &e),
               ONNXL_STATUS_INVALID_ARGUMENT, "encrypt");
  {
    struct stat st;
    CHECK(stat(test_path(tmp_dir, "b.onnx"), &st) != 0); /* nothing was written */
  }

  /* A valid save to load back with invalid load options. */
  e = onnxl_external_data_options_default();
  e.size_threshold = 0;
  saved = test_path(tmp_dir, "ok.onnx");
  CHECK_OK(onnxl_save_model_with_external_data(m, saved, &e));
  l = onnxl_external_load_options_default();
  SET_BYTE(l.load_external_data, 0xFF);
  CHECK_STATUS(onnxl_load_model_with_external_data(test_path(tmp_dir, "ok.onnx"), NULL, &l, &out),
               ONNXL_STATUS_INVALID_ARGUMENT, "load_external_data");
  l = onnxl_external_load_options_default();
  SET_BYTE(l.verify_checksums, 0xFF);
  CHECK_STATUS(onnxl_load_model_with_external_data(test_path(tmp_dir, "ok.onnx"), NULL, &l, &out),
               ONNXL_STATUS_INVALID_ARGUMENT, "verify_checksums");
  l = onnxl_external_load_options_default();
  SET_BYTE(l.has_key, 0xFF);
  CHECK_STATUS(onnxl_load_model_with_external_data(test_path(tmp_dir, "ok.onnx"), NULL, &l, &out),
               ONNXL_STATUS_INVALID_ARGUMENT, "has_key");
  CHECK(out == NULL);
  /* 0 and 1 are accepted. */
  l = onnxl_external_load_options_default();
  SET_BYTE(l.verify_checksums, 1);
  CHECK_OK(onnxl_load_model_with_external_data(test_path(tmp_dir, "ok.onnx"), NULL, &l, &out));
  onnxl_model_proto_free(out);
  onnxl_model_proto_free(m);
}

/* A model whose graph nests `levels` graphs in attributes (graph -> node -> attribute -> graph),
 * built with the accessors (no recursion on the caller's side). */
static OnnxlModelProto *nested_model(int levels) {
  OnnxlModelProto *m = onnxl_model_proto_new();
  OnnxlGraphProto *g = onnxl_model_proto_mutable_graph(m);
  for (int i = 0; i < levels; i++) {
    OnnxlAttributeProto *a = onnxl_node_proto_add_attribute(onnxl_graph_proto_add_node(g));
    g = onnxl_attribute_proto_mutable_g(a);
  }
  return m;
}

static void *deep_models_on_a_small_stack(void *unused) {
  OnnxlModelProto *m, *copy, *back;
  OnnxlBuffer *b = NULL, *b2 = NULL;
  OnnxlParseOptions p = onnxl_parse_options_default();
  (void)unused;

  /* 333 levels: 1 + 3 x 333 = 1000 messages below the model, the most a parse accepts. */
  m = nested_model(333);
  CHECK_OK(onnxl_serialize_model(m, NULL, &b));
  back = onnxl_model_proto_new();
  CHECK_STATUS(onnxl_model_proto_parse_from_bytes(back, onnxl_buffer_data(b), onnxl_buffer_size(b), NULL),
               ONNXL_STATUS_LIMIT_EXCEEDED, "recursion limit 100");
  p.max_recursion_depth = 1000;
  CHECK_OK(onnxl_model_proto_parse_from_bytes(back, onnxl_buffer_data(b), onnxl_buffer_size(b), &p));
  copy = onnxl_model_proto_new();
  CHECK_OK(onnxl_model_proto_copy_from(copy, back));
  CHECK_OK(onnxl_serialize_model(copy, NULL, &b2));
  CHECK(onnxl_buffer_size(b2) == onnxl_buffer_size(b));
  CHECK(memcmp(onnxl_buffer_data(b2), onnxl_buffer_data(b), onnxl_buffer_size(b)) == 0);
  onnxl_buffer_free(b2);
  onnxl_buffer_free(b);
  onnxl_model_proto_free(copy);
  onnxl_model_proto_free(back);
  onnxl_model_proto_free(m);

  /* 334 levels (1003 messages deep): refused by every serializer, and still copied and freed. */
  m = nested_model(334);
  b = NULL;
  CHECK_STATUS(onnxl_serialize_model(m, NULL, &b), ONNXL_STATUS_LIMIT_EXCEEDED, "nests messages");
  CHECK(b == NULL);
  CHECK_STATUS(onnxl_model_proto_serialize(m, NULL, &b), ONNXL_STATUS_LIMIT_EXCEEDED, "1000");
  onnxl_model_proto_free(m);

  /* 100 000 levels: serialize and save refuse it; copy, byte size and free do not overflow. */
  m = nested_model(100000);
  CHECK_STATUS(onnxl_serialize_model(m, NULL, &b), ONNXL_STATUS_LIMIT_EXCEEDED, "nests messages");
  CHECK_STATUS(onnxl_save_model(m, test_path(tmp_dir, "deep.onnx"), NULL), ONNXL_STATUS_LIMIT_EXCEEDED,
               "nests messages");
  {
    struct stat st;
    CHECK(stat(test_path(tmp_dir, "deep.onnx"), &st) != 0); /* nothing was written */
  }
  copy = onnxl_model_proto_new();
  CHECK_OK(onnxl_model_proto_copy_from(copy, m));
  CHECK(onnxl_model_proto_byte_size(copy) == onnxl_model_proto_byte_size(m));
  CHECK(onnxl_model_proto_byte_size(m) > 300000);
  onnxl_model_proto_free(copy);
  onnxl_model_proto_free(m);
  return NULL;
}

static void test_deep_models_on_a_256k_stack(void) {
  pthread_attr_t attr;
  pthread_t t;
  CHECK(pthread_attr_init(&attr) == 0);
  CHECK(pthread_attr_setstacksize(&attr, 256 * 1024) == 0);
  CHECK(pthread_create(&t, &attr, deep_models_on_a_small_stack, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  pthread_attr_destroy(&attr);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL.onnx TEMP_DIR\n", argv[0]);
    return 2;
  }
  model_path = argv[1];
  tmp_dir = argv[2];
  test_mkdir(tmp_dir);
  RUN(test_thread_counts_are_capped);
  RUN(test_boolean_fields_are_validated);
  RUN(test_deep_models_on_a_256k_stack);
  return test_summary("test_hardening");
}
