"""Checks of snaplake.spark.compact on primary-key tables.

The ``check_*`` names match tests/spark/maintenance_checks.py (append tables):
tests/spark/test_maintenance.py runs either module's check by name.

Each check builds real primary-key tables (local disk or S3), runs Paimon's universal
or full LSM compaction on Spark executors, and compares with ``table.compact()`` on a
twin table, with the row model (tests/pk_helpers.py), with pypaimon 2.1.0 and, on
local disk, with Java Paimon 0.9 (tests/oracle/java_paimon.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.daemon.procs import wait_for
from tests.helpers import assert_java_rows, create_table, write_and_commit
from tests.integration.pk_writer_proc import USER, batch
from tests.oracle import PaimonOracle
from tests.oracle.java_paimon import JavaPaimon
from tests.pk_helpers import (
    PK_KEYS,
    PK_SCHEMA,
    TableModel,
    assert_compacted_like_twin,
    engine_model,
    make_rows,
    sorted_rows,
)
from tests.pk_helpers import to_table as pk_table
from tests.spark.faults import FailingDataFileIO
from tests.spark.maintenance_checks import (
    check_killed_driver_leaves_only_orphans,
    data_files,
    live_files,
)

import snaplake
from snaplake.compaction.merge_tree_plan import FULL_COMPACTION_PROPERTY
from snaplake.errors import InvalidOptionError
from snaplake.spark import compact
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.snapshot import TXN_PROPERTY_PREFIX
from snaplake.table import Table

#: 3 month partitions x 2 buckets; 4 writes make 4 sorted runs per bucket (trigger 3).
OPTIONS = {"bucket": "2", "num-sorted-run.compaction-trigger": "3"}
PK_WRITER = Path(__file__).resolve().parents[1] / "integration" / "pk_writer_proc.py"


def create(catalog: snaplake.FileSystemCatalog, name: str, **options: str) -> Table:
    """A deduplicate primary-key table partitioned by ``month``."""
    return create_table(
        catalog, name, schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={**OPTIONS, **options},
    )  # fmt: skip


def upsert(table: Table, model: TableModel | None, k: int, *, rows: int = 80) -> None:
    """Write ``k``'s upserts and deletes (overlapping key ranges) in one commit."""
    data = make_rows(k * 30, rows, seed=k)
    kinds = ["-D" if r["id"] % 7 == k % 7 else "+U" for r in data]
    write_and_commit(
        table, pk_table(data), row_kinds=kinds, commit_user="seed", commit_identifier=k + 1
    )
    if model is not None:
        model.apply(data, kinds)


def seeded_twins(catalog: snaplake.FileSystemCatalog, *, writes: int = 4,
                 **options: str) -> tuple[Table, Table, TableModel]:  # fmt: skip
    """``db.local`` and ``db.remote`` with the same history, and its model."""
    local, remote = create(catalog, "db.local", **options), create(catalog, "db.remote", **options)
    model = TableModel(engine_model("deduplicate"))
    for k in range(writes):
        upsert(local, None, k)
        upsert(remote, model, k)
    return local, remote, model


def pypaimon_rows(wh: Path, name: str) -> list[dict[str, Any]]:
    """pypaimon's merged view of ``name``, sorted by key."""
    return sorted_rows(PaimonOracle(wh).read(name).select(PK_SCHEMA.names).cast(PK_SCHEMA))


def assert_java_reads(root: str, expected: list[dict[str, Any]]) -> None:
    """Java Paimon 0.9 reads the merged view ``expected`` (no retraction survives the merge)."""
    read = JavaPaimon().read(root)
    assert {k for s in read.splits for k in s.kinds} <= {"+I", "+U"}
    assert_java_rows(read.rows, pk_table(expected))


# ------------------------------------------------------------------------------------ checks
def check_compact_equals_in_process(spark: Any, tmp_path: Path, *, full: bool) -> None:
    """Twin tables: spark compact vs table.compact() leave the same levels, files and rows."""
    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    local, remote, model = seeded_twins(catalog)
    expected = local.compact(full=full)
    result = compact(spark, "db.remote", warehouse=str(wh), full=full)
    assert expected.snapshot_id is not None and expected.buckets_compacted == 6
    assert_compacted_like_twin(result, expected, remote, local, model)
    want = model.rows()
    assert sorted_rows(local.to_arrow()) == want
    assert pypaimon_rows(wh, "db.remote") == want
    assert_java_reads(remote.root, want)
    snap = remote.latest_snapshot()
    assert snap is not None and snap.commit_user == "snaplake-maintenance"
    assert snap.commit_kind.value == "COMPACT"
    theirs = local.latest_snapshot()
    assert theirs is not None
    marked = (snap.properties or {}).get(FULL_COMPACTION_PROPERTY)
    assert marked == (theirs.properties or {}).get(FULL_COMPACTION_PROPERTY)
    if full:
        assert {f.level for s in remote.new_scan().plan() for f in s.files} == {3}


