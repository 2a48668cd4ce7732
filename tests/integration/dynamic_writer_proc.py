"""Writer process of the dynamic-bucket race test (issue 20 item 2).

Usage: python tests/integration/dynamic_writer_proc.py ROOT WRITER ROUNDS GO_FILE

Waits for GO_FILE, then commits ROUNDS batches of upserts whose keys overlap
the other writers' (new keys and known ones), each with a new writer. A
commit refused because another writer changed a HASH file it replaces
(``HashIndexConflictError``) is aborted and written again with a new writer,
which restores the new index. Prints ``ACK <round> <snapshot> <tries>`` per
batch; any other exception ends the process with exit code 1.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.pk_helpers import make_rows, to_table

from snaplake.errors import HashIndexConflictError
from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.table import Table


def keys(writer: int, k: int) -> tuple[int, int]:
    """First id and count of ``writer``'s batch ``k``: shifting windows that overlap."""
    return (k * 17 + writer * 5) % 150, 30


def main(root: str, writer: int, rounds: int, go_file: str) -> None:
    table = Table(file_io=LocalFileIO(), root=root, identifier="db.t")
    while not Path(go_file).exists():
        time.sleep(0.01)
    for k in range(rounds):
        start, n = keys(writer, k)
        rows = to_table(make_rows(start, n, seed=writer))
        for tries in range(1, 51):
            write = table.new_write(commit_user=f"w{writer}")
            write.write_arrow(rows, row_kinds=["+U"] * n)
            messages = write.prepare_commit()
            try:
                result = table.new_commit(commit_user=f"w{writer}").commit(messages)
            except HashIndexConflictError:
                write.abort(messages)
                continue
            print(f"ACK {k} {result.snapshot_id} {tries}", flush=True)
            break
        else:
            raise RuntimeError(f"batch {k} lost 50 races")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
