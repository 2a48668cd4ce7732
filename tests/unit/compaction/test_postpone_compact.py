"""Postpone-bucket tables (bucket = -2): pending files, invisible reads, compaction into buckets."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import create_table, write_and_commit
from tests.pk_helpers import (
    ENGINES,
    PK_KEYS,
    PK_SCHEMA,
    TableModel,
    engine_model,
    engine_options,
    make_rows,
    sorted_rows,
    to_table,
)

import snaplake
from snaplake.errors import InvalidOptionError, SchemaMismatchError, UnsupportedTableError
from snaplake.filestore import PostponeBucketFileStore
from snaplake.store.format.schema_change import SchemaChange
from snaplake.store.format.snapshot import CommitKind
from snaplake.store.read.scan import FileStoreScan

_PENDING = re.compile(r"data--u-w-s-\d+-w-[0-9a-f-]+-\d+\.avro")


def _table(where: Path, **options: str) -> Any:
    return create_table(
        where, schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"bucket": "-2", **options},
    )  # fmt: skip


def _entries(table: Any) -> list[Any]:
    """Every live manifest entry of the latest snapshot (pending files included)."""
    return FileStoreScan(
        file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager,
        snapshot=table.latest_snapshot(),
    ).plan_entries()  # fmt: skip


def _history(engine: str) -> list[tuple[list[dict[str, Any]], list[str] | None]]:
    first = make_rows(0, 60)
    second = make_rows(30, 60, seed=1)
    third = make_rows(0, 30, seed=2)[::3]
    kinds: list[str] = ["-D" if r["id"] % 2 == 0 else "-U" for r in third]
    if engine in ("aggregation", "partial-update"):
        kinds = ["+U" for _ in third]
    return [(first, None), (second, ["+U"] * len(second)), (third, kinds)]


@pytest.mark.parametrize("engine", ENGINES)
def test_rows_are_visible_after_compaction_only(tmp_path: Path, engine: str) -> None:
    table = _table(tmp_path, **{**engine_options(engine), "bucket": "-2"})
    assert isinstance(table.file_store(), PostponeBucketFileStore)
    model = TableModel(engine_model(engine), ignore_delete=engine == "first-row")
    for ident, (rows, kinds) in enumerate(_history(engine)):
        write_and_commit(table, to_table(rows), row_kinds=kinds, commit_identifier=ident)
        model.apply(rows, kinds)
    pending = _entries(table)
    assert pending and {(e.bucket, e.total_buckets, e.file.level) for e in pending} == {(-2, -2, 0)}
    assert all(_PENDING.fullmatch(e.file.file_name) for e in pending)
    assert all(e.file.min_sequence_number == e.file.max_sequence_number == -1 for e in pending)
    dirs = {p.parent.name for p in (tmp_path / "db.db" / "t").rglob("*.avro")}
    assert dirs == {"bucket-postpone"}
    assert table.to_arrow().num_rows == 0  # batch reads skip bucket -2, as Paimon's do

    before = table.latest_snapshot().id
    result = table.compact()
    assert result.snapshot_id == before + 1
    snap = table.latest_snapshot()
    assert snap.commit_kind == CommitKind.COMPACT and snap.id == before + 1
    live = _entries(table)
    assert {e.bucket for e in live} == {0} and {e.total_buckets for e in live} == {1}
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert table.compact().snapshot_id is None  # nothing pending, nothing due


def test_pending_rows_apply_in_write_order_across_commits(tmp_path: Path) -> None:
    table = _table(tmp_path)
    model = TableModel(engine_model("deduplicate"))
    for i in range(4):  # the same keys rewritten: the last write must win after assignment
        rows = make_rows(0, 20, seed=i)
        write_and_commit(table, to_table(rows), commit_identifier=i)
        model.apply(rows)
    table.compact()
    assert sorted_rows(table.to_arrow()) == model.rows()
    visible = model.snapshot()
    for i in range(4, 6):  # and again on top of real buckets
        rows = make_rows(5, 20, seed=i)
        write_and_commit(table, to_table(rows), commit_identifier=i)
        model.apply(rows)
    assert sorted_rows(table.to_arrow()) == visible.rows()
    table.compact()
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_partition_keeps_its_bucket_count(tmp_path: Path) -> None:
    table = _table(tmp_path, **{"postpone.default-bucket-num": "3"})
    model = TableModel(engine_model("deduplicate"))
    rows = make_rows(0, 90)
    write_and_commit(table, to_table(rows), commit_identifier=1)
    model.apply(rows)
    table.compact()
    assert {(e.partition, e.total_buckets) for e in _entries(table)} == {
        (p, 3) for p in {e.partition for e in _entries(table)}
    }
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    catalog.alter_table("db.t", [SchemaChange.set_option("postpone.default-bucket-num", "5")])
    table = catalog.get_table("db.t")
    more = make_rows(60, 60, month_mod=4, seed=3)  # months 1..4: month 4 is new
    write_and_commit(table, to_table(more), commit_identifier=2)
    model.apply(more)
    table.compact()
    by_month: dict[int, set[int]] = {}
    for split in table.new_scan().plan():
        by_month.setdefault(split.partition_values[0], set()).add(split.total_buckets)
    assert by_month == {1: {3}, 2: {3}, 3: {3}, 4: {5}}
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_bucket_count_from_target_row_num(tmp_path: Path) -> None:
    table = _table(tmp_path, **{"postpone.target-row-num-per-bucket": "7"})
    write_and_commit(table, to_table(make_rows(0, 30, month_mod=1)))
    table.compact()
    assert {e.total_buckets for e in _entries(table)} == {5}  # ceil(30 / 7)


def test_compact_one_partition(tmp_path: Path) -> None:
    table = _table(tmp_path)
    write_and_commit(table, to_table(make_rows(0, 30)))
    table.compact(partition_filter={"month": 2})
    assert {e.bucket for e in _entries(table)} == {-2, 0}
    assert set(table.to_arrow().column("month").to_pylist()) == {2}
    table.compact()
    assert table.to_arrow().num_rows == 30


def test_failed_compaction_commit_keeps_pending_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(tmp_path)
    write_and_commit(table, to_table(make_rows(0, 40)))
    pending = {e.file.file_name for e in _entries(table)}
    job = table.file_store().new_compaction(commit=table._maintenance_commit())

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("the storage refused the commit")

    monkeypatch.setattr(job.commit, "commit", refuse)
    with pytest.raises(OSError, match="refused"):
        job.execute()
    assert {e.file.file_name for e in _entries(table)} == pending
    files = {p.name for p in (tmp_path / "db.db" / "t").rglob("data-*")}
    assert files == pending  # the outputs were deleted, the pending files kept
    assert table.compact().snapshot_id is not None
    assert table.to_arrow().num_rows == 40


def test_postpone_options(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match=r"postpone\.default-bucket-num"):
        _table(tmp_path / "a", **{"postpone.default-bucket-num": "0"})
    with pytest.raises(UnsupportedTableError, match=r"postpone\.merge-on-read"):
        _table(tmp_path / "b", **{"postpone.merge-on-read": "true"})
    with pytest.raises(UnsupportedTableError, match=r"postpone\.batch-write-fixed-bucket"):
        _table(tmp_path / "c", **{"postpone.batch-write-fixed-bucket": "true"})
    table = _table(tmp_path / "d", **{"postpone.batch-write-fixed-bucket": "false"})
    write_and_commit(table, to_table(make_rows(0, 3)))
    with pytest.raises(UnsupportedTableError, match="changelog-producer"):
        _table(tmp_path / "f", **{"changelog-producer": "input"})
    with pytest.raises(SchemaMismatchError, match="bucket = -3"):
        create_table(tmp_path / "e", schema=PK_SCHEMA, primary_keys=PK_KEYS, bucket=-3)


def test_writers_taking_turns_keep_their_order(tmp_path: Path) -> None:
    """One writer reused across commits, another committing in between: the last write wins."""
    table = _table(tmp_path)
    first, second = table.new_write(commit_user="a"), table.new_write(commit_user="b")
    commit = table.new_commit(commit_user="ab")
    model = TableModel(engine_model("deduplicate"))
    for i, writer in enumerate((first, second, first)):
        rows = make_rows(0, 12, seed=i)
        writer.write_arrow(to_table(rows))
        commit.commit(writer.prepare_commit(), commit_identifier=i)
        model.apply(rows)
    prefixes = {e.file.file_name.split("-w-")[0] for e in _entries(table)}
    assert len(prefixes) == 2  # two writers, each with its own prefix
    table.compact()
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_full_compaction_and_inline_mode(tmp_path: Path) -> None:
    table = _table(tmp_path / "full", **{"postpone.default-bucket-num": "2"})
    model = TableModel(engine_model("deduplicate"))
    for i in range(3):
        rows = make_rows(i * 10, 30, seed=i)
        write_and_commit(table, to_table(rows), commit_identifier=i)
        model.apply(rows)
        table.compact()
    table.compact(full=True)
    assert {f.level for s in table.new_scan().plan() for f in s.files} == {5}
    assert {e.bucket for e in _entries(table)} == {0, 1}
    assert sorted_rows(table.to_arrow()) == model.rows()
    inline = _table(tmp_path / "inline", **{"snaplake.maintenance.inline": "true"})
    rows = make_rows(0, 20)
    write_and_commit(inline, to_table(rows))
    assert inline.latest_snapshot().commit_kind == CommitKind.COMPACT
    assert inline.to_arrow().num_rows == 20


def test_overwrite_of_a_partition_then_compaction(tmp_path: Path) -> None:
    table = _table(tmp_path, **{"postpone.default-bucket-num": "2"})
    write_and_commit(table, to_table(make_rows(0, 30)))
    table.compact()
    fresh = [dict(r, name="new") for r in make_rows(100, 9) if r["month"] == 2]
    write_and_commit(table, to_table(fresh), overwrite={"month": 2})
    assert set(table.to_arrow().column("month").to_pylist()) == {1, 3}  # month 2: pending
    table.compact()
    rows = [r for r in sorted_rows(table.to_arrow()) if r["month"] == 2]
    assert rows == sorted(fresh, key=lambda r: (r["month"], r["id"]))
    assert table.to_arrow().num_rows == 20 + len(fresh)
