"""Value stats (truncate/full/counts/none) and manifest partition stats."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from snaplake.errors import InvalidOptionError, SchemaMismatchError
from snaplake.store.format.binary_row import EMPTY_BINARY_ROW, decode_binary_row, encode_binary_row
from snaplake.store.format.grouped_stats import grouped_value_stats
from snaplake.store.format.stats import (
    SimpleStatsParts,
    compare_partition_stats,
    compute_value_stats,
    truncate_max_bytes,
    truncate_max_string,
    truncate_min,
)
from snaplake.store.format.types import DataType, data_type_from_arrow, parse_type

VECTORS = Path(__file__).resolve().parents[2] / "fixtures" / "paimon_vectors"
STATS = json.loads((VECTORS / "stats.json").read_text())


@pytest.fixture(scope="module")
def bucket_table() -> pa.Table:
    with pa.OSFile(str(VECTORS / "buckets.arrow"), "rb") as f:
        return pa.ipc.open_file(f).read_all()


def _types(table: pa.Table) -> list[DataType]:
    return [data_type_from_arrow(f.type, nullable=f.nullable) for f in table.schema]


def _bounds(parts: SimpleStatsParts, types: list[DataType]) -> list[tuple[object, object]]:
    mins = decode_binary_row(parts.min_values, types)
    maxs = decode_binary_row(parts.max_values, types)
    return list(zip(mins, maxs, strict=True))


@pytest.mark.parametrize("which", ["all", "head"])
def test_full_mode_matches_pypaimon(bucket_table: pa.Table, which: str) -> None:
    """Full-mode bounds equal pypaimon's, except where we are deliberately safer."""
    data = bucket_table if which == "all" else bucket_table.slice(0, 7)
    types = _types(bucket_table)
    ours = compute_value_stats(data, types, stats_mode="full")
    want = STATS[which]
    assert list(ours.null_counts) == want["null_counts"]
    theirs = SimpleStatsParts(
        min_values=bytes.fromhex(want["min_values"]),
        max_values=bytes.fromhex(want["max_values"]),
        null_counts=tuple(want["null_counts"]),
    )
    for dtype, (lo, hi), (their_lo, their_hi) in zip(
        types, _bounds(ours, types), _bounds(theirs, types), strict=True
    ):
        if dtype.root.value in ("FLOAT", "DOUBLE"):
            # Zero bounds are widened to -0.0 / +0.0; equal as numbers.
            assert lo == their_lo
            assert hi == their_hi
        else:
            assert (lo, hi) == (their_lo, their_hi), dtype.sql()


def test_truncate_mode_strings_and_bytes() -> None:
    long_a = "a" * 20
    data = pa.table(
        {
            "s": pa.array([long_a, "b" * 16, None, "ab"]),
            "b": pa.array([b"\x00" * 3, b"\x01" * 17 + b"\xff", b"\x02", None]),
        }
    )
    types = [parse_type("STRING"), parse_type("BYTES")]
    parts = compute_value_stats(data, types)
    assert parts.null_counts == (1, 1)
    (s_lo, s_hi), (b_lo, b_hi) = _bounds(parts, types)
    assert s_lo == "a" * 16
    assert s_hi == "b" * 16  # short enough: kept as is
    assert b_lo == b"\x00" * 3
    assert b_hi == b"\x02"


def test_truncated_max_increments_last_code_point() -> None:
    data = pa.table({"s": pa.array(["x" * 15 + "yz", "a"])})
    ((lo, hi),) = _bounds(compute_value_stats(data, [parse_type("STRING")]), [parse_type("STRING")])
    assert lo == "a"
    assert hi == "x" * 15 + "z"


def test_unboundable_max_nulls_both_bounds() -> None:
    top = "\U0010ffff" * 17
    data = pa.table({"s": pa.array([top, "a"]), "n": pa.array([1, 2])})
    types = [parse_type("STRING"), parse_type("BIGINT")]
    parts = compute_value_stats(data, types)
    assert _bounds(parts, types) == [(None, None), (1, 2)]
    assert parts.null_counts == (0, 0)


@pytest.mark.parametrize(
    ("value", "length", "expected"),
    [
        ("abc", 3, "abc"),
        ("abcd", 3, "abd"),
        ("ab\U0010ffff" + "z", 3, "ac"),
        ("\ud7ff" * 3, 2, "\ud7ff\ue000"),  # skips the surrogate range (Java writes '?')
        ("\U0010ffff" * 4, 3, None),
    ],
)
def test_truncate_max_string(value: str, length: int, expected: str | None) -> None:
    got = truncate_max_string(value, length)
    assert got == expected
    if got is not None:
        assert got >= value
        assert got.encode() >= value.encode()
        assert len(got) <= length


@given(st.text(), st.integers(1, 20))
def test_truncated_bounds_bracket_the_value(value: str, length: int) -> None:
    lo = truncate_min(value, length)
    hi = truncate_max_string(value, length)
    assert lo.encode() <= value.encode()
    if hi is not None:
        assert hi.encode() >= value.encode()


