"""Fixed-bucket assignment against pypaimon's FixedBucketRowKeyExtractor and Java's layout."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Context, Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from snaplake.errors import SchemaMismatchError, UnsupportedTypeError
from snaplake.store.format.binary_row import encode_binary_row
from snaplake.store.format.bucket import bucket_ids, hash_binary_rows, murmur_hash_words
from snaplake.store.format.types import data_type_from_arrow, parse_type

VECTORS = Path(__file__).resolve().parents[2] / "fixtures" / "paimon_vectors"
BUCKETS = json.loads((VECTORS / "buckets.json").read_text())


@pytest.fixture(scope="module")
def table() -> pa.Table:
    with pa.OSFile(str(VECTORS / "buckets.arrow"), "rb") as f:
        return pa.ipc.open_file(f).read_all()


def _pypaimon_decimal_bug(value: Decimal | None, scale: int) -> bool:
    """pypaimon serialises -2**(8k-1) in DECIMAL(p > 18) with one byte too many."""
    if value is None:
        return False
    unscaled = int(value.scaleb(scale, Context(prec=100)))
    magnitude = -unscaled
    return unscaled < 0 and magnitude & (magnitude - 1) == 0 and magnitude.bit_length() % 8 == 0


def _scalar_hash(values: list[object], types: list[Any]) -> int:
    raw = encode_binary_row(values, types)[4:]
    words = np.frombuffer(raw, dtype="<u4")
    return int(murmur_hash_words(words, np.array([0]), np.array([len(words)]))[0])


@pytest.mark.parametrize("case", sorted(BUCKETS))
def test_buckets_match_pypaimon(table: pa.Table, case: str) -> None:
    keys = BUCKETS[case]["keys"]
    types = [data_type_from_arrow(table.schema.field(k).type) for k in keys]
    known_divergence = np.zeros(table.num_rows, dtype=bool)
    if "dec38" in keys:
        known_divergence = np.array(
            [_pypaimon_decimal_bug(v, 4) for v in table.column("dec38").to_pylist()]
        )
    for n, expected in BUCKETS[case]["buckets"].items():
        got = bucket_ids(table, keys, types, int(n))
        assert got.dtype == np.int32
        mismatch = got != np.array(expected)
        assert not (mismatch & ~known_divergence).any(), f"bucket count {n}"


def test_known_pypaimon_divergence_follows_java(table: pa.Table) -> None:
    """Rows where pypaimon is off hash to the Java row bytes (BigInteger.toByteArray)."""
    types = [parse_type("DECIMAL(38, 4)")]
    values = table.column("dec38").to_pylist()
    hashes = hash_binary_rows(table, ["dec38"], types)
    bug_rows = [i for i, v in enumerate(values) if _pypaimon_decimal_bug(v, 4)]
    assert bug_rows, "the vectors are meant to contain such a row"
    for i in bug_rows:
        assert hashes[i] == _scalar_hash([values[i]], types)


def test_every_row_hash_equals_scalar_encoding(table: pa.Table) -> None:
    keys = ["s", "ts_us", "dec38", "b", "d", "bin", "f64", "i8", "ltz_ms", "ls"]
    types = [data_type_from_arrow(table.schema.field(k).type) for k in keys]
    hashes = hash_binary_rows(table, keys, types)
    rows = table.select(keys).to_pylist()
    for h, row in zip(hashes, rows, strict=True):
        assert h == _scalar_hash([row[k] for k in keys], types)


@pytest.mark.parametrize(
    ("arrow_type", "value", "paimon"),
    [
        (pa.decimal128(38, 2), None, "DECIMAL(38, 2)"),
        (pa.timestamp("us"), None, "TIMESTAMP(6)"),
        (pa.timestamp("us", tz="UTC"), None, "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
        (pa.string(), None, "STRING"),
        (pa.decimal128(10, 2), None, "DECIMAL(10, 2)"),
    ],
)
def test_null_keys_hash_java_bytes(arrow_type: pa.DataType, value: object, paimon: str) -> None:
    """Null DECIMAL(p > 18)/TIMESTAMP(p > 3) keep Java's zeroed reservation in the hash."""
    t = pa.table({"k": pa.array([value, value], type=arrow_type)})
    types = [parse_type(paimon)]
    assert (hash_binary_rows(t, ["k"], types) == _scalar_hash([None], types)).all()


