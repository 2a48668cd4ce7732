"""Sorted runs, levels and interval partitioning of one bucket's data files.

Keys of data files are compared through their ``_MIN_KEY`` / ``_MAX_KEY``
BinaryRows, decoded with the trimmed primary-key types and ordered as
Paimon's generated key comparator orders them (field by field, nulls first,
floats by ``Double.compare``, strings and bytes by unsigned bytes).

Source: Paimon ``mergetree/SortedRun``, ``LevelSortedRun``, ``Levels``,
``compact/IntervalPartition``, ``KeyComparatorSupplier``.
"""

from __future__ import annotations

import datetime as dt
import heapq
import math
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from snaplake.errors import CorruptMetadataError
from snaplake.store.format.binary_row import Timestamp, decode_binary_row
from snaplake.store.format.data_file import DataFileMeta
from snaplake.store.format.types import DataType

__all__ = [
    "KeyComparator",
    "LevelSortedRun",
    "Levels",
    "SortedRun",
    "interval_partition",
    "java_order_key",
]

_EPOCH = dt.date(1970, 1, 1)


def _float_key(value: float) -> tuple[int, int]:
    bits = struct.unpack(">q", struct.pack(">d", value))[0]
    if math.isnan(value):
        return (1, 0)
    return (0, bits if bits >= 0 else -(bits & 0x7FFFFFFFFFFFFFFF) - 1)


def java_order_key(values: Iterable[Any]) -> tuple[Any, ...]:
    """A Python-comparable tuple ordering key values like Paimon's key comparator.

    Nulls come first; floats follow ``Double.compare`` (``-0.0 < 0.0``, NaN
    last); dates and timestamps compare chronologically whatever their decoded
    Python type. Strings compare by code point, which is UTF-8 byte order.
    """
    out: list[Any] = []
    for v in values:
        if v is None:
            out.append((0,))
        elif isinstance(v, float):
            out.append((1, _float_key(v)))
        elif isinstance(v, dt.datetime):
            out.append((1, Timestamp.from_datetime(v)))
        elif isinstance(v, dt.date):
            out.append((1, (v - _EPOCH).days))
        else:
            out.append((1, v))
    return tuple(out)


class KeyComparator:
    """Orders BinaryRow keys of one table (decoded once per distinct row, cached).

    Args:
        key_types: Paimon types of the trimmed primary key.
    """

    def __init__(self, key_types: Sequence[DataType]) -> None:
        self.key_types = tuple(key_types)
        self._cache: dict[bytes, tuple[Any, ...]] = {}

    def key(self, row: bytes) -> tuple[Any, ...]:
        """The sortable form of a serialised key row.

        Raises:
            CorruptMetadataError: the bytes are not a BinaryRow of the key types.
        """
        cached = self._cache.get(row)
        if cached is None:
            values = decode_binary_row(row, self.key_types)
            if len(values) != len(self.key_types):
                raise CorruptMetadataError(
                    f"a key row has {len(values)} fields; the table's key has "
                    f"{len(self.key_types)}",
                    path="",
                )
            cached = java_order_key(values)
            if len(self._cache) > 1_000_000:
                self._cache.clear()
            self._cache[row] = cached
        return cached

    def min_key(self, file: DataFileMeta) -> tuple[Any, ...]:
        """Sortable ``_MIN_KEY`` of ``file``."""
        return self.key(file.min_key)

    def max_key(self, file: DataFileMeta) -> tuple[Any, ...]:
        """Sortable ``_MAX_KEY`` of ``file``."""
        return self.key(file.max_key)


@dataclass(frozen=True, slots=True)
class SortedRun:
    """Files whose key ranges do not overlap, in key order (``SortedRun``).

    Attributes:
        files: The files, sorted by min key.
    """

    files: tuple[DataFileMeta, ...]

    @property
    def total_size(self) -> int:
        """Bytes of the run's files."""
        return sum(f.file_size_bytes for f in self.files)

    @classmethod
    def from_unsorted(cls, files: Iterable[DataFileMeta], cmp: KeyComparator) -> SortedRun:
        """Sort ``files`` by min key into a run."""
        return cls(tuple(sorted(files, key=cmp.min_key)))


