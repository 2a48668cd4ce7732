"""CLI value parsing: filters, literals, k=v pairs, ages, partition specs."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import click
import pyarrow as pa
import pytest

from snaplake.cli.parsing import (
    parse_age,
    parse_columns,
    parse_filters,
    parse_key_values,
    parse_literal,
    parse_partition_spec,
)
from snaplake.store.read.predicate import Predicate

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("city", pa.string()),
        ("amount", pa.float64()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("tz", pa.timestamp("us", tz="UTC")),
        ("price", pa.decimal128(10, 2)),
        ("ok", pa.bool_()),
    ]
)


def test_filters() -> None:
    assert parse_filters(["id > 5 AND city = 'New York and more'"], schema=SCHEMA) == [
        Predicate(column="id", op=">", value=5),
        Predicate(column="city", op="=", value="New York and more"),
    ]
    assert parse_filters(["city = 'this or that'"], schema=SCHEMA) == [
        Predicate(column="city", op="=", value="this or that")
    ]
    assert parse_filters(["id<>3", "amount<=2.5", "id == 1"], schema=SCHEMA) == [
        Predicate(column="id", op="!=", value=3),
        Predicate(column="amount", op="<=", value=2.5),
        Predicate(column="id", op="=", value=1),
    ]
    assert parse_filters(
        ["city not in ('a, b', \"c\")", "day is null", "ok IS NOT NULL"], schema=SCHEMA
    ) == [
        Predicate(column="city", op="not in", value=("a, b", "c")),
        Predicate(column="day", op="is null"),
        Predicate(column="ok", op="is not null"),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("zzz = 1", "unknown column"),
        ("id = x", "not a valid int64"),
        ("id = null", "is null"),
        ("id ~ 1", "cannot read filter term"),
        ("id > 1 and  and id < 3", "cannot read filter term 'and id < 3'"),
        ("id in ()", "empty list"),
        ("id = 1 OR id = 2", "'and' only"),
    ],
)
def test_bad_filters(text: str, message: str) -> None:
    with pytest.raises(click.BadParameter, match=message):
        parse_filters([text], schema=SCHEMA)


def test_literals_follow_the_column_type() -> None:
    def lit(text: str, name: str) -> object:
        return parse_literal(text, SCHEMA.field(name).type, column=name)

    assert lit("2024-01-02", "day") == dt.date(2024, 1, 2)
    assert lit("'2024-01-02 03:04:05'", "ts") == dt.datetime(2024, 1, 2, 3, 4, 5)
    assert lit("2024-01-02T03:04:05+02:00", "ts") == dt.datetime(2024, 1, 2, 1, 4, 5)
    assert lit("2024-01-02T03:04:05", "tz") == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert lit("12.50", "price") == Decimal("12.50")
    assert lit("TRUE", "ok") is True
    assert lit("'42'", "city") == "42"
    with pytest.raises(click.BadParameter, match="true or false"):
        lit("yes", "ok")


def test_key_values_never_echo_values() -> None:
    assert parse_key_values(["a=1", "b=x=y", "a=2"], what="--option") == {"a": "2", "b": "x=y"}
    with pytest.raises(click.BadParameter) as info:
        parse_key_values(["s3.secret-key:hunter2"], what="--option")
    assert "hunter2" not in str(info.value)
    with pytest.raises(click.BadParameter):
        parse_key_values(["=v"], what="--option")


def test_columns_and_age() -> None:
    assert parse_columns("id, city", schema=SCHEMA) == ["id", "city"]
    assert parse_columns(None, schema=SCHEMA) is None
    with pytest.raises(click.BadParameter):
        parse_columns(" , ", schema=SCHEMA)
    assert parse_age("1d") == dt.timedelta(days=1)
    assert parse_age("30 min") == dt.timedelta(minutes=30)
    for bad in ("5", "1 fortnight", "soon"):
        with pytest.raises(click.BadParameter):
            parse_age(bad)


def test_partition_spec() -> None:
    spec = parse_partition_spec(
        ["day=2024-01-01", "city=__DEFAULT_PARTITION__"], schema=SCHEMA,
        partition_keys=["day", "city"],
    )  # fmt: skip
    assert spec == {"day": dt.date(2024, 1, 1), "city": None}
    with pytest.raises(click.BadParameter, match="not a partition key"):
        parse_partition_spec(["id=1"], schema=SCHEMA, partition_keys=["day"])


def test_binary_n_literals_have_n_bytes() -> None:
    assert parse_literal("'abcd'", pa.binary(4), column="b") == b"abcd"
    with pytest.raises(click.BadParameter, match="BINARY\\(4\\) values have 4 bytes"):
        parse_literal("abc", pa.binary(4), column="b")
