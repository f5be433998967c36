/* The ownership rules of tensor bytes through the C ABI (README "Loading and ownership"):
 * - an owner token outlives the model: retain it, free the model, read the bytes;
 * - no_copy from caller bytes borrows them (the pointer lies inside the caller's buffer) without
 *   an owner token;
 * - no_copy from a memory-mapped file: the pointer lies inside the mapping (checked against
 *   /proc/self/maps), stays valid after the model is freed while a token is held, and the
 *   mapping goes away with the last token;
 * - copies share borrowed bytes; memory lent with a release callback is released exactly once,
 *   after its last user (tensor, copies, tokens); later writes never change shared bytes.
 *
 * Usage: test_ownership TEMP_DIR   (Linux: reads /proc/self/maps) */
#define _DEFAULT_SOURCE /* realpath */

#include <limits.h>
#include <sys/stat.h>

#include "test_maps.h"
#include "test_util.h"

static const char *tmp_dir;

/* Serialized test model (built through the setters). */
static OnnxlBuffer *model_bytes(void) {
  OnnxlModelProto *m = test_build_model();
  OnnxlBuffer *b = NULL;
  CHECK(m != NULL);
  CHECK_OK(onnxl_serialize_model(m, NULL, &b));
  onnxl_model_proto_free(m);
  return b;
}

/* The mutable initializer `name` of `m`. */
static OnnxlTensorProto *mutable_initializer(OnnxlModelProto *m, const char *name) {
  OnnxlGraphProto *g = onnxl_model_proto_mutable_graph(m);
  for (size_t i = 0; i < onnxl_graph_proto_initializer_size(g); ++i) {
    OnnxlTensorProto *t = onnxl_graph_proto_mutable_initializer(g, i);
    if (VIEW_EQ(onnxl_tensor_proto_name(t), name)) {
      return t;
    }
  }
  return NULL;
}

static void test_owner_outlives_copied_model(void) {
  OnnxlBuffer *bytes = model_bytes();
  OnnxlModelProto *m = NULL;
  OnnxlTensorProto *t;
  const OnnxlOwner *owner, *second;
  const uint8_t *p = NULL, *q = NULL, *owned = NULL;
  size_t len = 0, qlen = 0, olen = 0;
  CHECK_OK(onnxl_load_model_from_bytes(onnxl_buffer_data(bytes), onnxl_buffer_size(bytes), NULL, &m));
  onnxl_buffer_free(bytes); /* copy mode: the model owns its bytes */
  t = mutable_initializer(m, "big");
  CHECK(t != NULL);
  CHECK(!onnxl_tensor_proto_raw_data_is_borrowed(t));
  CHECK_OK(onnxl_tensor_proto_raw_data(t, &p, &len));
  owner = onnxl_tensor_proto_raw_data_owner(t);
  CHECK(owner != NULL);
  /* Taking the token moves the bytes into a shared buffer without moving them in memory. */
  CHECK_OK(onnxl_tensor_proto_raw_data(t, &q, &qlen));
  CHECK(q == p && qlen == len);
  CHECK_OK(onnxl_owner_data(owner, &owned, &olen));
  CHECK(owned == p && olen == len);
  second = onnxl_owner_retain(owner);
  CHECK(second == owner);
  onnxl_model_proto_free(m);
  /* The model is gone; the bytes live on (Valgrind / ASan check these reads). */
  CHECK(test_big_values_ok(p, len));
  onnxl_owner_release(owner);
  CHECK_OK(onnxl_owner_data(second, &owned, &olen));
  CHECK(test_big_values_ok(owned, olen));
  onnxl_owner_release(second);
  CHECK(onnxl_owner_retain(NULL) == NULL);
  onnxl_owner_release(NULL);
}

static void test_later_writes_do_not_change_shared_bytes(void) {
  OnnxlModelProto *m = test_build_model();
  OnnxlTensorProto *t = mutable_initializer(m, "big");
  const OnnxlOwner *owner = onnxl_tensor_proto_raw_data_owner(t);
  const uint8_t *p = NULL;
  size_t len = 0;
  const uint8_t other[4] = {1, 2, 3, 4};
  CHECK(owner != NULL);
  CHECK_OK(onnxl_tensor_proto_set_raw_data(t, other, sizeof other));
  CHECK_OK(onnxl_tensor_proto_raw_data(t, &p, &len));
  CHECK(len == 4 && memcmp(p, other, 4) == 0);
  CHECK_OK(onnxl_owner_data(owner, &p, &len));
  CHECK(test_big_values_ok(p, len));
  onnxl_model_proto_free(m);
  CHECK(test_big_values_ok(p, len));
  onnxl_owner_release(owner);
}

