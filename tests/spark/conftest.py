"""Spark test fixtures: one local SparkSession per test module, tables and file helpers.

The session runs ``local[2]`` (a module may set ``SPARK_MASTER``, e.g.
``"local[2,3]"`` to let Spark retry failed tasks). Executors must run this
interpreter and import ``tests.*`` (fault-injecting FileIOs live there), so
``PYSPARK_PYTHON`` and ``PYTHONPATH`` are set before the JVM starts.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

REPO_ROOT = Path(__file__).resolve().parents[2]


def spark_env() -> dict[str, str]:
    """Environment for a process that starts Spark (this one, or a driver subprocess)."""
    path = os.environ.get("PYTHONPATH", "")
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{path}" if path else str(REPO_ROOT),
    }


def new_session(master: str = "local[2]") -> Any:
    """Start a small local SparkSession configured for tests."""
    os.environ.update(spark_env())
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master(master)
        .appName("snaplake-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    """One SparkSession per test module (``SPARK_MASTER`` in the module overrides the master)."""
    session = new_session(getattr(request.module, "SPARK_MASTER", "local[2]"))
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


def data_files_on_disk(root: Path) -> set[str]:
    """Names of every Parquet data file under a table directory."""
    return {p.name for p in root.rglob("data-*.parquet")}


def live_data_files(table: Any) -> set[str]:
    """Names of the data files the table's latest snapshot references."""
    return {f.file_name for split in table.new_scan().plan() for f in split.files}


def clean_orphans(table: Any) -> None:
    """Run the table's orphan clean with no grace period, if the core has one yet."""
    from datetime import timedelta

    for name in ("remove_orphan_files", "orphan_clean", "clean_orphan_files"):
        method = getattr(table, name, None)
        if method is not None:
            try:
                method(older_than=timedelta(0), dry_run=False)
            except TypeError:
                method()
            return


def write_parquet_files(directory: Path, tables: list[pa.Table], *, prefix: str = "part") -> None:
    """Write each table as one Parquet file (named so that file order = list order)."""
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    for i, t in enumerate(tables):
        tmp = directory / f".{prefix}-{i:05d}.parquet.tmp"
        pq.write_table(t, tmp)
        tmp.rename(directory / f"{prefix}-{i:05d}.parquet")


def numbered_rows(start: int, count: int, *, months: int = 3) -> pa.Table:
    """``count`` rows with unique ``id`` from ``start``, ``month`` in 1..months, a ``value``."""
    ids = pa.array(range(start, start + count), pa.int64())
    return pa.table(
        {
            "id": ids,
            "month": pa.array([1 + i % months for i in range(start, start + count)], pa.int64()),
            "value": pa.array([float(i) / 2 for i in range(start, start + count)], pa.float64()),
        }
    )


ROWS_SCHEMA = pa.schema([("id", pa.int64()), ("month", pa.int64()), ("value", pa.float64())])
ROWS_SPARK_DDL = "id long, month long, value double"
