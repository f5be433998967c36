"""Real servers for the remote-model tests: moto's S3 server, Azurite (Microsoft's Azure Storage
emulator, from the npm registry), nginx (HTTP and HTTPS with a test CA made here), and a small
fault-injecting HTTP proxy. Each runs as its own process (the proxy
as a thread of the test process) on a free loopback port, and is stopped at the end."""

import datetime
import os
import shutil
import socket
import subprocess
import sys
import threading
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, what: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout} s")


class Moto:
    """moto's S3 server (``python -m moto.server``)."""

    def __init__(self, workdir: str):
        self.port = free_port()
        self.log = open(os.path.join(workdir, "moto.log"), "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc, "moto server")
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()


class Azurite:
    """Azurite's blob service (``azurite-blob``, its path in ``ONNXL_AZURITE_BIN``), in memory."""

    # The emulator's well-known development account (public, documented by Microsoft).
    ACCOUNT = "devstoreaccount1"
    KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
           "KBHBeksoGMGw==")

    def __init__(self, workdir: str):
        exe = os.environ.get("ONNXL_AZURITE_BIN", "azurite-blob")
        self.port = free_port()
        self.log = open(os.path.join(workdir, "azurite.log"), "wb")
        self.proc = subprocess.Popen(
            [exe, "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--inMemoryPersistence",
             "--silent", "--skipApiVersionCheck"],
            cwd=workdir,
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc, "azurite")
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.connection_string = (
            f"DefaultEndpointsProtocol=http;AccountName={self.ACCOUNT};AccountKey={self.KEY};"
            f"BlobEndpoint={self.endpoint}/{self.ACCOUNT};")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()


def make_ca_and_cert(workdir: str) -> tuple:
    """A test CA and a server certificate for 127.0.0.1 / localhost signed by it; returns
    (ca.pem, cert.pem, key.pem) paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "onnx_light test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, key_cert_sign=True, crl_sign=True,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = tuple(os.path.join(workdir, n) for n in ("ca.pem", "cert.pem", "key.pem"))
    with open(paths[0], "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(paths[1], "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths[2], "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return paths


class Nginx:
    """nginx serving ``root`` over HTTP and HTTPS (ranges, ETags, If-Match: its static module);
    the access log records the bytes sent for each request."""

    def __init__(self, workdir: str, root: str):
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        if not os.path.exists(nginx):
            raise RuntimeError("nginx is not installed (apt-get install nginx-light)")
        self.dir = os.path.join(workdir, "nginx")
        os.makedirs(os.path.join(self.dir, "logs"), exist_ok=True)
        self.ca, cert, key = make_ca_and_cert(workdir)
        self.port, self.tls_port = free_port(), free_port()
        self.access_log = os.path.join(self.dir, "logs", "access.log")
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""
worker_processes 1;
{"user root;" if os.geteuid() == 0 else ""}
daemon off;
pid {self.dir}/nginx.pid;
error_log {self.dir}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
    log_format bytes '$request_method $uri $status $bytes_sent';
    access_log {self.access_log} bytes;
    client_body_temp_path {self.dir}/body;
    proxy_temp_path {self.dir}/proxy;
    fastcgi_temp_path {self.dir}/fastcgi;
    uwsgi_temp_path {self.dir}/uwsgi;
    scgi_temp_path {self.dir}/scgi;
    types {{ }}
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{self.port};
        listen 127.0.0.1:{self.tls_port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        root {root};
    }}
}}
""")
        self.log = open(os.path.join(self.dir, "stdout.log"), "wb")
        self.proc = subprocess.Popen([nginx, "-p", self.dir, "-c", conf],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc, "nginx")
        wait_port(self.tls_port, self.proc, "nginx (TLS)")
        self.url = f"http://127.0.0.1:{self.port}"
        self.tls_url = f"https://localhost:{self.tls_port}"

    def bytes_sent(self) -> int:
        """Bytes nginx sent (headers and bodies) for the requests logged so far."""
        with open(self.access_log) as f:
            return sum(int(line.split()[-1]) for line in f if line.strip())

    def clear_log(self) -> None:
        open(self.access_log, "w").close()
        # (nginx appends through its own descriptor: truncating keeps it writing at offset 0+)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()


