"""Writer process of the dynamic-bucket crash test: one upsert commit, killable at any operation.

Usage: python tests/integration/dynamic_crash_proc.py ROOT FIRST COUNT SEED [KILL_AT [after]]

Upserts ``make_rows(FIRST, COUNT, seed=SEED)`` into the dynamic-bucket table at
ROOT with a new writer (which restores the HASH index) and commits it. With
KILL_AT the process SIGKILLs itself at that storage operation (before it, or
right after it with ``after``), counted as tests/integration/writer_proc.py's
``KillSwitch`` counts them (data, HASH and metadata files, snapshot, LATEST), but
per call: the writer writes data files of several buckets in threads, so "right
after operation K" means after the call numbered K returned, whatever other
calls started meanwhile.
Prints ``OPS <n>`` (the operations counted) when the commit returned.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.integration.writer_proc import KillSwitch
from tests.pk_helpers import make_rows, to_table

from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.table import Table


class CallKillSwitch(KillSwitch):
    """A ``KillSwitch`` that numbers calls as they start and kills at the K-th call's end."""

    def __init__(self, kill_at: int, *, after: bool) -> None:
        super().__init__(kill_at, after=after)
        self._lock = threading.Lock()

    def _counted(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.ops += 1
                number = self.ops
            if number == self.kill_at and not self.after:
                os.kill(os.getpid(), signal.SIGKILL)
            result = fn(*args, **kwargs)
            if number == self.kill_at and self.after:
                os.kill(os.getpid(), signal.SIGKILL)
            return result

        return call


def main(argv: list[str]) -> None:
    root, first, count, seed = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    file_io = LocalFileIO()
    switch = CallKillSwitch(int(argv[4]) if len(argv) > 4 else 0, after=argv[5:] == ["after"])
    switch.install(file_io)
    table = Table(file_io=file_io, root=root, identifier="db.t")
    write = table.new_write(commit_user="crashy")
    write.write_arrow(to_table(make_rows(first, count, seed=seed)))
    table.new_commit(commit_user="crashy").commit(write.prepare_commit(), commit_identifier=1)
    print(f"OPS {switch.ops}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
