/* The encryption entry points of the C ABI: encrypted models to files and to memory in every
 * format (onnxl_save_encrypted_model / onnxl_load_encrypted_model / _to_string / _from_string),
 * files (onnxl_encrypt_file / onnxl_decrypt_file), and encrypted external-data weight files
 * (OnnxlExternalDataOptions.encrypt, OnnxlExternalLoadOptions.has_key), with the errors:
 * wrong key, a modified byte, truncation, a missing passphrase, bad options, and callers of the
 * older (smaller) options structs.
 *
 * Every key derivation is PBKDF2 with 100 000 iterations (slow under Valgrind), so the test
 * keeps their number small; a known-answer vector shows that count is the one used.
 *
 * Usage: test_encryption TEMP_DIR */
#define _POSIX_C_SOURCE 200809L

#include "test_util.h"

static const char *tmp_dir;
static const uint8_t key[] = {'k', 'e', 'y', 0, 0xff, '!'}; /* any bytes, NUL included */
static const uint8_t wrong_key[] = {'n', 'o', 'p', 'e'};

/* The big initializer of `m` holds i * 0.5f. */
static int big_ok(const OnnxlModelProto *m) {
  const OnnxlTensorProto *t = test_initializer(m, "big");
  const uint8_t *data = NULL;
  size_t len = 0;
  return t != NULL && onnxl_tensor_proto_raw_data(t, &data, &len) == ONNXL_STATUS_OK &&
         test_big_values_ok(data, len);
}

/* Rewrites `path` with byte `at` XOR-ed with `flip` (0: unchanged), cut to `keep` bytes
 * (SIZE_MAX: whole). */
static void rewrite(const char *path, size_t at, uint8_t flip, size_t keep) {
  size_t len = 0;
  uint8_t *b = test_read_file(path, &len);
  if (at < len) {
    b[at] ^= flip;
  }
  test_write_file(path, b, keep < len ? keep : len);
  free(b);
}

static void test_encrypted_model_files(void) {
  const uint32_t formats[] = {ONNXL_ENCRYPTION_FORMAT_ONNXCRY1, ONNXL_ENCRYPTION_FORMAT_ONNXCRY2,
                              ONNXL_ENCRYPTION_FORMAT_ONNXCRY3, ONNXL_ENCRYPTION_FORMAT_CHUNKED};
  static const char *const magics[] = {"ONNXCRY1", "ONNXCRY2", "ONNXCRY3", "ONNXCRYS"};
  OnnxlModelProto *m = test_build_model();
  OnnxlEncryptionOptions eo = onnxl_encryption_options_default();
  char path[4096];
  CHECK(m != NULL);
  CHECK(eo.struct_size == sizeof eo);
  CHECK(eo.format == ONNXL_ENCRYPTION_FORMAT_ONNXCRY3);
  CHECK(eo.chunk_cipher == ONNXL_CHUNK_CIPHER_AES_256_GCM);
  CHECK(eo.chunk_size == 1u << 20);
  CHECK(eo.serialize_options == NULL && eo.reserved == 0);
  for (size_t i = 0; i < 4; ++i) {
    OnnxlModelProto *back = NULL;
    OnnxlParseOptions po = onnxl_parse_options_default();
    size_t len = 0;
    uint8_t *bytes;
    snprintf(path, sizeof path, "%s/m%zu.onnxc", tmp_dir, i);
    eo.format = formats[i];
    eo.chunk_size = 256;
    CHECK_OK(onnxl_save_encrypted_model(m, path, key, sizeof key, &eo));
    bytes = test_read_file(path, &len);
    CHECK(len > 8 && memcmp(bytes, magics[i], 8) == 0);
    free(bytes);
    po.no_copy = i % 2 == 1; /* no_copy borrows from the decrypted buffer */
    CHECK_OK(onnxl_load_encrypted_model(path, key, sizeof key, &po, &back));
    CHECK(back != NULL && big_ok(back));
    onnxl_model_proto_free(back);
  }
  /* A wrong key (ONNXCRY3: authenticated) and a modified byte of the chunked file. */
  {
    OnnxlModelProto *back = NULL;
    snprintf(path, sizeof path, "%s/m2.onnxc", tmp_dir);
    CHECK_STATUS(onnxl_load_encrypted_model(path, wrong_key, sizeof wrong_key, NULL, &back),
                 ONNXL_STATUS_AUTHENTICATION, "ONNXCRY3");
    CHECK(back == NULL);
    snprintf(path, sizeof path, "%s/m3.onnxc", tmp_dir);
    rewrite(path, 36 + 100, 0x01, SIZE_MAX);
    CHECK_STATUS(onnxl_load_encrypted_model(path, key, sizeof key, NULL, &back),
                 ONNXL_STATUS_AUTHENTICATION, "chunk 0");
    CHECK(back == NULL);
  }
  /* Bad options and arguments. */
  eo.format = 9;
  CHECK_STATUS(onnxl_save_encrypted_model(m, path, key, sizeof key, &eo),
               ONNXL_STATUS_INVALID_ARGUMENT, "format 9");
  eo = onnxl_encryption_options_default();
  eo.format = ONNXL_ENCRYPTION_FORMAT_CHUNKED;
  eo.chunk_size = 10;
  CHECK_STATUS(onnxl_save_encrypted_model(m, path, key, sizeof key, &eo),
               ONNXL_STATUS_INVALID_ARGUMENT, "chunk_size");
  CHECK_STATUS(onnxl_save_encrypted_model(m, path, NULL, 3, NULL), ONNXL_STATUS_NULL_POINTER,
               "key");
  onnxl_model_proto_free(m);
}

