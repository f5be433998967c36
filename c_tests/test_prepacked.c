/* ONNX Runtime pre-packed blobs through the C ABI (docs/prepacked.md):
 * - a store filled from bytes (copied) and from lent memory (release callback runs once, after
 *   the last user);
 * - saved with the model: each blob right after its initializer, `prepacked_N` entries;
 * - loaded with no_copy: every buffer lies inside the ONE mapping of the weight file (checked
 *   against /proc/self/maps), the same mapping the initializers borrow from; a blob's owner token
 *   and a tensor's token each keep that mapping alive, and it goes with the last one;
 * - loaded in copy mode: equal bytes, no mapping left;
 * - the model first, its external data and blobs after the fact
 *   (onnxl_load_external_data_for_model_with_prepacked), no-copy and copy;
 * - malformed entries as ONNX Runtime handles them: incomplete triples skipped, bad numbers and
 *   ranges outside the file refused (ONNXL_STATUS_EXTERNAL_DATA);
 * - errors: unknown initializer, bad key, missing blob, NULL arguments.
 *
 * Usage: test_prepacked TEMP_DIR   (Linux: reads /proc/self/maps) */
#define _DEFAULT_SOURCE /* realpath */

#include <limits.h>
#include <sys/stat.h>

#include "test_maps.h"
#include "test_util.h"

static char model_path[PATH_MAX], data_path[PATH_MAX], dir[PATH_MAX / 2];

static uint8_t blob_a[20000], blob_b[5], blob_s[7], lent[3000];
static int released = 0;

static void release_lent(void *user_data) {
  CHECK(user_data == (void *)lent);
  released += 1;
}

static OnnxlPrepackedBlobs *make_blobs(void) {
  OnnxlPrepackedBlobs *b = onnxl_prepacked_blobs_new();
  for (size_t i = 0; i < sizeof blob_a; ++i) {
    blob_a[i] = (uint8_t)(i * 7 + 3);
  }
  memcpy(blob_b, "abcde", 5);
  memcpy(blob_s, "small!!", 7);
  for (size_t i = 0; i < sizeof lent; ++i) {
    lent[i] = (uint8_t)(i ^ 0x5a);
  }
  CHECK(b != NULL);
  CHECK_OK(onnxl_prepacked_blobs_add(b, "big", "gemm", blob_a, sizeof blob_a));
  CHECK_OK(onnxl_prepacked_blobs_add(b, "big", "gemm", blob_b, sizeof blob_b));
  CHECK_OK(onnxl_prepacked_blobs_add(b, "small", "s", blob_s, sizeof blob_s));
  CHECK_OK(onnxl_prepacked_blobs_add_borrowed(b, "big", "lent", lent, sizeof lent, release_lent,
                                              (void *)lent));
  return b;
}

static void check_blob(const OnnxlPrepackedBlobs *b, const char *init, const char *key, size_t buf,
                       const uint8_t *want, size_t want_len) {
  const uint8_t *p = NULL;
  size_t len = 0;
  CHECK_OK(onnxl_prepacked_blobs_get(b, init, key, buf, &p, &len, NULL));
  CHECK(len == want_len && p != NULL && memcmp(p, want, len) == 0);
}

