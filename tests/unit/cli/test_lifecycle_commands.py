"""``snaplake tags --auto``, ``snaplake expire-tags`` and ``snaplake consumers --expire``."""

from __future__ import annotations

import os
from pathlib import Path

from tests.unit.cli.runner import Snaplake

from snaplake.catalog import FileSystemCatalog


def _table(snaplake: Snaplake, sales_parquet: Path, *options: str) -> None:
    args = [a for o in options for a in ("--option", o)]
    snaplake("create-table", "shop.sales", "--from-parquet", str(sales_parquet), *args)
    snaplake("write", "shop.sales", str(sales_parquet))


def test_tags_auto_creates_paimons_tag_and_lists_it(snaplake, sales_parquet):
    _table(snaplake, sales_parquet, "tag.automatic-creation=batch",
           "tag.batch.customized-name=nightly", "tag.default-time-retained=1 d")  # fmt: skip
    rows = snaplake.json("tags", "shop.sales", "--auto")
    assert [(r["name"], r["snapshot_id"], r["new"], r["retained"]) for r in rows] == [
        ("nightly", 1, "yes", "1 day, 0:00:00")
    ]
    again = snaplake.json("tags", "shop.sales", "--auto")
    assert [r["new"] for r in again] == [""]
    text = snaplake("tags", "shop.sales").stdout
    assert "nightly" in text
    assert snaplake.json("expire-tags", "shop.sales")["expired_tags"] == []


def test_a_table_without_options_is_left_alone(snaplake, sales_parquet):
    _table(snaplake, sales_parquet)
    assert snaplake.json("tags", "shop.sales", "--auto") == []
    assert snaplake.json("expire-tags", "shop.sales") == {"table": "shop.sales", "expired_tags": []}
    assert snaplake.json("consumers", "shop.sales", "--expire") == []


def test_consumers_expire_deletes_idle_ones(snaplake, sales_parquet, warehouse):
    _table(snaplake, sales_parquet, "consumer.expiration-time=1 h")
    table = FileSystemCatalog(warehouse).get_table("shop.sales")
    table.set_consumer("idle", next_snapshot=1)
    table.set_consumer("busy", next_snapshot=1)
    os.utime(table.paths.consumer_path("idle"), (0, 0))
    listed = snaplake.json("consumers", "shop.sales")
    assert [(r["consumer"], r["next_snapshot"], r["lag_snapshots"]) for r in listed] == [
        ("busy", 1, 1), ("idle", 1, 1),
    ]  # fmt: skip
    assert all(r["lag_seconds"] >= 0 for r in listed)
    expired = snaplake.json("consumers", "shop.sales", "--expire")
    assert [(r["consumer"], r["next_snapshot"]) for r in expired] == [("busy", 1)]


def test_contradicting_tag_options_fail_before_anything_is_written(snaplake, sales_parquet):
    result = snaplake(
        "create-table", "shop.sales", "--from-parquet", str(sales_parquet),
        "--option", "tag.automatic-creation=process-time",
        "--option", "tag.creation-period=hourly", "--option", "tag.creation-delay=2 h",
        expect=None,
    )  # fmt: skip
    assert result.exit_code == 1, result.stderr
    assert "tag.creation-delay" in result.stderr
    assert not (Path(snaplake.warehouse) / "shop.db" / "sales").exists()
