"""Remote models against real servers started here (servers.py): moto's S3 server, nginx over
HTTP and HTTPS (a test CA made here), and a fault-injecting proxy. Every remote load is compared
with the local load of the same files (serialized bytes); the CLI (``ONNX_LIGHT_BIN``), the
Python package and the C ABI (``ONNX_LIGHT_CLIB``) are each driven with URLs."""

import ctypes
import glob
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as OnnxTensor, helper

import onnx_light as ol
from onnx_light import _native

sys.path.insert(0, os.path.dirname(__file__))
import servers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("ONNX_LIGHT_BIN", os.path.join(ROOT, "target", "release", "onnx-light"))
CLIB = os.environ.get("ONNX_LIGHT_CLIB", os.path.join(ROOT, "target", "release", "libonnx_light.so"))
BUCKET = "models"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return str(tmp_path_factory.mktemp("remote"))


@pytest.fixture(scope="module")
def env(work):
    """Servers up, the standard AWS environment pointing at moto (fast retries for the tests)."""
    moto = servers.Moto(work)
    www = os.path.join(work, "www")
    os.makedirs(www)
    nginx = servers.Nginx(work, www)
    http_proxy = servers.FaultProxy(nginx.port)
    s3_proxy = servers.FaultProxy(moto.port)
    saved = dict(os.environ)
    os.environ.update({
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": moto.endpoint, "AWS_ALLOW_HTTP": "true",
        "ONNXL_REMOTE_RETRIES": "3", "ONNXL_REMOTE_TIMEOUT": "20",
    })
    import boto3
    s3 = boto3.client("s3", endpoint_url=moto.endpoint)
    s3.create_bucket(Bucket=BUCKET)
    yield dict(moto=moto, nginx=nginx, www=www, s3=s3, http_proxy=http_proxy,
               s3_proxy=s3_proxy, work=work)
    os.environ.clear()
    os.environ.update(saved)
    http_proxy.stop()
    s3_proxy.stop()
    nginx.stop()
    moto.stop()


def put_dir(env, local_dir: str, prefix: str) -> None:
    """Uploads every file of ``local_dir`` to S3 under ``prefix`` and copies it under nginx's
    root at the same path."""
    for name in os.listdir(local_dir):
        src = os.path.join(local_dir, name)
        env["s3"].upload_file(src, BUCKET, f"{prefix}/{name}")
        dst = os.path.join(env["www"], prefix, name)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(src, dst)


def same(remote, local) -> None:
    assert remote.SerializeToString() == local.SerializeToString()


def weights_model(n: int = 4, size: int = 1 << 18) -> onnx.ModelProto:
    """A MatMul chain with ``n`` float initializers of ``size`` x 4 bytes each, plus small ones."""
    rng = np.random.default_rng(7)
    side = int(np.sqrt(size))
    inits, nodes, prev = [], [], "x"
    for i in range(n):
        w = rng.standard_normal((side, side)).astype(np.float32)
        inits.append(onnx.numpy_helper.from_array(w, f"w{i}"))
        inits.append(onnx.numpy_helper.from_array(np.float32([i]), f"b{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Add", [f"m{i}", f"b{i}"], [f"y{i}"]))
        prev = f"y{i}"
    g = helper.make_graph(nodes, "chain",
                          [helper.make_tensor_value_info("x", OnnxTensor.FLOAT, [1, side])],
                          [helper.make_tensor_value_info(prev, OnnxTensor.FLOAT, [1, side])],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def backend_models(k: int = 6):
    data = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    files = sorted(glob.glob(os.path.join(data, "*", "*", "model.onnx")), key=os.path.getsize)
    assert len(files) > 100, data
    return files[-k:]


def cli(*args, ok=True):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, env=os.environ)
    if ok:
        assert r.returncode == 0, r.stderr
    else:
        assert r.returncode != 0, r.stdout
    return r


# ---- loads: single-file and external-data models, S3 and HTTP(S)

