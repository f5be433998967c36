"""Why the package uses PyO3 rather than cffi over the C ABI: reads op_type and every input name
of every node of a model both ways, in one process.

usage: ffi_choice.py MODEL LIBONNX_LIGHT_SO

The cffi side is the thinnest layer possible (ABI mode, no Python object per node: two C calls
and one string decode per value); a package built that way would add a wrapper object per
message on top. The PyO3 side is the package as shipped.
"""

import sys
import time

import cffi

import onnx_light as ol

CDEF = """
typedef struct OnnxlModelProto OnnxlModelProto;
typedef struct OnnxlGraphProto OnnxlGraphProto;
typedef struct OnnxlNodeProto OnnxlNodeProto;
typedef struct OnnxlStr { const char *data; size_t len; } OnnxlStr;
typedef int OnnxlStatus;
OnnxlStatus onnxl_load_model(const char *path, const void *opts, OnnxlModelProto **out);
void onnxl_model_proto_free(OnnxlModelProto *m);
const OnnxlGraphProto *onnxl_model_proto_graph(const OnnxlModelProto *m);
size_t onnxl_graph_proto_node_size(const OnnxlGraphProto *m);
const OnnxlNodeProto *onnxl_graph_proto_node(const OnnxlGraphProto *m, size_t i);
OnnxlStr onnxl_node_proto_op_type(const OnnxlNodeProto *m);
size_t onnxl_node_proto_input_size(const OnnxlNodeProto *m);
OnnxlStr onnxl_node_proto_input(const OnnxlNodeProto *m, size_t i);
"""


def best(f, n=5):
    t = []
    for _ in range(n):
        s = time.perf_counter()
        r = f()
        t.append(time.perf_counter() - s)
    return min(t), r


def main():
    path, so = sys.argv[1], sys.argv[2]
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    lib = ffi.dlopen(so)
    out = ffi.new("OnnxlModelProto **")
    assert lib.onnxl_load_model(path.encode(), ffi.NULL, out) == 0
    g = lib.onnxl_model_proto_graph(out[0])

    def via_cffi():
        names = 0
        for i in range(lib.onnxl_graph_proto_node_size(g)):
            n = lib.onnxl_graph_proto_node(g, i)
            s = lib.onnxl_node_proto_op_type(n)
            ffi.unpack(s.data, s.len).decode()
            for j in range(lib.onnxl_node_proto_input_size(n)):
                s = lib.onnxl_node_proto_input(n, j)
                ffi.unpack(s.data, s.len).decode()
                names += 1
        return names

    m = ol.load(path)

    def via_pyo3():
        names = 0
        for n in m.graph.node:
            n.op_type
            names += len(list(n.input))
        return names

    t_c, n_c = best(via_cffi)
    t_p, n_p = best(via_pyo3)
    assert n_c == n_p
    print(f"nodes: {len(m.graph.node)}, input names: {n_p}")
    print(f"cffi over the C ABI: {t_c * 1e3:.1f} ms")
    print(f"PyO3 views:          {t_p * 1e3:.1f} ms ({t_c / t_p:.2f}x faster)")
    lib.onnxl_model_proto_free(out[0])


if __name__ == "__main__":
    main()
