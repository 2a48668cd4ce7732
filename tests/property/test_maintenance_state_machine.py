"""Stateful model test: appends, overwrites, compactions, merges, expiries, tags, rollbacks.

A simple in-memory model (rows per snapshot id, rows per tag) runs beside a real
local table. After every step: the latest snapshot's rows equal the model's,
every retained snapshot and every tag reads back fully (from storage, with the
decoded-metadata cache cleared, so a deleted manifest or data file is noticed),
and every file those versions reach exists.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
)
from tests.helpers import SCHEMA, rows

from snaplake.catalog import FileSystemCatalog
from snaplake.store.format.decoded_cache import metadata_cache

OPTIONS = {
    "snapshot.num-retained.min": "2",
    "snapshot.num-retained.max": "6",
    "snapshot.time-retained": "0 ms",
    "snapshot.expire.limit": "4",
    "manifest.merge-min-count": "3",
    "manifest.target-file-size": "4 kb",
    "manifest.full-compaction-threshold-size": "64 kb",
    "compaction.min.file-num": "3",
    "target-file-size": "1 mb",
}

_tag_names = (f"tag{i}" for i in itertools.count())


class MaintenanceMachine(RuleBasedStateMachine):
    tags = Bundle("tags")

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="snaplake-sm-")
        catalog = FileSystemCatalog(self.dir)
        self.table = catalog.create_table(
            "db.t", schema=SCHEMA, partition_keys=["month"], options=OPTIONS
        )
        self.next_id = 0
        self.history: dict[int, frozenset[int]] = {}  # snapshot id -> row ids
        self.tag_rows: dict[str, tuple[int, frozenset[int]]] = {}

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------- helpers
    def latest_rows(self) -> frozenset[int]:
        return self.history[max(self.history)] if self.history else frozenset()

    def record(self, snapshot_id: int | None, ids: frozenset[int]) -> None:
        if snapshot_id is not None:
            self.history[snapshot_id] = ids

    def ids(self, table) -> frozenset[int]:
        values = table.column("id").to_pylist()
        assert len(values) == len(set(values)), "duplicate rows"
        return frozenset(values)

    # --------------------------------------------------------------- rules
    @initialize()
    def first_append(self) -> None:
        self.append(5)

    @rule(n=st.integers(min_value=1, max_value=12))
    def append(self, n: int) -> None:
        w = self.table.new_write(commit_user="writer")
        w.write_arrow(rows(self.next_id, n))
        new = frozenset(range(self.next_id, self.next_id + n))
        self.next_id += n
        result = self.table.new_commit(commit_user="writer").commit(w.prepare_commit())
        self.record(result.snapshot_id, self.latest_rows() | new)

    @rule(month=st.integers(min_value=1, max_value=3), n=st.integers(min_value=0, max_value=6))
    def overwrite_month(self, month: int, n: int) -> None:
        data = rows(self.next_id, 3 * n) if n else rows(0, 0)
        data = data.filter(data.column("month").to_numpy() == month) if n else data
        w = self.table.new_write(commit_user="writer")
        w.write_arrow(data)
        new = frozenset(data.column("id").to_pylist())
        self.next_id += 3 * n
        result = self.table.new_commit(commit_user="writer").commit(
            w.prepare_commit(), overwrite={"month": month}
        )
        kept = frozenset(i for i in self.latest_rows() if 1 + i % 3 != month)
        if result.snapshot_id != (max(self.history) if self.history else None):
            self.record(result.snapshot_id, kept | new)

    @rule()
    def compact(self) -> None:
        result = self.table.compact()
        self.record(result.snapshot_id, self.latest_rows())

    @rule(full=st.booleans())
    def merge(self, full: bool) -> None:
        result = self.table.merge_manifests(full=full)
        self.record(result.snapshot_id, self.latest_rows())

    @rule()
    def expire(self) -> None:
        latest = max(self.history) if self.history else None
        result = self.table.expire_snapshots()
        retained = {s.id for s in self.table.snapshots()}
        for sid in result.expired_snapshot_ids:
            assert sid not in retained
            self.history.pop(sid, None)
        assert latest is None or latest in retained
        assert set(self.history) == retained

    @rule()
    def orphan_clean(self) -> None:
        self.table.remove_orphan_files(
            older_than=datetime.now(UTC) - timedelta(milliseconds=1), dry_run=False
        )

    @precondition(lambda self: bool(self.history))
    @rule(target=tags, data=st.data())
    def create_tag(self, data: st.DataObject) -> str:
        sid = data.draw(st.sampled_from(sorted(self.history)))
        name = next(_tag_names)
        self.table.create_tag(name, snapshot_id=sid)
        self.tag_rows[name] = (sid, self.history[sid])
        return name

    @rule(name=consumes(tags))
    def delete_tag(self, name: str) -> None:
        if name in self.tag_rows:
            self.table.delete_tag(name)
            del self.tag_rows[name]

    @precondition(lambda self: len(self.history) > 1)
    @rule(data=st.data())
    def rollback_to_snapshot(self, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from(sorted(self.history)[:-1]))
        self.table.rollback_to(sid)
        self.history = {k: v for k, v in self.history.items() if k <= sid}
        self.tag_rows = {k: v for k, v in self.tag_rows.items() if v[0] <= sid}

    @rule(name=tags)
    def rollback_to_tag(self, name: str) -> None:
        if name not in self.tag_rows:
            return
        sid, ids = self.tag_rows[name]
        self.table.rollback_to(name)
        self.history = {k: v for k, v in self.history.items() if k <= sid}
        self.history[sid] = ids
        self.tag_rows = {k: v for k, v in self.tag_rows.items() if v[0] <= sid}

    # ---------------------------------------------------------- invariants
    @invariant()
    def everything_retained_is_readable(self) -> None:
        metadata_cache.clear()
        snapshots = self.table.snapshots()
        assert {s.id for s in snapshots} == set(self.history)
        assert self.ids(self.table.to_arrow()) == self.latest_rows()
        for snap in snapshots:
            if snap.id != max(self.history):
                assert self.ids(self.table.to_arrow(snapshot_id=snap.id)) == self.history[snap.id]
            for split in self.table.new_scan(snapshot_id=snap.id).plan():
                assert all(os.path.exists(p) for p in split.paths)
        assert {t.name for t in self.table.list_tags()} == set(self.tag_rows)
        for name, (_, ids) in self.tag_rows.items():
            assert self.ids(self.table.to_arrow(tag=name)) == ids


def test_maintenance_state_machine_short() -> None:
    """Default-profile run: a handful of short interleavings (runs in CI)."""
    MaintenanceMachine.TestCase.settings = settings(
        max_examples=6, stateful_step_count=14, deadline=None
    )
    MaintenanceMachine.TestCase().runTest()


@pytest.mark.slow
def test_maintenance_state_machine_long() -> None:
    """Longer interleavings (``-m slow``)."""
    MaintenanceMachine.TestCase.settings = settings(
        max_examples=40, stateful_step_count=40, deadline=None
    )
    MaintenanceMachine.TestCase().runTest()
