// Parse benchmark of the C++ drop-in: protobuf's parse entry points on whole model files, built
// from the same source against protobuf's generated onnx.pb.h and against onnx_light's header
// (-DONNXL_SIDE=1).
//
// Usage: parse_bench N FILE...
// For each file and each entry point (ParseFromIstream on a std::ifstream opened for the call,
// ParseFromString, ParseFromArray, ParseFromCodedStream over an ArrayInputStream with the total
// bytes limit raised), a parse into a new ModelProto is timed in wall time, the message's
// construction and destruction not included: "cold" is the entry point's first parse in the
// process (the file in the page cache, the heap not yet grown), "warm" the best of the N - 1
// parses after it. stdout: one line per file and entry point:
//   FILE ENTRY cold_us warm_us bytesize
// (bytesize, the parsed model's ByteSizeLong, is the same on both sides).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include "harness.h"
#ifndef ONNXL_SIDE
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#endif

namespace {

double now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s N FILE...\n", argv[0]);
    return 2;
  }
  const int rounds = std::atoi(argv[1]);
  if (rounds < 2) {
    std::fprintf(stderr, "parse_bench: N must be at least 2\n");
    return 2;
  }
  for (int f = 2; f < argc; ++f) {
    const std::string path = argv[f];
    const std::string bytes = compat::read_file(path);
    using Entry = std::function<bool(onnx::ModelProto&)>;
    const std::pair<const char*, Entry> entries[] = {
        {"ParseFromIstream",
         [&](onnx::ModelProto& m) {
           std::ifstream in(path, std::ios::binary);
           return m.ParseFromIstream(&in);
         }},
        {"ParseFromString", [&](onnx::ModelProto& m) { return m.ParseFromString(bytes); }},
        {"ParseFromArray",
         [&](onnx::ModelProto& m) { return m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())); }},
        {"ParseFromCodedStream",
         [&](onnx::ModelProto& m) {
           google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
           google::protobuf::io::CodedInputStream coded(&raw);
           coded.SetTotalBytesLimit(INT32_MAX);
           return m.ParseFromCodedStream(&coded);
         }},
    };
    for (const auto& [name, parse] : entries) {
      double cold = 0, warm = 1e300;
      std::size_t size = 0;
      for (int r = 0; r < rounds; ++r) {
        auto m = std::make_unique<onnx::ModelProto>();
        const double start = now_us();
        if (!parse(*m)) {
          std::fprintf(stderr, "parse_bench: %s failed on %s\n", name, path.c_str());
          return 1;
        }
        const double t = now_us() - start;
        size = m->ByteSizeLong();
        if (r == 0) {
          cold = t;
        } else {
          warm = std::min(warm, t);
        }
      }
      std::printf("%s %s %.1f %.1f %zu\n", path.c_str(), name, cold, warm, size);
    }
  }
  return 0;
}
