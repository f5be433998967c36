/* DLPack and parameter dictionaries through the C ABI (run by scripts/test.d/30-dlpack.sh under
 * Valgrind, which also proves that every export and import is freed exactly once):
 * - the DLPack structs of onnx_light.h have the standard layout (DLTensor: 48 bytes on x86-64);
 * - export (versioned and legacy) is zero-copy: the data pointer is the tensor's raw_data
 *   pointer, the data stays valid after the model is freed, and the deleter releases the bytes'
 *   owner exactly once (a counting release callback of lent memory says when);
 * - READ_ONLY for shared bytes (lent, memory-mapped), typed fields refused or copied (IS_COPIED),
 *   caller bytes without an owner refused, STRING refused;
 * - import copies (the producer's deleter runs at once) or borrows (it runs once, when the last
 *   user, here a retained OnnxlOwner, is gone); a refused import leaves the tensor to the caller;
 * - params: save a model's initializers, load them into a fresh model, malformed data refused.
 *
 * Build variants (the script compiles all three with -Wall -Wextra -Wpedantic -Werror):
 *   default                 the DLPack declarations of onnx_light.h
 *   -DDLPACK_H_FIRST        a dlpack.h (the standard declarations below) included BEFORE
 *                           onnx_light.h: onnx_light.h's own are skipped
 *   -DDLPACK_H_AFTER        the same dlpack.h included AFTER onnx_light.h: it adds nothing
 *
 * Usage: dlpack_test TEMP_DIR */
#if defined(DLPACK_H_FIRST)
#include "dlpack_h_copy.h"
#include "onnx_light.h"
#elif defined(DLPACK_H_AFTER)
#include "onnx_light.h"
#include "dlpack_h_copy.h"
#else
#include "onnx_light.h"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                                         \
  do {                                                                                      \
    checks += 1;                                                                            \
    if (!(cond)) {                                                                          \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__,     \
              #cond, onnxl_last_error_message());                                           \
      failures += 1;                                                                        \
    }                                                                                       \
  } while (0)

#define CHECK_OK(call) CHECK((call) == ONNXL_STATUS_OK)

/* `call` fails with `status` and a message containing `text`. */
#define CHECK_FAILS(call, status, text)                                                     \
  do {                                                                                      \
    OnnxlStatus st_ = (call);                                                               \
    CHECK(st_ == (status));                                                                 \
    CHECK(strstr(onnxl_last_error_message(), (text)) != NULL);                              \
  } while (0)

