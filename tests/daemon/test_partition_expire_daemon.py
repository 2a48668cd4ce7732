"""The daemon expires the old day partitions of a table a writer streams into.

Real processes: a daemon (every task on, ``expire_partitions`` included) and a
writer appending to today's and yesterday's partitions, on a table that also
holds partitions 30-40 days old. No timing assertions: the test waits for the
old partitions to be gone and the writer to finish, then checks that the writer
never failed, every acknowledged row is in the table, nothing else is, and the
daemon counted the dropped partitions.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from tests.daemon.procs import (
    REPO,
    Proc,
    daemon_config,
    free_port,
    sample_value,
    scrape,
    start_daemon,
    wait_for,
)
from tests.helpers import write_and_commit

from snaplake.catalog import FileSystemCatalog
from snaplake.store.format.decoded_cache import metadata_cache

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string())])
WRITER = Path(__file__).resolve().with_name("day_writer_proc.py")
OLD_DAYS = [30, 33, 36, 40]
OLD_ID = 1_000_000


def _old_days() -> set[str]:
    today = datetime.now().astimezone()
    return {(today - timedelta(days=d)).strftime("%Y-%m-%d") for d in OLD_DAYS}


def test_daemon_expires_old_partitions_while_a_writer_streams(tmp_path):
    wh = tmp_path / "wh"
    table = FileSystemCatalog(str(wh)).create_table(
        "db.days", schema=SCHEMA, partition_keys=["dt"],
        options={"partition.expiration-time": "7 d",
                 "partition.expiration-check-interval": "0 s",
                 "snapshot.num-retained.min": "3", "snapshot.time-retained": "0 ms",
                 "manifest.merge-min-count": "5", "compaction.min.file-num": "3"},
    )  # fmt: skip
    old = sorted(_old_days())
    for i, day in enumerate(old):
        ids = list(range(OLD_ID + 10 * i, OLD_ID + 10 * i + 10))
        write_and_commit(table, pa.table({"id": ids, "dt": [day] * 10}, schema=SCHEMA))
    port = free_port()
    config = daemon_config(
        wh, daemon_id="d1", port=port, intervals={"compact": "1 s"},
        extra='[tasks.expire_partitions]\ninterval = "1 s"\n',
    )  # fmt: skip
    daemon = start_daemon(config, tmp_path, "daemon", port)
    summary = tmp_path / "writer.json"
    writer_log = tmp_path / "writer.log"
    writer = Proc(
        popen=subprocess.Popen(
            [sys.executable, str(WRITER), "--warehouse", str(wh), "--table", "db.days",
             "--commits", "60", "--summary", str(summary)],
            cwd=REPO, stdout=writer_log.open("wb"), stderr=subprocess.STDOUT,
        ),
        log=writer_log,
    )  # fmt: skip
    try:

        def old_gone() -> bool:
            metadata_cache.clear()
            days = set(table.to_arrow(columns=["dt"]).column("dt").to_pylist())
            return not days & set(old)

        wait_for(old_gone, timeout=120, what="the daemon to drop the old partitions")
        wait_for(lambda: not writer.alive(), timeout=180, what="the writer to finish")
        assert writer.popen.returncode == 0, writer.text()
        done = json.loads(summary.read_text())
        assert done["failures"] == []
        metadata_cache.clear()
        got = sorted(table.to_arrow(columns=["id"]).column("id").to_pylist())
        assert got == sorted(done["acked"])  # every acknowledged row, and nothing old
        wait_for(
            lambda: (sample_value(scrape(port), "snaplake_partitions_expired_total",
                                  table="db.days") or 0) >= len(old),
            timeout=30, what="the partitions expired counter",
        )  # fmt: skip
        assert sample_value(scrape(port), "snaplake_partitions_expired_total",
                            table="db.days") == len(old)  # fmt: skip
        assert "expire_partitions of db.days failed" not in daemon.text()
    finally:
        writer.stop()
        code, _ = daemon.stop(signal.SIGTERM)
    assert code == 0, daemon.text()[-3000:]
