"""SIGKILL a subscribing consumer at random points: every source snapshot lands in the mirror once.

A consumer process (``subscription_mirror_proc.py``) mirrors ``db.source`` into
``db.target``: per source snapshot one exactly-once commit (commit user
``mirror``, identifier = the source snapshot id), then ``ack``. Between runs the
parent commits more to the source (appends, compactions) and expires its
snapshots with a tiny retention (the consumer pins what it has not read). Each
run kills itself at a storage write drawn from a seeded generator (before or
after it), over at least 20 kills, and restarts with the same consumer id (the
dead holder's lease is taken over at once: same host, pid gone). No timing is
involved: the kill point is a count of storage writes.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

import snaplake

PROC = Path(__file__).with_name("subscription_mirror_proc.py")
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("src", pa.int64())])
KILLS = 20
# Storage writes of one mirrored batch at least: data file, manifest, two manifest
# lists, snapshot, LATEST, the ack; plus the lease at the start.
WRITES_PER_BATCH = 7

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def _run(warehouse: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROC), "--warehouse", warehouse, "--consumer", "mirror-job",
         *extra],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_sigkilled_consumer_mirrors_every_snapshot_exactly_once(tmp_path):
    warehouse = str(tmp_path / "wh")
    catalog = snaplake.FileSystemCatalog(warehouse)
    source = catalog.create_table(
        "db.source", schema=SCHEMA,
        options={"compaction.min.file-num": "2", "snapshot.num-retained.min": "1",
                 "snapshot.num-retained.max": "2", "snapshot.time-retained": "1 ms"},
    )  # fmt: skip
    target = catalog.create_table("db.target", schema=SCHEMA)
    rng = random.Random(20261127)
    appended: list[int] = []  # source snapshots with rows
    next_id = 0

    def commit_to_source() -> None:
        nonlocal next_id
        if appended and rng.random() < 0.25:
            source.compact()  # a COMPACT snapshot (no rows in delta mode), or nothing
            return
        n = rng.randint(1, 4)
        ids = list(range(next_id, next_id + n))
        next_id += n
        result = source.write(pa.table({"id": ids, "src": [len(appended)] * n}, schema=SCHEMA))
        assert result.snapshot_id is not None
        appended.append(result.snapshot_id)

    kills, runs, expired_any, replays = 0, 0, False, 0
    while kills < KILLS:
        runs += 1
        assert runs <= 3 * KILLS, "the kill points keep missing"
        for _ in range(rng.randint(1, 3)):
            commit_to_source()
        position = source.consumers().get("mirror-job")
        if position is not None:  # the consumer exists: it pins its next snapshot
            before = source.snapshot_manager.earliest_snapshot_id()
            source.expire_snapshots()
            earliest = source.snapshot_manager.earliest_snapshot_id()
            assert earliest is not None and earliest <= position
            expired_any |= earliest != before
        pending = sum(1 for s in appended if position is None or s >= position)
        kill_at = rng.randint(1, WRITES_PER_BATCH * pending + 1)
        after = rng.random() < 0.5
        proc = _run(warehouse, "--kill-at", str(kill_at), *(["--kill-after"] if after else []))
        commits = [line.split() for line in proc.stdout.splitlines() if line.startswith("COMMIT")]
        replays += sum(int(c[3]) for c in commits)  # committed by a killed run, not acked
        if proc.returncode == -9:
            kills += 1
        else:
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout.rstrip().endswith("DONE")
    final = _run(warehouse)
    assert final.returncode == 0, final.stderr
    assert expired_any, "expiry never ran past a snapshot; the test lost its point"
    assert replays, "no run was killed between its commit and its ack; the test lost its point"

    # The mirror holds every source row exactly once.
    src = source.to_arrow().sort_by("id")
    dst = catalog.get_table("db.target").to_arrow().sort_by("id")
    assert dst.column("id").to_pylist() == list(range(next_id))
    assert dst.equals(src)
    # One target commit per source snapshot with rows, none twice.
    mirror = [s for s in target.snapshots() if s.commit_user == "mirror"]
    identifiers = Counter(s.commit_identifier for s in mirror)
    assert all(n == 1 for n in identifiers.values()), identifiers
    assert sorted(identifiers) == appended
    # The consumer is caught up (past trailing COMPACT snapshots too).
    latest = source.snapshot_manager.latest_snapshot_id()
    assert latest is not None
    assert source.consumers() == {"mirror-job": latest + 1}
