"""The ``snaplake`` commands in-process (click CliRunner) on a local warehouse."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from tests.unit.cli.runner import Snaplake

from snaplake.catalog import FileSystemCatalog
from snaplake.cli import cli
from snaplake.cli.output import JsonOutput
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.errors import CommitConflictError, CommitRetriesExhaustedError
from snaplake.table import Table


def _data_files(warehouse: str) -> list[str]:
    return sorted(
        name
        for _, _, names in os.walk(Path(warehouse) / "shop.db" / "sales")
        for name in names
        if name.startswith("data-")
    )


# --- catalog ---------------------------------------------------------------------------


def test_help_lists_every_command_without_a_warehouse() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in ("databases", "tables", "create-table", "write", "read", "snapshots", "files",
                 "merge-manifests", "expire-snapshots", "remove-orphan-files", "compact", "tag",
                 "rollback", "daemon"):  # fmt: skip
        assert name in result.stdout


def test_missing_warehouse_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["databases"])
    assert result.exit_code == 2
    assert "SNAPLAKE_WAREHOUSE" in result.stderr


def test_warehouse_from_environment(
    monkeypatch: pytest.MonkeyPatch, sales_table: str, warehouse: str
) -> None:
    monkeypatch.setenv("SNAPLAKE_WAREHOUSE", warehouse)
    result = CliRunner().invoke(cli, ["--output", "json", "databases"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [{"database": "shop"}]


def test_databases_and_tables(snaplake: Snaplake, sales_table: str) -> None:
    assert "shop" in snaplake("databases").stdout
    assert snaplake.json("tables", "shop") == [{"table": "shop.sales", "name": "sales"}]
    result = snaplake("tables", "nope", expect=4)
    assert result.stdout == ""
    assert result.stderr.startswith(
        f"error: database 'nope' does not exist in {snaplake.warehouse}; 'snaplake databases'"
    )


def test_create_table_takes_the_parquet_schema(
    snaplake: Snaplake, sales_parquet: Path, warehouse: str
) -> None:
    doc = snaplake.json("create-table", "shop.sales", "--from-parquet", str(sales_parquet),
                        "--partition-keys", "day", "--option", "bucket=-1",
                        "--option", "snapshot.num-retained.min=3")  # fmt: skip
    assert isinstance(doc, dict)
    assert doc["columns"] == ["0:id BIGINT", "1:city STRING", "2:amount DOUBLE", "3:day DATE"]
    assert doc["partition_keys"] == ["day"]
    assert doc["primary_keys"] == []
    assert doc["location"].endswith("shop.db/sales")
    assert doc["options"]["snapshot.num-retained.min"] == "3"
    table = FileSystemCatalog(warehouse).get_table("shop.sales")
    assert table.arrow_schema.names == ["id", "city", "amount", "day"]
    again = snaplake("create-table", "shop.sales", "--from-parquet", str(sales_parquet), expect=1)
    assert "already exists" in again.stderr


def test_create_table_bad_identifier_and_option(snaplake: Snaplake, sales_parquet: Path) -> None:
    result = snaplake("create-table", "nodot", "--from-parquet", str(sales_parquet), expect=2)
    assert "database.table" in result.stderr
    result = snaplake("create-table", "a.b", "--from-parquet", str(sales_parquet),
                      "--option", "bucket", expect=2)  # fmt: skip
    assert "KEY=VALUE" in result.stderr


# --- write / read ----------------------------------------------------------------------


def test_write_parquet_and_csv_in_one_commit(snaplake: Snaplake, sales_table: str) -> None:
    history = snaplake.json("snapshots", sales_table)
    assert isinstance(history, list) and len(history) == 1
    doc = snaplake.json("write", sales_table, "--commit-user", "loader", str(
        Path(snaplake.warehouse).parent / "more.csv"))  # fmt: skip
    assert isinstance(doc, dict)
    assert doc["snapshot_id"] == 2 and doc["rows"] == 2 and doc["files"] == 1
    assert doc["duration_s"] >= doc["commit_duration_s"] >= 0
    rows = snaplake.json("read", sales_table)
    assert isinstance(rows, list)
    assert sorted(r["id"] for r in rows) == [1, 2, 3, 4, 5, 5, 6, 6]
    oslo = next(r for r in rows if r["id"] == 5)
    assert oslo == {"id": 5, "city": "Oslo", "amount": 3.5, "day": "2024-01-03"}
    assert next(r for r in rows if r["id"] == 6)["amount"] is None


def test_write_text_summary(snaplake: Snaplake, sales_table: str, sales_parquet: Path) -> None:
    out = snaplake("write", sales_table, str(sales_parquet)).stdout
    assert "snapshot id:" in out and "rows:            4" in out and "duration:" in out


def test_write_schema_mismatch_commits_nothing_and_leaves_no_files(
    snaplake: Snaplake, sales_table: str, tmp_path: Path, warehouse: str
) -> None:
    before = _data_files(warehouse)
    bad = tmp_path / "bad.csv"
    bad.write_text("id,city,amount,day,extra\n9,X,1.0,2024-02-01,oops\n")
    result = snaplake("write", sales_table, str(Path(warehouse).parent / "sales.parquet"),
                      str(bad), expect=1)  # fmt: skip
    assert result.stderr.startswith(f"error: {bad}: data columns do not match table columns")
    assert len(result.stderr.strip().splitlines()) == 1
    assert len(snaplake.json("snapshots", sales_table)) == 1
    assert _data_files(warehouse) == before


@pytest.mark.parametrize(
    "error",
    [
        CommitConflictError("someone deleted the files"),
        CommitRetriesExhaustedError("lost the race 11 times", attempts=11, elapsed_s=1.0),
    ],
)
def test_write_commit_failure_exits_3_and_deletes_new_files(
    snaplake: Snaplake,
    sales_table: str,
    sales_parquet: Path,
    warehouse: str,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
) -> None:
    before = _data_files(warehouse)

    def fail(self: FileStoreCommit, *args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(FileStoreCommit, "commit", fail)
    result = snaplake("write", sales_table, str(sales_parquet), expect=3)
    assert result.stdout == ""
    assert result.stderr == f"error: {error}\n"
    assert _data_files(warehouse) == before


def test_read_filters_columns_limit_snapshot(snaplake: Snaplake, sales_table: str) -> None:
    rows = snaplake.json("read", sales_table, "--filter", "amount > 5 and city = 'Berlin'")
    assert rows == [{"id": 3, "city": "Berlin", "amount": 9.25, "day": "2024-01-02"}]
    rows = snaplake.json("read", sales_table, "--columns", "id", "--filter", "day >= 2024-01-02",
                         "--filter", "amount is not null")  # fmt: skip
    assert rows == [{"id": 3}, {"id": 5}]
    rows = snaplake.json("read", sales_table, "--filter", "city in ('Rome', 'Oslo')")
    assert sorted(r["id"] for r in rows) == [4, 5]
    assert len(snaplake.json("read", sales_table, "--limit", "2")) == 2
    assert len(snaplake.json("read", sales_table, "--snapshot", "1")) == 6


def test_read_text_is_a_table(snaplake: Snaplake, sales_table: str) -> None:
    out = snaplake("read", sales_table, "--filter", "id <= 2").stdout
    lines = out.splitlines()
    assert lines[0].split() == ["id", "city", "amount", "day"]
    assert lines[1].split() == ["1", "Berlin", "1.5", "2024-01-01"]
    assert all(line == line.rstrip() for line in lines)


def test_read_text_caps_rows_without_limit(
    snaplake: Snaplake, sales_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("snaplake.cli.context.TEXT_ROW_CAP", 3)
    out = snaplake("read", sales_table).stdout
    assert len(out.splitlines()) == 1 + 3 + 1
    assert "pass --limit N" in out


def test_read_to_parquet(snaplake: Snaplake, sales_table: str, tmp_path: Path) -> None:
    target = tmp_path / "out.parquet"
    doc = snaplake.json("read", sales_table, "--columns", "id,city", "--to-parquet", str(target))
    assert doc == {"table": sales_table, "rows": 6, "path": str(target)}
    assert pq.read_table(target).column_names == ["id", "city"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--filter", "nope = 1"], "unknown column 'nope'"),
        (["--filter", "amount >> 5"], "not a valid double value"),
        (["--filter", "city like 'B%'"], "cannot read filter term"),
        (["--columns", "id,zzz"], "unknown column 'zzz'"),
    ],
)
def test_read_bad_arguments_exit_2(
    snaplake: Snaplake, sales_table: str, args: list[str], message: str
) -> None:
    result = snaplake("read", sales_table, *args, expect=2)
    assert message in result.stderr


def test_not_found_exit_4(snaplake: Snaplake, sales_table: str) -> None:
    result = snaplake("read", "shop.nope", expect=4)
    assert result.stderr.startswith("error: table shop.nope does not exist")
    result = snaplake("read", sales_table, "--snapshot", "9", expect=4)
    assert result.stderr.startswith("error: snapshot 9 does not exist")
    assert "Traceback" not in result.stderr
    snaplake("files", sales_table, "--snapshot", "9", expect=4)
    snaplake("snapshots", "shop.nope", expect=4)


def test_debug_log_level_prints_the_traceback(snaplake: Snaplake, sales_table: str) -> None:
    result = snaplake("--log-level", "debug", "read", sales_table, "--snapshot", "9", expect=4)
    assert "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: snapshot 9")


def test_catalog_option_values_are_never_printed(snaplake: Snaplake) -> None:
    result = snaplake("--option", "s3.secret-key:hunter2", "databases", expect=2)
    assert "hunter2" not in result.stderr + result.stdout


# --- history ---------------------------------------------------------------------------


def test_snapshots_history(snaplake: Snaplake, sales_table: str, sales_parquet: Path) -> None:
    for _ in range(4):
        snaplake("write", sales_table, str(sales_parquet))
    snaplake("compact", sales_table)  # 5 files in each of two partitions: due
    history = snaplake.json("snapshots", sales_table)
    assert isinstance(history, list)
    assert [h["kind"] for h in history] == ["APPEND"] * 5 + ["COMPACT"]
    first, second, compacted = history[0], history[1], history[-1]
    assert first["user"] == "snaplake-cli" and first["identifier"] is None
    assert first["time"].endswith("Z") and first["time"][10] == "T"
    assert (first["records_added"], first["total_records"]) == (6, 6)
    assert (first["files_added"], first["files_deleted"]) == (3, 0)
    assert (second["records_added"], second["total_records"]) == (4, 10)
    assert (second["files_added"], second["files_deleted"]) == (2, 0)
    assert (compacted["files_added"], compacted["files_deleted"]) == (2, 10)
    assert compacted["records_added"] == 0 and compacted["total_records"] == 22
    text = snaplake("snapshots", sales_table, "--limit", "1").stdout.splitlines()
    assert len(text) == 2 and text[1].split()[:3] == ["6", compacted["time"], "COMPACT"]


def test_files_of_a_snapshot(snaplake: Snaplake, sales_table: str) -> None:
    files = snaplake.json("files", sales_table)
    assert isinstance(files, list)
    assert sorted(f["partition"] for f in files) == [
        "day=2024-01-01", "day=2024-01-02", "day=2024-01-03",
    ]  # fmt: skip
    assert sum(f["rows"] for f in files) == 6
    assert {f["source"] for f in files} == {"APPEND"}
    assert all(f["level"] == 0 and f["bucket"] == 0 for f in files)
    assert all(Path(f["path"]).is_file() and f["size_bytes"] > 0 for f in files)
    out = snaplake("files", sales_table, "--snapshot", "1").stdout
    assert out.splitlines()[0].split() == [
        "partition", "bucket", "file", "rows", "size", "level", "source",
    ]  # fmt: skip
    assert "KiB" in out or " B " in out


# --- maintenance -----------------------------------------------------------------------


def test_merge_manifests(snaplake: Snaplake, sales_table: str, sales_parquet: Path) -> None:
    snaplake("write", sales_table, str(sales_parquet))
    doc = snaplake.json("merge-manifests", sales_table)
    assert doc["merged"] is False and doc["snapshot_id"] is None
    doc = snaplake.json("merge-manifests", sales_table, "--full")
    assert doc["merged"] is True and doc["snapshot_id"] == 3
    assert doc["manifests_before"] == 2 and doc["manifests_after"] == 1
    assert "nothing to merge" in snaplake("merge-manifests", sales_table).stdout


def test_compact_partition(snaplake: Snaplake, sales_table: str, sales_parquet: Path) -> None:
    for _ in range(5):
        snaplake("write", sales_table, str(sales_parquet))
    doc = snaplake.json("compact", sales_table, "--partition", "day=2024-01-03")
    assert doc["compacted"] is False  # only one file there
    doc = snaplake.json("compact", sales_table, "--partition", "day=2024-01-01")
    assert isinstance(doc, dict)
    assert doc["compacted"] is True and doc["files_before"] == 6 and doc["files_after"] == 1
    snaplake("compact", sales_table, "--partition", "city=Rome", expect=2)
    snaplake("compact", sales_table, "--partition", "day=notadate", expect=2)


def test_compact_conflict_exits_3(
    snaplake: Snaplake, sales_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def conflict(self: Table, **kwargs: object) -> None:
        raise CommitConflictError(
            "file data-x was deleted by snapshot 7", conflicting_snapshot_ids=[7]
        )

    monkeypatch.setattr(Table, "compact", conflict)
    result = snaplake("compact", sales_table, expect=3)
    assert result.stderr == "error: file data-x was deleted by snapshot 7\n"


def test_expire_snapshots_plans_then_executes(
    snaplake: Snaplake, sales_parquet: Path, warehouse: str
) -> None:
    snaplake("create-table", "shop.sales", "--from-parquet", str(sales_parquet),
             "--option", "snapshot.num-retained.min=1",
             "--option", "snapshot.num-retained.max=2")  # fmt: skip
    for _ in range(4):
        snaplake("write", "shop.sales", str(sales_parquet))
    plan = snaplake.json("expire-snapshots", "shop.sales")
    assert isinstance(plan, dict)
    assert plan["dry_run"] is True and plan["expired_snapshot_ids"] == [1, 2]
    assert len(snaplake.json("snapshots", "shop.sales")) == 4
    assert "pass --execute" in snaplake("expire-snapshots", "shop.sales").stdout
    done = snaplake.json("expire-snapshots", "shop.sales", "--execute")
    assert done["dry_run"] is False and done["expired_snapshot_ids"] == [1, 2]
    assert [s["id"] for s in snaplake.json("snapshots", "shop.sales")] == [3, 4]
    snaplake("read", "shop.sales", "--snapshot", "1", expect=4)


def test_remove_orphan_files(snaplake: Snaplake, sales_table: str, warehouse: str) -> None:
    orphan = (
        Path(warehouse) / "shop.db" / "sales" / "day=19723" / "bucket-0" / "data-orphan.parquet"
    )
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"x" * 10)
    os.utime(orphan, (1_000_000_000, 1_000_000_000))
    plan = snaplake.json("remove-orphan-files", sales_table, "--older-than", "1d")
    assert isinstance(plan, dict)
    assert plan["dry_run"] is True and plan["orphan_files"] == [str(orphan)]
    assert plan["files_deleted"] == 0 and orphan.exists()
    done = snaplake.json("remove-orphan-files", sales_table, "--older-than", "12h", "--execute")
    assert done["files_deleted"] == 1 and not orphan.exists()
    assert len(snaplake.json("read", sales_table)) == 6
    result = snaplake("remove-orphan-files", sales_table, "--older-than", "5", expect=2)
    assert "no unit" in result.stderr


def test_tags(snaplake: Snaplake, sales_table: str, sales_parquet: Path) -> None:
    snaplake("write", sales_table, str(sales_parquet))
    created = snaplake.json("tag", "create", sales_table, "v1", "--snapshot", "1")
    assert created["name"] == "v1" and created["snapshot_id"] == 1
    snaplake("tag", "create", sales_table, "latest")
    tags = snaplake.json("tag", "list", sales_table)
    assert [(t["name"], t["snapshot_id"]) for t in tags] == [("v1", 1), ("latest", 2)]
    snaplake("tag", "create", sales_table, "v1", expect=1)
    snaplake("tag", "create", sales_table, "v9", "--snapshot", "9", expect=4)
    snaplake("tag", "delete", sales_table, "latest")
    snaplake("tag", "delete", sales_table, "latest", expect=4)
    assert "v1" in snaplake("tag", "list", sales_table).stdout


def test_rollback_plans_then_executes(
    snaplake: Snaplake, sales_table: str, sales_parquet: Path
) -> None:
    for _ in range(2):
        snaplake("write", sales_table, str(sales_parquet))
    snaplake("tag", "create", sales_table, "t3", "--snapshot", "3")
    plan = snaplake.json("rollback", sales_table, "--to", "1")
    assert plan == {
        "table": sales_table, "dry_run": True, "target": "1", "snapshot_id": 1,
        "snapshots_deleted": [3, 2], "tags_deleted": ["t3"], "restored_from_tag": False,
    }  # fmt: skip
    assert len(snaplake.json("snapshots", sales_table)) == 3
    snaplake("rollback", sales_table, "--to", "9", expect=4)
    snaplake("rollback", sales_table, "--to", "nosuchtag", expect=4)
    done = snaplake.json("rollback", sales_table, "--to", "1", "--execute")
    assert isinstance(done, dict)
    assert done["snapshot_id"] == 1 and done["snapshots_deleted"] == [3, 2]
    assert done["tags_deleted"] == ["t3"]
    assert len(snaplake.json("read", sales_table)) == 6


def test_rollback_to_a_tag(snaplake: Snaplake, sales_table: str, sales_parquet: Path) -> None:
    snaplake("tag", "create", sales_table, "good")
    snaplake("write", sales_table, str(sales_parquet))
    out = snaplake("rollback", sales_table, "--to", "good", "--execute").stdout
    assert "rolled back to snapshot 1" in out
    assert [s["id"] for s in snaplake.json("snapshots", sales_table)] == [1]


# --- daemon ----------------------------------------------------------------------------


def test_daemon_check_config(snaplake: Snaplake, tmp_path: Path, warehouse: str) -> None:
    config = tmp_path / "snaplake.toml"
    config.write_text(f'[[warehouse]]\nuri = "{warehouse}"\ntables = ["*"]\n')
    result = snaplake("daemon", "--config", str(config), "--check-config")
    assert warehouse in result.stdout
    config.write_text("[[warehouse]]\nnope = 1\n")
    result = snaplake("daemon", "--config", str(config), "--check-config", expect=2)
    assert "invalid configuration" in result.stderr
    snaplake("daemon", "--config", str(tmp_path / "missing.toml"), expect=2)


def test_closed_stdout_exits_1_quietly(
    snaplake: Snaplake, sales_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: JsonOutput, document: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(JsonOutput, "_emit", broken)
    result = snaplake("--output", "json", "read", sales_table, expect=1)
    assert "Traceback" not in result.stderr
