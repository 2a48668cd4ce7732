"""The files one snapshot added: its delta or changelog manifest list, as splits.

A streaming read's unit is one snapshot's files (Paimon's ``ScanMode.DELTA``
and ``ScanMode.CHANGELOG``): the ADD entries of the snapshot's delta manifest
list (the files its commit added) or of its changelog manifest list (the
changelog files a changelog producer wrote), grouped by (partition, bucket)
and pruned by partition and the table kind's file statistics like a batch scan.

Source: Paimon ``SnapshotReaderImpl`` with ``ScanMode.DELTA`` /
``ScanMode.CHANGELOG`` (``ManifestsReader.read(snapshot, scanMode)``),
``IncrementalDeltaStartingScanner``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from snaplake.store.format.manifest_list import ManifestFileMeta, read_manifest_list
from snaplake.store.format.schema import TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import FileStoreScan, Split
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.store.read.split_read import read_splits

__all__ = [
    "CHANGELOG",
    "DELTA",
    "ROW_KIND",
    "AppendChangeRead",
    "ChangeSplitRead",
    "SnapshotFilesScan",
    "diff_tables",
    "empty_like",
    "same_files",
]

ROW_KIND = "_row_kind"
"""The column a change read adds: each row's kind, ``+I`` ``-U`` ``+U`` or ``-D``."""

DELTA = "delta"
"""The files a snapshot's commit added (its delta manifest list)."""

CHANGELOG = "changelog"
"""The changelog files a snapshot carries (its changelog manifest list)."""


class SnapshotFilesScan(FileStoreScan):
    """Plans the files one snapshot added (``DELTA``) or its changelog files (``CHANGELOG``).

    Args:
        source: ``DELTA`` or ``CHANGELOG``.
        **kwargs: As :class:`FileStoreScan` (``snapshot`` is the snapshot read).

    A delta list holds ADD entries (new files) and DELETE entries (files the
    commit removed); :meth:`plan` keeps the ADDs, as Paimon's delta scan does.
    A snapshot without a changelog manifest list plans no files.

    Source: Paimon ``ManifestsReader.read`` (``ScanMode.DELTA`` / ``CHANGELOG``).
    """

    def __init__(self, *, source: str, **kwargs: Any) -> None:
        if source not in (DELTA, CHANGELOG):
            raise ValueError(f"source must be {DELTA!r} or {CHANGELOG!r}, got {source!r}")
        super().__init__(**kwargs)
        self.source = source

    def manifest_metas(self) -> list[ManifestFileMeta]:
        """The snapshot's delta (or changelog) manifest list's entries."""
        snap = self.snapshot
        if snap is None:
            return []
        name = snap.delta_manifest_list if self.source == DELTA else snap.changelog_manifest_list
        if name is None:
            return []
        return list(read_manifest_list(self.file_io, self.paths.manifest_path(name)))


@dataclass(frozen=True, slots=True)
class ChangeSplitRead:
    """Picklable: read the files of one change split, each row with its ``_row_kind``.

    A table kind's reader (``FileStore.change_read``); holds only picklable configuration.

    Attributes:
        file_io: Storage of the table.
        schema: The read schema (files of other schemas are mapped by field id).
        schemas: The schema of every ``_SCHEMA_ID`` the splits' files carry.
        columns: Columns to return (then :data:`ROW_KIND`).
    """

    file_io: FileIO
    schema: TableSchema
    schemas: Mapping[int, TableSchema]
    columns: tuple[str, ...]

    def __call__(self, split: Split) -> Iterator[pa.Table]:
        """Yield the rows of ``split``'s files, unfiltered."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class AppendChangeRead(ChangeSplitRead):
    """The files of an append table's split as ``+I`` rows.

    Source: Paimon ``RawFileSplitRead`` of a streaming split (append rows are inserts).
    """

    def __call__(self, split: Split) -> Iterator[pa.Table]:
        """Yield the rows of ``split``'s files (no deletion vector applied), unfiltered.

        Raises:
            FileNotFoundError: a data file is missing.
        """
        evolution = SchemaEvolution(self.schema, self.schemas.__getitem__)
        plain = Split(
            partition=split.partition, partition_values=split.partition_values,
            bucket=split.bucket, total_buckets=split.total_buckets, files=split.files,
            paths=split.paths,
        )  # fmt: skip
        table = read_splits(
            self.file_io, [plain], schema=self.schema.arrow_schema, columns=self.columns,
            evolution=evolution,
        )  # fmt: skip
        kinds = pa.array(["+I"] * table.num_rows, type=pa.string())
        yield table.append_column(pa.field(ROW_KIND, pa.string(), nullable=False), kinds)


def diff_tables(
    before: pa.Table | None, after: pa.Table | None, *, keys: Sequence[str], columns: Sequence[str]
) -> Iterator[pa.Table]:
    """Rows of ``after`` new or changed against ``before`` (``+I``), rows gone (``-D``).

    With ``keys`` rows are matched by key (a merged primary-key view);
    without, as a multiset of whole rows (an append table). Yields
    ``columns`` then ``_row_kind``.

    Source: Paimon ``IncrementalDiffSplitRead.DiffMerger`` (keeping deletes).
    """

    def kinds(table: pa.Table, kind: str) -> pa.Table:
        t = table.select(list(columns))
        return t.append_column(ROW_KIND, pa.array([kind] * t.num_rows, type=pa.string()))

    if before is None or not before.num_rows:
        if after is not None and after.num_rows:
            yield kinds(after, "+I")
        return
    if after is None or not after.num_rows:
        yield kinds(before, "-D")
        return
    all_names = after.column_names
    a_rows = after.select(all_names).to_pylist()
    b_rows = before.select(all_names).to_pylist()
    if keys:
        b_by_key = {tuple(r[k] for k in keys): i for i, r in enumerate(b_rows)}
        take_a, seen = [], set()
        for i, r in enumerate(a_rows):
            key = tuple(r[k] for k in keys)
            j = b_by_key.get(key)
            if j is not None:
                seen.add(j)
            if j is None or b_rows[j] != r:
                take_a.append(i)
        take_b = [j for j in range(len(b_rows)) if j not in seen]
    else:
        counts = Counter(repr(r) for r in b_rows)
        take_a = []
        for i, r in enumerate(a_rows):
            k = repr(r)
            if counts[k] > 0:
                counts[k] -= 1
            else:
                take_a.append(i)
        take_b = []
        for j, r in enumerate(b_rows):
            k = repr(r)
            if counts[k] > 0:
                counts[k] -= 1
                take_b.append(j)
    if take_a:
        yield kinds(after.take(pa.array(take_a, type=pa.int64())), "+I")
    if take_b:
        yield kinds(before.take(pa.array(take_b, type=pa.int64())), "-D")


def same_files(a: Split, b: Split) -> bool:
    """Both sides hold the same data files and deletion vector files (no change)."""

    def names(s: Split) -> tuple[set[str], set[str]]:
        return {f.file_name for f in s.files}, {d.file_name for d in s.deletion_files}

    return names(a) == names(b)


def empty_like(split: Split | None) -> Split:
    """A split of ``split``'s (partition, bucket) without files (a diff side with no rows)."""
    assert split is not None
    return Split(
        partition=split.partition, partition_values=split.partition_values,
        bucket=split.bucket, total_buckets=split.total_buckets, files=(), paths=(),
    )  # fmt: skip
