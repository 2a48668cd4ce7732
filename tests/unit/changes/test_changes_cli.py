"""``snaplake changes`` through the installed console script (a subprocess, a real warehouse)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from snaplake.catalog import FileSystemCatalog

pytestmark = pytest.mark.integration

SCRIPT = Path(sys.executable).parent / "snaplake"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _run(*args: str, env: dict[str, str], expect: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == expect, (proc.returncode, proc.stdout, proc.stderr)
    return proc


def test_changes_command(tmp_path: Path) -> None:
    if not SCRIPT.exists():
        pytest.skip(f"{SCRIPT} is missing; run .venv/bin/pip install -e . --no-deps")
    wh = tmp_path / "wh"
    catalog = FileSystemCatalog(str(wh))
    catalog.create_database("db")
    table = catalog.create_table(
        "db.pk", schema=SCHEMA, primary_keys=["id"],
        options={"bucket": "1", "changelog-producer": "input"},
    )  # fmt: skip
    table.write(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    table.write(pa.table({"id": [2], "v": ["b"]}, schema=SCHEMA), row_kinds=["-D"])
    table.write(pa.table({"id": [3], "v": ["c"]}, schema=SCHEMA))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SNAPLAKE_")}
    env["SNAPLAKE_WAREHOUSE"] = str(wh)

    expected = table.changes(2).read_all().to_pylist()
    rows = json.loads(_run("--output", "json", "changes", "db.pk", "--from", "2", env=env).stdout)
    assert rows == expected
    jsonl = _run("changes", "db.pk", "--from", "2", "--to", "2", "--format", "jsonl", env=env)
    assert [json.loads(line) for line in jsonl.stdout.splitlines()] == [
        {"id": 2, "v": "b", "_row_kind": "-D", "_snapshot_id": 2}
    ]
    text = _run("changes", "db.pk", "--from", "1", "--mode", "delta", env=env).stdout
    assert "-D" in text and "_snapshot_id" in text
    got = _run("changes", "db.pk", "--from", "1", "--columns", "id", "--filter", "id >= 2",
               "--format", "csv", env=env).stdout  # fmt: skip
    assert list(csv.reader(io.StringIO(got))) == [
        ["id", "_row_kind", "_snapshot_id"],
        ["2", "+I", "1"],
        ["2", "-D", "2"],
        ["3", "+I", "3"],
    ]
    out = tmp_path / "c.parquet"
    _run("changes", "db.pk", "--from", "1", "--mode", "diff", "--format", "parquet",
         "--to-file", str(out), env=env)  # fmt: skip
    assert pq.read_table(out).equals(table.changes(1, mode="diff").read_all())
    limited = _run("--output", "json", "changes", "db.pk", "--from", "1", "--limit", "1", env=env)
    assert limited.stdout.count('"_row_kind"') == 1
    # bad input: exit codes as a shell script sees them
    _run("changes", "db.pk", "--from", "9", env=env, expect=4)  # after the latest
    _run("changes", "db.pk", "--from", "1", "--mode", "all", env=env, expect=2)
    _run("changes", "db.pk", "--from", "3", "--to", "2", env=env, expect=2)
    _run("changes", "db.nope", "--from", "1", env=env, expect=4)
    err = _run("changes", "db.pk", "--from", "1", "--format", "parquet", env=env, expect=2)
    assert "--to-file" in err.stderr
