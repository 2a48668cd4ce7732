from __future__ import annotations

import os

import pytest
from tests.helpers import sorted_ids
from tests.unit.compaction.conftest import append

from snaplake.compaction.expire import ExpireSnapshots, _skipping_tags
from snaplake.errors import CorruptMetadataError, InvalidOptionError, SnapshotNotFoundError
from snaplake.options import CoreOptions
from snaplake.store.format.decoded_cache import metadata_cache
from snaplake.store.format.snapshot import CommitKind, Snapshot


def _files(table):
    return {s.path for s in table.file_io.list_files(table.root)}


def _with(table, overrides):
    """The table's options with ``overrides`` (the effective options a caller passes)."""
    return CoreOptions({**table.options, **overrides})


def _expirer(table, **kw):
    return ExpireSnapshots(table, **kw)


def test_num_retained_min_keeps_the_newest(make_table):
    table = make_table()
    for i in range(6):
        append(table, i * 10, 10)
    result = table.expire_snapshots()
    assert result.expired_snapshot_ids == (1, 2, 3, 4)
    assert result.earliest_retained_id == 5
    assert [s.id for s in table.snapshots()] == [5, 6]
    assert table.file_io.read_bytes(table.paths.earliest_hint_path) == b"5"
    assert sorted_ids(table.to_arrow()) == list(range(60))
    assert sorted_ids(table.to_arrow(snapshot_id=5)) == list(range(50))
    with pytest.raises(SnapshotNotFoundError):
        table.to_arrow(snapshot_id=4)
    # appends delete nothing: no data file was deleted
    assert result.data_files == ()


def test_time_retained_protects_young_snapshots(make_table):
    table = make_table({"snapshot.time-retained": "1 h"})
    for i in range(5):
        append(table, i, 1)
    times = [s.time_millis for s in table.snapshots()]
    # Snapshot k expires only when k+1 is older than the retention.
    now = times[2] + 3_600_000  # snapshot 3 is exactly 1 h old, 4 and 5 younger
    result = _expirer(table, now_ms=lambda: now).plan()
    assert result.expired_snapshot_ids == (1,)
    assert _expirer(
        table, now_ms=lambda: times[-1] + 10 * 3_600_000
    ).plan().expired_snapshot_ids == (1, 2, 3)


def test_num_retained_max_wins_over_time(make_table):
    table = make_table({"snapshot.time-retained": "1 d", "snapshot.num-retained.max": "3"})
    for i in range(6):
        append(table, i, 1)
    assert table.expire_snapshots().expired_snapshot_ids == (1, 2, 3)


def test_expire_limit(make_table):
    table = make_table({"snapshot.expire.limit": "2"})
    for i in range(7):
        append(table, i, 1)
    assert table.expire_snapshots().expired_snapshot_ids == (1, 2)
    assert table.expire_snapshots().expired_snapshot_ids == (3, 4)


def test_invalid_retention(make_table):
    table = make_table({"snapshot.num-retained.max": "1"})
    append(table, 0, 1)
    with pytest.raises(InvalidOptionError):
        table.expire_snapshots()
    bad = _with(table, {"snapshot.num-retained.min": "0", "snapshot.num-retained.max": "5"})
    with pytest.raises(InvalidOptionError) as info:
        _expirer(table, options=bad).plan()
    assert info.value.key == "snapshot.num-retained.min"


def test_options_given_replace_the_tables_and_bad_ones_delete_nothing(make_table):
    table = make_table({"snapshot.num-retained.min": "5"})
    for i in range(6):
        append(table, i, 1)
    before = _files(table)
    keep_max = _with(table, {"snapshot.num-retained.min": "4", "snapshot.num-retained.max": "2"})
    with pytest.raises(InvalidOptionError) as info:
        _expirer(table, options=keep_max).execute()
    assert info.value.key == "snapshot.num-retained.max"
    assert _files(table) == before
    assert _expirer(table).plan().expired_snapshot_ids == (1,)  # None: the table's min of 5
    keep_two = _with(table, {"snapshot.num-retained.min": "2"})
    assert _expirer(table, options=keep_two).execute().expired_snapshot_ids == (1, 2, 3, 4)