static void test_encrypted_model_strings(void) {
  OnnxlModelProto *m = test_build_model();
  OnnxlModelProto *back = NULL;
  OnnxlBuffer *buf = NULL;
  OnnxlEncryptionOptions eo = onnxl_encryption_options_default();
  const uint8_t *data;
  size_t len;
  uint8_t *copy;
  CHECK(m != NULL);
  /* Empty key: allowed (NULL with length 0). */
  CHECK_OK(onnxl_save_encrypted_model_to_string(m, NULL, 0, NULL, &buf));
  CHECK(buf != NULL);
  data = onnxl_buffer_data(buf);
  len = onnxl_buffer_size(buf);
  CHECK(len > 52 && memcmp(data, "ONNXCRY3", 8) == 0);
  CHECK_OK(onnxl_load_encrypted_model_from_string(data, len, NULL, 0, NULL, &back));
  CHECK(back != NULL && big_ok(back));
  onnxl_model_proto_free(back);
  back = NULL;
  /* Truncated, modified, empty, bad magic. */
  CHECK_STATUS(onnxl_load_encrypted_model_from_string(data, len - 1, NULL, 0, NULL, &back),
               ONNXL_STATUS_AUTHENTICATION, "ONNXCRY3");
  copy = malloc(len);
  CHECK(copy != NULL);
  if (copy != NULL) {
    memcpy(copy, data, len);
    copy[len / 2] ^= 0x20;
    CHECK_STATUS(onnxl_load_encrypted_model_from_string(copy, len, NULL, 0, NULL, &back),
                 ONNXL_STATUS_AUTHENTICATION, "ONNXCRY3");
    memcpy(copy, "NOTCRYPT", 8);
    CHECK_STATUS(onnxl_load_encrypted_model_from_string(copy, len, NULL, 0, NULL, &back),
                 ONNXL_STATUS_CRYPTO, "bad magic");
    free(copy);
  }
  CHECK_STATUS(onnxl_load_encrypted_model_from_string(data, 0, NULL, 0, NULL, &back),
               ONNXL_STATUS_CRYPTO, "empty");
  CHECK(back == NULL);
  onnxl_buffer_free(buf);
  buf = NULL;
  /* The chunked format in memory, with ChaCha20-Poly1305. */
  eo.format = ONNXL_ENCRYPTION_FORMAT_CHUNKED;
  eo.chunk_cipher = ONNXL_CHUNK_CIPHER_CHACHA20_POLY1305;
  eo.chunk_size = 1000;
  CHECK_OK(onnxl_save_encrypted_model_to_string(m, key, sizeof key, &eo, &buf));
  CHECK(buf != NULL && memcmp(onnxl_buffer_data(buf), "ONNXCRYS", 8) == 0);
  CHECK(onnxl_buffer_data(buf)[9] == ONNXL_CHUNK_CIPHER_CHACHA20_POLY1305);
  CHECK_OK(onnxl_load_encrypted_model_from_string(onnxl_buffer_data(buf), onnxl_buffer_size(buf),
                                                  key, sizeof key, NULL, &back));
  CHECK(back != NULL && big_ok(back));
  onnxl_model_proto_free(back);
  onnxl_buffer_free(buf);
  onnxl_model_proto_free(m);
}

