"""CappedCompactor: small-file compaction bounded to a number of input files per bucket and commit.

A backlog of thousands of small files is compacted in several rounds, each
one commit, so the memory of a round does not grow with the backlog (the
daemon's compaction job runs rounds until nothing is cut off).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from snaplake.compaction.append_compact import AppendCompactor, CompactTask

__all__ = ["CappedCompactor"]


class CappedCompactor(AppendCompactor):
    """An :class:`AppendCompactor` that rewrites at most ``max_files`` files per bucket.

    Each (partition, bucket) keeps its oldest ``max_files`` planned files (a
    prefix of a run of consecutive small files is itself such a run, so
    sequence ranges and row order stay as the compactor guarantees); what is
    cut off is left for the next round.
    Input files, decoded rows and new metadata of one commit are then bounded
    by ``max_files`` times the buckets rewritten at a time.

    Args:
        max_files: Files per (partition, bucket) and commit, >= 2.
        **kwargs: As :class:`AppendCompactor`.

    Raises:
        ValueError: ``max_files < 2``.
    """

    def __init__(self, *, max_files: int, **kwargs: Any) -> None:
        if max_files < 2:
            raise ValueError(f"max_files must be >= 2, got {max_files}")
        super().__init__(**kwargs)
        self.max_files = max_files
        self.capped = False
        """Whether the last :meth:`plan` left due files for a later round."""

    def plan(self) -> list[CompactTask]:
        """Return the due runs, at most ``max_files`` files per (partition, bucket).

        Raises:
            CorruptMetadataError: a manifest is undecodable.

        Storage: as :meth:`AppendCompactor.plan`.
        """
        left: dict[tuple[bytes, int], int] = {}
        out: list[CompactTask] = []
        self.capped = False
        for task in super().plan():
            key = (task.split.partition, task.split.bucket)
            room = left.get(key, self.max_files)
            keep = min(room, len(task.files))
            if keep < len(task.files):
                self.capped = True
            if keep < 2:  # nothing to merge; the next round takes it
                continue
            left[key] = room - keep
            out.append(dataclasses.replace(task, files=task.files[:keep], paths=task.paths[:keep]))
        return out
