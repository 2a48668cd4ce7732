"""The daemon delegating compactions to a local Spark Connect server, and falling back.

Real processes only: a Spark Connect server (its own JVM on 127.0.0.1), the daemon
(``python -m snaplake.daemon`` with ``engine = "spark"``), scraped over HTTP. While the
server runs, due compactions run on it; once it is stopped, the next compaction runs in
the daemon's process, with the reason logged and ``snaplake_daemon_remote_failures_total``
counted.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from tests.daemon.procs import (
    daemon_config,
    free_port,
    sample_value,
    scrape,
    start_daemon,
    wait_for,
)
from tests.oracle import PaimonOracle, requires_paimon
from tests.spark import maintenance_checks as checks
from tests.spark.conftest import start_connect_server

import snaplake

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow,
              pytest.mark.timeout(600)]  # fmt: skip

pytest.importorskip("grpc", reason="Spark Connect needs pyspark's connect extras")


def _live(table: snaplake.Table) -> int:
    return len(checks.live_files(table))


def _append_small(table: snaplake.Table, start: int, commits: int) -> None:
    committer = table.new_commit(commit_user="w")
    for i in range(commits):
        write = table.new_write(commit_user="w")
        write.write_arrow(checks.writer_rows(start + i * 40, 40))
        committer.commit(write.prepare_commit())


@requires_paimon
def test_daemon_delegates_to_spark_connect_and_falls_back(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    table = checks.seeded(catalog, "db.t", commits=12)
    server = start_connect_server(tmp_path / "connect")
    port = free_port()
    config = daemon_config(
        wh, daemon_id="d1", port=port, intervals={"compact": "2 s", "manifest_merge": "1 h"}
    ).replace(
        '[tasks.compact]\ninterval = "2 s"\n',
        '[tasks.compact]\ninterval = "2 s"\nengine = "spark"\n'
        f'spark.remote = "{server.url}"\nspark.min-input-bytes = "1 kb"\n',
    )
    assert 'engine = "spark"' in config
    daemon = None
    try:
        daemon = start_daemon(config, tmp_path, "daemon", port)
        assert _live(table) == 24  # 12 commits x 2 partitions
        wait_for(lambda: _live(table) <= 4, timeout=240, what="a delegated compaction")
        log = daemon.text()
        assert f"delegated to spark at {server.url}" in log, log[-3000:]
        assert "spark compaction of db.t:" in log
        assert "compacted on spark" in log
        assert "compacting in process instead" not in log
        assert not sample_value(scrape(port), "snaplake_daemon_remote_failures_total")

        server.stop()  # the cluster goes away
        _append_small(table, 50_000, 6)
        assert _live(table) > 12
        wait_for(lambda: _live(table) <= 4, timeout=240, what="a fallback compaction")
        wait_for(
            lambda: (sample_value(scrape(port), "snaplake_daemon_remote_failures_total",
                                  table="db.t", task="compact") or 0) >= 1,
            timeout=30, what="the remote failure metric",
        )  # fmt: skip
        log = daemon.text()
        assert "compacting in process instead" in log
        assert "SparkConnectGrpcException" in log
        code, _ = daemon.stop(signal.SIGTERM, timeout=60)
        daemon = None
        assert code == 0
    finally:
        if daemon is not None:
            daemon.stop(signal.SIGKILL)
        server.stop()
    table = catalog.get_table("db.t")
    rows = checks.by_id(table.to_arrow())
    assert rows.num_rows == 12 * 40 + 6 * 40
    assert rows == checks.by_id(PaimonOracle(wh).read("db.t"))
    assert len(set(rows.column("id").to_pylist())) == rows.num_rows
