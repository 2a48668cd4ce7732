"""A writer process for the concurrency and crash tests, local or on S3.

Usage: python tests/integration/writer_proc.py --root TABLE_ROOT --user U --idents 1,2,3
       [--user-no N] [--rows N] [--start-at EPOCH_S] [--kill-at K] [--kill-after]
       [--kill-last-only] [--s3-options-env VAR]

Appends ``rows`` rows per identifier (ids ``ident * 1_000_000 + user_no * 10_000 + i``),
committing each with ``commit_identifier = ident``; prints
``ACK <ident> <snapshot> <dup> <attempts>`` after each commit.

``TABLE_ROOT`` is a local table directory, or with ``--s3-options-env VAR`` an
``s3://BUCKET/wh/db.db/t`` root: the catalog options, credentials included, are then
read as JSON from the environment variable ``VAR`` (the S3 tests pass
``SNAPLAKE_TEST_S3_OPTIONS``), so they never appear on a command line or in output.

With ``--kill-at K`` the process SIGKILLs itself at the K-th storage operation, before
it or, with ``--kill-after``, right after it returned: a crash at a chosen point of the
commit. The operations counted are ``write_if_absent``, ``write_bytes(overwrite=True)``,
``write_output`` and ``arrow_filesystem`` (a streamed data file is about to be written).
Locally ``LocalFileIO.write_new`` (manifests and manifest lists), ``LocalFileIO.publish``
(the snapshot) and ``LocalFileIO.write_hint`` (LATEST) are counted too; on S3 ``write_new``
and ``publish`` are a ``write_if_absent`` (the first one of a process, which checks the
bucket's conditional writes, a ``write_output``) and ``write_hint`` a
``write_bytes(overwrite=True)``, counted there. Either way a commit has six: data
file, manifest, two manifest lists, snapshot and LATEST. Operations are counted across all
identifiers unless ``--kill-last-only`` counts only those of the LAST identifier's write
and commit (earlier identifiers, reruns that may be duplicates writing fewer files, are
then never killed).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow as pa

from snaplake.store.io.file_io import FileIO
from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.store.io.s3.file_io import S3FileIO
from snaplake.table import Table


class KillSwitch:
    """SIGKILLs this process at the ``kill_at``-th counted storage operation of a FileIO."""

    def __init__(self, kill_at: int, *, after: bool) -> None:
        self.kill_at, self.after, self.ops = kill_at, after, 0

    def _tick(self, phase: str) -> None:
        if phase == "before":
            self.ops += 1
        if self.ops == self.kill_at and phase == ("after" if self.after else "before"):
            os.kill(os.getpid(), signal.SIGKILL)

    def _counted(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self._tick("before")
            result = fn(*args, **kwargs)
            self._tick("after")
            return result

        return call

    def install(self, file_io: FileIO) -> None:
        """Count ``file_io``'s writes, its own internal calls included (like an override)."""
        # write_if_absent: snapshots (on S3 manifests and lists too); write_output: a small
        # data file (S3 only: one PutObject); arrow_filesystem: a data file is about to be
        # streamed (S3 also asks for it to open a file for reading).
        names = ["write_if_absent", "write_output", "arrow_filesystem"]
        if isinstance(file_io, LocalFileIO):
            # manifests and lists; the snapshot's publish (on S3 both go through
            # write_if_absent, counted there)
            names += ["write_new", "publish", "write_hint"]
        counted = {name: self._counted(getattr(file_io, name)) for name in names}
        write_bytes, overwrite_counted = file_io.write_bytes, self._counted(file_io.write_bytes)

        def write_bytes_counted(path: str, data: bytes, *, overwrite: bool = False) -> None:
            if overwrite:
                overwrite_counted(path, data, overwrite=True)
            else:  # S3: write_if_absent (counted there); local: write_new (not counted)
                write_bytes(path, data)

        # Instance attributes shadow the methods, for the FileIO's own calls too.
        vars(file_io).update(counted, write_bytes=write_bytes_counted)


def open_file_io(args: argparse.Namespace) -> tuple[FileIO, KillSwitch | None]:
    """The table's FileIO, local or S3, and with ``--kill-at`` its installed kill switch."""
    options = json.loads(os.environ[args.s3_options_env]) if args.s3_options_env else None
    file_io = LocalFileIO() if options is None else S3FileIO(options)
    if not args.kill_at:
        return file_io, None
    kill_switch = KillSwitch(args.kill_at, after=args.kill_after)
    kill_switch.install(file_io)
    return file_io, kill_switch


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
    p.add_argument("--kill-last-only", action="store_true")
    p.add_argument("--s3-options-env", metavar="VAR", default="")
    args = p.parse_args()
    file_io, kill_switch = open_file_io(args)
    table = Table(file_io=file_io, root=args.root, identifier="db.t")
    committer = table.new_commit(commit_user=args.user)
    write = table.new_write(commit_user=args.user)
    schema = table.arrow_schema
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.time()))
    idents = [int(x) for x in args.idents.split(",")]
    for ident in idents:
        if kill_switch is not None and args.kill_last_only:
            kill_switch.ops = 0 if ident == idents[-1] else -(10**9)  # count the last one only
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
