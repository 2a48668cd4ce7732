"""AppendOnlyFileStore: tables without primary keys (rows appended, files read on their own).

Source: Paimon ``AppendOnlyFileStore``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import pyarrow as pa

from snaplake.commit.conflict import ConflictRule
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.result import CommitResult
from snaplake.compaction.append_compact import AppendCompactionPlanner
from snaplake.compaction.job import CompactionJob
from snaplake.errors import UnsupportedTableError
from snaplake.filestore.base import DeletePreview, FileStore
from snaplake.options import CoreOptions, Operation
from snaplake.store.format.index_file import DELETION_VECTORS_INDEX
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.read.change_scan import AppendChangeRead
from snaplake.store.read.predicate import Predicate
from snaplake.store.read.scan import Split
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.store.read.split_read import ReadSplitsTask, read_splits, read_splits_batches
from snaplake.store.read.stats_filter import ValueStatsFilter
from snaplake.write.append_delete import AppendDelete, commit_append_delete, plan_append_delete
from snaplake.write.append_write import AppendOnlyTableWrite

__all__ = ["AppendOnlyFileStore"]


class AppendOnlyFileStore(FileStore):
    """The append kind: an append writer, files read independently, small-file compaction.

    Source: Paimon ``AppendOnlyFileStore``.
    """

    kind: ClassVar[str] = "append"

    def new_write(
        self, commit_user: str, *, restored: Mapping[tuple[bytes, int], int] | None = None
    ) -> AppendOnlyTableWrite:
        """Return an :class:`~snaplake.write.append_write.AppendOnlyTableWrite` (this schema).

        ``restored`` is ignored: append writers number rows from the clock.
        """
        return AppendOnlyTableWrite(
            file_io=self.file_io, paths=self.paths, schema=self.schema, commit_user=commit_user
        )

    @property
    def bucket_mode(self) -> str:
        """``"unaware"`` (``bucket = -1``) or ``"fixed"``.

        Source: Paimon ``AppendOnlyFileStore.bucketMode``.
        """
        return "unaware" if self.schema.core_options.bucket == -1 else "fixed"

    @property
    def index_by_file_name(self) -> frozenset[str]:
        """DELETION_VECTORS on bucket-unaware tables: a bucket holds many vector files.

        Source: Paimon ``IndexManifestFileHandler`` (``GlobalCombiner`` for ``BUCKET_UNAWARE``).
        """
        return frozenset({DELETION_VECTORS_INDEX} if self.bucket_mode == "unaware" else ())

    takes_row_kinds: ClassVar[bool] = False
    writes_by_bucket: ClassVar[bool] = False

    def restore_write_state(self) -> dict[tuple[bytes, int], int]:
        """Nothing to restore: an append writer keeps no state across snapshots (``{}``)."""
        return {}

    def conflict_rules(self) -> tuple[ConflictRule, ...]:
        """None beyond "deleted files are live": appended files never overlap by key."""
        return ()

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

    def split_read_task(
        self,
        splits: Sequence[Split],
        *,
        read_schema: TableSchema,
        columns: Sequence[str],
        schema_of: Callable[[int], TableSchema],
    ) -> ReadSplitsTask | None:
        """``None`` (each file reads on its own), or a :class:`ReadSplitsTask` for vectors.

        The task when some split carries deletion vectors (an engine's own
        reader would return their deleted rows).

        Reads the schema of every ``_SCHEMA_ID`` in ``splits`` now (the task carries them).
        """
        if not any(s.deletion_files for s in splits):
            return None
        ids = {f.schema_id for s in splits for f in s.files}
        return ReadSplitsTask(
            file_io=self.file_io, schema=read_schema, splits=tuple(splits),
            columns=tuple(columns), schemas={i: schema_of(i) for i in ids},
        )  # fmt: skip

    # scan ------------------------------------------------------------------
    def stats_filter(self) -> ValueStatsFilter:
        """Prune by a file's value stats, on any predicate (see :class:`ValueStatsFilter`).

        Source: Paimon ``AppendOnlyFileStoreScan``.
        """
        return ValueStatsFilter()

    # changes ---------------------------------------------------------------
    def change_read(
        self,
        *,
        read_schema: TableSchema,
        columns: Sequence[str],
        schemas: Mapping[int, TableSchema],
    ) -> AppendChangeRead:
        """Every row of a split's files as ``+I`` (see :class:`AppendChangeRead`)."""
        return AppendChangeRead(self.file_io, read_schema, dict(schemas), tuple(columns))

    # kind facts ------------------------------------------------------------
    @property
    def key_fields(self) -> tuple[str, ...]:
        """Empty: the rows of an append table have no key."""
        return ()

    def target_file_size(self, options: CoreOptions) -> int:
        """``target-file-size`` as set, else 256 MB."""
        return options.target_file_size(has_primary_key=False)

    def count_sorted_runs(self, snapshot: Snapshot | None, *, options: CoreOptions) -> None:
        """``None``: append files form no sorted runs."""
        return None

    # delete ----------------------------------------------------------------
    def plan_delete(self, predicates: Sequence[Predicate]) -> AppendDelete:
        """Plan a delete on the latest snapshot (see :func:`plan_append_delete`); nothing written.

        Raises:
            UnsupportedTableError: ``deletion-vectors.enabled`` is not set.
            SchemaMismatchError: an unknown filter column or a literal of the wrong type.
        """
        self.check_supported(Operation.WRITE)
        if not self.schema.core_options.deletion_vectors_enabled:
            raise UnsupportedTableError(
                f"delete(filter) on append table {self.table.identifier} needs deletion "
                "vectors: set deletion-vectors.enabled = true on the table, or replace the "
                "rows with write(..., overwrite=...)",
                feature="delete by filter without deletion vectors",
                operation=Operation.WRITE.value,
                key="deletion-vectors.enabled",
            )
        latest = self.table.snapshot_manager.latest_snapshot()
        return plan_append_delete(
            self.table, self.new_scan(latest), self.new_scan(latest, predicate=predicates),
            schema=self.schema, predicates=predicates, bucketed=self.bucket_mode != "unaware",
        )  # fmt: skip

    def preview_delete(self, predicates: Sequence[Predicate]) -> DeletePreview:
        """Rows and files a delete would mark (reads the candidate files; writes nothing).

        Raises:
            UnsupportedTableError: ``deletion-vectors.enabled`` is not set.
            SchemaMismatchError: an unknown filter column or a literal of the wrong type.
        """
        plan = self.plan_delete(predicates)
        return DeletePreview(plan.snapshot_id, plan.rows, plan.files)

    def delete(self, predicates: Sequence[Predicate], *, commit: FileStoreCommit) -> CommitResult:
        """Mark the matching rows in deletion vectors; an OVERWRITE-kind commit.

        Planned again when a concurrent compaction or delete conflicts (see
        :func:`commit_append_delete`).

        Raises:
            UnsupportedTableError: ``deletion-vectors.enabled`` is not set (nothing written).
            SchemaMismatchError: an unknown filter column or a literal of the wrong type.
            CommitConflictError: concurrent commits kept conflicting.

        Storage: DELETION_VECTORS index files and one commit; no data file.

        Source: Paimon Spark ``DeleteFromPaimonTableCommand`` (deletion vectors).
        """
        return commit_append_delete(lambda: self.plan_delete(predicates), commit)

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
        planner = AppendCompactionPlanner(
            self.table, full=full, partitions=partitions, options=options,
            max_files_per_bucket=max_files_per_bucket,
        )  # fmt: skip
        return CompactionJob(commit=commit, planner=planner)
