from __future__ import annotations

import pytest
from tests.helpers import sorted_ids
from tests.unit.compaction.conftest import append

from snaplake.errors import SnapshotNotFoundError, TagNotFoundError
from snaplake.store.format.decoded_cache import metadata_cache


def test_rollback_to_snapshot_id(make_table):
    table = make_table()
    for i in range(5):
        append(table, i * 10, 10)
    table.create_tag("late", snapshot_id=4)
    table.create_tag("early", snapshot_id=2)
    result = table.rollback_to(2)
    assert result.snapshot_id == 2
    assert result.snapshots_deleted == (5, 4, 3)
    assert result.tags_deleted == ("late",)
    assert not result.restored_from_tag
    assert [s.id for s in table.snapshots()] == [1, 2]
    assert sorted_ids(table.to_arrow()) == list(range(20))
    assert table.file_io.read_bytes(table.paths.latest_hint_path) == b"2"
    assert [t.name for t in table.list_tags()] == ["early"]
    # writing continues on top of the rolled-back version
    assert append(table, 100, 1) == 3
    assert sorted_ids(table.to_arrow()) == [*range(20), 100]


def test_rollback_to_expired_tag_restores_the_snapshot(make_table):
    table = make_table()
    for i in range(3):
        append(table, i * 10, 10)
    table.create_tag("v1", snapshot_id=1)
    table.compact()
    for i in range(3):
        append(table, 100 + i, 1)
    table.expire_snapshots()
    assert table.snapshot_manager.earliest_snapshot_id() > 1
    result = table.rollback_to("v1")
    assert result.restored_from_tag
    assert result.snapshot_id == 1
    assert [s.id for s in table.snapshots()] == [1]
    metadata_cache.clear()
    assert sorted_ids(table.to_arrow()) == list(range(10))
    assert table.snapshot_manager.earliest_snapshot_id() == 1


def test_rollback_errors(make_table):
    table = make_table()
    append(table, 0, 1)
    with pytest.raises(SnapshotNotFoundError):
        table.rollback_to(7)
    with pytest.raises(TagNotFoundError):
        table.rollback_to("nope")
