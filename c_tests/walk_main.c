/* THE walker test: walks every field of every message of real models through the C getters,
 * rebuilds each model in a new, empty message with the C setters only (generated code:
 * c_tests/generated/walk_copy.c), serializes it, and checks the bytes are identical to the
 * original re-serialized by onnx_light. Each model is walked three times: parsed by copy from
 * bytes, parsed no_copy from the caller's bytes, and parsed no_copy from a memory-mapped file.
 *
 * Usage: walk_copy [options] PATH...
 *   PATH                 a .onnx file, or a directory searched recursively for *.onnx
 *   --type MESSAGE FILE  FILE holds one serialized MESSAGE (e.g. SequenceProto)
 *   --typed-dir DIR      every DIR/<anything>__<MESSAGE>.pb holds one serialized MESSAGE
 *   --min-files N        fail unless at least N inputs were walked (default 1)
 *   --require-canonical  fail unless every input file is byte-identical to its re-serialization
 *   --require-full-coverage  fail unless every field of every message (and the unknown fields of
 *                        every message) was found set in at least one input
 *   --coverage           print the per-field coverage table
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx_light.h"
#include "walk_copy.h"

typedef struct input {
  char *path;
  char *message; /* NULL: ModelProto from a .onnx file */
} input;

typedef struct input_list {
  input *items;
  size_t len, cap;
} input_list;

static void push(input_list *l, const char *path, const char *message) {
  if (l->len == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->items = realloc(l->items, l->cap * sizeof *l->items);
    if (l->items == NULL) {
      perror("realloc");
      exit(2);
    }
  }
  l->items[l->len].path = strdup(path);
  l->items[l->len].message = message ? strdup(message) : NULL;
  if (l->items[l->len].path == NULL || (message != NULL && l->items[l->len].message == NULL)) {
    perror("strdup");
    exit(2);
  }
  l->len += 1;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Appends every *.onnx file under `dir` (recursively). */
static int scan(input_list *l, const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  if (d == NULL) {
    fprintf(stderr, "cannot open directory %s: %s\n", dir, strerror(errno));
    return -1;
  }
  while ((e = readdir(d)) != NULL) {
    struct stat sb;
    size_t need;
    char *path;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
      continue;
    }
    need = strlen(dir) + strlen(e->d_name) + 2;
    path = malloc(need);
    if (path == NULL) {
      closedir(d);
      return -1;
    }
    snprintf(path, need, "%s/%s", dir, e->d_name);
    if (stat(path, &sb) == 0) {
      if (S_ISDIR(sb.st_mode)) {
        if (scan(l, path) != 0) {
          free(path);
          closedir(d);
          return -1;
        }
      } else if (S_ISREG(sb.st_mode) && ends_with(path, ".onnx")) {
        push(l, path, NULL);
      }
    }
    free(path);
  }
  closedir(d);
  return 0;
}

/* Appends every DIR/<anything>__<MESSAGE>.pb file (not recursive). */
static int scan_typed(input_list *l, const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  if (d == NULL) {
    fprintf(stderr, "cannot open directory %s: %s\n", dir, strerror(errno));
    return -1;
  }
  while ((e = readdir(d)) != NULL) {
    const char *sep = strstr(e->d_name, "__");
    size_t need, mlen;
    char *path, *message;
    if (sep == NULL || !ends_with(e->d_name, ".pb")) {
      continue;
    }
    mlen = strlen(sep + 2) - 3;
    need = strlen(dir) + strlen(e->d_name) + 2;
    path = malloc(need);
    message = malloc(mlen + 1);
    if (path == NULL || message == NULL) {
      free(path);
      free(message);
      closedir(d);
      return -1;
    }
    snprintf(path, need, "%s/%s", dir, e->d_name);
    memcpy(message, sep + 2, mlen);
    message[mlen] = '\0';
    push(l, path, message);
    free(message);
    free(path);
  }
  closedir(d);
  return 0;
}

static int by_path(const void *a, const void *b) {
  return strcmp(((const input *)a)->path, ((const input *)b)->path);
}

static uint8_t *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  uint8_t *buf = NULL;
  size_t cap = 0, n = 0;
  if (f == NULL) {
    fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
    return NULL;
  }
  for (;;) {
    size_t got;
    if (n == cap) {
      uint8_t *grown;
      cap = cap ? 2 * cap : 65536;
      grown = realloc(buf, cap);
      if (grown == NULL) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = grown;
    }
    got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      break;
    }
  }
  fclose(f);
  *len = n;
  return buf;
}

/* Parses `path` no_copy from a memory-mapped stream (C++ MmapFileStream + ParseProtoFromStream:
 * tensor bytes borrow the mapping; external data is not resolved), copies it with the setters
 * and compares. */
