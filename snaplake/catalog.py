"""FileSystemCatalog: databases and tables under one warehouse directory or S3 prefix.

Layout: ``<warehouse>/<database>.db/<table>/`` with the table's ``schema/``
files marking it as existing.

Source: Paimon ``FileSystemCatalog`` (database suffix ``.db``, table
existence = a schema file) and pypaimon ``CatalogFactory.create({"warehouse": ...})``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pyarrow as pa

from snaplake.commit.schema_alter import commit_schema_changes
from snaplake.errors import (
    DatabaseNotEmptyError,
    DatabaseNotFoundError,
    InvalidNameError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from snaplake.options import Operation
from snaplake.store.format.paths import DATABASE_SUFFIX, PathFactory, database_path, table_path
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.schema_change import SchemaChange
from snaplake.store.io.file_io import resolve_file_io
from snaplake.store.snapshot_manager import SnapshotManager
from snaplake.store.support import check_supported
from snaplake.table import Table

__all__ = ["FileSystemCatalog", "parse_identifier"]

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]*")


def _check_name(kind: str, name: str) -> str:
    """Return ``name`` if the whole of it is letters, digits, ``_`` and ``-``.

    A full match: a name with a final newline is refused (``re.match`` with
    ``$`` would accept it, and create a second directory that lists like the
    first).

    Raises:
        InvalidNameError: any other character, or an empty name.
    """
    if not _NAME.fullmatch(name):
        raise InvalidNameError(
            f"invalid {kind} name {name!r}: use letters, digits, '_' and '-' "
            "(it becomes a directory name)",
            kind=kind,
            name=name,
        )
    return name


def parse_identifier(identifier: str) -> tuple[str, str]:
    """Split ``"db.table"`` into ``("db", "table")``.

    Raises:
        InvalidNameError: not exactly two dotted parts, or a part that is
            not a valid name (letters, digits, ``_``, ``-``).
    """
    parts = identifier.split(".")
    if len(parts) != 2:
        raise InvalidNameError(
            f"table identifier {identifier!r} must look like 'database.table'",
            kind="table identifier",
            name=identifier,
        )
    return _check_name("database", parts[0]), _check_name("table", parts[1])


class FileSystemCatalog:
    """Databases and tables stored directly in a warehouse location.

    Args:
        warehouse: A local path, ``file://`` URI, ``s3://bucket/prefix`` or
            ``memory://name``.
        options: Catalog options (``s3.*`` keys configure S3 access).

    Raises:
        ValueError: the warehouse scheme is not supported.
    """

    def __init__(self, warehouse: str, *, options: Mapping[str, str] | None = None) -> None:
        self.options = dict(options or {})
        self.file_io, self.warehouse = resolve_file_io(warehouse, self.options)

    def __repr__(self) -> str:
        return f"FileSystemCatalog({self.warehouse!r})"

    # databases ----------------------------------------------------------
    def list_databases(self) -> list[str]:
        """Return database names (directories ending in ``.db``), sorted."""
        return sorted(
            d[: -len(DATABASE_SUFFIX)]
            for d in self.file_io.list_dirs(self.warehouse)
            if d.endswith(DATABASE_SUFFIX)
        )

    def database_exists(self, name: str) -> bool:
        """Tell whether database ``name`` exists."""
        return name in self.list_databases()

    def create_database(self, name: str, *, ignore_if_exists: bool = False) -> None:
        """Create database ``name``.

        Raises:
            InvalidNameError: ``name`` is not letters, digits, ``_`` and ``-``.
            FileExistsError: it exists and ``ignore_if_exists`` is false.

        Storage: writes ``<warehouse>/<name>.db/.snaplake-database`` (object
        stores have no empty directories).
        """
        _check_name("database", name)
        if self.database_exists(name):
            if ignore_if_exists:
                return
            raise FileExistsError(f"database {name!r} already exists in {self.warehouse}")
        marker = f"{database_path(self.warehouse, name)}/.snaplake-database"
        self.file_io.write_bytes(marker, b"", overwrite=True)

    def drop_database(
        self, name: str, *, ignore_if_not_exists: bool = False, cascade: bool = False
    ) -> None:
        """Drop database ``name`` (with its tables when ``cascade``).

        Raises:
            DatabaseNotFoundError: it does not exist and ``ignore_if_not_exists`` is false.
            DatabaseNotEmptyError: it has tables and ``cascade`` is false.

        Storage: deletes the database directory recursively.
        """
        if not self.database_exists(name):
            if ignore_if_not_exists:
                return
            raise DatabaseNotFoundError(f"database {name!r} does not exist", database=name)
        if self.list_tables(name) and not cascade:
            raise DatabaseNotEmptyError(
                f"database {name!r} still has tables {self.list_tables(name)}; "
                "drop them first or pass cascade=True"
            )
        self.file_io.delete_dir(database_path(self.warehouse, name))

    # tables -------------------------------------------------------------
    def _table_root(self, identifier: str) -> str:
        db, name = parse_identifier(identifier)
        return table_path(self.warehouse, db, name)

    def table_exists(self, identifier: str) -> bool:
        """Tell whether the table has a schema file."""
        root = self._table_root(identifier)
        return bool(SchemaManager(self.file_io, PathFactory(root)).list_schema_ids())

    def list_tables(self, database: str) -> list[str]:
        """Return the table names of ``database``, sorted.

        Raises:
            DatabaseNotFoundError: the database does not exist.
        """
        if not self.database_exists(database):
            raise DatabaseNotFoundError(
                f"database {database!r} does not exist in {self.warehouse}", database=database
            )
        db_root = database_path(self.warehouse, database)
        return [
            t
            for t in self.file_io.list_dirs(db_root)
            if SchemaManager(self.file_io, PathFactory(f"{db_root}/{t}")).list_schema_ids()
        ]

    def create_table(
        self,
        identifier: str,
        *,
        schema: pa.Schema,
        partition_keys: Sequence[str] = (),
        primary_keys: Sequence[str] = (),
        options: Mapping[str, str] | None = None,
        comment: str | None = None,
        ignore_if_exists: bool = False,
    ) -> Table:
        """Create a table: an append table, or a primary-key table with ``primary_keys``.

        Args:
            identifier: ``database.table``; the database is created if absent
                (after the schema file, so a refused create leaves nothing).
            schema: Column names, Arrow types and nullability.
            partition_keys: Partition columns, in directory order.
            primary_keys: Primary-key columns (must include the partition
                keys); also accepted as the option ``primary-key``. Without
                a ``bucket`` option a primary-key table has dynamic buckets
                (``bucket = -1``, Paimon's default); it may set
                ``merge-engine`` (``deduplicate``, ``partial-update``,
                ``aggregation``, ``first-row``); see
                ``docs/primary-key-tables.md``.
            options: Paimon table options; ``bucket`` defaults to ``-1``
                (bucket-unaware append table, dynamic buckets with primary
                keys; written into the schema as Paimon does);
                ``{"bucket": "4", "bucket-key": "c"}`` for fixed buckets.
            comment: Optional table comment.
            ignore_if_exists: Return the existing table instead of failing.

        Raises:
            InvalidNameError: ``identifier`` is not ``database.table`` with
                names of letters, digits, ``_`` and ``-``.
            TableAlreadyExistsError: the table exists and ``ignore_if_exists`` is false.
            SchemaMismatchError: bad partition, primary or bucket key.
            UnsupportedTableError: a primary-key table snaplake cannot write
                (``bucket = -2``, or an option it does not implement).
            UnsupportedTypeError: a column type has no Paimon equivalent.
            InvalidOptionError: an option value does not parse, or a
                ``fields.<column>.*`` option names no column (a typo or the
                wrong case; ``alter_table`` refuses the same keys).
            UnsupportedTableError: the table would use something snaplake
                cannot write yet: primary keys (``options={"primary-key": ...}``),
                a BINARY partition key or an option value snaplake refuses
                (:func:`snaplake.store.support.check_supported`).

        Storage: writes ``schema/schema-0`` create-if-absent (two concurrent
        creators cannot both win).
        """
        db, _ = parse_identifier(identifier)
        root = self._table_root(identifier)
        table_schema = TableSchema.from_arrow(
            schema,
            partition_keys=partition_keys,
            primary_keys=primary_keys,
            options=options,
            comment=comment,
        )
        check_supported(table_schema, Operation.CREATE)
        try:
            SchemaManager(self.file_io, PathFactory(root)).create(table_schema)
        except TableAlreadyExistsError:
            if ignore_if_exists:
                return self.get_table(identifier)
            raise TableAlreadyExistsError(
                f"table {identifier} already exists; use get_table or ignore_if_exists=True"
            ) from None
        # The database marker only after the schema landed: a refused create writes nothing.
        self.create_database(db, ignore_if_exists=True)
        return self.get_table(identifier)

    def get_table(self, identifier: str) -> Table:
        """Open table ``database.table``.

        Raises:
            TableNotFoundError: no such table.
        """
        return Table(file_io=self.file_io, root=self._table_root(identifier), identifier=identifier)

    def alter_table(
        self,
        identifier: str,
        changes: Sequence[SchemaChange],
        *,
        ignore_if_not_exists: bool = False,
    ) -> TableSchema | None:
        """Apply schema changes to a table: one new ``schema-<N+1>``, by Paimon's rules.

        Writers and maintenance opened afterwards use the new schema (columns
        and options); readers read every older data file in it by field id.
        A writer opened before keeps writing its schema, and its commit is
        still accepted.

        Args:
            identifier: ``database.table``.
            changes: :class:`snaplake.SchemaChange` values, applied in order
                as one new schema.
            ignore_if_not_exists: Return ``None`` instead of failing when the
                table does not exist.

        Returns:
            The new schema (``None`` for a missing table with ``ignore_if_not_exists``).

        Raises:
            TableNotFoundError: no such table.
            ValueError: no changes.
            SchemaChangeError: a change breaks a rule (partition/primary keys,
                type widening, NOT NULL, last value column, immutable options;
                see :mod:`snaplake.commit.schema_alter`). Nothing written.
            SchemaConflictError: a concurrent alter won and these changes clash
                with it (e.g. both renamed one column). Nothing written.
            CommitRetriesExhaustedError: concurrent alters kept winning the race
                for the next schema file within the table's ``commit.*`` retry
                options. Nothing written; safe to retry.
            InvalidOptionError: an option value does not parse. Nothing written.

        Storage: creates ``schema/schema-<N+1>`` create-if-absent; two
        concurrent alters cannot both take one id (the loser re-applies).

        Source: Paimon ``Catalog.alterTable`` / ``SchemaManager.commitChanges``.
        """
        root = self._table_root(identifier)
        paths = PathFactory(root)
        manager = SchemaManager(self.file_io, paths)
        if not manager.list_schema_ids():
            if ignore_if_not_exists:
                return None
            raise TableNotFoundError(f"table {identifier} does not exist", identifier=identifier)
        snapshots = SnapshotManager(self.file_io, paths)
        return commit_schema_changes(
            manager,
            changes,
            has_snapshots=lambda: snapshots.latest_snapshot_id() is not None,
            identifier=identifier,
        )

    def drop_table(self, identifier: str, *, ignore_if_not_exists: bool = False) -> None:
        """Delete the table directory and everything in it.

        Raises:
            TableNotFoundError: no such table and ``ignore_if_not_exists`` is false.

        Storage: deletes ``<warehouse>/<db>.db/<table>/`` recursively.
        """
        if not self.table_exists(identifier):
            if ignore_if_not_exists:
                return
            raise TableNotFoundError(f"table {identifier} does not exist", identifier=identifier)
        self.file_io.delete_dir(self._table_root(identifier))
