"""``Table.check`` (issue 18 item 17): every live data file against its manifest entry.

Real tables on local disk; the lies are written into the manifests the way a
buggy writer would have recorded them (``tests/check_helpers.py``). The tests
also show why it matters: a lying maximum hides rows from a filtered read, a
lying key range returns a key twice and a full compaction then writes the
duplicates into one file.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.check_helpers import live_files, rewrite_entry, with_bound, with_null_count
from tests.helpers import create_table, rows, write_and_commit

from snaplake.errors import SnapshotNotFoundError
from snaplake.store.format.binary_row import encode_binary_row
from snaplake.table import Table

PK_SCHEMA = pa.schema(
    [pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.string()), ("n", pa.int64())]
)


def _append_table(tmp_path: Path) -> Table:
    table = create_table(
        tmp_path, partition_keys=["month"], options={"compaction.min.file-num": "2"}
    )
    for start in (0, 30):
        write_and_commit(table, rows(start, 30))
    return table


def _pk_table(tmp_path: Path, **options: str) -> Table:
    return create_table(
        tmp_path, "db.p", schema=PK_SCHEMA, primary_keys=["k"], options={"bucket": "1", **options}
    )


def _upsert(table: Table, keys: range, *, kind: str = "+I", tag: str = "v") -> None:
    data = pa.table(
        {
            "k": pa.array(list(keys), pa.int64()),
            "v": pa.array([f"{tag}{k}" if k % 7 else None for k in keys]),
            "n": pa.array(list(keys), pa.int64()),
        },
        schema=PK_SCHEMA,
    )
    write_and_commit(table, data, row_kinds=[kind] * len(keys))


def _only(result: Any) -> Any:
    assert len(result.mismatches) == 1, result.mismatches
    return result.mismatches[0]


def test_clean_tables_pass(tmp_path: Path) -> None:
    table = _append_table(tmp_path / "a")
    result = table.check()
    assert result.ok and result.snapshot_id == 2
    assert result.files_checked == len(live_files(table)) == 6 and result.rows_checked == 60
    table.compact()
    assert table.check().ok and table.check(snapshot_id=1).ok

    pk = _pk_table(tmp_path / "p", **{"num-sorted-run.compaction-trigger": "2"})
    _upsert(pk, range(50))
    _upsert(pk, range(20, 70), tag="w" * 40)  # long strings: truncated bounds still bound
    _upsert(pk, range(0, 70, 3), kind="-D")
    _upsert(pk, range(60, 80))
    assert pk.check().ok and pk.check().rows_checked == 50 + 50 + 24 + 20
    pk.compact()
    assert pk.check().ok
    pk.compact(full=True)
    assert pk.check().ok


def test_empty_table_and_unknown_snapshot(tmp_path: Path) -> None:
    table = _pk_table(tmp_path)
    result = table.check()
    assert result.ok and result.snapshot_id is None and result.files_checked == 0
    with pytest.raises(SnapshotNotFoundError):
        table.check(snapshot_id=3)


def test_lying_maximum_prunes_rows_and_is_reported(tmp_path: Path) -> None:
    table = _append_table(tmp_path)
    meta, path = next((m, p) for m, p in live_files(table) if "month=1" in p)
    schema = table.schema()
    i = schema.field_names.index("distance")
    where = [("month", "=", 1), ("distance", ">", 200.0)]
    before = table.to_arrow(filter=where).num_rows
    rewrite_entry(
        table, meta.file_name,
        value_stats=with_bound(meta.value_stats, schema.value_types, i, which="max", value=150.0),
    )  # fmt: skip
    # the symptom: the file is pruned, its rows are gone from a filtered read
    after = table.to_arrow(filter=where).num_rows
    assert 0 < after < before
    result = table.check()
    m = _only(result)
    assert (m.path, m.field, m.column, m.recorded) == (
        path, "_VALUE_STATS._MAX_VALUES", "distance", 150.0
    )  # fmt: skip
    assert m.actual > 200.0 and "below" in m.message
    assert result.bad_files == (path,) and not result.ok


def test_lying_minimum_and_null_count(tmp_path: Path) -> None:
    table = _append_table(tmp_path)
    meta, _ = live_files(table)[0]
    types = table.schema().value_types
    names = table.schema().field_names
    stats = with_bound(meta.value_stats, types, names.index("carrier"), which="min", value="ZZ")
    stats = with_null_count(stats, names.index("ts"), 3)
    rewrite_entry(table, meta.file_name, value_stats=stats)
    found = {(m.field, m.column): m for m in table.check().mismatches}
    assert set(found) == {
        ("_VALUE_STATS._MIN_VALUES", "carrier"),
        ("_VALUE_STATS._NULL_COUNTS", "ts"),
    }
    assert found["_VALUE_STATS._MIN_VALUES", "carrier"].actual == "AA"
    assert (found["_VALUE_STATS._NULL_COUNTS", "ts"].recorded,
            found["_VALUE_STATS._NULL_COUNTS", "ts"].actual) == (3, 0)  # fmt: skip


def test_row_count_size_missing_and_unreadable_files(tmp_path: Path) -> None:
    table = _append_table(tmp_path)
    files = live_files(table)
    (a, pa_), (b, pb), (_, pc_), (d, pd) = files[:4]
    rewrite_entry(table, a.file_name, row_count=a.row_count + 1)
    rewrite_entry(table, b.file_name, file_size_bytes=b.file_size_bytes + 7)
    Path(pc_).unlink()
    Path(pd).write_bytes(b"\0" * d.file_size_bytes)  # same size, not Parquet
    found = {(m.path, m.field): m for m in table.check().mismatches}
    assert set(found) == {(pa_, "_ROW_COUNT"), (pb, "_FILE_SIZE"), (pc_, "_FILE_NAME"),
                          (pd, "_FILE_NAME")}  # fmt: skip
    assert (found[pa_, "_ROW_COUNT"].recorded, found[pa_, "_ROW_COUNT"].actual) == (
        a.row_count + 1, a.row_count
    )  # fmt: skip
    assert found[pb, "_FILE_SIZE"].actual == b.file_size_bytes
    assert "does not exist" in found[pc_, "_FILE_NAME"].message
    assert "cannot be read" in found[pd, "_FILE_NAME"].message


def test_snapshot_option_checks_that_snapshot(tmp_path: Path) -> None:
    table = _append_table(tmp_path)
    first = {f.file_name for s in table.new_scan(snapshot_id=1).plan() for f in s.files}
    newer = [m for m, _ in live_files(table) if m.file_name not in first]
    rewrite_entry(table, newer[0].file_name, row_count=1)
    assert table.check(snapshot_id=1).ok
    assert not table.check(snapshot_id=2).ok and not table.check().ok


def test_false_key_range_duplicates_keys_and_is_reported(tmp_path: Path) -> None:
    table = _pk_table(tmp_path)
    _upsert(table, range(10))
    _upsert(table, range(5, 15), tag="new")
    older = min(live_files(table), key=lambda fp: fp[0].max_sequence_number)[0]
    key = table.schema().key_types
    rewrite_entry(table, older.file_name, max_key=encode_binary_row([4], key))
    # the symptom: the two files no longer overlap, so keys 5..9 are not merged
    keys = table.to_arrow().column("k").to_pylist()
    assert len(keys) == 20 and len(set(keys)) == 15
    m = _only(table.check())
    assert (m.field, m.recorded, m.actual) == ("_MAX_KEY", (4,), (9,))
    # a full compaction persists the duplicates; check then finds them in the file
    table.compact(full=True)
    assert len(table.to_arrow().column("k").to_pylist()) == 20
    assert {m.field for m in table.check().mismatches} == {"rows"}


def test_sequence_numbers_delete_count_and_key_stats(tmp_path: Path) -> None:
    table = _pk_table(tmp_path)
    _upsert(table, range(10))
    _upsert(table, range(0, 10, 2), kind="-D")
    (first, p1), (second, p2) = sorted(live_files(table), key=lambda fp: fp[0].min_sequence_number)
    rewrite_entry(
        table, first.file_name,
        min_sequence_number=first.min_sequence_number + 1,
        key_stats=with_null_count(first.key_stats, 0, 2),
    )  # fmt: skip
    rewrite_entry(
        table, second.file_name,
        max_sequence_number=second.max_sequence_number + 100,
        delete_row_count=0,
        key_stats=dataclasses.replace(
            second.key_stats, max_values=encode_binary_row([3], table.schema().key_types)
        ),
    )  # fmt: skip
    found = {(m.path, m.field, m.column) for m in table.check().mismatches}
    assert found == {
        (p1, "_MIN_SEQUENCE_NUMBER", None),
        (p1, "_KEY_STATS._NULL_COUNTS", "k"),
        (p2, "_MAX_SEQUENCE_NUMBER", None),
        (p2, "_DELETE_ROW_COUNT", None),
        (p2, "_KEY_STATS._MAX_VALUES", "k"),
    }
