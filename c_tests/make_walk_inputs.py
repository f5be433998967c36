"""Writes the inputs of the walker test that use EVERY field of every message (built with the
official onnx package by tests/compat/all_fields.py): a model, SequenceProto / MapProto /
OptionalProto values, and hand-made encodings protobuf accepts (non-canonical ones included).

Usage: python make_walk_inputs.py OUT_DIR
Writes OUT_DIR/all_fields.onnx, OUT_DIR/all_unknown.onnx (the same model with unknown fields of
every wire type in EVERY message) and OUT_DIR/typed/NNN__<Message>.pb (walk_copy --typed-dir).
"""
import os
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "compat"))

import all_fields  # noqa: E402


def add_unknown_everywhere(msg) -> None:
    """Appends all_fields.UNKNOWN to `msg` and to every message under it (children first)."""
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        if field.is_repeated:
            for v in value:
                add_unknown_everywhere(v)
        else:
            add_unknown_everywhere(value)
    msg.MergeFromString(all_fields.UNKNOWN)


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    typed = out / "typed"
    shutil.rmtree(typed, ignore_errors=True)
    typed.mkdir(parents=True)
    (out / "all_fields.onnx").write_bytes(all_fields.build_model().SerializeToString())
    model = all_fields.build_model()
    add_unknown_everywhere(model)
    (out / "all_unknown.onnx").write_bytes(model.SerializeToString())
    n = 0
    for message, values in all_fields.build_data_protos().items():
        for v in values:
            (typed / f"{n:03d}__{message}.pb").write_bytes(v.SerializeToString())
            n += 1
            add_unknown_everywhere(v)
            (typed / f"{n:03d}__{message}.pb").write_bytes(v.SerializeToString())
            n += 1
    for message, data in all_fields.hand_encodings():
        (typed / f"{n:03d}__{message}.pb").write_bytes(data)
        n += 1
    print(f"wrote {out}/all_fields.onnx, {out}/all_unknown.onnx and {n} typed messages in {typed}")


if __name__ == "__main__":
    main()
