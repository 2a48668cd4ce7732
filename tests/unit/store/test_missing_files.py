"""A file that vanishes under a read gets a typed error saying why (issue 18, items 9a and 9c).

Expiry deletes a snapshot's files between a reader's planning and its reading.
These tests plan a scan, expire the snapshot with the real ``ExpireSnapshots``
(or stop it half-way, or delete a file by hand), then read.
"""

from __future__ import annotations

import os

import pytest
from tests.helpers import create_table, rows, write_and_commit

import snaplake
from snaplake.compaction.expire import ExpireSnapshots
from snaplake.errors import CorruptMetadataError, SnapshotNotFoundError, TagNotFoundError
from snaplake.store.format.decoded_cache import metadata_cache
from snaplake.store.format.manifest_list import read_manifest_list
from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.table import Table

RETAIN_ONE = {
    "snapshot.num-retained.min": "1",
    "snapshot.num-retained.max": "1",
    "snapshot.time-retained": "1 ms",
}


@pytest.fixture(params=["local", pytest.param("moto", marks=pytest.mark.s3)])
def warehouse(request, tmp_path):
    """``(warehouse, catalog options)`` on local disk and on a moto S3 server."""
    if request.param == "local":
        return str(tmp_path / "wh"), {}
    endpoint = request.getfixturevalue("moto_s3")
    return f"s3://{endpoint.new_bucket()}/wh", endpoint.options()


def _table(warehouse, *, primary_key: bool = False) -> Table:
    """Snapshots 1-3 of the same 30 rows, each replacing the files of the one before.

    Expiring snapshots 1 and 2 deletes the data files snapshot 1 reads.
    """
    root, options = warehouse
    table = create_table(
        snaplake.FileSystemCatalog(root, options=options),
        partition_keys=["month"],
        primary_keys=["id", "month"] if primary_key else (),
        options={**RETAIN_ONE, **({"bucket": "2"} if primary_key else {})},
    )
    for i in range(1, 4):
        overwrite = None if primary_key else True
        write_and_commit(
            table, rows(0, 30), commit_user="u", commit_identifier=i, overwrite=overwrite
        )
    if primary_key:
        table.compact(full=True)  # replaces the level-0 files of snapshots 1-3
    return table


@pytest.mark.parametrize("primary_key", [False, True], ids=["append", "primary-key"])
def test_read_of_planned_splits_racing_expiry_names_the_snapshot(warehouse, primary_key):
    table = _table(warehouse, primary_key=primary_key)
    scan = table.new_scan(snapshot_id=1)
    splits = scan.plan()  # planned (manifests read and cached) before the expiry
    assert splits
    result = table.expire_snapshots()
    assert 1 in result.expired_snapshot_ids
    assert set(result.data_files) & {p for s in splits for p in s.paths}  # its files are gone
    with pytest.raises(SnapshotNotFoundError, match="snapshot 1 expired while it was") as info:
        scan.to_arrow()
    assert info.value.snapshot_id == 1
    assert isinstance(info.value.__cause__, FileNotFoundError)
    with pytest.raises(SnapshotNotFoundError, match="snapshot 1 expired"):
        list(scan.to_batches())
    # The latest snapshot is untouched.
    assert table.to_arrow().num_rows == 30


def test_planning_after_expiry_names_the_snapshot(warehouse):
    """The manifest lists went too: the error comes from planning, not from a data file."""
    table = _table(warehouse)
    scan = table.new_scan(snapshot_id=2)  # resolved while snapshot 2 existed
    table.expire_snapshots()
    metadata_cache.clear()  # another process: nothing of snapshot 2 is cached
    with pytest.raises(SnapshotNotFoundError, match="snapshot 2 expired") as info:
        scan.plan()
    assert info.value.snapshot_id == 2
    with pytest.raises(SnapshotNotFoundError, match=r"retained snapshots are 3\.\.3"):
        scan.to_arrow()


class _StopsBeforeManifests(LocalFileIO):
    """Deletes data files, then fails: an expiry stops between data files and snapshots."""

    def delete_many(self, paths):
        paths = list(paths)
        if any("/manifest/" in p for p in paths):
            raise OSError("the expiry stopped here")
        super().delete_many(paths)


