"""The lookup / full-compaction changelog rules against a per-key model (PAIMON-MODES.md §4).

:func:`snaplake.mergetree.changelog.changelog_rows` is vectorised; the model
below decides key by key, as Paimon's ``FullChangelogMergeFunctionWrapper`` and
``LookupChangelogMergeFunctionWrapper`` do.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snaplake.mergetree.changelog import ChangelogRules, changelog_rows

SCHEMA = pa.schema(
    [
        pa.field("_KEY_id", pa.int64(), nullable=False),
        pa.field("_SEQUENCE_NUMBER", pa.int64(), nullable=False),
        pa.field("_VALUE_KIND", pa.int8(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("v", pa.string()),
        pa.field("ts", pa.int64()),
    ]
)
ADD = (0, 2)

Record = tuple[int, int, str | None, int | None]  # (seq, kind, v, ts)

record = st.tuples(
    st.integers(0, 1000),
    st.sampled_from([0, 1, 2, 3]),
    st.sampled_from([None, "a", "b"]),
    st.sampled_from([None, 1, 2]),
)
key_case = st.tuples(st.one_of(st.none(), record), record, st.booleans())


def _table(rows: list[tuple[int, Record]]) -> pa.Table:
    cols: dict[str, list[Any]] = {n: [] for n in SCHEMA.names}
    for key, (seq, kind, v, ts) in rows:
        for name, value in zip(SCHEMA.names, (key, seq, kind, key, v, ts), strict=True):
            cols[name].append(value)
    return pa.table(cols, schema=SCHEMA)


def _model(
    key: int, before: Record | None, after: Record, emit: bool, rules: ChangelogRules
) -> list[tuple[int, int, int, str | None, int | None]]:
    """One key's changelog rows as (key, seq, kind, v, ts)."""
    if not emit:
        return []
    had = before is not None and before[1] in ADD
    add = after[1] in ADD
    if not had and add:
        return [(key, after[0], 0, after[2], after[3])]
    if rules.insert_only or not had:
        return []
    assert before is not None
    if not add:
        return [(key, before[0], 3, before[2], before[3])]
    fields = {"v": 2, "ts": 3}
    if rules.row_deduplicate and all(before[fields[c]] == after[fields[c]] for c in rules.compared):
        return []
    return [(key, before[0], 1, before[2], before[3]), (key, after[0], 2, after[2], after[3])]


@settings(max_examples=300, deadline=None)
@given(
    cases=st.lists(key_case, max_size=12),
    dedup=st.booleans(),
    ignore_ts=st.booleans(),
    insert_only=st.booleans(),
    all_emit=st.booleans(),
)
def test_changelog_rows_equal_the_per_key_model(
    cases: list[tuple[Record | None, Record, bool]],
    dedup: bool,
    ignore_ts: bool,
    insert_only: bool,
    all_emit: bool,
) -> None:
    rules = ChangelogRules(
        row_deduplicate=dedup,
        compared=("v",) if ignore_ts else ("v", "ts"),
        insert_only=insert_only,
    )
    placeholder: Record = (0, 0, None, None)
    before = _table([(k, b if b is not None else placeholder) for k, (b, _, _) in enumerate(cases)])
    after = _table([(k, a) for k, (_, a, _) in enumerate(cases)])
    has_before = np.array([b is not None for b, _, _ in cases], dtype=np.bool_)
    emit = None if all_emit else np.array([e for _, _, e in cases], dtype=np.bool_)
    got = changelog_rows(before, has_before, after, rules, emit=emit)
    expected = [
        row for k, (b, a, e) in enumerate(cases) for row in _model(k, b, a, all_emit or e, rules)
    ]
    rows = list(
        zip(
            *(
                got.column(n).to_pylist()
                for n in ("id", "_SEQUENCE_NUMBER", "_VALUE_KIND", "v", "ts")
            ),
            strict=True,
        )
    )
    assert rows == expected
    assert got.column("_KEY_id").to_pylist() == got.column("id").to_pylist()
    assert got.schema == SCHEMA


def test_misaligned_inputs_are_refused() -> None:
    one = _table([(1, (1, 0, "a", None))])
    with pytest.raises(ValueError, match="aligned"):
        changelog_rows(one, np.zeros(2, dtype=np.bool_), one, ChangelogRules())