@dataclass(frozen=True, slots=True)
class LevelSortedRun:
    """A sorted run and its level (``LevelSortedRun``)."""

    level: int
    run: SortedRun


def _level0_order(f: DataFileMeta) -> tuple[int, int, int, str]:
    # Newest first: max sequence descending, then min sequence, creation time, name.
    return (-f.max_sequence_number, f.min_sequence_number, f.creation_time_ms or 0, f.file_name)


class Levels:
    """The LSM levels of one bucket (``Levels``).

    Level 0 holds files newest first, each its own sorted run; each level
    ``1..num_levels-1`` is one sorted run.

    Args:
        cmp: The table's key comparator.
        files: The bucket's live files.
        num_levels: ``num-levels``; raised to hold the highest level present.

    Raises:
        ValueError: fewer than two levels.
    """

    def __init__(self, cmp: KeyComparator, files: Sequence[DataFileMeta], num_levels: int) -> None:
        restored = max(num_levels, max((f.level for f in files), default=-1) + 1)
        if restored < 2:
            raise ValueError("num-levels must be at least 2")
        self.cmp = cmp
        self.level0: list[DataFileMeta] = sorted(
            (f for f in files if f.level == 0), key=_level0_order
        )
        self.levels: list[SortedRun] = [
            SortedRun.from_unsorted((f for f in files if f.level == i), cmp)
            for i in range(1, restored)
        ]

    @property
    def number_of_levels(self) -> int:
        """Levels including level 0."""
        return len(self.levels) + 1

    @property
    def max_level(self) -> int:
        """The top level (``number_of_levels - 1``)."""
        return len(self.levels)

    def level_sorted_runs(self) -> list[LevelSortedRun]:
        """Every non-empty sorted run, newest first (level 0 files, then levels 1..max)."""
        runs = [LevelSortedRun(0, SortedRun((f,))) for f in self.level0]
        runs.extend(LevelSortedRun(i + 1, r) for i, r in enumerate(self.levels) if r.files)
        return runs

    def number_of_sorted_runs(self) -> int:
        """Level-0 files plus non-empty higher levels."""
        return len(self.level0) + sum(1 for r in self.levels if r.files)

    def non_empty_highest_level(self) -> int:
        """The highest level holding a file (0 if only level 0, -1 if empty)."""
        for i in range(len(self.levels) - 1, -1, -1):
            if self.levels[i].files:
                return i + 1
        return 0 if self.level0 else -1


def interval_partition(files: Sequence[DataFileMeta], cmp: KeyComparator) -> list[list[SortedRun]]:
    """Cut files into sections of overlapping key ranges, each packed into sorted runs.

    Sections are in key order and never overlap each other; inside a section,
    files are assigned greedily to the run whose last file ends earliest
    before the file's min key (a new run when none does).

    Source: Paimon ``IntervalPartition.partition``.
    """
    ordered = sorted(files, key=lambda f: (cmp.min_key(f), cmp.max_key(f)))
    sections: list[list[SortedRun]] = []
    section: list[DataFileMeta] = []
    bound: tuple[Any, ...] | None = None
    for f in ordered:
        if section and bound is not None and cmp.min_key(f) > bound:
            sections.append(_partition_section(section, cmp))
            section, bound = [], None
        section.append(f)
        if bound is None or cmp.max_key(f) > bound:
            bound = cmp.max_key(f)
    if section:
        sections.append(_partition_section(section, cmp))
    return sections


def _partition_section(files: list[DataFileMeta], cmp: KeyComparator) -> list[SortedRun]:
    heap: list[tuple[tuple[Any, ...], int, list[DataFileMeta]]] = []
    counter = 0
    heapq.heappush(heap, (cmp.max_key(files[0]), counter, [files[0]]))
    for f in files[1:]:
        end, n, top = heapq.heappop(heap)
        if cmp.min_key(f) > end:
            top.append(f)
            heapq.heappush(heap, (cmp.max_key(f), n, top))
        else:
            heapq.heappush(heap, (end, n, top))
            counter += 1
            heapq.heappush(heap, (cmp.max_key(f), counter, [f]))
    return [SortedRun(tuple(run)) for _, _, run in sorted(heap, key=lambda e: e[1])]
