/* Streams (C++ FileStream, MmapFileStream, StringStream, a memory buffer, caller callbacks):
 * parse and serialize models and standalone TensorProtos through each kind, no_copy borrowing
 * (pointers inside the mapping / caller bytes / memory buffer, valid after the stream is freed
 * where an owner exists), chunked callbacks with short reads and writes, release callbacks, and
 * callback failures.
 *
 * Usage: test_streams TEMP_DIR */
#define _POSIX_C_SOURCE 200809L

#include <sys/stat.h>

#include "test_util.h"

static const char *tmp_dir;
static OnnxlBuffer *expected; /* serialization of the test model */

static int model_is_expected(const OnnxlModelProto *m) {
  OnnxlBuffer *b = NULL;
  int same;
  if (onnxl_serialize_model(m, NULL, &b) != ONNXL_STATUS_OK) {
    return 0;
  }
  same = onnxl_buffer_size(b) == onnxl_buffer_size(expected) &&
         memcmp(onnxl_buffer_data(b), onnxl_buffer_data(expected), onnxl_buffer_size(b)) == 0;
  onnxl_buffer_free(b);
  return same;
}

/* The big initializer's bytes of `m`, checked, and whether they lie in [lo, lo+n). */
static int big_inside(const OnnxlModelProto *m, const uint8_t *lo, size_t n) {
  const uint8_t *p = NULL;
  size_t len = 0;
  if (onnxl_tensor_proto_raw_data(test_initializer(m, "big"), &p, &len) != ONNXL_STATUS_OK ||
      !test_big_values_ok(p, len)) {
    return -1;
  }
  return p >= lo && p + len <= lo + n;
}

static void test_file_stream(void) {
  OnnxlModelProto *m = test_build_model(), *back = onnxl_model_proto_new();
  OnnxlStream *s = NULL;
  OnnxlParseOptions o = onnxl_parse_options_default();
  char path[4096];
  uint8_t *written;
  size_t written_len;
  snprintf(path, sizeof path, "%s", test_path(tmp_dir, "stream.onnx"));
  CHECK_OK(onnxl_stream_open_file(path, &s));
  CHECK_OK(onnxl_serialize_proto_to_stream(m, s, NULL));
  written = test_read_file(path, &written_len);
  CHECK(written_len == onnxl_buffer_size(expected) &&
        memcmp(written, onnxl_buffer_data(expected), written_len) == 0);
  free(written);
  CHECK_OK(onnxl_parse_proto_from_stream(back, s, NULL));
  CHECK(model_is_expected(back));
  o.no_copy = true;
  o.alignment = 1; /* borrow wherever the payload lies (the default 64 copies misaligned ones) */
  CHECK_OK(onnxl_parse_proto_from_stream(back, s, &o));
  {
    const uint8_t *d = NULL;
    size_t n = 0;
    CHECK_STATUS(onnxl_stream_bytes(s, &d, &n), ONNXL_STATUS_UNSUPPORTED, "");
  }
  onnxl_stream_free(s);
  CHECK(model_is_expected(back)); /* valid after the stream is gone */
  onnxl_model_proto_free(back);
  onnxl_model_proto_free(m);
}

static void test_mmap_stream(void) {
  OnnxlModelProto *back = onnxl_model_proto_new();
  OnnxlStream *s = NULL;
  OnnxlParseOptions o = onnxl_parse_options_default();
  const uint8_t *d = NULL;
  size_t n = 0;
  char path[4096];
  snprintf(path, sizeof path, "%s", test_path(tmp_dir, "mapped_stream.onnx"));
  test_write_file(path, onnxl_buffer_data(expected), onnxl_buffer_size(expected));
  CHECK_OK(onnxl_stream_open_mmap(path, &s));
  CHECK_OK(onnxl_stream_bytes(s, &d, &n));
  CHECK(n == onnxl_buffer_size(expected) && memcmp(d, onnxl_buffer_data(expected), n) == 0);
  o.no_copy = true;
  o.alignment = 1; /* borrow wherever the payload lies (the default 64 copies misaligned ones) */
  CHECK_OK(onnxl_parse_proto_from_stream(back, s, &o));
  CHECK(big_inside(back, d, n) == 1); /* borrowed from the mapping */
  CHECK(onnxl_tensor_proto_raw_data_is_borrowed(test_initializer(back, "big")));
  onnxl_stream_free(s);
  CHECK(model_is_expected(back)); /* the owner tokens keep the mapping */
  CHECK(big_inside(back, d, n) == 1);
  onnxl_model_proto_free(back);

  /* Copy mode from a mapping: nothing borrowed. */
  back = onnxl_model_proto_new();
  CHECK_OK(onnxl_stream_open_mmap(path, &s));
  CHECK_OK(onnxl_stream_bytes(s, &d, &n));
  CHECK_OK(onnxl_parse_proto_from_stream(back, s, NULL));
  CHECK(big_inside(back, d, n) == 0);
  onnxl_stream_free(s);
  CHECK(model_is_expected(back));
  onnxl_model_proto_free(back);
}

