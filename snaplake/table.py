"""Table: the facade users hold — write, commit, scan, read, snapshots, maintenance.

No logic of its own: it wires the store, commit and compaction layers for one
table directory.

Source: Paimon ``FileStoreTable`` / pypaimon ``FileStoreTable`` (the
``new_write``/``new_commit``/``new_scan`` vocabulary).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.result import CommitResult
from snaplake.compaction.table_tags import TableTags
from snaplake.errors import TableNotFoundError
from snaplake.filestore import FileStore, file_store_for
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.predicate import parse_filter
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.store.snapshot_manager import SnapshotManager
from snaplake.store.tags import TagManager
from snaplake.table_changes import TableChanges
from snaplake.table_scan import TableScan, resolve_snapshot
from snaplake.write.batch_write import ArrowData, new_commit_user, write_and_commit
from snaplake.write.table_write import RowKinds, TableWrite

if TYPE_CHECKING:
    import pandas as pd

    from snaplake.compaction.check import CheckResult
    from snaplake.compaction.expire import ExpireResult
    from snaplake.compaction.manifest_merge import MergeResult
    from snaplake.compaction.orphan_clean import OrphanCleanResult
    from snaplake.compaction.partition_expire import PartitionExpireResult
    from snaplake.compaction.result import CompactResult
    from snaplake.store.rollback import RollbackResult

__all__ = ["Table", "TableScan"]


class Table(TableTags, TableChanges):
    """One Paimon table directory (its tag methods: :class:`TableTags`).

    Args:
        file_io: Storage holding the table.
        root: Path of the table directory.
        identifier: ``database.table`` (for messages and metrics labels).

    Opening a table and reading its metadata (schema, snapshots, tags) always
    works; reads, writes, commits and maintenance first call
    :func:`snaplake.store.support.check_supported` and raise
    ``UnsupportedTableError`` for a table snaplake cannot handle yet (a
    primary-key table, a refused option), before any file is touched.

    Raises:
        TableNotFoundError: the directory has no schema file.
    """

    def __init__(self, *, file_io: FileIO, root: str, identifier: str) -> None:
        self.file_io = file_io
        self.root = root
        self.identifier = identifier
        self.paths = PathFactory(root)
        self.schema_manager = SchemaManager(file_io, self.paths)
        self.snapshot_manager = SnapshotManager(file_io, self.paths)
        self._evolutions: dict[int, SchemaEvolution] = {}
        self._stores: dict[int, FileStore] = {}
        if self.schema_manager.latest() is None:
            raise TableNotFoundError(
                f"table {identifier} does not exist at {root} (no schema file); "
                "create it with catalog.create_table", identifier=identifier,
            )  # fmt: skip

    def __repr__(self) -> str:
        return f"Table({self.identifier!r}, root={self.root!r})"

    # schema -------------------------------------------------------------
    def schema_evolution(self, read_schema: TableSchema) -> SchemaEvolution:
        """The (cached) mapping of this table's data files into ``read_schema``, by field id."""
        found = self._evolutions.get(read_schema.id)
        if found is None:
            found = SchemaEvolution(read_schema, self.schema_manager.schema)
            self._evolutions[read_schema.id] = found
        return found

    def file_store(self, schema: TableSchema | None = None) -> FileStore:
        """The FileStore of ``schema`` (default: the latest), cached per id (``file_store_for``)."""
        schema = self.schema() if schema is None else schema
        found = self._stores.get(schema.id)
        if found is None or found.schema is not schema:
            found = file_store_for(self, schema)
            self._stores[schema.id] = found
        return found

    def schema(self) -> TableSchema:
        """Return the latest table schema."""
        schema = self.schema_manager.latest()
        if schema is None:
            raise TableNotFoundError(
                f"table {self.identifier} was dropped", identifier=self.identifier
            )
        return schema

    @property
    def schema_id(self) -> int:
        """Id of the latest schema (``schema/schema-<id>``)."""
        return self.schema().id

    def schemas(self) -> dict[int, TableSchema]:
        """Return every schema of the table by id, oldest first.

        Storage: lists ``schema/`` and reads the schema files not read before.
        """
        return {i: self.schema_manager.schema(i) for i in self.schema_manager.list_schema_ids()}

    @property
    def arrow_schema(self) -> pa.Schema:
        """Arrow schema of the latest table schema."""
        return self.schema().arrow_schema

    @property
    def partition_keys(self) -> list[str]:
        """Partition columns."""
        return list(self.schema().partition_keys)

    @property
    def primary_keys(self) -> list[str]:
        """Primary-key columns (empty for an append table)."""
        return list(self.schema().primary_keys)

    @property
    def bucket_mode(self) -> str:
        """``fixed``, ``dynamic``, ``cross-partition``, ``postpone`` or ``unaware``."""
        return self.file_store().bucket_mode

    @property
    def options(self) -> dict[str, str]:
        """Table options as stored in the schema."""
        return dict(self.schema().options)

    # write ---------------------------------------------------------------
    def new_write(self, *, commit_user: str) -> TableWrite:
        """Return a TableWrite writing data files with the latest schema.

        On a primary-key table it is a
        :class:`~snaplake.write.kv_write.KeyValueTableWrite`:
        ``write_arrow(rows, row_kinds=...)`` upserts (and retracts),
        ``delete_arrow(keys)`` deletes.

        Args:
            commit_user: The user that will commit the messages.

        The primary-key writer reads the latest snapshot's manifests at its
        first write (to continue the sequence numbers); a missing one raises
        ``CorruptMetadataError`` naming it from that ``write_arrow``.

        Raises:
            UnsupportedTableError: a primary-key table snaplake cannot write.
        """
        return self.file_store().new_write(commit_user)

    def write(
        self,
        data: ArrowData,
        *,
        row_kinds: RowKinds | None = None,
        commit_user: str | None = None,
        commit_identifier: int | None = None,
        overwrite: Mapping[str, Any] | bool | None = None,
    ) -> CommitResult:
        """Write ``data`` and commit it as one snapshot: ``new_write``, write, prepare, commit.

        Any failure before the commit point deletes the data files written so
        far; a commit that surely failed deletes them too
        (``CommitStateUnknownError`` keeps them: the snapshot may exist).
        Exactly-once needs a stable ``commit_user`` and an increasing
        ``commit_identifier``: replaying the same pair commits nothing
        (``was_duplicate``) and deletes the replay's files.

        Args:
            data: Rows whose columns match the table by name (any order): a
                ``pa.Table``, ``pa.RecordBatch``, ``pa.RecordBatchReader``, or
                a list or iterator of tables and batches, written in order.
            row_kinds: Primary-key tables: one kind per row of ``data``
                (``'+I' '-U' '+U' '-D'`` or 0..3); ``None`` = upserts (``+I``).
            commit_user: Recorded in the snapshot; default a fresh unique
                user per call (``write-<uuid>``).
            commit_identifier: Increasing per ``commit_user``; needs a
                ``commit_user`` (default: a one-off commit, never a duplicate).
            overwrite: ``None`` appends; a ``{partition_key: value}`` mapping
                replaces the matching partitions (``{}`` = the whole table);
                ``True`` replaces the partitions the data touches.

        Returns:
            The commit result.

        Raises:
            ValueError: ``commit_identifier`` without ``commit_user``.
            TypeError: ``data`` is none of the accepted types.
            SchemaMismatchError: the data does not fit the table, or lies
                outside a static ``overwrite`` spec; no file is left behind.
            UnsupportedTableError: a table snaplake cannot write.
            CommitError: the commit failed (see ``FileStoreCommit.commit``).

        Storage: writes data files and one commit (manifests, manifest
        lists, snapshot); deletes the data files again on a failure.

        Source: delta-rs ``write_deltalake``, pyiceberg ``Table.append``.
        """
        if commit_identifier is not None and commit_user is None:
            raise ValueError("commit_identifier needs a stable commit_user to deduplicate by")
        user = commit_user or new_commit_user()
        schema = self.schema()  # one read: the writer and the committer agree on it
        commit = self._new_commit(schema, user)
        return write_and_commit(
            self.file_store(schema).new_write(user), commit, data, row_kinds=row_kinds,
            commit_identifier=commit_identifier, overwrite=overwrite,
        )  # fmt: skip

    def delete(self, filter: Any, *, commit_user: str | None = None) -> CommitResult:
        """Delete the latest snapshot's rows that ``filter`` (as :meth:`new_scan`) matches.

        Append tables need ``deletion-vectors.enabled``: the rows are marked in
        deletion vectors (an OVERWRITE-kind snapshot, planned again when a
        concurrent compaction conflicts). Primary-key tables get ``-D`` rows for
        the matching keys. ``commit_user`` as :meth:`write`.

        Raises:
            ValueError: an empty filter.
            UnsupportedTableError: an append table without deletion vectors.
            SchemaMismatchError: an unknown filter column (nothing is written).
            CommitConflictError: concurrent commits kept conflicting.

        Storage: see ``FileStore.delete`` (vector files, or level-0 files, and one commit).
        """
        predicates = parse_filter(filter)
        if not predicates:
            raise ValueError("delete needs a filter; write(..., overwrite={}) empties a table")
        schema = self.schema()
        commit = self._new_commit(schema, commit_user or new_commit_user())
        return self.file_store(schema).delete(predicates, commit=commit)

    def new_commit(self, *, commit_user: str) -> FileStoreCommit:
        """Return a FileStoreCommit for ``commit_user``; keep it for later commits (cheaper).

        With the table option ``snaplake.maintenance.inline = true`` each
        successful commit is followed, in this process, by the due manifest
        merge and snapshot expiry (failures are logged, never raised), unless
        Paimon's ``write-only = true`` says writers never maintain the table.

        Args:
            commit_user: Stable across restarts for exactly-once streaming.

        Raises:
            UnsupportedTableError: snaplake cannot commit to this table (its
                latest options; :meth:`FileStoreCommit.check_supported`). The
                committer's commits in that schema do not check again.
        """
        return self._new_commit(self.schema(), commit_user)

    def _new_commit(self, schema: TableSchema, commit_user: str) -> FileStoreCommit:
        """:meth:`new_commit` with the latest schema already read (``schema``)."""
        after_commit = None
        opts = schema.core_options
        if opts.maintenance_inline and not opts.write_only:  # write-only: Paimon's "no maintenance"
            from snaplake.compaction.inline import run_inline_maintenance

            def after_commit(_result: CommitResult) -> None:
                compaction = self.file_store().inline_compaction(commit=self._maintenance_commit())
                run_inline_maintenance(self, compaction=compaction)

        committer = self.file_store(schema).new_commit(commit_user, after_commit=after_commit)
        committer.check_supported(schema)  # the latest options, once: its commits skip them
        return committer

    # snapshots -----------------------------------------------------------
    def latest_snapshot(self) -> Snapshot | None:
        """Return the newest snapshot, ``None`` for an empty table."""
        return self.snapshot_manager.latest_snapshot()

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """Return snapshot ``snapshot_id``.

        Raises:
            SnapshotNotFoundError: never written or expired.
        """
        return self.snapshot_manager.snapshot(snapshot_id)

    def snapshots(self) -> list[Snapshot]:
        """Return every retained snapshot, oldest first."""
        return list(self.snapshot_manager.snapshots())

    def _resolve_snapshot(self, snapshot_id: int | None, as_of: datetime | None) -> Snapshot | None:
        return resolve_snapshot(self.snapshot_manager, self.identifier, snapshot_id, as_of)

    # read ----------------------------------------------------------------
    def new_scan(
        self,
        *,
        snapshot_id: int | None = None,
        as_of: datetime | None = None,
        partition_filter: Mapping[str, Any] | None = None,
        filter: Any = None,
        columns: Sequence[str] | None = None,
        tag: str | None = None,
    ) -> TableScan:
        """Plan a read of one snapshot.

        The latest snapshot reads in the latest schema (columns added since
        its commit read as NULL); time travel (``snapshot_id``, ``as_of``,
        ``tag``) reads in the schema the snapshot was committed with. Data
        files written under other schemas are mapped by field id.

        Args:
            snapshot_id: Read this snapshot (``None`` = latest).
            as_of: Read the newest snapshot committed at or before this
                timezone-aware time.
            partition_filter: ``{partition_key: value}`` equalities.
            filter: Row predicates: ``("col", op, value)``, a list of them
                (AND), or ``{col: value}``; ops ``= != < <= > >= in not in
                is null``. Used for manifest/file pruning and applied exactly.
            columns: Columns to read (``None`` = all).
            tag: Read the snapshot tagged with this name (``tag/tag-<name>``);
                works after the snapshot itself expired.

        Raises:
            SnapshotNotFoundError: the snapshot was never written or expired.
            TagNotFoundError: no tag of that name.
            ValueError: both ``snapshot_id`` and ``as_of``, or a naive ``as_of``.
        """
        if tag is not None:
            if snapshot_id is not None or as_of is not None:
                raise ValueError("pass tag, snapshot_id or as_of, not several")
            snap: Snapshot | None = TagManager(self.file_io, self.paths).get(tag)
        else:
            snap = self._resolve_snapshot(snapshot_id, as_of)
        return TableScan(
            self, snap, partition_filter=partition_filter, filter=filter, columns=columns,
            time_travel=tag is not None or snapshot_id is not None or as_of is not None, tag=tag,
        )  # fmt: skip

    def to_arrow(
        self,
        *,
        snapshot_id: int | None = None,
        as_of: datetime | None = None,
        partition_filter: Mapping[str, Any] | None = None,
        filter: Any = None,
        columns: Sequence[str] | None = None,
        limit: int | None = None,
        tag: str | None = None,
    ) -> pa.Table:
        """Read a snapshot into an Arrow table; arguments as :meth:`new_scan`.

        Raises:
            SnapshotNotFoundError: the snapshot was never written or expired.
        """
        return self.new_scan(
            snapshot_id=snapshot_id, as_of=as_of, partition_filter=partition_filter,
            filter=filter, columns=columns, tag=tag,
        ).to_arrow(limit=limit)  # fmt: skip

    def to_pandas(self, **kwargs: Any) -> pd.DataFrame:
        """Read a snapshot into a pandas DataFrame; arguments as :meth:`to_arrow`.

        Raises:
            ImportError: pandas is not installed (``pip install 'snaplake[pandas]'``).
        """
        try:
            import pandas  # noqa: F401  # pyarrow converts through it
        except ImportError as exc:
            raise ImportError(
                "Table.to_pandas needs pandas: pip install 'snaplake[pandas]'"
            ) from exc
        return self.to_arrow(**kwargs).to_pandas()

    def to_batches(self, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        """Yield a snapshot's rows as record batches; arguments as :meth:`new_scan`."""
        return self.new_scan(**kwargs).to_batches()

    # maintenance (compaction layer) ------
    def merge_manifests(self, *, full: bool = False) -> MergeResult:
        """Merge the latest snapshot's small manifests if due (a COMPACT snapshot).

        Args:
            full: Force a full compaction that applies every DELETE entry.

        Returns:
            What was merged; ``snapshot_id`` is ``None`` when nothing was due.

        Raises:
            CorruptMetadataError: a manifest is missing or undecodable.
            CommitRetriesExhaustedError: writers kept winning; run again later.

        Storage:
            See :meth:`snaplake.compaction.ManifestFileMerger.execute`.
        """
        from snaplake.compaction.manifest_merge import ManifestFileMerger

        return ManifestFileMerger(commit=self._maintenance_commit()).execute(full=full)

    def expire_snapshots(self, *, dry_run: bool = False) -> ExpireResult:
        """Expire snapshots by the table's retention options and delete their files.

        Args:
            dry_run: Only plan; delete nothing.

        Returns:
            The expired snapshot ids and the deleted (or deletable) files.

        Raises:
            CorruptMetadataError: metadata needed for the plan is missing or
                undecodable; nothing was deleted.

        Storage:
            See :meth:`snaplake.compaction.ExpireSnapshots.execute`.
        """
        from snaplake.compaction.expire import ExpireSnapshots

        expire = ExpireSnapshots(self)
        return expire.plan() if dry_run else expire.execute()

    def expire_partitions(
        self, *, dry_run: bool = False, now: datetime | None = None
    ) -> PartitionExpireResult:
        """Drop expired partitions at aware ``now`` (see ``PartitionExpire.execute``, ``.plan``)."""
        from snaplake.compaction.partition_expire import PartitionExpire

        expire = PartitionExpire(self, commit=self._maintenance_commit())
        return expire.plan(now) if dry_run else expire.execute(now)

    def remove_orphan_files(
        self,
        *,
        older_than: timedelta | datetime = timedelta(days=1),
        dry_run: bool = True,
    ) -> OrphanCleanResult:
        """Find (and unless ``dry_run``, delete) files no snapshot or tag references.

        Args:
            older_than: Grace period, or an aware cutoff instant; only files
                modified before it are touched. Protects commits in flight.
            dry_run: Only report (the default).

        Raises:
            ValueError: a negative age, a naive or future ``older_than``.
            CorruptMetadataError: a retained snapshot's metadata is missing.

        Storage:
            See :meth:`snaplake.compaction.OrphanFilesClean.execute`.
        """
        from snaplake.compaction.orphan_clean import OrphanFilesClean

        clean = OrphanFilesClean(
            file_io=self.file_io, paths=self.paths, snapshot_manager=self.snapshot_manager,
            older_than=older_than,
        )  # fmt: skip
        return clean.plan() if dry_run else clean.execute()

    def check(self, *, snapshot_id: int | None = None) -> CheckResult:
        """Verify every live data file of a snapshot against its manifest entry.

        Reads each file in full and compares its size, row count, value stats
        (and on primary-key tables key stats, key range, sequence range and
        delete count) with what the manifest records; readers trust those, so
        a lying entry loses or duplicates rows. Repairs nothing.

        Args:
            snapshot_id: The snapshot to check (default: the latest).

        Returns:
            Counts and every mismatch (``result.ok`` when there is none).

        Raises:
            SnapshotNotFoundError: ``snapshot_id`` is not retained.
            CorruptMetadataError: a manifest or schema of the snapshot is undecodable.
            StorageError: the storage failed.

        Storage:
            Reads only; see :func:`snaplake.compaction.check.check_snapshot_files`.
        """
        from snaplake.compaction.check import check_snapshot_files

        snap = self.latest_snapshot() if snapshot_id is None else self.snapshot(snapshot_id)
        return check_snapshot_files(
            file_io=self.file_io, paths=self.paths, schema_manager=self.schema_manager,
            snapshot=snap, key_fields=self.file_store().key_fields,
        )  # fmt: skip

    def compact(
        self, *, full: bool = False, partition_filter: Mapping[str, Any] | None = None
    ) -> CompactResult:
        """Compact data files and commit the result as a COMPACT snapshot.

        Append tables: rewrite runs of small files into target-size files.
        Primary-key tables: one round of LSM compaction, per bucket where
        Paimon's universal compaction picks something (sorted runs over
        ``num-sorted-run.compaction-trigger``, size amplification or ratio,
        ``full-compaction.delta-commits``), merged by the merge engine.

        Args:
            full: Primary-key tables: compact every bucket into one top-level
                sorted run (deletes dropped). Append tables: rewrite every file
                of a bucket after its leading large ones (Paimon's full
                compaction), not only runs of small files.
            partition_filter: ``{partition_key: value}`` to compact only those
                partitions (``None`` = all).

        Raises:
            CommitConflictError: a concurrent commit deleted an input, after
                re-planning up to three times; the outputs were deleted,
                nothing is lost; run again.

        Storage:
            See :meth:`snaplake.compaction.CompactionJob.execute`.
        """
        specs = [partition_filter] if partition_filter is not None else None
        job = self.file_store().new_compaction(
            commit=self._maintenance_commit(), full=full, partitions=specs
        )
        return job.execute()

    def rollback_to(self, target: int | str) -> RollbackResult:
        """Make snapshot id ``target`` (or the tag named ``target``) the latest again.

        Deletes every newer snapshot and tag. Stop writers first.

        Raises:
            SnapshotNotFoundError: the id is not retained.
            TagNotFoundError: no such tag.

        Storage:
            See :func:`snaplake.store.rollback.rollback_to`.
        """
        from snaplake.store.rollback import rollback_to

        return rollback_to(
            file_io=self.file_io, paths=self.paths, snapshot_manager=self.snapshot_manager,
            target=target,
        )  # fmt: skip

    def set_consumer(self, consumer_id: str, *, next_snapshot: int) -> None:
        """Record that reader ``consumer_id`` reads ``next_snapshot`` next (pins it against expiry).

        Raises:
            ValueError: invalid id or snapshot number.

        Storage:
            Overwrites ``consumer/consumer-<id>``.
        """
        from snaplake.store.consumers import ConsumerManager

        ConsumerManager(self.file_io, self.paths).set_consumer(
            consumer_id, next_snapshot=next_snapshot
        )

    def consumers(self) -> dict[str, int]:
        """Return ``{consumer_id: nextSnapshot}`` of every consumer."""
        from snaplake.store.consumers import ConsumerManager

        return ConsumerManager(self.file_io, self.paths).consumers()

    def _maintenance_commit(self) -> FileStoreCommit:
        from snaplake.compaction.maintenance import maintenance_committer

        return maintenance_committer(self)
