/* Every model entry point of the C ABI on its success paths: version and status names, options
 * defaults, load (auto / mmap / buffered, sequential and parallel), load from bytes, save
 * (atomic), serialize and buffers, aligned saves, standalone TensorProto load / save,
 * skip_raw_data, load progress callbacks, and the
 * lifecycle functions every message has (new, free, clear, copy_from, parse_from_bytes,
 * serialize, byte_size).
 *
 * Usage: test_entry_points MODEL.onnx TEMP_DIR */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "test_util.h"

#ifndef ONNXL_EXPECTED_VERSION
#error "ONNXL_EXPECTED_VERSION must be defined (the version in Cargo.toml)"
#endif

static const char *model_path;
static const char *tmp_dir;
static uint8_t *file_bytes;
static size_t file_len;

/* `m` serializes to exactly `len` bytes at `data`. */
static int serializes_to(const OnnxlModelProto *m, const uint8_t *data, size_t len) {
  OnnxlBuffer *b = NULL;
  int same;
  if (onnxl_serialize_model(m, NULL, &b) != ONNXL_STATUS_OK) {
    return 0;
  }
  same = onnxl_buffer_size(b) == len && memcmp(onnxl_buffer_data(b), data, len) == 0 &&
         onnxl_model_proto_byte_size(m) == (uint64_t)len;
  onnxl_buffer_free(b);
  return same;
}

static void test_version_and_status_names(void) {
  static const char *const names[] = {
      "ONNXL_STATUS_OK",           "ONNXL_STATUS_INVALID_ARGUMENT", "ONNXL_STATUS_NULL_POINTER",
      "ONNXL_STATUS_IO",           "ONNXL_STATUS_PARSE",            "ONNXL_STATUS_EXTERNAL_DATA",
      "ONNXL_STATUS_PATH_REFUSED", "ONNXL_STATUS_CRYPTO",           "ONNXL_STATUS_AUTHENTICATION",
      "ONNXL_STATUS_UNSUPPORTED",  "ONNXL_STATUS_LIMIT_EXCEEDED",   "ONNXL_STATUS_OUT_OF_MEMORY",
      "ONNXL_STATUS_PANIC",        "ONNXL_STATUS_OUT_OF_RANGE",     "ONNXL_STATUS_INTERNAL",
      "ONNXL_STATUS_VALIDATION",   "ONNXL_STATUS_INFERENCE",        "ONNXL_STATUS_CONVERSION",
      "ONNXL_STATUS_NOT_FOUND",
  };
  CHECK(strcmp(onnxl_version(), ONNXL_EXPECTED_VERSION) == 0);
  for (uint32_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    CHECK(strcmp(onnxl_status_name(i), names[i]) == 0);
  }
  CHECK(ONNXL_STATUS_OK == 0 && ONNXL_STATUS_PARSE == 4 && ONNXL_STATUS_PANIC == 12);
  CHECK(strcmp(onnxl_status_name(999), "ONNXL_STATUS_UNKNOWN") == 0);
  CHECK(onnxl_last_error_message() != NULL);
  /* Libraries built on this one report through the same thread-local error. */
  CHECK(onnxl_set_last_error(ONNXL_STATUS_VALIDATION, "bad\xffmodel", 9) == ONNXL_STATUS_VALIDATION);
  CHECK(onnxl_last_error_status() == ONNXL_STATUS_VALIDATION);
  CHECK(strcmp(onnxl_last_error_message(), "bad\xef\xbf\xbdmodel") == 0);
  CHECK(onnxl_set_last_error(ONNXL_STATUS_OK, NULL, 0) == ONNXL_STATUS_INTERNAL);
  CHECK(onnxl_last_error_message()[0] == '\0');
}

