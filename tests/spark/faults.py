"""Fault-injecting FileIOs shipped to Spark executors (importable there via PYTHONPATH).

Each task deserialises its own copy, so the counters are per task attempt.
"""

from __future__ import annotations

import os
import time
from typing import IO

from snaplake.store.io.local_file_io import LocalFileIO


class InjectedFaultError(OSError):
    """The failure a test asked for."""


class FailingDataFileIO(LocalFileIO):
    """LocalFileIO that fails a data-file write in chosen Spark tasks.

    Args:
        partition: Spark partition id whose task fails (``None`` = every task).
        attempts: Task attempt numbers that fail (``None`` = every attempt).
        after_files: Data files the failing task writes successfully first.
        marker_dir: Where each injected failure leaves a marker file (proof it happened).
        slow_partition: A partition whose task sleeps ``delay_s`` seconds before
            each data file (so it is still running when another task fails).
        delay_s: See ``slow_partition``.
    """

    def __init__(
        self,
        *,
        partition: int | None,
        attempts: tuple[int, ...] | None,
        after_files: int,
        marker_dir: str,
        slow_partition: int | None = None,
        delay_s: float = 0.0,
    ) -> None:
        super().__init__(fsync=False)
        self.partition = partition
        self.attempts = attempts
        self.after_files = after_files
        self.marker_dir = marker_dir
        self.slow_partition = slow_partition
        self.delay_s = delay_s
        self._written = 0

    buffered_write_max_bytes = 0  # always stream data files through open_output

    def arrow_filesystem(self) -> None:  # type: ignore[override]
        return None  # route data files through open_output, where the fault lives

    def open_output(self, path: str) -> IO[bytes]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and "/bucket-" in path:
            if ctx.partitionId() == self.slow_partition:
                time.sleep(self.delay_s)
            chosen = self.partition is None or ctx.partitionId() == self.partition
            attempt = self.attempts is None or ctx.attemptNumber() in self.attempts
            if chosen and attempt:
                if self._written >= self.after_files:
                    marker = f"p{ctx.partitionId()}-a{ctx.attemptNumber()}-{self._written}"
                    os.makedirs(self.marker_dir, exist_ok=True)
                    open(os.path.join(self.marker_dir, marker), "w").close()
                    raise InjectedFaultError(
                        f"injected failure in partition {ctx.partitionId()} "
                        f"attempt {ctx.attemptNumber()} after {self._written} file(s)"
                    )
                self._written += 1
        return super().open_output(path)