def test_sliced_chunked_and_view_inputs() -> None:
    strings = ["", "a", "abcdefg", "abcdefgh", "x" * 40, None, "日本語テキスト"]
    decimals = [
        Decimal("1.5"),
        None,
        Decimal("-128"),
        Decimal("0"),
        Decimal("1e20"),
        None,
        Decimal(3),
    ]
    full = pa.table(
        {
            "s": pa.array(strings * 3),
            "d": pa.array(decimals * 3, type=pa.decimal128(38, 1)),
            "t": pa.array(
                [dt.datetime(2000, 1, 1, 0, 0, 0, i) for i in range(21)],
                type=pa.timestamp("us"),
            ),
        }
    )
    types = [parse_type("STRING"), parse_type("DECIMAL(38, 1)"), parse_type("TIMESTAMP(6)")]
    keys = ["s", "d", "t"]
    expected = hash_binary_rows(full, keys, types)
    sliced = full.slice(5, 11)
    assert (hash_binary_rows(sliced, keys, types) == expected[5:16]).all()
    chunked = pa.concat_tables([full.slice(0, 4), full.slice(4, 9), full.slice(13)])
    assert (hash_binary_rows(chunked, keys, types) == expected).all()
    views = full.set_column(0, "s", full.column("s").cast(pa.string_view()))
    assert (hash_binary_rows(views, keys, types) == expected).all()
    large = full.set_column(0, "s", full.column("s").cast(pa.large_string()))
    assert (hash_binary_rows(large, keys, types) == expected).all()


def test_bucket_range_and_java_remainder() -> None:
    t = pa.table({"k": pa.array(range(-500, 500), type=pa.int64())})
    types = [parse_type("BIGINT")]
    hashes = hash_binary_rows(t, ["k"], types).astype(np.int64)
    assert (hashes < 0).any()
    for n in (1, 2, 7, 16, 17, 1000):
        got = bucket_ids(t, ["k"], types, n)
        # Java: Math.abs(hash % n), remainder truncated toward zero.
        java = np.abs(np.fmod(hashes, n))
        assert (got == java).all()
        assert got.min() >= 0
        assert got.max() < n


def test_empty_table_and_errors() -> None:
    t = pa.table({"k": pa.array([], type=pa.int32())})
    assert bucket_ids(t, ["k"], [parse_type("INT")], 4).shape == (0,)
    with pytest.raises(ValueError, match="num_buckets"):
        bucket_ids(t, ["k"], [parse_type("INT")], 0)
    with pytest.raises(SchemaMismatchError):
        bucket_ids(t, ["missing"], [parse_type("INT")], 4)
    nested = pa.table({"k": pa.array([[1]], type=pa.list_(pa.int32()))})
    with pytest.raises(UnsupportedTypeError):
        bucket_ids(nested, ["k"], [parse_type({"type": "ARRAY", "element": "INT"})], 4)
    sub_milli = pa.table({"k": pa.array([1001], type=pa.timestamp("us"))})
    with pytest.raises(SchemaMismatchError):
        bucket_ids(sub_milli, ["k"], [parse_type("TIMESTAMP(3)")], 4)


@pytest.mark.parametrize(("num_buckets", "expected"), [(3, 2), (4, 3), (7, 3), (1, 0)])
def test_no_bucket_key_hashes_the_empty_row(num_buckets, expected):
    """Append table with ``bucket > 0`` and no ``bucket-key``: Java's extractor projects the row on
    no columns, so every row lands in one bucket (buckets as pypaimon 2.1.0 placed them)."""
    data = pa.table({"a": pa.array(range(10), pa.int64())})
    assert bucket_ids(data, [], [], num_buckets).tolist() == [expected] * 10
