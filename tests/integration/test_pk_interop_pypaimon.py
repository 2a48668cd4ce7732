"""Primary-key tables in both directions with pypaimon 2.1.0 (the format oracle), on real files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.helpers import write_and_commit
from tests.oracle import PaimonOracle, pred, requires_paimon
from tests.pk_helpers import (
    ENGINES,
    PK_KEYS,
    PK_SCHEMA,
    TableModel,
    engine_model,
    engine_options,
    make_rows,
    sorted_rows,
    to_table,
)

import snaplake

pytestmark = [pytest.mark.integration, requires_paimon]


def _history(engine: str) -> list[tuple[list[dict[str, Any]], list[str] | None]]:
    """Three commits: inserts, updates (partial rows for partial-update), retractions."""
    first = make_rows(0, 60)
    second = make_rows(30, 60, seed=1)
    if engine == "partial-update":
        for r in second:  # partial rows: only some columns set
            r["name"] = None if r["id"] % 2 else r["name"]
            r["price"] = None
    third = make_rows(0, 30, seed=2)[::3]
    kinds = ["-D" if r["id"] % 2 == 0 else "-U" for r in third]
    if engine == "aggregation":  # pypaimon's aggregation reader takes no retractions
        kinds = ["+I" for _ in third]
    if engine == "partial-update":  # pypaimon reads partial-update only without retractions
        for r in third:
            r["qty"] = None
        kinds = ["+U" for _ in third]
    return [(first, None), (second, ["+U"] * len(second)), (third, kinds)]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, TableModel]]:
    wh = tmp_path_factory.mktemp("pkwh")
    catalog = snaplake.FileSystemCatalog(str(wh))
    models = {}
    for engine in ENGINES:
        name = engine.replace("-", "_")
        table = catalog.create_table(
            f"db.{name}",
            schema=PK_SCHEMA,
            partition_keys=["month"],
            primary_keys=PK_KEYS,
            options=engine_options(engine),
        )
        model = TableModel(engine_model(engine), ignore_delete=engine == "first-row")
        for ident, (rows, kinds) in enumerate(_history(engine)):
            write_and_commit(table, to_table(rows), row_kinds=kinds, commit_identifier=ident)
            model.apply(rows, kinds)
        models[engine] = model
    return wh, models


@pytest.mark.parametrize("engine", ENGINES)
def test_pypaimon_reads_snaplake_primary_key_table(
    warehouse: tuple[Path, dict[str, TableModel]], engine: str
) -> None:
    wh, models = warehouse
    name = f"db.{engine.replace('-', '_')}"
    expected = models[engine].rows()
    ours = snaplake.FileSystemCatalog(str(wh)).get_table(name).to_arrow()
    assert sorted_rows(ours) == expected
    theirs = PaimonOracle(wh).read(name).select(PK_SCHEMA.names).cast(PK_SCHEMA)
    assert sorted_rows(theirs) == expected


def test_key_filter_and_time_travel(warehouse: tuple[Path, dict[str, TableModel]]) -> None:
    wh, models = warehouse
    table = snaplake.FileSystemCatalog(str(wh)).get_table("db.deduplicate")
    got = table.to_arrow(filter=[("id", ">=", 40), ("qty", ">", 0)], columns=["id", "qty"])
    expected = [
        {"id": r["id"], "qty": r["qty"]}
        for r in models["deduplicate"].rows()
        if r["id"] >= 40 and r["qty"] is not None and r["qty"] > 0
    ]
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == sorted(expected, key=lambda r: r["id"])
    theirs = PaimonOracle(wh).read(
        "db.deduplicate", snapshot_id=1, filter=pred.greater_or_equal("id", 10)
    )
    ours = table.to_arrow(snapshot_id=1, filter=("id", ">=", 10))
    assert sorted_rows(ours) == sorted_rows(theirs.select(PK_SCHEMA.names).cast(PK_SCHEMA))


@pytest.fixture(scope="module")
def pypaimon_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TableModel]:
    """A deduplicate table written by pypaimon, deletes through rowkind.field."""
    wh = tmp_path_factory.mktemp("ppwh")
    schema = PK_SCHEMA.append(pa.field("kind", pa.string()))
    oracle = PaimonOracle(wh)
    oracle.create_table(
        "db.t",
        schema,
        partition_keys=["month"],
        primary_keys=PK_KEYS,
        options={"bucket": "2", "rowkind.field": "kind", "metadata.stats-mode": "full"},
    )
    model = TableModel(engine_model("deduplicate", [*PK_SCHEMA.names, "kind"]))
    for start, kind in ((0, "+I"), (20, "+U"), (0, "-D")):
        rows = make_rows(start, 40 if kind != "-D" else 10, seed=start)
        for r in rows:
            r["kind"] = kind
        oracle.write("db.t", pa.Table.from_pylist(rows, schema=schema))
        model.apply(rows, [kind] * len(rows))
    return wh, model


def test_snaplake_reads_and_upserts_pypaimon_table(pypaimon_table: tuple[Path, TableModel]) -> None:
    wh, model = pypaimon_table
    table = snaplake.FileSystemCatalog(str(wh)).get_table("db.t")
    assert table.primary_keys == PK_KEYS
    assert sorted_rows(table.to_arrow()) == model.rows()
    schema = table.arrow_schema
    rows = make_rows(35, 20, seed=9)
    for r in rows:
        r["kind"] = "+U"
    deletes = make_rows(20, 5, seed=9)
    for r in deletes:
        r["kind"] = "-D"
    w = table.new_write(commit_user="snaplake")
    w.write_arrow(pa.Table.from_pylist(rows, schema=schema))
    w.delete_arrow(pa.Table.from_pylist(deletes, schema=schema).select(PK_KEYS))
    table.new_commit(commit_user="snaplake").commit(w.prepare_commit())
    model.apply(rows, ["+U"] * len(rows))
    for r in deletes:
        r["kind"] = "-D"
        for c in ("name", "qty", "price", "ok"):
            r[c] = None
    model.apply(deletes, ["-D"] * len(deletes))
    expected = model.rows()
    assert sorted_rows(table.to_arrow()) == expected
    theirs = PaimonOracle(wh).read("db.t").cast(schema)
    assert sorted_rows(theirs) == expected


@pytest.mark.parametrize("engine", ENGINES)
def test_compaction_levels_read_by_pypaimon(tmp_path: Path, engine: str) -> None:
    """Files on several levels, then after full compaction: pypaimon reads the merged view."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    options = {**engine_options(engine), "num-sorted-run.compaction-trigger": "2",
               "num-levels": "4"}  # fmt: skip
    table = catalog.create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS, options=options
    )
    model = TableModel(engine_model(engine), ignore_delete=engine == "first-row")
    history = [*_history(engine), (make_rows(50, 40, seed=11), None), *_history(engine)[1:]]
    for ident, (rows, kinds) in enumerate(history):
        write_and_commit(table, to_table(rows), row_kinds=kinds, commit_identifier=ident)
        model.apply(rows, kinds)
        if ident % 2 == 1:
            table.compact()
    levels = {f.level for s in table.new_scan().plan() for f in s.files}
    if engine != "first-row":  # first-row commits compact up themselves: no level 0
        assert 0 in levels and len(levels) >= 2, levels
    else:
        assert 0 not in levels
    oracle = PaimonOracle(tmp_path)
    expected = model.rows()
    assert sorted_rows(table.to_arrow()) == expected
    assert sorted_rows(oracle.read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)) == expected
    result = table.compact(full=True)
    assert result.snapshot_id is not None or engine == "first-row"  # may be one top run already
    levels = {f.level for s in table.new_scan().plan() for f in s.files}
    assert levels == {3}
    assert all(
        f.delete_row_count == 0 and f.file_source == 1
        for s in table.new_scan().plan()
        for f in s.files
    )
    assert sorted_rows(table.to_arrow()) == expected
    assert sorted_rows(oracle.read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)) == expected


def test_snaplake_compacts_pypaimon_table(pypaimon_table: tuple[Path, TableModel]) -> None:
    wh, model = pypaimon_table  # the model holds every write to the table so far
    table = snaplake.FileSystemCatalog(str(wh)).get_table("db.t")
    expected = model.rows()
    assert sorted_rows(table.to_arrow()) == expected
    result = table.compact(full=True)
    assert result.snapshot_id is not None and result.files_before > result.files_after
    assert sorted_rows(table.to_arrow()) == expected
    theirs = PaimonOracle(wh).read("db.t").cast(table.arrow_schema)
    assert sorted_rows(theirs) == expected
