"""Parquet, ORC and Avro data files: every column type round-trips through each format."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snaplake.errors import UnsupportedTypeError
from snaplake.store.format.avro import parse_container
from snaplake.store.format.file_format import file_format, format_of_file

_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("i32", pa.int32()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("b", pa.bool_()),
        ("s", pa.string()),
        ("bin", pa.binary()),
        ("fbin", pa.binary(3)),
        ("d10", pa.decimal128(10, 2)),
        ("d38", pa.decimal128(38, 6)),
        ("day", pa.date32()),
        ("t", pa.time32("ms")),
        ("ts0", pa.timestamp("s")),
        ("ts3", pa.timestamp("ms")),
        ("ts6", pa.timestamp("us")),
        ("ltz", pa.timestamp("us", tz="UTC")),
    ]
)


def _rows(n: int = 50) -> pa.Table:
    base = dt.datetime(2024, 2, 29, 23, 59, 58)
    cols = {
        "id": list(range(n)),
        "i8": [None if i % 7 == 0 else i - 25 for i in range(n)],
        "i16": [i * 300 - 7000 for i in range(n)],
        "i32": [None if i % 5 == 0 else i * 70_000 for i in range(n)],
        "f32": [i / 3 for i in range(n)],
        "f64": [None if i % 3 == 0 else -i / 7 for i in range(n)],
        "b": [i % 2 == 0 for i in range(n)],
        "s": [None if i % 4 == 0 else f"s{i}" * (i % 9) for i in range(n)],
        "bin": [bytes([i, 255 - i]) for i in range(n)],
        "fbin": [None if i % 9 == 0 else bytes([i, 0, 255 - i]) for i in range(n)],
        "d10": [Decimal(i * 37 - 900) / 100 for i in range(n)],
        "d38": [None if i % 6 == 0 else Decimal(-(2**100) + i) / 10**6 for i in range(n)],
        "day": [dt.date(1969, 12, 20) + dt.timedelta(days=i * 40) for i in range(n)],
        "t": [dt.time(i % 24, i % 60, i % 60, (i * 1000) % 1_000_000) for i in range(n)],
        "ts0": [base - dt.timedelta(days=i * 400) for i in range(n)],
        "ts3": [base + dt.timedelta(milliseconds=i * 1001) for i in range(n)],
        "ts6": [None if i % 8 == 0 else base - dt.timedelta(microseconds=i * 999_999)
                for i in range(n)],
        "ltz": [dt.datetime(2001, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=i * 7)
                for i in range(n)],
    }  # fmt: skip
    return pa.table(cols, schema=_SCHEMA)


def _round_trip(fmt: str, data: pa.Table, **kw: object) -> tuple[bytes, pa.Table]:
    spec = file_format(fmt)
    buf = pa.BufferOutputStream()
    spec.write(data, buf, compression=str(kw.pop("compression", "zstd")), zstd_level=1, **kw)
    body = buf.getvalue().to_pybytes()
    return body, spec.read(pa.BufferReader(body), data.schema)


@pytest.mark.parametrize("fmt", ["parquet", "orc", "avro"])
@pytest.mark.parametrize("compression", ["zstd", "snappy", "none"])
def test_every_flat_type_round_trips(fmt, compression):
    data = _rows()
    _, back = _round_trip(fmt, data, compression=compression)
    assert back.equals(data)


@pytest.mark.parametrize("fmt", ["parquet", "orc", "avro"])
def test_projection_by_name_in_any_order(fmt):
    data = _rows(10)
    body, _ = _round_trip(fmt, data)
    wanted = pa.schema([_SCHEMA.field("ts6"), _SCHEMA.field("id")])
    back = file_format(fmt).read(pa.BufferReader(body), wanted)
    assert back.equals(data.select(["ts6", "id"]))


def test_orc_file_has_javas_types():
    import pyarrow.orc as orc

    body, _ = _round_trip("orc", _rows(3))
    schema = orc.ORCFile(pa.BufferReader(body)).schema
    assert schema.field("t").type == pa.int32()  # TIME is an ORC int, as Java writes it
    assert schema.field("ltz").type == pa.timestamp("ns")  # legacy: a plain timestamp of UTC
    body, _ = _round_trip("orc", _rows(3), ltz_legacy=False)
    assert orc.ORCFile(pa.BufferReader(body)).schema.field("ltz").type.tz is not None


def test_avro_file_has_javas_schema_and_plain_fastavro_reads_it():
    body, _ = _round_trip("avro", _rows(5), compression="deflate")
    container = parse_container(body, path="x")
    assert container.codec == "deflate"
    reader = fastavro.reader(io.BytesIO(body))
    schema: Any = reader.writer_schema
    assert schema["name"] == "org.apache.paimon.avro.generated.record"
    by_name = {f["name"]: f["type"] for f in schema["fields"]}
    assert by_name["id"] == "long"
    assert by_name["ts6"][1]["logicalType"] == "timestamp-micros"
    assert by_name["ts3"][1]["logicalType"] == "timestamp-millis"
    assert by_name["ltz"][1]["logicalType"] == "local-timestamp-micros"
    assert by_name["d38"][1] == {
        "type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 6
    }  # fmt: skip
    records: list[Any] = list(reader)
    assert records[1]["d10"] == Decimal("-8.63")
    assert records[1]["day"] == dt.date(1970, 1, 29)


def test_avro_refuses_what_java_refuses():
    avro = file_format("avro")
    from snaplake.store.format.types import parse_type

    assert avro.type_refusal([parse_type("TIMESTAMP(9)")]) is not None
    assert avro.type_refusal([parse_type({"type": "ARRAY", "element": "INT"})]) is not None
    assert avro.type_refusal([parse_type("TIMESTAMP(6)"), parse_type("DECIMAL(38, 2)")]) is None
    assert avro.compression_refusal("lz4", 1) is not None
    assert file_format("orc").compression_refusal("zstd", 3) is not None
    assert file_format("orc").compression_refusal("zlib", 1) is None
    assert file_format("parquet").compression_refusal("lzo", 1) is not None


def test_orc_nested_types_round_trip():
    schema = pa.schema(
        [
            ("a", pa.list_(pa.int32())),
            ("m", pa.map_(pa.string(), pa.time32("ms"))),
            ("r", pa.struct([("x", pa.timestamp("us", tz="UTC")), ("y", pa.string())])),
        ]
    )
    data = pa.table(
        {
            "a": [[1, 2], None, []],
            "m": [[("k", dt.time(1, 2, 3))], None, []],
            "r": [{"x": dt.datetime(2020, 1, 1, tzinfo=dt.UTC), "y": "q"}, None,
                  {"x": None, "y": None}],
        },
        schema=schema,
    )  # fmt: skip
    _, back = _round_trip("orc", data)
    assert back.equals(data)


def test_format_of_file_by_extension():
    assert format_of_file("data-1-0.orc").name == "orc"
    assert format_of_file("data-1-0.zstd.parquet").name == "parquet"
    assert format_of_file("data-1-0.AVRO").name == "avro"
    with pytest.raises(UnsupportedTypeError, match="lance"):
        format_of_file("data-1-0.lance")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.none() | st.decimals(min_value=-(10**30), max_value=10**30, places=6),
            st.none() | st.integers(min_value=-(2**62), max_value=2**62),
        ),
        max_size=30,
    )
)
def test_avro_decimal_and_micros_round_trip(values):
    schema = pa.schema([("d", pa.decimal128(38, 6)), ("ts", pa.timestamp("us"))])
    data = pa.table(
        {"d": [v for v, _ in values], "ts": pa.array([t for _, t in values], pa.int64())},
        schema=pa.schema([("d", pa.decimal128(38, 6)), ("ts", pa.int64())]),
    ).cast(schema)
    _, back = _round_trip("avro", data)
    assert back.equals(data)


def test_parquet_stores_short_decimals_as_integers_like_java():
    import pyarrow.parquet as pq

    body, back = _round_trip("parquet", _rows(5))
    schema = pq.ParquetFile(pa.BufferReader(body)).schema
    assert schema.column(_SCHEMA.get_field_index("d10")).physical_type == "INT64"
    assert schema.column(_SCHEMA.get_field_index("d38")).physical_type == "FIXED_LEN_BYTE_ARRAY"
    assert back.equals(_rows(5))


def test_binary_n_is_stored_as_java_stores_it():
    """Issue 18 item 11: BINARY(n) (``fixed_size_binary(n)``) in every format, as Java writes it:
    Parquet BYTE_ARRAY (``ParquetSchemaConverter``), ORC ``binary``, Avro ``bytes``."""
    import pyarrow.orc as orc
    import pyarrow.parquet as pq

    body, back = _round_trip("parquet", _rows(5))
    schema = pq.ParquetFile(pa.BufferReader(body)).schema
    assert schema.column(_SCHEMA.get_field_index("fbin")).physical_type == "BYTE_ARRAY"
    assert back.schema.field("fbin").type == pa.binary(3)
    body, back = _round_trip("orc", _rows(5))
    assert orc.ORCFile(pa.BufferReader(body)).schema.field("fbin").type == pa.binary()
    assert back.equals(_rows(5))
    body, back = _round_trip("avro", _rows(5))
    writer_schema: Any = fastavro.reader(io.BytesIO(body)).writer_schema
    by_name = {f["name"]: f["type"] for f in writer_schema["fields"]}
    assert by_name["fbin"] == ["null", "bytes"]
    assert back.equals(_rows(5))
