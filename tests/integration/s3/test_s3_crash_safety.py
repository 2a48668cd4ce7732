"""SIGKILL a writer mid-commit on SeaweedFS: the table stays readable, no commit is partial.

The S3 twin of tests/integration/test_crash_safety.py, with fewer trials (each costs a
process start). Every storage operation of a commit is a kill point, before or after:
the data file (one PutObject; a large one streams), the manifest, the two manifest lists, the
conditional snapshot PUT and LATEST. A crash before the first create-only write of a
process also interrupts nothing of the conditional-write probe; see
test_s3_orphan_probe.py for a probe left behind.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from tests.integration.s3.conftest import OPTIONS_ENV, SCHEMA

WRITER = Path(__file__).parents[1] / "writer_proc.py"
ROWS = 7
OPS_PER_COMMIT = 6  # data file, manifest, base list, delta list, snapshot, LATEST
TRIALS = 10

pytestmark = [pytest.mark.integration, pytest.mark.s3]


def _ids(ident: int) -> set[int]:
    return {ident * 1_000_000 + k for k in range(ROWS)}


def test_sigkill_mid_commit_on_seaweedfs_leaves_no_partial_commit(warehouse):
    catalog = warehouse.catalog()
    table = catalog.create_table("db.t", schema=SCHEMA)
    env = warehouse.subprocess_env()
    rng = random.Random(20261122)
    # Cover both sides of the snapshot PUT explicitly, then random points.
    plan = [(5, False), (5, True)] + [
        (rng.randint(1, OPS_PER_COMMIT), rng.random() < 0.5) for _ in range(TRIALS - 2)
    ]
    for ident, (kill_at, after) in enumerate(plan, start=1):
        # Re-run the previous (maybe crashed) identifier, then crash inside the new one.
        idents = f"{ident - 1},{ident}" if ident > 1 else str(ident)
        cmd = [sys.executable, str(WRITER), "--root", table.root, "--user", "crashy",
               "--idents", idents, "--rows", str(ROWS), "--kill-at", str(kill_at),
               "--kill-last-only", "--s3-options-env", OPTIONS_ENV]  # fmt: skip
        if after:
            cmd.append("--kill-after")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
        acks = [line.split() for line in proc.stdout.splitlines() if line.startswith("ACK")]
        assert proc.returncode == -9, proc.stderr[-3000:]
        assert len(acks) == len(idents.split(",")) - 1  # the rerun finished, the new one died
        reopened = catalog.get_table("db.t")
        ids = reopened.to_arrow().column("id").to_pylist()
        assert len(ids) == len(set(ids)), "a row appears twice"
        present = {i // 1_000_000 for i in ids}
        for p in present:
            assert _ids(p) <= set(ids), f"identifier {p} is partially visible"
        assert ident == 1 or ident - 1 in present, "the rerun did not land the previous commit"
        snaps = reopened.snapshots()
        assert [s.id for s in snaps] == list(range(1, len(snaps) + 1))
        assert snaps == [] or snaps[-1].total_record_count == len(ids)
    # A final clean rerun of the last identifier lands it exactly once.
    subprocess.run(
        [sys.executable, str(WRITER), "--root", table.root, "--user", "crashy",
         "--idents", str(TRIALS), "--rows", str(ROWS), "--s3-options-env", OPTIONS_ENV],
        check=True, capture_output=True, timeout=180, env=env,
    )  # fmt: skip
    ids = catalog.get_table("db.t").to_arrow().column("id").to_pylist()
    assert len(ids) == len(set(ids)) == TRIALS * ROWS
    assert set(ids) == set().union(*(_ids(i) for i in range(1, TRIALS + 1)))