def test_single_file_models_s3_http_https(env):
    models = [os.path.join(ROOT, "samples", "mlp.onnx")] + backend_models()
    for i, path in enumerate(models):
        d = os.path.join(env["work"], f"single{i}")
        os.makedirs(d)
        shutil.copyfile(path, os.path.join(d, "model.onnx"))
        put_dir(env, d, f"single{i}")
        local = ol.load(path)
        same(ol.load(f"s3://{BUCKET}/single{i}/model.onnx"), local)
        same(ol.load(f"{env['nginx'].url}/single{i}/model.onnx"), local)
        same(ol.load(f"s3://{BUCKET}/single{i}/model.onnx", no_copy=True), local)
        got = []
        same(ol.load(f"{env['nginx'].url}/single{i}/model.onnx", progress=got.append), local)
        assert sum(got) == os.path.getsize(path), got
    os.environ["AWS_CA_BUNDLE"] = env["nginx"].ca
    try:
        same(ol.load(f"{env['nginx'].tls_url}/single0/model.onnx"), ol.load(models[0]))
    finally:
        del os.environ["AWS_CA_BUNDLE"]
    # Without the test CA the server's certificate is refused.
    with pytest.raises(Exception, match="certificate|Certificate|tls|TLS"):
        ol.load(f"{env['nginx'].tls_url}/single0/model.onnx")


@pytest.mark.parametrize("layout", ["one_file", "split", "per_tensor", "checksum"])
def test_external_data(env, layout):
    d = os.path.join(env["work"], f"ext-{layout}")
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    m = weights_model()
    if layout == "one_file":
        onnx.save_model(m, path, save_as_external_data=True, location="model.data",
                        size_threshold=0)
    elif layout == "split":
        ol.save(ol.load_from_string(m.SerializeToString()), path, save_as_external_data=True,
                max_file_size=600_000, size_threshold=0)
        assert len(os.listdir(d)) > 2
    elif layout == "per_tensor":
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=False,
                        size_threshold=0)
    else:
        ol.save(ol.load_from_string(m.SerializeToString()), path, save_as_external_data=True,
                checksum=True, size_threshold=0)
    put_dir(env, d, f"ext-{layout}")
    local = ol.load(path)
    same(ol.load(f"s3://{BUCKET}/ext-{layout}/model.onnx"), local)
    same(ol.load(f"{env['nginx'].url}/ext-{layout}/model.onnx"), local)
    same(ol.load(f"{env['nginx'].url}/ext-{layout}/model.onnx", no_copy=True), local)
    # Real weights, as onnx reads them.
    fresh = weights_model()
    assert onnx.numpy_helper.to_array(ol.load(f"s3://{BUCKET}/ext-{layout}/model.onnx")
                                      .graph.initializer[0]).tobytes() == \
        onnx.numpy_helper.to_array(fresh.graph.initializer[0]).tobytes()
    r = cli("check", f"s3://{BUCKET}/ext-{layout}/model.onnx")
    assert "OK" in r.stdout


def test_checksum_mismatch_and_path_rules(env):
    d = os.path.join(env["work"], "tamper")
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    ol.save(ol.load_from_string(weights_model(1).SerializeToString()), path,
            save_as_external_data=True, checksum=True, size_threshold=0)
    with open(os.path.join(d, "model.onnx.data"), "r+b") as f:
        f.seek(100)
        f.write(b"\xff")
    put_dir(env, d, "tamper")
    r = cli("check", f"s3://{BUCKET}/tamper/model.onnx", ok=False)
    assert "checksum mismatch" in r.stderr and "s3://models/tamper/model.onnx.data" in r.stderr
    # A location leaving the model's prefix, or naming another bucket or host, is refused.
    for bad in ["../single0/model.onnx", "s3://other/w.bin", "http://evil/w.bin", "/abs/w.bin"]:
        m = weights_model(1)
        t = m.graph.initializer[0]
        t.ClearField("raw_data")
        t.data_location = OnnxTensor.EXTERNAL
        t.external_data.add(key="location", value=bad)
        t.external_data.add(key="length", value="4")
        bd = os.path.join(env["work"], "bad")
        os.makedirs(bd, exist_ok=True)
        onnx.save_model(m, os.path.join(bd, "model.onnx"))
        put_dir(env, bd, "bad")
        with pytest.raises(Exception, match="path refused"):
            ol.load(f"s3://{BUCKET}/bad/model.onnx")


