"""Record golden vectors from pypaimon (the format oracle); run in the ``.venv-paimon`` venv.

Usage (from the repo root)::

    TZ=UTC .venv-paimon/bin/python tests/oracle_vectors/make_paimon_vectors.py

Writes into ``tests/fixtures/paimon_vectors/``:

* ``binary_rows.json``: BinaryRow bytes (hex, with the 4-byte arity prefix)
  pypaimon's ``GenericRowSerializer`` produces for assorted values and types;
* ``buckets.arrow`` + ``buckets.json``: an Arrow table and, per bucket-key
  choice and bucket count 1..17, the bucket of every row as pypaimon's
  ``FixedBucketRowKeyExtractor`` assigns it;
* ``partition_paths.json``: the partition directory pypaimon's
  ``FileStorePathFactory`` (Java-canonical mode) builds for assorted values,
  with ``partition.legacy-name`` true and false;
* ``arrow_readback.json``: the Arrow type pypaimon reads each Paimon type as;
* ``stats.json``: pypaimon's value stats (full mode) of the bucket table.

Cases where pypaimon is known to differ from Java (a null DECIMAL(p > 18) or
TIMESTAMP(p > 3), negative powers of two in DECIMAL(p > 18)) are left out;
the unit tests pin Java's bytes for those by hand.

This script never imports snaplake (it needs pyarrow >= 20). Values cross as
tagged JSON: ``{"t": "decimal", "v": "1.50"}``, ``{"t": "date", "v": "..."}``,
``{"t": "datetime", "v": iso}``, ``{"t": "time", "v": iso}``, ``{"t": "bytes",
"v": hex}``, ``{"t": "double", "v": hex of the IEEE bits}``; bool, int, str and
null are plain JSON.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
import struct
import tempfile
from decimal import Context, Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
from pypaimon import CatalogFactory, Schema
from pypaimon.schema.data_types import AtomicType, DataField, PyarrowFieldParser
from pypaimon.schema.table_schema import TableSchema
from pypaimon.table.row.generic_row import GenericRow, GenericRowSerializer
from pypaimon.utils.file_store_path_factory import FileStorePathFactory
from pypaimon.write.row_key_extractor import FixedBucketRowKeyExtractor
from pypaimon.write.writer.data_writer import DataWriter

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "paimon_vectors"
UTC = dt.UTC
EXACT = Context(prec=100)  # the default 28 digits would round 38-digit decimals


def tag(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return {"t": "double", "v": struct.pack(">d", value).hex()}
    if isinstance(value, Decimal):
        return {"t": "decimal", "v": str(value)}
    if isinstance(value, dt.datetime):
        return {"t": "datetime", "v": value.isoformat()}
    if isinstance(value, dt.date):
        return {"t": "date", "v": value.isoformat()}
    if isinstance(value, dt.time):
        return {"t": "time", "v": value.isoformat()}
    if isinstance(value, bytes):
        return {"t": "bytes", "v": value.hex()}
    raise TypeError(type(value))


# --------------------------------------------------------------------------- BinaryRow


def atomic(type_str: str) -> AtomicType:
    if type_str.endswith(" NOT NULL"):
        return AtomicType(type_str[: -len(" NOT NULL")], nullable=False)
    return AtomicType(type_str)


def row_bytes(values: list[Any], types: list[str]) -> str:
    fields = [DataField(i, f"f{i}", atomic(t)) for i, t in enumerate(types)]
    data: bytes = GenericRowSerializer.to_bytes(GenericRow(values, fields))
    return data.hex()


def binary_row_cases() -> list[dict[str, Any]]:
    naive = dt.datetime
    cases: list[tuple[list[Any], list[str]]] = [
        ([], []),
        ([True], ["BOOLEAN"]),
        ([False], ["BOOLEAN NOT NULL"]),
        ([None], ["BOOLEAN"]),
        ([-128], ["TINYINT"]),
        ([127], ["TINYINT"]),
        ([-1], ["SMALLINT"]),
        ([-32768], ["SMALLINT"]),
        ([-1], ["INT"]),
        ([2**31 - 1], ["INT"]),
        ([-(2**31)], ["INT"]),
        ([None], ["INT"]),
        ([-1], ["BIGINT"]),
        ([2**63 - 1], ["BIGINT"]),
        ([-(2**63)], ["BIGINT"]),
        ([1.5], ["FLOAT"]),
        ([-0.0], ["FLOAT"]),
        ([float("inf")], ["FLOAT"]),
        ([0.1], ["DOUBLE"]),
        ([-0.0], ["DOUBLE"]),
        ([float("-inf")], ["DOUBLE"]),
        ([1e300], ["DOUBLE"]),
        ([float("nan")], ["DOUBLE"]),
        ([""], ["STRING"]),
        (["a"], ["STRING"]),
        (["abcdefg"], ["STRING"]),
        (["abcdefgh"], ["STRING"]),
        (["abcdefghijklmnop"], ["STRING"]),
        (["abcdefghijklmnopq"], ["STRING"]),
        (["日本語"], ["STRING"]),
        (["日本語テキスト"], ["VARCHAR(20)"]),
        (["x" * 100], ["STRING"]),
        (["ab"], ["CHAR(2)"]),
        ([b""], ["BYTES"]),
        ([b"\x00\xff"], ["BYTES"]),
        ([b"\x01" * 7], ["VARBINARY(10)"]),
        ([b"\x02" * 8], ["BINARY(8)"]),
        ([b"\xfe" * 33], ["BYTES"]),
        ([dt.date(1970, 1, 1)], ["DATE"]),
        ([dt.date(2024, 2, 29)], ["DATE"]),
        ([dt.date(1969, 12, 31)], ["DATE"]),
        ([dt.date(1, 1, 1)], ["DATE"]),
        ([dt.date(9999, 12, 31)], ["DATE"]),
        ([dt.time(0, 0)], ["TIME(0)"]),
        ([dt.time(23, 59, 59, 999000)], ["TIME(3)"]),
        ([Decimal("0.00")], ["DECIMAL(10, 2)"]),
        ([Decimal("12345678.91")], ["DECIMAL(10, 2)"]),
        ([Decimal("-1.50")], ["DECIMAL(10, 2)"]),
        ([Decimal("999999999999999999")], ["DECIMAL(18, 0)"]),
        ([Decimal("0.0000")], ["DECIMAL(38, 4)"]),
        ([Decimal("1.0000")], ["DECIMAL(38, 4)"]),
        ([Decimal("0.0127")], ["DECIMAL(38, 4)"]),
        ([Decimal("0.0128")], ["DECIMAL(38, 4)"]),
        ([Decimal("-0.0127")], ["DECIMAL(38, 4)"]),
        ([Decimal("-0.0129")], ["DECIMAL(38, 4)"]),
        ([Decimal("99999999999999999999999999999999999999")], ["DECIMAL(38, 0)"]),
        ([Decimal("-99999999999999999999999999999999999999")], ["DECIMAL(38, 0)"]),
        ([Decimal("-1234567890123456789.123")], ["DECIMAL(25, 3)"]),
        ([naive(1970, 1, 1)], ["TIMESTAMP(3)"]),
        ([naive(2024, 5, 6, 7, 8, 9, 123000)], ["TIMESTAMP(3)"]),
        ([naive(1969, 12, 31, 23, 59, 59, 999000)], ["TIMESTAMP(3)"]),
        ([naive(2024, 5, 6, 7, 8, 9, 123456)], ["TIMESTAMP(6)"]),
        ([naive(1969, 12, 31, 23, 59, 59, 999999)], ["TIMESTAMP(6)"]),
        ([naive(1900, 1, 1, 0, 0, 0, 1)], ["TIMESTAMP(9)"]),
        ([naive(2024, 5, 6, 7, 8, 9)], ["TIMESTAMP(0)"]),
        ([naive(2024, 5, 6, 7, 8, 9, 5000, tzinfo=UTC)], ["TIMESTAMP(3) WITH LOCAL TIME ZONE"]),
        ([naive(2024, 5, 6, 7, 8, 9, 5, tzinfo=UTC)], ["TIMESTAMP(6) WITH LOCAL TIME ZONE"]),
        ([naive(2024, 5, 6, 7, 8, 9, 5, tzinfo=UTC)], ["TIMESTAMP_LTZ(6)"]),
        (
            [1, "hello world!", None, Decimal("3.14"), "short", b"0123456789", dt.date(2000, 1, 1)],
            ["INT", "STRING", "STRING", "DECIMAL(5, 2)", "STRING", "BYTES", "DATE"],
        ),
        (
            ["a" * 9, naive(2001, 2, 3, 4, 5, 6, 7), Decimal("1" * 20), "b" * 17, None],
            ["STRING", "TIMESTAMP(6)", "DECIMAL(20, 0)", "STRING", "BIGINT"],
        ),
    ]
    wide_types = ["INT"] * 57
    wide_values: list[Any] = [i if i % 3 else None for i in range(57)]
    cases.append((wide_values, wide_types))
    cases.append(([None] * 56, ["STRING"] * 56))
    cases.append(([None, 1, None] * 30, ["BIGINT", "SMALLINT", "DOUBLE"] * 30))
    out = []
    for values, types in cases:
        out.append(
            {"types": types, "values": [tag(v) for v in values], "bytes": row_bytes(values, types)}
        )
    return out


# --------------------------------------------------------------------------- buckets


def bucket_table(n: int = 300) -> pa.Table:
    rnd = random.Random(20240506)

    def maybe(v: Any, p: float = 0.1) -> Any:
        return None if rnd.random() < p else v

    def rand_str() -> str:
        k = rnd.choice([0, 1, 3, 7, 8, 9, 15, 16, 17, 40, 100])
        alphabet = "abcxyz-_/=%日本é😀"
        return "".join(rnd.choice(alphabet) for _ in range(k))

    base = dt.datetime(2024, 1, 1)
    cols: dict[str, pa.Array] = {
        "i8": pa.array([maybe(rnd.randint(-128, 127)) for _ in range(n)], pa.int8()),
        "i16": pa.array([maybe(rnd.randint(-(2**15), 2**15 - 1)) for _ in range(n)], pa.int16()),
        "i32": pa.array([maybe(rnd.randint(-(2**31), 2**31 - 1)) for _ in range(n)], pa.int32()),
        "i64": pa.array([maybe(rnd.randint(-(2**63), 2**63 - 1)) for _ in range(n)], pa.int64()),
        "small": pa.array([rnd.randint(0, 50) for _ in range(n)], pa.int64()),
        "b": pa.array([maybe(rnd.random() < 0.5) for _ in range(n)], pa.bool_()),
        "f32": pa.array(
            [maybe(rnd.choice([0.0, -0.0, 1.5, -2.25, 1e30, float("inf")])) for _ in range(n)],
            pa.float32(),
        ),
        "f64": pa.array(
            [
                maybe(rnd.choice([0.0, -0.0, 0.1, -1e-300, 12345.678, float("-inf")]))
                for _ in range(n)
            ],
            pa.float64(),
        ),
        "s": pa.array([maybe(rand_str()) for _ in range(n)], pa.string()),
        "ls": pa.array([maybe(rand_str()) for _ in range(n)], pa.large_string()),
        "bin": pa.array(
            [
                maybe(bytes(rnd.randrange(256) for _ in range(rnd.choice([0, 5, 7, 8, 23]))))
                for _ in range(n)
            ],
            pa.binary(),
        ),
        "d": pa.array(
            [
                maybe(dt.date(1970, 1, 1) + dt.timedelta(days=rnd.randint(-30000, 30000)))
                for _ in range(n)
            ],
            pa.date32(),
        ),
        "ts_ms": pa.array(
            [
                maybe(base + dt.timedelta(milliseconds=rnd.randint(-(10**12), 10**12)))
                for _ in range(n)
            ],
            pa.timestamp("ms"),
        ),
        "ts_us": pa.array(
            [base + dt.timedelta(microseconds=rnd.randint(-(10**15), 10**15)) for _ in range(n)],
            pa.timestamp("us"),
        ),
        "ltz_ms": pa.array(
            [
                maybe(
                    (base + dt.timedelta(milliseconds=rnd.randint(-(10**12), 10**12))).replace(
                        tzinfo=UTC
                    )
                )
                for _ in range(n)
            ],
            pa.timestamp("ms", tz="UTC"),
        ),
        "ltz_us": pa.array(
            [
                (base + dt.timedelta(microseconds=rnd.randint(-(10**15), 10**15))).replace(
                    tzinfo=UTC
                )
                for _ in range(n)
            ],
            pa.timestamp("us", tz="UTC"),
        ),
        "dec": pa.array(
            [
                maybe(Decimal(rnd.randint(-(10**10) + 1, 10**10 - 1)).scaleb(-2, EXACT))
                for _ in range(n)
            ],
            pa.decimal128(10, 2),
        ),
        "dec38": pa.array(
            [
                Decimal(rnd.randint(-(10**38) + 1, 10**38 - 1)).scaleb(-4, EXACT)
                if rnd.random() < 0.5
                else Decimal(rnd.randint(-300, 300)).scaleb(-4, EXACT)
                for _ in range(n)
            ],
            pa.decimal128(38, 4),
        ),
    }
    return pa.table(cols)


BUCKET_CASES: dict[str, list[str]] = {
    "i8": ["i8"],
    "i16": ["i16"],
    "i32": ["i32"],
    "i64": ["i64"],
    "small": ["small"],
    "bool": ["b"],
    "f32": ["f32"],
    "f64": ["f64"],
    "string": ["s"],
    "large_string": ["ls"],
    "binary": ["bin"],
    "date": ["d"],
    "ts_ms": ["ts_ms"],
    "ts_us": ["ts_us"],
    "ltz_ms": ["ltz_ms"],
    "ltz_us": ["ltz_us"],
    "decimal": ["dec"],
    "decimal38": ["dec38"],
    "int_string": ["i32", "s"],
    "string_string": ["s", "ls"],
    "mixed": ["s", "ts_us", "dec38", "b", "d", "bin", "f64"],
}


def bucket_vectors(table: pa.Table) -> dict[str, Any]:
    out: dict[str, Any] = {}
    batch = table.combine_chunks().to_batches()[0]
    for name, keys in BUCKET_CASES.items():
        per_n = {}
        for num in range(1, 18):
            schema = Schema.from_pyarrow_schema(
                table.schema, options={"bucket": str(num), "bucket-key": ",".join(keys)}
            )
            extractor = FixedBucketRowKeyExtractor(TableSchema.from_schema(0, schema))
            per_n[str(num)] = extractor._extract_buckets_batch(batch)
        out[name] = {"keys": keys, "buckets": per_n}
    return out


def stats_vectors(table: pa.Table) -> dict[str, Any]:
    """pypaimon's (full-mode) value stats of ``table`` and of a slice of it."""
    out = {}
    for name, data in (("all", table), ("head", table.slice(0, 7))):
        fields = PyarrowFieldParser.to_paimon_schema(table.schema)
        cols = [DataWriter._get_column_stats(data, f.name) for f in fields]
        mins = GenericRowSerializer.to_bytes(GenericRow([c["min_values"] for c in cols], fields))
        maxs = GenericRowSerializer.to_bytes(GenericRow([c["max_values"] for c in cols], fields))
        out[name] = {
            "types": [f.type.to_dict() for f in fields],
            "min_values": mins.hex(),
            "max_values": maxs.hex(),
            "null_counts": [c["null_counts"] for c in cols],
        }
    return out


