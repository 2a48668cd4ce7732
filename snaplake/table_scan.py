"""TableScan: a planned read of one snapshot of a table (splits, then rows).

Built by :meth:`snaplake.table.Table.new_scan`; the table's FileStore plans
(its scan file selection) and reads (its split reader).

Source: Paimon ``TableScan`` / ``TableRead`` (``ReadBuilder``), pypaimon's
``TableScan``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow as pa

from snaplake.errors import InvalidOptionError, SnapshotNotFoundError, UnsupportedTableError
from snaplake.filestore import FileStore
from snaplake.options import Operation
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.snapshot import CommitKind, Snapshot
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.missing_files import MissingFileCheck
from snaplake.store.read.predicate import parse_filter, resolve_projection
from snaplake.store.read.scan import Split
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.store.snapshot_manager import SnapshotManager
from snaplake.store.tags import TagManager

__all__ = [
    "READ_OPTION_KEYS",
    "ChangeRead",
    "ReadSelection",
    "ScannedTable",
    "TableScan",
    "resolve_snapshot",
    "select_by_options",
]


class ScannedTable(Protocol):
    """What a scan needs from its table (``snaplake.table.Table`` satisfies it)."""

    file_io: FileIO
    paths: PathFactory
    schema_manager: SchemaManager

    def schema(self) -> TableSchema:
        """The latest schema."""
        ...

    def file_store(self, schema: TableSchema | None = None) -> FileStore:
        """The table kind's FileStore in ``schema``."""
        ...

    def schema_evolution(self, read_schema: TableSchema) -> SchemaEvolution:
        """The mapping of the table's data files into ``read_schema``."""
        ...


class ChangeRead(Protocol):
    """A planned change read backing a :class:`TableScan` (a ``table_changes.ChangePlan``)."""

    @property
    def schema(self) -> pa.Schema:
        """The rows' Arrow schema."""
        ...

    def to_reader(self) -> pa.RecordBatchReader:
        """The change rows."""
        ...


