/* Example: an ONNX Runtime session whose weights stay in onnx_light's memory map, through both C
 * APIs. onnx_light loads the model without copying (every payload borrowed from the mapped weight
 * files); each large initializer becomes an OrtValue over those bytes, handed to ONNX Runtime with
 * AddInitializer, so the session allocates nothing of its own for them. The example then builds a
 * second session the usual way (ONNX Runtime reading the model alone), runs both on the same
 * inputs and compares the outputs byte for byte.
 *
 *   ort_session model.onnx
 *
 * ONNX Runtime still parses the model file for its graph transformers (constant folding, fusions),
 * which read initializers from there: for a model with embedded weights, which ONNX Runtime would
 * parse into a copy of its own, onnx_light first writes a stub model beside a temporary weight
 * file (page cache, not process memory), removed once the session exists. A model whose weights
 * are all in external data files is handed over as it is, with nothing shared: ONNX Runtime maps
 * those files itself without a copy and reads the pre-packed weights an optimized model saved
 * beside them, which shared values would make it pre-pack again.
 * Inputs are filled with a fixed pattern from the graph's input shapes (dynamic dimensions: 1).
 * On Linux the anonymous memory each session creation added is printed.
 *
 * Build: cc -std=c11 ort_session.c $(pkg-config --cflags --libs onnx_light) \
 *          -I<onnxruntime include dir> -L<dir of libonnxruntime.so> -lonnxruntime
 */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <onnxruntime_c_api.h>

#include "onnx_light.h"

static const OrtApi *ort;

/* Prints ONNX Runtime's error and returns 1 (or 0 when `st` is NULL: success). */
static int ort_failed(const char *what, OrtStatus *st) {
  if (st == NULL) return 0;
  fprintf(stderr, "%s failed: %s\n", what, ort->GetErrorMessage(st));
  ort->ReleaseStatus(st);
  return 1;
}

static int onnxl_failed(const char *what, OnnxlStatus st) {
  if (st == ONNXL_STATUS_OK) return 0;
  fprintf(stderr, "%s failed: %s: %s\n", what, onnxl_status_name((uint32_t)st), onnxl_last_error_message());
  return 1;
}

/* Bytes per element of an ONNX element type that ONNX Runtime takes over caller memory (numbers and
 * bool), 0 for the others (strings, 4-bit types, ...). */
static size_t element_size(int32_t type) {
  switch (type) {
    case 1: case 6: case 12: return 4;            /* FLOAT, INT32, UINT32 */
    case 2: case 3: case 9: return 1;             /* UINT8, INT8, BOOL */
    case 4: case 5: case 10: case 16: return 2;   /* UINT16, INT16, FLOAT16, BFLOAT16 */
    case 7: case 11: case 13: return 8;           /* INT64, DOUBLE, UINT64 */
    default: return 0;
  }
}

/* Anonymous resident memory of this process in bytes (Linux), 0 elsewhere. */
static uint64_t rss_anon(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  uint64_t kib = 0;
  if (f == NULL) return 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "RssAnon: %" SCNu64, &kib) == 1) break;
  fclose(f);
  return kib << 10;
}

static int is_graph_input(const OnnxlGraphProto *g, OnnxlStr name) {
  for (size_t i = 0; i < onnxl_graph_proto_input_size(g); i++) {
    OnnxlStr in = onnxl_value_info_proto_name(onnxl_graph_proto_input(g, i));
    if (in.len == name.len && memcmp(in.data, name.data, name.len) == 0) return 1;
  }
  return 0;
}

/* Whether the main graph of the model at `path` embeds a payload of 1 KiB or more (a metadata
 * parse: payloads borrowed from the map, external data not read). */
static int embeds_weights(const char *path) {
  OnnxlParseOptions o = onnxl_parse_options_default();
  OnnxlExternalLoadOptions e = onnxl_external_load_options_default();
  o.no_copy = 1;
  o.alignment = 1; /* every payload borrowed where it is: nothing copied */
  e.load_external_data = 0;
  OnnxlModelProto *m = NULL;
  if (onnxl_load_model_with_external_data(path, &o, &e, &m) != ONNXL_STATUS_OK)
    return 0; /* reported by the real load */
  const OnnxlGraphProto *g = onnxl_model_proto_graph(m);
  int embeds = 0;
  for (size_t i = 0; i < onnxl_graph_proto_initializer_size(g) && !embeds; i++) {
    const uint8_t *data;
    size_t len;
    embeds = onnxl_tensor_proto_raw_data(onnxl_graph_proto_initializer(g, i), &data, &len) ==
                 ONNXL_STATUS_OK && len >= 1024;
  }
  onnxl_model_proto_free(m);
  return embeds;
}

