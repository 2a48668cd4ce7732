"""Value stats of many row ranges at once (one hash aggregation for all of them).

A writer flushing many small buckets writes one small file per bucket;
:func:`grouped_value_stats` gives each file the ``_VALUE_STATS``
:func:`~snaplake.store.format.stats.compute_value_stats` would give it (the
same bounds, the same bytes), with one Arrow ``group_by`` over every column
instead of per-file, per-column kernel calls.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.errors import SchemaMismatchError, SnaplakeError
from snaplake.store.format.binary_row import Timestamp, encode_binary_rows
from snaplake.store.format.stats import (  # the bounding rules this module shares
    _BYTES_ROOTS,
    _EPOCH_DATE,
    _INT_ROOTS,
    _STRING_ROOTS,
    DEFAULT_STATS_MODE,
    SimpleStatsParts,
    _encode_parts,
    _parse_mode,
    _plain_column,
    compute_value_stats,
    truncate_max_bytes,
    truncate_max_string,
    truncate_min,
)
from snaplake.store.format.types import DataType, TypeRoot

__all__ = ["grouped_value_stats"]


def grouped_value_stats(
    data: pa.Table,
    sizes: Sequence[int],
    types: Sequence[DataType],
    *,
    stats_mode: str = DEFAULT_STATS_MODE,
) -> list[SimpleStatsParts]:
    """The ``_VALUE_STATS`` of consecutive row ranges of ``data``, all in one pass.

    Range ``g`` holds ``sizes[g]`` rows after those of the ranges before it
    (``sum(sizes) == data.num_rows``). Each result equals
    :func:`compute_value_stats` of that range's slice (the same bounds, the
    same bytes); one hash aggregation over every column replaces the
    per-range, per-column kernel calls (a writer flushing many small
    buckets: one file each).

    Raises:
        SchemaMismatchError: ``types`` and ``data`` have different column counts.
        InvalidOptionError: ``stats_mode`` is not a valid mode.

    Source:
        As :func:`compute_value_stats`.
    """
    if data.num_columns != len(types):
        raise SchemaMismatchError(f"{data.num_columns} columns but {len(types)} types")
    mode = _parse_mode(stats_mode)
    offsets = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
    if len(sizes) <= 1 or mode in ("none", "counts") or min(sizes) <= 0:
        return [
            compute_value_stats(data.slice(s, e - s), types, stats_mode=stats_mode)
            for s, e in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)
        ]
    truncate = mode if isinstance(mode, int) else None
    columns: dict[str, Any] = {"g": pa.array(np.repeat(np.arange(len(sizes)), sizes))}
    aggregations: list[tuple[Any, ...]] = []
    bounded: list[tuple[int, Callable[[Any, Any], tuple[Any, Any]]]] = []
    for i, dtype in enumerate(types):
        column = data.column(i)
        columns[f"c{i}"] = column
        aggregations.append((f"c{i}", "count", pc.CountOptions(mode="only_null")))
        prepared = _grouped_column(column, dtype, truncate)
        if prepared is None:
            continue
        values, finish = prepared
        columns[f"v{i}"] = values
        aggregations.append((f"v{i}", "min_max"))
        if dtype.root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
            columns[f"n{i}"] = pc.is_nan(values)
            aggregations.append((f"n{i}", "any"))
        bounded.append((i, finish))
    try:
        result = pa.table(columns).group_by("g", use_threads=False).aggregate(aggregations)
    except pa.ArrowNotImplementedError:  # a type without a hash kernel: range by range
        return [
            compute_value_stats(data.slice(s, e - s), types, stats_mode=stats_mode)
            for s, e in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)
        ]
    result = result.take(pc.sort_indices(result.column("g")))
    n = len(types)
    nulls = [result.column(f"c{i}_count").to_pylist() for i in range(n)]
    mins: list[list[object]] = [[None] * n for _ in sizes]
    maxs: list[list[object]] = [[None] * n for _ in sizes]
    for i, finish in bounded:
        both = result.column(f"v{i}_min_max")
        lows = pc.struct_field(both, "min").to_pylist()
        highs = pc.struct_field(both, "max").to_pylist()
        nans = result.column(f"n{i}_any").to_pylist() if f"n{i}" in columns else None
        for g, (lo, hi) in enumerate(zip(lows, highs, strict=True)):
            if lo is None or hi is None or (nans is not None and nans[g]):
                continue
            try:
                lo, hi = finish(lo, hi)
            except (pa.ArrowException, OverflowError, ValueError):
                continue
            if lo is not None and hi is not None:
                mins[g][i], maxs[g][i] = lo, hi
    counts = [tuple(nulls[i][g] for i in range(n)) for g in range(len(sizes))]
    try:
        lows, highs = encode_binary_rows(mins, types), encode_binary_rows(maxs, types)
    except SnaplakeError:  # rare: a bound that does not encode; range by range drops it
        return [_encode_parts(mins[g], maxs[g], counts[g], types) for g in range(len(sizes))]
    return [
        SimpleStatsParts(min_values=lo, max_values=hi, null_counts=c)
        for lo, hi, c in zip(lows, highs, counts, strict=True)
    ]


def _same(lo: Any, hi: Any) -> tuple[Any, Any]:
    return lo, hi


def _signed_zeros(lo: Any, hi: Any) -> tuple[Any, Any]:
    return (-0.0 if lo == 0 else lo), (0.0 if hi == 0 else hi)


def _grouped_column(
    column: pa.ChunkedArray, dtype: DataType, truncate: int | None
) -> tuple[Any, Callable[[Any, Any], tuple[Any, Any]]] | None:
    """What to aggregate for column bounds and how to finish them, as :func:`_column_bounds`.

    ``None``: the column gets no bounds.
    """
    root = dtype.root
    if root is TypeRoot.BOOLEAN or root in _INT_ROOTS or root in (TypeRoot.DECIMAL, TypeRoot.TIME):
        return column, _same
    if root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        return column, _signed_zeros
    if root is TypeRoot.DATE:
        return pc.cast(column, pa.int32()), lambda lo, hi: (
            _EPOCH_DATE + dt.timedelta(days=lo),
            _EPOCH_DATE + dt.timedelta(days=hi),
        )
    if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        if (dtype.precision or 0) > 6 or not pa.types.is_timestamp(column.type):
            return None
        unit = column.type.unit
        return pc.cast(column, pa.int64()), lambda lo, hi: (
            Timestamp.from_epoch(lo, unit=unit),
            Timestamp.from_epoch(hi, unit=unit),
        )
    if root in _STRING_ROOTS or root in _BYTES_ROOTS:
        if truncate is None:
            return _plain_column(column), _same
        cut = truncate_max_string if root in _STRING_ROOTS else truncate_max_bytes
        length = truncate

        def finish(lo: Any, hi: Any) -> tuple[Any, Any]:
            top = cut(hi, length)
            return (None, None) if top is None else (truncate_min(lo, length), top)

        return _plain_column(column), finish
    return None