static void test_bytes_stream(void) {
  size_t n = onnxl_buffer_size(expected);
  uint8_t *buf = malloc(n);
  OnnxlModelProto *back = onnxl_model_proto_new();
  OnnxlTensorProto *t = onnxl_tensor_proto_new();
  OnnxlStream *s = NULL;
  OnnxlParseOptions o = onnxl_parse_options_default();
  const uint8_t *d = NULL;
  size_t dn = 0;
  CHECK(buf != NULL);
  memcpy(buf, onnxl_buffer_data(expected), n);
  CHECK_OK(onnxl_stream_from_bytes(buf, n, &s));
  CHECK_OK(onnxl_stream_bytes(s, &d, &dn));
  CHECK(d == buf && dn == n); /* not copied */
  o.no_copy = true;
  o.alignment = 1; /* borrow wherever the payload lies (the default 64 copies misaligned ones) */
  CHECK_OK(onnxl_parse_proto_from_stream(back, s, &o));
  CHECK(big_inside(back, buf, n) == 1); /* borrowed from the caller's bytes */
  onnxl_stream_free(s);
  CHECK(model_is_expected(back));
  /* A parse failure leaves the target unchanged. */
  CHECK_OK(onnxl_stream_from_bytes(buf, n / 2, &s));
  CHECK_STATUS(onnxl_parse_proto_from_stream(back, s, NULL), ONNXL_STATUS_PARSE, "at byte");
  CHECK(model_is_expected(back));
  CHECK_STATUS(onnxl_parse_tensor_proto_from_stream(t, s, NULL), ONNXL_STATUS_PARSE, "TensorProto");
  onnxl_stream_free(s);
  onnxl_model_proto_free(back); /* the model before the caller's bytes */
  onnxl_tensor_proto_free(t);
  free(buf);
}

static void test_memory_stream(void) {
  OnnxlModelProto *m = test_build_model(), *back = onnxl_model_proto_new();
  OnnxlTensorProto *t = onnxl_tensor_proto_new();
  OnnxlStream *s = NULL;
  OnnxlParseOptions o = onnxl_parse_options_default();
  const uint8_t *d = NULL;
  size_t n = 0;
  CHECK_OK(onnxl_stream_new_memory(&s));
  CHECK_OK(onnxl_stream_bytes(s, &d, &n));
  CHECK(n == 0);
  CHECK_OK(onnxl_serialize_proto_to_stream(m, s, NULL));
  CHECK_OK(onnxl_serialize_proto_to_stream(m, s, NULL)); /* replaces, does not append */
  CHECK_OK(onnxl_stream_bytes(s, &d, &n));
  CHECK(n == onnxl_buffer_size(expected) && memcmp(d, onnxl_buffer_data(expected), n) == 0);
  o.no_copy = true;
  o.alignment = 1; /* borrow wherever the payload lies (the default 64 copies misaligned ones) */
  CHECK_OK(onnxl_parse_proto_from_stream(back, s, &o));
  CHECK(big_inside(back, d, n) == 1); /* shares the stream's buffer */
  onnxl_stream_free(s);
  CHECK(model_is_expected(back)); /* through owner tokens */

  /* A standalone TensorProto through a memory stream. */
  CHECK_OK(onnxl_stream_new_memory(&s));
  CHECK_OK(onnxl_serialize_tensor_proto_to_stream(test_initializer(m, "big"), s, NULL));
  CHECK_OK(onnxl_parse_tensor_proto_from_stream(t, s, NULL));
  {
    const uint8_t *p = NULL;
    size_t len = 0;
    CHECK(VIEW_EQ(onnxl_tensor_proto_name(t), "big"));
    CHECK_OK(onnxl_tensor_proto_raw_data(t, &p, &len));
    CHECK(test_big_values_ok(p, len));
  }
  onnxl_stream_free(s);
  onnxl_tensor_proto_free(t);
  onnxl_model_proto_free(back);
  onnxl_model_proto_free(m);
}

/* Caller callbacks: reads of at most 7 bytes, writes of at most 5. */
typedef struct io_state {
  const uint8_t *src;
  size_t src_len, pos;
  uint8_t *dst;
  size_t dst_len, dst_cap;
  int fail_read, fail_write, released, reads, writes;
} io_state;

