"""Worker processes for the maintenance concurrency test.

Usage: python tests/integration/maintenance_proc.py writer|maintainer ROOT SECONDS [STOP_FILE]

``writer`` appends 7 rows per commit (ids ``7k..7k+6``, identifier ``k``) and prints
``ACK <k> <snapshot>`` per commit. ``maintainer`` loops compact + merge + expire and
prints one ``RUN ...`` line per iteration. Both run until STOP_FILE exists (the test
creates it once enough happened) or, at the latest, until SECONDS pass. Any exception
ends the process with a traceback and a non-zero exit code.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.helpers import rows

from snaplake.errors import CommitRetriesExhaustedError
from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.table import Table


def _running(deadline: float, stop_file: str | None) -> bool:
    return time.monotonic() < deadline and not (stop_file and Path(stop_file).exists())


def writer(table: Table, seconds: float, stop_file: str | None = None) -> None:
    commit = table.new_commit(commit_user="writer")
    deadline = time.monotonic() + seconds
    k = 0
    while _running(deadline, stop_file):
        w = table.new_write(commit_user="writer")
        w.write_arrow(rows(7 * k, 7))
        result = commit.commit(w.prepare_commit(), commit_identifier=k)
        print(f"ACK {k} {result.snapshot_id} {result.attempts}", flush=True)
        k += 1


def _attempt(op, default):
    """Run one maintenance operation; losing the race too often is retryable by design."""
    try:
        return op()
    except CommitRetriesExhaustedError as exc:
        print(f"RETRY {exc}", flush=True)
        return default


def maintainer(table: Table, seconds: float, stop_file: str | None = None) -> None:
    deadline = time.monotonic() + seconds
    while _running(deadline, stop_file):
        c = _attempt(table.compact, None)
        m = _attempt(table.merge_manifests, None)
        e = table.expire_snapshots()  # expiry publishes nothing: it never loses a race
        print(
            f"RUN compact={c.snapshot_id if c else None} merge={m.snapshot_id if m else None} "
            f"expired={e.snapshots_expired} data_deleted={len(e.data_files)}",
            flush=True,
        )


if __name__ == "__main__":
    mode, root, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
    stop = sys.argv[4] if len(sys.argv) > 4 else None
    tbl = Table(file_io=LocalFileIO(), root=root, identifier="db.t")
    {"writer": writer, "maintainer": maintainer}[mode](tbl, secs, stop)
