"""The LSM conflict rule: files of one level (>= 1) of a bucket must not overlap.

A pure function over the live entries a commit would leave behind. Level 0
is exempt (each of its files is its own sorted run), so writers adding
level-0 files never trip it; two compactions writing overlapping files into
one level do.

Source: Paimon ``PrimaryKeyConflictDetection.checkTableSpecificConflicts``
("LSM conflicts detected!").
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from snaplake.errors import CommitConflictError
from snaplake.mergetree.sorted_run import KeyComparator
from snaplake.store.format.manifest import FileKind, ManifestEntry

__all__ = ["LsmConflictRule", "check_lsm_levels"]


def check_lsm_levels(entries: Iterable[ManifestEntry], cmp: KeyComparator) -> None:
    """Refuse overlapping key ranges among the files of one (partition, bucket, level >= 1).

    Args:
        entries: Live ADD entries after the commit (at least every bucket the
            commit touches).
        cmp: Key comparator of the table's trimmed primary key.

    Raises:
        CommitConflictError: two files of one level overlap (``max_key >= next
            min_key`` after sorting by min key); names both files. Retrying
            the same commit cannot help: re-plan the compaction.
    """
    levels: dict[tuple[bytes, int, int], list[ManifestEntry]] = {}
    for e in entries:
        if e.file.level >= 1:
            levels.setdefault((e.partition, e.bucket, e.file.level), []).append(e)
    for (_, bucket, level), group in levels.items():
        group.sort(key=lambda e: cmp.min_key(e.file))
        for a, b in itertools.pairwise(group):
            if cmp.max_key(a.file) >= cmp.min_key(b.file):
                names = [a.file.file_name, b.file.file_name]
                raise CommitConflictError(
                    f"LSM conflicts detected: files {names[0]} and {names[1]} of bucket "
                    f"{bucket} overlap at level {level}; another compaction rewrote this bucket "
                    "concurrently. Give up this commit and plan the compaction again",
                    paths=names,
                )


class LsmConflictRule:
    """The LSM rule as a commit conflict rule (``snaplake.commit.conflict.ConflictRule``).

    Only buckets the commit adds level >= 1 files to are checked: level 0 is
    exempt, so writers adding level-0 files never conflict with a compaction.

    Args:
        cmp: Key comparator of the table's trimmed primary key.

    Source: Paimon ``PrimaryKeyConflictDetection.checkTableSpecificConflicts``.
    """

    def __init__(self, cmp: KeyComparator) -> None:
        self.cmp = cmp

    def partitions(self, delta: Sequence[ManifestEntry]) -> frozenset[bytes]:
        """Partitions where ``delta`` adds files at a level >= 1."""
        return frozenset(e.partition for e in delta if _adds_upper_level(e))

    def check(
        self,
        merged: Mapping[tuple[Any, ...], ManifestEntry],
        *,
        delta: Sequence[ManifestEntry],
        snapshot_id: int,
    ) -> None:
        """Refuse ``delta`` when a touched bucket's level >= 1 files overlap in ``merged``.

        Args:
            merged: Live ADD entries after the commit (at least the touched partitions).
            delta: The commit's entries.
            snapshot_id: The snapshot the commit would land on (unused).

        Raises:
            CommitConflictError: see :func:`check_lsm_levels`.
        """
        touched = {(e.partition, e.bucket) for e in delta if _adds_upper_level(e)}
        if touched:
            check_lsm_levels(
                (e for e in merged.values() if (e.partition, e.bucket) in touched), self.cmp
            )


def _adds_upper_level(entry: ManifestEntry) -> bool:
    return entry.kind == FileKind.ADD and entry.file.level >= 1
