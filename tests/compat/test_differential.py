"""Differential testing against protobuf: mutated inputs are accepted by onnx_light exactly when
protobuf (upb, as used by the onnx package) accepts them, and then re-serialize identically."""
import random

import all_fields as af
import backend_data as bd

MUTANTS_PER_SEED = int(__import__("os").environ.get("ONNXL_MUTANTS", "1000"))


def _mutate(rng: random.Random, blob: bytes) -> bytes:
    b = bytearray(blob)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6)
        if not b:
            b.append(rng.randrange(256))
            continue
        i = rng.randrange(len(b))
        if op == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[i] = rng.randrange(256)
        elif op == 2:
            del b[i]
        elif op == 3:
            b.insert(i, rng.randrange(256))
        elif op == 4:
            del b[i:]
        else:
            b[i:i] = af.varint(rng.choice([0, 1, 127, 128, 2**31, 2**32, 2**63, -1]))
    return bytes(b)


def _seeds():
    model = af.build_model()
    seeds = [("ModelProto", model.SerializeToString())]
    seeds += [("NodeProto", model.graph.node[0].SerializeToString())]
    seeds += [("TensorProto", t.SerializeToString()) for t in model.graph.initializer[:6]]
    for message, msgs in af.build_data_protos().items():
        seeds += [(message, m.SerializeToString()) for m in msgs]
    small = sorted(bd.models(), key=lambda p: p.stat().st_size)[:5]
    seeds += [("ModelProto", p.read_bytes()) for p in small]
    return seeds


def test_mutants_accepted_exactly_like_protobuf(roundtrip):
    rng = random.Random(20261122)
    total = accepted = rejected = 0
    by_type = {}
    for message, blob in _seeds():
        by_type.setdefault(message, []).extend(_mutate(rng, blob) for _ in range(MUTANTS_PER_SEED))
    failures = []
    for message, blobs in by_type.items():
        cls = bd.message_class(message)
        outputs = roundtrip.blobs(blobs, message, keep_going=True)
        for blob, got in zip(blobs, outputs):
            total += 1
            try:
                expected = cls.FromString(blob).SerializeToString()
            except Exception:  # protobuf's DecodeError
                expected = None
            if expected is None:
                rejected += 1
                if not isinstance(got, Exception):
                    failures.append(f"{message}: protobuf rejects, onnx_light accepts {blob.hex()}")
            else:
                accepted += 1
                if isinstance(got, Exception):
                    failures.append(f"{message}: protobuf accepts, onnx_light rejects ({got}) {blob.hex()}")
                elif got != expected:
                    failures.append(f"{message}: bytes differ for {blob.hex()}")
    print(f"\n{total} mutants: {accepted} accepted and identical, {rejected} rejected by both; "
          f"{len(failures)} disagreements")
    assert total > 5000 and accepted > 100 and rejected > 100
    assert not failures, "\n".join(failures[:5])


def test_recursion_limit_matches_protobuf(roundtrip):
    """Nesting depth accepted up to protobuf's default limit (100) and refused beyond."""
    import onnx

    def nested(levels):
        # TypeProto -> sequence_type (level) -> elem_type TypeProto (level) ...
        inner = af.ld(1, af.tag(1, 0) + af.varint(1))  # tensor_type: one more level
        blob = inner
        depth = 1
        while depth + 2 <= levels:
            blob = af.ld(4, af.ld(1, blob))
            depth += 2
        return blob, depth

    blobs, depths = [], []
    for levels in range(95, 106):
        blob, depth = nested(levels)
        blobs.append(blob)
        depths.append(depth)
    outputs = roundtrip.blobs(blobs, "TypeProto", keep_going=True)
    for blob, depth, got in zip(blobs, depths, outputs):
        try:
            expected = onnx.TypeProto.FromString(blob).SerializeToString()
        except Exception:
            expected = None
        if expected is None:
            assert isinstance(got, Exception), f"depth {depth}: protobuf refuses, we accept"
            assert "recursion limit" in str(got)
        else:
            assert got == expected, f"depth {depth}: protobuf accepts, we gave {got}"
    assert any(isinstance(g, Exception) for g in outputs) and not all(isinstance(g, Exception) for g in outputs)


def test_every_truncation_matches_protobuf(roundtrip):
    """Every prefix of real models (and of the every-field model) is refused or accepted exactly
    as protobuf does, with identical bytes when accepted."""
    seeds = [("ModelProto", af.build_model().SerializeToString())]
    small = sorted(bd.models(), key=lambda p: p.stat().st_size)[:24]
    seeds += [("ModelProto", p.read_bytes()) for p in small]
    total = 0
    failures = []
    for message, blob in seeds:
        cls = bd.message_class(message)
        prefixes = [blob[:n] for n in range(len(blob))]
        outputs = roundtrip.blobs(prefixes, message, keep_going=True)
        for prefix, got in zip(prefixes, outputs):
            total += 1
            try:
                expected = cls.FromString(prefix).SerializeToString()
            except Exception:
                expected = None
            if (expected is None) != isinstance(got, Exception) or (expected is not None and got != expected):
                failures.append(f"{message} prefix of {len(prefix)} bytes")
    print(f"\n{total} truncated inputs, {len(failures)} disagreements with protobuf")
    assert total > 5000
    assert not failures, failures[:5]
