"""Tables snaplake cannot handle yet are refused before anything is read or written.

A primary-key table written by pypaimon 2.1.0 (two commits updating the same
keys), then switched to deletion vectors by pypaimon's ``alter_table``, is
read as Java reads it (level 0 skipped) and compacted by snaplake's lookup
compaction (more in tests/integration/test_pk_deletion_vectors_pypaimon.py).
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from click.testing import CliRunner
from tests.oracle import PaimonOracle, requires_paimon

import snaplake
from snaplake.cli import cli

pytestmark = [pytest.mark.integration, requires_paimon]

_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


@pytest.fixture(scope="module")
def pk_table(tmp_path_factory):
    wh = tmp_path_factory.mktemp("wh")
    oracle = PaimonOracle(wh)
    root = oracle.create_table("db.pk", _SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    oracle.write("db.pk", pa.table({"id": [1, 2], "v": ["old", "old"]}, schema=_SCHEMA))
    oracle.write("db.pk", pa.table({"id": [1, 2], "v": ["new", "new"]}, schema=_SCHEMA))
    assert oracle.read("db.pk").num_rows == 2  # pypaimon merges by key
    oracle.alter_table(
        "db.pk", [{"kind": "set_option", "key": "deletion-vectors.enabled", "value": "true"}]
    )
    return wh, root


def test_a_primary_key_table_switched_to_deletion_vectors_reads_and_compacts_as_java(pk_table):
    """pypaimon's level-0 rows stay invisible until snaplake's lookup compaction lifts them."""
    wh, _ = pk_table
    table = snaplake.FileSystemCatalog(str(wh)).get_table("db.pk")
    assert table.to_arrow().num_rows == 0  # batch reads skip level 0, as Java's
    assert PaimonOracle(wh).read("db.pk").num_rows == 0
    runner = CliRunner()
    read = runner.invoke(cli, ["--warehouse", str(wh), "read", "db.pk"])
    assert read.exit_code == 0, read.output
    result = runner.invoke(cli, ["--warehouse", str(wh), "compact", "db.pk"])
    assert result.exit_code == 0, result.output
    want = [(1, "new"), (2, "new")]
    rows = table.to_arrow().sort_by("id")
    assert list(zip(rows["id"].to_pylist(), rows["v"].to_pylist(), strict=True)) == want
    theirs = PaimonOracle(wh).read("db.pk").sort_by("id")
    assert list(zip(theirs["id"].to_pylist(), theirs["v"].to_pylist(), strict=True)) == want
    listed = runner.invoke(cli, ["--warehouse", str(wh), "snapshots", "db.pk"])
    assert listed.exit_code == 0, listed.output


def test_create_table_primary_key_option_is_honoured(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    dynamic = catalog.create_table("db.d", schema=_SCHEMA, options={"primary-key": "id"})
    assert dynamic.primary_keys == ["id"] and dynamic.bucket_mode == "dynamic"
    assert dynamic.options["bucket"] == "-1" and "primary-key" not in dynamic.options
    table = catalog.create_table(
        "db.t", schema=_SCHEMA, options={"primary-key": "id", "bucket": "2"}
    )
    assert table.primary_keys == ["id"] and "primary-key" not in table.options