static ptrdiff_t read_cb(void *user_data, uint8_t *buffer, size_t capacity) {
  io_state *io = user_data;
  size_t n = io->src_len - io->pos;
  io->reads += 1;
  if (io->fail_read) {
    return -1;
  }
  if (n > 7) {
    n = 7;
  }
  if (n > capacity) {
    n = capacity;
  }
  memcpy(buffer, io->src + io->pos, n);
  io->pos += n;
  return (ptrdiff_t)n;
}

static ptrdiff_t write_cb(void *user_data, const uint8_t *data, size_t len) {
  io_state *io = user_data;
  size_t n = len > 5 ? 5 : len;
  io->writes += 1;
  if (io->fail_write) {
    return -1;
  }
  if (io->dst_len + n > io->dst_cap) {
    size_t cap = io->dst_cap ? io->dst_cap * 2 : 64;
    uint8_t *grown;
    while (cap < io->dst_len + n) {
      cap *= 2;
    }
    grown = realloc(io->dst, cap);
    if (grown == NULL) {
      return -1;
    }
    io->dst = grown;
    io->dst_cap = cap;
  }
  memcpy(io->dst + io->dst_len, data, n);
  io->dst_len += n;
  return (ptrdiff_t)n;
}

static void release_cb(void *user_data) {
  ((io_state *)user_data)->released += 1;
}

static void test_callback_streams(void) {
  OnnxlModelProto *m = test_build_model(), *back = onnxl_model_proto_new();
  OnnxlStream *s = NULL;
  io_state io;
  OnnxlParseOptions o = onnxl_parse_options_default();

  memset(&io, 0, sizeof io);
  CHECK_OK(onnxl_stream_from_callbacks(NULL, write_cb, release_cb, &io, &s));
  CHECK_OK(onnxl_serialize_proto_to_stream(m, s, NULL));
  CHECK(io.dst_len == onnxl_buffer_size(expected) &&
        memcmp(io.dst, onnxl_buffer_data(expected), io.dst_len) == 0);
  CHECK(io.writes > 1); /* short writes were continued */
  CHECK_STATUS(onnxl_parse_proto_from_stream(back, s, NULL), ONNXL_STATUS_IO, "no read callback");
  {
    const uint8_t *d = NULL;
    size_t n = 0;
    CHECK_STATUS(onnxl_stream_bytes(s, &d, &n), ONNXL_STATUS_UNSUPPORTED, "");
  }
  CHECK(io.released == 0);
  onnxl_stream_free(s);
  CHECK(io.released == 1);

  /* Read it back in 7-byte chunks, with no_copy (payloads keep the read buffer alive). */
  io.src = io.dst;
  io.src_len = io.dst_len;
  io.pos = 0;
  io.released = 0;
  CHECK_OK(onnxl_stream_from_callbacks(read_cb, NULL, release_cb, &io, &s));
  o.no_copy = true;
  o.alignment = 1; /* borrow wherever the payload lies (the default 64 copies misaligned ones) */
  CHECK_OK(onnxl_parse_proto_from_stream(back, s, &o));
  CHECK(io.reads > 1);
  CHECK_STATUS(onnxl_serialize_proto_to_stream(m, s, NULL), ONNXL_STATUS_IO, "no write callback");
  onnxl_stream_free(s);
  CHECK(io.released == 1);
  free(io.dst);
  io.dst = NULL;
  CHECK(model_is_expected(back)); /* the caller's buffers are gone; the model is not */

  /* Failing callbacks. */
  memset(&io, 0, sizeof io);
  io.fail_read = 1;
  io.fail_write = 1;
  CHECK_OK(onnxl_stream_from_callbacks(read_cb, write_cb, release_cb, &io, &s));
  CHECK_STATUS(onnxl_parse_proto_from_stream(back, s, NULL), ONNXL_STATUS_IO, "read callback failed");
  CHECK(model_is_expected(back));
  CHECK_STATUS(onnxl_serialize_proto_to_stream(m, s, NULL), ONNXL_STATUS_IO, "write callback");
  onnxl_stream_free(s);
  CHECK(io.released == 1);
  free(io.dst);
  onnxl_model_proto_free(back);
  onnxl_model_proto_free(m);
}

int main(int argc, char **argv) {
  OnnxlModelProto *m;
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEMP_DIR\n", argv[0]);
    return 2;
  }
  tmp_dir = argv[1];
  mkdir(tmp_dir, 0777);
  m = test_build_model();
  if (m == NULL || onnxl_serialize_model(m, NULL, &expected) != ONNXL_STATUS_OK) {
    fprintf(stderr, "cannot build the test model\n");
    return 2;
  }
  onnxl_model_proto_free(m);
  RUN(test_file_stream);
  RUN(test_mmap_stream);
  RUN(test_bytes_stream);
  RUN(test_memory_stream);
  RUN(test_callback_streams);
  onnxl_buffer_free(expected);
  return test_summary("test_streams");
}