@given(st.binary(), st.integers(1, 20))
def test_truncated_byte_max_is_upper_bound(value: bytes, length: int) -> None:
    hi = truncate_max_bytes(value, length)
    if hi is not None:
        assert hi >= value
        assert len(hi) <= length
    else:
        assert value[:length] == b"\xff" * length


@given(st.binary(), st.integers(1, 20))
def test_truncated_byte_min_is_lower_bound(value: bytes, length: int) -> None:
    lo = truncate_min(value, length)
    assert lo <= value
    assert value.startswith(lo)
    assert len(lo) == min(len(value), length)


def test_floats_with_nan_get_no_bounds_and_zero_is_widened() -> None:
    data = pa.table(
        {
            "nan": pa.array([1.0, float("nan"), None]),
            "zero": pa.array([0.0, 2.0, 0.0], type=pa.float32()),
            "neg": pa.array([-3.0, -0.0, -1.0]),
        }
    )
    types = _types(data)
    parts = compute_value_stats(data, types)
    bounds = _bounds(parts, types)
    assert bounds[0] == (None, None)
    assert parts.null_counts == (1, 0, 0)
    zero_lo, zero_hi = bounds[1]
    assert zero_lo == 0
    assert math.copysign(1, zero_lo) < 0
    assert zero_hi == 2.0
    neg_lo, neg_hi = bounds[2]
    assert neg_lo == -3.0
    assert neg_hi == 0
    assert math.copysign(1, neg_hi) > 0


def test_unbounded_types_and_all_null_columns() -> None:
    data = pa.table(
        {
            "arr": pa.array([[1], None]),
            "st": pa.array([{"x": 1}, {"x": 2}]),
            "allnull": pa.array([None, None], type=pa.int32()),
            "ts9": pa.array([1, 2], type=pa.int64()),
            "ok": pa.array([dt.date(2024, 1, 2), dt.date(2023, 1, 1)]),
        }
    )
    types = [*_types(data)[:3], parse_type("TIMESTAMP(9)"), parse_type("DATE")]
    parts = compute_value_stats(data, types)
    assert _bounds(parts, types) == [
        (None, None),
        (None, None),
        (None, None),
        (None, None),
        (dt.date(2023, 1, 1), dt.date(2024, 1, 2)),
    ]
    assert parts.null_counts == (1, 0, 2, 0, 0)


def test_timestamps_decimals_and_views() -> None:
    data = pa.table(
        {
            "t": pa.array([1_700_000_000_123_456, -5], type=pa.timestamp("us")),
            "l": pa.array([3, 1], type=pa.timestamp("ms", tz="UTC")),
            "d": pa.array([Decimal("1.10"), Decimal("-2.00")], type=pa.decimal128(38, 2)),
            "v": pa.array(["b", "a"], type=pa.string_view()),
            "time": pa.array([1000, 5], type=pa.time32("ms")),
        }
    )
    types = _types(data)
    bounds = _bounds(compute_value_stats(data, types), types)
    epoch = dt.datetime(1970, 1, 1)
    assert bounds[0] == (
        epoch - dt.timedelta(microseconds=5),
        epoch + dt.timedelta(microseconds=1_700_000_000_123_456),
    )
    utc = epoch.replace(tzinfo=dt.UTC)
    assert bounds[1] == (utc + dt.timedelta(milliseconds=1), utc + dt.timedelta(milliseconds=3))
    assert bounds[2] == (Decimal("-2.00"), Decimal("1.10"))
    assert bounds[3] == ("a", "b")
    assert bounds[4] == (dt.time(0, 0, 0, 5000), dt.time(0, 0, 1))


def test_modes_counts_and_none() -> None:
    data = pa.table({"a": pa.array([1, None, 3])})
    types = _types(data)
    counts = compute_value_stats(data, types, stats_mode="counts")
    assert _bounds(counts, types) == [(None, None)]
    assert counts.null_counts == (1,)
    nothing = compute_value_stats(data, types, stats_mode="none")
    assert nothing.null_counts == (None,)
    assert _bounds(nothing, types) == [(None, None)]
    with pytest.raises(InvalidOptionError):
        compute_value_stats(data, types, stats_mode="truncate(0)")
    with pytest.raises(SchemaMismatchError):
        compute_value_stats(data, [*types, *types])


def test_empty_table_and_no_columns() -> None:
    empty = pa.table({"a": pa.array([], type=pa.int64())})
    parts = compute_value_stats(empty, _types(empty))
    assert parts.null_counts == (0,)
    assert _bounds(parts, _types(empty)) == [(None, None)]
    nothing = compute_value_stats(pa.table({}), [])
    assert nothing == SimpleStatsParts(
        min_values=EMPTY_BINARY_ROW, max_values=EMPTY_BINARY_ROW, null_counts=()
    )


