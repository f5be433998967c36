"""The Python package's benchmark: onnx_light side by side with onnx and onnx-ir, in ONE process.

usage: bench.py --models DIR [--runs N] [--out FILE] [--only a,b,c,d]

DIR holds the models that scripts/bench-python.sh generates with bench/'s generators
(`onnx-bench gen`): a.onnx (~0.5 GB, weights inline), b.onnx + b.onnx.data (~3 GB external
data), c.onnx (200 000 nodes); (d) are two small models of the onnx wheel's test data
(light_bvlc_alexnet, 4 KB, and light_resnet50, 80 KB: the fixed cost of a call, each run
timing many calls). Each case runs `--runs` times: "cold" is the first run (files in
the page cache, but the first time this process touches them), "warm" the best of the others.
Peak RSS of a case is measured in the same process: the kernel's high-water mark (VmHWM) is
reset before the case (`/proc/self/clear_refs` = 5) and read after; it is reported above the
RSS the process had before the case. Saves are followed by fsync of every file written (for
every library, onnx_light's own sync included), so all rows write to disk the same way.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import sys
import time

import onnx
import onnx_ir

import onnx_light as ol


def status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def fsync_dir(d: str) -> None:
    for name in os.listdir(d):
        fd = os.open(os.path.join(d, name), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class Case:
    """One measured operation; `setup` runs (untimed) before each run, `teardown` after."""

    def __init__(self, model: str, name: str, lib: str, fn, teardown=None, setup=None, reps=1):
        self.model, self.name, self.lib, self.fn = model, name, lib, fn
        self.teardown, self.setup = teardown, setup
        # Calls per run: a run times `reps` calls, and its times are divided by `reps`.
        self.reps = reps


def measure(case: Case, runs: int) -> dict:
    times = []
    cpus = []
    peak = 0
    for _ in range(runs):
        if case.setup:
            case.setup()
        gc.collect()
        base = status_kb("VmRSS")
        reset_peak()
        c = time.process_time()
        t = time.perf_counter()
        for _ in range(case.reps - 1):
            case.fn()
        r = case.fn()
        dt = (time.perf_counter() - t) / case.reps
        cpus.append((time.process_time() - c) / case.reps)
        peak = max(peak, status_kb("VmHWM") - base)
        times.append(dt)
        del r
        if case.teardown:
            case.teardown()
        gc.collect()
    warm = min(times[1:]) if len(times) > 1 else times[0]
    cpu = min(cpus[1:]) if len(cpus) > 1 else cpus[0]
    return {"cold": times[0], "warm": warm, "cpu": cpu, "peak_mib": peak / 1024}


def fmt_t(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} µs"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--only", default="a,b,c,d")
    args = ap.parse_args()
    only = set(args.only.split(","))
    d = args.models
    scratch = os.path.join(d, "out")
    os.makedirs(scratch, exist_ok=True)

    def fresh(name: str) -> str:
        p = os.path.join(scratch, name)
        shutil.rmtree(p, ignore_errors=True)
        os.makedirs(p)
        return p

    def clean():
        shutil.rmtree(scratch, ignore_errors=True)
        os.makedirs(scratch, exist_ok=True)

    rows = []
    sizes = {}

    def run(cases):
        for c in cases:
            r = measure(c, args.runs)
            rows.append((c, r))
            print(f"{c.model} {c.name:28} {c.lib:24} cold {fmt_t(r['cold']):>9}  warm {fmt_t(r['warm']):>9}  "
                  f"cpu {fmt_t(r['cpu']):>9}  peak +{r['peak_mib']:.0f} MiB", file=sys.stderr, flush=True)

    # Copy loads reuse the memory of dropped models (docs/python.md); the "memory reuse off"
    # rows map fresh memory every time, as a first load in a process does.
    reuse_limit = ol.memory_reuse_limit()

    def reuse_off():
        ol.set_memory_reuse_limit(0)

    def reuse_on():
        ol.set_memory_reuse_limit(reuse_limit)

    def checker_cases(model, m_ol, m_onnx, reps=1):
        """onnx's checker and shape inference: onnx_light's (onnx's C++ code on the model in
        place) against the onnx package's (which serializes the model and parses it again in
        C++ on every call); none when the extension lacks onnx's C++ library."""
        if not ol._native.HAS_ONNX_CXX:
            return []
        from onnx_light import checker as ol_checker
        from onnx_light import shape_inference as ol_shapes

        return [
            Case(model, "check_model", "onnx_light", lambda: ol_checker.check_model(m_ol), reps=reps),
            Case(model, "check_model", "onnx", lambda: onnx.checker.check_model(m_onnx), reps=reps),
            Case(model, "infer_shapes", "onnx_light", lambda: ol_shapes.infer_shapes(m_ol), reps=reps),
            Case(model, "infer_shapes", "onnx", lambda: onnx.shape_inference.infer_shapes(m_onnx), reps=reps),
        ]

    # (a) ~0.5 GB, weights inline
    if "a" in only:
        a = os.path.join(d, "a.onnx")
        sizes["a"] = os.path.getsize(a)
        run([
            Case("a", "load", "onnx_light", lambda: ol.load(a)),
            Case("a", "load", "onnx_light (1 thread)", lambda: ol.load(a, num_threads=1)),
            Case("a", "load", "onnx_light (memory reuse off)", lambda: ol.load(a), setup=reuse_off, teardown=reuse_on),
            Case("a", "load no_copy", "onnx_light", lambda: ol.load(a, no_copy=True)),
            Case("a", "load no_copy", "onnx_light (alignment=1)", lambda: ol.load(a, no_copy=True, alignment=1)),
            Case("a", "load", "onnx", lambda: onnx.load(a)),
            Case("a", "load", "onnx_ir", lambda: onnx_ir.load(a)),
        ])
        m_ol, m_onnx, m_ir = ol.load(a), onnx.load(a), onnx_ir.load(a)

        def save_ol():
            p = fresh("s")
            ol.save(m_ol, os.path.join(p, "m.onnx"))
            fsync_dir(p)

        def save_onnx():
            p = fresh("s")
            onnx.save(m_onnx, os.path.join(p, "m.onnx"))
            fsync_dir(p)

        def save_ir():
            p = fresh("s")
            onnx_ir.save(m_ir, os.path.join(p, "m.onnx"))
            fsync_dir(p)

        run([
            Case("a", "save", "onnx_light", save_ol, clean),
            Case("a", "save", "onnx", save_onnx, clean),
            Case("a", "save", "onnx_ir", save_ir, clean),
        ])
        run(checker_cases("a", m_ol, m_onnx))
        del m_ol, m_onnx, m_ir

    # (b) ~3 GB, external data
    if "b" in only:
        b = os.path.join(d, "b.onnx")
        sizes["b"] = os.path.getsize(b) + os.path.getsize(b + ".data")
        run([
            Case("b", "load", "onnx_light", lambda: ol.load(b)),
            Case("b", "load", "onnx_light (1 thread)", lambda: ol.load(b, num_threads=1)),
            Case("b", "load", "onnx_light (memory reuse off)", lambda: ol.load(b), setup=reuse_off, teardown=reuse_on),
            Case("b", "load no_copy", "onnx_light", lambda: ol.load(b, no_copy=True)),
            Case("b", "load no_copy", "onnx_light (alignment=1)", lambda: ol.load(b, no_copy=True, alignment=1)),
            Case("b", "load", "onnx", lambda: onnx.load(b)),
            Case("b", "load (lazy)", "onnx_ir", lambda: onnx_ir.load(b)),
        ])
        m_ir = onnx_ir.load(b)
        # ol.save, as onnx.save, leaves the saved tensors external in the model it is given, so
        # every run saves a freshly loaded (no-copy) model, loaded before the timer starts.
        held_ol = {}

        def load_ol():
            held_ol.clear()
            gc.collect()
            held_ol["m"] = ol.load(b, no_copy=True)

        def save_ol():
            p = fresh("s")
            ol.save(held_ol["m"], os.path.join(p, "m.onnx"), save_as_external_data=True)
            fsync_dir(p)

        def save_ir():
            p = fresh("s")
            onnx_ir.save(m_ir, os.path.join(p, "m.onnx"), external_data="m.onnx.data")
            fsync_dir(p)

        run([
            Case("b", "save external", "onnx_light", save_ol, clean, setup=load_ol),
            Case("b", "save external", "onnx_ir", save_ir, clean),
        ])
        del m_ir
        held_ol.clear()
        gc.collect()
        # onnx.save(save_as_external_data=True) moves the payloads out of the model it is given,
        # so every run saves a freshly loaded model (loaded before the timer starts).
        held = {}

        def load_onnx():
            held.clear()
            gc.collect()
            held["m"] = onnx.load(b)

        def save_onnx():
            p = fresh("s")
            onnx.save(held["m"], os.path.join(p, "m.onnx"), save_as_external_data=True,
                      location="m.onnx.data")
            fsync_dir(p)

        run([Case("b", "save external", "onnx", save_onnx, clean, setup=load_onnx)])
        held.clear()

    # (c) 200 000 nodes
    if "c" in only:
        c = os.path.join(d, "c.onnx")
        sizes["c"] = os.path.getsize(c)
        run([
            Case("c", "load", "onnx_light", lambda: ol.load(c)),
            Case("c", "load", "onnx", lambda: onnx.load(c)),
            Case("c", "load", "onnx_ir", lambda: onnx_ir.load(c)),
        ])
        m_ol, m_onnx, m_ir = ol.load(c), onnx.load(c), onnx_ir.load(c)

        def walk(g):
            n_in = 0
            for n in g.node:
                n.op_type
                n_in += len(n.input)
            return n_in

        def walk_list(g):
            return sum(len(list(n.input)) for n in g.node if n.op_type)

        def walk_ir(g):
            n_in = 0
            for n in g:
                n.op_type
                n_in += len(n.inputs)
            return n_in

        assert walk(m_ol.graph) == walk(m_onnx.graph)
        run([
            Case("c", "op_type + len(input)", "onnx_light", lambda: walk(m_ol.graph)),
            Case("c", "op_type + len(input)", "onnx", lambda: walk(m_onnx.graph)),
            Case("c", "op_type + len(input)", "onnx_ir", lambda: walk_ir(m_ir.graph)),
            Case("c", "op_type + list(input)", "onnx_light", lambda: walk_list(m_ol.graph)),
            Case("c", "op_type + list(input)", "onnx", lambda: walk_list(m_onnx.graph)),
            Case("c", "SerializeToString", "onnx_light", lambda: m_ol.SerializeToString()),
            Case("c", "SerializeToString", "onnx", lambda: m_onnx.SerializeToString()),
        ])
        del m_ol, m_onnx, m_ir
        # (c) is not a valid model for onnx's checker (its Conv nodes lack weights): the checker
        # rows run on (c2), a valid 200 000-node model of the same depth (a chain of Relu, Add
        # and Mul over [N, 64] tensors, one shape to infer per node), built here.
        n_nodes = max(1000, int(200_000 * min(1.0, float(os.environ.get("BENCH_SCALE", "1")))))
        ops = ("Relu", "Add", "Mul")
        nodes = []
        for i in range(n_nodes):
            op = ops[i % 3]
            ins = [f"t{i}"] if op == "Relu" else [f"t{i}", "x"]
            nodes.append(onnx.helper.make_node(op, ins, [f"t{i + 1}"], name=f"/chain/{op}_{i}"))
        x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 64])
        g = onnx.helper.make_graph(
            nodes, "chain", [onnx.helper.make_tensor_value_info("t0", onnx.TensorProto.FLOAT, ["N", 64]), x],
            [onnx.helper.make_tensor_value_info(f"t{n_nodes}", onnx.TensorProto.FLOAT, ["N", 64])])
        chain = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 18)]).SerializeToString()
        sizes["c2"] = len(chain)
        run(checker_cases("c2", ol.load_from_string(chain), onnx.load_from_string(chain)))
    # (d) small models (the onnx wheel's test data): the fixed cost of a call
    if "d" in only:
        light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
        for name in ("light_bvlc_alexnet", "light_resnet50"):
            path = os.path.join(light, name + ".onnx")
            data = open(path, "rb").read()
            key = f"d:{name[6:]}"
            sizes[key] = len(data)
            m_ol, m_onnx = ol.load_from_string(data), onnx.load_from_string(data)
            reps = max(20, 2_000_000 // len(data))
            run([
                Case(key, "load_from_string", "onnx_light", lambda: ol.load_from_string(data), reps=reps),
                Case(key, "load_from_string", "onnx", lambda: onnx.load_from_string(data), reps=reps),
                Case(key, "ParseFromString", "onnx_light", lambda: ol.ModelProto().ParseFromString(data), reps=reps),
                Case(key, "ParseFromString", "onnx", lambda: onnx.ModelProto().ParseFromString(data), reps=reps),
                Case(key, "load (path)", "onnx_light", lambda: ol.load(path), reps=reps),
                Case(key, "load (path)", "onnx", lambda: onnx.load(path), reps=reps),
                Case(key, "SerializeToString", "onnx_light", m_ol.SerializeToString, reps=reps),
                Case(key, "SerializeToString", "onnx", m_onnx.SerializeToString, reps=reps),
            ])
            run(checker_cases(key, m_ol, m_onnx, reps=max(5, reps // 20)))
            del m_ol, m_onnx
    shutil.rmtree(scratch, ignore_errors=True)

    # Report.
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}; onnx {onnx.__version__}, onnx_ir {onnx_ir.__version__}, "
        f"protobuf {__import__('google.protobuf').protobuf.__version__}; runs per case: {args.runs}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        f"Load average at the end: {os.getloadavg()[0]:.1f} (cold = first run; warm = best wall time of the "
        "others; CPU = best CPU time of the process (all threads) of the others).",
        "",
        "| model | case | library | cold | warm | CPU | peak RSS above start |",
        "|---|---|---|---|---|---|---|",
    ]
    def size(model):
        n = sizes.get(model, 0)
        return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"

    for c, r in rows:
        lines.append(f"| {c.model} ({size(c.model)}) | {c.name} | {c.lib} | "
                     f"{fmt_t(r['cold'])} | {fmt_t(r['warm'])} | {fmt_t(r['cpu'])} | {r['peak_mib']:.0f} MiB |")
    by = {(c.model, c.name, c.lib): r for c, r in rows}

    def ratio(model, case_a, lib_a, case_b, lib_b, key="warm"):
        a, b = by.get((model, case_a, lib_a)), by.get((model, case_b, lib_b))
        return None if not a or not b or not a[key] else b[key] / a[key]

    lines += ["", "Targets (warm wall times, and CPU times; > 1× means onnx_light is faster):"]
    for model in ("a", "b"):
        for label, args_ in [
            ("load vs onnx.load (≥ 10×)", (model, "load", "onnx_light", "load", "onnx")),
            ("save vs onnx.save (≥ 5×)", (model, "save" if model == "a" else "save external", "onnx_light",
                                           "save" if model == "a" else "save external", "onnx")),
            ("load no_copy vs onnx_ir.load (> 1×)", (model, "load no_copy", "onnx_light",
                                                      "load (lazy)" if model == "b" else "load", "onnx_ir")),
        ]:
            r = ratio(*args_)
            rc = ratio(*args_, key="cpu")
            if r is not None:
                lines.append(f"- ({model}) {label}: {r:.1f}× (CPU time: {rc:.1f}×)")
        r = by.get((model, "load", "onnx_light"))
        if r and model in sizes:
            lines.append(f"- ({model}) peak RSS of load / file size (≤ 1.05): {r['peak_mib'] * 2**20 / sizes[model]:.3f}")
        for lib in ("onnx_light", "onnx_light (alignment=1)"):
            r = by.get((model, "load no_copy", lib))
            if r:
                lines.append(f"- ({model}) peak RSS of load no_copy, {lib}: {r['peak_mib']:.1f} MiB")
        r = ratio(model, "load no_copy", "onnx_light (alignment=1)",
                  "load (lazy)" if model == "b" else "load", "onnx_ir")
        if r is not None:
            lines.append(f"- ({model}) load no_copy with alignment=1 vs onnx_ir.load (> 1×): {r:.1f}×")
        r = ratio(model, "load", "onnx_light (memory reuse off)", "load", "onnx")
        rc = ratio(model, "load", "onnx_light (memory reuse off)", "load", "onnx", key="cpu")
        if r is not None:
            lines.append(f"- ({model}) load with memory reuse off vs onnx.load: {r:.1f}× (CPU time: {rc:.1f}×)")
        r = ratio(model, "load", "onnx_light (1 thread)", "load", "onnx")
        rc = ratio(model, "load", "onnx_light (1 thread)", "load", "onnx", key="cpu")
        if r is not None:
            lines.append(f"- ({model}) load with 1 thread vs onnx.load: {r:.1f}× (CPU time: {rc:.1f}×)")
    r = ratio("c", "op_type + len(input)", "onnx_light", "op_type + len(input)", "onnx")
    rc = ratio("c", "op_type + len(input)", "onnx_light", "op_type + len(input)", "onnx", key="cpu")
    if r is not None:
        lines.append(f"- (c) reading op_type and input of every node vs onnx (≥ 1×): {r:.2f}× (CPU time: {rc:.2f}×)")
    for model in [k for k in sizes if k.startswith("d:")]:
        for case in ("load_from_string", "ParseFromString", "load (path)", "SerializeToString"):
            r = ratio(model, case, "onnx_light", case, "onnx")
            rc = ratio(model, case, "onnx_light", case, "onnx", key="cpu")
            if r is not None:
                lines.append(f"- ({model}, {size(model)}) {case} per call vs onnx: {r:.2f}× (CPU time: {rc:.2f}×)")
    for model in sizes:
        for case in ("check_model", "infer_shapes"):
            r = ratio(model, case, "onnx_light", case, "onnx")
            rc = ratio(model, case, "onnx_light", case, "onnx", key="cpu")
            if r is not None:
                lines.append(f"- ({model}, {size(model)}) {case} vs onnx (> 1×): {r:.2f}× (CPU time: {rc:.2f}×)")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
