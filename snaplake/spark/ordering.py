"""Order the versions of a primary key in a Spark write, or refuse a write that cannot.

A primary-key writer numbers each bucket's rows in the order they arrive, and
the highest ``_SEQUENCE_NUMBER`` of a key wins the merge. Spark hands rows over
in no defined order (file sources pack splits by size, shuffles concatenate map
outputs as they are fetched), so two versions of one key in one Spark write
would be merged by chance. A write therefore needs one of:

* ``order_by`` columns: after the repartition by (partition, bucket), each task
  sorts its rows by key, then ``order_by``, then retraction first (a ``-U``
  before the other kinds of an equal order value: an update's before-image
  precedes its after-image), and the writer numbers them in that order. Rows
  of one key that still tie must be identical; a ``null`` order value is
  refused.
* the table's ``sequence.field``, which orders versions on every merge; the
  write sorts nothing.
* at most one version per key: each task sorts its rows by key and refuses the
  write at the first key with two different rows.

An ``aggregation`` table whose functions ignore row order (``sum``, ``min``,
``max``, ``bool_and``, ``bool_or``: equal up to floating-point rounding) takes
many rows per key without any order.

Refusals raise :class:`~snaplake.errors.AmbiguousOrderError` in the task; the
driver re-raises it, after the job's files were deleted, and commits nothing.

Source: Paimon's ``sequence.field`` (``UserDefinedSeqComparator``) and its
Flink sink's rule that a bucket's input arrives in changelog order (one
subtask per bucket, records in their input order: ``RowDataStoreWriteOperator``);
Delta's ``MERGE`` refusal of several source rows for one target row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.errors import AmbiguousOrderError, SchemaMismatchError
from snaplake.filestore import FileStore
from snaplake.mergetree.kv import parse_row_kinds
from snaplake.mergetree.merge_function import AggregateMergeFunction, merge_function_for
from snaplake.store.format.primary_key import PRIMARY_KEY_FUNCTION
from snaplake.store.format.schema import TableSchema
from snaplake.write.kv_write import dropped_row_kinds

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["ORDER_FREE_FUNCTIONS", "VersionCheck", "normalize_order_by", "plan_version_order"]

ORDER_FREE_FUNCTIONS: Final = frozenset(
    {"sum", "min", "max", "bool_and", "bool_or", PRIMARY_KEY_FUNCTION}
)
"""Aggregate functions whose result does not depend on the order of a key's rows."""

_UPDATE_BEFORE: Final = 1

_FIX = (
    "pass order_by=<column(s)> that order the versions (e.g. the change log's sequence "
    "number) to SnaplakeSink / snaplake.spark.write, set the table option 'sequence.field', "
    "or keep one row per key in the DataFrame"
)


