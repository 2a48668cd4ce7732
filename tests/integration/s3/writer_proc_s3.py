"""A writer process for the S3 concurrency and crash tests (the S3 twin of writer_proc.py).

Usage: python tests/integration/s3/writer_proc_s3.py --root s3://BUCKET/wh/db.db/t --user U
       --idents 1,2,3 [--rows N] [--start-at EPOCH_S] [--kill-at K] [--kill-after]

Catalog options, credentials included, come from ``$SNAPLAKE_TEST_S3_OPTIONS`` (JSON) so
they never appear on a command line. Appends ``rows`` rows per identifier (ids
``ident * 1_000_000 + user_no * 10_000 + i``), committing each with
``commit_identifier = ident``, and prints ``ACK <ident> <snapshot> <dup> <attempts>``.
With ``--kill-at K`` the process SIGKILLs itself at the K-th storage operation (data file,
manifest, manifest lists, snapshot, LATEST) of its LAST identifier's write and commit,
before it or, with ``--kill-after``, right after it returned; earlier identifiers (reruns,
maybe duplicates writing fewer files) are never killed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import pyarrow as pa

from snaplake.store.s3_file_io import S3FileIO
from snaplake.table import Table

OPTIONS_ENV = "SNAPLAKE_TEST_S3_OPTIONS"


class KillingS3FileIO(S3FileIO):
    """S3FileIO that SIGKILLs its process at the K-th write (create-only, overwrite, data)."""

    def __init__(self, options, *, kill_at: int, after: bool) -> None:
        super().__init__(options)
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

    def write_if_absent(self, path, data):  # manifests, manifest lists and snapshots
        return self._wrap(super().write_if_absent, path, data)

    def write_bytes(self, path, data, *, overwrite=False):
        if not overwrite:
            return super().write_bytes(path, data)  # counted as write_if_absent
        return self._wrap(super().write_bytes, path, data, overwrite=overwrite)

    def write_output(self, path, data):  # a small data file: one PutObject
        return self._wrap(super().write_output, path, data)

    def arrow_filesystem(self):
        self._tick("before")  # a large data file is about to be streamed
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
    options = json.loads(os.environ[OPTIONS_ENV])
    file_io = (
        KillingS3FileIO(options, kill_at=args.kill_at, after=args.kill_after)
        if args.kill_at
        else S3FileIO(options)
    )
    table = Table(file_io=file_io, root=args.root, identifier="db.t")
    committer = table.new_commit(commit_user=args.user)
    write = table.new_write(commit_user=args.user)
    schema = table.arrow_schema
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.time()))
    idents = [int(x) for x in args.idents.split(",")]
    for ident in idents:
        if isinstance(file_io, KillingS3FileIO):
            file_io.ops = 0 if ident == idents[-1] else -(10**9)  # count the last one only
        base = ident * 1_000_000 + args.user_no * 10_000
        ids = list(range(base, base + args.rows))
        write.write_arrow(pa.table({"id": ids, "user": [args.user] * args.rows}, schema=schema))
        result = committer.commit(write.prepare_commit(), commit_identifier=ident)
        print(
            f"ACK {ident} {result.snapshot_id} {int(result.was_duplicate)} {result.attempts}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
