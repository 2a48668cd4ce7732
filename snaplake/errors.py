"""The snaplake exception tree.

Every error snaplake raises on purpose is a subclass of :class:`SnaplakeError`.
Where an error resembles a builtin, it also subclasses that builtin so plain
Python code (``except LookupError``, ``except FileExistsError``) keeps working::

    SnaplakeError                                  base; ``retryable`` is False
    ├── TableNotFoundError (LookupError)           no table at the identifier/path
    ├── DatabaseNotFoundError (LookupError)        no database of that name
    ├── TableAlreadyExistsError (FileExistsError)  create_table on an existing table
    ├── DatabaseNotEmptyError (OSError)            drop of a database that still has tables
    ├── SnapshotNotFoundError (LookupError)        snapshot id never written or expired
    ├── TagNotFoundError (LookupError)             no tag of that name
    ├── InvalidOptionError (ValueError)            unknown/unparsable option; .key, .value
    ├── InvalidNameError (ValueError)              a database/table/tag/consumer name; .kind, .name
    ├── ConsumerBusyError                          a live subscription holds the consumer id;
    │                                              .consumer_id, .holder (retryable)
    ├── AckOrderError (ValueError)                 ack twice, out of order or after close;
    │                                              .snapshot_id
    ├── SchemaMismatchError (ValueError)           Arrow data vs table schema
    ├── AmbiguousOrderError (ValueError)           a Spark write's versions of a key unordered
    ├── SchemaChangeError (ValueError)             alter_table refused by a rule; .rule
    │   ├── ColumnNotFoundError (LookupError)      the change names a missing column; .column
    │   ├── ColumnAlreadyExistsError               add/rename onto an existing name; .column
    │   └── SchemaConflictError                    a concurrent alter clashes; .schema_id
    ├── UnsupportedTypeError (TypeError)           an Arrow type Paimon cannot store
    ├── UnsupportedTableError (ValueError)         a table feature/option snaplake cannot
    │                                              handle yet; .feature, .operation, .key
    ├── MergeFunctionError (ArithmeticError)       a merge engine cannot fold a key's versions
    ├── CorruptMetadataError (ValueError)          undecodable snapshot/manifest; .path
    │   └── UnsupportedFormatVersionError          a newer writer's file; .version
    ├── StorageError (OSError)                     backend failure; .path, .operation
    │   ├── FileAlreadyExistsError (FileExistsError)   create-only write lost the race
    │   ├── StorageAccessError (PermissionError)   credentials/permissions refused
    │   └── UnsafeStorageError                     store ignores conditional writes
    └── CommitError
        ├── CommitConflictError                    .paths, .conflicting_snapshot_ids
        │   ├── HashIndexConflictError             retryable: write the rows again
        │   ├── CrossPartitionConflictError        retryable: write the rows again
        │   └── DeletionVectorConflictError        retryable: plan the compaction again
        ├── CommitRetriesExhaustedError            retryable; .attempts, .elapsed_s
        └── CommitStateUnknownError                look for .commit_identifier before retrying

This module imports nothing from snaplake.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

__all__ = [
    "AckOrderError",
    "AmbiguousOrderError",
    "CommitConflictError",
    "CommitError",
    "CommitRetriesExhaustedError",
    "ColumnAlreadyExistsError",
    "ColumnNotFoundError",
    "CommitStateUnknownError",
    "ConsumerBusyError",
    "CorruptMetadataError",
    "CrossPartitionConflictError",
    "DatabaseNotEmptyError",
    "DatabaseNotFoundError",
    "FileAlreadyExistsError",
    "DeletionVectorConflictError",
    "HashIndexConflictError",
    "InvalidNameError",
    "InvalidOptionError",
    "MergeFunctionError",
    "SchemaChangeError",
    "SchemaConflictError",
    "SchemaMismatchError",
    "SnaplakeError",
    "SnapshotNotFoundError",
    "StorageAccessError",
    "StorageError",
    "TableAlreadyExistsError",
    "TableNotFoundError",
    "TagNotFoundError",
    "UnsafeStorageError",
    "UnsupportedFormatVersionError",
    "UnsupportedTableError",
    "UnsupportedTypeError",
]


class SnaplakeError(Exception):
    """Base of every error snaplake raises on purpose.

    ``retryable`` tells callers (the Spark sink, the daemon) whether running
    the same operation again later can succeed; they never parse messages.
    """

    retryable: ClassVar[bool] = False


class TableNotFoundError(SnaplakeError, LookupError):
    """Raised when no table exists at the given identifier or path."""

    def __init__(self, message: str, *, identifier: str) -> None:
        super().__init__(message)
        self.identifier = identifier


class DatabaseNotFoundError(SnaplakeError, LookupError):
    """Raised when a database (``<name>.db`` directory) does not exist."""

    def __init__(self, message: str, *, database: str) -> None:
        super().__init__(message)
        self.database = database


class TableAlreadyExistsError(SnaplakeError, FileExistsError):
    """Raised by ``create_table`` when the table already has a schema file."""


class DatabaseNotEmptyError(SnaplakeError, OSError):
    """Raised when dropping a database that still holds tables without ``cascade``."""


class SnapshotNotFoundError(SnaplakeError, LookupError):
    """Raised when a snapshot id was never written or has been expired."""

    def __init__(self, message: str, *, snapshot_id: int | None) -> None:
        super().__init__(message)
        self.snapshot_id = snapshot_id


class TagNotFoundError(SnaplakeError, LookupError):
    """Raised when a tag name does not exist under ``tag/``."""


class InvalidOptionError(SnaplakeError, ValueError):
    """Raised for an unparsable option value or an unknown ``snaplake.*`` key."""

    def __init__(self, message: str, *, key: str, value: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.value = value


class InvalidNameError(SnaplakeError, ValueError):
    """Raised for a database, table, tag or consumer name that cannot name a file.

    Names become directory or file names (``<db>.db/<table>``,
    ``tag/tag-<name>``, ``consumer/consumer-<id>``), so they are checked in
    full before anything is written; the message says which characters are
    allowed. ``kind`` is ``"database"``, ``"table"``, ``"tag"`` or
    ``"consumer id"``; ``name`` is the refused name.
    """

    def __init__(self, message: str, *, kind: str, name: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name


class ConsumerBusyError(SnaplakeError):
    """Raised when another live subscription holds the consumer id (or took it over).

    Two readers acknowledging under one consumer id would interleave their
    progress, so a subscription holds a lease on the id while it lives. The
    message names the holder (host, pid) and what to do: stop it, or use
    another consumer id; a holder that crashed frees the id at once on its
    own host and after the lease expiry elsewhere (``retryable``).
    ``consumer_id`` is the id; ``holder`` describes the lease holder.
    """

    retryable: ClassVar[bool] = True

    def __init__(self, message: str, *, consumer_id: str, holder: str) -> None:
        super().__init__(message)
        self.consumer_id = consumer_id
        self.holder = holder


class AckOrderError(SnaplakeError, ValueError):
    """Raised by ``ChangeBatch.ack`` for a batch acknowledged twice, out of order, or late.

    Batches are acknowledged in the order they were delivered, each once,
    while their subscription is open. Nothing is written. ``snapshot_id`` is
    the batch's snapshot.
    """

    def __init__(self, message: str, *, snapshot_id: int) -> None:
        super().__init__(message)
        self.snapshot_id = snapshot_id


class SchemaMismatchError(SnaplakeError, ValueError):
    """Raised before any file is written when Arrow data does not fit the table schema."""


class AmbiguousOrderError(SnaplakeError, ValueError):
    """Raised when a write holds several versions of one primary key and nothing orders them.

    A Spark write cannot tell which of two rows of one key is newer (Spark
    hands rows over in no defined order); the message names the key and
    says how to order them (``order_by=...``, the table option
    ``sequence.field``, or deduplicating first). Nothing is committed and
    the write's files are deleted.
    """


class SchemaChangeError(SnaplakeError, ValueError):
    """Raised by ``alter_table`` when a schema change breaks one of Paimon's rules.

    Nothing is written. ``rule`` names the rule (``"partition-key"``,
    ``"primary-key"``, ``"bucket-key"``, ``"type-widening"``, ``"not-null"``,
    ``"last-value-column"``, ``"immutable-option"``, ``"option"``, ...).
    """

    def __init__(self, message: str, *, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


class ColumnNotFoundError(SchemaChangeError, LookupError):
    """Raised when a schema change names a column the table does not have."""

    def __init__(self, message: str, *, column: str) -> None:
        super().__init__(message, rule="column-exists")
        self.column = column


class ColumnAlreadyExistsError(SchemaChangeError):
    """Raised when a column is added or renamed onto a name the table already has."""

    def __init__(self, message: str, *, column: str) -> None:
        super().__init__(message, rule="column-not-exists")
        self.column = column


class SchemaConflictError(SchemaChangeError):
    """Raised when a concurrent ``alter_table`` won and this one no longer applies.

    Two alters race for ``schema-<N+1>``; the loser re-applies its changes
    to the winner's schema and raises this when they clash (both renamed
    one column, both added the same name, ...). Nothing of the loser is
    written. ``schema_id`` is the winner's schema; ``__cause__`` is the
    rule the re-applied change broke.
    """

    def __init__(self, message: str, *, schema_id: int) -> None:
        super().__init__(message, rule="concurrent-alter")
        self.schema_id = schema_id


class UnsupportedTypeError(SnaplakeError, TypeError):
    """Raised for an Arrow or Paimon type snaplake cannot store or read."""


class UnsupportedTableError(SnaplakeError, ValueError):
    """Raised before anything is read or written when a table uses a feature snaplake lacks.

    Reading or writing such a table as if the feature were absent would
    return wrong rows or leave a table other engines cannot read, so the
    operation is refused instead (for example a primary-key table, or an
    option such as ``deletion-vectors.enabled = true``).

    Attributes:
        feature: What the table uses, in Paimon's words (``"primary-key table"``,
            ``"option 'deletion-vectors.enabled' = 'true'"``).
        operation: The refused operation (``"read"``, ``"write"``, ``"commit"``,
            ``"maintenance"``, ``"create"``).
        key: The option key when an option is the cause, else ``None``.
    """

    def __init__(
        self, message: str, *, feature: str, operation: str, key: str | None = None
    ) -> None:
        super().__init__(message)
        self.feature = feature
        self.operation = operation
        self.key = key


class MergeFunctionError(SnaplakeError, ArithmeticError):
    """Raised when a merge engine cannot fold the versions of a key.

    For example an aggregate that overflows its column type, or, in files
    another writer produced, a retraction (``-U``/``-D``) that the table's merge
    engine rejects. snaplake's own writers refuse such rows before writing
    (``SchemaMismatchError``).
    """


class CorruptMetadataError(SnaplakeError, ValueError):
    """Raised when a snapshot, schema, manifest or manifest list cannot be decoded."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class UnsupportedFormatVersionError(CorruptMetadataError):
    """Raised for a metadata file written by a newer format version than we read."""

    def __init__(self, message: str, *, path: str, version: int) -> None:
        super().__init__(message, path=path)
        self.version = version


