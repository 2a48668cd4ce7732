"""The FileStore contract, and the one place that picks a table's kind.

Source: Paimon ``FileStore`` / ``AbstractFileStore`` (one object per table
kind, created from the schema by ``FileStoreTableFactory``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

import pyarrow as pa

from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.predicate import Predicate
from snaplake.store.read.scan import Split
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.store.snapshot_manager import SnapshotManager

if TYPE_CHECKING:
    from snaplake.write.table_write import TableWrite

__all__ = ["FileStore", "TableContext", "file_store_for"]


class TableContext(Protocol):
    """What a FileStore needs from a table (``snaplake.table.Table`` satisfies it)."""

    file_io: FileIO
    paths: PathFactory
    schema_manager: SchemaManager
    snapshot_manager: SnapshotManager
    identifier: str


class FileStore(ABC):
    """What differs between table kinds, for one table at one schema.

    Args:
        table: The table's storage, paths, managers and identifier.
        schema: The schema the store works in (the table's latest when it was made).

    Source: Paimon ``FileStore``.
    """

    kind: ClassVar[str]
    """``"append"`` or ``"primary-key"`` (log and metric labels, CLI output)."""

    def __init__(self, table: TableContext, schema: TableSchema) -> None:
        self.table = table
        self.schema = schema

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.table.identifier!r}, schema={self.schema.id})"

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


def file_store_for(table: TableContext, schema: TableSchema) -> FileStore:
    """Return the FileStore of ``schema``'s kind: key-value with primary keys, else append.

    This is the one place outside the schema rules that looks at the primary key.

    Source: Paimon ``FileStoreTableFactory.create``.
    """
    from snaplake.filestore.append import AppendOnlyFileStore
    from snaplake.filestore.key_value import KeyValueFileStore

    if schema.primary_keys:
        return KeyValueFileStore(table, schema)
    return AppendOnlyFileStore(table, schema)
