"""Deletion-vector primary-key tables snaplake writes and compacts, read by pypaimon 2.1.0.

pypaimon skips level 0 of such tables and reads each other file on its own with
its deletion vector applied, so it sees exactly what snaplake's lookup
compaction made visible.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import write_and_commit
from tests.integration.test_pk_interop_pypaimon import _history
from tests.oracle import PaimonOracle, requires_paimon
from tests.pk_helpers import (
    PK_KEYS,
    PK_SCHEMA,
    TableModel,
    dv_options,
    engine_model,
    make_rows,
    sorted_rows,
    to_table,
)

import snaplake
from snaplake.store.format.deletion_vector import read_deletion_vectors
from snaplake.store.format.index_file import DELETION_VECTORS_INDEX
from snaplake.store.read.index_scan import read_index_entries

pytestmark = [pytest.mark.integration, requires_paimon]

DV_ENGINES = ("deduplicate", "partial-update", "aggregation")


def _vectors(table: snaplake.Table) -> dict[str, int]:
    """Data file name -> deleted rows, over the latest snapshot's DV files."""
    storage = table
    latest = storage.snapshot_manager.latest_snapshot()
    out: dict[str, int] = {}
    for e in read_index_entries(storage, latest, index_type=DELETION_VECTORS_INDEX):
        for name, dv in read_deletion_vectors(storage.file_io, storage.paths, e.index_file).items():
            out[name] = dv.cardinality
    return out


@pytest.mark.parametrize("engine", DV_ENGINES)
def test_pypaimon_reads_lookup_compacted_table(tmp_path: Path, engine: str) -> None:
    """Every commit compacts its level 0 with lookup: pypaimon reads the model after each."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options=dv_options(engine),
    )  # fmt: skip
    model = TableModel(engine_model(engine))
    oracle = PaimonOracle(tmp_path)
    history = [*_history(engine), (make_rows(50, 40, seed=11), None), *_history(engine)[1:]]
    for ident, (rows, kinds) in enumerate(history):
        write_and_commit(table, to_table(rows), row_kinds=kinds, commit_identifier=ident)
        model.apply(rows, kinds)
        got = oracle.read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)
        assert sorted_rows(got) == model.rows(), f"after commit {ident}"
    assert _vectors(table), "upserts into higher levels leave deletion vectors"
    table.compact(full=True)
    assert _vectors(table) == {}, "full compaction rewrites every file with a vector"
    got = oracle.read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)
    assert sorted_rows(got) == model.rows()


@pytest.mark.parametrize("engine", DV_ENGINES)
def test_snaplake_compacts_level0_files_pypaimon_wrote(tmp_path: Path, engine: str) -> None:
    """pypaimon writes level-0 files it cannot read back; snaplake's compaction shows them."""
    oracle = PaimonOracle(tmp_path)
    oracle.create_table(
        "db.t", PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options=dv_options(engine),
    )  # fmt: skip
    model = TableModel(engine_model(engine))
    history = _history(engine)
    for rows, kinds in history[:2]:
        assert kinds is None or set(kinds) == {"+U"}  # pypaimon writes +I rows
        oracle.write("db.t", to_table(rows))
        model.apply(rows, None)
    assert oracle.read("db.t").num_rows == 0, "pypaimon skips level 0 of a DV table"
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.t")
    table.compact()
    got = oracle.read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)
    assert sorted_rows(got) == model.rows()
    # More pypaimon level-0 files over snaplake's levels, then a snaplake upsert (lift).
    extra = make_rows(20, 30, seed=5)
    oracle.write("db.t", to_table(extra))
    model.apply(extra, None)
    rows, kinds = history[2]
    write_and_commit(table, to_table(rows), row_kinds=kinds)
    model.apply(rows, kinds)
    # The writer lifted the level 0 of the buckets it wrote; pypaimon's files in other
    # buckets wait for a compaction (as Java's writer leaves them too).
    table.compact()
    got = oracle.read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)
    assert sorted_rows(got) == model.rows()
    assert _vectors(table)
    table.compact(full=True)
    assert _vectors(table) == {}
    got = oracle.read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)
    assert sorted_rows(got) == model.rows()


def test_bitmap64_vectors_are_written(tmp_path: Path) -> None:
    """``deletion-vectors.bitmap64``: new vectors are 64-bit (pypaimon and Java 0.9 refuse them)."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options=dv_options("deduplicate", **{"deletion-vectors.bitmap64": "true"}),
    )  # fmt: skip
    write_and_commit(table, to_table(make_rows(0, 40)))
    table.compact(full=True)
    write_and_commit(table, to_table(make_rows(0, 10, seed=1)))
    latest = table.latest_snapshot()
    entries = read_index_entries(table, latest, index_type=DELETION_VECTORS_INDEX)
    vectors = [
        v
        for e in entries
        for v in read_deletion_vectors(table.file_io, table.paths, e.index_file).values()
    ]
    assert vectors and all(v.bitmap64 for v in vectors)
    assert sum(v.cardinality for v in vectors) == 10


def test_dynamic_bucket_table_with_deletion_vectors(tmp_path: Path) -> None:
    """``bucket = -1``: the writer's lift and compaction keep vectors per assigned bucket."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"bucket": "-1", "deletion-vectors.enabled": "true",
                 "dynamic-bucket.target-row-num": "5"},
    )  # fmt: skip
    model = TableModel(engine_model("deduplicate"))
    oracle = PaimonOracle(tmp_path)
    for first, count, seed in ((0, 30, 0), (10, 30, 1), (5, 10, 2)):
        rows = make_rows(first, count, seed=seed)
        write_and_commit(table, to_table(rows))
        model.apply(rows, None)
        got = oracle.read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)
        assert sorted_rows(got) == model.rows()
    assert _vectors(table)
    table.compact(full=True)
    assert _vectors(table) == {}
    got = oracle.read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)
    assert sorted_rows(got) == model.rows()


def test_cross_partition_table_with_deletion_vectors(tmp_path: Path) -> None:
    """A key moving partition: its old partition's row is deleted through the lookup."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=["id"],
        options={"bucket": "-1", "deletion-vectors.enabled": "true"},
    )  # fmt: skip
    latest: dict[int, dict[str, object]] = {}
    oracle = PaimonOracle(tmp_path)
    for first, count, seed, months in ((0, 30, 0, 3), (10, 30, 1, 2), (5, 10, 2, 3)):
        rows = make_rows(first, count, seed=seed, month_mod=months)
        write_and_commit(table, to_table(rows))
        latest.update({r["id"]: r for r in rows})
        got = oracle.read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)
        assert sorted_rows(got) == sorted_rows(to_table(list(latest.values())))
    table.compact(full=True)
    got = oracle.read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)
    assert sorted_rows(got) == sorted_rows(to_table(list(latest.values())))
