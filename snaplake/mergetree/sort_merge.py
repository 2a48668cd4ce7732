"""The streaming k-way merge of sorted runs, vectorised (Paimon's ``SortMergeReader``).

Each run yields its rows in key order as bounded Arrow tables, and a key
occurs at most once per run. The merge keeps one buffered table per run.
Each step takes as bound the smallest "last key" among the buffers of runs
that may still yield rows, cuts every buffer at that bound (binary search on
the sorted keys), and folds the rows at or below it with the merge function:
all versions of those keys are buffered, since no run can yield them later.
At least one buffer is used up per step, so memory stays at one table per
run plus one merged chunk, whatever the runs hold.

Source: Paimon ``SortMergeReaderWithMinHeap`` / ``SortMergeReaderWithLoserTree``
(record-at-a-time heaps; here whole key ranges per step) and
``MergeSorter.mergeSort``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from snaplake.mergetree.groups import group_starts, merge_order
from snaplake.mergetree.kv import key_column
from snaplake.mergetree.merge_function import (
    LEVEL_COLUMN,
    DeduplicateMergeFunction,
    MergeSpec,
    fold,
)
from snaplake.mergetree.sorted_run import java_order_key

__all__ = ["SortMergeReader"]


def _row_key(columns: Sequence[pa.ChunkedArray], i: int) -> tuple[Any, ...]:
    return java_order_key(c[i].as_py() for c in columns)


def _fold(table: pa.Table, spec: MergeSpec) -> pa.Table:
    """:func:`fold`, with one ``take`` of the winning rows for a plain deduplicate table.

    Deduplicate (retractions kept, no lookup levels) keeps the last row of each
    key group in merge order, so only the ordering and key columns are permuted
    and the value columns are taken once, at the winners, instead of sorting
    the whole table and folding it.
    """
    function = spec.function
    if (
        not isinstance(function, DeduplicateMergeFunction)
        or function.ignore_delete
        or (spec.lookup and LEVEL_COLUMN in table.column_names)
    ):
        return fold(table, spec)
    order = merge_order(
        table, spec.key_names, sequence_fields=spec.sequence_fields,
        sequence_descending=spec.sequence_descending,
    )  # fmt: skip
    keys = table.select([key_column(k) for k in spec.key_names]).take(order)
    starts = group_starts(keys, spec.key_names)
    if len(starts) == table.num_rows:
        return table.take(order)
    last = np.append(starts[1:], table.num_rows) - 1
    return table.take(order.take(pa.array(last)))


def _count_at_most(table: pa.Table, key_names: Sequence[str], bound: tuple[Any, ...]) -> int:
    """Rows of the key-sorted ``table`` whose key is <= ``bound`` (a prefix; binary search).

    A single integer key without nulls is searched in NumPy (its order is the
    Java comparator's); other keys through :func:`java_order_key` per probe.
    """
    columns = [table.column(key_column(k)) for k in key_names]
    if len(columns) == 1 and pa.types.is_integer(columns[0].type) and columns[0].null_count == 0:
        values = columns[0].to_numpy()
        return int(np.searchsorted(values, bound[0][1], side="right"))
    lo, hi = 0, table.num_rows
    while lo < hi:
        mid = (lo + hi) // 2
        if _row_key(columns, mid) <= bound:
            lo = mid + 1
        else:
            hi = mid
    return lo


class SortMergeReader:
    """Merge sorted runs into one key-ordered stream of folded rows.

    Args:
        runs: One iterable of key-sorted key/value tables per sorted run
            (every table holds the same columns; a key occurs at most once
            per run).
        spec: Key columns, sequence ordering and the merge function.

    Yields:
        Key/value tables in key order, one row per key, retractions kept
        (callers drop them with :func:`drop_retracts` when reading).

    Raises:
        MergeFunctionError: the merge engine rejects a key's versions.
    """

    def __init__(self, runs: Sequence[Iterable[pa.Table]], spec: MergeSpec) -> None:
        self.runs = list(runs)
        self.spec = spec

    def __iter__(self) -> Iterator[pa.Table]:
        key_names = self.spec.key_names
        iterators = [iter(r) for r in self.runs]
        buffers: list[pa.Table | None] = [None] * len(iterators)
        done = [False] * len(iterators)
        while True:
            for i, it in enumerate(iterators):
                while not done[i]:
                    current = buffers[i]
                    if current is not None and current.num_rows > 0:
                        break
                    try:
                        buffers[i] = next(it)
                    except StopIteration:
                        done[i] = True
            live = [i for i, b in enumerate(buffers) if b is not None and b.num_rows > 0]
            if not live:
                return
            open_runs = [i for i in live if not done[i]]
            bound: tuple[Any, ...] | None = None
            for i in open_runs:
                table = buffers[i]
                assert table is not None
                columns = [table.column(key_column(k)) for k in key_names]
                last = _row_key(columns, table.num_rows - 1)
                if bound is None or last < bound:
                    bound = last
            parts: list[pa.Table] = []
            for i in live:
                table = buffers[i]
                assert table is not None
                count = table.num_rows if bound is None else _count_at_most(table, key_names, bound)
                if count:
                    parts.append(table.slice(0, count))
                    buffers[i] = table.slice(count)
            if len(parts) == 1:
                yield parts[0]  # one run: keys are unique, nothing to merge
            elif parts:
                yield _fold(pa.concat_tables(parts, promote_options="none"), self.spec)
