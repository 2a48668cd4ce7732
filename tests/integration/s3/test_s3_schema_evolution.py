"""Schema evolution on S3 (SeaweedFS): alter, read old files by field id, time travel, compact."""

from __future__ import annotations

import pytest
from tests.helpers import write_and_commit
from tests.integration.s3.conftest import S3Warehouse
from tests.unit.test_schema_evolution import V0, evolve_flights, expected_latest

from snaplake import SchemaChange

pytestmark = [pytest.mark.integration, pytest.mark.s3]


def test_schema_evolution_on_s3(warehouse: S3Warehouse) -> None:
    catalog = warehouse.catalog()
    table = evolve_flights(catalog, options={"compaction.min.file-num": "2"})
    assert any(k.endswith("schema/schema-1") for k in warehouse.list_keys())
    got = sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"])
    assert got == expected_latest()
    assert table.to_arrow(snapshot_id=2).schema == V0
    scan = table.new_scan(filter=("delay_reason", "=", "r12"))
    assert {f.schema_id for s in scan.plan() for f in s.files} == {1}
    assert scan.to_arrow().column("id").to_pylist() == [12]
    catalog.alter_table("db.f", [SchemaChange.rename_column("destination", "dest2")])
    assert table.compact().files_after > 0
    files = [f for s in table.new_scan().plan() for f in s.files]
    assert {f.schema_id for f in files} == {2}
    again = sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["dest2"] for r in again] == [r["destination"] for r in expected_latest()]


def test_concurrent_alters_on_s3_take_one_schema_id_each(warehouse: S3Warehouse) -> None:
    """schema-<N+1> is a conditional PutObject: racing alters never overwrite one another."""
    import threading

    import pyarrow as pa

    catalog = warehouse.catalog()
    table = catalog.create_table("db.r", schema=V0)
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def alter(i: int) -> None:
        cat = warehouse.catalog()
        barrier.wait()
        try:
            for j in range(3):
                cat.alter_table("db.r", [SchemaChange.add_column(f"c{i}_{j}", pa.int32())])
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=alter, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(table.schemas()) == list(range(10))
    added = [f for f in table.schema().fields if "_" in f["name"] and f["name"][0] == "c"]
    assert sorted(f["id"] for f in added) == list(range(5, 14))


def test_primary_key_schema_evolution_on_s3(warehouse: S3Warehouse) -> None:
    """Merge-on-read by field id, time travel and compaction of an evolved primary-key table."""
    import pyarrow as pa

    catalog = warehouse.catalog()
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("qty", pa.int32()),
                        ("name", pa.string())])  # fmt: skip
    table = catalog.create_table("db.pk", schema=schema, primary_keys=["id"],
                                 options={"bucket": "2", "merge-engine": "aggregation",
                                          "fields.qty.aggregate-function": "sum"})  # fmt: skip

    def upsert(data: pa.Table, ident: int) -> None:
        write_and_commit(table, data, commit_identifier=ident)

    upsert(pa.table({"id": [1, 2], "qty": pa.array([2**30, 1], pa.int32()), "name": ["a", "b"]},
                    schema=schema), 1)  # fmt: skip
    catalog.alter_table("db.pk", [SchemaChange.update_column_type("qty", pa.int64()),
                                  SchemaChange.rename_column("name", "label"),
                                  SchemaChange.add_column("tag", pa.string())])  # fmt: skip
    upsert(pa.table({"id": [1, 3], "qty": [2**32, 5], "label": [None, "c"], "tag": ["x", "y"]},
                    schema=table.arrow_schema), 2)  # fmt: skip
    want = [(1, 2**30 + 2**32, "a", "x"), (2, 1, "b", None), (3, 5, "c", "y")]

    def rows() -> list[tuple[object, ...]]:
        return sorted(
            (r["id"], r["qty"], r["label"], r["tag"]) for r in table.to_arrow().to_pylist()
        )

    assert rows() == want
    assert table.to_arrow(snapshot_id=1).schema.names == ["id", "qty", "name"]
    table.compact(full=True)
    assert rows() == want