# --------------------------------------------------------------------------- partitions


def partition_cases() -> list[tuple[str, Any]]:
    naive = dt.datetime
    return [
        ("STRING", "2024-01-01"),
        ("STRING", "a/b"),
        ("STRING", "x=y"),
        ("STRING", "100%"),
        ("STRING", "a:b"),
        ("STRING", ".."),
        ("STRING", "."),
        ("STRING", "../../etc"),
        ("STRING", " "),
        ("STRING", "\t\n"),
        ("STRING", ""),
        ("STRING", None),
        ("STRING", "sp ace"),
        ("STRING", "日本"),
        ("STRING", "#?*'\"\\{}[]^"),
        ("STRING", "\x01\x1f\x7f"),
        ("STRING", "a~b!c@d$e&f(g)h+i,j;k<l>m|n`o"),
        ("INT", 0),
        ("INT", -5),
        ("INT", None),
        ("BIGINT", 2**63 - 1),
        ("TINYINT", -128),
        ("SMALLINT", 300),
        ("BOOLEAN", True),
        ("BOOLEAN", False),
        ("DATE", dt.date(2024, 1, 2)),
        ("DATE", dt.date(1969, 12, 31)),
        ("DATE", dt.date(1, 1, 1)),
        ("DATE", None),
        ("DECIMAL(10, 2)", Decimal("1.50")),
        ("DECIMAL(10, 2)", Decimal("-0.05")),
        ("DECIMAL(10, 2)", Decimal("0.00")),
        ("DECIMAL(38, 10)", Decimal("12345678901234567890.0000000001")),
        ("DECIMAL(5, 0)", Decimal("12345")),
        ("TIMESTAMP(3)", naive(2024, 1, 2, 3, 4, 5, 678000)),
        ("TIMESTAMP(3)", naive(2024, 1, 2, 3, 4)),
        ("TIMESTAMP(3)", naive(2024, 1, 2, 0, 0)),
        ("TIMESTAMP(3)", naive(2024, 1, 2, 3, 4, 5)),
        ("TIMESTAMP(6)", naive(2024, 1, 2, 3, 4, 5, 678901)),
        ("TIMESTAMP(6)", naive(2024, 1, 2, 3, 4, 5, 100)),
        ("TIMESTAMP(6)", naive(1960, 1, 2, 3, 4, 5, 600000)),
        ("TIMESTAMP(0)", naive(2024, 1, 2, 3, 4, 5)),
        ("TIMESTAMP(3) WITH LOCAL TIME ZONE", naive(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)),
        ("TIMESTAMP(6) WITH LOCAL TIME ZONE", naive(2024, 1, 2, 3, 4, 0, 0, tzinfo=UTC)),
        ("DOUBLE", 1.0),
        ("DOUBLE", 0.1),
        ("DOUBLE", -0.0),
        ("DOUBLE", 0.001),
        ("DOUBLE", 0.0001),
        ("DOUBLE", 1234567.0),
        ("DOUBLE", 12345678.0),
        ("DOUBLE", 1e21),
        ("DOUBLE", 1.2345e-7),
        ("DOUBLE", float("nan")),
        ("DOUBLE", float("inf")),
        ("DOUBLE", float("-inf")),
        ("DOUBLE", 5e-324),
        ("DOUBLE", 1.7976931348623157e308),
        ("DOUBLE", 100.0),
        ("DOUBLE", 2.5e-3),
        ("FLOAT", 1.5),
        ("FLOAT", 0.1),
        ("FLOAT", 3.4028234663852886e38),
        ("FLOAT", 1e-45),
        ("FLOAT", 16777216.0),
        ("FLOAT", 1e7),
    ]


