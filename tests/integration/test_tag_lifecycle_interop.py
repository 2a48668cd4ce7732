"""Tags snaplake creates automatically are Paimon's: Java Paimon 0.9 and pypaimon 2.1.0
time-travel to them by name; tags pypaimon writes with a retention expire in snaplake."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from tests.helpers import SCHEMA, assert_java_rows, assert_same_rows, rows, write_and_commit
from tests.oracle import PaimonOracle, requires_paimon
from tests.oracle.java_paimon import JavaPaimon, requires_java_paimon

from snaplake.catalog import FileSystemCatalog
from snaplake.options.tag_options import local_time
from snaplake.table import Table

pytestmark = [pytest.mark.integration, requires_paimon]

T0 = datetime(2026, 11, 26, tzinfo=UTC)
OPTIONS = {
    "tag.automatic-creation": "process-time",
    "tag.creation-period": "hourly",
    "tag.default-time-retained": "1 d",
    "tag.num-retained-max": "3",
}


def _retime(table: Table, step: timedelta) -> None:
    """Snapshot ``i`` was committed at ``T0 + (i - 1) * step`` (a fixed clock)."""
    for snap in table.snapshots():
        when = int((T0 + (snap.id - 1) * step).timestamp() * 1000)
        new = dataclasses.replace(snap, time_millis=when)
        table.file_io.write_bytes(
            table.paths.snapshot_path(snap.id), new.to_bytes(), overwrite=True
        )


@pytest.fixture
def tagged(tmp_path) -> tuple[PaimonOracle, Table, dict[str, int]]:
    """``db.t`` written 6 times 50 min apart, auto-tagged hourly (3 tags kept, 1 d retention)."""
    wh = tmp_path / "wh"
    table = FileSystemCatalog(str(wh)).create_table(
        "db.t", schema=SCHEMA, partition_keys=["month"], options=OPTIONS
    )
    for i in range(6):
        write_and_commit(table, rows(i * 10, 10))
    _retime(table, timedelta(minutes=50))
    table.create_tag_automatically(now=T0 + timedelta(hours=6))
    tags = {t.name: t.snapshot_id for t in table.list_tags()}
    assert len(tags) == 3
    return PaimonOracle(wh), table, tags


def test_pypaimon_time_travels_to_the_automatic_tags(tagged):
    oracle, table, tags = tagged
    for name, sid in tags.items():
        expected = rows(0, sid * 10)
        assert_same_rows(table.to_arrow(tag=name), expected)
        assert_same_rows(expected, oracle.read("db.t", tag=name))
    raw = orjson.loads(table.file_io.read_bytes(table.paths.tag_path(next(iter(tags)))))
    assert raw["tagTimeRetained"] == 86400.0 and len(raw["tagCreateTime"]) >= 5


@requires_java_paimon
def test_java_paimon_time_travels_to_the_automatic_tags(tagged):
    _, table, tags = tagged
    java = JavaPaimon()
    for name, sid in tags.items():
        got = java.read(table.root, options={"scan.tag-name": name})
        assert_java_rows(got.rows, rows(0, sid * 10), context=f"tag {name}")


def test_a_tag_pypaimon_writes_with_retention_expires_in_snaplake(tmp_path):
    wh = tmp_path / "wh"
    oracle = PaimonOracle(wh)
    oracle.create_table("db.p", SCHEMA, partition_keys=["month"],
                        options={"tag.default-time-retained": "1 d"})  # fmt: skip
    oracle.write("db.p", rows(0, 20), commits=2)
    oracle.create_tag("db.p", "short", snapshot_id=1, time_retained="30 min")
    oracle.create_tag("db.p", "plain", snapshot_id=2)
    table = FileSystemCatalog(str(wh)).get_table("db.p")
    info = {t.name: t for t in table.list_tags()}
    assert info["short"].time_retained == timedelta(minutes=30)
    assert info["plain"].time_retained is None
    assert table.expire_tags(now=datetime.now(UTC)) == []
    assert table.expire_tags(now=datetime.now(UTC) + timedelta(minutes=31)) == ["short"]
    assert_same_rows(table.to_arrow(tag="plain"), oracle.read("db.p", tag="plain"))


def test_snaplake_auto_tags_a_table_pypaimon_writes(tmp_path):
    wh = tmp_path / "wh"
    oracle = PaimonOracle(wh)
    oracle.create_table("db.w", SCHEMA, partition_keys=["month"],
                        options={"tag.automatic-creation": "process-time",
                                 "tag.creation-period": "hourly"})  # fmt: skip
    oracle.write("db.w", rows(0, 30), commits=3)
    table = FileSystemCatalog(str(wh)).get_table("db.w")
    created = table.create_tag_automatically()
    first = table.snapshot(1)
    hour = local_time(first.time_millis).replace(minute=0, second=0, microsecond=0)
    expected = (hour - timedelta(hours=1)).strftime("%Y-%m-%d %H")
    assert [(t.name, t.snapshot_id) for t in created][:1] == [(expected, 1)]
    oracle.write("db.w", rows(30, 10), commits=1)  # pypaimon keeps writing after the tag
    assert_same_rows(table.to_arrow(tag=expected), oracle.read("db.w", tag=expected))
    assert oracle.read("db.w").num_rows == 40
