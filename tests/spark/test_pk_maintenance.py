"""snaplake.spark.compact on primary-key tables, classic Spark (local[2], tasks retried).

Paimon's universal (or full) LSM compaction with one task per bucket on the executors
and one commit on the driver: the same result as ``table.compact()``, read by pypaimon
and Java Paimon; a writer upserting meanwhile; a failed task attempt, a killed driver.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import write_and_commit
from tests.oracle import requires_paimon
from tests.oracle.java_paimon import requires_java_paimon
from tests.pk_helpers import (
    TableModel,
    bucket_layout,
    compact_counts,
    engine_model,
    make_rows,
    sorted_rows,
)
from tests.pk_helpers import to_table as pk_table
from tests.spark import pk_maintenance_checks as checks
from tests.spark.faults import FailingDataFileIO
from tests.spark.maintenance_checks import (
    check_killed_driver_leaves_only_orphans,
    data_files,
    live_files,
)

import snaplake
from snaplake.compaction.merge_tree_plan import MergeTreeCompactPlanner
from snaplake.spark import compact
from snaplake.spark.maintenance import compact_table
from snaplake.table import Table

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

SPARK_MASTER = "local[2,3]"


@requires_paimon
@requires_java_paimon
@pytest.mark.parametrize("full", [False, True])
def test_compact_equals_table_compact(spark: Any, tmp_path: Path, full: bool) -> None:
    checks.check_compact_equals_in_process(spark, tmp_path, full=full)


@requires_paimon
@requires_java_paimon
@pytest.mark.slow
def test_compact_while_a_writer_upserts(spark: Any, tmp_path: Path) -> None:
    checks.check_compact_with_concurrent_upserts(spark, tmp_path)


@pytest.mark.s3
def test_compact_on_s3(spark: Any) -> None:
    from tests.s3_servers import start_moto

    server = start_moto()
    try:
        checks.check_compact_on_s3(spark, server.endpoint)
    finally:
        server.stop()


def test_task_failing_on_its_first_attempt_leaves_no_extra_files(
    spark: Any, tmp_path: Path
) -> None:
    """The first attempt of the largest bucket's task fails after one output; its retry succeeds."""
    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    plain = checks.create(catalog, "db.t", **{"target-file-size": "4 kb"})
    model = TableModel(engine_model("deduplicate"))
    for k in range(4):  # ~700 keys per bucket: two outputs per bucket
        checks.upsert(plain, model, k, rows=2000)
    markers = tmp_path / "markers"
    failing = FailingDataFileIO(partition=0, attempts=(0,), after_files=1, marker_dir=str(markers))
    table = Table(file_io=failing, root=plain.root, identifier="db.t")
    before_files = data_files(table)
    result = compact(spark, table, full=True)
    assert result.snapshot_id is not None
    assert sorted(os.listdir(markers)) == ["p0-a0-1"]  # the fault happened, once
    outputs = {Path(p).name for p in result.output_files}
    assert data_files(table) == before_files | outputs  # nothing else left behind
    assert live_files(table) == outputs  # full compaction with deletes: all rewritten
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_buckets_below_the_bar_are_rewritten_on_the_driver(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The daemon's split: large buckets on the executors, small ones here; one commit."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    local, remote, model = checks.seeded_twins(catalog)
    big = [r for r in make_rows(10_000, 3_000, seed=9) if r["month"] == 1]
    for table in (local, remote):  # month 1's buckets grow far beyond the others
        write_and_commit(table, pk_table(big), commit_user="seed")
    model.apply(big)
    plan = MergeTreeCompactPlanner(
        file_io=remote.file_io, paths=remote.paths, schema_manager=remote.schema_manager,
        snapshot_manager=remote.snapshot_manager,
    ).plan()  # fmt: skip
    sizes = sorted(sum(f.file_size_bytes for f in t.files) for t in plan.tasks)
    assert len(sizes) == 6 and sizes[3] < sizes[4]  # two large buckets (month 1)
    bar = (sizes[3] + sizes[4]) // 2
    expected = local.compact()
    with caplog.at_level(logging.INFO, logger="snaplake.spark.maintenance"):
        result = compact_table(spark, remote, local_below_bytes=bar)
    assert "spark compaction of db.remote: 2 task(s)" in caplog.text
    assert compact_counts(result) == compact_counts(expected)
    assert bucket_layout(remote) == bucket_layout(local)
    assert sorted_rows(remote.to_arrow()) == model.rows()
    assert data_files(remote) == live_files(remote) | {Path(p).name for p in result.input_files}


def test_a_lost_conflict_deletes_the_outputs_never_an_upgraded_input(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another compaction of the same buckets commits between plan and commit: Spark's loses."""
    from snaplake.compaction.distributed import MergeTreeDistributedCompaction
    from snaplake.errors import CommitConflictError

    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    table = checks.create(catalog, "db.t", **{"target-file-size": "1 kb"})
    model = TableModel(engine_model("deduplicate"))
    for start in (0, 300, 30):  # month 1 only; the second write stays alone: upgraded
        rows = [r for r in make_rows(start, 60) if r["month"] == 1]
        write_and_commit(table, pk_table(rows))
        model.apply(rows)
    seen: list[Any] = []
    commit = MergeTreeDistributedCompaction.commit_rewritten

    def race(self: Any, messages: Any, *, started: Any = None) -> Any:
        seen.extend(messages)
        table.compact(full=True)  # the other compaction wins
        return commit(self, messages, started=started)

    monkeypatch.setattr(MergeTreeDistributedCompaction, "commit_rewritten", race)
    with pytest.raises(CommitConflictError):
        compact(spark, table, full=True)
    before = {f.file_name for m in seen for f in m.compact_increment.compact_before}
    after = {f.file_name for m in seen for f in m.compact_increment.compact_after}
    upgraded, written = before & after, after - before
    assert upgraded and written, "the test needs an upgraded input and a merged output"
    on_disk = data_files(table)
    assert upgraded <= on_disk and not written & on_disk
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert on_disk == live_files(table) | {  # the winner's inputs stay for expiry
        f.file_name for s in table.new_scan(snapshot_id=3).plan() for f in s.files
    }


@pytest.mark.slow
def test_driver_killed_before_the_commit_leaves_only_orphans(spark: Any, tmp_path: Path) -> None:
    """A driver that dies after the executors wrote: table unchanged, orphans removable."""
    wh = tmp_path / "wh"
    table = checks.create(snaplake.FileSystemCatalog(str(wh)), "db.t")
    model = TableModel(engine_model("deduplicate"))
    for k in range(4):
        checks.upsert(table, model, k)
    table, out = check_killed_driver_leaves_only_orphans(
        spark, tmp_path, wh, full=True,
        committer="snaplake.compaction.distributed.MergeTreeDistributedCompaction",
    )  # fmt: skip
    assert "KILLED-BEFORE-COMMIT 6" in out
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert compact(spark, "db.t", warehouse=str(wh)).snapshot_id is not None
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_unsupported_primary_key_tables_are_refused_before_any_job(
    spark: Any, tmp_path: Path
) -> None:
    from snaplake.errors import UnsupportedTableError
    from snaplake.store.format.paths import PathFactory
    from snaplake.store.format.schema import SchemaManager, TableSchema

    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    table = checks.create(catalog, "db.t")
    checks.upsert(table, None, 0)
    files = data_files(table)
    raw = table.schema().to_json_dict()
    raw["id"] = 1
    raw["options"] = {**raw["options"], "deletion-vectors.enabled": "true"}
    SchemaManager(table.file_io, PathFactory(table.root)).create(TableSchema.from_json_dict(raw))
    with pytest.raises(UnsupportedTableError, match="deletion vectors"):
        compact(spark, "db.t", warehouse=str(tmp_path / "wh"))
    assert len(table.snapshots()) == 1
    assert data_files(table) == files
