"""Compaction process of the deletion-vector crash test: one lookup compaction, killable.

Usage: python tests/integration/dv_compact_crash_proc.py ROOT [KILL_AT [after]]

Compacts the table at ROOT once (``table.compact()``: the level-0 files go up
with lookup and the bucket's vectors file is rewritten). With KILL_AT the
process SIGKILLs itself at that storage operation (before it, or right after
it with ``after``), counted as tests/integration/dynamic_crash_proc.py counts
them. Prints ``OPS <n>`` when the compaction returned.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.integration.dynamic_crash_proc import CallKillSwitch

from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.table import Table


def main(argv: list[str]) -> None:
    root = argv[0]
    file_io = LocalFileIO()
    switch = CallKillSwitch(int(argv[1]) if len(argv) > 1 else 0, after=argv[2:] == ["after"])
    switch.install(file_io)
    table = Table(file_io=file_io, root=root, identifier="db.t")
    result = table.compact()
    assert result.snapshot_id is not None
    print(f"OPS {switch.ops}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
