"""The index files of a snapshot: its index manifest, filtered by type and partition.

Source: Paimon ``IndexFileHandler.scan`` / ``IndexManifestFile.read``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from snaplake.store.format.index_file import IndexManifestEntry, read_index_manifest
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.io.file_io import FileIO

__all__ = ["IndexStorage", "read_index_entries"]


class IndexStorage(Protocol):
    """The part of ``TableStorage`` an index scan needs (``TableStorage`` satisfies it)."""

    file_io: FileIO
    paths: PathFactory


def read_index_entries(
    table: IndexStorage,
    snapshot: Snapshot | None,
    *,
    index_type: str | None = None,
    partitions: Collection[bytes] | None = None,
) -> list[IndexManifestEntry]:
    """Return the index manifest entries of ``snapshot`` (all ADD: the full index state).

    Args:
        table: The table's storage (a ``TableStorage``).
        snapshot: The snapshot (``None``: no snapshot yet, so no entries).
        index_type: Keep only this index type (``HASH``, ``DELETION_VECTORS``);
            ``None`` keeps all.
        partitions: Keep only these partitions (BinaryRow bytes); ``None`` keeps all.

    Returns:
        The entries in file order; empty when the snapshot has no index manifest.

    Raises:
        FileNotFoundError: The index manifest is missing (expired under the reader).
        CorruptMetadataError: The index manifest is undecodable.
        UnsupportedFormatVersionError: A record's ``_VERSION`` is not 1.

    Storage: at most one read of ``manifest/<indexManifest>`` (cached process-wide).
    """
    if snapshot is None or not snapshot.index_manifest:
        return []
    entries = read_index_manifest(table.file_io, table.paths, snapshot.index_manifest)
    if index_type is not None:
        entries = [e for e in entries if e.index_file.index_type == index_type]
    if partitions is not None:
        wanted = set(partitions)
        entries = [e for e in entries if e.partition in wanted]
    return entries
