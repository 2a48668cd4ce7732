"""Small helpers shared by tests: a sample table schema and rows."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("month", pa.int32()),
        pa.field("carrier", pa.string()),
        pa.field("distance", pa.float64()),
        pa.field("day", pa.date32()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("price", pa.decimal128(10, 2)),
    ]
)


def rows(start: int, count: int, *, months: int = 3) -> pa.Table:
    """``count`` deterministic rows with ids ``start..start+count-1``."""
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "month": pa.array([1 + i % months for i in ids], pa.int32()),
            "carrier": pa.array([["AA", "UA", "DL", "B6 long carrier name"][i % 4] for i in ids]),
            "distance": pa.array([float(100 + (i * 37) % 3000) for i in ids]),
            "day": pa.array([dt.date(2013, 1, 1) + dt.timedelta(days=i % 300) for i in ids]),
            "ts": pa.array(
                [dt.datetime(2013, 1, 1) + dt.timedelta(minutes=i) for i in ids], pa.timestamp("us")
            ),
            "price": pa.array([Decimal(i % 1000) / 4 for i in ids], pa.decimal128(10, 2)),
        },
        schema=SCHEMA,
    )


def sorted_ids(table: pa.Table) -> list[int]:
    """The ``id`` column, sorted."""
    return sorted(table.column("id").to_pylist())


def avro_records(data: bytes) -> list[dict[str, Any]]:
    """The records of an Avro container file as plain fastavro decodes them."""
    out = []
    for rec in fastavro.reader(io.BytesIO(data)):
        assert isinstance(rec, dict), rec  # a record schema decodes to dicts
        out.append(rec)
    return out


def referenced_files(table: Any) -> list[str]:
    """Every manifest list, manifest and data file the retained snapshots of ``table`` reference."""
    from snaplake.store.format.manifest_list import decode_manifest_list

    paths: list[str] = []
    for snap in table.snapshots():
        for name in (snap.base_manifest_list, snap.delta_manifest_list):
            path = table.paths.manifest_path(name)
            paths.append(path)
            metas = decode_manifest_list(table.file_io.read_bytes(path), path=path)
            paths += [table.paths.manifest_path(m.file_name) for m in metas]
        for split in table.new_scan(snapshot_id=snap.id).plan():
            paths += split.paths
    return paths
