// Walk benchmark of the differential C++ API suite: parses every model listed on the command line
// once, then walks every field of all of them (compat::walk, generated from the schema) N times.
// Built from the same source against protobuf's generated classes and against onnx_light's compat
// header (-DONNXL_SIDE=1).
//
// Usage: walk_bench LIST ROOT N
// The walk mixes in every scalar and the size and first 16 bytes of every string (Digest::light).
// stdout: the digest of the walk (identical on both sides); stderr: ns per model for the parse
// into the same messages again, the parse into new messages (making and freeing them not timed),
// the first walk after a parse, and the walk; each the best of N rounds, in CPU time of this
// thread.
#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "schema_ops.h"

namespace {

double thread_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL_LIST ROOT N\n", argv[0]);
    return 2;
  }
  const int rounds = std::atoi(argv[3]);
  std::istringstream names(compat::read_file(argv[1]));
  std::vector<std::string> files;
  for (std::string name; std::getline(names, name);) {
    if (!name.empty()) files.push_back(compat::read_file(std::string(argv[2]) + "/" + name));
  }
  if (files.empty() || rounds < 1 || compat::failures() != 0) {
    std::fprintf(stderr, "walk_bench: no models or bad N\n");
    return 1;
  }
  // A parse into new messages: what a program that reads each model once pays (the parse below
  // reuses the memory of the previous round's content, as both libraries do).
  double best_fresh = 1e300;
  for (int r = 0; r < rounds; ++r) {
    std::vector<onnx::ModelProto> fresh(files.size());
    const double start = thread_ns();
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (!fresh[i].ParseFromString(files[i])) return 1;
    }
    best_fresh = std::min(best_fresh, thread_ns() - start);
  }
  std::vector<onnx::ModelProto> models(files.size());
  double best_parse = 1e300;
  for (int r = 0; r < rounds; ++r) {
    const double start = thread_ns();
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (!models[i].ParseFromString(files[i])) {
        std::fprintf(stderr, "walk_bench: model %zu does not parse\n", i);
        return 1;
      }
    }
    best_parse = std::min(best_parse, thread_ns() - start);
  }
  // The first walk after a parse is timed apart (best of N rounds, each after a parse of every
  // model): it is what a converter that reads each model once pays (a getter of onnx_light turns
  // a string that is not yet a std::string into one the first time it is read).
  double first_walk = 1e300;
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (!models[i].ParseFromString(files[i])) return 1;
    }
    compat::Digest d;
    d.light = true;
    const double start = thread_ns();
    for (const auto& model : models) compat::walk(model, d);
    first_walk = std::min(first_walk, thread_ns() - start);
  }
  double best_walk = 1e300;
  std::string digest;
  for (int r = 0; r < rounds; ++r) {
    compat::Digest d;
    d.light = true;
    const double start = thread_ns();
    for (const auto& model : models) compat::walk(model, d);
    best_walk = std::min(best_walk, thread_ns() - start);
    digest = d.text() + " visited=" + std::to_string(d.visited);
  }
  compat::out("walk_bench models=%zu digest=%s", models.size(), digest.c_str());
#ifdef ONNXL_SIDE
  const char* side = "onnx_light";
#else
  const char* side = "protobuf";
#endif
  const double n = static_cast<double>(models.size());
  std::fprintf(stderr,
               "walk_bench %s: parse %.0f ns/model, parse into new messages %.0f ns/model, first walk %.0f ns/model, "
               "walk %.0f ns/model (each: best of %d rounds, %zu models)\n",
               side, best_parse / n, best_fresh / n, first_walk / n, best_walk / n, rounds, models.size());
  return 0;
}