static void test_encrypt_decrypt_file(void) {
  char in[4096], enc[4096], out[4096];
  static uint8_t data[70000];
  OnnxlEncryptionOptions eo = onnxl_encryption_options_default();
  size_t len = 0;
  uint8_t *back;
  for (size_t i = 0; i < sizeof data; ++i) {
    data[i] = (uint8_t)(i * 7 + (i >> 9));
  }
  snprintf(in, sizeof in, "%s/plain.bin", tmp_dir);
  snprintf(enc, sizeof enc, "%s/plain.bin.enc", tmp_dir);
  snprintf(out, sizeof out, "%s/plain.bin.out", tmp_dir);
  test_write_file(in, data, sizeof data);
  eo.format = ONNXL_ENCRYPTION_FORMAT_CHUNKED;
  eo.chunk_size = 4096;
  CHECK_OK(onnxl_encrypt_file(in, enc, key, sizeof key, &eo));
  CHECK_OK(onnxl_decrypt_file(enc, out, key, sizeof key));
  back = test_read_file(out, &len);
  CHECK(len == sizeof data && memcmp(back, data, len) == 0);
  free(back);
  /* Truncated at a chunk boundary: the last chunk is missing. */
  rewrite(enc, 0, 0, 36 + 2 * (4096 + 16));
  CHECK_STATUS(onnxl_decrypt_file(enc, out, key, sizeof key), ONNXL_STATUS_CRYPTO, "truncated");
}

