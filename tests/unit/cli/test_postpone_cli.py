"""The CLI on a postpone-bucket table: rows written are read after ``snaplake compact``."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from tests.unit.cli.runner import Snaplake


def test_compact_assigns_postponed_rows(snaplake: Snaplake, tmp_path: Path) -> None:
    first = tmp_path / "first.parquet"
    second = tmp_path / "second.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}), first)
    pq.write_table(pa.table({"id": pa.array([2, 4], pa.int64()), "v": ["B", "d"]}), second)
    snaplake("create-table", "db.pp", "--from-parquet", str(first), "--primary-keys", "id",
             "--option", "bucket=-2", "--option", "postpone.default-bucket-num=2")  # fmt: skip
    snaplake("write", "db.pp", str(first))
    snaplake("write", "db.pp", str(second))
    assert snaplake.json("read", "db.pp") == []  # pending until compacted
    doc = snaplake.json("compact", "db.pp")
    assert isinstance(doc, dict) and doc["compacted"] is True
    rows = snaplake.json("read", "db.pp")
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "a"), (2, "B"), (3, "c"), (4, "d")]
    assert snaplake.json("compact", "db.pp")["compacted"] is False