def partition_vectors() -> list[dict[str, Any]]:
    out = []
    for legacy in (True, False):
        for type_str, value in partition_cases():
            for key in ("k", "a=b/c"):
                ptype = AtomicType(type_str)
                factory = FileStorePathFactory(
                    "/tmp/t",
                    [key],
                    "__DEFAULT_PARTITION__",
                    "parquet",
                    "data-",
                    "changelog-",
                    legacy,
                    False,
                    "zstd",
                    partition_types=[ptype],
                )
                rel = factory.relative_bucket_path((value,), 0, canonical_partition=True)
                rel = rel[2:] if rel.startswith("./") else rel
                assert rel.endswith("/bucket-0"), rel
                out.append(
                    {
                        "legacy": legacy,
                        "key": key,
                        "type": type_str,
                        "value": tag(value),
                        "path": rel[: -len("/bucket-0")],
                    }
                )
    # a two-level path
    factory = FileStorePathFactory(
        "/tmp/t",
        ["dt", "hr"],
        "__DEFAULT_PARTITION__",
        "parquet",
        "data-",
        "changelog-",
        True,
        False,
        "zstd",
        partition_types=[AtomicType("STRING"), AtomicType("INT")],
    )
    rel = factory.relative_bucket_path(("2024-01-01", 7), 0, canonical_partition=True)
    out.append(
        {
            "legacy": True,
            "keys": ["dt", "hr"],
            "types": ["STRING", "INT"],
            "values": ["2024-01-01", 7],
            "path": rel[: -len("/bucket-0")],
        }
    )
    return out