def test_partition_stats_over_rows() -> None:
    types = [parse_type("STRING"), parse_type("DOUBLE"), parse_type("TIMESTAMP(6)")]
    t0 = dt.datetime(2024, 1, 1, 0, 0, 0, 1)
    rows = [
        encode_binary_row(["b", 0.0, t0], types),
        encode_binary_row(["a", -0.0, None], types),
        encode_binary_row([None, float("nan"), t0 + dt.timedelta(days=1)], types),
        encode_binary_row(["b", 0.0, t0], types),
    ]
    parts = compare_partition_stats(rows, types)
    assert parts.null_counts == (1, 0, 1)
    (s_lo, s_hi), (f_lo, f_hi), (t_lo, t_hi) = _bounds(parts, types)
    assert (s_lo, s_hi) == ("a", "b")
    assert isinstance(f_lo, float)
    assert isinstance(f_hi, float)
    assert f_lo == 0
    assert math.copysign(1, f_lo) < 0  # Double.compare: -0.0 < 0.0
    assert math.isnan(f_hi)  # NaN sorts last
    assert (t_lo, t_hi) == (t0, t0 + dt.timedelta(days=1))


def test_partition_stats_edge_cases() -> None:
    assert compare_partition_stats([EMPTY_BINARY_ROW, EMPTY_BINARY_ROW], []) == SimpleStatsParts(
        min_values=EMPTY_BINARY_ROW, max_values=EMPTY_BINARY_ROW, null_counts=()
    )
    types = [parse_type("INT")]
    none = compare_partition_stats([], types)
    assert none.null_counts == (0,)
    assert _bounds(none, types) == [(None, None)]
    utf8 = [parse_type("STRING")]
    rows = [encode_binary_row([s], utf8) for s in ["\uffff", "\U00010000", "z"]]
    # UTF-8 byte order (Java BinaryString.compareTo) equals code point order.
    assert _bounds(compare_partition_stats(rows, utf8), utf8) == [("z", "\U00010000")]


def test_a_bound_that_does_not_encode_is_dropped_and_the_others_kept() -> None:
    """The whole rows encode at once; only when that fails is each bound checked alone."""
    decimals = pa.array([Decimal("12345"), Decimal("7")], pa.decimal128(10, 0))
    data = pa.table({"n": pa.array([3, 1], pa.int64()), "d": decimals})
    types = [parse_type("BIGINT"), parse_type("DECIMAL(3, 0)")]
    parts = compute_value_stats(data, types)
    assert decode_binary_row(parts.min_values, types) == (1, None)
    assert decode_binary_row(parts.max_values, types) == (3, None)
    assert parts.null_counts == (0, 0)


_MIXED = pa.table(
    {
        "nan": pa.array([1.0, float("nan"), None, -0.0, 0.0, 2.5, None, 7.0]),
        "f32": pa.array([0.0, 2.0, 0.0, -1.5, None, 3.0, 0.0, -0.0], type=pa.float32()),
        "s": pa.array(["z" * 20, "a", None, "\U0010ffff" * 17, "b", "", None, "q" * 16]),
        "b": pa.array([b"\xff" * 17, b"a", None, b"", b"x" * 30, b"y", None, b"\x00"]),
        "v": pa.array(["b", "a", None, "c", "d", None, "e", "f"], type=pa.string_view()),
        "arr": pa.array([[1], None, [2], [], None, [3], [4], [5]]),
        "allnull": pa.array([None] * 8, type=pa.int32()),
        "d": pa.array([dt.date(2024, 1, 2), None, dt.date(1, 1, 1), dt.date(9999, 12, 31)] * 2),
        "t": pa.array([1_700_000_000_123_456, -5, None, 0] * 2, type=pa.timestamp("us")),
        "l": pa.array([3, 1, None, 2] * 2, type=pa.timestamp("ms", tz="UTC")),
        "dec": pa.array(
            [Decimal("1.10"), Decimal("-2.00"), None, Decimal("0")] * 2, type=pa.decimal128(38, 2)
        ),
        "time": pa.array([1000, 5, None, 7] * 2, type=pa.time32("ms")),
        "bool": pa.array([True, None, False, True] * 2),
    }
)


@given(
    st.lists(st.integers(1, 8), min_size=1, max_size=6),
    st.sampled_from(["truncate(16)", "truncate(1)", "full", "counts", "none"]),
)
def test_grouped_value_stats_equal_each_ranges_own(sizes: list[int], mode: str) -> None:
    """grouped_value_stats gives, range by range, the bytes compute_value_stats gives."""
    data = pa.concat_tables([_MIXED] * (1 + sum(sizes) // _MIXED.num_rows))
    data = data.slice(0, sum(sizes))
    types = _types(_MIXED)
    grouped = grouped_value_stats(data, sizes, types, stats_mode=mode)
    offset = 0
    for size, parts in zip(sizes, grouped, strict=True):
        assert parts == compute_value_stats(data.slice(offset, size), types, stats_mode=mode)
        offset += size


@given(st.lists(st.integers(1, 40), min_size=2, max_size=5))
def test_grouped_value_stats_over_every_key_type(bucket_table: pa.Table, sizes: list[int]) -> None:
    data = pa.concat_tables([bucket_table] * (1 + sum(sizes) // bucket_table.num_rows))
    data = data.slice(0, sum(sizes))
    types = _types(bucket_table)
    offset = 0
    for size, parts in zip(sizes, grouped_value_stats(data, sizes, types), strict=True):
        assert parts == compute_value_stats(data.slice(offset, size), types)
        offset += size
