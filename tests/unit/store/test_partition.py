"""Partition paths against pypaimon's Java-canonical paths; distinct partitions of Arrow data."""

from __future__ import annotations

import datetime as dt
import json
import math
import posixpath
import struct
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from snaplake.errors import SchemaMismatchError, UnsupportedTypeError
from snaplake.store.format.binary_row import Timestamp
from snaplake.store.format.partition import (
    escape_path_name,
    partition_group_ids,
    partition_path,
    partition_value_string,
    partition_values_from_arrow,
)
from snaplake.store.format.types import parse_type

VECTORS = Path(__file__).resolve().parents[2] / "fixtures" / "paimon_vectors"
PATHS = json.loads((VECTORS / "partition_paths.json").read_text())


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
        "bytes": bytes.fromhex,
    }
    return parsers[t](x)


def _java_only(case: dict[str, Any]) -> str | None:
    """Java's spelling where pypaimon prints Python's (NaN/Infinity); None otherwise."""
    value = untag(case.get("value"))
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        key = escape_path_name(case["key"])
        if math.isnan(value):
            return f"{key}=NaN"
        return f"{key}={'Infinity' if value > 0 else '-Infinity'}"
    return None


def _case_id(case: dict[str, Any]) -> str:
    return f"{'legacy' if case['legacy'] else 'cast'}-{case.get('type')}-{case.get('value')!r}"[:80]


@pytest.mark.parametrize("case", PATHS, ids=_case_id)
def test_paths_match_pypaimon(case: dict[str, Any]) -> None:
    if "keys" in case:
        types = [parse_type(t) for t in case["types"]]
        got = partition_path(
            case["keys"], case["values"], types, legacy_partition_name=case["legacy"]
        )
    else:
        got = partition_path(
            [case["key"]],
            [untag(case["value"])],
            [parse_type(case["type"])],
            legacy_partition_name=case["legacy"],
        )
    assert got == (_java_only(case) or case["path"])


@pytest.mark.parametrize(
    ("value", "type_str", "legacy", "expected"),
    [
        (dt.date(2024, 1, 2), "DATE", True, "19724"),
        (dt.date(2024, 1, 2), "DATE", False, "2024-01-02"),
        (dt.time(1, 2, 3, 400_000), "TIME(3)", True, "3723400"),
        (dt.time(1, 2, 3, 400_000), "TIME(3)", False, "01:02:03.4"),
        (dt.time(1, 2, 3), "TIME(0)", False, "01:02:03"),
        (
            Timestamp(millisecond=1_704_164_645_678, nano_of_millisecond=123_456),
            "TIMESTAMP(9)",
            True,
            "2024-01-02T03:04:05.678123456",
        ),
        (
            Timestamp(millisecond=1_704_164_645_678, nano_of_millisecond=123_456),
            "TIMESTAMP(9)",
            False,
            "2024-01-02 03:04:05.678123456",
        ),
        (dt.datetime(2024, 1, 2, 3, 4), "TIMESTAMP(0)", False, "2024-01-02 03:04:00"),
        (Decimal("1.5"), "DECIMAL(10, 2)", True, "1.50"),
        (Decimal("1E-7"), "DECIMAL(10, 8)", True, "0.00000010"),
        (7, "DECIMAL(5, 0)", True, "7"),
        (1e-3, "DOUBLE", True, "0.001"),
        (9_999_999.0, "DOUBLE", True, "9999999.0"),
        (1e7, "DOUBLE", True, "1.0E7"),
        (-1.5e-10, "DOUBLE", True, "-1.5E-10"),
        (0.0, "FLOAT", True, "0.0"),
        (float("nan"), "FLOAT", True, "NaN"),
        ("a b", "STRING", True, "a b"),
        ("\u00a0", "STRING", True, "\u00a0"),
        ("\u2003", "STRING", True, None),
        ("\x1c", "STRING", True, None),
    ],
)
def test_value_strings(value: object, type_str: str, legacy: bool, expected: str | None) -> None:
    got = partition_value_string(value, parse_type(type_str), legacy_partition_name=legacy)
    assert got == expected


def test_default_name_and_escape() -> None:
    types = [parse_type("STRING"), parse_type("INT")]
    assert partition_path(["a", "b"], [" ", None], types) == (
        "a=__DEFAULT_PARTITION__/b=__DEFAULT_PARTITION__"
    )
    assert partition_path(["a"], [None], types[:1], default_partition_name="n/a") == "a=n%2Fa"
    assert partition_path([], [], []) == ""
    assert escape_path_name("%/=:\x00\x7f日") == "%25%2F%3D%3A%00%7F日"
    with pytest.raises(ValueError, match="empty"):
        escape_path_name("")


