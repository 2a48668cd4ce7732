"""OrphanFilesClean: delete files under a table that nothing references any more.

Candidates are the files in ``manifest/``, in the data directories
(``<partition>/bucket-<b>/``) and stray non-snapshot files in ``snapshot/``.
A candidate is an orphan when no retained snapshot and no tag references it
(by file name, as Paimon compares) and it was last modified before
``older_than``. That grace period is what protects a commit in flight: its
data files and manifests exist before the snapshot that publishes them, so
they are never older than the cutoff unless the writer stalled for longer
than the grace period (one day by default). Schema, tag, consumer, hint and
snapshot files are never candidates. Scratch objects a FileIO left behind
(``.snaplake-probe-*``, S3FileIO's conditional-write probe interrupted by a
crash) are candidates in any directory of the table, schema/ included.

Order: list candidates first, then read the snapshots and tags, then delete
(parallel batches). A snapshot expired while being read is skipped; any other
read failure raises before anything is deleted.

Source: Paimon ``OrphanFilesClean`` / ``LocalOrphanFilesClean`` (directories
scanned, ``olderThan`` default of one day, used files = manifest lists,
manifests, index and statistics files and data files with their extra files
of every snapshot and tag, file-name comparison, snapshot-directory handling).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from snaplake.compaction._io import delete_in_batches, parallel_map, read_entries_strict
from snaplake.compaction.tags import TagManager
from snaplake.errors import CorruptMetadataError
from snaplake.store.format.manifest import ManifestEntry, read_manifest_file
from snaplake.store.format.manifest_list import ManifestFileMeta, read_manifest_list
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.format.support import Operation, check_latest_supported
from snaplake.store.io.file_io import SCRATCH_PREFIX, FileIO, FileStatus
from snaplake.store.snapshot_manager import SnapshotManager

__all__ = ["DEFAULT_OLDER_THAN", "OrphanCleanResult", "OrphanFilesClean"]

logger = logging.getLogger(__name__)

DEFAULT_OLDER_THAN = timedelta(days=1)
"""Paimon's default grace period for orphan files."""

_NEVER_SCANNED = frozenset({"schema", "tag", "consumer", "branch", "index", "statistics",
                            "changelog", "snapshot", "manifest"})  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class OrphanCleanResult:
    """What an orphan clean deleted (or, for a dry run, would delete).

    Attributes:
        dry_run: True when nothing was deleted.
        cutoff: Only files modified before this instant (UTC) were candidates.
        files_scanned: Candidate files listed.
        orphan_files: Full paths of the orphans, sorted.
        bytes: Total size of the orphans.
        duration_s: Wall time, seconds.
    """

    dry_run: bool
    cutoff: datetime
    files_scanned: int = 0
    orphan_files: tuple[str, ...] = ()
    bytes: int = 0
    duration_s: float = 0.0

    @property
    def files_deleted(self) -> int:
        """Orphans deleted (0 for a dry run)."""
        return 0 if self.dry_run else len(self.orphan_files)


def resolve_cutoff(older_than: timedelta | datetime, *, now: datetime) -> datetime:
    """Turn ``older_than`` into an aware UTC cutoff instant.

    Args:
        older_than: A non-negative age (``timedelta``) or an aware instant.
        now: The current time (aware).

    Raises:
        ValueError: a negative age, a naive datetime, or an instant in the future.
    """
    if isinstance(older_than, timedelta):
        if older_than < timedelta(0):
            raise ValueError(f"older_than must not be negative, got {older_than}")
        return now - older_than
    if older_than.tzinfo is None:
        raise ValueError("older_than must be timezone-aware (e.g. datetime.now(UTC) - ...)")
    if older_than > now:
        raise ValueError(
            f"older_than {older_than.isoformat()} is in the future; that would delete files "
            "of commits in flight — pass a time in the past"
        )
    return older_than.astimezone(UTC)