static void test_store_and_save(void) {
  OnnxlPrepackedBlobs *b = make_blobs();
  OnnxlModelProto *m = test_build_model();
  OnnxlExternalDataOptions opts = onnxl_external_data_options_default();
  OnnxlStr init, key;
  size_t n = 0;
  CHECK(onnxl_prepacked_blobs_count(b) == 3);
  CHECK_OK(onnxl_prepacked_blobs_at(b, 0, &init, &key, &n));
  CHECK(VIEW_EQ(init, "big") && VIEW_EQ(key, "gemm") && n == 2);
  CHECK_OK(onnxl_prepacked_blobs_at(b, 1, &init, &key, &n));
  CHECK(VIEW_EQ(init, "big") && VIEW_EQ(key, "lent") && n == 1);
  CHECK_STATUS(onnxl_prepacked_blobs_at(b, 3, &init, &key, &n), ONNXL_STATUS_OUT_OF_RANGE, "");
  CHECK_OK(onnxl_prepacked_blobs_buffer_count(b, "small", "s", &n));
  CHECK(n == 1);
  CHECK_STATUS(onnxl_prepacked_blobs_buffer_count(b, "small", "nope", &n), ONNXL_STATUS_OUT_OF_RANGE,
               "no pre-packed blob");
  CHECK_STATUS(onnxl_prepacked_blobs_add(b, "big", "a|b", blob_b, 5), ONNXL_STATUS_INVALID_ARGUMENT,
               "'|'");
  CHECK_STATUS(onnxl_prepacked_blobs_add(b, NULL, "k", blob_b, 5), ONNXL_STATUS_NULL_POINTER,
               "initializer");
  CHECK_STATUS(onnxl_prepacked_blobs_add(b, "big", "k", NULL, 5), ONNXL_STATUS_NULL_POINTER, "data");
  CHECK_STATUS(onnxl_prepacked_blobs_get(b, "big", "gemm", 2, &(const uint8_t *){NULL}, &n, NULL),
               ONNXL_STATUS_OUT_OF_RANGE, "");
  check_blob(b, "big", "lent", 0, lent, sizeof lent);
  /* The lent buffer has an owner token (the release callback). */
  {
    const uint8_t *p = NULL;
    size_t len = 0;
    const OnnxlOwner *o = NULL;
    CHECK_OK(onnxl_prepacked_blobs_get(b, "big", "lent", 0, &p, &len, &o));
    CHECK(o != NULL && p == lent);
    onnxl_owner_release(o);
  }
  opts.checksum = true;
  CHECK_OK(onnxl_save_model_with_prepacked(m, b, model_path, &opts));
  /* An unknown initializer is refused before anything is written. */
  {
    char other[PATH_MAX];
    OnnxlPrepackedBlobs *bad = onnxl_prepacked_blobs_new();
    struct stat st;
    snprintf(other, sizeof other, "%s/other.onnx", dir);
    CHECK_OK(onnxl_prepacked_blobs_add(bad, "nope", "k", blob_b, 5));
    CHECK_STATUS(onnxl_save_model_with_prepacked(m, bad, other, NULL), ONNXL_STATUS_INVALID_ARGUMENT,
                 "nope");
    CHECK(stat(other, &st) != 0);
    onnxl_prepacked_blobs_free(bad);
    /* NULL blobs = a plain external-data save. */
    CHECK_OK(onnxl_save_model_with_prepacked(m, NULL, other, NULL));
  }
  onnxl_model_proto_free(m);
  CHECK(released == 0);
  onnxl_prepacked_blobs_free(b);
  CHECK(released == 1); /* the store was the last user of the lent memory */
}

