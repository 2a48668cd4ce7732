"""Dynamic-bucket tables (``bucket = -1``) across engines: pypaimon 2.1.0 and Java Paimon 0.9.

snaplake writes, upserts, deletes and compacts dynamic-bucket tables of every
merge engine; pypaimon and Java read them exactly. pypaimon and snaplake take
turns upserting one table: every key stays in one bucket (checked through the
HASH files and the data files) and both read the same rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.dynamic_helpers import assert_one_bucket_per_key, hash_files
from tests.helpers import assert_java_rows, assert_same_rows, write_and_commit
from tests.oracle import PaimonOracle, requires_paimon
from tests.oracle.java_paimon import JavaPaimon, requires_java_paimon
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

pytestmark = [pytest.mark.integration]

_TARGET = "9"


def _history(engine: str) -> list[tuple[list[dict[str, Any]], list[str] | None]]:
    """Inserts, updates, deletes (where the engine and pypaimon take them), more inserts."""
    history: list[tuple[list[dict[str, Any]], list[str] | None]] = [
        (make_rows(0, 70), None),
        (make_rows(35, 50, seed=1), ["+U"] * 50),
    ]
    if engine == "deduplicate":
        doomed = make_rows(0, 30, seed=2)[::3]
        history.append((doomed, ["-D"] * len(doomed)))
    history.append((make_rows(120, 40, seed=3), None))
    return history


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, int, list[Any]]]:
    """Per engine: a snaplake dynamic table, its snapshot before full compaction, its rows."""
    wh = tmp_path_factory.mktemp("dynwh")
    catalog = snaplake.FileSystemCatalog(str(wh))
    out = {}
    for engine in ENGINES:
        options = {k: v for k, v in engine_options(engine).items() if k != "bucket"}
        table = catalog.create_table(
            f"db.{engine.replace('-', '_')}",
            schema=PK_SCHEMA,
            partition_keys=["month"],
            primary_keys=PK_KEYS,
            options={**options, "dynamic-bucket.target-row-num": _TARGET},
        )
        assert table.bucket_mode == "dynamic" and table.options["bucket"] == "-1"
        model = TableModel(engine_model(engine), ignore_delete=engine == "first-row")
        for ident, (rows, kinds) in enumerate(_history(engine)):
            write_and_commit(table, to_table(rows), row_kinds=kinds, commit_identifier=ident)
            model.apply(rows, kinds)
            if ident == 1:
                table.compact()
        assert assert_one_bucket_per_key(table) > 6  # every partition spreads over buckets
        latest = table.latest_snapshot()
        assert latest is not None
        before_full = latest.id
        table.compact(full=True)
        assert sorted_rows(table.to_arrow()) == model.rows()
        assert {s.total_buckets for s in table.new_scan().plan()} == {-1}
        out[engine] = (table, before_full, model.rows())
    return out


@requires_paimon
@pytest.mark.parametrize("engine", ENGINES)
def test_pypaimon_reads_snaplake_dynamic_bucket_tables(
    tables: dict[str, tuple[Any, int, list[Any]]], engine: str
) -> None:
    table, _, expected = tables[engine]
    ours = table.to_arrow()
    assert sorted_rows(ours) == expected
    assert_same_rows(ours, PaimonOracle(Path(table.root).parents[1]).read(table.identifier),
                     by=PK_KEYS)  # fmt: skip


@requires_java_paimon
def test_java_reads_snaplake_dynamic_bucket_tables(
    tables: dict[str, tuple[Any, int, list[Any]]],
) -> None:
    requests: list[tuple[str, int | None]] = [(t.root, sid) for t, sid, _ in tables.values()]
    requests += [(t.root, None) for t, _, _ in tables.values()]
    reads = JavaPaimon().read_many(requests)
    n = len(tables)
    for i, (engine, (table, sid, final)) in enumerate(tables.items()):
        assert_java_rows(reads[i].rows, table.to_arrow(snapshot_id=sid), context=engine)
        assert_java_rows(reads[n + i].rows, to_table(final), context=engine)
        assert reads[n + i].misplaced_rows() == [], engine
        assert {b for s in reads[n + i].splits for b in s.row_buckets} == {None}  # dynamic
        ours = {f.file_name for s in table.new_scan().plan() for f in s.files}
        assert set(reads[n + i].files) == ours, engine


def _pypaimon_rows(oracle: PaimonOracle) -> pa.Table:
    return oracle.read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)


@requires_paimon
def test_pypaimon_and_snaplake_take_turns_without_duplicating_a_key(tmp_path: Path) -> None:
    oracle = PaimonOracle(tmp_path)
    oracle.create_table(
        "db.t", PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"bucket": "-1", "dynamic-bucket.target-row-num": "6"},
    )  # fmt: skip
    model = TableModel(engine_model("deduplicate"))
    first = make_rows(0, 40)
    oracle.write("db.t", to_table(first))
    model.apply(first, None)
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.t")
    assert table.bucket_mode == "dynamic"
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert_one_bucket_per_key(table)
    before = hash_files(table)
    # snaplake: the same keys again, plus new ones
    ours = make_rows(20, 40, seed=1)
    write_and_commit(table, to_table(ours), row_kinds=["+U"] * len(ours))
    model.apply(ours, ["+U"] * len(ours))
    after = hash_files(table)
    for key, hashes in before.items():  # pypaimon's buckets keep their hashes
        assert set(hashes.tolist()) <= set(after[key].tolist())
    assert_one_bucket_per_key(table)
    assert sorted_rows(_pypaimon_rows(oracle)) == model.rows()
    # pypaimon again: keys both of them wrote, and new ones
    theirs = make_rows(10, 50, seed=2)
    oracle.write("db.t", to_table(theirs))
    model.apply(theirs, None)
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.t")
    assert_one_bucket_per_key(table)
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert sorted_rows(_pypaimon_rows(oracle)) == model.rows()
    table.compact(full=True)
    assert_one_bucket_per_key(table)
    assert sorted_rows(_pypaimon_rows(oracle)) == model.rows()