class StorageError(SnaplakeError, OSError):
    """Raised for a storage backend failure not covered by a builtin error."""

    def __init__(self, message: str, *, path: str, operation: str) -> None:
        super().__init__(message)
        self.path = path
        self.operation = operation


class FileAlreadyExistsError(StorageError, FileExistsError):
    """Raised when a create-only write finds the target already present (lost race)."""


class StorageAccessError(StorageError, PermissionError):
    """Raised when the store refuses the credentials or the permission for an operation."""


class UnsafeStorageError(StorageError):
    """Raised when the store ignores create-if-absent; commits would not be atomic."""


class CommitError(SnaplakeError):
    """Base of the errors raised by ``FileStoreCommit.commit``."""


class CommitConflictError(CommitError):
    """Raised when a concurrent commit makes this one impossible; retrying cannot help."""

    def __init__(
        self,
        message: str,
        *,
        paths: Sequence[str] = (),
        conflicting_snapshot_ids: Sequence[int] = (),
    ) -> None:
        super().__init__(message)
        self.paths = tuple(paths)
        self.conflicting_snapshot_ids = tuple(conflicting_snapshot_ids)


class HashIndexConflictError(CommitConflictError):
    """Raised when a dynamic-bucket bucket's HASH index changed since the writer restored it.

    Committing these messages again cannot help, but writing the same rows
    again with a new writer (which restores the new index) can: ``retryable``.
    Nothing was published.
    """

    retryable: ClassVar[bool] = True


