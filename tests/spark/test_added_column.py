"""A nullable column added while a Spark sink streams: later batches without it write NULL
(issue 18, item 7); a missing NOT NULL column stays a typed error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.helpers import create_table
from tests.spark.conftest import spark_env, write_parquet_files

import snaplake
from snaplake import SchemaChange
from snaplake.errors import SchemaMismatchError
from snaplake.spark import SnaplakeSink, write

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("month", pa.int64()), ("value", pa.float64())]
)
DDL = "id long, month long, value double"


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {"id": ids, "month": [1 + i % 3 for i in ids], "value": [i / 2 for i in ids]},
        schema=SCHEMA,
    )


def _table(warehouse: Path, kind: str) -> snaplake.Table:
    if kind == "append":
        return create_table(warehouse, schema=SCHEMA, partition_keys=["month"])
    return create_table(
        warehouse,
        schema=SCHEMA.set(1, pa.field("month", pa.int64(), nullable=False)),
        partition_keys=["month"],
        primary_keys=["month", "id"],
        bucket=2,
    )


def _add_note_with_cli(warehouse: Path) -> None:
    """``snaplake alter-table --add-column "note string"``, as a user would run it."""
    env = {**os.environ, "PYTHONPATH": spark_env()["PYTHONPATH"]}
    subprocess.run(
        [sys.executable, "-c", "from snaplake.cli import main; main()", "--warehouse",
         str(warehouse), "alter-table", "db.t", "--add-column", "note string"],
        env=env, check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _run(spark: Any, source: Path, checkpoint: Path, sink: SnaplakeSink) -> None:
    query = (
        spark.readStream.schema(DDL)
        .parquet(str(source))
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


@pytest.mark.parametrize("merge_schema", [False, True], ids=["plain", "merge_schema"])
@pytest.mark.parametrize("kind", ["append", "primary-key"])
def test_stream_keeps_writing_after_a_nullable_column_is_added(
    spark: Any, tmp_path: Path, kind: str, merge_schema: bool
) -> None:
    """Batch 0, then the CLI adds 'note', then batch 1 (without 'note') through the same
    sink, restarted from the checkpoint: every row reads with a NULL note."""
    warehouse, source = tmp_path / "wh", tmp_path / "src"
    table = _table(warehouse, kind)
    sink = SnaplakeSink(
        table, commit_user="ingest", check_nullability=False, merge_schema=merge_schema
    )
    write_parquet_files(source, [_rows(0, 40)], prefix="a")
    _run(spark, source, tmp_path / "ckpt", sink)
    _add_note_with_cli(warehouse)
    write_parquet_files(source, [_rows(40, 40)], prefix="b")
    _run(spark, source, tmp_path / "ckpt", sink)
    back = table.to_arrow()
    assert back.column_names == ["id", "month", "value", "note"]
    assert sorted(back["id"].to_pylist()) == list(range(80))
    assert back["note"].null_count == 80
    assert table.schema_id == 1  # merge_schema had nothing to add
    assert [s.commit_identifier for s in table.snapshots()] == [0, 1]


@pytest.mark.parametrize("kind", ["append", "primary-key"])
def test_batch_write_fills_missing_nullable_columns(spark: Any, tmp_path: Path, kind: str) -> None:
    warehouse = tmp_path / "wh"
    table = _table(warehouse, kind)
    catalog = snaplake.FileSystemCatalog(str(warehouse))
    catalog.alter_table("db.t", [SchemaChange.add_column("note", "STRING")])
    write(spark.createDataFrame(_rows(0, 10)), table, check_nullability=False)
    notes = spark.createDataFrame(
        [(i, 1 + i % 3, 0.0, f"n{i}") for i in range(10, 12)], f"{DDL}, note string"
    )
    write(notes, table, check_nullability=False)
    back = {r["id"]: r["note"] for r in table.to_arrow().to_pylist()}
    assert back == {**dict.fromkeys(range(10)), 10: "n10", 11: "n11"}


def test_missing_not_null_column_is_refused(spark: Any, tmp_path: Path) -> None:
    table = _table(tmp_path / "wh", "append")
    df = spark.createDataFrame([(1, 0.5)], "month long, value double")
    with pytest.raises(
        SchemaMismatchError, match=r"lacks column\(s\) \['id'\], which are NOT NULL"
    ):
        write(df, table, check_nullability=False)
    with pytest.raises(SchemaMismatchError, match="NOT NULL"):
        SnaplakeSink(table, commit_user="u", check_nullability=False)(df, 0)
    assert table.latest_snapshot() is None