def normalize_order_by(order_by: str | Sequence[str] | None) -> tuple[str, ...]:
    """Return ``order_by`` as a tuple of column names (empty for ``None``).

    Raises:
        ValueError: an empty list, an empty or repeated name.
    """
    if order_by is None:
        return ()
    names: tuple[object, ...] = (order_by,) if isinstance(order_by, str) else tuple(order_by)
    if not names or any(not isinstance(n, str) or not n for n in names):
        raise ValueError(f"order_by must name one or more columns, got {order_by!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"order_by repeats a column: {list(names)}")
    return tuple(str(n) for n in names)


@dataclass(frozen=True, slots=True)
class VersionCheck:
    """How one Spark write orders (or refuses) several versions of a primary key.

    Planned on the driver by :func:`plan_version_order`; :meth:`sort` runs on
    the driver, :meth:`new_checker` on the executors (picklable).

    Attributes:
        identifier: The table (for messages).
        key_columns: Partition keys, then primary keys: rows equal on all of
            them are versions of one key.
        order_by: Columns ordering a key's versions (empty: one version per
            key, identical repeats aside).
        kind_column: The column holding row kinds (``row_kind_column`` or the
            table's ``rowkind.field``), ``None`` when every row is ``+I``.
        dropped_kinds: Kinds the writer drops (``ignore-delete``,
            ``ignore-update-before``); such rows are no versions.
    """

    identifier: str
    key_columns: tuple[str, ...]
    order_by: tuple[str, ...]
    kind_column: str | None
    dropped_kinds: frozenset[int]

    def sort(self, df: DataFrame) -> DataFrame:
        """Sort each Spark partition of ``df`` by key, ``order_by``, then ``-U`` first.

        ``df`` must already be partitioned so that every key lies in one
        partition (the repartition by bucket).
        """
        from pyspark.sql import functions as f
        from pyspark.sql.types import IntegralType, StringType

        orders: list[Column] = [f.col(_quote(c)) for c in (*self.key_columns, *self.order_by)]
        if self.order_by and self.kind_column is not None:
            kind = f.col(_quote(self.kind_column))
            dtype = df.schema[self.kind_column].dataType
            before = None
            if isinstance(dtype, StringType):
                before = kind == "-U"
            elif isinstance(dtype, IntegralType):
                before = kind == _UPDATE_BEFORE
            if before is not None:
                orders.append(f.when(before, 0).otherwise(1))
        return df.sortWithinPartitions(*orders)

    def new_checker(self) -> VersionChecker:
        """A checker for the rows of one task, in the order :meth:`sort` gave them."""
        return VersionChecker(self)


class VersionChecker:
    """Refuses the rows of one task, batch by batch, where versions of a key are unordered.

    The rows must arrive sorted as :meth:`VersionCheck.sort` sorts them; the
    last row of a batch is kept to compare with the first of the next.
    """

    def __init__(self, check: VersionCheck) -> None:
        self.check = check
        self._last: pa.Table | None = None

    def __call__(self, batch: pa.RecordBatch) -> None:
        """Check the next batch of the task's rows.

        Raises:
            AmbiguousOrderError: two different rows of one key and no
                ``order_by``; two different rows of one key that tie on
                ``order_by`` (and on ``-U`` first); a null ``order_by`` value.
            SchemaMismatchError: an unknown or null row kind.
        """
        check = self.check
        table = pa.Table.from_batches([batch])
        if check.kind_column is not None and check.dropped_kinds:
            kinds = parse_row_kinds(table.column(check.kind_column), table.num_rows)
            table = table.filter(pa.array(~np.isin(kinds, list(check.dropped_kinds))))
        for name in check.order_by:
            nulls = table.column(name).null_count
            if nulls:
                raise AmbiguousOrderError(
                    f"order_by column {name!r} is null in {nulls} row(s) written to "
                    f"{check.identifier}: every row needs an order value (fill it, or filter "
                    "those rows out)"
                )
        if table.num_rows == 0:
            return
        rows = table if self._last is None else pa.concat_tables([self._last, table])
        self._last = table.slice(table.num_rows - 1)
        if rows.num_rows < 2:
            return
        tied = _equal_to_previous(rows, check.key_columns)
        if check.order_by:
            tied &= _equal_to_previous(rows, check.order_by)
            if check.kind_column is not None:
                before = _update_before(rows.column(check.kind_column), rows.num_rows)
                tied &= before[1:] == before[:-1]
        for i in (np.flatnonzero(tied) + 1).tolist():
            previous, current = rows.slice(i - 1, 1).to_pylist()[0], rows.slice(i, 1).to_pylist()[0]
            if previous != current:
                raise self._error(previous, current)

    def _error(self, previous: dict[str, object], current: dict[str, object]) -> Exception:
        check = self.check
        key = {c: current[c] for c in check.key_columns}
        if not check.order_by:
            return AmbiguousOrderError(
                f"the rows written to {check.identifier} hold several versions of the key {key} "
                "and nothing orders them: Spark hands rows over in no defined order, so an older "
                f"version could overwrite a newer one. To fix it, {_FIX}"
            )
        order = {c: current[c] for c in check.order_by}
        return AmbiguousOrderError(
            f"the rows written to {check.identifier} hold different versions of the key {key} "
            f"with equal order_by values {order}, so their order is undefined: add a column to "
            "order_by that tells them apart (only a -U row sorts before the other kinds of its "
            "order value), or keep one of them"
        )


def plan_version_order(
    store: FileStore,
    *,
    identifier: str,
    order_by: tuple[str, ...],
    kind_column: str | None,
    data_columns: Sequence[str],
    data_types: Sequence[str],
) -> VersionCheck | None:
    """Decide how a Spark write into ``store`` orders several versions of a key.

    Args:
        store: The table's FileStore in the schema the write uses (its
            ``key_fields`` say whether rows have keys, hence versions).
        identifier: The table (for messages).
        order_by: Normalized ``order_by`` columns (empty: none given).
        kind_column: The write's ``row_kind_column`` (``None``: the table's
            ``rowkind.field``, if any).
        data_columns: The DataFrame's column names.
        data_types: Spark's ``simpleString`` of each column's type.

    Returns:
        ``None`` when nothing needs sorting or checking (an append table; a
        ``sequence.field`` table without ``order_by``; an aggregation table
        whose functions all ignore order, without ``order_by``), else the
        check to run.

    Raises:
        SchemaMismatchError: ``order_by`` on an append table, an ``order_by``
            column the DataFrame lacks, or one of a nested type.
    """
    schema = store.schema
    if not store.key_fields:
        if order_by:
            raise SchemaMismatchError(
                "order_by orders the versions of a primary key: it needs a primary-key table"
            )
        return None
    types = dict(zip(data_columns, data_types, strict=True))
    for name in order_by:
        dtype = types.get(name)
        if dtype is None:
            raise SchemaMismatchError(
                f"order_by column {name!r} is not a column of the DataFrame; it has "
                f"{list(data_columns)}"
            )
        if dtype.startswith(("struct<", "array<", "map<")):
            raise SchemaMismatchError(
                f"order_by column {name!r} has the nested type {dtype}; order by atomic columns"
            )
    opts = schema.core_options
    if not order_by and (opts.sequence_field or _order_free(schema)):
        return None
    keys = (*schema.partition_keys, *store.key_fields)  # the primary key, partition keys first
    return VersionCheck(
        identifier=identifier,
        key_columns=keys,
        order_by=order_by,
        kind_column=kind_column or opts.rowkind_field,
        dropped_kinds=dropped_row_kinds(opts),
    )


def _order_free(schema: TableSchema) -> bool:
    """Whether the table's merge gives the same row whatever the order of a key's versions."""
    function = merge_function_for(schema).function
    return isinstance(function, AggregateMergeFunction) and all(
        f in ORDER_FREE_FUNCTIONS for f in function.functions.values()
    )


def _quote(name: str) -> str:
    """``name`` as a Spark column reference (backticks: dots are no struct access)."""
    return "`" + name.replace("`", "``") + "`"


def _equal_to_previous(rows: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """``out[i]``: row ``i + 1`` equals row ``i`` on ``columns`` (null equals null)."""
    out = np.ones(rows.num_rows - 1, dtype=np.bool_)
    for name in columns:
        col = rows.column(name).combine_chunks()
        a, b = col.slice(0, len(col) - 1), col.slice(1)
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        same = pc.fill_null(pc.or_kleene(pc.equal(a, b), both_null), fill_value=False)
        out &= np.asarray(same.to_numpy(zero_copy_only=False), dtype=np.bool_)
    return out


def _update_before(kinds: pa.ChunkedArray, num_rows: int) -> np.ndarray:
    """True for ``-U`` rows."""
    return np.asarray(parse_row_kinds(kinds, num_rows) == _UPDATE_BEFORE)
