/* mappings_of(): how a C test checks that bytes lie inside a file's memory mapping, through
 * /proc/self/maps (Linux) or the process's mapped views (Windows: VirtualQuery and
 * GetMappedFileNameW). The including file defines _DEFAULT_SOURCE (for realpath) before its
 * first #include. */
#ifndef ONNXL_TEST_MAPS_H
#define ONNXL_TEST_MAPS_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#include <psapi.h>
#include <wchar.h>

/* Number of mapped views of `file` in this process (each counted once, by allocation base); with
 * `p` non-NULL, counts only the views that contain `p`; -1 when `file` cannot be resolved.
 * GetMappedFileNameW names a view's file by its device path (\Device\...\dir\file): it is
 * compared with `file`'s full path without its drive, case-insensitively. */
static inline int mappings_of(const char *file, const void *p) {
  wchar_t wide[MAX_PATH], full[MAX_PATH], mapped[MAX_PATH];
  const wchar_t *tail;
  size_t tail_len;
  int count = 0;
  MEMORY_BASIC_INFORMATION info;
  const uint8_t *at = NULL;
  if (MultiByteToWideChar(CP_UTF8, 0, file, -1, wide, MAX_PATH) == 0 ||
      GetFullPathNameW(wide, MAX_PATH, full, NULL) == 0) {
    return -1;
  }
  tail = (full[0] != L'\0' && full[1] == L':') ? full + 2 : full;
  tail_len = wcslen(tail);
  while (VirtualQuery(at, &info, sizeof info) == sizeof info) {
    const uint8_t *base = info.BaseAddress;
    if (info.Type == MEM_MAPPED && info.BaseAddress == info.AllocationBase) {
      DWORD n = GetMappedFileNameW(GetCurrentProcess(), info.BaseAddress, mapped, MAX_PATH);
      if (n >= tail_len && _wcsicmp(mapped + (n - tail_len), tail) == 0) {
        /* The whole view: this region and the following ones of the same allocation. */
        const uint8_t *end = base + info.RegionSize;
        MEMORY_BASIC_INFORMATION next;
        while (VirtualQuery(end, &next, sizeof next) == sizeof next &&
               next.AllocationBase == info.AllocationBase) {
          end += next.RegionSize;
        }
        if (p == NULL || ((const uint8_t *)p >= base && (const uint8_t *)p < end)) {
          count += 1;
        }
      }
    }
    if (base + info.RegionSize <= at) {
      break;
    }
    at = base + info.RegionSize;
  }
  return count;
}
#else
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
#endif

#endif /* ONNXL_TEST_MAPS_H */