class FaultProxy:
    """An HTTP proxy in front of ``upstream`` (host, port), one request per connection. Faults
    are armed per test: ``status`` (answer the next N requests with this status), ``drop`` (cut
    the next N ranged responses after half their body), ``stall`` (the same with no body at
    all), ``etag`` (rewrite ETag headers of HEAD
    responses), ``always`` (answer every request with this status). Counts requests and the
    body bytes it relayed, and logs ``METHOD PATH`` lines in order."""

    def __init__(self, upstream_port: int):
        self.upstream = ("127.0.0.1", upstream_port)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.lock = threading.Lock()
        self.reset()
        self.running = True
        threading.Thread(target=self._serve, daemon=True).start()

    def reset(self) -> None:
        with getattr(self, "lock", threading.Lock()):
            self.faults = {}
            self.requests = []
            self.relayed = 0
            self.injected = 0

    def arm(self, **faults) -> None:
        with self.lock:
            self.faults.update(faults)

    def _take(self, name):
        with self.lock:
            f = self.faults.get(name)
            if f is None:
                return None
            status, n = f if isinstance(f, tuple) else (f, None)
            if n is not None:
                if n <= 0:
                    return None
                self.faults[name] = (status, n - 1)
            self.injected += 1
            return status

    def _serve(self) -> None:
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    @staticmethod
    def _read_head(s: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                return b""
            data += chunk
        return data

    def _handle(self, conn: socket.socket) -> None:
        try:
            with conn:
                while True:
                    if not self._one(conn):
                        return
        except OSError:
            return

    def _one(self, conn: socket.socket) -> bool:
        data = self._read_head(conn)
        if not data:
            return False
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        method, path = lines[0].split(b" ")[:2]
        headers = [l for l in lines[1:] if not l.lower().startswith(b"connection:")]
        length = next((int(l.split(b":", 1)[1]) for l in headers
                       if l.lower().startswith(b"content-length:")), 0)
        while len(rest) < length:
            rest += conn.recv(65536)
        with self.lock:
            self.requests.append(f"{method.decode()} {path.decode()}")
        ranged = any(l.lower().startswith(b"range:") for l in headers)
        status = self._take("always") or self._take("status")
        if status:
            conn.sendall(b"HTTP/1.1 %d Injected\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                         % status)
            return False
        with socket.create_connection(self.upstream) as up:
            up.sendall(b"\r\n".join([lines[0]] + headers + [b"Connection: close"]) + b"\r\n\r\n"
                       + rest)
            resp = b""
            while True:
                chunk = up.recv(1 << 20)
                if not chunk:
                    break
                resp += chunk
        rhead, _, body = resp.partition(b"\r\n\r\n")
        if method == b"HEAD" and self.faults.get("etag"):
            rl = [l if not l.lower().startswith(b"etag:") else b'ETag: "rewritten"'
                  for l in rhead.split(b"\r\n")]
            rhead = b"\r\n".join(rl)
        rhead = b"\r\n".join(l for l in rhead.split(b"\r\n")
                             if not l.lower().startswith(b"connection:"))
        if ranged and method == b"GET" and self._take("stall"):
            conn.sendall(rhead + b"\r\nConnection: close\r\n\r\n")
            conn.shutdown(socket.SHUT_RDWR)
            return False
        if ranged and method == b"GET" and len(body) > 1 and self._take("drop"):
            conn.sendall(rhead + b"\r\nConnection: close\r\n\r\n" + body[: len(body) // 2])
            with self.lock:
                self.relayed += len(body) // 2
            conn.shutdown(socket.SHUT_RDWR)
            return False
        conn.sendall(rhead + b"\r\nConnection: close\r\n\r\n" + body)
        with self.lock:
            self.relayed += len(body)
        return False

    def stop(self) -> None:
        self.running = False
        self.sock.close()
