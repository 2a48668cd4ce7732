"""Reads by field id across schemas: to_arrow, to_batches, stats pruning, time travel,
compaction and commits of writers opened before an alter (local disk and memory://;
tests/integration/s3/test_s3_schema_evolution.py runs ``evolve_flights`` on S3)."""

from __future__ import annotations

import datetime as dt

import orjson
import pyarrow as pa
import pytest
from tests.helpers import write_and_commit

import snaplake
from snaplake import SchemaChange
from snaplake.errors import SchemaMismatchError

V0 = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("month", pa.int32()),
        pa.field("dest", pa.string()),
        pa.field("flight", pa.int32()),
        pa.field("air_time", pa.float32()),
    ]
)


#: Every test runs on local disk and on pyarrow's memory:// file system.
pytestmark = pytest.mark.parametrize("catalog", ["local", "memory"], indirect=True)


def _rows_v0(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "month": pa.array([1 + i % 2 for i in ids], pa.int32()),
            "dest": [f"D{i % 5}" for i in ids],
            "flight": pa.array([1000 + i for i in ids], pa.int32()),
            "air_time": pa.array([float(i) / 2 for i in ids], pa.float32()),
        },
        schema=V0,
    )


CHANGES = [
    SchemaChange.add_column("delay_reason", pa.string()),
    SchemaChange.rename_column("dest", "destination"),
    SchemaChange.drop_column("air_time"),
    SchemaChange.update_column_type("flight", pa.int64()),
]


def _rows_v1(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "month": pa.array([1 + i % 2 for i in ids], pa.int32()),
            "destination": [f"D{i % 5}" for i in ids],
            "flight": pa.array([10_000_000_000 + i for i in ids], pa.int64()),
            "delay_reason": [f"r{i}" for i in ids],
        }
    )


def evolve_flights(catalog: snaplake.FileSystemCatalog, **create: object) -> snaplake.Table:
    """Schema 0 rows 0-9 (two commits), alter, schema 1 rows 10-14; returns the table."""
    table = catalog.create_table("db.f", schema=V0, partition_keys=["month"], **create)  # type: ignore[arg-type]
    write_and_commit(table, _rows_v0(0, 5), commit_identifier=1)
    write_and_commit(table, _rows_v0(5, 5), commit_identifier=2)
    catalog.alter_table("db.f", CHANGES)
    write_and_commit(table, _rows_v1(10, 5).select(table.arrow_schema.names), commit_identifier=3)
    return table


def expected_latest(ids: range = range(15)) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in ids:
        new = i >= 10
        out.append(
            {
                "id": i,
                "month": 1 + i % 2,
                "destination": f"D{i % 5}",
                "flight": (10_000_000_000 if new else 1000) + i,
                "delay_reason": f"r{i}" if new else None,
            }
        )
    return out


def _sorted(table: pa.Table) -> list[dict[str, object]]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def test_old_files_read_in_the_current_schema(catalog):
    table = evolve_flights(catalog)
    got = table.to_arrow()
    assert got.schema.names == ["id", "month", "destination", "flight", "delay_reason"]
    assert got.schema.field("flight").type == pa.int64()
    assert _sorted(got) == expected_latest()
    batches = list(table.to_batches())
    assert _sorted(pa.Table.from_batches(batches)) == expected_latest()
    assert table.to_arrow(limit=3).num_rows == 3
    cols = table.to_arrow(columns=["delay_reason", "destination"], filter=("id", "<", 2))
    assert cols.column_names == ["delay_reason", "destination"]
    assert sorted(cols.to_pylist(), key=lambda r: r["destination"]) == [
        {"delay_reason": None, "destination": "D0"},
        {"delay_reason": None, "destination": "D1"},
    ]


def test_filters_on_evolved_columns_are_exact_and_prune_by_id(catalog):
    table = evolve_flights(catalog)
    # renamed column: old files pruned with their stats under the old name
    got = table.to_arrow(filter=("destination", "=", "D3"))
    assert sorted(got.column("id").to_pylist()) == [3, 8, 13]
    # widened column: old INT stats still prune (lossless widening)
    scan = table.new_scan(filter=("flight", ">", 5_000))
    assert {f.schema_id for s in scan.plan() for f in s.files} == {1}
    assert sorted(scan.to_arrow().column("id").to_pylist()) == [10, 11, 12, 13, 14]
    # added column: NULL in every old row, so old files are pruned for comparisons
    scan = table.new_scan(filter=("delay_reason", "=", "r12"))
    assert {f.schema_id for s in scan.plan() for f in s.files} == {1}
    assert scan.to_arrow().column("id").to_pylist() == [12]
    assert sorted(table.to_arrow(filter=("delay_reason", "is null")).column("id").to_pylist()) == (
        list(range(10))
    )
    # a dropped column cannot be filtered
    with pytest.raises(SchemaMismatchError, match="air_time"):
        table.to_arrow(filter=("air_time", ">", 1.0))


def test_time_travel_reads_the_schema_of_the_snapshot(catalog):
    table = evolve_flights(catalog)
    old = table.to_arrow(snapshot_id=2)
    assert old.schema == V0
    assert _sorted(old) == _sorted(pa.concat_tables([_rows_v0(0, 5), _rows_v0(5, 5)]))
    assert table.to_arrow(snapshot_id=3).schema.names == table.arrow_schema.names
    table.create_tag("before", snapshot_id=2)
    assert table.to_arrow(tag="before").schema.names == V0.names
    when = dt.datetime.fromtimestamp(table.snapshot(2).time_millis / 1000, tz=dt.UTC)
    assert table.to_arrow(as_of=when).schema.names == V0.names
    # filters of a time travel use that schema's names
    assert table.to_arrow(snapshot_id=2, filter=("dest", "=", "D0")).num_rows == 2


