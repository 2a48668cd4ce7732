"""TableChanges: incremental reads of a table (``Table.changes``, ``Table.plan_changes``).

A mixin ``Table`` inherits. A change read covers a range of snapshots,
inclusive at both ends (``changes(5, 9)`` = snapshots 5..9, as delta-rs
``load_cdf``); Paimon's ``incremental-between = 'a,b'`` is the half-open
``(a, b]``, i.e. ``changes(a + 1, b)``. Every row carries ``_row_kind``
(``+I`` ``-U`` ``+U`` ``-D``) and ``_snapshot_id`` after the table's columns.

Modes (Paimon's):

- ``delta``: the files each APPEND snapshot added (COMPACT and OVERWRITE
  snapshots give no rows, as Paimon's ``IncrementalDeltaStartingScanner``).
  Append rows are ``+I``; primary-key files are read without merging, each
  row with its own kind (Paimon's streaming splits).
- ``changelog``: the changelog files of each snapshot (producers ``input``,
  ``lookup``, ``full-compaction``); OVERWRITE snapshots give none.
- ``diff``: the difference between the merged views at ``start - 1`` and at
  ``end`` (Paimon's ``IncrementalDiffSplitRead`` keeping deletes): a key
  (append tables: a row) only at ``end`` or changed → ``+I``, only at
  ``start - 1`` → ``-D``; every row carries ``_snapshot_id = end``.
- ``auto``: ``changelog`` when the table has a changelog producer, else ``delta``.

Source: Paimon ``IncrementalDeltaStartingScanner``, ``IncrementalDiffStartingScanner``,
``IncrementalDiffSplitRead`` (``DiffMerger``), ``DeltaFollowUpScanner``,
``ChangelogFollowUpScanner``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from snaplake.change_plan import (
    AUTO,
    DIFF,
    MODES,
    SNAPSHOT_ID,
    ChangePlan,
    ChangeReadTask,
    ChangeSplit,
)
from snaplake.errors import InvalidOptionError, SnapshotNotFoundError, UnsupportedTableError
from snaplake.filestore import FileStore
from snaplake.options import Operation
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.snapshot import CommitKind, Snapshot
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.change_scan import (
    CHANGELOG,
    DELTA,
    ROW_KIND,
    SnapshotFilesScan,
    empty_like,
    same_files,
)
from snaplake.store.read.predicate import (
    Predicate,
    parse_filter,
    resolve_projection,
)
from snaplake.store.read.read_options import (
    READ_OPTION_KEYS,
    resolve_snapshot,
    select_by_options,
)
from snaplake.store.read.scan import Split
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.store.read.split_read import ReadSplitsTask, SplitsTask
from snaplake.store.snapshot_manager import SnapshotManager
from snaplake.store.tags import TagManager
from snaplake.table_scan import TableScan

__all__ = ["TableChanges"]


class TableChanges:
    """Incremental reads of one table (a mixin of ``Table``)."""

    file_io: FileIO
    paths: PathFactory
    schema_manager: SchemaManager
    snapshot_manager: SnapshotManager
    identifier: str

    if TYPE_CHECKING:  # provided by Table

        def schema(self) -> TableSchema:
            """The latest schema."""
            ...

        def file_store(self, schema: TableSchema | None = None) -> FileStore:
            """The FileStore of ``schema``."""
            ...

        def schema_evolution(self, read_schema: TableSchema) -> SchemaEvolution:
            """The mapping of the table's data files into ``read_schema``."""
            ...

    def plan_changes(
        self,
        start_snapshot: int,
        end_snapshot: int | None = None,
        *,
        mode: str = AUTO,
        columns: Sequence[str] | None = None,
        filter: Any = None,
    ) -> ChangePlan:
        """Plan the changes of snapshots ``start_snapshot..end_snapshot`` (both included).

        Args:
            start_snapshot: The first snapshot of the range.
            end_snapshot: The last one (``None`` = the latest now).
            mode: ``auto``, ``delta``, ``changelog`` or ``diff`` (see the module).
            columns: Table columns to return (``None`` = all); ``_row_kind``
                and ``_snapshot_id`` always follow.
            filter: As ``Table.to_arrow``; prunes files by their stats and is
                applied exactly to every change row.

        Storage: reads the range's snapshot files and their delta (or
        changelog) manifest lists and manifests; ``diff`` reads both ends'
        manifests. No data file is read.

        Raises:
            InvalidOptionError: an unknown ``mode`` (``key`` =
                ``incremental-between-scan-mode``), or ``end < start``.
            SnapshotNotFoundError: the table has no snapshot, ``start`` is after
                the latest, ``end`` was never written, or the range (``diff``:
                ``start - 1``) reaches an expired snapshot (the message names
                the earliest retained one).
            UnsupportedTableError: ``changelog`` on a table without a changelog
                producer; a table snaplake cannot read.
            SchemaMismatchError: an unknown column or filter column.
        """
        latest = self.schema()
        store = self.file_store(latest)
        store.check_supported(Operation.READ)
        opts = latest.core_options
        if mode not in MODES:
            raise InvalidOptionError(
                f"unknown change read mode {mode!r} for {self.identifier}; use one of "
                f"{', '.join(MODES)}", key="incremental-between-scan-mode", value=str(mode),
            )  # fmt: skip
        producer = store.changelog_producer(opts)
        if mode == AUTO:
            mode = CHANGELOG if producer is not None else DELTA
        if mode == CHANGELOG and producer is None:
            raise UnsupportedTableError(
                f"table {self.identifier} has no changelog producer, so it has no changelog "
                "files to read; read mode='delta' (or 'diff'), or set changelog-producer "
                "(input, lookup, full-compaction) for later commits",
                feature="changelog read without changelog-producer", operation="read",
                key="changelog-producer",
            )  # fmt: skip
        start, end = self._change_range(start_snapshot, end_snapshot, diff=mode == DIFF)
        predicates = parse_filter(filter)
        schema, names, needed = _change_schema(latest, columns, predicates)
        if mode == DIFF:
            sm = self.snapshot_manager
            before = sm.snapshot(start - 1) if start > 1 else None
            return self._plan_diff(
                store, latest, before, sm.snapshot(end), schema, names, predicates
            )
        splits: list[ChangeSplit] = []
        sm = self.snapshot_manager
        # Postpone-bucket tables: the pending files are the delta without a changelog
        # producer; with one, the changelog of the real buckets (DataTableStreamScan).
        real_buckets_only = store.reads_real_buckets_only and producer is not None
        for sid in range(start, end + 1):
            snap = sm.snapshot(sid)
            if mode == DELTA and snap.commit_kind != CommitKind.APPEND:
                continue  # COMPACT and OVERWRITE add no delta rows (Paimon)
            if mode == CHANGELOG and snap.commit_kind == CommitKind.OVERWRITE:
                continue
            scan = SnapshotFilesScan(
                source=mode, file_io=self.file_io, paths=self.paths,
                schema_manager=self.schema_manager, snapshot=snap, predicate=predicates,
                read_schema=latest, stats_filter=store.stats_filter(),
                only_real_buckets=real_buckets_only,
            )  # fmt: skip
            for split in scan.plan():
                splits.append(ChangeSplit(sid, str(snap.commit_kind), mode, split))
        ids = {f.schema_id for s in splits for f in s.split.files}
        read = store.change_read(
            read_schema=latest, columns=needed,
            schemas={i: self.schema_manager.schema(i) for i in ids},
        )  # fmt: skip
        task = ChangeReadTask(schema, tuple(names), tuple(needed), tuple(predicates), read)
        return ChangePlan(schema, splits, list(range(start, end + 1)), task, mode)

    def changes(
        self,
        start_snapshot: int,
        end_snapshot: int | None = None,
        *,
        mode: str = AUTO,
        columns: Sequence[str] | None = None,
        filter: Any = None,
    ) -> pa.RecordBatchReader:
        """Read the changes of snapshots ``start_snapshot..end_snapshot`` (both included).

        Arguments and errors as :meth:`plan_changes`; the reader yields the
        plan's splits in snapshot order (rows of one snapshot together).
        The reader implements ``__arrow_c_stream__`` (pyarrow, Polars, DuckDB
        read it directly). A file removed while reading because its snapshot
        expired meanwhile raises ``SnapshotNotFoundError`` from the reader
        (naming the earliest retained snapshot); another missing file
        ``FileNotFoundError``.
        """
        plan = self.plan_changes(
            start_snapshot, end_snapshot, mode=mode, columns=columns, filter=filter
        )
        first = plan.snapshot_ids[0] - (1 if plan.mode == DIFF else 0)
        return pa.RecordBatchReader.from_batches(plan.schema, self._expiry_checked(plan, first))

    def _expiry_checked(self, plan: ChangePlan, first: int) -> Iterator[pa.RecordBatch]:
        """``plan``'s batches; a missing file after snapshot ``first`` expired: typed."""
        try:
            yield from plan.to_reader()
        except FileNotFoundError as exc:
            earliest = self.snapshot_manager.earliest_snapshot_id()
            if earliest is None or earliest <= first:
                raise
            raise SnapshotNotFoundError(
                f"snapshot {first} of {self.identifier} expired while its changes were read "
                f"(a file of it is gone); the earliest retained snapshot is {earliest}: read "
                "again from there, or retain snapshots longer", snapshot_id=first,
            ) from exc  # fmt: skip

    def to_polars(self, **kwargs: Any) -> Any:
        """Read a snapshot (or, with read options, changes) into a Polars DataFrame.

        Arguments as ``Table.new_scan``; the rows go through the Arrow C stream.

        Raises:
            ImportError: polars is not installed (``pip install 'snaplake[polars]'``).
        """
        polars = _optional("polars", "to_polars")
        return polars.from_arrow(pa.table(self._scan(kwargs)))

    def to_duckdb(self, connection: Any, name: str, **kwargs: Any) -> Any:
        """Register a snapshot's rows as view ``name`` on a DuckDB ``connection``; return it.

        Arguments as ``Table.new_scan``. The rows are read once, when this is
        called, into an Arrow table DuckDB scans without a copy
        (``connection.register``).

        Raises:
            ImportError: duckdb is not installed (``pip install 'snaplake[duckdb]'``).
        """
        _optional("duckdb", "to_duckdb")
        return connection.register(name, pa.table(self._scan(kwargs)))

    def _scan(self, kwargs: Mapping[str, Any]) -> TableScan:
        """``Table.new_scan(**kwargs)``."""
        args: dict[str, Any] = dict.fromkeys(
            ("snapshot_id", "as_of", "partition_filter", "filter", "columns", "tag", "options")
        )
        unknown = set(kwargs) - set(args)
        if unknown:
            raise TypeError(f"unexpected scan arguments {sorted(unknown)}")
        return self._new_scan(**{**args, **kwargs})

    def _new_scan(
        self,
        *,
        snapshot_id: int | None,
        as_of: datetime | None,
        partition_filter: Mapping[str, Any] | None,
        filter: Any,
        columns: Sequence[str] | None,
        tag: str | None,
        options: Mapping[str, str] | None,
    ) -> TableScan:
        """``Table.new_scan``: the snapshot the arguments (or the read options) select.

        Explicit ``snapshot_id`` / ``as_of`` / ``tag`` win over read options set
        in the table; ``options`` (read-time, the keys of
        :data:`~snaplake.store.read.read_options.READ_OPTION_KEYS`) override the table's.

        Raises:
            ValueError: several of ``tag``, ``snapshot_id``, ``as_of``, or one
                of them with ``options``.
            InvalidOptionError: a key of ``options`` that is no read option;
                see :func:`~snaplake.store.read.read_options.select_by_options`.
        """
        explicit = tag is not None or snapshot_id is not None or as_of is not None
        if options:
            unknown = sorted(set(options) - READ_OPTION_KEYS)
            if unknown:
                raise InvalidOptionError(
                    f"read-time options {unknown} are not read options; pass one of "
                    f"{', '.join(sorted(READ_OPTION_KEYS))}", key=unknown[0],
                    value=options[unknown[0]],
                )  # fmt: skip
            if explicit:
                raise ValueError("pass tag, snapshot_id or as_of, or read options, not both")
        selection = None
        if not explicit:
            latest = self.schema()
            read_options = {**latest.options, **(options or {})}
            tags = TagManager(self.file_io, self.paths)
            selection = select_by_options(
                self.snapshot_manager, tags, self.identifier, read_options
            )
        if selection is None:
            if tag is not None:
                if snapshot_id is not None or as_of is not None:
                    raise ValueError("pass tag, snapshot_id or as_of, not several")
                snap: Snapshot | None = TagManager(self.file_io, self.paths).get(tag)
            else:
                snap = resolve_snapshot(self.snapshot_manager, self.identifier, snapshot_id, as_of)
            return TableScan(
                self, snap, partition_filter=partition_filter, filter=filter, columns=columns,
                time_travel=explicit, tag=tag,
            )  # fmt: skip
        if selection.changes is None and selection.diff is None and not selection.empty:
            return TableScan(
                self, selection.snapshot, partition_filter=partition_filter, filter=filter,
                columns=columns, time_travel=True, tag=selection.tag,
                created_since=selection.created_since,
            )  # fmt: skip
        preds = [*parse_filter(filter), *parse_filter(dict(partition_filter or {}))]
        if selection.changes is not None:
            start, end, mode = selection.changes
            plan = self.plan_changes(start, end, mode=mode, columns=columns, filter=preds)
        elif selection.diff is not None:
            plan = self._plan_snapshot_diff(*selection.diff, columns, preds)
        else:
            plan = self._empty_changes(columns, preds)
        return TableScan(
            self, None, partition_filter=None, filter=preds, columns=columns, changes=plan
        )

    def _empty_changes(self, columns: Sequence[str] | None, predicates: Any) -> ChangePlan:
        """A change plan without rows (Paimon's ``EmptyResultStartingScanner``)."""
        latest = self.schema()
        self.file_store(latest).check_supported(Operation.READ)
        schema, names, needed = _change_schema(latest, columns, parse_filter(predicates))
        read = self.file_store(latest).change_read(read_schema=latest, columns=needed, schemas={})
        task = ChangeReadTask(schema, tuple(names), tuple(needed), (), read)
        return ChangePlan(schema, [], [], task, DELTA)

    def _change_range(self, start: int, end: int | None, *, diff: bool) -> tuple[int, int]:
        """Check ``start..end`` against the retained snapshots; return it with ``end`` resolved."""
        sm = self.snapshot_manager
        latest = sm.latest_snapshot_id()
        if latest is None:
            raise SnapshotNotFoundError(
                f"table {self.identifier} has no snapshot yet; write to it first",
                snapshot_id=start,
            )
        if start > latest:
            raise SnapshotNotFoundError(
                f"start snapshot {start} of {self.identifier} is after the latest snapshot "
                f"{latest}; read from a snapshot <= {latest}", snapshot_id=start,
            )  # fmt: skip
        end = latest if end is None else end
        if end < start:
            raise InvalidOptionError(
                f"end snapshot {end} is before start snapshot {start}; the range is "
                "inclusive at both ends", key="incremental-between", value=f"{start},{end}",
            )  # fmt: skip
        if end > latest:
            raise SnapshotNotFoundError(
                f"end snapshot {end} of {self.identifier} was never written; the latest "
                f"is {latest}", snapshot_id=end,
            )  # fmt: skip
        earliest = sm.earliest_snapshot_id() or 1
        first = start - 1 if diff and start > 1 else start
        if first < earliest:
            what = "the snapshot before the diff's start" if first < start else "start"
            raise SnapshotNotFoundError(
                f"snapshot {first} ({what}) of {self.identifier} has expired; the earliest "
                f"retained snapshot is {earliest}; read from {earliest + (1 if diff else 0)} "
                "or later", snapshot_id=first,
            )  # fmt: skip
        return start, end

    def _plan_snapshot_diff(
        self, before: Snapshot, after: Snapshot, columns: Sequence[str] | None, predicates: Any
    ) -> ChangePlan:
        """The ``diff`` of two snapshots given whole (two tags'; they may have expired)."""
        latest = self.schema()
        store = self.file_store(latest)
        store.check_supported(Operation.READ)
        preds = parse_filter(predicates)
        schema, names, _ = _change_schema(latest, columns, preds)
        return self._plan_diff(store, latest, before, after, schema, names, preds)

    def _plan_diff(
        self,
        store: FileStore,
        latest: TableSchema,
        before_snap: Snapshot | None,
        end_snap: Snapshot,
        schema: pa.Schema,
        names: list[str],
        predicates: Sequence[Predicate],
    ) -> ChangePlan:
        """Pair the live files of ``before_snap`` and ``end_snap`` by (partition, bucket)."""
        end = end_snap.id
        start = before_snap.id + 1 if before_snap is not None else 1
        after = {(s.partition, s.bucket): s for s in self._live_splits(store, end_snap, predicates)}
        before = {
            (s.partition, s.bucket): s for s in self._live_splits(store, before_snap, predicates)
        }
        splits: list[ChangeSplit] = []
        merged: list[Split] = []
        for key in sorted(set(after) | set(before)):
            a, b = after.get(key), before.get(key)
            if a is not None and b is not None and same_files(a, b):
                continue
            side = a if a is not None else empty_like(b)
            merged.append(side)
            if b is not None:
                merged.append(b)
            splits.append(ChangeSplit(end, str(end_snap.commit_kind), DIFF, side, b))
        columns = list(latest.arrow_schema.names)
        ids = {f.schema_id for s in merged for f in s.files}
        schemas = {i: self.schema_manager.schema(i) for i in ids}
        task = store.split_read_task(
            merged, read_schema=latest, columns=columns, schema_of=schemas.__getitem__
        )
        if not isinstance(task, SplitsTask):  # append files without vectors
            task = ReadSplitsTask(self.file_io, latest, (), tuple(columns), schemas)
        task = replace(task, splits=())
        read = store.change_read(read_schema=latest, columns=columns, schemas=schemas)
        plan_task = ChangeReadTask(
            schema, tuple(names), tuple(columns), tuple(predicates), read,
            merged=task, keys=store.key_fields,
        )  # fmt: skip
        return ChangePlan(schema, splits, list(range(start, end + 1)), plan_task, DIFF)

    def _live_splits(
        self, store: FileStore, snap: Snapshot | None, predicates: Sequence[Predicate]
    ) -> list[Split]:
        if snap is None:
            return []
        return store.new_scan(
            snap, predicate=predicates, read_schema=self.schema(), batch_read=True
        ).plan()


def _optional(module: str, method: str) -> Any:
    """Import ``module`` for ``Table.<method>``; ImportError naming the extra if missing."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"Table.{method} needs {module}: pip install 'snaplake[{module}]'"
        ) from exc


def _change_schema(
    latest: TableSchema, columns: Sequence[str] | None, predicates: Sequence[Predicate]
) -> tuple[pa.Schema, list[str], list[str]]:
    """``(schema, names, needed)`` of a change read: its Arrow schema, projection, columns read.

    Raises:
        SchemaMismatchError: an unknown column or filter column.
    """
    arrow = latest.arrow_schema
    names, needed = resolve_projection(arrow, columns, predicates)
    needed = [n for n in arrow.names if n in set(needed)]
    schema = pa.schema(
        [arrow.field(n) for n in names]
        + [pa.field(ROW_KIND, pa.string(), nullable=False),
           pa.field(SNAPSHOT_ID, pa.int64(), nullable=False)]
    )  # fmt: skip
    return schema, names, needed
