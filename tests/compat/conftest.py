"""Shared fixtures: the onnx-light binary (built by scripts/test-all.sh) and a round-trip helper
that runs many inputs through one process."""
import os
import pathlib
import subprocess
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def binary() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("ONNX_LIGHT_BIN", ROOT / "target" / "release" / "onnx-light"))
    if not path.exists():
        raise RuntimeError(f"{path} does not exist: build it with `cargo build --release`")
    return path


class Roundtrip:
    """Parses byte strings with onnx_light and returns what it serializes (or its error)."""

    def __init__(self, tmp: pathlib.Path):
        self.tmp = tmp
        self.count = 0

    def files(self, paths, message="ModelProto", *flags, keep_going=False):
        paths = list(paths)
        results = []
        for i in range(0, len(paths), 1000):
            results += self._files(paths[i:i + 1000], message, *flags, keep_going=keep_going)
        return results

    def _files(self, paths, message, *flags, keep_going=False):
        out = pathlib.Path(tempfile.mkdtemp(dir=self.tmp))
        args = [str(binary()), "roundtrip", "--type", message, "--out-dir", str(out), *flags]
        if keep_going:
            args.append("--keep-going")
        proc = subprocess.run(args + [str(p) for p in paths], capture_output=True, text=True)
        if proc.returncode != 0:
            raise AssertionError(f"onnx-light roundtrip failed: {proc.stderr}")
        results = []
        for i in range(len(paths)):
            ok, err = out / f"{i}.pb", out / f"{i}.err"
            if ok.exists():
                results.append(ok.read_bytes())
            else:
                assert err.exists(), f"no output for input {i}"
                results.append(RuntimeError(err.read_text()))
        return results

    def blobs(self, blobs, message="ModelProto", *flags, keep_going=False):
        paths = []
        d = pathlib.Path(tempfile.mkdtemp(dir=self.tmp))
        for i, b in enumerate(blobs):
            p = d / f"in{i}.bin"
            p.write_bytes(b)
            paths.append(p)
        return self.files(paths, message, *flags, keep_going=keep_going)

    def one(self, blob, message="ModelProto", *flags):
        return self.blobs([blob], message, *flags)[0]


@pytest.fixture
def roundtrip(tmp_path):
    return Roundtrip(tmp_path)
