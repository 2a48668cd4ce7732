"""Stateful model test of deletion-vector primary-key tables, per merge engine.

Upserts, deletes, row-kind batches, minor and full compactions, the writer's
lookup compaction at ``prepare_commit`` (or ``write-only`` writers, drawn per
run), snapshot expiries and reads of older snapshots run against a real local
table and a row-at-a-time model. Two reads are checked at every step, at the
latest and at retained older snapshots:

- Paimon's batch read (what Java and pypaimon do): level 0 skipped, every
  other file read on its own with its deletion vector applied, no key merge.
  Every key is live at most once, and the view equals the model whenever the
  snapshot has no level-0 file (always, unless ``write-only``).
- Merge-on-read of every file with its vector applied: always the model (a
  vector never hides a key's newest version).

With ``changelog-producer = lookup`` (drawn per run) the changelog of every new
snapshot is checked after every step: replayed row by row from the view it
continues, each ``-U``/``-D`` carries the key's current row, ``+I`` only a new
key, ``+U`` only after its ``-U``; the replay equals the model whenever level 0
is empty. A lifting writer's step (APPEND then COMPACT) has exactly the
model's changes of that step: per key written, ``+I`` new, ``-D`` removed,
``-U``/``+U`` otherwise (``changelog-producer.row-deduplicate`` off); a
compaction of a table without level-0 files has none.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, TableModel, make_rows, sorted_rows, to_table
from tests.property.test_pk_state_machine import _setup

from snaplake.catalog import FileSystemCatalog
from snaplake.mergetree.kv import VALUE_KIND, RowKind
from snaplake.mergetree.read import (
    BucketFiles,
    read_bucket,
    read_context,
    read_kv_file,
    without_deleted,
)
from snaplake.store.format.deletion_vector import read_deletion_vectors
from snaplake.store.format.index_file import DELETION_VECTORS_INDEX
from snaplake.store.format.snapshot import CommitKind, Snapshot
from snaplake.store.read.index_scan import read_index_entries
from snaplake.store.read.scan import FileStoreScan

_BASE = {
    "bucket": "2",
    "deletion-vectors.enabled": "true",
    "num-sorted-run.compaction-trigger": "3",
    "num-levels": "4",
    "snapshot.num-retained.min": "3",
    "snapshot.num-retained.max": "8",
    "snapshot.time-retained": "0 ms",
}


def _views(
    table: Any, snapshot: Snapshot
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """(Paimon's batch view, merge-on-read view, whether level 0 is empty) of ``snapshot``."""
    schema = table.schema_manager.schema(snapshot.schema_id)
    scan = FileStoreScan(
        file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager,
        snapshot=snapshot, only_real_buckets=True,
    )  # fmt: skip
    vectors: dict[tuple[bytes, int], dict[str, Any]] = {}
    for e in read_index_entries(table, snapshot, index_type=DELETION_VECTORS_INDEX):
        vectors[(e.partition, e.bucket)] = read_deletion_vectors(
            table.file_io, table.paths, e.index_file
        )
    ctx = read_context(table.file_io, schema)
    names = list(PK_SCHEMA.names)
    raw: list[pa.Table] = []
    merged: list[pa.Table] = []
    level0_empty = True
    kv = ctx.kv_schema(names)
    for split in scan.plan():
        dvs = vectors.get((split.partition, split.bucket), {})
        bucket = BucketFiles(split.files, split.paths, dvs)
        merged += list(read_bucket(ctx, bucket, names))
        for f, p in zip(split.files, split.paths, strict=True):
            if f.level == 0:
                level0_empty = False
                continue
            for t in without_deleted(read_kv_file(table.file_io, p, kv), dvs.get(f.file_name)):
                kinds = t.column(VALUE_KIND)
                keep = pc.or_(
                    pc.equal(kinds, RowKind.INSERT), pc.equal(kinds, RowKind.UPDATE_AFTER)
                )
                raw.append(t.filter(keep).select(names))
    empty = PK_SCHEMA.empty_table()
    raw_rows = sorted_rows(pa.concat_tables(raw).cast(PK_SCHEMA) if raw else empty)
    keys = [(r["month"], r["id"]) for r in raw_rows]
    assert len(keys) == len(set(keys)), "a key is live twice in Paimon's batch view"
    merged_rows = sorted_rows(pa.concat_tables(merged).cast(PK_SCHEMA) if merged else empty)
    return raw_rows, merged_rows, level0_empty


def _level0_empty(table: Any, snapshot: Snapshot) -> bool:
    scan = FileStoreScan(
        file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager,
        snapshot=snapshot, only_real_buckets=True,
    )  # fmt: skip
    return all(f.level > 0 for split in scan.plan() for f in split.files)


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[k] for k in PK_KEYS)


