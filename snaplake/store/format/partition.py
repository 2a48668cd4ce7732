r"""Partition directory names (``k1=v1/k2=v2``) and distinct partitions of Arrow data.

A partition value becomes a path component the way Paimon's
``InternalRowPartitionComputer`` + ``PartitionPathUtils`` spell it, so Java,
pypaimon and snaplake all look for a partition's files in the same directory:

* null, the empty string and whitespace-only strings become the table's
  ``partition.default-name`` (``__DEFAULT_PARTITION__``);
* with ``partition.legacy-name = true`` (Paimon's default) the value is the
  Java ``toString`` of the internal value: DATE is the day count since
  1970-01-01 (``19724``), TIME the millisecond of the day, TIMESTAMP
  ``LocalDateTime.toString`` (``2024-01-02T03:04:05.678``); with ``false`` it is
  the SQL cast to STRING (``2024-01-02``, ``2024-01-02 03:04:05.678``);
* BOOLEAN is ``true``/``false``, DECIMAL the plain string at the type's scale,
  FLOAT/DOUBLE Java's ``Float/Double.toString`` (``1.0``, ``1.0E-4``, ``NaN``,
  ``Infinity``) as JDK 19+ prints them;
* key and value are escaped with ``%XX`` for control characters and
  ``"#%'*/:=?\\{}[]^`` and DEL, nothing else.

Because ``/`` is escaped and every component contains ``=``, no value can make
a component equal to ``.`` or ``..``: a partition path never leaves the table
directory.

It also gives the one way partitions written by different engines are
compared: :func:`canonical_partition`.

This module imports only :mod:`snaplake.errors`, :mod:`snaplake.store.format.types`
and :mod:`snaplake.store.format.binary_row`.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import struct
from collections.abc import Sequence
from decimal import Context, Decimal, InvalidOperation

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.errors import SchemaMismatchError, UnsupportedTypeError
from snaplake.store.format.binary_row import Timestamp, decode_binary_row, encode_binary_row
from snaplake.store.format.types import DataType, TypeRoot

__all__ = [
    "DEFAULT_PARTITION_NAME",
    "canonical_partition",
    "escape_path_name",
    "partition_group_ids",
    "partition_path",
    "partition_value_string",
    "partition_values_from_arrow",
]

DEFAULT_PARTITION_NAME = "__DEFAULT_PARTITION__"
"""Paimon's default ``partition.default-name``."""

_ESCAPED = frozenset(chr(c) for c in range(0x20)) | frozenset("\"#%'*/:=?\\\x7f{}[]^")
_EPOCH_DATE = dt.date(1970, 1, 1)
_DECIMAL_CONTEXT = Context(prec=100)
_EPOCH = dt.datetime(1970, 1, 1)  # noqa: DTZ001 - naive epoch for zone-less timestamps
# Character.isWhitespace: Unicode space separators except no-break spaces, plus \t-\r, \x1c-\x1f.
_JAVA_WHITESPACE_EXTRA = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")
_NO_BREAK = frozenset("\u00a0\u2007\u202f")


def escape_path_name(name: str) -> str:
    """Escape a partition key or value for use as (half of) a path component.

    Raises:
        ValueError: ``name`` is empty (Paimon refuses empty path names).

    Source:
        ``PartitionPathUtils.escapePathName`` (``%`` + two upper-case hex digits).
    """
    if not name:
        raise ValueError("a partition key or value must not be empty")
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in name)


def _is_java_whitespace(c: str) -> bool:
    if c in _JAVA_WHITESPACE_EXTRA:
        return True
    return c.isspace() and c not in _NO_BREAK and c not in "\x85"


def _is_null_or_whitespace_only(text: str) -> bool:
    return all(_is_java_whitespace(c) for c in text)


