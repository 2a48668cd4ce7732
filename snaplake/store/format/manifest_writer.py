"""Write one manifest file and describe it as a ManifestFileMeta (for a manifest list).

Shared by the commit (a commit's delta manifest) and manifest merge (merged
manifests), so both compute ``_PARTITION_STATS`` and the bucket/level bounds
the same way.

Source: Paimon ``ManifestFile.write`` / ``ManifestFileMeta`` (partition stats
with null counts per entry, min/max bucket and level).
"""

from __future__ import annotations

from collections.abc import Sequence

from snaplake.store.format.data_file import SimpleStats
from snaplake.store.format.manifest import FileKind, ManifestEntry, write_manifest_file
from snaplake.store.format.manifest_list import ManifestFileMeta
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.stats import compare_partition_stats
from snaplake.store.io.file_io import FileIO

__all__ = ["write_manifest"]


def write_manifest(
    file_io: FileIO,
    paths: PathFactory,
    entries: Sequence[ManifestEntry],
    *,
    schema: TableSchema,
    schema_id: int | None = None,
) -> ManifestFileMeta:
    """Write ``entries`` as a new ``manifest-<uuid>-<n>`` and return its list row.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory (names the new file).
        entries: At least one entry, in order.
        schema: Gives the partition types and ``manifest.compression``.
        schema_id: ``_SCHEMA_ID`` to record (default ``schema.id``).

    Returns:
        File name, size in bytes, ADD/DELETE counts, partition stats (null
        counts per entry, as Java and pypaimon count them), bucket and level bounds.

    Raises:
        ValueError: ``entries`` is empty.
        StorageError: the write failed.

    Storage: creates one manifest file (``write_new``).
    """
    if not entries:
        raise ValueError("a manifest needs at least one entry")
    name = paths.new_manifest_file_name()
    size = write_manifest_file(
        file_io,
        paths.manifest_path(name),
        entries,
        compression=schema.core_options.manifest_compression,
    )
    parts = compare_partition_stats([e.partition for e in entries], schema.partition_types)
    return ManifestFileMeta(
        file_name=name,
        file_size_bytes=size,
        num_added_files=sum(1 for e in entries if e.kind == FileKind.ADD),
        num_deleted_files=sum(1 for e in entries if e.kind == FileKind.DELETE),
        partition_stats=SimpleStats(
            min_values=parts.min_values,
            max_values=parts.max_values,
            null_counts=parts.null_counts,
        ),
        schema_id=schema.id if schema_id is None else schema_id,
        min_bucket=min(e.bucket for e in entries),
        max_bucket=max(e.bucket for e in entries),
        min_level=min(e.file.level for e in entries),
        max_level=max(e.file.level for e in entries),
    )
