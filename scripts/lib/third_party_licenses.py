#!/usr/bin/env python3
"""Writes the licences of every crate linked into one artifact, for the distribution archives.

    third_party_licenses.py OUT --package P [--features F] [--target TRIPLE] [--extra NAME=FILE]...

The crates are those `cargo tree` lists as normal dependencies of package P for that target and
those features (proc-macros and build-only dependencies run at build time and are not linked,
so they are left out); each gets its name, version, licence expression and repository, then the
text of every licence file its package ships (LICENSE*, LICENCE*, COPYING*, NOTICE*, UNLICENSE, or the files of a LICENSES/ directory).
--extra adds a non-Rust part (for example onnx's LICENSE for the onnx component). The output is
sorted and holds no paths or dates: the same lock file gives the same bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

LICENCE_PREFIXES = ("LICENSE", "LICENCE", "COPYING", "NOTICE", "UNLICENSE")


def cargo(*args: str) -> str:
    return subprocess.run(["cargo", *args], check=True, capture_output=True, text=True).stdout


def licence_files(directory: str) -> list[str]:
    """The licence files of a package: at its top, or in a LICENSES/ directory (REUSE layout)."""
    found = []
    for entry in sorted(os.listdir(directory)):
        path = os.path.join(directory, entry)
        if not entry.upper().startswith(LICENCE_PREFIXES):
            continue
        if os.path.isfile(path):
            found.append(entry)
        elif os.path.isdir(path):
            found += [f"{entry}/{f}" for f in sorted(os.listdir(path)) if os.path.isfile(os.path.join(path, f))]
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--package", required=True)
    ap.add_argument("--features", default="")
    ap.add_argument("--target", default="")
    ap.add_argument("--extra", action="append", default=[], metavar="NAME=FILE")
    args = ap.parse_args()

    tree = ["tree", "--locked", "-p", args.package, "-e", "normal", "--prefix", "none",
            "--format", "{p}|{l}|{r}"]
    if args.features:
        tree += ["--features", args.features]
    if args.target:
        tree += ["--target", args.target]
    crates = {}
    for line in cargo(*tree).splitlines():
        # A crate met again ends in " (*)" (cargo listed it the first time); proc-macros run at
        # build time only.
        if line.endswith(" (*)") or "(proc-macro)" in line:
            continue
        spec, licence, repository = (line.split("|") + ["", ""])[:3]
        parts = spec.split()
        name, version = parts[0], parts[1].lstrip("v")
        if len(parts) > 2 and parts[2].startswith("("):  # a path dependency: this project's own
            continue
        crates[(name, version)] = (licence, repository)

    metadata = json.loads(cargo("metadata", "--locked", "--format-version", "1"))
    dirs = {(p["name"], p["version"]): os.path.dirname(p["manifest_path"]) for p in metadata["packages"]}

    # Each distinct licence text once (most crates ship the same MIT and Apache-2.0 texts), the
    # crates pointing at it by number.
    texts: dict[str, int] = {}
    listing = []
    missing = []
    for name, path in (e.split("=", 1) for e in args.extra):
        text = open(path, encoding="utf-8").read().rstrip()
        listing.append(f"{name}: text [{texts.setdefault(text, len(texts) + 1)}]")
    for (name, version), (licence, repository) in sorted(crates.items()):
        directory = dirs.get((name, version))
        files = licence_files(directory) if directory else []
        refs = []
        for f in files:
            text = open(os.path.join(directory, f), encoding="utf-8", errors="replace").read().rstrip()
            refs.append(f"{f} [{texts.setdefault(text, len(texts) + 1)}]")
        if not files:
            missing.append(f"{name} {version}")
        line = f"{name} {version} ({licence or 'no licence declared'})"
        line += f" {repository}" if repository else ""
        listing.append(line + ": " + (", ".join(refs) or "ships no licence file"))
    out = ["Third-party software in this artifact, the licences it is distributed under, and their",
           "texts (numbered, each once).", "", *listing, ""]
    for text, number in texts.items():
        out += ["=" * 78, f"[{number}]", "=" * 78, text, ""]
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(out) + "\n")
    print(f"{args.out}: {len(crates)} crates, {len(args.extra)} other parts"
          + (f"; without a licence file: {', '.join(missing)}" if missing else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