# --------------------------------------------------------------------------- readback


READBACK_TYPES = [
    "BOOLEAN",
    "TINYINT",
    "SMALLINT",
    "INT",
    "BIGINT",
    "FLOAT",
    "DOUBLE",
    "DECIMAL(10, 2)",
    "DECIMAL(38, 0)",
    "CHAR(3)",
    "VARCHAR(10)",
    "STRING",
    "BINARY(4)",
    "VARBINARY(10)",
    "BYTES",
    "DATE",
    "TIME(0)",
    "TIME(3)",
    "TIMESTAMP(0)",
    "TIMESTAMP(3)",
    "TIMESTAMP(6)",
    "TIMESTAMP(9)",
    "TIMESTAMP(3) WITH LOCAL TIME ZONE",
    "TIMESTAMP(6) WITH LOCAL TIME ZONE",
    "TIMESTAMP_LTZ(6)",
    "INT NOT NULL",
]


def readback_vectors() -> dict[str, Any]:
    parsed = {t: str(PyarrowFieldParser.from_paimon_type(atomic(t))) for t in READBACK_TYPES}
    # End to end: write one row through pypaimon, read it back.
    schema = pa.schema(
        [
            ("b", pa.bool_()),
            ("i8", pa.int8()),
            ("i16", pa.int16()),
            ("i32", pa.int32()),
            pa.field("i64", pa.int64(), nullable=False),
            ("f32", pa.float32()),
            ("f64", pa.float64()),
            ("dec", pa.decimal128(10, 2)),
            ("s", pa.string()),
            ("ls", pa.large_string()),
            ("bin", pa.binary()),
            ("d", pa.date32()),
            ("ts_ms", pa.timestamp("ms")),
            ("ts_us", pa.timestamp("us")),
            ("ltz", pa.timestamp("us", tz="UTC")),
            ("arr", pa.list_(pa.int32())),
            ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
            ("m", pa.map_(pa.string(), pa.int64())),
        ]
    )
    row = {
        "b": True,
        "i8": 1,
        "i16": 2,
        "i32": 3,
        "i64": 4,
        "f32": 1.5,
        "f64": 2.5,
        "dec": Decimal("1.25"),
        "s": "x",
        "ls": "y",
        "bin": b"z",
        "d": dt.date(2024, 1, 1),
        "ts_ms": dt.datetime(2024, 1, 1),
        "ts_us": dt.datetime(2024, 1, 1),
        "ltz": dt.datetime(2024, 1, 1, tzinfo=UTC),
        "arr": [1, None],
        "st": {"x": 1, "y": "a"},
        "m": [("k", 1)],
    }
    tmp = Path(tempfile.mkdtemp())
    try:
        catalog = CatalogFactory.create({"warehouse": str(tmp)})
        catalog.create_database("db", False)
        catalog.create_table("db.t", Schema.from_pyarrow_schema(schema), False)
        table = catalog.get_table("db.t")
        builder = table.new_batch_write_builder()
        write = builder.new_write()
        write.write_arrow(pa.Table.from_pylist([row], schema=schema))
        builder.new_commit().commit(write.prepare_commit())
        write.close()
        rb = table.new_read_builder()
        result = rb.new_read().to_arrow(rb.new_scan().plan().splits())
        schema_file = json.loads((tmp / "db.db" / "t" / "schema" / "schema-0").read_text())
    finally:
        shutil.rmtree(tmp)
    end_to_end = []
    for f in schema_file["fields"]:
        got = result.schema.field(f["name"])
        end_to_end.append(
            {
                "name": f["name"],
                "written_as": str(schema.field(f["name"]).type),
                "paimon_type": f["type"],
                "read_as": str(got.type),
                "nullable": got.nullable,
            }
        )
    return {
        "from_paimon_type": parsed,
        "end_to_end": end_to_end,
        "highest_field_id": schema_file["highestFieldId"],
    }


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "binary_rows.json").write_text(json.dumps(binary_row_cases(), indent=1) + "\n")
    table = bucket_table()
    with (
        pa.OSFile(str(OUT / "buckets.arrow"), "wb") as sink,
        pa.ipc.new_file(sink, table.schema) as writer,
    ):
        writer.write_table(table)
    (OUT / "buckets.json").write_text(json.dumps(bucket_vectors(table)) + "\n")
    (OUT / "stats.json").write_text(json.dumps(stats_vectors(table), indent=1) + "\n")
    (OUT / "partition_paths.json").write_text(
        json.dumps(partition_vectors(), indent=1, ensure_ascii=False) + "\n"
    )
    (OUT / "arrow_readback.json").write_text(json.dumps(readback_vectors(), indent=1) + "\n")


if __name__ == "__main__":
    main()
