"""ORC and Avro primary-key tables (issue 20 item 5), both ways with pypaimon 2.1.0 and Java 0.9.

snaplake writes ``file.format = orc | avro`` tables (deduplicate and aggregation),
tables whose levels differ (``file.format.per.level``) and changelog files in
``changelog-file.format``; pypaimon reads each exactly, Java Paimon 0.9 reads
a mixed-format table before and after compaction. pypaimon writes an ORC
table that snaplake reads, upserts into and compacts, and pypaimon then reads
exactly. Every file's format is checked by its extension and its key and
value stats against the rows it holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tests.helpers import assert_java_rows, assert_same_rows, write_and_commit
from tests.oracle import PaimonOracle, requires_paimon
from tests.oracle.java_paimon import JavaPaimon, requires_java_paimon
from tests.pk_helpers import (
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
from snaplake.mergetree.read import read_kv_file
from snaplake.store.format.binary_row import decode_binary_row
from snaplake.store.format.file_format import format_of_file

pytestmark = [pytest.mark.integration, requires_paimon]

_LEVELS = {"num-sorted-run.compaction-trigger": "2", "num-levels": "4"}


def _history(engine: str) -> list[tuple[list[dict[str, Any]], list[str] | None]]:
    first = make_rows(0, 60)
    second = make_rows(30, 60, seed=1)
    third = make_rows(0, 30, seed=2)[::3]
    kinds = ["+I" for _ in third] if engine == "aggregation" else ["-D" for _ in third]
    return [(first, None), (second, ["+U"] * len(second)), (third, kinds)]


def _files(table: Any) -> list[tuple[Any, str]]:
    return [(f, p) for s in table.new_scan().plan() for f, p in zip(s.files, s.paths, strict=True)]


def _extensions(table: Any) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for f, p in _files(table):
        out.setdefault(f.level, set()).add(format_of_file(p).name)
    return out


def _check_stats(table: Any) -> None:
    """Every file's min/max key and key/value stats describe the rows it holds."""
    from snaplake.mergetree.kv import key_column, kv_schema

    schema = table.schema()
    layout = kv_schema(schema.arrow_schema, schema.trimmed_primary_keys)
    for f, path in _files(table):
        data = pa.concat_tables(list(read_kv_file(table.file_io, path, layout)))
        assert data.num_rows == f.row_count
        keys = [data.column(key_column(k)) for k in schema.trimmed_primary_keys]
        first = decode_binary_row(f.min_key, schema.key_types)
        last = decode_binary_row(f.max_key, schema.key_types)
        assert tuple(first) == tuple(c[0].as_py() for c in keys)
        assert tuple(last) == tuple(c[-1].as_py() for c in keys)
        kmin = decode_binary_row(f.key_stats.min_values, schema.key_types)
        kmax = decode_binary_row(f.key_stats.max_values, schema.key_types)
        for i, c in enumerate(keys):
            assert (kmin[i], kmax[i]) == (pc.min(c).as_py(), pc.max(c).as_py())
        nulls = tuple(data.column(n).null_count for n in schema.field_names)
        assert f.value_stats.null_counts == nulls
        qty = schema.field_names.index("qty")
        vmin = decode_binary_row(f.value_stats.min_values, schema.value_types)
        assert vmin[qty] == pc.min(data.column("qty")).as_py()


def _write(table: Any, engine: str) -> TableModel:
    model = TableModel(engine_model(engine))
    for ident, (rows, kinds) in enumerate(_history(engine)):
        write_and_commit(table, to_table(rows), row_kinds=kinds, commit_identifier=ident)
        model.apply(rows, kinds)
        if ident == 1:
            table.compact()  # a minor compaction: files on level 0 and above
    return model


@pytest.mark.parametrize("fmt", ["orc", "avro"])
@pytest.mark.parametrize("engine", ["deduplicate", "aggregation"])
def test_pypaimon_reads_snaplake_orc_and_avro_tables(tmp_path: Path, fmt: str, engine: str) -> None:
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={**engine_options(engine), **_LEVELS, "file.format": fmt,
                 "metadata.stats-mode": "full"},
    )  # fmt: skip
    model = _write(table, engine)
    assert set().union(*_extensions(table).values()) == {fmt}
    _check_stats(table)
    expected = to_table(model.rows())
    oracle = PaimonOracle(tmp_path)
    assert_same_rows(table.to_arrow(), expected, by=PK_KEYS, reader="snaplake")
    assert_same_rows(expected, oracle.read("db.t"), by=PK_KEYS)
    table.compact(full=True)
    assert _extensions(table) == {3: {fmt}}
    _check_stats(table)
    assert_same_rows(expected, oracle.read("db.t"), by=PK_KEYS)
    assert_same_rows(expected, table.to_arrow(), by=PK_KEYS, reader="snaplake")