static void test_no_copy_load(void) {
  OnnxlParseOptions popts = onnxl_parse_options_default();
  OnnxlExternalLoadOptions eopts = onnxl_external_load_options_default();
  OnnxlModelProto *m = NULL;
  OnnxlPrepackedBlobs *b = NULL;
  const uint8_t *p = NULL, *q = NULL, *t = NULL;
  size_t len = 0, qlen = 0, tlen = 0;
  const OnnxlOwner *blob_owner = NULL, *tensor_owner = NULL;
  OnnxlTensorProto *big = NULL;
  popts.no_copy = true;
  eopts.verify_checksums = true;
  CHECK_OK(onnxl_load_model_with_prepacked(model_path, &popts, &eopts, &m, &b));
  CHECK(onnxl_prepacked_blobs_count(b) == 3);
  check_blob(b, "big", "gemm", 0, blob_a, sizeof blob_a);
  check_blob(b, "big", "gemm", 1, blob_b, sizeof blob_b);
  check_blob(b, "big", "lent", 0, lent, sizeof lent);
  check_blob(b, "small", "s", 0, blob_s, sizeof blob_s);
  /* One mapping of the weight file; every blob buffer and the initializer lie inside it. */
  CHECK(mappings_of(data_path, NULL) == 1);
  CHECK_OK(onnxl_prepacked_blobs_get(b, "big", "gemm", 0, &p, &len, &blob_owner));
  CHECK_OK(onnxl_prepacked_blobs_get(b, "small", "s", 0, &q, &qlen, NULL));
  CHECK(mappings_of(data_path, p) == 1 && mappings_of(data_path, p + len - 1) == 1);
  CHECK(mappings_of(data_path, q) == 1);
  for (size_t i = 0; i < onnxl_graph_proto_initializer_size(onnxl_model_proto_graph(m)); ++i) {
    OnnxlTensorProto *x = onnxl_graph_proto_mutable_initializer(onnxl_model_proto_mutable_graph(m), i);
    if (VIEW_EQ(onnxl_tensor_proto_name(x), "big")) {
      big = x;
    }
  }
  CHECK(big != NULL && onnxl_tensor_proto_raw_data_is_borrowed(big));
  CHECK_OK(onnxl_tensor_proto_raw_data(big, &t, &tlen));
  CHECK(mappings_of(data_path, t) == 1);
  /* The blob follows its initializer in the file (same map: addresses keep the file's order). */
  CHECK(p >= t + tlen);
  tensor_owner = onnxl_tensor_proto_raw_data_owner(big);
  CHECK(tensor_owner != NULL && blob_owner != NULL);
  onnxl_model_proto_free(m);
  onnxl_prepacked_blobs_free(b);
  /* Either token keeps the ONE mapping (and so the other's bytes) alive. */
  CHECK(mappings_of(data_path, p) == 1);
  CHECK(memcmp(p, blob_a, sizeof blob_a) == 0);
  onnxl_owner_release(blob_owner);
  CHECK(mappings_of(data_path, p) == 1);
  CHECK(tlen == TEST_BIG_COUNT * sizeof(float));
  for (size_t i = 0; i < TEST_BIG_COUNT; ++i) {
    float v;
    memcpy(&v, t + i * sizeof v, sizeof v);
    CHECK(v == (float)i * 0.5f);
  }
  {
    const uint8_t *od = NULL;
    size_t ol = 0;
    CHECK_OK(onnxl_owner_data(tensor_owner, &od, &ol));
    CHECK(od == t && ol == tlen);
  }
  onnxl_owner_release(tensor_owner);
  CHECK(mappings_of(data_path, NULL) == 0);
}

static void test_copy_load(void) {
  OnnxlModelProto *m = NULL;
  OnnxlPrepackedBlobs *b = NULL;
  CHECK_OK(onnxl_load_model_with_prepacked(model_path, NULL, NULL, &m, &b));
  CHECK(onnxl_prepacked_blobs_count(b) == 3);
  check_blob(b, "big", "gemm", 0, blob_a, sizeof blob_a);
  check_blob(b, "big", "gemm", 1, blob_b, sizeof blob_b);
  check_blob(b, "small", "s", 0, blob_s, sizeof blob_s);
  CHECK(mappings_of(data_path, NULL) == 0);
  onnxl_model_proto_free(m);
  onnxl_prepacked_blobs_free(b);
}

/* The model without its external data first, then its external data and blobs after the fact
 * (onnxl_load_external_data_for_model_with_prepacked), in copy and no-copy mode; errors. */
