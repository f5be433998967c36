/* The thread-safety rules of the C ABI (docs/c-api.md, "Thread safety"; docs/hardening.md),
 * exercised with pthreads:
 * - READERS threads share ONE model handle loaded with no_copy from a memory-mapped file and only
 *   call read-only functions on it: walk the graph, read every tensor's raw bytes (borrowed from
 *   the mapping) and compare them, serialize the whole model and compare with the bytes taken
 *   before the threads started; they also retain / read / release owner tokens of its tensors
 *   (the main thread took one reference per tensor before starting them);
 * - WRITERS threads each build, save (inline and with external data), load (copy and no-copy)
 *   and free models of their own at the same time;
 * - every thread provokes an error naming itself first and checks at the end that its last error
 *   is still its own (the last error is thread-local);
 * - after the joins the model is freed while the main thread's owner references still hold the
 *   mapping; the bytes stay readable until the last release.
 * Run plainly, under Valgrind, with ASan+UBSan and with ThreadSanitizer (CTest variants).
 *
 * Usage: test_threads TEMP_DIR */
#define _DEFAULT_SOURCE /* mkdir */

#include <pthread.h>
#include <sys/stat.h>

#include "test_util.h"

#define TENSORS 6
#define TENSOR_BYTES (64 * 1024) /* above the no_copy threshold: borrowed from the mapping */
#define READERS 4
#define WRITERS 2
#define READER_ROUNDS 12
#define WRITER_ROUNDS 3

static const char *tmp_dir;

/* Tensor `i` of the model of `seed`: byte j = (j * 7 + i * 13 + seed) & 0xff. */
static void fill_tensor(uint8_t *out, int i, int seed) {
  for (size_t j = 0; j < TENSOR_BYTES; ++j) {
    out[j] = (uint8_t)((j * 7 + (size_t)i * 13 + (size_t)seed) & 0xff);
  }
}

/* A model of TENSORS uint8 initializers w0.. and one node per tensor, for `seed`; NULL on
 * failure. Thread-safe (no shared state). */
static OnnxlModelProto *build_model(int seed) {
  OnnxlModelProto *m = onnxl_model_proto_new();
  uint8_t *bytes = malloc(TENSOR_BYTES);
  OnnxlGraphProto *g;
  int ok = m != NULL && bytes != NULL;
  ok = ok && onnxl_model_proto_set_ir_version(m, 10) == ONNXL_STATUS_OK;
  ok = ok && onnxl_model_proto_set_producer_name(m, "threads", 7) == ONNXL_STATUS_OK;
  g = ok ? onnxl_model_proto_mutable_graph(m) : NULL;
  ok = ok && g != NULL && onnxl_graph_proto_set_name(g, "g", 1) == ONNXL_STATUS_OK;
  for (int i = 0; ok && i < TENSORS; ++i) {
    char name[16];
    OnnxlTensorProto *t = onnxl_graph_proto_add_initializer(g);
    OnnxlNodeProto *n = onnxl_graph_proto_add_node(g);
    int len = snprintf(name, sizeof name, "w%d", i);
    fill_tensor(bytes, i, seed);
    ok = t != NULL && n != NULL;
    ok = ok && onnxl_tensor_proto_set_name(t, name, (size_t)len) == ONNXL_STATUS_OK;
    ok = ok && onnxl_tensor_proto_set_data_type(t, ONNXL_TENSOR_PROTO_DATA_TYPE_UINT8) == ONNXL_STATUS_OK;
    ok = ok && onnxl_tensor_proto_add_dims(t, TENSOR_BYTES) == ONNXL_STATUS_OK;
    ok = ok && onnxl_tensor_proto_set_raw_data(t, bytes, TENSOR_BYTES) == ONNXL_STATUS_OK;
    ok = ok && onnxl_node_proto_set_op_type(n, "Identity", 8) == ONNXL_STATUS_OK;
    ok = ok && onnxl_node_proto_add_input(n, name, (size_t)len) == ONNXL_STATUS_OK;
  }
  free(bytes);
  if (!ok) {
    fprintf(stderr, "build_model(%d): %s\n", seed, onnxl_last_error_message());
    onnxl_model_proto_free(m);
    return NULL;
  }
  return m;
}

