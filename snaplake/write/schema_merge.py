"""Merge the schema of incoming data into a table: new nullable columns, widened types.

``merge_schema=True`` writers (the Spark sink and ``snaplake.spark.write``)
call :func:`merge_data_schema` before writing a batch. Columns of the data
the table lacks are added (nullable, in the data's order, after the table's
columns); a column whose data type is wider than the table's is widened when
the change is one of the lossless widenings
(:mod:`snaplake.store.format.type_casts`). Data that already fits (the same
type, a narrower integer, another string flavour) changes nothing. The
changes are one ``alter_table``, committed before any data file is written,
so a replayed batch finds them applied and alters nothing again; a
concurrent writer adding the same column is absorbed (the diff is taken
again against the winner's schema).

Source: Paimon ``SchemaMergingUtils.mergeSchemas`` / ``diffSchemaChanges``
(Spark's ``write.merge-schema``: add missing columns, widen types with
``typeWidening``), ``SchemaManager.mergeSchema``.
"""

from __future__ import annotations

import logging

import pyarrow as pa

from snaplake.commit.schema_alter import commit_schema_changes
from snaplake.errors import SchemaConflictError, SchemaMismatchError, UnsupportedTypeError
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.schema_change import SchemaChange
from snaplake.store.format.type_casts import can_widen
from snaplake.store.format.types import data_type_from_arrow
from snaplake.write.table_write import arrow_type_fits

__all__ = ["merge_data_schema", "schema_changes_for"]

logger = logging.getLogger(__name__)

_MAX_CONFLICTS = 5


def schema_changes_for(schema: TableSchema, data: pa.Schema) -> list[SchemaChange]:
    """Return the changes that let rows of ``data`` be written into ``schema``.

    Args:
        schema: The table's current schema.
        data: The Arrow schema of the incoming rows (column order kept for
            added columns).

    Returns:
        ``add_column`` for each new column, ``update_column_type`` for each
        widened one; empty when the data fits as it is.

    Raises:
        SchemaMismatchError: columns whose data type neither fits nor widens
            the table's type (named with both types), or that have no Paimon
            type.

    Source: Paimon ``SchemaMergingUtils.mergeSchemas`` (``typeWidening``,
    no explicit casts).
    """
    table = schema.arrow_schema
    changes: list[SchemaChange] = []
    bad: list[str] = []
    for field in data:
        try:
            index = table.get_field_index(field.name)
            if index < 0:
                changes.append(SchemaChange.add_column(field.name, field.type))
                continue
            current = table.field(index)
            if arrow_type_fits(field.type, current.type):
                continue
            old = schema.field_type(field.name)
            new = data_type_from_arrow(field.type).with_nullable(nullable=old.nullable)
        except UnsupportedTypeError as exc:
            bad.append(f"{field.name!r} ({exc})")
            continue
        if can_widen(old, new) and field.name not in schema.partition_keys:
            changes.append(SchemaChange.update_column_type(field.name, new))
        else:
            bad.append(f"{field.name!r} ({field.type} does not fit or widen {current.type})")
    if bad:
        raise SchemaMismatchError(
            f"cannot merge the data's schema into the table: column(s) {', '.join(bad)}; "
            "cast them to the table's types"
        )
    return changes


def merge_data_schema(
    manager: SchemaManager, data: pa.Schema, *, has_snapshots: bool, identifier: str
) -> TableSchema:
    """Alter the table so ``data`` fits it (see :func:`schema_changes_for`); return the schema.

    Idempotent: when ``data`` already fits the latest schema nothing is
    written, so a replayed batch alters nothing again.

    Args:
        manager: The table's SchemaManager.
        data: The Arrow schema of the incoming rows.
        has_snapshots: Whether the table has a snapshot (for the option rules).
        identifier: ``db.table`` for messages.

    Returns:
        The latest schema, the data fitting it.

    Raises:
        SchemaMismatchError: a column neither fits nor widens (nothing written).
        SchemaConflictError: concurrent alters kept clashing with these changes.
        SchemaChangeError: a rule refuses a change (nothing written).

    Storage:
        At most one new ``schema/schema-<N>`` per call (none when the data fits).
    """
    for attempt in range(_MAX_CONFLICTS):
        schema = manager.latest()
        if schema is None:
            raise SchemaMismatchError(f"table {identifier} has no schema")
        changes = schema_changes_for(schema, data)
        if not changes:
            return schema
        try:
            new = commit_schema_changes(
                manager, changes, has_snapshots=lambda: has_snapshots, identifier=identifier
            )
        except SchemaConflictError:
            if attempt == _MAX_CONFLICTS - 1:
                raise
            continue  # another writer changed the schema first: diff again against it
        logger.info(
            "merged the data's schema into %s: schema %d (%d change(s))",
            identifier, new.id, len(changes),
        )  # fmt: skip
        return new
    raise AssertionError("unreachable")