def test_encrypted(env):
    d = os.path.join(env["work"], "enc")
    os.makedirs(d)
    m = ol.load_from_string(weights_model(2).SerializeToString())
    ol.save(m, os.path.join(d, "model.onnx"), key="pass phrase")
    ol.save(m, os.path.join(d, "weights.onnx"), save_as_external_data=True, key="pass phrase",
            size_threshold=0)
    put_dir(env, d, "enc")
    same(ol.load(f"s3://{BUCKET}/enc/model.onnx", key="pass phrase"),
         ol.load(os.path.join(d, "model.onnx"), key="pass phrase"))
    # Encrypted weight files are refused by their magic, never read as plaintext.
    with pytest.raises(Exception, match="encrypted weight"):
        ol.load(f"s3://{BUCKET}/enc/weights.onnx", key="pass phrase")


# ---- metadata-only loads: ranged reads that skip the payloads

def sparse_model(path: str, tensors: int, each: int) -> None:
    """A single-file model of ``tensors`` float initializers of ``each`` bytes (zeros, written
    as holes: the file is sparse), wire format written by hand."""
    def varint(v):
        out = bytearray()
        while True:
            b = v & 0x7F
            v >>= 7
            out.append(b | (0x80 if v else 0))
            if not v:
                return bytes(out)

    def field(num, wt, payload=b""):
        return varint(num << 3 | wt) + payload

    def ld(num, body_len, prefix=b""):
        return field(num, 2, varint(body_len)) + prefix

    with open(path, "wb") as f:
        graph = []
        for i in range(tensors):
            name = f"w{i}".encode()
            head = (field(1, 0, varint(each // 4)) + field(2, 0, varint(1))
                    + ld(8, len(name), name) + ld(9, each))
            graph.append((head, each))
        graph_len = sum(len(ld(5, len(h) + n)) + len(h) + n for h, n in graph)
        name = b"big"
        graph_len += len(ld(2, len(name), name))
        opset = field(2, 0, varint(17))
        f.write(field(1, 0, varint(8)) + ld(8, len(opset), opset) + ld(7, graph_len))
        f.write(ld(2, len(name), name))
        for h, n in graph:
            f.write(ld(5, len(h) + n) + h)
            f.seek(n, os.SEEK_CUR)
        f.truncate()


def test_metadata_only_of_a_2gb_model_fetches_under_one_percent(env):
    d = os.path.join(env["www"], "big")
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    sparse_model(path, 36, 64 << 20)   # 2.25 GiB: lengths over 2 GB too
    size = os.path.getsize(path)
    assert size > 2 << 30
    url = f"{env['nginx'].url}/big/model.onnx"
    env["nginx"].clear_log()
    r = cli("info", url)
    sent = env["nginx"].bytes_sent()
    assert "initializers: 36 (payloads not fetched)" in r.stdout
    assert sent < size / 100, (sent, size)
    env["nginx"].clear_log()
    remote = _native.load_path(url, skip_raw_data=True)
    sent = env["nginx"].bytes_sent()
    assert sent < size / 100, (sent, size)
    same(remote, _native.load_path(path, skip_raw_data=True))
    # Backend models metadata-only too, against their local metadata-only load.
    for i, p in enumerate(backend_models()):
        same(_native.load_path(f"s3://{BUCKET}/single{i + 1}/model.onnx", skip_raw_data=True),
             _native.load_path(p, skip_raw_data=True))


# ---- faults between client and server

def test_faults(env):
    proxy, nginx = env["http_proxy"], env["nginx"]
    local = ol.load(os.path.join(env["www"], "ext-split", "model.onnx"))
    url = f"{proxy.url}/ext-split/model.onnx"
    os.environ["ONNXL_REMOTE_PART_SIZE"] = str(64 << 10)
    try:
        # 5xx answers are retried with backoff.
        proxy.reset()
        proxy.arm(status=(503, 2))
        same(ol.load(url), local)
        assert proxy.injected == 2
        proxy.reset()
        proxy.arm(status=(500, 1))
        same(ol.load(url), local)
        # Bodies cut short are resumed, never returned short.
        proxy.reset()
        proxy.arm(drop=(1, 3))
        same(ol.load(url), local)
        assert proxy.injected == 3
        # Persistent failures: clear errors naming the URL (and the range when reading).
        for status, text in [(403, "403"), (404, "not found"), (500, "500")]:
            proxy.reset()
            proxy.arm(always=status)
            with pytest.raises(OSError, match=text) as e:
                ol.load(url)
            assert "/ext-split/model.onnx" in str(e.value)
        proxy.reset()
        proxy.arm(stall=(1, 100))
        with pytest.raises(OSError, match=r"bytes \d+\.\.\d+ of \d+") as e:
            ol.load(url)
        assert "ext-split/model.onnx" in str(e.value)
        # A model that changes between reads is detected (If-Match on the pinned ETag).
        proxy.reset()
        proxy.arm(etag=True)
        with pytest.raises(OSError, match="changed while it was being read"):
            ol.load(url)
    finally:
        del os.environ["ONNXL_REMOTE_PART_SIZE"]
        proxy.reset()
    cli("info", f"{nginx.url}/nope.onnx", ok=False)


# ---- saves, the CLI and the C ABI

def test_save_to_s3_weights_first(env):
    proxy = env["s3_proxy"]
    m = ol.load_from_string(weights_model(3, 1 << 20).SerializeToString())
    os.environ["AWS_ENDPOINT_URL"] = proxy.url
    os.environ["ONNXL_REMOTE_PART_SIZE"] = str(5 << 20)
    try:
        proxy.reset()
        ol.save(m, f"s3://{BUCKET}/saved/model.onnx", save_as_external_data=True,
                size_threshold=0)
        puts = [r for r in proxy.requests if r.startswith(("PUT", "POST"))]
        assert puts and puts[-1].startswith("PUT /models/saved/model.onnx"), puts
        assert any("model.onnx.data" in r for r in puts[:-1]), puts
        ref = os.path.join(env["work"], "saved-local")
        os.makedirs(ref)
        ol.save(ol.load_from_string(weights_model(3, 1 << 20).SerializeToString()),
                os.path.join(ref, "model.onnx"), save_as_external_data=True, size_threshold=0)
        same(ol.load(f"s3://{BUCKET}/saved/model.onnx"), ol.load(os.path.join(ref, "model.onnx")))
    finally:
        os.environ["AWS_ENDPOINT_URL"] = env["moto"].endpoint
        del os.environ["ONNXL_REMOTE_PART_SIZE"]
    # The CLI: convert from and to S3, byte-identical to the local conversion.
    d = os.path.join(env["work"], "cli")
    os.makedirs(d)
    cli("convert", f"s3://{BUCKET}/saved/model.onnx", os.path.join(d, "a.onnx"), "--inline")
    cli("convert", os.path.join(d, "a.onnx"), f"s3://{BUCKET}/cli/b.onnx", "--size-threshold", "0")
    cli("convert", f"s3://{BUCKET}/cli/b.onnx", os.path.join(d, "c.onnx"), "--inline")
    with open(os.path.join(d, "a.onnx"), "rb") as a, open(os.path.join(d, "c.onnx"), "rb") as c:
        assert a.read() == c.read()


def test_storage_options(env):
    """storage_options give a call its endpoint, credentials and client settings over the
    environment's (here: none), for loads and saves; a bad key or value is an error naming it;
    they apply to URLs only."""
    m = ol.load_from_string(weights_model(2, 1 << 16).SerializeToString())
    local = os.path.join(env["work"], "so-local.onnx")
    ol.write_model(m, local)
    local_ext = os.path.join(env["work"], "so-local-ext", "model.onnx")
    os.makedirs(os.path.dirname(local_ext))
    ol.write_model(m, local_ext, save_as_external_data=True, size_threshold=0)
    store = {"aws_endpoint": env["moto"].endpoint, "allow_http": True,
             "aws_access_key_id": "testing", "aws_secret_access_key": "testing",
             "aws_region": "us-east-1", "retries": 2, "timeout": 20, "concurrency": 4}
    url = f"s3://{BUCKET}/storage-options/model.onnx"
    one = f"s3://{BUCKET}/storage-options/one.onnx"
    saved = dict(os.environ)
    for k in ("AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
              "AWS_REGION"):
        del os.environ[k]
    try:
        with pytest.raises(Exception):
            ol.write_model(m, one)  # no endpoint, no credentials: not moto
        ol.write_model(m, one, storage_options=store)
        same(ol.load(one, storage_options=store), ol.load(local))
        # (save leaves the weights as external references: it reads the saved model back)
        ol.save(m, url, save_as_external_data=True, size_threshold=0, storage_options=store)
        assert all(t.data_location == 1 for t in m.graph.initializer)
        got = []
        same(ol.load(url, storage_options=store, progress=got.append), ol.load(local_ext))
        assert sum(got) > 2 * 4 * (1 << 16), got
        with pytest.raises(Exception, match="no_such_key"):
            ol.load(url, storage_options={**store, "no_such_key": "1"})
        with pytest.raises(Exception, match="retries"):
            ol.load(url, storage_options={**store, "retries": "many"})
    finally:
        os.environ.clear()
        os.environ.update(saved)
    with pytest.raises(ValueError, match="URLs only"):
        ol.load(local, storage_options=store)
    with pytest.raises(ValueError, match="URLs only"):
        ol.save(m, local, storage_options=store)


PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_void_p)


class ParseOptions(ctypes.Structure):
    """`OnnxlParseOptions` (include/onnx_light.h), struct size 88."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("raw_data_threshold", ctypes.c_uint64),
                ("alignment", ctypes.c_uint64), ("min_parallel_block_size", ctypes.c_uint64),
                ("max_tensor_size_bytes", ctypes.c_uint64), ("num_threads", ctypes.c_int32),
                ("max_recursion_depth", ctypes.c_uint32), ("file_load_mode", ctypes.c_uint32),
                ("no_copy", ctypes.c_uint8), ("skip_raw_data", ctypes.c_uint8),
                ("reject_unauthenticated", ctypes.c_uint8), ("reserved", ctypes.c_uint8),
                ("max_metadata_bytes", ctypes.c_uint64), ("progress", PROGRESS),
                ("progress_user_data", ctypes.c_void_p),
                ("storage_options", ctypes.POINTER(ctypes.c_char_p))]


class SerializeOptions(ctypes.Structure):
    """`OnnxlSerializeOptions` (include/onnx_light.h), struct size 64."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("raw_data_threshold", ctypes.c_uint64),
                ("alignment", ctypes.c_uint64), ("max_serialized_size_bytes", ctypes.c_uint64),
                ("num_threads", ctypes.c_int32), ("skip_raw_data", ctypes.c_uint8),
                ("use_external_data_location", ctypes.c_uint8), ("reserved", ctypes.c_uint16),
                ("max_external_file_size", ctypes.c_uint64), ("inline_alignment", ctypes.c_uint64),
                ("storage_options", ctypes.POINTER(ctypes.c_char_p))]