/* Layout of the standard structs (64-bit targets). */
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(sizeof(DLTensor) == 48, "DLTensor is 48 bytes");
_Static_assert(offsetof(DLTensor, device) == 8, "DLTensor.device");
_Static_assert(offsetof(DLTensor, ndim) == 16, "DLTensor.ndim");
_Static_assert(offsetof(DLTensor, dtype) == 20, "DLTensor.dtype");
_Static_assert(offsetof(DLTensor, shape) == 24, "DLTensor.shape");
_Static_assert(offsetof(DLTensor, strides) == 32, "DLTensor.strides");
_Static_assert(offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset");
_Static_assert(sizeof(DLManagedTensor) == 64, "DLManagedTensor");
_Static_assert(offsetof(DLManagedTensor, deleter) == 56, "DLManagedTensor.deleter");
_Static_assert(sizeof(DLManagedTensorVersioned) == 80, "DLManagedTensorVersioned");
_Static_assert(offsetof(DLManagedTensorVersioned, flags) == 24, "flags");
_Static_assert(offsetof(DLManagedTensorVersioned, dl_tensor) == 32, "dl_tensor");
#endif
_Static_assert(sizeof(DLDataType) == 4, "DLDataType");
_Static_assert(sizeof(DLDevice) == 8, "DLDevice");

/* ---- lent memory with a counting release callback ------------------------------------------- */

static int released = 0;
static void count_release(void *user_data) {
  (void)user_data;
  released += 1;
}

static const float SOURCE[6] = {1.0f, -2.0f, 3.5f, 4.25f, -5.0f, 6.0f};

/* A model with one FLOAT [2, 3] initializer "w" whose raw_data borrows `data` (lent with the
 * counting release callback when `lend`, otherwise copied). */
static OnnxlModelProto *model_with(const float *data, int lend) {
  OnnxlModelProto *m = onnxl_model_proto_new();
  OnnxlTensorProto *t = onnxl_graph_proto_add_initializer(onnxl_model_proto_mutable_graph(m));
  CHECK_OK(onnxl_tensor_proto_set_name(t, "w", 1));
  CHECK_OK(onnxl_tensor_proto_set_data_type(t, ONNXL_TENSOR_PROTO_DATA_TYPE_FLOAT));
  CHECK_OK(onnxl_tensor_proto_add_dims(t, 2));
  CHECK_OK(onnxl_tensor_proto_add_dims(t, 3));
  if (lend) {
    CHECK_OK(onnxl_tensor_proto_set_raw_data_borrowed(t, (const uint8_t *)data, 6 * sizeof(float),
                                                      count_release, NULL));
  } else {
    CHECK_OK(onnxl_tensor_proto_set_raw_data(t, (const uint8_t *)data, 6 * sizeof(float)));
  }
  return m;
}

static OnnxlTensorProto *first_initializer(OnnxlModelProto *m) {
  return onnxl_graph_proto_mutable_initializer(onnxl_model_proto_mutable_graph(m), 0);
}

static const void *raw_pointer(const OnnxlTensorProto *t) {
  const uint8_t *p = NULL;
  size_t n = 0;
  CHECK_OK(onnxl_tensor_proto_raw_data(t, &p, &n));
  return p;
}

static void check_float_tensor(const DLTensor *dl, const float *want) {
  CHECK(dl->device.device_type == kDLCPU && dl->device.device_id == 0);
  CHECK(dl->ndim == 2 && dl->shape != NULL && dl->shape[0] == 2 && dl->shape[1] == 3);
  CHECK(dl->strides == NULL);
  CHECK(dl->byte_offset == 0);
  CHECK(dl->dtype.code == kDLFloat && dl->dtype.bits == 32 && dl->dtype.lanes == 1);
  CHECK(dl->data != NULL && memcmp(dl->data, want, 6 * sizeof(float)) == 0);
}

/* ---- export ----------------------------------------------------------------------------------- */

static void test_export_lent_bytes_released_once(void) {
  float data[6];
  OnnxlModelProto *m;
  DLManagedTensorVersioned *v = NULL;
  DLManagedTensor *legacy = NULL;
  memcpy(data, SOURCE, sizeof data);
  released = 0;
  m = model_with(data, 1);
  CHECK_OK(onnxl_tensor_proto_to_dlpack_versioned(first_initializer(m), 0, &v));
  CHECK_OK(onnxl_tensor_proto_to_dlpack(first_initializer(m), 0, &legacy));
  onnxl_model_proto_free(m);
  CHECK(released == 0); /* both exports hold the owner */
  CHECK(v != NULL && legacy != NULL);
  if (v == NULL || legacy == NULL) {
    return;
  }
  CHECK(v->version.major == 1 && v->version.minor == 1);
  CHECK(v->flags == DLPACK_FLAG_BITMASK_READ_ONLY); /* lent (borrowed) bytes */
  CHECK(v->manager_ctx != NULL && v->deleter != NULL);
  CHECK(v->dl_tensor.data == (void *)data); /* zero-copy: the lent memory itself */
  check_float_tensor(&v->dl_tensor, SOURCE);
  CHECK(legacy->dl_tensor.data == (void *)data);
  check_float_tensor(&legacy->dl_tensor, SOURCE);
  v->deleter(v);
  CHECK(released == 0); /* the legacy export still holds it */
  legacy->deleter(legacy);
  CHECK(released == 1); /* released once, by the last deleter */
}

static void test_export_owned_bytes_outlive_the_model(void) {
  OnnxlModelProto *m = model_with(SOURCE, 0);
  OnnxlTensorProto *t = first_initializer(m);
  const void *before = raw_pointer(t);
  DLManagedTensorVersioned *v = NULL;
  CHECK_OK(onnxl_tensor_proto_to_dlpack_versioned(t, 0, &v));
  CHECK(raw_pointer(t) == before); /* moved into shared storage, not copied */
  onnxl_model_proto_free(m);
  if (v == NULL) {
    return;
  }
  CHECK(v->dl_tensor.data == before);
  CHECK(v->flags == DLPACK_FLAG_BITMASK_READ_ONLY); /* shared with the model */
  check_float_tensor(&v->dl_tensor, SOURCE);        /* valid after the model is freed */
  v->deleter(v);                                    /* Valgrind: no leak, no double free */
}

static void test_export_typed_string_and_unowned(const char *tmp) {
  OnnxlTensorProto *t = onnxl_tensor_proto_new();
  DLManagedTensorVersioned *v = NULL;
  DLManagedTensor *legacy = NULL;
  OnnxlModelProto *m, *parsed = NULL;
  OnnxlBuffer *bytes = NULL;
  OnnxlParseOptions opts = onnxl_parse_options_default();
  char path[4096];
  int i;
  CHECK_OK(onnxl_tensor_proto_set_data_type(t, ONNXL_TENSOR_PROTO_DATA_TYPE_FLOAT));
  CHECK_OK(onnxl_tensor_proto_add_dims(t, 2));
  CHECK_OK(onnxl_tensor_proto_add_dims(t, 3));
  for (i = 0; i < 6; ++i) {
    CHECK_OK(onnxl_tensor_proto_add_float_data(t, SOURCE[i]));
  }
  CHECK_FAILS(onnxl_tensor_proto_to_dlpack_versioned(t, 0, &v), ONNXL_STATUS_UNSUPPORTED,
              "float_data");
  CHECK(v == NULL);
  CHECK_FAILS(onnxl_tensor_proto_to_dlpack_versioned(t, 8, &v), ONNXL_STATUS_INVALID_ARGUMENT,
              "flags");
  CHECK_OK(onnxl_tensor_proto_to_dlpack_versioned(t, ONNXL_DLPACK_COPY_IF_NEEDED, &v));
  CHECK_OK(onnxl_tensor_proto_to_dlpack(t, ONNXL_DLPACK_COPY_ALWAYS, &legacy));
  onnxl_tensor_proto_free(t);
  if (v != NULL && legacy != NULL) {
    CHECK(v->flags == DLPACK_FLAG_BITMASK_IS_COPIED);
    check_float_tensor(&v->dl_tensor, SOURCE);
    check_float_tensor(&legacy->dl_tensor, SOURCE);
    ((float *)v->dl_tensor.data)[0] = 42.0f; /* a private, writable copy */
    v->deleter(v);
    legacy->deleter(legacy);
  }

  /* STRING has no DLPack type. */
  t = onnxl_tensor_proto_new();
  CHECK_OK(onnxl_tensor_proto_set_data_type(t, ONNXL_TENSOR_PROTO_DATA_TYPE_STRING));
  CHECK_OK(onnxl_tensor_proto_add_dims(t, 1));
  CHECK_OK(onnxl_tensor_proto_add_string_data(t, (const uint8_t *)"x", 1));
  CHECK_FAILS(onnxl_tensor_proto_to_dlpack_versioned(t, ONNXL_DLPACK_COPY_ALWAYS, &v),
              ONNXL_STATUS_UNSUPPORTED, "STRING");
  onnxl_tensor_proto_free(t);

  /* no_copy from caller bytes: borrowed without an owner, so no zero-copy export. */
  m = onnxl_model_proto_new();
  t = onnxl_graph_proto_add_initializer(onnxl_model_proto_mutable_graph(m));
  CHECK_OK(onnxl_tensor_proto_set_data_type(t, ONNXL_TENSOR_PROTO_DATA_TYPE_UINT8));
  CHECK_OK(onnxl_tensor_proto_add_dims(t, 4096));
  {
    static uint8_t big[4096];
    for (i = 0; i < 4096; ++i) {
      big[i] = (uint8_t)(i * 7);
    }
    CHECK_OK(onnxl_tensor_proto_set_raw_data(t, big, sizeof big));
    CHECK_OK(onnxl_serialize_model(m, NULL, &bytes));
    opts.no_copy = true;
    opts.alignment = 1; /* borrow wherever the payload lies (the default 64 copies misaligned ones) */
    CHECK_OK(onnxl_load_model_from_bytes(onnxl_buffer_data(bytes), onnxl_buffer_size(bytes),
                                         &opts, &parsed));
    if (parsed != NULL) {
      OnnxlTensorProto *pt = first_initializer(parsed);
      CHECK(onnxl_tensor_proto_raw_data_is_borrowed(pt));
      CHECK_FAILS(onnxl_tensor_proto_to_dlpack_versioned(pt, 0, &v), ONNXL_STATUS_UNSUPPORTED,
                  "without an owner");
      CHECK_OK(onnxl_tensor_proto_to_dlpack_versioned(pt, ONNXL_DLPACK_COPY_IF_NEEDED, &v));
      onnxl_model_proto_free(parsed);
      if (v != NULL) {
        CHECK(v->flags == DLPACK_FLAG_BITMASK_IS_COPIED);
        CHECK(memcmp(v->dl_tensor.data, big, sizeof big) == 0);
        v->deleter(v);
      }
    }
    onnxl_buffer_free(bytes);

    /* A memory-mapped no_copy load: READ_ONLY, points into the mapping, outlives the model. */
    snprintf(path, sizeof path, "%s/dlpack_mmap.onnx", tmp);
    CHECK_OK(onnxl_save_model(m, path, NULL));
    opts.file_load_mode = ONNXL_FILE_LOAD_MODE_MMAP;
    parsed = NULL;
    CHECK_OK(onnxl_load_model(path, &opts, &parsed));
    if (parsed != NULL) {
      OnnxlTensorProto *pt = first_initializer(parsed);
      const void *p = raw_pointer(pt);
      CHECK(onnxl_tensor_proto_raw_data_is_borrowed(pt));
      v = NULL;
      CHECK_OK(onnxl_tensor_proto_to_dlpack_versioned(pt, 0, &v));
      onnxl_model_proto_free(parsed);
      remove(path);
      if (v != NULL) {
        CHECK(v->flags == DLPACK_FLAG_BITMASK_READ_ONLY);
        CHECK(v->dl_tensor.data == p);
        CHECK(v->dl_tensor.ndim == 1 && v->dl_tensor.shape[0] == 4096);
        CHECK(v->dl_tensor.dtype.code == kDLUInt && v->dl_tensor.dtype.bits == 8);
        CHECK(memcmp(v->dl_tensor.data, big, sizeof big) == 0);
        v->deleter(v); /* the last reference to the mapping */
      }
    }
  }
  onnxl_model_proto_free(m);
}

/* ---- import ----------------------------------------------------------------------------------- */

/* A producer's tensor with a counting deleter. */
typedef struct {
  DLManagedTensorVersioned managed; /* first: the deleter gets this pointer */
  int64_t shape[2];
  float data[6];
} Producer;

static int producer_deleted = 0;

static void producer_deleter(DLManagedTensorVersioned *self) {
  producer_deleted += 1;
  free(self); /* the Producer allocation */
}

static Producer *new_producer(void) {
  Producer *p = (Producer *)calloc(1, sizeof(Producer));
  if (p == NULL) {
    abort();
  }
  memcpy(p->data, SOURCE, sizeof p->data);
  p->shape[0] = 2;
  p->shape[1] = 3;
  p->managed.version.major = DLPACK_MAJOR_VERSION;
  p->managed.version.minor = DLPACK_MINOR_VERSION;
  p->managed.manager_ctx = p;
  p->managed.deleter = producer_deleter;
  p->managed.flags = 0;
  p->managed.dl_tensor.data = p->data;
  p->managed.dl_tensor.device.device_type = kDLCPU;
  p->managed.dl_tensor.device.device_id = 0;
  p->managed.dl_tensor.ndim = 2;
  p->managed.dl_tensor.dtype.code = kDLFloat;
  p->managed.dl_tensor.dtype.bits = 32;
  p->managed.dl_tensor.dtype.lanes = 1;
  p->managed.dl_tensor.shape = p->shape;
  p->managed.dl_tensor.strides = NULL;
  p->managed.dl_tensor.byte_offset = 0;
  return p;
}

static void test_import(void) {
  Producer *p;
  OnnxlTensorProto *t = NULL;
  const OnnxlOwner *token;
  const uint8_t *bytes = NULL;
  size_t len = 0;

  /* Borrow: raw_data is the producer's memory; the deleter runs once, after the last user. */
  producer_deleted = 0;
  p = new_producer();
  CHECK_OK(onnxl_tensor_proto_from_dlpack_versioned(&p->managed, true, &t));
  if (t != NULL) {
    CHECK(onnxl_tensor_proto_data_type(t) == ONNXL_TENSOR_PROTO_DATA_TYPE_FLOAT);
    CHECK(onnxl_tensor_proto_dims_size(t) == 2 && onnxl_tensor_proto_dims(t, 1) == 3);
    CHECK(raw_pointer(t) == (const void *)p->data);
    CHECK(onnxl_tensor_proto_raw_data_is_borrowed(t));
    token = onnxl_tensor_proto_raw_data_owner(t);
    CHECK(token != NULL);
    onnxl_tensor_proto_free(t);
    CHECK(producer_deleted == 0); /* the token still uses the bytes */
    CHECK_OK(onnxl_owner_data(token, &bytes, &len));
    CHECK(len == sizeof SOURCE && memcmp(bytes, SOURCE, len) == 0);
    onnxl_owner_release(token);
    CHECK(producer_deleted == 1);
  }

  /* Copy: the deleter runs before the call returns. */
  producer_deleted = 0;
  p = new_producer();
  t = NULL;
  CHECK_OK(onnxl_tensor_proto_from_dlpack_versioned(&p->managed, false, &t));
  CHECK(producer_deleted == 1);
  if (t != NULL) {
    CHECK_OK(onnxl_tensor_proto_raw_data(t, &bytes, &len));
    CHECK(len == sizeof SOURCE && memcmp(bytes, SOURCE, len) == 0);
    CHECK(!onnxl_tensor_proto_raw_data_is_borrowed(t));
    onnxl_tensor_proto_free(t);
  }

  /* Refused (a GPU tensor, non-compact strides, major version 2): the caller keeps it. */
  producer_deleted = 0;
  p = new_producer();
  p->managed.dl_tensor.device.device_type = kDLCUDA;
  t = NULL;
  CHECK_FAILS(onnxl_tensor_proto_from_dlpack_versioned(&p->managed, true, &t),
              ONNXL_STATUS_UNSUPPORTED, "not the CPU");
  CHECK(t == NULL && producer_deleted == 0);
  p->managed.dl_tensor.device.device_type = kDLCPU;
  {
    int64_t strides[2] = {1, 2}; /* column-major */
    p->managed.dl_tensor.strides = strides;
    CHECK_FAILS(onnxl_tensor_proto_from_dlpack_versioned(&p->managed, false, &t),
                ONNXL_STATUS_UNSUPPORTED, "row-major");
    p->managed.dl_tensor.strides = NULL;
  }
  p->managed.version.major = 2;
  CHECK_FAILS(onnxl_tensor_proto_from_dlpack_versioned(&p->managed, false, &t),
              ONNXL_STATUS_UNSUPPORTED, "major version");
  CHECK(producer_deleted == 0);
  p->managed.deleter(&p->managed);
  CHECK(producer_deleted == 1);
  CHECK_FAILS(onnxl_tensor_proto_from_dlpack_versioned(NULL, false, &t), ONNXL_STATUS_NULL_POINTER,
              "managed");
}

/* Export from one model, borrowing import into a standalone tensor: the lent bytes are released
 * once, when the imported tensor (the last user) is freed. */
static void test_round_trip(void) {
  float data[6];
  OnnxlModelProto *m;
  DLManagedTensor *legacy = NULL;
  OnnxlTensorProto *t = NULL;
  memcpy(data, SOURCE, sizeof data);
  released = 0;
  m = model_with(data, 1);
  CHECK_OK(onnxl_tensor_proto_to_dlpack(first_initializer(m), 0, &legacy));
  onnxl_model_proto_free(m);
  CHECK_OK(onnxl_tensor_proto_from_dlpack(legacy, true, &t));
  CHECK(released == 0);
  if (t != NULL) {
    CHECK(raw_pointer(t) == (const void *)data);
    onnxl_tensor_proto_free(t);
  }
  CHECK(released == 1);
}

/* ---- params ----------------------------------------------------------------------------------- */

static void test_params(const char *tmp) {
  OnnxlModelProto *m = model_with(SOURCE, 0), *fresh = onnxl_model_proto_new();
  OnnxlBuffer *buf = NULL;
  const char *names[1] = {"w"};
  const char *missing[1] = {"nope"};
  char path[4096];
  const uint8_t *bytes = NULL;
  size_t len = 0;
  CHECK_OK(onnxl_save_params(m, NULL, 0, &buf));
  CHECK(buf != NULL && onnxl_buffer_size(buf) == 24 + 9 + 8 + 32 + 16 + 8 + 24);
  CHECK_OK(onnxl_load_params_into_model(fresh, onnxl_buffer_data(buf), onnxl_buffer_size(buf)));
  CHECK_OK(onnxl_tensor_proto_raw_data(first_initializer(fresh), &bytes, &len));
  CHECK(len == sizeof SOURCE && memcmp(bytes, SOURCE, len) == 0);
  {
    OnnxlStr name = onnxl_tensor_proto_name(first_initializer(fresh));
    CHECK(name.len == 1 && name.data[0] == 'w');
  }
  /* Malformed: truncated, then a bad magic. */
  CHECK_FAILS(onnxl_load_params_into_model(fresh, onnxl_buffer_data(buf), onnxl_buffer_size(buf) - 1),
              ONNXL_STATUS_PARSE, "truncated");
  {
    uint8_t copy[256];
    memcpy(copy, onnxl_buffer_data(buf), onnxl_buffer_size(buf));
    copy[0] ^= 1;
    CHECK_FAILS(onnxl_load_params_into_model(fresh, copy, onnxl_buffer_size(buf)),
                ONNXL_STATUS_PARSE, "magic");
  }
  onnxl_buffer_free(buf);
  CHECK_FAILS(onnxl_save_params(m, missing, 1, &buf), ONNXL_STATUS_INVALID_ARGUMENT, "nope");
  snprintf(path, sizeof path, "%s/dlpack_test.params", tmp);
  CHECK_OK(onnxl_save_params_file(m, path, names, 1));
  onnxl_model_proto_free(fresh);
  fresh = onnxl_model_proto_new();
  CHECK_OK(onnxl_load_params_file_into_model(fresh, path));
  remove(path);
  CHECK(onnxl_graph_proto_initializer_size(onnxl_model_proto_graph(fresh)) == 1);
  CHECK_OK(onnxl_tensor_proto_raw_data(first_initializer(fresh), &bytes, &len));
  CHECK(len == sizeof SOURCE && memcmp(bytes, SOURCE, len) == 0);
  onnxl_model_proto_free(fresh);
  onnxl_model_proto_free(m);
}

int main(int argc, char **argv) {
  const char *tmp = argc > 1 ? argv[1] : ".";
  test_export_lent_bytes_released_once();
  test_export_owned_bytes_outlive_the_model();
  test_export_typed_string_and_unowned(tmp);
  test_import();
  test_round_trip();
  test_params(tmp);
  if (failures != 0) {
    fprintf(stderr, "dlpack_test: %d of %d checks failed\n", failures, checks);
    return 1;
  }
  printf("dlpack_test: %d checks passed\n", checks);
  return 0;
}
