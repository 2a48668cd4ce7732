"""The CLI on a primary-key table: create, write (upsert), read, compact --full."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from tests.unit.cli.runner import Snaplake


def test_primary_key_table_through_the_cli(snaplake: Snaplake, tmp_path: Path) -> None:
    first = tmp_path / "first.parquet"
    second = tmp_path / "second.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}), first)
    pq.write_table(pa.table({"id": pa.array([2, 4], pa.int64()), "v": ["B", "d"]}), second)
    created = snaplake.json("create-table", "db.kv", "--from-parquet", str(first),
                            "--primary-keys", "id", "--option", "bucket=2",
                            "--option", "num-sorted-run.compaction-trigger=3")  # fmt: skip
    assert isinstance(created, dict) and created["primary_keys"] == ["id"]
    assert created["columns"][0] == "0:id BIGINT NOT NULL"  # Paimon: primary keys are NOT NULL
    for _ in range(2):
        snaplake("write", "db.kv", str(first))
    snaplake("write", "db.kv", str(second))
    rows = snaplake.json("read", "db.kv")
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "a"), (2, "B"), (3, "c"), (4, "d")]
    doc = snaplake.json("compact", "db.kv", "--full")
    assert isinstance(doc, dict) and doc["compacted"] is True
    assert snaplake.json("compact", "db.kv", "--full")["compacted"] is False
    filtered = snaplake.json("read", "db.kv", "--filter", "id >= 2")
    assert sorted((r["id"], r["v"]) for r in filtered) == [(2, "B"), (3, "c"), (4, "d")]
    snaplake("create-table", "db.app", "--from-parquet", str(first))
    for _ in range(3):
        snaplake("write", "db.app", str(first))
    # --full does on an append table what Table.compact(full=True) does: a full compaction
    full = snaplake.json("compact", "db.app", "--full")
    assert isinstance(full, dict) and full["compacted"] is True and full["files_before"] == 3
    assert snaplake.json("compact", "db.app", "--full")["compacted"] is False
    assert len(snaplake.json("read", "db.app")) == 9


def test_evolved_primary_key_table_through_the_cli(snaplake: Snaplake, tmp_path: Path) -> None:
    first = tmp_path / "first.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": pa.array([1, 2, 3],
                                                                               pa.int32())}),
                   first)  # fmt: skip
    snaplake("create-table", "db.kv", "--from-parquet", str(first), "--primary-keys", "id",
             "--option", "bucket=1", "--option", "merge-engine=aggregation",
             "--option", "fields.v.aggregate-function=sum")  # fmt: skip
    snaplake("write", "db.kv", str(first))
    snaplake("alter-table", "db.kv", "--update-column-type", "total bigint", "--rename-column",
             "v=total", "--add-column", "note string")  # fmt: skip
    snaplake("alter-table", "db.kv", "--drop-column", "id", expect=1)  # a primary key
    second = tmp_path / "second.parquet"
    pq.write_table(pa.table({"id": pa.array([2, 4], pa.int64()),
                             "total": pa.array([2**40, 4], pa.int64()), "note": ["x", "y"]}),
                   second)  # fmt: skip
    snaplake("write", "db.kv", str(second))
    want = [(1, 1, None), (2, 2 + 2**40, "x"), (3, 3, None), (4, 4, "y")]
    rows = snaplake.json("read", "db.kv")
    assert sorted((r["id"], r["total"], r["note"]) for r in rows) == want
    old = snaplake.json("read", "db.kv", "--snapshot", "1")
    assert sorted((r["id"], r["v"]) for r in old) == [(1, 1), (2, 2), (3, 3)]
    assert snaplake.json("compact", "db.kv", "--full")["compacted"] is True
    rows = snaplake.json("read", "db.kv", "--filter", "total > 3")
    assert sorted((r["id"], r["total"], r["note"]) for r in rows) == [want[1], want[3]]
