"""snaplake.spark.compact and remove_orphan_files on classic Spark (local[2], tasks retried).

One session per module; tasks may fail up to 3 times (``local[2,3]``), so a task
that fails on its first attempt is retried as on a cluster.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from tests.oracle import requires_paimon
from tests.spark import maintenance_checks as checks
from tests.spark.faults import FailingDataFileIO

import snaplake
from snaplake.errors import SchemaMismatchError, UnsupportedTableError
from snaplake.spark import compact
from snaplake.table import Table

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

SPARK_MASTER = "local[2,3]"


@requires_paimon
@pytest.mark.parametrize("full", [False, True])
def test_compact_equals_table_compact(spark: Any, tmp_path: Path, full: bool) -> None:
    checks.check_compact_equals_in_process(spark, tmp_path, full=full)


@requires_paimon
@pytest.mark.slow
def test_compact_while_a_writer_commits(spark: Any, tmp_path: Path) -> None:
    checks.check_compact_with_concurrent_writer(spark, tmp_path)


def test_remove_orphan_files_equals_table_remove_orphan_files(spark: Any, tmp_path: Path) -> None:
    checks.check_remove_orphan_files_equals_in_process(spark, tmp_path)


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
    """The first attempt of the largest task fails after one output; its retry succeeds."""
    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    plain = checks.seeded(catalog, "db.t", commits=30, rows=60)
    markers = tmp_path / "markers"
    failing = FailingDataFileIO(partition=0, attempts=(0,), after_files=1, marker_dir=str(markers))
    table = Table(file_io=failing, root=plain.root, identifier="db.t")
    before_rows = checks.by_id(table.to_arrow())
    before_files = checks.data_files(table)
    result = compact(spark, table)
    assert result.snapshot_id is not None
    assert sorted(os.listdir(markers)) == ["p0-a0-1"]  # the fault happened, once
    outputs = {Path(p).name for p in result.output_files}
    assert max(len(outputs), result.files_after) >= 2
    assert checks.data_files(table) == before_files | outputs  # nothing else left behind
    assert checks.live_files(table) == (
        (before_files - {Path(p).name for p in result.input_files}) | outputs
    )
    assert checks.by_id(table.to_arrow()) == before_rows


@pytest.mark.slow
def test_driver_killed_before_the_commit_leaves_only_orphans(spark: Any, tmp_path: Path) -> None:
    """A driver that dies after the executors wrote: table unchanged, orphans removable."""
    wh = tmp_path / "wh"
    table = checks.seeded(snaplake.FileSystemCatalog(str(wh)), "db.t")
    before_rows = checks.by_id(table.to_arrow())
    table, _ = checks.check_killed_driver_leaves_only_orphans(
        spark, tmp_path, wh, committer="snaplake.compaction.job.CompactionJob"
    )
    assert checks.by_id(table.to_arrow()) == before_rows
    assert compact(spark, "db.t", warehouse=str(wh)).snapshot_id is not None


def test_refusals_come_before_any_job(spark: Any, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    table = checks.seeded(catalog, "db.t", commits=2)
    assert compact(spark, table).snapshot_id is None  # nothing due: no job, no snapshot
    with pytest.raises(SchemaMismatchError, match="not a partition key"):
        compact(spark, table, partitions=[{"payload": "x"}])
    with pytest.raises(ValueError, match="partitions is empty"):
        compact(spark, table, partitions=[])
    with pytest.raises(ValueError, match="warehouse"):
        compact(spark, "db.t")
    import dataclasses

    table.schema_manager.create(  # a primary-key table with dynamic buckets (bucket = -1)
        dataclasses.replace(table.schema(), id=1, primary_keys=("id", "month"))
    )
    with pytest.raises(UnsupportedTableError, match="bucket"):
        compact(spark, table)
    assert len(table.snapshots()) == 2