def test_snapshot_being_expired_is_not_reported_as_corruption(tmp_path):
    table = _table((str(tmp_path / "wh"), {}))
    scan = table.new_scan(snapshot_id=1)
    scan.plan()
    stopping = Table(file_io=_StopsBeforeManifests(), root=table.root, identifier=table.identifier)
    expire = ExpireSnapshots(stopping)
    with pytest.raises(OSError, match="stopped here"):
        expire.execute()
    assert table.snapshot_manager.snapshot_exists(1)  # snapshot-1 is still there
    with pytest.raises(SnapshotNotFoundError, match="snapshot 1 is being expired") as info:
        scan.to_arrow()
    assert info.value.snapshot_id == 1


def test_missing_data_file_of_the_latest_snapshot_is_corruption_naming_it(warehouse):
    table = _table(warehouse)
    split = table.new_scan().plan()[0]
    table.file_io.delete(split.paths[0])
    with pytest.raises(CorruptMetadataError, match="no expiry deleted it") as info:
        table.to_arrow()
    assert info.value.path == split.paths[0]
    assert split.paths[0] in str(info.value)


def test_deleted_live_manifest_is_corruption_naming_it(tmp_path):
    table = _table((str(tmp_path / "wh"), {}))
    latest = table.latest_snapshot()
    assert latest is not None
    metas = read_manifest_list(table.file_io, table.paths.manifest_path(latest.delta_manifest_list))
    manifest = table.paths.manifest_path(metas[0].file_name)
    os.unlink(manifest)
    metadata_cache.clear()
    with pytest.raises(CorruptMetadataError, match="no expiry deleted it") as info:
        table.to_arrow()
    assert info.value.path == manifest
    with pytest.raises(CorruptMetadataError):
        list(table.to_batches())


def test_primary_key_writer_names_a_deleted_live_manifest(tmp_path):
    table = _table((str(tmp_path / "wh"), {}), primary_key=True)
    latest = table.latest_snapshot()
    assert latest is not None
    metas = read_manifest_list(table.file_io, table.paths.manifest_path(latest.base_manifest_list))
    manifest = table.paths.manifest_path(metas[0].file_name)
    os.unlink(manifest)
    metadata_cache.clear()
    writer = table.new_write(commit_user="u")
    with pytest.raises(CorruptMetadataError) as info:
        writer.write_arrow(rows(100, 3))  # restores the sequence numbers from the latest
    assert info.value.path == manifest


def test_deleted_list_of_the_latest_snapshot_is_corruption_naming_it(tmp_path):
    table = _table((str(tmp_path / "wh"), {}))
    latest = table.latest_snapshot()
    assert latest is not None
    path = table.paths.manifest_path(latest.base_manifest_list)
    os.unlink(path)
    metadata_cache.clear()
    with pytest.raises(CorruptMetadataError) as info:
        table.new_scan(snapshot_id=latest.id).plan()
    assert info.value.path == path


def test_tagged_snapshot_reads_after_expiry_and_a_deleted_tag_is_named(tmp_path):
    table = _table((str(tmp_path / "wh"), {}))
    table.create_tag("first", snapshot_id=1)
    table.expire_snapshots()
    assert not table.snapshot_manager.snapshot_exists(1)
    assert table.to_arrow(tag="first").num_rows == 30  # the tag keeps its files
    scan = table.new_scan(tag="first")
    splits = scan.plan()
    deleted = table.delete_tag("first")  # its snapshot expired: its own files go with it
    assert {p for s in splits for p in s.paths} <= set(deleted.data_files)
    assert not any(os.path.exists(p) for s in splits for p in s.paths)
    with pytest.raises(TagNotFoundError, match="tag 'first' was deleted while it was being read"):
        scan.to_arrow()


def test_missing_file_of_an_existing_tag_is_corruption(tmp_path):
    table = _table((str(tmp_path / "wh"), {}))
    table.create_tag("first", snapshot_id=1)
    table.expire_snapshots()
    split = table.new_scan(tag="first").plan()[0]
    table.file_io.delete(split.paths[0])
    with pytest.raises(CorruptMetadataError, match="tag 'first'") as info:
        table.to_arrow(tag="first")
    assert info.value.path == split.paths[0]
