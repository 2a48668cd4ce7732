"""Paimon's read options (scan.mode, scan.snapshot-id, incremental-between) == arguments."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from snaplake.catalog import FileSystemCatalog
from snaplake.errors import InvalidOptionError, UnsupportedTableError
from snaplake.table import Table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _table(tmp_path: Any, **options: str) -> Table:
    catalog = FileSystemCatalog(str(tmp_path / "wh"))
    catalog.create_database("db", ignore_if_exists=True)
    return catalog.create_table(
        "db.pk", schema=SCHEMA, primary_keys=["id"],
        options={"bucket": "2", "changelog-producer": "input", **options},
    )  # fmt: skip


def _written(tmp_path: Any, **options: str) -> Table:
    table = _table(tmp_path, **options)
    table.write(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=SCHEMA))
    table.write(pa.table({"id": [2, 4], "v": ["B", "d"]}, schema=SCHEMA))
    table.compact(full=True)
    table.write(pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA), row_kinds=["-D"])
    table.write(pa.table({"id": [5], "v": ["e"]}, schema=SCHEMA))
    table.create_tag("t2", snapshot_id=2)
    return table


@pytest.mark.parametrize("mode", ["auto", "delta", "changelog", "diff"])
@pytest.mark.parametrize(("a", "b"), [(0, 5), (1, 3), (2, 5), (4, 5)])
def test_incremental_between_is_changes_of_a_plus_one_to_b(tmp_path, mode, a, b):
    table = _written(tmp_path / f"{mode}{a}{b}")
    opts = {"incremental-between": f"{a},{b}", "incremental-between-scan-mode": mode}
    expected = table.changes(a + 1, b, mode=mode).read_all()
    assert table.to_arrow(options=opts).equals(expected)
    assert table.new_scan(options=opts).to_arrow(limit=1).equals(expected.slice(0, 1))
    assert pa.table(table.new_scan(options=opts)).equals(expected)
    with pytest.raises(UnsupportedTableError, match="plan_changes"):
        table.new_scan(options=opts).plan()  # no snapshot splits: an engine must not read them


def test_table_options_apply_and_explicit_arguments_win(tmp_path):
    table = _written(tmp_path, **{"incremental-between": "1,3"})
    assert table.to_arrow().equals(table.changes(2, 3).read_all())
    two = table.to_arrow(snapshot_id=2)  # explicit time travel wins over the table's option
    assert "_row_kind" not in two.schema.names and two.num_rows == 4
    # read-time options override the table's
    latest = table.to_arrow(options={"scan.mode": "latest-full"})
    assert "_row_kind" not in latest.schema.names and latest.num_rows == 4


def test_incremental_between_timestamp_and_latest_delta(tmp_path):
    table = _written(tmp_path)
    snaps = table.snapshots()
    t1, t3 = snaps[0].time_millis, snaps[2].time_millis
    opts = {"incremental-between-timestamp": f"{t1},{t3}"}
    first = table.snapshot_manager.earlier_or_equal_time_millis(t1)
    last = table.snapshot_manager.earlier_or_equal_time_millis(t3)
    assert first is not None and last is not None
    expected = table.changes(first.id + 1, last.id).read_all()
    assert table.to_arrow(options=opts).equals(expected)
    before = {"incremental-between-timestamp": f"{t1 - 10},{t1 - 5}"}
    assert table.to_arrow(options=before).num_rows == 0
    delta = table.to_arrow(options={"scan.mode": "latest-delta"})
    assert delta.equals(table.changes(5, 5, mode="delta").read_all())


def test_snapshot_options_are_time_travel(tmp_path):
    table = _written(tmp_path)
    two = table.to_arrow(snapshot_id=2)
    assert table.to_arrow(options={"scan.snapshot-id": "2"}).equals(two)
    assert table.to_arrow(options={"scan.mode": "from-snapshot", "scan.snapshot-id": "2"}).equals(
        two
    )
    assert table.to_arrow(
        options={"scan.mode": "from-snapshot-full", "scan.snapshot-id": "2"}
    ).equals(two)
    assert table.to_arrow(options={"scan.tag-name": "t2"}).equals(table.to_arrow(tag="t2"))
    millis = table.snapshot(2).time_millis
    assert table.to_arrow(options={"scan.timestamp-millis": str(millis)}).equals(two)
    compact = [s.id for s in table.snapshots() if s.commit_kind == "COMPACT"][-1]
    assert table.to_arrow(options={"scan.mode": "compacted-full"}).equals(
        table.to_arrow(snapshot_id=compact)
    )
    for mode in ("latest", "latest-full", "full", "default"):
        assert table.to_arrow(options={"scan.mode": mode}).equals(table.to_arrow())


def test_bad_read_options_are_refused(tmp_path):
    table = _written(tmp_path)
    with pytest.raises(InvalidOptionError, match="not a Paimon scan mode"):
        table.to_arrow(options={"scan.mode": "earliest"})
    with pytest.raises(UnsupportedTableError, match="creation time"):
        table.to_arrow(options={"scan.mode": "from-file-creation-time"})
    with pytest.raises(InvalidOptionError, match=r"needs scan\.snapshot-id"):
        table.to_arrow(options={"scan.mode": "from-snapshot-full"})
    with pytest.raises(InvalidOptionError, match="not read options"):
        table.to_arrow(options={"bucket": "4"})
    with pytest.raises(InvalidOptionError, match="two integers"):
        table.to_arrow(options={"incremental-between": "3"})
    with pytest.raises(UnsupportedTableError, match="tag names"):
        table.to_arrow(options={"incremental-between": "t1,t2"})
    with pytest.raises(InvalidOptionError, match="incremental-between-scan-mode"):
        table.to_arrow(
            options={"incremental-between": "1,2", "incremental-between-scan-mode": "all"}
        )
    with pytest.raises(ValueError, match="not both"):
        table.to_arrow(snapshot_id=2, options={"scan.snapshot-id": "2"})
    with pytest.raises(UnsupportedTableError):  # a scan.mode Paimon defines but snaplake refuses
        _table(tmp_path / "other", **{"scan.mode": "from-creation-timestamp"})
