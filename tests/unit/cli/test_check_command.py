"""``snaplake check TABLE`` (issue 18 item 17): exit codes, text and JSON output."""

from __future__ import annotations

import json

from click.testing import CliRunner
from tests.check_helpers import live_files, rewrite_entry
from tests.unit.cli.runner import Snaplake

from snaplake.catalog import FileSystemCatalog
from snaplake.cli import cli
from snaplake.cli.check import EXIT_CHECK_FAILED


def test_check_is_listed_in_help() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0 and "check" in result.stdout


def test_clean_table_exits_0(snaplake: Snaplake, sales_table: str) -> None:
    out = snaplake("check", sales_table).stdout
    assert "every data file agrees" in out
    doc = snaplake.json("check", sales_table)
    assert doc["ok"] is True and doc["mismatches"] == []
    assert doc["files_checked"] >= 2 and doc["rows_checked"] == 6 and doc["snapshot_id"] == 1


def test_lying_entry_exits_5_and_names_file_and_field(
    snaplake: Snaplake, sales_table: str, warehouse: str
) -> None:
    table = FileSystemCatalog(warehouse).get_table(sales_table)
    meta, path = live_files(table)[0]
    rewrite_entry(table, meta.file_name, row_count=meta.row_count + 5)
    result = snaplake("check", sales_table, expect=EXIT_CHECK_FAILED)
    assert EXIT_CHECK_FAILED == 5
    assert path in result.stdout and "_ROW_COUNT" in result.stdout
    assert "1 of " in result.stdout
    json_result = snaplake("--output", "json", "check", sales_table, expect=EXIT_CHECK_FAILED)
    doc = json.loads(json_result.stdout)
    assert doc["ok"] is False and doc["bad_files"] == 1
    assert doc["mismatches"] == [
        {
            "file": path,
            "field": "_ROW_COUNT",
            "column": None,
            "recorded": meta.row_count + 5,
            "actual": meta.row_count,
            "message": "the file holds another number of rows",
        }
    ]


def test_snapshot_option_and_not_found(snaplake: Snaplake, sales_table: str) -> None:
    assert snaplake.json("check", sales_table, "--snapshot", "1")["ok"] is True
    result = snaplake("check", sales_table, "--snapshot", "9", expect=4)
    assert "snapshot" in result.stderr
    snaplake("check", "shop.nope", expect=4)
    snaplake("check", sales_table, "--snapshot", "0", expect=2)