/* Per-thread results (the CHECK counters of test_util.h are not thread-safe: threads count here
 * and the main thread adds them up after the joins). */
typedef struct {
  int id;
  int checks;
  int failures;
} Ctx;

#define TCHECK(ctx, cond)                                                                  \
  do {                                                                                     \
    (ctx)->checks += 1;                                                                    \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "thread %d: %s:%d: CHECK failed: %s (last error: %s)\n", (ctx)->id,  \
              __FILE__, __LINE__, #cond, onnxl_last_error_message());                      \
      (ctx)->failures += 1;                                                                \
    }                                                                                      \
  } while (0)

/* Shared, read-only while the threads run. */
static const OnnxlModelProto *shared_model;
static const uint8_t *expected_bytes;      /* serialization of shared_model */
static size_t expected_len;
static uint8_t expected_tensor[TENSORS][TENSOR_BYTES];
static const OnnxlOwner *owners[TENSORS]; /* the main thread's references */

/* Fails on purpose with a message naming this thread. */
static void provoke_own_error(Ctx *c, char *name, size_t cap) {
  char path[256];
  OnnxlModelProto *m = NULL;
  snprintf(name, cap, "no-such-model-of-thread-%d", c->id);
  snprintf(path, sizeof path, "%s/%s.onnx", tmp_dir, name);
  TCHECK(c, onnxl_load_model(path, NULL, &m) == ONNXL_STATUS_IO);
  TCHECK(c, m == NULL);
  TCHECK(c, strstr(onnxl_last_error_message(), name) != NULL);
}

static void check_own_error(Ctx *c, const char *name) {
  const char *msg = onnxl_last_error_message();
  TCHECK(c, onnxl_last_error_status() == ONNXL_STATUS_IO);
  TCHECK(c, msg != NULL && strstr(msg, name) != NULL);
  TCHECK(c, strlen(msg) == onnxl_last_error_message_length());
}

static void *reader(void *arg) {
  Ctx *c = arg;
  char name[64];
  provoke_own_error(c, name, sizeof name);
  for (int round = 0; round < READER_ROUNDS; ++round) {
    const OnnxlGraphProto *g = onnxl_model_proto_graph(shared_model);
    TCHECK(c, g != NULL);
    TCHECK(c, VIEW_EQ(onnxl_model_proto_producer_name(shared_model), "threads"));
    TCHECK(c, onnxl_graph_proto_node_size(g) == TENSORS);
    TCHECK(c, onnxl_graph_proto_initializer_size(g) == TENSORS);
    for (size_t i = 0; i < onnxl_graph_proto_node_size(g); ++i) {
      TCHECK(c, VIEW_EQ(onnxl_node_proto_op_type(onnxl_graph_proto_node(g, i)), "Identity"));
    }
    for (int i = 0; i < TENSORS; ++i) {
      const OnnxlTensorProto *t = onnxl_graph_proto_initializer(g, (size_t)i);
      const uint8_t *data = NULL;
      size_t len = 0;
      const OnnxlOwner *mine;
      TCHECK(c, onnxl_tensor_proto_raw_data(t, &data, &len) == ONNXL_STATUS_OK);
      TCHECK(c, len == TENSOR_BYTES && memcmp(data, expected_tensor[i], len) == 0);
      /* Owner tokens: retain from this thread, read, release. */
      mine = onnxl_owner_retain(owners[i]);
      TCHECK(c, mine == owners[i]);
      TCHECK(c, onnxl_owner_data(mine, &data, &len) == ONNXL_STATUS_OK);
      TCHECK(c, len == TENSOR_BYTES && memcmp(data, expected_tensor[i], len) == 0);
      onnxl_owner_release(mine);
    }
    {
      OnnxlBuffer *b = NULL;
      TCHECK(c, onnxl_serialize_model(shared_model, NULL, &b) == ONNXL_STATUS_OK);
      TCHECK(c, b != NULL && onnxl_buffer_size(b) == expected_len &&
                    memcmp(onnxl_buffer_data(b), expected_bytes, expected_len) == 0);
      onnxl_buffer_free(b);
    }
  }
  check_own_error(c, name);
  return NULL;
}

