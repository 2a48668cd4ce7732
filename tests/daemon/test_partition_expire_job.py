"""The daemon's ``expire_partitions`` task: the table's own options, the check interval, metrics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry
from tests.helpers import write_and_commit

from snaplake.catalog import FileSystemCatalog
from snaplake.daemon.config import Task, parse_config
from snaplake.daemon.jobs import expire_partitions_job, run_job
from snaplake.errors import InvalidOptionError
from snaplake.metrics import SnaplakeMetrics
from snaplake.options import CoreOptions, OptionStatus
from snaplake.options.registry import lookup_option
from snaplake.store.format.schema_change import SchemaChange

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string())])
NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


def _day(days_ago: float) -> str:
    return (NOW.astimezone() - timedelta(days=days_ago)).strftime("%Y-%m-%d")


def _table(tmp_path, options, name="db.t"):
    table = FileSystemCatalog(str(tmp_path / "wh")).create_table(
        name, schema=SCHEMA, partition_keys=["dt"], options=options
    )
    write_and_commit(table, pa.table({"id": [1, 2, 3], "dt": [_day(10), _day(5), _day(0)]},
                                     schema=SCHEMA))  # fmt: skip
    return table


def test_the_check_interval_gates_the_daemon_not_the_api(tmp_path):
    table = _table(
        tmp_path,
        {"partition.expiration-time": "7 d", "partition.expiration-check-interval": "1 h"},
    )
    options = CoreOptions(table.options)
    checks: dict[str, datetime] = {}
    first = expire_partitions_job(table, options=options, now=NOW, last_checks=checks)
    assert first.checked and first.acted and checks == {"db.t": NOW}
    assert first.expire is not None
    assert [p.spec["dt"] for p in first.expire.partitions] == [_day(10)]
    # Three days later the 5-day-old partition is 8 days old, but the interval has not passed.
    later = NOW + timedelta(days=3)
    checks["db.t"] = later - timedelta(minutes=59)
    assert not expire_partitions_job(table, options=options, now=later, last_checks=checks).checked
    # The API always checks.
    assert table.expire_partitions(dry_run=True, now=later).partitions_expired == 1
    checks["db.t"] = later - timedelta(hours=1, seconds=1)
    due = expire_partitions_job(table, options=options, now=later, last_checks=checks)
    assert due.checked and due.expire is not None
    assert [p.spec["dt"] for p in due.expire.partitions] == [_day(5)]
    assert sorted(r["dt"] for r in table.to_arrow().to_pylist()) == [_day(0)]


def test_an_interval_of_zero_checks_every_run(tmp_path):
    table = _table(
        tmp_path,
        {"partition.expiration-time": "7 d", "partition.expiration-check-interval": "0 s"},
    )
    options = CoreOptions(table.options)
    checks: dict[str, datetime] = {}
    assert expire_partitions_job(table, options=options, now=NOW, last_checks=checks).acted
    again = expire_partitions_job(table, options=options, now=NOW, last_checks=checks)
    assert again.checked and not again.acted


def test_tables_without_expiration_are_left_alone(tmp_path):
    table = _table(tmp_path, {})
    result = expire_partitions_job(table, options=CoreOptions(table.options), now=NOW,
                                   last_checks={})  # fmt: skip
    assert not result.checked and result.summary() == "not due"
    assert table.latest_snapshot().id == 1


def test_the_job_boundary_counts_expired_partitions(tmp_path):
    table = _table(tmp_path, {"partition.expiration-time": "4 d"})
    metrics = SnaplakeMetrics(registry=CollectorRegistry())
    config = parse_config({"warehouse": [{"uri": str(tmp_path / "wh")}]})
    assert config.tasks[Task.EXPIRE_PARTITIONS].enabled
    result = run_job(
        lambda: expire_partitions_job(
            table, options=config.effective_options(table.options), now=NOW, last_checks={}
        ),
        table="db.t", task=Task.EXPIRE_PARTITIONS, metrics=metrics,
    )  # fmt: skip
    assert result is not None and result.acted
    assert metrics.partitions_expired.labels("db.t")._value.get() == 2
    runs = metrics.maintenance_runs.labels("db.t", "expire_partitions", "success")
    assert runs._value.get() == 1


@pytest.mark.parametrize(
    "options",
    [{"partition.expiration-time": "30 min"},  # the check interval's default is 1 h
     {"partition.expiration-time": "1 d", "partition.expiration-check-interval": "2 d"}],
)  # fmt: skip
def test_a_retention_shorter_than_the_check_interval_is_refused_at_create_and_alter(
    tmp_path, options
):
    wh = tmp_path / "wh"
    catalog = FileSystemCatalog(str(wh))
    with pytest.raises(InvalidOptionError) as err:
        catalog.create_table("db.t", schema=SCHEMA, partition_keys=["dt"], options=options)
    assert err.value.key == "partition.expiration-time"
    assert not wh.exists() or not any(wh.rglob("*"))
    table = catalog.create_table("db.t", schema=SCHEMA, partition_keys=["dt"])
    with pytest.raises(InvalidOptionError):
        catalog.alter_table("db.t", [SchemaChange.set_option(k, v) for k, v in options.items()])
    assert table.schema_manager.list_schema_ids() == [0]
    # Equal is accepted, and so is any retention with an interval of zero (every run checks).
    catalog.alter_table("db.t", [SchemaChange.set_option("partition.expiration-time", "1 h")])
    catalog.alter_table("db.t", [
        SchemaChange.set_option("partition.expiration-check-interval", "0 s"),
        SchemaChange.set_option("partition.expiration-time", "1 min")])  # fmt: skip
    assert table.schema_manager.list_schema_ids() == [0, 1, 2]


@pytest.mark.parametrize(
    "key",
    ["partition.expiration-time", "partition.expiration-check-interval",
     "partition.expiration-strategy", "partition.expiration-max-num",
     "partition.expiration-batch-size", "partition.timestamp-formatter",
     "partition.timestamp-pattern"],
)  # fmt: skip
def test_partition_expiration_options_are_honoured(key):
    """Once refused (issue 24); each has its behaviour test here and in
    tests/unit/compaction/test_partition_expire.py; the README table is the registry's."""
    option = lookup_option(key)
    assert option is not None and option.status is OptionStatus.HONOURED
