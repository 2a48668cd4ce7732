"""A writer process for the daemon tests and the soak benchmark.

Usage: python tests/daemon/writer_proc.py --warehouse W --table db.t --seconds 60
       [--commits N] [--interval-s 0.1] [--rows 20] [--months 2] [--metrics-port P]
       [--summary S.json] [--hold]

Appends ``rows`` rows per commit (ids ``i * rows ..``) with ``commit_identifier = i + 1``
for ``seconds`` seconds or until ``commits`` commits were attempted (0 = no limit; tests use
a count, so that what was written does not depend on the machine's speed), one commit every
``interval-s`` at most (0 = as fast as it can).
Serves ``snaplake.metrics`` on ``metrics-port``. Writes a JSON summary (commits, failures,
per-commit latency and wall-clock time) and, with ``--hold``, keeps serving metrics until
SIGTERM so that Prometheus can still scrape it.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow as pa

import snaplake
import snaplake.metrics


def batch(start: int, count: int, months: int) -> pa.Table:
    ids = pa.array(range(start, start + count), pa.int64())
    return pa.table(
        {
            "id": ids,
            "month": pa.array([1 + i % months for i in range(start, start + count)], pa.int32()),
            "payload": pa.array([f"row-{i}" for i in range(start, start + count)]),
        }
    )


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--warehouse", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--commits", type=int, default=0)
    p.add_argument("--interval-s", type=float, default=0.0)
    p.add_argument("--rows", type=int, default=20)
    p.add_argument("--months", type=int, default=2)
    p.add_argument("--metrics-port", type=int, default=0)
    p.add_argument("--summary", default="")
    p.add_argument("--hold", action="store_true")
    p.add_argument("--user", default="writer")
    args = p.parse_args()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if args.metrics_port:
        snaplake.metrics.serve(args.metrics_port)
    else:
        snaplake.metrics.default_metrics()
    table = snaplake.FileSystemCatalog(args.warehouse).get_table(args.table)
    committer = table.new_commit(commit_user=args.user)
    latencies: list[float] = []
    times: list[float] = []
    attempts: list[int] = []
    failures: list[str] = []
    i = 0
    start = time.time()
    deadline = time.monotonic() + args.seconds
    print("WRITING", flush=True)
    while (
        time.monotonic() < deadline
        and not stop.is_set()
        and not (args.commits and i >= args.commits)
    ):
        t0 = time.monotonic()
        try:
            write = table.new_write(commit_user=args.user)
            write.write_arrow(batch(i * args.rows, args.rows, args.months))
            result = committer.commit(write.prepare_commit(), commit_identifier=i + 1)
            latencies.append(result.duration_s)
            attempts.append(result.attempts)
            times.append(time.time() - start)
            i += 1
        except Exception as exc:  # noqa: BLE001 - counted; the tests assert there are none
            failures.append(f"{type(exc).__name__}: {exc}")
            traceback.print_exc()
            i += 1
        spare = args.interval_s - (time.monotonic() - t0)
        if spare > 0:
            time.sleep(spare)
    summary = {
        "commits": len(latencies),
        "failures": failures,
        "rows_per_commit": args.rows,
        "next_index": i,
        "latencies_s": latencies,
        "attempts": attempts,
        "times_s": times,
        "start_epoch_s": start,
    }
    if args.summary:
        Path(args.summary).write_text(json.dumps(summary))
    print("DONE", len(latencies), len(failures), flush=True)
    if args.hold:
        stop.wait()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