def _c_pairs(options):
    """A NULL-terminated C array of key and value strings."""
    flat = [str(x).encode() for kv in options.items() for x in kv] + [None]
    return (ctypes.c_char_p * len(flat))(*flat)


def test_c_abi(env):
    lib = ctypes.CDLL(CLIB)
    lib.onnxl_load_model.argtypes = [ctypes.c_char_p, ctypes.c_void_p,
                                     ctypes.POINTER(ctypes.c_void_p)]
    lib.onnxl_serialize_model.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                          ctypes.POINTER(ctypes.c_void_p)]
    lib.onnxl_buffer_data.restype = ctypes.c_void_p
    lib.onnxl_buffer_data.argtypes = [ctypes.c_void_p]
    lib.onnxl_buffer_size.restype = ctypes.c_size_t
    lib.onnxl_buffer_size.argtypes = [ctypes.c_void_p]
    lib.onnxl_last_error_message.restype = ctypes.c_char_p
    for url in [f"s3://{BUCKET}/ext-one_file/model.onnx",
                f"{env['nginx'].url}/ext-per_tensor/model.onnx"]:
        m = ctypes.c_void_p()
        assert lib.onnxl_load_model(url.encode(), None, ctypes.byref(m)) == 0, \
            lib.onnxl_last_error_message()
        buf = ctypes.c_void_p()
        assert lib.onnxl_serialize_model(m, None, ctypes.byref(buf)) == 0
        data = ctypes.string_at(lib.onnxl_buffer_data(buf), lib.onnxl_buffer_size(buf))
        local = os.path.join(env["www"], url.split("/", 3)[3] if url.startswith("s3") else
                             url.split("/", 3)[3])
        assert data == ol.load(local).SerializeToString()
    m = ctypes.c_void_p()
    assert lib.onnxl_load_model(f"s3://{BUCKET}/nope.onnx".encode(), None, ctypes.byref(m)) != 0
    assert b"s3://models/nope.onnx" in lib.onnxl_last_error_message()
    # The progress callback of the parse options: the pieces received, the files' bytes plus the
    # few bytes read to tell an encrypted weight file from a plain one.
    lib.onnxl_parse_options_default.restype = ParseOptions
    opts = lib.onnxl_parse_options_default()
    assert opts.struct_size == ctypes.sizeof(ParseOptions) == 88
    got = []
    opts.progress = PROGRESS(lambda n, _user: got.append(n))
    url = f"s3://{BUCKET}/ext-one_file/model.onnx"
    assert lib.onnxl_load_model(url.encode(), ctypes.byref(opts), ctypes.byref(m)) == 0, \
        lib.onnxl_last_error_message()
    d = os.path.join(env["www"], "ext-one_file")
    files = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    assert files <= sum(got) <= files + 64, (files, got)
    # Per-call storage options, while the environment names no endpoint or credentials: a
    # load through OnnxlParseOptions.storage_options, a save through OnnxlSerializeOptions'.
    lib.onnxl_serialize_options_default.restype = SerializeOptions
    lib.onnxl_save_model.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    lib.onnxl_model_proto_free.argtypes = [ctypes.c_void_p]

    def serialized(model):
        buf = ctypes.c_void_p()
        assert lib.onnxl_serialize_model(model, None, ctypes.byref(buf)) == 0
        return ctypes.string_at(lib.onnxl_buffer_data(buf), lib.onnxl_buffer_size(buf))

    store = _c_pairs({"aws_endpoint": env["moto"].endpoint, "allow_http": "true",
                      "aws_access_key_id": "testing", "aws_secret_access_key": "testing",
                      "aws_region": "us-east-1", "concurrency": "2"})
    saved = dict(os.environ)
    for k in ("AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
              "AWS_REGION"):
        del os.environ[k]
    try:
        opts = lib.onnxl_parse_options_default()
        assert lib.onnxl_load_model(url.encode(), ctypes.byref(opts), ctypes.byref(m)) != 0
        opts.storage_options = store
        assert lib.onnxl_load_model(url.encode(), ctypes.byref(opts), ctypes.byref(m)) == 0, \
            lib.onnxl_last_error_message()
        so = lib.onnxl_serialize_options_default()
        assert so.struct_size == ctypes.sizeof(SerializeOptions) == 64
        so.storage_options = store
        out = f"s3://{BUCKET}/c-storage-options/model.onnx"
        assert lib.onnxl_save_model(m, out.encode(), ctypes.byref(so)) == 0, \
            lib.onnxl_last_error_message()
        back = ctypes.c_void_p()
        assert lib.onnxl_load_model(out.encode(), ctypes.byref(opts), ctypes.byref(back)) == 0, \
            lib.onnxl_last_error_message()
        assert serialized(back) == serialized(m)
        lib.onnxl_model_proto_free(back)
        opts.storage_options = _c_pairs({"no_such_key": "1"})
        assert lib.onnxl_load_model(url.encode(), ctypes.byref(opts), ctypes.byref(back)) != 0
        assert b"no_such_key" in lib.onnxl_last_error_message()
    finally:
        os.environ.clear()
        os.environ.update(saved)


