"""Real processes for the daemon tests: the daemon, a writer, Prometheus; free ports; logs."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).resolve().with_name("writer_proc.py")
PROMETHEUS_YML = REPO / "grafana" / "prometheus.yml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, *, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def wait_for(
    predicate: Callable[[], bool], *, timeout: float, what: str, step: float = 0.2
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def daemon_config(
    warehouse: Path,
    *,
    daemon_id: str,
    port: int,
    tables: tuple[str, ...] = ("*",),
    intervals: dict[str, str] | None = None,
    lease_ttl: str = "10 s",
    lease_renew: str = "2 s",
    grace: str = "8 s",
    log_level: str = "DEBUG",
    files_interval: str = "1 s",
    extra: str = "",
) -> str:
    iv = {"watch": "1 s", "manifest_merge": "1 s", "compact": "2 s", "expire_snapshots": "1 s"}
    iv.update(intervals or {})
    table_list = ", ".join(f'"{t}"' for t in tables)
    return f"""
log_level = "{log_level}"
[daemon]
id = "{daemon_id}"
lease_ttl = "{lease_ttl}"
lease_renew_interval = "{lease_renew}"
discovery_interval = "5 s"
shutdown_grace = "{grace}"
[metrics]
listen = "127.0.0.1:{port}"
[[warehouse]]
uri = "{warehouse}"
tables = [{table_list}]
[tasks.watch]
interval = "{iv["watch"]}"
files_interval = "{files_interval}"
[tasks.manifest_merge]
interval = "{iv["manifest_merge"]}"
[tasks.compact]
interval = "{iv["compact"]}"
[tasks.expire_snapshots]
interval = "{iv["expire_snapshots"]}"
{extra}
"""


@dataclass
class Proc:
    """A started process with its log file."""

    popen: subprocess.Popen[bytes]
    log: Path
    port: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def stop(self, sig: int = signal.SIGTERM, *, timeout: float = 20.0) -> tuple[int, float]:
        """Send ``sig`` and wait; returns (exit code, seconds until exit)."""
        t0 = time.monotonic()
        self.send(sig)
        try:
            code = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            code = self.popen.wait()
        return code, time.monotonic() - t0


# What the ``snaplake`` console script runs (``[project.scripts]``), without needing it on PATH.
_CLI = [sys.executable, "-c", "from snaplake.cli import main; main()"]


def _spawn_daemon(
    cfg: Path, workdir: Path, name: str, *, env: dict[str, str] | None = None, cli: bool = False
) -> Proc:
    """Run ``python -m snaplake.daemon --config cfg`` (``cli``: ``snaplake daemon --config
    cfg``, as users start it), logging to ``workdir/<name>.log``."""
    log = workdir / f"{name}.log"
    argv = [*_CLI, "daemon"] if cli else [sys.executable, "-m", "snaplake.daemon"]
    popen = subprocess.Popen(
        [*argv, "--config", str(cfg)],
        cwd=REPO,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO)},
    )
    return Proc(popen=popen, log=log)


def start_daemon(
    config_text: str,
    workdir: Path,
    name: str,
    port: int,
    *,
    env: dict[str, str] | None = None,
    cli: bool = False,
) -> Proc:
    """Start a daemon with ``config_text``; ``env`` adds environment variables; ``cli``
    starts it through the ``snaplake daemon`` command."""
    cfg = workdir / f"{name}.toml"
    cfg.write_text(config_text)
    proc = _spawn_daemon(cfg, workdir, name, env=env, cli=cli)
    proc.port = port
    wait_for(
        lambda: not proc.alive() or http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200,
        timeout=30,
        what=f"daemon {name} to become ready",
    )
    assert proc.alive(), proc.text()
    return proc


_METRICS_URL = re.compile(r"metrics on http://127\.0\.0\.1:(\d+)")


def start_daemon_file(cfg: Path, workdir: Path, name: str) -> Proc:
    """Start a daemon from the existing config file ``cfg`` (``listen`` port 0 allowed).

    The port is read from the daemon's "starting ... metrics on URL" log line; returns once
    ``/readyz`` answered (200 or 503: the first discovery and lease round have run).
    """
    proc = _spawn_daemon(cfg, workdir, name)

    def port() -> int:
        found = _METRICS_URL.search(proc.text())
        return int(found.group(1)) if found else 0

    wait_for(lambda: not proc.alive() or port() > 0, timeout=30, what=f"daemon {name}'s port")
    assert proc.alive(), proc.text()
    proc.port = port()

    def first_round_done() -> bool:
        status, body = http_get(f"http://127.0.0.1:{proc.port}/readyz")
        return status in (200, 503) and "discovering" not in body

    wait_for(
        lambda: not proc.alive() or first_round_done(),
        timeout=30,
        what=f"daemon {name}'s first lease round",
    )
    assert proc.alive(), proc.text()
    return proc


def start_writer(
    warehouse: Path,
    table: str,
    workdir: Path,
    *,
    seconds: float,
    commits: int = 0,
    interval_s: float = 0.0,
    rows: int = 20,
    metrics_port: int = 0,
    hold: bool = False,
    name: str = "writer",
) -> Proc:
    log = workdir / f"{name}.log"
    cmd = [
        sys.executable, str(WRITER), "--warehouse", str(warehouse), "--table", table,
        "--seconds", str(seconds), "--commits", str(commits), "--interval-s", str(interval_s),
        "--rows", str(rows),
        "--summary", str(workdir / f"{name}.json"), "--metrics-port", str(metrics_port),
    ]  # fmt: skip
    if hold:
        cmd.append("--hold")
    popen = subprocess.Popen(cmd, cwd=REPO, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    proc = Proc(popen=popen, log=log, port=metrics_port)
    wait_for(lambda: "WRITING" in proc.text() or not proc.alive(), timeout=30, what="writer")
    return proc


def writer_summary(workdir: Path, name: str = "writer") -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((workdir / f"{name}.json").read_text())
    return summary


def start_prometheus(workdir: Path, *, daemon_ports: list[int], writer_ports: list[int]) -> Proc:
    """Run Debian's prometheus on 127.0.0.1 with the repository's scrape config, 1 s interval."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed (make prometheus)"
    text = PROMETHEUS_YML.read_text()
    text = text.replace("scrape_interval: 15s", "scrape_interval: 1s")
    text = text.replace('["127.0.0.1:9464"]', json.dumps([f"127.0.0.1:{p}" for p in daemon_ports]))
    text = text.replace('["127.0.0.1:9465"]', json.dumps([f"127.0.0.1:{p}" for p in writer_ports]))
    cfg = workdir / "prometheus.yml"
    cfg.write_text(text)
    port = free_port()
    log = workdir / "prometheus.log"
    popen = subprocess.Popen(
        [
            binary,
            f"--config.file={cfg}",
            f"--storage.tsdb.path={workdir / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    proc = Proc(popen=popen, log=log, port=port)
    wait_for(
        lambda: http_get(f"http://127.0.0.1:{port}/-/ready")[0] == 200 or not proc.alive(),
        timeout=30,
        what="prometheus",
    )
    assert proc.alive(), proc.text()
    return proc


def start_pushgateway(workdir: Path) -> Proc:
    """Run Debian's prometheus-pushgateway on 127.0.0.1 (a free port), without persistence.

    Debian's build defaults ``--persistence.file`` to /var/lib/prometheus/pushgateway.data;
    an empty value turns persistence off, so every gateway starts empty and writes nothing
    outside ``workdir``. The caller stops it (``proc.stop()``) in its teardown.
    """
    binary = shutil.which("prometheus-pushgateway")
    assert binary, "prometheus-pushgateway is not installed (make prometheus)"
    port = free_port()
    log = workdir / "pushgateway.log"
    popen = subprocess.Popen(
        [
            binary,
            f"--web.listen-address=127.0.0.1:{port}",
            "--persistence.file=",
            "--log.level=warn",
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    proc = Proc(popen=popen, log=log, port=port)
    try:
        wait_for(
            lambda: http_get(f"http://127.0.0.1:{port}/-/ready")[0] == 200 or not proc.alive(),
            timeout=30,
            what="pushgateway",
        )
        assert proc.alive(), proc.text()
    except BaseException:
        proc.stop(signal.SIGKILL)
        raise
    return proc


def promql(prom: Proc, expr: str) -> list[dict[str, Any]]:
    """Evaluate an instant query through Prometheus's HTTP API; returns the result vector."""
    url = f"http://127.0.0.1:{prom.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    status, body = http_get(url, timeout=10)
    assert status == 200, f"{expr}: HTTP {status} {body}"
    doc = json.loads(body)
    assert doc["status"] == "success", doc
    result = doc["data"]["result"]
    return result if isinstance(result, list) else [result]


_LINE = re.compile(r"^(\S+)Z (\w+) (\S+) \[[^\]]*\] (.*)$")


def log_events(text: str, pattern: str) -> list[tuple[float, re.Match[str]]]:
    """``(epoch seconds, match)`` for daemon log lines whose message matches ``pattern``."""
    out = []
    rx = re.compile(pattern)
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        found = rx.search(m.group(4))
        if found:
            ts = datetime.fromisoformat(m.group(1) + "+00:00").timestamp()
            out.append((ts, found))
    return out


def scrape(port: int) -> str:
    status, body = http_get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    return body


def sample_value(exposition: str, name: str, **labels: str) -> float | None:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    from prometheus_client.parser import text_string_to_metric_families

    total, found = 0.0, False
    for family in text_string_to_metric_families(exposition):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
                found = True
    return total if found else None