static void test_options_defaults(void) {
  OnnxlParseOptions p = onnxl_parse_options_default();
  OnnxlSerializeOptions s = onnxl_serialize_options_default();
  CHECK(p.struct_size == sizeof p);
  CHECK(p.raw_data_threshold == 1024);
  CHECK(p.alignment == 64);
  CHECK(p.max_tensor_size_bytes == 0);
  CHECK(p.num_threads == 1);
  CHECK(p.max_recursion_depth == 100);
  CHECK(p.file_load_mode == ONNXL_FILE_LOAD_MODE_AUTO);
  CHECK(!p.no_copy && !p.skip_raw_data);
  CHECK(p.reject_unauthenticated == 0 && p.reserved == 0);
  CHECK(s.struct_size == sizeof s);
  CHECK(s.raw_data_threshold == 64);
  CHECK(s.alignment == 0);
  CHECK(s.max_serialized_size_bytes == 0);
  CHECK(s.num_threads == 1);
  CHECK(s.reserved == 0);
}

/* Whether every non-empty initializer payload of `m` starts at a multiple of `align`. */
static int payloads_aligned(const OnnxlModelProto *m, uintptr_t align) {
  const OnnxlGraphProto *g = onnxl_model_proto_graph(m);
  for (size_t i = 0; i < onnxl_graph_proto_initializer_size(g); ++i) {
    const uint8_t *p = NULL;
    size_t len = 0;
    if (onnxl_tensor_proto_raw_data(onnxl_graph_proto_initializer(g, i), &p, &len) != ONNXL_STATUS_OK ||
        (len > 0 && (uintptr_t)p % align != 0)) {
      return 0;
    }
  }
  return 1;
}

static void test_load_modes(void) {
  const uint32_t modes[] = {ONNXL_FILE_LOAD_MODE_AUTO, ONNXL_FILE_LOAD_MODE_MMAP,
                            ONNXL_FILE_LOAD_MODE_BUFFERED};
  const int32_t threads[] = {1, 2, -1};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; ++i) {
    for (size_t j = 0; j < sizeof threads / sizeof threads[0]; ++j) {
      for (int no_copy = 0; no_copy <= 1; ++no_copy) {
        OnnxlParseOptions o = onnxl_parse_options_default();
        OnnxlModelProto *m = NULL;
        o.file_load_mode = modes[i];
        o.num_threads = threads[j];
        o.no_copy = no_copy != 0;
        CHECK_OK(onnxl_load_model(model_path, &o, &m));
        CHECK(m != NULL);
        CHECK(serializes_to(m, file_bytes, file_len));
        /* Every pointer handed out is aligned (default 64), borrowed or copied. */
        CHECK(payloads_aligned(m, 64));
        onnxl_model_proto_free(m);
        /* Every payload considered for borrowing (threshold 0): the sample's sit at misaligned
         * offsets of the file, so no_copy loads copy them, and say so. */
        o.raw_data_threshold = 0;
        o.alignment = 256;
        CHECK_OK(onnxl_load_model(model_path, &o, &m));
        CHECK(payloads_aligned(m, 256));
        {
          /* Each payload is borrowed (aligned where it lies) or copied for alignment; from a
           * mapping (page-aligned) the file offsets decide: all four are misaligned. */
          const OnnxlGraphProto *g = onnxl_model_proto_graph(m);
          size_t borrowed = 0, realigned = onnxl_model_realigned_tensors(m);
          for (size_t k = 0; k < onnxl_graph_proto_initializer_size(g); ++k) {
            borrowed += onnxl_tensor_proto_raw_data_is_borrowed(onnxl_graph_proto_initializer(g, k));
          }
          CHECK(borrowed + realigned == (no_copy ? 4u : 0u));
          if (no_copy && modes[i] == ONNXL_FILE_LOAD_MODE_MMAP) {
            CHECK(realigned == 4);
          }
        }
        CHECK(serializes_to(m, file_bytes, file_len));
        onnxl_model_proto_free(m);
      }
    }
  }
  {
    OnnxlModelProto *m = NULL;
    CHECK_OK(onnxl_load_model(model_path, NULL, &m)); /* NULL options = defaults */
    CHECK(serializes_to(m, file_bytes, file_len));
    onnxl_model_proto_free(m);
  }
}

