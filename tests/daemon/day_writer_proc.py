"""A writer process streaming into day partitions (``dt`` = local today and yesterday).

Usage: python tests/daemon/day_writer_proc.py --warehouse W --table db.t --commits N
       [--rows 10] [--interval-s 0.05] --summary S.json

Commit ``i`` (identifier ``i + 1``) appends ids ``i * rows ..`` into today's
partition (even ``i``) or yesterday's (odd ``i``). Writes a JSON summary: the
ids of every acknowledged commit and every failure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow as pa

import snaplake

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string())])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--warehouse", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--commits", type=int, required=True)
    p.add_argument("--rows", type=int, default=10)
    p.add_argument("--interval-s", type=float, default=0.05)
    p.add_argument("--summary", required=True)
    args = p.parse_args()
    table = snaplake.FileSystemCatalog(args.warehouse).get_table(args.table)
    committer = table.new_commit(commit_user="day-writer")
    acked: list[int] = []
    failures: list[str] = []
    print("WRITING", flush=True)
    for i in range(args.commits):
        day = (datetime.now().astimezone() - timedelta(days=i % 2)).strftime("%Y-%m-%d")
        ids = list(range(i * args.rows, (i + 1) * args.rows))
        try:
            write = table.new_write(commit_user="day-writer")
            write.write_arrow(pa.table({"id": ids, "dt": [day] * len(ids)}, schema=SCHEMA))
            committer.commit(write.prepare_commit(), commit_identifier=i + 1)
            acked.extend(ids)
        except Exception as exc:  # noqa: BLE001 - counted; the test asserts there are none
            failures.append(f"{type(exc).__name__}: {exc}")
            traceback.print_exc()
        time.sleep(args.interval_s)
    Path(args.summary).write_text(json.dumps({"acked": acked, "failures": failures}))
    print("DONE", len(acked), len(failures), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