class CrossPartitionConflictError(CommitConflictError):
    """Raised when another writer wrote a key of this cross-partition commit since its key map.

    Two writers of a cross-partition table (``bucket = -1``, primary key
    lacking a partition key) could otherwise put one key into two
    partitions. Committing these messages again cannot help, but writing
    the same rows again after ``abort`` (the writer reads its key map anew)
    or with a new writer can: ``retryable``. Nothing was published.
    """

    retryable: ClassVar[bool] = True


class DeletionVectorConflictError(CommitConflictError):
    """Raised when a bucket's deletion vectors changed since a compaction read them.

    The compaction's new vectors file was built from the old one, so
    publishing it would lose the other commit's vectors. Committing these
    messages again cannot help, but planning the compaction again on the new
    snapshot can: ``retryable`` (``CompactionJob`` re-plans). Nothing was
    published.
    """

    retryable: ClassVar[bool] = True


class CommitFilesMissingError(CommitConflictError):
    """Raised when a commit retried after an unknown outcome finds files it adds deleted.

    A caller that retries a commit whose outcome was unknown
    (:class:`CommitStateUnknownError`) after orphan clean's grace period may
    find its unreferenced data files deleted; publishing would make a
    snapshot name missing files. ``paths`` lists them. Nothing was published;
    committing these messages again cannot help, writing the rows again can:
    ``retryable``.
    """

    retryable: ClassVar[bool] = True


class CommitRetriesExhaustedError(CommitError):
    """Raised when every attempt lost the race within the retry budget; safe to retry later."""

    retryable: ClassVar[bool] = True

    def __init__(self, message: str, *, attempts: int, elapsed_s: float) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.elapsed_s = elapsed_s


class CommitStateUnknownError(CommitError):
    """Raised when the publish failed without telling whether it landed."""

    retryable: ClassVar[bool] = True

    def __init__(self, message: str, *, commit_identifier: int, snapshot_id: int) -> None:
        super().__init__(message)
        self.commit_identifier = commit_identifier
        self.snapshot_id = snapshot_id
