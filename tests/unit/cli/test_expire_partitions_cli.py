"""``snaplake expire-partitions TABLE [--dry-run]``."""

from __future__ import annotations

import pyarrow as pa
from click.testing import CliRunner
from tests.helpers import write_and_commit
from tests.unit.cli.runner import Snaplake

from snaplake.catalog import FileSystemCatalog
from snaplake.cli import cli

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string())])


def _events(warehouse: str, options: dict[str, str]) -> None:
    table = FileSystemCatalog(warehouse).create_table(
        "shop.events", schema=SCHEMA, partition_keys=["dt"], options=options
    )
    # Far past and far future: the real clock decides nothing here.
    data = {"id": [1, 2, 3, 4], "dt": ["2001-01-01", "2001-01-02", "2999-01-01", "2999-01-01"]}
    write_and_commit(table, pa.table(data, schema=SCHEMA))


def test_help_lists_the_command() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert "expire-partitions" in result.stdout


def test_dry_run_then_expire(snaplake: Snaplake, warehouse: str) -> None:
    _events(warehouse, {"partition.expiration-time": "7 d"})
    plan = snaplake.json("expire-partitions", "shop.events", "--dry-run")
    assert plan["dry_run"] is True and plan["strategy"] == "values-time"
    assert plan["partitions"] == [{"dt": "2001-01-01"}, {"dt": "2001-01-02"}]
    assert plan["files_deleted"] == 2 and plan["rows_deleted"] == 2
    assert len(snaplake.json("snapshots", "shop.events")) == 1
    done = snaplake.json("expire-partitions", "shop.events")
    assert done["dry_run"] is False and done["partitions"] == plan["partitions"]
    assert done["snapshot_ids"] == [2]
    rows = snaplake.json("read", "shop.events")
    assert sorted(r["id"] for r in rows) == [3, 4]
    assert "dropped 0 partition(s)" in snaplake("expire-partitions", "shop.events").stdout


def test_a_table_without_expiration_is_left_alone(snaplake: Snaplake, warehouse: str) -> None:
    _events(warehouse, {})
    out = snaplake("expire-partitions", "shop.events").stdout
    assert "partitions never expire here" in out
    assert len(snaplake.json("snapshots", "shop.events")) == 1


def test_no_such_table(snaplake: Snaplake) -> None:
    snaplake("expire-partitions", "shop.nope", expect=4)
