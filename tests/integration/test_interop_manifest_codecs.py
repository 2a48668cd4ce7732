"""``manifest.compression = snappy`` both ways with pypaimon 2.1.0; ``lz4`` refused for writing."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import SCHEMA, rows, write_and_commit
from tests.oracle import PaimonOracle, requires_paimon

import snaplake
from snaplake.errors import UnsupportedTableError
from snaplake.store.format.avro import parse_container

pytestmark = [pytest.mark.integration, requires_paimon]


def _codecs(root: Path) -> set[str]:
    return {parse_container(p.read_bytes(), path=str(p)).codec for p in root.glob("manifest/*")}


def test_snappy_manifests_written_by_pypaimon_are_read_and_appended_to(tmp_path):
    oracle = PaimonOracle(tmp_path)
    root = oracle.create_table(
        "db.t", SCHEMA, partition_keys=["month"], options={"manifest.compression": "snappy"}
    )
    oracle.write("db.t", rows(0, 100), commits=2)
    assert _codecs(root) == {"snappy"}
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.t")
    assert table.to_arrow().sort_by("id").equals(rows(0, 100))
    write_and_commit(table, rows(100, 50), commit_user="s")
    table.merge_manifests(full=True)
    assert _codecs(root) == {"snappy"}
    assert oracle.read("db.t").sort_by("id").equals(rows(0, 150))


def test_pypaimon_reads_snappy_manifests_snaplake_wrote(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table(
        "db.t", schema=SCHEMA, partition_keys=["month"], options={"manifest.compression": "snappy"}
    )
    for i in range(3):
        write_and_commit(table, rows(i * 40, 40), commit_user="s")
    assert _codecs(Path(table.root)) == {"snappy"}
    assert PaimonOracle(tmp_path).read("db.t").sort_by("id").equals(rows(0, 120))


def test_lz4_manifests_are_refused_before_anything_is_written(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    with pytest.raises(UnsupportedTableError, match="lz4") as info:
        catalog.create_table("db.t", schema=SCHEMA, options={"manifest.compression": "lz4"})
    assert info.value.key == "manifest.compression"
    assert not any(tmp_path.iterdir())
