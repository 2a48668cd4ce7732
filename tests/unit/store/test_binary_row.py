"""BinaryRow codec: byte-exact against pypaimon vectors and against Java's writer by hand."""

from __future__ import annotations

import datetime as dt
import json
import struct
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from snaplake.errors import CorruptMetadataError, SchemaMismatchError, UnsupportedTypeError
from snaplake.store.format.binary_row import (
    EMPTY_BINARY_ROW,
    Timestamp,
    binary_row_arity,
    decode_binary_row,
    encode_binary_row,
    fixed_part_size,
    null_bits_size,
)
from snaplake.store.format.types import parse_type

VECTORS = Path(__file__).resolve().parents[2] / "fixtures" / "paimon_vectors"


def untag(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    t, x = v["t"], v["v"]
    if t == "double":
        return struct.unpack(">d", bytes.fromhex(x))[0]
    parsers: dict[str, Callable[[str], Any]] = {
        "decimal": Decimal,
        "datetime": dt.datetime.fromisoformat,
        "date": dt.date.fromisoformat,
        "time": dt.time.fromisoformat,
        "bytes": bytes.fromhex,
    }
    return parsers[t](x)


ROW_CASES = json.loads((VECTORS / "binary_rows.json").read_text())


def T(s: str):  # noqa: N802 - short type factory for tables of cases
    return parse_type(s)


@pytest.mark.parametrize("case", ROW_CASES, ids=lambda c: ",".join(c["types"])[:60] or "empty")
def test_encode_matches_pypaimon(case: dict[str, Any]) -> None:
    types = [T(t) for t in case["types"]]
    values = [untag(v) for v in case["values"]]
    assert encode_binary_row(values, types).hex() == case["bytes"]


@pytest.mark.parametrize("case", ROW_CASES, ids=lambda c: ",".join(c["types"])[:60] or "empty")
def test_decode_pypaimon_bytes_round_trips(case: dict[str, Any]) -> None:
    types = [T(t) for t in case["types"]]
    data = bytes.fromhex(case["bytes"])
    decoded = decode_binary_row(data, types)
    assert encode_binary_row(list(decoded), types) == data
    for got, tagged in zip(decoded, case["values"], strict=True):
        want = untag(tagged)
        if isinstance(want, float) and want != want:
            assert got != got
        elif isinstance(want, dt.datetime) and want.tzinfo is None and isinstance(got, dt.datetime):
            assert got.replace(tzinfo=None) == want
        else:
            assert got == want


def test_empty_row_is_twelve_bytes() -> None:
    assert EMPTY_BINARY_ROW == b"\x00\x00\x00\x00" + b"\x00" * 8
    assert encode_binary_row([], []) == EMPTY_BINARY_ROW
    assert decode_binary_row(EMPTY_BINARY_ROW, []) == ()
    assert binary_row_arity(EMPTY_BINARY_ROW) == 0


@pytest.mark.parametrize(
    ("arity", "bits"), [(0, 8), (1, 8), (56, 8), (57, 16), (120, 16), (121, 24)]
)
def test_null_bitset_width(arity: int, bits: int) -> None:
    assert null_bits_size(arity) == bits
    assert fixed_part_size(arity) == bits + 8 * arity


def test_int_layout_has_no_sign_extension() -> None:
    row = encode_binary_row([-1], [T("INT")])
    assert row == bytes.fromhex("00000001" + "00" * 8 + "ffffffff00000000")


def test_inline_and_out_of_line_strings() -> None:
    inline = encode_binary_row(["abc"], [T("STRING")])
    assert inline[4 + 8 :] == b"abc\x00\x00\x00\x00\x83"
    long = encode_binary_row(["abcdefghi"], [T("STRING")])
    slot = struct.unpack_from("<Q", long, 12)[0]
    assert slot == (16 << 32) | 9
    assert long[4 + 16 :] == b"abcdefghi" + b"\x00" * 7


def test_null_high_precision_decimal_keeps_java_reservation() -> None:
    """Java's writer keeps a zeroed 16-byte slot and its offset for a null DECIMAL(p > 18)."""
    row = encode_binary_row([None], [T("DECIMAL(38, 2)")])
    bitset = b"\x00\x01" + b"\x00" * 6
    assert row == b"\x00\x00\x00\x01" + bitset + struct.pack("<Q", 16 << 32) + b"\x00" * 16
    assert decode_binary_row(row, [T("DECIMAL(38, 2)")]) == (None,)


def test_null_high_precision_timestamp_keeps_java_reservation() -> None:
    row = encode_binary_row([None, 7], [T("TIMESTAMP(6)"), T("INT")])
    bitset = b"\x00\x01" + b"\x00" * 6
    slots = struct.pack("<Q", 24 << 32) + struct.pack("<Q", 7)
    assert row == b"\x00\x00\x00\x02" + bitset + slots + b"\x00" * 8


@pytest.mark.parametrize(
    ("unscaled", "java_bytes"),
    [
        (0, "00"),
        (127, "7f"),
        (128, "0080"),
        (-1, "ff"),
        (-128, "80"),
        (-129, "ff7f"),
        (-32768, "8000"),
        (32767, "7fff"),
    ],
)
def test_high_precision_decimal_bytes_are_biginteger_to_byte_array(
    unscaled: int, java_bytes: str
) -> None:
    """Java ``BigInteger.toByteArray``; pypaimon adds a byte for -128, -32768, ..."""
    dtype = T("DECIMAL(20, 0)")
    row = encode_binary_row([Decimal(unscaled)], [dtype])
    n = len(java_bytes) // 2
    assert struct.unpack_from("<Q", row, 12)[0] == (16 << 32) | n
    assert row[20 : 20 + n].hex() == java_bytes
    assert row[20 + n :] == b"\x00" * (16 - n)
    assert decode_binary_row(row, [dtype]) == (Decimal(unscaled),)


def test_timestamp_precision_layouts() -> None:
    value = dt.datetime(1969, 12, 31, 23, 59, 59, 999_001)
    compact = encode_binary_row([value.replace(microsecond=999_000)], [T("TIMESTAMP(3)")])
    assert struct.unpack_from("<q", compact, 12)[0] == -1
    wide = encode_binary_row([value], [T("TIMESTAMP(6)")])
    assert struct.unpack_from("<Q", wide, 12)[0] == (16 << 32) | 1000
    assert struct.unpack_from("<q", wide, 20)[0] == -1


def test_nanosecond_timestamp_decodes_to_timestamp() -> None:
    ts = Timestamp(millisecond=1_700_000_000_123, nano_of_millisecond=456_789)
    row = encode_binary_row([ts], [T("TIMESTAMP(9)")])
    assert decode_binary_row(row, [T("TIMESTAMP(9)")]) == (ts,)


def test_ltz_decodes_aware_and_accepts_any_zone() -> None:
    plus2 = dt.timezone(dt.timedelta(hours=2))
    value = dt.datetime(2024, 1, 1, 12, 0, tzinfo=plus2)
    row = encode_binary_row([value], [T("TIMESTAMP(3) WITH LOCAL TIME ZONE")])
    (back,) = decode_binary_row(row, [T("TIMESTAMP(3) WITH LOCAL TIME ZONE")])
    assert isinstance(back, dt.datetime)
    assert back == value
    assert back.tzinfo == dt.UTC


def test_nested_types_encode_only_null() -> None:
    arr = parse_type({"type": "ARRAY", "element": "INT"})
    row = encode_binary_row([None, 1], [arr, T("INT")])
    assert decode_binary_row(row, [arr, T("INT")]) == (None, 1)
    with pytest.raises(UnsupportedTypeError):
        encode_binary_row([[1]], [arr])


@pytest.mark.parametrize(
    ("value", "type_str"),
    [
        (128, "TINYINT"),
        (True, "INT"),
        ("1", "INT"),
        (1, "STRING"),
        (Decimal("1.234"), "DECIMAL(10, 2)"),
        (Decimal("123456789.1"), "DECIMAL(10, 2)"),
        (Decimal("NaN"), "DECIMAL(10, 2)"),
        (dt.datetime(2024, 1, 1, tzinfo=dt.UTC), "TIMESTAMP(6)"),
        (dt.datetime(2024, 1, 1, 0, 0, 0, 1), "TIMESTAMP(3)"),
        (dt.datetime(2024, 1, 1), "DATE"),
        (1e300, "FLOAT"),
    ],
)
def test_mismatched_values_are_refused(value: object, type_str: str) -> None:
    with pytest.raises(SchemaMismatchError):
        encode_binary_row([value], [T(type_str)])


def test_value_count_must_match() -> None:
    with pytest.raises(SchemaMismatchError):
        encode_binary_row([1, 2], [T("INT")])


def test_decode_rejects_wrong_arity_and_truncation() -> None:
    row = encode_binary_row(["a long string value"], [T("STRING")])
    with pytest.raises(CorruptMetadataError):
        decode_binary_row(row, [T("STRING"), T("INT")])
    with pytest.raises(CorruptMetadataError):
        decode_binary_row(row[:20], [T("STRING")])
    with pytest.raises(CorruptMetadataError):
        decode_binary_row(b"\x00\x00", [])
