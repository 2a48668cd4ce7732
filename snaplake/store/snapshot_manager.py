"""SnapshotManager: find and read a table's snapshots. Read-only.

``LATEST`` and ``EARLIEST`` are advisory hints that may be stale or missing;
the snapshot files are the truth. ``latest_snapshot_id`` trusts the hint only
after confirming that ``snapshot-(hint+1)`` is absent, walking forward while
newer ones exist, and lists the directory when the hint is unusable.

Source: Paimon ``SnapshotManager`` / ``HintFileUtils`` (hint semantics) and
``SnapshotManager.earlierOrEqualTimeMills`` (time travel by binary search).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from snaplake.errors import CorruptMetadataError, SnapshotNotFoundError
from snaplake.store.format.paths import PathFactory, TableFileManager, list_ids
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.io.file_io import FileIO

__all__ = ["SnapshotManager", "decode_snapshot_file", "read_snapshot_file"]

logger = logging.getLogger(__name__)


def read_snapshot_file(
    file_io: FileIO, path: str, *, snapshot_id: int | None = None
) -> Snapshot | None:
    """Read the snapshot JSON at ``path`` (a ``snapshot-<id>`` or a ``tag-<name>`` file).

    Args:
        file_io: Storage of the table.
        path: Full path of the file.
        snapshot_id: The id the file's name gives (``snapshot-<id>``), checked
            against its content; ``None`` for a tag.

    Returns:
        The decoded snapshot, or ``None`` when no file is at ``path``.

    Raises:
        CorruptMetadataError: the file exists but is not a valid snapshot JSON,
            or holds another id than its name (``.path`` names it).

    Storage:
        One ``read_bytes`` of ``path``.

    Source:
        Paimon ``Snapshot.tryFromPath`` (which raises ``FileNotFoundException``
        where this returns ``None``); tags use it too, as ``Tag.fromPath`` does.
    """
    try:
        data = file_io.read_bytes(path)
    except FileNotFoundError:
        return None
    return decode_snapshot_file(data, path=path, snapshot_id=snapshot_id)


def decode_snapshot_file(data: bytes, *, path: str, snapshot_id: int | None) -> Snapshot:
    """Decode the bytes of ``path``; check the id its name gives (``None``: a tag).

    A ``snapshot-<N>`` holding another id would make every commit build
    ``snapshot-<id+1>`` on it and lose the race for that name forever.

    Raises:
        CorruptMetadataError: undecodable, or the id differs from the name's.
    """
    snap = Snapshot.from_bytes(data, path=path)
    if snapshot_id is not None and snap.id != snapshot_id:
        raise CorruptMetadataError(
            f"{path} holds snapshot id {snap.id}, not {snapshot_id} as its name says; the "
            "file was copied or edited by hand: restore it from a backup or roll the table "
            "back to an earlier snapshot",
            path=path,
        )
    return snap


class SnapshotManager(TableFileManager):
    """Read-side access to ``<table>/snapshot/``."""

    def _read_hint(self, path: str) -> int | None:
        try:
            text = self.file_io.read_bytes(path).decode("ascii", "replace").strip()
        except FileNotFoundError:
            return None
        try:
            return int(text)
        except ValueError:
            logger.warning("ignoring unreadable snapshot hint %s", path)
            return None

    def snapshot_exists(self, snapshot_id: int) -> bool:
        """Tell whether ``snapshot-<id>`` exists (one ``HeadObject`` on S3)."""
        return self.file_io.file_exists(self.paths.snapshot_path(snapshot_id))

    def list_snapshot_ids(self) -> list[int]:
        """Return every snapshot id present on storage, ascending (one listing)."""
        return list_ids(self.file_io, self.paths.snapshot_dir, PathFactory.parse_snapshot_id)

    def latest_snapshot_id(self) -> int | None:
        """Return the newest snapshot id, or ``None`` for a table without snapshots.

        Storage: reads ``LATEST`` and probes ``snapshot-(id+1)``; lists the
        directory only when the hint is missing, unreadable or dangling.
        """
        hint = self._read_hint(self.paths.latest_hint_path)
        if hint is not None and hint > 0 and self.snapshot_exists(hint):
            sid = hint
            while self.snapshot_exists(sid + 1):
                sid += 1
            return sid
        ids = self.list_snapshot_ids()
        return ids[-1] if ids else None

    def earliest_snapshot_id(self) -> int | None:
        """Return the oldest retained snapshot id, or ``None`` for an empty table.

        Storage: reads ``EARLIEST`` and confirms the file exists; lists otherwise.
        """
        hint = self._read_hint(self.paths.earliest_hint_path)
        # A hint that exists is the earliest unless older files survived a crash.
        if (
            hint is not None
            and hint > 0
            and self.snapshot_exists(hint)
            and (hint == 1 or not self.snapshot_exists(hint - 1))
        ):
            return hint
        ids = self.list_snapshot_ids()
        return ids[0] if ids else None

    def try_snapshot(self, snapshot_id: int) -> Snapshot | None:
        """Read ``snapshot-<id>``; ``None`` if it does not exist.

        Raises:
            CorruptMetadataError: the file exists but cannot be decoded, or holds
                another id than its name.
        """
        return read_snapshot_file(
            self.file_io, self.paths.snapshot_path(snapshot_id), snapshot_id=snapshot_id
        )

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """Read ``snapshot-<id>``.

        Raises:
            SnapshotNotFoundError: it was never written or has been expired;
                the message names the retained range.
            CorruptMetadataError: the file cannot be decoded.
        """
        snap = self.try_snapshot(snapshot_id)
        if snap is None:
            earliest, latest = self.earliest_snapshot_id(), self.latest_snapshot_id()
            if latest is None:
                detail = "the table has no snapshots yet"
            else:
                detail = f"retained snapshots are {earliest}..{latest}"
            raise SnapshotNotFoundError(
                f"snapshot {snapshot_id} does not exist ({detail}); pick a retained id or a tag",
                snapshot_id=snapshot_id,
            )
        return snap

    def latest_snapshot(self) -> Snapshot | None:
        """Return the newest snapshot, or ``None`` for an empty table.

        Finds the same snapshot as :meth:`latest_snapshot_id`, but reading
        ``snapshot-<hint>`` doubles as the check that the hint's file exists,
        so the usual case is three requests: ``LATEST``, ``snapshot-<hint>``
        and the probe of ``snapshot-(hint+1)``. The file is decoded only once
        it is known to be the newest.

        Raises:
            CorruptMetadataError: the newest snapshot file cannot be decoded.

        Storage:
            Reads ``LATEST`` and ``snapshot-<hint>``, probes
            ``snapshot-(hint+1)`` (and further while newer ones exist); lists
            the directory only when the hint is missing, unreadable or
            dangling.
        """
        while True:
            hint = self._read_hint(self.paths.latest_hint_path)
            sid: int | None = None
            if hint is not None and hint > 0:
                path = self.paths.snapshot_path(hint)
                try:
                    data = self.file_io.read_bytes(path)
                except FileNotFoundError:
                    pass  # dangling hint: list instead
                else:
                    sid = hint
                    while self.snapshot_exists(sid + 1):
                        sid += 1
                    if sid == hint:
                        return decode_snapshot_file(data, path=path, snapshot_id=sid)
            if sid is None:
                ids = self.list_snapshot_ids()
                if not ids:
                    return None
                sid = ids[-1]
            snap = self.try_snapshot(sid)
            if snap is not None:
                return snap
            # Expired or rolled back between the probe and the read: look again.

    def snapshots(self) -> Iterator[Snapshot]:
        """Yield every retained snapshot, oldest first (skipping ones expired meanwhile)."""
        for sid in self.list_snapshot_ids():
            snap = self.try_snapshot(sid)
            if snap is not None:
                yield snap

    def earlier_or_equal_time_millis(self, time_millis: int) -> Snapshot | None:
        """Return the newest snapshot committed at or before ``time_millis`` (epoch ms).

        ``None`` when every retained snapshot is newer. Binary search over the
        retained ids, reading O(log n) snapshot files.
        """
        ids = self.list_snapshot_ids()
        lo, hi, found = 0, len(ids) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            snap = self.try_snapshot(ids[mid])
            if snap is None:  # expired during the search: restart on fresh ids
                return self.earlier_or_equal_time_millis(time_millis)
            if snap.time_millis <= time_millis:
                found, lo = snap, mid + 1
            else:
                hi = mid - 1
        return found

    def find_commit(self, commit_user: str, commit_identifier: int) -> Snapshot | None:
        """Return the snapshot of ``commit_user`` with ``commit_identifier``, scanning back.

        The scan starts at the latest snapshot and ends at the earliest
        retained one, at the first expired gap, or at a snapshot of
        ``commit_user`` with a lower identifier (identifiers increase per
        user, so older snapshots cannot hold it).

        Returns:
            The snapshot, or ``None`` when no retained snapshot holds it.

        Storage: reads snapshot files from the latest backwards.

        Source: Paimon ``FileStoreCommitImpl`` duplicate check (backward scan).
        """
        latest = self.latest_snapshot_id()
        earliest = self.earliest_snapshot_id()
        if latest is None or earliest is None:
            return None
        for sid in range(latest, earliest - 1, -1):
            snap = self.try_snapshot(sid)
            if snap is None:
                return None
            if snap.commit_user == commit_user:
                if snap.commit_identifier == commit_identifier:
                    return snap
                if snap.commit_identifier < commit_identifier:
                    return None
        return None
