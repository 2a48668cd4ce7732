"""ORC and Avro data files both ways with pypaimon 2.1.0, and tables whose file.format changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.helpers import SCHEMA, assert_same_rows, rows, write_and_commit
from tests.oracle import PaimonOracle, pred, requires_paimon

import snaplake
from snaplake.errors import UnsupportedTableError

pytestmark = [pytest.mark.integration, requires_paimon]


def _data_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("bucket-*/*"))


@pytest.mark.parametrize("fmt", ["orc", "avro"])
def test_pypaimon_table_read_appended_compacted(tmp_path, fmt):
    oracle = PaimonOracle(tmp_path)
    root = oracle.create_table(
        "db.t", SCHEMA, partition_keys=["month"],
        options={"file.format": fmt, "metadata.stats-mode": "full"},
    )  # fmt: skip
    oracle.write("db.t", rows(0, 300), commits=3)
    assert {n.rsplit(".", 1)[1] for n in _data_files(root)} == {fmt}
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.t")
    # snaplake used to open .orc as Parquet
    assert_same_rows(rows(0, 300), table.to_arrow(), reader="snaplake")
    assert table.to_arrow(filter=("id", ">=", 290)).num_rows == 10
    for i in range(3):
        write_and_commit(table, rows(300 + 50 * i, 50), commit_user="s")
    assert all(n.endswith(f".{fmt}") for n in _data_files(root))  # not .parquet
    assert_same_rows(rows(0, 450), oracle.read("db.t"), reader="pypaimon")
    # pypaimon prunes with the stats snaplake wrote for its files
    pruned = oracle.read_detailed("db.t", filter=pred.greater_or_equal("id", 400))
    assert sorted(pruned.table.column("id").to_pylist()) == list(range(400, 450))
    assert pruned.num_files < len(oracle.plan_files("db.t"))
    result = table.compact()
    assert result.files_before == 18 and result.files_after == 3
    assert all(p.endswith(f".{fmt}") for p in result.output_files)
    assert_same_rows(rows(0, 450), oracle.read("db.t"), reader="pypaimon")
    assert_same_rows(rows(0, 450), table.to_arrow(), reader="snaplake")


@pytest.mark.parametrize("fmt", ["orc", "avro"])
def test_pypaimon_reads_a_table_snaplake_created(tmp_path, fmt):
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table(
        "db.t", schema=SCHEMA, partition_keys=["month"],
        options={"file.format": fmt, "file.compression": "snappy"},
    )  # fmt: skip
    write_and_commit(table, rows(0, 200), commit_user="s")
    assert_same_rows(rows(0, 200), PaimonOracle(tmp_path).read("db.t"), reader="pypaimon")


def _set_option(root: Path, key: str, value: str) -> None:
    """What ALTER TABLE ... SET (key = value) leaves behind: the next schema file."""
    latest = max(int(p.name.split("-")[1]) for p in (root / "schema").glob("schema-*"))
    schema = json.loads((root / "schema" / f"schema-{latest}").read_text())
    schema["id"] = latest + 1
    schema["options"][key] = value
    (root / "schema" / f"schema-{latest + 1}").write_text(json.dumps(schema))


def test_a_table_whose_format_changed_reads_whole(tmp_path):
    oracle = PaimonOracle(tmp_path)
    root = oracle.create_table(
        "db.t", SCHEMA, partition_keys=["month"], options={"file.format": "orc"}
    )
    oracle.write("db.t", rows(0, 90))
    _set_option(root, "file.format", "avro")
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.t")
    write_and_commit(table, rows(90, 90), commit_user="s")
    _set_option(root, "file.format", "parquet")
    oracle.write("db.t", rows(180, 90))
    write_and_commit(table, rows(270, 90), commit_user="s")
    assert {n.rsplit(".", 1)[1] for n in _data_files(root)} == {"orc", "avro", "parquet"}
    assert_same_rows(rows(0, 360), table.to_arrow(), reader="snaplake")
    assert_same_rows(rows(0, 360), oracle.read("db.t"), reader="pypaimon")
    for i in range(4):  # compaction writes the table's current format
        write_and_commit(table, rows(360 + 10 * i, 10), commit_user="s")
    result = table.compact()
    assert result.files_after == 3 and all(p.endswith(".parquet") for p in result.output_files)
    assert_same_rows(rows(0, 400), table.to_arrow(), reader="snaplake")
    assert_same_rows(rows(0, 400), oracle.read("db.t"), reader="pypaimon")


def test_refused_format_settings_write_nothing(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    for options in (
        {"file.format": "lance"},
        {"file.format": "orc", "file.compression": "brotli"},
        {"file.format": "avro", "file.compression": "lz4"},
    ):
        with pytest.raises(UnsupportedTableError):
            catalog.create_table("db.t", schema=SCHEMA, options=options)
    assert not any(tmp_path.iterdir())


def test_pypaimon_reads_files_named_and_measured_by_table_options(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    options = {
        "data-file.prefix": "part-",
        "file.suffix.include.compression": "true",
        "metadata.stats-mode": "counts",
    }
    table = catalog.create_table("db.t", schema=SCHEMA, partition_keys=["month"], options=options)
    write_and_commit(table, rows(0, 90), commit_user="s")
    names = _data_files(Path(table.root))
    assert names and all(n.startswith("part-") and n.endswith(".zst.parquet") for n in names)
    oracle = PaimonOracle(tmp_path)
    assert_same_rows(rows(0, 90), oracle.read("db.t"), reader="pypaimon")
    got = oracle.read("db.t", filter=pred.greater_or_equal("id", 80))  # no bounds: no pruning
    assert sorted(got.column("id").to_pylist()) == list(range(80, 90))
    # pypaimon appends with the same options: snaplake reads its files too
    oracle.write("db.t", rows(90, 30))
    assert_same_rows(rows(0, 120), table.to_arrow(), reader="snaplake")