def check_compact_with_concurrent_writer(spark: Any, tmp_path: Path) -> None:
    """A writer process upserts while spark compacts: every snapshot equals the model."""
    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    table = create(catalog, "db.t", **{"snapshot.num-retained.min": "100000",
                                       "commit.max-retries": "50",
                                       "commit.max-retry-wait": "200 ms"})  # fmt: skip
    log = tmp_path / "writer.log"
    stop = tmp_path / "stop"

    def acks() -> list[list[str]]:
        text = log.read_text() if log.exists() else ""
        return [line.split() for line in text.splitlines() if line.startswith("ACK")]

    with log.open("wb") as out:
        writer = subprocess.Popen(
            [sys.executable, str(PK_WRITER), table.root, "120", str(stop)], stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_for(lambda: len(acks()) >= 8 or writer.poll() is not None, timeout=120,
                     what="the writer's first commits")  # fmt: skip
            result = compact(spark, "db.t", warehouse=str(wh))
            assert result.snapshot_id is not None and result.buckets_compacted > 0
            compacted_at = len(acks())
            # A few more commits on top of the compacted buckets, then stop (every
            # snapshot is read below, each merging all level-0 runs since).
            wait_for(lambda: len(acks()) >= compacted_at + 5 or writer.poll() is not None,
                     timeout=120, what="the writer's commits after the compaction")  # fmt: skip
            stop.touch()
            code = writer.wait(timeout=120)
        finally:
            if writer.poll() is None:
                writer.kill()
                writer.wait()
    text = log.read_text()
    assert code == 0, text
    done = acks()
    assert len(done) > compacted_at, "the writer kept committing after the compaction"
    model = TableModel(engine_model("deduplicate"))
    expected = {0: model.rows()}
    for k in range(1, len(done) + 1):
        rows, kinds = batch(k)
        model.apply(rows, kinds)
        expected[k] = model.rows()
    snapshots = table.snapshots()
    compactions = [s for s in snapshots if s.commit_user == "snaplake-maintenance"]
    assert [s.commit_kind.value for s in compactions] == ["COMPACT"]
    assert any(s.commit_user == USER and s.id > compactions[0].id for s in snapshots)
    for snap in snapshots:
        k = int((snap.properties or {}).get(f"{TXN_PROPERTY_PREFIX}{USER}", "0"))
        assert sorted_rows(table.to_arrow(snapshot_id=snap.id)) == expected[k], snap.id
    assert pypaimon_rows(wh, "db.t") == expected[len(done)]
    assert_java_reads(table.root, expected[len(done)])


def check_task_failing_on_its_first_attempt(spark: Any, tmp_path: Path) -> None:
    """The first attempt of the largest bucket's task fails after one output; its retry succeeds.

    Needs a classic session whose tasks are retried (``local[2,3]``).
    """
    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    plain = create(catalog, "db.t", **{"target-file-size": "4 kb"})
    model = TableModel(engine_model("deduplicate"))
    for k in range(4):  # ~700 keys per bucket: two outputs per bucket
        upsert(plain, model, k, rows=2000)
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


def check_driver_killed_before_the_commit(spark: Any, tmp_path: Path) -> None:
    """A driver that dies after the executors wrote: table unchanged, orphans removable."""
    wh = tmp_path / "wh"
    table = create(snaplake.FileSystemCatalog(str(wh)), "db.t")
    model = TableModel(engine_model("deduplicate"))
    for k in range(4):
        upsert(table, model, k)
    table, out = check_killed_driver_leaves_only_orphans(
        spark, tmp_path, wh, full=True,
        committer="snaplake.compaction.job.CompactionJob",
    )  # fmt: skip
    assert "KILLED-BEFORE-COMMIT 6" in out
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert compact(spark, "db.t", warehouse=str(wh)).snapshot_id is not None
    assert sorted_rows(table.to_arrow()) == model.rows()


def check_refusals_before_any_job(spark: Any, tmp_path: Path) -> None:
    """A table Paimon refuses (deletion vectors with first-row): refused before any job."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    table = create(catalog, "db.t")
    upsert(table, None, 0)
    files = data_files(table)
    raw = table.schema().to_json_dict()
    raw["id"] = 1
    raw["options"] = {**raw["options"], "deletion-vectors.enabled": "true",
                      "merge-engine": "first-row"}  # fmt: skip
    SchemaManager(table.file_io, PathFactory(table.root)).create(TableSchema.from_json_dict(raw))
    with pytest.raises(InvalidOptionError, match="deletion vectors"):
        compact(spark, "db.t", warehouse=str(tmp_path / "wh"))
    assert len(table.snapshots()) == 1
    assert data_files(table) == files


def check_compact_on_s3(spark: Any, endpoint: Any) -> None:
    """Executors merge an s3:// primary-key table from Python; same result as in process."""
    warehouse = f"s3://{endpoint.new_bucket()}/wh"
    options = endpoint.options()
    catalog = snaplake.FileSystemCatalog(warehouse, options=options)
    local, remote, model = seeded_twins(catalog)
    expected = local.compact()
    result = compact(spark, "db.remote", warehouse=warehouse, options=options)
    assert_compacted_like_twin(result, expected, remote, local, model)
    bucket = warehouse[5:].split("/")[0]
    listing = endpoint.client().list_objects_v2(Bucket=bucket, Prefix="wh/db.db/remote/")
    keys = {o["Key"] for o in listing.get("Contents", [])}
    names = {k.rsplit("/", 1)[-1] for k in keys if "/bucket-" in k}
    assert names == live_files(remote) | {p.rsplit("/", 1)[-1] for p in result.input_files}
