// Differential C++ suite, thread and lifetime part (scripts/test.d/50-cpp-compat.sh): protobuf's
// contract for const member functions, checked on every model listed on the command line.
//
// 1. Concurrent const calls: while one thread serializes a const message (ByteSizeLong,
//    SerializeAsString, DebugString), another walks every field of it through the getters; both
//    must see exactly what a single thread sees. Built with ThreadSanitizer on both sides.
// 2. A read never invalidates an earlier pointer: a view of a tensor's bytes and of a node's name
//    taken before the first `raw_data()` / `name()` call still reads the same bytes after it.
//    Built with AddressSanitizer on both sides (run under it: a dangling view is a report).
//
// The messages come from a copy (`const onnx::ModelProto s(src)`) and, on the onnx_light side,
// also from the library's loaders in copy and no-copy mode (strings and payloads in the load's
// memory or the file mapping); the protobuf side parses the same file instead, so the printed
// lines are the same. Usage: thread_tests LIST ROOT [ROUNDS]; exits 1 when a check failed.
#include <string_view>
#include <thread>
#include <vector>

#include "schema_ops.h"

using compat::hash;
using compat::out;

namespace {

#ifdef ONNXL_SIDE
/// The library's view of a tensor's bytes (no std::string made).
std::string_view bytes_view(const onnx::TensorProto& t) { return t.raw_data_view(); }
/// The C API's pointer to a node's name (no std::string made).
std::string_view name_view(const onnx::NodeProto& n) {
  OnnxlStr s = onnxl_node_proto_name(n.c_ptr());
  return std::string_view(s.data, s.len);
}
/// The model at `path` as the library's loader gives it (`no_copy`: borrowed from the mapping).
onnx::ModelProto load(const std::string& path, bool no_copy) {
  onnx_light::ParseOptions options;
  options.no_copy = no_copy ? 1 : 0;
  // One thread: the load's own workers synchronize through the library's atomics, which
  // ThreadSanitizer does not see in an uninstrumented library.
  options.num_threads = 1;
  return onnx_light::LoadModel(path, options);
}
#else
std::string_view bytes_view(const onnx::TensorProto& t) { return t.raw_data(); }
std::string_view name_view(const onnx::NodeProto& n) { return n.name(); }
onnx::ModelProto load(const std::string& path, bool) {
  onnx::ModelProto m;
  std::ifstream in(path, std::ios::binary);
  COMPAT_CHECK(m.ParseFromIstream(&in));
  return m;
}
#endif

/// One thread serializes `s` `rounds` times while this one walks it `rounds` times; returns
/// false when a round saw something else than the single-threaded reference.
bool concurrent_const(const onnx::ModelProto& s, const std::string& bytes, const std::string& text,
                      uint64_t digest, int rounds) {
  bool serializer_ok = true;
  std::thread serializer([&] {
    for (int i = 0; i < rounds; ++i) {
      serializer_ok = serializer_ok && s.ByteSizeLong() == bytes.size();
      serializer_ok = serializer_ok && s.SerializeAsString() == bytes;
      serializer_ok = serializer_ok && s.DebugString() == text;
    }
  });
  bool walker_ok = true;
  for (int i = 0; i < rounds; ++i) {
    compat::Digest d;
    compat::walk(s, d);
    walker_ok = walker_ok && d.h == digest;
  }
  serializer.join();
  return serializer_ok && walker_ok;
}

/// Views of every initializer's bytes and every node's name, taken before the getters are first
/// called, then the getters, then the views read again; the hash of all bytes seen.
std::string views_then_getters(const onnx::ModelProto& m, bool* same) {
  const onnx::GraphProto& g = m.graph();
  std::vector<std::string_view> tensor_views;
  std::vector<std::string_view> name_views;
  for (const onnx::TensorProto& t : g.initializer()) tensor_views.push_back(bytes_view(t));
  for (const onnx::NodeProto& n : g.node()) name_views.push_back(name_view(n));
  std::string seen;
  *same = true;
  for (int i = 0; i < g.initializer_size(); ++i) {
    const std::string& r = g.initializer(i).raw_data();
    *same = *same && std::string_view(r) == tensor_views[i];
    seen.append(tensor_views[i]);
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const std::string& r = g.node(i).name();
    *same = *same && std::string_view(r) == name_views[i];
    seen.append(name_views[i]);
    seen.push_back('\0');
  }
  return hash(seen);
}

void run(const std::string& list, const std::string& root, int rounds) {
  std::istringstream names(compat::read_file(list));
  std::string name;
  int count = 0;
  while (std::getline(names, name)) {
    if (name.empty()) continue;
    const std::string path = root + "/" + name;
    const std::string file = compat::read_file(path);
    onnx::ModelProto src;
    if (!src.ParseFromString(file)) {
      ++compat::failures();
      out("FAIL: %s does not parse", name.c_str());
      continue;
    }
    const std::string bytes = src.SerializeAsString();
    const std::string text = src.DebugString();
    compat::Digest reference;
    compat::walk(static_cast<const onnx::ModelProto&>(src), reference);

    const onnx::ModelProto copy(src);
    const onnx::ModelProto loaded = load(path, false);
    const onnx::ModelProto mapped = load(path, true);
    const bool threads = concurrent_const(copy, bytes, text, reference.h, rounds) &&
                         concurrent_const(loaded, bytes, text, reference.h, rounds) &&
                         concurrent_const(mapped, bytes, text, reference.h, rounds);
    COMPAT_CHECK(threads);

    const onnx::ModelProto copy2(src);
    const onnx::ModelProto loaded2 = load(path, false);
    const onnx::ModelProto mapped2 = load(path, true);
    bool same[3];
    const std::string seen[3] = {views_then_getters(copy2, &same[0]), views_then_getters(loaded2, &same[1]),
                                 views_then_getters(mapped2, &same[2])};
    COMPAT_CHECK(same[0] && same[1] && same[2]);
    COMPAT_CHECK(seen[0] == seen[1] && seen[1] == seen[2]);
    out("model %s threads=%d views=%d seen=%s", name.c_str(), static_cast<int>(threads),
        static_cast<int>(same[0] && same[1] && same[2]), seen[0].c_str());
    ++count;
  }
  out("models checked: %d", count);
  COMPAT_CHECK(count > 100);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL_LIST ROOT [ROUNDS]\n", argv[0]);
    return 2;
  }
  run(argv[1], argv[2], argc == 4 ? std::atoi(argv[3]) : 2);
  out("== failures: %d", compat::failures());
  return compat::failures() == 0 ? 0 : 1;
}
