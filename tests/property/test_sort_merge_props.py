"""The streaming k-way merge equals one fold over all rows, whatever the batch cuts."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from snaplake.mergetree.kv import to_key_value
from snaplake.mergetree.merge_function import (
    DeduplicateMergeFunction,
    MergeSpec,
    PartialUpdateMergeFunction,
    fold,
    merge_sorted,
)
from snaplake.mergetree.sort_merge import SortMergeReader

_SCHEMA = pa.schema(
    [
        pa.field("a", pa.string(), nullable=False),
        pa.field("b", pa.int32(), nullable=False),
        pa.field("v", pa.int64()),
    ]
)


@st.composite
def _runs(draw: st.DrawFn) -> list[pa.Table]:
    """Sorted runs: each holds distinct keys (a, b), with globally distinct sequence numbers."""
    num_runs = draw(st.integers(1, 6))
    seq = iter(draw(st.permutations(range(400))))
    runs = []
    for _ in range(num_runs):
        keys = draw(
            st.sets(
                st.tuples(st.sampled_from(["", "a", "ab", "b", "é"]), st.integers(-3, 3)),
                max_size=25,
            )
        )
        rows = [{"a": a, "b": b, "v": draw(st.one_of(st.none(), st.integers(0, 9)))}
                for a, b in keys]  # fmt: skip
        values = pa.Table.from_pylist(rows, schema=_SCHEMA)
        kinds = np.array([draw(st.sampled_from([0, 2, 3])) for _ in rows], dtype=np.int8)
        seqs = np.array([next(seq) for _ in rows], dtype=np.int64)
        kv = to_key_value(values, ["a", "b"], seqs, kinds)
        runs.append(fold(kv, _spec(DeduplicateMergeFunction())))  # sorted, unique keys
    return runs


def _spec(function: DeduplicateMergeFunction | PartialUpdateMergeFunction) -> MergeSpec:
    return MergeSpec(("a", "b"), (), False, function)


def _batches(table: pa.Table, cuts: list[int]) -> Iterator[pa.Table]:
    start = 0
    for cut in sorted(cuts):
        if start < cut <= table.num_rows:
            yield table.slice(start, cut - start)
            start = cut
    yield table.slice(start)


@given(_runs(), st.lists(st.integers(0, 30), max_size=6), st.booleans())
def test_streaming_merge_equals_fold(runs: list[pa.Table], cuts: list[int], partial: bool) -> None:
    spec = _spec(
        PartialUpdateMergeFunction(remove_record_on_delete=True)
        if partial
        else DeduplicateMergeFunction()
    )
    merged = SortMergeReader([_batches(r, cuts) for r in runs], spec)
    got = pa.concat_tables([t for t in merged if t.num_rows] or [runs[0].slice(0, 0)])
    expected = fold(pa.concat_tables(runs), spec)
    assert got.to_pylist() == expected.to_pylist()
    # the output is itself a sorted run: folding it again changes nothing
    assert merge_sorted(got, spec).to_pylist() == got.to_pylist()