def _java_float_string(value: float, *, single: bool) -> str:
    """Return ``Float.toString`` / ``Double.toString`` as JDK 19+ prints it.

    The digits are the closest decimal of the fewest significant digits (at
    least 2) that rounds back to the same value; the notation is plain for
    ``1e-3 <= |v| < 1e7`` and ``d.dddE[-]n`` otherwise. JDK 18 and older can
    print different digits for some values (see pypaimon's
    ``_floating_partition_string``).
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    fmt = ">f" if single else ">d"
    bits = struct.pack(fmt, value)
    value = struct.unpack(fmt, bits)[0]
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    text = repr(value)
    for digits in range(2, 10 if single else 18):
        candidate = format(value, f".{digits}g")
        try:
            same = struct.pack(fmt, float(candidate)) == bits
        except OverflowError:  # rounded past the largest finite float
            same = False
        if same:
            text = candidate
            break
    dec = Decimal(text)
    if Decimal("0.001") <= abs(dec) < Decimal("1e7"):
        plain = format(dec, "f")
        if "." in plain:
            plain = plain.rstrip("0").rstrip(".")
        return plain if "." in plain else plain + ".0"
    mantissa, exponent = format(dec, "e").split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}E{int(exponent)}"


def _local_date_time_string(ts: Timestamp) -> str:
    """``LocalDateTime.toString``: seconds only if non-zero, fraction as 3, 6 or 9 digits."""
    days, millis_of_day = divmod(ts.millisecond, 86_400_000)
    nano_of_day = millis_of_day * 1_000_000 + ts.nano_of_millisecond
    date = _EPOCH_DATE + dt.timedelta(days=days)
    secs, nano = divmod(nano_of_day, 1_000_000_000)
    text = f"{_year(date.year)}-{date.month:02d}-{date.day:02d}T{secs // 3600:02d}:"
    text += f"{secs // 60 % 60:02d}"
    if secs % 60 or nano:
        text += f":{secs % 60:02d}"
        if nano:
            if nano % 1_000_000 == 0:
                text += f".{nano // 1_000_000:03d}"
            elif nano % 1000 == 0:
                text += f".{nano // 1000:06d}"
            else:
                text += f".{nano:09d}"
    return text


def _year(year: int) -> str:
    return f"{year:04d}" if year <= 9999 else f"+{year}"


def _sql_timestamp_string(ts: Timestamp, precision: int) -> str:
    """``DateTimeUtils.formatTimestamp``: ``yyyy-MM-dd HH:mm:ss`` + fraction cut to precision."""
    days, millis_of_day = divmod(ts.millisecond, 86_400_000)
    date = _EPOCH_DATE + dt.timedelta(days=days)
    secs = millis_of_day // 1000
    nano = (millis_of_day % 1000) * 1_000_000 + ts.nano_of_millisecond
    fraction = f"{nano:09d}"
    while len(fraction) > precision and fraction.endswith("0"):
        fraction = fraction[:-1]
    text = (
        f"{date.year:04d}-{date.month:02d}-{date.day:02d} "
        f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
    )
    return f"{text}.{fraction}" if fraction else text


def _sql_time_string(millis: int, precision: int) -> str:
    """``DateTimeUtils.formatTimestampMillis``."""
    secs, ms = divmod(millis, 1000)
    text = f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
    if precision <= 0:
        return text
    digits = []
    while precision > 0:
        digits.append(str(ms // 100))
        ms = ms % 100 * 10
        if ms == 0:
            break
        precision -= 1
    return text + "." + "".join(digits)


def _as_timestamp(value: object, dtype: DataType) -> Timestamp:
    if isinstance(value, Timestamp):
        return value
    if isinstance(value, dt.datetime):
        if dtype.root is TypeRoot.TIMESTAMP and value.tzinfo is not None:
            raise SchemaMismatchError(f"{value!r} is not a {dtype.sql()} value (has a time zone)")
        return Timestamp.from_datetime(value)
    raise SchemaMismatchError(f"{value!r} is not a {dtype.sql()} value")


def partition_value_string(
    value: object, dtype: DataType, *, legacy_partition_name: bool = True
) -> str | None:
    """Return the unescaped string Paimon derives from one partition value.

    Args:
        value: The partition value (Python types as in
            :func:`snaplake.store.format.binary_row.encode_binary_row`), or None.
        dtype: Its Paimon type.
        legacy_partition_name: The table option ``partition.legacy-name``
            (Paimon's default is true).

    Returns:
        The string, or None when Paimon would use the default partition name
        (null value, or a string that is empty or whitespace only).

    Raises:
        UnsupportedTypeError: BINARY/VARBINARY (Java prints an identity hash
            in legacy mode), nested, VARIANT and BLOB partition keys.
        SchemaMismatchError: ``value`` does not match ``dtype``.

    Source:
        ``InternalRowPartitionComputer.generatePartValues`` with the
        ``*ToStringCastRule`` classes (non-legacy) and the internal types'
        ``toString`` (legacy). TIMESTAMP WITH LOCAL TIME ZONE in non-legacy
        mode is formatted in UTC (Java uses the JVM's default zone).
    """
    if value is None:
        return None
    root = dtype.root
    text: str
    if root in (TypeRoot.CHAR, TypeRoot.VARCHAR):
        if not isinstance(value, str):
            raise SchemaMismatchError(f"{value!r} is not a {dtype.sql()} value")
        text = value
    elif root is TypeRoot.BOOLEAN:
        if not isinstance(value, bool):
            raise SchemaMismatchError(f"{value!r} is not a {dtype.sql()} value")
        text = "true" if value else "false"
    elif root in (TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT):
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaMismatchError(f"{value!r} is not a {dtype.sql()} value")
        text = str(value)
    elif root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        if isinstance(value, bool) or not isinstance(value, float | int):
            raise SchemaMismatchError(f"{value!r} is not a {dtype.sql()} value")
        text = _java_float_string(float(value), single=root is TypeRoot.FLOAT)
    elif root is TypeRoot.DECIMAL:
        if isinstance(value, bool) or not isinstance(value, Decimal | int):
            raise SchemaMismatchError(f"{value!r} is not a {dtype.sql()} value")
        scale = dtype.scale or 0
        try:
            quantized = Decimal(value).quantize(
                Decimal((0, (1,), -scale)), context=_DECIMAL_CONTEXT
            )
        except InvalidOperation as exc:
            raise SchemaMismatchError(f"{value!r} is not a {dtype.sql()} value") from exc
        if quantized != value:
            raise SchemaMismatchError(f"{value!r} has more than {scale} fractional digits")
        text = format(quantized, "f")
    elif root is TypeRoot.DATE:
        if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
            raise SchemaMismatchError(f"{value!r} is not a {dtype.sql()} value")
        if legacy_partition_name:
            text = str((value - _EPOCH_DATE).days)
        else:
            text = f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    elif root is TypeRoot.TIME:
        if not isinstance(value, dt.time):
            raise SchemaMismatchError(f"{value!r} is not a {dtype.sql()} value")
        millis = ((value.hour * 60 + value.minute) * 60 + value.second) * 1000
        millis += value.microsecond // 1000
        text = (
            str(millis) if legacy_partition_name else _sql_time_string(millis, dtype.precision or 0)
        )
    elif root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        ts = _as_timestamp(value, dtype)
        if legacy_partition_name:
            text = _local_date_time_string(ts)
        else:
            text = _sql_timestamp_string(ts, dtype.precision or 0)
    else:
        raise UnsupportedTypeError(f"{dtype.sql()} cannot be a partition key")
    if _is_null_or_whitespace_only(text):
        return None
    return text


def partition_path(
    keys: Sequence[str],
    values: Sequence[object],
    types: Sequence[DataType],
    *,
    default_partition_name: str = DEFAULT_PARTITION_NAME,
    legacy_partition_name: bool = True,
) -> str:
    """Return the relative partition directory ``k1=v1/k2=v2`` (no leading or trailing ``/``).

    Args:
        keys: Partition key names, in the table's order.
        values: One value per key (see :func:`partition_value_string`).
        types: One Paimon type per key.
        default_partition_name: The table option ``partition.default-name``.
        legacy_partition_name: The table option ``partition.legacy-name``.

    Returns:
        The escaped path; the empty string for an unpartitioned table. Every
        component has the form ``<escaped key>=<escaped value>``, so the path
        stays below the table directory whatever the values are.

    Raises:
        SchemaMismatchError: lengths differ, or a value does not match its type.
        UnsupportedTypeError: a key type has no partition string (see
            :func:`partition_value_string`).
        ValueError: a key or ``default_partition_name`` is empty.

    Source:
        ``PartitionPathUtils.generatePartitionPath`` over
        ``InternalRowPartitionComputer.generatePartValues``;
        ``FileStorePathFactory.getPartitionString``.
    """
    if not len(keys) == len(values) == len(types):
        raise SchemaMismatchError(
            f"{len(keys)} partition keys, {len(values)} values and {len(types)} types"
        )
    parts = []
    for key, value, dtype in zip(keys, values, types, strict=True):
        text = partition_value_string(value, dtype, legacy_partition_name=legacy_partition_name)
        parts.append(f"{escape_path_name(key)}={escape_path_name(text or default_partition_name)}")
    return "/".join(parts)


# ---------------------------------------------------------------------------
# Comparing partitions across writers
# ---------------------------------------------------------------------------


def canonical_partition(partition: bytes, types: Sequence[DataType]) -> bytes:
    """Return the partition BinaryRow as Java Paimon encodes it, whoever wrote ``partition``.

    Partitions must be compared by value, not by bytes: pypaimon 2.1.0 encodes
    some values differently from Java (a NULL TIMESTAMP(p > 3) or DECIMAL(p >
    18) reserves no variable-part bytes; negative powers of two in DECIMAL(p >
    18) take one byte too many), so in a table both have written one
    partition can appear under two byte strings. Two encodings of the same
    values give equal results; snaplake writes this encoding itself. Compare
    these (overwrite, compaction grouping, expiry, statistics), but keep a
    file's original bytes in the DELETE entry that removes it: Paimon matches
    a DELETE with its ADD byte for byte.

    Args:
        partition: Serialised partition row (``4-byte arity + row``).
        types: The partition key types.

    Returns:
        The canonical bytes (cached per distinct input).

    Raises:
        CorruptMetadataError: ``partition`` does not decode with ``types``.

    Source:
        Java ``BinaryRowWriter`` (what snaplake's encoder follows); pypaimon's
        ``GenericRowSerializer`` for the differences.
    """
    if not types:
        return partition
    return _canonical(partition, tuple(types))


@functools.lru_cache(maxsize=65_536)
def _canonical(partition: bytes, types: tuple[DataType, ...]) -> bytes:
    return encode_binary_row(decode_binary_row(partition, types), types)


# ---------------------------------------------------------------------------
# Distinct partitions of Arrow data
# ---------------------------------------------------------------------------


def _column_codes(column: pa.ChunkedArray) -> tuple[npt.NDArray[np.int64], pa.Array]:
    """Dense int64 code per row (nulls get their own code) and the distinct values."""
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    encoded = pc.dictionary_encode(array, null_encoding="encode")
    indices = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    return indices, encoded.dictionary


def partition_group_ids(
    data: pa.Table, keys: Sequence[str]
) -> tuple[npt.NDArray[np.int64], list[tuple[object, ...]]]:
    """Assign each row a dense partition id, vectorised.

    Args:
        data: Arrow table containing every column in ``keys``; any row count.
            Not modified.
        keys: Partition key names, in the table's order.

    Returns:
        ``(ids, partitions)``: ``ids`` is an int64 array of ``data.num_rows``
        entries in ``0..len(partitions)-1``; ``partitions[i]`` is the tuple of
        Python values (``as_py``; None for null) of partition ``i``. Partitions
        are numbered in order of first appearance. Without keys every row
        gets id 0 and ``partitions == [()]``.

    Raises:
        SchemaMismatchError: a key is not a column of ``data``.
    """
    n = data.num_rows
    if not keys:
        return np.zeros(n, dtype=np.int64), [()]
    missing = [k for k in keys if k not in data.column_names]
    if missing:
        raise SchemaMismatchError(
            f"partition keys {missing} are not columns of {data.column_names}"
        )
    if n == 0:
        return np.zeros(0, dtype=np.int64), []
    combined = np.zeros(n, dtype=np.int64)
    dictionaries = []
    codes = []
    for key in keys:
        col_codes, dictionary = _column_codes(data.column(key))
        codes.append(col_codes)
        dictionaries.append(dictionary)
        # Re-densify after every column so the mixed-radix key never overflows.
        mixed = combined * max(len(dictionary), 1) + col_codes
        _, combined = np.unique(mixed, return_inverse=True)
        combined = combined.astype(np.int64).reshape(-1)
    # Renumber by first appearance, then pick one representative row per partition.
    uniq, first_index = np.unique(combined, return_index=True)
    order = np.argsort(first_index, kind="stable")
    remap = np.empty(len(uniq), dtype=np.int64)
    remap[order] = np.arange(len(uniq), dtype=np.int64)
    ids = remap[combined]
    rep_rows = first_index[order]
    columns = [
        dictionaries[i].take(pa.array(codes[i][rep_rows])).to_pylist() for i in range(len(keys))
    ]
    partitions = [tuple(col[j] for col in columns) for j in range(len(rep_rows))]
    return ids, partitions


def partition_values_from_arrow(data: pa.Table, keys: Sequence[str]) -> list[tuple[object, ...]]:
    """Return the distinct partition tuples of ``data``, in order of first appearance.

    Args:
        data: Arrow table containing every column in ``keys``; not modified.
        keys: Partition key names, in the table's order.

    Returns:
        One tuple of Python values per distinct partition (None for null);
        ``[()]`` without keys, ``[]`` for an empty table with keys.

    Raises:
        SchemaMismatchError: a key is not a column of ``data``.
    """
    return partition_group_ids(data, keys)[1]