/* Hands every main-graph initializer of at least 1 KiB that ONNX Runtime can take over caller
 * memory to `options` as an OrtValue over its bytes in `model`. The values are stored in
 * `values` (released by the caller after the session); returns their count, -1 on failure. */
static long share_initializers(const OnnxlModelProto *model, OrtSessionOptions *options,
                               const OrtMemoryInfo *cpu, OrtValue **values, uint64_t *bytes) {
  const OnnxlGraphProto *g = onnxl_model_proto_graph(model);
  long n = 0;
  for (size_t i = 0; i < onnxl_graph_proto_initializer_size(g); i++) {
    const OnnxlTensorProto *t = onnxl_graph_proto_initializer(g, i);
    OnnxlStr name = onnxl_tensor_proto_name(t);
    int32_t type = onnxl_tensor_proto_data_type(t);
    size_t esize = element_size(type);
    const uint8_t *data;
    size_t len;
    /* Initializers that are also graph inputs are defaults a caller may override: ONNX Runtime
     * reads those from the model. */
    if (esize == 0 || is_graph_input(g, name)) continue;
    if (onnxl_tensor_proto_raw_data(t, &data, &len) != ONNXL_STATUS_OK || len < 1024) continue;
    if ((uintptr_t)data % esize != 0) continue; /* not readable in place as its element type */
    int64_t dims[16];
    size_t ndims = onnxl_tensor_proto_dims_size(t);
    if (ndims > 16) continue;
    for (size_t d = 0; d < ndims; d++) dims[d] = onnxl_tensor_proto_dims(t, d);
    char cname[512];
    if (name.len >= sizeof cname) continue;
    memcpy(cname, name.data, name.len);
    cname[name.len] = '\0';
    OrtValue *v = NULL;
    if (ort_failed("CreateTensorWithDataAsOrtValue",
                   ort->CreateTensorWithDataAsOrtValue(cpu, (void *)data, len, dims, ndims,
                                                       (ONNXTensorElementDataType)type, &v)))
      return -1;
    values[n++] = v;
    *bytes += len;
    if (ort_failed("AddInitializer", ort->AddInitializer(options, cname, v))) return -1;
  }
  return n;
}