class TableScan:
    """A planned read of one snapshot: ``plan()`` gives the splits, ``to_arrow()`` the rows.

    Built by :meth:`Table.new_scan`; see there for the arguments.
    ``schema`` is the TableSchema the rows are read in (the latest, or with
    ``time_travel`` the snapshot's). ``tag`` names the tag the snapshot was
    read through, if any.

    A file that vanishes between planning and reading raises a typed error
    (:class:`~snaplake.store.read.missing_files.MissingFileCheck`):
    ``SnapshotNotFoundError`` when the snapshot expired (or is being
    expired) meanwhile, ``TagNotFoundError`` when the tag was deleted,
    ``CorruptMetadataError`` naming the file when the snapshot still uses it.

    With ``changes`` (Paimon's incremental read options) the scan reads those
    changes instead of ``snapshot``: rows carry ``_row_kind`` and ``_snapshot_id``.

    The scan implements the Arrow PyCapsule stream protocol
    (``__arrow_c_stream__``): ``pa.table(scan)``, ``polars.from_arrow(scan)``
    and DuckDB read its rows without a copy through pandas.
    """

    def __init__(
        self,
        table: ScannedTable,
        snapshot: Snapshot | None,
        *,
        partition_filter: Mapping[str, Any] | None,
        filter: Any,
        columns: Sequence[str] | None,
        time_travel: bool = False,
        tag: str | None = None,
        changes: ChangeRead | None = None,
    ) -> None:
        self.table = table
        self.changes = changes
        self.snapshot = snapshot
        self._missing = MissingFileCheck(
            file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager,
            snapshot=snapshot, tag=tag,
        )  # fmt: skip
        latest = table.schema()
        table.file_store(latest).check_supported(Operation.READ)  # options: the table's latest
        self.predicates = parse_filter(filter)
        self.columns = list(columns) if columns is not None else None
        # The latest state reads in the latest schema; time travel in the snapshot's.
        self.schema: TableSchema = (
            table.schema_manager.schema(snapshot.schema_id)
            if time_travel and snapshot is not None
            else latest
        )
        self._scan = table.file_store(self.schema).new_scan(
            snapshot,
            partition_filter=parse_filter(partition_filter) if partition_filter else None,
            predicate=self.predicates,
            read_schema=self.schema,
            batch_read=True,
            options=latest.core_options,
        )
        self.evolution = table.schema_evolution(self.schema)

    def plan(self) -> list[Split]:
        """Return the live files grouped by (partition, bucket), after pruning.

        Raises:
            CorruptMetadataError: a manifest list or manifest is undecodable,
                or missing while the snapshot still uses it.
            SnapshotNotFoundError: the snapshot expired meanwhile.
            UnsupportedTableError: the scan reads changes (``plan_changes`` plans those).
        """
        if self.changes is not None:
            raise UnsupportedTableError(
                "this scan reads changes (an incremental read option is set), which have "
                "no snapshot splits; plan them with Table.plan_changes, or read the rows "
                "with to_arrow / to_batches",
                feature="snapshot splits of a change read", operation="read",
                key="incremental-between",
            )  # fmt: skip
        with self._missing.reading():
            return self._scan.plan()

    @property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of the rows (the projection; change reads add their two columns)."""
        if self.changes is not None:
            return self.changes.schema
        arrow = self.schema.arrow_schema
        names, _ = resolve_projection(arrow, self.columns, self.predicates)
        return pa.schema([arrow.field(n) for n in names])

    def to_reader(self) -> pa.RecordBatchReader:
        """The rows as one ``pa.RecordBatchReader`` of :attr:`arrow_schema` (read lazily).

        Raises:
            SnapshotNotFoundError, CorruptMetadataError: as :meth:`to_batches`, while reading.
        """
        if self.changes is not None:
            return self.changes.to_reader()
        schema = self.arrow_schema
        batches = (b if b.schema.equals(schema) else b.cast(schema) for b in self.to_batches())
        return pa.RecordBatchReader.from_batches(schema, batches)

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """Export the rows as an Arrow C stream (PyCapsule protocol; see :meth:`to_reader`)."""
        return self.to_reader().__arrow_c_stream__(requested_schema)

    def to_arrow(self, *, limit: int | None = None) -> pa.Table:
        """Read the planned rows into one Arrow table (exactly filtered).

        A primary-key table returns the merged view: one row per key, merged
        by the table's merge engine, deleted keys absent.

        Raises:
            SnapshotNotFoundError: the snapshot expired (or is being expired)
                while it was read.
            CorruptMetadataError: a file the snapshot uses is missing (``.path``).
        """
        if self.changes is not None:
            rows = self.changes.to_reader().read_all()
            return rows if limit is None else rows.slice(0, limit)
        with self._missing.reading():
            return self.table.file_store(self.schema).read(
                self.plan(), read_schema=self.schema, columns=self.columns,
                predicates=self.predicates, limit=limit, evolution=self.evolution,
                schema_of=self.table.schema_manager.schema,
            )  # fmt: skip

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Yield the planned rows as record batches, one split at a time.

        Raises:
            SnapshotNotFoundError: as :meth:`to_arrow`, also while iterating.
            CorruptMetadataError: as :meth:`to_arrow`.
        """
        if self.changes is not None:
            return iter(self.changes.to_reader())
        return self._missing.batches(
            self.table.file_store(self.schema).read_batches(
                self.plan(), read_schema=self.schema, columns=self.columns,
                predicates=self.predicates, evolution=self.evolution,
                schema_of=self.table.schema_manager.schema,
            )
        )  # fmt: skip


def resolve_snapshot(
    snapshots: SnapshotManager, identifier: str, snapshot_id: int | None, as_of: datetime | None
) -> Snapshot | None:
    """The snapshot a read names: ``snapshot_id``, the newest at or before ``as_of``, or the latest.

    Raises:
        ValueError: both given, or a naive ``as_of``.
        SnapshotNotFoundError: the snapshot is not retained (``identifier`` names the table).
    """
    if snapshot_id is not None and as_of is not None:
        raise ValueError("pass snapshot_id or as_of, not both")
    if snapshot_id is not None:
        return snapshots.snapshot(snapshot_id)
    if as_of is None:
        return snapshots.latest_snapshot()
    if as_of.tzinfo is None:
        raise ValueError("as_of must be timezone-aware (e.g. datetime.now(UTC))")
    snap = snapshots.earlier_or_equal_time_millis(int(as_of.timestamp() * 1000))
    if snap is None:
        raise SnapshotNotFoundError(
            f"no retained snapshot of {identifier} was committed at or before "
            f"{as_of.isoformat()}; the earliest retained is {snapshots.earliest_snapshot_id()}",
            snapshot_id=None,
        )
    return snap


READ_OPTION_KEYS = frozenset({
    "scan.mode", "scan.snapshot-id", "scan.timestamp-millis", "scan.tag-name",
    "incremental-between", "incremental-between-timestamp", "incremental-between-scan-mode",
})  # fmt: skip
"""The Paimon read options a batch read honours (table options or read-time ``options=``)."""

