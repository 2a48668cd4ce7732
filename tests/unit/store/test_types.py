"""Paimon types: schema JSON spelling, parsing, and the Arrow mapping both ways."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from snaplake.errors import UnsupportedTypeError
from snaplake.store.format.types import (
    MAX_LENGTH,
    DataField,
    DataType,
    TypeRoot,
    arrow_schema_from_fields,
    data_type_from_arrow,
    fields_from_arrow,
    highest_field_id,
    parse_fields,
    parse_type,
    to_arrow_type,
)

VECTORS = Path(__file__).resolve().parents[2] / "fixtures" / "paimon_vectors"
READBACK = json.loads((VECTORS / "arrow_readback.json").read_text())

# The schema the readback vectors were written with (see make_paimon_vectors.py).
END_TO_END_SCHEMA = pa.schema(
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


@pytest.mark.parametrize(
    ("arrow_type", "nullable", "paimon"),
    [
        (pa.bool_(), True, "BOOLEAN"),
        (pa.int8(), True, "TINYINT"),
        (pa.int16(), True, "SMALLINT"),
        (pa.int32(), True, "INT"),
        (pa.int64(), False, "BIGINT NOT NULL"),
        (pa.float32(), True, "FLOAT"),
        (pa.float64(), True, "DOUBLE"),
        (pa.decimal128(10, 2), True, "DECIMAL(10, 2)"),
        (pa.decimal128(38, 0), False, "DECIMAL(38, 0) NOT NULL"),
        (pa.string(), True, "STRING"),
        (pa.large_string(), True, "STRING"),
        (pa.string_view(), True, "STRING"),
        (pa.binary(), True, "BYTES"),
        (pa.large_binary(), True, "BYTES"),
        (pa.date32(), True, "DATE"),
        (pa.time32("ms"), True, "TIME(3)"),
        (pa.timestamp("s"), True, "TIMESTAMP(0)"),
        (pa.timestamp("ms"), True, "TIMESTAMP(3)"),
        (pa.timestamp("us"), True, "TIMESTAMP(6)"),
        (pa.timestamp("ms", tz="UTC"), True, "TIMESTAMP(3) WITH LOCAL TIME ZONE"),
        (
            pa.timestamp("us", tz="Europe/Paris"),
            False,
            "TIMESTAMP(6) WITH LOCAL TIME ZONE NOT NULL",
        ),
    ],
)
def test_atomic_spelling(arrow_type: pa.DataType, nullable: bool, paimon: str) -> None:
    fields, highest = fields_from_arrow(pa.schema([pa.field("c", arrow_type, nullable=nullable)]))
    assert fields == [{"id": 0, "name": "c", "type": paimon}]
    assert highest == 0
    assert parse_type(paimon) == data_type_from_arrow(arrow_type, nullable=nullable)


def test_nested_json_and_ids_follow_reassign_field_id() -> None:
    schema = pa.schema(
        [
            ("a", pa.int32()),
            (
                "e",
                pa.list_(
                    pa.struct(
                        [
                            ("x", pa.int32()),
                            ("y", pa.map_(pa.string(), pa.struct([("z", pa.bool_())]))),
                        ]
                    )
                ),
            ),
            pa.field("f", pa.struct([("q", pa.string())]), nullable=False),
        ]
    )
    fields, highest = fields_from_arrow(schema)
    assert fields == [
        {"id": 0, "name": "a", "type": "INT"},
        {
            "id": 1,
            "name": "e",
            "type": {
                "type": "ARRAY",
                "element": {
                    "type": "ROW",
                    "fields": [
                        {"id": 2, "name": "x", "type": "INT"},
                        {
                            "id": 4,
                            "name": "y",
                            "type": {
                                "type": "MAP",
                                "key": "STRING NOT NULL",
                                "value": {
                                    "type": "ROW",
                                    "fields": [{"id": 3, "name": "z", "type": "BOOLEAN"}],
                                },
                            },
                        },
                    ],
                },
            },
        },
        {
            "id": 5,
            "name": "f",
            "type": {"type": "ROW NOT NULL", "fields": [{"id": 6, "name": "q", "type": "STRING"}]},
        },
    ]
    assert highest == 6
    assert highest_field_id(parse_fields(fields)) == 6


def test_ids_and_highest_id_match_pypaimon() -> None:
    fields, highest = fields_from_arrow(END_TO_END_SCHEMA)
    assert highest == READBACK["highest_field_id"]
    st = next(f for f in fields if f["name"] == "st")
    assert st["id"] == 16
    assert [f["id"] for f in st["type"]["fields"]] == [17, 18]


# Where snaplake reads a type differently from pypaimon 2.1.0, on purpose.
_NOT_AS_PYPAIMON = {
    # pypaimon maps fixed_size_binary(n) to BINARY(n) but reads BINARY(n) as binary;
    # snaplake maps both ways, so a table created from fixed_size_binary reads back as it.
    "BINARY(4)": ("binary", "fixed_size_binary[4]"),
}


@pytest.mark.parametrize(("paimon", "arrow"), sorted(READBACK["from_paimon_type"].items()))
def test_read_back_type_matches_pypaimon(paimon: str, arrow: str) -> None:
    if paimon in _NOT_AS_PYPAIMON:
        theirs, arrow = _NOT_AS_PYPAIMON[paimon]
        assert theirs == READBACK["from_paimon_type"][paimon]  # the vectors still say so
    assert str(to_arrow_type(parse_type(paimon))) == arrow


@pytest.mark.parametrize("width", [1, 4, 16])
def test_fixed_size_binary_is_binary_n_both_ways(width: int) -> None:
    """Issue 18 item 11: BINARY(n) read as ``binary`` and ``fixed_size_binary`` was refused."""
    schema = pa.schema([("b", pa.binary(width)), ("l", pa.list_(pa.binary(width)))])
    fields, _ = fields_from_arrow(schema)
    assert fields[0]["type"] == f"BINARY({width})"
    assert fields[1]["type"] == {"type": "ARRAY", "element": f"BINARY({width})"}
    assert arrow_schema_from_fields(fields) == schema


@pytest.mark.parametrize("entry", READBACK["end_to_end"], ids=lambda e: e["name"])
def test_end_to_end_read_back_matches_pypaimon(entry: dict[str, Any]) -> None:
    """A pypaimon-written schema parses, and reads back as pypaimon reads it."""
    type_json = entry["paimon_type"]
    schema = arrow_schema_from_fields([{"id": 0, "name": entry["name"], "type": type_json}])
    assert str(schema.field(0).type) == entry["read_as"]
    assert schema.field(0).nullable == entry["nullable"]
    ours = {f["name"]: f for f in fields_from_arrow(END_TO_END_SCHEMA)[0]}[entry["name"]]
    assert parse_type(ours["type"]) == parse_type(type_json)


def test_arrow_round_trip_canonicalises() -> None:
    schema = pa.schema(
        [
            ("s", pa.large_string()),
            ("b", pa.large_binary()),
            ("l", pa.large_list(pa.field("el", pa.int64(), nullable=False))),
            ("t", pa.timestamp("ms", tz="America/New_York")),
            pa.field("n", pa.int32(), nullable=False),
        ]
    )
    back = arrow_schema_from_fields(fields_from_arrow(schema)[0])
    assert back == pa.schema(
        [
            ("s", pa.string()),
            ("b", pa.binary()),
            ("l", pa.list_(pa.field("item", pa.int64(), nullable=False))),
            ("t", pa.timestamp("ms", tz="UTC")),
            pa.field("n", pa.int32(), nullable=False),
        ]
    )


def test_paimon_round_trip_is_identity() -> None:
    fields = [
        {"id": 0, "name": "a", "type": "DECIMAL(38, 4) NOT NULL"},
        {
            "id": 1,
            "name": "b",
            "type": {
                "type": "MAP NOT NULL",
                "key": "STRING NOT NULL",
                "value": {"type": "ARRAY", "element": "TIMESTAMP(6) WITH LOCAL TIME ZONE"},
            },
        },
        {
            "id": 2,
            "name": "c",
            "type": {"type": "ROW", "fields": [{"id": 3, "name": "d", "type": "DATE"}]},
        },
    ]
    again, highest = fields_from_arrow(arrow_schema_from_fields(fields))
    assert again == fields
    assert highest == 3


def test_description_survives() -> None:
    field = pa.field("c", pa.int32(), metadata={b"description": b"the c"})
    fields, _ = fields_from_arrow(pa.schema([field]))
    assert fields == [{"id": 0, "name": "c", "type": "INT", "description": "the c"}]
    assert arrow_schema_from_fields(fields).field(0).metadata == {b"description": b"the c"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("INT", DataType(root=TypeRoot.INT)),
        ("INTEGER NOT NULL", DataType(root=TypeRoot.INT, nullable=False)),
        ("int null", DataType(root=TypeRoot.INT)),
        ("STRING", DataType(root=TypeRoot.VARCHAR, length=MAX_LENGTH)),
        ("VARCHAR(2147483647)", DataType(root=TypeRoot.VARCHAR, length=MAX_LENGTH)),
        ("VARCHAR", DataType(root=TypeRoot.VARCHAR, length=1)),
        ("CHAR(5)", DataType(root=TypeRoot.CHAR, length=5)),
        ("BYTES", DataType(root=TypeRoot.VARBINARY, length=MAX_LENGTH)),
        ("BINARY(16) NOT NULL", DataType(root=TypeRoot.BINARY, length=16, nullable=False)),
        ("DECIMAL", DataType(root=TypeRoot.DECIMAL, precision=10, scale=0)),
        ("NUMERIC(5)", DataType(root=TypeRoot.DECIMAL, precision=5, scale=0)),
        ("DEC(20,3)", DataType(root=TypeRoot.DECIMAL, precision=20, scale=3)),
        ("DOUBLE PRECISION", DataType(root=TypeRoot.DOUBLE)),
        ("TIME", DataType(root=TypeRoot.TIME, precision=0)),
        ("TIMESTAMP", DataType(root=TypeRoot.TIMESTAMP, precision=6)),
        ("TIMESTAMP(3) WITHOUT TIME ZONE", DataType(root=TypeRoot.TIMESTAMP, precision=3)),
        ("TIMESTAMP WITH LOCAL TIME ZONE", DataType(root=TypeRoot.TIMESTAMP_LTZ, precision=6)),
        (
            "TIMESTAMP_LTZ(3) NOT NULL",
            DataType(root=TypeRoot.TIMESTAMP_LTZ, precision=3, nullable=False),
        ),
    ],
)
def test_parse_spellings(text: str, expected: DataType) -> None:
    assert parse_type(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "STRING STRING",
        "DECIMAL(39, 0)",
        "DECIMAL(5, 6)",
        "TIMESTAMP(10)",
        "VARCHAR(0)",
        "FOO",
        "",
        "ARRAY<INT>",
    ],
)
def test_parse_refuses_garbage(text: str) -> None:
    with pytest.raises(UnsupportedTypeError):
        parse_type(text)


def test_parse_refuses_malformed_objects() -> None:
    with pytest.raises(UnsupportedTypeError):
        parse_type({"type": "ARRAY"})
    with pytest.raises(UnsupportedTypeError):
        parse_type({"element": "INT"})
    with pytest.raises(UnsupportedTypeError):
        parse_type(["INT"])  # type: ignore[arg-type]


def test_sql_and_json_spelling_round_trip() -> None:
    for text in READBACK["from_paimon_type"]:
        dtype = parse_type(text)
        assert parse_type(dtype.to_json()) == dtype
    assert parse_type("TIMESTAMP_LTZ(6)").sql() == "TIMESTAMP(6) WITH LOCAL TIME ZONE"


@pytest.mark.parametrize(
    ("arrow_type", "hint"),
    [
        (pa.uint8(), "int16"),
        (pa.uint32(), "int64"),
        (pa.uint64(), "decimal128(20, 0)"),
        (pa.dictionary(pa.int32(), pa.string()), "string"),
        (pa.duration("s"), "int64"),
        (pa.timestamp("ns"), "timestamp('us'"),
        (pa.timestamp("ns", tz="UTC"), "tz='UTC'"),
        (pa.float16(), "float32"),
        (pa.date64(), "date32"),
        (pa.time64("us"), "time32('ms')"),
        (pa.decimal256(40, 2), "38 digits"),
        (pa.binary(0), "binary"),
        (pa.null(), "intended type"),
        (pa.struct([("a", pa.uint16())]), "int32"),
    ],
)
def test_unsupported_arrow_types_name_the_cast(arrow_type: pa.DataType, hint: str) -> None:
    with pytest.raises(UnsupportedTypeError, match="col") as info:
        fields_from_arrow(pa.schema([("col", arrow_type)]))
    assert hint in str(info.value)


def test_duplicate_names_refused() -> None:
    with pytest.raises(UnsupportedTypeError):
        fields_from_arrow(pa.schema([("a", pa.int32()), ("a", pa.int64())]))


def test_value_model_invariants() -> None:
    with pytest.raises(ValueError, match="precision"):
        DataType(root=TypeRoot.DECIMAL, precision=40, scale=0)
    with pytest.raises(ValueError, match="length"):
        DataType(root=TypeRoot.VARCHAR)
    with pytest.raises(ValueError, match="child"):
        DataType(root=TypeRoot.ARRAY)
    dtype = DataType(root=TypeRoot.INT)
    assert dtype.with_nullable(nullable=False).sql() == "INT NOT NULL"
    assert dtype.is_compact
    assert not parse_type("DECIMAL(19, 0)").is_compact
    assert parse_type("TIMESTAMP(3)").is_compact
    field = DataField(id=3, name="x", type=dtype, description="d", default_value="1")
    assert field.to_json_dict() == {
        "id": 3,
        "name": "x",
        "type": "INT",
        "description": "d",
        "defaultValue": "1",
    }


def test_multiset_variant_have_no_arrow_mapping() -> None:
    with pytest.raises(UnsupportedTypeError):
        to_arrow_type(parse_type({"type": "MULTISET", "element": "INT"}))
    with pytest.raises(UnsupportedTypeError):
        to_arrow_type(parse_type("VARIANT"))
