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
from snaplake.store.format.manifest import ManifestEntry

__all__ = ["check_lsm_after_commit", "check_lsm_levels"]


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


def check_lsm_after_commit(
    live: Mapping[tuple[Any, ...], ManifestEntry],
    deletes: Sequence[ManifestEntry],
    adds: Sequence[ManifestEntry],
    cmp: KeyComparator,
) -> None:
    """Apply a commit's entries to the live entries of its buckets and check the LSM rule.

    Args:
        live: Live ADD entries (by identity) of at least the touched partitions.
        deletes: The commit's DELETE entries.
        adds: The commit's ADD entries.
        cmp: Key comparator of the trimmed primary key.

    Raises:
        CommitConflictError: see :func:`check_lsm_levels`. Only buckets the
            commit adds level >= 1 files to are checked (level 0 is exempt).
    """
    touched = {(a.partition, a.bucket) for a in adds if a.file.level >= 1}
    if not touched:
        return
    merged = {k: e for k, e in live.items() if (e.partition, e.bucket) in touched}
    for d in deletes:
        merged.pop(d.identifier(), None)
    for a in adds:
        if (a.partition, a.bucket) in touched:
            merged[a.identifier()] = a
    check_lsm_levels(merged.values(), cmp)
