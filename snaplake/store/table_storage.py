"""TableStorage: what the layers below the facade need of a table (its storage, paths, managers).

``snaplake.table.Table`` satisfies it; the commit path, compaction and the
FileStore take one instead of the four handles each.

Source: the ``fileIO`` / ``pathFactory`` / ``schemaManager`` /
``snapshotManager`` a Paimon ``AbstractFileStore`` hands to what it creates.
"""

from __future__ import annotations

from typing import Protocol

from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager
from snaplake.store.io.file_io import FileIO
from snaplake.store.snapshot_manager import SnapshotManager

__all__ = ["TableStorage"]


class TableStorage(Protocol):
    """A table's storage, paths and managers (``snaplake.table.Table`` satisfies it)."""

    file_io: FileIO
    paths: PathFactory
    schema_manager: SchemaManager
    snapshot_manager: SnapshotManager
    identifier: str
