#!/usr/bin/env bash
# DLPack and parameter dictionaries through the C ABI (run by scripts/test-all.sh):
# - c_tests/dlpack_test.c, built with gcc -Wall -Wextra -Wpedantic -Werror against
#   target/release/libonnx_light.so, in three variants: the DLPack declarations of onnx_light.h
#   alone, a dlpack.h included before onnx_light.h (onnx_light.h's are skipped), and one included
#   after it (adds nothing: no redefinitions); each runs under Valgrind (required), which fails on
#   any leak or invalid access, so every export and import is freed exactly once;
# - the header compiles as C++17 with a dlpack.h included first and after.
# The "dlpack.h" used is the standard v1.1 declarations (dmlc/dlpack include/dlpack/dlpack.h,
# Apache-2.0), written below, with its include guard DLPACK_DLPACK_H_.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CC=${CC:-gcc}
CXX=${CXX:-g++}
WARN=(-Wall -Wextra -Wpedantic -Werror)

command -v valgrind >/dev/null 2>&1 || { echo "30-dlpack: valgrind is required (apt-get install valgrind)" >&2; exit 1; }
cargo build --release -p onnx_light --lib
LIB="$ROOT/target/release/libonnx_light.so"
[ -f "$LIB" ] || { echo "30-dlpack: missing $LIB" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The library's SONAME is what the programs ask the loader for.
ln -s "$LIB" "$work/$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"

cat > "$work/dlpack_h_copy.h" <<'C'
/* The declarations of dlpack.h v1.1 (https://github.com/dmlc/dlpack), as the real header has
 * them, with its include guard. */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_
#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1
#define DLPACK_DLL
#include <stdint.h>
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
} DLDeviceType;
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U,
} DLDataTypeCode;
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void * manager_ctx;
  void (*deleter)(struct DLManagedTensor * self);
} DLManagedTensor;
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#ifdef __cplusplus
}  // DLPACK_EXTERN_C
#endif
#endif  // DLPACK_DLPACK_H_
C

for variant in own DLPACK_H_FIRST DLPACK_H_AFTER; do
  defs=()
  [ "$variant" = own ] || defs=(-D"$variant")
  echo "dlpack_test ($variant)"
  "$CC" -std=c11 "${WARN[@]}" -g "${defs[@]}" -Iinclude -I"$work" c_tests/dlpack_test.c \
    -L"$ROOT/target/release" -lonnx_light -Wl,-rpath,"$work" -o "$work/dlpack_test_$variant"
  valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect \
    --show-leak-kinds=definite,indirect "$work/dlpack_test_$variant" "$work"
done

echo "onnx_light.h with dlpack.h as C++17"
for order in first after; do
  if [ $order = first ]; then
    printf '#include "dlpack_h_copy.h"\n#include "onnx_light.h"\n' > "$work/both.cpp"
  else
    printf '#include "onnx_light.h"\n#include "dlpack_h_copy.h"\n' > "$work/both.cpp"
  fi
  cat >> "$work/both.cpp" <<'C'
static_assert(sizeof(DLTensor) == 48 || sizeof(void *) != 8, "DLTensor layout");
int use(DLManagedTensorVersioned **out);
int use(DLManagedTensorVersioned **out) {
  return (int)onnxl_tensor_proto_to_dlpack_versioned(nullptr, ONNXL_DLPACK_COPY_IF_NEEDED, out) + kDLCPU;
}
C
  "$CXX" -std=c++17 "${WARN[@]}" -Iinclude -I"$work" -c "$work/both.cpp" -o "$work/both_$order.o"
done
echo "30-dlpack: ok"