static void test_no_copy_from_caller_bytes(void) {
  OnnxlBuffer *bytes = model_bytes();
  size_t n = onnxl_buffer_size(bytes);
  uint8_t *buf = malloc(n);
  OnnxlModelProto *m = NULL;
  OnnxlParseOptions o = onnxl_parse_options_default();
  const OnnxlTensorProto *t;
  const uint8_t *p = NULL;
  size_t len = 0;
  CHECK(buf != NULL);
  memcpy(buf, onnxl_buffer_data(bytes), n);
  onnxl_buffer_free(bytes);
  o.no_copy = true;
  o.alignment = 1; /* borrow wherever the payload lies (the default 64 copies misaligned ones) */
  CHECK_OK(onnxl_load_model_from_bytes(buf, n, &o, &m));
  t = test_initializer(m, "big");
  CHECK(onnxl_tensor_proto_raw_data_is_borrowed(t));
  CHECK_OK(onnxl_tensor_proto_raw_data(t, &p, &len));
  /* The pointer lies inside the caller's buffer: nothing was copied. */
  CHECK(p >= buf && p + len <= buf + n);
  CHECK(test_big_values_ok(p, len));
  /* ...so a change of the caller's bytes shows through. */
  buf[(size_t)(p - buf)] ^= 0xFF;
  {
    const uint8_t *again = NULL;
    size_t again_len = 0;
    CHECK_OK(onnxl_tensor_proto_raw_data(t, &again, &again_len));
    CHECK(again == p && !test_big_values_ok(again, again_len));
  }
  buf[(size_t)(p - buf)] ^= 0xFF;
  /* Caller memory has no owner token: it cannot be extended. */
  CHECK(onnxl_tensor_proto_raw_data_owner(mutable_initializer(m, "big")) == NULL);
  CHECK_LAST_ERROR(ONNXL_STATUS_UNSUPPORTED, "");
  /* Small payloads (below raw_data_threshold) are copied even with no_copy. */
  CHECK(!onnxl_tensor_proto_raw_data_is_borrowed(test_initializer(m, "small")));
  onnxl_model_proto_free(m); /* the model first, then the caller's bytes */
  free(buf);
}

static void test_no_copy_from_mapped_file(void) {
  OnnxlBuffer *bytes = model_bytes();
  OnnxlModelProto *m = NULL, *copy = onnxl_model_proto_new();
  OnnxlParseOptions o = onnxl_parse_options_default();
  OnnxlTensorProto *t;
  const OnnxlOwner *owner;
  const uint8_t *p = NULL, *cp = NULL;
  size_t len = 0, clen = 0;
  char path[4096];
  snprintf(path, sizeof path, "%s", test_path(tmp_dir, "mapped.onnx"));
  test_write_file(path, onnxl_buffer_data(bytes), onnxl_buffer_size(bytes));
  onnxl_buffer_free(bytes);
  CHECK(mappings_of(path, NULL) == 0);

  o.no_copy = true;

  o.alignment = 1; /* borrow wherever the payload lies (the default 64 copies misaligned ones) */
  o.file_load_mode = ONNXL_FILE_LOAD_MODE_MMAP;
  CHECK_OK(onnxl_load_model(path, &o, &m));
  t = mutable_initializer(m, "big");
  CHECK(onnxl_tensor_proto_raw_data_is_borrowed(t));
  CHECK_OK(onnxl_tensor_proto_raw_data(t, &p, &len));
  /* The tensor bytes are the file's mapping. */
  CHECK(mappings_of(path, p) == 1);
  CHECK(mappings_of(path, p + len - 1) == 1);
  CHECK(test_big_values_ok(p, len));

  /* A copy shares the borrowed bytes (and their owner). */
  CHECK_OK(onnxl_model_proto_copy_from(copy, m));
  CHECK_OK(onnxl_tensor_proto_raw_data(test_initializer(copy, "big"), &cp, &clen));
  CHECK(cp == p && clen == len);

  owner = onnxl_tensor_proto_raw_data_owner(t);
  CHECK(owner != NULL);
  onnxl_model_proto_free(m);
  onnxl_model_proto_free(copy);
  /* Model and copy are gone; the token keeps the mapping. */
  CHECK(mappings_of(path, p) == 1);
  CHECK(test_big_values_ok(p, len));
  {
    const uint8_t *od = NULL;
    size_t ol = 0;
    CHECK_OK(onnxl_owner_data(owner, &od, &ol));
    CHECK(od == p && ol == len);
  }
  onnxl_owner_release(owner);
  /* The last token is gone: so is the mapping. */
  CHECK(mappings_of(path, NULL) == 0);
}

