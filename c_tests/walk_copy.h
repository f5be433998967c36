/* The field-by-field copier generated from the schema table (c_tests/generated/walk_copy.c,
 * written by codegen/src/c_walker.rs). */
#ifndef ONNXL_WALK_COPY_H
#define ONNXL_WALK_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "onnx_light.h"

typedef struct walk_result {
  /* Bytes of the source message as onnx_light serializes it. */
  size_t size;
  /* Non-zero when that serialization equals the input bytes (the input was canonical). */
  int identical_to_input;
} walk_result;

/* Parses `len` bytes at `data` as the message named `message` (e.g. "ModelProto",
 * "TensorProto.Segment"), copies it into a new message with the setters only, and compares the
 * serializations. Returns 0 when byte-identical, 1 when they differ, -1 when a call failed
 * (reported on stderr). `opts` may be NULL. */
int walk_roundtrip(const char *message, const uint8_t *data, size_t len,
                   const OnnxlParseOptions *opts, walk_result *res);

/* Copies every field of `src` into `dst` (a new, empty model). 0 on success, -1 on failure. */
int walk_copy_model(const OnnxlModelProto *src, OnnxlModelProto *dst);

/* The messages walk_roundtrip knows, in schema order. */
size_t walk_message_count(void);
const char *walk_message_name(size_t i);

/* Coverage: one slot per field of every message plus one per message for unknown fields; hits
 * count the messages in which the field was found set (non-empty for repeated fields). */
size_t walk_slot_count(void);
const char *walk_slot_name(size_t i);
unsigned long walk_slot_hits(size_t i);

#endif /* ONNXL_WALK_COPY_H */