static void test_load_from_bytes_copies(void) {
  uint8_t *copy = malloc(file_len);
  OnnxlModelProto *m = NULL;
  CHECK(copy != NULL);
  memcpy(copy, file_bytes, file_len);
  CHECK_OK(onnxl_load_model_from_bytes(copy, file_len, NULL, &m));
  /* Copy mode: the caller's bytes may change and go away right after the call. */
  memset(copy, 0xAB, file_len);
  free(copy);
  CHECK(serializes_to(m, file_bytes, file_len));
  onnxl_model_proto_free(m);

  m = NULL;
  CHECK_OK(onnxl_load_model_from_bytes(NULL, 0, NULL, &m)); /* empty input: an empty model */
  CHECK(m != NULL && onnxl_model_proto_byte_size(m) == 0 && !onnxl_model_proto_has_graph(m));
  onnxl_model_proto_free(m);
}

static int has_temp_files(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int found = 0;
  if (d == NULL) {
    return 1;
  }
  while ((e = readdir(d)) != NULL) {
    found |= strstr(e->d_name, ".tmp") != NULL;
  }
  closedir(d);
  return found;
}

static void test_save_and_serialize(void) {
  OnnxlModelProto *m = NULL, *again = NULL;
  OnnxlBuffer *b = NULL;
  OnnxlSerializeOptions so = onnxl_serialize_options_default();
  char out[4096];
  uint8_t *saved;
  size_t saved_len;
  snprintf(out, sizeof out, "%s", test_path(tmp_dir, "saved.onnx"));
  CHECK_OK(onnxl_load_model(model_path, NULL, &m));
  CHECK_OK(onnxl_serialize_model(m, NULL, &b));
  CHECK(onnxl_buffer_size(b) == file_len);
  CHECK(memcmp(onnxl_buffer_data(b), file_bytes, file_len) == 0);
  onnxl_buffer_free(b);
  b = NULL;
  so.num_threads = 2;
  CHECK_OK(onnxl_serialize_model(m, &so, &b));
  CHECK(onnxl_buffer_size(b) == file_len && memcmp(onnxl_buffer_data(b), file_bytes, file_len) == 0);
  onnxl_buffer_free(b);

  /* Save twice (the second replaces the first atomically), then load back. */
  test_write_file(out, "old contents", 12);
  CHECK_OK(onnxl_model_proto_set_producer_version(m, "2", 1));
  CHECK_OK(onnxl_save_model(m, out, NULL));
  CHECK_OK(onnxl_model_proto_set_producer_version(m, "1", 1));
  CHECK_OK(onnxl_save_model(m, out, &so));
  CHECK(!has_temp_files(tmp_dir));
  saved = test_read_file(out, &saved_len);
  CHECK(saved_len == file_len && memcmp(saved, file_bytes, file_len) == 0);
  free(saved);
  CHECK_OK(onnxl_load_model(out, NULL, &again));
  CHECK(serializes_to(again, file_bytes, file_len));
  onnxl_model_proto_free(again);
  onnxl_model_proto_free(m);

  /* Buffer functions accept NULL. */
  CHECK(onnxl_buffer_data(NULL) == NULL);
  CHECK(onnxl_buffer_size(NULL) == 0);
  onnxl_buffer_free(NULL);
  {
    OnnxlModelProto *empty = onnxl_model_proto_new();
    OnnxlBuffer *eb = NULL;
    CHECK_OK(onnxl_serialize_model(empty, NULL, &eb));
    CHECK(eb != NULL && onnxl_buffer_size(eb) == 0 && onnxl_buffer_data(eb) != NULL);
    onnxl_buffer_free(eb);
    onnxl_model_proto_free(empty);
  }
}

/* An aligned save (`inline_alignment`): a no-copy load borrows every payload of the file where it
 * is, none copied for alignment, and the model is the same (the padding is not kept). */
