#!/usr/bin/env bash
# C ABI checks (run by scripts/test-all.sh):
# - include/onnx_light.h compiles standalone as C99, C11 and C++17, include/onnx_light.hpp as
#   C++17 and C++20 (and include/onnx_light/onnx_pb.h), all with -Wall -Wextra -Wpedantic -Werror
#   (-Wshadow for the C++ headers); C++14 is refused with a clear message;
# - the C++ wrapper test (c_tests/cpp_wrapper_roundtrip.cpp) builds against
#   target/release/libonnx_light.so and round-trips samples/mlp.onnx under Valgrind (required:
#   a missing valgrind is a failure);
# - the shared library exports only onnxl_* symbols;
# - every handle type (opaque typedef) and callback type of the header states its thread safety
#   (a `Thread safety` line in its doc comment; tests/integration/generated_files.rs checks the
#   same).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CC=${CC:-gcc}
CXX=${CXX:-g++}
WARN=(-Wall -Wextra -Wpedantic -Werror)

cargo build --release -p onnx_light --lib
LIB="$ROOT/target/release/libonnx_light.so"
[ -f "$LIB" ] || { echo "missing $LIB" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A translation unit that includes the header alone and touches a few of its declarations.
cat > "$work/header.c" <<'C'
#include "onnx_light.h"
int header_check(void);
int header_check(void) {
  OnnxlParseOptions p = onnxl_parse_options_default();
  OnnxlSerializeOptions s = onnxl_serialize_options_default();
  OnnxlModelProto *m = NULL;
  OnnxlStatus st = onnxl_load_model("x.onnx", &p, &m);
  OnnxlStr name = onnxl_model_proto_producer_name(m);
  (void)s;
  return (int)st + (int)name.len + ONNXL_TENSOR_PROTO_DATA_TYPE_FLOAT + (int)ONNXL_TYPE_PROTO_VALUE_CASE_NOT_SET;
}
C
for std in c99 c11; do
  echo "onnx_light.h as $std"
  "$CC" -std="$std" "${WARN[@]}" -Iinclude -c "$work/header.c" -o "$work/header_$std.o"
done
cp "$work/header.c" "$work/header_c.cpp"
echo "onnx_light.h as c++17"
"$CXX" -std=c++17 "${WARN[@]}" -Iinclude -c "$work/header_c.cpp" -o "$work/header_cpp.o"

printf '#include "onnx_light.hpp"\n' > "$work/wrapper.cpp"
printf '#include <onnx_light/onnx_pb.h>\nint use(const onnx::ModelProto& m) { return m.graph().node_size() + onnx::TensorProto::FLOAT; }\n' > "$work/compat.cpp"
for std in c++17 c++20; do
  echo "onnx_light.hpp and onnx_light/onnx_pb.h as $std (-Wshadow too)"
  "$CXX" -std="$std" "${WARN[@]}" -Wshadow -Iinclude -c "$work/wrapper.cpp" -o "$work/wrapper_$std.o"
  "$CXX" -std="$std" "${WARN[@]}" -Wshadow -Iinclude -c "$work/compat.cpp" -o "$work/compat_$std.o"
done
echo "onnx_light.hpp refuses C++14 with a clear message"
if "$CXX" -std=c++14 -Iinclude -c "$work/wrapper.cpp" -o "$work/wrapper_14.o" 2> "$work/cxx14.err"; then
  echo "onnx_light.hpp compiled as C++14" >&2
  exit 1
fi
grep -q "needs C++17" "$work/cxx14.err" || { cat "$work/cxx14.err" >&2; exit 1; }

echo "C++ wrapper round trip"
"$CXX" -std=c++17 "${WARN[@]}" -Iinclude c_tests/cpp_wrapper_roundtrip.cpp \
  -L"$ROOT/target/release" -lonnx_light -Wl,-rpath,"$work" -o "$work/cpp_wrapper_roundtrip"
# The library's SONAME (libonnx_light.so.0.2) is what the program asks the loader for.
ln -s "$LIB" "$work/$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
command -v valgrind >/dev/null 2>&1 || { echo "valgrind is required (apt-get install valgrind)" >&2; exit 1; }
valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect \
  --show-leak-kinds=definite,indirect "$work/cpp_wrapper_roundtrip" samples/mlp.onnx "$work"

echo "thread-safety statements"
missing=$(awk '
  /\/\*\*/ { doc = ""; indoc = 1 }
  indoc { doc = doc $0 }
  /\*\// { indoc = 0; last = doc; lastline = NR }
  /^typedef struct Onnxl[A-Za-z]* Onnxl[A-Za-z]*;$/ || /^typedef .*\(\*Onnxl[A-Za-z]*\)/ {
    total++
    if (lastline != NR - 1 || last !~ /Thread safety/) print $0
  }
  END { if (total < 38) print "only " total " handle and callback types found" }
' include/onnx_light.h)
if [ -n "$missing" ]; then
  echo "no 'Thread safety' statement in the doc comment of:" >&2
  echo "$missing" >&2
  exit 1
fi

echo "exported symbols"
symbols=$(nm -D --defined-only "$LIB" | awk 'NF >= 3 {print $NF}')
foreign=$(grep -v '^onnxl_' <<<"$symbols" || true)
if [ -n "$foreign" ]; then
  echo "libonnx_light.so exports symbols other than onnxl_*:" >&2
  echo "$foreign" | head -20 >&2
  exit 1
fi
count=$(grep -c '^onnxl_' <<<"$symbols" || true)
if [ "$count" -lt 1000 ]; then
  echo "libonnx_light.so exports only $count onnxl_* symbols" >&2
  exit 1
fi
echo "ok: $count onnxl_* symbols, nothing else"
