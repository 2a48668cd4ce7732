"""Column statistics of data files and partition statistics of manifests (SimpleStats).

A data file's ``_VALUE_STATS`` hold one min row, one max row (BinaryRows over
the table's columns) and one null count per column; a manifest's
``_PARTITION_STATS`` hold the same over the partitions of its entries.
Readers prune files with them, so a bound that is too tight loses rows: when
a column has no reliable bound, its min and max are written as null, which
every reader treats as "unknown".

Value stats follow Paimon's default ``metadata.stats-mode = truncate(16)``:

* strings keep their first 16 code points as min; the max is cut to 16 code
  points and its last code point incremented (trying earlier positions if
  that overflows); if no upper bound exists both min and max are null;
* bytes are handled the same way with bytes and ``0xFF`` as the overflow;
* FLOAT/DOUBLE columns containing NaN get null min/max (Java's Parquet path
  leaves NaN handling to parquet-java; null is strictly safer), and a zero
  bound is widened to ``-0.0`` (min) / ``+0.0`` (max) so both orderings of
  signed zeros stay inside the bounds;
* TIMESTAMP(7..9), nested types, VARIANT and BLOB get null min/max, as in
  Java's ``ParquetSimpleStatsExtractor``; null counts are exact for every column.

This module imports only :mod:`snaplake.errors`, :mod:`snaplake.store.format.types`
and :mod:`snaplake.store.format.binary_row`.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, AnyStr

import pyarrow as pa
import pyarrow.compute as pc

from snaplake.errors import InvalidOptionError, SchemaMismatchError, SnaplakeError
from snaplake.store.format.binary_row import (
    EMPTY_BINARY_ROW,
    Timestamp,
    decode_binary_row,
    encode_binary_row,
)
from snaplake.store.format.types import DataType, TypeRoot

__all__ = [
    "DEFAULT_STATS_MODE",
    "SimpleStatsParts",
    "ValueStatsCollector",
    "check_stats_mode",
    "compare_partition_stats",
    "compute_value_stats",
    "truncate_max_bytes",
    "truncate_max_string",
    "truncate_min",
]

DEFAULT_STATS_MODE = "truncate(16)"
"""Paimon's default ``metadata.stats-mode``."""

_TRUNCATE_RE = re.compile(r"truncate\((\d+)\)")
_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)
_EPOCH_DATE = dt.date(1970, 1, 1)
_INT_ROOTS = frozenset({TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT})
_STRING_ROOTS = frozenset({TypeRoot.CHAR, TypeRoot.VARCHAR})
_BYTES_ROOTS = frozenset({TypeRoot.BINARY, TypeRoot.VARBINARY})


@dataclass(frozen=True, slots=True, kw_only=True)
class SimpleStatsParts:
    """The three parts of a Paimon ``SimpleStats`` record.

    Attributes:
        min_values: Serialised BinaryRow of per-column minimums (null = unknown).
        max_values: Serialised BinaryRow of per-column maximums (null = unknown).
        null_counts: One null count per column; None where it is unknown.

    Source:
        ``org.apache.paimon.stats.SimpleStats``.
    """

    min_values: bytes
    max_values: bytes
    null_counts: tuple[int | None, ...]


# ---------------------------------------------------------------------------
# Truncation
# ---------------------------------------------------------------------------


def truncate_min(value: AnyStr, length: int) -> AnyStr:
    """Return the first ``length`` code points (of a string) or bytes (of bytes) of ``value``.

    A lower bound of ``value`` in both orders (code points, unsigned bytes).

    Source:
        ``TruncateSimpleColStatsCollector.truncateMin``.
    """
    return value[:length]


def truncate_max_string(value: str, length: int) -> str | None:
    """Return a string of at most ``length`` code points that is >= ``value``.

    Returns:
        ``value`` itself when it is short enough; otherwise the first
        ``length`` code points with the last one that can be incremented
        incremented (and what follows it dropped); None when every code
        point is U+10FFFF.

    Source:
        ``TruncateSimpleColStatsCollector.truncateMax``. Java can step into the
        surrogate range (an increment of U+D7FF), which its UTF-8 encoder turns
        into ``?``, a wrong bound; this jumps to U+E000 instead.
    """
    if len(value) <= length:
        return value
    prefix = value[:length]
    for i in range(length - 1, -1, -1):
        nxt = ord(prefix[i]) + 1
        if nxt in _SURROGATES:
            nxt = _SURROGATES.stop
        if nxt <= _MAX_CODE_POINT:
            return prefix[:i] + chr(nxt)
    return None


