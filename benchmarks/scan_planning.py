"""Scan planning: snaplake vs pypaimon on (a) 300 commits and (b) 100,000 live data files.

Usage: python benchmarks/scan_planning.py [--commits 300] [--files 100000]

(a) a partitioned table built by 300 single-file appends; plan the latest snapshot with
a fresh table handle (snaplake cold = decoded-manifest cache cleared, and warm), then
again after ``table.merge_manifests()`` when the maintenance layer is present.
(b) a table whose latest snapshot has ``--files`` live data files (metadata synthesised
from a real flights data file: 19-column value stats, 12 partitions, 10 commits).
Targets (issue 2): (a) >= 3x faster than pypaimon, <= 10 ms after merge; (b) <= 1 s and
faster than pypaimon.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import pyarrow.compute as pc
from _common import median
from demo.flights_data import load_flights
from tests.oracle import PaimonOracle

import snaplake
from snaplake.commit.message import DataIncrement
from snaplake.store.format.decoded_cache import metadata_cache


def plan_times(warehouse: Path, *, rounds: int = 5, cold: bool) -> tuple[float, int]:
    times = []
    files = 0
    for _ in range(rounds):
        if cold:
            metadata_cache.clear()
        t0 = time.perf_counter()
        table = snaplake.FileSystemCatalog(str(warehouse)).get_table("db.t")
        splits = table.new_scan().plan()
        times.append(time.perf_counter() - t0)
        files = sum(len(s.files) for s in splits)
    return median(times), files


def report(label: str, ours_cold: float, ours_warm: float, theirs: float, files: int) -> None:
    print(f"{label}: {files} live files")
    print(f"  snaplake cold {ours_cold * 1000:8.2f} ms   warm {ours_warm * 1000:8.2f} ms")
    print(f"  pypaimon      {theirs * 1000:8.2f} ms   speed-up (cold) {theirs / ours_cold:5.1f}x")


def part_a(work: Path, commits: int) -> None:
    flights = load_flights()
    table = snaplake.FileSystemCatalog(str(work)).create_table(
        "db.t", schema=flights.schema, partition_keys=["month"]
    )
    write, committer = table.new_write(commit_user="a"), table.new_commit(commit_user="a")
    step = flights.num_rows // commits
    for i in range(commits):
        write.write_arrow(flights.slice(i * step, step))
        committer.commit(write.prepare_commit(), commit_identifier=i)
    cold, files = plan_times(work, cold=True)
    warm, _ = plan_times(work, cold=False)
    theirs = PaimonOracle(work).bench_plan("db.t", repeat=5)
    report(f"(a) {commits} commits", cold, warm, median(theirs["plan_s"]), files)
    if hasattr(table, "merge_manifests"):
        table.merge_manifests(full=True)
        cold, files = plan_times(work, cold=True)
        warm, _ = plan_times(work, cold=False)
        theirs = PaimonOracle(work).bench_plan("db.t", repeat=5)
        report("(a) after merge_manifests(full=True)", cold, warm, median(theirs["plan_s"]), files)


def part_b(work: Path, n_files: int, commits: int = 10) -> None:
    flights = load_flights()
    table = snaplake.FileSystemCatalog(str(work)).create_table(
        "db.t", schema=flights.schema, partition_keys=["month"]
    )
    templates = {}
    for month in range(1, 13):
        write = table.new_write(commit_user="t")
        write.write_arrow(flights.filter(pc.equal(flights["month"], month)).slice(0, 2000))
        (msg,) = write.prepare_commit()
        templates[month] = msg
        write.abort([msg])
    per_commit = n_files // commits
    committer = table.new_commit(commit_user="b")
    k = 0
    for c in range(commits):
        messages = []
        for msg in templates.values():
            proto = msg.data_increment.new_files[0]
            new_files = tuple(
                dataclasses.replace(proto, file_name=f"data-synthetic-{k + j}.parquet")
                for j in range(per_commit // 12)
            )
            k += len(new_files)
            # Planning reads metadata only, but a commit makes its data files durable
            # (fsync): they must exist. Empty stand-ins serve.
            part_dir = table.schema().partition_path_of(msg.partition)
            for f in new_files:
                Path(table.paths.data_file_path(part_dir, msg.bucket, f.file_name)).touch()
            messages.append(
                dataclasses.replace(msg, data_increment=DataIncrement(new_files=new_files))
            )
        committer.commit(messages, commit_identifier=c)
    cold, files = plan_times(work, rounds=3, cold=True)
    warm, _ = plan_times(work, rounds=3, cold=False)
    theirs = PaimonOracle(work, timeout_s=1800).bench_plan("db.t", repeat=2)
    report(f"(b) {files} live data files", cold, warm, median(theirs["plan_s"]), files)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--files", type=int, default=100_000)
    args = parser.parse_args()
    part_a(Path(tempfile.mkdtemp(prefix="bench-plan-a-")), args.commits)
    part_b(Path(tempfile.mkdtemp(prefix="bench-plan-b-")), args.files)


if __name__ == "__main__":
    main()
