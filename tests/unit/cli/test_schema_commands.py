"""``snaplake alter-table`` and ``snaplake schemas`` in-process on a local warehouse."""

from __future__ import annotations

from tests.unit.cli.runner import Snaplake

from snaplake.cli.schema import parse_add_column
from snaplake.store.format.schema_change import AddColumn, MoveType


def test_alter_table_applies_every_change_as_one_schema(snaplake: Snaplake, sales_table: str):
    result = snaplake("alter-table", sales_table,
                      "--add-column", "delay_reason string",
                      "--add-column", "rank int FIRST",
                      "--rename-column", "city=town",
                      "--update-column-type", "id decimal(20, 0)",
                      "--column-comment", "amount=euros",
                      "--set-option", "snapshot.num-retained.min=20",
                      "--comment", "sales")  # fmt: skip
    assert "schema 1" in result.stdout
    doc = snaplake.json("schemas", sales_table)
    assert [d["schema_id"] for d in doc] == [0, 1]
    assert doc[1]["columns"].startswith("5:rank INT, 0:id DECIMAL(20, 0), 1:town STRING")
    assert "2:amount DOUBLE -- euros" in doc[1]["columns"]
    assert doc[1]["options"]["snapshot.num-retained.min"] == "20"
    rows = snaplake.json("read", sales_table)
    assert {r["town"] for r in rows} == {"Berlin", "Paris", "Rome", "Oslo"}
    assert all(r["delay_reason"] is None and r["rank"] is None for r in rows)
    assert {str(r["id"]) for r in rows} == {"1", "2", "3", "4", "5", "6"}
    # time travel reads (and filters) in the snapshot's schema
    old = snaplake.json("read", sales_table, "--snapshot", "1", "--filter", "city = 'Rome'")
    assert old == [{"id": 4, "city": "Rome", "amount": None, "day": "2024-01-02"}]


def test_refused_changes_exit_1_and_write_nothing(snaplake: Snaplake, sales_table: str):
    for args in (["--drop-column", "day"], ["--update-column-type", "amount float"],
                 ["--add-column", "x int not null"], ["--rename-column", "nope=x"]):  # fmt: skip
        result = snaplake("alter-table", sales_table, *args, expect=1)
        assert result.stderr.startswith("error: ")
    assert [d["schema_id"] for d in snaplake.json("schemas", sales_table)] == [0]
    snaplake("alter-table", sales_table, expect=2)  # no change given
    snaplake("alter-table", "shop.nope", "--drop-column", "x", expect=4)
    snaplake("alter-table", sales_table, "--rename-column", "novalue", expect=2)


def test_drop_and_options(snaplake: Snaplake, sales_table: str):
    snaplake("alter-table", sales_table, "--drop-column", "amount", "--set-option", "k=v")
    snaplake(
        "alter-table", sales_table, "--remove-option", "k", "--not-null", "city", expect=1
    )  # fmt: skip  (NULL -> NOT NULL refused by default)
    snaplake("alter-table", sales_table, "--remove-option", "k")
    rows = snaplake.json("read", sales_table)
    assert all("amount" not in r for r in rows)


def test_parse_add_column():
    change = parse_add_column("c decimal(10, 2) AFTER id")
    assert isinstance(change, AddColumn)
    assert change.data_type.sql() == "DECIMAL(10, 2)"
    assert change.move is not None
    assert change.move.type is MoveType.AFTER
    assert change.move.reference_field_name == "id"
    plain = parse_add_column("  c   varchar(3) ")
    assert isinstance(plain, AddColumn)
    assert plain.move is None
    assert plain.data_type.sql() == "VARCHAR(3)"