static void test_external_data_for_model(void) {
  OnnxlExternalLoadOptions no_load = onnxl_external_load_options_default();
  OnnxlParseOptions popts = onnxl_parse_options_default();
  OnnxlModelProto *m = NULL;
  OnnxlPrepackedBlobs *b = NULL;
  const OnnxlTensorProto *big = NULL;
  const uint8_t *t = NULL, *p = NULL;
  size_t tlen = 0, plen = 0;
  char missing[PATH_MAX];
  no_load.load_external_data = false;
  for (int no_copy = 0; no_copy < 2; ++no_copy) {
    CHECK_OK(onnxl_load_model_with_external_data(model_path, NULL, &no_load, &m));
    big = onnxl_graph_proto_initializer(onnxl_model_proto_graph(m), 0);
    CHECK(VIEW_EQ(onnxl_tensor_proto_name(big), "big"));
    CHECK(onnxl_tensor_proto_external_data_size(big) > 0);
    popts.no_copy = no_copy != 0;
    CHECK_OK(onnxl_load_external_data_for_model_with_prepacked(m, dir, &popts, NULL, &b));
    CHECK(b != NULL && onnxl_prepacked_blobs_count(b) == 3);
    check_blob(b, "big", "gemm", 0, blob_a, sizeof blob_a);
    check_blob(b, "big", "gemm", 1, blob_b, sizeof blob_b);
    check_blob(b, "big", "lent", 0, lent, sizeof lent);
    check_blob(b, "small", "s", 0, blob_s, sizeof blob_s);
    /* The tensors are inline now (the prepacked entries dropped with the references). */
    CHECK(onnxl_tensor_proto_external_data_size(big) == 0);
    CHECK_OK(onnxl_tensor_proto_raw_data(big, &t, &tlen));
    CHECK(tlen == TEST_BIG_COUNT * sizeof(float));
    CHECK_OK(onnxl_prepacked_blobs_get(b, "big", "gemm", 0, &p, &plen, NULL));
    /* no_copy: blob and tensor inside the ONE mapping of the weight file; copy: no mapping. */
    CHECK(mappings_of(data_path, NULL) == (no_copy ? 1 : 0));
    if (no_copy) {
      CHECK(mappings_of(data_path, p) == 1 && mappings_of(data_path, t) == 1);
    }
    onnxl_prepacked_blobs_free(b);
    b = NULL;
    onnxl_model_proto_free(m);
    m = NULL;
    CHECK(mappings_of(data_path, NULL) == 0);
  }
  /* Errors: a status and a message, the model unchanged, nothing written to blobs_out. */
  CHECK_OK(onnxl_load_model_with_external_data(model_path, NULL, &no_load, &m));
  CHECK_STATUS(onnxl_load_external_data_for_model_with_prepacked(m, dir, NULL, NULL, NULL),
               ONNXL_STATUS_NULL_POINTER, "blobs_out");
  CHECK_STATUS(onnxl_load_external_data_for_model_with_prepacked(NULL, dir, NULL, NULL, &b),
               ONNXL_STATUS_NULL_POINTER, "model");
  CHECK_STATUS(onnxl_load_external_data_for_model_with_prepacked(m, NULL, NULL, NULL, &b),
               ONNXL_STATUS_NULL_POINTER, "dir");
  snprintf(missing, sizeof missing, "%s/no-such-dir", dir);
  CHECK_STATUS(onnxl_load_external_data_for_model_with_prepacked(m, missing, NULL, NULL, &b),
               ONNXL_STATUS_EXTERNAL_DATA, "big");
  CHECK(b == NULL);
  big = onnxl_graph_proto_initializer(onnxl_model_proto_graph(m), 0);
  CHECK(onnxl_tensor_proto_external_data_size(big) > 0);
  {
    OnnxlExternalLoadOptions bad = onnxl_external_load_options_default();
    bad.struct_size = 7;
    CHECK_STATUS(onnxl_load_external_data_for_model_with_prepacked(m, dir, NULL, &bad, &b),
                 ONNXL_STATUS_INVALID_ARGUMENT, "struct_size");
  }
  CHECK(b == NULL);
  onnxl_model_proto_free(m);
}

