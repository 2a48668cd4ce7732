"""Sorting key/value rows and finding the groups of equal keys (vectorised).

Versions of one key are ordered by (key, ``sequence.field`` columns,
``_SEQUENCE_NUMBER``, retract before add), as Paimon's merge readers order
them; a group is a maximal run of rows with equal keys in that order.

Source: Paimon ``SortMergeReaderWithMinHeap`` (the comparator),
``KeyComparatorSupplier`` (keys compare field by field, nulls first) and
``UserDefinedSeqComparator`` (``sequence.field``, ``sequence.field.sort-order``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.mergetree.kv import SEQUENCE_NUMBER, VALUE_KIND, RowKind, key_column

__all__ = [
    "Groups",
    "float_sort_key",
    "group_starts",
    "merge_order",
    "sort_indices_nulls_first",
    "sort_key_value",
    "take_or_null",
]


def float_sort_key(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Unsigned integers ordered like Java's ``Float.compare`` / ``Double.compare``.

    ``-0.0`` sorts before ``+0.0`` and every NaN after ``+inf``; nulls stay null.
    """
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    width = arr.type.bit_width
    values = np.asarray(arr.fill_null(0).to_numpy(zero_copy_only=False))
    bits = values.view(np.dtype(f"uint{width}"))
    sign = np.array(1 << (width - 1), dtype=bits.dtype)
    keys = np.where(bits & sign, ~bits, bits ^ sign)
    keys[np.isnan(values)] = np.iinfo(bits.dtype).max
    return pa.array(keys, mask=np.asarray(arr.is_null().to_numpy(zero_copy_only=False)))


def sort_key_value(
    table: pa.Table,
    key_names: Sequence[str],
    *,
    sequence_fields: Sequence[str] = (),
    sequence_descending: bool = False,
    runs: npt.NDArray[np.int64] | None = None,
) -> pa.Table:
    """Sort key/value rows into merge order (``table.take`` of :func:`merge_order`).

    Args:
        table: Key/value rows (``_KEY_*``, ``_SEQUENCE_NUMBER``, ``_VALUE_KIND``
            and value columns, including ``sequence_fields``).
        key_names: Trimmed primary-key columns.
        sequence_fields: ``sequence.field`` columns.
        sequence_descending: ``sequence.field.sort-order = descending``.
        runs: Several tables sorted at once: the (ascending) number of the
            table each row comes from; rows of different runs never mix, so
            each run keeps its rows and its place (``None`` = one run).

    Returns:
        The rows sorted by run, key (nulls first), sequence fields, sequence
        number, then retractions before additions.
    """
    if table.num_rows <= 1:
        return table
    return table.take(
        merge_order(
            table, key_names, sequence_fields=sequence_fields,
            sequence_descending=sequence_descending, runs=runs,
        )
    )  # fmt: skip


def merge_order(
    table: pa.Table,
    key_names: Sequence[str],
    *,
    sequence_fields: Sequence[str] = (),
    sequence_descending: bool = False,
    runs: npt.NDArray[np.int64] | None = None,
) -> pa.Array:
    """Row indices that put ``table`` into merge order; see :func:`sort_key_value`.

    Only the ordering columns are read, so a caller that needs a few rows of
    the sorted table takes just those (one ``take`` instead of two). A single
    integer key without nulls (no ``sequence.field``, no ``runs``) whose key and
    sequence ranges fit is sorted as one int64 (key, sequence, add) code with
    NumPy's stable sort, which merges already-sorted runs in O(n log runs); the
    order is the same.
    """
    if runs is None and not sequence_fields and len(key_names) == 1:
        fast = _int_key_order(table, key_column(key_names[0]))
        if fast is not None:
            return fast
    columns: list[pa.Array | pa.ChunkedArray] = []
    orders: list[str] = []
    if runs is not None:
        columns.append(pa.array(runs))
        orders.append("ascending")
    for k in key_names:
        columns.append(table.column(key_column(k)))
        orders.append("ascending")
    for f in sequence_fields:
        col = table.column(f)
        if pa.types.is_floating(col.type):
            col = float_sort_key(col)
        columns.append(col)
        orders.append("descending" if sequence_descending else "ascending")
    columns.append(table.column(SEQUENCE_NUMBER))
    orders.append("ascending")
    columns.append(pc.cast(_is_add(table), pa.int8()))
    orders.append("ascending")
    names = [str(i) for i in range(len(columns))]
    return sort_indices_nulls_first(pa.table(columns, names=names), orders)


def _is_add(table: pa.Table) -> pa.ChunkedArray:
    kinds = table.column(VALUE_KIND)
    return pc.or_(pc.equal(kinds, RowKind.INSERT), pc.equal(kinds, RowKind.UPDATE_AFTER))


