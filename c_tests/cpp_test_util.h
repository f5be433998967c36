// Helpers of the C++ tests (cpp_wrapper_roundtrip.cpp, cpp_api_test.cpp): a CHECK that counts
// failures, the status of an onnx_light::Error, whole-file reads.
#ifndef ONNXL_CPP_TEST_UTIL_H
#define ONNXL_CPP_TEST_UTIL_H

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "onnx_light.hpp"

static int failures = 0;
#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                                   \
    }                                                                               \
  } while (0)

// The status of the onnx_light::Error `f` throws (ONNXL_STATUS_OK when it throws nothing).
template <class F>
static OnnxlStatus status_of(F&& f) {
  try {
    f();
  } catch (const onnx_light::Error& e) {
    return e.status();
  }
  return ONNXL_STATUS_OK;
}

static inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

#endif  // ONNXL_CPP_TEST_UTIL_H
