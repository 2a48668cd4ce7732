"""Writer process of the primary-key writer + daemon test.

Usage: python tests/integration/pk_writer_proc.py ROOT SECONDS [STOP_FILE]

Commits :func:`batch` ``k`` with identifier ``k`` (k = 1, 2, ...) until SECONDS
pass or STOP_FILE exists, through one long-lived writer, and prints
``ACK <k> <snapshot>`` per commit. Any exception ends the process with a
traceback and exit code 1.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.pk_helpers import make_rows, to_table

from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.table import Table

USER = "pk-writer"


def batch(k: int) -> tuple[list[dict[str, Any]], list[str]]:
    """Commit ``k``'s rows and kinds: upserts (some partial) of ids in 0..299, a few deletes.

    Deletes carry only the key: with ``partial-update.remove-record-on-delete`` a
    delete's other values seed the row of a later update only while the delete
    itself is not yet compacted away at the top level (a Paimon quirk the
    one-fold model cannot follow).
    """
    rows = make_rows((k * 37) % 260, 40, seed=k)
    kinds = []
    for r in rows:
        if r["id"] % 11 == k % 11:
            kinds.append("-D")
            r.update(name=None, qty=None, price=None, ok=None)
        else:
            kinds.append("+U")
            if r["id"] % 3 == 0:
                r["price"] = None  # a partial update
    return rows, kinds


def main(root: str, seconds: float, stop_file: str | None = None) -> None:
    table = Table(file_io=LocalFileIO(), root=root, identifier="db.t")
    write = table.new_write(commit_user=USER)
    commit = table.new_commit(commit_user=USER)
    deadline = time.monotonic() + seconds
    k = 0
    print("WRITING", flush=True)
    while time.monotonic() < deadline and not (stop_file and Path(stop_file).exists()):
        k += 1
        rows, kinds = batch(k)
        write.write_arrow(to_table(rows), row_kinds=kinds)
        result = commit.commit(write.prepare_commit(), commit_identifier=k)
        print(f"ACK {k} {result.snapshot_id} {result.attempts}", flush=True)
        time.sleep(0.05)
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), *sys.argv[3:4])
