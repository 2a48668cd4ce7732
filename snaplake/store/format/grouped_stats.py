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
    starts = offsets[:-1]
    n = len(types)
    nulls = [_null_counts(data.column(i), starts, sizes) for i in range(n)]
    # Per column: the groups' (lows, highs), a group's pair None-free or skipped.
    bounds: dict[int, tuple[list[Any], list[Any], list[bool]]] = {}
    columns: dict[str, Any] = {}
    aggregations: list[tuple[Any, ...]] = []
    finishes: dict[int, Callable[[Any, Any], tuple[Any, Any]]] = {}
    for i, dtype in enumerate(types):
        prepared = _grouped_column(data.column(i), dtype, truncate)
        if prepared is None:
            continue
        values, finishes[i] = prepared
        found = _numeric_bounds(values, starts)
        if found is not None:
            bounds[i] = found
            continue
        columns[f"v{i}"] = values
        aggregations.append((f"v{i}", "min_max"))
    if aggregations:  # strings, decimals, booleans, times: one hash aggregation for all
        columns["g"] = pa.array(np.repeat(np.arange(len(sizes)), sizes))
        try:
            result = pa.table(columns).group_by("g", use_threads=False).aggregate(aggregations)
        except pa.ArrowNotImplementedError:  # a type without a hash kernel: range by range
            return [
                compute_value_stats(data.slice(s, e - s), types, stats_mode=stats_mode)
                for s, e in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)
            ]
        result = result.take(pc.sort_indices(result.column("g")))
        for name, _ in aggregations:
            both = result.column(f"{name}_min_max")
            lows = pc.struct_field(both, "min").to_pylist()
            highs = pc.struct_field(both, "max").to_pylist()
            bounds[int(name[1:])] = (lows, highs, [False] * len(sizes))
    mins: list[list[object]] = [[None] * n for _ in sizes]
    maxs: list[list[object]] = [[None] * n for _ in sizes]
    for i, (lows, highs, skip) in bounds.items():
        finish = finishes[i]
        for g, (lo, hi) in enumerate(zip(lows, highs, strict=True)):
            if lo is None or hi is None or skip[g]:
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


def _null_counts(column: pa.ChunkedArray, starts: np.ndarray, sizes: Sequence[int]) -> list[int]:
    """Nulls per range of ``column`` (ranges start at ``starts``)."""
    if column.null_count == 0:
        return [0] * len(sizes)
    valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=np.int64)
    counts: list[int] = (
        np.asarray(sizes, dtype=np.int64) - np.add.reduceat(valid, starts)
    ).tolist()
    return counts


def _numeric_bounds(
    values: Any, starts: np.ndarray
) -> tuple[list[Any], list[Any], list[bool]] | None:
    """Per range: min, max (``None`` with no value) and "holds a NaN", by numpy ``reduceat``.

    For integer and floating columns only (``None`` otherwise): the bounds
    Arrow's ``min_max`` gives (nulls skipped, NaN-holding ranges flagged, as
    :func:`grouped_value_stats` skips them), as Python ints and floats.
    """
    kind = values.type
    top: float
    bottom: float
    if pa.types.is_integer(kind):
        dtype = np.dtype(kind.to_pandas_dtype())
        top, bottom = np.iinfo(dtype).max, np.iinfo(dtype).min
    elif pa.types.is_floating(kind) and not pa.types.is_float16(kind):
        dtype = np.dtype(kind.to_pandas_dtype())
        top, bottom = np.inf, -np.inf
    else:
        return None
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    # The value buffer as it is (null slots hold anything; they are masked below).
    raw = np.frombuffer(array.buffers()[1], dtype=dtype, count=array.offset + len(array))
    raw = raw[array.offset :]
    valid = None
    if array.null_count:
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        lows = np.minimum.reduceat(np.where(valid, raw, top), starts)
        highs = np.maximum.reduceat(np.where(valid, raw, bottom), starts)
    else:
        lows = np.minimum.reduceat(raw, starts)
        highs = np.maximum.reduceat(raw, starts)
    if dtype.kind == "f":
        nan = np.isnan(raw) if valid is None else np.isnan(raw) & valid
        skip: list[bool] = np.logical_or.reduceat(nan, starts).tolist()
    else:
        skip = [False] * len(starts)
    low_list, high_list = lows.tolist(), highs.tolist()
    if valid is not None:
        filled = np.logical_or.reduceat(valid, starts)
        for g in np.flatnonzero(~filled).tolist():
            low_list[g] = high_list[g] = None
    return low_list, high_list, skip


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
