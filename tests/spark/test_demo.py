"""`make demo` in CI: the shortened flights streaming job (20 files) runs and its checks pass.

One run covers what a new user sees (issue 10, item 13): why it pauses (Spark
starting, the planned crash), that a re-run replaces ``demo.flights``, what to
try next (the printed ``snaplake`` commands are run here and must succeed), and
``--serve`` keeping the daemon's metrics endpoint up until Ctrl-C.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest
from tests.spark.conftest import REPO_ROOT, spark_env

import snaplake

pytestmark = [pytest.mark.spark, pytest.mark.integration]


class _Lines:
    """Collect a process's stdout lines on a thread; wait for one to appear."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._pump, args=(proc,), daemon=True)
        self._thread.start()

    def _pump(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()

    def wait_for(self, text: str, *, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for line in self.lines:
                    if text in line:
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    raise AssertionError(f"never printed {text!r}:\n" + "\n".join(self.lines))
                self._cond.wait(min(left, 1.0))

    def text(self) -> str:
        self._thread.join(timeout=30)
        return "\n".join(self.lines)


def _scrape(url: str, *, timeout_s: float = 60.0) -> str:
    """GET ``url`` once the daemon listens (it starts right after the demo says so)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return str(response.read().decode())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_demo_ci_variant_passes_its_checks_and_says_what_next(tmp_path: Path) -> None:
    """Stream, crash after a commit, restart, maintain, verify, guide; then serve until SIGINT."""
    warehouse = tmp_path / "warehouse"
    # An earlier run's table: the demo must say it replaces it.
    earlier = snaplake.FileSystemCatalog(str(warehouse)).create_table(
        "demo.flights", schema=pa.schema([("x", pa.int64())])
    )
    assert earlier.schema().fields
    cmd = [
        sys.executable, str(REPO_ROOT / "demo" / "flights_demo.py"),
        "--warehouse", str(warehouse), "--work-dir", str(tmp_path / "work"),
        "--files", "20", "--rate", "10", "--metrics-listen", "auto", "--serve",
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
        env={**os.environ, **spark_env()},
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    out = _Lines(proc)
    try:
        serving = out.wait_for("Ctrl-C to stop", timeout_s=600)
        url = re.search(r"(http://127\.0\.0\.1:\d+/metrics)", serving)
        assert url is not None, serving
        assert "snaplake_daemon_up 1.0" in _scrape(url.group(1))
        text = "\n".join(out.lines)
        commands = [
            line.strip().split("  #")[0]
            for line in text.splitlines()
            if line.startswith("  ") and " --warehouse " in line and "flights_demo.py" not in line
        ]
        assert len(commands) == 5, text
        for command in commands:
            done = subprocess.run(
                shlex.split(command), cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, (command, done.stdout, done.stderr)
            assert done.stdout.strip(), command
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=120)
    text = out.text()
    assert code == 0, text[-4000:]
    assert "demo: replacing demo.flights from an earlier run" in text
    assert "starting the Spark driver" in text
    assert "crashing the Spark driver on purpose" in text
    assert "killed on purpose right after committing batch" in text
    assert "all checks passed" in text
    assert "check killed batch replayed as a no-op: OK" in text
    assert "check rows read by pypaimon: OK (336776)" in text
    assert "what to try next" in text and "a re-run drops and replaces it" in text
    assert "grafana/prometheus.yml" in text and "grafana/dashboards/snaplake.json" in text
    assert "demo: stopping the daemon" in text
    with pytest.raises(OSError, match="Connection refused"):  # the daemon is gone with the demo
        urllib.request.urlopen(url.group(1), timeout=5)
    assert "check flight_status rows: OK (328521)" in text
    assert "check flight_status equals flights minus the cancelled (every column): OK" in text
    assert "check route_stats equals a pandas group-by: OK" in text
    assert "check pypaimon reads route_stats exactly: OK" in text
    _run_readme_command_line(warehouse, tmp_path / "readme")


def _run_readme_command_line(warehouse: Path, workdir: Path) -> None:
    """Run the README's "Command line" block against the demo's warehouse (issue 18, item 12).

    Every command must exit 0 and print something. The input files it names
    (``f.parquet``, ``f1.parquet``, ``f2.csv``) are made in the working directory.
    The commands run in this process (click's runner, from ``workdir``): the demo's
    own commands above already ran the ``snaplake`` script as processes, and a
    process per command was a second of interpreter start each.
    """
    import contextlib
    import logging

    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq
    from click.testing import CliRunner
    from tests.readme_blocks import blocks_of, cli_commands, flights

    from snaplake.cli import cli

    workdir.mkdir()
    pq.write_table(flights(), workdir / "f.parquet")
    pq.write_table(flights(), workdir / "f1.parquet")
    pacsv.write_csv(flights(), workdir / "f2.csv")
    (block,) = blocks_of("cli")
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level  # the CLI replaces the root's handlers
    try:
        with contextlib.chdir(workdir):
            for argv in cli_commands(block, warehouse=str(warehouse)):
                assert argv[0] == "snaplake", argv
                done = CliRunner().invoke(cli, argv[1:], prog_name="snaplake")
                assert done.exit_code == 0, (
                    f"README.md:{block.line}", argv, done.stdout, done.stderr, done.exception
                )  # fmt: skip
                assert done.stdout.strip(), argv
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
