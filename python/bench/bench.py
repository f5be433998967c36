"""The Python package's benchmark: onnx_light side by side with onnx and onnx-ir, in ONE process.

usage: bench.py --models DIR [--runs N] [--out FILE] [--only a,b,c]

DIR holds the models that scripts/bench-python.sh generates with bench/'s generators
(`onnx-bench gen`): a.onnx (~0.5 GB, weights inline), b.onnx + b.onnx.data (~3 GB external
data), c.onnx (200 000 nodes). Each case runs `--runs` times: "cold" is the first run (files in
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

    def __init__(self, model: str, name: str, lib: str, fn, teardown=None, setup=None):
        self.model, self.name, self.lib, self.fn = model, name, lib, fn
        self.teardown, self.setup = teardown, setup


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
        r = case.fn()
        dt = time.perf_counter() - t
        cpus.append(time.process_time() - c)
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
    ap.add_argument("--only", default="a,b,c")
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

    # (a) ~0.5 GB, weights inline
    if "a" in only:
        a = os.path.join(d, "a.onnx")
        sizes["a"] = os.path.getsize(a)
        run([
            Case("a", "load", "onnx_light", lambda: ol.load(a)),
            Case("a", "load", "onnx_light (1 thread)", lambda: ol.load(a, num_threads=1)),
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
        del m_ol, m_onnx, m_ir

    # (b) ~3 GB, external data
    if "b" in only:
        b = os.path.join(d, "b.onnx")
        sizes["b"] = os.path.getsize(b) + os.path.getsize(b + ".data")
        run([
            Case("b", "load", "onnx_light", lambda: ol.load(b)),
            Case("b", "load", "onnx_light (1 thread)", lambda: ol.load(b, num_threads=1)),
            Case("b", "load no_copy", "onnx_light", lambda: ol.load(b, no_copy=True)),
            Case("b", "load no_copy", "onnx_light (alignment=1)", lambda: ol.load(b, no_copy=True, alignment=1)),
            Case("b", "load", "onnx", lambda: onnx.load(b)),
            Case("b", "load (lazy)", "onnx_ir", lambda: onnx_ir.load(b)),
        ])
        m_ol = ol.load(b, no_copy=True)
        m_ir = onnx_ir.load(b)

        def save_ol():
            p = fresh("s")
            ol.save(m_ol, os.path.join(p, "m.onnx"), save_as_external_data=True)
            fsync_dir(p)

        def save_ir():
            p = fresh("s")
            onnx_ir.save(m_ir, os.path.join(p, "m.onnx"), external_data="m.onnx.data")
            fsync_dir(p)

        run([
            Case("b", "save external", "onnx_light", save_ol, clean),
            Case("b", "save external", "onnx_ir", save_ir, clean),
        ])
        del m_ol, m_ir
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
    for c, r in rows:
        lines.append(f"| {c.model} ({sizes.get(c.model, 0) / 2**20:.0f} MiB) | {c.name} | {c.lib} | "
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
        r = ratio(model, "load", "onnx_light (1 thread)", "load", "onnx")
        rc = ratio(model, "load", "onnx_light (1 thread)", "load", "onnx", key="cpu")
        if r is not None:
            lines.append(f"- ({model}) load with 1 thread vs onnx.load: {r:.1f}× (CPU time: {rc:.1f}×)")
    r = ratio("c", "op_type + len(input)", "onnx_light", "op_type + len(input)", "onnx")
    rc = ratio("c", "op_type + len(input)", "onnx_light", "op_type + len(input)", "onnx", key="cpu")
    if r is not None:
        lines.append(f"- (c) reading op_type and input of every node vs onnx (≥ 1×): {r:.2f}× (CPU time: {rc:.2f}×)")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
