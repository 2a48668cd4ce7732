"""Tables snaplake cannot handle yet are refused before anything is read or written.

A primary-key table written by pypaimon 2.1.0 (two commits updating the same
keys), then switched to deletion vectors by pypaimon's ``alter_table``:
reading it without applying deletion vectors could return deleted rows, and
writing it without maintaining them would corrupt it for other engines.
Every entry point refuses it instead (the same table without the option is
read and written: tests/integration/test_pk_interop_pypaimon.py).
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
from snaplake.compaction.expire import ExpireSnapshots
from snaplake.compaction.orphan_clean import OrphanFilesClean
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


def test_every_entry_point_but_reads_refuses_a_primary_key_table_with_deletion_vectors(pk_table):
    wh, root = pk_table
    before = _files(root)
    table = snaplake.FileSystemCatalog(str(wh)).get_table("db.pk")  # opening is fine
    assert table.schema().primary_keys == ("id",)
    assert len(table.snapshots()) == 2  # so is metadata
    # Reads work as Java's: a batch read skips level 0, where pypaimon wrote every row.
    assert table.to_arrow().num_rows == 0
    assert table.new_scan().plan() == []
    _refused(lambda: table.new_write(commit_user="u"), "write")
    _refused(lambda: table.new_commit(commit_user="u").commit([]), "commit")
    _refused(table.compact, "maintenance")
    _refused(table.merge_manifests, "maintenance")
    _refused(lambda: table.expire_snapshots(dry_run=True), "maintenance")
    _refused(lambda: ExpireSnapshots(table).execute(), "maintenance")
    _refused(table.remove_orphan_files, "maintenance")
    _refused(
        lambda: OrphanFilesClean(
            file_io=table.file_io, paths=table.paths, snapshot_manager=table.snapshot_manager
        ).execute(),
        "maintenance",
    )
    _refused(lambda: table.rollback_to(1), "maintenance")
    assert _files(root) == before, "a refused operation wrote or deleted files"
    # With deletion vectors a reader skips level 0: pypaimon sees no rows either until a
    # compaction.
    assert PaimonOracle(wh).read("db.pk").num_rows == 0


def test_cli_reads_but_refuses_to_compact_a_primary_key_table_with_deletion_vectors(pk_table):
    wh, _ = pk_table
    runner = CliRunner()
    result = runner.invoke(cli, ["--warehouse", str(wh), "compact", "db.pk"])
    assert result.exit_code == 1, result.output
    assert "deletion vectors" in result.stderr
    read = runner.invoke(cli, ["--warehouse", str(wh), "read", "db.pk"])  # reads work
    assert read.exit_code == 0, read.output
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