def test_dry_run_deletes_nothing_and_matches_execute(make_table):
    table = make_table()
    for i in range(6):
        append(table, i * 10, 10)
    table.compact()
    append(table, 100, 5)
    append(table, 200, 5)
    before = _files(table)
    plan = table.expire_snapshots(dry_run=True)
    assert plan.dry_run
    assert _files(table) == before
    assert plan.data_files  # the compacted inputs
    done = table.expire_snapshots()
    assert not done.dry_run
    assert (done.data_files, done.manifest_files, done.snapshot_files) == (
        plan.data_files,
        plan.manifest_files,
        plan.snapshot_files,
    )
    assert before - _files(table) == set(
        plan.data_files + plan.manifest_files + plan.snapshot_files
    )
    assert done.bytes_freed > 0
    assert done.files_deleted == len(before - _files(table))
    assert sorted_ids(table.to_arrow()) == sorted([*range(60), *range(100, 105), *range(200, 205)])


def test_tagged_files_survive_expiry(make_table):
    table = make_table()
    for i in range(4):
        append(table, i * 10, 10)
    table.create_tag("keep", snapshot_id=2)
    table.compact()
    for i in range(3):
        append(table, 100 + i, 1)
    result = table.expire_snapshots()
    assert 2 in result.expired_snapshot_ids
    assert sorted_ids(table.to_arrow(tag="keep")) == list(range(20))
    metadata_cache.clear()
    assert sorted_ids(table.to_arrow(tag="keep")) == list(range(20))
    # the compacted inputs not in the tag (snapshots 3 and 4's files) are gone
    assert result.data_files
    assert all(os.path.basename(p).startswith("data-") for p in result.data_files)


@pytest.mark.parametrize("damage", ["delete", "truncate"])
def test_missing_or_corrupt_manifest_stops_before_deleting(make_table, damage):
    table = make_table()
    for i in range(4):
        append(table, i * 10, 10)
    table.compact()
    append(table, 100, 1)
    append(table, 101, 1)
    victim = table.snapshot(3)  # an expired snapshot's delta manifest
    from snaplake.store.format.manifest_list import read_manifest_list

    metas = read_manifest_list(table.file_io, table.paths.manifest_path(victim.delta_manifest_list))
    path = table.paths.manifest_path(metas[0].file_name)
    if damage == "delete":
        os.remove(path)
    else:
        with open(path, "r+b") as f:
            f.truncate(20)
    metadata_cache.clear()
    before = _files(table)
    with pytest.raises(CorruptMetadataError) as info:
        table.expire_snapshots()
    assert info.value.path == path
    assert _files(table) == before


def test_missing_boundary_manifest_list_stops(make_table):
    table = make_table()
    for i in range(4):
        append(table, i, 1)
    os.remove(table.paths.manifest_path(table.snapshot(3).base_manifest_list))
    metadata_cache.clear()
    before = _files(table)
    with pytest.raises(CorruptMetadataError, match="manifest list"):
        table.expire_snapshots()
    assert _files(table) == before


def test_nothing_to_expire_writes_earliest_hint(make_table):
    table = make_table({"snapshot.num-retained.min": "5"})
    assert table.expire_snapshots().expired_snapshot_ids == ()
    append(table, 0, 1)
    result = table.expire_snapshots()
    assert result.expired_snapshot_ids == ()
    assert result.earliest_retained_id == 1
    assert table.file_io.exists(table.paths.earliest_hint_path)


def _tag(snapshot_id: int) -> Snapshot:
    return Snapshot(
        id=snapshot_id,
        schema_id=0,
        base_manifest_list="base",
        delta_manifest_list="delta",
        commit_user="u",
        commit_identifier=snapshot_id,
        commit_kind=CommitKind.APPEND,
        time_millis=0,
    )


def test_skipping_tags_window():
    tags = [_tag(1), _tag(4), _tag(7), _tag(12)]
    assert [t.id for t in _skipping_tags(tags, 5, 10)] == [4, 7]
    assert [t.id for t in _skipping_tags(tags, 0, 3)] == [1]
    assert _skipping_tags(tags, 0, 1) == []


def test_time_retained_override(make_table):
    table = make_table({"snapshot.time-retained": "1 d"})
    for i in range(4):
        append(table, i, 1)
    assert table.expire_snapshots().expired_snapshot_ids == ()
    young = _with(table, {"snapshot.time-retained": "0 s"})
    assert _expirer(table, options=young).execute().expired_snapshot_ids == (1, 2)