def _expected_changelog(
    before: dict[tuple[Any, ...], dict[str, Any]],
    after: dict[tuple[Any, ...], dict[str, Any]],
    keys: set[tuple[Any, ...]],
) -> list[tuple[str, dict[str, Any]]]:
    """The lookup changelog of a lift of ``keys``: Paimon's before/after images per key."""
    out: list[tuple[str, dict[str, Any]]] = []
    for k in keys:
        old, new = before.get(k), after.get(k)
        if old is None and new is not None:
            out.append(("+I", new))
        elif old is not None and new is None:
            out.append(("-D", old))
        elif old is not None and new is not None:
            out += [("-U", old), ("+U", new)]
    return out


def _canonical(rows: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, tuple[Any, ...]]]:
    return sorted((kind, tuple(r[c] for c in PK_SCHEMA.names)) for kind, r in rows)


class DeletionVectorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="snaplake-pk-dv-sm-")
        self.history: dict[int, list[dict[str, Any]]] = {}
        self.seed = 0

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    @initialize(
        engine=st.sampled_from(("deduplicate", "partial-update", "aggregation")),
        write_only=st.booleans(),
        producer=st.sampled_from(("none", "lookup")),
    )
    def create(self, engine: str, write_only: bool, producer: str) -> None:
        options, merge_model = _setup(engine)
        if write_only:
            options["write-only"] = "true"
        options["changelog-producer"] = producer
        self.engine = engine
        self.write_only = write_only
        self.producer = producer
        self.logged: dict[tuple[Any, ...], dict[str, Any]] = {}  # the changelog's replay
        self.logged_to = 0  # the last snapshot whose changelog was replayed
        self.step_keys: set[tuple[Any, ...]] = set()  # keys the step's write wrote
        self.table = FileSystemCatalog(self.dir).create_table(
            "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
            options={**_BASE, **options},
        )  # fmt: skip
        self.model = TableModel(merge_model)
        self.writer = self.table.new_write(commit_user="w")  # one writer, reused
        self.commit = self.table.new_commit(commit_user="w")
        self.ident = 0

    def _commit(self) -> None:
        self.ident += 1
        result = self.commit.commit(self.writer.prepare_commit(), commit_identifier=self.ident)
        self._record(result.snapshot_id)

    def _record(self, snapshot_id: int | None) -> None:
        if snapshot_id is not None:
            self.history[snapshot_id] = self.model.rows()

    def _rows(self, ids: list[int]) -> list[dict[str, Any]]:
        self.seed += 1
        return [make_rows(i, 1, seed=self.seed)[0] for i in ids]

    @rule(ids=st.lists(st.integers(0, 40), min_size=1, max_size=25), partial=st.booleans())
    def upsert(self, ids: list[int], partial: bool) -> None:
        rows = self._rows(ids)
        if partial and self.engine == "partial-update":
            for r in rows:
                r["price"] = None
        self.writer.write_arrow(to_table(rows))
        self.model.apply(rows)
        self.step_keys = {_key(r) for r in rows}
        self._commit()

    @rule(ids=st.lists(st.integers(0, 40), min_size=1, max_size=10))
    def delete(self, ids: list[int]) -> None:
        if self.engine == "aggregation":
            present = {k[1] for k in self.model.versions}
            ids = [i for i in ids if i in present]
            if not ids:
                return
            rows = self._rows(ids)
            kinds = ["-U"] * len(rows)
            self.writer.write_arrow(to_table(rows), row_kinds=kinds)
            self.model.apply(rows, kinds)
        else:
            rows = self._rows(ids)
            self.writer.delete_arrow(to_table(rows).select(PK_KEYS))
            deletes = [{**dict.fromkeys(PK_SCHEMA.names), "month": r["month"], "id": r["id"]}
                       for r in rows]  # fmt: skip
            self.model.apply(deletes, ["-D"] * len(rows))
        self.step_keys = {_key(r) for r in rows}
        self._commit()

    @rule(full=st.booleans())
    def compact(self, full: bool) -> None:
        result = self.table.compact(full=full)
        self._record(result.snapshot_id)

    @rule()
    def expire(self) -> None:
        self.table.expire_snapshots()

    @precondition(lambda self: bool(self.history))
    @rule(data=st.data())
    def read_old_snapshot(self, data: Any) -> None:
        retained = {s.id: s for s in self.table.snapshots()}
        ids = sorted(i for i in self.history if i in retained)
        if not ids:
            return
        sid = data.draw(st.sampled_from(ids))
        raw, merged, level0_empty = _views(self.table, retained[sid])
        assert merged == self.history[sid]
        if level0_empty:
            assert raw == self.history[sid]

    @invariant()
    def latest_equals_model(self) -> None:
        if not hasattr(self, "table"):
            return
        latest = self.table.latest_snapshot()
        if latest is None:
            return
        raw, merged, level0_empty = _views(self.table, latest)
        assert merged == self.model.rows()
        if level0_empty:
            assert raw == self.model.rows()

    @invariant()
    def changelog_of_each_new_snapshot_is_the_models(self) -> None:
        if getattr(self, "producer", None) != "lookup":
            return
        keys, self.step_keys = self.step_keys, set()
        table = self.table
        latest = table.latest_snapshot()
        if latest is None or latest.id == self.logged_to:
            return
        earliest = table.snapshot_manager.earliest_snapshot_id()
        assert earliest is not None and earliest <= self.logged_to + 1, "checked every step"
        before = dict(self.logged)
        step: list[tuple[str, dict[str, Any]]] = []
        for sid in range(self.logged_to + 1, latest.id + 1):
            got = table.changes(sid, sid, mode="changelog").read_all()
            kinds = got.column("_row_kind").to_pylist()
            rows = got.select(PK_SCHEMA.names).cast(PK_SCHEMA).to_pylist()
            if table.snapshot(sid).commit_kind == CommitKind.APPEND:
                assert not rows, "lookup changelog comes with the COMPACT snapshot"
            minus: set[tuple[Any, ...]] = set()
            for kind, row in zip(kinds, rows, strict=True):
                k = _key(row)
                if kind in ("-U", "-D"):
                    assert self.logged.get(k) == row, (sid, kind, row)
                    del self.logged[k]
                    if kind == "-U":
                        minus.add(k)
                elif kind == "+I":
                    assert k not in self.logged, (sid, kind, row)
                    self.logged[k] = row
                else:
                    assert kind == "+U" and k in minus, (sid, kind, row)
                    minus.discard(k)
                    self.logged[k] = row
                step.append((kind, row))
            assert not minus, "every -U is followed by its +U"
        self.logged_to = latest.id
        view = {_key(r): r for r in self.model.rows()}
        if _level0_empty(table, latest):
            assert self.logged == view
        if not self.write_only:  # the step's lift: exactly the model's changes of the step
            assert _canonical(step) == _canonical(_expected_changelog(before, view, keys))


def test_deletion_vector_state_machine_short() -> None:
    """Default-profile run: short interleavings of every engine, lifting or write-only."""
    DeletionVectorMachine.TestCase.settings = settings(
        max_examples=15, stateful_step_count=14, deadline=None
    )
    DeletionVectorMachine.TestCase().runTest()


@pytest.mark.slow
def test_deletion_vector_state_machine_long() -> None:
    """Longer interleavings (``-m slow``)."""
    DeletionVectorMachine.TestCase.settings = settings(
        max_examples=60, stateful_step_count=30, deadline=None
    )
    DeletionVectorMachine.TestCase().runTest()
