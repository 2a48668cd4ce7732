"""Subscription lag: from a writer's commit to the subscriber's batch, on local disk.

Usage: python benchmarks/subscription_lag.py [--commits 150] [--every-ms 200]
                                             [--poll-ms 10] [--rows 1000] [--dir DIR]

A writer process appends ``--rows`` rows to an append table every
``--every-ms`` milliseconds (``table.write``, one snapshot each). This process
subscribes (``start="latest"``, ``poll_interval = --poll-ms``) and, per batch,
measures:

- delivery: the batch is yielded, minus the snapshot's commit time
  (``timeMillis``, the writer's clock; both processes run on this machine);
- handled: the batch's rows are read (``read_all``) and the batch acknowledged
  (the consumer file rewritten), minus the same commit time.

Figures (p50, p99, max) include up to one poll interval of waiting by design.
Figures on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
from _common import ROOT, pct

import snaplake

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("payload", pa.string())])

WRITER = """
import sys, time
sys.path.insert(0, sys.argv[1])
import pyarrow as pa
import snaplake
table = snaplake.FileSystemCatalog(sys.argv[2]).get_table("db.events")
commits, every, rows = int(sys.argv[3]), int(sys.argv[4]) / 1000, int(sys.argv[5])
schema = table.arrow_schema
start = time.monotonic()
for k in range(commits):
    ids = list(range(k * rows, (k + 1) * rows))
    data = pa.table({"id": ids, "payload": [f"event-{i}" for i in ids]}, schema=schema)
    table.write(data, commit_user="bench-writer", commit_identifier=k + 1)
    time.sleep(max(0.0, start + (k + 1) * every - time.monotonic()))
"""


def _ms(values: list[float]) -> str:
    return (
        f"p50 {pct(values, 50):7.1f} ms  p99 {pct(values, 99):7.1f} ms  "
        f"max {max(values):7.1f} ms  (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=150)
    parser.add_argument("--every-ms", type=int, default=200)
    parser.add_argument("--poll-ms", type=int, default=10)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--dir", default=None, help="where the table goes (default: a temp dir)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-subscription-", dir=args.dir))
    catalog = snaplake.FileSystemCatalog(str(work / "wh"))
    table = catalog.create_table("db.events", schema=SCHEMA)
    delivered: list[float] = []
    handled: list[float] = []
    rows = 0
    poll = timedelta(milliseconds=args.poll_ms)
    with table.subscribe("bench", start="latest", poll_interval=poll) as subscription:
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(ROOT), str(work / "wh"), str(args.commits),
             str(args.every_ms), str(args.rows)],
        )  # fmt: skip
        try:
            for batch in subscription:
                delivered.append(time.time() * 1000 - batch.time_millis)
                rows += batch.reader.read_all().num_rows
                batch.ack()
                handled.append(time.time() * 1000 - batch.time_millis)
                if len(delivered) == args.commits:
                    break
        finally:
            writer.wait(timeout=600)
    assert rows == args.commits * args.rows, rows
    print(
        f"subscription lag, local disk ({work}): a writer process commits {args.rows} rows "
        f"every {args.every_ms} ms ({args.commits} commits), the subscriber polls every "
        f"{args.poll_ms} ms"
    )
    print(f"  commit -> batch delivered        {_ms(delivered)}")
    print(f"  commit -> rows read and acked    {_ms(handled)}")


if __name__ == "__main__":
    main()
