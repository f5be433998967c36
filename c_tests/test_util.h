/* Tiny test harness shared by the C tests of onnx_light (c_tests/test_*.c).
 *
 * Every CHECK failure prints file:line and the library's last error and is counted; main()
 * returns non-zero when any check failed. CHECK_STATUS verifies a failure completely: the
 * returned status, onnxl_last_error_status(), and that onnxl_last_error_message() contains the
 * expected text (and agrees with onnxl_last_error_message_length()). */
#ifndef ONNXL_TEST_UTIL_H
#define ONNXL_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <direct.h> /* _mkdir */
#else
#include <sys/stat.h> /* mkdir */
#endif

#include "onnx_light.h"

static int test_failures = 0;
static int test_checks = 0;

static inline void test_fail(const char *file, int line, const char *what) {
  fprintf(stderr, "%s:%d: CHECK failed: %s\n", file, line, what);
  test_failures += 1;
}

#define CHECK(cond)                             \
  do {                                          \
    test_checks += 1;                           \
    if (!(cond)) {                              \
      test_fail(__FILE__, __LINE__, #cond);     \
    }                                           \
  } while (0)

/* `call` returns ONNXL_STATUS_OK. */
#define CHECK_OK(call)                                                                       \
  do {                                                                                       \
    OnnxlStatus check_st_ = (call);                                                          \
    test_checks += 1;                                                                        \
    if (check_st_ != ONNXL_STATUS_OK) {                                                      \
      fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call,              \
              onnxl_status_name((uint32_t)check_st_), onnxl_last_error_message());           \
      test_failures += 1;                                                                    \
    }                                                                                        \
  } while (0)

static inline void test_check_status(const char *file, int line, const char *call, OnnxlStatus got,
                              OnnxlStatus want, const char *text) {
  const char *msg = onnxl_last_error_message();
  test_checks += 1;
  if (got != want || onnxl_last_error_status() != want) {
    fprintf(stderr, "%s:%d: %s returned %s (last error status %s), expected %s; message: %s\n",
            file, line, call, onnxl_status_name((uint32_t)got),
            onnxl_status_name((uint32_t)onnxl_last_error_status()),
            onnxl_status_name((uint32_t)want), msg);
    test_failures += 1;
    return;
  }
  if (msg == NULL || strstr(msg, text) == NULL || strlen(msg) != onnxl_last_error_message_length()) {
    fprintf(stderr, "%s:%d: %s: message \"%s\" does not contain \"%s\"\n", file, line, call,
            msg ? msg : "(null)", text);
    test_failures += 1;
  }
}

/* `call` fails with status `want` and a last error message containing `text`. */
#define CHECK_STATUS(call, want, text) \
  test_check_status(__FILE__, __LINE__, #call, (call), (want), (text))

/* The last failure (of a call returning a pointer or a value) had status `want` and a message
 * containing `text`. */
#define CHECK_LAST_ERROR(want, text) \
  test_check_status(__FILE__, __LINE__, "last error", onnxl_last_error_status(), (want), (text))

/* An OnnxlStr / OnnxlBytes view equals the NUL-terminated `s`. */
#define VIEW_EQ(view, s) \
  ((view).data != NULL && (view).len == strlen(s) && memcmp((view).data, (s), (view).len) == 0)

/* Reads a whole file into a malloc'ed buffer (exits on failure). */
static inline uint8_t *test_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  uint8_t *buf;
  long size;
  if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(2);
  }
  buf = malloc((size_t)size + 1);
  if (buf == NULL || fread(buf, 1, (size_t)size, f) != (size_t)size) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(2);
  }
  fclose(f);
  *len = (size_t)size;
  return buf;
}

/* Writes `len` bytes to `path` (exits on failure). */
static inline void test_write_file(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(2);
  }
}

/* Creates directory `path` (mode 0777 where modes exist); 0 on success, as mkdir. */
static inline int test_mkdir(const char *path) {
#ifdef _WIN32
  return _mkdir(path);
#else
  return mkdir(path, 0777);
#endif
}

/* `dir`/`name` in a static buffer (one at a time). */
static inline const char *test_path(const char *dir, const char *name) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/%s", dir, name);
  return buf;
}

/* Number of floats in the large initializer of test_build_model (16 KiB: above every
 * raw_data_threshold default, so no_copy parses borrow it). */
#define TEST_BIG_COUNT 4096

/* A small model built through the setters: one MatMul node, a large initializer "big"
 * (TEST_BIG_COUNT floats, value i * 0.5) and a small one "small" ({1, 2, 3}). NULL on failure. */
