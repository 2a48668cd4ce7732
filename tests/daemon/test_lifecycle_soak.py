"""The daemon soak of issue 24: one ``snaplake daemon`` keeps a day-partitioned table in shape
while a snaplake writer, then a pypaimon 2.1.0 writer, stream into it.

The one daemon process runs every task on the table's own options: it drops the
partitions older than 7 days (seeded ones, and the late rows the writers keep
sending to a 10-day-old day), creates hourly tags (``tag.num-retained-max``
keeps 4, ``tag.default-time-retained`` is written into each), expires a tag
past its own retention and an idle consumer, compacts, merges manifests and
expires snapshots (10 kept), so tags, snapshot expiry and partition drops
delete files together.

Clock: the writers stamp their commits on a simulated clock from 2099-01-01
(``tests/daemon/day_writer_proc.py``), ten minutes a commit, far after the
daemon's own commits (real clock), which therefore never start a period. After
a commit that starts an hour a writer waits for that hour's tag, so each tag
lands on its hour's first snapshot before snapshot expiry could remove it, and
the tags are a function of the commits. Every wait is on a condition with a
bound that only a hang reaches; no verdict depends on speed.

Verdicts: no writer failure; the live partitions hold exactly the acknowledged
rows; no partition older than 7 days is left and the seeded ones' files are
gone from disk; the 4 newest hourly tags, each on its hour's first writer
commit, read exactly that commit's live rows in snaplake and in pypaimon;
every file a retained snapshot or tag references exists; metrics and leases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.daemon.day_writer_proc import SCHEMA, USERS, hour_tag
from tests.daemon.procs import (
    REPO,
    Proc,
    daemon_config,
    free_port,
    sample_value,
    scrape,
    start_daemon,
    wait_for,
)
from tests.helpers import assert_same_rows, write_and_commit
from tests.oracle import PaimonOracle, paimon_python, requires_paimon

from snaplake.catalog import FileSystemCatalog
from snaplake.errors import CorruptMetadataError, SnapshotNotFoundError, TagNotFoundError
from snaplake.store.format.decoded_cache import metadata_cache
from snaplake.store.format.manifest_list import decode_manifest_list
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.tags import TagManager
from snaplake.table import Table

pytestmark = [pytest.mark.integration, requires_paimon]

WRITER = Path(__file__).resolve().with_name("day_writer_proc.py")
T0 = datetime(2099, 1, 1).astimezone()  # local midnight: every hour starts on a commit
STEP = timedelta(minutes=10)
SNAPLAKE_COMMITS, PAIMON_COMMITS = 24, 18  # four hours, then three
ROWS = 10
TAGS_KEPT = 4
SEED_DAYS = [30, 33, 36, 40]
SEED_ID = 1_000_000
OPTIONS = {
    "partition.expiration-time": "7 d", "partition.expiration-check-interval": "0 s",
    "tag.automatic-creation": "process-time", "tag.creation-period": "hourly",
    "tag.num-retained-max": str(TAGS_KEPT), "tag.default-time-retained": "1 d",
    "consumer.expiration-time": "1 h",
    "snapshot.num-retained.min": "5", "snapshot.num-retained.max": "10",
    "compaction.min.file-num": "3", "manifest.merge-min-count": "5",
}  # fmt: skip


def _ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def _day(days_ago: int) -> str:
    return (datetime.now().astimezone() - timedelta(days=days_ago)).strftime("%Y-%m-%d")


def _expired(dt: str) -> bool:
    return dt < _day(7)


def _seed(table: Table) -> list[str]:
    """Four commits into partitions 30-40 days old, stamped one step before T0."""
    committer = table.new_commit(commit_user="seed")
    committer.snapshot_commit._wall_clock_ms = lambda: _ms(T0 - STEP)
    days = [_day(d) for d in SEED_DAYS]
    for n, day in enumerate(days):
        ids = list(range(SEED_ID + n * ROWS, SEED_ID + (n + 1) * ROWS))
        write_and_commit(table, pa.table({"id": ids, "dt": [day] * ROWS}, schema=SCHEMA),
                         commit_identifier=n + 1, committer=committer)  # fmt: skip
    return days


def _write(engine: str, wh: Path, tmp_path: Path, first: int, commits: int) -> dict[str, Any]:
    """Run one writer phase to its end; its summary (acknowledged commits, failures)."""
    python = sys.executable if engine == "snaplake" else str(paimon_python())
    log, summary = tmp_path / f"{engine}.log", tmp_path / f"{engine}.json"
    writer = Proc(
        popen=subprocess.Popen(
            [python, str(WRITER), "--engine", engine, "--warehouse", str(wh), "--table",
             "db.days", "--first", str(first), "--commits", str(commits), "--rows", str(ROWS),
             "--clock-start-ms", str(_ms(T0)),
             "--clock-step-ms", str(int(STEP.total_seconds() * 1000)), "--summary", str(summary)],
            cwd=REPO, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        ),
        log=log,
    )  # fmt: skip
    try:
        assert writer.popen.wait(timeout=300) == 0, writer.text()
    finally:
        writer.stop()
    done: dict[str, Any] = json.loads(summary.read_text())
    assert done["failures"] == [], writer.text()
    assert [c[0] for c in done["commits"]] == list(range(first, first + commits))
    return done


def _rows(table: pa.Table) -> set[tuple[int, str]]:
    return set(zip(table.column("id").to_pylist(), table.column("dt").to_pylist(), strict=True))


def _acked_rows(commits: list[list[Any]], *, upto: int) -> set[tuple[int, str]]:
    return {(i, dt) for c, dt, ids in commits if c <= upto for i in ids}


def _polled(predicate: Callable[[], bool]) -> Callable[[], bool]:
    """``predicate`` for a poll while the daemon works: a read that lost a race with its
    expiry (a snapshot or tag deleted mid-read) is "not yet"; the verdicts come after it
    stopped."""

    def poll() -> bool:
        try:
            return predicate()
        except (SnapshotNotFoundError, TagNotFoundError, CorruptMetadataError, FileNotFoundError):
            return False

    return poll


def _missing_files(table: Table, snap: Snapshot, *, tag: str | None = None) -> list[str]:
    """The manifest lists, manifests and data files ``snap`` references that do not exist."""
    paths = []
    for name in (snap.base_manifest_list, snap.delta_manifest_list):
        path = table.paths.manifest_path(name)
        paths.append(path)
        metas = decode_manifest_list(table.file_io.read_bytes(path), path=path)
        paths += [table.paths.manifest_path(m.file_name) for m in metas]
    scan = table.new_scan(tag=tag) if tag is not None else table.new_scan(snapshot_id=snap.id)
    for split in scan.plan():
        paths += split.paths
    return [p for p in paths if not table.file_io.exists(p)]


@pytest.mark.timeout(600)
def test_one_daemon_expires_partitions_and_tags_while_snaplake_then_pypaimon_stream(tmp_path):
    assert datetime.now(UTC) < T0  # the daemon's own commits never start a tag period
    wh = tmp_path / "wh"
    table = FileSystemCatalog(str(wh)).create_table(
        "db.days", schema=SCHEMA, partition_keys=["dt"], options=OPTIONS
    )
    seed_days = _seed(table)
    # A tag another engine made a day ago, kept one hour; an idle consumer.
    TagManager(table.file_io, table.paths).create_tag(
        "legacy", snapshot=table.snapshot(1), time_retained=timedelta(hours=1),
        create_time=datetime.now() - timedelta(days=1),
    )  # fmt: skip
    table.set_consumer("idle", next_snapshot=1)
    os.utime(table.paths.consumer_path("idle"), (0, 0))

    port = free_port()
    lifecycle = ("expire_partitions", "auto_tag", "expire_tags", "expire_consumers")
    tasks = "\n".join(f'[tasks.{t}]\ninterval = "1 s"' for t in lifecycle)
    config = daemon_config(wh, daemon_id="keeper", port=port, intervals={"compact": "1 s"},
                           extra=tasks)  # fmt: skip
    daemon = start_daemon(config, tmp_path, "daemon", port, cli=True)
    try:

        def live_days() -> set[str]:
            metadata_cache.clear()
            return set(table.to_arrow(columns=["dt"]).column("dt").to_pylist())

        def seeds_dropped() -> bool:
            return not live_days() & set(seed_days)

        wait_for(_polled(seeds_dropped), timeout=120,
                 what="the daemon to drop the seeded partitions")  # fmt: skip
        commits = _write("snaplake", wh, tmp_path, 0, SNAPLAKE_COMMITS)["commits"]
        commits += _write("pypaimon", wh, tmp_path, SNAPLAKE_COMMITS, PAIMON_COMMITS)["commits"]
        total = SNAPLAKE_COMMITS + PAIMON_COMMITS

        # The tags due: one per hour, on the hour's first commit; the newest are kept.
        starts = [i for i in range(total) if i % round(timedelta(hours=1) / STEP) == 0]
        kept = {hour_tag(_ms(T0 + i * STEP)): i for i in starts[-TAGS_KEPT:]}

        def settled() -> bool:
            metadata_cache.clear()
            return (
                not any(_expired(d) for d in live_days())
                and {t.name for t in table.list_tags()} == set(kept)
                and table.consumers() == {}
                and not any(any((Path(table.root) / f"dt={d}").rglob("*.*"))
                            for d in seed_days)
            )  # fmt: skip

        wait_for(
            _polled(settled), timeout=180, what=f"expired partitions gone, tags {sorted(kept)}"
        )

        def counted() -> bool:  # a job records its metrics after its work is visible
            m = scrape(port)
            return (
                sample_value(m, "snaplake_tags", table="db.days") == TAGS_KEPT
                # the four seeded days, and the late day at least once
                and (sample_value(m, "snaplake_partitions_expired_total", table="db.days")
                     or 0) >= len(seed_days) + 1
                and (sample_value(m, "snaplake_tags_expired_total", table="db.days") or 0) >= 1
                and sample_value(m, "snaplake_consumers_expired_total", table="db.days") == 1
                and sample_value(m, "snaplake_table_lease_held", table="db.days") == 1
            )  # fmt: skip

        wait_for(counted, timeout=60, what="the daemon's metrics")
        for task in ("expire_partitions", "auto_tag", "expire_tags", "expire_consumers",
                     "expire_snapshots"):  # fmt: skip
            assert f"{task} of db.days failed" not in daemon.text(), daemon.text()[-5000:]
    finally:
        code, _ = daemon.stop()
    assert code == 0, daemon.text()[-5000:]

    # The daemon is gone: the table is what it left.
    metadata_cache.clear()
    live = {(i, dt) for i, dt in _acked_rows(commits, upto=total) if not _expired(dt)}
    assert _rows(table.to_arrow()) == live
    oracle = PaimonOracle(wh)
    assert_same_rows(table.to_arrow(), oracle.read("db.days"))
    tags = {t.name: t for t in table.list_tags()}
    assert set(tags) == set(kept)
    for name, i in kept.items():
        info = tags[name]
        snap = TagManager(table.file_io, table.paths).get(name)
        engine = "snaplake" if i < SNAPLAKE_COMMITS else "pypaimon"
        assert (snap.commit_user, snap.commit_identifier, snap.time_millis) == (
            USERS[engine],
            i + 1,
            _ms(T0 + i * STEP),
        ), name
        assert info.time_retained == timedelta(days=1) and info.create_time is not None
        ours = table.to_arrow(tag=name)
        rows = _rows(ours)
        acked = _acked_rows(commits, upto=i)
        assert {r for r in rows if not _expired(r[1])} == {r for r in acked if not _expired(r[1])}
        assert {r for r in rows if _expired(r[1])} <= acked  # late rows not dropped yet
        assert_same_rows(ours, oracle.read("db.days", tag=name))
    # Nothing a retained snapshot or tag references was deleted.
    assert (table.snapshot_manager.earliest_snapshot_id() or 0) > len(seed_days) + 1
    for snap in table.snapshots():
        assert _missing_files(table, snap) == [], f"snapshot {snap.id}"
    for name in tags:
        assert _missing_files(table, TagManager(table.file_io, table.paths).get(name),
                              tag=name) == [], f"tag {name}"  # fmt: skip
