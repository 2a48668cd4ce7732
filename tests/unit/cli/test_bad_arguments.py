"""Bad arguments on the command line: exit code 2 and a message naming what to fix.

Issue 18 items 3, 10 and 14: a type that is not a Paimon type, a file that is
not Parquet, an invalid tag or table name, an option without ``=``, a
``fields.<column>.*`` option naming no column, and a refused type change whose
message printed the whole widening table.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.cli.runner import Snaplake

EXIT_USAGE = 2


def test_add_column_with_an_unknown_type_is_a_usage_error(
    snaplake: Snaplake, sales_table: str
) -> None:
    for option, value in [("--add-column", "x notatype"), ("--update-column-type", "id bogus")]:
        result = snaplake("alter-table", sales_table, option, value, expect=EXIT_USAGE)
        assert f"Invalid value for {option}" in result.stderr, result.stderr
        assert "a Paimon type such as" in result.stderr
    assert len(snaplake.json("schemas", sales_table)) == 1


def test_create_table_from_a_file_that_is_not_parquet(
    snaplake: Snaplake, sales_csv: Path, tmp_path: Path, warehouse: str
) -> None:
    result = snaplake("create-table", "shop.t", "--from-parquet", str(sales_csv),
                      expect=EXIT_USAGE)  # fmt: skip
    assert f"{sales_csv} is not a Parquet file: a CSV file has no column types" in result.stderr
    assert "ArrowInvalid" not in result.stderr and "magic bytes" not in result.stderr
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not parquet at all")
    result = snaplake("create-table", "shop.t", "--from-parquet", str(junk), expect=EXIT_USAGE)
    assert f"{junk} is not a Parquet file" in result.stderr
    assert "ArrowInvalid" not in result.stderr
    assert not Path(warehouse).exists()


@pytest.mark.parametrize("name", ["bad/name", "v1\n", "123"])
def test_an_invalid_tag_name_is_a_typed_usage_error(
    snaplake: Snaplake, sales_table: str, name: str
) -> None:
    result = snaplake("tag", "create", sales_table, name, expect=EXIT_USAGE)
    assert result.stderr.startswith(f"error: invalid tag name {name!r}"), result.stderr
    assert "ValueError" not in result.stderr
    assert snaplake.json("tag", "list", sales_table) == []


def test_a_table_name_with_a_final_newline_is_refused(
    snaplake: Snaplake, sales_parquet: Path
) -> None:
    snaplake("create-table", "shop.t", "--from-parquet", str(sales_parquet))
    result = snaplake("create-table", "shop.t\n", "--from-parquet", str(sales_parquet),
                      expect=EXIT_USAGE)  # fmt: skip
    assert "invalid table name" in result.stderr
    assert [t["table"] for t in snaplake.json("tables", "shop")] == ["shop.t"]


@pytest.mark.parametrize("where", ["group", "create-table"])
def test_an_option_without_a_value_names_its_key(
    snaplake: Snaplake, sales_parquet: Path, where: str
) -> None:
    args = ["create-table", "shop.t", "--from-parquet", str(sales_parquet)]
    args = ["--option", "bucket", *args] if where == "group" else [*args, "--option", "bucket"]
    result = snaplake(*args, expect=EXIT_USAGE)
    assert "'bucket' has no value: write --option bucket=VALUE" in result.stderr
    assert "(no '=')" not in result.stderr


def test_an_item_without_a_key_is_not_echoed(snaplake: Snaplake) -> None:
    result = snaplake("--option", "Hunter2Secret/x", "databases", expect=EXIT_USAGE)
    assert "Hunter2Secret" not in result.stderr
    assert "no '='" in result.stderr


def test_create_table_refuses_a_fields_option_naming_no_column(
    snaplake: Snaplake, sales_parquet: Path, warehouse: str
) -> None:
    """Issue 18 item 3: the typo was stored (exit 0) and the sums silently lost."""
    result = snaplake(
        "create-table", "shop.t", "--from-parquet", str(sales_parquet),
        "--primary-keys", "id", "--option", "bucket=1", "--option", "merge-engine=aggregation",
        "--option", "fields.amuont.aggregate-function=sum", expect=1,
    )  # fmt: skip
    assert "'fields.amuont.aggregate-function' names column 'amuont'" in result.stderr
    assert "did you mean 'amount'" in result.stderr
    assert not list(Path(warehouse).rglob("schema-0"))


def test_a_refused_widening_is_short_and_says_what_to_do(
    snaplake: Snaplake, sales_table: str
) -> None:
    result = snaplake("alter-table", sales_table, "--update-column-type", "id int", expect=1)
    line = result.stderr.strip()
    assert "BIGINT cannot become INT" in line
    assert "BIGINT widens only to DECIMAL(p, s) with p - s >= 19" in line
    assert line.endswith("add a column of the new type, fill it and drop this one"), line
    assert len(line) < 300, len(line)


def test_write_help_says_primary_key_tables_upsert(snaplake: Snaplake) -> None:
    out = snaplake("write", "--help").stdout
    assert "Append the rows" not in out
    assert "upserts" in out


def test_other_pairs_without_a_value_are_named(snaplake: Snaplake, sales_table: str) -> None:
    result = snaplake("alter-table", sales_table, "--rename-column", "city", expect=EXIT_USAGE)
    assert "'city' has no value: write --rename-column city=VALUE" in result.stderr
