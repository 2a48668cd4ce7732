"""A writer process upserts into a primary-key table for 30 s while the daemon compacts it.

No writer commit may fail; every retained snapshot's merged view equals the
model (the writer's batches up to the identifier the snapshot carries).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.daemon.procs import daemon_config, free_port, start_daemon, wait_for
from tests.integration.pk_writer_proc import USER, batch
from tests.merge_model import MergeModel
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, TableModel, sorted_rows

from snaplake.catalog import FileSystemCatalog
from snaplake.store.format.snapshot import TXN_PROPERTY_PREFIX

PROC = Path(__file__).with_name("pk_writer_proc.py")
SECONDS = 30.0

pytestmark = pytest.mark.integration


def test_writer_and_daemon_compaction(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    table = FileSystemCatalog(str(warehouse)).create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={
            "bucket": "2",
            "merge-engine": "partial-update",
            "partial-update.remove-record-on-delete": "true",
            "num-sorted-run.compaction-trigger": "3",
            "snapshot.num-retained.min": "100000",
            "commit.max-retries": "50",
            "commit.max-retry-wait": "200 ms",
        },
    )  # fmt: skip
    port = free_port()
    daemon = start_daemon(
        daemon_config(warehouse, daemon_id="pk", port=port, log_level="INFO",
                      intervals={"compact": "1 s"}),
        tmp_path, "daemon", port,
    )  # fmt: skip
    log = tmp_path / "writer.log"
    try:
        with log.open("wb") as out:
            writer = subprocess.Popen(
                [sys.executable, str(PROC), table.root, str(SECONDS)],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
            code = writer.wait(timeout=SECONDS + 120)
        text = log.read_text()
        assert code == 0, text
        acks = [line.split() for line in text.splitlines() if line.startswith("ACK")]
        assert acks, text
        wait_for(
            lambda: any(s.commit_user == "snaplake-maintenance" and s.commit_kind.value == "COMPACT"
                        for s in table.snapshots()),
            timeout=30, what="a daemon compaction",
        )  # fmt: skip
    finally:
        exit_code, _ = daemon.stop(signal.SIGTERM)
    assert exit_code == 0, daemon.text()

    model = TableModel(MergeModel("partial-update", PK_SCHEMA.names, remove_record_on_delete=True))
    expected = {0: model.rows()}
    for k in range(1, len(acks) + 1):
        rows, kinds = batch(k)
        model.apply(rows, kinds)
        expected[k] = model.rows()
    snapshots = table.snapshots()
    compactions = [s for s in snapshots if s.commit_kind.value == "COMPACT"]
    assert compactions, "the daemon never compacted"
    assert any(s.commit_user == USER and s.id > compactions[0].id for s in snapshots), (
        "the writer kept committing after the daemon's first compaction"
    )
    for snap in snapshots:
        k = int((snap.properties or {}).get(f"{TXN_PROPERTY_PREFIX}{USER}", "0"))
        assert sorted_rows(table.to_arrow(snapshot_id=snap.id)) == expected[k], snap.id
    levels = {f.level for s in table.new_scan().plan() for f in s.files}
    assert max(levels) > 0
