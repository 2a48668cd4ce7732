"""Tables snaplake cannot handle yet are refused before anything is read or written.

A primary-key table written by pypaimon 2.1.0 (two commits updating the same
keys), then switched to deletion vectors by pypaimon's ``alter_table``:
reading it without applying deletion vectors could return deleted rows, so
reads refuse it (writes and compaction maintain the vectors:
tests/integration/test_pk_deletion_vectors_pypaimon.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from tests.oracle import PaimonOracle, requires_paimon

import snaplake
from snaplake.cli import cli
from snaplake.errors import UnsupportedTableError

pytestmark = [pytest.mark.integration, requires_paimon]

_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _files(root: Path) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names)


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


_DV = "option 'deletion-vectors.enabled' = 'true'"


def _refused(call, operation: str, *, feature: str = _DV) -> None:
    with pytest.raises(UnsupportedTableError, match=r"deletion vectors|primary keys") as info:
        call()
    assert info.value.feature == feature
    assert info.value.operation == operation


def test_reads_of_a_primary_key_table_with_deletion_vectors_are_refused(pk_table):
    """Reads refuse it (this branch applies no vectors); writes and maintenance accept it."""
    wh, root = pk_table
    before = _files(root)
    table = snaplake.FileSystemCatalog(str(wh)).get_table("db.pk")  # opening is fine
    assert table.schema().primary_keys == ("id",)
    assert len(table.snapshots()) == 2  # so is metadata
    _refused(table.to_arrow, "read")
    _refused(table.new_scan, "read")
    table.new_write(commit_user="u").close()  # writes: lookup compaction keeps the vectors
    table.expire_snapshots(dry_run=True)
    assert _files(root) == before, "a refused operation wrote or deleted files"
    # With deletion vectors a reader skips level 0 (pypaimon now sees no rows until a
    # compaction), which is why reading without them is refused rather than attempted.
    assert PaimonOracle(wh).read("db.pk").num_rows == 0


def test_cli_refuses_to_read_a_primary_key_table_with_deletion_vectors(pk_table):
    wh, _ = pk_table
    runner = CliRunner()
    result = runner.invoke(cli, ["--warehouse", str(wh), "read", "db.pk"])
    assert result.exit_code == 1, result.output
    assert "deletion vectors" in result.stderr
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
