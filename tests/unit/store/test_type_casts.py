"""The allowed column type changes: Paimon's implicit casts that lose nothing."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from snaplake.store.format.type_casts import can_widen, widening_refusal
from snaplake.store.format.types import parse_type, to_arrow_type

ALLOWED = [
    ("TINYINT", "SMALLINT"), ("TINYINT", "BIGINT"), ("SMALLINT", "INT"), ("INT", "BIGINT"),
    ("TINYINT", "FLOAT"), ("SMALLINT", "FLOAT"), ("INT", "DOUBLE"), ("FLOAT", "DOUBLE"),
    ("INT", "DECIMAL(10, 0)"), ("BIGINT", "DECIMAL(21, 2)"), ("TINYINT", "DECIMAL(3, 0)"),
    ("DECIMAL(10, 2)", "DECIMAL(12, 2)"), ("DECIMAL(10, 2)", "DECIMAL(12, 4)"),
    ("VARCHAR(10)", "VARCHAR(20)"), ("VARCHAR(10)", "STRING"), ("CHAR(3)", "VARCHAR(3)"),
    ("CHAR(3)", "STRING"), ("BINARY(4)", "BYTES"), ("VARBINARY(4)", "VARBINARY(8)"),
    ("TIMESTAMP(3)", "TIMESTAMP(6)"), ("TIMESTAMP(0)", "TIMESTAMP(3)"),
    ("TIMESTAMP(3) WITH LOCAL TIME ZONE", "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
    ("TIME(0)", "TIME(3)"), ("INT NOT NULL", "BIGINT"), ("INT NOT NULL", "INT"),
    ({"type": "ARRAY", "element": "INT"}, {"type": "ARRAY", "element": "BIGINT"}),
    ({"type": "MAP", "key": "STRING", "value": "FLOAT"},
     {"type": "MAP", "key": "STRING", "value": "DOUBLE"}),
]  # fmt: skip

REFUSED = [
    ("BIGINT", "INT"), ("INT", "SMALLINT"), ("BIGINT", "DOUBLE"), ("INT", "FLOAT"),
    ("BIGINT", "FLOAT"), ("DOUBLE", "FLOAT"), ("DECIMAL(10, 2)", "DOUBLE"),
    ("DECIMAL(10, 2)", "DECIMAL(5, 2)"), ("DECIMAL(10, 2)", "DECIMAL(10, 4)"),
    ("INT", "DECIMAL(9, 0)"), ("INT", "STRING"), ("STRING", "INT"), ("VARCHAR(10)", "VARCHAR(5)"),
    ("VARCHAR(3)", "CHAR(5)"), ("CHAR(3)", "CHAR(5)"), ("BINARY(3)", "BINARY(5)"),
    ("TIMESTAMP(6)", "TIMESTAMP(3)"), ("TIMESTAMP(3)", "TIMESTAMP(9)"),
    ("TIMESTAMP(3)", "TIMESTAMP(3) WITH LOCAL TIME ZONE"), ("TIMESTAMP(3)", "DATE"),
    ("DATE", "TIMESTAMP(3)"), ("BOOLEAN", "INT"), ("INT", "INT NOT NULL"),
    ({"type": "MAP", "key": "INT", "value": "INT"},
     {"type": "MAP", "key": "BIGINT", "value": "INT"}),
    ({"type": "ARRAY", "element": "BIGINT"}, {"type": "ARRAY", "element": "INT"}),
]  # fmt: skip


@pytest.mark.parametrize(("source", "target"), ALLOWED)
def test_allowed_widenings(source, target):
    s, t = parse_type(source), parse_type(target)
    assert can_widen(s, t)
    assert widening_refusal(s, t) is None


@pytest.mark.parametrize(("source", "target"), REFUSED)
def test_refused_changes(source, target):
    s, t = parse_type(source), parse_type(target)
    assert not can_widen(s, t)
    if s.nullable == t.nullable:
        assert widening_refusal(s, t) is not None


def test_refusal_messages_say_what_to_do():
    assert "VARCHAR(n) instead" in (
        widening_refusal(parse_type("VARCHAR(3)"), parse_type("CHAR(5)")) or ""
    )
    assert "INT96" in (
        widening_refusal(parse_type("TIMESTAMP(3)"), parse_type("TIMESTAMP(9)")) or ""
    )
    assert "add a column of the new type" in (
        widening_refusal(parse_type("INT"), parse_type("STRING")) or ""
    )


_REFUSED = [
    ("INT", "SMALLINT", "INT widens only to BIGINT, DOUBLE or DECIMAL(p, s) with p - s >= 10"),
    ("BIGINT", "INT", "BIGINT widens only to DECIMAL(p, s) with p - s >= 19"),
    ("DOUBLE", "FLOAT", "DOUBLE has no wider type"),
    ("STRING", "VARCHAR(3)", "widens only to VARCHAR(m) or STRING"),
    ("DECIMAL(10, 2)", "DECIMAL(5, 2)", "s' >= s and p' - s' >= p - s"),
    ("DATE", "TIMESTAMP(3)", "DATE has no wider type"),
    ("TIME(3)", "TIME(0)", "TIME(p') with p' >= p"),
]


@pytest.mark.parametrize(("source", "target", "says"), _REFUSED)
def test_refusal_messages_are_short_and_name_the_allowed_changes(source, target, says):
    """Issue 18 item 14: the refusal printed the whole widening table (~900 characters)."""
    text = widening_refusal(parse_type(source), parse_type(target)) or ""
    assert says in text
    assert len(text) < 300 and "\n" not in text, text
    assert text.endswith("add a column of the new type, fill it and drop this one")


_INTS = st.sampled_from(["TINYINT", "SMALLINT", "INT", "BIGINT"])
_BOUNDS = {"TINYINT": 2**7, "SMALLINT": 2**15, "INT": 2**31, "BIGINT": 2**63}
_NUMERIC_TARGETS = st.sampled_from(
    ["SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL(3, 0)", "DECIMAL(10, 0)",
     "DECIMAL(19, 0)", "DECIMAL(25, 3)"]
)  # fmt: skip


@given(source=_INTS, target=_NUMERIC_TARGETS, data=st.data())
def test_every_allowed_integer_widening_reads_back_exactly(source, target, data):
    """The reader casts old values with pyarrow; an allowed widening never loses a value."""
    s, t = parse_type(source), parse_type(target)
    if not can_widen(s, t):
        return
    bound = _BOUNDS[source]
    values = data.draw(st.lists(st.integers(-bound, bound - 1), min_size=1, max_size=20))
    values += [-bound, bound - 1]
    column = pa.array(values, to_arrow_type(s))
    cast = column.cast(to_arrow_type(t))
    assert [int(v) for v in cast.to_pylist()] == values
