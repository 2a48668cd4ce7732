"""OrphanFilesClean: delete files under a table that nothing references any more.

Candidates are the files in ``manifest/`` (index manifests included), in
``index/`` (HASH and deletion-vector files), in the data directories
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

The steps are usable apart, so an engine can list the data directories on
many machines (``snaplake.spark.remove_orphan_files``): :meth:`OrphanFilesClean.scan_dirs`
names the table's top-level directories, :func:`list_candidates` lists one of
them anywhere, and :meth:`OrphanFilesClean.clean` compares what was listed
with the referenced files and deletes (through a callback, if given).

Source: Paimon ``OrphanFilesClean`` / ``LocalOrphanFilesClean`` (directories
scanned, ``olderThan`` default of one day, used files = manifest lists,
manifests, index and statistics files and data files with their extra files
of every snapshot and tag, file-name comparison, snapshot-directory handling).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from snaplake.compaction._io import delete_in_batches, parallel_map, read_entries_strict
from snaplake.errors import CorruptMetadataError
from snaplake.options import Operation
from snaplake.store.format.index_file import read_index_manifest
from snaplake.store.format.manifest import ManifestEntry, read_manifest_file
from snaplake.store.format.manifest_list import ManifestFileMeta, read_manifest_list
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.io.file_io import SCRATCH_PREFIX, FileIO, FileStatus
from snaplake.store.snapshot_manager import SnapshotManager, read_snapshot_file
from snaplake.store.support import check_latest_supported
from snaplake.store.tags import TagManager

__all__ = [
    "DEFAULT_OLDER_THAN",
    "OrphanCleanResult",
    "OrphanFilesClean",
    "is_candidate",
    "list_candidates",
]

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


def is_candidate(relative_path: str) -> bool:
    """Whether a file may be an orphan, by its path relative to the table directory.

    Candidates: manifests, manifest lists and index manifests (``manifest/<name>``),
    index files (``index/<name>``), stray
    files in ``snapshot/`` (not ``snapshot-<N>``, ``LATEST``, ``EARLIEST``),
    data files (``<k=v>/.../bucket-<b>/<name>`` outside the metadata
    directories) and FileIO scratch files anywhere.
    """
    parts = relative_path.lstrip("/").split("/")
    name = parts[-1]
    top = parts[0]
    if name.startswith(SCRATCH_PREFIX):
        return True  # never referenced: an orphan once older than the cutoff
    if top in ("manifest", "index") and len(parts) == 2:
        return True
    if top == "snapshot" and len(parts) == 2:
        return not (name.startswith("snapshot-") or name in ("LATEST", "EARLIEST"))
    return (
        top not in _NEVER_SCANNED
        and len(parts) >= 2
        and parts[-2].startswith("bucket-")
        and all("=" in p for p in parts[:-2])
    )


def list_candidates(
    file_io: FileIO, *, table_root: str, directory: str, cutoff_ms: int
) -> Iterator[FileStatus]:
    """List the candidates below ``directory`` last modified before ``cutoff_ms``.

    Args:
        file_io: Storage of the table.
        table_root: The table directory (paths are classified relative to it).
        directory: A directory of the table (listed recursively).
        cutoff_ms: Epoch milliseconds; newer files are skipped.

    Storage: lists ``directory``; reads and writes nothing else.
    """
    for status in file_io.list_files(directory):
        if status.modification_time_ms < cutoff_ms and is_candidate(status.path[len(table_root) :]):
            yield status


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
            Deletes the listed orphan files (data files, index files,
            manifests, manifest lists, index manifests, stray temp files in
            ``snapshot/``), never directories.
        """
        return self._run(dry_run=False)

    # ----------------------------------------------------------------- steps
    @property
    def cutoff_ms(self) -> int:
        """The cutoff as epoch milliseconds."""
        return int(self.cutoff.timestamp() * 1000)

    def scan_dirs(self) -> tuple[list[str], list[str]]:
        """Return the table's top-level directories: (data directories, metadata directories).

        Data directories are the partition directories (``k=v``) and, in an
        unpartitioned table, the ``bucket-<b>`` ones (anything not a metadata
        directory). Files directly in the table directory are in neither; no
        snaplake or Paimon writer puts a candidate there.

        Storage: lists the table directory (one level).
        """
        root = self.paths.root
        data: list[str] = []
        meta: list[str] = []
        for name in sorted(self.file_io.list_dirs(root)):
            (meta if name in _NEVER_SCANNED else data).append(f"{root}/{name}")
        return data, meta

    def clean(
        self,
        candidates: Iterable[FileStatus],
        *,
        dry_run: bool,
        delete: Callable[[Sequence[str]], None] | None = None,
        started: float | None = None,
    ) -> OrphanCleanResult:
        """Compare listed files with the referenced ones; delete the orphans unless ``dry_run``.

        ``candidates`` is consumed first, before any snapshot is read (the
        order that keeps a commit racing the clean safe together with the
        grace period).

        Args:
            candidates: Listed files (any, e.g. from :func:`list_candidates`);
                only candidates modified before the cutoff are considered.
            dry_run: Only report.
            delete: Deletes a list of orphan paths (default: this process, in
                parallel batches).
            started: ``time.monotonic()`` when the clean began (for ``duration_s``).

        Raises:
            CorruptMetadataError: a retained snapshot's or a tag's metadata is
                missing or undecodable; nothing was deleted.
            StorageError: a deletion failed; running again resumes.

        Storage:
            Reads snapshots, tags and manifests; deletes the orphans unless ``dry_run``.
        """
        start = time.monotonic() if started is None else started
        check_latest_supported(SchemaManager(self.file_io, self.paths), Operation.MAINTENANCE)
        cutoff_ms = self.cutoff_ms
        root = self.paths.root
        listed = [
            s
            for s in candidates
            if s.modification_time_ms < cutoff_ms and is_candidate(s.path[len(root) :])
        ]
        used = self._used_names()
        orphans = sorted(
            (s for s in listed if s.path.rsplit("/", 1)[-1] not in used), key=lambda s: s.path
        )
        if not dry_run and orphans:
            paths = [s.path for s in orphans]
            if delete is None:
                delete_in_batches(self.file_io, paths, workers=self._workers)
            else:
                delete(paths)
        result = OrphanCleanResult(
            dry_run=dry_run,
            cutoff=self.cutoff,
            files_scanned=len(listed),
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

    def _run(self, *, dry_run: bool) -> OrphanCleanResult:
        return self.clean(self.file_io.list_files(self.paths.root), dry_run=dry_run)

    def _long_lived_changelog_lists(self) -> list[tuple[str, list[ManifestFileMeta]]]:
        """The manifest lists Paimon's long-lived changelogs (``changelog/changelog-<id>``) keep.

        With decoupled changelog retention Paimon keeps an expired snapshot as
        a changelog file and deletes some of its lists by design (the base and
        delta lists when the table produces changelog), so a list that is gone
        is skipped; the ones present keep their manifests and files.

        Source: Paimon ``OrphanFilesClean`` (changelogs are roots like
        snapshots and tags), ``SnapshotDeletion.planManifestsCleaner``.
        """
        out: list[tuple[str, list[ManifestFileMeta]]] = []
        for status in self.file_io.list_files(self.paths.changelog_dir):
            name = status.path.rsplit("/", 1)[-1]
            if self.paths.parse_changelog_id(name) is None:
                continue
            changelog = read_snapshot_file(self.file_io, status.path)
            if changelog is None:
                continue  # expired meanwhile
            for list_name in (
                changelog.base_manifest_list,
                changelog.delta_manifest_list,
                changelog.changelog_manifest_list,
            ):
                if not list_name:
                    continue
                try:
                    metas = read_manifest_list(self.file_io, self.paths.manifest_path(list_name))
                except FileNotFoundError:
                    continue
                out.append((list_name, metas))
        return out

    def _index_file_names(self, snap: Snapshot, *, may_vanish: bool) -> set[str]:
        """Names of the index files ``snap``'s index manifest lists.

        Raises:
            CorruptMetadataError: the index manifest is missing (unless ``may_vanish``
                and the snapshot expired meanwhile) or undecodable.
        """
        assert snap.index_manifest is not None
        try:
            entries = read_index_manifest(self.file_io, self.paths, snap.index_manifest)
        except FileNotFoundError as exc:
            if may_vanish and not self.snapshot_manager.snapshot_exists(snap.id):
                return set()  # expired while we read it
            path = self.paths.index_manifest_path(snap.index_manifest)
            raise CorruptMetadataError(
                f"the index manifest {path} of snapshot {snap.id} is missing; orphan clean "
                "stopped without deleting anything",
                path=path,
            ) from exc
        return {e.index_file.file_name for e in entries}

    def _used_names(self) -> set[str]:
        """Every file name reachable from a retained snapshot, a tag or a long-lived changelog."""
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
            if snap.statistics:
                used.add(snap.statistics)
            if snap.index_manifest:
                used.add(snap.index_manifest)
                used |= self._index_file_names(snap, may_vanish=may_vanish)
        for name, metas in self._long_lived_changelog_lists():
            used.add(name)
            for m in metas:
                manifests.setdefault(m.file_name, m)
                owners.setdefault(m.file_name, []).append(None)
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
