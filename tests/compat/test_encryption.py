"""Encrypted models, checked against an independent implementation: Python's `cryptography`
package and `hashlib.pbkdf2_hmac`, written from docs/encryption.md alone (not from the Rust code).

- the known-answer vectors of tests/integration/encryption.rs (the `KAT_*` constants) decrypt
  here to the KAT plaintext, which the onnx package parses to the original model;
- files freshly encrypted by the CLI, in every format, decrypt here to the original model file;
- files encrypted here, following the document, decrypt with the CLI.
"""
import hashlib
import os
import pathlib
import re
import struct
import subprocess

import onnx
import pytest
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from conftest import ROOT, binary

ITERATIONS = 100_000
SAMPLE = ROOT / "samples" / "mlp.onnx"


def kdf(passphrase: bytes, salt: bytes) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", passphrase, salt, ITERATIONS, 32)


# ---- decryption, from the format document ------------------------------------------------------


def decrypt_onnxcry1(data: bytes, passphrase: bytes) -> bytes:
    assert data[:8] == b"ONNXCRY1"
    salt, iv, ct = data[8:24], data[24:40], data[40:]
    dec = Cipher(algorithms.AES(kdf(passphrase, salt)), modes.CBC(iv)).decryptor()
    padded = dec.update(ct) + dec.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    return unpadder.update(padded) + unpadder.finalize()


def decrypt_onnxcry23(data: bytes, passphrase: bytes) -> bytes:
    magic, salt, nonce, tag, ct = data[:8], data[8:24], data[24:36], data[36:52], data[52:]
    key = kdf(passphrase, salt)
    if magic == b"ONNXCRY2":
        return ChaCha20Poly1305(key).decrypt(nonce, ct + tag, None)
    assert magic == b"ONNXCRY3"
    return AESGCM(key).decrypt(nonce, ct + tag, data[:36])


def decrypt_onnxcrys(data: bytes, passphrase: bytes) -> bytes:
    header = data[:36]
    assert header[:8] == b"ONNXCRYS" and header[8] == 1 and header[10:12] == b"\0\0"
    cipher_id = header[9]
    (chunk_size,) = struct.unpack("<I", header[12:16])
    salt, prefix = header[16:32], header[32:36]
    key = kdf(passphrase, salt)
    aead = {2: ChaCha20Poly1305, 3: AESGCM}[cipher_id](key)
    body, out, index = data[36:], [], 0
    while True:
        piece, body = body[: chunk_size + 16], body[chunk_size + 16 :]
        last = len(piece) < chunk_size + 16
        assert len(piece) >= 16, "truncated"
        nonce = prefix + struct.pack(">Q", index)
        out.append(aead.decrypt(nonce, piece, header + bytes([1 if last else 0])))
        index += 1
        if last:
            assert not body
            return b"".join(out)


def decrypt(data: bytes, passphrase: bytes) -> bytes:
    magic = data[:8]
    if magic == b"ONNXCRY1":
        return decrypt_onnxcry1(data, passphrase)
    if magic in (b"ONNXCRY2", b"ONNXCRY3"):
        return decrypt_onnxcry23(data, passphrase)
    if magic == b"ONNXCRYS":
        return decrypt_onnxcrys(data, passphrase)
    raise ValueError(f"bad magic {magic!r}")


# ---- encryption, from the format document ------------------------------------------------------


def encrypt(plaintext: bytes, passphrase: bytes, fmt: str, chunk_size: int = 4096,
            cipher_id: int = 3) -> bytes:
    salt = os.urandom(16)
    key = kdf(passphrase, salt)
    if fmt == "1":
        iv = os.urandom(16)
        padder = padding.PKCS7(128).padder()
        padded = padder.update(plaintext) + padder.finalize()
        enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        return b"ONNXCRY1" + salt + iv + enc.update(padded) + enc.finalize()
    if fmt in ("2", "3"):
        nonce = os.urandom(12)
        head = (b"ONNXCRY2" if fmt == "2" else b"ONNXCRY3") + salt + nonce
        if fmt == "2":
            sealed = ChaCha20Poly1305(key).encrypt(nonce, plaintext, None)
        else:
            sealed = AESGCM(key).encrypt(nonce, plaintext, head)
        ct, tag = sealed[:-16], sealed[-16:]
        return head + tag + ct
    assert fmt == "chunked"
    prefix = os.urandom(4)
    header = b"ONNXCRYS" + bytes([1, cipher_id, 0, 0]) + struct.pack("<I", chunk_size) + salt + prefix
    aead = {2: ChaCha20Poly1305, 3: AESGCM}[cipher_id](key)
    # Every chunk but the last holds exactly chunk_size bytes; the last holds fewer (maybe 0).
    full = len(plaintext) // chunk_size
    out = [header]
    for i in range(full + 1):
        piece = plaintext[i * chunk_size : (i + 1) * chunk_size] if i < full else plaintext[full * chunk_size :]
        nonce = prefix + struct.pack(">Q", i)
        out.append(aead.encrypt(nonce, piece, header + bytes([1 if i == full else 0])))
    return b"".join(out)


