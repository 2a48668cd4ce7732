"""Errors a new user meets on the command line: each names what to fix, with the right exit code.

Issue 10, item 11: a multi-file ``write`` names the unreadable file; a CSV value
that does not convert names file, column and row; an unbalanced quote in
``--filter`` is a usage error; read commands on a warehouse that does not exist
exit 4; a header-only CSV commits nothing and says so; hints name commands,
never Python calls.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tests.unit.cli.conftest import SALES
from tests.unit.cli.runner import Snaplake

PYTHON_HINT = re.compile(r"catalog\.|get_table|ignore_if_exists|create_table\b|=True|\w\(\)")


def _data_files(warehouse: str) -> list[Path]:
    return sorted(Path(warehouse).rglob("data-*"))


def test_write_of_several_files_names_the_unreadable_one(
    snaplake: Snaplake, sales_table: str, sales_parquet: Path, tmp_path: Path, warehouse: str
) -> None:
    before = _data_files(warehouse)
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"this is not parquet")
    result = snaplake("write", sales_table, str(sales_parquet), str(broken), expect=1)
    assert result.stderr.startswith(f"error: {broken}: not a readable Parquet file"), result.stderr
    assert "ArrowInvalid" not in result.stderr
    assert len(snaplake.json("snapshots", sales_table)) == 1  # nothing committed
    assert _data_files(warehouse) == before  # the good file's data files were deleted


@pytest.mark.parametrize(
    ("body", "column", "row", "value"),
    [
        ("id,city,amount,day\n7,Oslo,1.0,2024-01-05\n8,Rome,x1,2024-01-05\n", "amount", 2, "x1"),
        ("id,city,amount,day\nseven,Oslo,1.0,2024-01-05\n", "id", 1, "seven"),
        ("id,city,amount,day\n" + "9,A,1.0,2024-01-05\n" * 300 + "9,A,1.0,2024-13-40\n",
         "day", 301, "2024-13-40"),
    ],
    ids=["double", "bigint", "date-late-row"],
)  # fmt: skip
def test_csv_conversion_error_names_file_column_and_row(
    snaplake: Snaplake,
    sales_table: str,
    tmp_path: Path,
    body: str,
    column: str,
    row: int,
    value: str,
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(body)
    result = snaplake("write", sales_table, str(bad), expect=1)
    line = result.stderr.strip()
    assert line.startswith(f"error: {bad}: column {column!r}, row {row} "), line
    assert repr(value) in line and "ArrowInvalid" not in line


def test_header_only_csv_commits_nothing(
    snaplake: Snaplake, sales_table: str, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("id,city,amount,day\n")
    out = snaplake("write", sales_table, str(empty)).stdout
    assert out.startswith("nothing to commit"), out
    assert "snapshot id:     -" not in out
    assert len(snaplake.json("snapshots", sales_table)) == 1
    doc = snaplake.json("write", sales_table, str(empty))
    assert doc["snapshot_id"] is None and doc["rows"] == 0


@pytest.mark.parametrize(
    "text",
    ["city = 'Berlin", 'city = "Berlin', "city in ('Berlin', 'Rome)", "amount > 1 and city = 'x"],
)
def test_unbalanced_quote_in_filter_is_a_usage_error(
    snaplake: Snaplake, sales_table: str, text: str
) -> None:
    result = snaplake("read", sales_table, "--filter", text, expect=2)
    assert "unbalanced" in result.stderr and result.stdout == ""


def test_quote_inside_the_other_kind_of_quote_is_fine(snaplake: Snaplake, sales_table: str) -> None:
    assert snaplake.json("read", sales_table, "--filter", 'city = "O\'Brien"') == []


@pytest.mark.parametrize(
    "args",
    [
        ("databases",),
        ("tables", "shop"),
        ("read", "shop.sales"),
        ("snapshots", "shop.sales"),
        ("files", "shop.sales"),
        ("expire-snapshots", "shop.sales"),
    ],
)
def test_read_commands_on_a_missing_warehouse_exit_4(tmp_path: Path, args: tuple[str, ...]) -> None:
    missing = tmp_path / "no-such-warehouse"
    result = Snaplake(str(missing))(*args, expect=4)
    assert result.stderr.startswith(f"error: warehouse {missing} does not exist"), result.stderr
    assert result.stdout == "" and not missing.exists()


def test_create_table_creates_a_missing_warehouse(tmp_path: Path) -> None:
    path = tmp_path / "fresh.parquet"
    pq.write_table(SALES, path)
    wh = Snaplake(str(tmp_path / "new-wh"))
    wh("create-table", "shop.sales", "--from-parquet", str(path))
    assert wh.json("databases") == [{"database": "shop"}]


def test_hints_name_commands_not_python_calls(
    snaplake: Snaplake, sales_table: str, sales_parquet: Path
) -> None:
    cases = [
        (("read", "shop.nope"), 4, "'snaplake create-table shop.nope --from-parquet FILE'"),
        (("tables", "nodb"), 4, "'snaplake databases'"),
        (("read", sales_table, "--snapshot", "99"), 4, f"'snaplake snapshots {sales_table}'"),
        (("create-table", sales_table, "--from-parquet", str(sales_parquet)), 1,
         f"'snaplake write {sales_table} FILES'"),
        (("rollback", sales_table, "--to", "nightly"), 4, f"'snaplake tag list {sales_table}'"),
    ]  # fmt: skip
    for args, code, hint in cases:
        result = snaplake(*args, expect=code)
        assert hint in result.stderr, (args, result.stderr)
        assert not PYTHON_HINT.search(result.stderr), (args, result.stderr)