# ---- Azure Blob Storage (az:// URLs) against Azurite

@pytest.fixture(scope="module")
def azure(work):
    """Azurite up, the environment pointing the Azure client at it (the emulator's account),
    and a container made with Microsoft's own client."""
    from azure.storage.blob import BlobServiceClient
    server = servers.Azurite(work)
    saved = dict(os.environ)
    os.environ.update({"AZURE_STORAGE_USE_EMULATOR": "true",
                       "AZURITE_BLOB_STORAGE_URL": server.endpoint,
                       "ONNXL_REMOTE_RETRIES": "3", "ONNXL_REMOTE_TIMEOUT": "20"})
    service = BlobServiceClient.from_connection_string(server.connection_string)
    container = service.create_container(BUCKET)
    yield dict(server=server, container=container)
    os.environ.clear()
    os.environ.update(saved)
    server.stop()


def put_azure(azure, local_dir: str, prefix: str) -> None:
    for name in os.listdir(local_dir):
        with open(os.path.join(local_dir, name), "rb") as f:
            azure["container"].upload_blob(f"{prefix}/{name}", f, overwrite=True)


def test_azure_loads_saves_and_metadata_only(azure, work):
    # Single-file models, as the local load.
    for i, path in enumerate([os.path.join(ROOT, "samples", "mlp.onnx")] + backend_models(3)):
        d = os.path.join(work, f"az-single{i}")
        os.makedirs(d)
        shutil.copyfile(path, os.path.join(d, "model.onnx"))
        put_azure(azure, d, f"single{i}")
        local = ol.load(path)
        same(ol.load(f"az://{BUCKET}/single{i}/model.onnx"), local)
        same(ol.load(f"azure://{BUCKET}/single{i}/model.onnx", no_copy=True), local)
    # External data split over files, read beside the model.
    d = os.path.join(work, "az-split")
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    ol.save(ol.load_from_string(weights_model().SerializeToString()), path,
            save_as_external_data=True, max_file_size=600_000, size_threshold=0)
    assert len(os.listdir(d)) > 2
    put_azure(azure, d, "split")
    same(ol.load(f"az://{BUCKET}/split/model.onnx"), ol.load(path))
    # Metadata only: the CLI's info, and a skip_raw_data load without the payloads.
    r = cli("info", f"az://{BUCKET}/split/model.onnx")
    assert "initializers: 8" in r.stdout, r.stdout
    meta = ol.load(f"az://{BUCKET}/single0/model.onnx", load_external_data=False)
    assert len(meta.graph.node) == len(ol.load(os.path.join(ROOT, "samples", "mlp.onnx")).graph.node)
    # A save: weights uploaded, the .onnx last; Microsoft's client reads the same bytes back.
    # (each save makes its model's tensors external references, as onnx's save does)
    for url in (f"az://{BUCKET}/saved/model.onnx", os.path.join(work, "az-saved-local", "model.onnx")):
        if not url.startswith("az://"):
            os.makedirs(os.path.dirname(url))
        ol.save(ol.load_from_string(weights_model(3, 1 << 20).SerializeToString()), url,
                save_as_external_data=True, size_threshold=0)
    ref = os.path.join(work, "az-saved-local")
    for name in os.listdir(ref):
        got = azure["container"].download_blob(f"saved/{name}").readall()
        with open(os.path.join(ref, name), "rb") as f:
            assert got == f.read(), name
    same(ol.load(f"az://{BUCKET}/saved/model.onnx"), ol.load(os.path.join(ref, "model.onnx")))
    # Errors name the URL: a missing blob, a missing container.
    with pytest.raises(Exception, match=f"az://{BUCKET}/nothing/model.onnx"):
        ol.load(f"az://{BUCKET}/nothing/model.onnx")
    with pytest.raises(Exception, match="az://no-such-container/m.onnx"):
        ol.load("az://no-such-container/m.onnx")
