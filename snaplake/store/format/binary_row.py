"""Paimon BinaryRow: the byte format of partitions, min/max stats and bucket keys.

Layout of the serialised row (what manifests store in ``_PARTITION``,
``_MIN_VALUES``, ``_MAX_VALUES``, ...)::

    [arity: int32 big-endian]                      4 bytes, SerializationUtils prefix
    [header byte = RowKind][null bits]             ((arity + 63 + 8) // 64) * 8 bytes;
                                                   bit (pos + 8) set = field pos is null
    [slot 0] ... [slot arity-1]                    8 bytes each, little-endian
    [variable part]                                8-byte aligned chunks, zero padded

Slots hold BOOLEAN/TINYINT/SMALLINT/INT/DATE/TIME/FLOAT in their low bytes
(upper bytes zero, no sign extension), BIGINT/DOUBLE in all 8 bytes, DECIMAL
of precision <= 18 as the unscaled long, TIMESTAMP of precision <= 3 as epoch
millis. Strings and bytes of up to 7 bytes sit in the slot itself (data in the
low bytes, ``0x80 | len`` in the high byte); longer ones go to the variable
part with ``offset << 32 | len`` in the slot (offset from the row start, after
the arity prefix). DECIMAL of precision > 18 reserves 16 bytes in the variable
part holding the minimal big-endian two's complement unscaled value
(``BigInteger.toByteArray``); TIMESTAMP of precision > 3 reserves 8 bytes
holding the epoch millis, with ``offset << 32 | nano_of_millisecond`` in the
slot. A null in either keeps its reservation (zeroed) and the offset, exactly
as Java's ``BinaryRowWriter`` does; every other null has an all-zero slot.

This module imports only :mod:`snaplake.errors` and :mod:`snaplake.store.format.types`.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal, InvalidOperation
from typing import cast

from snaplake.errors import CorruptMetadataError, SchemaMismatchError, UnsupportedTypeError
from snaplake.store.format.types import DataType, TypeRoot

__all__ = [
    "EMPTY_BINARY_ROW",
    "MAX_FIX_PART_DATA_SIZE",
    "Timestamp",
    "binary_row_arity",
    "decode_binary_row",
    "encode_binary_row",
    "encode_binary_rows",
    "fixed_part_size",
    "null_bits_size",
]

MAX_FIX_PART_DATA_SIZE = 7
"""Strings/bytes up to this many bytes are stored inline in their slot."""

_HEADER_BITS = 8
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH_DT = dt.datetime(1970, 1, 1)  # noqa: DTZ001 - naive epoch, TIMESTAMP is zone-less
_MILLIS_PER_DAY = 86_400_000
_DECIMAL_CONTEXT = Context(prec=100)  # exact for every DECIMAL(38, s) value
_INT_RANGES = {
    TypeRoot.TINYINT: (-(2**7), 2**7 - 1, "<b"),
    TypeRoot.SMALLINT: (-(2**15), 2**15 - 1, "<h"),
    TypeRoot.INT: (-(2**31), 2**31 - 1, "<i"),
    TypeRoot.BIGINT: (-(2**63), 2**63 - 1, "<q"),
}
_STRING_ROOTS = frozenset({TypeRoot.CHAR, TypeRoot.VARCHAR})
_BYTES_ROOTS = frozenset({TypeRoot.BINARY, TypeRoot.VARBINARY})
_TS_ROOTS = frozenset({TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ})


def null_bits_size(arity: int) -> int:
    """Return the width in bytes of the header + null bitset for ``arity`` fields.

    Source:
        ``BinaryRow.calculateBitSetWidthInBytes``.
    """
    return ((arity + 63 + _HEADER_BITS) // 64) * 8


def fixed_part_size(arity: int) -> int:
    """Return the size in bytes of the fixed-length part (bitset + 8-byte slots).

    Source:
        ``BinaryRow.calculateFixPartSizeInBytes``.
    """
    return null_bits_size(arity) + 8 * arity


EMPTY_BINARY_ROW: bytes = struct.pack(">i", 0) + bytes(null_bits_size(0))
"""The arity-0 row as serialised in manifests: 12 bytes (arity 0, one zero bitset word)."""


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class Timestamp:
    """Paimon's internal timestamp: epoch millis plus nanos within the millisecond.

    Used for TIMESTAMP / TIMESTAMP_LTZ values a ``datetime`` cannot hold
    (sub-microsecond digits, years outside 1..9999). Ordering is chronological.

    Attributes:
        millisecond: Milliseconds since 1970-01-01T00:00 (UTC for LTZ), floor-divided.
        nano_of_millisecond: 0..999_999.

    Source:
        ``org.apache.paimon.data.Timestamp``.
    """

    millisecond: int
    nano_of_millisecond: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.nano_of_millisecond <= 999_999:
            raise ValueError(f"nano_of_millisecond {self.nano_of_millisecond} not in 0..999999")

    @classmethod
    def from_datetime(cls, value: dt.datetime) -> Timestamp:
        """Convert a naive (wall clock) or aware (converted to UTC) datetime."""
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        delta = value - _EPOCH_DT
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        millis, micro_of_milli = divmod(micros, 1000)
        return cls(millisecond=millis, nano_of_millisecond=micro_of_milli * 1000)

    @classmethod
    def from_epoch(cls, value: int, *, unit: str) -> Timestamp:
        """Convert an epoch count in Arrow unit ``unit`` (``s``, ``ms``, ``us``, ``ns``)."""
        if unit == "s":
            return cls(millisecond=value * 1000)
        if unit == "ms":
            return cls(millisecond=value)
        if unit == "us":
            millis, rest = divmod(value, 1000)
            return cls(millisecond=millis, nano_of_millisecond=rest * 1000)
        if unit == "ns":
            millis, rest = divmod(value, 1_000_000)
            return cls(millisecond=millis, nano_of_millisecond=rest)
        raise ValueError(f"unknown time unit {unit!r}")

    def to_datetime(self) -> dt.datetime | None:
        """Return the naive datetime, or None if it has sub-microsecond digits or no range."""
        if self.nano_of_millisecond % 1000:
            return None
        try:
            return _EPOCH_DT + dt.timedelta(
                milliseconds=self.millisecond, microseconds=self.nano_of_millisecond // 1000
            )
        except OverflowError:
            return None


def binary_row_arity(data: bytes) -> int:
    """Return the arity stored in the 4-byte prefix of a serialised row.

    Raises:
        CorruptMetadataError: fewer than 4 bytes.
    """
    if len(data) < 4:
        raise CorruptMetadataError(f"BinaryRow of {len(data)} bytes has no arity", path="")
    return int(struct.unpack_from(">i", data, 0)[0])


# ---------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------


def _mismatch(value: object, dtype: DataType, why: str = "") -> SchemaMismatchError:
    extra = f": {why}" if why else ""
    return SchemaMismatchError(f"{value!r} is not a {dtype.sql()} value{extra}")


def _java_byte_array(unscaled: int) -> bytes:
    """Return ``BigInteger.toByteArray()``: minimal big-endian two's complement."""
    bit_length = (unscaled if unscaled >= 0 else ~unscaled).bit_length()
    return unscaled.to_bytes(bit_length // 8 + 1, "big", signed=True)


def _unscaled(value: object, dtype: DataType) -> int:
    precision, scale = dtype.precision or 0, dtype.scale or 0
    if isinstance(value, bool) or not isinstance(value, Decimal | int):
        raise _mismatch(value, dtype)
    dec = Decimal(value)
    if not dec.is_finite():
        raise _mismatch(value, dtype, "not finite")
    try:
        quantized = dec.quantize(Decimal((0, (1,), -scale)), context=_DECIMAL_CONTEXT)
    except InvalidOperation as exc:
        raise _mismatch(value, dtype, "too many digits") from exc
    if quantized != dec:
        raise _mismatch(value, dtype, f"more than {scale} fractional digits")
    unscaled = int(quantized.scaleb(scale, context=_DECIMAL_CONTEXT))
    if abs(unscaled) >= 10**precision:
        raise _mismatch(value, dtype, f"more than {precision} digits")
    return unscaled


def _to_timestamp(value: object, dtype: DataType) -> Timestamp:
    if isinstance(value, Timestamp):
        return value
    if not isinstance(value, dt.datetime):
        raise _mismatch(value, dtype)
    if dtype.root is TypeRoot.TIMESTAMP and value.tzinfo is not None:
        raise _mismatch(value, dtype, "TIMESTAMP has no time zone; pass a naive datetime")
    return Timestamp.from_datetime(value)


def _round8(n: int) -> int:
    return (n + 7) & ~7


class _RowWriter:
    """Appends fields to one row: the fixed part in place, the variable part at the cursor."""

    __slots__ = ("bits", "buf")

    def __init__(self, arity: int, row_kind: int) -> None:
        self.bits = null_bits_size(arity)
        self.buf = bytearray(self.bits + 8 * arity)
        self.buf[0] = row_kind

    def slot(self, pos: int) -> int:
        return self.bits + 8 * pos

    def set_null_bit(self, pos: int) -> None:
        index = pos + _HEADER_BITS
        self.buf[index >> 3] |= 1 << (index & 7)

    def put_slot(self, pos: int, word: int) -> None:
        struct.pack_into("<Q", self.buf, self.slot(pos), word & 0xFFFF_FFFF_FFFF_FFFF)

    def append_var(self, payload: bytes, reserved: int) -> int:
        offset = len(self.buf)
        self.buf += payload
        self.buf += bytes(reserved - len(payload))
        return offset

    def write_bytes(self, pos: int, payload: bytes) -> None:
        n = len(payload)
        if n <= MAX_FIX_PART_DATA_SIZE:
            word = int.from_bytes(payload, "little") | ((0x80 | n) << 56)
            self.put_slot(pos, word)
        else:
            offset = self.append_var(payload, _round8(n))
            self.put_slot(pos, (offset << 32) | n)


def _write_field(w: _RowWriter, pos: int, value: object, dtype: DataType) -> None:
    root = dtype.root
    if value is None:
        w.set_null_bit(pos)
        if root is TypeRoot.DECIMAL and not dtype.is_compact:
            w.put_slot(pos, w.append_var(b"", 16) << 32)
        elif root in _TS_ROOTS and not dtype.is_compact:
            w.put_slot(pos, w.append_var(b"", 8) << 32)
        return
    off = w.slot(pos)
    if root is TypeRoot.BOOLEAN:
        if not isinstance(value, bool):
            raise _mismatch(value, dtype)
        w.buf[off] = 1 if value else 0
    elif root in _INT_RANGES:
        lo, hi, fmt = _INT_RANGES[root]
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise _mismatch(value, dtype)
        struct.pack_into(fmt, w.buf, off, value)
    elif root is TypeRoot.FLOAT:
        if isinstance(value, bool) or not isinstance(value, float | int):
            raise _mismatch(value, dtype)
        try:
            struct.pack_into("<f", w.buf, off, value)
        except OverflowError as exc:
            raise _mismatch(value, dtype, "out of FLOAT range") from exc
    elif root is TypeRoot.DOUBLE:
        if isinstance(value, bool) or not isinstance(value, float | int):
            raise _mismatch(value, dtype)
        struct.pack_into("<d", w.buf, off, value)
    elif root in _STRING_ROOTS:
        if not isinstance(value, str):
            raise _mismatch(value, dtype)
        try:
            payload = value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _mismatch(value, dtype, "not encodable as UTF-8") from exc
        w.write_bytes(pos, payload)
    elif root in _BYTES_ROOTS:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise _mismatch(value, dtype)
        w.write_bytes(pos, bytes(value))
    elif root is TypeRoot.DATE:
        if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
            raise _mismatch(value, dtype)
        struct.pack_into("<i", w.buf, off, (value - _EPOCH_DATE).days)
    elif root is TypeRoot.TIME:
        if not isinstance(value, dt.time) or value.tzinfo is not None:
            raise _mismatch(value, dtype)
        millis = ((value.hour * 60 + value.minute) * 60 + value.second) * 1000
        struct.pack_into("<i", w.buf, off, millis + value.microsecond // 1000)
    elif root is TypeRoot.DECIMAL:
        unscaled = _unscaled(value, dtype)
        if dtype.is_compact:
            w.put_slot(pos, unscaled)
        else:
            payload = _java_byte_array(unscaled)
            w.put_slot(pos, (w.append_var(payload, 16) << 32) | len(payload))
    elif root in _TS_ROOTS:
        ts = _to_timestamp(value, dtype)
        if dtype.is_compact:
            if ts.nano_of_millisecond:
                raise _mismatch(value, dtype, "sub-millisecond digits in a compact timestamp")
            w.put_slot(pos, ts.millisecond)
        else:
            offset = w.append_var(struct.pack("<q", ts.millisecond), 8)
            w.put_slot(pos, (offset << 32) | ts.nano_of_millisecond)
    else:
        raise UnsupportedTypeError(f"BinaryRow values of type {dtype.sql()} are not supported")


def encode_binary_row(
    values: Sequence[object], types: Sequence[DataType], *, row_kind: int = 0
) -> bytes:
    """Serialise one row exactly as Paimon's ``BinaryRowWriter`` + ``serializeBinaryRow``.

    Args:
        values: One value per type, or None for null. Accepted Python types:
            ``bool`` (BOOLEAN); ``int`` (TINYINT..BIGINT, range-checked);
            ``float`` (FLOAT, DOUBLE; NaN/inf kept bit-exact as Python floats
            hold them); ``str`` (CHAR, VARCHAR); ``bytes`` (BINARY, VARBINARY);
            ``decimal.Decimal`` or ``int`` (DECIMAL, must fit precision and
            scale without rounding); ``datetime.date`` (DATE);
            ``datetime.time`` (TIME, millisecond resolution);
            ``datetime.datetime`` or :class:`Timestamp` (TIMESTAMP needs a naive
            datetime; TIMESTAMP_LTZ takes an aware one, converted to UTC, and
            treats a naive one as UTC). Nested types accept only None.
        types: The Paimon type of each field; ``len(types) == len(values)``.
        row_kind: The header byte (``RowKind``: 0 = +I, the only kind stored
            in partitions, stats and bucket keys).

    Returns:
        ``4-byte big-endian arity + row bytes``; the row bytes are a multiple
        of 8 long. For no values this is :data:`EMPTY_BINARY_ROW` (12 bytes).

    Raises:
        SchemaMismatchError: a value does not fit its type (wrong Python
            type, out of range, too many digits, sub-millisecond digits for a
            compact timestamp, tz-aware datetime for TIMESTAMP).
        UnsupportedTypeError: a non-null value of a nested, VARIANT or BLOB type.

    Source:
        ``org.apache.paimon.data.BinaryRowWriter``, ``AbstractBinaryWriter``,
        ``RowHelper.copyInto`` (null handling) and
        ``SerializationUtils.serializeBinaryRow``. pypaimon's
        ``GenericRowSerializer`` differs from Java for a null DECIMAL(p > 18)
        or TIMESTAMP(p > 3) (it reserves no variable-part bytes) and for
        negative powers of two in DECIMAL(p > 18) (one byte too many); this
        follows Java.
    """
    if len(values) != len(types):
        raise SchemaMismatchError(f"{len(values)} values for {len(types)} types")
    w = _RowWriter(len(types), row_kind)
    for pos, (value, dtype) in enumerate(zip(values, types, strict=True)):
        _write_field(w, pos, value, dtype)
    return struct.pack(">i", len(types)) + bytes(w.buf)


_SLOW, _INT, _DOUBLE, _BOOLEAN, _STRING, _DATE = range(6)
_EPOCH_ORDINAL = _EPOCH_DATE.toordinal()


def _plan(types: Sequence[DataType]) -> list[tuple[int, int, str, int, int, DataType]]:
    """Per field: ``(pos, kind, struct format, low, high, type)`` for :func:`encode_binary_rows`.

    ``kind`` names the inline fast path of the field's type; ``_SLOW`` types
    (and null slots that reserve variable-part bytes) always take :func:`_write_field`.
    """
    plan = []
    for pos, dtype in enumerate(types):
        root = dtype.root
        if root in _INT_RANGES:
            lo, hi, fmt = _INT_RANGES[root]
            plan.append((pos, _INT, fmt, lo, hi, dtype))
        elif root is TypeRoot.DOUBLE:
            plan.append((pos, _DOUBLE, "<d", 0, 0, dtype))
        elif root is TypeRoot.BOOLEAN:
            plan.append((pos, _BOOLEAN, "", 0, 0, dtype))
        elif root in _STRING_ROOTS:
            plan.append((pos, _STRING, "", 0, 0, dtype))
        elif root is TypeRoot.DATE:
            plan.append((pos, _DATE, "<i", 0, 0, dtype))
        else:
            plan.append((pos, _SLOW, "", 0, 0, dtype))
    return plan


def encode_binary_rows(rows: Iterable[Sequence[object]], types: Sequence[DataType]) -> list[bytes]:
    """:func:`encode_binary_row` of every row of ``rows`` (row kind ``+I``), in one call.

    The same bytes and the same errors as encoding each row on its own; the
    per-type dispatch is planned once for all rows, and values of the common
    exact Python types (``int``, ``float`` for DOUBLE, ``bool``, ``str``,
    ``datetime.date``) are written inline. Everything else (other types,
    subclasses, values out of range) takes :func:`encode_binary_row`'s path.
    Used where a writer encodes many rows of one type list (stats bounds,
    min/max keys of many files).

    Raises:
        SchemaMismatchError: a row's length differs from ``len(types)``, or a
            value does not fit its type (see :func:`encode_binary_row`).
        UnsupportedTypeError: a non-null value of a nested, VARIANT or BLOB type.

    Source: as :func:`encode_binary_row`.
    """
    arity = len(types)
    plan = _plan(types)
    head = struct.pack(">i", arity)
    bits = null_bits_size(arity)
    out = []
    for values in rows:
        if len(values) != arity:
            raise SchemaMismatchError(f"{len(values)} values for {arity} types")
        w = _RowWriter(arity, 0)
        buf = w.buf
        for pos, kind, fmt, lo, hi, dtype in plan:
            value = values[pos]
            if kind != _SLOW:
                if value is None:
                    index = pos + _HEADER_BITS
                    buf[index >> 3] |= 1 << (index & 7)
                    continue
                cls = type(value)
                if kind == _INT:
                    if cls is int and lo <= value <= hi:  # type: ignore[operator]
                        struct.pack_into(fmt, buf, bits + 8 * pos, value)
                        continue
                elif kind == _DOUBLE:
                    if cls is float:
                        struct.pack_into(fmt, buf, bits + 8 * pos, value)
                        continue
                elif kind == _STRING:
                    if cls is str and cast(str, value).isascii():
                        w.write_bytes(pos, cast(str, value).encode("ascii"))
                        continue
                elif kind == _BOOLEAN:
                    if cls is bool:
                        buf[bits + 8 * pos] = 1 if value else 0
                        continue
                elif cls is dt.date:  # _DATE
                    days = cast(dt.date, value).toordinal() - _EPOCH_ORDINAL
                    struct.pack_into(fmt, buf, bits + 8 * pos, days)
                    continue
            _write_field(w, pos, value, dtype)
        out.append(head + bytes(buf))
    return out


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------


def _corrupt(why: str) -> CorruptMetadataError:
    return CorruptMetadataError(f"undecodable BinaryRow: {why}", path="")


def _read_var(row: bytes, word: int, pos: int) -> bytes:
    if word >> 63:
        n = (word >> 56) & 0x7F
        if n > MAX_FIX_PART_DATA_SIZE:
            raise _corrupt(f"inline length {n} at field {pos}")
        return word.to_bytes(8, "little")[:n]
    offset, n = word >> 32, word & 0xFFFF_FFFF
    if offset + n > len(row):
        raise _corrupt(f"field {pos} points past the row ({offset}+{n} > {len(row)})")
    return row[offset : offset + n]


def _read_field(row: bytes, off: int, pos: int, dtype: DataType) -> object:
    root = dtype.root
    word = int.from_bytes(row[off : off + 8], "little")
    if root is TypeRoot.BOOLEAN:
        return row[off] != 0
    if root in _INT_RANGES:
        return struct.unpack_from(_INT_RANGES[root][2], row, off)[0]
    if root is TypeRoot.FLOAT:
        return struct.unpack_from("<f", row, off)[0]
    if root is TypeRoot.DOUBLE:
        return struct.unpack_from("<d", row, off)[0]
    if root in _STRING_ROOTS:
        try:
            return _read_var(row, word, pos).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _corrupt(f"field {pos} is not UTF-8") from exc
    if root in _BYTES_ROOTS:
        return bytes(_read_var(row, word, pos))
    if root is TypeRoot.DATE:
        days = struct.unpack_from("<i", row, off)[0]
        try:
            return _EPOCH_DATE + dt.timedelta(days=days)
        except OverflowError:
            return days
    if root is TypeRoot.TIME:
        millis = struct.unpack_from("<i", row, off)[0]
        if not 0 <= millis < _MILLIS_PER_DAY:
            raise _corrupt(f"TIME value {millis} at field {pos}")
        secs, ms = divmod(millis, 1000)
        return dt.time(secs // 3600, secs // 60 % 60, secs % 60, ms * 1000)
    if root is TypeRoot.DECIMAL:
        if dtype.is_compact:
            unscaled = struct.unpack_from("<q", row, off)[0]
        else:
            unscaled = int.from_bytes(_read_var(row, word, pos), "big", signed=True)
        return Decimal(unscaled).scaleb(-(dtype.scale or 0), context=_DECIMAL_CONTEXT)
    if root in _TS_ROOTS:
        if dtype.is_compact:
            ts = Timestamp(millisecond=struct.unpack_from("<q", row, off)[0])
        else:
            offset = word >> 32
            if offset + 8 > len(row):
                raise _corrupt(f"field {pos} points past the row")
            nanos = word & 0xFFFF_FFFF
            if nanos > 999_999:
                raise _corrupt(f"nano_of_millisecond {nanos} at field {pos}")
            millis = struct.unpack_from("<q", row, offset)[0]
            ts = Timestamp(millisecond=millis, nano_of_millisecond=nanos)
        as_dt = ts.to_datetime()
        if as_dt is None:
            return ts
        return as_dt.replace(tzinfo=dt.UTC) if root is TypeRoot.TIMESTAMP_LTZ else as_dt
    raise UnsupportedTypeError(f"BinaryRow values of type {dtype.sql()} are not supported")


def decode_binary_row(data: bytes, types: Sequence[DataType]) -> tuple[object, ...]:
    """Decode a serialised row (as written by :func:`encode_binary_row`, Java or pypaimon).

    Args:
        data: ``4-byte big-endian arity + row bytes``.
        types: The Paimon type of each field; ``len(types)`` must equal the arity.

    Returns:
        One value per field, None for null, with the Python types
        :func:`encode_binary_row` accepts: DECIMAL as ``Decimal`` with the
        type's scale; TIMESTAMP as a naive ``datetime`` and TIMESTAMP_LTZ as
        a UTC-aware one, or a :class:`Timestamp` when the value has
        sub-microsecond digits or lies outside years 1..9999; DATE as a
        ``date``, or the int day count outside years 1..9999.

    Raises:
        CorruptMetadataError: the arity differs from ``len(types)``, the bytes
            are too short, or an offset points outside the row (``path`` is
            empty; callers know the file).
        UnsupportedTypeError: a non-null value of a nested, VARIANT or BLOB type.

    Source:
        ``org.apache.paimon.data.BinaryRow`` getters and
        ``SerializationUtils.deserializeBinaryRow``.
    """
    arity = binary_row_arity(data)
    if arity != len(types):
        raise _corrupt(f"arity {arity} but {len(types)} types")
    row = bytes(data[4:])
    bits = null_bits_size(arity)
    if len(row) < bits + 8 * arity:
        raise _corrupt(f"{len(row)} bytes for arity {arity}")
    out: list[object] = []
    for pos, dtype in enumerate(types):
        index = pos + _HEADER_BITS
        if row[index >> 3] & (1 << (index & 7)):
            out.append(None)
        else:
            out.append(_read_field(row, bits + 8 * pos, pos, dtype))
    return tuple(out)
