"""Paimon's read options (scan.mode, scan.snapshot-id, incremental-between) == arguments."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import pyarrow as pa
import pytest

from snaplake.catalog import FileSystemCatalog
from snaplake.errors import (
    InvalidOptionError,
    SnapshotNotFoundError,
    TagNotFoundError,
    UnsupportedTableError,
)
from snaplake.store.read.read_options import file_creation_epoch_millis
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
    local = datetime.fromtimestamp(millis / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    newest = table.snapshot_manager.earlier_or_equal_time_millis(millis)
    assert newest is not None
    at = table.to_arrow(snapshot_id=newest.id)
    assert table.to_arrow(options={"scan.timestamp": local}).equals(at)
    assert table.to_arrow(options={"scan.mode": "from-timestamp", "scan.timestamp": local}).equals(
        at
    )
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
    with pytest.raises(InvalidOptionError, match=r"needs scan\.file-creation-time-millis"):
        table.to_arrow(options={"scan.mode": "from-file-creation-time"})
    with pytest.raises(InvalidOptionError, match=r"needs scan\.creation-time-millis"):
        table.to_arrow(options={"scan.mode": "from-creation-timestamp"})
    with pytest.raises(InvalidOptionError, match="not an integer"):
        table.to_arrow(options={"scan.file-creation-time-millis": "soon"})
    with pytest.raises(InvalidOptionError, match="is not a date-time"):
        table.to_arrow(options={"scan.timestamp": "2026-11-27T03:00:00"})
    with pytest.raises(
        InvalidOptionError, match=r"needs scan\.timestamp-millis or scan\.timestamp"
    ):
        table.to_arrow(options={"scan.mode": "from-timestamp"})
    with pytest.raises(InvalidOptionError, match=r"needs scan\.snapshot-id"):
        table.to_arrow(options={"scan.mode": "from-snapshot-full"})
    with pytest.raises(InvalidOptionError, match="not read options"):
        table.to_arrow(options={"bucket": "4"})
    with pytest.raises(InvalidOptionError, match="two snapshot ids or two tag names"):
        table.to_arrow(options={"incremental-between": "3"})
    with pytest.raises(InvalidOptionError, match="incremental-between-scan-mode"):
        table.to_arrow(
            options={"incremental-between": "1,2", "incremental-between-scan-mode": "all"}
        )
    with pytest.raises(ValueError, match="not both"):
        table.to_arrow(snapshot_id=2, options={"scan.snapshot-id": "2"})
    with pytest.raises(UnsupportedTableError):  # a scan.mode value snaplake does not know
        _table(tmp_path / "other", **{"scan.mode": "from-watermark"})


# ------------------------------------------------------------- incremental-between of two tags
def _tagged(tmp_path: Any, **options: str) -> Table:
    """``_written`` with tags t1..t5 on snapshots 1..5 (3 is a full compaction, 4 a delete)."""
    table = _written(tmp_path, **options)
    for sid in (1, 3, 4, 5):
        table.create_tag(f"t{sid}", snapshot_id=sid)
    return table


def _diff_model(before: pa.Table, after: pa.Table, end: int) -> list[tuple[Any, ...]]:
    """The diff of two merged views by key: new or changed rows ``+I``, gone keys ``-D``."""
    old = {r["id"]: r["v"] for r in before.to_pylist()}
    new = {r["id"]: r["v"] for r in after.to_pylist()}
    rows = [(k, v, "+I", end) for k, v in new.items() if old.get(k, object()) != v]
    rows += [(k, v, "-D", end) for k, v in old.items() if k not in new]
    return sorted(rows)


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["v"], r["_row_kind"], r["_snapshot_id"]) for r in table.to_pylist())


@pytest.mark.parametrize(("a", "b"), [(1, 2), (1, 5), (2, 4), (3, 5), (4, 5)])
def test_incremental_between_two_tags_is_the_diff_of_their_snapshots(tmp_path, a, b):
    table = _tagged(tmp_path)
    got = table.to_arrow(options={"incremental-between": f"t{a},t{b}"})
    assert got.equals(table.changes(a + 1, b, mode="diff").read_all())
    model = _diff_model(table.to_arrow(tag=f"t{a}"), table.to_arrow(tag=f"t{b}"), b)
    assert _rows(got) == model and model
    # the scan mode does not apply to tags (Paimon diffs them whatever it says)
    delta = {"incremental-between": f"t{a},t{b}", "incremental-between-scan-mode": "delta"}
    assert table.to_arrow(options=delta).equals(got)


def test_incremental_between_two_tags_of_an_append_table(tmp_path):
    catalog = FileSystemCatalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    table = catalog.create_table("db.a", schema=SCHEMA, options={"bucket": "-1"})
    table.write(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    table.create_tag("first", snapshot_id=1)
    table.write(pa.table({"id": [3], "v": ["c"]}, schema=SCHEMA))
    table.write(pa.table({"id": [4], "v": ["d"]}, schema=SCHEMA))
    table.create_tag("third", snapshot_id=3)
    got = table.to_arrow(options={"incremental-between": "first,third"})
    assert _rows(got) == [(3, "c", "+I", 3), (4, "d", "+I", 3)]


@pytest.mark.parametrize("mode", ["auto", "delta", "changelog"])
def test_tag_to_snapshot_reads_the_snapshots_between_the_tags(tmp_path, mode):
    table = _tagged(tmp_path)
    opts = {
        "incremental-between": "t1,t5", "incremental-between-tag-to-snapshot": "true",
        "incremental-between-scan-mode": mode,
    }  # fmt: skip
    expected = table.changes(2, 5, mode=mode).read_all()
    assert table.to_arrow(options=opts).equals(expected)
    assert table.to_arrow(options={**opts, "incremental-between": "1,5"}).equals(expected)
    # a table option, too
    tagged = _tagged(tmp_path / "opt", **{"incremental-between-tag-to-snapshot": "true"})
    assert tagged.to_arrow(options={"incremental-between": "t2,t4"}).equals(
        tagged.changes(3, 4).read_all()
    )


def test_the_same_tag_twice_reads_nothing(tmp_path):
    table = _tagged(tmp_path)
    table.create_tag("again", snapshot_id=3)
    for to_snapshot in ("false", "true"):
        opts = {"incremental-between": "t3,again",
                "incremental-between-tag-to-snapshot": to_snapshot}  # fmt: skip
        got = table.to_arrow(options=opts)
        assert got.num_rows == 0 and got.schema.names[-2:] == ["_row_kind", "_snapshot_id"]


def test_bad_tag_ranges_are_typed_errors_before_anything_is_read(tmp_path):
    table = _tagged(tmp_path)
    with pytest.raises(TagNotFoundError, match="'nope' is neither a tag nor a snapshot id"):
        table.to_arrow(options={"incremental-between": "t1,nope"})
    with pytest.raises(TagNotFoundError, match="'x', 'y'"):
        table.new_scan(options={"incremental-between": "x,y"})
    with pytest.raises(InvalidOptionError, match="one tag and one snapshot id") as info:
        table.to_arrow(options={"incremental-between": "t1,4"})
    assert info.value.key == "incremental-between"
    with pytest.raises(InvalidOptionError, match="older than tag 't2'"):
        table.to_arrow(options={"incremental-between": "t2,t1"})
    diff = {"incremental-between": "t1,t2", "incremental-between-tag-to-snapshot": "true",
            "incremental-between-scan-mode": "diff"}  # fmt: skip
    with pytest.raises(InvalidOptionError, match="not diff"):
        table.to_arrow(options=diff)
    with pytest.raises(InvalidOptionError, match="not true or false"):
        table.to_arrow(
            options={"incremental-between": "t1,t2", "incremental-between-tag-to-snapshot": "1"}
        )
    with pytest.raises(InvalidOptionError, match="not 'true' or 'false'"):  # the registry's
        _table(tmp_path / "other", **{"incremental-between-tag-to-snapshot": "yes"})


# ------------------------------------------------------------------ files by creation time
def _next_millisecond() -> int:
    """Wait until the clock shows a later millisecond than now; return that one (epoch ms).

    Everything written before the call has an earlier creation / commit
    time than everything written after it (an order, not a duration).
    """
    start = time.time_ns() // 1_000_000
    while time.time_ns() // 1_000_000 <= start:
        time.sleep(0.0005)
    return start + 1


def _created(table: Table) -> list[int]:
    latest = table.latest_snapshot()
    assert latest is not None
    splits = table.file_store().new_scan(latest).plan()
    return [file_creation_epoch_millis(f.creation_time_ms or 0) for s in splits for f in s.files]


@pytest.mark.parametrize("primary_key", [False, True])
def test_from_file_creation_time_reads_the_files_created_since(tmp_path, primary_key):
    catalog = FileSystemCatalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    options = {"bucket": "2"} if primary_key else {"bucket": "-1"}
    table = catalog.create_table(
        "db.t", schema=SCHEMA, primary_keys=["id"] if primary_key else (), options=options
    )
    table.write(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=SCHEMA))
    since = _next_millisecond()
    later = pa.table({"id": [3, 4], "v": ["C", "d"]}, schema=SCHEMA)
    table.write(later)
    assert min(_created(table)) < since <= max(_created(table))
    opts = {"scan.file-creation-time-millis": str(since)}
    assert table.to_arrow(options=opts).sort_by("id").equals(later)
    mode = {**opts, "scan.mode": "from-file-creation-time"}
    assert table.to_arrow(options=mode).sort_by("id").equals(later)
    assert table.new_scan(options=opts).plan() and all(
        f.creation_time_ms is not None for s in table.new_scan(options=opts).plan() for f in s.files
    )
    everything = {"scan.file-creation-time-millis": str(min(_created(table)))}
    assert table.to_arrow(options=everything).sort_by("id").equals(table.to_arrow().sort_by("id"))
    after = {"scan.file-creation-time-millis": str(_next_millisecond())}
    assert table.to_arrow(options=after).num_rows == 0
    if not primary_key:
        return
    table.compact(full=True)  # compaction writes new files: all rows are new again (Paimon)
    assert table.snapshots()[-1].commit_kind == "COMPACT"
    assert table.to_arrow(options=opts).sort_by("id").equals(table.to_arrow().sort_by("id"))


def test_from_creation_timestamp_reads_a_snapshot_or_the_files_created_since(tmp_path):
    table = _table(tmp_path)
    assert table.to_arrow(options={"scan.creation-time-millis": "0"}).num_rows == 0  # no snapshot
    table.write(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    second = _next_millisecond()
    table.write(pa.table({"id": [2, 3], "v": ["B", "c"]}, schema=SCHEMA))
    _next_millisecond()
    table.write(pa.table({"id": [4], "v": ["d"]}, schema=SCHEMA))
    snaps = table.snapshots()
    assert snaps[0].time_millis < second <= snaps[1].time_millis

    def read(millis: int) -> pa.Table:
        opts = {"scan.mode": "from-creation-timestamp", "scan.creation-time-millis": str(millis)}
        return table.to_arrow(options=opts).sort_by("id")

    # after the earliest snapshot: the first snapshot committed at or after the time, in full
    assert read(second).equals(table.to_arrow(snapshot_id=2).sort_by("id"))
    assert read(snaps[2].time_millis).equals(table.to_arrow().sort_by("id"))
    # at or before the earliest, or after the latest: the latest snapshot's files created since
    for millis in (snaps[0].time_millis, snaps[2].time_millis + 1, second):
        files = {"scan.file-creation-time-millis": str(millis)}
        if millis != second:
            assert read(millis).equals(table.to_arrow(options=files).sort_by("id"))
    assert read(0).equals(table.to_arrow().sort_by("id"))
    assert read(snaps[2].time_millis + 1).num_rows == 0


def test_the_diff_of_tags_whose_snapshots_expired_reads_the_tags(tmp_path):
    """Tags outlive their snapshots: the diff reads the tags' own snapshots, as Paimon does;
    the snapshots between two tags are gone, so tag-to-snapshot is a typed error."""
    retain = {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2"}
    table = _tagged(tmp_path, **retain)
    t1, t5 = table.to_arrow(tag="t1"), table.to_arrow(tag="t5")
    table.expire_snapshots()
    assert table.snapshot_manager.earliest_snapshot_id() == 4
    got = table.to_arrow(options={"incremental-between": "t1,t5"})
    assert _rows(got) == _diff_model(t1, t5, 5)
    opts = {"incremental-between": "t1,t5", "incremental-between-tag-to-snapshot": "true"}
    with pytest.raises(SnapshotNotFoundError, match="earliest retained snapshot is 4"):
        table.to_arrow(options=opts)
    got = table.to_arrow(options={"incremental-between": "t4,t5"})
    assert _rows(got) == _diff_model(table.to_arrow(tag="t4"), t5, 5)
