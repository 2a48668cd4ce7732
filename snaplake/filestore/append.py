"""AppendOnlyFileStore: tables without primary keys (rows appended, files read on their own).

Source: Paimon ``AppendOnlyFileStore``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import pyarrow as pa

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.compaction.append_compact import AppendCompactionPlanner
from snaplake.compaction.job import CompactionJob
from snaplake.filestore.base import FileStore
from snaplake.options import CoreOptions
from snaplake.store.format.schema import TableSchema
from snaplake.store.read.predicate import Predicate
from snaplake.store.read.scan import Split
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.store.read.split_read import read_splits, read_splits_batches
from snaplake.write.table_write import TableWrite

__all__ = ["AppendOnlyFileStore"]


class AppendOnlyFileStore(FileStore):
    """The append kind: a TableWrite per writer, files read independently, small-file compaction.

    Source: Paimon ``AppendOnlyFileStore``.
    """

    kind: ClassVar[str] = "append"

    def new_write(self, commit_user: str) -> TableWrite:
        """Return a :class:`~snaplake.write.table_write.TableWrite` in this store's schema."""
        return TableWrite(
            file_io=self.file_io, paths=self.paths, schema=self.schema, commit_user=commit_user
        )

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
        """Read every file of ``splits`` on its own (see :func:`read_splits`)."""
        return read_splits(
            self.file_io, splits, schema=read_schema.arrow_schema, columns=columns,
            predicates=predicates, limit=limit, evolution=evolution,
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
        """Yield every file's rows, one split at a time (see :func:`read_splits_batches`)."""
        return read_splits_batches(
            self.file_io, splits, schema=read_schema.arrow_schema, columns=columns,
            predicates=predicates, evolution=evolution,
        )  # fmt: skip

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
        """Small-file compaction (see :class:`AppendCompactionPlanner`).

        Raises:
            ValueError: an empty ``partitions`` list, or ``max_files_per_bucket < 2``.
        """
        t = self.table
        planner = AppendCompactionPlanner(
            file_io=t.file_io, paths=t.paths, schema_manager=t.schema_manager,
            snapshot_manager=t.snapshot_manager, full=full, partitions=partitions,
            options=options, max_files_per_bucket=max_files_per_bucket,
        )  # fmt: skip
        return CompactionJob(commit=commit, planner=planner)
