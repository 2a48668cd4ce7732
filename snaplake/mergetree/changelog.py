"""Changelog rows of the ``lookup`` and ``full-compaction`` producers (pure, vectorised).

A compaction that produces changelog knows, per key it merged, an optional
*before* record (full-compaction: the key's old top-level record; lookup: the
input record of the smallest level > 0, else the record a lookup finds in the
levels above the output) and the *after* record (the merge result).
:func:`changelog_rows` turns aligned before/after tables into changelog rows
with their ``_VALUE_KIND``:

============================  ============  ========================
before                        after         emitted
============================  ============  ========================
absent, or a retraction       add           ``+I(after)``
add                           retraction    ``-D(before)``
add                           add           ``-U(before)``, ``+U(after)``
============================  ============  ========================

The ``-U/+U`` pair is left out when ``changelog-producer.row-deduplicate``
finds the values equal (``...-ignore-fields`` not compared); ``first-row``
tables emit ``+I`` only. Before-images keep their old sequence number,
after-images carry the merged one. Rows are emitted in key order, ``-U``
before ``+U``.

Source: Paimon ``FullChangelogMergeFunctionWrapper``,
``LookupChangelogMergeFunctionWrapper``, ``ChangelogResult``,
``RecordEqualiser`` (row-deduplicate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.mergetree.kv import VALUE_KIND, RowKind

__all__ = ["ChangelogRules", "changelog_rows", "is_add", "values_equal"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangelogRules:
    """How before/after pairs become changelog rows.

    Attributes:
        row_deduplicate: ``changelog-producer.row-deduplicate``.
        compared: The value columns row-deduplicate compares (the table's value
            columns minus ``...-ignore-fields``).
        insert_only: ``first-row`` tables: only ``+I`` for keys without a before.
    """

    row_deduplicate: bool = False
    compared: tuple[str, ...] = ()
    insert_only: bool = False


def is_add(table: pa.Table) -> npt.NDArray[np.bool_]:
    """Rows of ``table`` whose ``_VALUE_KIND`` is ``+I`` or ``+U``."""
    kinds = np.asarray(table.column(VALUE_KIND).to_numpy(zero_copy_only=False), dtype=np.int8)
    add: npt.NDArray[np.bool_] = (kinds == RowKind.INSERT) | (kinds == RowKind.UPDATE_AFTER)
    return add


def values_equal(
    before: pa.Table, after: pa.Table, columns: Sequence[str]
) -> npt.NDArray[np.bool_]:
    """Row-wise equality of ``columns`` of two aligned tables (null equals null).

    Types Arrow cannot compare (nested ones) are compared as Python values.
    """
    equal = np.ones(after.num_rows, dtype=np.bool_)
    for name in columns:
        a, b = before.column(name), after.column(name)
        try:
            same = pc.fill_null(pc.equal(a, b), fill_value=False)
            both_null = pc.and_(pc.is_null(a), pc.is_null(b))
            col = np.asarray(pc.or_(same, both_null).to_numpy(zero_copy_only=False), dtype=bool)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            col = np.fromiter(
                (x == y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)),
                dtype=np.bool_,
                count=after.num_rows,
            )
        equal &= col
    return equal


def changelog_rows(
    before: pa.Table,
    has_before: npt.NDArray[np.bool_],
    after: pa.Table,
    rules: ChangelogRules,
    *,
    emit: npt.NDArray[np.bool_] | None = None,
) -> pa.Table:
    """The changelog of aligned (before, after) records of distinct keys in key order.

    Args:
        before: Before records (key/value layout), row ``i`` for key ``i``; rows
            where ``has_before`` is false are ignored.
        has_before: Whether key ``i`` has a before record.
        after: The merge results (same columns as ``before``).
        rules: Row-deduplicate and first-row behaviour.
        emit: Keys that produce changelog at all (``None``: every key).

    Returns:
        Changelog rows in ``after``'s columns, ``_VALUE_KIND`` set, in key order
        (``-U`` before ``+U`` of a key).

    Raises:
        ValueError: the inputs are not aligned.
    """
    n = after.num_rows
    if before.num_rows != n or has_before.shape != (n,):
        raise ValueError("changelog_rows: before, has_before and after must be aligned")
    if emit is None:
        emit = np.ones(n, dtype=np.bool_)
    before_add = has_before & is_add(before) if n else np.zeros(0, dtype=np.bool_)
    after_add = is_add(after) if n else np.zeros(0, dtype=np.bool_)
    insert = emit & ~before_add & after_add
    delete = emit & before_add & ~after_add
    update = emit & before_add & after_add
    if rules.insert_only:
        delete[:] = False
        update[:] = False
    elif rules.row_deduplicate and update.any():
        rows = np.flatnonzero(update)
        same = values_equal(before.take(pa.array(rows)), after.take(pa.array(rows)), rules.compared)
        update[rows[same]] = False
    # Row i contributes before-images (-D, -U) at 2i and after-images (+I, +U) at 2i + 1.
    b_rows = np.flatnonzero(delete | update)
    a_rows = np.flatnonzero(insert | update)
    b_kinds = np.where(delete[b_rows], RowKind.DELETE, RowKind.UPDATE_BEFORE).astype(np.int8)
    a_kinds = np.where(insert[a_rows], RowKind.INSERT, RowKind.UPDATE_AFTER).astype(np.int8)
    names = after.column_names
    b = before.select(names).cast(after.schema).take(pa.array(b_rows, type=pa.int64()))
    a = after.take(pa.array(a_rows, type=pa.int64()))
    out = pa.concat_tables([b, a])
    kinds = np.concatenate([b_kinds, a_kinds])
    order = np.argsort(np.concatenate([2 * b_rows, 2 * a_rows + 1]), kind="stable")
    i = out.schema.get_field_index(VALUE_KIND)
    out = out.set_column(i, out.schema.field(i), pa.array(kinds, type=out.schema.field(i).type))
    return out.take(pa.array(order, type=pa.int64()))