_PAIMON_SCAN_MODES = frozenset({
    "default", "latest-full", "full", "latest", "latest-delta", "compacted-full",
    "from-timestamp", "from-file-creation-time", "from-creation-timestamp", "from-snapshot",
    "from-snapshot-full", "incremental",
})  # fmt: skip


@dataclass(frozen=True, slots=True)
class ReadSelection:
    """What a batch read's options select (:func:`select_by_options`).

    Attributes:
        snapshot: The snapshot to read (``changes``: ``None``).
        tag: The tag it was found through, if any.
        changes: ``(start, end, mode)``: the changes of snapshots
            ``start..end`` (inclusive) in ``mode``, instead of a snapshot.
        empty: The read returns no rows (Paimon's ``EmptyResultStartingScanner``).
    """

    snapshot: Snapshot | None = None
    tag: str | None = None
    changes: tuple[int, int, str] | None = None
    empty: bool = False


def _int_option(options: Mapping[str, str], key: str) -> int | None:
    text = options.get(key)
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise InvalidOptionError(
            f"option {key!r} = {text!r} is not an integer", key=key, value=text
        ) from None


def _pair(options: Mapping[str, str], key: str, identifier: str) -> tuple[int, int]:
    text = options[key]
    parts = [p.strip() for p in text.split(",")]
    try:
        if len(parts) != 2:
            raise ValueError(text)
        start, end = int(parts[0]), int(parts[1])
    except ValueError:
        if key == "incremental-between" and len(parts) == 2:
            raise UnsupportedTableError(
                f"{key} = {text!r} on {identifier}: snaplake reads incremental-between of "
                "snapshot ids only, not tag names; pass the tags' snapshot ids",
                feature="incremental-between with tags", operation="read", key=key,
            ) from None  # fmt: skip
        raise InvalidOptionError(
            f"option {key!r} = {text!r} must be two integers 'start,end' (start exclusive, "
            "end inclusive)", key=key, value=text,
        ) from None  # fmt: skip
    if end < start:
        raise InvalidOptionError(
            f"{key} = {text!r}: the end is before the start", key=key, value=text
        )
    return start, end


def select_by_options(
    snapshots: SnapshotManager, tags: TagManager, identifier: str, options: Mapping[str, str]
) -> ReadSelection | None:
    """What Paimon's batch scan reads under ``options``; ``None``: the latest snapshot.

    ``scan.mode`` (``default`` derives it from the other options, as Paimon's
    ``CoreOptions.startupMode``): ``latest-full`` / ``full`` / ``latest`` the
    latest snapshot; ``latest-delta`` the delta of the latest snapshot;
    ``compacted-full`` the latest COMPACT snapshot (with
    ``changelog-producer = full-compaction`` or ``full-compaction.delta-commits``
    the latest full one), else the latest; ``from-timestamp`` the newest
    snapshot at or before ``scan.timestamp-millis``; ``from-snapshot`` /
    ``from-snapshot-full`` snapshot ``scan.snapshot-id`` (or tag
    ``scan.tag-name``); ``incremental`` the changes of
    ``incremental-between = 'a,b'`` (snapshots ``a+1..b``) or of
    ``incremental-between-timestamp = 't1,t2'`` (committed in ``(t1, t2]``),
    in ``incremental-between-scan-mode``.

    Raises:
        InvalidOptionError: a ``scan.mode`` Paimon does not define, an option
            the mode needs is missing, or a value does not parse.
        UnsupportedTableError: ``from-file-creation-time``,
            ``from-creation-timestamp``, or ``incremental-between`` of tags.
        SnapshotNotFoundError: the selected snapshot is not retained.
        TagNotFoundError: no such tag.

    Source: Paimon ``AbstractDataTableScan.createStartingScanner`` (batch),
    ``CoreOptions.startupMode``, ``IncrementalDeltaStartingScanner.betweenTimestamps``.
    """
    mode = options.get("scan.mode", "default").strip().lower()
    if mode not in _PAIMON_SCAN_MODES:
        raise InvalidOptionError(
            f"scan.mode = {mode!r} is not a Paimon scan mode; use one of "
            f"{', '.join(sorted(_PAIMON_SCAN_MODES))}", key="scan.mode", value=mode,
        )  # fmt: skip
    snapshot_id = _int_option(options, "scan.snapshot-id")
    millis = _int_option(options, "scan.timestamp-millis")
    tag = options.get("scan.tag-name")
    incremental = "incremental-between" in options or "incremental-between-timestamp" in options
    if mode == "default":
        if millis is not None:
            mode = "from-timestamp"
        elif snapshot_id is not None or tag is not None:
            mode = "from-snapshot"
        elif incremental:
            mode = "incremental"
        else:
            return None
    if mode in ("latest-full", "full", "latest"):
        return None
    if mode in ("from-file-creation-time", "from-creation-timestamp"):
        raise UnsupportedTableError(
            f"scan.mode = {mode} on {identifier}: snaplake does not filter files by creation "
            "time; read a snapshot (scan.snapshot-id, scan.timestamp-millis) instead",
            feature=f"scan.mode = {mode}", operation="read", key="scan.mode",
        )  # fmt: skip
    if mode == "latest-delta":
        latest = snapshots.latest_snapshot_id()
        if latest is None:
            return ReadSelection(empty=True)
        return ReadSelection(changes=(latest, latest, "delta"))
    if mode == "compacted-full":
        return ReadSelection(snapshot=_compacted(snapshots, options))
    if mode == "from-timestamp":
        if millis is None:
            raise InvalidOptionError(
                "scan.mode = from-timestamp needs scan.timestamp-millis", key="scan.mode",
                value=mode,
            )  # fmt: skip
        at = datetime.fromtimestamp(millis / 1000, tz=UTC)
        return ReadSelection(snapshot=resolve_snapshot(snapshots, identifier, None, at))
    if mode in ("from-snapshot", "from-snapshot-full"):
        if snapshot_id is not None:
            return ReadSelection(snapshot=snapshots.snapshot(snapshot_id))
        if tag is not None and mode == "from-snapshot":
            return ReadSelection(snapshot=tags.get(tag), tag=tag)
        raise InvalidOptionError(
            f"scan.mode = {mode} needs scan.snapshot-id"
            + (" or scan.tag-name" if mode == "from-snapshot" else ""),
            key="scan.mode", value=mode,
        )  # fmt: skip
    return _incremental(snapshots, identifier, options)


