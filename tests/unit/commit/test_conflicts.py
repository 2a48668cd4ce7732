"""The conflict matrix: each ordered pair of append / compact / overwrite, another writer first.

"Ours" is planned first (its messages written, a compaction's inputs read);
the "other" operation is then planned and committed between our plan and our
publish (injected in front of our first publish attempt), so ours loses the
race for the snapshot id and retries on top of the other's snapshot. Each
test runs three scopes: the other operation touches the same (partition,
bucket) as ours, another bucket of the same partition, or another
partition. The docstrings state the outcome Paimon's ``FileStoreCommitImpl``
gives (appends are committed without a conflict check; a compaction requires
its deleted files to be live; an overwrite recomputes its deletes against
the snapshot it lands on). Runs on ``InMemoryFileIO``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.helpers import create_table

import snaplake
from snaplake.commit.conflict import EntryKey
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage, CompactIncrement
from snaplake.errors import CommitConflictError
from snaplake.store.format.manifest import ManifestEntry
from snaplake.store.format.manifest_list import read_manifest_list
from snaplake.store.format.snapshot import CommitKind
from snaplake.table import Table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("month", pa.int32())])
SCOPES = ("same-bucket", "other-bucket", "other-partition")
_names = itertools.count()
_ids = itertools.count(1_000)


@pytest.fixture
def table() -> Table:
    """Months 1 and 2, two buckets each, two files per (partition, bucket)."""
    table = create_table(
        f"memory://conflicts-{next(_names)}", schema=SCHEMA, partition_keys=["month"],
        bucket=2, options={"bucket-key": "id"},
    )  # fmt: skip
    for _ in range(2):
        for month, bucket in itertools.product((1, 2), (0, 1)):
            _commit(table, "seed", _append(table, month, bucket))
    return table


def _rows(month: int, n: int = 40) -> pa.Table:
    return pa.table(
        {"id": [next(_ids) for _ in range(n)], "month": pa.array([month] * n, pa.int32())},
        schema=SCHEMA,
    )


def _append(table: Table, month: int, bucket: int) -> list[CommitMessage]:
    """Messages adding one new file to exactly (month, bucket)."""
    write = table.new_write(commit_user="w")
    write.write_arrow(_rows(month))
    messages = write.prepare_commit()
    keep = [m for m in messages if m.bucket == bucket]
    write.abort([m for m in messages if m.bucket != bucket])
    assert len(keep) == 1
    return keep


def _compact(table: Table, month: int, bucket: int) -> list[CommitMessage]:
    """Messages rewriting the live files of (month, bucket) into one file."""
    [split] = [s for s in table.new_scan(partition_filter={"month": month}).plan()
               if s.bucket == bucket]  # fmt: skip
    data = pa.concat_tables(pq.read_table(table.file_io.open_input(p)) for p in split.paths)
    write = table.new_write(commit_user="compactor")
    write.write_arrow(data)
    [written] = write.prepare_commit()
    increment = CompactIncrement(
        compact_before=split.files, compact_after=written.data_increment.new_files
    )
    return [
        CommitMessage(
            partition=split.partition, bucket=bucket, total_buckets=split.total_buckets,
            compact_increment=increment,
        )
    ]  # fmt: skip


def _overwrite(table: Table, month: int, bucket: int) -> list[CommitMessage]:
    """Messages with new rows for ``month`` (any bucket); committed as its overwrite."""
    del bucket
    write = table.new_write(commit_user="o")
    write.write_arrow(_rows(month, 10))
    return write.prepare_commit()


_PLAN = {"append": _append, "compact": _compact, "overwrite": _overwrite}


def _commit(
    table: Table,
    user: str,
    messages: Sequence[CommitMessage],
    *,
    op: str = "append",
    month: int = 1,
    committer: FileStoreCommit | None = None,
) -> snaplake.CommitResult:
    c = committer or table.new_commit(commit_user=user)
    if op == "overwrite":
        return c.commit(messages, overwrite={"month": month})
    kind = CommitKind.COMPACT if op == "compact" else CommitKind.APPEND
    return c.commit(messages, kind=kind)


def _ids_in(messages: Sequence[CommitMessage], table: Table) -> set[int]:
    out: set[int] = set()
    for m in messages:
        part = table.schema().partition_path_of(m.partition)
        for f in m.added_files():
            path = table.paths.data_file_path(part, m.bucket, f.file_name)
            out |= set(pq.read_table(table.file_io.open_input(path)).column("id").to_pylist())
    return out


def _month_ids(table: Table, month: int) -> set[int]:
    got = table.to_arrow()
    return {i for i, m in zip(got["id"].to_pylist(), got["month"].to_pylist(), strict=True)
            if m == month}  # fmt: skip


def _unreferenced_manifests(table: Table) -> set[str]:
    """Manifests and lists no snapshot references (a failed attempt must leave none)."""
    names = {s.path.rsplit("/", 1)[-1] for s in table.file_io.list_files(table.paths.manifest_dir)}
    for snap in table.snapshots():
        for lst in (snap.base_manifest_list, snap.delta_manifest_list):
            names.discard(lst)
            path = table.paths.manifest_path(lst)
            names -= {m.file_name for m in read_manifest_list(table.file_io, path)}
    return names


@dataclass
class Race:
    """The result of one cell: what each side wrote and how ours ended."""

    ours: list[CommitMessage]
    other: list[CommitMessage]
    result: snaplake.CommitResult | None
    error: CommitConflictError | None
    before: dict[int, set[int]]


def _race(table: Table, ours_op: str, other_op: str, scope: str, monkeypatch) -> Race:
    """Plan ours on (month 1, bucket 0); commit the other in front of our publish."""
    before = {m: _month_ids(table, m) for m in (1, 2)}
    ours = _PLAN[ours_op](table, 1, 0)
    month, bucket = {"same-bucket": (1, 0), "other-bucket": (1, 1),
                     "other-partition": (2, 0)}[scope]  # fmt: skip
    other: list[CommitMessage] = []
    committer = table.new_commit(commit_user="ours")
    sc = committer.snapshot_commit
    original = sc.try_commit_once

    def interloper(changes, **kw):
        if not other:
            other.extend(_PLAN[other_op](table, month, bucket))
            _commit(table, "other", other, op=other_op, month=month)
        return original(changes, **kw)

    monkeypatch.setattr(sc, "try_commit_once", interloper)
    try:
        result = _commit(table, "ours", ours, op=ours_op, month=1, committer=committer)
    except CommitConflictError as exc:
        assert _unreferenced_manifests(table) == set()  # our delta manifest was removed
        return Race(ours=ours, other=other, result=None, error=exc, before=before)
    assert result.attempts == 2  # lost once to the other writer, then landed
    assert _unreferenced_manifests(table) == set()
    return Race(ours=ours, other=other, result=result, error=None, before=before)


def _other_month(scope: str) -> int:
    return 2 if scope == "other-partition" else 1


# --------------------------------------------------------------------- ours: append
@pytest.mark.parametrize("scope", SCOPES)
def test_conflict_append_append(table, scope, monkeypatch):
    """Paimon: appends are committed without a conflict check; both land, nothing is lost."""
    race = _race(table, "append", "append", scope, monkeypatch)
    assert race.error is None
    month = _other_month(scope)
    assert _month_ids(table, month) >= race.before[month] | _ids_in(race.other, table)
    assert _month_ids(table, 1) >= _ids_in(race.ours, table)


@pytest.mark.parametrize("scope", SCOPES)
def test_conflict_append_compact(table, scope, monkeypatch):
    """Paimon: an append never conflicts with a compaction; both land, rows unchanged + ours."""
    race = _race(table, "append", "compact", scope, monkeypatch)
    assert race.error is None
    assert _month_ids(table, 1) == race.before[1] | _ids_in(race.ours, table)
    assert _month_ids(table, 2) == race.before[2]


@pytest.mark.parametrize("scope", SCOPES)
def test_conflict_append_overwrite(table, scope, monkeypatch):
    """Paimon: an append lands after an overwrite without a check.

    The overwritten partition holds the overwrite's rows plus our appended
    rows (the overwrite only replaced what was live when it committed).
    """
    race = _race(table, "append", "overwrite", scope, monkeypatch)
    assert race.error is None
    ours, theirs = _ids_in(race.ours, table), _ids_in(race.other, table)
    if scope == "other-partition":
        assert _month_ids(table, 2) == theirs
        assert _month_ids(table, 1) == race.before[1] | ours
    else:
        assert _month_ids(table, 1) == theirs | ours


# -------------------------------------------------------------------- ours: compact
@pytest.mark.parametrize("scope", SCOPES)
def test_conflict_compact_append(table, scope, monkeypatch):
    """Paimon: the compacted files are still live after an append; both land."""
    race = _race(table, "compact", "append", scope, monkeypatch)
    assert race.error is None
    month = _other_month(scope)
    assert _month_ids(table, month) == race.before[month] | _ids_in(race.other, table)
    assert race.result is not None and race.result.files_deleted == 2


@pytest.mark.parametrize("scope", SCOPES)
def test_conflict_compact_compact(table, scope, monkeypatch):
    """Paimon: two compactions of the same bucket conflict ("file deletion conflicts").

    Ours fails with CommitConflictError naming the other's snapshot; of
    another bucket or partition, both land.
    """
    race = _race(table, "compact", "compact", scope, monkeypatch)
    if scope == "same-bucket":
        assert race.error is not None
        other_snapshot = table.latest_snapshot()
        assert race.error.conflicting_snapshot_ids == (other_snapshot.id,)
        assert other_snapshot.commit_user == "other"
    else:
        assert race.error is None
    assert _month_ids(table, 1) == race.before[1]
    assert _month_ids(table, 2) == race.before[2]


@pytest.mark.parametrize("scope", SCOPES)
def test_conflict_compact_overwrite(table, scope, monkeypatch):
    """Paimon: an overwrite of the compacted partition deletes our inputs: conflict.

    An overwrite of another partition leaves them live: both land.
    """
    race = _race(table, "compact", "overwrite", scope, monkeypatch)
    theirs = _ids_in(race.other, table)
    if scope == "other-partition":
        assert race.error is None
        assert _month_ids(table, 1) == race.before[1]
        assert _month_ids(table, 2) == theirs
    else:
        assert race.error is not None
        assert _month_ids(table, 1) == theirs


# ------------------------------------------------------------------ ours: overwrite
@pytest.mark.parametrize("scope", SCOPES)
def test_conflict_overwrite_append(table, scope, monkeypatch):
    """Paimon: an overwrite recomputes its deletes on the snapshot it lands on.

    The other writer's rows appended to the overwritten partition are
    replaced too; rows appended to another partition stay.
    """
    race = _race(table, "overwrite", "append", scope, monkeypatch)
    assert race.error is None
    assert _month_ids(table, 1) == _ids_in(race.ours, table)
    expected_2 = race.before[2] | (
        _ids_in(race.other, table) if scope == "other-partition" else set()
    )
    assert _month_ids(table, 2) == expected_2


@pytest.mark.parametrize("scope", SCOPES)
def test_conflict_overwrite_compact(table, scope, monkeypatch):
    """Paimon: an overwrite never conflicts with a compaction; it replaces its output too."""
    race = _race(table, "overwrite", "compact", scope, monkeypatch)
    assert race.error is None
    assert _month_ids(table, 1) == _ids_in(race.ours, table)
    assert _month_ids(table, 2) == race.before[2]


@pytest.mark.parametrize("scope", SCOPES)
def test_conflict_overwrite_overwrite(table, scope, monkeypatch):
    """Paimon: the later overwrite of a partition wins; of another partition, both stay."""
    race = _race(table, "overwrite", "overwrite", scope, monkeypatch)
    assert race.error is None
    assert _month_ids(table, 1) == _ids_in(race.ours, table)
    if scope == "other-partition":
        assert _month_ids(table, 2) == _ids_in(race.other, table)


# -------------------------------------------------------------------- pluggable rules
class AtMostFilesPerPartition:
    """A toy ConflictRule: at most ``limit`` live files per partition the delta adds to."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: list[int] = []

    def partitions(self, delta: Sequence[ManifestEntry]) -> frozenset[bytes]:
        return frozenset(e.partition for e in delta)

    def check(
        self, merged: Mapping[EntryKey, ManifestEntry], *, delta: Sequence[ManifestEntry],
        snapshot_id: int,
    ) -> None:  # fmt: skip
        self.seen.append(snapshot_id)
        for part in self.partitions(delta):
            files = [e for e in merged.values() if e.partition == part]
            if len(files) > self.limit:
                raise CommitConflictError(f"{len(files)} files", paths=[])


