"""SnapshotCommit: the one way a snapshot is published, and the one retry loop around it.

Every kind of commit (append, overwrite, compact, manifest merge) is a
:class:`~snaplake.commit.operation.CommitOperation`. Told the latest snapshot, it returns the
:class:`CommitChanges` to publish on top of it (its delta manifests and,
for a manifest merge, a replacement base list), or a :class:`CommitStop`
when nothing is left to publish (a duplicate, an empty commit, a merge a
concurrent one made unnecessary). Its conflict checks run there, so a new
commit kind or conflict rule plugs in without touching the loop.
:meth:`SnapshotCommit.commit` runs the loop for all of them:

1. ``changes = operation.attempt(latest)``;
2. write the base manifest list (the latest's base and delta lists copied
   block-wise, or the operation's replacement) and the delta list;
3. publish ``snapshot-<latest+1>`` create-if-absent
   (:func:`~snaplake.commit.publish.publish_snapshot`),
   making durable first exactly the files this snapshot references that
   were written for it (data files, manifests, the two lists) and their
   directories;
4. a lost race deletes the attempt's lists, waits ``RetryPolicy.wait_s``,
   reads the latest snapshot and goes to 1; past ``commit.max-retries`` or
   ``commit.timeout`` it raises :class:`CommitRetriesExhaustedError`;
5. an uncertain publish is resolved by reading the snapshot back; if that
   keeps failing, :class:`CommitStateUnknownError` leaves everything in place.

Every published snapshot carries the transaction map (``snaplake.txn.<user>``
= the user's last identifier), the snaplake marker, the attempts and the
duration; the ``LATEST`` hint is updated and the commit listeners are told
how each call ended.

Source: Paimon ``SnapshotCommit`` / ``RenamingSnapshotCommit`` (the publish),
``FileStoreCommitImpl.tryCommit`` / ``tryCommitOnce`` (the loop, one
attempt, cleanup of a failed attempt); Delta Lake's ``txn`` action for the
transaction map.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from snaplake.commit.operation import CommitChanges, CommitOperation, CommitStop
from snaplake.commit.publish import publish_snapshot
from snaplake.commit.result import (
    CommitEvent,
    CommitOutcome,
    CommitResult,
    notify_commit_listeners,
)
from snaplake.commit.retry import RetryPolicy
from snaplake.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
    CorruptMetadataError,
)
from snaplake.store.format.index_file import (
    combine_index_entries,
    read_index_manifest,
    write_index_manifest,
)
from snaplake.store.format.manifest_list import (
    concat_manifest_lists,
    encode_manifest_list,
)
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.snapshot import (
    BATCH_COMMIT_IDENTIFIER,
    TXN_PROPERTY_PREFIX,
    CommitKind,
    Snapshot,
)
from snaplake.store.io.file_io import FileIO
from snaplake.store.snapshot_manager import SnapshotManager

__all__ = ["ATTEMPTS_PROPERTY", "DURATION_PROPERTY", "SNAPLAKE_MARKER_PROPERTY", "SnapshotCommit"]

logger = logging.getLogger(__name__)

SNAPLAKE_MARKER_PROPERTY = "snaplake.version"
"""Snapshot property present on every snapshot snaplake wrote (carries the txn map)."""
ATTEMPTS_PROPERTY = "snaplake.commit.attempts"
"""Snapshot property: publish attempts of the commit that wrote it."""
DURATION_PROPERTY = "snaplake.commit.duration-ms"
"""Snapshot property: milliseconds from the commit call to the attempt that published."""
_SNAPLAKE_VERSION = "1"


@dataclass(slots=True)
class _Published:
    """What this committer published last, to build the next base list without reads."""

    snapshot: Snapshot
    base_bytes: bytes
    delta_bytes: bytes


class SnapshotCommit:
    """Publishes the snapshots of one ``commit_user`` on one table.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        snapshot_manager: Reads snapshots.
        table_name: ``db.table`` (for logs and metrics labels).
        commit_user: Who commits.
        clock: Monotonic seconds (injected by tests).
        wall_clock_ms: Epoch milliseconds for ``timeMillis`` (injected by tests).
        sleep: Sleeps seconds (injected by tests so retries never sleep).
        rng: Uniform [0, 1) numbers for the backoff jitter.
        index_by_file_name: Index types whose entries are combined by file name
            (:func:`~snaplake.store.format.index_file.combine_index_entries`).

    Source: Paimon ``SnapshotCommit`` and ``FileStoreCommitImpl.tryCommit``.
    """

    def __init__(
        self,
        *,
        file_io: FileIO,
        paths: PathFactory,
        snapshot_manager: SnapshotManager,
        table_name: str,
        commit_user: str,
        clock: Callable[[], float] = time.monotonic,
        wall_clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
        index_by_file_name: Collection[str] = (),
    ) -> None:
        if not commit_user:
            raise ValueError("commit_user must be a non-empty string")
        self.file_io = file_io
        self.paths = paths
        self.snapshot_manager = snapshot_manager
        self.table_name = table_name
        self.commit_user = commit_user
        self.clock = clock
        self._wall_clock_ms = wall_clock_ms
        self._sleep = sleep
        self._rng = rng
        self.index_by_file_name = frozenset(index_by_file_name)
        self._published: _Published | None = None

    # ------------------------------------------------------------------ reads
    def latest_snapshot(self) -> Snapshot | None:
        """The latest snapshot; one existence probe when this committer made the last one.

        A writer that published ``snapshot-N`` itself only checks that
        ``snapshot-(N+1)`` is absent (one HEAD on S3) instead of reading the
        ``LATEST`` hint and the snapshot file again.

        Raises:
            CorruptMetadataError: the newest snapshot file is undecodable.
        """
        pub = self._published
        if pub is not None and not self.snapshot_manager.snapshot_exists(pub.snapshot.id + 1):
            return pub.snapshot
        return self.snapshot_manager.latest_snapshot()

    def txn_map(self, latest: Snapshot | None) -> dict[str, int]:
        """Return ``{commit_user: last identifier}`` as of ``latest``.

        O(1) when ``latest`` was written by snaplake (it carries the map);
        otherwise walks back to the newest snaplake snapshot, folding in the
        non-snaplake commits met on the way (Paimon's backward scan), up to
        the first expired snapshot.

        Storage: reads the snapshots newer than the newest snaplake one.
        """
        if latest is None:
            return {}
        folded: dict[str, int] = {}
        snap: Snapshot | None = latest
        while snap is not None:
            props = snap.properties or {}
            if SNAPLAKE_MARKER_PROPERTY in props:
                base = snap.txn_map()
                for user, ident in folded.items():
                    base[user] = max(base.get(user, ident), ident)
                return base
            if snap.commit_identifier != BATCH_COMMIT_IDENTIFIER:
                prev = folded.get(snap.commit_user, snap.commit_identifier)
                folded[snap.commit_user] = max(prev, snap.commit_identifier)
            snap = self.snapshot_manager.try_snapshot(snap.id - 1) if snap.id > 1 else None
        return folded

    # ------------------------------------------------------------------- loop
    def commit(
        self,
        operation: CommitOperation,
        *,
        policy: RetryPolicy,
        latest: Snapshot | None,
        start: float | None = None,
    ) -> CommitResult:
        """Publish ``operation`` as one new snapshot, retrying lost races.

        Args:
            operation: The commit kind's planner (see :class:`CommitOperation`).
            policy: Backoff and limits of the retries.
            latest: The latest snapshot, as read by the caller (the first
                attempt builds on it).
            start: :attr:`clock` reading when the caller's commit began
                (default: now), for the duration and the timeout.

        Returns:
            The published snapshot's id, kind, attempts, duration and counts;
            for a :class:`CommitStop`, its snapshot id (``was_duplicate`` for
            a duplicate).

        Raises:
            CommitConflictError: from ``operation.attempt``; fatal.
            CommitRetriesExhaustedError: every attempt lost the race within
                the policy's retries and timeout. Safe to retry later.
            CommitStateUnknownError: the publish failed without telling
                whether it landed; nothing was cleaned up.

        Storage:
            Per attempt: two manifest lists (three with changelog files)
            and one snapshot file (plus what the operation writes); a lost
            or failed attempt deletes its lists; any failure but an unknown
            outcome or an interrupt (``KeyboardInterrupt``, ``SystemExit``)
            calls ``operation.abandon()``, as does a stop. Once the snapshot
            is published nothing it references is deleted, whatever fails
            afterwards (the hint, a listener: logged). Updates ``LATEST``.
        """
        start = self.clock() if start is None else start
        kind = operation.kind
        attempts = 0
        try:
            while True:
                step = operation.attempt(latest)
                if isinstance(step, CommitStop):
                    operation.abandon()
                    return self._stopped(step, kind, attempts, start)
                attempts += 1
                snapshot = self.try_commit_once(
                    step, latest=latest, kind=kind, policy=policy, attempt=attempts, start=start
                )
                if snapshot is not None:
                    break
                policy.wait_or_give_up(
                    attempts=attempts, elapsed_s=self.clock() - start,
                    lost=f"{kind.value} commit to {self.table_name} lost the race for a new "
                    "snapshot", sleep=self._sleep, rng=self._rng,
                )  # fmt: skip
                latest = self.snapshot_manager.latest_snapshot()
        except CommitStateUnknownError:
            self._notify(kind, CommitOutcome.UNKNOWN, attempts, start, None)
            raise  # everything stays in place: the snapshot may reference it
        except CommitConflictError:
            operation.abandon()
            self._notify(kind, CommitOutcome.CONFLICT, attempts, start, None)
            raise
        except CommitRetriesExhaustedError as exc:
            operation.abandon()
            self._notify(kind, CommitOutcome.EXHAUSTED, exc.attempts, start, None)
            raise
        except Exception:
            operation.abandon()
            raise
        # An interrupt (KeyboardInterrupt, SystemExit) deletes nothing: it may have come
        # after the publish, so it leaves the table as a crash would (orphan clean remains).
        # Past this point the snapshot is published: nothing below deletes a file.
        return self._succeeded(snapshot, step, kind, attempts, start)

    def _stopped(
        self, stop: CommitStop, kind: CommitKind, attempts: int, start: float
    ) -> CommitResult:
        duplicate = stop.outcome is CommitOutcome.DUPLICATE
        result = self._result(stop.snapshot_id, kind, attempts, start, duplicate=duplicate)
        if stop.outcome is not None:
            self._notify(kind, stop.outcome, attempts, start, result)
        return result

    def _succeeded(
        self,
        snapshot: Snapshot,
        changes: CommitChanges,
        kind: CommitKind,
        attempts: int,
        start: float,
    ) -> CommitResult:
        result = self._result(snapshot.id, kind, attempts, start, changes=changes)
        logger.info(
            "committed %s snapshot %d of %s (user %s, identifier %d) in %d attempt(s), %.1f ms",
            kind.value, snapshot.id, self.table_name, self.commit_user, changes.identifier,
            attempts, result.duration_s * 1000,
        )  # fmt: skip
        self._notify(kind, CommitOutcome.SUCCESS, attempts, start, result)
        return result

    def _result(
        self,
        snapshot_id: int | None,
        kind: CommitKind,
        attempts: int,
        start: float,
        *,
        changes: CommitChanges | None = None,
        duplicate: bool = False,
    ) -> CommitResult:
        return CommitResult(
            snapshot_id=snapshot_id,
            kind=kind,
            attempts=attempts,
            duration_s=self.clock() - start,
            files_added=changes.files_added if changes else 0,
            files_deleted=changes.files_deleted if changes else 0,
            records_added=changes.delta_record_count if changes else 0,
            was_duplicate=duplicate,
        )

    def _notify(
        self,
        kind: CommitKind,
        outcome: CommitOutcome,
        attempts: int,
        start: float,
        result: CommitResult | None,
    ) -> None:
        notify_commit_listeners(
            CommitEvent(
                table=self.table_name,
                kind=kind,
                outcome=outcome,
                attempts=attempts,
                duration_s=self.clock() - start,
                result=result,
            )
        )

    # ---------------------------------------------------------------- attempt
    def try_commit_once(
        self,
        changes: CommitChanges,
        *,
        latest: Snapshot | None,
        kind: CommitKind,
        policy: RetryPolicy,
        attempt: int = 1,
        start: float | None = None,
    ) -> Snapshot | None:
        """Write the lists and publish ``snapshot-<latest+1>``; ``None`` if the race was lost.

        Args:
            changes: What to publish.
            latest: The snapshot to build on (``None`` = the table's first).
            kind: The snapshot's commit kind.
            policy: Gives the wait between uncertain-publish read-backs.
            attempt: 1-based attempt number (recorded in the snapshot).
            start: :attr:`clock` reading when the commit began.

        Raises:
            CommitStateUnknownError: the publish outcome stayed unknown.
            CorruptMetadataError: ``latest`` is still the newest snapshot but
                one of its manifest lists (or its index manifest) is missing.
            StorageError: writing a list failed (the attempt's files are deleted).
            OSError: the publish failed before the commit point (the
                attempt's files are deleted).

        Storage:
            Writes the base and delta manifest lists (and the changelog
            manifest list when ``changes.changelog`` is set, and an index
            manifest when ``changes.index_changes`` change the latest's index
            entries) and the snapshot file,
            making ``changes.new_files``, the lists and their directories
            durable first; a lost race (or ``latest`` expired meanwhile)
            deletes the lists and ``changes.attempt_manifests``. An error
            after the snapshot landed (the temp name, the directory fsync,
            the hint) is logged and the snapshot returned; an interrupt
            deletes nothing.
        """
        start = self.clock() if start is None else start
        compression = changes.schema.core_options.manifest_compression
        written = list(changes.attempt_manifests)
        try:
            try:
                base_bytes = (
                    encode_manifest_list(list(changes.base), compression=compression)
                    if changes.base is not None
                    else self._base_list_bytes(latest, compression)
                )
                index_manifest = self._index_manifest(changes, latest, compression)
            except FileNotFoundError as exc:
                self.delete_manifests(written)
                # ``latest`` was expired (its lists deleted) while we built on it: the
                # table moved on, a lost race. The newest snapshot is never expired, so
                # if ``latest`` still is the newest, its lists are lost: corrupt.
                if latest is not None and not self.snapshot_manager.snapshot_exists(latest.id + 1):
                    raise self._missing_list(latest, exc) from exc
                return None
            new_index = [] if index_manifest is None else [index_manifest]
            if latest is not None and index_manifest == latest.index_manifest:
                new_index = []  # reused: the latest snapshot references it
            written += new_index
            base_name = self.paths.new_manifest_list_name()
            self.file_io.write_new(self.paths.manifest_path(base_name), base_bytes)
            written.append(base_name)
            delta_bytes = encode_manifest_list(list(changes.delta), compression=compression)
            delta_name = self.paths.new_manifest_list_name()
            self.file_io.write_new(self.paths.manifest_path(delta_name), delta_bytes)
            written.append(delta_name)
            changelog: tuple[str, int] | None = None
            if changes.changelog:
                log_bytes = encode_manifest_list(list(changes.changelog), compression=compression)
                changelog = (self.paths.new_manifest_list_name(), len(log_bytes))
                self.file_io.write_new(self.paths.manifest_path(changelog[0]), log_bytes)
                written.append(changelog[0])
            snapshot = self._snapshot(
                changes, latest=latest, kind=kind, attempt=attempt, start=start,
                base=(base_name, len(base_bytes)), delta=(delta_name, len(delta_bytes)),
                changelog=changelog, index_manifest=index_manifest,
            )  # fmt: skip
            durable = [
                *changes.new_files,
                self.paths.manifest_path(base_name),
                self.paths.manifest_path(delta_name),
                *([self.paths.manifest_path(changelog[0])] if changelog else []),
                *(self.paths.index_manifest_path(n) for n in new_index),
            ]
            landed = publish_snapshot(
                self.file_io, self.paths, snapshot, durable=durable,
                readback_wait_s=policy.min_wait_s, sleep=self._sleep, table_name=self.table_name,
            )  # fmt: skip
        except CommitStateUnknownError:
            raise
        except Exception:
            self.delete_manifests(written)  # nothing was published (see publish_snapshot)
            raise
        if not landed:
            self.delete_manifests(written)
            return None
        self._published = _Published(
            snapshot=snapshot, base_bytes=base_bytes, delta_bytes=delta_bytes
        )
        self._write_latest_hint(snapshot.id)
        return snapshot

    def _index_manifest(
        self, changes: CommitChanges, latest: Snapshot | None, compression: str
    ) -> str | None:
        """The new snapshot's ``indexManifest``: the latest's, or a new one with the changes.

        The latest snapshot's index entries combined with each group of
        ``changes.index_changes`` in turn. Nothing to apply, or a result equal to
        the latest's entries, reuses the latest's name; an empty result is ``None``.

        Raises:
            FileNotFoundError: the latest's index manifest is missing.

        Storage: reads the latest's index manifest and writes a new one when the
        entries changed.

        Source: Paimon ``FileStoreCommitImpl.tryCommitOnce`` /
        ``IndexManifestFileHandler.write``.
        """
        previous_name = latest.index_manifest if latest is not None else None
        if not any(changes.index_changes):
            return previous_name
        previous = (
            read_index_manifest(self.file_io, self.paths, previous_name) if previous_name else []
        )
        entries = previous
        for group in changes.index_changes:
            entries = combine_index_entries(entries, group, by_file_name=self.index_by_file_name)
        if entries == previous:
            return previous_name
        if not entries:
            return None
        return write_index_manifest(self.file_io, self.paths, entries, compression=compression)

    def _base_list_bytes(self, latest: Snapshot | None, compression: str) -> bytes:
        """Bytes of the new base list = latest.base + latest.delta, copied block-wise."""
        if latest is None:
            return encode_manifest_list([], compression=compression)
        pub = self._published
        if pub is not None and (
            pub.snapshot is latest
            or (
                pub.snapshot.id == latest.id
                and pub.snapshot.base_manifest_list == latest.base_manifest_list
                and pub.snapshot.delta_manifest_list == latest.delta_manifest_list
            )
        ):
            parts = [pub.base_bytes, pub.delta_bytes]
        else:
            parts = [
                self.file_io.read_bytes(self.paths.manifest_path(latest.base_manifest_list)),
                self.file_io.read_bytes(self.paths.manifest_path(latest.delta_manifest_list)),
            ]
        return concat_manifest_lists(parts, [])

    def _snapshot(
        self,
        changes: CommitChanges,
        *,
        latest: Snapshot | None,
        kind: CommitKind,
        attempt: int,
        start: float,
        base: tuple[str, int],
        delta: tuple[str, int],
        changelog: tuple[str, int] | None,
        index_manifest: str | None,
    ) -> Snapshot:
        txn = self.txn_map(latest)
        if changes.identifier != BATCH_COMMIT_IDENTIFIER:
            txn[self.commit_user] = changes.identifier
        props = {k: v for k, v in changes.properties.items() if not k.startswith("snaplake.")}
        props.update({f"{TXN_PROPERTY_PREFIX}{u}": str(i) for u, i in sorted(txn.items())})
        props[SNAPLAKE_MARKER_PROPERTY] = _SNAPLAKE_VERSION
        props[ATTEMPTS_PROPERTY] = str(attempt)
        props[DURATION_PROPERTY] = str(round((self.clock() - start) * 1000, 3))
        previous_total = (latest.total_record_count or 0) if latest else 0
        return Snapshot(
            id=(latest.id + 1) if latest else 1,
            schema_id=changes.schema.id,
            base_manifest_list=base[0],
            base_manifest_list_size=base[1],
            delta_manifest_list=delta[0],
            delta_manifest_list_size=delta[1],
            changelog_manifest_list=changelog[0] if changelog else None,
            changelog_manifest_list_size=changelog[1] if changelog else None,
            commit_user=self.commit_user,
            commit_identifier=changes.identifier,
            commit_kind=kind,
            time_millis=self._wall_clock_ms(),
            total_record_count=previous_total + changes.delta_record_count,
            delta_record_count=changes.delta_record_count,
            changelog_record_count=changes.changelog_record_count if changelog else None,
            watermark=latest.watermark if latest else None,
            index_manifest=index_manifest,
            properties=props,
        )

    def _missing_list(self, latest: Snapshot, error: FileNotFoundError) -> CorruptMetadataError:
        """The error for a newest snapshot whose manifest list is missing."""
        lists = [latest.base_manifest_list, latest.delta_manifest_list]
        if latest.index_manifest:
            lists.append(latest.index_manifest)
        missing = next(
            (n for n in lists if not self.file_io.exists(self.paths.manifest_path(n))), lists[0]
        )
        path = self.paths.manifest_path(missing)
        return CorruptMetadataError(
            f"snapshot {latest.id} of {self.table_name}, the newest, references {path}, which "
            f"does not exist ({error}); the table cannot be committed to until it is repaired "
            "(roll back to an earlier snapshot with `snaplake rollback`)",
            path=path,
        )

    def _write_latest_hint(self, snapshot_id: int) -> None:
        try:
            self.file_io.write_hint(self.paths.latest_hint_path, str(snapshot_id).encode())
        except Exception:  # advisory; the snapshot is published whatever happens here
            logger.warning("could not update the LATEST hint (advisory only)", exc_info=True)

    def delete_manifests(self, names: Collection[str]) -> None:
        """Delete manifests or lists by name; failures are logged (best-effort cleanup).

        Storage: deletes ``manifest/<name>`` for each name.
        """
        for name in names:
            path = self.paths.manifest_path(name)
            try:
                self.file_io.delete(path)
            except OSError:
                logger.warning("could not delete unreferenced %s", path, exc_info=True)
