"""TableScan: a planned read of one snapshot of a table (splits, then rows).

Built by :meth:`snaplake.table.Table.new_scan`; the table's FileStore plans
(its scan file selection) and reads (its split reader).

Source: Paimon ``TableScan`` / ``TableRead`` (``ReadBuilder``), pypaimon's
``TableScan``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

import pyarrow as pa

from snaplake.errors import SnapshotNotFoundError
from snaplake.filestore import FileStore
from snaplake.options import Operation
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.missing_files import MissingFileCheck
from snaplake.store.read.predicate import parse_filter
from snaplake.store.read.scan import Split
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.store.snapshot_manager import SnapshotManager

__all__ = ["ScannedTable", "TableScan", "resolve_snapshot"]


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
    ) -> None:
        self.table = table
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
        """
        with self._missing.reading():
            return self._scan.plan()

    def to_arrow(self, *, limit: int | None = None) -> pa.Table:
        """Read the planned rows into one Arrow table (exactly filtered).

        A primary-key table returns the merged view: one row per key, merged
        by the table's merge engine, deleted keys absent.

        Raises:
            SnapshotNotFoundError: the snapshot expired (or is being expired)
                while it was read.
            CorruptMetadataError: a file the snapshot uses is missing (``.path``).
        """
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
