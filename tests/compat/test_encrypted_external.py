"""Encrypted external data, checked independently from docs/encryption.md and
docs/external-data.md with Python's `cryptography` (not from the Rust code):

- weight files written by `onnx-light convert --encrypt-weights` are ONNXCRYS files whose
  plaintext ranges, read here by decrypting only the chunks a tensor's `offset` / `length`
  cover (offsets are plaintext offsets), equal `onnx.numpy_helper` arrays of the original model,
  and whose `checksum` entries are the SHA-1 of the plaintext;
- decrypted next to the model, the files make a plain model that onnx checks and onnxruntime runs
  with the original outputs;
- weight files encrypted here (any chunk size, either cipher) load in onnx-light.
"""
import hashlib
import os
import shutil
import struct
import subprocess

import numpy as np
import onnx
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from onnx import TensorProto, helper, numpy_helper

from conftest import binary

KEY = b"weights passphrase \x00\xff"
HEADER = 36
TAG = 16


def kdf(passphrase: bytes, salt: bytes) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", passphrase, salt, 100_000, 32)


class EncryptedWeights:
    """Random access to an ONNXCRYS file, as the format document describes it."""

    def __init__(self, data: bytes, passphrase: bytes):
        header = data[:HEADER]
        assert header[:8] == b"ONNXCRYS" and header[8] == 1 and header[10:12] == b"\0\0"
        (self.chunk,) = struct.unpack("<I", header[12:16])
        self.header, self.prefix, self.data = header, header[32:36], data
        self.aead = {2: ChaCha20Poly1305, 3: AESGCM}[header[9]](kdf(passphrase, header[16:32]))
        body = len(data) - HEADER
        full = self.chunk + TAG
        rem = body % full
        assert rem >= TAG, "truncated"
        self.chunks = body // full + 1
        self.length = (self.chunks - 1) * self.chunk + rem - TAG
        # File size formula of the document.
        assert len(data) == HEADER + self.length + TAG * (self.length // self.chunk + 1)
        self.read_chunk(self.chunks - 1)  # authenticates the end (no truncation / extension)

    def read_chunk(self, i: int) -> bytes:
        start = HEADER + i * (self.chunk + TAG)
        last = i == self.chunks - 1
        end = len(self.data) if last else start + self.chunk + TAG
        nonce = self.prefix + struct.pack(">Q", i)
        return self.aead.decrypt(nonce, self.data[start:end], self.header + bytes([int(last)]))

    def read(self, offset: int, length: int) -> bytes:
        assert offset + length <= self.length
        if length == 0:
            return b""
        first, last = offset // self.chunk, (offset + length - 1) // self.chunk
        plain = b"".join(self.read_chunk(i) for i in range(first, last + 1))
        skip = offset - first * self.chunk
        return plain[skip:skip + length]

    def read_all(self) -> bytes:
        return self.read(0, self.length)


def encrypt_weights(plaintext: bytes, passphrase: bytes, chunk: int, cipher_id: int) -> bytes:
    """ONNXCRYS from the document (a fresh salt and nonce prefix)."""
    salt, prefix = os.urandom(16), os.urandom(4)
    header = b"ONNXCRYS" + bytes([1, cipher_id, 0, 0]) + struct.pack("<I", chunk) + salt + prefix
    aead = {2: ChaCha20Poly1305, 3: AESGCM}[cipher_id](kdf(passphrase, salt))
    pieces = [plaintext[i:i + chunk] for i in range(0, len(plaintext), chunk)]
    if not pieces or len(pieces[-1]) == chunk:
        pieces.append(b"")  # the last chunk holds 0 ..= C-1 bytes
    out = [header]
    for i, p in enumerate(pieces):
        last = i == len(pieces) - 1
        nonce = prefix + struct.pack(">Q", i)
        out.append(aead.encrypt(nonce, p, header + bytes([int(last)])))
    return b"".join(out)


def make_model() -> onnx.ModelProto:
    rng = np.random.default_rng(7)
    w1 = rng.standard_normal((32, 300), dtype=np.float32)
    b1 = rng.standard_normal((300,), dtype=np.float32)
    w2 = rng.standard_normal((300, 10), dtype=np.float32)
    b2 = np.arange(10, dtype=np.float64)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h"]),
            helper.make_node("Add", ["h", "b1"], ["h1"]),
            helper.make_node("Relu", ["h1"], ["r"]),
            helper.make_node("MatMul", ["r", "w2"], ["o"]),
            helper.make_node("Cast", ["b2"], ["b2f"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["o", "b2f"], ["y"]),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [numpy_helper.from_array(a, n) for a, n in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")]],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def run(*args):
    return subprocess.run([str(binary()), *map(str, args)], capture_output=True, text=True)


def entries(t: onnx.TensorProto) -> dict:
    return {e.key: e.value for e in t.external_data}


LAYOUTS = {
    "one": ["--chunk-size", "4096"],
    "split-chacha": ["--max-file-size", "20000", "--cipher", "chacha20-poly1305", "--chunk-size", "100"],
    "per-tensor": ["--per-tensor-files", "--chunk-size", "64", "--align", "0"],
    "default-chunk": [],
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_cli_encrypted_weights_decrypt_with_cryptography(layout, tmp_path):
    original = make_model()
    src = tmp_path / "src.onnx"
    onnx.save(original, str(src))
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY + b"\n")
    out = tmp_path / "enc"
    out.mkdir()
    proc = run("convert", src, out / "m.onnx", "--encrypt-weights", "--key-file", key_file,
               "--checksum", "--size-threshold", "64", *LAYOUTS[layout])
    assert proc.returncode == 0, proc.stderr

    enc_model = onnx.load(str(out / "m.onnx"), load_external_data=False)
    want = {t.name: numpy_helper.to_array(t) for t in original.graph.initializer}
    files = {}
    seen = set()
    for t in enc_model.graph.initializer:
        assert t.data_location == TensorProto.EXTERNAL, t.name
        e = entries(t)
        loc = e["location"]
        if loc not in files:
            data = (out / loc).read_bytes()
            assert data[:8] == b"ONNXCRYS"
            files[loc] = EncryptedWeights(data, KEY)
        f = files[loc]
        raw = f.read(int(e["offset"]), int(e["length"]))  # plaintext offsets
        plain = onnx.TensorProto()
        plain.CopyFrom(t)
        del plain.external_data[:]
        plain.data_location = TensorProto.DEFAULT
        plain.raw_data = raw
        np.testing.assert_array_equal(numpy_helper.to_array(plain), want[t.name])
        # checksum = SHA-1 of the whole plaintext file.
        assert e["checksum"] == hashlib.sha1(f.read_all()).hexdigest()
        seen.add(t.name)
    assert seen == set(want)
    if layout.startswith("split"):
        assert len(files) >= 2

    # Decrypted beside the model: a plain model that onnx checks and onnxruntime runs.
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    shutil.copy(out / "m.onnx", plain_dir / "m.onnx")
    for loc, f in files.items():
        (plain_dir / loc).write_bytes(f.read_all())
    onnx.checker.check_model(str(plain_dir / "m.onnx"))
    loaded = onnx.load(str(plain_dir / "m.onnx"))
    for t in loaded.graph.initializer:
        np.testing.assert_array_equal(numpy_helper.to_array(t), want[t.name])
    import onnxruntime as ort

    x = np.random.default_rng(1).standard_normal((1, 32), dtype=np.float32)
    got = ort.InferenceSession(str(plain_dir / "m.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    ref = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, ref)

    # onnx-light reads them back (check verifies the plaintext checksums); without the key, the
    # error says so.
    proc = run("check", out / "m.onnx", "--key-file", key_file)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr
    proc = run("check", out / "m.onnx")
    assert proc.returncode != 0 and "no passphrase" in proc.stdout


@pytest.mark.parametrize("chunk,cipher_id", [(64, 3), (1000, 2), (1 << 20, 3)])
def test_weights_encrypted_with_cryptography_load_in_onnx_light(chunk, cipher_id, tmp_path):
    original = make_model()
    want = {t.name: numpy_helper.to_array(t) for t in original.graph.initializer}
    d = tmp_path / "m"
    d.mkdir()
    # (onnx.save with external data changes the model it is given: save a copy.)
    onnx.save(onnx.ModelProto.FromString(original.SerializeToString()), str(d / "m.onnx"),
              save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
              size_threshold=100)
    plain = (d / "w.bin").read_bytes()
    (d / "w.bin").write_bytes(encrypt_weights(plain, KEY, chunk, cipher_id))
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    out = tmp_path / "inline.onnx"
    proc = run("convert", d / "m.onnx", out, "--inline", "--key-file", key_file)
    assert proc.returncode == 0, proc.stderr
    got = onnx.load(str(out))
    for t in got.graph.initializer:
        np.testing.assert_array_equal(numpy_helper.to_array(t), want[t.name])
    # A flipped ciphertext byte is refused (authentication), naming the file.
    data = bytearray((d / "w.bin").read_bytes())
    data[HEADER + 5] ^= 1
    (d / "w.bin").write_bytes(bytes(data))
    proc = run("convert", d / "m.onnx", tmp_path / "bad.onnx", "--inline", "--key-file", key_file)
    assert proc.returncode != 0
    assert "authentication failed" in proc.stderr and "w.bin" in proc.stderr, proc.stderr
