"""Table.delete(filter): deletion vectors on append tables, -D rows on primary-key tables.

pypaimon 2.1.0 and Java Paimon 0.9 read the vectors snaplake writes; compaction
applies and drops them; deletes racing compactions conflict and plan again, deletes
racing appends keep the appended rows; bad input writes nothing.
"""

from __future__ import annotations

import os
import shutil
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from tests.helpers import assert_java_rows, assert_same_rows
from tests.oracle import PaimonOracle, requires_paimon

from snaplake import FileSystemCatalog
from snaplake.errors import CommitConflictError, SchemaMismatchError, UnsupportedTableError
from snaplake.filestore.append import AppendOnlyFileStore
from snaplake.store.format.index_file import DELETION_VECTORS_INDEX
from snaplake.store.format.snapshot import CommitKind
from snaplake.store.read.index_scan import read_index_entries
from snaplake.store.read.predicate import parse_filter
from snaplake.table import Table
from snaplake.write.append_delete import AppendDelete, commit_append_delete

SCHEMA = pa.schema(
    [("id", pa.int64()), ("month", pa.int32()), ("carrier", pa.string()), ("v", pa.float64())]
)
_DV = {"deletion-vectors.enabled": "true"}


def _rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    carriers = [("AA", "BB", "CC")[i % 2 + (i % 5 == 0)] for i in ids]
    return pa.table(
        {"id": ids, "month": [1 + i % 3 for i in ids], "carrier": carriers,
         "v": [i / 2 for i in ids]},
        schema=SCHEMA,
    )  # fmt: skip


def _table(
    tmp_path: Path, *, bucket: int = -1, writes: int = 3, options: dict[str, str] | None = None
) -> Table:
    catalog = FileSystemCatalog(str(tmp_path / "wh"))
    opts = {**_DV, **(options or {})}
    if bucket != -1:
        opts |= {"bucket": str(bucket), "bucket-key": "id"}
    table = catalog.create_table("db.t", schema=SCHEMA, partition_keys=["month"], options=opts)
    for n in range(writes):
        table.write(_rows(n * 20, 20))
    return table


def _model(table: pa.Table, gone) -> pa.Table:
    return table.filter(pa.array([not gone(r) for r in table.to_pylist()]))


def _store(table: Table) -> AppendOnlyFileStore:
    store = table.file_store()
    assert isinstance(store, AppendOnlyFileStore)
    return store


def _latest_id(table: Table) -> int:
    latest = table.latest_snapshot()
    assert latest is not None
    return latest.id


def _vector_files(table: Table) -> list[str]:
    entries = read_index_entries(table, table.latest_snapshot(), index_type=DELETION_VECTORS_INDEX)
    return [e.index_file.file_name for e in entries]


def _java_check(table, expected: pa.Table) -> None:
    if shutil.which("java") is None:
        return
    from tests.oracle.java_paimon import JavaPaimon, is_built

    if is_built():
        assert_java_rows(JavaPaimon().read(table.root).rows, expected, context="after deletes")


@requires_paimon
@pytest.mark.parametrize("bucket", [-1, 2])
def test_deletes_read_back_exactly_in_snaplake_pypaimon_and_java(tmp_path: Path, bucket) -> None:
    table = _table(tmp_path, bucket=bucket)
    everything = table.to_arrow()
    files_before = {f.file_name for s in table.new_scan().plan() for f in s.files}
    result = table.delete(filter=[("month", "=", 1), ("carrier", "=", "AA")])
    assert result.kind is CommitKind.OVERWRITE and result.files_added == 0
    assert {f.file_name for s in table.new_scan().plan() for f in s.files} == files_before
    expected = _model(everything, lambda r: r["month"] == 1 and r["carrier"] == "AA")
    assert len(expected) < len(everything)
    assert_same_rows(expected, table.to_arrow())
    # a second delete unions with the vectors already there
    table.delete(filter=("id", "<", 25))
    expected = _model(expected, lambda r: r["id"] < 25)
    assert_same_rows(expected, table.to_arrow())
    assert_same_rows(expected, PaimonOracle(tmp_path / "wh").read("db.t"))
    _java_check(table, expected)
    # nothing matches: no snapshot
    latest = _latest_id(table)
    assert table.delete(filter=("id", "<", 25)).snapshot_id == latest
    assert _latest_id(table) == latest
    assert table.to_arrow(snapshot_id=3).num_rows == len(everything)  # time travel


