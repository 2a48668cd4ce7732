"""KeyValueFileStore: primary-key tables (an LSM tree per bucket, merged on read).

Source: Paimon ``KeyValueFileStore``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import pyarrow as pa

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage
from snaplake.compaction.job import CompactionJob
from snaplake.compaction.merge_tree_compact import MergeTreeCompactionPlanner
from snaplake.filestore.base import FileStore
from snaplake.mergetree.read import read_primary_key_batches, read_primary_key_splits
from snaplake.options import CoreOptions
from snaplake.store.format.primary_key import MergeEngine
from snaplake.store.format.schema import TableSchema
from snaplake.store.read.missing_files import MissingFileCheck
from snaplake.store.read.predicate import Predicate
from snaplake.store.read.scan import FileStoreScan, Split
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.write.kv_write import KeyValueTableWrite, restore_max_sequences

__all__ = ["KeyValueFileStore"]


class KeyValueFileStore(FileStore):
    """The key-value kind: upserting writers, merge-on-read, LSM compaction.

    Source: Paimon ``KeyValueFileStore``.
    """

    kind: ClassVar[str] = "primary-key"

    def new_write(self, commit_user: str) -> KeyValueTableWrite:
        """Return a :class:`~snaplake.write.kv_write.KeyValueTableWrite` in this store's schema.

        The writer restores each bucket's max sequence number from the latest
        snapshot at its first write (a missing manifest raises
        ``CorruptMetadataError`` naming it). A ``first-row`` table (unless
        ``write-only``) lifts its new level-0 files before the commit, as
        Paimon's readers skip level 0 of such tables.
        """
        table, schema = self.table, self.schema

        def restore() -> dict[tuple[bytes, int], int]:
            latest = table.snapshot_manager.latest_snapshot()
            if latest is None:
                return {}
            with MissingFileCheck(
                file_io=table.file_io, paths=table.paths,
                schema_manager=table.schema_manager, snapshot=latest,
            ).reading():  # fmt: skip
                return restore_max_sequences(
                    FileStoreScan(
                        file_io=table.file_io, paths=table.paths,
                        schema_manager=table.schema_manager, snapshot=latest,
                    )
                )  # fmt: skip

        compact_up = None
        opts = schema.core_options
        if opts.merge_engine == MergeEngine.FIRST_ROW and not opts.write_only:
            from snaplake.compaction.merge_tree_compact import compact_new_files

            def compact_up(messages: list[CommitMessage]) -> list[CommitMessage]:
                return compact_new_files(
                    file_io=table.file_io, paths=table.paths,
                    schema_manager=table.schema_manager,
                    snapshot_manager=table.snapshot_manager, schema=schema, messages=messages,
                )  # fmt: skip

        return KeyValueTableWrite(
            file_io=table.file_io, paths=table.paths, schema=schema,
            commit_user=commit_user, restore_sequences=restore, compact_up=compact_up,
        )  # fmt: skip

    def read(
        self,
        splits: Sequence[Split],
        *,
        read_schema: TableSchema,
        columns: Sequence[str] | None,
        predicates: Sequence[Predicate],
        limit: int | None,
        evolution: SchemaEvolution,
        schema_of: Callable[[int], TableSchema],
    ) -> pa.Table:
        """Merge the versions of each key (see :func:`read_primary_key_splits`)."""
        return read_primary_key_splits(
            self.file_io, splits, schema=read_schema, columns=columns,
            predicates=predicates, limit=limit, schema_of=schema_of,
        )  # fmt: skip

    def read_batches(
        self,
        splits: Sequence[Split],
        *,
        read_schema: TableSchema,
        columns: Sequence[str] | None,
        predicates: Sequence[Predicate],
        evolution: SchemaEvolution,
        schema_of: Callable[[int], TableSchema],
    ) -> Iterator[pa.RecordBatch]:
        """Yield the merged rows, bucket by bucket (see :func:`read_primary_key_batches`)."""
        tables = read_primary_key_batches(
            self.file_io, splits, schema=read_schema, columns=columns,
            predicates=predicates, schema_of=schema_of,
        )  # fmt: skip
        return (b for t in tables for b in t.to_batches())

    # compaction ------------------------------------------------------------
    def new_compaction(
        self,
        *,
        commit: FileStoreCommit,
        full: bool = False,
        partitions: Sequence[Mapping[str, Any]] | None = None,
        options: CoreOptions | None = None,
        max_files_per_bucket: int | None = None,
    ) -> CompactionJob:
        """LSM compaction (see :class:`MergeTreeCompactionPlanner`).

        ``max_files_per_bucket`` is validated only: a bucket's unit is one
        merge of overlapping sorted runs, never cut, so the plan is never capped.

        Raises:
            ValueError: an empty ``partitions`` list, or ``max_files_per_bucket < 2``.
        """
        if max_files_per_bucket is not None and max_files_per_bucket < 2:
            raise ValueError(f"max_files_per_bucket must be >= 2, got {max_files_per_bucket}")
        t = self.table
        planner = MergeTreeCompactionPlanner(
            file_io=t.file_io, paths=t.paths, schema_manager=t.schema_manager,
            snapshot_manager=t.snapshot_manager, full=full, partitions=partitions,
            options=options,
        )  # fmt: skip
        return CompactionJob(commit=commit, planner=planner)

    def inline_compaction(self, *, commit: FileStoreCommit) -> CompactionJob | None:
        """One LSM round of the buckets due, unless ``write-only`` (writers never compact)."""
        if self.schema.core_options.write_only:
            return None
        return self.new_compaction(commit=commit)
