"""Schema evolution on S3 (SeaweedFS): alter, read old files by field id, time travel, compact."""

from __future__ import annotations

import pytest
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
