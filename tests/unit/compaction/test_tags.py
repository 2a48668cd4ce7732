from __future__ import annotations

import pytest
from tests.helpers import sorted_ids
from tests.unit.compaction.conftest import append

from snaplake.errors import FileAlreadyExistsError, SnapshotNotFoundError, TagNotFoundError
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.tags import TagManager


def test_create_list_read_and_delete_tags(make_table):
    table = make_table()
    for i in range(3):
        append(table, i * 10, 10)
    first = table.create_tag("v1", snapshot_id=1)
    latest = table.create_tag("head")
    assert (first.snapshot_id, latest.snapshot_id) == (1, 3)
    assert [t.name for t in table.list_tags()] == ["v1", "head"]
    assert sorted_ids(table.to_arrow(tag="v1")) == list(range(10))
    raw = table.file_io.read_bytes(table.paths.tag_path("v1"))
    assert Snapshot.from_bytes(raw, path="x").id == 1  # Paimon layout: the snapshot JSON
    table.delete_tag("v1")
    assert [t.name for t in table.list_tags()] == ["head"]
    with pytest.raises(TagNotFoundError):
        table.delete_tag("v1")
    with pytest.raises(TagNotFoundError):
        table.to_arrow(tag="v1")


def test_tag_names_are_validated_and_never_moved(make_table):
    table = make_table()
    append(table, 0, 5)
    for bad in ["", " x", "a/b", "123"]:
        with pytest.raises(ValueError, match="invalid tag name"):
            table.create_tag(bad)
    table.create_tag("x")
    with pytest.raises(FileAlreadyExistsError):
        table.create_tag("x")


def test_tagging_an_empty_table_or_unknown_snapshot_fails(make_table):
    table = make_table()
    with pytest.raises(SnapshotNotFoundError):
        table.create_tag("x")
    append(table, 0, 5)
    with pytest.raises(SnapshotNotFoundError):
        table.create_tag("x", snapshot_id=9)


def test_tag_and_snapshot_id_are_exclusive(make_table):
    table = make_table()
    append(table, 0, 5)
    table.create_tag("x")
    with pytest.raises(ValueError, match="not several"):
        table.to_arrow(tag="x", snapshot_id=1)


def test_tagged_snapshots_are_distinct_and_sorted(make_table):
    table = make_table()
    for i in range(3):
        append(table, i, 1)
    manager = TagManager(table.file_io, table.paths)
    manager.create_tag("b", snapshot=table.snapshot(2))
    manager.create_tag("a", snapshot=table.snapshot(2))
    manager.create_tag("c", snapshot=table.snapshot(1))
    assert [s.id for s in manager.tagged_snapshots()] == [1, 2]
    assert manager.tag_names() == ["a", "b", "c"]
