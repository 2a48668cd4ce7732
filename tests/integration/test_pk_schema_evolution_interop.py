"""Evolved primary-key tables across engines, on real files.

* snaplake alters a primary-key table of each merge engine (add, rename, widen, drop,
  add again) and upserts after each change; pypaimon 2.1.0 reads every step exactly as
  snaplake does, time travel and compaction included.
* pypaimon alters its own primary-key table (a primary-key rename, which snaplake
  itself refuses but newer Paimon allows; nested ROW field changes); snaplake reads,
  upserts into and compacts it, and pypaimon reads it again.
* Java Paimon 0.9 (the reference reader) reads the evolved snaplake tables, append and
  primary-key, latest and time travel. It cannot read files whose nested ROW fields
  changed since (newer Paimon, pypaimon and snaplake map them by nested field id); after
  snaplake's full compaction rewrote them in the current schema, it reads them too.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.helpers import assert_java_rows, assert_same_rows, write_and_commit
from tests.oracle import PaimonOracle, requires_paimon
from tests.oracle.java_paimon import (
    JavaPaimon,
    JavaPaimonError,
    requires_java_paimon,
)
from tests.pk_helpers import ENGINES

import snaplake
from snaplake import SchemaChange

pytestmark = [pytest.mark.integration, requires_paimon]

KEYS = ["month", "id"]
SCHEMA0 = pa.schema(
    [
        pa.field("month", pa.int32(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("qty", pa.int32()),
        pa.field("price", pa.float32()),
        pa.field("note", pa.string()),
        pa.field("ok", pa.bool_()),
    ]
)
OPTIONS = {
    "deduplicate": {},
    "partial-update": {},
    "first-row": {"ignore-delete": "true"},
    "aggregation": {"fields.qty.aggregate-function": "sum",
                    "fields.price.aggregate-function": "max",
                    "fields.ok.aggregate-function": "bool_or"},
}  # fmt: skip
STEPS: list[tuple[str, list[SchemaChange]]] = [
    ("add", [SchemaChange.add_column("tag", pa.string(), comment="new")]),
    ("rename", [SchemaChange.rename_column("name", "label")]),
    ("widen", [SchemaChange.update_column_type("qty", pa.int64()),
               SchemaChange.update_column_type("price", pa.float64())]),
    ("drop", [SchemaChange.drop_column("note")]),
    ("add-again", [SchemaChange.add_column("note", pa.string(), after="label")]),
]  # fmt: skip


def _rows(schema: pa.Schema, ids: range, seed: int, *, partial: bool = False) -> pa.Table:
    """Rows of ``schema`` for ``ids``; ``partial`` leaves every other value column NULL."""
    gen = {
        "month": lambda i: 1 + i % 2,
        "id": lambda i: i,
        "name": lambda i: f"n{i}.{seed}",
        "label": lambda i: f"l{i}.{seed}",
        "qty": lambda i: (i + seed) % 7 + (2**31 if seed > 2 else 0),
        "price": lambda i: float(i + seed) / 2,
        "note": lambda i: f"note{seed}" if i % 3 else None,
        "ok": lambda i: (i + seed) % 2 == 0,
        "tag": lambda i: f"t{seed}" if i % 2 else None,
    }
    columns = {}
    for k, f in enumerate(schema):
        values = [gen[f.name](i) for i in ids]
        if partial and f.name not in KEYS and (k + seed) % 2:
            values = [None] * len(values)
        if f.type == pa.int32() and f.name == "qty":
            values = [None if v is None else v % 2**31 for v in values]
        columns[f.name] = pa.array(values, f.type)
    return pa.table(columns, schema=schema)


def _evolve(catalog: snaplake.FileSystemCatalog, name: str, engine: str) -> Iterator[str]:
    """Create and upsert, then each step: alter and upsert (new keys and existing ones).

    Yields ``"created"`` and then each step's name, after its upsert.
    """
    table = catalog.create_table(
        name, schema=SCHEMA0, partition_keys=["month"], primary_keys=KEYS,
        options={"bucket": "2", "merge-engine": engine, **OPTIONS[engine]},
    )  # fmt: skip
    partial = engine == "partial-update"
    write_and_commit(table, _rows(SCHEMA0, range(40), 0), commit_user="s", commit_identifier=1)
    write_and_commit(
        table,
        _rows(SCHEMA0, range(20, 50), 1, partial=partial),
        commit_user="s",
        commit_identifier=2,
    )
    yield "created"
    for ident, (step, changes) in enumerate(STEPS, start=3):
        catalog.alter_table(name, changes)
        schema = table.arrow_schema.remove_metadata()
        data = _rows(schema, range(ident * 5, ident * 5 + 30), ident, partial=partial)
        write_and_commit(table, data, commit_user="s", commit_identifier=ident)
        yield step


@pytest.fixture(scope="module")
def evolved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pk-evolved") / "wh"


@pytest.mark.parametrize("engine", ENGINES)
def test_pypaimon_reads_evolved_snaplake_primary_key_tables(evolved: Path, engine: str) -> None:
    catalog = snaplake.FileSystemCatalog(str(evolved))
    name = f"db.{engine.replace('-', '_')}"
    oracle = PaimonOracle(evolved)
    for step in _evolve(catalog, name, engine):
        table = catalog.get_table(name)
        ours = table.to_arrow()
        assert ours.num_rows >= 50, step
        assert_same_rows(ours, oracle.read(name), by=("month", "id"), same_columns=True)
    # time travel: the snapshot before the first alter, in schema 0, on both sides
    old = table.to_arrow(snapshot_id=2)
    assert old.schema.names == SCHEMA0.names
    assert_same_rows(old, oracle.read(name, snapshot_id=2), by=("month", "id"), same_columns=True)
    # full compaction rewrites in the current schema; pypaimon still agrees
    expected = table.to_arrow()
    table.compact(full=True)
    assert_same_rows(table.to_arrow(), expected, by=("month", "id"), same_columns=True)
    assert_same_rows(expected, oracle.read(name), by=("month", "id"), same_columns=True)


def test_snaplake_reads_upserts_and_compacts_a_primary_key_table_pypaimon_altered(
    tmp_path: Path,
) -> None:
    wh = tmp_path / "wh"
    oracle = PaimonOracle(wh)
    addr = pa.struct([("city", pa.string()), ("zip", pa.int32())])
    schema0 = SCHEMA0.append(pa.field("addr", addr))

    def rows(schema: pa.Schema, ids: range, seed: int) -> pa.Table:
        base = _rows(pa.schema([f for f in schema if f.name != "addr"]), ids, seed)
        values = [{n: (f"c{i}" if "c" in n or "town" in n else i) for n in
                   [f.name for f in schema.field("addr").type]} for i in ids]  # fmt: skip
        return base.append_column(schema.field("addr"), pa.array(values, schema.field("addr").type))

    oracle.create_table("db.p", schema0, partition_keys=["month"], primary_keys=KEYS,
                        options={"bucket": "2", "metadata.stats-mode": "full"})  # fmt: skip
    oracle.write("db.p", rows(schema0, range(30), 0))
    oracle.write("db.p", rows(schema0, range(20, 40), 1))
    changes: list[dict[str, Any]] = [
        {"kind": "add_column", "name": "tag", "type": "STRING"},
        {"kind": "rename_column", "name": "name", "new_name": "label"},
        {"kind": "rename_column", "name": "id", "new_name": "key"},  # a primary key
        {"kind": "update_column_type", "name": "qty", "type": "BIGINT"},
        {"kind": "drop_column", "name": "note"},
        {"kind": "rename_column", "name": ["addr", "city"], "new_name": "town"},
        {"kind": "add_column", "name": ["addr", "city"], "type": "STRING"},
        {"kind": "update_column_type", "name": ["addr", "zip"], "type": "BIGINT"},
    ]
    new = oracle.alter_table("db.p", changes)
    assert new["primaryKeys"] == ["month", "key"]
    table = snaplake.FileSystemCatalog(str(wh)).get_table("db.p")
    assert table.primary_keys == ["month", "key"]
    evolved = table.arrow_schema.remove_metadata()
    # pypaimon writes in its new schema, then snaplake reads everything by field id
    renamed = rows(schema0, range(35, 45), 2).rename_columns(
        ["month", "key", "label", "qty", "price", "note", "ok", "addr"]
    )
    pp_rows = pa.table({f.name: renamed.column(f.name).cast(f.type) if f.name in
                        renamed.column_names and f.name != "addr" else pa.nulls(10, f.type)
                        for f in evolved}, schema=evolved)  # fmt: skip
    oracle.write("db.p", pp_rows)
    ours = table.to_arrow()
    assert_same_rows(ours, oracle.read("db.p"), by=("month", "key"), same_columns=True)
    assert ours.num_rows == 45
    got = {r["key"]: r for r in ours.to_pylist()}
    assert got[0]["addr"] == {"town": "c0", "zip": 0, "city": None}
    assert got[0]["label"] == "n0.0" and got[25]["label"] == "n25.1" and got[0]["tag"] is None
    # snaplake upserts in pypaimon's schema (keys _KEY_key), then compacts every schema
    mine = pp_rows.slice(0, 5).set_column(
        evolved.get_field_index("tag"), evolved.field("tag"), pa.array(["s"] * 5)
    )
    write_and_commit(table, mine, commit_user="s", commit_identifier=7)
    ours = table.to_arrow()
    assert sorted(r["key"] for r in ours.to_pylist() if r["tag"] == "s") == list(range(35, 40))
    assert_same_rows(ours, oracle.read("db.p"), by=("month", "key"), same_columns=True)
    java = shutil.which("java") is not None
    if java:
        # Java 0.9 cannot read files whose ROW fields changed since (newer Paimon maps
        # them by nested field id, as pypaimon and snaplake do): a limitation of 0.9.
        with pytest.raises(JavaPaimonError, match="column type evolution in atomic data type"):
            JavaPaimon().read(table.root)
    result = table.compact(full=True)
    assert result.snapshot_id is not None
    assert {f.schema_id for s in table.new_scan().plan() for f in s.files} == {1}
    assert_same_rows(table.to_arrow(), ours, by=("month", "key"), same_columns=True)
    assert_same_rows(ours, oracle.read("db.p"), by=("month", "key"), same_columns=True)
    if java:  # every file now in the current schema: Java 0.9 reads the same rows
        read = JavaPaimon().read(table.root)
        assert read.names == tuple(evolved.names)
        assert_java_rows(read.rows, ours)
    # time travel to pypaimon's first snapshot: schema 0 on both sides
    assert_same_rows(
        table.to_arrow(snapshot_id=1),
        oracle.read("db.p", snapshot_id=1),
        by=("month", "id"),
        same_columns=True,
    )


@requires_java_paimon
def test_java_paimon_reads_evolved_snaplake_tables(evolved: Path, tmp_path: Path) -> None:
    """Java 0.9 reads the evolved primary-key tables (latest and schema-0 snapshot) and an
    evolved append table exactly as snaplake does."""
    catalog = snaplake.FileSystemCatalog(str(evolved))
    tables = []
    for engine in ENGINES:  # the pypaimon test built (and compacted) them, or build them here
        name = f"db.{engine.replace('-', '_')}"
        if not catalog.table_exists(name):
            for _ in _evolve(catalog, name, engine):
                pass
        tables.append(catalog.get_table(name))
    append = snaplake.FileSystemCatalog(str(tmp_path)).create_table(
        "db.a", schema=SCHEMA0, partition_keys=["month"], options={"bucket": "2",
                                                                    "bucket-key": "id"}
    )  # fmt: skip
    write_and_commit(append, _rows(SCHEMA0, range(30), 0), commit_user="s", commit_identifier=1)
    for ident, (_, changes) in enumerate(STEPS, start=2):
        snaplake.FileSystemCatalog(str(tmp_path)).alter_table("db.a", changes)
        write_and_commit(append, _rows(append.arrow_schema.remove_metadata(), range(ident * 10,
                                                                           ident * 10 + 10),
                              ident), commit_user="s", commit_identifier=ident)  # fmt: skip
    tables.append(append)
    requests = [(t.root, None) for t in tables] + [(t.root, 1) for t in tables]
    reads = JavaPaimon().read_many(requests)
    for i, table in enumerate(tables):
        latest, first = reads[i], reads[len(tables) + i]
        assert latest.names == tuple(table.arrow_schema.names)
        assert_java_rows(latest.rows, table.to_arrow(), context=table.identifier)
        assert first.names == tuple(SCHEMA0.names)
        assert_java_rows(first.rows, table.to_arrow(snapshot_id=1))
