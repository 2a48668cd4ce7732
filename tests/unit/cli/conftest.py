"""Fixtures for the CLI tests: a warehouse path, sample Parquet/CSV inputs, a runner."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.unit.cli.runner import Snaplake

SALES = pa.table(
    {
        "id": pa.array([1, 2, 3, 4], pa.int64()),
        "city": pa.array(["Berlin", "Paris", "Berlin", "Rome"]),
        "amount": pa.array([1.5, 7.0, 9.25, None]),
        "day": pa.array([dt.date(2024, 1, 1)] * 2 + [dt.date(2024, 1, 2)] * 2),
    }
)

CSV_TEXT = "id,city,amount,day\n5,Oslo,3.5,2024-01-03\n6,Berlin,,2024-01-03\n"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SNAPLAKE_WAREHOUSE", "SNAPLAKE_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    return str(tmp_path / "wh")


@pytest.fixture
def sales_parquet(tmp_path: Path) -> Path:
    path = tmp_path / "sales.parquet"
    pq.write_table(SALES, path)
    return path


@pytest.fixture
def sales_csv(tmp_path: Path) -> Path:
    path = tmp_path / "more.csv"
    path.write_text(CSV_TEXT)
    return path


@pytest.fixture
def snaplake(warehouse: str) -> Snaplake:
    return Snaplake(warehouse)


@pytest.fixture
def sales_table(snaplake: Snaplake, sales_parquet: Path, sales_csv: Path) -> str:
    """``shop.sales`` partitioned by day, one commit of the Parquet and CSV rows."""
    snaplake("create-table", "shop.sales", "--from-parquet", str(sales_parquet),
             "--partition-keys", "day")  # fmt: skip
    snaplake("write", "shop.sales", str(sales_parquet), str(sales_csv))
    return "shop.sales"
