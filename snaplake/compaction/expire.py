"""ExpireSnapshots: drop old snapshots and the files only they reference.

Which snapshots expire (``snapshot.num-retained.min`` / ``.max``,
``snapshot.time-retained``, ``snapshot.expire.limit``, consumers) and which
files go with them follow Paimon exactly, so a table that Java or pypaimon
also maintains stays consistent:

1. the data files DELETEd by the delta manifests of the snapshots in
   ``(begin, end]`` (``end`` = the first retained snapshot), minus files ADDed
   again in the same delta and minus files live in the nearest older tag;
   then the changelog files the expired snapshots' changelog manifests ADD
   (changelog expires with its snapshot; retention options that would keep
   changelog longer, Paimon's "decoupled" changelog, are refused);
2. the manifests and manifest lists of the expired snapshots that neither
   ``end`` nor a tag in the expired range references; likewise their index
   manifests, and the index files those list that no kept index manifest lists;
3. the snapshot files ``[begin, end)``;
4. the ``EARLIEST`` hint, set to ``end``.

Everything is read and planned before the first deletion; any read failure
(missing or corrupt metadata) raises and nothing is deleted. Deletions run in
parallel batches. ``plan()`` is the dry run and returns exactly what
``execute()`` would delete.

Source: Paimon ``ExpireSnapshotsImpl`` (range computation, ``expireUntil``,
``findSkippingTags``, the nearest-previous-tag data-file skipper),
``SnapshotDeletion`` / ``FileDeletionBase`` (``planDeletedInDeltaManifest``,
``manifestSkippingSet``, ``planManifestsCleaner``). Deliberate differences:
Paimon logs and skips a part of the cleanup when a read fails; snaplake stops
the whole run before deleting anything. Statistics files are never deleted
here (snaplake does not write them). Empty bucket directories are left in place.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from snaplake.compaction._io import (
    delete_in_batches,
    parallel_map,
    read_index_strict,
    read_list_strict,
)
from snaplake.compaction.retention import SnapshotRetention
from snaplake.compaction.snapshot_files import FileKey, SnapshotFiles
from snaplake.options import CoreOptions, Operation
from snaplake.store.consumers import ConsumerManager
from snaplake.store.format.index_file import index_path
from snaplake.store.format.manifest import FileKind, ManifestEntry
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.support import check_supported
from snaplake.store.table_storage import TableStorage
from snaplake.store.tags import TagManager

__all__ = ["ExpireResult", "ExpireSnapshots"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpireResult:
    """What an expiry run deleted (or, for a dry run, would delete).

    Attributes:
        dry_run: True when nothing was deleted.
        expired_snapshot_ids: Ids of the expired snapshots, ascending.
        earliest_retained_id: The oldest snapshot kept (``None`` for an empty table).
        latest_id: The newest snapshot when the run planned.
        data_files: Full paths of the data files deleted.
        changelog_files: Full paths of the changelog files deleted.
        index_files: Full paths of the index files (HASH, deletion vectors) deleted.
        manifest_files: Full paths of the manifests, manifest lists and index
            manifests deleted.
        snapshot_files: Full paths of the snapshot files deleted.
        bytes_freed: Bytes of the deleted files (as recorded in the metadata).
        duration_s: Wall time of the run, seconds.
    """

    dry_run: bool
    expired_snapshot_ids: tuple[int, ...] = ()
    earliest_retained_id: int | None = None
    latest_id: int | None = None
    data_files: tuple[str, ...] = ()
    changelog_files: tuple[str, ...] = ()
    index_files: tuple[str, ...] = ()
    manifest_files: tuple[str, ...] = ()
    snapshot_files: tuple[str, ...] = ()
    bytes_freed: int = 0
    duration_s: float = 0.0

    @property
    def snapshots_expired(self) -> int:
        """Number of expired snapshots."""
        return len(self.expired_snapshot_ids)

    @property
    def files_deleted(self) -> int:
        """Data, changelog and index files, manifests, lists and snapshot files deleted."""
        return (
            len(self.data_files)
            + len(self.changelog_files)
            + len(self.index_files)
            + len(self.manifest_files)
            + len(self.snapshot_files)
        )


@dataclass(slots=True)
class _Plan:
    end: int | None = None
    expired: list[Snapshot] = field(default_factory=list)
    data_files: list[str] = field(default_factory=list)
    changelog_files: list[str] = field(default_factory=list)
    index_files: list[str] = field(default_factory=list)
    manifest_files: list[str] = field(default_factory=list)
    snapshot_files: list[str] = field(default_factory=list)
    bytes_freed: int = 0
    latest: int | None = None


class ExpireSnapshots:
    """Expire a table's old snapshots by its retention options.

    Args:
        table: The table's storage, paths and managers (its latest schema gives
            the partition types for data paths and the options; its snapshots,
            tags and consumers decide the range).
        options: Effective options (retention, ``changelog.*`` retention,
            ``consumer.*``; the daemon's overrides, see
            :class:`~snaplake.compaction.retention.SnapshotRetention`);
            ``None`` = the latest schema's.
        now_ms: Epoch milliseconds (injected by tests).
        workers: Threads for reading metadata and deleting files.

    Raises:
        InvalidOptionError: ``snapshot.num-retained.max < .min`` or
            ``snapshot.num-retained.min < 1`` in the effective options
            (raised by :meth:`plan` / :meth:`execute`, before anything is deleted).
    """

    def __init__(
        self,
        table: TableStorage,
        *,
        options: CoreOptions | None = None,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        workers: int = 8,
    ) -> None:
        self.file_io, self.paths = table.file_io, table.paths
        self.schema_manager, self.snapshot_manager = table.schema_manager, table.snapshot_manager
        self.tags = TagManager(self.file_io, self.paths)
        self.consumers = ConsumerManager(self.file_io, self.paths)
        self.retention = SnapshotRetention(
            snapshot_manager=self.snapshot_manager, consumers=self.consumers, options=options,
            now_ms=now_ms,
        )  # fmt: skip
        self._workers = workers

    # ----------------------------------------------------------------- public
    def plan(self) -> ExpireResult:
        """Compute what :meth:`execute` would delete, deleting nothing (the dry run).

        Returns:
            An :class:`ExpireResult` with ``dry_run=True``.

        Raises:
            CorruptMetadataError: a snapshot, tag, manifest list or manifest
                needed for the decision is missing or undecodable (``.path``).
            InvalidOptionError: inconsistent retention options.

        Storage:
            Reads snapshots, tags, consumers and manifests; writes nothing.
        """
        start = time.monotonic()
        plan = self._plan()
        return self._result(plan, dry_run=True, start=start)

    def execute(self) -> ExpireResult:
        """Expire the snapshots due now and delete the files only they reference.

        Returns:
            What was deleted (``dry_run=False``).

        Raises:
            CorruptMetadataError: metadata needed for planning is missing or
                undecodable; raised before anything is deleted.
            InvalidOptionError: inconsistent retention options.
            StorageError: a deletion failed midway; running again resumes
                (data-file deletions are idempotent and snapshot files go last).

        Storage:
            Deletes the markers of consumers idle past ``consumer.expiration-time``,
            then data files, then changelog files, then index files, then manifests,
            manifest lists and index manifests, then
            snapshot files, then rewrites ``snapshot/EARLIEST``; each step in
            parallel batches and finished before the next starts.
        """
        start = time.monotonic()
        plan = self._plan()
        schema = self.schema_manager.latest()
        cutoff = self.retention.consumer_cutoff_ms(schema) if schema is not None else None
        if cutoff is not None:  # consumer.expiration-time: idle consumers are removed
            self.consumers.expire(modified_before_ms=cutoff)
        if plan.end is None:
            return self._result(plan, dry_run=False, start=start)
        if not plan.expired:
            self._write_earliest_hint_if_missing(plan.end)
            return self._result(plan, dry_run=False, start=start)
        delete_in_batches(self.file_io, plan.data_files, workers=self._workers)
        delete_in_batches(self.file_io, plan.changelog_files, workers=self._workers)
        delete_in_batches(self.file_io, plan.index_files, workers=self._workers)
        delete_in_batches(self.file_io, plan.manifest_files, workers=self._workers)
        delete_in_batches(self.file_io, plan.snapshot_files, workers=self._workers)
        self._write_earliest_hint(plan.end)
        result = self._result(plan, dry_run=False, start=start)
        logger.info(
            "expired snapshots %d..%d of %s: %d data file(s), %d changelog file(s), "
            "%d index file(s), %d manifest file(s), %.1f ms",
            plan.expired[0].id, plan.expired[-1].id, self.paths.root, len(plan.data_files),
            len(plan.changelog_files), len(plan.index_files), len(plan.manifest_files),
            result.duration_s * 1000,
        )  # fmt: skip
        return result

    # ----------------------------------------------------------------- plan
    def _plan(self) -> _Plan:
        schema = self.schema_manager.latest()
        plan = _Plan()
        if schema is None:
            return plan
        check_supported(schema, Operation.MAINTENANCE)
        files = SnapshotFiles(self.file_io, self.paths, schema, workers=self._workers)
        rng = self.retention.expire_range(schema)
        if rng is None:
            return plan
        earliest, end, latest = rng
        plan.latest = latest
        plan.end = end
        if end <= earliest:
            return plan
        ids = list(range(earliest, end + 1))
        found = parallel_map(self.snapshot_manager.try_snapshot, ids, workers=self._workers)
        snapshots = [s for s in found if s is not None]
        if not snapshots or snapshots[-1].id != end:
            # The boundary vanished (a concurrent expiry or rollback): do nothing now.
            plan.end = None
            return plan
        begin = snapshots[0].id
        end_snap = snapshots[-1]
        tagged = self.tags.tagged_snapshots()

        # 1. data files deleted by the deltas of (begin, end]
        tag_files: dict[int, frozenset[FileKey]] = {}
        live_in_end: frozenset[FileKey] | None = None
        data: dict[str, int] = {}
        for snap in snapshots:
            if snap.id == begin:
                continue
            tag = _previous_tag(tagged, snap.id)
            skip: frozenset[FileKey] = frozenset()
            if tag is not None:
                if tag.id not in tag_files:
                    tag_files[tag.id] = files.live_files(tag)
                skip = tag_files[tag.id]
            for path, size, key in self._deleted_in_delta(snap, files):
                if key in skip:
                    continue
                if live_in_end is None:
                    live_in_end = files.live_files(end_snap)
                if key in live_in_end:
                    logger.warning(
                        "not deleting %s: DELETEd by snapshot %d but live again in %d",
                        path, snap.id, end,
                    )  # fmt: skip
                    continue
                data[path] = size

        # 1b. changelog files of the expired snapshots (Paimon: when not decoupled)
        changelog: dict[str, int] = {}
        for snap in snapshots:
            if snap.id != end and snap.changelog_manifest_list:
                changelog.update(self._added_in_changelog(snap, files))

        # 2. manifests, lists, index manifests and index files not referenced by `end`
        #    or tags overlapping the range
        skipping = [*_skipping_tags(tagged, begin, end), end_snap]
        keep: set[str] = set()
        for names in parallel_map(files.referenced_metadata, skipping, workers=self._workers):
            keep.update(names)
        manifests: dict[str, int] = {}
        expired = [s for s in snapshots if s.id != end]
        chain: dict[str, bytes] = {}
        for snap in expired:
            for name, size in files.metadata_of(snap, chain=chain):
                if name not in keep:
                    manifests.setdefault(self.paths.manifest_path(name), size)
        index_files: dict[str, int] = {}
        dead_index = {s.index_manifest for s in expired if s.index_manifest} - keep
        for name in sorted(dead_index):  # consecutive snapshots share one: read each once
            manifests.setdefault(self.paths.index_manifest_path(name), 0)
            for e in read_index_strict(self.file_io, self.paths, name):
                if e.index_file.file_name not in keep:
                    path = index_path(self.paths, e.index_file)
                    index_files.setdefault(path, e.index_file.file_size)

        plan.expired = expired
        plan.data_files = sorted(data)
        plan.changelog_files = sorted(changelog)
        plan.index_files = sorted(index_files)
        plan.manifest_files = sorted(manifests)
        plan.snapshot_files = [self.paths.snapshot_path(s.id) for s in expired]
        plan.bytes_freed = sum(sum(d.values()) for d in (data, changelog, index_files, manifests))
        return plan

    def _deleted_in_delta(
        self, snap: Snapshot, files: SnapshotFiles
    ) -> list[tuple[str, int, FileKey]]:
        """Data files ``snap``'s delta DELETEs and leaves dead: ``(path, bytes, key)``.

        A path is dead after the delta when the delta DELETEs it and no ADD of
        the delta that the delta does not itself DELETE again (by full
        identity, level included) names the same path. A compaction upgrading
        a file (DELETE at its old level, ADD of the same path at the new one)
        therefore keeps it, whatever the order of the two entries (Paimon
        writes the DELETE first; older snaplake versions wrote the ADD
        first), and a first-row writer's level-0 file that its own commit
        compacted away (ADD, DELETE, then the outputs) is dead.

        Source: Paimon ``FileDeletionBase.planDeletedInDeltaManifest`` (keyed
        by path; an ADD after a DELETE of the same path keeps the file).
        """
        metas = read_list_strict(self.file_io, self.paths, snap.delta_manifest_list)
        entries = files.entries(metas)
        deleted_ids = {e.identifier() for e in entries if e.kind == FileKind.DELETE}
        kept: set[tuple[Any, ...]] = set()
        pending: dict[tuple[Any, ...], ManifestEntry] = {}
        for e in entries:
            path_id = (e.partition, e.bucket, e.file.file_name, e.file.external_path)
            if e.kind == FileKind.DELETE:
                pending[path_id] = e
            elif e.identifier() not in deleted_ids:
                kept.add(path_id)
        out: list[tuple[str, int, FileKey]] = []
        for path_id, e in pending.items():
            if path_id not in kept:
                key = files.key(e)
                out.extend((path, size, key) for path, size in files.data_paths(e))
        return out

    def _added_in_changelog(self, snap: Snapshot, files: SnapshotFiles) -> dict[str, int]:
        """``{path: bytes}`` of the changelog files ``snap``'s changelog manifests ADD.

        Source: Paimon ``FileDeletionBase.planAddedInChangelogManifest``.
        """
        assert snap.changelog_manifest_list is not None
        metas = read_list_strict(self.file_io, self.paths, snap.changelog_manifest_list)
        out: dict[str, int] = {}
        for e in files.entries(metas):
            if e.kind == FileKind.ADD:
                path, size = files.data_paths(e)[0]
                out[path] = size
        return out

    # ----------------------------------------------------------------- hints
    def _write_earliest_hint(self, snapshot_id: int) -> None:
        self.file_io.write_bytes(
            self.paths.earliest_hint_path, str(snapshot_id).encode(), overwrite=True
        )

    def _write_earliest_hint_if_missing(self, snapshot_id: int) -> None:
        if not self.file_io.exists(self.paths.earliest_hint_path):
            self._write_earliest_hint(snapshot_id)

    def _result(self, plan: _Plan, *, dry_run: bool, start: float) -> ExpireResult:
        retained = plan.end if plan.expired else self.snapshot_manager.earliest_snapshot_id()
        return ExpireResult(
            dry_run=dry_run,
            expired_snapshot_ids=tuple(s.id for s in plan.expired),
            earliest_retained_id=retained,
            latest_id=plan.latest,
            data_files=tuple(plan.data_files),
            changelog_files=tuple(plan.changelog_files),
            index_files=tuple(plan.index_files),
            manifest_files=tuple(plan.manifest_files),
            snapshot_files=tuple(plan.snapshot_files),
            bytes_freed=plan.bytes_freed,
            duration_s=time.monotonic() - start,
        )


def _previous_tag(tagged: Sequence[Snapshot], snapshot_id: int) -> Snapshot | None:
    """The newest tagged snapshot with an id below ``snapshot_id``."""
    found = None
    for tag in tagged:
        if tag.id < snapshot_id:
            found = tag
        else:
            break
    return found


def _skipping_tags(tagged: Sequence[Snapshot], begin: int, end: int) -> list[Snapshot]:
    """Tags whose manifests an expiry of ``[begin, end)`` must keep.

    From the newest tag at or before ``begin`` up to the newest tag before ``end``.

    Source: Paimon ``ExpireSnapshotsImpl.findSkippingTags``.
    """
    right = max((i for i, t in enumerate(tagged) if t.id < end), default=-1)
    if right < 0:
        return []
    left = max((i for i, t in enumerate(tagged) if t.id <= begin), default=0)
    return list(tagged[left : right + 1])
