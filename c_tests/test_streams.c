/* Streams (C++ FileStream, MmapFileStream, StringStream, a memory buffer, caller callbacks):
 * parse and serialize models and standalone TensorProtos through each kind, no_copy borrowing
 * (pointers inside the mapping / caller bytes / memory buffer, valid after the stream is freed
 * where an owner exists), chunked callbacks with short reads and writes, release callbacks, and
 * callback failures; the serialize options of the model + weights stream.
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

/* Whether `path` exists. */
static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Whether `m` holds the test model's tensor bytes (a model loaded with its external data records
 * where they came from, so it is not byte-identical to the model built in memory). */
static int payloads_ok(const OnnxlModelProto *m) {
  const uint8_t *p = NULL;
  size_t len = 0;
  const float small[3] = {1.0f, 2.0f, 3.0f};
  if (onnxl_tensor_proto_raw_data(test_initializer(m, "big"), &p, &len) != ONNXL_STATUS_OK ||
      !test_big_values_ok(p, len) ||
      onnxl_tensor_proto_raw_data(test_initializer(m, "small"), &p, &len) != ONNXL_STATUS_OK) {
    return 0;
  }
  return len == sizeof small && memcmp(p, small, len) == 0;
}

/* A model + weights stream over tmp_dir/model_name and tmp_dir/weights_name. */
static OnnxlStatus open_pair(const char *model_name, const char *weights_name, OnnxlStream **s) {
  char model_path[4096], weights_path[4096];
  snprintf(model_path, sizeof model_path, "%s", test_path(tmp_dir, model_name));
  snprintf(weights_path, sizeof weights_path, "%s", test_path(tmp_dir, weights_name));
  return onnxl_stream_open_model_with_weights(model_path, weights_path, s);
}

/* Writes `m` through a model + weights stream (see open_pair). */
static OnnxlStatus save_pair(const OnnxlModelProto *m, const char *model_name, const char *weights_name,
                             const OnnxlSerializeOptions *so) {
  OnnxlStream *s = NULL;
  OnnxlStatus st = open_pair(model_name, weights_name, &s);
  if (st == ONNXL_STATUS_OK) {
    st = onnxl_serialize_proto_to_stream(m, s, so);
  }
  onnxl_stream_free(s);
  return st;
}

/* The model file `name` of tmp_dir parsed from its bytes: external data NOT loaded. */
static OnnxlModelProto *parse_model_file(const char *name) {
  size_t len = 0;
  uint8_t *bytes = test_read_file(test_path(tmp_dir, name), &len);
  OnnxlModelProto *m = NULL;
  if (onnxl_load_model_from_bytes(bytes, len, NULL, &m) != ONNXL_STATUS_OK) {
    m = NULL;
  }
  free(bytes);
  return m;
}

/* OnnxlSerializeOptions on the model + weights stream: max_external_file_size splits the weights
 * file, skip_raw_data writes the structure only, use_external_data_location keeps the references
 * of tensors still external in memory (refused when they name the file being written), and a
 * caller of the first struct size (40) gets the defaults of the fields it lacks. */
