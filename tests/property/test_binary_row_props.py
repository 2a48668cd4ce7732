"""BinaryRow round trip for every supported type, and agreement with the vectorised hash."""

from __future__ import annotations

import datetime as dt
from decimal import Context, Decimal

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from snaplake.store.format.binary_row import Timestamp, decode_binary_row, encode_binary_row
from snaplake.store.format.bucket import hash_binary_rows, murmur_hash_words
from snaplake.store.format.types import DataType, parse_type, to_arrow_type

_UTC = dt.UTC


def _decimal(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    bound = 10**precision - 1
    exact = Context(prec=100)  # the default 28 digits would round DECIMAL(38, s) values
    return st.integers(-bound, bound).map(lambda u: Decimal(u).scaleb(-scale, context=exact))


def _naive(min_year: int = 1, max_year: int = 9999) -> st.SearchStrategy[dt.datetime]:
    lo = dt.datetime(min_year, 1, 1)
    hi = dt.datetime(max_year, 12, 31)
    return st.datetimes(min_value=lo, max_value=hi)


_TYPED: list[tuple[str, st.SearchStrategy[object]]] = [
    ("BOOLEAN", st.booleans()),
    ("TINYINT", st.integers(-(2**7), 2**7 - 1)),
    ("SMALLINT", st.integers(-(2**15), 2**15 - 1)),
    ("INT", st.integers(-(2**31), 2**31 - 1)),
    ("BIGINT", st.integers(-(2**63), 2**63 - 1)),
    ("FLOAT", st.floats(width=32, allow_nan=False)),
    ("DOUBLE", st.floats(allow_nan=False)),
    ("STRING", st.text()),
    ("VARCHAR(20)", st.text(max_size=20)),
    ("CHAR(3)", st.text(min_size=3, max_size=3)),
    ("BYTES", st.binary()),
    ("BINARY(9)", st.binary(min_size=9, max_size=9)),
    ("DATE", st.dates()),
    ("TIME(3)", st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))),
    ("DECIMAL(10, 2)", _decimal(10, 2)),
    ("DECIMAL(18, 0)", _decimal(18, 0)),
    ("DECIMAL(19, 4)", _decimal(19, 4)),
    ("DECIMAL(38, 10)", _decimal(38, 10)),
    ("TIMESTAMP(0)", _naive().map(lambda d: d.replace(microsecond=0))),
    ("TIMESTAMP(3)", _naive().map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))),
    ("TIMESTAMP(6)", _naive()),
    (
        "TIMESTAMP(9)",
        st.builds(
            lambda ms, ns: Timestamp(millisecond=ms, nano_of_millisecond=ns),
            st.integers(-(2**50), 2**50),
            st.integers(1, 999_999).filter(lambda n: n % 1000),
        ),
    ),
    (
        "TIMESTAMP(3) WITH LOCAL TIME ZONE",
        _naive(2, 9998).map(
            lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=_UTC)
        ),
    ),
    ("TIMESTAMP(6) WITH LOCAL TIME ZONE", _naive(2, 9998).map(lambda d: d.replace(tzinfo=_UTC))),
]


@st.composite
def typed_rows(draw: st.DrawFn) -> tuple[list[DataType], list[object]]:
    chosen = draw(st.lists(st.sampled_from(_TYPED), max_size=70))
    types = [parse_type(t) for t, _ in chosen]
    values = [draw(st.none() | strategy) for _, strategy in chosen]
    return types, values


@given(typed_rows())
def test_round_trip(row: tuple[list[DataType], list[object]]) -> None:
    types, values = row
    data = encode_binary_row(values, types)
    assert len(data) % 8 == 4
    decoded = decode_binary_row(data, types)
    assert list(decoded) == values
    assert encode_binary_row(list(decoded), types) == data


_HASHABLE = [
    (t, s)
    for t, s in _TYPED
    if t not in ("TIMESTAMP(9)", "TIME(3)", "CHAR(3)", "BINARY(9)", "VARCHAR(20)")
]


@given(st.data())
def test_vectorised_hash_equals_scalar_rows(data: st.DataObject) -> None:
    """bucket.py builds the same bytes as encode_binary_row, for every row."""
    chosen = data.draw(st.lists(st.sampled_from(_HASHABLE), min_size=1, max_size=4))
    types = [parse_type(t) for t, _ in chosen]
    n = data.draw(st.integers(0, 12))
    rows = [[data.draw(st.none() | s) for _, s in chosen] for _ in range(n)]
    table = pa.table(
        {
            f"c{i}": pa.array([r[i] for r in rows], type=to_arrow_type(t))
            for i, t in enumerate(types)
        }
    )
    hashes = hash_binary_rows(table, [f"c{i}" for i in range(len(types))], types)
    for r, h in zip(rows, hashes, strict=True):
        raw = encode_binary_row(r, types)[4:]
        words = np.frombuffer(raw, dtype="<u4")
        expected = murmur_hash_words(words, np.array([0]), np.array([len(words)]))[0]
        assert h == expected
