from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

import pytest
from tests.helpers import rows, sorted_ids
from tests.unit.compaction.conftest import append

from snaplake.compaction.orphan_clean import OrphanFilesClean, resolve_cutoff
from snaplake.errors import CorruptMetadataError
from snaplake.store.format.decoded_cache import metadata_cache


def _age(path: str, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def _age_all(table, seconds: float) -> None:
    for s in table.file_io.list_files(table.root):
        _age(s.path, seconds)


def test_cutoff_rules():
    now = datetime(2026, 1, 2, tzinfo=UTC)
    assert resolve_cutoff(timedelta(days=1), now=now) == datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="future"):
        resolve_cutoff(now + timedelta(seconds=1), now=now)
    with pytest.raises(ValueError, match="timezone"):
        resolve_cutoff(datetime(2026, 1, 1), now=now)
    with pytest.raises(ValueError, match="negative"):
        resolve_cutoff(timedelta(seconds=-1), now=now)


def test_future_time_is_refused_by_the_table(make_table):
    table = make_table()
    with pytest.raises(ValueError, match="future"):
        table.remove_orphan_files(older_than=datetime.now(UTC) + timedelta(hours=1))


def test_finds_only_unreferenced_old_files(make_table):
    table = make_table()
    for i in range(3):
        append(table, i * 10, 10)
    table.create_tag("t1", snapshot_id=1)
    # an aborted write (data file) and a stray manifest + a temp file in snapshot/
    w = table.new_write(commit_user="crashed")
    w.write_arrow(rows(1000, 5))
    messages = w.prepare_commit()
    stray_manifest = table.paths.manifest_path("manifest-stray-0")
    table.file_io.write_bytes(stray_manifest, b"junk")
    stray_tmp = f"{table.paths.snapshot_dir}/.snapshot-9.abc.tmp"
    table.file_io.write_bytes(stray_tmp, b"x")
    _age_all(table, 3 * 86400)
    result = table.remove_orphan_files()  # dry run by default
    assert result.dry_run
    assert result.files_deleted == 0
    found = set(result.orphan_files)
    assert stray_manifest in found
    assert stray_tmp in found
    assert {p for p in found if "/bucket-" in p} == {
        p for m in messages for p in _data_paths(table, m)
    }
    assert all(os.path.exists(p) for p in found)
    done = table.remove_orphan_files(dry_run=False)
    assert set(done.orphan_files) == found
    assert done.files_deleted == len(found)
    assert not any(os.path.exists(p) for p in found)
    metadata_cache.clear()
    assert sorted_ids(table.to_arrow()) == list(range(30))
    assert sorted_ids(table.to_arrow(tag="t1")) == list(range(10))
    # schema, snapshot, hint and tag files are never candidates
    for keep in [table.paths.schema_path(0), table.paths.snapshot_path(1),
                 table.paths.latest_hint_path, table.paths.tag_path("t1")]:  # fmt: skip
        assert os.path.exists(keep)


def _data_paths(table, message):
    from snaplake.store.format.binary_row import decode_binary_row
    from snaplake.store.format.partition import partition_path

    schema = table.schema()
    values = decode_binary_row(message.partition, schema.partition_types)
    part = partition_path(schema.partition_keys, values, schema.partition_types)
    return [
        table.paths.data_file_path(part, message.bucket, f.file_name) for f in message.added_files()
    ]


def test_grace_period_protects_a_commit_in_flight(make_table):
    """Files written by a writer that has not committed yet are young: never deleted."""
    table = make_table()
    append(table, 0, 10)
    w = table.new_write(commit_user="slow")
    w.write_arrow(rows(100, 10))
    messages = w.prepare_commit()  # data files on disk, not yet published
    in_flight = {p for m in messages for p in _data_paths(table, m)}
    # default grace (1 day): the in-flight files are not even candidates
    result = table.remove_orphan_files(dry_run=False)
    assert not (set(result.orphan_files) & in_flight)
    table.new_commit(commit_user="slow").commit(messages)
    assert sorted_ids(table.to_arrow()) == [*range(10), *range(100, 110)]
    # whereas without the grace period the same unpublished files *would* be orphans:
    w2 = table.new_write(commit_user="slow")
    w2.write_arrow(rows(200, 10))
    pending = {p for m in w2.prepare_commit() for p in _data_paths(table, m)}
    clean = OrphanFilesClean(
        file_io=table.file_io, paths=table.paths, snapshot_manager=table.snapshot_manager,
        older_than=timedelta(0), now=datetime.now(UTC) + timedelta(seconds=5),
    )  # fmt: skip
    assert pending <= set(clean.plan().orphan_files)


def test_expired_files_become_orphans_only_when_unreferenced(make_table):
    table = make_table()
    for i in range(4):
        append(table, i * 10, 10)
    table.compact()
    _age_all(table, 2 * 86400)
    assert table.remove_orphan_files().orphan_files == ()  # every file still referenced


def test_missing_manifest_list_of_retained_snapshot_stops(make_table):
    table = make_table()
    for i in range(2):
        append(table, i, 1)
    path = table.paths.manifest_path(table.snapshot(2).delta_manifest_list)
    os.remove(path)
    metadata_cache.clear()
    _age_all(table, 2 * 86400)
    with pytest.raises(CorruptMetadataError):
        table.remove_orphan_files(dry_run=False)


def test_listing_by_directory_finds_what_one_listing_finds(make_table):
    """scan_dirs + list_candidates per directory + clean(...) is plan() taken apart."""
    from snaplake.compaction.orphan_clean import list_candidates

    table = make_table()
    for i in range(3):
        append(table, i * 10, 10)
    w = table.new_write(commit_user="crashed")
    w.write_arrow(rows(1000, 30))
    w.prepare_commit()  # never committed: orphans in three partitions
    table.file_io.write_bytes(table.paths.manifest_path("manifest-stray-0"), b"junk")
    table.file_io.write_bytes(f"{table.paths.schema_dir}/.snaplake-probe-x", b"")
    _age_all(table, 3 * 86400)
    clean = OrphanFilesClean(
        file_io=table.file_io, paths=table.paths, snapshot_manager=table.snapshot_manager
    )
    data, meta = clean.scan_dirs()
    assert sorted(d.rsplit("/", 1)[-1] for d in data) == ["month=1", "month=2", "month=3"]
    assert {"manifest", "schema", "snapshot"} <= {d.rsplit("/", 1)[-1] for d in meta}
    listed = [
        s
        for d in data + meta
        for s in list_candidates(
            table.file_io, table_root=table.root, directory=d, cutoff_ms=clean.cutoff_ms
        )
    ]
    deleted: list[str] = []
    apart = clean.clean(listed, dry_run=False, delete=deleted.extend)
    whole = clean.plan()
    assert apart.orphan_files == whole.orphan_files
    assert sorted(deleted) == sorted(whole.orphan_files)
    assert apart.files_scanned == whole.files_scanned
    assert len(apart.orphan_files) == 5  # 3 data files, the manifest, the probe
