"""``changelog-producer = input``: changelog files, the changelog manifest list, their lifecycle.

Paimon's rules (``MergeTreeWriter.flushWriteBuffer`` with the raw consumer,
``FileStoreCommitImpl.tryCommitOnce``, ``ExpireSnapshotsImpl`` /
``SnapshotDeletion``, ``RollbackHelper``, ``OrphanFilesClean``): each flush
writes the rows as written (merge order, not folded) as level-0 changelog
files; the commit lists them in the snapshot's changelog manifest list with
their row count; compaction writes none; expiry deletes an expired snapshot's
changelog files and manifests; orphan clean and rollback treat them like data
files. Java Paimon and pypaimon read the changelog in
``tests/integration/test_pk_changelog_interop.py``.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from tests.helpers import create_table
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, to_table

import snaplake
from snaplake.commit.message import CommitMessage
from snaplake.errors import UnsupportedTableError
from snaplake.mergetree.kv import SEQUENCE_NUMBER, VALUE_KIND
from snaplake.store.format.manifest import FileKind, read_manifest_file
from snaplake.store.format.manifest_list import read_manifest_list
from snaplake.store.format.snapshot import CommitKind, Snapshot

_KINDS = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}


def _table(tmp_path: Path, **options: str) -> Any:
    return create_table(
        tmp_path,
        schema=PK_SCHEMA,
        partition_keys=["month"],
        primary_keys=PK_KEYS,
        options={"bucket": "2", "changelog-producer": "input", **options},
    )


def _write(
    table: Any, batches: list[tuple[list[dict[str, Any]], list[str]]]
) -> list[CommitMessage]:
    w = table.new_write(commit_user="w")
    for rows, kinds in batches:
        w.write_arrow(to_table(rows), row_kinds=kinds)
    messages: list[CommitMessage] = w.prepare_commit()
    return messages


def _commit(table: Any, batches: list[tuple[list[dict[str, Any]], list[str]]], ident: int) -> None:
    table.new_commit(commit_user="w").commit(_write(table, batches), commit_identifier=ident)


def _changelog_entries(table: Any, snap: Snapshot) -> list[Any]:
    assert snap.changelog_manifest_list is not None
    out = []
    for meta in read_manifest_list(
        table.file_io, table.paths.manifest_path(snap.changelog_manifest_list)
    ):
        out += read_manifest_file(table.file_io, table.paths.manifest_path(meta.file_name))
    return out


def _changelog_paths(table: Any, snap: Snapshot) -> list[str]:
    return [
        table.paths.data_file_path(
            table.schema().partition_path_of(e.partition), e.bucket, e.file.file_name
        )
        for e in _changelog_entries(table, snap)
    ]


def _history() -> list[list[tuple[list[dict[str, Any]], list[str]]]]:
    """Three commits; a key repeats within a commit (several versions in one flush)."""
    first = make_rows(0, 30)
    update = make_rows(10, 10, seed=1)
    second = make_rows(20, 20, seed=2)
    deletes = make_rows(0, 5, seed=3)
    return [
        [(first, ["+I"] * 30), (first[:4], ["+I"] * 4)],
        [(update, ["-U"] * 10), (update, ["+U"] * 10), (second, ["+I"] * 20)],
        [(deletes, ["-D"] * 5)],
    ]


def test_writer_and_commit_produce_changelog_as_paimon(tmp_path: Path) -> None:
    table = _table(tmp_path)
    history = _history()
    for ident, batches in enumerate(history):
        messages = _write(table, batches)
        for m in messages:  # one level-0 data file and one changelog file per bucket flush
            assert m.data_increment.changelog_files and m.data_increment.new_files
            assert all(f.level == 0 for f in m.data_increment.changelog_files)
        table.new_commit(commit_user="w").commit(messages, commit_identifier=ident)
    snaps = table.snapshots()
    for snap, batches in zip(snaps, history, strict=True):
        written = sum(len(rows) for rows, _ in batches)
        assert snap.commit_kind == CommitKind.APPEND
        assert snap.changelog_record_count == written
        raw = json.loads(table.file_io.read_bytes(table.paths.snapshot_path(snap.id)))
        assert raw["changelogManifestList"] == snap.changelog_manifest_list
        size = table.file_io.file_status(table.paths.manifest_path(snap.changelog_manifest_list))
        assert raw["changelogManifestListSize"] == size.size_bytes
        entries = _changelog_entries(table, snap)
        assert {e.kind for e in entries} == {FileKind.ADD}
        assert sum(e.file.row_count for e in entries) == written
        names = {e.file.file_name for e in entries}
        assert all(n.startswith("changelog-") and n.endswith(".parquet") for n in names)
        live = {f.file_name for s in table.new_scan(snapshot_id=snap.id).plan() for f in s.files}
        assert not names & live  # changelog files are never data files of a snapshot
        # The files hold every row as written (kinds included), not folded.
        got: Counter[tuple[Any, ...]] = Counter()
        for path in _changelog_paths(table, snap):
            data = pq.read_table(path)
            keys = list(zip(data.column("month").to_pylist(), data.column("id").to_pylist(),
                            data.column(SEQUENCE_NUMBER).to_pylist(), strict=True))  # fmt: skip
            assert keys == sorted(keys)  # merge order: key, then sequence number
            for row, kind in zip(
                data.select(PK_SCHEMA.names).to_pylist(),
                data.column(VALUE_KIND).to_pylist(),
                strict=True,
            ):
                got[(kind, *row.values())] += 1
        expected = Counter(
            (_KINDS[k], *r.values())
            for rows, kinds in batches
            for r, k in zip(rows, kinds, strict=True)
        )
        assert got == expected
    table.compact(full=True)
    compact = table.latest_snapshot()
    assert compact.commit_kind == CommitKind.COMPACT
    assert compact.changelog_manifest_list is None and compact.changelog_record_count is None


def test_changelog_file_options(tmp_path: Path) -> None:
    table = _table(
        tmp_path,
        **{"changelog-file.prefix": "log-", "changelog-file.compression": "snappy",
           "changelog-file.stats-mode": "none", "metadata.stats-mode": "full"},
    )  # fmt: skip
    _commit(table, _history()[0], 0)
    snap = table.latest_snapshot()
    entries = _changelog_entries(table, snap)
    assert all(e.file.file_name.startswith("log-") for e in entries)
    for path in _changelog_paths(table, snap):
        assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "SNAPPY"
    assert all(e.file.value_stats.null_counts in (None, (None,) * 6) for e in entries)
    data = [f for s in table.new_scan().plan() for f in s.files]
    assert all(f.value_stats.null_counts not in (None, (None,) * 6) for f in data)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"changelog-producer": "on-read"}, "on-read"),
        ({"changelog-producer": "input", "changelog-file.format": "lance"}, "lance"),
        (
            {
                "changelog-producer": "input",
                "file.format.per.level": "0:avro",
                "file.compression.per.level": "0:lz4",
            },
            "avro",
        ),
    ],
)
def test_unsupported_changelog_settings_are_refused_before_writing(
    tmp_path: Path, options: dict[str, str], match: str
) -> None:
    with pytest.raises(UnsupportedTableError, match=match):
        _table(tmp_path, **options)
    assert not list((tmp_path / "db.db").glob("t/schema/*"))


def test_expiry_deletes_changelog_of_expired_snapshots(tmp_path: Path) -> None:
    table = _table(tmp_path, **{"snapshot.num-retained.min": "2", "snapshot.time-retained": "0 s"})
    for ident, batches in enumerate(_history()):
        _commit(table, batches, ident)
    table.compact(full=True)  # snapshot 4, without changelog
    snaps = table.snapshots()
    doomed = {p for s in snaps[:2] for p in _changelog_paths(table, s)}
    kept = set(_changelog_paths(table, snaps[2]))
    lists = {snaps[0].changelog_manifest_list, snaps[1].changelog_manifest_list}
    plan = table.expire_snapshots(dry_run=True)
    assert set(plan.changelog_files) == doomed
    result = table.expire_snapshots()
    assert result.expired_snapshot_ids == (1, 2)
    assert set(result.changelog_files) == doomed and not doomed & set(result.data_files)
    assert not any(table.file_io.exists(p) for p in doomed)
    assert all(table.file_io.exists(p) for p in kept)
    assert {p.rsplit("/", 1)[-1] for p in result.manifest_files} >= lists
    assert result.files_deleted == (
        len(result.data_files) + len(doomed) + len(result.manifest_files) + 2
    )


def test_decoupled_changelog_retention_is_refused_coupled_is_honoured(tmp_path: Path) -> None:
    table = _table(
        tmp_path,
        **{"snapshot.num-retained.min": "1", "snapshot.time-retained": "0 s",
           "changelog.num-retained.min": "1", "changelog.time-retained": "0 s"},
    )  # fmt: skip
    for ident, batches in enumerate(_history()):
        _commit(table, batches, ident)
    assert table.expire_snapshots().expired_snapshot_ids == (1, 2)  # same as the snapshots'
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    catalog.alter_table(
        "db.t", [snaplake.SchemaChange.set_option("changelog.num-retained.min", "5")]
    )
    table = catalog.get_table("db.t")
    _commit(table, [(make_rows(70, 3), ["+I"] * 3)], 9)
    before = sorted(s.path for s in table.file_io.list_files(table.root))
    with pytest.raises(UnsupportedTableError, match=r"changelog\.num-retained\.min"):
        table.expire_snapshots()
    assert sorted(s.path for s in table.file_io.list_files(table.root)) == before


def test_orphan_clean_keeps_live_changelog_and_removes_unreferenced(tmp_path: Path) -> None:
    table = _table(tmp_path)
    _commit(table, _history()[0], 0)
    stray = _write(table, _history()[1])  # a writer that crashed before its commit
    stray_logs = [
        table.paths.data_file_path(table.schema().partition_path_of(m.partition), m.bucket,
                                   f.file_name)
        for m in stray
        for f in m.data_increment.changelog_files
    ]  # fmt: skip
    live = _changelog_paths(table, table.latest_snapshot())
    result = table.remove_orphan_files(older_than=timedelta(0), dry_run=False)
    assert set(stray_logs) <= set(result.orphan_files)
    assert not set(live) & set(result.orphan_files)
    assert all(table.file_io.exists(p) for p in live)


def test_abort_and_duplicates_delete_their_changelog_files(tmp_path: Path) -> None:
    table = _table(tmp_path)
    w = table.new_write(commit_user="w")
    w.write_arrow(to_table(make_rows(0, 10)))
    messages = w.prepare_commit()
    logs = [
        table.paths.data_file_path(table.schema().partition_path_of(m.partition), m.bucket,
                                   f.file_name)
        for m in messages
        for f in m.data_increment.changelog_files
    ]  # fmt: skip
    assert logs and all(table.file_io.exists(p) for p in logs)
    w.abort(messages)
    assert not any(table.file_io.exists(p) for p in logs)

    commit = table.new_commit(commit_user="w")
    commit.commit(_write(table, _history()[0]), commit_identifier=1)
    replay = _write(table, _history()[1])
    replay_logs = [f.file_name for m in replay for f in m.data_increment.changelog_files]
    assert commit.commit(replay, commit_identifier=1).was_duplicate
    left = {s.path.rsplit("/", 1)[-1] for s in table.file_io.list_files(table.root)}
    assert not set(replay_logs) & left
    assert set(_changelog_paths(table, table.latest_snapshot())) <= {
        s.path for s in table.file_io.list_files(table.root)
    }


def test_overwrite_commits_no_changelog(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    table = _table(tmp_path)
    _commit(table, _history()[0], 0)
    messages = _write(table, [(make_rows(0, 6), ["+I"] * 6)])
    logs = [f.file_name for m in messages for f in m.data_increment.changelog_files]
    with caplog.at_level(logging.WARNING):
        table.new_commit(commit_user="w").commit(messages, overwrite=True)
    snap = table.latest_snapshot()
    assert snap.commit_kind == CommitKind.OVERWRITE and snap.changelog_manifest_list is None
    assert any("commits no changelog" in r.getMessage() for r in caplog.records)
    left = {s.path.rsplit("/", 1)[-1] for s in table.file_io.list_files(table.root)}
    assert not set(logs) & left


def test_rollback_removes_long_lived_changelogs_and_orphan_clean_reads_them(
    tmp_path: Path,
) -> None:
    """Paimon's decoupled retention leaves ``changelog/changelog-<id>`` roots (written by Java)."""
    table = _table(tmp_path)
    for ident, batches in enumerate(_history()):
        _commit(table, batches, ident)
    snaps = table.snapshots()
    for snap in snaps:  # what Java's decoupled expiry writes: the snapshot JSON as a changelog
        table.file_io.write_bytes(table.paths.changelog_path(snap.id), snap.to_bytes())
    table.file_io.write_bytes(f"{table.paths.changelog_dir}/LATEST", b"3")
    # Drop snapshot 1 as Java's decoupled expiry would: the snapshot file goes, its
    # changelog files and changelog manifest list stay (changelog/changelog-1 holds them).
    table.file_io.delete(table.paths.snapshot_path(1))
    table.file_io.write_bytes(table.paths.earliest_hint_path, b"2", overwrite=True)
    first_logs = _changelog_paths(table, snaps[0])
    result = table.remove_orphan_files(older_than=timedelta(0), dry_run=True)
    assert not set(first_logs) & set(result.orphan_files)

    rolled = table.rollback_to(2)
    assert rolled.changelogs_deleted == (3,)
    assert not table.file_io.exists(table.paths.changelog_path(3))
    assert table.file_io.exists(table.paths.changelog_path(2))
    assert table.file_io.read_bytes(f"{table.paths.changelog_dir}/LATEST") == b"2"
    third_logs = _changelog_paths(table, snaps[2])
    cleaned = table.remove_orphan_files(older_than=timedelta(0), dry_run=False)
    assert set(third_logs) <= set(cleaned.orphan_files)  # snapshot 3's changelog is unreferenced
    assert all(table.file_io.exists(p) for p in first_logs)
