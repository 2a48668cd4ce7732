"""Every commit carries the index manifest forward (Paimon's BucketedCombiner), on real tables.

The messages of ordinary writes get HASH files attached (the commit path is the
same whatever table kind wrote them): APPEND, COMPACT, OVERWRITE and manifest merge
snapshots must publish the previous index state combined with their own changes,
reuse the previous name when nothing changed, clean up after lost or failed
attempts, and keep everything on an unknown outcome.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import pytest
from tests.helpers import create_table, rows

import snaplake
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage, CompactIncrement, DataIncrement
from snaplake.commit.producer import CommitRequest
from snaplake.compaction.manifest_merge import ManifestFileMerger
from snaplake.errors import CommitStateUnknownError, StorageError
from snaplake.store.format.binary_row import decode_binary_row
from snaplake.store.format.hash_index import write_hash_index
from snaplake.store.format.index_file import IndexFileMeta, read_index_manifest
from snaplake.store.format.snapshot import CommitKind, Snapshot
from snaplake.store.io.memory_file_io import InMemoryFileIO
from snaplake.store.read.index_scan import read_index_entries

_counter = itertools.count()


@pytest.fixture
def table() -> snaplake.Table:
    return create_table(f"memory://idx{next(_counter)}", partition_keys=["month"])


def _latest(table: snaplake.Table) -> Snapshot:
    snap = table.latest_snapshot()
    assert snap is not None
    return snap


def _committer(table: snaplake.Table, user: str = "u") -> FileStoreCommit:
    return FileStoreCommit(table, commit_user=user, sleep=lambda s: None)


def _hash_file(table: snaplake.Table, seed: int) -> IndexFileMeta:
    return write_hash_index(table.file_io, table.paths, np.arange(seed, seed + 3, dtype=np.int32))


def _written(table: snaplake.Table, start: int, count: int, *, index: bool = True, seed: int = 0):
    """Messages of a real write of ``rows(start, count)``, each with a new HASH file."""
    w = table.new_write(commit_user="u")
    w.write_arrow(rows(start, count))
    messages = w.prepare_commit()
    if not index:
        return messages
    return [
        dataclasses.replace(
            m,
            data_increment=dataclasses.replace(
                m.data_increment, new_index_files=(_hash_file(table, seed + 10 * i),)
            ),
        )
        for i, m in enumerate(messages)
    ]


def _state(table: snaplake.Table) -> dict[tuple[bytes, int], str]:
    entries = read_index_entries(table, table.latest_snapshot())
    assert all(e.kind.name == "ADD" for e in entries)
    return {(e.partition, e.bucket): e.index_file.file_name for e in entries}


def _index_only(m: CommitMessage, *, add=(), delete=(), compact: bool = False) -> CommitMessage:
    inc: dict[str, Any] = {"new_index_files": tuple(add), "deleted_index_files": tuple(delete)}
    if compact:
        return CommitMessage(
            partition=m.partition, bucket=m.bucket, total_buckets=m.total_buckets,
            compact_increment=CompactIncrement(**inc),
        )  # fmt: skip
    return CommitMessage(
        partition=m.partition, bucket=m.bucket, total_buckets=m.total_buckets,
        data_increment=DataIncrement(**inc),
    )  # fmt: skip


def _index_manifests(table: snaplake.Table) -> list[str]:
    return sorted(
        s.path.rsplit("/", 1)[-1]
        for s in table.file_io.list_files(table.paths.manifest_dir)
        if "/index-manifest-" in s.path
    )


def test_append_carries_reuses_and_replaces(table: snaplake.Table) -> None:
    c = _committer(table)
    first = _written(table, 0, 30)
    c.commit(first)
    s1 = table.latest_snapshot()
    assert s1 is not None and s1.index_manifest
    state1 = _state(table)
    assert state1 == {
        (m.partition, m.bucket): m.data_increment.new_index_files[0].file_name for m in first
    }
    c.commit(_written(table, 100, 30, index=False))
    s2 = table.latest_snapshot()
    assert s2 is not None and s2.index_manifest == s1.index_manifest  # nothing changed: reused
    one = _written(table, 200, 1, seed=1000)  # month 3 only
    c.commit(one)
    state3 = _state(table)
    key = (one[0].partition, one[0].bucket)
    assert state3 == {**state1, key: one[0].data_increment.new_index_files[0].file_name}
    assert _latest(table).index_manifest not in (s1.index_manifest, None)
    assert table.to_arrow().num_rows == 61


def test_compact_increment_changes_go_to_the_compact_snapshot(table: snaplake.Table) -> None:
    c = _committer(table)
    msgs = _written(table, 0, 30)
    c.commit(msgs)
    a, b = msgs[0], msgs[1]
    new = _hash_file(table, 500)
    result = c.commit(
        [
            _index_only(a, add=[new], compact=True),
            _index_only(b, delete=b.data_increment.new_index_files, compact=True),
        ],
        kind=CommitKind.COMPACT,
    )
    snap = table.latest_snapshot()
    assert snap is not None and snap.id == result.snapshot_id
    assert snap.commit_kind == CommitKind.COMPACT
    state = _state(table)
    assert state[(a.partition, a.bucket)] == new.file_name
    assert (b.partition, b.bucket) not in state
    assert len(state) == len(msgs) - 1


def test_write_changes_apply_before_compaction_changes(table: snaplake.Table) -> None:
    """One snaplake commit = Paimon's APPEND then COMPACT: the compaction's DELETE wins."""
    c = _committer(table)
    msgs = _written(table, 0, 30)
    c.commit(msgs)
    m = msgs[0]
    added, other = _hash_file(table, 700), _hash_file(table, 800)
    both = dataclasses.replace(
        _index_only(m, add=[added]),
        compact_increment=CompactIncrement(deleted_index_files=(added,)),
    )
    c.commit([both, _index_only(msgs[1], add=[other])])
    state = _state(table)
    assert (m.partition, m.bucket) not in state
    assert state[(msgs[1].partition, msgs[1].bucket)] == other.file_name


def test_overwrite_drops_the_overwritten_partitions_entries(table: snaplake.Table) -> None:
    c = _committer(table)
    msgs = _written(table, 0, 30)
    c.commit(msgs)
    before = _state(table)
    types = table.schema().partition_types
    month_of = {m.partition: decode_binary_row(m.partition, types)[0] for m in msgs}
    # static overwrite of month 1 with new rows of month 1 (and their new HASH file)
    w = table.new_write(commit_user="u")
    w.write_arrow(rows(300, 1))  # id 300: month 1
    fresh = [
        dataclasses.replace(m, data_increment=dataclasses.replace(
            m.data_increment, new_index_files=(_hash_file(table, 900),)))
        for m in w.prepare_commit()
    ]  # fmt: skip
    c.commit(fresh, overwrite={"month": 1})
    assert _latest(table).commit_kind == CommitKind.OVERWRITE
    state = _state(table)
    assert state == {
        **{k: v for k, v in before.items() if month_of[k[0]] != 1},
        (fresh[0].partition, fresh[0].bucket): fresh[0].data_increment.new_index_files[0].file_name,
    }
    # dynamic overwrite without a new HASH file: month 2's entries go (Paimon drops every
    # index entry of the overwritten partitions), the other months' stay
    kept = _state(table)
    plain = _written(table, 301, 1, index=False)
    c.commit(plain, overwrite=True)
    assert _state(table) == {k: v for k, v in kept.items() if month_of[k[0]] != 2}
    # a message naming a live HASH file in kept_index_files (a writer that restored the
    # index wrote known keys there) keeps exactly that file; the partition's others go
    c.commit(_written(table, 302, 12, seed=700))  # month 2 gets HASH files again
    relying = _written(table, 304, 1, index=False)  # id 304: month 2
    p2, b2 = relying[0].partition, relying[0].bucket
    live = next(
        e.index_file for e in read_index_entries(table, table.latest_snapshot())
        if (e.partition, e.bucket) == (p2, b2)
    )  # fmt: skip
    relying = [
        dataclasses.replace(m, data_increment=dataclasses.replace(
            m.data_increment, kept_index_files=(live,)))
        for m in relying
    ]  # fmt: skip
    others = {k: v for k, v in _state(table).items() if month_of[k[0]] != 2}
    c.commit(relying, overwrite=True)
    assert _state(table) == {**others, (p2, b2): live.file_name}
    kept = _state(table)
    # with a new HASH file, only the touched partition (month 2) loses its entries
    fresh = _written(table, 301, 1, seed=500)
    c.commit(fresh, overwrite=True)
    after = _state(table)
    assert {k for k in after if month_of[k[0]] == 2} == {(fresh[0].partition, fresh[0].bucket)}
    assert after[(fresh[0].partition, fresh[0].bucket)] == (
        fresh[0].data_increment.new_index_files[0].file_name
    )
    assert {k: v for k, v in after.items() if month_of[k[0]] != 2} == {
        k: v for k, v in kept.items() if month_of[k[0]] != 2
    }
    # dropping the whole table drops the whole index
    c.commit([], overwrite={})
    assert _latest(table).index_manifest is None
    assert _state(table) == {}


def test_manifest_merge_keeps_the_index_manifest(table: snaplake.Table) -> None:
    c = _committer(table)
    c.commit(_written(table, 0, 30))
    for i in range(3):
        c.commit(_written(table, 100 + i, 1, index=False))
    name = _latest(table).index_manifest
    result = ManifestFileMerger(commit=c).execute(full=True)
    assert result.merged
    latest = _latest(table)
    assert latest.commit_kind == CommitKind.COMPACT and latest.index_manifest == name


def test_lost_race_deletes_its_index_manifest(table: snaplake.Table) -> None:
    c = _committer(table)
    c.commit(_written(table, 0, 30))
    stale = table.latest_snapshot()
    _committer(table, "other").commit(_written(table, 50, 3, seed=50))  # wins the race
    request = CommitRequest(schema=table.schema(), messages=tuple(_written(table, 60, 3, seed=60)))
    producer = c.producer(request, overwrite=None)
    policy = c.retry_policy(table.schema())
    result = c.snapshot_commit.commit(producer, policy=policy, latest=stale)
    assert result.attempts == 2  # the first attempt, on the stale snapshot, lost
    referenced = {s.index_manifest for s in table.snapshots()}
    assert set(_index_manifests(table)) == referenced - {None}


def test_failed_publish_deletes_and_unknown_outcome_keeps(table: snaplake.Table) -> None:
    c = _committer(table)
    c.commit(_written(table, 0, 30))
    fio = table.file_io
    assert isinstance(fio, InMemoryFileIO)
    fio.inject_fault("write_if_absent", path_contains="snapshot-2")
    with pytest.raises(OSError, match="injected"):
        c.commit(_written(table, 40, 3, seed=40))
    assert _index_manifests(table) == [_latest(table).index_manifest]
    for n in range(1, 10):
        fio.inject_fault(
            "write_if_absent", path_contains="snapshot-2", nth=n,
            error=lambda p: StorageError("down", path=p, operation="write_if_absent"),
        )  # fmt: skip
    msgs = _written(table, 50, 3, seed=50)
    with pytest.raises(CommitStateUnknownError):
        c.commit(msgs, commit_identifier=7)
    assert len(_index_manifests(table)) == 2  # the new one stays: it may be referenced
    for m in msgs:
        assert fio.exists(
            table.paths.index_file_path(m.data_increment.new_index_files[0].file_name)
        )


def test_duplicate_deletes_only_its_unreferenced_index_files(table: snaplake.Table) -> None:
    c = _committer(table)
    msgs = _written(table, 0, 30)
    c.commit(msgs, commit_identifier=5)
    replay = _written(table, 0, 30, seed=2000)
    assert c.commit(replay, commit_identifier=5).was_duplicate
    paths = table.paths
    for m in replay:
        assert not table.file_io.exists(
            paths.index_file_path(m.data_increment.new_index_files[0].file_name)
        )
    # a replay of the very messages that landed keeps their (referenced) index files
    assert c.commit(msgs, commit_identifier=5).was_duplicate
    for m in msgs:
        name = m.data_increment.new_index_files[0].file_name
        assert table.file_io.exists(paths.index_file_path(name))
    snap = _latest(table)
    assert snap.index_manifest is not None
    names = {
        e.index_file.file_name
        for e in read_index_manifest(table.file_io, paths, snap.index_manifest)
    }
    assert names == {m.data_increment.new_index_files[0].file_name for m in msgs}
