"""Failures inside a micro-batch: task retries, failed jobs and commits leave no files behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from tests.helpers import create_table
from tests.spark.conftest import (
    ROWS_SCHEMA,
    ROWS_SPARK_DDL,
    data_files_on_disk,
    live_data_files,
    numbered_rows,
)
from tests.spark.faults import FailingDataFileIO

import snaplake
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.errors import CommitRetriesExhaustedError, CommitStateUnknownError
from snaplake.spark import SnaplakeSink, write
from snaplake.table import Table

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

SPARK_MASTER = "local[2,3]"  # up to 3 attempts per task, so Spark retries a failed task


def _table(warehouse: Path, file_io: Any = None) -> Table:
    created = create_table(warehouse, schema=ROWS_SCHEMA, partition_keys=["month"])
    if file_io is None:
        return created
    return Table(file_io=file_io, root=created.root, identifier=created.identifier)


def _df(spark: Any, rows: int = 3_000) -> Any:
    """Two partitions in a single stage (no shuffle), so one job = one stage of two tasks."""
    df = spark.createDataFrame(numbered_rows(0, rows).to_pylist(), ROWS_SPARK_DDL)
    assert df.rdd.getNumPartitions() == 2
    return df


def test_task_failure_is_retried_and_rows_land_once(spark: Any, tmp_path: Path) -> None:
    """Attempt 0 of partition 0 fails after writing 2 files; the retry succeeds; rows land once."""
    fio = FailingDataFileIO(
        partition=0, attempts=(0,), after_files=2, marker_dir=str(tmp_path / "faults")
    )
    table = _table(tmp_path / "wh", fio)
    sink = SnaplakeSink(table, commit_user="retry")
    sink(_df(spark), 0)
    back = table.to_arrow()
    assert back.num_rows == 3_000
    assert pc.count_distinct(back["id"]).as_py() == 3_000
    assert len(table.snapshots()) == 1
    assert [p.name for p in (tmp_path / "faults").iterdir()] == ["p0-a0-2"]
    # the failed attempt deleted its two files itself
    assert data_files_on_disk(Path(table.root)) == live_data_files(table)


def test_failed_job_deletes_files_of_all_its_tasks(spark: Any, tmp_path: Path) -> None:
    """Partition 1 fails on every attempt while partition 0 is still writing (slowly).

    The batch fails; the driver waits for partition 0's task to stop and deletes
    the files it wrote after the job had already failed.
    """
    fio = FailingDataFileIO(
        partition=1,
        attempts=None,
        after_files=1,
        marker_dir=str(tmp_path / "faults"),
        slow_partition=0,
        delay_s=1.0,
    )
    table = _table(tmp_path / "wh", fio)
    sink = SnaplakeSink(table, commit_user="doomed")
    with pytest.raises(Exception, match="injected failure"):
        sink(_df(spark), 0)
    assert table.latest_snapshot() is None
    assert len(list((tmp_path / "faults").iterdir())) == 3  # every attempt of partition 1
    assert data_files_on_disk(Path(table.root)) == set()


@pytest.mark.parametrize(
    ("error", "files_kept"),
    [
        (CommitRetriesExhaustedError("lost every race", attempts=10, elapsed_s=1.0), False),
        (CommitStateUnknownError("timeout", commit_identifier=0, snapshot_id=1), True),
    ],
)
def test_failed_commit_aborts_unless_outcome_unknown(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, files_kept: bool
) -> None:
    """A commit that surely failed deletes the batch's files; an unknown outcome keeps them."""
    table = _table(tmp_path / "wh")

    def fail(self: FileStoreCommit, *args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(FileStoreCommit, "commit", fail)
    with pytest.raises(type(error)):
        SnaplakeSink(table, commit_user="u")(_df(spark, 300), 0)
    on_disk = data_files_on_disk(Path(table.root))
    assert bool(on_disk) is files_kept
    monkeypatch.undo()
    if files_kept:
        # Restarting the query re-runs the batch: it was not committed, so it lands now.
        SnaplakeSink(table, commit_user="u")(_df(spark, 300), 0)
        assert table.to_arrow().num_rows == 300


def test_batch_write_failure_leaves_nothing(spark: Any, tmp_path: Path) -> None:
    """snaplake.spark.write: a job failing on every attempt of one task leaves no data file."""
    fio = FailingDataFileIO(
        partition=0, attempts=None, after_files=0, marker_dir=str(tmp_path / "faults")
    )
    table = _table(tmp_path / "wh", fio)
    with pytest.raises(Exception, match="injected failure"):
        write(_df(spark), table)
    assert data_files_on_disk(Path(table.root)) == set()


def test_failed_job_cleanup_deletes_changelog_files_too(tmp_path: Path) -> None:
    """The driver's cleanup after a failed job also deletes a straggler's changelog files.

    A task of a primary-key table with ``changelog-producer = input`` writes a
    data file and a changelog file per bucket; files a task wrote after its job
    failed are found by the job's token (Spark is not needed to write them).
    """
    from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, to_table

    from snaplake.spark.write import _delete_job_files, _WriteTask

    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    options = {"bucket": "2", "changelog-producer": "input"}
    table = catalog.create_table("db.pk", schema=PK_SCHEMA, partition_keys=["month"],
                                 primary_keys=PK_KEYS, options=options)  # fmt: skip
    token = "0123456789abcdef0123456789abcdef"
    task = _WriteTask(file_io=table.file_io, root=table.root, identifier=table.identifier,
                      schema=table.schema(), commit_user="u", token=token)  # fmt: skip
    assert list(task(iter(to_table(make_rows(0, 40)).to_batches())))  # files written
    root = Path(table.root)
    assert {p.name.split("-")[0] for p in root.rglob("bucket-*/*.parquet")} == {"data", "changelog"}
    _delete_job_files(table, token)
    assert list(root.rglob("bucket-*/*")) == []
