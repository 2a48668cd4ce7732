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

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from snaplake.store.format.manifest_list import ManifestFileMeta, read_manifest_list
from snaplake.store.format.schema import TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import FileStoreScan, Split
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.store.read.split_read import read_splits

__all__ = ["CHANGELOG", "DELTA", "ROW_KIND", "AppendChangeRead", "SnapshotFilesScan"]

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
class AppendChangeRead:
    """Picklable: read the files of one split of an append table as ``+I`` rows.

    Attributes:
        file_io: Storage of the table.
        schema: The read schema (files of other schemas are mapped by field id).
        schemas: The schema of every ``_SCHEMA_ID`` the splits' files carry.
        columns: Columns to return (then :data:`ROW_KIND`).

    Source: Paimon ``RawFileSplitRead`` of a streaming split (append rows are inserts).
    """

    file_io: FileIO
    schema: TableSchema
    schemas: Mapping[int, TableSchema]
    columns: tuple[str, ...]

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