/* Loads `path` (no_copy or not) and checks it is the model of `seed`. */
static void check_saved(Ctx *c, const char *path, int seed, bool no_copy) {
  OnnxlParseOptions p = onnxl_parse_options_default();
  OnnxlModelProto *m = NULL;
  uint8_t *want = malloc(TENSOR_BYTES);
  p.no_copy = no_copy;
  TCHECK(c, want != NULL);
  TCHECK(c, onnxl_load_model(path, &p, &m) == ONNXL_STATUS_OK);
  if (m != NULL && want != NULL) {
    const OnnxlGraphProto *g = onnxl_model_proto_graph(m);
    TCHECK(c, onnxl_graph_proto_initializer_size(g) == TENSORS);
    for (int i = 0; i < TENSORS && i < (int)onnxl_graph_proto_initializer_size(g); ++i) {
      const uint8_t *data = NULL;
      size_t len = 0;
      fill_tensor(want, i, seed);
      TCHECK(c, onnxl_tensor_proto_raw_data(onnxl_graph_proto_initializer(g, (size_t)i), &data,
                                            &len) == ONNXL_STATUS_OK);
      TCHECK(c, len == TENSOR_BYTES && memcmp(data, want, len) == 0);
    }
  }
  onnxl_model_proto_free(m);
  free(want);
}