def _int_key_order(table: pa.Table, key: str) -> pa.Array | None:
    """The merge order of a single integer key as one stable int64 sort, or ``None``.

    ``None`` when the key has nulls, is not an integer, or (key range) x
    (sequence range) x 2 does not fit in 63 bits.
    """
    column = table.column(key)
    n = table.num_rows
    if n == 0 or not pa.types.is_integer(column.type) or column.null_count:
        return None
    keys = np.asarray(column.to_numpy(), dtype=np.int64)
    seq = np.asarray(table.column(SEQUENCE_NUMBER).to_numpy(), dtype=np.int64)
    k_lo, k_hi = int(keys.min()), int(keys.max())
    s_lo, s_hi = int(seq.min()), int(seq.max())
    span = s_hi - s_lo + 1
    if (k_hi - k_lo + 1) * span * 2 >= 1 << 63:
        return None
    add = np.asarray(_is_add(table).to_numpy(), dtype=np.int64)
    code = ((keys - k_lo) * span + (seq - s_lo)) * 2 + add
    return pa.array(np.argsort(code, kind="stable"))


_PER_KEY_NULL_PLACEMENT = int(pa.__version__.split(".")[0]) >= 25


def sort_indices_nulls_first(table: pa.Table, orders: Sequence[str]) -> pa.Array:
    """``pc.sort_indices`` over every column of ``table`` in order, nulls first."""
    names = table.column_names
    if _PER_KEY_NULL_PLACEMENT:
        keys = [(n, o, "at_start") for n, o in zip(names, orders, strict=True)]
        return pc.sort_indices(table, sort_keys=keys)
    return pc.sort_indices(
        table, sort_keys=list(zip(names, orders, strict=True)), null_placement="at_start"
    )


def group_starts(
    table: pa.Table, key_names: Sequence[str], runs: npt.NDArray[np.int64] | None = None
) -> npt.NDArray[np.int64]:
    """Start offsets of the groups of equal keys in a sorted key/value table.

    Two nulls are equal; a null and a value are not. ``runs`` (the run of
    each row, see :func:`sort_key_value`): a group never spans two runs.
    """
    n = table.num_rows
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(n, dtype=np.bool_)
    change[0] = True
    if runs is not None:
        change[1:] = runs[1:] != runs[:-1]
    for k in key_names:
        col = table.column(key_column(k))
        a, b = col.slice(1), col.slice(0, n - 1)
        a_null, b_null = pc.is_null(a), pc.is_null(b)
        differs = pc.if_else(
            pc.or_(a_null, b_null),
            pc.xor(a_null, b_null),
            pc.fill_null(pc.not_equal(a, b), fill_value=True),
        )
        change[1:] |= np.asarray(differs.to_numpy(zero_copy_only=False), dtype=np.bool_)
    return np.flatnonzero(change).astype(np.int64)


@dataclass(frozen=True)
class Groups:
    """Row groups of a sorted chunk: rows ``[starts[g], ends[g])`` share one key.

    Attributes:
        starts: Start offset of each group (int64, ascending, first is 0).
        num_rows: Rows in the chunk.
    """

    starts: npt.NDArray[np.int64]
    num_rows: int

    @cached_property
    def ends(self) -> npt.NDArray[np.int64]:
        """End offset (exclusive) of each group."""
        return np.append(self.starts[1:], self.num_rows).astype(np.int64)

    @cached_property
    def sizes(self) -> npt.NDArray[np.int64]:
        """Rows per group."""
        return self.ends - self.starts

    @cached_property
    def gid(self) -> npt.NDArray[np.int64]:
        """Group number of each row."""
        return np.repeat(np.arange(len(self.starts), dtype=np.int64), self.sizes)

    @cached_property
    def rows(self) -> npt.NDArray[np.int64]:
        """``arange(num_rows)``."""
        return np.arange(self.num_rows, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.starts)

    def last_where(self, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """Per group, the last row where ``mask`` holds, or -1."""
        if self.num_rows == 0:
            return np.zeros(0, dtype=np.int64)
        return np.maximum.reduceat(np.where(mask, self.rows, -1), self.starts)

    def first_where(self, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """Per group, the first row where ``mask`` holds, or -1."""
        if self.num_rows == 0:
            return np.zeros(0, dtype=np.int64)
        first = np.minimum.reduceat(np.where(mask, self.rows, self.num_rows), self.starts)
        return np.where(first < self.num_rows, first, -1)

    def any(self, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """Per group, whether ``mask`` holds for some row."""
        if self.num_rows == 0:
            return np.zeros(0, dtype=np.bool_)
        return np.add.reduceat(mask.astype(np.int64), self.starts) > 0

    def rank_rows(self) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
        """Yield, for k = 0, 1, ...: (groups with more than k rows, their k-th row).

        Lets an order-dependent fold run group-parallel: step k updates every
        group's accumulator with its k-th row. Work is O(rows) in total, in
        (largest group size) NumPy steps.
        """
        order = np.argsort(-self.sizes, kind="stable")
        ascending = np.sort(self.sizes)
        total = len(ascending)
        k = 0
        while True:
            m = total - int(np.searchsorted(ascending, k, side="right"))
            if m == 0:
                return
            active = order[:m]
            yield active, self.starts[active] + k
            k += 1


def take_or_null(column: pa.Array | pa.ChunkedArray, indices: npt.NDArray[np.int64]) -> pa.Array:
    """``column.take(indices)`` with null where an index is negative."""
    mask = indices < 0
    safe = np.where(mask, 0, indices)
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(arr) == 0:
        return pa.nulls(len(indices), type=arr.type)
    return arr.take(pa.array(safe, mask=mask if mask.any() else None))
