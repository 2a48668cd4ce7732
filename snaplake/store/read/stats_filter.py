"""How a scan prunes data files by their statistics: by value stats or by key stats.

A table's FileStore picks the filter of its kind and hands it to
:class:`~snaplake.store.read.scan.FileStoreScan`; the scan never asks what
kind of table it plans.

- :class:`ValueStatsFilter` (append tables): every row of a file is a row of
  the table, so any predicate prunes a file by its ``_VALUE_STATS``.
- :class:`KeyStatsFilter` (primary-key tables): a file's value stats say
  nothing about the merged rows (a newer version in another file replaces a
  row), but every version of a key lies in files whose key range holds it,
  so predicates on the trimmed primary key prune by ``_KEY_STATS``; the
  others prune nothing.

Source: Paimon ``AppendOnlyFileStoreScan.filterByStats`` (the value filter)
and ``KeyValueFileStoreScan.filterByStats`` (the key filter over key stats).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from snaplake.store.format.data_file import DataFileMeta, SimpleStats
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.types import DataType
from snaplake.store.read.predicate import Predicate

__all__ = ["FileStats", "KeyStatsFilter", "StatsFilter", "ValueStatsFilter"]


@dataclass(frozen=True, slots=True)
class FileStats:
    """The statistics of one data file a filter prunes by.

    Attributes:
        names: The columns the stats cover, in the stats' order.
        types: Paimon type of each of ``names`` (to decode the min/max BinaryRows).
        stats: The file's min values, max values and null counts over ``names``.
    """

    names: tuple[str, ...]
    types: tuple[DataType, ...]
    stats: SimpleStats


class StatsFilter(ABC):
    """Which predicates prune files, and which statistics of a file they are tested on.

    Source: Paimon ``AbstractFileStoreScan.filterByStats`` (one per kind).
    """

    @abstractmethod
    def prunable(
        self, predicates: Sequence[Predicate], read_schema: TableSchema
    ) -> tuple[Predicate, ...]:
        """The ``predicates`` (on ``read_schema``'s non-partition columns) that may prune files."""

    @abstractmethod
    def file_stats(self, file: DataFileMeta, schema: TableSchema) -> FileStats:
        """The statistics of ``file``, written under ``schema`` (its ``_SCHEMA_ID``'s)."""


class ValueStatsFilter(StatsFilter):
    """Append tables: any predicate prunes by a file's ``_VALUE_STATS``.

    The stats cover ``_VALUE_STATS_COLS`` when the file records them, else
    every column of the file's schema.

    Source: Paimon ``AppendOnlyFileStoreScan.filterByStats``.
    """

    def prunable(
        self, predicates: Sequence[Predicate], read_schema: TableSchema
    ) -> tuple[Predicate, ...]:
        """Every predicate."""
        return tuple(predicates)

    def file_stats(self, file: DataFileMeta, schema: TableSchema) -> FileStats:
        """``file``'s value stats over its stats columns (default: all of ``schema``)."""
        if file.value_stats_cols is None:
            return FileStats(tuple(schema.field_names), schema.value_types, file.value_stats)
        names = tuple(file.value_stats_cols)
        return FileStats(names, tuple(schema.field_type(n) for n in names), file.value_stats)


class KeyStatsFilter(StatsFilter):
    """Primary-key tables: predicates on the trimmed primary key prune by ``_KEY_STATS``.

    Source: Paimon ``KeyValueFileStoreScan.filterByStats`` (``keyFilter``).
    """

    def prunable(
        self, predicates: Sequence[Predicate], read_schema: TableSchema
    ) -> tuple[Predicate, ...]:
        """The predicates on ``read_schema``'s trimmed primary key (not partition keys)."""
        keys = set(read_schema.trimmed_primary_keys)
        return tuple(p for p in predicates if p.column in keys)

    def file_stats(self, file: DataFileMeta, schema: TableSchema) -> FileStats:
        """``file``'s key stats over ``schema``'s trimmed primary key."""
        return FileStats(schema.trimmed_primary_keys, schema.key_types, file.key_stats)
