"""Commit latency: 500 sequential single-file appends, snaplake and pypaimon interleaved.

Usage: python benchmarks/commit_latency.py [--commits 500] [--round 50]

Both libraries append one small single-partition batch per commit to their own
partitioned table on local disk, alternating rounds of ``--round`` commits so
machine noise hits both equally. Reports, per library, p50 / p99 of the commit
call alone, and the median of the first 50 vs the last 50 commits (growth with
history). Targets (issue 2): snaplake p50 <= 0.5x pypaimon's; last-50 / first-50 <= 1.3.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from _common import median, pct, summary_ms
from tests.oracle import PaimonOracle

import snaplake

SCHEMA = pa.schema([("month", pa.int32()), ("carrier", pa.string()), ("distance", pa.float64())])


def batch(i: int) -> pa.Table:
    n = 1000
    return pa.table(
        {
            "month": pa.array([7] * n, pa.int32()),
            "carrier": [f"C{(i + k) % 17}" for k in range(n)],
            "distance": [float(i * n + k) for k in range(n)],
        },
        schema=SCHEMA,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--round", type=int, default=50)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-commit-"))
    ours_tbl = snaplake.FileSystemCatalog(str(work / "snaplake")).create_table(
        "db.t", schema=SCHEMA, partition_keys=["month"]
    )
    oracle = PaimonOracle(work / "paimon", timeout_s=1800)
    oracle.create_table("db.t", SCHEMA, partition_keys=["month"], options={"bucket": "-1"})
    write = ours_tbl.new_write(commit_user="bench")
    committer = ours_tbl.new_commit(commit_user="bench")
    ours: list[float] = []
    theirs: list[float] = []
    data = batch(0)
    i = 0
    while len(ours) < args.commits:
        for _ in range(args.round):
            write.write_arrow(data)
            messages = write.prepare_commit()
            t0 = time.perf_counter()
            committer.commit(messages, commit_identifier=i)
            ours.append(time.perf_counter() - t0)
            i += 1
        theirs.extend(oracle.bench_commits("db.t", data, args.round)["commit_s"])
    print(f"{args.commits} sequential single-file appends, partitioned table, local disk")
    for name, values in (("snaplake", ours), ("pypaimon", theirs)):
        first, last = median(values[:50]), median(values[-50:])
        print(
            f"  {name:9s} {summary_ms(values)}  first-50 median {first * 1000:6.2f} ms  "
            f"last-50 median {last * 1000:6.2f} ms  growth {last / first:4.2f}x"
        )
    ratio = pct(ours, 50) / pct(theirs, 50)
    growth = median(ours[-50:]) / median(ours[:50])
    print(f"  p50 ratio snaplake/pypaimon = {ratio:.2f} (target <= 0.5)")
    print(f"  snaplake last-50/first-50 = {growth:.2f} (target <= 1.3)")
    # The publish barrier (syncfs) also flushes whatever the interleaved pypaimon process
    # left dirty on the same filesystem; measure snaplake's own growth without a neighbour.
    alone = run_alone(work / "alone", args.commits, data)
    print(
        f"  snaplake alone: {summary_ms(alone)}  first-50 median "
        f"{median(alone[:50]) * 1000:6.2f} ms  last-50 median {median(alone[-50:]) * 1000:6.2f} ms"
        f"  growth {median(alone[-50:]) / median(alone[:50]):4.2f}x"
    )


def run_alone(path: Path, commits: int, data: pa.Table) -> list[float]:
    table = snaplake.FileSystemCatalog(str(path)).create_table(
        "db.t", schema=SCHEMA, partition_keys=["month"]
    )
    write = table.new_write(commit_user="alone")
    committer = table.new_commit(commit_user="alone")
    out = []
    for i in range(commits):
        write.write_arrow(data)
        messages = write.prepare_commit()
        t0 = time.perf_counter()
        committer.commit(messages, commit_identifier=i)
        out.append(time.perf_counter() - t0)
    return out


if __name__ == "__main__":
    main()
