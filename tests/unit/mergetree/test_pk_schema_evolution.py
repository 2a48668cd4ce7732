"""Schema evolution of primary-key tables: rules, merge-on-read by field id per merge engine,
time travel, compaction in the current schema, writers opened before an alter, keys renamed
and nested fields changed by other engines (local disk and memory://)."""

from __future__ import annotations

import pickle
from typing import Any

import orjson
import pyarrow as pa
import pytest
from tests.helpers import create_table, write_and_commit

import snaplake
from snaplake import SchemaChange
from snaplake.errors import (
    ColumnNotFoundError,
    InvalidOptionError,
    SchemaChangeError,
    SchemaMismatchError,
    UnsupportedTableError,
)

V0 = pa.schema(
    [
        pa.field("month", pa.int32(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("qty", pa.int32()),
        pa.field("price", pa.float32()),
        pa.field("note", pa.string()),
    ]
)
KEYS = ["month", "id"]
# add, rename, drop, widen (two), as one schema change set
CHANGES = [
    SchemaChange.add_column("tag", pa.string()),
    SchemaChange.rename_column("name", "label"),
    SchemaChange.drop_column("note"),
    SchemaChange.update_column_type("qty", pa.int64()),
    SchemaChange.update_column_type("price", pa.float64()),
]
V1_NAMES = ["month", "id", "label", "qty", "price", "tag"]


#: Every test runs on local disk and on pyarrow's memory:// file system.
pytestmark = pytest.mark.parametrize("catalog", ["local", "memory"], indirect=True)


def _create(catalog: snaplake.FileSystemCatalog, **options: str) -> snaplake.Table:
    return create_table(
        catalog, schema=V0, partition_keys=["month"], primary_keys=KEYS,
        options={"bucket": "2", **options},
    )  # fmt: skip


def _v0(ids: range, *, qty: int = 1, name: str = "n", note: str = "note") -> pa.Table:
    return pa.table(
        {
            "month": pa.array([1 + i % 2 for i in ids], pa.int32()),
            "id": pa.array(list(ids), pa.int64()),
            "name": [f"{name}{i}" for i in ids],
            "qty": pa.array([qty] * len(ids), pa.int32()),
            "price": pa.array([float(i) for i in ids], pa.float32()),
            "note": [note if note == "+I" else f"{note}{i}" for i in ids],
        },
        schema=V0,
    )


def _v1(table: snaplake.Table, rows: list[dict[str, Any]]) -> pa.Table:
    schema = table.arrow_schema
    return pa.Table.from_pylist([{n: r.get(n) for n in schema.names} for r in rows], schema=schema)


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: (r["id"], r["month"]))


def _old(i: int, **over: Any) -> dict[str, Any]:
    """Row ``i`` written under schema 0, read in schema 1."""
    row = {"month": 1 + i % 2, "id": i, "label": f"n{i}", "qty": 1, "price": float(i), "tag": None}
    return {**row, **over}


# ----------------------------------------------------------------------------- rules
def _refused(
    catalog: Any, table: snaplake.Table, changes: list[Any], error: type, rule: str | None
):
    before = table.schema_manager.list_schema_ids()
    with pytest.raises(error) as info:
        catalog.alter_table("db.t", changes)
    assert table.schema_manager.list_schema_ids() == before
    if rule is not None:
        assert getattr(info.value, "rule", None) == rule
    return info.value


@pytest.mark.parametrize(
    ("options", "changes", "error", "rule"),
    [
        ({}, [SchemaChange.drop_column("id")], SchemaChangeError, "primary-key"),
        ({}, [SchemaChange.rename_column("id", "key")], SchemaChangeError, "primary-key"),
        ({}, [SchemaChange.update_column_type("id", "DECIMAL(20, 0)")], SchemaChangeError,
         "primary-key"),
        ({}, [SchemaChange.update_column_nullability("id", True)], SchemaChangeError,
         "primary-key"),
        ({}, [SchemaChange.drop_column("month")], SchemaChangeError, "partition-key"),
        ({}, [SchemaChange.rename_column("month", "m")], SchemaChangeError, "partition-key"),
        ({"sequence.field": "qty"}, [SchemaChange.drop_column("qty")], SchemaChangeError,
         "option-column"),
        ({"rowkind.field": "note"}, [SchemaChange.drop_column("note")], SchemaChangeError,
         "option-column"),
        ({"rowkind.field": "note"}, [SchemaChange.rename_column("note", "kind")],
         SchemaChangeError, "option-column"),
        ({"merge-engine": "aggregation", "fields.qty.aggregate-function": "sum"},
         [SchemaChange.drop_column("qty")], SchemaChangeError, "option-column"),
        ({}, [SchemaChange.set_option("fields.nope.ignore-retract", "true")],
         SchemaChangeError, "option-column"),
        ({}, [SchemaChange.set_option("sequence.field", "nope")], SchemaChangeError,
         "table-schema"),
        ({}, [SchemaChange.add_column("_KEY_id", pa.int64())], SchemaChangeError,
         "table-schema"),
        ({}, [SchemaChange.add_column("_SEQUENCE_NUMBER", pa.int64())], SchemaChangeError,
         "table-schema"),
        ({"merge-engine": "aggregation"},
         [SchemaChange.add_column("c", pa.string()),
          SchemaChange.set_option("fields.c.aggregate-function", "sum")],
         InvalidOptionError, None),
        ({"merge-engine": "aggregation", "fields.default-aggregate-function": "max"},
         [SchemaChange.add_column("c", pa.list_(pa.int32()))], InvalidOptionError, None),
        ({"merge-engine": "aggregation"},
         [SchemaChange.set_option("fields.qty.aggregate-function", "count")],
         InvalidOptionError, None),
        ({"merge-engine": "aggregation"},
         [SchemaChange.set_option("fields.qty.aggregate-function", "collect")],
         UnsupportedTableError, None),
        ({"merge-engine": "partial-update"},
         [SchemaChange.set_option("fields.qty.aggregate-function", "sum")],
         InvalidOptionError, None),
        ({"merge-engine": "first-row"},
         [SchemaChange.set_option("deletion-vectors.enabled", "true")],
         InvalidOptionError, None),
        ({}, [SchemaChange.set_option("merge-engine", "first-row")], SchemaChangeError,
         "immutable-option"),
        ({}, [SchemaChange.set_option("bucket", "4")], SchemaChangeError, "bucket-rescale"),
    ],
)  # fmt: skip
def test_primary_key_rules_are_refused_with_nothing_written(catalog, options, changes, error,
                                                            rule):  # fmt: skip
    table = _create(catalog, **options)
    write_and_commit(
        table, _v0(range(2), note="+I"), commit_identifier=1
    )  # "+I": the row kind when note is rowkind.field
    _refused(catalog, table, changes, error, rule)


def test_options_follow_renamed_columns(catalog):
    table = _create(catalog, **{"merge-engine": "aggregation", "sequence.field": "price",
                                "fields.qty.aggregate-function": "sum"})  # fmt: skip
    catalog.alter_table("db.t", [SchemaChange.rename_column("qty", "amount"),
                                 SchemaChange.rename_column("price", "at")])  # fmt: skip
    options = table.options
    assert options["fields.amount.aggregate-function"] == "sum"
    assert "fields.qty.aggregate-function" not in options
    assert options["sequence.field"] == "at"


def test_nested_changes_are_refused(catalog):
    schema = V0.append(pa.field("addr", pa.struct([("city", pa.string())])))
    table = catalog.create_table("db.t", schema=schema, primary_keys=["month", "id"],
                                 partition_keys=["month"], options={"bucket": "1"})  # fmt: skip
    nested = pa.struct([("city", pa.string()), ("zip", pa.string())])
    for change in [
        SchemaChange.add_column("addr.zip", pa.string()),
        SchemaChange.rename_column("addr.city", "town"),
        SchemaChange.drop_column("addr.city"),
        SchemaChange.update_column_type("addr.city", "VARCHAR(10)"),
        SchemaChange.update_column_comment("addr.city", "x"),
    ]:
        _refused(catalog, table, [change], SchemaChangeError, "nested-column")
    _refused(catalog, table, [SchemaChange.update_column_type("addr", nested)],
             SchemaChangeError, "type-widening")  # fmt: skip
    _refused(catalog, table, [SchemaChange.drop_column("nope.x")], ColumnNotFoundError, None)


# ----------------------------------------------------------------------------- reads
def test_deduplicate_reads_every_schema_by_field_id(catalog):
    table = _create(catalog)
    write_and_commit(table, _v0(range(6)), commit_identifier=1)
    catalog.alter_table("db.t", CHANGES)
    assert table.arrow_schema.names == V1_NAMES
    assert _rows(table.to_arrow()) == [_old(i) for i in range(6)]  # before any new file
    new = [{**_old(i), "label": f"x{i}", "qty": 2**40 + i, "tag": f"t{i}"} for i in range(3, 8)]
    write_and_commit(table, _v1(table, new), commit_identifier=2)
    write_and_commit(
        table, _v1(table, [{"month": 2, "id": 1}]), commit_identifier=3, row_kinds=["-D"]
    )
    expected = [_old(0), _old(2), *new]
    assert _rows(table.to_arrow()) == expected
    assert _rows(pa.Table.from_batches(list(table.to_batches()))) == expected
    assert table.to_arrow().schema.field("qty").type == pa.int64()
    got = table.to_arrow(columns=["id", "label"], filter=("label", "=", "n2"))
    assert got.to_pylist() == [{"id": 2, "label": "n2"}]
    assert sorted(table.to_arrow(filter=("tag", "is null")).column("id").to_pylist()) == [0, 2]
    assert table.to_arrow(filter=("id", ">=", 6)).num_rows == 2
    assert table.to_arrow(limit=2).num_rows == 2
    with pytest.raises(SchemaMismatchError, match="note"):
        table.to_arrow(filter=("note", "=", "x"))


def test_key_stats_prune_files_of_every_schema_and_value_filters_prune_none(catalog):
    """The table's kind picks the pruning: key stats (by field id) for files of any schema."""
    table = _create(catalog, bucket="1")
    write_and_commit(table, _v0(range(4)), commit_user="w", commit_identifier=1)
    write_and_commit(table, _v0(range(10, 14)), commit_user="w", commit_identifier=2)
    catalog.alter_table("db.t", CHANGES)
    write_and_commit(
        table,
        _v1(table, [{**_old(i), "tag": "t"} for i in range(20, 24)]),
        commit_user="w",
        commit_identifier=3,
    )

    def planned(filter: Any, **kwargs: Any) -> list[tuple[int, int]]:
        splits = table.new_scan(filter=filter, **kwargs).plan()
        return sorted((f.schema_id, f.row_count) for s in splits for f in s.files)

    every = [(0, 2)] * 4 + [(1, 2)] * 2
    assert planned(None) == every
    assert planned(("id", "<", 4)) == [(0, 2)] * 2  # older-schema files, by their key stats
    assert planned(("id", ">=", 20)) == [(1, 2)] * 2
    assert planned([("id", ">", 3), ("id", "<", 20)]) == [(0, 2)] * 2
    # a file's value stats say nothing about the merged rows: no value filter prunes
    assert planned(("qty", "=", 999)) == every
    assert planned(("label", "=", "n0")) == every
    assert planned(("id", "<", 4), snapshot_id=2) == [(0, 2)] * 2  # time travel: same kind
    assert _rows(table.to_arrow(filter=("id", "<", 4))) == [_old(i) for i in range(4)]


def test_split_read_task_survives_pickling_and_merges_every_schema(catalog):
    """What Spark's executors run: whole splits merged, files of older schemas read by id."""
    table = _create(catalog)
    write_and_commit(table, _v0(range(6)), commit_user="w", commit_identifier=1)
    catalog.alter_table("db.t", CHANGES)
    write_and_commit(
        table,
        _v1(table, [{**_old(i), "label": "x", "tag": "t"} for i in (1, 4)]),
        commit_user="w",
        commit_identifier=2,
    )
    scan = table.new_scan()
    splits = scan.plan()
    task = table.file_store(scan.schema).split_read_task(
        splits, read_schema=scan.schema, columns=V1_NAMES,
        schema_of=table.schema_manager.schema,
    )  # fmt: skip
    assert task is not None
    task = pickle.loads(pickle.dumps(task))
    parts = [t for i in range(len(splits)) for t in task([i])]  # one split per call
    assert _rows(pa.concat_tables(parts)) == _rows(table.to_arrow())


def test_partial_update_keeps_older_values_where_the_added_column_is_null(catalog):
    table = _create(catalog, **{"merge-engine": "partial-update"})
    write_and_commit(table, _v0(range(4)), commit_identifier=1)
    stale = table.new_write(commit_user="stale")  # opened before the alter
    catalog.alter_table("db.t", CHANGES)
    # a new-schema partial row sets only the added column
    write_and_commit(table, _v1(table, [{"month": 2, "id": 1, "tag": "t1"}]), commit_identifier=2)
    # the stale writer's row, NULL in the added column, updates only what it holds
    stale.write_arrow(_v0(range(1, 2), qty=7, name="z"))
    table.new_commit(commit_user="stale").commit(stale.prepare_commit(), commit_identifier=1)
    expected = [_old(0), _old(1, label="z1", qty=7, tag="t1"), _old(2), _old(3)]
    assert _rows(table.to_arrow()) == expected
    table.compact(full=True)
    assert _rows(table.to_arrow()) == expected


def test_aggregation_folds_widened_and_added_columns(catalog):
    table = _create(catalog, **{"merge-engine": "aggregation",
                                "fields.qty.aggregate-function": "sum",
                                "fields.price.aggregate-function": "max"})  # fmt: skip
    write_and_commit(table, _v0(range(4), qty=2**30), commit_identifier=1)
    write_and_commit(table, _v0(range(2), qty=2**30), commit_identifier=2)
    hits = [
        SchemaChange.add_column("hits", pa.int64()),
        SchemaChange.set_option("fields.hits.aggregate-function", "sum"),
        SchemaChange.add_column("first", pa.string()),
        SchemaChange.set_option("fields.first.aggregate-function", "first_value"),
        SchemaChange.add_column("first_nn", pa.string()),
        SchemaChange.set_option("fields.first_nn.aggregate-function", "first_non_null_value"),
    ]
    catalog.alter_table("db.t", [*CHANGES, *hits])
    rows = [
        {"month": 1 + i % 2, "id": i, "qty": 2**33, "price": 100.5, "hits": 1, "first": "f",
         "first_nn": "f"}
        for i in (1, 2)
    ]  # fmt: skip
    write_and_commit(table, _v1(table, rows), commit_identifier=3)
    write_and_commit(table, _v1(table, rows[:1]), commit_identifier=4)
    got = {r["id"]: r for r in table.to_arrow().to_pylist()}
    # id 0: two old versions, INT sums past 2^31 once read as BIGINT; hits all NULL
    assert (got[0]["qty"], got[0]["hits"], got[0]["tag"]) == (2**31, None, None)
    # id 1: 2 old + 2 new versions; the NULL hits of old files are skipped
    assert (got[1]["qty"], got[1]["price"], got[1]["hits"]) == (2**31 + 2**34, 100.5, 2)
    assert (got[2]["qty"], got[2]["hits"]) == (2**30 + 2**33, 1)
    # first_value takes the NULL of the oldest version (written before the column existed)
    assert (got[1]["first"], got[1]["first_nn"]) == (None, "f")
    assert got[3]["qty"] == 2**30
    before = _rows(table.to_arrow())
    table.compact(full=True)
    assert _rows(table.to_arrow()) == before


def test_first_row_keeps_the_first_version_across_schemas(catalog):
    table = _create(catalog, **{"merge-engine": "first-row"})
    write_and_commit(table, _v0(range(3)), commit_identifier=1)
    catalog.alter_table("db.t", CHANGES)
    write_and_commit(
        table,
        _v1(table, [{**_old(i), "label": "late", "tag": "t"} for i in range(1, 5)]),
        commit_identifier=2,
    )
    late = [{**_old(i), "label": "late", "tag": "t"} for i in (3, 4)]
    assert _rows(table.to_arrow()) == [_old(0), _old(1), _old(2), *late]


def test_time_travel_reads_a_snapshot_in_its_schema(catalog):
    table = _create(catalog)
    write_and_commit(table, _v0(range(3)), commit_identifier=1)
    catalog.alter_table("db.t", CHANGES)
    write_and_commit(table, _v1(table, [{**_old(1), "tag": "t"}]), commit_identifier=2)
    catalog.alter_table("db.t", [SchemaChange.rename_column("tag", "tag2")])
    old = table.to_arrow(snapshot_id=1)
    assert old.schema == V0
    assert _rows(old) == _rows(_v0(range(3)))
    mid = table.to_arrow(snapshot_id=2)
    assert mid.schema.names == V1_NAMES
    assert _rows(mid) == [_old(0), _old(1, tag="t"), _old(2)]
    assert table.to_arrow(snapshot_id=2, filter=("tag", "=", "t")).num_rows == 1
    assert _rows(table.to_arrow())[1]["tag2"] == "t"


def test_compaction_writes_outputs_in_the_current_schema(catalog):
    table = _create(catalog)
    for i in range(3):
        write_and_commit(table, _v0(range(i, 6)), commit_identifier=i + 1)
    catalog.alter_table("db.t", CHANGES)
    write_and_commit(table, _v1(table, [{**_old(2), "tag": "t2"}]), commit_identifier=4)
    catalog.alter_table("db.t", [SchemaChange.rename_column("tag", "tag2")])
    expected = _rows(table.to_arrow())
    inputs = {f.file_name for s in table.new_scan().plan() for f in s.files}
    result = table.compact(full=True)
    assert result.files_after < result.files_before
    files = [f for s in table.new_scan().plan() for f in s.files]
    written = [f for f in files if f.file_name not in inputs]
    assert written
    assert {f.schema_id for f in written} == {2}  # a file alone in its range is upgraded as is
    assert _rows(table.to_arrow()) == expected
    assert _rows(table.to_arrow(snapshot_id=3)) == _rows(_v0(range(6)))  # older snapshots intact


def test_upgraded_files_keep_their_schema_and_read_in_the_current_one(catalog):
    """A large file alone in its key range is upgraded (re-recorded), not rewritten."""
    table = _create(catalog, **{"target-file-size": "1 b", "bucket": "1"})
    write_and_commit(table, _v0(range(3)), commit_identifier=1)
    catalog.alter_table("db.t", CHANGES)
    write_and_commit(
        table, _v1(table, [{**_old(i), "tag": "t"} for i in range(5, 8)]), commit_identifier=2
    )
    table.compact(full=True)
    files = [f for s in table.new_scan().plan() for f in s.files]
    assert {f.schema_id for f in files} == {0, 1}
    assert {f.level for f in files} == {table.schema().core_options.num_levels - 1}
    assert _rows(table.to_arrow()) == [_old(i) for i in range(3)] + [
        {**_old(i), "tag": "t"} for i in range(5, 8)
    ]


def test_key_value_writer_opened_before_an_alter_commits_after_it(catalog):
    table = _create(catalog)
    write_and_commit(table, _v0(range(3)), commit_identifier=1)
    stale = table.new_write(commit_user="stale")
    catalog.alter_table("db.t", CHANGES)
    with pytest.raises(SchemaMismatchError):
        stale.write_arrow(_v1(table, [_old(9)]))
    stale.write_arrow(_v0(range(2, 4), name="s"))
    stale.delete_arrow(
        pa.table({"month": pa.array([1], pa.int32()), "id": pa.array([0], pa.int64())})
    )
    table.new_commit(commit_user="stale").commit(stale.prepare_commit(), commit_identifier=1)
    snapshot = table.latest_snapshot()
    assert snapshot is not None and snapshot.schema_id == 1
    assert {f.schema_id for s in table.new_scan().plan() for f in s.files} == {0}
    assert _rows(table.to_arrow()) == [_old(1), _old(2, label="s2"), _old(3, label="s3")]
    write_and_commit(table, _v1(table, [{**_old(3), "tag": "new"}]), commit_identifier=2)
    assert _rows(table.to_arrow())[-1] == {**_old(3), "tag": "new"}


# ----------------------------------------------------------------------------- other engines
def _write_schema(table: snaplake.Table, doc: dict[str, Any]) -> None:
    table.file_io.write_if_absent(table.paths.schema_path(doc["id"]), orjson.dumps(doc))


def test_a_primary_key_renamed_by_another_engine_reads_upserts_and_compacts(catalog):
    """pypaimon and newer Paimon rename primary-key columns; old files keep ``_KEY_<old>``."""
    table = _create(catalog)
    write_and_commit(table, _v0(range(4)), commit_identifier=1)
    doc = table.schema().to_json_dict()
    doc["id"] = 1
    doc["fields"][1]["name"] = "key"
    doc["primaryKeys"] = ["month", "key"]
    _write_schema(table, doc)
    assert table.primary_keys == ["month", "key"]
    rows = table.to_arrow()
    assert sorted(rows.column("key").to_pylist()) == [0, 1, 2, 3]
    data = table.to_arrow(filter=("key", "=", 2)).set_column(2, "name", pa.array(["z"]))
    write_and_commit(table, data, commit_identifier=2)
    assert table.to_arrow(filter=("key", "=", 2)).column("name").to_pylist() == ["z"]
    table.compact(full=True)
    got = sorted(table.to_arrow().to_pylist(), key=lambda r: r["key"])
    assert [r["name"] for r in got] == ["n0", "n1", "z", "n3"]


def test_nested_fields_changed_by_another_engine_read_by_id(catalog):
    """pypaimon adds, renames and drops nested ROW fields; Arrow would match them by name."""
    addr = pa.struct([("city", pa.string()), ("zip", pa.int32())])
    schema = pa.schema([*V0, pa.field("addr", addr)])
    table = catalog.create_table("db.t", schema=schema, primary_keys=KEYS,
                                 partition_keys=["month"], options={"bucket": "1"})  # fmt: skip
    data = _v0(range(2)).append_column(
        "addr", pa.array([{"city": "a", "zip": 1}, {"city": "b", "zip": 2}], addr)
    )
    write_and_commit(table, data, commit_identifier=1)
    write_and_commit(table, data, commit_identifier=2)
    doc = table.schema().to_json_dict()
    row = doc["fields"][6]["type"]
    city, zipcode = row["fields"]
    # rename city -> town, widen zip INT -> BIGINT, drop nothing; then add a new
    # "city" (new id) - Arrow's by-name cast would wrongly fill it with the old city.
    row["fields"] = [
        {**city, "name": "town"},
        {**zipcode, "type": "BIGINT"},
        {"id": doc["highestFieldId"] + 1, "name": "city", "type": "STRING"},
    ]
    doc["highestFieldId"] += 1
    doc["id"] = 1
    _write_schema(table, doc)
    got = sorted(table.to_arrow().column("addr").to_pylist(), key=lambda r: r["town"])
    assert got == [{"town": "a", "zip": 1, "city": None}, {"town": "b", "zip": 2, "city": None}]
    table.compact(full=True)
    assert {f.schema_id for s in table.new_scan().plan() for f in s.files} == {1}
    got = sorted(table.to_arrow().column("addr").to_pylist(), key=lambda r: r["town"])
    assert got[0] == {"town": "a", "zip": 1, "city": None}


def test_a_stale_first_row_writer_never_compacts_newer_columns_away(catalog):
    """A first-row writer compacts up in its commit; files of newer schemas keep their columns."""
    table = _create(catalog, **{"merge-engine": "first-row", "bucket": "1"})
    write_and_commit(table, _v0(range(2)), commit_identifier=1)
    stale = table.new_write(commit_user="stale")
    catalog.alter_table("db.t", CHANGES)
    write_and_commit(
        table, _v1(table, [{**_old(i), "tag": f"t{i}"} for i in range(2, 4)]), commit_identifier=2
    )
    before = {f.file_name for s in table.new_scan().plan() for f in s.files}
    stale.write_arrow(_v0(range(3, 6), name="s"))
    table.new_commit(commit_user="stale").commit(stale.prepare_commit(), commit_identifier=1)
    tagged = [{**_old(i), "tag": f"t{i}"} for i in (2, 3)]
    assert _rows(table.to_arrow()) == [_old(0), _old(1), *tagged, _old(4, label="s4"),
                                       _old(5, label="s5")]  # fmt: skip
    files = [f for s in table.new_scan().plan() for f in s.files]
    lifted = [f for f in files if f.file_name not in before and f.level > 0]
    assert lifted and {f.schema_id for f in lifted} == {1}  # compacted in the current schema


def test_compaction_refuses_to_write_inputs_into_an_older_schema(catalog):
    from snaplake.compaction.merge_tree_plan import MergeTreeCompactPlanner
    from snaplake.compaction.merge_tree_rewrite import rewrite_bucket

    table = _create(catalog, bucket="1")
    write_and_commit(table, _v0(range(2)), commit_identifier=1)
    catalog.alter_table("db.t", CHANGES)
    write_and_commit(table, _v1(table, [{**_old(1), "tag": "t"}]), commit_identifier=2)
    plan = MergeTreeCompactPlanner(table, full=True).plan()
    task = next(t for t in plan.tasks if any(f.schema_id == 1 for f in t.files))
    assert task.schema_id == 1
    with pytest.raises(SchemaMismatchError, match="older"):
        rewrite_bucket(task, file_io=table.file_io, paths=table.paths,
                       schema=table.schema_manager.schema(0))  # fmt: skip
