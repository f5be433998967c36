"""One measured case of onnx-ir (the `onnx_ir` package: a lazy in-memory IR for ONNX), run in a
fresh process by onnx-bench so that its peak RSS (VmHWM) is its own. Used for model (b) only.

usage: onnx_ir_case.py OP MODEL OUT ITERS
  load_nocopy  `onnx_ir.load(path)`: the .onnx is parsed, external tensors stay lazy (memory
               mapped when first read); nothing of the weights is read
  save         `onnx_ir.load` then `onnx_ir.save(model, <fresh dir>/model.onnx,
               external_data="model.onnx.data")` (one weight file), then fsync of both files
  save_nosync  the same without fsync
prints: RESULT time_ns=<best wall time> first_ns=<first repetition> cpu_ns=<best CPU time>
        hwm_kb=<peak RSS> base_kb=<RSS before the first timed run>
"""

import gc
import os
import shutil
import sys
import time

import onnx_ir as ir


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


def main():
    op, model_path, out, iters = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    print(f"onnx_ir {ir.__version__}", file=sys.stderr)
    dirs = []

    if op == "load_nocopy":
        def run():
            return ir.load(model_path)
    elif op in ("save", "save_nosync"):
        model = ir.load(model_path)
        sync = op == "save"

        def run():
            d = f"{out}.ir{len(dirs)}"
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            dirs.append(d)
            path = os.path.join(d, "model.onnx")
            ir.save(model, path, external_data="model.onnx.data")
            if sync:
                for name in os.listdir(d):
                    fsync_path(os.path.join(d, name))
    else:
        print(f"unknown op {op}", file=sys.stderr)
        sys.exit(2)

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
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    print(f"RESULT time_ns={best} first_ns={first} cpu_ns={cpu} hwm_kb={hwm} base_kb={base}",
          flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
