"""Java Paimon 0.9 reads a table under the read options snaplake honours: the same rows.

pypaimon 2.1.0 has neither ``incremental-between`` (only ``-timestamp``) nor
``scan.mode = from-file-creation-time`` (it raises "not yet supported"), so
Java 0.9 is the oracle here. Java's batch read drops deletes (``-D``), so its
rows are compared with snaplake's ``+I`` rows.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tests.helpers import assert_java_rows
from tests.oracle.java_paimon import JavaPaimon, requires_java_paimon

from snaplake.catalog import FileSystemCatalog
from snaplake.table import Table

pytestmark = [pytest.mark.integration, requires_java_paimon]

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _table(tmp_path: Path, *, primary_key: bool) -> Table:
    catalog = FileSystemCatalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    return catalog.create_table(
        "db.t", schema=SCHEMA, primary_keys=["id"] if primary_key else (),
        options={"bucket": "2" if primary_key else "-1"},
    )  # fmt: skip


def _rows(ids: range, tag: str) -> pa.Table:
    return pa.table({"id": list(ids), "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def _inserted(changes: pa.Table) -> pa.Table:
    """The ``+I`` rows of a change read, without the change columns."""
    return changes.filter(pc.equal(changes["_row_kind"], "+I")).select(SCHEMA.names)


def _next_millisecond() -> int:
    start = time.time_ns() // 1_000_000
    while time.time_ns() // 1_000_000 <= start:
        time.sleep(0.0005)
    return start + 1


@pytest.mark.parametrize("compact", [False, True])
def test_java_reads_the_diff_of_two_tags_of_a_primary_key_table(tmp_path, compact):
    table = _table(tmp_path, primary_key=True)
    table.write(_rows(range(20), "a"))
    table.create_tag("start", snapshot_id=1)
    table.write(_rows(range(10, 30), "b"))  # 10..19 change, 20..29 are new
    table.write(_rows(range(3), "a"), row_kinds=["-D"] * 3)
    if compact:
        table.compact(full=True)
    end = table.latest_snapshot()
    assert end is not None
    table.create_tag("end", snapshot_id=end.id)
    ours = table.to_arrow(options={"incremental-between": "start,end"})
    assert sorted(ours["_row_kind"].to_pylist()).count("-D") == 3
    assert _inserted(ours).num_rows == 20
    got = JavaPaimon().read(table.root, options={"incremental-between": "start,end"})
    assert_java_rows(got.rows, _inserted(ours), context="incremental-between start,end")


def test_java_reads_the_diff_of_two_tags_of_an_append_table(tmp_path):
    table = _table(tmp_path, primary_key=False)
    table.write(_rows(range(5), "a"))
    table.create_tag("start", snapshot_id=1)
    table.write(_rows(range(5, 9), "b"))
    table.write(_rows(range(9, 10), "c"))
    table.create_tag("end", snapshot_id=3)
    ours = table.to_arrow(options={"incremental-between": "start,end"})
    assert ours["_row_kind"].to_pylist() == ["+I"] * 5
    got = JavaPaimon().read(table.root, options={"incremental-between": "start,end"})
    assert_java_rows(got.rows, _inserted(ours), context="incremental-between start,end")


@pytest.mark.parametrize("primary_key", [False, True])
def test_java_reads_the_files_created_since(tmp_path, primary_key):
    table = _table(tmp_path, primary_key=primary_key)
    table.write(_rows(range(10), "a"))
    since = _next_millisecond()
    table.write(_rows(range(5, 15), "b"))
    opts = {"scan.file-creation-time-millis": str(since)}
    ours = table.to_arrow(options=opts)
    assert ours.sort_by("id").equals(_rows(range(5, 15), "b"))
    got = JavaPaimon().read(table.root, options=opts)
    assert_java_rows(got.rows, ours, context=f"scan.file-creation-time-millis = {since}")
    mode = {**opts, "scan.mode": "from-file-creation-time"}
    assert_java_rows(JavaPaimon().read(table.root, options=mode).rows, ours)


def test_java_reads_the_snapshot_of_a_local_scan_timestamp(tmp_path):
    table = _table(tmp_path, primary_key=True)
    for i in range(3):
        table.write(_rows(range(i * 5, i * 5 + 10), f"w{i}"))
        _next_millisecond()
    millis = table.snapshots()[1].time_millis
    local = datetime.fromtimestamp(millis / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    opts = {"scan.timestamp": local}
    ours = table.to_arrow(options=opts)
    assert ours.sort_by("id").equals(table.to_arrow(snapshot_id=2).sort_by("id"))
    assert_java_rows(JavaPaimon().read(table.root, options=opts).rows, ours, context=local)