static void test_aligned_save(void) {
  OnnxlModelProto *m = NULL, *again = NULL;
  OnnxlSerializeOptions so = onnxl_serialize_options_default();
  OnnxlParseOptions po = onnxl_parse_options_default();
  OnnxlBuffer *b = NULL;
  char out[1024];
  snprintf(out, sizeof out, "%s/aligned.onnx", tmp_dir);
  CHECK(so.inline_alignment == 0 && so.struct_size == 64);
  CHECK_OK(onnxl_load_model(model_path, NULL, &m));
  so.raw_data_threshold = 0; /* every payload, however small */
  so.inline_alignment = 256;
  CHECK_OK(onnxl_save_model(m, out, &so));
  po.no_copy = 1;
  po.file_load_mode = ONNXL_FILE_LOAD_MODE_MMAP;
  po.raw_data_threshold = 0;
  po.alignment = 256;
  CHECK_OK(onnxl_load_model(out, &po, &again));
  CHECK(again != NULL && onnxl_model_realigned_tensors(again) == 0 && payloads_aligned(again, 256));
  {
    const OnnxlGraphProto *g = onnxl_model_proto_graph(again);
    size_t borrowed = 0;
    for (size_t k = 0; k < onnxl_graph_proto_initializer_size(g); ++k) {
      borrowed += onnxl_tensor_proto_raw_data_is_borrowed(onnxl_graph_proto_initializer(g, k));
    }
    CHECK(borrowed == 4); /* all four, copied by the same load of the original file */
  }
  CHECK(serializes_to(again, file_bytes, file_len));
  onnxl_model_proto_free(again);
  /* A caller compiled before the field (struct size 48) gets the default: protobuf's bytes. */
  so.struct_size = 48;
  CHECK_OK(onnxl_serialize_model(m, &so, &b));
  CHECK(b != NULL && onnxl_buffer_size(b) == file_len &&
        memcmp(onnxl_buffer_data(b), file_bytes, file_len) == 0);
  onnxl_buffer_free(b);
  b = NULL;
  so.struct_size = sizeof so;
  so.inline_alignment = 100;
  CHECK_STATUS(onnxl_serialize_model(m, &so, &b), ONNXL_STATUS_INVALID_ARGUMENT, "inline_alignment");
  CHECK(b == NULL);
  onnxl_model_proto_free(m);
}

static void test_tensor_proto_files(void) {
  OnnxlModelProto *m = test_build_model();
  const OnnxlTensorProto *big = test_initializer(m, "big");
  OnnxlTensorProto *loaded = NULL;
  OnnxlBuffer *a = NULL, *b = NULL;
  char out[4096];
  snprintf(out, sizeof out, "%s", test_path(tmp_dir, "tensor.pb"));
  CHECK(m != NULL && big != NULL);
  CHECK_OK(onnxl_save_tensor_proto(big, out, NULL));
  CHECK_OK(onnxl_load_tensor_proto(out, NULL, &loaded));
  CHECK_OK(onnxl_tensor_proto_serialize(big, NULL, &a));
  CHECK_OK(onnxl_tensor_proto_serialize(loaded, NULL, &b));
  CHECK(onnxl_buffer_size(a) == onnxl_buffer_size(b) &&
        memcmp(onnxl_buffer_data(a), onnxl_buffer_data(b), onnxl_buffer_size(a)) == 0);
  CHECK(VIEW_EQ(onnxl_tensor_proto_name(loaded), "big"));
  {
    const uint8_t *data = NULL;
    size_t len = 0;
    CHECK_OK(onnxl_tensor_proto_raw_data(loaded, &data, &len));
    CHECK(test_big_values_ok(data, len));
  }
  onnxl_buffer_free(a);
  onnxl_buffer_free(b);
  onnxl_tensor_proto_free(loaded);
  loaded = NULL;
  {
    /* no_copy from a mapped tensor file. */
    OnnxlParseOptions o = onnxl_parse_options_default();
    const uint8_t *data = NULL;
    size_t len = 0;
    o.no_copy = true;
    o.alignment = 1; /* borrow wherever the payload lies (the default 64 copies misaligned ones) */
    o.file_load_mode = ONNXL_FILE_LOAD_MODE_MMAP;
    CHECK_OK(onnxl_load_tensor_proto(out, &o, &loaded));
    CHECK(onnxl_tensor_proto_raw_data_is_borrowed(loaded));
    CHECK_OK(onnxl_tensor_proto_raw_data(loaded, &data, &len));
    CHECK(test_big_values_ok(data, len));
    onnxl_tensor_proto_free(loaded);
  }
  onnxl_model_proto_free(m);
}

