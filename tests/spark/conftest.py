"""Spark test fixtures: one local SparkSession per test module, tables and file helpers.

The session runs ``local[2]`` (a module may set ``SPARK_MASTER``, e.g.
``"local[2,3]"`` to let Spark retry failed tasks). Executors must run this
interpreter and import ``tests.*`` (fault-injecting FileIOs live there), so
``PYSPARK_PYTHON`` and ``PYTHONPATH`` are set before the JVM starts.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

REPO_ROOT = Path(__file__).resolve().parents[2]


def spark_env() -> dict[str, str]:
    """Environment for a process that starts Spark (this one, or a driver subprocess)."""
    path = os.environ.get("PYTHONPATH", "")
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{path}" if path else str(REPO_ROOT),
    }


def new_session(master: str = "local[2]") -> Any:
    """Start a small local SparkSession configured for tests."""
    os.environ.update(spark_env())
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master(master)
        .appName("snaplake-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    """One SparkSession per test module (``SPARK_MASTER`` in the module overrides the master)."""
    session = new_session(getattr(request.module, "SPARK_MASTER", "local[2]"))
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


def data_files_on_disk(root: Path) -> set[str]:
    """Names of every Parquet data file under a table directory."""
    return {p.name for p in root.rglob("data-*.parquet")}


def live_data_files(table: Any) -> set[str]:
    """Names of the data files the table's latest snapshot references."""
    return {f.file_name for split in table.new_scan().plan() for f in split.files}


def clean_orphans(table: Any) -> None:
    """Run the table's orphan clean with no grace period, if the core has one yet."""
    from datetime import timedelta

    for name in ("remove_orphan_files", "orphan_clean", "clean_orphan_files"):
        method = getattr(table, name, None)
        if method is not None:
            try:
                method(older_than=timedelta(0), dry_run=False)
            except TypeError:
                method()
            return


def write_parquet_files(directory: Path, tables: list[pa.Table], *, prefix: str = "part") -> None:
    """Write each table as one Parquet file (named so that file order = list order)."""
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    for i, t in enumerate(tables):
        tmp = directory / f".{prefix}-{i:05d}.parquet.tmp"
        pq.write_table(t, tmp)
        tmp.rename(directory / f"{prefix}-{i:05d}.parquet")


def numbered_rows(start: int, count: int, *, months: int = 3) -> pa.Table:
    """``count`` rows with unique ``id`` from ``start``, ``month`` in 1..months, a ``value``."""
    ids = pa.array(range(start, start + count), pa.int64())
    return pa.table(
        {
            "id": ids,
            "month": pa.array([1 + i % months for i in range(start, start + count)], pa.int64()),
            "value": pa.array([float(i) / 2 for i in range(start, start + count)], pa.float64()),
        }
    )


ROWS_SCHEMA = pa.schema([("id", pa.int64()), ("month", pa.int64()), ("value", pa.float64())])
ROWS_SPARK_DDL = "id long, month long, value double"


# -- Spark Connect ---------------------------------------------------------------------------

CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class ConnectServer:
    """A Spark Connect server this test process started (``spark-submit`` of pyspark's jars).

    Attributes:
        process: The server's process (the JVM once ``spark-submit`` exec'd it).
        port: Its gRPC port on 127.0.0.1.
        log: File holding the server's output (read it when a test fails).
    """

    def __init__(self, process: Any, port: int, log: Path) -> None:
        self.process = process
        self.port = port
        self.log = log

    @property
    def url(self) -> str:
        """The ``sc://`` address for ``SparkSession.builder.remote``."""
        return f"sc://127.0.0.1:{self.port}"

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the server's output."""
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> None:
        """Stop the server and what it started.

        The server by its pid: SIGTERM (Spark's shutdown hooks run), SIGKILL
        after 60 s. Then SIGKILL to its process group (the server leads one,
        see :func:`start_connect_server`): Python workers it started, such as
        a ``foreach_batch_worker``, outlive a server that was SIGKILLed.
        """
        import contextlib
        import signal
        import subprocess

        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):  # empty group: nothing outlived it
            os.killpg(self.process.pid, signal.SIGKILL)


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_connect_server(directory: Path, master: str = "local[2]") -> ConnectServer:
    """Start a Spark Connect server on 127.0.0.1 (a free port) with the test session's settings.

    The server is its own JVM (``spark-submit --class SparkConnectServer``, as
    ``sbin/start-connect-server.sh`` runs it, but in the foreground so its pid
    is ours to stop) and the leader of a new process group (``stop`` ends the
    group); its executors and ``foreachBatch`` workers run this
    interpreter with the repository on ``PYTHONPATH`` (``spark_env``).
    Waits until the port accepts connections; raises ``RuntimeError`` with
    the server's output when it exits or is not up within 120 s.
    """
    import socket
    import subprocess
    import time

    import pyspark

    spark_home = os.path.dirname(pyspark.__file__)
    port = _free_port()
    env = {**os.environ, **spark_env(), "SPARK_HOME": spark_home}
    for name in ("SPARK_REMOTE", "SPARK_LOCAL_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
        env.pop(name, None)
    conf = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.stopTimeout": "30s",
    }
    cmd = [os.path.join(spark_home, "bin", "spark-submit"), "--master", master]
    cmd += ["--class", CONNECT_SERVER_CLASS]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd.append("spark-internal")
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "connect-server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            cmd,
            env=env,
            cwd=directory,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # its own process group, which stop() ends
        )
    server = ConnectServer(process, port, log)
    deadline = time.monotonic() + 120
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return server
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"the Spark Connect server did not start:\n{server.log_tail()}")
        time.sleep(0.2)


class BatchRecorder:
    """A picklable ``on_batch`` callback that appends each SinkBatchResult to a JSON-lines file.

    Under Spark Connect the sink runs in the server's Python process, so a
    test reads what happened from the file instead of from a list.
    """

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __call__(self, result: Any) -> None:
        import json

        record = {
            "batch_id": result.batch_id,
            "commit_user": result.commit_user,
            "outcome": result.outcome.value,
            "snapshot_id": result.commit.snapshot_id if result.commit is not None else None,
        }
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def results(self) -> list[dict[str, Any]]:
        """Every recorded batch, oldest first."""
        import json

        if not os.path.exists(self.path):
            return []
        with open(self.path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
