"""The main job: ingest the real NYC flights data into a Paimon table in 100 commits.

Run with ``make demo`` (or ``python demo/flights_demo.py --warehouse ./warehouse``).
It (re)creates ``demo.flights`` partitioned by ``month``, appends the 336,776
rows in 100 commits, prints the snapshot history summary, reads the table
back and checks the row count, the per-month counts and the sum of
``distance`` against the source. Exit code 1 if a check fails.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import snaplake  # noqa: E402
from demo.flights_data import FLIGHTS_ROWS, load_flights  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--warehouse", default="./warehouse")
    parser.add_argument("--commits", type=int, default=100)
    args = parser.parse_args(argv)

    flights = load_flights()
    catalog = snaplake.FileSystemCatalog(args.warehouse)
    catalog.drop_table("demo.flights", ignore_if_not_exists=True)
    table = catalog.create_table(
        "demo.flights", schema=flights.schema, partition_keys=["month"], options={"bucket": "-1"}
    )
    committer = table.new_commit(commit_user="flights-demo")
    write = table.new_write(commit_user="flights-demo")
    chunk = -(-flights.num_rows // args.commits)
    latencies = []
    started = time.perf_counter()
    for i in range(args.commits):
        write.write_arrow(flights.slice(i * chunk, chunk))
        result = committer.commit(write.prepare_commit(), commit_identifier=i)
        latencies.append(result.duration_s)
    elapsed = time.perf_counter() - started

    snaps = table.snapshots()
    kinds = Counter(s.commit_kind.value for s in snaps)
    files = sum(len(s.files) for s in table.new_scan().plan())
    latencies.sort()
    print(f"ingested {flights.num_rows:,} rows in {args.commits} commits, {elapsed:.1f} s")
    print(f"snapshots: {len(snaps)} ({dict(kinds)}), latest id {snaps[-1].id}, data files {files}")
    print(
        f"commit latency p50 {statistics.median(latencies) * 1000:.1f} ms, "
        f"p99 {latencies[int(len(latencies) * 0.99) - 1] * 1000:.1f} ms"
    )
    for s in snaps[-3:]:
        print(
            f"  snapshot {s.id}: {s.commit_kind.value} by {s.commit_user} #{s.commit_identifier}, "
            f"+{s.delta_record_count} rows, total {s.total_record_count}"
        )

    back = table.to_arrow()
    checks = {
        "row count": (back.num_rows, FLIGHTS_ROWS),
        "sum(distance)": (pc.sum(back["distance"]).as_py(), pc.sum(flights["distance"]).as_py()),
        "per-month counts": (
            sorted(
                back.group_by("month").aggregate([("month", "count")]).to_pylist(),
                key=lambda r: r["month"],
            ),
            sorted(
                flights.group_by("month").aggregate([("month", "count")]).to_pylist(),
                key=lambda r: r["month"],
            ),
        ),  # fmt: skip
        "latest totalRecordCount": (snaps[-1].total_record_count, FLIGHTS_ROWS),
    }
    ok = True
    for name, (got, want) in checks.items():
        passed = got == want
        ok &= passed
        shown = got if not isinstance(got, list) else f"{len(got)} months"
        print(f"check {name}: {'OK' if passed else 'FAILED'} ({shown})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
