"""ONNX Runtime sessions: ONNX Runtime alone against onnx_light's sessions over its own memory.

usage: ort_sessions.py --model NAME=PATH [--model ...] [--runs N] [--processes 4] [--out FILE]
                      [--config KEY=VALUE ...]
       ort_sessions.py --gen-adds PATH --bytes N   (writes the model below)

`--gen-adds` writes a model whose every weight is used at run time, so that ONNX Runtime can
neither drop nor fold any: a chain of 8 `Add` nodes, each adding a float initializer of N/8
bytes, embedded in one file.

For each model, in fresh processes (one per run): the time to create the session
(`onnxruntime.InferenceSession(path)` against `onnx_light.onnxruntime.InferenceSession(path)`),
the anonymous memory it added and the process's peak RSS. Then `--processes` processes each
create a session of the same model and wait: the proportional set size (PSS: pages shared
between processes counted once, split among them) of each is read from /proc/PID/smaps_rollup.
The same number of processes that only import the libraries gives the baseline, subtracted: the
sessions' PSS of N processes is compared with one process's (1.0x: the weights are in memory
once, whatever the number of processes). `--config` sets a session configuration entry on both
sides (e.g. `session.disable_prepacking=1`). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

CHILD = r"""
import os, sys, time
mode, path, wait = sys.argv[1], sys.argv[2], sys.argv[3] == "wait"
def status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
import onnxruntime as ort
import onnx_light.onnxruntime as olrt
so = ort.SessionOptions()
for entry in sys.argv[4:]:
    so.add_session_config_entry(*entry.split("=", 1))
anon = status_kb("RssAnon")
t = time.perf_counter()
if mode == "none":
    s = None
elif mode == "ort":
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
else:
    s = olrt.InferenceSession(path, so, providers=["CPUExecutionProvider"])
t = time.perf_counter() - t
print(f"{t:.6f} {status_kb('RssAnon') - anon} {status_kb('VmHWM')}", flush=True)
if wait:
    sys.stdin.readline()
"""

MODES = {"ort": "ONNX Runtime alone", "onnx_light": "onnx_light.onnxruntime"}
CONFIG: list = []  # session configuration entries (--config)


def child(mode: str, path: str, wait: bool) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, mode, path, "wait" if wait else "go", *CONFIG],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def one(mode: str, path: str) -> tuple:
    p = child(mode, path, False)
    out, _ = p.communicate()
    if p.returncode != 0:
        raise SystemExit(f"{mode} on {path}: the session failed")
    t, anon, hwm = out.split()
    return float(t), int(anon), int(hwm)


def pss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    raise SystemExit(f"no Pss for {pid}")


def pss(mode: str, path: str, n: int) -> list:
    procs = [child(mode, path, True) for _ in range(n)]
    try:
        for p in procs:
            if not p.stdout.readline():
                raise SystemExit(f"{mode} on {path}: a session failed")
        return [pss_kb(p.pid) for p in procs]
    finally:
        for p in procs:
            p.stdin.write("\n")
            p.stdin.close()
            p.wait()


def mib(kb: float) -> str:
    return f"{kb / 1024:.0f} MiB"


def gen_adds(path: str, total: int) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    n = max(total // 8 // 4, 256)
    nodes, prev, weights = [], "x", []
    for i in range(8):
        weights.append(numpy_helper.from_array(np.full((n,), i + 1, np.float32), f"w{i}"))
        nodes.append(helper.make_node("Add", [prev, f"w{i}"], [f"h{i}"]))
        prev = f"h{i}"
    graph = helper.make_graph(nodes, "adds", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [n])],
                              initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10  # (what onnxruntime reads)
    onnx.save(model, path)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gen-adds")
    ap.add_argument("--bytes", type=int, default=512 << 20)
    ap.add_argument("--model", action="append", help="NAME=PATH")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--out")
    ap.add_argument("--config", action="append", default=[], help="KEY=VALUE")
    args = ap.parse_args()
    CONFIG.extend(args.config)
    if args.gen_adds:
        gen_adds(args.gen_adds, args.bytes)
        return 0
    if not args.model:
        ap.error("--model is required")
    lines = ["| model | sessions by | create (cold / warm) | anonymous memory added | peak RSS "
             f"| sessions' PSS, 1 process | {args.processes} processes (total) | ratio |",
             "|---|---|---|---|---|---|---|---|"]
    path0 = args.model[0].split("=", 1)[1]
    base = (pss("none", path0, 1)[0], sum(pss("none", path0, args.processes)))
    for spec in args.model:
        name, path = spec.split("=", 1)
        for mode, label in MODES.items():
            runs = [one(mode, path) for _ in range(args.runs)]
            cold, warm = runs[0][0], min(r[0] for r in runs[1:] or runs)
            anon, hwm = min(r[1] for r in runs), min(r[2] for r in runs)
            single = pss(mode, path, 1)[0] - base[0]
            many = sum(pss(mode, path, args.processes)) - base[1]
            lines.append(f"| {name} | {label} | {cold * 1e3:.1f} / {warm * 1e3:.1f} ms | {mib(anon)} "
                         f"| {mib(hwm)} | {mib(single)} | {mib(many)} "
                         f"| {many / max(single, 1):.2f}x |")
            print(lines[-1], file=sys.stderr, flush=True)
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n## ONNX Runtime sessions\n\n" + report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