/* Runs `session` on inputs filled with a fixed pattern; writes the outputs to `out` (n_out). */
static int run(OrtSession *session, OrtAllocator *alloc, const OrtMemoryInfo *cpu, OrtValue **out,
               size_t *n_out) {
  size_t n_in;
  if (ort_failed("SessionGetInputCount", ort->SessionGetInputCount(session, &n_in)) ||
      ort_failed("SessionGetOutputCount", ort->SessionGetOutputCount(session, n_out)))
    return 1;
  if (n_in > 16 || *n_out > 16) return fprintf(stderr, "too many inputs or outputs\n"), 1;
  char *in_names[16], *out_names[16];
  OrtValue *inputs[16];
  void *buffers[16];
  for (size_t i = 0; i < n_in; i++) {
    OrtTypeInfo *info;
    const OrtTensorTypeAndShapeInfo *tinfo;
    ONNXTensorElementDataType type;
    size_t nd, count = 1;
    int64_t dims[16];
    if (ort_failed("SessionGetInputName", ort->SessionGetInputName(session, i, alloc, &in_names[i])) ||
        ort_failed("SessionGetInputTypeInfo", ort->SessionGetInputTypeInfo(session, i, &info)) ||
        ort_failed("CastTypeInfoToTensorInfo", ort->CastTypeInfoToTensorInfo(info, &tinfo)) ||
        ort_failed("GetTensorElementType", ort->GetTensorElementType(tinfo, &type)) ||
        ort_failed("GetDimensionsCount", ort->GetDimensionsCount(tinfo, &nd)) || nd > 16 ||
        ort_failed("GetDimensions", ort->GetDimensions(tinfo, dims, nd)))
      return 1;
    ort->ReleaseTypeInfo(info);
    for (size_t d = 0; d < nd; d++) {
      if (dims[d] < 0) dims[d] = 1;
      count *= (size_t)dims[d];
    }
    size_t esize = element_size((int32_t)type);
    if (esize == 0) return fprintf(stderr, "input %s: element type %d not filled\n", in_names[i], type), 1;
    uint8_t *b = malloc(count * esize + 1);
    for (size_t k = 0; k < count; k++) {
      if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) ((float *)b)[k] = (float)(k % 17) / 8.0f - 1.0f;
      else memset(b + k * esize, (int)(k % 3), esize);
    }
    buffers[i] = b;
    if (ort_failed("CreateTensorWithDataAsOrtValue",
                   ort->CreateTensorWithDataAsOrtValue(cpu, b, count * esize, dims, nd, type, &inputs[i])))
      return 1;
  }
  for (size_t i = 0; i < *n_out; i++) {
    out[i] = NULL;
    if (ort_failed("SessionGetOutputName", ort->SessionGetOutputName(session, i, alloc, &out_names[i])))
      return 1;
  }
  int bad = ort_failed("Run", ort->Run(session, NULL, (const char *const *)in_names,
                                       (const OrtValue *const *)inputs, n_in,
                                       (const char *const *)out_names, *n_out, out));
  for (size_t i = 0; i < n_in; i++) {
    ort->ReleaseValue(inputs[i]);
    free(buffers[i]);
    alloc->Free(alloc, in_names[i]);
  }
  for (size_t i = 0; i < *n_out; i++) alloc->Free(alloc, out_names[i]);
  return bad;
}

