#pragma once
// onnx_light stand-in for <google/protobuf/io/zero_copy_stream_impl_lite.h> (opt-in: -I include/onnx_light/protobuf_compat; see docs/cpp.md).
#include <onnx_light/onnx_pb.h>
