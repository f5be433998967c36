"""Compiles (syntax only) onnx's main C++ sources and the onnx component's own file as CMake
compiled them, with ONNX_NAMESPACE=onnx_torch instead of onnx (PyTorch builds onnx's sources so):
onnx_light's header must then give the message classes under that namespace.

usage: onnx_namespace_check.py BUILD_TREE/compile_commands.json JOBS
"""

import json
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

WANTED = ("onnx_light_onnx.cc", "onnx/checker.cc", "onnx/shape_inference/implementation.cc",
          "onnx/version_converter/convert.cc", "onnx/defs/schema.cc", "onnx/common/ir_pb_converter.cc",
          "onnx/inliner/inliner.cc", "onnx/defs/parser.cc", "onnx/defs/printer.cc")


def command(entry: dict) -> list:
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    if "-DONNX_NAMESPACE=onnx" not in args:
        raise SystemExit(f"{entry['file']}: not compiled with -DONNX_NAMESPACE=onnx: {args}")
    args = ["-DONNX_NAMESPACE=onnx_torch" if a == "-DONNX_NAMESPACE=onnx" else a for a in args]
    if "-o" in args:
        i = args.index("-o")
        del args[i:i + 2]
    return args + ["-fsyntax-only"]


def main() -> int:
    entries = json.load(open(sys.argv[1]))
    chosen = [e for e in entries if e["file"].endswith(WANTED)]
    found = {w for w in WANTED for e in chosen if e["file"].endswith(w)}
    if found != set(WANTED):
        raise SystemExit(f"not in {sys.argv[1]}: {sorted(set(WANTED) - found)}")

    def run(entry):
        return entry["file"], subprocess.run(command(entry), cwd=entry["directory"], capture_output=True, text=True)

    with ThreadPoolExecutor(int(sys.argv[2])) as pool:
        results = list(pool.map(run, chosen))
    failed = [(f, r) for f, r in results if r.returncode != 0]
    for f, r in failed:
        print(f"{f}: does not compile with ONNX_NAMESPACE=onnx_torch\n{r.stderr[-3000:]}", file=sys.stderr)
    if failed:
        return 1
    print(f"ONNX_NAMESPACE=onnx_torch: {len(results)} sources compile (onnx's and the component's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
