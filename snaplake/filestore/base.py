"""The FileStore contract, and the one place that picks a table's kind.

Source: Paimon ``FileStore`` / ``AbstractFileStore`` (one object per table
kind, created from the schema by ``FileStoreTableFactory``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

import pyarrow as pa

from snaplake.commit.conflict import ConflictRule
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.result import CommitResult
from snaplake.commit.retry import RetryPolicy
from snaplake.options import Operation
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.predicate import Predicate
from snaplake.store.read.scan import Split
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.store.snapshot_manager import SnapshotManager
from snaplake.store.support import check_supported

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
    def new_write(self, commit_user: str) -> TableWrite:
        """Return the writer of this kind for ``commit_user`` (see ``Table.new_write``)."""

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
        table = self.table
        return FileStoreCommit(
            file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager,
            snapshot_manager=table.snapshot_manager, table_name=table.identifier,
            commit_user=commit_user, retry_policy=retry_policy, after_commit=after_commit,
            conflict_rules=self.conflict_rules(),
        )  # fmt: skip

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
