"""A writer streaming into day partitions on a simulated commit clock, for the daemon soak.

Usage: python tests/daemon/day_writer_proc.py --engine snaplake|pypaimon --warehouse W
       --table db.t --first I --commits N --clock-start-ms MS --clock-step-ms STEP
       [--rows 10] [--late-every 5] --summary S.json

Commit ``i`` (``first <= i < first + commits``, ``commit_identifier = i + 1``)
appends ids ``i * rows ..`` into ``dt`` = the local date today (even ``i``),
yesterday (odd ``i``) or, every ``late-every``-th commit, ten days ago (a
partition past a 7-day ``partition.expiration-time``: a late row the daemon
drops again). It is stamped ``timeMillis = clock-start-ms + i * clock-step-ms``:
snaplake's committer and pypaimon's ``FileStoreCommit`` get that clock
injected, so hours of process time stream through the table in seconds and
the automatic tags depend on the commits only.

Gate: after a commit that starts a new local hour, the writer waits until
the tag of the hour before (``tag/tag-<yyyy-MM-dd HH>``, as
``tag.creation-period = hourly`` names it) exists, so the daemon has tagged
that snapshot before snapshot expiry could remove it; the soak's tags then
depend on the commits, never on the daemon's speed. A gate not opened within
120 s is a failure (a hang, not slowness).

``--engine pypaimon`` runs under the pypaimon 2.1.0 venv (it imports no snaplake).
Writes a JSON summary: ``commits`` (``[i, dt, ids]`` of every acknowledged
commit) and ``failures``; exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string())])
LATE_DAYS = 10
GATE_TIMEOUT_S = 120.0
USERS = {"snaplake": "day-writer", "pypaimon": "paimon-day-writer"}


def day_of(i: int, late_every: int) -> str:
    """The ``dt`` commit ``i`` writes into (local dates, as partition expiry reads them)."""
    days_ago = LATE_DAYS if late_every and i % late_every == late_every - 1 else i % 2
    return (datetime.now().astimezone() - timedelta(days=days_ago)).strftime("%Y-%m-%d")


def hour_tag(ms: int) -> str:
    """The hourly tag of the period before the one ``ms`` falls in (Paimon's name)."""
    local = datetime.fromtimestamp(ms / 1000).replace(minute=0, second=0, microsecond=0)
    return (local - timedelta(hours=1)).strftime("%Y-%m-%d %H")


Committer = Callable[[int, pa.Table, int], None]  # (commit index, rows, timeMillis)


def snaplake_committer(warehouse: str, name: str) -> Committer:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import snaplake

    table = snaplake.FileSystemCatalog(warehouse).get_table(name)
    committer = table.new_commit(commit_user=USERS["snaplake"])
    clock = {"ms": 0}
    committer.snapshot_commit._wall_clock_ms = lambda: clock["ms"]

    def commit(i: int, data: pa.Table, ms: int) -> None:
        clock["ms"] = ms
        write = table.new_write(commit_user=USERS["snaplake"])
        write.write_arrow(data)
        committer.commit(write.prepare_commit(), commit_identifier=i + 1)

    return commit


class _FrozenTime:
    """pypaimon's ``time`` module with ``time()`` at the simulated commit time."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def time(self) -> float:
        return self.seconds

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def pypaimon_committer(warehouse: str, name: str) -> Committer:
    import pypaimon.write.file_store_commit as file_store_commit
    from pypaimon import CatalogFactory

    frozen = _FrozenTime()
    file_store_commit.time = frozen  # the snapshot's timeMillis (and retry timing)
    table = CatalogFactory.create({"warehouse": warehouse}).get_table(name)
    builder = table.new_stream_write_builder()._with_commit_user(USERS["pypaimon"])
    write, committer = builder.new_write(), builder.new_commit()

    def commit(i: int, data: pa.Table, ms: int) -> None:
        frozen.seconds = ms / 1000
        write.write_arrow(data)
        committer.commit(write.prepare_commit(i + 1), i + 1)

    return commit


def wait_for_tag(tag_dir: Path, name: str) -> bool:
    deadline = time.monotonic() + GATE_TIMEOUT_S
    while time.monotonic() < deadline:
        if (tag_dir / f"tag-{name}").exists():
            return True
        time.sleep(0.05)
    return False


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--engine", choices=sorted(USERS), required=True)
    p.add_argument("--warehouse", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--commits", type=int, required=True)
    p.add_argument("--rows", type=int, default=10)
    p.add_argument("--late-every", type=int, default=5)
    p.add_argument("--clock-start-ms", type=int, required=True)
    p.add_argument("--clock-step-ms", type=int, required=True)
    p.add_argument("--summary", required=True)
    args = p.parse_args()
    make = snaplake_committer if args.engine == "snaplake" else pypaimon_committer
    commit = make(args.warehouse, args.table)
    db, name = args.table.split(".", 1)
    tag_dir = Path(args.warehouse) / f"{db}.db" / name / "tag"
    acked: list[list[Any]] = []
    failures: list[str] = []
    print("WRITING", flush=True)
    for i in range(args.first, args.first + args.commits):
        ms = args.clock_start_ms + i * args.clock_step_ms
        dt = day_of(i, args.late_every)
        ids = list(range(i * args.rows, (i + 1) * args.rows))
        try:
            commit(i, pa.table({"id": ids, "dt": [dt] * len(ids)}, schema=SCHEMA), ms)
            acked.append([i, dt, ids])
        except Exception as exc:  # noqa: BLE001 - counted; the test asserts there are none
            failures.append(f"commit {i}: {type(exc).__name__}: {exc}")
            traceback.print_exc()
            break
        gate = hour_tag(ms)
        if gate != hour_tag(ms - args.clock_step_ms) and not wait_for_tag(tag_dir, gate):
            failures.append(f"commit {i}: tag {gate} not created")
            break
    Path(args.summary).write_text(json.dumps({"commits": acked, "failures": failures}))
    print("DONE", len(acked), len(failures), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
