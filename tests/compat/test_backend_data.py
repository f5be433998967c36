"""Every model and every serialized proto of the onnx wheel's backend test data: onnx_light's
parse + serialize equals the onnx package's own re-serialization, in every load mode."""
import collections

import pytest

import backend_data as bd

MODES = {
    "copy": [],
    "threads4": ["--threads", "4"],
    "no_copy_mmap": ["--no-copy", "--load-mode", "mmap"],
    "no_copy_buffered": ["--no-copy", "--load-mode", "buffered"],
    "copy_mmap_threads_all": ["--load-mode", "mmap", "--threads", "-1"],
}


def _groups():
    groups = collections.defaultdict(list)
    for m in bd.models():
        groups["ModelProto"].append(m)
    for p, t in bd.protos():
        groups[t].append(p)
    return groups


@pytest.mark.parametrize("mode", MODES)
def test_backend_data_byte_identical(mode, roundtrip):
    groups = _groups()
    total = sum(len(v) for v in groups.values())
    assert len(groups["ModelProto"]) >= 140 and total >= 450, "backend test data not found"
    mismatches = []
    for message, files in groups.items():
        cls = bd.message_class(message)
        outputs = roundtrip.files(files, message, *MODES[mode])
        for path, got in zip(files, outputs):
            expected = cls.FromString(path.read_bytes()).SerializeToString()
            if got != expected:
                mismatches.append(str(path))
    print(f"\n[{mode}] {total} files ({len(groups['ModelProto'])} models, "
          f"{total - len(groups['ModelProto'])} protos: "
          + ", ".join(f"{k} {len(v)}" for k, v in sorted(groups.items()) if k != "ModelProto")
          + f"), {len(mismatches)} mismatches")
    assert not mismatches, mismatches[:10]
