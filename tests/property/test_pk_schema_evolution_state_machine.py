"""Stateful model test of primary-key tables under schema evolution, per merge engine.

Alters (add, rename, drop, widen) interleave with upserts, deletes, minor and full
compactions, snapshot expiries, writers reopened (a writer opened before an alter keeps
writing its schema and commits after it) and reads of older snapshots. The model keeps
every version of every key as ``{field id: value}`` and folds them, on read, in the
read schema: renamed columns by id, widened values as they are, columns added since
NULL in older versions, dropped columns gone. After every step the latest merged view
equals the model in the latest schema; retained older snapshots read in their own
schema equal the model as it was then.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from tests.merge_model import DELETE, INSERT, MergeModel, Version, visible
from tests.pk_helpers import ENGINES

from snaplake import SchemaChange
from snaplake.catalog import FileSystemCatalog

ARROW = {
    "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(), "float32": pa.float32(),
    "float64": pa.float64(), "string": pa.string(), "bool": pa.bool_(),
}  # fmt: skip
WIDER = {"int16": ["int32", "int64"], "int32": ["int64"], "float32": ["float64"]}
KEYS = ("month", "id")
_BASE = {
    "bucket": "2",
    "num-sorted-run.compaction-trigger": "3",
    "snapshot.num-retained.min": "3",
    "snapshot.num-retained.max": "8",
    "snapshot.time-retained": "0 ms",
}
Column = tuple[int, str, str]  # field id, name, kind
_PRICE = 4  # field id of "price" (max, ignore-retract in aggregation tables)
_KINDS = {"+I": INSERT, "-U": 1, "+U": 2, "-D": DELETE}
_names = (f"c{i}" for i in itertools.count())


def _function(engine: str, name: str, kind: str) -> str | None:
    """The aggregate function of a column (retractions commute with incremental folding)."""
    if engine != "aggregation" or name in KEYS:
        return None
    if name == "price":
        return "max"
    return "sum" if kind.startswith("int") else "last_value"


class PrimaryKeyEvolutionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="snaplake-pk-se-sm-")
        self.catalog = FileSystemCatalog(self.dir)
        self.schemas: dict[int, list[Column]] = {
            0: [(0, "month", "int32"), (1, "id", "int64"), (2, "name", "string"),
                (3, "qty", "int32"), (4, "price", "float32"), (5, "ok", "bool")]
        }  # fmt: skip
        self.versions: dict[tuple[int, int], list[tuple[int, dict[int, Any]]]] = {}
        self.history: dict[int, tuple[int, dict[tuple[int, int], list[Any]]]] = {}
        self.functions: dict[int, str] = {}  # aggregation: field id -> function (follows renames)
        self.seed = 0
        self.ident = 0

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # -------------------------------------------------------------------- helpers
    @property
    def schema_id(self) -> int:
        return max(self.schemas)

    def value_columns(self) -> list[Column]:
        return [c for c in self.schemas[self.schema_id] if c[1] not in KEYS]

    def expected(self, schema_id: int, versions: dict[tuple[int, int], list[Any]]) -> list[Any]:
        columns = self.schemas[schema_id]
        names = [n for _, n, _ in columns]
        functions = {n: self.functions[fid] for fid, n, _ in columns if fid in self.functions}
        model = MergeModel(
            self.engine, names,
            ignore_delete=self.engine == "first-row",
            remove_record_on_delete=self.engine == "partial-update",
            functions={**functions, "month": "primary_key", "id": "primary_key"},
            ignore_retract=frozenset(n for fid, n, _ in columns if fid == _PRICE),
            int_bits={n: 64 for _, n, k in columns if k.startswith("int")},
        )  # fmt: skip
        out = []
        for key in sorted(versions):
            by_name: list[Version] = [
                (kind, {n: row.get(fid) for fid, n, _ in columns}) for kind, row in versions[key]
            ]
            row = visible(model.fold(by_name))
            if row is not None:
                out.append(row)
        return out

    def read(self, snapshot_id: int | None = None) -> list[Any]:
        data = self.table.to_arrow(snapshot_id=snapshot_id)
        rows: list[Any] = data.sort_by([(k, "ascending") for k in KEYS]).to_pylist()
        return rows

    def record(self, snapshot_id: int | None) -> None:
        if snapshot_id is None or snapshot_id in self.history:  # nothing new was committed
            return
        snap = self.table.snapshot(snapshot_id)
        assert snap.schema_id == self.schema_id, "a commit records the latest schema"
        self.history[snapshot_id] = (
            snap.schema_id,
            {k: list(v) for k, v in self.versions.items()},
        )

    def writer_columns(self) -> list[Column]:
        return self.schemas[self.writer.schema.id]

    def make_rows(self, ids: list[int], *, partial: bool = False) -> list[dict[int, Any]]:
        self.seed += 1
        rows = []
        for i in ids:
            h = (i * 2654435761 + self.seed * 97) % 1000
            row: dict[int, Any] = {}
            for fid, name, kind in self.writer_columns():
                if name == "month":
                    value: Any = i % 3 + 1
                elif name == "id":
                    value = i
                elif (h + fid) % 7 == 0 or (partial and (h + fid) % 2):
                    value = None
                elif kind.startswith("int"):
                    value = (h + fid) % 9
                elif kind.startswith("float"):
                    value = ((h + fid) % 100) / 4.0
                elif kind == "bool":
                    value = (h + fid) % 2 == 0
                else:
                    value = f"s{(h + fid) % 50}"
                row[fid] = value
            rows.append(row)
        return rows

    def write(self, rows: list[dict[int, Any]], kinds: list[str] | None = None) -> None:
        columns = self.writer_columns()
        data = pa.table(
            {n: pa.array([r.get(fid) for r in rows], ARROW[k]) for fid, n, k in columns}
        ).cast(self.writer.schema.arrow_schema)
        self.writer.write_arrow(data, row_kinds=kinds)
        for i, row in enumerate(rows):
            kind = _KINDS[kinds[i]] if kinds is not None else INSERT
            if self.engine == "first-row" and kind in (1, DELETE):
                continue
            self.versions.setdefault((row[0], row[1]), []).append((kind, row))
        self.ident += 1
        result = self.commit.commit(self.writer.prepare_commit(), commit_identifier=self.ident)
        self.record(result.snapshot_id)

    def alter(self, changes: list[Any], columns: list[Column]) -> None:
        new = self.catalog.alter_table("db.t", changes)
        assert new is not None and new.id == self.schema_id + 1
        self.schemas[new.id] = columns
        assert [(f["id"], f["name"]) for f in new.fields] == [(c[0], c[1]) for c in columns]

    # ---------------------------------------------------------------------- rules
    @initialize(engine=st.sampled_from(ENGINES))
    def create(self, engine: str) -> None:
        self.engine = engine
        options = {**_BASE, "merge-engine": engine}
        if engine == "partial-update":
            options["partial-update.remove-record-on-delete"] = "true"
        if engine == "first-row":
            options["ignore-delete"] = "true"
        for fid, name, kind in self.schemas[0]:
            if (func := _function(engine, name, kind)) is not None:
                options[f"fields.{name}.aggregate-function"] = func
                self.functions[fid] = func
        if engine == "aggregation":
            options["fields.price.ignore-retract"] = "true"
        schema = pa.schema(
            [pa.field(n, ARROW[k], nullable=n not in KEYS) for _, n, k in self.schemas[0]]
        )
        self.table = self.catalog.create_table(
            "db.t", schema=schema, partition_keys=["month"], primary_keys=list(KEYS),
            options=options,
        )  # fmt: skip
        self.commit = self.table.new_commit(commit_user="w")
        self.reopen_writer()

    @rule()
    def reopen_writer(self) -> None:
        """A new writer in the latest schema (the old one may have been opened before alters)."""
        self.writer = self.table.new_write(commit_user="w")

    @rule(ids=st.lists(st.integers(0, 30), min_size=1, max_size=20), partial=st.booleans())
    def upsert(self, ids: list[int], partial: bool) -> None:
        self.write(self.make_rows(ids, partial=partial and self.engine == "partial-update"))

    @rule(ids=st.lists(st.integers(0, 30), min_size=1, max_size=8))
    def delete(self, ids: list[int]) -> None:
        if self.engine == "aggregation":
            # retract existing keys only (a retraction of a key no version holds
            # would be dropped with the deletes at the top level, as in Paimon)
            present = {k[1] for k in self.versions}
            ids = [i for i in ids if i in present]
            if ids:
                self.write(self.make_rows(ids), ["-U"] * len(ids))
            return
        rows = [{fid: r.get(fid) if fid in (0, 1) else None for fid, _, _ in
                 self.writer_columns()} for r in self.make_rows(ids)]  # fmt: skip
        self.write(rows, ["-D"] * len(rows))

    @rule(data=st.data())
    def alter_table(self, data: st.DataObject) -> None:
        """One alter: add, rename, drop or widen a column (one rule, so writes stay frequent)."""
        kinds = ["add"]
        if self.value_columns():
            kinds.append("rename")
        if len(self.value_columns()) > 1:
            kinds.append("drop")
        if any(c[2] in WIDER for c in self.value_columns()):
            kinds.append("widen")
        kind = data.draw(st.sampled_from(kinds))
        if kind == "add":
            self.add_column(
                data.draw(st.sampled_from(["int16", "string"])), data.draw(st.booleans())
            )
        else:
            getattr(self, f"{kind}_column")(data)

    def add_column(self, kind: str, first: bool) -> None:
        name = next(_names)
        fid = max(c[0] for cols in self.schemas.values() for c in cols) + 1
        changes: list[Any] = [SchemaChange.add_column(name, ARROW[kind], first=first)]
        if (func := _function(self.engine, name, kind)) is not None:
            changes.append(SchemaChange.set_option(f"fields.{name}.aggregate-function", func))
            self.functions[fid] = func
        columns = self.schemas[self.schema_id]
        column = (fid, name, kind)
        self.alter(changes, [column, *columns] if first else [*columns, column])

    def rename_column(self, data: st.DataObject) -> None:
        fid, old, _ = data.draw(st.sampled_from(self.value_columns()))
        new = next(_names)
        columns = [(f, new if f == fid else n, k) for f, n, k in self.schemas[self.schema_id]]
        self.alter([SchemaChange.rename_column(old, new)], columns)
        options = self.table.options  # options follow the column
        assert not any(k.startswith(f"fields.{old}.") for k in options)

    def drop_column(self, data: st.DataObject) -> None:
        fid, name, _ = data.draw(st.sampled_from(self.value_columns()))
        # options naming the column go in the same alter (a drop alone is refused)
        changes: list[Any] = [SchemaChange.remove_option(k) for k in self.table.options
                   if k.startswith(f"fields.{name}.")]  # fmt: skip
        changes.append(SchemaChange.drop_column(name))
        self.alter(changes, [c for c in self.schemas[self.schema_id] if c[0] != fid])

    def widen_column(self, data: st.DataObject) -> None:
        fid, name, kind = data.draw(
            st.sampled_from([c for c in self.value_columns() if c[2] in WIDER])
        )
        to = data.draw(st.sampled_from(WIDER[kind]))
        columns = [(f, n, to if f == fid else k) for f, n, k in self.schemas[self.schema_id]]
        self.alter([SchemaChange.update_column_type(name, ARROW[to])], columns)

    @rule(full=st.booleans())
    def compact(self, full: bool) -> None:
        inputs = {f.file_name for s in self.table.new_scan().plan() for f in s.files}
        result = self.table.compact(full=full)
        self.record(result.snapshot_id)
        if result.snapshot_id is not None:  # rewritten files are in the current schema
            files = [f for s in self.table.new_scan().plan() for f in s.files]
            written = {f.schema_id for f in files if f.file_name not in inputs}
            assert written <= {self.schema_id}

    @rule()
    def expire(self) -> None:
        self.table.expire_snapshots()
        retained = {s.id for s in self.table.snapshots()}
        self.history = {k: v for k, v in self.history.items() if k in retained}

    @precondition(lambda self: bool(self.history))
    @rule(data=st.data())
    def read_old_snapshot(self, data: Any) -> None:
        sid = data.draw(st.sampled_from(sorted(self.history)))
        schema_id, versions = self.history[sid]
        got = self.table.to_arrow(snapshot_id=sid)
        assert got.schema.names == [n for _, n, _ in self.schemas[schema_id]]
        assert self.read(sid) == self.expected(schema_id, versions)

    @invariant()
    def latest_equals_model(self) -> None:
        if hasattr(self, "table"):
            assert self.table.schema_id == self.schema_id
            assert self.read() == self.expected(self.schema_id, self.versions)


def test_primary_key_schema_evolution_state_machine_short() -> None:
    """Default-profile run: short interleavings of every engine."""
    PrimaryKeyEvolutionMachine.TestCase.settings = settings(
        max_examples=25, stateful_step_count=25, deadline=None
    )
    PrimaryKeyEvolutionMachine.TestCase().runTest()


@pytest.mark.slow
def test_primary_key_schema_evolution_state_machine_long() -> None:
    """Longer interleavings (``-m slow``)."""
    PrimaryKeyEvolutionMachine.TestCase.settings = settings(
        max_examples=80, stateful_step_count=40, deadline=None
    )
    PrimaryKeyEvolutionMachine.TestCase().runTest()
