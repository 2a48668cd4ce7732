"""A writer process upserts into a primary-key table while the daemon compacts it.

The writer runs until it has made MIN_COMMITS commits, the daemon has compacted and the
writer has committed after that compaction (then the test stops it through a stop file),
however long that takes on this machine. No writer commit may fail; every retained
snapshot's merged view equals the model (the writer's batches up to the identifier the
snapshot carries). Run on fixed buckets and on dynamic buckets (``bucket = -1``: the
writer restores the HASH index once and keeps it; after the daemon's compactions every
key is still in one bucket whose HASH file holds its hash).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.daemon.procs import daemon_config, free_port, start_daemon, wait_for
from tests.dynamic_helpers import assert_one_bucket_per_key
from tests.integration.pk_writer_proc import USER, batch
from tests.merge_model import MergeModel
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, TableModel, sorted_rows

from snaplake.catalog import FileSystemCatalog
from snaplake.store.format.snapshot import TXN_PROPERTY_PREFIX

PROC = Path(__file__).with_name("pk_writer_proc.py")
MIN_COMMITS = 60  # writer commits before it is stopped (several daemon compactions)
MAX_SECONDS = 300.0  # a safety cap only: the test stops the writer through the stop file

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.mark.parametrize(
    "buckets",
    [{"bucket": "2"}, {"dynamic-bucket.target-row-num": "25"}],
    ids=["fixed", "dynamic"],
)
def test_writer_and_daemon_compaction(tmp_path: Path, buckets: dict[str, str]) -> None:
    warehouse = tmp_path / "wh"
    table = FileSystemCatalog(str(warehouse)).create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={
            **buckets,
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
    stop = tmp_path / "stop"

    def written_after_a_compaction() -> bool:
        snaps = table.snapshots()
        first = next((s.id for s in snaps if s.commit_user == "snaplake-maintenance"
                      and s.commit_kind.value == "COMPACT"), None)  # fmt: skip
        if first is None or sum(s.commit_user == USER for s in snaps) < MIN_COMMITS:
            return False
        return any(s.commit_user == USER and s.id > first for s in snaps)

    try:
        with log.open("wb") as out:
            writer = subprocess.Popen(
                [sys.executable, str(PROC), table.root, str(MAX_SECONDS), str(stop)],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
            try:
                wait_for(
                    lambda: writer.poll() is not None or written_after_a_compaction(),
                    timeout=MAX_SECONDS, what="a daemon compaction and a writer commit after it",
                )  # fmt: skip
            finally:
                stop.touch()
            code = writer.wait(timeout=120)
        text = log.read_text()
        assert code == 0, text
        acks = [line.split() for line in text.splitlines() if line.startswith("ACK")]
        assert acks, text
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
    if table.bucket_mode == "dynamic":
        assert assert_one_bucket_per_key(table) > 3