def truncate_max_bytes(value: bytes, length: int) -> bytes | None:
    """Return a byte string of at most ``length`` bytes that is >= ``value`` (unsigned order).

    Returns:
        ``value`` itself when short enough; otherwise the prefix up to and
        including the last byte below 0xFF, that byte incremented; None when
        the first ``length`` bytes are all 0xFF.

    Source:
        ``TruncateSimpleColStatsCollector.truncateMax``.
    """
    if len(value) <= length:
        return value
    prefix = bytearray(value[:length])
    for i in range(length - 1, -1, -1):
        if prefix[i] != 0xFF:
            prefix[i] += 1
            return bytes(prefix[: i + 1])
    return None


# ---------------------------------------------------------------------------
# Value stats
# ---------------------------------------------------------------------------


def check_stats_mode(stats_mode: str, *, key: str = "metadata.stats-mode") -> None:
    """Refuse a stats mode that is not ``none``, ``counts``, ``full`` or ``truncate(N>0)``.

    Args:
        stats_mode: The mode.
        key: The option that holds it (named in the error).

    Raises:
        InvalidOptionError: not a stats mode.
    """
    _parse_mode(stats_mode, key=key)


def _parse_mode(stats_mode: str, *, key: str = "metadata.stats-mode") -> int | str | None:
    """Return the truncate length, None for full, or "none"/"counts"."""
    mode = stats_mode.strip().lower()
    if mode in ("none", "counts"):
        return mode
    if mode == "full":
        return None
    m = _TRUNCATE_RE.fullmatch(mode)
    if m is None or int(m.group(1)) <= 0:
        raise InvalidOptionError(
            f"{key} {stats_mode!r} is not none, counts, full or truncate(N>0)",
            key=key,
            value=stats_mode,
        )
    return int(m.group(1))


def _min_max(column: pa.ChunkedArray) -> tuple[Any, Any]:
    result = pc.min_max(column)
    return result["min"].as_py(), result["max"].as_py()


def _float_bounds(column: pa.ChunkedArray) -> tuple[Any, Any]:
    if pc.any(pc.is_nan(column)).as_py():
        return None, None
    lo, hi = _min_max(column)
    if lo == 0:
        lo = -0.0
    if hi == 0:
        hi = 0.0
    return lo, hi


def _date_bounds(column: pa.ChunkedArray) -> tuple[Any, Any]:
    lo, hi = _min_max(pc.cast(column, pa.int32()))
    return _EPOCH_DATE + dt.timedelta(days=lo), _EPOCH_DATE + dt.timedelta(days=hi)


def _timestamp_bounds(column: pa.ChunkedArray) -> tuple[Any, Any]:
    unit = column.type.unit
    lo, hi = _min_max(pc.cast(column, pa.int64()))
    return Timestamp.from_epoch(lo, unit=unit), Timestamp.from_epoch(hi, unit=unit)


def _plain_column(column: Any) -> Any:
    """Cast view types (not supported by every kernel) to their large forms."""
    t = column.type
    if pa.types.is_string_view(t):
        return pc.cast(column, pa.large_string())
    if pa.types.is_binary_view(t):
        return pc.cast(column, pa.large_binary())
    return column


def _column_bounds(
    column: pa.ChunkedArray, dtype: DataType, truncate: int | None
) -> tuple[Any, Any]:
    root = dtype.root
    if root is TypeRoot.BOOLEAN or root in _INT_ROOTS or root in (TypeRoot.DECIMAL, TypeRoot.TIME):
        return _min_max(column)
    if root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        return _float_bounds(column)
    if root is TypeRoot.DATE:
        return _date_bounds(column)
    if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        if (dtype.precision or 0) > 6 or not pa.types.is_timestamp(column.type):
            return None, None
        return _timestamp_bounds(column)
    if root in _STRING_ROOTS or root in _BYTES_ROOTS:
        lo, hi = _min_max(_plain_column(column))
        if truncate is None:
            return lo, hi
        hi = (truncate_max_string if root in _STRING_ROOTS else truncate_max_bytes)(hi, truncate)
        return (None, None) if hi is None else (truncate_min(lo, truncate), hi)
    return None, None


def _encodable(value: object, dtype: DataType) -> bool:
    try:
        encode_binary_row([value], [dtype])
    except SnaplakeError:
        return False
    return True


