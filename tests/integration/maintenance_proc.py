"""Worker processes for the maintenance concurrency test.

Usage: python tests/integration/maintenance_proc.py writer|maintainer ROOT SECONDS

``writer`` appends 7 rows per commit (ids ``7k..7k+6``, identifier ``k``) until
SECONDS pass and prints ``ACK <k> <snapshot>`` per commit. ``maintainer`` loops
compact + merge + expire and prints one ``RUN ...`` line per iteration. Any
exception ends the process with a traceback and a non-zero exit code.
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


def writer(table: Table, seconds: float) -> None:
    commit = table.new_commit(commit_user="writer")
    deadline = time.monotonic() + seconds
    k = 0
    while time.monotonic() < deadline:
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


def maintainer(table: Table, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
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
    tbl = Table(file_io=LocalFileIO(), root=root, identifier="db.t")
    {"writer": writer, "maintainer": maintainer}[mode](tbl, secs)