/* Rewrites the value of big's `prepacked_0` entry, saves the model as `name`, loads it. */
static OnnxlStatus load_with_entry(const char *value, OnnxlPrepackedBlobs **out) {
  OnnxlExternalLoadOptions no_load = onnxl_external_load_options_default();
  OnnxlModelProto *m = NULL, *loaded = NULL;
  OnnxlTensorProto *big = NULL;
  char path[PATH_MAX];
  OnnxlStatus st;
  no_load.load_external_data = false;
  CHECK_OK(onnxl_load_model_with_external_data(model_path, NULL, &no_load, &m));
  big = onnxl_graph_proto_mutable_initializer(onnxl_model_proto_mutable_graph(m), 0);
  CHECK(VIEW_EQ(onnxl_tensor_proto_name(big), "big"));
  for (size_t i = 0; i < onnxl_tensor_proto_external_data_size(big); ++i) {
    OnnxlStringStringEntryProto *e = onnxl_tensor_proto_mutable_external_data(big, i);
    if (VIEW_EQ(onnxl_string_string_entry_proto_key(e), "prepacked_0")) {
      CHECK_OK(onnxl_string_string_entry_proto_set_value(e, value, strlen(value)));
    }
  }
  snprintf(path, sizeof path, "%s/entry.onnx", dir);
  CHECK_OK(onnxl_save_model(m, path, NULL));
  onnxl_model_proto_free(m);
  st = onnxl_load_model_with_prepacked(path, NULL, NULL, &loaded, out);
  if (st == ONNXL_STATUS_OK) {
    onnxl_model_proto_free(loaded);
  }
  return st;
}

static void test_malformed_entries(void) {
  OnnxlPrepackedBlobs *b = NULL;
  /* Incomplete triples are skipped: the blob keeps its complete one. */
  CHECK_OK(load_with_entry("gemm|0;4;0|1;2|junk", &b));
  CHECK(onnxl_prepacked_blobs_count(b) == 3);
  {
    size_t n = 0;
    CHECK_OK(onnxl_prepacked_blobs_buffer_count(b, "big", "gemm", &n));
    CHECK(n == 1);
  }
  onnxl_prepacked_blobs_free(b);
  /* No complete triple: the entry is ignored, the model still loads. */
  CHECK_OK(load_with_entry("gemm|1;2", &b));
  CHECK(onnxl_prepacked_blobs_count(b) == 2);
  onnxl_prepacked_blobs_free(b);
  b = NULL;
  CHECK_STATUS(load_with_entry("gemm|x;4;0", &b), ONNXL_STATUS_EXTERNAL_DATA, "prepacked offset");
  CHECK_STATUS(load_with_entry("gemm|0;-4;0", &b), ONNXL_STATUS_EXTERNAL_DATA, "prepacked length");
  CHECK_STATUS(load_with_entry("gemm|+4;4;0", &b), ONNXL_STATUS_EXTERNAL_DATA, "prepacked offset");
  CHECK_STATUS(load_with_entry("gemm|-4;4;0", &b), ONNXL_STATUS_EXTERNAL_DATA, "negative");
  CHECK_STATUS(load_with_entry("gemm|999999999;4;0", &b), ONNXL_STATUS_EXTERNAL_DATA,
               "past the end of the file");
  CHECK(b == NULL);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEMP_DIR\n", argv[0]);
    return 2;
  }
  snprintf(dir, sizeof dir, "%s/prepacked", argv[1]);
  test_mkdir(argv[1]);
  test_mkdir(dir);
  snprintf(model_path, sizeof model_path, "%s/m.onnx", dir);
  snprintf(data_path, sizeof data_path, "%s/m.onnx.data", dir);
  RUN(test_store_and_save);
  RUN(test_no_copy_load);
  RUN(test_copy_load);
  RUN(test_external_data_for_model);
  RUN(test_malformed_entries);
  return test_summary("test_prepacked");
}
