"""Changelog files of compaction (``lookup`` / ``full-compaction``): where they go, how they go.

Paimon's rules (PAIMON-MODES.md §4): level = the output level, FileSource
APPEND, ``changelog-file.prefix``, in the COMPACT snapshot's changelog manifest
list; a writer's level-0 compaction commits APPEND then COMPACT. Expiry, orphan
clean, rollback and abort treat them like the ``input`` producer's.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import create_table
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, to_table

from snaplake.store.format.data_file import FileSource
from snaplake.store.format.manifest import FileKind, read_manifest_file
from snaplake.store.format.manifest_list import read_manifest_list
from snaplake.store.format.snapshot import CommitKind, Snapshot


def _table(tmp_path: Path, producer: str, **options: str) -> Any:
    return create_table(
        tmp_path,
        schema=PK_SCHEMA,
        partition_keys=["month"],
        primary_keys=PK_KEYS,
        options={"bucket": "2", "changelog-producer": producer, **options},
    )


def _write(table: Any, start: int, n: int, seed: int = 0) -> int:
    w = table.new_write(commit_user="w")
    w.write_arrow(to_table(make_rows(start, n, seed=seed)))
    result = table.new_commit(commit_user="w").commit(w.prepare_commit())
    assert result.snapshot_id is not None
    return int(result.snapshot_id)


def _entries(table: Any, snap: Snapshot) -> list[Any]:
    if snap.changelog_manifest_list is None:
        return []
    out = []
    for meta in read_manifest_list(
        table.file_io, table.paths.manifest_path(snap.changelog_manifest_list)
    ):
        out += read_manifest_file(table.file_io, table.paths.manifest_path(meta.file_name))
    return out


def _paths(table: Any, snap: Snapshot) -> list[str]:
    return [
        table.paths.data_file_path(
            table.schema().partition_path_of(e.partition), e.bucket, e.file.file_name
        )
        for e in _entries(table, snap)
    ]


@pytest.mark.parametrize("producer", ["lookup", "full-compaction"])
def test_changelog_files_are_level_output_append_source_in_the_compact_snapshot(
    tmp_path: Path, producer: str
) -> None:
    table = _table(tmp_path, producer, **{"changelog-file.prefix": "cl-",
                                          "changelog-file.format": "avro"})  # fmt: skip
    _write(table, 0, 20)
    if producer == "full-compaction":
        assert table.latest_snapshot().changelog_manifest_list is None  # only compaction
        table.compact(full=True)
    snap = table.latest_snapshot()
    assert snap.commit_kind == CommitKind.COMPACT
    entries = _entries(table, snap)
    assert entries and all(e.kind == FileKind.ADD for e in entries)
    assert sum(e.file.row_count for e in entries) == 20 == snap.changelog_record_count
    for e in entries:
        assert e.file.file_name.startswith("cl-") and e.file.file_name.endswith(".avro")
        assert e.file.file_source == FileSource.APPEND
        assert e.file.level >= 1  # the compaction's output level
    assert all(table.file_io.exists(p) for p in _paths(table, snap))


def test_lookup_wait_false_leaves_changelog_to_compaction(tmp_path: Path) -> None:
    table = _table(tmp_path, "lookup", **{"changelog-producer.lookup-wait": "false"})
    _write(table, 0, 10)
    assert [s.commit_kind for s in table.snapshots()] == [CommitKind.APPEND]
    assert table.latest_snapshot().changelog_manifest_list is None
    table.compact()
    assert _entries(table, table.latest_snapshot())


def test_expiry_deletes_compaction_changelog_of_expired_snapshots(tmp_path: Path) -> None:
    table = _table(
        tmp_path, "lookup", **{"snapshot.num-retained.min": "2", "snapshot.time-retained": "0 s"}
    )
    _write(table, 0, 20)
    _write(table, 10, 20, seed=1)  # snapshots 1..4: APPEND, COMPACT, APPEND, COMPACT
    snaps = table.snapshots()
    doomed = set(_paths(table, snaps[1]))
    kept = set(_paths(table, snaps[3]))
    result = table.expire_snapshots()
    assert result.expired_snapshot_ids == (1, 2)
    assert doomed and set(result.changelog_files) == doomed
    assert not any(table.file_io.exists(p) for p in doomed)
    assert kept and all(table.file_io.exists(p) for p in kept)


def test_orphan_clean_and_rollback_handle_compaction_changelog(tmp_path: Path) -> None:
    table = _table(tmp_path, "full-compaction")
    _write(table, 0, 20)
    table.compact(full=True)  # 2
    _write(table, 10, 20, seed=1)  # 3
    table.compact(full=True)  # 4
    snaps = table.snapshots()
    first, second = _paths(table, snaps[1]), _paths(table, snaps[3])
    result = table.remove_orphan_files(older_than=timedelta(0), dry_run=False)
    assert not (set(first) | set(second)) & set(result.orphan_files)
    table.rollback_to(3)
    cleaned = table.remove_orphan_files(older_than=timedelta(0), dry_run=False)
    assert set(second) <= set(cleaned.orphan_files)  # snapshot 4's changelog is unreferenced
    assert all(table.file_io.exists(p) for p in first)
    assert not any(table.file_io.exists(p) for p in second)


def test_abort_deletes_a_lifted_writes_changelog(tmp_path: Path) -> None:
    table = _table(tmp_path, "lookup")
    _write(table, 0, 10)
    w = table.new_write(commit_user="w")
    w.write_arrow(to_table(make_rows(5, 10, seed=2)))
    messages = w.prepare_commit()
    logs = [
        table.paths.data_file_path(table.schema().partition_path_of(m.partition), m.bucket,
                                   f.file_name)
        for m in messages
        for f in m.compact_increment.changelog_files
    ]  # fmt: skip
    assert logs and all(table.file_io.exists(p) for p in logs)
    w.abort(messages)
    assert not any(table.file_io.exists(p) for p in logs)


def test_a_replayed_lifted_commit_is_a_duplicate_and_deletes_its_changelog(
    tmp_path: Path,
) -> None:
    table = _table(tmp_path, "lookup")
    commit = table.new_commit(commit_user="w")
    w = table.new_write(commit_user="w")
    w.write_arrow(to_table(make_rows(0, 10)))
    commit.commit(w.prepare_commit(), commit_identifier=1)
    assert [s.commit_identifier for s in table.snapshots()] == [1, 1]  # APPEND, COMPACT
    w = table.new_write(commit_user="w")
    w.write_arrow(to_table(make_rows(0, 10, seed=3)))
    replay = w.prepare_commit()
    logs = [f.file_name for m in replay for f in m.compact_increment.changelog_files]
    assert logs and commit.commit(replay, commit_identifier=1).was_duplicate
    left = {s.path.rsplit("/", 1)[-1] for s in table.file_io.list_files(table.root)}
    assert not set(logs) & left
    assert len(table.snapshots()) == 2


def test_a_lifted_level0_file_is_upgraded_in_place_with_its_changelog(tmp_path: Path) -> None:
    """Deduplicate, one format: the level-0 files move up as they are; only changelog is new."""
    table = _table(tmp_path, "lookup")
    w = table.new_write(commit_user="w")
    w.write_arrow(to_table(make_rows(0, 20)))
    messages = w.prepare_commit()
    level0 = {f.file_name for m in messages for f in m.data_increment.new_files}
    assert {f.file_name for m in messages for f in m.compact_increment.compact_after} == level0
    assert all(f.level > 0 for m in messages for f in m.compact_increment.compact_after)
    table.new_commit(commit_user="w").commit(messages)
    names = {s.path.rsplit("/", 1)[-1] for s in table.file_io.list_files(table.root)}
    assert {n for n in names if n.startswith("data-")} == level0
    assert _entries(table, table.latest_snapshot())


def test_lookup_changelog_of_a_level0_row_that_loses_by_sequence_field(tmp_path: Path) -> None:
    """A key with a level-0 row gets changelog even when an older level's row wins.

    Under ``sequence.field`` the merged winner can be the higher-level record;
    Paimon's ``LookupChangelogMergeFunctionWrapper`` still writes the key's
    changelog (it had level-0 rows): ``-U``/``+U`` of the unchanged record.
    """
    import pyarrow.parquet as pq

    table = _table(tmp_path, "lookup", **{"sequence.field": "qty", "write-only": "true"})
    rows = make_rows(0, 1)
    w = table.new_write(commit_user="w")
    w.write_arrow(to_table([{**rows[0], "qty": 10, "name": "won"}]))
    table.new_commit(commit_user="w").commit(w.prepare_commit())
    table.compact(full=True)
    w = table.new_write(commit_user="w")
    w.write_arrow(to_table([{**rows[0], "qty": 5, "name": "lost"}]))
    table.new_commit(commit_user="w").commit(w.prepare_commit())
    table.compact(full=True)
    snap = table.latest_snapshot()
    assert snap.commit_kind == CommitKind.COMPACT
    changelog = [r for p in _paths(table, snap) for r in pq.read_table(p).to_pylist()]
    assert [(r["_VALUE_KIND"], r["name"], r["qty"]) for r in changelog] == [
        (1, "won", 10), (2, "won", 10)
    ]  # fmt: skip
    assert table.to_arrow().column("name").to_pylist() == ["won"]