def test_a_conflict_rule_plugs_in_and_sees_the_merged_entries(table, monkeypatch):
    """A rule gets the live files of its partitions with the delta applied, on every attempt."""
    rule = AtMostFilesPerPartition(limit=5)
    committer = FileStoreCommit.of(table, commit_user="ruled", conflict_rules=[rule])
    latest = table.latest_snapshot().id
    committer.commit(_append(table, 1, 0))  # month 1 had 4 files: now 5
    assert rule.seen == [latest]
    with pytest.raises(CommitConflictError, match="6 files"):
        committer.commit(_append(table, 1, 1))
    assert _unreferenced_manifests(table) == set()  # the refused delta manifest is gone
    # Another writer lands in front of our publish: the rule runs again on its snapshot.
    sc = committer.snapshot_commit
    original = sc.try_commit_once
    raced: list[int] = []

    def interloper(changes, **kw):
        if not raced:
            raced.append(_commit(table, "other", _append(table, 2, 1)).snapshot_id or 0)
        return original(changes, **kw)

    monkeypatch.setattr(sc, "try_commit_once", interloper)
    # Month 2 had 4 files: ours makes 5 on the first attempt, 6 with the other's on the retry.
    with pytest.raises(CommitConflictError, match="6 files"):
        committer.commit(_append(table, 2, 0))
    assert rule.seen[-2:] == [raced[0] - 1, raced[0]]
    assert _unreferenced_manifests(table) == set()
