"""Stateful model test: alters interleaved with appends, compactions, expiries and time travel.

The model keeps every row as ``{field_id: logical value}`` (written under some
schema) and every schema as ``[(field_id, name, type)]``; a snapshot is the set
of row ids it holds plus the schema it was committed with. After every step,
every retained snapshot reads back, in its own schema (time travel) and the
latest in the latest schema, exactly as the model says: renamed columns by id,
widened values cast, added columns NULL in older rows, dropped columns gone;
a filter on a value column agrees too (stats pruning across schemas).
"""

from __future__ import annotations

import itertools
import shutil
import tempfile

import pyarrow as pa
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from tests.helpers import write_and_commit

from snaplake import SchemaChange
from snaplake.catalog import FileSystemCatalog
from snaplake.store.format.decoded_cache import metadata_cache

OPTIONS = {
    "snapshot.num-retained.min": "2",
    "snapshot.num-retained.max": "5",
    "snapshot.time-retained": "0 ms",
    "compaction.min.file-num": "2",
}
ARROW = {
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "float32": pa.float32(), "float64": pa.float64(), "string": pa.string(),
}  # fmt: skip
WIDER = {
    "int8": ["int16", "int32", "int64", "float32", "float64"],
    "int16": ["int32", "int64", "float32", "float64"],
    "int32": ["int64", "float64"],
    "float32": ["float64"],
}
Column = tuple[int, str, str]  # field id, name, type

_names = (f"c{i}" for i in itertools.count())


def _value(kind: str, logical: int | str | None) -> object:
    if logical is None:
        return None
    if kind == "string":
        return str(logical)
    return float(logical) if kind.startswith("float") else logical


def _same(got: pa.Table, want: pa.Table) -> None:
    """Same column names and types, same rows (by id); nullability aside."""
    assert [(f.name, f.type) for f in got.schema] == [(f.name, f.type) for f in want.schema]
    assert got.sort_by("id").to_pylist() == want.to_pylist()


class SchemaEvolutionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="snaplake-se-sm-")
        self.catalog = FileSystemCatalog(self.dir)
        schema = pa.schema(
            [pa.field("id", pa.int64(), nullable=False), ("month", pa.int32()),
             ("v", pa.int8()), ("s", pa.string())]
        )  # fmt: skip
        self.table = self.catalog.create_table(
            "db.t", schema=schema, partition_keys=["month"], options=OPTIONS
        )
        self.schemas: dict[int, list[Column]] = {
            0: [(0, "id", "int64"), (1, "month", "int32"), (2, "v", "int8"), (3, "s", "string")]
        }
        self.rows: dict[int, dict[int, int | str]] = {}  # row id -> {field id: logical value}
        self.history: dict[int, tuple[int, frozenset[int]]] = {}  # snapshot -> (schema, rows)
        self.next_row = 0

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # -------------------------------------------------------------------- helpers
    @property
    def schema_id(self) -> int:
        return max(self.schemas)

    @property
    def columns(self) -> list[Column]:
        return self.schemas[self.schema_id]

    def value_columns(self) -> list[Column]:
        return [c for c in self.columns if c[1] not in ("id", "month")]

    def latest_rows(self) -> frozenset[int]:
        return self.history[max(self.history)][1] if self.history else frozenset()

    def record(self, snapshot_id: int | None, ids: frozenset[int]) -> None:
        if snapshot_id is None or snapshot_id in self.history:
            return
        snap = self.table.snapshot(snapshot_id)
        assert snap.schema_id == self.schema_id, "a commit records the latest schema"
        self.history[snapshot_id] = (snap.schema_id, ids)

    def expected(self, columns: list[Column], ids: frozenset[int]) -> pa.Table:
        data = {
            name: pa.array([_value(kind, self.rows[r].get(fid)) for r in sorted(ids)], ARROW[kind])
            for fid, name, kind in columns
        }
        return pa.table(data)

    def alter(self, changes: list[SchemaChange], columns: list[Column]) -> None:
        new = self.catalog.alter_table("db.t", changes)
        assert new is not None
        assert new.id == self.schema_id + 1
        self.schemas[new.id] = columns
        assert [(f["id"], f["name"]) for f in new.fields] == [(c[0], c[1]) for c in columns]

    # ---------------------------------------------------------------------- rules
    @initialize()
    def first_append(self) -> None:
        self.append(4)

    @rule(n=st.integers(min_value=1, max_value=8))
    def append(self, n: int) -> None:
        ids = range(self.next_row, self.next_row + n)
        self.next_row += n
        for r in ids:
            self.rows[r] = {
                fid: (r if name == "id" else 1 + r % 2 if name == "month"
                      else f"s{r}.{fid}" if kind == "string" else (r * 7 + fid) % 100)
                for fid, name, kind in self.columns
            }  # fmt: skip
        result = write_and_commit(
            self.table, self.expected(self.columns, frozenset(ids)), commit_user="writer"
        )
        self.record(result.snapshot_id, self.latest_rows() | frozenset(ids))

    @rule(kind=st.sampled_from(["int8", "int16", "int32", "float32", "string"]),
          first=st.booleans())  # fmt: skip
    def add_column(self, kind: str, first: bool) -> None:
        name = next(_names)
        fid = max(max(c[0] for c in cols) for cols in self.schemas.values()) + 1
        change = SchemaChange.add_column(name, ARROW[kind], first=first)
        column = (fid, name, kind)
        self.alter([change], [column, *self.columns] if first else [*self.columns, column])

    @precondition(lambda self: bool(self.value_columns()))
    @rule(data=st.data())
    def rename_column(self, data: st.DataObject) -> None:
        fid, old, _ = data.draw(st.sampled_from(self.value_columns()))
        new = next(_names)
        columns = [(f, new if f == fid else n, k) for f, n, k in self.columns]
        self.alter([SchemaChange.rename_column(old, new)], columns)

    @precondition(lambda self: len(self.value_columns()) > 1)
    @rule(data=st.data())
    def drop_column(self, data: st.DataObject) -> None:
        fid, name, _ = data.draw(st.sampled_from(self.value_columns()))
        self.alter([SchemaChange.drop_column(name)], [c for c in self.columns if c[0] != fid])

    @precondition(lambda self: any(c[2] in WIDER for c in self.value_columns()))
    @rule(data=st.data())
    def widen_column(self, data: st.DataObject) -> None:
        fid, name, kind = data.draw(st.sampled_from([c for c in self.value_columns()
                                                     if c[2] in WIDER]))  # fmt: skip
        to = data.draw(st.sampled_from(WIDER[kind]))
        columns = [(f, n, to if f == fid else k) for f, n, k in self.columns]
        self.alter([SchemaChange.update_column_type(name, ARROW[to])], columns)

    @rule(keep=st.integers(min_value=1, max_value=4))
    def set_retention(self, keep: int) -> None:
        self.alter([SchemaChange.set_option("snapshot.num-retained.min", str(keep))],
                   list(self.columns))  # fmt: skip

    @rule()
    def compact(self) -> None:
        result = self.table.compact()
        self.record(result.snapshot_id, self.latest_rows())
        if result.snapshot_id is not None:  # outputs are written in the current schema
            outputs = {p.rsplit("/", 1)[-1] for p in result.output_files}
            files = [f for s in self.table.new_scan().plan() for f in s.files]
            assert {f.schema_id for f in files if f.file_name in outputs} == {self.schema_id}

    @rule()
    def expire(self) -> None:
        latest = max(self.history) if self.history else None
        self.table.expire_snapshots()
        retained = {s.id for s in self.table.snapshots()}
        assert latest is None or latest in retained
        keep_min = int(self.table.options.get("snapshot.num-retained.min", "2"))
        assert len(retained) >= min(keep_min, len(self.history))  # options in effect
        self.history = {k: v for k, v in self.history.items() if k in retained}

    # ----------------------------------------------------------------- invariants
    @invariant()
    def every_snapshot_reads_in_its_schema(self) -> None:
        metadata_cache.clear()
        assert self.table.schema_id == self.schema_id
        assert {s.id for s in self.table.snapshots()} == set(self.history)
        _same(self.table.to_arrow(), self.expected(self.columns, self.latest_rows()))
        for sid, (schema_id, ids) in self.history.items():
            _same(self.table.to_arrow(snapshot_id=sid), self.expected(self.schemas[schema_id], ids))
        numeric = [c for c in self.value_columns() if c[2] != "string"]
        if numeric:
            fid, name, kind = numeric[0]
            got = self.table.to_arrow(filter=(name, ">=", _value(kind, 50)), columns=["id"])
            want = {r for r in self.latest_rows() if int(self.rows[r].get(fid, -1)) >= 50}
            assert set(got.column("id").to_pylist()) == want


def test_schema_evolution_state_machine_short() -> None:
    """Default-profile run: a handful of short interleavings."""
    SchemaEvolutionMachine.TestCase.settings = settings(
        max_examples=8, stateful_step_count=15, deadline=None
    )
    SchemaEvolutionMachine.TestCase().runTest()


@pytest.mark.slow
def test_schema_evolution_state_machine_long() -> None:
    """Longer interleavings (``-m slow``)."""
    SchemaEvolutionMachine.TestCase.settings = settings(
        max_examples=40, stateful_step_count=40, deadline=None
    )
    SchemaEvolutionMachine.TestCase().runTest()
