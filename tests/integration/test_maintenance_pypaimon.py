"""pypaimon (the format oracle) reads tables after every maintenance operation,
and snaplake maintains tables that pypaimon wrote."""

from __future__ import annotations

import os
from datetime import timedelta

import pyarrow as pa
import pytest
from tests.helpers import SCHEMA, assert_same_rows, rows, write_and_commit
from tests.oracle import PaimonOracle, pred, requires_paimon

from snaplake.catalog import FileSystemCatalog
from snaplake.store.format.decoded_cache import metadata_cache
from snaplake.table import Table

pytestmark = [pytest.mark.integration, requires_paimon]

OPTIONS = {
    "snapshot.num-retained.min": "2",
    "snapshot.time-retained": "0 ms",
    "manifest.merge-min-count": "3",
    "compaction.min.file-num": "3",
}


def _live_paths(table: Table) -> set[str]:
    """Data files reachable from every retained snapshot and every tag."""
    metadata_cache.clear()
    out = set()
    for snap in table.snapshots():
        out |= {p for s in table.new_scan(snapshot_id=snap.id).plan() for p in s.paths}
    for tag in table.list_tags():
        out |= {p for s in table.new_scan(tag=tag.name).plan() for p in s.paths}
    return out


def test_pypaimon_reads_after_every_operation(tmp_path):
    wh = tmp_path / "wh"
    oracle = PaimonOracle(wh)
    table = FileSystemCatalog(str(wh)).create_table(
        "db.t", schema=SCHEMA, partition_keys=["month"], options=OPTIONS
    )
    for i in range(5):
        write_and_commit(table, rows(i * 10, 10))

    def check(tag: str | None = None) -> None:
        metadata_cache.clear()
        assert_same_rows(table.to_arrow(), oracle.read("db.t"))

    table.create_tag("before", snapshot_id=3)
    assert table.compact().snapshot_id is not None
    check()
    assert table.merge_manifests().merged
    check()
    write_and_commit(table, rows(100, 10))
    table.compact()
    assert table.merge_manifests(full=True).full_compaction
    check()
    got = oracle.read("db.t", filter=pred.equal("month", 2))  # pruning on merged manifests
    assert set(got.column("month").to_pylist()) == {2}
    assert table.expire_snapshots().snapshots_expired > 0
    check()
    for s in table.snapshots():  # every retained snapshot reads the same in pypaimon
        assert_same_rows(table.to_arrow(snapshot_id=s.id), oracle.read("db.t", snapshot_id=s.id))
    table.remove_orphan_files(older_than=timedelta(0), dry_run=False)
    check()
    table.rollback_to("before")
    check()
    assert_same_rows(table.to_arrow(), pa.concat_tables([rows(0, 30)]))


def test_expiry_of_a_pypaimon_table_appended_by_snaplake(tmp_path):
    wh = tmp_path / "wh"
    oracle = PaimonOracle(wh)
    oracle.create_table("db.p", SCHEMA, partition_keys=["month"], options=OPTIONS)
    oracle.write("db.p", rows(0, 60), commits=6)
    table = FileSystemCatalog(str(wh)).get_table("db.p")
    table.create_tag("paimon3", snapshot_id=3)
    for i in range(3):
        write_and_commit(table, rows(100 + i * 10, 10))
    compacted = table.compact()  # rewrites pypaimon's files too
    assert compacted.snapshot_id is not None
    table.merge_manifests()
    write_and_commit(table, rows(500, 3))
    write_and_commit(table, rows(503, 3))
    tagged = {p for s in table.new_scan(tag="paimon3").plan() for p in s.paths}
    plan = table.expire_snapshots(dry_run=True)
    result = table.expire_snapshots()
    assert result.data_files == plan.data_files
    latest = table.latest_snapshot()
    assert latest is not None
    assert result.expired_snapshot_ids == tuple(range(1, latest.id - 1))
    # Paimon's rule: exactly the compaction inputs (DELETEd by an expired snapshot's
    # delta) minus the files the tag still reaches
    deleted = set(result.data_files)
    assert deleted == set(compacted.input_files) - tagged
    assert tagged & set(compacted.input_files)
    assert all(os.path.exists(p) for p in _live_paths(table))
    assert all(not os.path.exists(p) for p in deleted)
    # the tagged pypaimon version survives and both engines read the same rows
    metadata_cache.clear()
    assert_same_rows(table.to_arrow(tag="paimon3"), rows(0, 30))
    assert_same_rows(table.to_arrow(), oracle.read("db.p"))
    expected = pa.concat_tables([rows(0, 60), rows(100, 30), rows(500, 6)])
    assert_same_rows(table.to_arrow(), expected)
    # pypaimon can still append after snaplake's maintenance
    oracle.write("db.p", rows(900, 5))
    metadata_cache.clear()
    assert_same_rows(table.to_arrow(), pa.concat_tables([expected, rows(900, 5)]))
