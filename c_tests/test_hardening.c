/* Option values a hostile or careless C caller can pass: thread counts far above the cap
 * (refused, no thread is started), and boolean fields holding a byte other than 0 or 1
 * (refused, naming the field; reading such a byte as a Rust `bool` would be undefined
 * behaviour). Also: onnxl_release_thread_pools() after parallel work.
 *
 * Usage: test_hardening MODEL.onnx TEMP_DIR */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
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

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL.onnx TEMP_DIR\n", argv[0]);
    return 2;
  }
  model_path = argv[1];
  tmp_dir = argv[2];
  mkdir(tmp_dir, 0777);
  RUN(test_thread_counts_are_capped);
  RUN(test_boolean_fields_are_validated);
  return test_summary("test_hardening");
}
