"""TableScan: a planned read of one snapshot of a table (splits, then rows).

Built by :meth:`snaplake.table.Table.new_scan`; the table's FileStore plans
(its scan file selection) and reads (its split reader).

Source: Paimon ``TableScan`` / ``TableRead`` (``ReadBuilder``), pypaimon's
``TableScan``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

import pyarrow as pa

from snaplake.errors import UnsupportedTableError
from snaplake.filestore import FileStore
from snaplake.options import Operation
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.missing_files import MissingFileCheck
from snaplake.store.read.predicate import parse_filter, resolve_projection
from snaplake.store.read.read_options import created_since
from snaplake.store.read.scan import Split
from snaplake.store.read.schema_evolution import SchemaEvolution

__all__ = ["ChangeRead", "ScannedTable", "TableScan"]


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
    """A planned change read backing a :class:`TableScan` (a ``change_plan.ChangePlan``)."""

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
    With ``created_since`` (epoch milliseconds; Paimon's
    ``scan.file-creation-time-millis``) it reads only the files of ``snapshot``
    created at or after that time
    (:func:`~snaplake.store.read.read_options.created_since`).

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
        created_since: int | None = None,
    ) -> None:
        self.table = table
        self.created_since = created_since
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
            splits = self._scan.plan()
        if self.created_since is None:
            return splits
        return created_since(splits, self.created_since)

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
