"""The FileStore contract: what every table kind provides.

Source: Paimon ``FileStore`` / ``AbstractFileStore`` (one object per table
kind, created from the schema by ``FileStoreTableFactory``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

from snaplake.commit.conflict import ConflictRule
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.result import CommitResult
from snaplake.commit.retry import RetryPolicy
from snaplake.options import CoreOptions, Operation
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.predicate import Predicate
from snaplake.store.read.scan import FileStoreScan, Split
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.store.read.stats_filter import StatsFilter
from snaplake.store.support import check_supported
from snaplake.store.table_storage import TableStorage

if TYPE_CHECKING:
    from snaplake.compaction.job import CompactionJob
    from snaplake.compaction.merge_tree_plan import SortedRunStats
    from snaplake.write.table_write import TableWrite

__all__ = ["DeletePreview", "FileStore"]


@dataclass(frozen=True, slots=True)
class DeletePreview:
    """What a delete by filter would remove (``snaplake delete --dry-run``).

    Attributes:
        snapshot_id: The snapshot planned on (``None``: an empty table).
        rows: Rows that would go.
        files: Data files (names) holding them, sorted.
    """

    snapshot_id: int | None
    rows: int
    files: tuple[str, ...]


class FileStore(ABC):
    """What differs between table kinds, for one table at one schema.

    Args:
        table: The table's storage, paths, managers and identifier.
        schema: The schema the store works in (the table's latest when it was made).

    Source: Paimon ``FileStore``.
    """

    kind: ClassVar[str]
    """``"append"`` or ``"primary-key"`` (log and metric labels, CLI output)."""

    def __init__(self, table: TableStorage, schema: TableSchema) -> None:
        self.table = table
        self.schema = schema

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.table.identifier!r}, schema={self.schema.id})"

    # options ---------------------------------------------------------------
    def check_supported(self, operation: Operation) -> None:
        """Refuse ``operation`` on this store's table when snaplake cannot do it.

        The one door (:func:`snaplake.store.support.check_supported`) with this
        store's schema: the kind's rules (a primary-key table's merge-tree
        rules and the registry's ``primary-key`` refusals), BINARY partition
        keys, the option registry's refusals and the data file format.
        Call it once per operation; nothing is read or written.

        Raises:
            UnsupportedTableError: snaplake cannot do ``operation`` on this table.
            SchemaMismatchError: a primary-key table breaks Paimon's rules.
            InvalidOptionError: options Paimon rejects (an unknown merge engine, ...).
        """
        check_supported(self.schema, operation)

    @property
    def file_io(self) -> FileIO:
        """Storage of the table."""
        return self.table.file_io

    @property
    def paths(self) -> PathFactory:
        """The table's PathFactory."""
        return self.table.paths

    # write -----------------------------------------------------------------
    @abstractmethod
    def new_write(
        self, commit_user: str, *, restored: Mapping[tuple[bytes, int], int] | None = None
    ) -> TableWrite:
        """Return the writer of this kind for ``commit_user`` (see ``Table.new_write``).

        Args:
            commit_user: The user that will commit the writer's messages.
            restored: The writer state to continue from, as
                :meth:`restore_write_state` returned it (read once on a Spark
                driver for all its tasks); ``None`` = the writer restores it
                itself from the latest snapshot when it needs it.

        Raises:
            UnsupportedTableError: the table uses something snaplake cannot write.
        """

    @property
    @abstractmethod
    def bucket_mode(self) -> str:
        """How rows find their bucket (``Table.bucket_mode``).

        ``"fixed"``, ``"dynamic"``, ``"cross-partition"``, ``"postpone"`` or ``"unaware"``.

        Source: Paimon ``FileStore.bucketMode`` (``HASH_FIXED``, ``HASH_DYNAMIC``,
        ``KEY_DYNAMIC``, ``POSTPONE_MODE``, ``BUCKET_UNAWARE``).
        """

    takes_row_kinds: ClassVar[bool]
    """The writer takes row kinds other than ``+I`` (retractions: ``-U``, ``+U``, ``-D``)."""

    writes_by_bucket: ClassVar[bool]
    """One writer must write all rows of a (partition, bucket): a distributed write
    (Spark) routes the rows by bucket first and restores the writer state once on
    the driver (:meth:`restore_write_state`)."""

    @abstractmethod
    def restore_write_state(self) -> dict[tuple[bytes, int], int]:
        """The state a new writer continues from: ``{(partition, bucket): value}``.

        For key-value tables each bucket's largest sequence number in the
        latest snapshot; append writers keep none (``{}``).

        Raises:
            CorruptMetadataError: a manifest of the latest snapshot is missing.

        Source: Paimon ``AbstractFileStoreWrite.scanExistingFileMetas`` (restore).
        """

    # commit ----------------------------------------------------------------
    @abstractmethod
    def conflict_rules(self) -> tuple[ConflictRule, ...]:
        """The checks a commit to this kind of table must pass beyond "deleted files are live".

        Fixed for the table's life: the kind never changes after creation
        (primary keys cannot be altered), so the rules of the schema a
        conflict is checked against are these.

        Source: Paimon ``ConflictDetection`` (``PrimaryKeyConflictDetection``
        for the key-value kind).
        """

    def new_commit(
        self,
        commit_user: str,
        *,
        retry_policy: RetryPolicy | None = None,
        after_commit: Callable[[CommitResult], None] | None = None,
    ) -> FileStoreCommit:
        """Return a FileStoreCommit of ``commit_user`` with this kind's :meth:`conflict_rules`.

        Args:
            commit_user: Who commits (stable across restarts for exactly-once).
            retry_policy: Backoff of lost races; ``None`` = the table's ``commit.*`` options.
            after_commit: Called after each successful, non-duplicate commit.

        Source: Paimon ``AbstractFileStore.newCommit``.
        """
        return FileStoreCommit(
            self.table, commit_user=commit_user, retry_policy=retry_policy,
            after_commit=after_commit, conflict_rules=self.conflict_rules(),
            index_by_file_name=self.index_by_file_name,
        )  # fmt: skip

    @property
    def index_by_file_name(self) -> frozenset[str]:
        """Index types whose index manifest entries are combined by file name (none here).

        Source: Paimon ``IndexManifestFileHandler`` (``GlobalCombiner`` vs ``BucketedCombiner``).
        """
        return frozenset()

    # read ------------------------------------------------------------------
    @abstractmethod
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
        """Read ``splits`` into one Arrow table in ``read_schema``, exactly filtered."""

    @abstractmethod
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
        """Yield the rows of ``splits`` as record batches (bounded memory)."""

    @abstractmethod
    def split_read_task(
        self,
        splits: Sequence[Split],
        *,
        read_schema: TableSchema,
        columns: Sequence[str],
        schema_of: Callable[[int], TableSchema],
    ) -> Callable[[Sequence[int]], Iterator[pa.Table]] | None:
        """A picklable task an engine's executors run over whole splits, or ``None``.

        ``None`` says each data file reads on its own (an engine may read the
        files with its own reader). Otherwise the task, called with indices
        into ``splits``, yields the rows of those splits in ``read_schema``
        (``columns`` in this order), unfiltered; tasks over disjoint indices
        yield disjoint rows, and all of them together the whole read.
        """

    # scan ------------------------------------------------------------------
    def new_scan(
        self,
        snapshot: Snapshot | None,
        *,
        partition_filter: Mapping[str, Any] | Sequence[Predicate] | None = None,
        predicate: Sequence[Predicate] = (),
        read_schema: TableSchema | None = None,
        batch_read: bool = False,
        options: CoreOptions | None = None,
    ) -> FileStoreScan:
        """Plan the live files of ``snapshot`` that may hold rows matching the filters.

        Arguments as :class:`~snaplake.store.read.scan.FileStoreScan`; the
        files are pruned by the statistics this kind's rows allow
        (:meth:`stats_filter`). With ``batch_read`` (a table read, not a
        writer's or a maintenance job's scan) the splits carry their deletion
        vector files and this kind's batch-read rules apply
        (:meth:`batch_scan_skip_level0`, :meth:`raw_convertible_splits`)
        under ``options`` (``None``: this store's schema's; a time-travel read
        passes the latest schema's, as Paimon's time travel keeps the table's
        current options).

        Raises:
            SchemaMismatchError: a ``partition_filter`` column is not a partition key.

        Source: Paimon ``FileStore.newScan`` (``AppendOnlyFileStore`` /
        ``KeyValueFileStore``: the same scan with the kind's stats filter).
        """
        skip_level0 = raw_convertible = False
        if batch_read:
            opts = self.schema.core_options if options is None else options
            skip_level0 = self.batch_scan_skip_level0(opts)
            raw_convertible = self.raw_convertible_splits(opts)
        return FileStoreScan(
            file_io=self.file_io, paths=self.paths, schema_manager=self.table.schema_manager,
            snapshot=snapshot, partition_filter=partition_filter, predicate=predicate,
            read_schema=read_schema, stats_filter=self.stats_filter(),
            only_real_buckets=self.reads_real_buckets_only, deletion_vectors=batch_read,
            skip_level0=skip_level0, raw_convertible=raw_convertible,
        )  # fmt: skip

    def batch_scan_skip_level0(self, options: CoreOptions) -> bool:
        """Batch reads leave out level-0 files (``False``: this kind has no levels).

        Source: Paimon ``CoreOptions.batchScanSkipLevel0``.
        """
        return False

    def raw_convertible_splits(self, options: CoreOptions) -> bool:
        """Batch reads read a split file by file when its files allow (``False`` here).

        Source: Paimon ``MergeTreeSplitGenerator`` (``rawConvertible``).
        """
        return False

    reads_real_buckets_only: ClassVar[bool] = False
    """Scans skip negative buckets (postpone-bucket tables' pending files, bucket -2)."""

    @abstractmethod
    def stats_filter(self) -> StatsFilter:
        """Which predicates prune this kind's files in a scan, and on which of a file's stats.

        Source: Paimon ``AppendOnlyFileStoreScan`` / ``KeyValueFileStoreScan``
        (``filterByStats``).
        """

    # changes ---------------------------------------------------------------
    def changelog_producer(self, options: CoreOptions) -> str | None:
        """The producer of this kind's changelog files under ``options`` (``None``: none).

        Append tables have none. Source: Paimon ``CoreOptions.changelogProducer``.
        """
        return None

    @abstractmethod
    def change_read(
        self,
        *,
        read_schema: TableSchema,
        columns: Sequence[str],
        schemas: Mapping[int, TableSchema],
    ) -> Callable[[Split], Iterator[pa.Table]]:
        """A picklable reader of one change split: its files' rows and their ``_row_kind``.

        The task yields ``columns`` (in ``read_schema``) then ``_row_kind``,
        unfiltered; ``schemas`` holds every schema the files were written in.

        Source: Paimon's streaming split read (``createNoMergeReader``).
        """

    # kind facts ------------------------------------------------------------
    @property
    @abstractmethod
    def key_fields(self) -> tuple[str, ...]:
        """The key columns of this kind's data files, empty when rows have no key.

        Key-value tables: the trimmed primary key (the primary-key columns
        that are not partition keys; Paimon's ``KeyValueFileStore`` key type).
        """

    @abstractmethod
    def target_file_size(self, options: CoreOptions) -> int:
        """``target-file-size`` in bytes under ``options``: as set, else this kind's default.

        Source: Paimon ``CoreOptions.targetFileSize(hasPrimaryKey)`` (128 MB
        for key-value tables, 256 MB for append tables).
        """

    @abstractmethod
    def count_sorted_runs(
        self, snapshot: Snapshot | None, *, options: CoreOptions
    ) -> SortedRunStats | None:
        """Sorted runs per bucket of ``snapshot``, ``None`` when this kind's files form none.

        Storage: reads every manifest of the snapshot (key-value tables).
        """

    # delete ----------------------------------------------------------------
    @abstractmethod
    def preview_delete(self, predicates: Sequence[Predicate]) -> DeletePreview:
        """What :meth:`delete` would remove from the latest snapshot; nothing is written.

        Raises:
            UnsupportedTableError: this table cannot delete by filter.
            SchemaMismatchError: an unknown filter column or a literal of the wrong type.
        """

    @abstractmethod
    def delete(self, predicates: Sequence[Predicate], *, commit: FileStoreCommit) -> CommitResult:
        """Delete the rows of the latest snapshot that ``predicates`` (AND) match; commit.

        Raises:
            UnsupportedTableError: this table cannot delete by filter (nothing written).
            SchemaMismatchError: an unknown filter column or a literal of the wrong
                type (nothing written).
            CommitConflictError: concurrent commits kept conflicting.
        """

    # compaction ------------------------------------------------------------
    @abstractmethod
    def new_compaction(
        self,
        *,
        commit: FileStoreCommit,
        full: bool = False,
        partitions: Sequence[Mapping[str, Any]] | None = None,
        options: CoreOptions | None = None,
        max_files_per_bucket: int | None = None,
    ) -> CompactionJob:
        """Return this kind's compaction of the table's latest snapshot (nothing is read yet).

        Args:
            commit: The maintenance committer the job publishes with.
            full: A full compaction (append: every file after a bucket's
                leading large ones; key-value: every bucket into one
                top-level sorted run).
            partitions: Partition specs (``{key: value}``, a subset of the
                keys is fine) to compact; ``None`` = every partition.
            options: Effective options (the daemon's overrides); ``None`` =
                the table's latest schema's.
            max_files_per_bucket: Input files per (partition, bucket) one plan
                takes at most (the plan says when it cut some off); ``None``
                = no cap. A key-value bucket's merge is never cut.

        Raises:
            ValueError: an empty ``partitions`` list, or ``max_files_per_bucket < 2``.
        """

    def inline_compaction(self, *, commit: FileStoreCommit) -> CompactionJob | None:
        """The compaction a writer's process runs after its commit in inline mode.

        ``snaplake.maintenance.inline = true`` runs it before the due merge and
        expiry (``None``: this kind compacts only on request or in the daemon).
        """
        return None
