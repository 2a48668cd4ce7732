"""Snapshot expiry and record counts on primary-key tables (upgraded files, retraction rows)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import create_table, write_and_commit
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, sorted_rows, to_table

from snaplake.store.format.manifest import FileKind, ManifestEntry, read_manifest_file
from snaplake.store.format.manifest_list import read_manifest_list
from snaplake.store.format.snapshot import CommitKind, Snapshot


def _table(tmp_path: Path, **options: str) -> Any:
    return create_table(
        tmp_path,
        schema=PK_SCHEMA,
        primary_keys=PK_KEYS,
        options={"bucket": "1", "snapshot.num-retained.min": "1", "snapshot.time-retained": "0 s",
                 **options},
    )  # fmt: skip


def _delta(table: Any, snap: Snapshot) -> list[ManifestEntry]:
    out: list[ManifestEntry] = []
    for meta in read_manifest_list(
        table.file_io, table.paths.manifest_path(snap.delta_manifest_list)
    ):
        out += read_manifest_file(table.file_io, table.paths.manifest_path(meta.file_name))
    return out


def _paimon_expiry_deletes(entries: list[ManifestEntry]) -> set[str]:
    """Java Paimon's walk of one delta: a DELETE marks a path, a later ADD of it unmarks it."""
    marked: set[str] = set()
    for e in entries:
        if e.kind == FileKind.ADD:
            marked.discard(e.file.file_name)
        else:
            marked.add(e.file.file_name)
    return marked


def test_expiry_keeps_files_compaction_moved_to_another_level(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An upgraded file (same name, new level) is live: no warning, never deleted.

    Files larger than ``target-file-size * compaction.small-file-ratio`` in a
    one-run section are upgraded, not rewritten (``MergeTreeCompactRewriter``).
    """
    table = _table(
        tmp_path, **{"target-file-size": "8 kb", "num-sorted-run.compaction-trigger": "2"}
    )
    expected: list[dict[str, Any]] = []
    for i in range(3):  # disjoint key ranges: every file is its own section
        rows = make_rows(i * 3000, 3000, month_mod=1, seed=i)
        write_and_commit(table, to_table(rows))
        expected += rows
    before = {f.file_name for s in table.new_scan().plan() for f in s.files}
    assert table.compact().snapshot_id is not None
    compact = table.latest_snapshot()
    assert compact.commit_kind == CommitKind.COMPACT
    entries = _delta(table, compact)
    after = {f.file_name: f.level for s in table.new_scan().plan() for f in s.files}
    upgraded = before & set(after)
    assert upgraded and all(after[name] > 0 for name in upgraded)
    # Paimon's order: the DELETE at the old level precedes the ADD at the new one, so
    # Java's expiry (order-sensitive) keeps the file too.
    assert not (_paimon_expiry_deletes(entries) & upgraded)
    # one more, so the COMPACT expires
    write_and_commit(table, to_table(make_rows(50, 10, month_mod=1, seed=9)))
    with caplog.at_level(logging.WARNING, logger="snaplake.compaction.expire"):
        result = table.expire_snapshots()
    assert compact.id in result.expired_snapshot_ids
    assert not [r for r in caplog.records if "live again" in r.getMessage()]
    deleted = {p.rsplit("/", 1)[-1] for p in result.data_files}
    assert not deleted & set(after)
    for split in table.new_scan().plan():
        assert all(table.file_io.exists(p) for p in split.paths)
    by_key = {(r["month"], r["id"]): r for r in expected}
    for r in make_rows(50, 10, month_mod=1, seed=9):
        by_key[(r["month"], r["id"])] = r
    assert sorted_rows(table.to_arrow()) == [by_key[k] for k in sorted(by_key)]


def test_expiry_deletes_level0_files_a_first_row_commit_compacted_away(tmp_path: Path) -> None:
    """A first-row writer ADDs and DELETEs its level-0 file in one commit: expiry removes it."""
    table = _table(tmp_path, **{"merge-engine": "first-row", "ignore-delete": "true"})
    write_and_commit(table, to_table(make_rows(0, 20)))
    write_and_commit(table, to_table(make_rows(10, 20, seed=1)))
    second = table.latest_snapshot()
    compacted_away = {
        e.file.file_name
        for e in _delta(table, second)
        if e.kind == FileKind.DELETE and e.file.level == 0
    }
    live = {f.file_name for s in table.new_scan().plan() for f in s.files}
    dead = compacted_away - live
    write_and_commit(table, to_table(make_rows(40, 5, seed=2)))
    result = table.expire_snapshots()
    deleted = {p.rsplit("/", 1)[-1] for p in result.data_files}
    assert dead <= deleted
    assert not deleted & {f.file_name for s in table.new_scan().plan() for f in s.files}


def test_record_counts_count_retraction_rows_as_java_does(tmp_path: Path) -> None:
    """deltaRecordCount = rows of ADDed files - rows of DELETEd files, -D rows included.

    Source: Paimon ``FileStoreCommitImpl.tryCommitOnce`` (``recordCountAdd(deltaFiles) -
    recordCountDelete(deltaFiles)``, ``ManifestEntry.recordCountAdd`` sums ``rowCount``).
    """
    table = _table(tmp_path)
    write_and_commit(table, to_table(make_rows(0, 10)))
    rows = make_rows(0, 4, seed=1)
    write_and_commit(table, to_table(rows), row_kinds=["-D"] * 4)
    snaps = table.snapshots()
    assert (snaps[0].delta_record_count, snaps[0].total_record_count) == (10, 10)
    assert (snaps[1].delta_record_count, snaps[1].total_record_count) == (4, 14)
    table.compact(full=True)
    full = table.latest_snapshot()
    files = [f for s in table.new_scan().plan() for f in s.files]
    assert sum(f.row_count for f in files) == 6  # the deletes are dropped at the top level
    assert full.delta_record_count == 6 - 14 and full.total_record_count == 6
    assert snaps[1].changelog_record_count is None  # no changelog files: Paimon writes null
