/* Every failure path of the C ABI, with status code AND message checked: NULL arguments (and
 * out-parameters left untouched), bad files, truncated input (every prefix of a model), invalid
 * options (every field), limits, out-of-range indices, invalid enum values, read-only streams,
 * failed saves leaving the old file intact, and the thread-local last error.
 *
 * Usage: test_errors MODEL.onnx TEMP_DIR */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <sys/stat.h>

#include "test_util.h"

static const char *model_path;
static const char *tmp_dir;
static uint8_t *file_bytes;
static size_t file_len;

/* A pointer value that must survive a failed call unchanged. */
#define SENTINEL ((void *)(uintptr_t)0x5EED)

static void test_null_arguments(void) {
  OnnxlModelProto *m = (OnnxlModelProto *)SENTINEL, *model = NULL;
  OnnxlTensorProto *t = (OnnxlTensorProto *)SENTINEL;
  OnnxlBuffer *b = (OnnxlBuffer *)SENTINEL;
  OnnxlStream *s = (OnnxlStream *)SENTINEL, *mem = NULL;
  const uint8_t *data = (const uint8_t *)SENTINEL;
  size_t len = 12345;

  CHECK_STATUS(onnxl_load_model(NULL, NULL, &m), ONNXL_STATUS_NULL_POINTER, "path is NULL");
  CHECK_STATUS(onnxl_load_model(model_path, NULL, NULL), ONNXL_STATUS_NULL_POINTER, "out is NULL");
  CHECK_STATUS(onnxl_load_model_from_bytes(NULL, 10, NULL, &m), ONNXL_STATUS_NULL_POINTER, "data is NULL");
  CHECK_STATUS(onnxl_load_model_from_bytes(file_bytes, file_len, NULL, NULL), ONNXL_STATUS_NULL_POINTER,
               "out is NULL");
  CHECK(m == (OnnxlModelProto *)SENTINEL); /* outputs are written only on success */

  CHECK_OK(onnxl_load_model(model_path, NULL, &model));
  CHECK_STATUS(onnxl_save_model(NULL, test_path(tmp_dir, "x.onnx"), NULL), ONNXL_STATUS_NULL_POINTER,
               "is NULL");
  CHECK_STATUS(onnxl_save_model(model, NULL, NULL), ONNXL_STATUS_NULL_POINTER, "path is NULL");
  CHECK_STATUS(onnxl_serialize_model(NULL, NULL, &b), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_serialize_model(model, NULL, NULL), ONNXL_STATUS_NULL_POINTER, "out is NULL");
  CHECK(b == (OnnxlBuffer *)SENTINEL);
  CHECK_STATUS(onnxl_load_tensor_proto(NULL, NULL, &t), ONNXL_STATUS_NULL_POINTER, "path is NULL");
  CHECK_STATUS(onnxl_save_tensor_proto(NULL, test_path(tmp_dir, "t.pb"), NULL), ONNXL_STATUS_NULL_POINTER,
               "is NULL");
  CHECK(t == (OnnxlTensorProto *)SENTINEL);

  /* Message lifecycle functions. */
  CHECK_STATUS(onnxl_model_proto_parse_from_bytes(NULL, file_bytes, file_len, NULL), ONNXL_STATUS_NULL_POINTER,
               "is NULL");
  CHECK_STATUS(onnxl_model_proto_parse_from_bytes(model, NULL, 3, NULL), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_model_proto_copy_from(NULL, model), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_model_proto_copy_from(model, NULL), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_model_proto_serialize(model, NULL, NULL), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_model_proto_clear(NULL), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_model_proto_add_unknown_fields(model, NULL, 2), ONNXL_STATUS_NULL_POINTER, "is NULL");

  /* Accessors: getters return zero values and set the last error. */
  CHECK(onnxl_model_proto_ir_version(NULL) == 0);
  CHECK_LAST_ERROR(ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK(onnxl_model_proto_graph(NULL) == NULL);
  CHECK_LAST_ERROR(ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK(onnxl_model_proto_mutable_graph(NULL) == NULL);
  CHECK(onnxl_model_proto_producer_name(NULL).data == NULL);
  CHECK(onnxl_graph_proto_node_size(NULL) == 0);
  CHECK(onnxl_graph_proto_add_node(NULL) == NULL);
  CHECK(onnxl_tensor_proto_dims_data(NULL) == NULL);
  CHECK(onnxl_tensor_proto_mutable_dims_data(NULL) == NULL);
  CHECK(!onnxl_model_proto_has_graph(NULL));
  CHECK(onnxl_type_proto_value_case(NULL) == ONNXL_TYPE_PROTO_VALUE_CASE_NOT_SET);
  CHECK(onnxl_model_proto_unknown_fields(NULL).data == NULL);
  CHECK_LAST_ERROR(ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_model_proto_set_ir_version(NULL, 1), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_model_proto_set_producer_name(model, NULL, 4), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_tensor_proto_raw_data(NULL, &data, &len), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_tensor_proto_assign_dims(NULL, NULL, 0), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK(data == (const uint8_t *)SENTINEL && len == 12345);

  /* Owners and streams. */
  CHECK_STATUS(onnxl_owner_data(NULL, &data, &len), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_stream_open_file(NULL, &s), ONNXL_STATUS_NULL_POINTER, "path is NULL");
  CHECK_STATUS(onnxl_stream_open_mmap(NULL, &s), ONNXL_STATUS_NULL_POINTER, "path is NULL");
  CHECK_STATUS(onnxl_stream_from_bytes(NULL, 5, &s), ONNXL_STATUS_NULL_POINTER, "data is NULL");
  CHECK_STATUS(onnxl_stream_new_memory(NULL), ONNXL_STATUS_NULL_POINTER, "out is NULL");
  CHECK_STATUS(onnxl_stream_from_callbacks(NULL, NULL, NULL, NULL, &s), ONNXL_STATUS_NULL_POINTER,
               "callbacks is NULL");
  CHECK(s == (OnnxlStream *)SENTINEL);
  CHECK_STATUS(onnxl_stream_bytes(NULL, &data, &len), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_OK(onnxl_stream_new_memory(&mem));
  CHECK_STATUS(onnxl_parse_proto_from_stream(NULL, mem, NULL), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_parse_proto_from_stream(model, NULL, NULL), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_serialize_proto_to_stream(NULL, mem, NULL), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_serialize_proto_to_stream(model, NULL, NULL), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_parse_tensor_proto_from_stream(NULL, mem, NULL), ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_STATUS(onnxl_serialize_tensor_proto_to_stream(NULL, mem, NULL), ONNXL_STATUS_NULL_POINTER, "is NULL");
  onnxl_stream_free(mem);
  onnxl_stream_free(NULL);
  onnxl_model_proto_free(model);
}

static void test_bad_files(void) {
  OnnxlModelProto *m = (OnnxlModelProto *)SENTINEL;
  OnnxlTensorProto *t = (OnnxlTensorProto *)SENTINEL;
  OnnxlStream *s = NULL;
  char text[4096];
  snprintf(text, sizeof text, "%s", test_path(tmp_dir, "not_a_model.onnx"));
  CHECK_STATUS(onnxl_load_model("/nonexistent/dir/model.onnx", NULL, &m), ONNXL_STATUS_IO,
               "/nonexistent/dir/model.onnx");
  /* The system's own words: ENOENT, or Windows' ERROR_PATH_NOT_FOUND. */
#ifdef _WIN32
  CHECK_STATUS(onnxl_load_model("/nonexistent/dir/model.onnx", NULL, &m), ONNXL_STATUS_IO,
               "(os error 3)");
#else
  CHECK_STATUS(onnxl_load_model("/nonexistent/dir/model.onnx", NULL, &m), ONNXL_STATUS_IO,
               "No such file or directory");
#endif
  CHECK_STATUS(onnxl_load_model(tmp_dir, NULL, &m), ONNXL_STATUS_IO, tmp_dir); /* a directory */
  CHECK_STATUS(onnxl_load_model("", NULL, &m), ONNXL_STATUS_INVALID_ARGUMENT, "path is empty");
  CHECK_STATUS(onnxl_load_tensor_proto("/nonexistent/t.pb", NULL, &t), ONNXL_STATUS_IO, "/nonexistent/t.pb");
  /* A text file is not a model: the message names the byte offset. */
  test_write_file(text, "[package]\nname = \"x\"\n", 21);
  for (uint32_t mode = 0; mode <= 2; ++mode) {
    OnnxlParseOptions o = onnxl_parse_options_default();
    o.file_load_mode = mode;
    CHECK_STATUS(onnxl_load_model(text, &o, &m), ONNXL_STATUS_PARSE, "at byte");
    CHECK_LAST_ERROR(ONNXL_STATUS_PARSE, "ModelProto");
  }
  CHECK(m == (OnnxlModelProto *)SENTINEL && t == (OnnxlTensorProto *)SENTINEL);
  /* Streams over bad files fail when opened (mmap) or used (file). */
  CHECK_STATUS(onnxl_stream_open_mmap("/nonexistent/m.onnx", &s), ONNXL_STATUS_IO, "/nonexistent/m.onnx");
  CHECK_OK(onnxl_stream_open_file("/nonexistent/f.onnx", &s));
  {
    OnnxlModelProto *target = onnxl_model_proto_new();
    CHECK_STATUS(onnxl_parse_proto_from_stream(target, s, NULL), ONNXL_STATUS_IO, "/nonexistent/f.onnx");
    /* (Names the missing directory, or on Windows the temporary file that could not be created
     * in it: "/nonexistent\.f.onnx.tmp-...".) */
    CHECK_STATUS(onnxl_serialize_proto_to_stream(target, s, NULL), ONNXL_STATUS_IO, "/nonexistent");
    onnxl_model_proto_free(target);
  }
  onnxl_stream_free(s);
  /* Saving into a missing directory. */
  {
    OnnxlModelProto *model = onnxl_model_proto_new();
    CHECK_STATUS(onnxl_save_model(model, "/nonexistent/dir/out.onnx", NULL), ONNXL_STATUS_IO,
                 "/nonexistent/dir");
    onnxl_model_proto_free(model);
  }
}

static void test_truncated_input(void) {
  size_t parsed = 0, refused = 0;
  char path[4096];
  OnnxlModelProto *m = (OnnxlModelProto *)SENTINEL;
  /* Every prefix of the model either parses (a cut at a field boundary: the prefix is a valid,
   * canonical message) or fails with a PARSE status naming the byte offset. */
  for (size_t n = 1; n < file_len; ++n) {
    OnnxlModelProto *p = (OnnxlModelProto *)SENTINEL;
    OnnxlStatus st = onnxl_load_model_from_bytes(file_bytes, n, NULL, &p);
    if (st == ONNXL_STATUS_OK) {
      OnnxlBuffer *b = NULL;
      CHECK_OK(onnxl_serialize_model(p, NULL, &b));
      CHECK(onnxl_buffer_size(b) == n && memcmp(onnxl_buffer_data(b), file_bytes, n) == 0);
      onnxl_buffer_free(b);
      onnxl_model_proto_free(p);
      parsed += 1;
    } else {
      test_check_status(__FILE__, __LINE__, "truncated model", st, ONNXL_STATUS_PARSE, "at byte");
      CHECK(p == (OnnxlModelProto *)SENTINEL);
      refused += 1;
    }
  }
  CHECK(refused > parsed && parsed >= 1);
  printf("  %zu prefixes refused, %zu parsed at field boundaries\n", refused, parsed);
  /* A truncated file, in every load mode. */
  snprintf(path, sizeof path, "%s", test_path(tmp_dir, "truncated.onnx"));
  test_write_file(path, file_bytes, file_len - 1);
  for (uint32_t mode = 0; mode <= 2; ++mode) {
    OnnxlParseOptions o = onnxl_parse_options_default();
    o.file_load_mode = mode;
    o.no_copy = mode == 1;
    CHECK_STATUS(onnxl_load_model(path, &o, &m), ONNXL_STATUS_PARSE, "runs past the end");
  }
  /* A truncated message of another type. */
  {
    OnnxlTensorProto *t = onnxl_tensor_proto_new();
    const uint8_t cut[] = {0x42, 0x05, 'a', 'b'}; /* name: 5 bytes announced, 2 present */
    CHECK_STATUS(onnxl_tensor_proto_parse_from_bytes(t, cut, sizeof cut, NULL), ONNXL_STATUS_PARSE,
                 "TensorProto");
    CHECK(onnxl_tensor_proto_byte_size(t) == 0); /* unchanged on failure */
    onnxl_tensor_proto_free(t);
  }
  CHECK(m == (OnnxlModelProto *)SENTINEL);
}

static void test_invalid_options(void) {
  OnnxlModelProto *m = (OnnxlModelProto *)SENTINEL, *model = NULL;
  OnnxlBuffer *b = (OnnxlBuffer *)SENTINEL;
  OnnxlParseOptions p;
  OnnxlSerializeOptions s;
  OnnxlStream *mem = NULL;
  CHECK_OK(onnxl_load_model(model_path, NULL, &model));
  CHECK_OK(onnxl_stream_new_memory(&mem));

  p = onnxl_parse_options_default();
  p.struct_size = 8;
  CHECK_STATUS(onnxl_load_model(model_path, &p, &m), ONNXL_STATUS_INVALID_ARGUMENT,
               "OnnxlParseOptions.struct_size is 8");
  CHECK_STATUS(onnxl_load_model_from_bytes(file_bytes, file_len, &p, &m), ONNXL_STATUS_INVALID_ARGUMENT,
               "struct_size");
  CHECK_STATUS(onnxl_model_proto_parse_from_bytes(model, file_bytes, file_len, &p),
               ONNXL_STATUS_INVALID_ARGUMENT, "struct_size");
  CHECK_STATUS(onnxl_parse_proto_from_stream(model, mem, &p), ONNXL_STATUS_INVALID_ARGUMENT, "struct_size");
  p = onnxl_parse_options_default();
  p.file_load_mode = 7;
  CHECK_STATUS(onnxl_load_model(model_path, &p, &m), ONNXL_STATUS_INVALID_ARGUMENT,
               "file_load_mode 7 is not an OnnxlFileLoadMode");
  p = onnxl_parse_options_default();
  p.num_threads = 0;
  CHECK_STATUS(onnxl_load_model(model_path, &p, &m), ONNXL_STATUS_INVALID_ARGUMENT, "num_threads");
  p = onnxl_parse_options_default();
  p.alignment = 3;
  CHECK_STATUS(onnxl_load_model(model_path, &p, &m), ONNXL_STATUS_INVALID_ARGUMENT,
               "alignment: 3 is not 0, 1 or a power of two");
  p = onnxl_parse_options_default();
  p.max_recursion_depth = 5000;
  CHECK_STATUS(onnxl_load_model(model_path, &p, &m), ONNXL_STATUS_INVALID_ARGUMENT, "max_recursion_depth");
  p = onnxl_parse_options_default();
  p.reserved = 1;
  CHECK_STATUS(onnxl_load_model(model_path, &p, &m), ONNXL_STATUS_INVALID_ARGUMENT, "reserved must be zero");
  CHECK(m == (OnnxlModelProto *)SENTINEL);

  s = onnxl_serialize_options_default();
  s.struct_size = 1000;
  CHECK_STATUS(onnxl_serialize_model(model, &s, &b), ONNXL_STATUS_INVALID_ARGUMENT,
               "OnnxlSerializeOptions.struct_size is 1000");
  CHECK_STATUS(onnxl_save_model(model, test_path(tmp_dir, "opts.onnx"), &s), ONNXL_STATUS_INVALID_ARGUMENT,
               "struct_size");
  CHECK_STATUS(onnxl_serialize_proto_to_stream(model, mem, &s), ONNXL_STATUS_INVALID_ARGUMENT, "struct_size");
  CHECK_STATUS(onnxl_model_proto_serialize(model, &s, &b), ONNXL_STATUS_INVALID_ARGUMENT, "struct_size");
  s = onnxl_serialize_options_default();
  s.num_threads = 0;
  CHECK_STATUS(onnxl_serialize_model(model, &s, &b), ONNXL_STATUS_INVALID_ARGUMENT, "num_threads");
  s = onnxl_serialize_options_default();
  s.alignment = 12;
  CHECK_STATUS(onnxl_serialize_model(model, &s, &b), ONNXL_STATUS_INVALID_ARGUMENT, "alignment");
  s = onnxl_serialize_options_default();
  s.reserved = 1;
  CHECK_STATUS(onnxl_serialize_model(model, &s, &b), ONNXL_STATUS_INVALID_ARGUMENT, "reserved must be zero");
  CHECK(b == (OnnxlBuffer *)SENTINEL);
  onnxl_stream_free(mem);
  onnxl_model_proto_free(model);
}

static void test_limits(void) {
  OnnxlModelProto *m = (OnnxlModelProto *)SENTINEL, *model = NULL;
  OnnxlBuffer *b = (OnnxlBuffer *)SENTINEL;
  OnnxlParseOptions p = onnxl_parse_options_default();
  OnnxlSerializeOptions s = onnxl_serialize_options_default();
  char out[4096];
  uint8_t *kept;
  size_t kept_len;
  p.max_recursion_depth = 2;
  CHECK_STATUS(onnxl_load_model(model_path, &p, &m), ONNXL_STATUS_LIMIT_EXCEEDED, "recursion limit 2");
  p = onnxl_parse_options_default();
  p.max_tensor_size_bytes = 16;
  CHECK_STATUS(onnxl_load_model_from_bytes(file_bytes, file_len, &p, &m), ONNXL_STATUS_LIMIT_EXCEEDED,
               "exceeds max_tensor_size_bytes 16");
  CHECK(m == (OnnxlModelProto *)SENTINEL);

  CHECK_OK(onnxl_load_model(model_path, NULL, &model));
  s.max_serialized_size_bytes = 10;
  CHECK_STATUS(onnxl_serialize_model(model, &s, &b), ONNXL_STATUS_LIMIT_EXCEEDED,
               "exceeds max_serialized_size_bytes 10");
  CHECK(b == (OnnxlBuffer *)SENTINEL);
  /* A failed save leaves the existing file as it was. */
  snprintf(out, sizeof out, "%s", test_path(tmp_dir, "kept.onnx"));
  test_write_file(out, "previous", 8);
  CHECK_STATUS(onnxl_save_model(model, out, &s), ONNXL_STATUS_LIMIT_EXCEEDED, "max_serialized_size_bytes");
  kept = test_read_file(out, &kept_len);
  CHECK(kept_len == 8 && memcmp(kept, "previous", 8) == 0);
  free(kept);
  onnxl_model_proto_free(model);
}

static void test_out_of_range_and_enums(void) {
  OnnxlModelProto *m = NULL;
  OnnxlGraphProto *g;
  OnnxlTensorProto *t;
  CHECK_OK(onnxl_load_model(model_path, NULL, &m));
  g = onnxl_model_proto_mutable_graph(m);
  CHECK(onnxl_graph_proto_node(g, 99) == NULL);
  CHECK_LAST_ERROR(ONNXL_STATUS_OUT_OF_RANGE, "index 99 out of range for GraphProto.node (size 6)");
  CHECK(onnxl_graph_proto_mutable_node(g, 6) == NULL);
  CHECK_LAST_ERROR(ONNXL_STATUS_OUT_OF_RANGE, "GraphProto.node");
  CHECK_STATUS(onnxl_graph_proto_remove_initializer(g, 4), ONNXL_STATUS_OUT_OF_RANGE,
               "index 4 out of range for GraphProto.initializer (size 4)");
  t = onnxl_graph_proto_mutable_initializer(g, 0);
  CHECK(onnxl_tensor_proto_dims(t, 2) == 0);
  CHECK_LAST_ERROR(ONNXL_STATUS_OUT_OF_RANGE, "TensorProto.dims (size 2)");
  CHECK_STATUS(onnxl_tensor_proto_set_dims(t, 2, 5), ONNXL_STATUS_OUT_OF_RANGE, "TensorProto.dims");
  CHECK(onnxl_node_proto_input(onnxl_graph_proto_node(g, 0), 5).data == NULL);
  CHECK_LAST_ERROR(ONNXL_STATUS_OUT_OF_RANGE, "NodeProto.input");
  CHECK_STATUS(onnxl_node_proto_set_input(onnxl_graph_proto_mutable_node(g, 0), 9, "z", 1),
               ONNXL_STATUS_OUT_OF_RANGE, "NodeProto.input");
  /* Closed enums refuse values outside the enum. */
  CHECK_STATUS(onnxl_tensor_proto_set_data_location(t, 5), ONNXL_STATUS_INVALID_ARGUMENT,
               "5 is not a value of the enum of TensorProto.data_location");
  CHECK(!onnxl_tensor_proto_has_data_location(t));
  CHECK_STATUS(onnxl_attribute_proto_set_type(onnxl_node_proto_mutable_attribute(onnxl_graph_proto_mutable_node(g, 5), 0), 99),
               ONNXL_STATUS_INVALID_ARGUMENT, "AttributeProto.type");
  /* Nothing above changed the model. */
  {
    OnnxlBuffer *b = NULL;
    CHECK_OK(onnxl_serialize_model(m, NULL, &b));
    CHECK(onnxl_buffer_size(b) == file_len && memcmp(onnxl_buffer_data(b), file_bytes, file_len) == 0);
    onnxl_buffer_free(b);
  }
  onnxl_model_proto_free(m);
}

static void test_read_only_streams(void) {
  OnnxlStream *s = NULL;
  OnnxlModelProto *m = NULL;
  OnnxlTensorProto *t = onnxl_tensor_proto_new();
  CHECK_OK(onnxl_load_model(model_path, NULL, &m));
  CHECK_OK(onnxl_stream_open_mmap(model_path, &s));
  CHECK_STATUS(onnxl_serialize_proto_to_stream(m, s, NULL), ONNXL_STATUS_UNSUPPORTED, "read-only");
  CHECK_STATUS(onnxl_serialize_tensor_proto_to_stream(t, s, NULL), ONNXL_STATUS_UNSUPPORTED, "read-only");
  onnxl_stream_free(s);
  CHECK_OK(onnxl_stream_from_bytes(file_bytes, file_len, &s));
  CHECK_STATUS(onnxl_serialize_proto_to_stream(m, s, NULL), ONNXL_STATUS_UNSUPPORTED, "read-only");
  onnxl_stream_free(s);
  onnxl_tensor_proto_free(t);
  onnxl_model_proto_free(m);
}

static void *fail_on_other_thread(void *arg) {
  OnnxlModelProto *m = NULL;
  (void)arg;
  if (onnxl_load_model("/nonexistent/other-thread.onnx", NULL, &m) != ONNXL_STATUS_IO) {
    return (void *)1;
  }
  return strstr(onnxl_last_error_message(), "other-thread") ? NULL : (void *)1;
}

static void test_last_error_is_thread_local(void) {
  OnnxlModelProto *m = NULL;
  pthread_t th;
  void *result = (void *)1;
  CHECK_STATUS(onnxl_load_model("/nonexistent/main-thread.onnx", NULL, &m), ONNXL_STATUS_IO, "main-thread");
  CHECK(pthread_create(&th, NULL, fail_on_other_thread, NULL) == 0);
  CHECK(pthread_join(th, &result) == 0);
  CHECK(result == NULL);
  /* This thread's error is untouched by the other thread and by successful calls. */
  CHECK_OK(onnxl_load_model(model_path, NULL, &m));
  CHECK_LAST_ERROR(ONNXL_STATUS_IO, "main-thread");
  onnxl_model_proto_free(m);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL.onnx TEMP_DIR\n", argv[0]);
    return 2;
  }
  model_path = argv[1];
  tmp_dir = argv[2];
  test_mkdir(tmp_dir);
  file_bytes = test_read_file(model_path, &file_len);
  RUN(test_null_arguments);
  RUN(test_bad_files);
  RUN(test_truncated_input);
  RUN(test_invalid_options);
  RUN(test_limits);
  RUN(test_out_of_range_and_enums);
  RUN(test_read_only_streams);
  RUN(test_last_error_is_thread_local);
  free(file_bytes);
  return test_summary("test_errors");
}
