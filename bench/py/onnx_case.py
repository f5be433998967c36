"""One measured case of the onnx Python package (protobuf's upb backend), run in a fresh process
by onnx-bench so that its peak RSS (VmHWM) is its own.

usage: onnx_case.py OP MODEL OUT ITERS
prints: RESULT time_ns=<best wall time> first_ns=<first repetition> cpu_ns=<best CPU time>
        hwm_kb=<peak RSS> base_kb=<RSS before the first timed run>
"""

import gc
import os
import sys
import time

import onnx
from google.protobuf.internal import api_implementation


def status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def has_external_data(model):
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def populate_code():
    """Faults in every executable file mapping of the process (the interpreter's and the
    extensions' code), as the Rust cases do for the in-memory parse and serialize
    (`populate_code` in ../src/cases.rs): the RSS a measured repetition adds is then the memory
    it allocates, not code run for the first time."""
    import ctypes

    libc = ctypes.CDLL(None)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madv_populate_read = 22  # Linux 5.14+; an error leaves the pages as they were
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 6 or "x" not in parts[1] or not parts[5].startswith("/"):
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            libc.madvise(start, end - start, madv_populate_read)


def main():
    op, model_path, out, iters = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    print(f"protobuf backend: {api_implementation.Type()}, onnx {onnx.__version__}", file=sys.stderr)
    outputs = [out]

    if op == "load_copy":  # onnx.load reads the file (and any external data) and parses it
        def run():
            return onnx.load(model_path)
    elif op == "load_meta":  # the .onnx file only, external data left on disk
        def run():
            return onnx.load(model_path, load_external_data=False)
    elif op == "parse_mem":
        data = open(model_path, "rb").read()

        def run():
            return onnx.load_model_from_string(data)
    elif op == "serialize_mem":
        model = onnx.load(model_path)

        def run():
            return model.SerializeToString()
    elif op == "save":
        model = onnx.load(model_path)
        external = has_external_data(onnx.load(model_path, load_external_data=False))
        location = os.path.basename(out) + ".data"
        if external:
            outputs.append(os.path.join(os.path.dirname(out), location))
            # save_model(save_as_external_data=True) moves the bytes out of `model` in place, so
            # only the first save is a real one.
            iters = 1

        def run():
            for p in outputs:
                if os.path.exists(p):
                    os.remove(p)
            if external:
                # Writes every tensor's bytes into one data file next to `out`.
                onnx.save_model(model, out, save_as_external_data=True,
                                all_tensors_to_one_file=True, location=location,
                                size_threshold=1024)
            else:
                onnx.save_model(model, out)
            for p in outputs:
                fsync_path(p)
    else:
        print(f"unknown op {op}", file=sys.stderr)
        sys.exit(2)

    if op in ("parse_mem", "serialize_mem"):
        populate_code()
    gc.collect()
    base = status_kb("VmRSS")
    best = first = cpu = None
    # The peak RSS: the high-water mark, or the RSS read right after a repetition (its result
    # still alive) when that is higher. The kernel records the high-water mark lazily, from
    # batched per-CPU counters, when the RSS is about to fall; the arena of a parsed model freed
    # by `del r` can leave it below the RSS the process had (see `peak_kb` in ../src/cases.rs).
    after = 0
    for _ in range(iters):
        c = time.process_time_ns()
        t = time.perf_counter_ns()
        r = run()
        ns = time.perf_counter_ns() - t
        c = time.process_time_ns() - c
        cpu = c if cpu is None else min(cpu, c)
        best = ns if best is None else min(best, ns)
        first = ns if first is None else first
        after = max(after, status_kb("VmRSS"))
        del r
    hwm = max(status_kb("VmHWM"), after)
    for p in outputs:
        if os.path.exists(p):
            os.remove(p)
    print(f"RESULT time_ns={best} first_ns={first} cpu_ns={cpu} hwm_kb={hwm} base_kb={base}",
          flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
