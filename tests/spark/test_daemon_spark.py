"""The daemon delegating compactions to a local Spark Connect server, and falling back.

Real processes only: a Spark Connect server (its own JVM on 127.0.0.1), the daemon
(``python -m snaplake.daemon`` with ``engine = "spark"``), scraped over HTTP. While the
server runs, due compactions run on it; once it is stopped, the next compaction runs in
the daemon's process, with the reason logged and ``snaplake_daemon_remote_failures_total``
counted.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

import pytest
from tests.daemon.procs import (
    daemon_config,
    free_port,
    sample_value,
    scrape,
    start_daemon,
    wait_for,
)
from tests.helpers import write_and_commit
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
        write_and_commit(table, checks.writer_rows(start + i * 40, 40), committer=committer)


def _check_fell_back(daemon: Any, port: int) -> None:
    """The daemon counted the cluster's failure, logged why, and stops cleanly (SIGTERM)."""
    wait_for(
        lambda: (sample_value(scrape(port), "snaplake_daemon_remote_failures_total",
                              table="db.t", task="compact") or 0) >= 1,
        timeout=30, what="the remote failure metric",
    )  # fmt: skip
    log = daemon.text()
    assert "compacting in process instead" in log
    assert "SparkConnectGrpcException" in log
    code, _ = daemon.stop(signal.SIGTERM, timeout=60)
    assert code == 0


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
        # The job logs its summary after the commit is published: wait for the line.
        done = r"compacted \d+ file\(s\) of \d+ bucket\(s\) into \d+ on spark"
        running = daemon
        wait_for(lambda: bool(re.search(done, running.text())), timeout=60, what="the summary")
        log = daemon.text()
        assert f"delegated to spark at {server.url}" in log, log[-3000:]
        assert "spark compaction of db.t:" in log
        assert "compacting in process instead" not in log
        assert not sample_value(scrape(port), "snaplake_daemon_remote_failures_total")

        server.stop()  # the cluster goes away
        _append_small(table, 50_000, 6)
        assert _live(table) > 12
        wait_for(lambda: _live(table) <= 4, timeout=240, what="a fallback compaction")
        _check_fell_back(daemon, port)
        daemon = None
    finally:
        if daemon is not None:
            daemon.stop(signal.SIGKILL)
        server.stop()
    table = catalog.get_table("db.t")
    rows = checks.by_id(table.to_arrow())
    assert rows.num_rows == 12 * 40 + 6 * 40
    assert rows == checks.by_id(PaimonOracle(wh).read("db.t"))
    assert len(set(rows.column("id").to_pylist())) == rows.num_rows


def _big_month_one(table: snaplake.Table, model: Any, seed: int) -> None:
    """Upserts into month 1 only, large enough that its buckets pass the bar."""
    from tests.pk_helpers import make_rows
    from tests.pk_helpers import to_table as pk_rows

    rows = [r for r in make_rows(10_000 + seed * 500, 3_000, seed=seed) if r["month"] == 1]
    write_and_commit(table, pk_rows(rows))
    model.apply(rows)


def _files_by_bucket(table: snaplake.Table, snapshot_id: int) -> dict[Any, set[str]]:
    return {
        (s.partition, s.bucket): {f.file_name for f in s.files}
        for s in table.new_scan(snapshot_id=snapshot_id).plan()
    }


def _compactions(table: snaplake.Table) -> list[Any]:
    return [s for s in table.snapshots() if s.commit_user == "snaplake-maintenance"]


@requires_paimon
def test_daemon_delegates_large_primary_key_buckets_and_falls_back(tmp_path: Path) -> None:
    """Buckets at ``spark.min-input-bytes`` go to the cluster, the others stay in process."""
    from tests.pk_helpers import TableModel, engine_model, sorted_rows
    from tests.spark import pk_maintenance_checks as pk

    from snaplake.compaction.merge_tree_plan import MergeTreeCompactPlanner

    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    table = pk.create(catalog, "db.t", **{"snapshot.num-retained.min": "1000"})
    model = TableModel(engine_model("deduplicate"))
    for k in range(4):
        pk.upsert(table, model, k)
    _big_month_one(table, model, 1)
    plan = MergeTreeCompactPlanner(table).plan()
    sizes = sorted(sum(f.file_size_bytes for f in t.files) for t in plan.tasks)
    assert len(sizes) == 6 and sizes[3] < sizes[4]  # month 1's two buckets are the large ones
    bar = (sizes[3] + sizes[4]) // 2
    server = start_connect_server(tmp_path / "connect")
    port = free_port()
    config = daemon_config(
        wh, daemon_id="d1", port=port, intervals={"compact": "2 s", "manifest_merge": "1 h"}
    ).replace(
        '[tasks.compact]\ninterval = "2 s"\n',
        '[tasks.compact]\ninterval = "2 s"\nengine = "spark"\n'
        f'spark.remote = "{server.url}"\nspark.min-input-bytes = "{bar}"\n',
    )
    assert 'engine = "spark"' in config
    daemon = None
    try:
        daemon = start_daemon(config, tmp_path, "daemon", port)
        wait_for(lambda: bool(_compactions(table)), timeout=240, what="a delegated compaction")
        first = _compactions(table)[0]
        summary = r"compacted \d+ file\(s\) of \d+ bucket\(s\) into \d+ on spark"
        running = daemon
        wait_for(lambda: bool(re.search(summary, running.text())), timeout=60, what="the summary")
        log = daemon.text()
        assert f"delegated to spark at {server.url}" in log, log[-3000:]
        assert "spark compaction of db.t: 2 task(s)" in log  # the large buckets only
        assert "compacting in process instead" not in log
        assert not sample_value(scrape(port), "snaplake_daemon_remote_failures_total")
        # one commit for all six buckets: the small ones were rewritten in the daemon
        assert (
            _files_by_bucket(table, first.id - 1).keys() == _files_by_bucket(table, first.id).keys()
        )
        changed = [
            b for b, files in _files_by_bucket(table, first.id).items()
            if files != _files_by_bucket(table, first.id - 1)[b]
        ]  # fmt: skip
        assert len(changed) == 6
        assert sorted_rows(table.to_arrow(snapshot_id=first.id)) == model.rows()

        server.stop()  # the cluster goes away
        done = len(_compactions(table))
        for seed in (2, 3, 4, 5):
            _big_month_one(table, model, seed)
        wait_for(lambda: len(_compactions(table)) > done, timeout=240,
                 what="a fallback compaction")  # fmt: skip
        _check_fell_back(daemon, port)
        daemon = None
    finally:
        if daemon is not None:
            daemon.stop(signal.SIGKILL)
        server.stop()
    table = catalog.get_table("db.t")
    want = model.rows()
    assert sorted_rows(table.to_arrow()) == want
    assert pk.pypaimon_rows(wh, "db.t") == want
