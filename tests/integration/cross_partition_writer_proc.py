"""Writer process of the cross-partition race test (issue 20 items 2/3).

Usage: python tests/integration/cross_partition_writer_proc.py ROOT WRITER ROUNDS GO_FILE

Waits for GO_FILE, then commits ROUNDS batches of upserts (:func:`batch`)
with one writer kept across rounds (its key map follows its own commits).
A commit refused because another writer wrote one of its keys since the
writer's key map (``CrossPartitionConflictError``) is aborted (the writer
reads its map and sequence numbers anew) and the same rows are written
again. Prints ``ACK <round> <snapshot> <tries>`` per batch; any other
exception ends the process with exit code 1.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow as pa
from tests.unit.mergetree.test_cross_partition import SCHEMA

import snaplake
from snaplake.errors import CrossPartitionConflictError


def batch(writer: int, k: int) -> list[dict[str, Any]]:
    """Writer ``writer``'s rows of round ``k``: shifting windows of 12 ids over 40.

    The windows of the writers overlap, and a key's month depends on the
    writer and the round, so keys move between the 3 partitions.
    """
    start = (k * 7 + writer * 9) % 40
    ids = [(start + i) % 40 for i in range(12)]
    return [
        {"id": i, "month": (i + writer + k) % 3 + 1, "name": f"w{writer}r{k}", "qty": i}
        for i in ids
    ]


def main(root: str, writer: int, rounds: int, go_file: str) -> None:
    table = snaplake.FileSystemCatalog(root).get_table("db.t")
    user = f"w{writer}"
    write = table.new_write(commit_user=user)
    while not Path(go_file).exists():
        time.sleep(0.01)
    for k in range(rounds):
        rows = pa.Table.from_pylist(batch(writer, k), schema=SCHEMA)
        for tries in range(1, 101):
            write.write_arrow(rows)
            messages = write.prepare_commit()
            try:
                result = table.new_commit(commit_user=user).commit(messages)
            except CrossPartitionConflictError:
                write.abort(messages)
                continue
            print(f"ACK {k} {result.snapshot_id} {tries}", flush=True)
            break
        else:
            raise RuntimeError(f"batch {k} lost 100 races")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
