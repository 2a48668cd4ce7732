"""ConflictDetection: checks of a pending delta against live files.

A commit that only ADDs files never conflicts by itself. A commit that
DELETEs files (compaction, overwrite, row rewrites) requires every deleted
file to be live in the snapshot it publishes on top of, its bucket count to
match the live files of the same partition, and the delta itself to be
self-consistent. Further rules plug in as :class:`ConflictRule` objects,
given by the table's FileStore (e.g. primary-key tables' key-range rule
over the LSM levels >= 1): each names the partitions it needs and checks
the live files of those partitions with the delta applied.

Source: Paimon ``ConflictDetection`` (``checkNoConflictsOrFail``: deleted files
must exist, total buckets unchanged, then further checks over the merged
entries), ``PrimaryKeyConflictDetection`` (the LSM rule,
:mod:`snaplake.mergetree.conflict`) and Iceberg's serializable-isolation
validation of deleted files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from snaplake.errors import CommitConflictError
from snaplake.store.format.manifest import FileKind, ManifestEntry, read_manifest_file
from snaplake.store.format.manifest_list import read_manifest_list
from snaplake.store.format.paths import POSTPONE_BUCKET
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.read.scan import FileStoreScan, merge_live_entries
from snaplake.store.table_storage import TableStorage

__all__ = [
    "ConflictDetection",
    "ConflictRule",
    "apply_entries",
    "check_deletes_live",
    "check_self_consistent",
    "check_total_buckets",
]

_REMOVER_SEARCH_DEPTH = 50

EntryKey = tuple[Any, ...]


class ConflictRule(Protocol):
    """A check of a commit's delta against the live files it would land on.

    Source: the checks Paimon's ``ConflictDetection.checkNoConflictsOrFail``
    runs over the merged base and delta entries.
    """

    def partitions(self, delta: Sequence[ManifestEntry]) -> frozenset[bytes]:
        """Partitions (BinaryRow bytes) whose live files the rule needs (empty: no check)."""

    def check(
        self,
        merged: Mapping[EntryKey, ManifestEntry],
        *,
        delta: Sequence[ManifestEntry],
        snapshot_id: int,
    ) -> None:
        """Refuse ``delta`` if it conflicts.

        Args:
            merged: The live ADD entries of (at least) :meth:`partitions`
                after applying ``delta`` to the snapshot, keyed by identity.
            delta: The commit's entries.
            snapshot_id: The snapshot the commit would land on.

        Raises:
            CommitConflictError: the commit cannot succeed on this snapshot.
        """


def check_self_consistent(entries: Sequence[ManifestEntry]) -> None:
    """Refuse a delta that ADDs or DELETEs one file twice.

    Raises:
        CommitConflictError: a file identity appears twice with the same kind.
    """
    seen: set[tuple[FileKind, EntryKey]] = set()
    dupes = []
    for e in entries:
        key = (e.kind, e.identifier())
        if key in seen:
            dupes.append(e.file.file_name)
        seen.add(key)
    if dupes:
        raise CommitConflictError(
            f"the commit lists files twice: {sorted(set(dupes))[:10]}; each message must name "
            "a file once (were the same messages passed twice?)",
            paths=sorted(set(dupes)),
        )


def check_total_buckets(adds: Sequence[ManifestEntry], expected: int) -> None:
    """Refuse files written for another bucket count than the table's ``bucket`` option.

    Postpone-bucket tables (``expected = -2``) hold their compacted files in
    real buckets, each partition with its own count: a file of a real bucket
    may carry any positive count there (the FileStore's conflict rule keeps a
    partition's count consistent).

    Args:
        adds: The commit's ADD entries.
        expected: The table's ``bucket`` option in the commit's schema.

    Raises:
        CommitConflictError: a file was written for another bucket count (the
            table was rescaled); naming the files.
    """
    bad = [e for e in adds if not _written_for(e, expected)]
    if bad:
        raise CommitConflictError(
            f"files were written for {sorted({e.total_buckets for e in bad})} bucket(s) but the "
            f"table now has bucket = {expected} (it was rescaled); rewrite the data with a new "
            "writer",
            paths=[e.file.file_name for e in bad],
        )


def _written_for(entry: ManifestEntry, expected: int) -> bool:
    if expected == POSTPONE_BUCKET and entry.bucket >= 0:
        return entry.total_buckets > 0
    return entry.total_buckets == expected


def apply_entries(
    live: dict[EntryKey, ManifestEntry],
    entries: Iterable[ManifestEntry],
    *,
    partitions: frozenset[bytes] | None = None,
) -> None:
    """Apply ``entries`` (oldest first) to ``live`` in place, optionally only some partitions."""
    for e in entries:
        if partitions is not None and e.partition not in partitions:
            continue
        if e.kind == FileKind.ADD:
            live[e.identifier()] = e
        else:
            live.pop(e.identifier(), None)


def check_deletes_live(
    deletes: Sequence[ManifestEntry],
    live: Mapping[EntryKey, ManifestEntry],
    *,
    snapshot_id: int,
    removed_by: Mapping[str, int] | None = None,
) -> None:
    """Require every DELETE to name a live file with an unchanged bucket count.

    Args:
        deletes: The commit's DELETE entries.
        live: Live ADD entries of (at least) the touched partitions in the
            snapshot being committed on, keyed by identity.
        snapshot_id: Id of that snapshot (for the message).
        removed_by: Optional ``file name -> snapshot id`` that deleted it.

    Raises:
        CommitConflictError: a file is no longer live or the table's bucket
            count changed. Retrying the same messages cannot succeed.
    """
    missing = [d for d in deletes if d.identifier() not in live]
    if missing:
        names = sorted(d.file.file_name for d in missing)
        who = sorted({removed_by[n] for n in names if removed_by and n in removed_by})
        by = f" (removed by snapshot {', '.join(map(str, who))})" if who else ""
        raise CommitConflictError(
            f"{len(names)} file(s) this commit deletes are no longer live in snapshot "
            f"{snapshot_id}{by}: {names[:10]}; another commit (compaction or overwrite) "
            "replaced them — re-plan the operation on the latest snapshot",
            paths=names,
            conflicting_snapshot_ids=who,
        )
    for d in deletes:
        current = live[d.identifier()]
        if current.total_buckets != d.total_buckets:
            raise CommitConflictError(
                f"bucket count of {d.file.file_name} changed from {d.total_buckets} to "
                f"{current.total_buckets} (the table was rescaled); re-plan the operation",
                paths=[d.file.file_name],
                conflicting_snapshot_ids=[snapshot_id],
            )


class ConflictDetection:
    """Checks one commit's DELETE entries against each snapshot it tries to publish on.

    The first check reads the live files of the touched partitions of the
    latest snapshot; a retry after a lost race only applies the delta
    manifests of the snapshots committed since (unless history was rewritten,
    e.g. by a rollback, which triggers a full re-read).

    Args:
        table: The table's storage, paths and managers (scans and snapshots
            are read through them).
        rules: Further checks, run in order after the deleted-files check:
            the table kind's (:meth:`snaplake.filestore.FileStore.conflict_rules`)
            and any the caller adds. This class adds none itself.

    Source: Paimon ``ConflictDetection`` and ``FileStoreCommitImpl``'s
    incremental ``readIncrementalChanges`` on retry.
    """

    def __init__(self, table: TableStorage, *, rules: Sequence[ConflictRule] = ()) -> None:
        self.table = table
        self.rules = tuple(rules)
        self._checked: Snapshot | None = None
        self._live: dict[EntryKey, ManifestEntry] = {}

    def check(self, delta: Sequence[ManifestEntry], latest: Snapshot | None) -> None:
        """Require ``delta`` to fit ``latest``: deleted files live, then every rule.

        The rules are the table kind's, given by its FileStore
        (:meth:`snaplake.filestore.FileStore.conflict_rules`): on a
        primary-key table the files ``delta`` puts at levels >= 1 must not
        overlap other files of their level
        (:class:`snaplake.mergetree.conflict.LsmConflictRule`).

        Args:
            delta: The commit's entries (ADD and DELETE).
            latest: The snapshot the commit would land on.

        Raises:
            CommitConflictError: a deleted file is not live (naming it and,
                when found within the last 50 snapshots, the snapshot that
                removed it), the bucket count changed, the table is empty, or
                a rule refused the delta.

        Storage:
            The first call reads the manifests of the partitions the deletes
            and rules touch; later calls read the delta lists of the
            snapshots committed since.
        """
        rules = self.rules
        deletes = [e for e in delta if e.kind == FileKind.DELETE]
        partitions = frozenset(d.partition for d in deletes).union(
            *(rule.partitions(delta) for rule in rules)
        )
        if not partitions:
            return
        # A file this commit adds and deletes again (a first-row writer's level-0
        # file compacted up in the same commit) is live for the commit.
        own = {e.identifier() for e in delta if e.kind == FileKind.ADD}
        outside = [d for d in deletes if d.identifier() not in own]
        if latest is None:
            if outside:
                raise CommitConflictError(
                    "the commit deletes files but the table has no snapshot",
                    paths=[d.file.file_name for d in outside],
                )
            self._run_rules(rules, {}, delta, snapshot_id=0)
            return
        self._update_live(latest, partitions)
        missing = [d for d in outside if d.identifier() not in self._live]
        removed_by = self._find_removers(missing, latest) if missing else None
        check_deletes_live(outside, self._live, snapshot_id=latest.id, removed_by=removed_by)
        self._run_rules(rules, dict(self._live), delta, snapshot_id=latest.id)

    @staticmethod
    def _run_rules(
        rules: Sequence[ConflictRule],
        live: dict[EntryKey, ManifestEntry],
        delta: Sequence[ManifestEntry],
        *,
        snapshot_id: int,
    ) -> None:
        if not rules:
            return
        apply_entries(live, delta)
        for rule in rules:
            rule.check(live, delta=delta, snapshot_id=snapshot_id)

    def _update_live(self, latest: Snapshot, partitions: frozenset[bytes]) -> None:
        """Bring the live files of ``partitions`` up to ``latest`` (incrementally when possible)."""
        if self._checked is not None and self._still_current(self._checked):
            for sid in range(self._checked.id + 1, latest.id + 1):
                snap = self.table.snapshot_manager.snapshot(sid)
                apply_entries(self._live, self.delta_entries(snap), partitions=partitions)
        else:
            t = self.table
            scan = FileStoreScan(
                file_io=t.file_io, paths=t.paths, schema_manager=t.schema_manager, snapshot=latest
            )
            live = merge_live_entries(scan.read_entries(scan.manifest_metas()))
            self._live = {k: e for k, e in live.items() if e.partition in partitions}
        self._checked = latest

    def _still_current(self, snap: Snapshot) -> bool:
        current = self.table.snapshot_manager.try_snapshot(snap.id)
        return (
            current is not None
            and current.time_millis == snap.time_millis
            and current.commit_user == snap.commit_user
        )

    def delta_entries(self, snap: Snapshot) -> list[ManifestEntry]:
        """Entries of ``snap``'s delta manifests, in order."""
        file_io, paths = self.table.file_io, self.table.paths
        metas = read_manifest_list(file_io, paths.manifest_path(snap.delta_manifest_list))
        out: list[ManifestEntry] = []
        for m in metas:
            out.extend(read_manifest_file(file_io, paths.manifest_path(m.file_name)))
        return out

    def _find_removers(self, missing: Sequence[ManifestEntry], latest: Snapshot) -> dict[str, int]:
        """Best effort: which recent snapshot DELETEd each missing file."""
        wanted = {d.file.file_name for d in missing}
        found: dict[str, int] = {}
        earliest = self.table.snapshot_manager.earliest_snapshot_id() or 1
        low = max(earliest, latest.id - _REMOVER_SEARCH_DEPTH)
        for sid in range(latest.id, low - 1, -1):
            snap = self.table.snapshot_manager.try_snapshot(sid)
            if snap is None:
                continue
            for e in self.delta_entries(snap):
                if e.kind == FileKind.DELETE and e.file.file_name in wanted:
                    found.setdefault(e.file.file_name, sid)
            if len(found) == len(wanted):
                break
        return found
