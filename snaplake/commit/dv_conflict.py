"""Deletion-vector conflicts: a commit's vectors must still fit the snapshot it lands on.

A deletion vector names its data file and row positions; it is only right for
the file it was computed on and only complete if it holds every earlier
deletion of that file. So a commit is refused (``DeletionVectorConflictError``, the
operation plans again) when, on the snapshot it would publish on:

1. a DELETION_VECTORS file it replaces (DELETE) is no longer live (another
   delete or a compaction replaced it);
2. in a bucketed table (one vectors file per bucket), a new vectors file
   replaces a live file of its bucket that the commit does not name: a
   writer's lift or a compaction built its file from an older one, and
   publishing it would drop the other commit's vectors;
3. a vector it writes names a data file that is not live after the commit (a
   compaction or overwrite rewrote the file: its rows would come back in the
   new file);
4. a data file it removes (a compaction's input) still has a vector it did
   not replace (a delete marked rows of the input after the compaction read
   it: they would come back in the output);
5. a data file it writes a vector for ends up with two vectors (two deletes of
   one file in a bucket-unaware table, each adding a new vector file).

Appends never conflict: their files are new and carry no vector. Every
refusal is a :class:`~snaplake.errors.DeletionVectorConflictError`
(retryable: planning the operation again on the new snapshot helps).

Source: Paimon ``ConflictDetection`` (the deletion-vector checks over base
entries joined with their vector files, ``checkForDeletionVectorsConflict``),
``ConflictDetection.shouldBeOverwriteCommit``; rule 2 is snaplake's own
(Paimon 0.9 detects the compaction race through its inputs' "deleted files
must be live" check only).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from snaplake.errors import DeletionVectorConflictError
from snaplake.store.format.index_file import (
    DELETION_VECTORS_INDEX,
    IndexManifestEntry,
    combine_index_entries,
)
from snaplake.store.format.manifest import FileKind, ManifestEntry
from snaplake.store.read.index_scan import read_index_entries
from snaplake.store.table_storage import TableStorage

__all__ = ["DeletionVectorRule"]

EntryKey = tuple[object, ...]


class DeletionVectorRule:
    """The deletion-vector checks of one commit (a :class:`~snaplake.commit.conflict.ConflictRule`).

    Args:
        table: The table's storage (reads the index manifest of the snapshot checked).
        by_file_name: Index types the table combines by file name.

    Attributes:
        changes: The attempt's index changes, in the groups the publish applies
            (writes', then compactions'); set before each check.
    """

    def __init__(self, table: TableStorage, *, by_file_name: Collection[str] = ()) -> None:
        self.table = table
        self.by_file_name = frozenset(by_file_name)
        self.changes: tuple[tuple[IndexManifestEntry, ...], ...] = ()

    def _dv_changes(self) -> list[IndexManifestEntry]:
        return [
            e for g in self.changes for e in g if e.index_file.index_type == DELETION_VECTORS_INDEX
        ]

    def partitions(self, delta: Sequence[ManifestEntry]) -> frozenset[bytes]:
        """The partitions of the commit's vector changes and of the data files it removes."""
        return frozenset(e.partition for e in self._dv_changes()) | frozenset(
            e.partition for e in delta if e.kind == FileKind.DELETE
        )

    def check(
        self,
        merged: Mapping[EntryKey, ManifestEntry],
        *,
        delta: Sequence[ManifestEntry],
        snapshot_id: int,
    ) -> None:
        """Refuse the commit when its vectors no longer fit (see the module docstring).

        Raises:
            DeletionVectorConflictError: one of the module's rules is broken.

        Storage: reads snapshot ``snapshot_id`` and, when it has one and the
        commit writes vectors or removes data files, its index manifest
        (both cached).
        """
        changes = self._dv_changes()
        removed = {
            (e.partition, e.bucket, e.file.file_name) for e in delta if e.kind == FileKind.DELETE
        }
        if not changes and not removed:
            return
        latest = self.table.snapshot_manager.snapshot(snapshot_id) if snapshot_id > 0 else None
        if not changes and (latest is None or not latest.index_manifest):
            return  # no vectors before or after: nothing to check
        parts = {p for p, _, _ in removed} | {e.partition for e in changes}
        before = read_index_entries(
            self.table, latest, index_type=DELETION_VECTORS_INDEX, partitions=parts
        )
        if not before and not changes:
            return
        live_index = {(e.partition, e.bucket, e.index_file.file_name) for e in before}
        gone = sorted(
            e.index_file.file_name
            for e in changes
            if e.kind == FileKind.DELETE
            and (e.partition, e.bucket, e.index_file.file_name) not in live_index
        )
        if gone:
            self._refuse(snapshot_id, gone, "deletion vector files it replaces are gone")
        bucketed = DELETION_VECTORS_INDEX not in self.by_file_name
        after = before
        for group in self.changes:
            dv = [e for e in group if e.index_file.index_type == DELETION_VECTORS_INDEX]
            if bucketed:
                self._check_bucket_replacements(after, dv, snapshot_id)
            after = combine_index_entries(after, dv, by_file_name=self.by_file_name)
        vectors: dict[tuple[bytes, int, str], int] = {}
        for e in after:
            for r in e.index_file.dv_ranges or ():
                key = (e.partition, e.bucket, r.data_file_name)
                vectors[key] = vectors.get(key, 0) + 1
        written = {
            (e.partition, e.bucket, r.data_file_name)
            for e in changes
            if e.kind == FileKind.ADD
            for r in e.index_file.dv_ranges or ()
        }
        live = {(e.partition, e.bucket, e.file.file_name) for e in merged.values()}
        twice = sorted(n for p, b, n in written if vectors.get((p, b, n), 0) > 1)
        if twice:
            self._refuse(snapshot_id, twice, "another commit wrote vectors of the same files")
        dead = sorted(
            n for p, b, n in written | removed if (p, b, n) in vectors and (p, b, n) not in live
        )
        if dead:
            self._refuse(
                snapshot_id, dead, "vectors would name data files that are no longer live "
                "(a compaction or overwrite rewrote them, or a delete marked a rewritten input)",
            )  # fmt: skip

    def _check_bucket_replacements(
        self,
        state: Sequence[IndexManifestEntry],
        group: Sequence[IndexManifestEntry],
        snapshot_id: int,
    ) -> None:
        """Rule 2: a group's new vectors file replaces only the bucket files it DELETEs.

        ``state`` is the index as the group finds it: the snapshot's, with the
        commit's earlier groups (a writer's, before a compaction's) applied.
        """
        keys = {(e.partition, e.bucket) for e in group if e.kind == FileKind.ADD}
        named = {(e.partition, e.bucket, e.index_file.file_name) for e in group}
        unseen = sorted(
            e.index_file.file_name
            for e in state
            if (e.partition, e.bucket) in keys
            and (e.partition, e.bucket, e.index_file.file_name) not in named
        )
        if unseen:
            self._refuse(snapshot_id, unseen, "another commit replaced the bucket's vectors")

    @staticmethod
    def _refuse(snapshot_id: int, names: Sequence[str], why: str) -> None:
        raise DeletionVectorConflictError(
            f"deletion vector conflict on snapshot {snapshot_id}: {why}: {list(names)[:10]}; "
            "nothing was published: plan the operation again on the latest snapshot",
            paths=list(names),
            conflicting_snapshot_ids=[snapshot_id] if snapshot_id > 0 else [],
        )
