"""Helpers shared by the Spark sink, batch write and read: table lookup, schema checks, sessions.

Private to :mod:`snaplake.spark`; the only other place (besides its siblings)
that may import pyspark.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from snaplake.catalog import FileSystemCatalog
from snaplake.errors import SchemaMismatchError
from snaplake.store.format.schema import TableSchema
from snaplake.table import Table
from snaplake.write.table_write import conform_to_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = [
    "arrow_schema_of",
    "check_spark_schema",
    "connect_mode",
    "is_connect",
    "resolve_table",
    "spark_schema_of",
    "with_missing_columns",
]

_CONNECT_SESSION_MODULE = "pyspark.sql.connect.session"


def is_connect(spark: Any) -> bool:
    """Return whether ``spark`` is a Spark Connect session (one without a ``sparkContext``).

    Checks the session's class without importing pyspark's Connect client: a
    process that never imported it (classic Spark, or a pyspark installed
    without the Connect dependencies grpcio, grpcio-status,
    googleapis-common-protos and zstandard) cannot hold a Connect session.

    Args:
        spark: A ``SparkSession`` (classic or Connect), e.g. ``df.sparkSession``.

    Source:
        pyspark's own split: ``pyspark.sql.connect.session.SparkSession`` is
        the Connect client's session class, classic sessions are
        ``pyspark.sql.session.SparkSession``.
    """
    module = sys.modules.get(_CONNECT_SESSION_MODULE)
    return module is not None and isinstance(spark, module.SparkSession)


def connect_mode() -> bool:
    """Return whether this Python process runs pyspark in Spark Connect mode.

    True once a Connect session was created here (``SparkSession.builder.remote(...)``),
    with ``SPARK_REMOTE`` set, or with the Connect-only ``pyspark-client``
    package; also inside the Python process where a Connect server runs
    ``foreachBatch`` functions.

    Source:
        ``pyspark.sql.utils.is_remote`` (pyspark >= 4.0).
    """
    from pyspark.sql.utils import is_remote

    return bool(is_remote())


def resolve_table(
    table_or_identifier: Table | str,
    *,
    warehouse: str | None,
    options: Mapping[str, str] | None,
) -> Table:
    """Return the :class:`Table` named by ``table_or_identifier``.

    Args:
        table_or_identifier: A :class:`Table`, or ``"database.table"`` in
            ``warehouse``.
        warehouse: Local path, ``file://`` or ``s3://bucket/prefix``; required
            with an identifier, ignored with a Table.
        options: Catalog options (``s3.*`` keys) used with ``warehouse``.

    Raises:
        ValueError: an identifier without a warehouse, or another type.
        TableNotFoundError: no such table (create it with
            ``FileSystemCatalog.create_table`` first).
    """
    if isinstance(table_or_identifier, Table):
        return table_or_identifier
    if isinstance(table_or_identifier, str):
        if warehouse is None:
            raise ValueError(
                f"table {table_or_identifier!r} is an identifier: pass warehouse=... "
                "(a local path or s3://bucket/prefix), or pass a Table"
            )
        return FileSystemCatalog(warehouse, options=options).get_table(table_or_identifier)
    raise ValueError(
        f"expected a snaplake Table or a 'database.table' string, got "
        f"{type(table_or_identifier).__name__}"
    )


def arrow_schema_of(spark_schema: StructType) -> pa.Schema:
    """Return the Arrow schema Spark's ``mapInArrow`` hands to Python for ``spark_schema``.

    Nullability is carried over from the Spark fields.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema, timezone="UTC")


def spark_schema_of(arrow_schema: pa.Schema, *, keep_nullability: bool = False) -> StructType:
    """Return the Spark schema for a table's Arrow schema.

    ``timestamp`` with a zone becomes ``TimestampType``, without one
    ``TimestampNTZType``. Every field is nullable (Spark's file readers force
    it anyway) unless ``keep_nullability``: then NOT NULL fields stay NOT
    NULL (snaplake's own data source, whose rows come from snaplake's
    readers, so that its rows can be written into NOT NULL columns).
    """
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructField, StructType

    spark = from_arrow_schema(arrow_schema, prefer_timestamp_ntz=True)
    return StructType(
        [
            StructField(f.name, f.dataType, nullable=f.nullable or not keep_nullability)
            for f in spark.fields
        ]
    )


def check_spark_schema(
    spark_schema: StructType, schema: TableSchema, *, check_nullability: bool
) -> None:
    """Refuse a DataFrame whose schema cannot be written into the table.

    Runs on the driver, before any Spark job: the column names must match
    (any order), each type must be storable without loss (the same rules as
    ``TableWrite.write_arrow``), and, with ``check_nullability``, a nullable
    Spark column may not feed a NOT NULL table field.

    Args:
        spark_schema: The DataFrame's schema.
        schema: The table schema the data will be written with.
        check_nullability: Refuse nullable columns for NOT NULL fields by
            schema alone. When false, the executors check the actual values
            and fail the batch on the first null.

    Raises:
        SchemaMismatchError: a missing, extra or incompatible column, or a
            nullable column for a NOT NULL field.

    Source:
        Iceberg's Spark writer (``check-nullability``, on by default) for the
        static nullability rule; Spark file sources mark every column
        nullable, so pass ``check_nullability=False`` (or filter with
        ``isNotNull``) to write them into NOT NULL fields.
    """
    try:
        arrow = arrow_schema_of(spark_schema)
    except (TypeError, ValueError) as exc:  # pyspark raises its own subclasses of these
        raise SchemaMismatchError(
            f"the DataFrame schema {spark_schema.simpleString()} has a type Arrow cannot carry: "
            f"{exc}"
        ) from exc
    conform_to_schema(arrow.empty_table(), schema)
    if not check_nullability:
        return
    expected = schema.arrow_schema
    nullable = [
        f.name
        for f in arrow
        if f.nullable
        and expected.get_field_index(f.name) >= 0
        and not expected.field(f.name).nullable
    ]
    if nullable:
        raise SchemaMismatchError(
            f"column(s) {nullable} are nullable in the DataFrame but NOT NULL in the table; "
            "filter them with isNotNull() (Spark then marks them non-nullable) or pass "
            "check_nullability=False to check the values on the executors instead"
        )


def with_missing_columns(df: DataFrame, schema: TableSchema, identifier: str) -> DataFrame:
    """Return ``df`` with a NULL column for every nullable table column it lacks.

    A stream keeps writing after ``alter_table`` added a nullable column: the
    new column is NULL in its rows, as in rows written before the alter.
    Names match exactly (as :func:`check_spark_schema` matches them).

    Args:
        df: The rows to write (classic or Spark Connect).
        schema: The table schema the rows will be written with.
        identifier: The table (for messages).

    Raises:
        SchemaMismatchError: a NOT NULL table column is missing (no value
            could be invented for it).

    Source:
        Delta Lake's write path (``mergeSchema`` or not): columns of the
        table that the DataFrame lacks are written as null; Iceberg's Spark
        writer does the same for optional columns.
    """
    from pyspark.sql import functions as f

    present = set(df.columns)
    missing = [field for field in schema.arrow_schema if field.name not in present]
    if not missing:
        return df
    required = [field.name for field in missing if not field.nullable]
    if required:
        raise SchemaMismatchError(
            f"the DataFrame lacks column(s) {required}, which are NOT NULL in table "
            f"{identifier}; add them (nullable columns the DataFrame lacks are written as NULL)"
        )
    spark_types = spark_schema_of(pa.schema(missing))
    return df.withColumns(
        {field.name: f.lit(None).cast(field.dataType) for field in spark_types.fields}
    )