# ---- the known-answer vectors of tests/integration/encryption.rs -------------------------------


def rust_constants() -> dict:
    text = (ROOT / "tests" / "integration" / "encryption.rs").read_text()
    found = dict(re.findall(r'^const (KAT_\w+): &str = "([^"]*)";', text, re.M))
    assert len(found) >= 10, found.keys()
    return found


KAT = rust_constants()


def kat_model_checks(plaintext: bytes):
    assert plaintext.hex() == KAT["KAT_PLAINTEXT"]
    model = onnx.load_from_string(plaintext)
    assert model.SerializeToString() == plaintext
    assert model.producer_name == "onnx_light-kat"
    assert model.ir_version == 10
    (w,) = model.graph.initializer
    assert w.name == "w" and list(w.dims) == [4] and w.raw_data == bytes(range(16))
    assert model.graph.node[0].op_type == "Relu"


@pytest.mark.parametrize(
    "name,passphrase",
    [
        ("KAT_ONNXCRY1", None),
        ("KAT_ONNXCRY2", None),
        ("KAT_ONNXCRY3", None),
        ("KAT_ONNXCRY3_EMPTY_KEY", b""),
        ("KAT_ONNXCRYS_AES_GCM_64", None),
        ("KAT_ONNXCRYS_CHACHA20_POLY1305_64", None),
    ],
)
def test_known_answer_vectors_decrypt_independently(name, passphrase):
    if passphrase is None:
        passphrase = KAT["KAT_PASSPHRASE"].encode()
    data = bytes.fromhex(KAT[name])
    # The fixed salt and IV of the vectors are where the document says.
    salt, iv = bytes.fromhex(KAT["KAT_SALT"]), bytes.fromhex(KAT["KAT_IV"])
    if data[:8] == b"ONNXCRYS":
        assert data[16:32] == salt and data[32:36] == iv[:4]
        assert struct.unpack("<I", data[12:16])[0] == 64
    else:
        assert data[8:24] == salt
        assert data[24:40 if data[:8] == b"ONNXCRY1" else 36] == iv[: 16 if data[:8] == b"ONNXCRY1" else 12]
    plaintext = decrypt(data, passphrase)
    kat_model_checks(plaintext)


def test_known_answer_vectors_reencrypt_identically():
    """The AEAD vectors are deterministic given salt and nonce: re-encrypt here and compare."""
    plaintext = bytes.fromhex(KAT["KAT_PLAINTEXT"])
    passphrase = KAT["KAT_PASSPHRASE"].encode()
    salt, iv = bytes.fromhex(KAT["KAT_SALT"]), bytes.fromhex(KAT["KAT_IV"])
    key = kdf(passphrase, salt)
    head = b"ONNXCRY3" + salt + iv[:12]
    sealed = AESGCM(key).encrypt(iv[:12], plaintext, head)
    assert (head + sealed[-16:] + sealed[:-16]).hex() == KAT["KAT_ONNXCRY3"]
    head = b"ONNXCRY2" + salt + iv[:12]
    sealed = ChaCha20Poly1305(key).encrypt(iv[:12], plaintext, None)
    assert (head + sealed[-16:] + sealed[:-16]).hex() == KAT["KAT_ONNXCRY2"]
    padder = padding.PKCS7(128).padder()
    enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    ct = enc.update(padder.update(plaintext) + padder.finalize()) + enc.finalize()
    assert (b"ONNXCRY1" + salt + iv + ct).hex() == KAT["KAT_ONNXCRY1"]


