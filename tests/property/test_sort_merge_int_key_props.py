"""The streaming merge over a single integer key (NumPy cuts, one-take deduplicate) equals
one fold over all rows and a dict model of the last version per key."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from snaplake.mergetree.groups import merge_order
from snaplake.mergetree.kv import RowKind, to_key_value
from snaplake.mergetree.merge_function import (
    DeduplicateMergeFunction,
    MergeFunction,
    MergeSpec,
    PartialUpdateMergeFunction,
    drop_retracts,
    fold,
)
from snaplake.mergetree.sort_merge import SortMergeReader

_TYPES = [pa.int8(), pa.int32(), pa.int64()]

_Row = tuple[int, int, int, int, int | None]
"""(run, key, sequence, kind, value)."""
_Drawn = tuple[pa.DataType, int, list[_Row]]


@st.composite
def _runs(draw: st.DrawFn) -> _Drawn:
    """Rows (key, sequence, kind, value) of up to 8 runs; keys distinct within a run.

    Sequence numbers may repeat across runs (the kind then breaks the tie), so
    the merge order is (key, sequence, retract before add) as in Paimon.
    """
    key_type = draw(st.sampled_from(_TYPES))
    rows: list[_Row] = []
    num_runs = draw(st.integers(1, 8))
    for run in range(num_runs):
        for key in draw(st.sets(st.integers(-100, 100), max_size=40)):
            seq = draw(st.integers(0, 30))
            kind = draw(st.sampled_from([0, 1, 2, 3]))
            rows.append((run, key, seq, kind, draw(st.one_of(st.none(), st.integers(0, 9)))))
    return key_type, num_runs, rows


def _tables(key_type: pa.DataType, num_runs: int, rows: list[_Row]) -> list[pa.Table]:
    schema = pa.schema([pa.field("k", key_type, nullable=False), pa.field("v", pa.int64())])
    spec = _spec(DeduplicateMergeFunction())
    out = []
    for run in range(num_runs):
        mine = sorted((r for r in rows if r[0] == run), key=lambda r: r[1])
        values = pa.table(
            {"k": pa.array([r[1] for r in mine], key_type), "v": [r[4] for r in mine]},
            schema=schema,
        )
        seqs = np.array([r[2] for r in mine], dtype=np.int64)
        kinds = np.array([r[3] for r in mine], dtype=np.int8)
        out.append(fold(to_key_value(values, ["k"], seqs, kinds), spec))
    return out


def _spec(function: MergeFunction) -> MergeSpec:
    return MergeSpec(("k",), (), False, function)


def _batches(table: pa.Table, size: int) -> Iterator[pa.Table]:
    for start in range(0, max(table.num_rows, 1), size):
        yield table.slice(start, size)


def _merged(runs: list[pa.Table], spec: MergeSpec, size: int) -> pa.Table:
    parts = [t for t in SortMergeReader([_batches(r, size) for r in runs], spec) if t.num_rows]
    return pa.concat_tables(parts) if parts else runs[0].slice(0, 0)


@given(_runs(), st.integers(1, 50), st.sampled_from(["dedup", "ignore-delete", "partial"]))
def test_int_key_merge_equals_fold(drawn: _Drawn, size: int, engine: str) -> None:
    key_type, num_runs, rows = drawn
    function = {
        "dedup": DeduplicateMergeFunction(),
        "ignore-delete": DeduplicateMergeFunction(ignore_delete=True),
        "partial": PartialUpdateMergeFunction(remove_record_on_delete=True),
    }[engine]
    runs = _tables(key_type, num_runs, rows)
    spec = _spec(function)
    got = _merged(runs, spec, size)
    expected = fold(pa.concat_tables(runs), spec)
    assert got.to_pylist() == expected.to_pylist()


@given(_runs(), st.integers(1, 50))
def test_int_key_dedup_equals_dict_model(drawn: _Drawn, size: int) -> None:
    key_type, num_runs, rows = drawn
    runs = _tables(key_type, num_runs, rows)
    got = drop_retracts(_merged(runs, _spec(DeduplicateMergeFunction()), size))
    # Each run already kept one version per key (its own fold); the model folds the runs.
    model: dict[int, tuple[tuple[int, int], int, int | None]] = {}
    for run in runs:
        for r in run.to_pylist():
            order = (r["_SEQUENCE_NUMBER"], int(r["_VALUE_KIND"] in (0, 2)))
            old = model.get(r["_KEY_k"])
            if old is None or order >= old[0]:
                model[r["_KEY_k"]] = (order, r["_VALUE_KIND"], r["v"])
    adds = (RowKind.INSERT, RowKind.UPDATE_AFTER)
    expected = [(k, v) for k, (_, kind, v) in sorted(model.items()) if kind in adds]
    assert [(r["_KEY_k"], r["v"]) for r in got.to_pylist()] == expected


@given(
    st.sampled_from([*_TYPES, pa.int16()]),
    st.lists(
        st.tuples(st.integers(-128, 127), st.sampled_from([0, 1, 2**40, 2**62, 2**63 - 1]),
                  st.integers(0, 3), st.sampled_from([0, 1, 2, 3])),
        max_size=60,
    ),
    st.integers(1, 4),
)  # fmt: skip
def test_merge_order_equals_reference(
    key_type: pa.DataType, rows: list[tuple[int, int, int, int]], chunks: int
) -> None:
    """``merge_order`` (NumPy code sort or Arrow's, by range) equals (key, seq, add, index)."""
    scale = {8: 1, 16: 200, 32: 10**7, 64: 2**55}[key_type.bit_width]
    keys = [max(min(k * scale, 2 ** (key_type.bit_width - 1) - 1), -(2 ** (key_type.bit_width - 1)))
            for k, _, _, _ in rows]  # fmt: skip
    seqs = [base + off for _, base, off, _ in rows]
    seqs = [min(s, 2**63 - 1) for s in seqs]
    kinds = [kind for _, _, _, kind in rows]
    values = pa.table({"k": pa.array(keys, key_type), "v": pa.array([0] * len(rows), pa.int64())})
    kv = to_key_value(values, ["k"], np.array(seqs, np.int64), np.array(kinds, np.int8))
    step = max(1, -(-len(rows) // chunks))
    kv = pa.concat_tables([kv.slice(i, step) for i in range(0, len(rows), step)] or [kv])
    got = merge_order(kv, ["k"]).to_pylist()
    adds = (RowKind.INSERT, RowKind.UPDATE_AFTER)
    expected = sorted(range(len(rows)), key=lambda i: (keys[i], seqs[i], kinds[i] in adds, i))
    assert got == expected
