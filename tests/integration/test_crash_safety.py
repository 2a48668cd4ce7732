"""SIGKILL a writer at every point of the commit: never a partial commit, exactly once on rerun."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import snaplake

WRITER = Path(__file__).with_name("writer_proc.py")
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("user", pa.string())])
ROWS = 7
# Storage operations of one commit: data file, manifest, base list, delta list, snapshot,
# LATEST — each killable before or after (writer_proc counts exactly these).
OPS_PER_COMMIT = 6
SNAPSHOT_OP = 5

pytestmark = pytest.mark.integration


def _ids(ident: int) -> set[int]:
    return {ident * 1_000_000 + k for k in range(ROWS)}


def test_sigkill_at_random_points_of_the_commit(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    table = catalog.create_table("db.t", schema=SCHEMA)
    # Every kill point (each storage operation, killed before or after it) exactly once, in a
    # seeded random order; 32 random draws covered the same 12 points, with repeats.
    points = [(op, after) for op in range(1, OPS_PER_COMMIT + 1) for after in (False, True)]
    random.Random(20261121).shuffle(points)
    trials = len(points)
    for ident, (kill_at, after) in enumerate(points, start=1):
        # Re-run the previous (possibly crashed) identifier, then crash in the new one.
        idents = f"{ident - 1},{ident}" if ident > 1 else str(ident)
        # Count only the new identifier's operations: the rerun writes nothing if it landed.
        cmd = [sys.executable, str(WRITER), "--root", table.root, "--user", "crashy",
               "--idents", idents, "--rows", str(ROWS), "--kill-at", str(kill_at),
               "--kill-last-only"]  # fmt: skip
        if after:
            cmd.append("--kill-after")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        acks = [line.split() for line in proc.stdout.splitlines() if line.startswith("ACK")]
        assert proc.returncode == -9, f"no crash at point {kill_at}: {proc.stderr}"
        # the rerun of ident-1 precedes the crash and is acknowledged
        assert [int(a[1]) for a in acks] == ([ident - 1] if ident > 1 else [])
        # After every crash: the table opens and reads, and each identifier is all-or-nothing.
        reopened = catalog.get_table("db.t")
        ids = reopened.to_arrow().column("id").to_pylist()
        assert len(ids) == len(set(ids)), "a row appears twice"
        present = {i // 1_000_000 for i in ids}
        for p in present:
            assert _ids(p) <= set(ids), f"identifier {p} is partially visible"
        assert ident - 1 in present or ident == 1  # the rerun made the previous one land
        # The crashed identifier is visible exactly when its snapshot file was created.
        published = kill_at > SNAPSHOT_OP or (kill_at == SNAPSHOT_OP and after)
        assert (ident in present) == published, (kill_at, after)
        snaps = reopened.snapshots()
        assert [s.id for s in snaps] == list(range(1, len(snaps) + 1))
    # Final rerun of the last identifier: it commits exactly once.
    subprocess.run(
        [sys.executable, str(WRITER), "--root", table.root, "--user", "crashy",
         "--idents", str(trials), "--rows", str(ROWS)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    ids = catalog.get_table("db.t").to_arrow().column("id").to_pylist()
    assert len(ids) == len(set(ids)) == trials * ROWS
    assert set(ids) == set().union(*(_ids(i) for i in range(1, trials + 1)))
