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
# LATEST — each killable before or after.
OPS_PER_COMMIT = 6

pytestmark = pytest.mark.integration


def _ids(ident: int) -> set[int]:
    return {ident * 1_000_000 + k for k in range(ROWS)}


def test_sigkill_at_random_points_of_the_commit(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    table = catalog.create_table("db.t", schema=SCHEMA)
    rng = random.Random(20261121)
    landed: set[int] = set()
    trials = 32
    for ident in range(1, trials + 1):
        kill_at = rng.randint(1, OPS_PER_COMMIT)
        after = rng.random() < 0.5
        # Re-run the previous (possibly crashed) identifier, then crash in the new one.
        idents = f"{ident - 1},{ident}" if ident > 1 else str(ident)
        kill = kill_at + (OPS_PER_COMMIT if ident > 1 else 0)
        cmd = [sys.executable, str(WRITER), "--root", table.root, "--user", "crashy",
               "--idents", idents, "--rows", str(ROWS), "--kill-at", str(kill)]  # fmt: skip
        if after:
            cmd.append("--kill-after")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        acks = [line.split() for line in proc.stdout.splitlines() if line.startswith("ACK")]
        if ident > 1:
            # the rerun of ident-1 precedes the crash; its outcome is exact
            # (a duplicate if the crashed attempt had landed)
            assert proc.returncode != 0 or acks
        assert proc.returncode == -9 or (
            proc.returncode == 0 and len(acks) == len(idents.split(","))
        ), proc.stderr
        # After every crash: the table opens and reads, and each identifier is all-or-nothing.
        reopened = catalog.get_table("db.t")
        ids = reopened.to_arrow().column("id").to_pylist()
        assert len(ids) == len(set(ids)), "a row appears twice"
        present = {i // 1_000_000 for i in ids}
        for p in present:
            assert _ids(p) <= set(ids), f"identifier {p} is partially visible"
        landed = present
        assert ident - 1 in landed or ident == 1  # the rerun made the previous one land
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
