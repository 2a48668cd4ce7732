"""Spark and schema evolution: merge_schema in write and SnaplakeSink (with a driver crash
between the alter and the commit), reads of tables whose files span schemas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.helpers import create_table, write_and_commit
from tests.spark.conftest import numbered_rows, spark_env, write_parquet_files

import snaplake
from snaplake import SchemaChange
from snaplake.errors import SchemaMismatchError
from snaplake.spark import read, write

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

JOB = Path(__file__).with_name("stream_job.py")
ROWS_PER_FILE = 300

NARROW = pa.schema([("id", pa.int64()), ("month", pa.int64()), ("v", pa.int32()),
                    ("value", pa.float32())])  # fmt: skip


def _narrow_rows(start: int, n: int) -> pa.Table:
    ids = range(start, start + n)
    return pa.table(
        {"id": list(ids), "month": [1 + i % 3 for i in ids], "v": [i % 1000 for i in ids],
         "value": [i / 4 for i in ids]},
        schema=NARROW,
    )  # fmt: skip


def _table(tmp_path: Path) -> snaplake.Table:
    table = create_table(tmp_path / "wh", schema=NARROW, partition_keys=["month"])
    write_and_commit(table, _narrow_rows(0, 50), commit_user="seed", commit_identifier=1)
    return table


def _wider_df(spark: Any, start: int, n: int) -> Any:
    ids = range(start, start + n)
    return spark.createDataFrame(
        [(i, 1 + i % 3, 3_000_000_000 + i, i / 4, f"r{i}") for i in ids],
        "id long, month long, v long, value double, reason string",
    )


def test_write_without_merge_schema_names_the_columns(spark: Any, tmp_path: Path) -> None:
    table = _table(tmp_path)
    with pytest.raises(SchemaMismatchError) as info:
        write(_wider_df(spark, 100, 5), table)
    assert "reason" in str(info.value)
    with pytest.raises(SchemaMismatchError, match="'v'"):
        write(_wider_df(spark, 100, 5).drop("reason"), table)
    assert table.schema_id == 0
    assert table.to_arrow().num_rows == 50


def test_write_with_merge_schema_adds_and_widens(spark: Any, tmp_path: Path) -> None:
    table = _table(tmp_path)
    result = write(_wider_df(spark, 100, 20), table, merge_schema=True)
    assert result.records_added == 20
    assert table.schema_id == 1
    schema = table.arrow_schema
    assert [(f.name, f.type) for f in schema] == [
        ("id", pa.int64()), ("month", pa.int64()), ("v", pa.int64()), ("value", pa.float64()),
        ("reason", pa.string()),
    ]  # fmt: skip
    rows = {r["id"]: r for r in table.to_arrow().to_pylist()}
    assert len(rows) == 70
    assert rows[3] == {"id": 3, "month": 1, "v": 3, "value": 0.75, "reason": None}
    assert rows[105]["v"] == 3_000_000_105 and rows[105]["reason"] == "r105"
    # the same data again: nothing to merge, no new schema
    write(_wider_df(spark, 200, 5), table, merge_schema=True)
    assert table.schema_id == 1
    # a column that cannot widen is refused, naming it; nothing written
    bad = spark.createDataFrame([(1, 1, 1, 1.0, 5)], "id long, month long, v long, "
                                "value double, reason int")  # fmt: skip
    with pytest.raises(SchemaMismatchError, match="reason"):
        write(bad, table, merge_schema=True)
    assert table.schema_id == 1
    # spark.read maps the files of schema 0 by field id, also after a rename
    snaplake.FileSystemCatalog(str(tmp_path / "wh")).alter_table(
        "db.t", [SchemaChange.rename_column("value", "amount")]
    )
    got = read(spark, table).toArrow()
    want = table.to_arrow()
    assert got.column_names == want.column_names == ["id", "month", "v", "amount", "reason"]
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == sorted(
        want.to_pylist(), key=lambda r: r["id"]
    )
    old = read(spark, table, snapshot_id=1).toArrow()
    assert old.column_names == NARROW.names
    assert old.num_rows == 50
    filtered = read(spark, table, filter=("amount", ">=", 50.0), columns=["id"]).toArrow()
    expected = sorted(r["id"] for r in want.to_pylist() if r["amount"] >= 50.0)
    assert sorted(filtered.column("id").to_pylist()) == expected


def _run_job(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **spark_env()}
    cmd = [
        sys.executable, str(JOB),
        "--warehouse", str(tmp_path / "wh"),
        "--table", "db.events",
        "--source", str(tmp_path / "src"),
        "--checkpoint", str(tmp_path / "ckpt"),
        "--results", str(tmp_path / "results.jsonl"),
        "--merge-schema", "--new-column-from-batch", "2",
        *extra,
    ]  # fmt: skip
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)


def test_stream_new_column_mid_stream_with_crash_between_alter_and_commit(
    tmp_path: Path,
) -> None:
    """Batch 2 brings a new column; the driver dies right after its alter landed.

    The restarted query replays batch 2: the column is there, so nothing is altered
    again (one new schema in all), and every row lands exactly once.
    """
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    schema = pa.schema([("id", pa.int64()), ("month", pa.int64()), ("value", pa.float64())])
    table = catalog.create_table("db.events", schema=schema, partition_keys=["month"])
    write_parquet_files(
        tmp_path / "src", [numbered_rows(i * ROWS_PER_FILE, ROWS_PER_FILE) for i in range(4)]
    )

    first = _run_job(tmp_path, "--kill-after-alter", "2")
    assert first.returncode == -9, first.stderr[-3000:]
    results = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["batch_id"] for r in results] == [0, 1]
    assert table.schema_id == 1  # the alter of batch 2 landed ...
    assert "reason" in table.arrow_schema.names
    assert table.to_arrow().num_rows == 2 * ROWS_PER_FILE  # ... its commit did not

    second = _run_job(tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    results = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [(r["batch_id"], r["outcome"]) for r in results[2:]] == [
        (2, "committed"), (3, "committed")
    ]  # fmt: skip
    assert sorted(table.schemas()) == [0, 1]  # exactly one alter across the replay
    got = table.to_arrow()
    ids = got.column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 4 * ROWS_PER_FILE
    with_reason = {r["id"] for r in got.to_pylist() if r["reason"] is not None}
    assert len(with_reason) == 2 * ROWS_PER_FILE  # the two batches from batch 2 on
    assert all(r["reason"] == f"r{r['id']}" for r in got.to_pylist() if r["reason"])