def test_the_latest_read_uses_the_latest_schema_before_any_new_commit(catalog):
    table = catalog.create_table("db.f", schema=V0, partition_keys=["month"])
    write_and_commit(table, _rows_v0(0, 4), commit_identifier=1)
    catalog.alter_table("db.f", CHANGES)
    got = table.to_arrow()
    assert got.schema.names == ["id", "month", "destination", "flight", "delay_reason"]
    assert _sorted(got) == expected_latest(range(4))
    assert table.latest_snapshot().schema_id == 0  # committed before the alter


def test_snapshots_record_the_newest_schema(catalog):
    table = evolve_flights(catalog)
    assert [s.schema_id for s in table.snapshots()] == [0, 0, 1]


def test_writer_opened_before_an_alter_commits_after_it(catalog):
    table = catalog.create_table("db.f", schema=V0, partition_keys=["month"])
    write_and_commit(table, _rows_v0(0, 2), commit_identifier=1)
    stale = table.new_write(commit_user="old")
    catalog.alter_table("db.f", CHANGES)
    # the stale writer checks against the schema it was opened with
    stale.write_arrow(_rows_v0(2, 3))
    with pytest.raises(SchemaMismatchError):
        stale.write_arrow(_rows_v1(5, 1))
    messages = stale.prepare_commit()
    result = table.new_commit(commit_user="old").commit(messages, commit_identifier=1)
    assert result.files_added > 0
    snap = table.latest_snapshot()
    assert snap.schema_id == 1  # the latest schema, as Paimon records it
    assert {f.schema_id for s in table.new_scan().plan() for f in s.files} == {0}
    assert _sorted(table.to_arrow()) == expected_latest(range(5))
    write_and_commit(table, _rows_v1(10, 1).select(table.arrow_schema.names), commit_identifier=2)
    assert table.to_arrow().num_rows == 6


def test_commit_refuses_files_of_a_schema_that_no_longer_reads(catalog, tmp_path):
    """A type change by another engine (INT -> STRING) makes older files unreadable as such."""
    table = catalog.create_table("db.f", schema=V0, partition_keys=["month"])
    stale = table.new_write(commit_user="old")
    stale.write_arrow(_rows_v0(0, 2))
    messages = stale.prepare_commit()
    doc = table.schema().to_json_dict()
    doc["id"] = 1
    doc["fields"][3]["type"] = "STRING"  # what an explicit cast by Java Paimon would write
    table.file_io.write_if_absent(table.paths.schema_path(1), orjson.dumps(doc))
    table.schema()  # this process learns schema 1
    with pytest.raises(SchemaMismatchError, match="flight"):
        table.new_commit(commit_user="old").commit(messages, commit_identifier=1)
    assert table.latest_snapshot() is None


def test_reads_cast_columns_another_engine_retyped_and_keep_their_files(catalog):
    """Stats of a column retyped outside the widenings are not used: the file is kept."""
    table = catalog.create_table("db.f", schema=V0, partition_keys=["month"])
    write_and_commit(table, _rows_v0(0, 4), commit_identifier=1)
    doc = table.schema().to_json_dict()
    doc["id"] = 1
    doc["fields"][3]["type"] = "STRING"
    table.file_io.write_if_absent(table.paths.schema_path(1), orjson.dumps(doc))
    got = table.to_arrow(filter=("flight", "=", "1002"))
    assert got.column("flight").to_pylist() == ["1002"]
    scan = table.new_scan(filter=("flight", "=", "zzz"))
    assert sum(len(s.files) for s in scan.plan()) == 2  # both files kept, filtered after reading
    assert scan.to_arrow().num_rows == 0


def test_compaction_writes_outputs_in_the_current_schema(catalog):
    table = evolve_flights(catalog, options={"compaction.min.file-num": "2"})
    catalog.alter_table("db.f", [SchemaChange.rename_column("delay_reason", "reason")])
    result = table.compact()
    assert result.files_before > result.files_after
    files = [f for s in table.new_scan().plan() for f in s.files]
    assert {f.schema_id for f in files} == {2}
    expected = [
        {**{k: v for k, v in r.items() if k != "delay_reason"}, "reason": r["delay_reason"]}
        for r in expected_latest()
    ]
    assert _sorted(table.to_arrow()) == expected
    assert table.to_arrow(snapshot_id=2).num_rows == 10  # older snapshots unchanged


def test_bucketed_table_reads_across_schemas(catalog):
    table = evolve_flights(catalog, options={"bucket": "3", "bucket-key": "id"})
    assert _sorted(table.to_arrow()) == expected_latest()
    assert len({s.bucket for s in table.new_scan().plan()}) > 1


def test_rows_come_in_file_order_across_schemas(catalog):
    table = catalog.create_table("db.o", schema=V0)
    for i in range(3):  # files of schema 0, 1, 2 interleave with a compaction-free history
        write_and_commit(table, _rows_v0(i * 10, 10).select(V0.names), commit_identifier=i + 1)
    catalog.alter_table("db.o", [SchemaChange.rename_column("dest", "d1")])
    for i in range(3, 5):
        data = _rows_v0(i * 10, 10).rename_columns([("d1" if n == "dest" else n) for n in V0.names])
        write_and_commit(table, data, commit_identifier=i + 1)
    catalog.alter_table("db.o", [SchemaChange.update_column_type("flight", pa.int64())])
    assert table.to_arrow().column("id").to_pylist() == list(range(50))
    assert table.to_arrow(limit=25).column("id").to_pylist() == list(range(25))
    assert table.to_arrow(filter=("d1", "=", "D1")).column("id").to_pylist() == list(
        range(1, 50, 5)
    )