/* Whether two output tensors have the same element type, shape and bytes. */
static int same_tensor(const OrtValue *a, const OrtValue *b) {
  OrtTensorTypeAndShapeInfo *ia, *ib;
  ONNXTensorElementDataType ta, tb;
  size_t na, nb;
  void *pa, *pb;
  if (ort_failed("GetTensorTypeAndShape", ort->GetTensorTypeAndShape(a, &ia))) return 0;
  if (ort_failed("GetTensorTypeAndShape", ort->GetTensorTypeAndShape(b, &ib))) return 0;
  int ok = !ort_failed("GetTensorElementType", ort->GetTensorElementType(ia, &ta)) &&
           !ort_failed("GetTensorElementType", ort->GetTensorElementType(ib, &tb)) &&
           !ort_failed("GetTensorShapeElementCount", ort->GetTensorShapeElementCount(ia, &na)) &&
           !ort_failed("GetTensorShapeElementCount", ort->GetTensorShapeElementCount(ib, &nb));
  ort->ReleaseTensorTypeAndShapeInfo(ia);
  ort->ReleaseTensorTypeAndShapeInfo(ib);
  if (!ok || ta != tb || na != nb || element_size((int32_t)ta) == 0) return 0;
  if (ort_failed("GetTensorMutableData", ort->GetTensorMutableData((OrtValue *)a, &pa)) ||
      ort_failed("GetTensorMutableData", ort->GetTensorMutableData((OrtValue *)b, &pb)))
    return 0;
  return memcmp(pa, pb, na * element_size((int32_t)ta)) == 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s model.onnx\n", argv[0]);
    return 2;
  }
  ort = OrtGetApiBase()->GetApi(ORT_API_VERSION);
  if (ort == NULL) return fprintf(stderr, "ONNX Runtime does not offer API version %d\n", ORT_API_VERSION), 1;
  OrtEnv *env;
  OrtMemoryInfo *cpu;
  OrtAllocator *alloc;
  if (ort_failed("CreateEnv", ort->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "ort_session", &env)) ||
      ort_failed("CreateCpuMemoryInfo", ort->CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, &cpu)) ||
      ort_failed("GetAllocatorWithDefaultOptions", ort->GetAllocatorWithDefaultOptions(&alloc)))
    return 1;

  /* 1. onnx_light: every payload borrowed from the mapped files wherever it is (alignment 1).
   *    share_initializers skips a payload at an address its element type cannot be read from
   *    (embedded weights at odd offsets; `onnx-light convert --inline --align 64` saves them
   *    aligned): ONNX Runtime reads those from the stub's weight file (page cache). */
  uint64_t before = rss_anon();
  const int embeds = embeds_weights(argv[1]);
  OnnxlParseOptions popts = onnxl_parse_options_default();
  popts.no_copy = 1;
  popts.alignment = 1;
  OnnxlModelProto *model = NULL; /* (only for embedded weights: the others go as they are) */
  if (embeds && onnxl_failed("onnxl_load_model", onnxl_load_model(argv[1], &popts, &model))) return 1;
  OrtSessionOptions *options;
  if (ort_failed("CreateSessionOptions", ort->CreateSessionOptions(&options))) return 1;
  size_t n_init = embeds ? onnxl_graph_proto_initializer_size(onnxl_model_proto_graph(model)) : 0;
  OrtValue **values = calloc(n_init + 1, sizeof *values);
  uint64_t shared_bytes = 0;
  long shared = embeds ? share_initializers(model, options, cpu, values, &shared_bytes) : 0;
  if (shared < 0) return 1;
  OrtSession *light;
  if (embeds) {
    char dir[] = "/tmp/ort_session_XXXXXX", stub[64], data[64];
    if (mkdtemp(dir) == NULL) return perror("mkdtemp"), 1;
    snprintf(stub, sizeof stub, "%s/model.onnx", dir);
    snprintf(data, sizeof data, "%s/weights.data", dir);
    OnnxlExternalDataOptions eopts = onnxl_external_data_options_default();
    eopts.location = "weights.data";
    if (onnxl_failed("onnxl_save_model_with_external_data",
                     onnxl_save_model_with_external_data(model, stub, &eopts)))
      return 1;
    int bad = ort_failed("CreateSession (onnx_light weights, stub model)",
                         ort->CreateSession(env, stub, options, &light));
    unlink(stub);
    unlink(data);
    rmdir(dir);
    if (bad) return 1;
  } else if (ort_failed("CreateSession (onnx_light weights)",
                        ort->CreateSession(env, argv[1], options, &light))) {
    return 1;
  }
  uint64_t after_light = rss_anon();

  /* 2. ONNX Runtime alone. */
  OrtSessionOptions *plain_options;
  OrtSession *plain;
  if (ort_failed("CreateSessionOptions", ort->CreateSessionOptions(&plain_options)) ||
      ort_failed("CreateSession (ONNX Runtime alone)", ort->CreateSession(env, argv[1], plain_options, &plain)))
    return 1;
  uint64_t after_plain = rss_anon();

  /* 3. The same outputs. */
  OrtValue *out_light[16], *out_plain[16];
  size_t n_light, n_plain;
  if (run(light, alloc, cpu, out_light, &n_light) || run(plain, alloc, cpu, out_plain, &n_plain)) return 1;
  int identical = n_light == n_plain;
  for (size_t i = 0; identical && i < n_light; i++) identical = same_tensor(out_light[i], out_plain[i]);

  printf("%ld initializers (%" PRIu64 " bytes) shared with ONNX Runtime\n", shared, shared_bytes);
  if (before != 0)
    printf("anonymous memory added: session over onnx_light's map %" PRIu64 " KiB, ONNX Runtime alone %" PRIu64 " KiB\n",
           (after_light - before) >> 10, (after_plain - after_light) >> 10);
  printf("%zu outputs: %s\n", n_light, identical ? "identical" : "DIFFERENT");

  for (size_t i = 0; i < n_light; i++) ort->ReleaseValue(out_light[i]);
  for (size_t i = 0; i < n_plain; i++) ort->ReleaseValue(out_plain[i]);
  ort->ReleaseSession(plain);
  ort->ReleaseSessionOptions(plain_options);
  /* The values (and the model whose map they point into) outlive the session that uses them. */
  ort->ReleaseSession(light);
  ort->ReleaseSessionOptions(options);
  for (long i = 0; i < shared; i++) ort->ReleaseValue(values[i]);
  free(values);
  onnxl_model_proto_free(model);
  ort->ReleaseMemoryInfo(cpu);
  ort->ReleaseEnv(env);
  return identical ? 0 : 1;
}
