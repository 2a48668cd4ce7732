"""The Arrow C stream: pyarrow, Polars and DuckDB read a scan and a changes() reader."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pytest

from snaplake.catalog import FileSystemCatalog
from snaplake.table import Table

SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string()),
     pa.field("month", pa.int32())]
)  # fmt: skip


@pytest.fixture(params=["append", "primary-key"])
def table(request: Any, tmp_path: Any) -> Table:
    catalog = FileSystemCatalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    keys = ["id", "month"] if request.param == "primary-key" else []
    opts = {"bucket": "2"} if keys else {}
    t = catalog.create_table(
        "db.t", schema=SCHEMA, primary_keys=keys, partition_keys=["month"], options=opts
    )
    for i in range(3):
        ids = list(range(i * 10, i * 10 + 5))
        t.write(pa.table({"id": ids, "v": [f"v{i}"] * 5, "month": [i % 2] * 5}, schema=SCHEMA))
    return t


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([(n, "ascending") for n in t.column_names if not n.startswith("_")])


@pytest.mark.parametrize(
    "kwargs", [{}, {"columns": ["v", "id"], "filter": ("id", ">=", 10)}, {"snapshot_id": 2}]
)
def test_pyarrow_polars_duckdb_read_a_scan_through_the_c_stream(table, kwargs):
    expected = _sorted(table.to_arrow(**kwargs))
    assert _sorted(pa.table(table.new_scan(**kwargs))).equals(expected)
    assert _sorted(pl.DataFrame(table.new_scan(**kwargs)).to_arrow()).to_pylist() == (
        expected.to_pylist()
    )
    assert _sorted(table.to_polars(**kwargs).to_arrow()).to_pylist() == expected.to_pylist()
    scan = table.new_scan(**kwargs)  # noqa: F841  # DuckDB finds it by name
    relation = duckdb.sql("select * from scan")
    assert relation is not None
    got = relation.to_arrow_table()
    assert _sorted(got).to_pylist() == expected.to_pylist()
    con = duckdb.connect()
    table.to_duckdb(con, "flights", **kwargs)
    flights = con.sql("select * from flights")
    assert flights is not None
    assert _sorted(flights.to_arrow_table()).to_pylist() == (expected.to_pylist())


def test_a_changes_reader_and_a_change_scan_stream_too(table):
    expected = table.changes(2).read_all()
    assert pa.table(table.changes(2)).equals(expected)
    assert pl.from_arrow(table.changes(2)).to_arrow().to_pylist() == expected.to_pylist()
    reader = table.changes(2)  # noqa: F841
    relation = duckdb.sql("select * from reader order by _snapshot_id, id")
    assert relation is not None
    got = relation.to_arrow_table()
    assert (
        got.to_pylist()
        == expected.sort_by([("_snapshot_id", "ascending"), ("id", "ascending")]).to_pylist()
    )
    opts = {"incremental-between": "1,3"}
    assert table.to_polars(options=opts).to_arrow().to_pylist() == expected.to_pylist()
