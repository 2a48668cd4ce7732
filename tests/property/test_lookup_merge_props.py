"""The lookup merge rule (Paimon's ``LookupMergeFunction``) equals a row-at-a-time model.

Per key, only the level-0 versions and the version of the lowest level above 0 are
merged (a level holds a key once); the merge engine then folds them in sequence order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from snaplake.mergetree.kv import VALUE_KIND, RowKind, to_key_value
from snaplake.mergetree.merge_function import (
    LEVEL_COLUMN,
    AggregateMergeFunction,
    MergeFunction,
    MergeSpec,
    PartialUpdateMergeFunction,
    fold,
    pick_high_level,
)
from snaplake.store.format.types import parse_type

_SCHEMA = pa.schema(
    [
        pa.field("k", pa.int32(), nullable=False),
        pa.field("i", pa.int64()),
        pa.field("s", pa.string()),
    ]
)
Row = tuple[int, int, dict[str, Any]]  # (sequence, level, values)


@st.composite
def _versions(draw: st.DrawFn) -> list[Row]:
    """Versions of up to 6 keys: one per chosen level 1..5, up to 3 at level 0."""
    rows: list[tuple[int, dict[str, Any]]] = []
    for k in range(draw(st.integers(1, 6))):
        levels = draw(st.lists(st.integers(1, 5), unique=True, max_size=4))
        levels += [0] * draw(st.integers(0, 3))
        for level in levels:
            value = {
                "k": k,
                "i": draw(st.one_of(st.none(), st.integers(-9, 9))),
                "s": draw(st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))),
            }
            rows.append((level, value))
    seqs = draw(st.permutations(range(len(rows))))
    return [(seq, level, value) for seq, (level, value) in zip(seqs, rows, strict=True)]


def _model(rows: list[Row], merge: str) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for k in sorted({r["k"] for _, _, r in rows}):
        mine = [(s, lv, r) for s, lv, r in rows if r["k"] == k]
        high = [lv for _, lv, _ in mine if lv > 0]
        picked = sorted((s, r) for s, lv, r in mine if lv == 0 or lv == min(high, default=0))
        values = [r for _, r in picked]
        i = [r["i"] for r in values if r["i"] is not None]
        s = [r["s"] for r in values if r["s"] is not None]
        if merge == "sum":
            out[k] = {"k": k, "i": sum(i) if i else None, "s": s[-1] if s else None}
        else:
            out[k] = {"k": k, "i": i[-1] if i else None, "s": s[-1] if s else None}
    return out


def _merged(rows: list[Row], function: MergeFunction) -> dict[int, dict[str, Any]]:
    values = pa.Table.from_pylist([r for _, _, r in rows], schema=_SCHEMA)
    kv = to_key_value(
        values,
        ["k"],
        np.array([s for s, _, _ in rows], dtype=np.int64),
        np.full(len(rows), RowKind.INSERT, dtype=np.int8),
    )
    kv = kv.append_column(
        pa.field(LEVEL_COLUMN, pa.int32(), nullable=False),
        pa.array([lv for _, lv, _ in rows], type=pa.int32()),
    )
    spec = MergeSpec(("k",), (), False, function, lookup=True)
    out = fold(kv, spec)
    assert set(out.column(VALUE_KIND).to_pylist()) <= {RowKind.INSERT}
    return {r["k"]: r for r in out.select(_SCHEMA.names).to_pylist()}


@given(_versions())
def test_aggregation_merges_level0_with_the_lowest_higher_level(rows: list[Row]) -> None:
    function = AggregateMergeFunction(
        functions={"i": "sum", "s": "last_non_null_value"},
        types={"k": parse_type("INT NOT NULL"), "i": parse_type("BIGINT"),
               "s": parse_type("STRING")},
    )  # fmt: skip
    assert _merged(rows, function) == _model(rows, "sum")


@given(_versions())
def test_partial_update_merges_level0_with_the_lowest_higher_level(rows: list[Row]) -> None:
    assert _merged(rows, PartialUpdateMergeFunction()) == _model(rows, "last")


@given(st.lists(st.lists(st.integers(-1, 5), min_size=1, max_size=6), max_size=8))
def test_pick_high_level_keeps_level0_and_each_groups_lowest_level(
    groups: list[list[int]],
) -> None:
    levels = np.array([lv for g in groups for lv in g], dtype=np.int32)
    sizes = [len(g) for g in groups]
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    keep = pick_high_level(levels, starts[: len(groups)]) if groups else np.ones(0, np.bool_)
    want = [lv <= 0 or lv == min(x for x in g if x > 0) for g in groups for lv in g]
    assert keep.tolist() == want
