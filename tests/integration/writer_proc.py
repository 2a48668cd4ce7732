"""A writer process for the concurrency and crash tests.

Usage: python tests/integration/writer_proc.py --root TABLE_DIR --user U --idents 1,2,3
       [--rows N] [--start-at EPOCH_S] [--kill-at K] [--kill-after]

Appends ``rows`` rows per identifier (ids ``ident * 1_000_000 + user_no * 10_000 + i``),
committing each with ``commit_identifier = ident``; prints ``ACK <ident> <snapshot> <dup>``
after each commit. With ``--kill-at K`` the process SIGKILLs itself at the K-th storage
operation (data file write, manifest, manifest lists, snapshot, LATEST), before the
operation or, with ``--kill-after``, right after it: a crash at a chosen point of the commit.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow as pa

from snaplake.store.local_file_io import LocalFileIO
from snaplake.table import Table


class KillingFileIO(LocalFileIO):
    def __init__(self, kill_at: int, *, after: bool) -> None:
        super().__init__()
        self.kill_at, self.after, self.ops = kill_at, after, 0

    def _tick(self, phase: str) -> None:
        if phase == "before":
            self.ops += 1
        if self.ops == self.kill_at and phase == ("after" if self.after else "before"):
            os.kill(os.getpid(), signal.SIGKILL)

    def _wrap(self, fn, *args, **kwargs):
        self._tick("before")
        result = fn(*args, **kwargs)
        self._tick("after")
        return result

    def write_if_absent(self, path, data):
        return self._wrap(super().write_if_absent, path, data)

    def write_bytes(self, path, data, *, overwrite=False):
        return self._wrap(super().write_bytes, path, data, overwrite=overwrite)

    def arrow_filesystem(self):
        self._tick("before")  # a data file is about to be written
        result = super().arrow_filesystem()
        self._tick("after")
        return result


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--user-no", type=int, default=0)
    p.add_argument("--idents", required=True)
    p.add_argument("--rows", type=int, default=10)
    p.add_argument("--start-at", type=float, default=0.0)
    p.add_argument("--kill-at", type=int, default=0)
    p.add_argument("--kill-after", action="store_true")
    args = p.parse_args()
    file_io = KillingFileIO(args.kill_at, after=args.kill_after) if args.kill_at else LocalFileIO()
    table = Table(file_io=file_io, root=args.root, identifier="db.t")
    committer = table.new_commit(commit_user=args.user)
    write = table.new_write(commit_user=args.user)
    schema = table.arrow_schema
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.time()))
    for ident in (int(x) for x in args.idents.split(",")):
        base = ident * 1_000_000 + args.user_no * 10_000
        write.write_arrow(
            pa.table({"id": list(range(base, base + args.rows)), "user": [args.user] * args.rows},
                     schema=schema)
        )  # fmt: skip
        result = committer.commit(write.prepare_commit(), commit_identifier=ident)
        print(f"ACK {ident} {result.snapshot_id} {int(result.was_duplicate)} {result.attempts}",
              flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
