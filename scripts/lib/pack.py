#!/usr/bin/env python3
"""Packs a directory into a reproducible .tar.gz or .zip (scripts/dist.sh).

    pack.py DIR OUT

The archive holds DIR under its own name. Entries are sorted; owners are root; modes are 0755
for directories and executables and 0644 for other files; every time is SOURCE_DATE_EPOCH;
symbolic links stay links in a tar (a zip, for Windows, must hold none). Same tree, same bytes.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import sys
import tarfile
import time
import zipfile


def entries(top: str) -> list[tuple[str, str]]:
    """(name in the archive, path) of top and everything below it, sorted by name."""
    parent = os.path.dirname(os.path.abspath(top))
    found = [top]
    for dirpath, dirnames, filenames in os.walk(top):
        found += [os.path.join(dirpath, name) for name in dirnames + filenames]
    return sorted((os.path.relpath(path, parent), path) for path in found)


def mode_of(st: os.stat_result) -> int:
    return 0o755 if stat.S_ISDIR(st.st_mode) or st.st_mode & 0o111 else 0o644


def pack_tar(top: str, out: str, epoch: int) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in entries(top):
            info = tar.gettarinfo(path, arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = epoch
            if not info.issym():
                info.mode = mode_of(os.lstat(path))
            if info.isfile():
                with open(path, "rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=epoch, compresslevel=9) as gz:
        gz.write(buffer.getvalue())


def pack_zip(top: str, out: str, epoch: int) -> None:
    date = time.gmtime(max(epoch, 315532800))[:6]  # a zip cannot hold times before 1980
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for name, path in entries(top):
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                sys.exit(f"pack.py: {path} is a symbolic link, which a zip cannot hold")
            is_dir = stat.S_ISDIR(st.st_mode)
            info = zipfile.ZipInfo(name + "/" if is_dir else name, date)
            info.external_attr = ((0o040000 if is_dir else 0o100000) | mode_of(st)) << 16
            info.compress_type = zipfile.ZIP_STORED if is_dir else zipfile.ZIP_DEFLATED
            with open(path, "rb") if not is_dir else io.BytesIO() as fh:
                zf.writestr(info, fh.read())


def main() -> int:
    top, out = sys.argv[1:3]
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    if not os.path.isdir(top):
        sys.exit(f"pack.py: {top} is not a directory")
    (pack_zip if out.endswith(".zip") else pack_tar)(top, out, epoch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