@requires_paimon
def test_unaware_vector_files_roll_and_are_replaced_only_where_changed(tmp_path: Path) -> None:
    table = _table(tmp_path, writes=4, options={"deletion-vector.index-file.target-size": "40 b"})
    everything = table.to_arrow()
    table.delete(filter=("carrier", "=", "BB"))
    first = set(_vector_files(table))
    assert len(first) > 1  # rolled: one vector per file at this size
    table.delete(filter=("id", "=", 5))  # one data file changes: one vector file replaced
    second = set(_vector_files(table))
    assert len(first - second) == 1 and len(second - first) == 1
    expected = _model(everything, lambda r: r["carrier"] == "BB" or r["id"] == 5)
    assert_same_rows(expected, table.to_arrow())
    assert_same_rows(expected, PaimonOracle(tmp_path / "wh").read("db.t"))
    _java_check(table, expected)


@requires_paimon
@pytest.mark.parametrize("bucket", [-1, 2])
def test_compaction_applies_and_drops_the_vectors_of_its_inputs(tmp_path: Path, bucket) -> None:
    table = _table(tmp_path, bucket=bucket, writes=4)
    everything = table.to_arrow()
    table.delete(filter=("carrier", "=", "CC"))
    table.delete(filter=[("month", "=", 2), ("id", ">", 30)])
    expected = _model(
        everything, lambda r: r["carrier"] == "CC" or (r["month"] == 2 and r["id"] > 30)
    )
    result = table.compact(full=True)
    assert result.snapshot_id is not None
    assert_same_rows(expected, table.to_arrow())
    live = {f.file_name for s in table.new_scan().plan() for f in s.files}
    named = {
        r.data_file_name
        for e in read_index_entries(table, table.latest_snapshot(), index_type="DELETION_VECTORS")
        for r in e.index_file.dv_ranges or ()
    }
    assert named <= live  # no vector names a compacted-away file
    stored = sum(f.row_count for s in table.new_scan().plan() for f in s.files)
    marked = sum(
        r.cardinality or 0
        for e in read_index_entries(table, table.latest_snapshot(), index_type="DELETION_VECTORS")
        for r in e.index_file.dv_ranges or ()
    )
    assert table.to_arrow().num_rows == stored - marked
    assert_same_rows(expected, PaimonOracle(tmp_path / "wh").read("db.t"))
    _java_check(table, expected)


def test_a_delete_racing_a_compaction_plans_again(tmp_path: Path) -> None:
    table = _table(tmp_path, writes=4)
    everything = table.to_arrow()
    store = _store(table)
    predicates = parse_filter(("carrier", "=", "AA"))
    plans: list[AppendDelete] = []

    def plan():
        planned = store.plan_delete(predicates)
        if not plans:  # a compaction rewrites the planned files before the delete commits
            assert table.compact(full=True).snapshot_id is not None
        plans.append(planned)
        return planned

    result = commit_append_delete(plan, table.new_commit(commit_user="d"))
    assert len(plans) == 2 and result.kind is CommitKind.OVERWRITE
    assert_same_rows(_model(everything, lambda r: r["carrier"] == "AA"), table.to_arrow())
    index_dir = Path(table.root) / "index"
    assert sorted(os.listdir(index_dir)) == sorted(_vector_files(table))  # the loser's deleted


def test_a_delete_racing_an_append_keeps_the_appended_rows(tmp_path: Path) -> None:
    table = _table(tmp_path)
    store = _store(table)
    predicates = parse_filter(("month", "=", 2))
    plans: list[AppendDelete] = []

    def plan():
        planned = store.plan_delete(predicates)
        if not plans:
            table.write(_rows(100, 10))  # lands between the plan and the commit
        plans.append(planned)
        return planned

    before = table.to_arrow()
    commit_append_delete(plan, table.new_commit(commit_user="d"))
    assert len(plans) == 1
    appended = _rows(100, 10)
    expected = pa.concat_tables([_model(before, lambda r: r["month"] == 2), appended])
    assert_same_rows(expected, table.to_arrow())


def test_a_compaction_racing_a_delete_conflicts_and_plans_again(tmp_path: Path) -> None:
    table = _table(tmp_path, writes=4)
    everything = table.to_arrow()
    job = table.file_store().new_compaction(commit=table._maintenance_commit(), full=True)
    plan = job.plan_units()
    messages = [m for u in plan.units for m in job.rewrite(u)]
    table.delete(filter=("carrier", "=", "BB"))  # marks rows of the compaction's inputs
    with pytest.raises(CommitConflictError, match="no longer live"):
        job.commit_rewritten(plan, messages)
    outputs = [f for m in messages for f in m.compact_increment.compact_after]
    assert outputs and not any(
        (Path(table.root) / "month=1" / "bucket-0" / f.file_name).exists() for f in outputs
    )
    expected = _model(everything, lambda r: r["carrier"] == "BB")
    assert_same_rows(expected, table.to_arrow())
    assert table.compact(full=True).snapshot_id is not None  # planned again: the rows stay gone
    assert_same_rows(expected, table.to_arrow())