static void test_model_weights_options(void) {
  OnnxlModelProto *m = test_build_model(), *back = onnxl_model_proto_new(), *lazy;
  OnnxlSerializeOptions so = onnxl_serialize_options_default();
  OnnxlStream *s = NULL;
  OnnxlBuffer *b = NULL;
  CHECK(so.skip_raw_data == 0 && so.use_external_data_location == 0 && so.max_external_file_size == 0);
  CHECK(so.struct_size == sizeof(OnnxlSerializeOptions) && sizeof(OnnxlSerializeOptions) == 64);

  /* Split: "big" (16 KiB) fills the first file, "small" goes to the next. */
  so.raw_data_threshold = 8;
  so.max_external_file_size = TEST_BIG_COUNT * sizeof(float);
  CHECK_OK(save_pair(m, "split.onnx", "split.bin", &so));
  CHECK(exists(test_path(tmp_dir, "split.bin")));
  CHECK(exists(test_path(tmp_dir, "split.bin.1")));
  CHECK_OK(open_pair("split.onnx", "split.bin", &s));
  CHECK_OK(onnxl_parse_proto_from_stream(back, s, NULL));
  onnxl_stream_free(s);
  CHECK(payloads_ok(back));
  /* The first struct size knows no max_external_file_size: one file. */
  so.struct_size = 40;
  CHECK_OK(save_pair(m, "old.onnx", "old.bin", &so));
  CHECK(exists(test_path(tmp_dir, "old.bin")) && !exists(test_path(tmp_dir, "old.bin.1")));
  so = onnxl_serialize_options_default();

  /* skip_raw_data: "big" is written without its bytes, nowhere; "small" stays inline. */
  so.skip_raw_data = 1;
  CHECK_OK(save_pair(m, "skip.onnx", "skip.bin", &so));
  CHECK(!exists(test_path(tmp_dir, "skip.bin")));
  lazy = parse_model_file("skip.onnx");
  CHECK(lazy != NULL);
  if (lazy != NULL) {
    CHECK(!onnxl_tensor_proto_has_raw_data(test_initializer(lazy, "big")));
    CHECK(onnxl_tensor_proto_data_location(test_initializer(lazy, "big")) == 0);
    CHECK(onnxl_tensor_proto_dims_size(test_initializer(lazy, "big")) == 2);
    CHECK(onnxl_tensor_proto_has_raw_data(test_initializer(lazy, "small")));
    onnxl_model_proto_free(lazy);
  }
  /* ... as every other writer, and as a skipping parse reads it. */
  CHECK_OK(onnxl_serialize_model(m, &so, &b));
  {
    OnnxlParseOptions po = onnxl_parse_options_default();
    OnnxlModelProto *skipped = NULL;
    OnnxlBuffer *want = NULL;
    po.skip_raw_data = 1;
    po.raw_data_threshold = so.raw_data_threshold;
    CHECK_OK(onnxl_load_model_from_bytes(onnxl_buffer_data(expected), onnxl_buffer_size(expected), &po, &skipped));
    CHECK_OK(onnxl_serialize_model(skipped, NULL, &want));
    CHECK(onnxl_buffer_size(b) == onnxl_buffer_size(want) &&
          memcmp(onnxl_buffer_data(b), onnxl_buffer_data(want), onnxl_buffer_size(b)) == 0);
    CHECK(onnxl_buffer_size(b) < onnxl_buffer_size(expected));
    onnxl_buffer_free(want);
    onnxl_model_proto_free(skipped);
  }
  onnxl_buffer_free(b);
  CHECK(model_is_expected(m)); /* the model in memory keeps its bytes */
  so.skip_raw_data = 2;
  CHECK_STATUS(onnxl_serialize_model(m, &so, &b), ONNXL_STATUS_INVALID_ARGUMENT, "skip_raw_data");
  so = onnxl_serialize_options_default();

  /* use_external_data_location: a model whose "big" is still in keep.bin (not loaded). */
  CHECK_OK(save_pair(m, "keep.onnx", "keep.bin", &so));
  lazy = parse_model_file("keep.onnx");
  CHECK(lazy != NULL && !onnxl_tensor_proto_has_raw_data(test_initializer(lazy, "big")));
  if (lazy != NULL) {
    /* Without the option the tensor's bytes are needed: an error, nothing written. */
    CHECK_STATUS(save_pair(lazy, "kept.onnx", "kept.bin", &so), ONNXL_STATUS_EXTERNAL_DATA, "big");
    CHECK(!exists(test_path(tmp_dir, "kept.onnx")));
    /* With it: kept.onnx references keep.bin, loads complete. */
    so.use_external_data_location = 1;
    CHECK_OK(save_pair(lazy, "kept.onnx", "kept.bin", &so));
    CHECK_OK(open_pair("kept.onnx", "keep.bin", &s));
    CHECK_OK(onnxl_parse_proto_from_stream(back, s, NULL));
    onnxl_stream_free(s);
    CHECK(payloads_ok(back));
    /* A kept reference naming the weights file being written is refused. */
    CHECK_STATUS(save_pair(lazy, "again.onnx", "keep.bin", &so), ONNXL_STATUS_PATH_REFUSED,
                 "use_external_data_location");
    onnxl_model_proto_free(lazy);
  }
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
  test_mkdir(tmp_dir);
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
  RUN(test_model_weights_options);
  onnxl_buffer_free(expected);
  return test_summary("test_streams");
}
