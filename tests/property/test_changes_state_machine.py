"""Stateful test of ``Table.changes``: every mode replays one merged view into another.

Upserts, deletes, minor and full compactions, overwrites and snapshot expiries
run against a real primary-key table (``deduplicate``; ``changelog-producer``
``none`` or ``input``, drawn per run). After each step, for every retained
start snapshot ``s`` (``diff``: ``s - 1`` retained too): the merged view at
``s - 1`` with ``changes(s, mode=...)`` applied equals the latest merged view,
for ``delta`` (no overwrite in the range: Paimon's delta skips OVERWRITE
snapshots), ``changelog`` (``input``; the same) and ``diff`` (always).
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, to_table

from snaplake.catalog import FileSystemCatalog
from snaplake.store.format.snapshot import CommitKind

_OPTIONS = {
    "bucket": "2",
    "num-sorted-run.compaction-trigger": "3",
    "snapshot.num-retained.min": "2",
    "snapshot.num-retained.max": "6",
    "snapshot.time-retained": "0 ms",
}
_KEY_SPACE = 40


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[k] for k in PK_KEYS)


def _apply(state: dict[tuple[Any, ...], dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    for r in rows:
        value = {k: v for k, v in r.items() if not k.startswith("_")}
        if r["_row_kind"] in ("+I", "+U"):
            state[_key(r)] = value
        else:
            state.pop(_key(r), None)


class ChangesMachine(RuleBasedStateMachine):
    """A primary-key table and the views its snapshots hold."""

    @initialize(producer=st.sampled_from(["none", "input"]))
    def create(self, producer: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="changes-sm-")
        catalog = FileSystemCatalog(self.dir)
        catalog.create_database("db")
        self.producer = producer
        self.table = catalog.create_table(
            "db.t", schema=PK_SCHEMA, primary_keys=PK_KEYS,
            options={**_OPTIONS, "changelog-producer": producer},
        )  # fmt: skip
        self.seed = 0

    def teardown(self) -> None:
        shutil.rmtree(getattr(self, "dir", ""), ignore_errors=True)

    def _rows(self, ids: list[int]) -> list[dict[str, Any]]:
        self.seed += 1
        rows = []
        for i in sorted(set(ids)):
            rows += make_rows(i, 1, seed=self.seed)
        return rows

    @rule(ids=st.lists(st.integers(0, _KEY_SPACE), min_size=1, max_size=8))
    def upsert(self, ids: list[int]) -> None:
        self.table.write(to_table(self._rows(ids)))

    @rule(ids=st.lists(st.integers(0, _KEY_SPACE), min_size=1, max_size=4))
    def delete(self, ids: list[int]) -> None:
        rows = self._rows(ids)
        self.table.write(to_table(rows), row_kinds=["-D"] * len(rows))

    @rule(full=st.booleans())
    def compact(self, full: bool) -> None:
        self.table.compact(full=full)

    @rule(ids=st.lists(st.integers(0, _KEY_SPACE), min_size=1, max_size=4))
    def overwrite(self, ids: list[int]) -> None:
        self.table.write(to_table(self._rows(ids)), overwrite={})

    @rule()
    def expire(self) -> None:
        self.table.expire_snapshots()

    @invariant()
    def changes_replay_to_the_latest_view(self) -> None:
        table = getattr(self, "table", None)
        latest = table.latest_snapshot() if table is not None else None
        if table is None or latest is None:
            return
        earliest = table.snapshot_manager.earliest_snapshot_id()
        assert earliest is not None
        want = {_key(r): r for r in table.to_arrow().to_pylist()}
        kinds = {s.id: s.commit_kind for s in table.snapshots()}
        for start in range(earliest, latest.id + 1):
            before_id = start - 1
            if before_id and before_id < earliest:
                modes: list[str] = []
            else:
                modes = ["diff"]
                if all(kinds[i] != CommitKind.OVERWRITE for i in range(start, latest.id + 1)):
                    modes.append("delta" if self.producer == "none" else "changelog")
            for mode in modes:
                state = {}
                if before_id:
                    state = {_key(r): r for r in table.to_arrow(snapshot_id=before_id).to_pylist()}
                _apply(state, table.changes(start, mode=mode).read_all().to_pylist())
                assert state == want, (mode, start, latest.id)


ChangesMachine.TestCase.settings = settings(
    ChangesMachine.TestCase.settings, stateful_step_count=12, max_examples=15, deadline=None
)
TestChanges = ChangesMachine.TestCase
