/* The per-field accessors and setters, one shape at a time, with the exact protobuf bytes they
 * produce: optional scalars (presence: a default value set is written), enums, strings and bytes
 * (embedded NULs, not NUL-terminated), optional messages (default instance, mutable_),
 * repeated scalars (packed and unpacked: add, set, assign, _data, mutable_data, remove, clear),
 * repeated strings, repeated messages, oneofs (switching, _case), unknown fields, and the
 * validity of child pointers. (THE walker test covers every field of every message.)
 *
 * Usage: test_accessors */
#include "test_util.h"

/* Serialization of a TensorProto equals `len` bytes at `want`. */
static int tensor_bytes_are(const OnnxlTensorProto *t, const void *want, size_t len) {
  OnnxlBuffer *b = NULL;
  int same;
  if (onnxl_tensor_proto_serialize(t, NULL, &b) != ONNXL_STATUS_OK) {
    return 0;
  }
  same = onnxl_buffer_size(b) == len && memcmp(onnxl_buffer_data(b), want, len) == 0;
  if (!same) {
    fprintf(stderr, "  got:");
    for (size_t i = 0; i < onnxl_buffer_size(b); ++i) {
      fprintf(stderr, " %02x", onnxl_buffer_data(b)[i]);
    }
    fprintf(stderr, "\n");
  }
  onnxl_buffer_free(b);
  return same && onnxl_tensor_proto_byte_size(t) == (uint64_t)len;
}

