/* The optional parts of the library (parallel work, encryption, DLPack, parameter dictionaries,
 * pre-packed blobs, protobuf's text format, aligned saves, remote models) as a C program sees them, in a full and in a minimal build (`cargo build
 * --no-default-features`): onnxl_has_feature() tells which are compiled in, the functions of a
 * missing part are still exported and fail with ONNXL_STATUS_UNSUPPORTED naming the part, and
 * the codec works in both. Run by scripts/test.d/45-size-budget.sh against both builds.
 *
 * usage: test_optional_features full|remote|minimal MODEL.onnx */
#include "test_util.h"

static const char *const PARTS[] = {"parallel",    "encryption",       "dlpack", "params",
                                    "prepacked",   "text-format",      "inline-alignment",
                                    "remote"};

/* The text format's entry point, declared by include/onnx_light.hpp (the C++ classes'
 * DebugString()), not by the C header. */
typedef uint8_t *(*TextAlloc)(void *ctx, size_t size);
bool onnxl_cxx_debug_string(const char *message, const uint8_t *data, size_t len, uint32_t style,
                            TextAlloc alloc, void *ctx);

static char text[64];
static uint8_t *text_alloc(void *ctx, size_t size) {
  (void)ctx;
  return size < sizeof text ? (uint8_t *)text : NULL;
}

int main(int argc, char **argv) {
  int full;
  size_t i;
  OnnxlModelProto *model = NULL;
  OnnxlBuffer *buf = NULL;
  if (argc != 3 || (strcmp(argv[1], "full") != 0 && strcmp(argv[1], "remote") != 0 &&
                    strcmp(argv[1], "minimal") != 0)) {
    fprintf(stderr, "usage: %s full|remote|minimal MODEL.onnx\n", argv[0]);
    return 2;
  }
  /* full: the default features (every part but the opt-in remote); remote: all of them. */
  full = strcmp(argv[1], "minimal") != 0;

  for (i = 0; i < sizeof PARTS / sizeof PARTS[0]; i++) {
    int expected = full && (strcmp(PARTS[i], "remote") != 0 || strcmp(argv[1], "remote") == 0);
    if (onnxl_has_feature(PARTS[i]) != expected) {
      fprintf(stderr, "onnxl_has_feature(\"%s\") is %d in the %s build\n", PARTS[i],
              (int)onnxl_has_feature(PARTS[i]), argv[1]);
      test_failures += 1;
    }
    test_checks += 1;
  }
  CHECK(!onnxl_has_feature("codec"));
  CHECK(!onnxl_has_feature(NULL));

  /* The codec, in every build. */
  CHECK_OK(onnxl_load_model(argv[2], NULL, &model));
  if (model == NULL) {
    return 1;
  }
  CHECK_OK(onnxl_serialize_model(model, NULL, &buf));
  CHECK(buf != NULL && onnxl_buffer_size(buf) > 0);
  onnxl_buffer_free(buf);
  buf = NULL;
  {
    /* More than one thread asked for: parallel with the `parallel` part, sequential without. */
    OnnxlModelProto *again = NULL;
    OnnxlParseOptions popts = onnxl_parse_options_default();
    OnnxlSerializeOptions sopts = onnxl_serialize_options_default();
    popts.num_threads = 4;
    sopts.num_threads = 4;
    CHECK_OK(onnxl_load_model(argv[2], &popts, &again));
    CHECK(again != NULL);
    CHECK_OK(onnxl_serialize_model(again, &sopts, &buf));
    CHECK(buf != NULL && onnxl_buffer_size(buf) > 0);
    onnxl_buffer_free(buf);
    buf = NULL;
    onnxl_model_proto_free(again);
  }

  {
    /* OperatorSetIdProto{domain: "ai", version: 7} */
    static const uint8_t opset[] = {0x0a, 0x02, 'a', 'i', 0x10, 0x07};
    bool printed;
    memset(text, 0, sizeof text);
    printed = onnxl_cxx_debug_string("OperatorSetIdProto", opset, sizeof opset, 1, text_alloc, NULL);
    if (full) {
      CHECK(printed && strcmp(text, "domain: \"ai\" version: 7") == 0);
    } else {
      CHECK(!printed && text[0] == 0);
      CHECK(onnxl_last_error_status() == ONNXL_STATUS_UNSUPPORTED);
      CHECK(strstr(onnxl_last_error_message(), "without the `text-format` feature") != NULL);
    }
  }

  {
    OnnxlSerializeOptions sopts = onnxl_serialize_options_default();
    sopts.inline_alignment = 4096;
    if (full) {
      CHECK_OK(onnxl_serialize_model(model, &sopts, &buf));
      CHECK(buf != NULL);
    } else {
      CHECK_STATUS(onnxl_serialize_model(model, &sopts, &buf), ONNXL_STATUS_UNSUPPORTED,
                   "without the `inline-alignment` feature");
      CHECK(buf == NULL);
    }
    onnxl_buffer_free(buf);
    buf = NULL;
  }

  if (full) {
    OnnxlTensorProto *t;
    DLManagedTensor *dl = NULL;
    CHECK_OK(onnxl_save_encrypted_model_to_string(model, (const uint8_t *)"k", 1, NULL, &buf));
    onnxl_buffer_free(buf);
    buf = NULL;
    CHECK_OK(onnxl_save_params(model, NULL, 0, &buf));
    onnxl_buffer_free(buf);
    buf = NULL;
    t = onnxl_graph_proto_mutable_initializer(onnxl_model_proto_mutable_graph(model), 0);
    CHECK(t != NULL);
    CHECK_OK(onnxl_tensor_proto_to_dlpack(t, 0, &dl));
    if (dl != NULL && dl->deleter != NULL) {
      dl->deleter(dl);
    }
  } else {
    OnnxlModelProto *other = NULL;
    OnnxlPrepackedBlobs *blobs = NULL;
    DLManagedTensor *dl = NULL;
    OnnxlTensorProto *t;
    CHECK_STATUS(onnxl_save_encrypted_model_to_string(model, (const uint8_t *)"k", 1, NULL, &buf),
                 ONNXL_STATUS_UNSUPPORTED, "without the `encryption` feature");
    CHECK(buf == NULL);
    CHECK_STATUS(onnxl_save_params(model, NULL, 0, &buf), ONNXL_STATUS_UNSUPPORTED,
                 "without the `params` feature");
    CHECK(buf == NULL);
    t = onnxl_graph_proto_mutable_initializer(onnxl_model_proto_mutable_graph(model), 0);
    CHECK(t != NULL);
    CHECK_STATUS(onnxl_tensor_proto_to_dlpack(t, 0, &dl), ONNXL_STATUS_UNSUPPORTED,
                 "without the `dlpack` feature");
    CHECK(dl == NULL);
    CHECK_STATUS(onnxl_load_model_with_prepacked(argv[2], NULL, NULL, &other, &blobs),
                 ONNXL_STATUS_UNSUPPORTED, "without the `prepacked` feature");
    CHECK(other == NULL && blobs == NULL);
  }
  onnxl_model_proto_free(model);
  printf("test_optional_features (%s build): %d checks, %d failed\n", argv[1], test_checks,
         test_failures);
  return test_failures == 0 ? 0 : 1;
}