def compute_value_stats(
    data: pa.Table, types: Sequence[DataType], *, stats_mode: str = DEFAULT_STATS_MODE
) -> SimpleStatsParts:
    """Compute a data file's ``_VALUE_STATS`` from its rows, vectorised per column.

    Args:
        data: The rows of one data file: a ``pa.Table`` whose columns are the
            table's columns in schema order (Arrow types as
            :func:`snaplake.store.format.types.to_arrow_type` gives them, or their
            large/view variants); any row count; not modified.
        types: The Paimon type of each column; ``len(types) == data.num_columns``.
        stats_mode: ``metadata.stats-mode``: ``truncate(N)`` (default
            ``truncate(16)``), ``full``, ``counts`` (null counts only) or
            ``none`` (nothing known).

    Returns:
        Min row, max row and null counts over all columns. A column gets
        null min/max when it is all null, its type has no reliable bound
        (see the module docstring), or its bound cannot be represented.

    Raises:
        SchemaMismatchError: ``types`` and ``data`` have different column counts.
        InvalidOptionError: ``stats_mode`` is not a valid mode.

    Source:
        ``SimpleStatsCollector`` with ``TruncateSimpleColStatsCollector`` /
        ``FullSimpleColStatsCollector``, ``SimpleStatsConverter.toBinaryAllMode``
        and ``ParquetSimpleStatsExtractor`` (which types get bounds). pypaimon
        writes untruncated (``full``) bounds and keeps NaN-blind float bounds.
    """
    collector = ValueStatsCollector(types, stats_mode=stats_mode)
    collector.update(data)
    return collector.result()


class ValueStatsCollector:
    """Accumulate one data file's ``_VALUE_STATS`` over its batches, in bounded memory.

    For a file written piece by piece (a streamed compaction output): each
    :meth:`update` keeps per column its null count and the batch's minimum
    and maximum (two values, Arrow's ``min_max`` kernel; the latest batch is
    reduced only once another one arrives, so a one-batch file costs what a
    whole-column computation costs), or marks the column unbounded (NaN in a
    float column, a type without a kernel);
    :meth:`result` then bounds the kept values exactly as
    :func:`compute_value_stats` bounds a whole column (truncation, signed
    zeros, which types get bounds), so both give the same stats for the same
    rows.

    Args:
        types: The Paimon type of each column, in schema order.
        stats_mode: ``metadata.stats-mode`` (see :func:`compute_value_stats`).

    Raises:
        InvalidOptionError: ``stats_mode`` is not a valid mode.

    Source:
        Paimon ``SimpleStatsCollector`` (collects record by record); here batch
        by batch with Arrow kernels.
    """

    def __init__(self, types: Sequence[DataType], *, stats_mode: str = DEFAULT_STATS_MODE) -> None:
        self._types = tuple(types)
        self._mode = _parse_mode(stats_mode)
        self._null_counts = [0] * len(self._types)
        # Per column: earlier batches' [min, max] arrays, or None once it has no bound;
        # the latest batch's column itself, reduced only when another batch comes (a
        # single-batch file, the writer's case, is bounded directly, as before).
        self._extremes: list[list[pa.Array] | None] = [[] for _ in self._types]
        self._latest: list[Any] = [None] * len(self._types)

    def update(self, data: pa.Table | pa.RecordBatch) -> None:
        """Add the rows of ``data`` (columns in schema order, any row count).

        Raises:
            SchemaMismatchError: ``data`` has a different number of columns.
        """
        if data.num_columns != len(self._types):
            raise SchemaMismatchError(f"{data.num_columns} columns but {len(self._types)} types")
        bounds = self._mode not in ("none", "counts")
        for i in range(len(self._types)):
            column = data.column(i)
            self._null_counts[i] += column.null_count
            if not bounds or self._extremes[i] is None or column.null_count == len(column):
                continue
            self._reduce_latest(i)
            self._latest[i] = column

    def _reduce_latest(self, i: int) -> None:
        """Replace column ``i``'s latest batch by its ``[min, max]`` (or mark it unbounded)."""
        latest, kept = self._latest[i], self._extremes[i]
        self._latest[i] = None
        if latest is None or kept is None:
            return
        extremes = _batch_extremes(latest)
        if extremes is None:
            self._extremes[i] = None
        else:
            kept.append(extremes)

    def result(self) -> SimpleStatsParts:
        """Return the stats of all rows added so far."""
        n = len(self._types)
        if self._mode == "none":
            row = encode_binary_row([None] * n, self._types)
            return SimpleStatsParts(min_values=row, max_values=row, null_counts=(None,) * n)
        truncate = self._mode if isinstance(self._mode, int) else None
        mins: list[object] = []
        maxs: list[object] = []
        for i, dtype in enumerate(self._types):
            lo: object = None
            hi: object = None
            values: Any = None
            if self._extremes[i] == [] and self._latest[i] is not None:
                values = self._latest[i]  # one batch: bounded like a whole column
            else:
                self._reduce_latest(i)
                kept = self._extremes[i]
                if kept:
                    values = pa.chunked_array([a.cast(kept[0].type) for a in kept])
            if values is not None:
                try:
                    lo, hi = _column_bounds(values, dtype, truncate)
                except (pa.ArrowException, OverflowError, ValueError):
                    lo, hi = None, None
                if lo is None or hi is None:
                    lo, hi = None, None
            mins.append(lo)
            maxs.append(hi)
        return _encode_parts(mins, maxs, tuple(self._null_counts), self._types)


