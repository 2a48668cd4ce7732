"""Real OS processes appending to one table at once: nothing lost, nothing duplicated."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from tests.helpers import create_table

WRITER = Path(__file__).with_name("writer_proc.py")
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("user", pa.string())])

pytestmark = pytest.mark.integration


def _table(tmp_path, options=None):
    return create_table(tmp_path / "wh", schema=SCHEMA, options=options)


def _run_writers(table, *, writers: int, commits: int, rows: int) -> list[list[str]]:
    start_at = time.time() + 3.0  # all processes import first, then start together
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(WRITER),
                "--root",
                table.root,
                "--user",
                f"w{n}",
                "--user-no",
                str(n),
                "--idents",
                ",".join(map(str, range(1, commits + 1))),
                "--rows",
                str(rows),
                "--start-at",
                str(start_at),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(writers)
    ]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        outputs.append([line for line in out.splitlines() if line.startswith("ACK")])
    return outputs


def _check(table, outputs, *, writers, commits, rows):
    acked_snapshots = []
    for n, lines in enumerate(outputs):
        assert len(lines) == commits, f"writer {n} acknowledged {len(lines)} of {commits}"
        for line in lines:
            _, _ident, snap, dup, _attempts = line.split()
            assert dup == "0"
            acked_snapshots.append(int(snap))
    assert sorted(acked_snapshots) == list(range(1, writers * commits + 1))
    snaps = table.snapshots()
    assert [s.id for s in snaps] == list(range(1, writers * commits + 1))
    data = table.to_arrow()
    ids = data.column("id").to_pylist()
    assert len(ids) == len(set(ids)) == writers * commits * rows
    expected = {
        i * 1_000_000 + n * 10_000 + k
        for n in range(writers) for i in range(1, commits + 1) for k in range(rows)
    }  # fmt: skip
    assert set(ids) == expected
    assert snaps[-1].total_record_count == writers * commits * rows
    assert snaps[-1].txn_map() == {f"w{n}": commits for n in range(writers)}


def test_four_processes_append_25_commits_each(tmp_path):
    table = _table(tmp_path)
    outputs = _run_writers(table, writers=4, commits=25, rows=10)
    _check(table, outputs, writers=4, commits=25, rows=10)


def test_stress_many_small_commits(tmp_path):
    table = _table(tmp_path, {"commit.max-retries": "100"})
    outputs = _run_writers(table, writers=8, commits=40, rows=1)
    _check(table, outputs, writers=8, commits=40, rows=1)
