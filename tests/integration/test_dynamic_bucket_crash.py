"""SIGKILL a dynamic-bucket commit at every storage operation: index and data stay consistent.

The base table holds keys of two months over several buckets per month
(``dynamic-bucket.target-row-num = 3``). A child process upserts known and new
keys (a new month too) with one commit, killed before or right after each of its
counted storage operations (data files, HASH files, manifest, index manifest,
manifest lists, snapshot, LATEST; see ``writer_proc.KillSwitch``). After each
crash, on a fresh copy of the base table: the table reads, the crashed commit is
all-or-nothing, every key is in exactly one bucket whose HASH file holds its hash,
and a new writer's upserts of every key land in the key's bucket (still one bucket
per key, the read equals the model).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.dynamic_helpers import assert_one_bucket_per_key
from tests.dynamic_maintenance_helpers import model
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, sorted_rows, to_table

import snaplake

WRITER = Path(__file__).with_name("dynamic_crash_proc.py")
CRASH_BATCH = ("9", "8", "1")  # ids 9..16 (seed 1): 3 known, 5 new, months 1-3

pytestmark = pytest.mark.integration


def _child(root: str, *kill: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WRITER), root, *CRASH_BATCH, *kill],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_sigkill_at_every_operation_of_a_dynamic_bucket_commit(tmp_path: Path) -> None:
    base = tmp_path / "base"
    table = snaplake.FileSystemCatalog(str(base)).create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"dynamic-bucket.target-row-num": "3"},
    )  # fmt: skip
    initial = make_rows(0, 12, month_mod=2)
    table.write(to_table(initial))
    assert assert_one_bucket_per_key(table) >= 4
    crashed = make_rows(9, 8, seed=1)
    before, after = model(initial), model(initial, crashed)
    # A clean run counts the commit's operations (and must land).
    clean = tmp_path / "clean"
    shutil.copytree(base, clean)
    proc = _child(str(clean / "db.db" / "t"))
    assert proc.returncode == 0, proc.stderr
    ops = int(proc.stdout.split()[-1])
    assert ops >= 8  # data and HASH files of several buckets, metadata, snapshot, LATEST
    points = [(n, phase) for n in range(1, ops + 1) for phase in ("before", "after")]
    copies = {}
    for n, phase in points:
        copies[n, phase] = tmp_path / f"kill-{n}-{phase}"
        shutil.copytree(base, copies[n, phase])
    with ThreadPoolExecutor(2) as pool:
        procs = dict(zip(points, pool.map(
            lambda p: _child(str(copies[p] / "db.db" / "t"), str(p[0]),
                             *(["after"] if p[1] == "after" else [])),
            points,
        ), strict=True))  # fmt: skip
    published = []
    for (n, phase), proc in procs.items():
        assert proc.returncode == -9, f"no crash at {n} {phase}: {proc.stderr}"
        t = snaplake.FileSystemCatalog(str(copies[n, phase])).get_table("db.t")
        got = sorted_rows(t.to_arrow())
        assert got in (before, after), (n, phase)  # all or nothing
        published.append(got == after)
        assert_one_bucket_per_key(t)
        # A new writer restores the recovered index: every key goes to its bucket.
        again = make_rows(0, 20, seed=2)
        t.write(to_table(again))
        assert sorted_rows(t.to_arrow()) == model(initial, crashed, again), (n, phase)
        assert_one_bucket_per_key(t)
    # Killed before the first operation nothing landed; killed after the last, all did.
    assert not published[0] and published[-1]
    assert published == sorted(published)  # once published, later kills see it too
