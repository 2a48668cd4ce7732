"""Postpone-bucket tables (bucket = -2) in both directions with pypaimon 2.1.0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.helpers import assert_same_rows, write_and_commit
from tests.oracle import PaimonOracle, requires_paimon
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
from snaplake.store.format.snapshot import CommitKind

pytestmark = [pytest.mark.integration, requires_paimon]


def _history(engine: str) -> list[tuple[list[dict[str, Any]], list[str] | None]]:
    """Inserts, updates, then retractions where pypaimon's readers take them."""
    first = make_rows(0, 60)
    second = make_rows(30, 60, seed=1)
    if engine == "partial-update":
        for r in second:
            r["name"] = None if r["id"] % 2 else r["name"]
            r["price"] = None
    third = make_rows(0, 30, seed=2)[::3]
    kinds = ["-D" if r["id"] % 2 == 0 else "-U" for r in third]
    if engine in ("aggregation", "partial-update"):
        kinds = ["+U" for _ in third]
    return [(first, None), (second, ["+U"] * len(second)), (third, kinds)]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, TableModel]]:
    wh = tmp_path_factory.mktemp("postpone")
    catalog = snaplake.FileSystemCatalog(str(wh))
    models = {}
    for engine in ENGINES:
        table = catalog.create_table(
            f"db.{engine.replace('-', '_')}", schema=PK_SCHEMA, partition_keys=["month"],
            primary_keys=PK_KEYS,
            options={**engine_options(engine), "bucket": "-2", "postpone.default-bucket-num": "2"},
        )  # fmt: skip
        model = TableModel(engine_model(engine), ignore_delete=engine == "first-row")
        for ident, (rows, kinds) in enumerate(_history(engine)):
            write_and_commit(table, to_table(rows), row_kinds=kinds, commit_identifier=ident)
            model.apply(rows, kinds)
        models[engine] = model
    return wh, models


@pytest.mark.parametrize("engine", ENGINES)
def test_pypaimon_reads_snaplake_postpone_table(
    warehouse: tuple[Path, dict[str, TableModel]], engine: str
) -> None:
    wh, models = warehouse
    name = f"db.{engine.replace('-', '_')}"
    oracle = PaimonOracle(wh)
    assert oracle.read(name).num_rows == 0  # pending rows: invisible to pypaimon's batch reads
    table = snaplake.FileSystemCatalog(str(wh)).get_table(name)
    table.compact()
    expected = to_table(models[engine].rows())
    ours = table.to_arrow()
    assert sorted_rows(ours) == models[engine].rows()
    assert_same_rows(expected, oracle.read(name), by=PK_KEYS)
    # pypaimon upserts into the compacted table; snaplake compacts its pending rows again
    more = make_rows(50, 30, seed=7)
    oracle.write(name, to_table(more))
    models[engine].apply(more)
    table.compact()
    assert_same_rows(to_table(models[engine].rows()), oracle.read(name), by=PK_KEYS)
    assert sorted_rows(table.to_arrow()) == models[engine].rows()


@pytest.mark.parametrize("engine", ENGINES)
def test_snaplake_compacts_pypaimon_postpone_table(tmp_path: Path, engine: str) -> None:
    oracle = PaimonOracle(tmp_path)
    name = f"db.{engine.replace('-', '_')}"
    oracle.create_table(
        name, PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={**engine_options(engine), "bucket": "-2"},
    )  # fmt: skip
    model = TableModel(engine_model(engine), ignore_delete=engine == "first-row")
    for seed, (start, n) in enumerate(((0, 50), (25, 50), (60, 20))):
        rows = make_rows(start, n, seed=seed)
        oracle.write(name, to_table(rows))
        model.apply(rows)
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table(name)
    assert table.to_arrow().num_rows == 0
    result = table.compact()
    assert result.snapshot_id is not None
    latest = table.latest_snapshot()
    assert latest is not None and latest.commit_kind == CommitKind.COMPACT
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert_same_rows(to_table(model.rows()), oracle.read(name), by=PK_KEYS)
    # snaplake writes on, pypaimon writes on, snaplake compacts: no key twice
    rows = make_rows(40, 30, seed=9)
    write_and_commit(table, to_table(rows))
    model.apply(rows)
    rows = make_rows(10, 30, seed=10)
    oracle.write(name, to_table(rows))
    model.apply(rows)
    table.compact()
    assert_same_rows(to_table(model.rows()), oracle.read(name), by=PK_KEYS)
    assert sorted_rows(table.to_arrow()) == model.rows()