def test_file_format_per_level_and_changelog_format(tmp_path: Path) -> None:
    """Level 0 Avro, level 2 Parquet (file.format), top level ORC; changelog files ORC."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={**engine_options("deduplicate"), **_LEVELS, "file.format": "parquet",
                 "file.format.per.level": "0:avro,3:orc", "changelog-producer": "input",
                 "changelog-file.format": "orc", "file.compression.per.level": "0:snappy"},
    )  # fmt: skip
    model = TableModel(engine_model("deduplicate"))
    oracle = PaimonOracle(tmp_path)

    def commit(rows: list[dict[str, Any]], ident: int) -> None:
        write_and_commit(table, to_table(rows), commit_identifier=ident)
        model.apply(rows, None)

    commit(make_rows(0, 300), 0)
    assert _extensions(table) == {0: {"avro"}}
    names = {p.name for p in Path(table.root).rglob("changelog-*")}
    assert names and all(n.endswith(".orc") for n in names)
    assert_same_rows(to_table(model.rows()), oracle.read("db.t"), by=PK_KEYS)
    assert oracle.changelog("db.t").num_rows == 300
    commit(make_rows(100, 300, seed=1), 1)
    table.compact(full=True)
    assert _extensions(table) == {3: {"orc"}}
    commit(make_rows(0, 6, seed=3), 2)
    commit(make_rows(3, 6, seed=4), 3)
    table.compact()  # the small level-0 runs merge into level 2: Parquet
    levels = _extensions(table)
    assert levels[2] == {"parquet"} and levels[3] == {"orc"}, levels
    assert levels.get(0, {"avro"}) == {"avro"}
    _check_stats(table)
    assert_same_rows(to_table(model.rows()), oracle.read("db.t"), by=PK_KEYS)
    table.compact(full=True)
    assert _extensions(table) == {3: {"orc"}}
    _check_stats(table)
    assert_same_rows(to_table(model.rows()), oracle.read("db.t"), by=PK_KEYS)
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_snaplake_upserts_and_compacts_pypaimon_orc_table(tmp_path: Path) -> None:
    oracle = PaimonOracle(tmp_path)
    oracle.create_table(
        "db.t", PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"bucket": "2", "file.format": "orc"},
    )  # fmt: skip
    model = TableModel(engine_model("deduplicate"))
    for start in (0, 20):
        rows = make_rows(start, 40, seed=start)
        oracle.write("db.t", to_table(rows))
        model.apply(rows, None)
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.t")
    assert set().union(*_extensions(table).values()) == {"orc"}
    assert sorted_rows(table.to_arrow()) == model.rows()
    rows = make_rows(30, 30, seed=7)
    write_and_commit(table, to_table(rows), commit_identifier=0)
    model.apply(rows, None)
    doomed = make_rows(0, 10)[::2]
    write_and_commit(table, to_table(doomed), row_kinds=["-D"] * len(doomed), commit_identifier=1)
    model.apply(doomed, ["-D"] * len(doomed))
    table.compact(full=True)
    assert set().union(*_extensions(table).values()) == {"orc"}
    assert max(f.level for f, _ in _files(table)) == 5  # pypaimon's table: num-levels 6
    _check_stats(table)
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert_same_rows(to_table(model.rows()), oracle.read("db.t"), by=PK_KEYS)
    more = make_rows(50, 20, seed=9)  # pypaimon's next upsert lands on snaplake's files
    oracle.write("db.t", to_table(more))
    model.apply(more, None)
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert_same_rows(to_table(model.rows()), oracle.read("db.t"), by=PK_KEYS)


@requires_java_paimon
def test_java_reads_a_mixed_format_primary_key_table(tmp_path: Path) -> None:
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={**engine_options("deduplicate"), **_LEVELS, "file.format": "orc",
                 "file.format.per.level": "0:avro"},
    )  # fmt: skip
    model = _write(table, "deduplicate")
    levels = _extensions(table)
    assert levels[0] == {"avro"} and {"orc"} in [v for k, v in levels.items() if k > 0]
    before = table.latest_snapshot()
    assert before is not None
    mid = model.rows()
    table.compact(full=True)
    assert _extensions(table) == {3: {"orc"}}
    reads = JavaPaimon().read_many([(table.root, before.id), (table.root, None)])
    assert_java_rows(reads[0].rows, to_table(mid), context="before full compaction")
    assert_java_rows(reads[1].rows, to_table(model.rows()), context="latest")