/* `path` exists as a directory. */
static int access_ok(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void *writer(void *arg) {
  Ctx *c = arg;
  char name[64], dir[512], inline_path[600], ext_path[600];
  provoke_own_error(c, name, sizeof name);
  /* A directory of its own: per-tensor weight files are named after the tensors, which are the
   * same in every writer's models. */
  snprintf(dir, sizeof dir, "%s/writer%d", tmp_dir, c->id);
  TCHECK(c, test_mkdir(dir) == 0 || access_ok(dir));
  snprintf(inline_path, sizeof inline_path, "%s/inline.onnx", dir);
  snprintf(ext_path, sizeof ext_path, "%s/ext.onnx", dir);
  for (int round = 0; round < WRITER_ROUNDS; ++round) {
    int seed = c->id * 100 + round;
    OnnxlModelProto *m = build_model(seed);
    OnnxlExternalDataOptions x = onnxl_external_data_options_default();
    TCHECK(c, m != NULL);
    if (m == NULL) {
      break;
    }
    x.all_tensors_to_one_file = (round % 2) == 0;
    TCHECK(c, onnxl_save_model(m, inline_path, NULL) == ONNXL_STATUS_OK);
    TCHECK(c, onnxl_save_model_with_external_data(m, ext_path, &x) == ONNXL_STATUS_OK);
    onnxl_model_proto_free(m);
    check_saved(c, inline_path, seed, false);
    check_saved(c, inline_path, seed, true);
    check_saved(c, ext_path, seed, false);
    check_saved(c, ext_path, seed, true);
  }
  check_own_error(c, name);
  return NULL;
}

static void test_shared_model_across_threads(void) {
  char path[512];
  OnnxlModelProto *built = build_model(7);
  OnnxlModelProto *model = NULL;
  OnnxlBuffer *ref = NULL;
  OnnxlParseOptions p = onnxl_parse_options_default();
  pthread_t threads[READERS + WRITERS];
  Ctx ctx[READERS + WRITERS];
  snprintf(path, sizeof path, "%s/shared.onnx", tmp_dir);
  CHECK(built != NULL);
  if (built == NULL) {
    return;
  }
  CHECK_OK(onnxl_save_model(built, path, NULL));
  onnxl_model_proto_free(built);
  p.no_copy = true;
  p.file_load_mode = ONNXL_FILE_LOAD_MODE_MMAP;
  CHECK_OK(onnxl_load_model(path, &p, &model));
  if (model == NULL) {
    return;
  }
  /* Before the threads: the reference bytes and one owner reference per tensor (taking an owner
   * needs exclusive access to the tensor). */
  CHECK_OK(onnxl_serialize_model(model, NULL, &ref));
  expected_bytes = onnxl_buffer_data(ref);
  expected_len = onnxl_buffer_size(ref);
  for (int i = 0; i < TENSORS; ++i) {
    OnnxlTensorProto *t =
        onnxl_graph_proto_mutable_initializer(onnxl_model_proto_mutable_graph(model), (size_t)i);
    fill_tensor(expected_tensor[i], i, 7);
    owners[i] = onnxl_tensor_proto_raw_data_owner(t);
    CHECK(owners[i] != NULL);
  }
  shared_model = model;

  for (int i = 0; i < READERS + WRITERS; ++i) {
    ctx[i].id = i;
    ctx[i].checks = 0;
    ctx[i].failures = 0;
    CHECK(pthread_create(&threads[i], NULL, i < READERS ? reader : writer, &ctx[i]) == 0);
  }
  for (int i = 0; i < READERS + WRITERS; ++i) {
    CHECK(pthread_join(threads[i], NULL) == 0);
    test_checks += ctx[i].checks;
    test_failures += ctx[i].failures;
  }

  /* The model goes; the main thread's owner references keep the mapping readable. */
  shared_model = NULL;
  onnxl_model_proto_free(model);
  for (int i = 0; i < TENSORS; ++i) {
    const uint8_t *data = NULL;
    size_t len = 0;
    CHECK_OK(onnxl_owner_data(owners[i], &data, &len));
    CHECK(len == TENSOR_BYTES && memcmp(data, expected_tensor[i], len) == 0);
    onnxl_owner_release(owners[i]);
  }
  onnxl_buffer_free(ref);
}

/* Owner references taken and dropped on many threads at once; the memory goes with the last. */
static int released;
static pthread_mutex_t released_lock = PTHREAD_MUTEX_INITIALIZER;

static void count_release(void *user_data) {
  (void)user_data;
  pthread_mutex_lock(&released_lock);
  released += 1;
  pthread_mutex_unlock(&released_lock);
}

static const OnnxlOwner *churn_owner;

static void *churn(void *arg) {
  Ctx *c = arg;
  const OnnxlOwner *held[64];
  for (int round = 0; round < 50; ++round) {
    for (int k = 0; k < 64; ++k) {
      held[k] = onnxl_owner_retain(churn_owner);
    }
    for (int k = 0; k < 64; ++k) {
      const uint8_t *data = NULL;
      size_t len = 0;
      TCHECK(c, onnxl_owner_data(held[k], &data, &len) == ONNXL_STATUS_OK && len == 4096);
      onnxl_owner_release(held[k]);
    }
  }
  return NULL;
}

static void test_owner_churn(void) {
  static uint8_t lent[4096];
  OnnxlTensorProto *t = onnxl_tensor_proto_new();
  pthread_t threads[6];
  Ctx ctx[6];
  CHECK(t != NULL);
  CHECK_OK(onnxl_tensor_proto_set_raw_data_borrowed(t, lent, sizeof lent, count_release, NULL));
  churn_owner = onnxl_tensor_proto_raw_data_owner(t);
  CHECK(churn_owner != NULL);
  onnxl_tensor_proto_free(t); /* the owner token is now the only user */
  for (int i = 0; i < 6; ++i) {
    ctx[i].id = 100 + i;
    ctx[i].checks = 0;
    ctx[i].failures = 0;
    CHECK(pthread_create(&threads[i], NULL, churn, &ctx[i]) == 0);
  }
  for (int i = 0; i < 6; ++i) {
    CHECK(pthread_join(threads[i], NULL) == 0);
    test_checks += ctx[i].checks;
    test_failures += ctx[i].failures;
  }
  pthread_mutex_lock(&released_lock);
  CHECK(released == 0);
  pthread_mutex_unlock(&released_lock);
  onnxl_owner_release(churn_owner);
  pthread_mutex_lock(&released_lock);
  CHECK(released == 1);
  pthread_mutex_unlock(&released_lock);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEMP_DIR\n", argv[0]);
    return 2;
  }
  tmp_dir = argv[1];
  RUN(test_shared_model_across_threads);
  RUN(test_owner_churn);
  return test_summary("test_threads");
}
