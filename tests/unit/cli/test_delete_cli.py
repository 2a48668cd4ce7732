"""``snaplake delete TABLE --filter ... [--dry-run]`` on append tables with deletion vectors."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from tests.unit.cli.runner import Snaplake


def _table(snaplake: Snaplake, tmp_path: Path, *options: str) -> Path:
    data = tmp_path / "rows.parquet"
    pq.write_table(
        pa.table({"id": pa.array(range(6), pa.int64()), "month": [1, 1, 1, 2, 2, 2],
                  "carrier": ["AA", "BB", "AA", "AA", "BB", "AA"]}),
        data,
    )  # fmt: skip
    args = [a for o in options for a in ("--option", o)]
    snaplake("create-table", "db.t", "--from-parquet", str(data), *args)
    snaplake("write", "db.t", str(data))
    return data


def test_delete_with_a_dry_run_first(snaplake: Snaplake, tmp_path: Path) -> None:
    _table(snaplake, tmp_path, "deletion-vectors.enabled=true")
    preview = snaplake.json("delete", "db.t", "--filter", "month = 1 and carrier = 'AA'",
                            "--dry-run")  # fmt: skip
    assert preview["rows"] == 2 and len(preview["files"]) == 1 and preview["dry_run"] is True
    assert len(snaplake.json("read", "db.t")) == 6  # the dry run wrote nothing
    done = snaplake.json("delete", "db.t", "--filter", "month = 1", "--filter", "carrier = 'AA'")
    assert done["kind"] == "OVERWRITE"
    assert sorted(r["id"] for r in snaplake.json("read", "db.t")) == [1, 3, 4, 5]
    again = snaplake.json("delete", "db.t", "--filter", "month = 1 and carrier = 'AA'",
                          "--dry-run")  # fmt: skip
    assert again["rows"] == 0 and again["files"] == []
    text = snaplake("delete", "db.t", "--filter", "id >= 4", "--dry-run").output
    assert "2" in text


def test_delete_refuses_a_table_without_deletion_vectors(snaplake: Snaplake, tmp_path) -> None:
    _table(snaplake, tmp_path)
    result = snaplake("delete", "db.t", "--filter", "month = 1", expect=1)
    assert "deletion-vectors.enabled" in result.output
    bad = snaplake("delete", "db.t", "--filter", "nope = 1", expect=2)
    assert "nope" in bad.output
    assert len(snaplake.json("read", "db.t")) == 6