static void test_optional_scalars(void) {
  OnnxlModelProto *m = onnxl_model_proto_new();
  OnnxlTensorProto *t = onnxl_tensor_proto_new();
  OnnxlBuffer *b = NULL;
  CHECK(!onnxl_model_proto_has_ir_version(m) && onnxl_model_proto_ir_version(m) == 0);
  /* Presence: a field explicitly set to its default is written. */
  CHECK_OK(onnxl_model_proto_set_ir_version(m, 0));
  CHECK(onnxl_model_proto_has_ir_version(m));
  CHECK_OK(onnxl_model_proto_serialize(m, NULL, &b));
  CHECK(onnxl_buffer_size(b) == 2 && memcmp(onnxl_buffer_data(b), "\x08\x00", 2) == 0);
  onnxl_buffer_free(b);
  b = NULL;
  CHECK_OK(onnxl_model_proto_set_ir_version(m, 300));
  CHECK(onnxl_model_proto_ir_version(m) == 300);
  CHECK_OK(onnxl_model_proto_set_model_version(m, -1));
  CHECK(onnxl_model_proto_model_version(m) == -1);
  CHECK_OK(onnxl_model_proto_serialize(m, NULL, &b));
  CHECK(onnxl_buffer_size(b) == 14 &&
        memcmp(onnxl_buffer_data(b), "\x08\xac\x02\x28\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 14) == 0);
  onnxl_buffer_free(b);
  CHECK_OK(onnxl_model_proto_clear_ir_version(m));
  CHECK(!onnxl_model_proto_has_ir_version(m) && onnxl_model_proto_ir_version(m) == 0);
  /* int32 (negative: sign-extended to 10 bytes) and a closed enum. */
  CHECK_OK(onnxl_tensor_proto_set_data_type(t, -2));
  CHECK(onnxl_tensor_proto_data_type(t) == -2);
  CHECK_OK(onnxl_tensor_proto_set_data_location(t, ONNXL_TENSOR_PROTO_DATA_LOCATION_EXTERNAL));
  CHECK(onnxl_tensor_proto_data_location(t) == ONNXL_TENSOR_PROTO_DATA_LOCATION_EXTERNAL);
  CHECK(tensor_bytes_are(t, "\x10\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01\x70\x01", 13));
  onnxl_tensor_proto_free(t);
  onnxl_model_proto_free(m);
}

static void test_strings_and_bytes(void) {
  OnnxlTensorProto *t = onnxl_tensor_proto_new();
  OnnxlAttributeProto *a = onnxl_attribute_proto_new();
  OnnxlStr s;
  OnnxlBytes by;
  s = onnxl_tensor_proto_name(t);
  CHECK(s.data != NULL && s.len == 0 && !onnxl_tensor_proto_has_name(t));
  /* Not NUL-terminated, not validated: embedded NULs and any bytes round-trip. */
  CHECK_OK(onnxl_tensor_proto_set_name(t, "a\0b\xff", 4));
  s = onnxl_tensor_proto_name(t);
  CHECK(s.len == 4 && memcmp(s.data, "a\0b\xff", 4) == 0);
  /* The setter copies, even from a view of the same field. */
  CHECK_OK(onnxl_tensor_proto_set_name(t, s.data + 2, 1));
  CHECK(VIEW_EQ(onnxl_tensor_proto_name(t), "b"));
  CHECK_OK(onnxl_tensor_proto_set_name(t, NULL, 0)); /* empty: set, written */
  CHECK(onnxl_tensor_proto_has_name(t));
  CHECK(tensor_bytes_are(t, "\x42\x00", 2));
  CHECK_OK(onnxl_tensor_proto_clear_name(t));
  CHECK(!onnxl_tensor_proto_has_name(t));
  CHECK_OK(onnxl_attribute_proto_set_s(a, (const uint8_t *)"\x00\x01", 2));
  by = onnxl_attribute_proto_s(a);
  CHECK(by.len == 2 && by.data[0] == 0 && by.data[1] == 1);
  CHECK(onnxl_attribute_proto_has_s(a));
  onnxl_attribute_proto_free(a);
  onnxl_tensor_proto_free(t);
}

static void test_optional_messages(void) {
  OnnxlModelProto *m = onnxl_model_proto_new();
  const OnnxlGraphProto *dflt = onnxl_model_proto_graph(m);
  OnnxlGraphProto *g;
  OnnxlBuffer *b = NULL;
  /* Unset: a shared, empty default instance; not "set". */
  CHECK(dflt != NULL && onnxl_graph_proto_byte_size(dflt) == 0 && !onnxl_model_proto_has_graph(m));
  /* mutable_ sets it (an empty graph is still written). */
  g = onnxl_model_proto_mutable_graph(m);
  CHECK(g != NULL && onnxl_model_proto_has_graph(m));
  CHECK((const OnnxlGraphProto *)g == onnxl_model_proto_graph(m));
  CHECK(onnxl_model_proto_mutable_graph(m) == g); /* the same child every time */
  CHECK_OK(onnxl_model_proto_serialize(m, NULL, &b));
  CHECK(onnxl_buffer_size(b) == 2 && memcmp(onnxl_buffer_data(b), "\x3a\x00", 2) == 0);
  onnxl_buffer_free(b);
  b = NULL;
  CHECK_OK(onnxl_graph_proto_set_name(g, "g", 1));
  CHECK_OK(onnxl_model_proto_serialize(m, NULL, &b));
  CHECK(onnxl_buffer_size(b) == 5 && memcmp(onnxl_buffer_data(b), "\x3a\x03\x12\x01g", 5) == 0);
  onnxl_buffer_free(b);
  CHECK_OK(onnxl_model_proto_clear_graph(m));
  CHECK(!onnxl_model_proto_has_graph(m) && onnxl_model_proto_byte_size(m) == 0);
  CHECK(onnxl_graph_proto_byte_size(onnxl_model_proto_graph(m)) == 0);
  onnxl_model_proto_free(m);
}

static void test_repeated_scalars(void) {
  OnnxlTensorProto *t = onnxl_tensor_proto_new();
  const int64_t dims[3] = {2, 3, 300};
  const float floats[2] = {1.0f, -2.5f};
  int64_t *md;
  CHECK(onnxl_tensor_proto_dims_size(t) == 0 && onnxl_tensor_proto_dims_data(t) != NULL);
  /* dims is unpacked in onnx.proto: one tag per element. */
  CHECK_OK(onnxl_tensor_proto_assign_dims(t, dims, 3));
  CHECK(onnxl_tensor_proto_dims_size(t) == 3);
  CHECK(memcmp(onnxl_tensor_proto_dims_data(t), dims, sizeof dims) == 0);
  CHECK(onnxl_tensor_proto_dims(t, 2) == 300);
  CHECK(tensor_bytes_are(t, "\x08\x02\x08\x03\x08\xac\x02", 7));
  CHECK_OK(onnxl_tensor_proto_set_dims(t, 0, 5));
  md = onnxl_tensor_proto_mutable_dims_data(t);
  CHECK(md != NULL);
  md[1] = 7; /* in-place writes through the mutable view */
  CHECK_OK(onnxl_tensor_proto_add_dims(t, 1));
  CHECK(onnxl_tensor_proto_dims_size(t) == 4 && onnxl_tensor_proto_dims(t, 0) == 5 &&
        onnxl_tensor_proto_dims(t, 1) == 7 && onnxl_tensor_proto_dims(t, 3) == 1);
  CHECK_OK(onnxl_tensor_proto_remove_dims(t, 0));
  CHECK(onnxl_tensor_proto_dims_size(t) == 3 && onnxl_tensor_proto_dims(t, 0) == 7);
  CHECK_OK(onnxl_tensor_proto_assign_dims(t, onnxl_tensor_proto_dims_data(t) + 1, 2)); /* may alias */
  CHECK(onnxl_tensor_proto_dims_size(t) == 2 && onnxl_tensor_proto_dims(t, 0) == 300);
  CHECK_OK(onnxl_tensor_proto_clear_dims(t));
  CHECK(onnxl_tensor_proto_dims_size(t) == 0);
  /* float_data is packed: one length-delimited field. */
  CHECK_OK(onnxl_tensor_proto_add_float_data(t, floats[0]));
  CHECK_OK(onnxl_tensor_proto_add_float_data(t, floats[1]));
  CHECK(onnxl_tensor_proto_float_data(t, 1) == -2.5f);
  CHECK(tensor_bytes_are(t, "\x22\x08\x00\x00\x80\x3f\x00\x00\x20\xc0", 10));
  CHECK_OK(onnxl_tensor_proto_assign_float_data(t, NULL, 0));
  CHECK(onnxl_tensor_proto_float_data_size(t) == 0);
  CHECK(tensor_bytes_are(t, "", 0)); /* an empty packed field is not written */
  CHECK_OK(onnxl_tensor_proto_add_uint64_data(t, UINT64_MAX));
  CHECK(onnxl_tensor_proto_uint64_data(t, 0) == UINT64_MAX);
  CHECK_OK(onnxl_tensor_proto_add_double_data(t, 0.5));
  CHECK(onnxl_tensor_proto_double_data_data(t)[0] == 0.5);
  CHECK_OK(onnxl_tensor_proto_add_int32_data(t, -1));
  CHECK(onnxl_tensor_proto_int32_data(t, 0) == -1);
  onnxl_tensor_proto_free(t);
}

static void test_repeated_strings(void) {
  OnnxlNodeProto *n = onnxl_node_proto_new();
  OnnxlTensorProto *t = onnxl_tensor_proto_new();
  CHECK_OK(onnxl_node_proto_add_input(n, "x", 1));
  CHECK_OK(onnxl_node_proto_add_input(n, "a long input name that does not fit inline", 42));
  CHECK_OK(onnxl_node_proto_add_input(n, "", 0));
  CHECK(onnxl_node_proto_input_size(n) == 3);
  CHECK(VIEW_EQ(onnxl_node_proto_input(n, 1), "a long input name that does not fit inline"));
  CHECK(onnxl_node_proto_input(n, 2).len == 0 && onnxl_node_proto_input(n, 2).data != NULL);
  CHECK_OK(onnxl_node_proto_set_input(n, 0, "y", 1));
  CHECK(VIEW_EQ(onnxl_node_proto_input(n, 0), "y"));
  CHECK_OK(onnxl_node_proto_remove_input(n, 1));
  CHECK(onnxl_node_proto_input_size(n) == 2 && onnxl_node_proto_input(n, 1).len == 0);
  CHECK_OK(onnxl_node_proto_clear_input(n));
  CHECK(onnxl_node_proto_input_size(n) == 0);
  /* Repeated bytes. */
  CHECK_OK(onnxl_tensor_proto_add_string_data(t, (const uint8_t *)"\x00z", 2));
  CHECK(onnxl_tensor_proto_string_data(t, 0).len == 2 && onnxl_tensor_proto_string_data(t, 0).data[1] == 'z');
  CHECK(tensor_bytes_are(t, "\x32\x02\x00z", 4));
  onnxl_tensor_proto_free(t);
  onnxl_node_proto_free(n);
}

static void test_repeated_messages(void) {
  OnnxlGraphProto *g = onnxl_graph_proto_new();
  OnnxlNodeProto *n;
  OnnxlAttributeProto *attr;
  for (int i = 0; i < 3; ++i) {
    char name[8];
    n = onnxl_graph_proto_add_node(g);
    CHECK(n != NULL);
    snprintf(name, sizeof name, "n%d", i);
    CHECK_OK(onnxl_node_proto_set_name(n, name, strlen(name)));
  }
  CHECK(onnxl_graph_proto_node_size(g) == 3);
  CHECK(VIEW_EQ(onnxl_node_proto_name(onnxl_graph_proto_node(g, 2)), "n2"));
  n = onnxl_graph_proto_mutable_node(g, 1);
  attr = onnxl_node_proto_add_attribute(n);
  CHECK_OK(onnxl_attribute_proto_set_name(attr, "axis", 4));
  CHECK_OK(onnxl_attribute_proto_set_type(attr, ONNXL_ATTRIBUTE_PROTO_ATTRIBUTE_TYPE_INT));
  CHECK_OK(onnxl_attribute_proto_set_i(attr, -1));
  CHECK(onnxl_attribute_proto_i(onnxl_node_proto_attribute(onnxl_graph_proto_node(g, 1), 0)) == -1);
  CHECK_OK(onnxl_graph_proto_remove_node(g, 0));
  CHECK(onnxl_graph_proto_node_size(g) == 2);
  CHECK(VIEW_EQ(onnxl_node_proto_name(onnxl_graph_proto_node(g, 0)), "n1"));
  CHECK(onnxl_node_proto_attribute_size(onnxl_graph_proto_node(g, 0)) == 1);
  CHECK_OK(onnxl_graph_proto_clear_node(g));
  CHECK(onnxl_graph_proto_node_size(g) == 0 && onnxl_graph_proto_byte_size(g) == 0);
  onnxl_graph_proto_free(g);
}

static void test_oneofs(void) {
  OnnxlTypeProto *tp = onnxl_type_proto_new();
  OnnxlTensorShapeProtoDimension *d = onnxl_tensor_shape_proto_dimension_new();
  OnnxlTypeProtoTensor *tt;
  CHECK(onnxl_type_proto_value_case(tp) == ONNXL_TYPE_PROTO_VALUE_CASE_NOT_SET);
  tt = onnxl_type_proto_mutable_tensor_type(tp);
  CHECK(tt != NULL);
  CHECK_OK(onnxl_type_proto_tensor_set_elem_type(tt, ONNXL_TENSOR_PROTO_DATA_TYPE_FLOAT));
  CHECK(onnxl_type_proto_value_case(tp) == ONNXL_TYPE_PROTO_VALUE_CASE_TENSOR_TYPE);
  CHECK(onnxl_type_proto_has_tensor_type(tp) && !onnxl_type_proto_has_sequence_type(tp));
  /* Switching the oneof drops the previous member. */
  CHECK(onnxl_type_proto_mutable_sequence_type(tp) != NULL);
  CHECK(onnxl_type_proto_value_case(tp) == ONNXL_TYPE_PROTO_VALUE_CASE_SEQUENCE_TYPE);
  CHECK(!onnxl_type_proto_has_tensor_type(tp));
  CHECK(onnxl_type_proto_tensor_elem_type(onnxl_type_proto_tensor_type(tp)) == 0); /* default instance */
  CHECK_OK(onnxl_type_proto_clear_tensor_type(tp)); /* not the member: nothing happens */
  CHECK(onnxl_type_proto_value_case(tp) == ONNXL_TYPE_PROTO_VALUE_CASE_SEQUENCE_TYPE);
  CHECK_OK(onnxl_type_proto_clear_sequence_type(tp));
  CHECK(onnxl_type_proto_value_case(tp) == ONNXL_TYPE_PROTO_VALUE_CASE_NOT_SET);
  /* Scalar and string members. */
  CHECK_OK(onnxl_tensor_shape_proto_dimension_set_dim_value(d, 4));
  CHECK(onnxl_tensor_shape_proto_dimension_value_case(d) == ONNXL_TENSOR_SHAPE_PROTO_DIMENSION_VALUE_CASE_DIM_VALUE);
  CHECK_OK(onnxl_tensor_shape_proto_dimension_set_dim_param(d, "N", 1));
  CHECK(onnxl_tensor_shape_proto_dimension_value_case(d) == ONNXL_TENSOR_SHAPE_PROTO_DIMENSION_VALUE_CASE_DIM_PARAM);
  CHECK(onnxl_tensor_shape_proto_dimension_dim_value(d) == 0 && !onnxl_tensor_shape_proto_dimension_has_dim_value(d));
  CHECK(VIEW_EQ(onnxl_tensor_shape_proto_dimension_dim_param(d), "N"));
  onnxl_tensor_shape_proto_dimension_free(d);
  onnxl_type_proto_free(tp);
}

static void test_unknown_fields(void) {
  OnnxlTensorProto *t = onnxl_tensor_proto_new();
  /* Field 1000 (varint 300) and field 1001 (length-delimited "hi"): written after known fields,
   * in the order they were added. */
  const uint8_t u1[] = {0xc0, 0x3e, 0xac, 0x02};
  const uint8_t u2[] = {0xca, 0x3e, 0x02, 'h', 'i'};
  OnnxlBytes u;
  CHECK(!onnxl_tensor_proto_has_unknown_fields(t));
  CHECK(onnxl_tensor_proto_unknown_fields(t).len == 0);
  CHECK_OK(onnxl_tensor_proto_add_unknown_fields(t, u1, sizeof u1));
  CHECK_OK(onnxl_tensor_proto_add_unknown_fields(t, u2, sizeof u2));
  CHECK_OK(onnxl_tensor_proto_set_data_type(t, 1));
  CHECK(onnxl_tensor_proto_has_unknown_fields(t));
  u = onnxl_tensor_proto_unknown_fields(t);
  CHECK(u.len == 9 && memcmp(u.data, u1, 4) == 0 && memcmp(u.data + 4, u2, 5) == 0);
  CHECK(tensor_bytes_are(t, "\x10\x01\xc0\x3e\xac\x02\xca\x3e\x02hi", 11));
  /* Parsing keeps them; clearing drops them. */
  {
    OnnxlTensorProto *p = onnxl_tensor_proto_new();
    CHECK_OK(onnxl_tensor_proto_parse_from_bytes(p, (const uint8_t *)"\x10\x01\xc0\x3e\xac\x02\xca\x3e\x02hi", 11, NULL));
    CHECK(onnxl_tensor_proto_unknown_fields(p).len == 9);
    CHECK_OK(onnxl_tensor_proto_clear_unknown_fields(p));
    CHECK(!onnxl_tensor_proto_has_unknown_fields(p));
    CHECK(tensor_bytes_are(p, "\x10\x01", 2));
    onnxl_tensor_proto_free(p);
  }
  /* Bytes that are not a valid field encoding are refused. */
  CHECK_STATUS(onnxl_tensor_proto_add_unknown_fields(t, (const uint8_t *)"\xff", 1),
               ONNXL_STATUS_INVALID_ARGUMENT, "not well-formed");
  CHECK(onnxl_tensor_proto_unknown_fields(t).len == 9);
  onnxl_tensor_proto_free(t);
}

static void test_payload_accessors(void) {
  OnnxlTensorProto *t = onnxl_tensor_proto_new();
  const uint8_t data[3] = {1, 2, 3};
  const uint8_t *p = NULL;
  size_t len = 99;
  CHECK(!onnxl_tensor_proto_has_raw_data(t));
  CHECK_OK(onnxl_tensor_proto_raw_data(t, &p, &len));
  CHECK(p != NULL && len == 0);
  CHECK_OK(onnxl_tensor_proto_set_raw_data(t, data, 3));
  CHECK(onnxl_tensor_proto_has_raw_data(t) && !onnxl_tensor_proto_raw_data_is_borrowed(t));
  CHECK_OK(onnxl_tensor_proto_raw_data(t, &p, &len));
  CHECK(len == 3 && p != data && memcmp(p, data, 3) == 0);
  CHECK(tensor_bytes_are(t, "\x4a\x03\x01\x02\x03", 5));
  CHECK_OK(onnxl_tensor_proto_set_raw_data(t, p + 1, 2)); /* from its own view */
  CHECK_OK(onnxl_tensor_proto_raw_data(t, &p, &len));
  CHECK(len == 2 && p[0] == 2 && p[1] == 3);
  CHECK_OK(onnxl_tensor_proto_set_raw_data(t, NULL, 0));
  CHECK(tensor_bytes_are(t, "\x4a\x00", 2));
  onnxl_tensor_proto_free(t);
}

static void test_child_pointers_follow_parent(void) {
  /* A child pointer is valid while the parent lives; building a model bottom-up through
   * mutable_/add_ and reading it back through const getters sees the same objects. */
  OnnxlModelProto *m = test_build_model();
  const OnnxlGraphProto *g = onnxl_model_proto_graph(m);
  const OnnxlNodeProto *n = onnxl_graph_proto_node(g, 0);
  CHECK(m != NULL && g != NULL && n != NULL);
  CHECK(onnxl_model_proto_mutable_graph(m) == (OnnxlGraphProto *)g);
  CHECK(onnxl_graph_proto_mutable_node(onnxl_model_proto_mutable_graph(m), 0) == (OnnxlNodeProto *)n);
  CHECK(VIEW_EQ(onnxl_node_proto_op_type(n), "MatMul"));
  CHECK(onnxl_node_proto_input_size(n) == 2 && VIEW_EQ(onnxl_node_proto_input(n, 1), "big"));
  CHECK(onnxl_operator_set_id_proto_version(onnxl_model_proto_opset_import(m, 0)) == 21);
  CHECK(onnxl_model_proto_ir_version(m) == 10);
  onnxl_model_proto_free(m);
}

int main(void) {
  RUN(test_optional_scalars);
  RUN(test_strings_and_bytes);
  RUN(test_optional_messages);
  RUN(test_repeated_scalars);
  RUN(test_repeated_strings);
  RUN(test_repeated_messages);
  RUN(test_oneofs);
  RUN(test_unknown_fields);
  RUN(test_payload_accessors);
  RUN(test_child_pointers_follow_parent);
  return test_summary("test_accessors");
}
