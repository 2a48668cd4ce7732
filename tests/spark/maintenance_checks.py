"""Checks of snaplake.spark.compact / remove_orphan_files on append tables.

The ``check_*`` names match tests/spark/pk_maintenance_checks.py (primary-key
tables): tests/spark/test_maintenance.py runs either module's check by name.

Each check takes a SparkSession (classic or Connect) and a scratch directory,
builds real tables on local disk or S3, and compares the Spark run with the
in-process one (``table.compact()``, ``table.remove_orphan_files()``) and with
pypaimon (the format oracle).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.daemon.procs import start_writer, wait_for, writer_summary
from tests.helpers import create_table, write_and_commit
from tests.oracle import PaimonOracle
from tests.spark.conftest import spark_env
from tests.spark.faults import FailingDataFileIO

import snaplake
from snaplake.errors import SchemaMismatchError, UnsupportedTableError
from snaplake.spark import compact, remove_orphan_files
from snaplake.table import Table

#: The rows of tests/daemon/writer_proc.py (the concurrent writer process).
WRITER_SCHEMA = pa.schema([("id", pa.int64()), ("month", pa.int32()), ("payload", pa.string())])
OPTIONS = {"compaction.min.file-num": "3", "target-file-size": "16 kb",
           "compaction.small-file-ratio": "0.5"}  # fmt: skip


def writer_rows(start: int, count: int, *, months: int = 2, noise: bool = False) -> pa.Table:
    """Rows shaped like writer_proc's (ids ``start..``, ``month`` in 1..months).

    With ``noise`` the payload is a hash (incompressible: files as large as estimated).
    """
    ids = range(start, start + count)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "month": pa.array([1 + i % months for i in ids], pa.int32()),
            "payload": pa.array(
                [hashlib.sha256(b"%d" % i).hexdigest() if noise else f"row-{i}" for i in ids]
            ),
        },
        schema=WRITER_SCHEMA,
    )


def seeded(catalog: snaplake.FileSystemCatalog, name: str, *, commits: int = 12,
           rows: int = 40, first_id: int = -1_000_000, big_at: int | None = None,
           **options: str) -> Table:  # fmt: skip
    """A table of ``commits`` small appends (negative ids: never the writer's).

    With ``big_at``, that commit writes 20 times the rows, incompressible (large
    files amid small ones).
    """
    table = create_table(
        catalog, name, schema=WRITER_SCHEMA, partition_keys=["month"],
        options={**OPTIONS, **options},
    )  # fmt: skip
    committer = table.new_commit(commit_user="seed")
    for i in range(commits):
        n = rows * 20 if i == big_at else rows
        data = writer_rows(first_id + i * rows * 100, n, noise=i == big_at)
        write_and_commit(table, data, commit_user="seed", committer=committer)
    return table


def layout(table: Table) -> list[tuple[Any, tuple[int, ...]]]:
    """Rows per live file, per partition and bucket (the shape a compaction leaves)."""
    return sorted(
        ((*s.partition_values, s.bucket), tuple(f.row_count for f in s.files))
        for s in table.new_scan().plan()
    )


def by_id(data: pa.Table) -> pa.Table:
    """``data`` sorted by id, columns in the table's order."""
    return data.select(WRITER_SCHEMA.names).sort_by("id")


def data_files(table: Table) -> set[str]:
    """Names of the Parquet files under a local table directory."""
    return {p.name for p in Path(table.root).rglob("data-*.parquet")}


def live_files(table: Table) -> set[str]:
    """Names of the data files of the latest snapshot."""
    return {f.file_name for s in table.new_scan().plan() for f in s.files}


# ------------------------------------------------------------------------------------ checks
def check_compact_equals_in_process(spark: Any, tmp_path: Path, *, full: bool) -> None:
    """Twin tables: spark compact vs table.compact() leave the same files and rows."""
    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    local = seeded(catalog, "db.local", big_at=3)
    remote = seeded(catalog, "db.remote", big_at=3)
    expected = local.compact(full=full)
    result = compact(spark, "db.remote", warehouse=str(wh), full=full)
    assert expected.snapshot_id is not None
    assert result.snapshot_id == expected.snapshot_id
    assert (result.files_before, result.files_after, result.buckets_compacted) == (
        expected.files_before, expected.files_after, expected.buckets_compacted,
    )  # fmt: skip
    assert result.rows_rewritten == expected.rows_rewritten
    assert layout(remote) == layout(local)
    oracle = PaimonOracle(wh)
    assert (
        by_id(oracle.read("db.remote"))
        == by_id(oracle.read("db.local"))
        == by_id(remote.to_arrow())
    )
    snap = remote.latest_snapshot()
    assert snap is not None and snap.commit_user == "snaplake-maintenance"
    assert data_files(remote) == live_files(remote) | {
        Path(p).name for p in result.input_files
    }  # inputs stay for expiry; nothing else was left


def check_compact_with_concurrent_writer(spark: Any, tmp_path: Path) -> None:
    """A writer process appends while spark compacts: every row once, pypaimon agrees."""
    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    table = seeded(catalog, "db.t", commits=20)
    seed = by_id(table.to_arrow())
    writer = start_writer(wh, "db.t", tmp_path, seconds=15, interval_s=0.05, rows=10)
    try:
        wait_for(lambda: any(s.commit_user == "writer" for s in table.snapshots()),
                 timeout=60, what="the writer's first commit")  # fmt: skip
        result = compact(spark, "db.t", warehouse=str(wh))
        assert result.snapshot_id is not None
        code = writer.popen.wait(timeout=120)
    finally:
        writer.stop()
    assert code == 0, writer.text()
    summary = writer_summary(tmp_path)
    assert summary["failures"] == [] and summary["commits"] > 0
    table = catalog.get_table("db.t")
    snapshots = table.snapshots()
    compactions = [s for s in snapshots if s.commit_user == "snaplake-maintenance"]
    assert len(compactions) == 1
    assert any(s.commit_user == "writer" and s.id > compactions[0].id for s in snapshots), (
        "the writer kept committing after the compaction"
    )
    written = pa.concat_tables([writer_rows(i * 10, 10) for i in range(summary["next_index"])])
    expected = by_id(pa.concat_tables([seed, written]))
    assert by_id(PaimonOracle(wh).read("db.t")) == expected
    assert by_id(table.to_arrow()) == expected


def check_remove_orphan_files_equals_in_process(spark: Any, tmp_path: Path) -> None:
    """Same candidates, orphans and grace period as table.remove_orphan_files()."""
    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    table = seeded(catalog, "db.t", commits=4)
    crashed = table.new_write(commit_user="crashed")
    crashed.write_arrow(writer_rows(10_000, 50))
    crashed.prepare_commit()  # never committed: orphans in both partitions
    table.file_io.write_bytes(table.paths.manifest_path("manifest-stray-0"), b"junk")
    old = time.time() - 3 * 86400
    for path in Path(table.root).rglob("*"):
        if path.is_file():
            os.utime(path, (old, old))
    fresh = table.new_write(commit_user="in-flight")
    fresh.write_arrow(writer_rows(20_000, 5))
    in_flight = {f.file_name for m in fresh.prepare_commit() for f in m.added_files()}
    before = by_id(table.to_arrow())

    local = table.remove_orphan_files()  # dry run, one day of grace
    dry = remove_orphan_files(spark, "db.t", warehouse=str(wh))
    assert dry.dry_run and dry.files_deleted == 0
    assert dry.orphan_files == local.orphan_files
    assert dry.files_scanned == local.files_scanned
    assert len(dry.orphan_files) == 3  # two data files and the stray manifest
    done = remove_orphan_files(spark, "db.t", warehouse=str(wh), dry_run=False)
    assert done.orphan_files == local.orphan_files and done.files_deleted == 3
    assert not any(Path(p).exists() for p in done.orphan_files)
    assert table.remove_orphan_files().orphan_files == ()
    assert in_flight <= data_files(table)  # younger than the grace period: kept
    assert by_id(table.to_arrow()) == before
    with pytest.raises(ValueError, match="negative"):
        remove_orphan_files(spark, "db.t", warehouse=str(wh), older_than=timedelta(days=-1))


def check_compact_on_s3(spark: Any, endpoint: Any) -> None:
    """Executors read and write an s3:// warehouse from Python; same result as in process."""
    warehouse = f"s3://{endpoint.new_bucket()}/wh"
    options = endpoint.options()
    catalog = snaplake.FileSystemCatalog(warehouse, options=options)
    local = seeded(catalog, "db.local", commits=6)
    remote = seeded(catalog, "db.remote", commits=6)
    expected = local.compact()
    result = compact(spark, "db.remote", warehouse=warehouse, options=options)
    assert result.snapshot_id is not None and result.files_after == expected.files_after
    assert layout(remote) == layout(local)
    assert by_id(remote.to_arrow()) == by_id(local.to_arrow())
    bucket = warehouse[5:].split("/")[0]
    listing = endpoint.client().list_objects_v2(Bucket=bucket, Prefix="wh/db.db/remote/")
    keys = {o["Key"] for o in listing.get("Contents", [])}
    names = {k.rsplit("/", 1)[-1] for k in keys if "/bucket-" in k}
    assert names == live_files(remote) | {p.rsplit("/", 1)[-1] for p in result.input_files}
    dry = remove_orphan_files(spark, "db.remote", warehouse=warehouse, options=options,
                              older_than=timedelta(0))  # fmt: skip
    assert dry.orphan_files == remote.remove_orphan_files(older_than=timedelta(0)).orphan_files


def check_task_failing_on_its_first_attempt(spark: Any, tmp_path: Path) -> None:
    """The first attempt of the largest task fails after one output; its retry succeeds.

    Needs a classic session whose tasks are retried (``local[2,3]``).
    """
    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    plain = seeded(catalog, "db.t", commits=30, rows=60)
    markers = tmp_path / "markers"
    failing = FailingDataFileIO(partition=0, attempts=(0,), after_files=1, marker_dir=str(markers))
    table = Table(file_io=failing, root=plain.root, identifier="db.t")
    before_rows = by_id(table.to_arrow())
    before_files = data_files(table)
    result = compact(spark, table)
    assert result.snapshot_id is not None
    assert sorted(os.listdir(markers)) == ["p0-a0-1"]  # the fault happened, once
    outputs = {Path(p).name for p in result.output_files}
    assert max(len(outputs), result.files_after) >= 2
    assert data_files(table) == before_files | outputs  # nothing else left behind
    assert live_files(table) == (
        (before_files - {Path(p).name for p in result.input_files}) | outputs
    )
    assert by_id(table.to_arrow()) == before_rows


def check_driver_killed_before_the_commit(spark: Any, tmp_path: Path) -> None:
    """A driver that dies after the executors wrote: table unchanged, orphans removable."""
    wh = tmp_path / "wh"
    table = seeded(snaplake.FileSystemCatalog(str(wh)), "db.t")
    before_rows = by_id(table.to_arrow())
    table, _ = check_killed_driver_leaves_only_orphans(
        spark, tmp_path, wh, committer="snaplake.compaction.job.CompactionJob"
    )
    assert by_id(table.to_arrow()) == before_rows
    assert compact(spark, "db.t", warehouse=str(wh)).snapshot_id is not None


def check_refusals_before_any_job(spark: Any, tmp_path: Path) -> None:
    """Nothing due, bad partitions, a missing warehouse, an unsupported table: no job runs."""
    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    table = seeded(catalog, "db.t", commits=2)
    assert compact(spark, table).snapshot_id is None  # nothing due: no job, no snapshot
    with pytest.raises(SchemaMismatchError, match="not a partition key"):
        compact(spark, table, partitions=[{"payload": "x"}])
    with pytest.raises(ValueError, match="partitions is empty"):
        compact(spark, table, partitions=[])
    with pytest.raises(ValueError, match="warehouse"):
        compact(spark, "db.t")
    schema = table.schema()
    table.schema_manager.create(  # a primary-key table with record-level expiry (refused)
        dataclasses.replace(
            schema,
            id=1,
            primary_keys=("id", "month"),
            options={**schema.options, "bucket": "2", "record-level.expire-time": "1 d"},
        )
    )
    with pytest.raises(UnsupportedTableError, match="record-level"):
        compact(spark, table)
    assert len(table.snapshots()) == 2


_REPO = Path(__file__).resolve().parents[2]
_KILLED_DRIVER = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, {repo!r})
    from tests.spark.conftest import new_session
    from {module} import {cls}
    from snaplake.spark import compact

    def die(self, plan, messages, *, started=None):
        print("KILLED-BEFORE-COMMIT", len(messages), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    {cls}.commit_rewritten = die
    spark = new_session("local[2]")
    compact(spark, "db.t", warehouse={warehouse!r}, full={full!r})
    """
)


def check_killed_driver_leaves_only_orphans(
    spark: Any, tmp_path: Path, wh: Path, *, committer: str, full: bool = False
) -> tuple[Table, str]:
    """A driver SIGKILLed after the executors wrote, before its commit: only orphans remain.

    ``committer`` is ``"module.Class"`` whose ``commit_rewritten`` the driver
    script replaces by a kill. Checks: the latest snapshot and live files are
    unchanged, the new files are exactly what ``remove_orphan_files`` (dry run)
    lists, and removing them restores the directory. Returns the reopened
    table ``db.t`` and the driver's stdout.
    """
    table = snaplake.FileSystemCatalog(str(wh)).get_table("db.t")
    latest = table.latest_snapshot()
    before_files = data_files(table)
    module, cls = committer.rsplit(".", 1)
    script = tmp_path / "driver.py"
    script.write_text(_KILLED_DRIVER.format(repo=str(_REPO), warehouse=str(wh), module=module,
                                            cls=cls, full=full))  # fmt: skip
    proc = subprocess.run(
        [sys.executable, str(script)], env={**os.environ, **spark_env()},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    assert "KILLED-BEFORE-COMMIT" in proc.stdout
    table = snaplake.FileSystemCatalog(str(wh)).get_table("db.t")
    assert table.latest_snapshot() == latest
    orphans = data_files(table) - before_files
    assert orphans, "the executors wrote outputs before the driver died"
    assert live_files(table) == before_files
    dry = remove_orphan_files(spark, "db.t", warehouse=str(wh), older_than=timedelta(0))
    assert {Path(p).name for p in dry.orphan_files} == orphans
    remove_orphan_files(spark, "db.t", warehouse=str(wh), older_than=timedelta(0), dry_run=False)
    assert data_files(table) == before_files
    return table, proc.stdout
