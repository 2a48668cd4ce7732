"""A writer on a simulated clock, for the daemon's automatic-tag test.

Usage: python tests/daemon/tag_writer_proc.py --warehouse W --table db.t --commits N
       --clock-start-ms MS --clock-step-ms STEP --summary S.json

Appends ``rows`` rows per commit (ids ``i * rows ..``, ``commit_identifier = i + 1``);
commit ``i`` is stamped ``timeMillis = clock-start-ms + i * clock-step-ms`` (the
committer's injected wall clock), so ten-minute steps stream ten hours of process
time through the table in seconds and the tags the daemon creates depend on the
commits only, never on the machine's speed. Writes a JSON summary (commits, failures).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow as pa

import snaplake


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--warehouse", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--commits", type=int, required=True)
    p.add_argument("--rows", type=int, default=10)
    p.add_argument("--clock-start-ms", type=int, required=True)
    p.add_argument("--clock-step-ms", type=int, required=True)
    p.add_argument("--summary", required=True)
    args = p.parse_args()

    table = snaplake.FileSystemCatalog(args.warehouse).get_table(args.table)
    committer = table.new_commit(commit_user="tag-writer")
    stamp = {"i": 0}
    committer.snapshot_commit._wall_clock_ms = lambda: (
        args.clock_start_ms + stamp["i"] * args.clock_step_ms
    )
    failures: list[str] = []
    print("WRITING", flush=True)
    for i in range(args.commits):
        stamp["i"] = i
        ids = pa.array(range(i * args.rows, (i + 1) * args.rows), pa.int64())
        data = pa.table({"id": ids, "month": pa.array([1 + i % 2] * args.rows, pa.int32()),
                         "payload": pa.array([f"row-{v}" for v in ids.to_pylist()])})  # fmt: skip
        try:
            write = table.new_write(commit_user="tag-writer")
            write.write_arrow(data)
            committer.commit(write.prepare_commit(), commit_identifier=i + 1)
        except Exception as exc:  # noqa: BLE001 - counted; the test asserts there are none
            failures.append(f"{type(exc).__name__}: {exc}")
            traceback.print_exc()
    Path(args.summary).write_text(json.dumps({"commits": args.commits, "failures": failures}))
    print("DONE", args.commits, len(failures), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
