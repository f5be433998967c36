"""Remote loads against download-then-load, on loopback (docs/remote.md, "Measured").

Starts nginx and moto's S3 server (tests/remote/servers.py), serves single-file models of
BENCH_SIZES gigabytes (default "0.5 3"; random float payloads) from the stores of BENCH_STORES
(default "HTTP S3"; moto serves about 14 MB/s, so S3 at 3 GB takes most of an hour), and times,
best of BENCH_RUNS (default 2) runs, each in a fresh process:
- `ol.load(URL)` (HTTP and S3);
- the standard tool's plain download (curl for HTTP, boto3's transfer manager — what `aws s3 cp`
  runs — for S3), then the same download followed by `ol.load` of the file;
- the bytes the server sent for `onnx-light info URL` (metadata only).
Prints a Markdown table, a row as soon as it is measured. Needs the installed wheel, the release tool, curl, nginx and moto.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "remote"))
import servers  # noqa: E402

BIN = os.environ.get("ONNX_LIGHT_BIN", os.path.join(ROOT, "target", "release", "onnx-light"))
RUNS = int(os.environ.get("BENCH_RUNS", "2"))
SIZES = [float(s) for s in os.environ.get("BENCH_SIZES", "0.5 3").split()]
STORES = os.environ.get("BENCH_STORES", "HTTP S3").split()


def make_model(path: str, gb: float) -> None:
    """A MatMul chain whose 64 MiB float initializers add up to about ``gb`` GB (built and written
    with onnx_light's onnx-compatible helpers: protobuf cannot serialize a model over 2 GB)."""
    import onnx_light as onnx
    from onnx_light import helper, numpy_helper
    n = max(1, int(gb * 1e9 / (64 << 20)))
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal((4096, 4096), dtype=np.float32), f"w{i}")
             for i in range(n)]
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"y{i - 1}", f"w{i}"], [f"y{i}"])
             for i in range(n)]
    g = helper.make_graph(nodes, "chain",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4096])],
                          [helper.make_tensor_value_info(f"y{n - 1}", onnx.TensorProto.FLOAT,
                                                         [1, 4096])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, path)


def timed(code: str, env=None) -> float:
    """Best wall time of ``code`` run in a fresh Python process, RUNS times."""
    best = float("inf")
    for _ in range(RUNS):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    work = tempfile.mkdtemp(prefix="bench-remote-")
    www = os.path.join(work, "www")
    os.makedirs(www)
    nginx = servers.Nginx(work, www)
    moto = servers.Moto(work)
    env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
               AWS_REGION="us-east-1", AWS_ENDPOINT_URL=moto.endpoint, AWS_ALLOW_HTTP="true")
    import boto3
    s3 = boto3.client("s3", endpoint_url=moto.endpoint, region_name="us-east-1",
                      aws_access_key_id="bench", aws_secret_access_key="bench")
    s3.create_bucket(Bucket="bench")
    print("| model | store | what | best time | rate |")
    print("|---|---|---|---|---|", flush=True)

    def row(model, store, what, secs=None):
        if secs is None:
            print(f"| {model} | {store} | {what} | | |", flush=True)
        else:
            print(f"| {model} | {store} | {what} | {secs:.2f} s | {size / secs / 1e6:.0f} MB/s |",
                  flush=True)

    try:
        for gb in SIZES:
            name = f"m{gb}.onnx"
            path = os.path.join(www, name)
            make_model(path, gb)
            size = os.path.getsize(path)
            if "S3" in STORES:
                s3.upload_file(path, "bench", name)
            url = f"{nginx.url}/{name}"
            dl = os.path.join(work, "dl.onnx")
            load = "import onnx_light as ol; ol.load({!r})"
            curl = f"import subprocess; subprocess.run(['curl', '-sf', '-o', {dl!r}, {url!r}], check=True)"
            boto = ("import boto3; boto3.client('s3').download_file('bench', {!r}, {!r})"
                    .format(name, dl))
            cases = [
                ("HTTP", "onnx_light: ol.load(URL)", load.format(url)),
                ("HTTP", "curl download", curl),
                ("HTTP", "curl download, then ol.load(file)", curl + "; " + load.format(dl)),
                ("S3", "onnx_light: ol.load(URL)", load.format(f"s3://bench/{name}")),
                ("S3", "boto3 download (aws s3 cp's transfer manager)", boto),
                ("S3", "boto3 download, then ol.load(file)", boto + "; " + load.format(dl)),
            ]
            model = f"{size / 1e9:.2f} GB"
            for store, what, code in cases:
                if store in STORES:
                    row(model, store, what, timed(code, env))
            nginx.clear_log()
            subprocess.run([BIN, "info", url], check=True, capture_output=True, env=env)
            info_bytes = nginx.bytes_sent()
            row(model, "HTTP", f"`onnx-light info URL`: {info_bytes} bytes sent "
                f"({100 * info_bytes / size:.4f}% of the file)")
            os.remove(path)
            if "S3" in STORES:
                s3.delete_object(Bucket="bench", Key=name)
            if os.path.exists(dl):
                os.remove(dl)
    finally:
        nginx.stop()
        moto.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
