"""Expiry, orphan clean, tags and rollback keep live index files and delete dead ones.

A table's snapshots get index manifests through ordinary commits whose messages
carry HASH files: snapshot 1 ADDs one HASH file per month, snapshot 2 replaces
month 1's, snapshots 3 and 4 change nothing (they reuse snapshot 2's manifest).
"""

from __future__ import annotations

import dataclasses
import os
import time
from datetime import timedelta

import numpy as np
from tests.helpers import rows

import snaplake
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.store.format.hash_index import write_hash_index
from snaplake.store.format.index_file import IndexFileMeta
from snaplake.store.read.index_scan import read_index_entries


def _commit(table: snaplake.Table, start: int, count: int, *, index: bool) -> list[IndexFileMeta]:
    """Commit ``rows(start, count)``; with ``index``, one new HASH file per message."""
    w = table.new_write(commit_user="u")
    w.write_arrow(rows(start, count))
    messages = w.prepare_commit()
    metas: list[IndexFileMeta] = []
    if index:
        for i, m in enumerate(messages):
            hashes = np.arange(start + 10 * i, start + 10 * i + 3, dtype=np.int32)
            metas.append(write_hash_index(table.file_io, table.paths, hashes))
            messages[i] = dataclasses.replace(
                m,
                data_increment=dataclasses.replace(m.data_increment, new_index_files=(metas[-1],)),
            )
    FileStoreCommit(table, commit_user="u").commit(messages)
    return metas


def _history(table: snaplake.Table) -> tuple[list[IndexFileMeta], list[IndexFileMeta], list[str]]:
    """Snapshots 1-4 as the module docstring says; returns (s1 files, s2 files, manifests 1, 2)."""
    first = _commit(table, 0, 3, index=True)  # ids 0, 1, 2: months 1, 2, 3
    second = _commit(table, 3, 1, index=True)  # id 3: month 1
    _commit(table, 4, 3, index=False)
    _commit(table, 7, 3, index=False)
    snaps = table.snapshots()
    assert [s.id for s in snaps] == [1, 2, 3, 4]
    assert snaps[2].index_manifest == snaps[3].index_manifest == snaps[1].index_manifest
    manifests = [s.index_manifest for s in snaps[:2]]
    assert all(manifests) and manifests[0] != manifests[1]
    return first, second, manifests  # type: ignore[return-value]


def _path(table: snaplake.Table, meta: IndexFileMeta) -> str:
    return table.paths.index_file_path(meta.file_name)


def _exists(table: snaplake.Table, path: str) -> bool:
    return table.file_io.exists(path)


def _age_all(table: snaplake.Table, seconds: float) -> None:
    t = time.time() - seconds
    for s in table.file_io.list_files(table.root):
        os.utime(s.path, (t, t))


def test_expiry_deletes_replaced_index_files_and_their_manifest(make_table) -> None:
    table = make_table()
    first, second, (m1, m2) = _history(table)
    replaced = first[0]  # month 1's first HASH file, replaced by snapshot 2
    plan = table.expire_snapshots(dry_run=True)
    result = table.expire_snapshots()
    assert result.expired_snapshot_ids == (1, 2)
    assert result.index_files == plan.index_files == (_path(table, replaced),)
    assert table.paths.index_manifest_path(m1) in result.manifest_files
    assert table.paths.index_manifest_path(m2) not in result.manifest_files
    assert result.files_deleted == plan.files_deleted
    assert not _exists(table, _path(table, replaced))
    assert not _exists(table, table.paths.index_manifest_path(m1))
    for meta in [*first[1:], *second]:
        assert _exists(table, _path(table, meta))
    live = read_index_entries(table, table.latest_snapshot())
    assert {e.index_file.file_name for e in live} == {m.file_name for m in [*first[1:], *second]}


def test_tag_keeps_index_files_through_expiry_and_rollback(make_table) -> None:
    table = make_table()
    first, second, (m1, _) = _history(table)
    table.create_tag("t1", snapshot_id=1)
    result = table.expire_snapshots()
    assert result.expired_snapshot_ids == (1, 2)
    assert result.index_files == ()
    assert table.paths.index_manifest_path(m1) not in result.manifest_files
    for meta in [*first, *second]:
        assert _exists(table, _path(table, meta))
    # rolling back to the expired tag restores snapshot 1 with its index manifest
    assert table.rollback_to("t1").restored_from_tag
    snap = table.latest_snapshot()
    assert snap is not None and snap.id == 1 and snap.index_manifest == m1
    assert {e.index_file.file_name for e in read_index_entries(table, snap)} == {
        m.file_name for m in first
    }


def test_orphan_clean_deletes_only_unreferenced_index_files(make_table) -> None:
    table = make_table()
    first, second, (m1, m2) = _history(table)
    stray = write_hash_index(table.file_io, table.paths, np.arange(3, dtype=np.int32))
    stray_manifest = table.paths.index_manifest_path(table.paths.new_index_manifest_name())
    table.file_io.write_bytes(stray_manifest, b"junk")
    _age_all(table, 3 * 86400)
    result = table.remove_orphan_files(dry_run=False)
    assert set(result.orphan_files) == {_path(table, stray), stray_manifest}
    for meta in [*first, *second]:  # snapshot 1 still references month 1's first file
        assert _exists(table, _path(table, meta))
    # after a rollback to snapshot 1, snapshot 2's HASH file and manifest are orphans
    table.rollback_to(1)
    _age_all(table, 3 * 86400)
    result = table.remove_orphan_files(dry_run=False, older_than=timedelta(hours=1))
    assert {_path(table, second[0]), table.paths.index_manifest_path(m2)} <= set(
        result.orphan_files
    )
    for meta in first:
        assert _exists(table, _path(table, meta))
    assert _exists(table, table.paths.index_manifest_path(m1))
