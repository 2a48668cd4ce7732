"""Upserts into a deletion-vector table: lookup at prepare vs ``write-only`` plus the daemon.

A deletion-vector table's batch read skips level 0, so a committed upsert is
visible only once compaction has lifted its level-0 files. Two ways to get
there, measured on the same flights primary-key workload (336,776 rows keyed as
in the demo, then ``--commits`` commits of ``--fraction`` upserts, one every
``--interval`` seconds):

- **prepare**: the writer's ``prepare_commit`` compacts its level-0 files
  (lookup) before the commit (Paimon's batch writer): the commit is slower and
  the rows are visible when it returns.
- **daemon**: ``write-only = true``; the writer only appends level-0 files and
  a ``snaplake daemon`` process (compact task every ``--daemon-interval``)
  lifts them.

For each commit: the commit's wall time (``write_arrow`` + ``prepare_commit`` +
``commit``), and its freshness: from the commit's return until none of its
level-0 files is live any more (its rows are then visible to a batch read;
polled every 10 ms). Both tables are checked against a model at the end.
pypaimon and pypaimon-rust write such tables but never compact them, so their
rows never become visible to a batch read; they have no figure here.

    .venv/bin/python benchmarks/dv_upsert.py [--commits 30] [--fraction 0.01]
"""

from __future__ import annotations

import argparse
import signal
import tempfile
import threading
import time
from pathlib import Path

import _common  # noqa: F401  (puts the repo root on sys.path)
import pyarrow as pa
from _common import pct
from demo.flights_data import load_flights
from flights_upserts import KEYS, unique_keys, upsert_batches
from tests.daemon.procs import daemon_config, free_port, start_daemon

from snaplake.catalog import FileSystemCatalog
from snaplake.table import Table

OPTIONS = {"bucket": "4", "deletion-vectors.enabled": "true"}


def _live_names(table: Table) -> set[str]:
    latest = table.latest_snapshot()
    if latest is None:
        return set()
    return {f.file_name for s in table.file_store().new_scan(latest).plan() for f in s.files}


def _run(
    table: Table, flights: pa.Table, updates: list[pa.Table], interval: float
) -> tuple[list[float], list[float]]:
    """Commit ``updates`` one per ``interval``; return (commit seconds, freshness seconds)."""
    write = table.new_write(commit_user="bench")
    commit = table.new_commit(commit_user="bench")
    write.write_arrow(flights)
    commit.commit(write.prepare_commit(), commit_identifier=0)
    pending: dict[int, tuple[float, set[str]]] = {}
    fresh: dict[int, float] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set() or pending:
            with lock:
                waiting = dict(pending)
            if waiting:
                live = _live_names(table)
                now = time.perf_counter()
                with lock:
                    for i, (done, names) in waiting.items():
                        if not names & live:
                            fresh[i] = now - done
                            del pending[i]
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    times = []
    for i, batch in enumerate(updates, start=1):
        t0 = time.perf_counter()
        write.write_arrow(batch)
        messages = write.prepare_commit()
        commit.commit(messages, commit_identifier=i)
        done = time.perf_counter()
        times.append(done - t0)
        level0 = {f.file_name for m in messages for f in m.data_increment.new_files}
        with lock:
            pending[i] = (done, level0)
        time.sleep(max(0.0, interval - (done - t0)))
    stop.set()
    watcher.join(timeout=600)
    write.close()
    return times, [fresh[i] for i in sorted(fresh)]


def _check(table: Table, model: pa.Table) -> None:
    order = [(k, "ascending") for k in KEYS]
    got = table.to_arrow().sort_by(order)
    want = model.select(got.schema.names).cast(got.schema).sort_by(order)
    if not got.equals(want):
        raise AssertionError(f"{table.identifier}: rows differ from the model")


def _model(flights: pa.Table, updates: list[pa.Table]) -> pa.Table:
    rows = {tuple(r[k] for k in KEYS): r for r in flights.to_pylist()}
    for batch in updates:
        rows.update({tuple(r[k] for k in KEYS): r for r in batch.to_pylist()})
    return pa.Table.from_pylist(list(rows.values()), schema=flights.schema)


def _line(name: str, times: list[float], fresh: list[float]) -> str:
    return (
        f"{name:9s} commit p50 {pct(times, 50) * 1000:7.1f} ms  p99 {pct(times, 99) * 1000:7.1f}"
        f" ms   commit -> visible p50 {pct(fresh, 50) * 1000:7.1f} ms  p99 "
        f"{pct(fresh, 99) * 1000:7.1f} ms  ({len(fresh)} commits)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--fraction", type=float, default=0.01)
    parser.add_argument("--interval", type=float, default=1.0, help="Seconds between commits.")
    parser.add_argument("--daemon-interval", default="1 s", help="The daemon's compact interval.")
    args = parser.parse_args()
    flights = unique_keys(load_flights())
    updates = upsert_batches(flights, args.commits, args.fraction)
    print(f"{flights.num_rows:,} rows; {args.commits} commits of {updates[0].num_rows:,} upserts,"
          f" one every {args.interval:g} s; options {OPTIONS}")  # fmt: skip
    model = _model(flights, updates)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        catalog = FileSystemCatalog(str(work / "wh"))
        prepare = catalog.create_table(
            "db.prepare", schema=flights.schema, partition_keys=["month"], primary_keys=KEYS,
            options=OPTIONS,
        )  # fmt: skip
        times, fresh = _run(prepare, flights, updates, args.interval)
        _check(prepare, model)
        print(_line("prepare", times, fresh))
        daemon_wh = work / "daemon-wh"
        table = FileSystemCatalog(str(daemon_wh)).create_table(
            "db.daemon", schema=flights.schema, partition_keys=["month"], primary_keys=KEYS,
            options={**OPTIONS, "write-only": "true"},
        )  # fmt: skip
        port = free_port()
        daemon = start_daemon(
            daemon_config(daemon_wh, daemon_id="bench", port=port, log_level="INFO",
                          intervals={"compact": args.daemon_interval, "watch": "1 s"}),
            work, "daemon", port,
        )  # fmt: skip
        try:
            times, fresh = _run(table, flights, updates, args.interval)
        finally:
            daemon.stop(signal.SIGTERM)
        _check(table, model)
        print(_line("daemon", times, fresh))


if __name__ == "__main__":
    main()