static int released_count;
static void *released_with;
static void on_release(void *user_data) {
  released_count += 1;
  released_with = user_data;
}

static void test_lent_memory(void) {
  static float lent[TEST_BIG_COUNT];
  OnnxlTensorProto *t = onnxl_tensor_proto_new(), *copy = onnxl_tensor_proto_new();
  const OnnxlOwner *owner;
  const uint8_t *p = NULL;
  size_t len = 0;
  int tag = 42;
  for (int i = 0; i < TEST_BIG_COUNT; ++i) {
    lent[i] = (float)i * 0.5f;
  }
  released_count = 0;
  CHECK_OK(onnxl_tensor_proto_set_raw_data_borrowed(t, (const uint8_t *)lent, sizeof lent, on_release, &tag));
  CHECK(onnxl_tensor_proto_raw_data_is_borrowed(t));
  CHECK_OK(onnxl_tensor_proto_raw_data(t, &p, &len));
  CHECK(p == (const uint8_t *)lent && len == sizeof lent);
  CHECK_OK(onnxl_tensor_proto_copy_from(copy, t));
  owner = onnxl_tensor_proto_raw_data_owner(t);
  CHECK(owner != NULL);
  onnxl_tensor_proto_free(t);
  CHECK(released_count == 0); /* the copy and the token still use it */
  onnxl_tensor_proto_free(copy);
  CHECK(released_count == 0); /* the token still uses it */
  onnxl_owner_release(owner);
  CHECK(released_count == 1 && released_with == &tag);

  /* Replacing lent bytes releases them too. */
  released_count = 0;
  t = onnxl_tensor_proto_new();
  CHECK_OK(onnxl_tensor_proto_set_raw_data_borrowed(t, (const uint8_t *)lent, 16, on_release, &tag));
  CHECK_OK(onnxl_tensor_proto_clear_raw_data(t));
  CHECK(released_count == 1);
  CHECK(!onnxl_tensor_proto_has_raw_data(t));

  /* Without a release callback the bytes have no owner. */
  CHECK_OK(onnxl_tensor_proto_set_raw_data_borrowed(t, (const uint8_t *)lent, 16, NULL, NULL));
  CHECK(onnxl_tensor_proto_raw_data_is_borrowed(t));
  CHECK(onnxl_tensor_proto_raw_data_owner(t) == NULL);
  CHECK_LAST_ERROR(ONNXL_STATUS_UNSUPPORTED, "");
  onnxl_tensor_proto_free(t);

  /* On failure nothing is borrowed and the callback is not called. */
  released_count = 0;
  CHECK_STATUS(onnxl_tensor_proto_set_raw_data_borrowed(NULL, (const uint8_t *)lent, 16, on_release, &tag),
               ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK(released_count == 0);
}

static void test_owner_of_unset_and_owned_bytes(void) {
  OnnxlTensorProto *t = onnxl_tensor_proto_new();
  const OnnxlOwner *owner;
  const uint8_t *p = NULL;
  size_t len = 0;
  const uint8_t bytes[3] = {7, 8, 9};
  CHECK(onnxl_tensor_proto_raw_data_owner(t) == NULL);
  CHECK_LAST_ERROR(ONNXL_STATUS_INVALID_ARGUMENT, "not set");
  CHECK(onnxl_tensor_proto_raw_data_owner(NULL) == NULL);
  CHECK_LAST_ERROR(ONNXL_STATUS_NULL_POINTER, "is NULL");
  CHECK_OK(onnxl_tensor_proto_set_raw_data(t, bytes, 3));
  owner = onnxl_tensor_proto_raw_data_owner(t);
  CHECK(owner != NULL);
  onnxl_tensor_proto_free(t);
  CHECK_OK(onnxl_owner_data(owner, &p, &len));
  CHECK(len == 3 && memcmp(p, bytes, 3) == 0);
  onnxl_owner_release(owner);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEMP_DIR\n", argv[0]);
    return 2;
  }
  tmp_dir = argv[1];
  test_mkdir(tmp_dir);
  RUN(test_owner_outlives_copied_model);
  RUN(test_later_writes_do_not_change_shared_bytes);
  RUN(test_no_copy_from_caller_bytes);
  RUN(test_no_copy_from_mapped_file);
  RUN(test_lent_memory);
  RUN(test_owner_of_unset_and_owned_bytes);
  return test_summary("test_ownership");
}
