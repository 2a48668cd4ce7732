"""snaplake: a Python table store for Apache Paimon tables.

Atomic, exactly-once commits (create-if-absent publish, dedup by commit user
and identifier), Paimon-compatible on-disk format, and table maintenance.
Names load lazily, so ``import snaplake`` stays cheap (the CLI's ``--help``).

Example::

    import snaplake

    catalog = snaplake.FileSystemCatalog("/data/warehouse")
    table = catalog.create_table("db.t", schema=arrow_schema, partition_keys=["month"])
    write = table.new_write(commit_user="ingest")
    write.write_arrow(data)
    table.new_commit(commit_user="ingest").commit(write.prepare_commit(), commit_identifier=1)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from snaplake.errors import (
    CommitConflictError,
    CommitError,
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
    CorruptMetadataError,
    SchemaChangeError,
    SchemaConflictError,
    SchemaMismatchError,
    SnaplakeError,
    SnapshotNotFoundError,
    TableNotFoundError,
)

if TYPE_CHECKING:
    from snaplake.catalog import FileSystemCatalog
    from snaplake.commit.message import CommitMessage, CompactIncrement, DataIncrement
    from snaplake.commit.result import CommitResult
    from snaplake.store.format.schema_change import SchemaChange
    from snaplake.store.format.snapshot import CommitKind, Snapshot
    from snaplake.store.read.predicate import Predicate
    from snaplake.table import Table

__version__ = "0.1.0"

_LAZY = {
    "FileSystemCatalog": "snaplake.catalog",
    "CommitMessage": "snaplake.commit.message",
    "CompactIncrement": "snaplake.commit.message",
    "DataIncrement": "snaplake.commit.message",
    "CommitResult": "snaplake.commit.result",
    "Predicate": "snaplake.store.read.predicate",
    "SchemaChange": "snaplake.store.format.schema_change",
    "CommitKind": "snaplake.store.format.snapshot",
    "Snapshot": "snaplake.store.format.snapshot",
    "Table": "snaplake.table",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'snaplake' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "CommitConflictError",
    "CommitError",
    "CommitKind",
    "CommitMessage",
    "CommitResult",
    "CommitRetriesExhaustedError",
    "CommitStateUnknownError",
    "CompactIncrement",
    "CorruptMetadataError",
    "DataIncrement",
    "FileSystemCatalog",
    "Predicate",
    "SchemaChange",
    "SchemaChangeError",
    "SchemaConflictError",
    "SchemaMismatchError",
    "SnaplakeError",
    "Snapshot",
    "SnapshotNotFoundError",
    "Table",
    "TableNotFoundError",
]