def _compacted(snapshots: SnapshotManager, options: Mapping[str, str]) -> Snapshot | None:
    """The latest (full) COMPACT snapshot, else the latest (Paimon ``pickOrLatest``)."""
    full = options.get("changelog-producer", "").strip().lower() == "full-compaction"
    delta_commits = _int_option(options, "full-compaction.delta-commits")
    every = delta_commits if delta_commits is not None else (1 if full else None)
    latest = snapshots.latest_snapshot()
    earliest = snapshots.earliest_snapshot_id()
    if latest is None or earliest is None:
        return latest
    for sid in range(latest.id, earliest - 1, -1):
        snap = snapshots.snapshot(sid)
        if snap.commit_kind != CommitKind.COMPACT:
            continue
        ident = snap.commit_identifier
        if every is None or ident % every == 0 or ident == 2**63 - 1:
            return snap
    return latest


def _incremental(
    snapshots: SnapshotManager, identifier: str, options: Mapping[str, str]
) -> ReadSelection:
    """The change range of ``incremental-between`` / ``incremental-between-timestamp``."""
    mode = options.get("incremental-between-scan-mode", "auto").strip().lower()
    if mode not in ("auto", "delta", "changelog", "diff"):
        raise InvalidOptionError(
            f"incremental-between-scan-mode = {mode!r}; use auto, delta, changelog or diff",
            key="incremental-between-scan-mode", value=mode,
        )  # fmt: skip
    if "incremental-between" in options:
        start, end = _pair(options, "incremental-between", identifier)
        if snapshots.earliest_snapshot_id() is None or start == end:
            return ReadSelection(empty=True)
        return ReadSelection(changes=(start + 1, end, mode))
    if "incremental-between-timestamp" not in options:
        raise InvalidOptionError(
            "scan.mode = incremental needs incremental-between or incremental-between-timestamp",
            key="scan.mode", value="incremental",
        )  # fmt: skip
    t1, t2 = _pair(options, "incremental-between-timestamp", identifier)
    earliest_id, latest = snapshots.earliest_snapshot_id(), snapshots.latest_snapshot()
    earliest = None if earliest_id is None else snapshots.snapshot(earliest_id)
    if earliest is None or latest is None or t1 == t2:
        return ReadSelection(empty=True)
    if t1 > latest.time_millis or t2 < earliest.time_millis:
        return ReadSelection(empty=True)
    first = snapshots.earlier_or_equal_time_millis(t1)
    start = earliest.id - 1 if first is None or earliest.time_millis > t1 else first.id
    last = snapshots.earlier_or_equal_time_millis(t2)
    end = latest.id if last is None else last.id
    if start == end:
        return ReadSelection(empty=True)
    return ReadSelection(changes=(start + 1, end, mode))
