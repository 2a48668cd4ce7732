"""pypaimon 2.1.0's stream reader and snaplake's ``Table.changes`` agree on the same table.

pypaimon streams each snapshot its follow-up scanner scans (delta: APPEND
snapshots; changelog: snapshots with changelog files), with row kinds; the
same snapshots' rows from ``changes(start)`` must be the same multiset per
snapshot, for append tables and primary-key tables without a changelog
producer (delta) and with ``input``, ``lookup`` and ``full-compaction``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.helpers import create_table
from tests.oracle import PaimonOracle, requires_paimon
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, to_table

pytestmark = [pytest.mark.integration, requires_paimon]


def _per_snapshot(rows: pa.Table, snapshot_column: str) -> dict[int, Counter[Any]]:
    values = rows.select(PK_SCHEMA.names).cast(PK_SCHEMA).to_pylist()
    kinds = rows.column("_row_kind").to_pylist()
    sids = rows.column(snapshot_column).to_pylist()
    out: dict[int, Counter[Any]] = {}
    for sid, kind, row in zip(sids, kinds, values, strict=True):
        out.setdefault(int(sid), Counter())[(kind, tuple(sorted(row.items())))] += 1
    return out


def _history(table: Any, *, compact: bool) -> None:
    table.write(to_table(make_rows(0, 40)))
    table.write(to_table(make_rows(20, 30, seed=1)))
    if compact:
        table.compact(full=True)
    table.write(to_table(make_rows(0, 10, seed=2)[::2]), row_kinds=["-D"] * 5)
    table.write(to_table(make_rows(100, 5, seed=3)))
    if compact:
        table.compact(full=True)


@pytest.mark.parametrize(
    ("producer", "start"),
    [("none", 1), ("input", 1), ("lookup", 1), ("full-compaction", 1), ("none", 3),
     ("lookup", 4)],
)  # fmt: skip
def test_pypaimon_stream_read_equals_changes_of_primary_key_tables(
    tmp_path: Path, producer: str, start: int
) -> None:
    table = create_table(
        tmp_path / "wh", schema=PK_SCHEMA, primary_keys=PK_KEYS, bucket=2,
        options={"changelog-producer": producer},
    )  # fmt: skip
    _history(table, compact=True)
    ours = table.changes(start).read_all()
    theirs = PaimonOracle(tmp_path / "wh").changelog("db.t", from_snapshot=start)
    assert theirs.num_rows > 0
    assert _per_snapshot(ours, "_snapshot_id") == _per_snapshot(theirs, "__snapshot")
    # and as Paimon's read option: incremental-between = 'start-1,latest'
    latest = table.latest_snapshot()
    assert latest is not None
    opts = {"incremental-between": f"{start - 1},{latest.id}"}
    assert table.to_arrow(options=opts).equals(ours)


def test_pypaimon_stream_read_equals_changes_of_an_append_table(tmp_path: Path) -> None:
    table = create_table(
        tmp_path / "wh", schema=PK_SCHEMA, options={"compaction.min.file-num": "2"}
    )
    for i in range(3):
        table.write(to_table(make_rows(i * 10, 10, seed=i)))
    table.compact(full=True)
    table.write(to_table(make_rows(50, 3)))
    ours = table.changes(1).read_all()
    theirs = PaimonOracle(tmp_path / "wh").changelog("db.t", from_snapshot=1)
    assert ours.num_rows == 33
    assert _per_snapshot(ours, "_snapshot_id") == _per_snapshot(theirs, "__snapshot")


@pytest.mark.parametrize(
    "options",
    [
        {"deletion-vectors.enabled": "true"},
        {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"},
        {"merge-engine": "first-row", "ignore-delete": "true"},
    ],
    ids=["deletion-vectors", "deletion-vectors-lookup", "first-row"],
)
def test_pypaimon_stream_read_equals_changes_of_lifting_writers(
    tmp_path: Path, options: dict[str, str]
) -> None:
    """A writer that lifts its level-0 files commits APPEND then COMPACT: both readers agree."""
    table = create_table(
        tmp_path / "wh", schema=PK_SCHEMA, primary_keys=PK_KEYS, bucket=2, options=options
    )
    _history(table, compact=False)
    kinds = [str(s.commit_kind) for s in table.snapshots()]
    # each write: its level-0 files, then their lift (first-row ignores the deleting one)
    writes = 3 if options.get("merge-engine") == "first-row" else 4
    assert kinds == ["APPEND", "COMPACT"] * writes
    ours = table.changes(1).read_all()
    theirs = PaimonOracle(tmp_path / "wh").changelog("db.t", from_snapshot=1)
    assert theirs.num_rows > 0
    assert _per_snapshot(ours, "_snapshot_id") == _per_snapshot(theirs, "__snapshot")
    if "changelog-producer" not in options:  # delta: the rows each write wrote
        assert ours.num_rows == 40 + 30 + 5 + (5 if writes == 4 else 0)
