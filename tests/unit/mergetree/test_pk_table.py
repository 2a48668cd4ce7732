"""Primary-key tables end to end through the Table API (local files), against the model."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from tests.helpers import create_table
from tests.merge_model import MergeModel
from tests.pk_helpers import (
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
from snaplake.errors import SchemaMismatchError


def _table(tmp_path: Path, options: dict[str, str], schema: pa.Schema = PK_SCHEMA) -> Any:
    return create_table(
        tmp_path, schema=schema, partition_keys=["month"], primary_keys=PK_KEYS, options=options
    )


def _commit(table: Any, write: Any, ident: int | None = None) -> Any:
    return table.new_commit(commit_user="u").commit(write.prepare_commit(), commit_identifier=ident)


def test_partial_update_remove_record_on_delete(tmp_path: Path) -> None:
    table = _table(tmp_path, engine_options("partial-update", remove_record_on_delete=True))
    model = TableModel(engine_model("partial-update", remove_record_on_delete=True))
    w = table.new_write(commit_user="u")
    history = [
        (make_rows(0, 50), None),
        ([{**r, "qty": None} for r in make_rows(10, 30, seed=3)], ["+U"] * 30),
        (make_rows(0, 40, seed=5)[::4], ["-D", "-U"] * 5),
        (make_rows(0, 20, seed=7)[::2], None),
    ]
    for i, (rows, kinds) in enumerate(history):
        w.write_arrow(to_table(rows), row_kinds=kinds)
        model.apply(rows, kinds)
        if i % 2:
            _commit(table, w, i)
    _commit(table, w, 9)
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_aggregation_with_retractions(tmp_path: Path) -> None:
    options = {
        "bucket": "3",
        "merge-engine": "aggregation",
        "fields.qty.aggregate-function": "sum",
        "fields.price.aggregate-function": "max",
        "fields.price.ignore-retract": "true",
        "fields.name.aggregate-function": "last_non_null_value",
        "fields.ok.aggregate-function": "bool_and",
        "fields.ok.ignore-retract": "true",
    }
    table = _table(tmp_path, options)
    model = TableModel(
        MergeModel(
            "aggregation",
            PK_SCHEMA.names,
            functions={"month": "primary_key", "id": "primary_key", "qty": "sum",
                       "price": "max", "name": "last_non_null_value", "ok": "bool_and"},
            ignore_retract=frozenset({"price", "ok"}),
            int_bits={"qty": 64},
        )
    )  # fmt: skip
    for i in range(4):
        rows = make_rows(i * 7, 40, seed=i)
        kinds = ["-U" if (r["id"] + i) % 5 == 0 else "+I" for r in rows]
        w = table.new_write(commit_user="u")
        w.write_arrow(to_table(rows), row_kinds=pa.array(kinds))
        _commit(table, w, i)
        model.apply(rows, kinds)
    assert sorted_rows(table.to_arrow()) == model.rows()
    # a retraction into a column whose function cannot retract is refused up front
    bad = {**options, "fields.price.ignore-retract": "false"}
    other = create_table(
        tmp_path, "db.bad", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options=bad,
    )  # fmt: skip
    with pytest.raises(SchemaMismatchError, match="price"):
        other.new_write(commit_user="u").write_arrow(to_table(make_rows(0, 2)),
                                                    row_kinds=["-D", "+I"])  # fmt: skip


def test_sequence_field_ignore_delete_and_rowkind_field(tmp_path: Path) -> None:
    schema = PK_SCHEMA.append(pa.field("op", pa.string()))
    table = _table(
        tmp_path,
        {"bucket": "2", "sequence.field": "qty", "ignore-delete": "true", "rowkind.field": "op"},
        schema,
    )
    rows = [
        {"month": 1, "id": 1, "name": "new", "qty": 5, "price": 1.0, "ok": True, "op": "+I"},
        {"month": 1, "id": 1, "name": "old", "qty": 2, "price": 1.0, "ok": True, "op": "+U"},
        {"month": 1, "id": 2, "name": "x", "qty": 1, "price": 1.0, "ok": True, "op": "+I"},
        {"month": 1, "id": 2, "name": "x", "qty": 9, "price": 1.0, "ok": True, "op": "-D"},
    ]
    w = table.new_write(commit_user="u")
    w.write_arrow(pa.Table.from_pylist(rows, schema=schema))
    _commit(table, w)
    got = {r["id"]: r["name"] for r in table.to_arrow().to_pylist()}
    assert got == {1: "new", 2: "x"}  # qty orders versions; the -D was ignored
    with pytest.raises(SchemaMismatchError, match="unknown row kind"):
        w.write_arrow(pa.Table.from_pylist([{**rows[0], "op": "+X"}], schema=schema))
    with pytest.raises(SchemaMismatchError, match=r"rowkind\.field"):
        w.write_arrow(pa.Table.from_pylist(rows[:1], schema=schema), row_kinds=["+I"])


def test_sequence_numbers_restore_per_bucket(tmp_path: Path) -> None:
    table = _table(tmp_path, {"bucket": "2"})
    for i in range(3):
        w = table.new_write(commit_user=f"u{i}")  # a new writer each time: restores
        w.write_arrow(to_table(make_rows(0, 30, seed=i)))
        _commit(table, w)
    files = [f for s in table.new_scan().plan() for f in s.files]
    by_bucket: dict[tuple[bytes, int], list[tuple[int, int]]] = {}
    for s in table.new_scan().plan():
        ranges = sorted((f.min_sequence_number, f.max_sequence_number) for f in s.files)
        by_bucket[(s.partition, s.bucket)] = ranges
        for (_, hi), (lo, _) in itertools.pairwise(ranges):
            assert lo == hi + 1  # each writer continues the bucket's numbering
        assert ranges[0][0] == 0
    assert all(f.level == 0 and f.file_source == 0 for f in files)
    expected = TableModel(engine_model("deduplicate"))
    for i in range(3):
        expected.apply(make_rows(0, 30, seed=i))
    assert sorted_rows(table.to_arrow()) == expected.rows()


@pytest.mark.parametrize(
    ("write", "match"),
    [
        (lambda w: w.write_arrow(to_table(make_rows(0, 3)).drop_columns(["id"])), "missing"),
        (lambda w: w.write_arrow(pa.table({"month": pa.array([1], pa.int32()),
                                           "id": pa.array([None], pa.int64()),
                                           "name": ["a"], "qty": [1], "price": [1.0],
                                           "ok": [True]})), "NOT NULL"),
        (lambda w: w.write_arrow(to_table(make_rows(0, 2)), row_kinds=["+I", "*"]),
         "unknown row kind"),
        (lambda w: w.write_arrow(to_table(make_rows(0, 2)), row_kinds=np.array([0, 7])),
         "unknown row kind"),
        (lambda w: w.write_arrow(to_table(make_rows(0, 2)), row_kinds=["+I"]), "row kinds for"),
        (lambda w: w.delete_arrow(pa.table({"id": [1]})), "primary-key columns"),
    ],
)  # fmt: skip
def test_bad_input_writes_nothing(tmp_path: Path, write: Any, match: str) -> None:
    table = _table(tmp_path, {"bucket": "2"})
    w = table.new_write(commit_user="u")
    with pytest.raises(SchemaMismatchError, match=match):
        write(w)
    assert w.prepare_commit() == []
    assert table.latest_snapshot() is None
    assert not list((tmp_path / "db.db" / "t").glob("month=*"))


def test_engine_refusals(tmp_path: Path) -> None:
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    partial = catalog.create_table(
        "db.p", schema=PK_SCHEMA, primary_keys=PK_KEYS,
        options={"bucket": "1", "merge-engine": "partial-update"},
    )  # fmt: skip
    with pytest.raises(SchemaMismatchError, match="remove-record-on-delete"):
        partial.new_write(commit_user="u").delete_arrow(to_table(make_rows(0, 1)))
    first = catalog.create_table(
        "db.f", schema=PK_SCHEMA, primary_keys=PK_KEYS,
        options={"bucket": "1", "merge-engine": "first-row"},
    )  # fmt: skip
    with pytest.raises(SchemaMismatchError, match="first-row"):
        first.new_write(commit_user="u").delete_arrow(to_table(make_rows(0, 1)))


def test_read_refuses_bad_filters_before_reading(tmp_path: Path) -> None:
    """Unknown columns and literals of the wrong type: typed errors, as for append tables."""
    table = _table(tmp_path, {"bucket": "2"})
    w = table.new_write(commit_user="w")
    w.write_arrow(to_table(make_rows(0, 10)))
    _commit(table, w)
    with pytest.raises(SchemaMismatchError, match="cannot be compared with column 'id'"):
        table.to_arrow(filter=[("id", "=", "abc")])
    with pytest.raises(SchemaMismatchError, match="unknown column"):
        table.to_arrow(columns=["nope"])
    assert table.to_arrow(filter=[("id", "=", 3)]).column("id").to_pylist() == [3]