static int walk_mapped(const char *path) {
  OnnxlParseOptions opts = onnxl_parse_options_default();
  OnnxlStream *stream = NULL;
  OnnxlModelProto *src = onnxl_model_proto_new();
  OnnxlModelProto *dst = onnxl_model_proto_new();
  OnnxlBuffer *a = NULL, *b = NULL;
  int rc = -1;
  OnnxlStatus st;
  opts.no_copy = true;
  opts.raw_data_threshold = 0; /* borrow every payload from the mapping */
  st = onnxl_stream_open_mmap(path, &stream);
  if (st == ONNXL_STATUS_OK) {
    st = onnxl_parse_proto_from_stream(src, stream, &opts);
  }
  onnxl_stream_free(stream); /* the model keeps the mapping alive through owner tokens */
  if (st != ONNXL_STATUS_OK) {
    fprintf(stderr, "parse %s (mmap stream, no_copy): %s: %s\n", path, onnxl_status_name((uint32_t)st),
            onnxl_last_error_message());
    goto done;
  }
  if (src == NULL || dst == NULL || walk_copy_model(src, dst) != 0) {
    goto done;
  }
  if (onnxl_serialize_model(src, NULL, &a) != ONNXL_STATUS_OK ||
      onnxl_serialize_model(dst, NULL, &b) != ONNXL_STATUS_OK) {
    fprintf(stderr, "onnxl_serialize_model: %s\n", onnxl_last_error_message());
    goto done;
  }
  if (onnxl_buffer_size(a) != onnxl_buffer_size(b) ||
      memcmp(onnxl_buffer_data(a), onnxl_buffer_data(b), onnxl_buffer_size(a)) != 0) {
    fprintf(stderr, "%s: copy of the mapped model differs\n", path);
    rc = 1;
    goto done;
  }
  rc = 0;
done:
  onnxl_buffer_free(b);
  onnxl_buffer_free(a);
  onnxl_model_proto_free(dst);
  onnxl_model_proto_free(src);
  return rc;
}

int main(int argc, char **argv) {
  input_list inputs = {NULL, 0, 0};
  size_t min_files = 1, failures = 0, canonical = 0, bytes = 0;
  int require_canonical = 0, require_coverage = 0, print_coverage = 0;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    struct stat sb;
    if (strcmp(a, "--type") == 0 && i + 2 < argc) {
      push(&inputs, argv[i + 2], argv[i + 1]);
      i += 2;
    } else if (strcmp(a, "--typed-dir") == 0 && i + 1 < argc) {
      size_t before = inputs.len;
      if (scan_typed(&inputs, argv[++i]) != 0) {
        return 2;
      }
      qsort(inputs.items + before, inputs.len - before, sizeof *inputs.items, by_path);
    } else if (strcmp(a, "--min-files") == 0 && i + 1 < argc) {
      min_files = (size_t)strtoul(argv[++i], NULL, 10);
    } else if (strcmp(a, "--require-canonical") == 0) {
      require_canonical = 1;
    } else if (strcmp(a, "--require-full-coverage") == 0) {
      require_coverage = 1;
    } else if (strcmp(a, "--coverage") == 0) {
      print_coverage = 1;
    } else if (a[0] == '-') {
      fprintf(stderr, "unknown option %s\n", a);
      return 2;
    } else if (stat(a, &sb) != 0) {
      fprintf(stderr, "%s: %s\n", a, strerror(errno));
      return 2;
    } else if (S_ISDIR(sb.st_mode)) {
      size_t before = inputs.len;
      if (scan(&inputs, a) != 0) {
        return 2;
      }
      qsort(inputs.items + before, inputs.len - before, sizeof *inputs.items, by_path);
    } else {
      push(&inputs, a, NULL);
    }
  }

  for (size_t i = 0; i < inputs.len; ++i) {
    const input *in = &inputs.items[i];
    const char *message = in->message ? in->message : "ModelProto";
    size_t len = 0;
    uint8_t *data = read_all(in->path, &len);
    walk_result copied = {0, 0}, borrowed = {0, 0};
    OnnxlParseOptions no_copy = onnxl_parse_options_default();
    int rc;
    if (data == NULL) {
      failures += 1;
      continue;
    }
    no_copy.no_copy = true;
    no_copy.raw_data_threshold = 0; /* borrow every payload from `data` */
    rc = walk_roundtrip(message, data, len, NULL, &copied);
    if (rc == 0) {
      rc = walk_roundtrip(message, data, len, &no_copy, &borrowed);
    }
    if (rc == 0 && in->message == NULL) {
      rc = walk_mapped(in->path);
    }
    if (rc != 0) {
      fprintf(stderr, "FAIL %s (%s)\n", in->path, message);
      failures += 1;
    } else {
      bytes += copied.size;
      if (copied.identical_to_input && borrowed.identical_to_input) {
        canonical += 1;
      } else if (require_canonical) {
        fprintf(stderr, "FAIL %s: the re-serialization differs from the file\n", in->path);
        failures += 1;
      }
    }
    free(data);
  }

  {
    size_t slots = walk_slot_count(), reached = 0;
    for (size_t i = 0; i < slots; ++i) {
      unsigned long hits = walk_slot_hits(i);
      reached += hits > 0;
      if (print_coverage || (require_coverage && hits == 0)) {
        printf("  %-58s %s%lu\n", walk_slot_name(i), hits ? "" : "NEVER SET ", hits);
      }
    }
    printf("walked %zu inputs (%zu bytes): %zu failed, %zu canonical (file bytes == re-serialization)\n",
           inputs.len, bytes, failures, canonical);
    printf("field coverage: %zu of %zu fields (incl. unknown fields of each of %zu messages) were set "
           "somewhere\n",
           reached, slots, walk_message_count());
    fflush(stdout);
    if (require_coverage && reached != slots) {
      fprintf(stderr, "FAIL: %zu fields were never set in the inputs\n", slots - reached);
      failures += 1;
    }
  }
  if (inputs.len < min_files) {
    fprintf(stderr, "FAIL: only %zu inputs (at least %zu expected)\n", inputs.len, min_files);
    failures += 1;
  }
  for (size_t i = 0; i < inputs.len; ++i) {
    free(inputs.items[i].path);
    free(inputs.items[i].message);
  }
  free(inputs.items);
  return failures == 0 ? 0 : 1;
}
