// Harness of the differential C++ API suite (scripts/test.d/50-cpp-compat.sh): the same sources
// are compiled against protobuf's generated onnx.pb.h / onnx-data.pb.h and, with -DONNXL_SIDE=1,
// against onnx_light's compat header; both programs must print byte-identical output.
//
// Nothing printed may depend on the implementation: no addresses (only whether two addresses are
// equal), no capacities, no timings (walk_bench prints its times on stderr).
#ifndef CPP_COMPAT_HARNESS_H
#define CPP_COMPAT_HARNESS_H

#ifdef ONNXL_SIDE
#include <onnx_light/onnx_pb.h>
#else
#include "onnx/onnx-data.pb.h"
#include "onnx/onnx.pb.h"
#endif

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>

namespace compat {

/// Number of failed checks (a check is an expectation that holds for protobuf itself).
inline int& failures() {
  static int count = 0;
  return count;
}

/// Prints one line of the compared output.
inline void out(const char* format, ...) __attribute__((format(printf, 1, 2)));
inline void out(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vfprintf(stdout, format, args);
  va_end(args);
  std::fputc('\n', stdout);
}

/// Records (and prints) a failed expectation.
inline void check(bool ok, const char* what, int line) {
  if (!ok) {
    ++failures();
    out("FAIL line %d: %s", line, what);
  }
}
#define COMPAT_CHECK(cond) ::compat::check(static_cast<bool>(cond), #cond, __LINE__)

/// The bytes of `s` with everything outside printable ASCII written as \xNN.
inline std::string esc(const std::string& s) {
  std::string text;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      text.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      text += buf;
    }
  }
  return text;
}

/// The bytes of `s` in hexadecimal.
inline std::string hex(const std::string& s) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  for (unsigned char c : s) {
    text.push_back(digits[c >> 4]);
    text.push_back(digits[c & 15]);
  }
  return text;
}

/// A 64-bit FNV-1a hash of everything fed to it (field numbers, values, string bytes).
struct Digest {
  std::uint64_t h = 1469598103934665603ULL;
  std::uint64_t visited = 0;
  /// Light mode (walk_bench): a scalar is mixed in as one 64-bit word and a string contributes
  /// its size and at most its first 16 bytes, so that hashing does not hide the accessors' cost.
  bool light = false;

  void bytes(const void* data, std::size_t len) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < len; ++i) {
      h = (h ^ p[i]) * 1099511628211ULL;
    }
  }
  template <class T>
  void val(T v) {
    static_assert(std::is_arithmetic<T>::value || std::is_enum<T>::value, "a scalar");
    ++visited;
    if (light) {
      std::uint64_t word = 0;
      std::memcpy(&word, &v, sizeof v);
      h = (h ^ word) * 1099511628211ULL;
    } else {
      bytes(&v, sizeof v);
    }
  }
  /// A string field read as code does: size(), data(), c_str() (which must be NUL-terminated).
  void str(const std::string& s) {
    ++visited;
    std::uint64_t n = s.size();
    bytes(&n, sizeof n);
    bytes(s.data(), light && s.size() > 16 ? 16 : s.size());
    if (s.c_str()[s.size()] != '\0' || (!light && std::strlen(s.c_str()) > s.size())) {
      ++failures();
      out("FAIL: c_str() of a %zu-byte string is not NUL-terminated", s.size());
    }
  }
  void tag(std::uint32_t field_number) { bytes(&field_number, sizeof field_number); }
  std::string text() const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
  }
};

/// The FNV-1a hash of a byte string, as 16 hex digits.
inline std::string hash(const std::string& s) {
  Digest d;
  d.bytes(s.data(), s.size());
  return d.text();
}

/// A scalar as text (integers in decimal, floats with enough digits to round-trip).
template <class T>
std::string fmt(T v) {
  char buf[64];
  if constexpr (std::is_same<T, bool>::value) {
    std::snprintf(buf, sizeof buf, "%d", v ? 1 : 0);
  } else if constexpr (std::is_enum<T>::value) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  } else if constexpr (std::is_same<T, float>::value) {
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  } else if constexpr (std::is_same<T, double>::value) {
    std::snprintf(buf, sizeof buf, "%.17g", v);
  } else if constexpr (std::is_signed<T>::value) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  } else {
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v));
  }
  return buf;
}

/// The whole content of a file (empty string and a FAIL line when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ++failures();
    out("FAIL: cannot read %s", path.c_str());
    return std::string();
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

/// Generated from the schema (gen_cpp_compat.py): the per-field, per-enum and per-message tests.
void run_generated_tests();

}  // namespace compat

#endif