/* Encrypted external data: save with OnnxlExternalDataOptions.encrypt, load with a key. */
static void test_encrypted_external_data(void) {
  OnnxlModelProto *m = test_build_model();
  OnnxlModelProto *back = NULL;
  OnnxlExternalDataOptions so = onnxl_external_data_options_default();
  OnnxlExternalLoadOptions lo = onnxl_external_load_options_default();
  OnnxlParseOptions po = onnxl_parse_options_default();
  char model[4096], weights[4096];
  size_t len = 0;
  uint8_t *bytes;
  CHECK(m != NULL);
  CHECK(so.struct_size == sizeof so && sizeof so == 96);
  CHECK(!so.encrypt && so.encryption_key == NULL && so.encryption_key_len == 0);
  CHECK(so.encryption_chunk_size == 1u << 20);
  CHECK(so.encryption_chunk_cipher == ONNXL_CHUNK_CIPHER_AES_256_GCM);
  CHECK(lo.struct_size == sizeof lo && sizeof lo == 48);
  CHECK(!lo.has_key && lo.key == NULL && lo.key_len == 0);
  snprintf(model, sizeof model, "%s/ext.onnx", tmp_dir);
  snprintf(weights, sizeof weights, "%s/ext.onnx.data", tmp_dir);

  so.encrypt = true;
  so.encryption_key = key;
  so.encryption_key_len = sizeof key;
  so.encryption_chunk_size = 1024;
  so.checksum = true;
  CHECK_OK(onnxl_save_model_with_external_data(m, model, &so));
  bytes = test_read_file(weights, &len);
  /* 16 KiB of plaintext in 1 KiB chunks: header + plaintext + 17 tags. */
  CHECK(len == 36 + TEST_BIG_COUNT * sizeof(float) + 17 * 16);
  CHECK(len > 8 && memcmp(bytes, "ONNXCRYS", 8) == 0);
  free(bytes);

  /* Without a key: the weight file is named, the status is EXTERNAL_DATA. */
  CHECK_STATUS(onnxl_load_model(model, NULL, &back), ONNXL_STATUS_EXTERNAL_DATA, "ext.onnx.data");
  CHECK_LAST_ERROR(ONNXL_STATUS_EXTERNAL_DATA, "no passphrase");
  CHECK(back == NULL);
  /* With the key: copy and no-copy (decrypted into memory), checksums verified. */
  lo.has_key = true;
  lo.key = key;
  lo.key_len = sizeof key;
  lo.verify_checksums = true;
  for (int no_copy = 0; no_copy <= 1; ++no_copy) {
    po.no_copy = no_copy;
    CHECK_OK(onnxl_load_model_with_external_data(model, &po, &lo, &back));
    CHECK(back != NULL && big_ok(back));
    onnxl_model_proto_free(back);
    back = NULL;
  }
  /* load_external_data_for_model after a load without external data. */
  {
    OnnxlExternalLoadOptions skip = onnxl_external_load_options_default();
    skip.load_external_data = false;
    CHECK_OK(onnxl_load_model_with_external_data(model, NULL, &skip, &back));
    CHECK(back != NULL && !big_ok(back));
    /* Checking references without loading: the key and checksums come from the options; the
     * keyless check names the encrypted file; a wrong key is an authentication failure. */
    CHECK_OK(onnxl_check_external_data_with_options(back, tmp_dir, &lo));
    CHECK_STATUS(onnxl_check_external_data_with_options(back, tmp_dir, NULL),
                 ONNXL_STATUS_EXTERNAL_DATA, "ext.onnx.data");
    CHECK_STATUS(onnxl_check_external_data(back, tmp_dir, true), ONNXL_STATUS_EXTERNAL_DATA,
                 "no passphrase");
    {
      OnnxlExternalLoadOptions bad = lo;
      bad.key = wrong_key;
      bad.key_len = sizeof wrong_key;
      CHECK_STATUS(onnxl_check_external_data_with_options(back, tmp_dir, &bad),
                   ONNXL_STATUS_AUTHENTICATION, "ext.onnx.data");
    }
    CHECK_OK(onnxl_load_external_data_for_model(back, tmp_dir, NULL, &lo));
    CHECK(big_ok(back));
    onnxl_model_proto_free(back);
    back = NULL;
  }
  /* Wrong key. */
  lo.key = wrong_key;
  lo.key_len = sizeof wrong_key;
  CHECK_STATUS(onnxl_load_model_with_external_data(model, NULL, &lo, &back),
               ONNXL_STATUS_AUTHENTICATION, "ext.onnx.data");
  CHECK(back == NULL);
  lo.key = key;
  lo.key_len = sizeof key;
  /* A modified byte in a tensor's chunk, then a truncated file. */
  rewrite(weights, 36 + 3 * (1024 + 16) + 5, 0x10, SIZE_MAX);
  CHECK_STATUS(onnxl_load_model_with_external_data(model, NULL, &lo, &back),
               ONNXL_STATUS_AUTHENTICATION, "chunk 3");
  CHECK(back == NULL);
  rewrite(weights, 36 + 3 * (1024 + 16) + 5, 0x10, 36 + 4 * (1024 + 16));
  CHECK_STATUS(onnxl_load_model_with_external_data(model, NULL, &lo, &back),
               ONNXL_STATUS_CRYPTO, "truncated");
  CHECK(back == NULL);
  /* has_key in the 32-byte (version 1) struct: the key fields are not there. */
  lo.struct_size = 32;
  CHECK_STATUS(onnxl_load_model_with_external_data(model, NULL, &lo, &back),
               ONNXL_STATUS_INVALID_ARGUMENT, "has_key");
  /* Bad save options: chunk size, cipher, NULL key with a length, reserved bytes. */
  so.encryption_chunk_size = 16;
  CHECK_STATUS(onnxl_save_model_with_external_data(m, model, &so), ONNXL_STATUS_INVALID_ARGUMENT,
               "chunk_size");
  so.encryption_chunk_size = 1024;
  so.encryption_chunk_cipher = 7;
  CHECK_STATUS(onnxl_save_model_with_external_data(m, model, &so), ONNXL_STATUS_INVALID_ARGUMENT,
               "encryption_chunk_cipher 7");
  so.encryption_chunk_cipher = ONNXL_CHUNK_CIPHER_CHACHA20_POLY1305;
  so.encryption_key = NULL;
  CHECK_STATUS(onnxl_save_model_with_external_data(m, model, &so), ONNXL_STATUS_NULL_POINTER,
               "encryption_key");
  so.encryption_key = key;
  so.reserved[0] = 1;
  CHECK_STATUS(onnxl_save_model_with_external_data(m, model, &so), ONNXL_STATUS_INVALID_ARGUMENT,
               "reserved");
  so.reserved[0] = 0;
  /* A caller compiled with the 64-byte (version 1) struct: plaintext weights; the 32-byte load
   * options read them. */
  so.struct_size = 64;
  /* A fresh model path: a save over ext.onnx would write its weights under an alternate name
   * (crash-safe saves never overwrite the files the previous model references). */
  snprintf(model, sizeof model, "%s/v1.onnx", tmp_dir);
  snprintf(weights, sizeof weights, "%s/v1.onnx.data", tmp_dir);
  CHECK_OK(onnxl_save_model_with_external_data(m, model, &so));
  bytes = test_read_file(weights, &len);
  CHECK(len == TEST_BIG_COUNT * sizeof(float));
  free(bytes);
  lo = onnxl_external_load_options_default();
  lo.struct_size = 32;
  CHECK_OK(onnxl_load_model_with_external_data(model, NULL, &lo, &back));
  CHECK(back != NULL && big_ok(back));
  onnxl_model_proto_free(back);
  onnxl_model_proto_free(m);
}