def test_wrong_key_fails_independently_too():
    data = bytes.fromhex(KAT["KAT_ONNXCRY3"])
    with pytest.raises(Exception):
        decrypt(data, b"wrong")


# ---- the CLI, both ways ------------------------------------------------------------------------


def run(*args, key: bytes):
    env = dict(os.environb)
    env[b"ONNXL_COMPAT_KEY"] = key  # the exact bytes (the CLI reads the variable as bytes)
    return subprocess.run([str(binary()), *args, "--key-env", "ONNXL_COMPAT_KEY"],
                          capture_output=True, env=env)


@pytest.mark.parametrize("fmt", ["1", "2", "3", "chunked"])
def test_cli_encryption_decrypts_with_cryptography(tmp_path, fmt):
    passphrase = b"compat passphrase \xc3\xa9"
    out = tmp_path / f"mlp.{fmt}.onnxc"
    proc = run("encrypt", "--format", fmt, str(SAMPLE), str(out), key=passphrase)
    assert proc.returncode == 0, proc.stderr.decode()
    data = out.read_bytes()
    plaintext = decrypt(data, passphrase)
    original = SAMPLE.read_bytes()
    assert plaintext == original
    model = onnx.load_from_string(plaintext)
    assert model.SerializeToString() == original
    with pytest.raises(Exception):
        decrypt(data, passphrase + b"!")


@pytest.mark.parametrize(
    "fmt,chunk_size,cipher_id",
    [("1", 0, 0), ("2", 0, 0), ("3", 0, 0), ("chunked", 64, 3), ("chunked", 4096, 2),
     ("chunked", 623, 3)],
)
def test_python_encryption_decrypts_with_the_cli(tmp_path, fmt, chunk_size, cipher_id):
    passphrase = b"made in python"
    original = SAMPLE.read_bytes()
    enc = tmp_path / "py.onnxc"
    enc.write_bytes(encrypt(original, passphrase, fmt, chunk_size or 4096, cipher_id or 3))
    out = tmp_path / "py.onnx"
    proc = run("decrypt", str(enc), str(out), key=passphrase)
    assert proc.returncode == 0, proc.stderr.decode()
    assert out.read_bytes() == original
    # Wrong key: an error, no output file.
    bad = tmp_path / "bad.onnx"
    proc = run("decrypt", str(enc), str(bad), key=b"not the key")
    assert proc.returncode != 0
    assert b"authentication failed" in proc.stderr
    assert not bad.exists()


def test_python_chunked_tampering_is_refused_by_the_cli(tmp_path):
    passphrase = b"k"
    data = bytearray(encrypt(SAMPLE.read_bytes(), passphrase, "chunked", 64, 3))
    for i in (0, 9, 20, 40, 36 + 80 + 5, len(data) - 1):
        bad = bytearray(data)
        bad[i] ^= 0x10
        enc = tmp_path / f"t{i}.onnxc"
        enc.write_bytes(bytes(bad))
        proc = run("decrypt", str(enc), str(tmp_path / f"t{i}.onnx"), key=passphrase)
        assert proc.returncode != 0, i
        assert not (tmp_path / f"t{i}.onnx").exists()


def test_onnxcry1_plaintext_with_unknown_fields_is_refused(tmp_path):
    """ONNXCRY1 has no MAC: besides the padding, a wrong key is detected by the plaintext not
    being a model without unknown fields in ModelProto / GraphProto (the C++ library cannot
    write such fields). A file that breaks the rule is refused like a wrong key."""
    passphrase = b"k"
    odd = SAMPLE.read_bytes() + bytes([0xA0, 0x06, 0x01])  # + field 100 (varint 1)
    onnx.load_from_string(odd)  # still a valid protobuf for onnx
    enc = tmp_path / "odd.onnxc"
    enc.write_bytes(encrypt(odd, passphrase, "1"))
    proc = run("decrypt", str(enc), str(tmp_path / "odd.onnx"), key=passphrase)
    assert proc.returncode != 0
    assert b"authentication failed" in proc.stderr
    # The authenticated formats carry it unchanged.
    enc.write_bytes(encrypt(odd, passphrase, "3"))
    proc = run("decrypt", str(enc), str(tmp_path / "odd.onnx"), key=passphrase)
    assert proc.returncode == 0, proc.stderr.decode()
    assert (tmp_path / "odd.onnx").read_bytes() == odd