def _encode_parts(
    mins: list[object],
    maxs: list[object],
    null_counts: tuple[int | None, ...],
    types: Sequence[DataType],
) -> SimpleStatsParts:
    """The SimpleStats of bounded ``mins`` / ``maxs`` (a bound that does not encode: null)."""
    try:
        min_row = encode_binary_row(mins, types)
        max_row = encode_binary_row(maxs, types)
    except SnaplakeError:  # rare: drop the bounds that do not encode, then encode again
        for i, dtype in enumerate(types):
            if not (_encodable(mins[i], dtype) and _encodable(maxs[i], dtype)):
                mins[i] = maxs[i] = None
        min_row = encode_binary_row(mins, types)
        max_row = encode_binary_row(maxs, types)
    return SimpleStatsParts(min_values=min_row, max_values=max_row, null_counts=null_counts)


def _batch_extremes(column: pa.Array | pa.ChunkedArray) -> pa.Array | None:
    """``[min, max]`` of a column with a non-null value; ``None`` if it can have no bound."""
    plain = _plain_column(column)
    try:
        if pa.types.is_floating(plain.type) and pc.any(pc.is_nan(plain)).as_py():
            return None
        result = pc.min_max(plain)
        return pa.array([result["min"], result["max"]], type=plain.type)
    except (pa.ArrowException, OverflowError, ValueError):
        return None


def _float_key(value: float) -> tuple[int, float, float]:
    """Java ``Double.compare`` order: -0.0 < 0.0, NaN above everything."""
    if math.isnan(value):
        return (1, 0.0, 0.0)
    return (0, value, math.copysign(1.0, value))


def _timestamp_key(value: object) -> tuple[int, int]:
    if isinstance(value, dt.datetime):
        value = Timestamp.from_datetime(value)
    assert isinstance(value, Timestamp)
    return (value.millisecond, value.nano_of_millisecond)


def _date_key(value: object) -> int:
    if isinstance(value, dt.date):
        return (value - _EPOCH_DATE).days
    assert isinstance(value, int)
    return value


def _sort_key(dtype: DataType) -> Callable[[Any], Any]:
    root = dtype.root
    if root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        return _float_key
    if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        return _timestamp_key
    if root is TypeRoot.DATE:
        return _date_key
    if root is TypeRoot.DECIMAL:
        return Decimal
    return lambda v: v


def compare_partition_stats(
    partitions: Sequence[bytes], types: Sequence[DataType]
) -> SimpleStatsParts:
    """Compute a manifest's ``_PARTITION_STATS`` over partition BinaryRows.

    Args:
        partitions: Serialised partition rows, one per manifest entry (Java
            and pypaimon count nulls per entry, so pass duplicates to match
            them; distinct rows give the same min/max and per-partition null
            counts). May be empty.
        types: The partition key types; ``()`` for an unpartitioned table.

    Returns:
        Min and max per key (full, untruncated values, compared as Java
        compares the internal values: strings and bytes unsigned
        lexicographically, floats with ``Double.compare``) and the number of
        rows whose key is null. For no keys: two :data:`EMPTY_BINARY_ROW` and
        ``()``; for no rows: null min/max and zero counts.

    Raises:
        CorruptMetadataError: a partition row does not decode with ``types``.

    Source:
        ``ManifestFile.ManifestEntryWriter`` (a ``SimpleStatsCollector`` with
        full stats over every entry's partition).
    """
    if not types:
        return SimpleStatsParts(
            min_values=EMPTY_BINARY_ROW, max_values=EMPTY_BINARY_ROW, null_counts=()
        )
    columns: list[list[object]] = [[] for _ in types]
    null_counts = [0] * len(types)
    cache: dict[bytes, tuple[object, ...]] = {}
    for row in partitions:
        decoded = cache.get(row)
        if decoded is None:
            decoded = decode_binary_row(row, types)
            cache[row] = decoded
        for i, value in enumerate(decoded):
            if value is None:
                null_counts[i] += 1
            else:
                columns[i].append(value)
    mins: list[object] = []
    maxs: list[object] = []
    for dtype, values in zip(types, columns, strict=True):
        if not values:
            mins.append(None)
            maxs.append(None)
            continue
        key = _sort_key(dtype)
        mins.append(min(values, key=key))
        maxs.append(max(values, key=key))
    return SimpleStatsParts(
        min_values=encode_binary_row(mins, types),
        max_values=encode_binary_row(maxs, types),
        null_counts=tuple(null_counts),
    )