/* A copy of the known-answer vector KAT_ONNXCRY3 of tests/integration/encryption.rs (also
 * decrypted by Python's `cryptography` in tests/compat/test_encryption.py): its key is PBKDF2 of
 * the passphrase with the formats' 100 000 iterations, so it decrypts only if this library (as
 * shipped: built without test hooks) derives with exactly that count, on every platform the
 * test runs on. */
static void test_known_answer_vector(void) {
  static const char vector_hex[] =
    "4f4e4e5843525933000102030405060708090a0b0c0d0e0fa0a1a2a3a4a5a6a7a8a9aaabdd953f55"
    "bee06f958a72c98ecd8aea38448345c221553e65898828a5da8fe5a8fcb00eba45adc1ccf6cd145e"
    "c0b1a05b12db76319c6ceda564ecc9a7e9d02393d7b816bad68d93971d756f6994f011cf06a538f3"
    "4ef6";
  static const char passphrase[] = "onnx_light known-answer passphrase";
  uint8_t vector[sizeof vector_hex / 2];
  OnnxlModelProto *m = NULL;
  size_t i;
  for (i = 0; i < sizeof vector; i++) {
    unsigned byte = 0;
    CHECK(sscanf(vector_hex + 2 * i, "%2x", &byte) == 1);
    vector[i] = (uint8_t)byte;
  }
  CHECK_OK(onnxl_load_encrypted_model_from_string(vector, sizeof vector,
                                                  (const uint8_t *)passphrase,
                                                  sizeof passphrase - 1, NULL, &m));
  CHECK(m != NULL && VIEW_EQ(onnxl_model_proto_producer_name(m), "onnx_light-kat"));
  onnxl_model_proto_free(m);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEMP_DIR\n", argv[0]);
    return 2;
  }
  tmp_dir = argv[1];
  RUN(test_known_answer_vector);
  RUN(test_encrypted_model_files);
  RUN(test_encrypted_model_strings);
  RUN(test_encrypt_decrypt_file);
  RUN(test_encrypted_external_data);
  printf("%d checks, %d failures\n", test_checks, test_failures);
  return test_failures == 0 ? 0 : 1;
}
