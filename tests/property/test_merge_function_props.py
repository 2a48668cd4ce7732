"""The vectorised merge engines equal a row-at-a-time model of Paimon's merge functions."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.merge_model import MergeModel, ModelError

from snaplake.errors import MergeFunctionError
from snaplake.mergetree.kv import SEQUENCE_NUMBER, VALUE_KIND, to_key_value
from snaplake.mergetree.merge_function import (
    AggregateMergeFunction,
    DeduplicateMergeFunction,
    FirstRowMergeFunction,
    MergeFunction,
    MergeSpec,
    PartialUpdateMergeFunction,
    fold,
)
from snaplake.store.format.types import parse_type

_SCHEMA = pa.schema(
    [
        pa.field("k", pa.int32(), nullable=False),
        pa.field("i", pa.int64()),
        pa.field("f", pa.float64()),
        pa.field("g", pa.float32()),
        pa.field("s", pa.string()),
        pa.field("b", pa.bool_()),
    ]
)
_TYPES = {
    "k": parse_type("INT NOT NULL"),
    "i": parse_type("BIGINT"),
    "f": parse_type("DOUBLE"),
    "g": parse_type("FLOAT"),
    "s": parse_type("STRING"),
    "b": parse_type("BOOLEAN"),
}
_COLUMNS = list(_TYPES)


@st.composite
def _rows(draw: st.DrawFn, *, kinds: list[int]) -> list[tuple[int, int, dict[str, Any]]]:
    n = draw(st.integers(0, 40))
    seqs = draw(st.permutations(range(n)))
    out = []
    for seq in seqs:
        row = {
            "k": draw(st.integers(0, 5)),
            "i": draw(st.one_of(st.none(), st.integers(-5, 5))),
            "f": draw(st.one_of(st.none(), st.floats(-4, 4, width=32).map(float))),
            "g": draw(st.one_of(st.none(), st.floats(-4, 4, width=32))),
            "s": draw(st.one_of(st.none(), st.sampled_from(["a", "b", " ", "", "cc"]))),
            "b": draw(st.one_of(st.none(), st.booleans())),
        }
        out.append((seq, draw(st.sampled_from(kinds)), row))
    return out


def _run(
    rows: list[tuple[int, int, dict[str, Any]]], function: MergeFunction, model: MergeModel
) -> None:
    values = pa.Table.from_pylist([r for _, _, r in rows], schema=_SCHEMA)
    kv = to_key_value(
        values,
        ["k"],
        np.array([s for s, _, _ in rows], dtype=np.int64),
        np.array([k for _, k, _ in rows], dtype=np.int8),
    )
    versions: dict[int, list[tuple[int, int, dict[str, Any]]]] = defaultdict(list)
    for seq, kind, row in rows:
        versions[row["k"]].append((seq, kind, row))
    expected: dict[int, Any] = {}
    model_error = False
    for key, vs in versions.items():
        vs.sort(key=lambda v: (v[0], v[1] in (0, 2)))
        try:
            folded = model.fold([(kind, row) for _, kind, row in vs])
        except ModelError:
            model_error = True
            continue
        if folded is not None:
            expected[key] = (folded[0], folded[1])
    spec = MergeSpec(("k",), (), False, function)
    if model_error:
        with pytest.raises(MergeFunctionError):
            fold(kv, spec)
        return
    out = fold(kv, spec)
    got = {}
    for row in out.to_pylist():
        got[row["k"]] = (row[VALUE_KIND], {c: row[c] for c in _COLUMNS})
        assert row[SEQUENCE_NUMBER] >= 0
    assert list(got) == sorted(got), "output must stay in key order"
    assert set(got) == set(expected)
    for key, (kind, row) in expected.items():
        assert got[key][0] == kind, (key, got[key], kind, row)
        for c in _COLUMNS:
            a, b = got[key][1][c], row.get(c)
            if isinstance(b, float) and isinstance(a, float):
                assert a == b or (math.isnan(a) and math.isnan(b)), (key, c, a, b)
            else:
                assert a == b, (key, c, a, b, versions[key])


_ALL_KINDS = [0, 1, 2, 3]


@given(_rows(kinds=_ALL_KINDS), st.booleans())
def test_deduplicate(rows: list[tuple[int, int, dict[str, Any]]], ignore_delete: bool) -> None:
    _run(
        rows,
        DeduplicateMergeFunction(ignore_delete=ignore_delete),
        MergeModel("deduplicate", _COLUMNS, ignore_delete=ignore_delete),
    )


@given(_rows(kinds=_ALL_KINDS), st.booleans())
def test_first_row(rows: list[tuple[int, int, dict[str, Any]]], ignore_delete: bool) -> None:
    _run(
        rows,
        FirstRowMergeFunction(ignore_delete=ignore_delete),
        MergeModel("first-row", _COLUMNS, ignore_delete=ignore_delete),
    )


@given(_rows(kinds=_ALL_KINDS), st.sampled_from(["none", "ignore", "remove"]))
def test_partial_update(rows: list[tuple[int, int, dict[str, Any]]], mode: str) -> None:
    _run(
        rows,
        PartialUpdateMergeFunction(
            ignore_delete=mode == "ignore", remove_record_on_delete=mode == "remove"
        ),
        MergeModel(
            "partial-update",
            _COLUMNS,
            ignore_delete=mode == "ignore",
            remove_record_on_delete=mode == "remove",
        ),
    )


_FUNCS = {
    "i": ["sum", "product", "min", "max", "last_value", "last_non_null_value", "first_value",
          "first_non_null_value"],
    "f": ["sum", "product", "min", "max", "last_value", "first_non_null_value"],
    "g": ["sum", "product", "max", "min"],
    "s": ["listagg", "min", "max", "last_non_null_value", "first_value"],
    "b": ["bool_and", "bool_or", "last_value"],
}  # fmt: skip


@given(
    st.fixed_dictionaries({c: st.sampled_from(fs) for c, fs in _FUNCS.items()}),
    st.frozensets(st.sampled_from(list(_FUNCS))),
    st.sampled_from([[0, 2], _ALL_KINDS]),
    st.data(),
)
def test_aggregation(
    functions: dict[str, str], ignore_retract: frozenset[str], kinds: list[int], data: Any
) -> None:
    rows = data.draw(_rows(kinds=kinds))
    functions = {"k": "primary_key", **functions}
    _run(
        rows,
        AggregateMergeFunction(
            functions=functions, types=_TYPES, ignore_retract=ignore_retract, delimiters={}
        ),
        MergeModel(
            "aggregation",
            _COLUMNS,
            functions=functions,
            ignore_retract=ignore_retract,
            int_bits={"i": 64, "k": 32},
            float32=frozenset({"g"}),
        ),
    )