def test_errors() -> None:
    with pytest.raises(SchemaMismatchError):
        partition_path(["a"], [1, 2], [parse_type("INT")])
    with pytest.raises(SchemaMismatchError):
        partition_path(["a"], ["1"], [parse_type("INT")])
    with pytest.raises(SchemaMismatchError):
        partition_path(["a"], [Decimal("1.234")], [parse_type("DECIMAL(10, 2)")])
    with pytest.raises(UnsupportedTypeError):
        partition_path(["a"], [b"x"], [parse_type("BYTES")])


@given(st.lists(st.text(), min_size=1, max_size=3), st.data())
def test_paths_never_escape_the_table(keys: list[str], data: st.DataObject) -> None:
    keys = [k or "k" for k in keys]
    values = [data.draw(st.none() | st.text()) for _ in keys]
    path = partition_path(keys, values, [parse_type("STRING")] * len(keys))
    components = path.split("/")
    assert len(components) == len(keys)
    for component in components:
        assert "=" in component
        assert component not in (".", "..", "")
    normalised = posixpath.normpath(posixpath.join("/table", path))
    assert normalised.startswith("/table/")


def test_group_ids_and_distinct_values() -> None:
    t = pa.table(
        {
            "dt": pa.array(["b", "a", "b", None, "a", None]),
            "h": pa.array([1, 2, 1, 1, 2, 1], type=pa.int32()),
            "x": pa.array(range(6)),
        }
    )
    ids, parts = partition_group_ids(t, ["dt", "h"])
    assert ids.tolist() == [0, 1, 0, 2, 1, 2]
    assert parts == [("b", 1), ("a", 2), (None, 1)]
    assert partition_values_from_arrow(t, ["dt", "h"]) == parts
    chunked = pa.concat_tables([t.slice(0, 2), t.slice(2)])
    ids2, parts2 = partition_group_ids(chunked, ["dt", "h"])
    assert ids2.tolist() == ids.tolist()
    assert parts2 == parts


def test_group_ids_edge_cases() -> None:
    t = pa.table({"d": pa.array([dt.date(2024, 1, 1)] * 3), "v": pa.array([1, 2, 3])})
    ids, parts = partition_group_ids(t, [])
    assert ids.tolist() == [0, 0, 0]
    assert parts == [()]
    ids, parts = partition_group_ids(t, ["d"])
    assert parts == [(dt.date(2024, 1, 1),)]
    empty = t.slice(0, 0)
    ids, parts = partition_group_ids(empty, ["d"])
    assert ids.shape == (0,)
    assert parts == []
    with pytest.raises(SchemaMismatchError):
        partition_group_ids(t, ["nope"])


def test_group_ids_many_columns_do_not_overflow() -> None:
    n = 2000
    rng = np.random.default_rng(1)
    cols = {f"c{i}": pa.array(rng.integers(0, 1000, n)) for i in range(8)}
    t = pa.table(cols)
    ids, parts = partition_group_ids(t, list(cols))
    rows = list(zip(*(t.column(c).to_pylist() for c in cols), strict=True))
    assert len(parts) == len(set(rows))
    for i, row in enumerate(rows):
        assert parts[ids[i]] == row


def test_canonical_partition_equates_pypaimons_null_encoding_with_javas():
    """pypaimon 2.1.0 reserves no variable part for a NULL TIMESTAMP(6); Java reserves 8 bytes."""
    from snaplake.store.format.binary_row import encode_binary_row
    from snaplake.store.format.partition import canonical_partition
    from snaplake.store.format.types import parse_type

    types = [parse_type("TIMESTAMP(6)"), parse_type("INT")]
    java = encode_binary_row([None, 7], types)
    bits = (1 << 8).to_bytes(8, "little")  # header byte 0, field 0 null
    pypaimon = (2).to_bytes(4, "big") + bits + bytes(8) + (7).to_bytes(8, "little")
    assert pypaimon != java
    assert canonical_partition(pypaimon, types) == java
    assert canonical_partition(java, types) == java
    assert canonical_partition(b"\x00\x00\x00\x00" + bytes(8), []) == b"\x00\x00\x00\x00" + bytes(8)
