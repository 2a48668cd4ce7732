"""The FileStore contract, and the one place that picks a table's kind.

Source: Paimon ``FileStore`` / ``AbstractFileStore`` (one object per table
kind, created from the schema by ``FileStoreTableFactory``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
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
    from collections.abc import Mapping
    from typing import Any

    from snaplake.commit.file_store_commit import FileStoreCommit
    from snaplake.compaction.job import CompactionJob
    from snaplake.options import CoreOptions
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
    def new_write(self, commit_user: str) -> TableWrite:
        """Return the writer of this kind for ``commit_user`` (see ``Table.new_write``)."""

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