static void test_skip_raw_data(void) {
  OnnxlModelProto *m = test_build_model(), *skipped = NULL;
  OnnxlBuffer *b = NULL;
  OnnxlParseOptions o = onnxl_parse_options_default();
  const uint8_t *data = NULL;
  size_t len = 99;
  CHECK_OK(onnxl_serialize_model(m, NULL, &b));
  o.skip_raw_data = true;
  CHECK_OK(onnxl_load_model_from_bytes(onnxl_buffer_data(b), onnxl_buffer_size(b), &o, &skipped));
  /* The large payload is dropped, the small one kept; the structure is all there. */
  CHECK_OK(onnxl_tensor_proto_raw_data(test_initializer(skipped, "big"), &data, &len));
  CHECK(len == 0);
  CHECK(onnxl_tensor_proto_dims_size(test_initializer(skipped, "big")) == 2);
  CHECK_OK(onnxl_tensor_proto_raw_data(test_initializer(skipped, "small"), &data, &len));
  CHECK(len == 3 * sizeof(float));
  CHECK(onnxl_graph_proto_node_size(onnxl_model_proto_graph(skipped)) == 1);
  onnxl_model_proto_free(skipped);
  onnxl_buffer_free(b);
  onnxl_model_proto_free(m);
}

/* The sum of the initializer payload sizes of `m`. */
static uint64_t payload_bytes(const OnnxlModelProto *m) {
  const OnnxlGraphProto *g = onnxl_model_proto_graph(m);
  uint64_t sum = 0;
  for (size_t i = 0; i < onnxl_graph_proto_initializer_size(g); ++i) {
    const uint8_t *p = NULL;
    size_t len = 0;
    if (onnxl_tensor_proto_raw_data(onnxl_graph_proto_initializer(g, i), &p, &len) == ONNXL_STATUS_OK) {
      sum += len;
    }
  }
  return sum;
}

/* The size of the file at `path` (0 when it cannot be read). */
static uint64_t size_of_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* A progress callback: adds the bytes reported to the counter at `user_data` (from any thread). */
static void count_progress(uint64_t bytes, void *user_data) {
  atomic_fetch_add((_Atomic uint64_t *)user_data, bytes);
}

/* The progress callback of loads: the calls of a file load sum to the model file's size plus
 * the external data read (here a packed weights file, one range per tensor), sequential or
 * parallel, copying or borrowing; a caller compiled before the field existed (struct size 64)
 * gets no calls. */
static void test_load_progress(void) {
  OnnxlModelProto *m = NULL;
  OnnxlExternalDataOptions e = onnxl_external_data_options_default();
  char onnx[4096], weights[4096];
  uint64_t expected;
  snprintf(onnx, sizeof onnx, "%s", test_path(tmp_dir, "progress.onnx"));
  snprintf(weights, sizeof weights, "%s", test_path(tmp_dir, "progress.onnx.data"));
  CHECK_OK(onnxl_load_model(model_path, NULL, &m));
  e.location = "progress.onnx.data";
  e.size_threshold = 0;
  e.alignment = 1;
  CHECK_OK(onnxl_save_model_with_external_data(m, onnx, &e));
  onnxl_model_proto_free(m);
  CHECK(size_of_file(weights) > 0);
  expected = size_of_file(onnx) + size_of_file(weights);
  for (int32_t threads = 1; threads <= 2; ++threads) {
    for (int no_copy = 0; no_copy <= 1; ++no_copy) {
      _Atomic uint64_t done = 0;
      OnnxlParseOptions o = onnxl_parse_options_default();
      o.num_threads = threads;
      o.no_copy = (uint8_t)no_copy;
      o.progress = count_progress;
      o.progress_user_data = (void *)&done;
      CHECK_OK(onnxl_load_model(onnx, &o, &m));
      CHECK(payload_bytes(m) == size_of_file(weights)); /* every tensor loaded */
      onnxl_model_proto_free(m);
      CHECK(atomic_load(&done) == expected);
      o.struct_size = 64;
      atomic_store(&done, 0);
      CHECK_OK(onnxl_load_model(onnx, &o, &m));
      onnxl_model_proto_free(m);
      CHECK(atomic_load(&done) == 0);
    }
  }
}

