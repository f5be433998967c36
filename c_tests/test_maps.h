/* mappings_of(): how a C test checks that bytes lie inside a file's memory mapping, through
 * /proc/self/maps (Linux). The including file defines _DEFAULT_SOURCE (for realpath) before its
 * first #include. */
#ifndef ONNXL_TEST_MAPS_H
#define ONNXL_TEST_MAPS_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Number of mappings of `file` in /proc/self/maps; with `p` non-NULL, counts only the mappings
 * that contain `p`; -1 when `file` or the maps cannot be read. */
static inline int mappings_of(const char *file, const void *p) {
  char real[PATH_MAX], line[PATH_MAX + 256];
  FILE *maps;
  int count = 0;
  if (realpath(file, real) == NULL || (maps = fopen("/proc/self/maps", "r")) == NULL) {
    return -1;
  }
  while (fgets(line, sizeof line, maps) != NULL) {
    unsigned long long start, end;
    const char *path = strchr(line, '/');
    size_t n;
    if (path == NULL || sscanf(line, "%llx-%llx", &start, &end) != 2) {
      continue;
    }
    n = strlen(path);
    if (n > 0 && path[n - 1] == '\n') {
      n -= 1;
    }
    if (n != strlen(real) || strncmp(path, real, n) != 0) {
      continue;
    }
    if (p == NULL || ((uintptr_t)p >= start && (uintptr_t)p < end)) {
      count += 1;
    }
  }
  fclose(maps);
  return count;
}

#endif /* ONNXL_TEST_MAPS_H */
