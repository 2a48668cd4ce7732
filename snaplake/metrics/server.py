"""Serving the metrics: the ``/metrics``, ``/healthz`` and ``/readyz`` HTTP server, and pushes.

:func:`serve` exposes a :class:`~snaplake.metrics.recording.SnaplakeMetrics`
registry for Prometheus to scrape (with the daemon's health probes);
:func:`push_to_gateway` pushes it to a Pushgateway for batch jobs nobody
scrapes; :func:`exposition` renders a registry in the format asked for.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client import push_to_gateway as _push_to_gateway
from prometheus_client.exposition import choose_encoder

from snaplake.metrics.recording import SnaplakeMetrics, default_metrics

__all__ = ["HealthStatus", "MetricsServer", "exposition", "push_to_gateway", "serve"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthStatus:
    """Answer of a health probe.

    Attributes:
        ok: 200 when true, 503 when false.
        detail: One line for the response body (no secrets).
    """

    ok: bool
    detail: str = "ok"


def exposition(registry: CollectorRegistry, *, accept: str | None = None) -> tuple[bytes, str]:
    """Render ``registry`` in the format the ``Accept`` header asks for.

    Returns:
        ``(body, content_type)``: Prometheus text format 0.0.4 unless
        OpenMetrics is asked for.
    """
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type


class MetricsServer:
    """HTTP server for ``/metrics``, ``/healthz`` and ``/readyz`` on a daemon thread.

    Build it with :func:`serve`.

    Attributes:
        host: The bound address.
        port: The bound port (useful when 0 was asked for).
    """

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        addr: str,
        port: int,
        liveness: Callable[[], HealthStatus] | None = None,
        readiness: Callable[[], HealthStatus] | None = None,
    ) -> None:
        handler = _make_handler(registry, liveness=liveness, readiness=readiness)
        self._server = ThreadingHTTPServer((addr, port), handler)
        self._server.daemon_threads = True
        self.host = addr
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="snaplake-metrics-http", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://host:port`` of the server."""
        return f"http://{self.host}:{self.port}"

    def close(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _make_handler(
    registry: CollectorRegistry,
    *,
    liveness: Callable[[], HealthStatus] | None,
    readiness: Callable[[], HealthStatus] | None,
) -> type[BaseHTTPRequestHandler]:
    probes: Mapping[str, Callable[[], HealthStatus] | None] = {
        "/healthz": liveness,
        "/readyz": readiness,
    }

    class _Handler(BaseHTTPRequestHandler):
        server_version = "snaplake-metrics"

        def do_GET(self) -> None:  # http.server's name
            path = self.path.split("?", 1)[0]
            if path in ("/metrics", "/"):
                body, content_type = exposition(registry, accept=self.headers.get("Accept"))
                self._reply(200, body, content_type)
            elif path in probes:
                probe = probes[path]
                status = probe() if probe is not None else HealthStatus(ok=True)
                self._reply(
                    200 if status.ok else 503,
                    (status.detail + "\n").encode(),
                    "text/plain; charset=utf-8",
                )
            else:
                self._reply(404, b"not found: try /metrics, /healthz or /readyz\n", "text/plain")

        def _reply(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("metrics http: %s", format % args)

    return _Handler


def serve(
    port: int,
    *,
    addr: str = "127.0.0.1",
    metrics: SnaplakeMetrics | None = None,
    liveness: Callable[[], HealthStatus] | None = None,
    readiness: Callable[[], HealthStatus] | None = None,
) -> MetricsServer:
    """Serve the metrics over HTTP for Prometheus to scrape, on a background thread.

    A Spark driver or any writer calls ``snaplake.metrics.serve(9465)`` once;
    every commit the process makes afterwards appears under ``/metrics``.

    Args:
        port: TCP port; 0 picks a free one (read it from ``.port``).
        addr: Address to bind; the loopback by default (expose deliberately).
        metrics: What to serve; :func:`default_metrics` when ``None``.
        liveness: Probe answering ``/healthz``; always 200 when ``None``.
        readiness: Probe answering ``/readyz``; always 200 when ``None``.

    Returns:
        The running server; ``close()`` stops it.

    Raises:
        OSError: the address cannot be bound (port in use, bad address).
    """
    m = metrics if metrics is not None else default_metrics()
    server = MetricsServer(
        registry=m.registry, addr=addr, port=port, liveness=liveness, readiness=readiness
    )
    logger.info("serving metrics on %s/metrics", server.url)
    return server


def push_to_gateway(
    gateway: str,
    *,
    job: str,
    grouping_key: Mapping[str, str] | None = None,
    metrics: SnaplakeMetrics | None = None,
    timeout_s: float = 30.0,
) -> None:
    """Push the metrics to a Prometheus Pushgateway (for batch jobs nobody scrapes).

    Call it at the end of the job (or periodically); it replaces the group's
    previous push.

    Args:
        gateway: ``host:port`` or URL of the Pushgateway.
        job: The ``job`` grouping label, e.g. ``"nightly-ingest"``.
        grouping_key: Further grouping labels (bounded values only).
        metrics: What to push; :func:`default_metrics` when ``None``.
        timeout_s: HTTP timeout, seconds.

    Raises:
        OSError: the gateway cannot be reached or refused the push.
    """
    m = metrics if metrics is not None else default_metrics()
    _push_to_gateway(
        gateway,
        job=job,
        registry=m.registry,
        grouping_key=dict(grouping_key or {}),
        timeout=timeout_s,
    )