class OrphanFilesClean:
    """Find and delete a table's orphan files.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        snapshot_manager: Reads snapshots.
        older_than: Grace period (``timedelta``) or cutoff instant (aware ``datetime``).
        now: Current time (injected by tests); default ``datetime.now(UTC)``.
        workers: Threads for reading manifests and deleting.

    Raises:
        ValueError: see :func:`resolve_cutoff`.
    """

    def __init__(
        self,
        *,
        file_io: FileIO,
        paths: PathFactory,
        snapshot_manager: SnapshotManager,
        older_than: timedelta | datetime = DEFAULT_OLDER_THAN,
        now: datetime | None = None,
        workers: int = 8,
    ) -> None:
        self.file_io = file_io
        self.paths = paths
        self.snapshot_manager = snapshot_manager
        self.tags = TagManager(file_io, paths)
        self.cutoff = resolve_cutoff(older_than, now=now or datetime.now(UTC))
        self._workers = workers

    def plan(self) -> OrphanCleanResult:
        """Find the orphans without deleting them (the dry run).

        Raises:
            CorruptMetadataError: a retained snapshot's or a tag's metadata is
                missing or undecodable (``.path`` names it).

        Storage:
            Lists the table directory and reads metadata; writes nothing.
        """
        return self._run(dry_run=True)

    def execute(self) -> OrphanCleanResult:
        """Delete the orphans.

        Raises:
            CorruptMetadataError: as :meth:`plan`; nothing is deleted then.
            StorageError: a deletion failed; running again resumes.

        Storage:
            Deletes the listed orphan files (data files, manifests, manifest
            lists, stray temp files in ``snapshot/``), never directories.
        """
        return self._run(dry_run=False)

    # ----------------------------------------------------------------- steps
    def _run(self, *, dry_run: bool) -> OrphanCleanResult:
        start = time.monotonic()
        check_latest_supported(SchemaManager(self.file_io, self.paths), Operation.MAINTENANCE)
        cutoff_ms = int(self.cutoff.timestamp() * 1000)
        candidates = [s for s in self._candidates() if s.modification_time_ms < cutoff_ms]
        used = self._used_names()
        orphans = sorted(
            (s for s in candidates if s.path.rsplit("/", 1)[-1] not in used), key=lambda s: s.path
        )
        if not dry_run and orphans:
            delete_in_batches(self.file_io, [s.path for s in orphans], workers=self._workers)
        result = OrphanCleanResult(
            dry_run=dry_run,
            cutoff=self.cutoff,
            files_scanned=len(candidates),
            orphan_files=tuple(s.path for s in orphans),
            bytes=sum(s.size_bytes for s in orphans),
            duration_s=time.monotonic() - start,
        )
        logger.info(
            "orphan clean of %s (%s): %d orphan file(s), %d bytes, %.1f ms",
            self.paths.root, "dry run" if dry_run else "deleted", len(orphans), result.bytes,
            result.duration_s * 1000,
        )  # fmt: skip
        return result

    def _candidates(self) -> Iterable[FileStatus]:
        root = self.paths.root
        for status in self.file_io.list_files(root):
            rel = status.path[len(root) :].lstrip("/")
            parts = rel.split("/")
            name = parts[-1]
            top = parts[0]
            if name.startswith(SCRATCH_PREFIX):
                yield status  # never referenced: an orphan once older than the cutoff
            elif top == "manifest" and len(parts) == 2:
                yield status
            elif top == "snapshot" and len(parts) == 2:
                if not (name.startswith("snapshot-") or name in ("LATEST", "EARLIEST")):
                    yield status
            elif (
                top not in _NEVER_SCANNED
                and len(parts) >= 2
                and parts[-2].startswith("bucket-")
                and all("=" in p for p in parts[:-2])
            ):
                yield status

    def _used_names(self) -> set[str]:
        """Every file name reachable from a retained snapshot or a tag."""
        used: set[str] = set()
        snapshots: list[tuple[Snapshot, bool]] = [
            (s, True) for s in self.snapshot_manager.snapshots()
        ]
        snapshots += [(s, False) for s in self.tags.tagged_snapshots()]
        manifests: dict[str, ManifestFileMeta] = {}
        owners: dict[str, list[int | None]] = {}
        for snap, may_vanish in snapshots:
            lists = [snap.base_manifest_list, snap.delta_manifest_list]
            if snap.changelog_manifest_list:
                lists.append(snap.changelog_manifest_list)
            metas: list[ManifestFileMeta] = []
            try:
                for name in lists:
                    metas += read_manifest_list(self.file_io, self.paths.manifest_path(name))
            except FileNotFoundError as exc:
                if may_vanish and not self.snapshot_manager.snapshot_exists(snap.id):
                    continue  # expired while we read it
                raise CorruptMetadataError(
                    f"a manifest list of snapshot {snap.id} is missing ({exc.filename or exc}); "
                    "orphan clean stopped without deleting anything",
                    path=str(exc.filename or self.paths.snapshot_path(snap.id)),
                ) from exc
            used.update(lists)
            for m in metas:
                manifests.setdefault(m.file_name, m)
                owners.setdefault(m.file_name, []).append(snap.id if may_vanish else None)
            for extra in (snap.index_manifest, snap.statistics):
                if extra:
                    used.add(extra)
        used.update(manifests)

        def read(name: str) -> list[ManifestEntry]:
            try:
                return read_manifest_file(self.file_io, self.paths.manifest_path(name))
            except FileNotFoundError:
                refs = owners[name]
                if any(i is None or self.snapshot_manager.snapshot_exists(i) for i in refs):
                    return read_entries_strict(self.file_io, self.paths, name)  # raises
                return []  # only expired-meanwhile snapshots referenced it

        chunks = parallel_map(read, sorted(manifests), workers=self._workers)
        for chunk in chunks:
            for e in chunk:
                used.add(e.file.file_name)
                used.update(e.file.extra_files)
        return used
