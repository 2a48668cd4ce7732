"""OverwriteFiles: an ``OVERWRITE`` snapshot replacing partitions, or the whole table.

The replaced files are recomputed against each snapshot the commit tries to
publish on (a file another writer added meanwhile to an overwritten partition
is replaced too). Without new files the commit drops the matching partitions
(``{}``: truncates the table).

Source: Paimon ``FileStoreCommitImpl.overwrite`` (static and dynamic
partition overwrite, ``dynamic-partition-overwrite``); pyiceberg
``_OverwriteFiles``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, ClassVar

from snaplake.commit.producer import CommitContext, CommitRequest, SnapshotProducer
from snaplake.errors import CommitConflictError, SchemaMismatchError
from snaplake.store.format.binary_row import decode_binary_row
from snaplake.store.format.index_file import HASH_INDEX, IndexManifestEntry
from snaplake.store.format.manifest import ManifestEntry
from snaplake.store.format.partition import canonical_partition
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import CommitKind, Snapshot
from snaplake.store.read.index_scan import read_index_entries
from snaplake.store.read.scan import FileStoreScan

__all__ = ["DropPartitions", "OverwriteFiles"]


class _OverwriteKind(SnapshotProducer):
    """An ``OVERWRITE`` snapshot: published even without new files, with no changelog.

    Its messages' changelog files are deleted, as Paimon commits no changelog
    with an overwrite.
    """

    default_kind: ClassVar[CommitKind] = CommitKind.OVERWRITE
    keeps_changelog: ClassVar[bool] = False
    publishes_when_empty: ClassVar[bool] = True


class OverwriteFiles(_OverwriteKind):
    """New files replacing the live files of some partitions, or of the whole table.

    Args:
        context: As :class:`~snaplake.commit.producer.SnapshotProducer`.
        request: As :class:`~snaplake.commit.producer.SnapshotProducer`.
        overwrite: A mapping = static overwrite of the partitions matching
            that (possibly partial) spec (``{}`` = the whole table); every new
            file must lie in it. ``True`` = dynamic partition overwrite of the
            partitions the new files touch (the whole table when the table
            option ``dynamic-partition-overwrite`` is ``false``, as in Paimon).

    An overwrite commits no changelog: the messages' changelog files are
    deleted (as in Paimon).

    Source: Paimon ``FileStoreCommitImpl.overwrite``.
    """

    def __init__(
        self,
        context: CommitContext,
        request: CommitRequest,
        *,
        overwrite: Mapping[str, Any] | bool,
    ) -> None:
        super().__init__(context, request)
        self.overwrite = overwrite

    def publishes_empty(self) -> bool:
        """False for a dynamic partition overwrite: no new file touches a partition, so none goes.

        Paimon's ``FileStoreCommitImpl.overwrite`` skips the OVERWRITE snapshot
        (``skipOverwrite``) when a dynamic partition overwrite of a partitioned
        table has no new files; a static or whole-table overwrite still
        publishes (it empties what it names).
        """
        schema = self.schema
        return not (
            self.overwrite is True
            and bool(schema.partition_keys)
            and schema.core_options.dynamic_partition_overwrite
        )

    def replaced_entries(
        self, latest: Snapshot | None, adds: Sequence[ManifestEntry]
    ) -> list[ManifestEntry]:
        """DELETE entries for every live file of ``latest`` the overwrite replaces.

        Raises:
            SchemaMismatchError: the spec names a column that is not a
                partition key, or a new file lies outside the spec.

        Storage: reads the manifests of the overwritten partitions of ``latest``.
        """
        schema, overwrite = self.schema, self.overwrite
        scan_filter: Mapping[str, Any] | None = None
        if isinstance(overwrite, Mapping):
            scan_filter = overwrite
            _check_in_spec(overwrite, adds, schema)
        if latest is None:
            return []
        ctx = self.context
        scan = FileStoreScan(
            file_io=ctx.table.file_io,
            paths=ctx.table.paths,
            schema_manager=ctx.table.schema_manager,
            snapshot=latest,
            partition_filter=scan_filter,
        )
        live = scan.plan_entries()
        dynamic = schema.core_options.dynamic_partition_overwrite  # Paimon's default: true
        if overwrite is True and schema.partition_keys and dynamic:
            types = schema.partition_types  # by value: writers encode some values differently
            touched = {canonical_partition(e.partition, types) for e in adds}
            live = [e for e in live if canonical_partition(e.partition, types) in touched]
        return [e.as_delete() for e in live]

    def replaced_index_entries(
        self, latest: Snapshot | None, adds: Sequence[ManifestEntry]
    ) -> list[IndexManifestEntry]:
        """DELETE entries for every index file of ``latest`` in the overwritten partitions.

        Every index type (HASH, DELETION_VECTORS, global indexes), as Paimon
        drops them; the partitions are those :meth:`replaced_entries` replaces
        (the spec's, the touched ones of a dynamic overwrite, or all). The
        commit's own index ADDs are combined after these DELETEs, per type
        (:func:`~snaplake.store.format.index_file.combine_index_entries`).

        One exception, for messages Paimon never makes: a HASH file a message
        names in ``DataIncrement.kept_index_files`` stays. Such a message
        comes from a writer that restored the index before the overwrite
        (``new_write`` then ``commit(..., overwrite=...)``, no
        ``ignore_previous_files``): it wrote known keys into that bucket
        without a new HASH file, and dropping the old one would leave them in
        no HASH file (a later writer could put such a key into a second
        bucket). Its other hashes only pin keys that are gone to the bucket,
        as a HASH file may. The commit refuses if that file is no longer the
        bucket's live one (``check_hash_replacements``).

        Storage: reads the index manifest of ``latest``.

        Source: Paimon ``OverwriteChangesProvider.buildResult``.
        """
        entries = read_index_entries(self.context.table, latest)
        if not entries:
            return []
        schema, overwrite = self.schema, self.overwrite
        types = schema.partition_types
        if isinstance(overwrite, Mapping) and overwrite:
            index = {k: i for i, k in enumerate(schema.partition_keys)}
            entries = [
                e
                for e in entries
                if all(
                    decode_binary_row(e.partition, types)[index[k]] == v
                    for k, v in overwrite.items()
                )
            ]
        elif (
            overwrite is True
            and schema.partition_keys
            and schema.core_options.dynamic_partition_overwrite
        ):
            touched = {canonical_partition(e.partition, types) for e in adds}
            entries = [e for e in entries if canonical_partition(e.partition, types) in touched]
        kept = {
            (canonical_partition(m.partition, types), m.bucket, f.file_name)
            for m in self.messages
            for f in m.data_increment.kept_index_files
            if f.index_type == HASH_INDEX
        }
        return [
            e.as_delete()
            for e in entries
            if not (
                e.index_file.index_type == HASH_INDEX
                and (canonical_partition(e.partition, types), e.bucket, e.index_file.file_name)
                in kept
            )
        ]


def _check_in_spec(
    spec: Mapping[str, Any], adds: Sequence[ManifestEntry], schema: TableSchema
) -> None:
    """Require ``spec`` to name partition keys and every added file to lie in it."""
    index = {k: i for i, k in enumerate(schema.partition_keys)}
    for key in spec:
        if key not in index:
            raise SchemaMismatchError(
                f"overwrite key {key!r} is not a partition key {list(schema.partition_keys)}"
            )
    for e in adds:
        values = decode_binary_row(e.partition, schema.partition_types)
        for key, value in spec.items():
            if values[index[key]] != value:
                raise SchemaMismatchError(
                    f"file {e.file.file_name} has {key}={values[index[key]]!r}, outside "
                    f"the overwritten partition {dict(spec)}; filter the data first"
                )


class DropPartitions(_OverwriteKind):
    """An ``OVERWRITE`` snapshot deleting every file of some partitions (no new files).

    Args:
        context: As :class:`~snaplake.commit.producer.SnapshotProducer`.
        request: As :class:`~snaplake.commit.producer.SnapshotProducer` (no messages).
        partitions: The partitions to drop, as canonical BinaryRows
            (:func:`~snaplake.store.format.partition.canonical_partition`).
        expected_files: The data file names the caller planned to drop, or
            ``None`` (drop whatever is live). When given, every attempt
            requires the live files of ``partitions`` to be exactly these: a
            file another writer added meanwhile (or a compaction replaced) is
            a :class:`~snaplake.errors.CommitConflictError`, so the caller
            plans again instead of deleting a file it never looked at.

    The partitions' index files of every type (HASH, deletion vectors) are
    deleted too, as an overwrite does.

    Source: Paimon ``FileStoreCommitImpl.dropPartitions`` (an overwrite with
    no new files); the expected-files check is snaplake's.
    """

    def __init__(
        self,
        context: CommitContext,
        request: CommitRequest,
        *,
        partitions: Collection[bytes],
        expected_files: Collection[str] | None = None,
    ) -> None:
        super().__init__(context, request)
        self.partitions = frozenset(partitions)
        self.expected_files = None if expected_files is None else frozenset(expected_files)

    def replaced_entries(
        self, latest: Snapshot | None, adds: Sequence[ManifestEntry]
    ) -> list[ManifestEntry]:
        """DELETE entries for every live file of ``latest`` in the dropped partitions.

        Raises:
            CommitConflictError: ``expected_files`` was given and the live
                files of the partitions differ from it.

        Storage: reads the manifests of ``latest``.
        """
        ctx = self.context
        types = self.schema.partition_types
        scan = FileStoreScan(
            file_io=ctx.table.file_io,
            paths=ctx.table.paths,
            schema_manager=ctx.table.schema_manager,
            snapshot=latest,
        )
        live = [
            e
            for e in scan.plan_entries()
            if canonical_partition(e.partition, types) in self.partitions
        ]
        if self.expected_files is not None:
            names = {e.file.file_name for e in live}
            if names != self.expected_files:
                new = sorted(names - self.expected_files)
                gone = sorted(self.expected_files - names)
                raise CommitConflictError(
                    f"the partitions to drop from {ctx.table.identifier} changed since they "
                    f"were planned (new files {new[:5]}, gone {gone[:5]}); plan again",
                    paths=[*new, *gone],
                    conflicting_snapshot_ids=[latest.id] if latest is not None else [],
                )
        return [e.as_delete() for e in live]

    def replaced_index_entries(
        self, latest: Snapshot | None, adds: Sequence[ManifestEntry]
    ) -> list[IndexManifestEntry]:
        """DELETE entries for every index file of ``latest`` in the dropped partitions.

        Storage: reads the index manifest of ``latest``.
        """
        types = self.schema.partition_types
        return [
            e.as_delete()
            for e in read_index_entries(self.context.table, latest)
            if canonical_partition(e.partition, types) in self.partitions
        ]