static void test_message_lifecycle(void) {
  OnnxlModelProto *m = NULL, *copy = onnxl_model_proto_new(), *parsed = onnxl_model_proto_new();
  OnnxlBuffer *b = NULL;
  CHECK_OK(onnxl_load_model(model_path, NULL, &m));
  /* copy_from is a deep copy: changing the copy leaves the source alone. */
  CHECK_OK(onnxl_model_proto_copy_from(copy, m));
  CHECK(serializes_to(copy, file_bytes, file_len));
  CHECK_OK(onnxl_model_proto_set_producer_name(copy, "other", 5));
  CHECK(VIEW_EQ(onnxl_model_proto_producer_name(m), "onnx_light-sample"));
  /* parse_from_bytes replaces the contents. */
  CHECK_OK(onnxl_model_proto_parse_from_bytes(parsed, file_bytes, file_len, NULL));
  CHECK(serializes_to(parsed, file_bytes, file_len));
  CHECK_OK(onnxl_model_proto_parse_from_bytes(parsed, file_bytes, file_len, NULL));
  CHECK(serializes_to(parsed, file_bytes, file_len));
  CHECK_OK(onnxl_model_proto_serialize(parsed, NULL, &b));
  CHECK(onnxl_buffer_size(b) == file_len);
  onnxl_buffer_free(b);
  /* clear empties everything. */
  CHECK_OK(onnxl_model_proto_clear(parsed));
  CHECK(onnxl_model_proto_byte_size(parsed) == 0);
  CHECK(!onnxl_model_proto_has_graph(parsed) && !onnxl_model_proto_has_ir_version(parsed));
  onnxl_model_proto_free(parsed);
  onnxl_model_proto_free(copy);
  onnxl_model_proto_free(m);
  onnxl_model_proto_free(NULL); /* NULL is ignored */

  /* The same lifecycle on a few other message types. */
  {
    OnnxlGraphProto *g = onnxl_graph_proto_new(), *g2 = onnxl_graph_proto_new();
    OnnxlBuffer *gb = NULL;
    CHECK_OK(onnxl_graph_proto_set_name(g, "graph", 5));
    CHECK_OK(onnxl_graph_proto_serialize(g, NULL, &gb));
    CHECK(onnxl_buffer_size(gb) == 7 && memcmp(onnxl_buffer_data(gb), "\x12\x05graph", 7) == 0);
    CHECK(onnxl_graph_proto_byte_size(g) == 7);
    CHECK_OK(onnxl_graph_proto_parse_from_bytes(g2, onnxl_buffer_data(gb), onnxl_buffer_size(gb), NULL));
    CHECK(VIEW_EQ(onnxl_graph_proto_name(g2), "graph"));
    CHECK_OK(onnxl_graph_proto_copy_from(g2, g));
    CHECK_OK(onnxl_graph_proto_clear(g));
    CHECK(onnxl_graph_proto_byte_size(g) == 0);
    onnxl_buffer_free(gb);
    onnxl_graph_proto_free(g2);
    onnxl_graph_proto_free(g);
  }
  {
    OnnxlTensorProtoSegment *s = onnxl_tensor_proto_segment_new();
    OnnxlTypeProtoMap *tm = onnxl_type_proto_map_new();
    CHECK_OK(onnxl_tensor_proto_segment_set_begin(s, 1));
    CHECK(onnxl_tensor_proto_segment_byte_size(s) == 2);
    CHECK_OK(onnxl_type_proto_map_set_key_type(tm, ONNXL_TENSOR_PROTO_DATA_TYPE_STRING));
    CHECK(onnxl_type_proto_map_byte_size(tm) == 2);
    onnxl_type_proto_map_free(tm);
    onnxl_tensor_proto_segment_free(s);
  }
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
  RUN(test_version_and_status_names);
  RUN(test_options_defaults);
  RUN(test_load_modes);
  RUN(test_load_from_bytes_copies);
  RUN(test_save_and_serialize);
  RUN(test_aligned_save);
  RUN(test_tensor_proto_files);
  RUN(test_skip_raw_data);
  RUN(test_load_progress);
  RUN(test_message_lifecycle);
  free(file_bytes);
  return test_summary("test_entry_points");
}