static inline OnnxlModelProto *test_build_model(void) {
  static float big[TEST_BIG_COUNT];
  const float small[3] = {1.0f, 2.0f, 3.0f};
  const int64_t big_dims[2] = {64, TEST_BIG_COUNT / 64};
  OnnxlModelProto *m = onnxl_model_proto_new();
  OnnxlGraphProto *g;
  OnnxlTensorProto *t;
  OnnxlNodeProto *n;
  OnnxlOperatorSetIdProto *op;
  int ok = 1;
  for (int i = 0; i < TEST_BIG_COUNT; ++i) {
    big[i] = (float)i * 0.5f;
  }
  if (m == NULL) {
    return NULL;
  }
  ok &= onnxl_model_proto_set_ir_version(m, 10) == ONNXL_STATUS_OK;
  ok &= onnxl_model_proto_set_producer_name(m, "c_tests", 7) == ONNXL_STATUS_OK;
  op = onnxl_model_proto_add_opset_import(m);
  ok &= op != NULL && onnxl_operator_set_id_proto_set_version(op, 21) == ONNXL_STATUS_OK;
  g = onnxl_model_proto_mutable_graph(m);
  ok &= g != NULL && onnxl_graph_proto_set_name(g, "g", 1) == ONNXL_STATUS_OK;
  t = onnxl_graph_proto_add_initializer(g);
  ok &= t != NULL;
  ok &= onnxl_tensor_proto_set_name(t, "big", 3) == ONNXL_STATUS_OK;
  ok &= onnxl_tensor_proto_set_data_type(t, ONNXL_TENSOR_PROTO_DATA_TYPE_FLOAT) == ONNXL_STATUS_OK;
  ok &= onnxl_tensor_proto_assign_dims(t, big_dims, 2) == ONNXL_STATUS_OK;
  ok &= onnxl_tensor_proto_set_raw_data(t, (const uint8_t *)big, sizeof big) == ONNXL_STATUS_OK;
  t = onnxl_graph_proto_add_initializer(g);
  ok &= t != NULL;
  ok &= onnxl_tensor_proto_set_name(t, "small", 5) == ONNXL_STATUS_OK;
  ok &= onnxl_tensor_proto_set_data_type(t, ONNXL_TENSOR_PROTO_DATA_TYPE_FLOAT) == ONNXL_STATUS_OK;
  ok &= onnxl_tensor_proto_add_dims(t, 3) == ONNXL_STATUS_OK;
  ok &= onnxl_tensor_proto_set_raw_data(t, (const uint8_t *)small, sizeof small) == ONNXL_STATUS_OK;
  n = onnxl_graph_proto_add_node(g);
  ok &= n != NULL;
  ok &= onnxl_node_proto_set_op_type(n, "MatMul", 6) == ONNXL_STATUS_OK;
  ok &= onnxl_node_proto_add_input(n, "x", 1) == ONNXL_STATUS_OK;
  ok &= onnxl_node_proto_add_input(n, "big", 3) == ONNXL_STATUS_OK;
  ok &= onnxl_node_proto_add_output(n, "y", 1) == ONNXL_STATUS_OK;
  if (!ok) {
    fprintf(stderr, "test_build_model: %s\n", onnxl_last_error_message());
    onnxl_model_proto_free(m);
    return NULL;
  }
  return m;
}

/* The initializer named `name` of `m`'s graph (NULL when absent). */
static inline const OnnxlTensorProto *test_initializer(const OnnxlModelProto *m, const char *name) {
  const OnnxlGraphProto *g = onnxl_model_proto_graph(m);
  for (size_t i = 0; i < onnxl_graph_proto_initializer_size(g); ++i) {
    const OnnxlTensorProto *t = onnxl_graph_proto_initializer(g, i);
    if (VIEW_EQ(onnxl_tensor_proto_name(t), name)) {
      return t;
    }
  }
  return NULL;
}

/* The big initializer's bytes are i * 0.5f. */
static inline int test_big_values_ok(const uint8_t *data, size_t len) {
  float v;
  if (data == NULL || len != TEST_BIG_COUNT * sizeof(float)) {
    return 0;
  }
  for (size_t i = 0; i < TEST_BIG_COUNT; ++i) {
    memcpy(&v, data + i * sizeof v, sizeof v);
    if (v != (float)i * 0.5f) {
      return 0;
    }
  }
  return 1;
}

/* Runs a test function and reports it. */
#define RUN(fn)                                                                   \
  do {                                                                            \
    int before_ = test_failures;                                                  \
    fn();                                                                         \
    printf("%s %s\n", test_failures == before_ ? "ok  " : "FAIL", #fn);           \
  } while (0)

/* Ends main(): prints the summary and returns the exit status. */
static inline int test_summary(const char *name) {
  printf("%s: %d checks, %d failed\n", name, test_checks, test_failures);
  return test_failures == 0 ? 0 : 1;
}

#endif /* ONNXL_TEST_UTIL_H */