def test_two_deletes_of_one_file_never_lose_one_of_them(tmp_path: Path) -> None:
    table = _table(tmp_path, writes=1)
    everything = table.to_arrow()
    store = _store(table)
    first = store.plan_delete(parse_filter(("id", "=", 3)))  # both in month 1, one file
    second = store.plan_delete(parse_filter(("id", "=", 6)))
    table.new_commit(commit_user="a").commit(first.write_messages())
    with pytest.raises(CommitConflictError, match=r"same files|gone"):
        table.new_commit(commit_user="b").commit(second.write_messages())
    table.delete(filter=("id", "=", 6))  # the loser plans again
    assert_same_rows(_model(everything, lambda r: r["id"] in (3, 6)), table.to_arrow())


def test_expiry_orphan_clean_and_rollback_keep_live_vector_files(tmp_path: Path) -> None:
    retain = {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"}
    table = _table(tmp_path, options=retain)
    everything = table.to_arrow()
    table.delete(filter=("id", "<", 10))
    table.delete(filter=("id", ">", 50))
    table.write(_rows(200, 5))
    table.expire_snapshots()
    table.remove_orphan_files(older_than=timedelta(0), dry_run=False)
    for name in _vector_files(table):
        assert (Path(table.root) / "index" / name).exists()
    expected = pa.concat_tables(
        [_model(everything, lambda r: r["id"] < 10 or r["id"] > 50), _rows(200, 5)]
    )
    assert_same_rows(expected, table.to_arrow())
    table.delete(filter=("id", "=", 200))
    table.rollback_to(_latest_id(table) - 1)
    assert_same_rows(expected, table.to_arrow())


def test_bad_deletes_write_nothing(tmp_path: Path) -> None:
    catalog = FileSystemCatalog(str(tmp_path / "wh"))
    plain = catalog.create_table("db.plain", schema=SCHEMA)
    plain.write(_rows(0, 10))
    with pytest.raises(UnsupportedTableError, match=r"deletion-vectors\.enabled") as info:
        plain.delete(filter=("id", "=", 1))
    assert info.value.key == "deletion-vectors.enabled"
    table = _table(tmp_path / "dv", writes=1)
    with pytest.raises(SchemaMismatchError, match="nope"):
        table.delete(filter=("nope", "=", 1))
    with pytest.raises(SchemaMismatchError):
        table.delete(filter=("id", "=", "x"))
    with pytest.raises(ValueError, match="filter"):
        table.delete(filter=[])
    for t in (plain, table):
        assert [s.id for s in t.snapshots()] == [1]
        assert not (Path(t.root) / "index").exists()


@requires_paimon
@pytest.mark.parametrize("bucket", ["2", "-1", "-2"], ids=["fixed", "dynamic", "postpone"])
def test_primary_key_tables_get_retractions(tmp_path: Path, bucket: str) -> None:
    catalog = FileSystemCatalog(str(tmp_path / "wh"))
    table = catalog.create_table(
        "db.pk", schema=SCHEMA, primary_keys=["id", "month"], partition_keys=["month"],
        options={"bucket": bucket},
    )  # fmt: skip
    table.write(_rows(0, 30))
    table.write(_rows(10, 10))
    if bucket == "-2":  # postponed rows are read once compaction assigned their buckets
        table.compact()
    result = table.delete(filter=[("month", "=", 1), ("v", ">", 3.0)])
    assert result.kind is CommitKind.APPEND
    expected = _model(_rows(0, 30), lambda r: r["month"] == 1 and r["v"] > 3.0)
    if bucket == "-2":
        table.compact()
    assert_same_rows(expected, table.to_arrow())
    assert_same_rows(expected, PaimonOracle(tmp_path / "wh").read("db.pk"))
    table.compact(full=True)
    assert_same_rows(expected, table.to_arrow())


def test_an_overwrite_drops_the_vectors_of_the_partitions_it_replaces(tmp_path: Path) -> None:
    table = _table(tmp_path)
    everything = table.to_arrow()
    table.delete(filter=("id", "<", 30))
    fresh = _model(_rows(300, 9), lambda r: r["month"] != 1)
    table.write(fresh, overwrite={"month": 1})
    kept = _model(everything, lambda r: r["id"] < 30 or r["month"] == 1)
    assert_same_rows(pa.concat_tables([kept, fresh]), table.to_arrow())
    parts = {
        e.partition
        for e in read_index_entries(
            table, table.latest_snapshot(), index_type=DELETION_VECTORS_INDEX
        )
    }
    assert len(parts) == 2  # months 2 and 3 keep theirs; month 1's went with its files
