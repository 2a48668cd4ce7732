"""TagDeletion: delete a tag and the files only it kept alive, as Paimon's ``deleteTag`` does.

A tag pins a snapshot; once that snapshot has expired, the tag may be the
only thing that still references some data files, manifests and index files.
Deleting the tag deletes those at once instead of leaving them to orphan
clean (which waits a grace period and lists the whole table):

1. When the tagged snapshot is still retained, or another tag names the same
   snapshot, only the tag file goes: snapshot expiry (or the other tag's
   deletion) decides about the files later.
2. Otherwise the neighbours decide. A data file is live over a contiguous
   range of snapshots (ADDed once, DELETEd once), so a file of the tagged
   snapshot that neither the previous tag nor the nearest later holder (the
   next tag or the earliest retained snapshot, whichever is older) holds is
   held by nothing else that is retained: it is deleted. Manifests, manifest
   lists, the index manifest and index files the tagged snapshot reaches
   that neither neighbour reaches are deleted likewise. Consumers never pin
   an expired snapshot (expiry keeps ``nextSnapshot`` and later), so they
   need no check here.

Everything is read and planned before the first deletion; a missing or
corrupt manifest raises ``CorruptMetadataError`` and nothing is deleted (not
even the tag). The tag file goes first, then data files, index files and
metadata, so a crash midway leaves only unreferenced files (orphan clean's).

A table with branches (``branch/branch-<name>``, written by Paimon's Java
engines) may reference the main branch's files from a branch snaplake does not
read; there, only the tag file is deleted.

Source: Paimon ``TagManager.deleteTag`` / ``doClean`` (the neighbour rule) and
``TagDeletion`` (``cleanUnusedDataFiles``, ``cleanUnusedManifests``).
Deliberate difference: Paimon skips a cleanup step whose reads fail and
deletes the tag anyway; snaplake stops before deleting anything.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from snaplake.compaction._io import delete_in_batches, read_index_strict
from snaplake.compaction.snapshot_files import FileKey, SnapshotFiles
from snaplake.options import Operation
from snaplake.store.format.index_file import index_path
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.support import check_supported
from snaplake.store.table_storage import TableStorage
from snaplake.store.tags import TagManager

__all__ = ["TagDeletion", "TagDeletionResult"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class TagDeletionResult:
    """What deleting one tag deleted.

    Attributes:
        tag: The tag's name.
        snapshot_id: The snapshot it pinned.
        data_files: Paths of the data files (and their extra files) only the tag held.
        index_files: Paths of the index files only the tag held.
        manifest_files: Paths of the manifests, manifest lists and index
            manifest only the tag held.
        duration_s: Wall time of planning and deleting, seconds.
    """

    tag: str
    snapshot_id: int
    data_files: tuple[str, ...] = ()
    index_files: tuple[str, ...] = ()
    manifest_files: tuple[str, ...] = ()
    duration_s: float = 0.0

    @property
    def files_deleted(self) -> int:
        """Files deleted besides the tag file."""
        return len(self.data_files) + len(self.index_files) + len(self.manifest_files)


@dataclass(slots=True)
class _Plan:
    data_files: list[str]
    index_files: list[str]
    manifest_files: list[str]


class TagDeletion:
    """Delete tags of one table with the files only they held (see the module).

    Args:
        table: The table's storage, paths and managers.
        workers: Threads for reading manifests and deleting files.
    """

    def __init__(self, table: TableStorage, *, workers: int = 8) -> None:
        self.table = table
        self.tags = TagManager(table.file_io, table.paths)
        self._workers = workers

    def delete(self, name: str) -> TagDeletionResult:
        """Delete tag ``name`` and the files only it held.

        Returns:
            What was deleted.

        Raises:
            TagNotFoundError: no such tag (nothing deleted).
            UnsupportedTableError: the latest schema sets an option snaplake
                refuses for maintenance (nothing deleted).
            CorruptMetadataError: a manifest, manifest list or index manifest
                of the tag or its neighbours is missing or undecodable
                (nothing deleted).
            StorageError: a deletion failed midway; the files left are
                unreferenced (orphan clean removes them).

        Storage:
            Deletes ``tag/tag-<name>``, then the data, index and metadata
            files of :class:`TagDeletionResult`.
        """
        start = time.monotonic()
        table = self.table
        snap = self.tags.get(name)
        plan = self._plan(name, snap)
        self.tags.delete_tag(name)
        if plan is not None:
            io, workers = table.file_io, self._workers
            delete_in_batches(io, plan.data_files, workers=workers)
            delete_in_batches(io, plan.index_files, workers=workers)
            delete_in_batches(io, plan.manifest_files, workers=workers)
        result = TagDeletionResult(
            tag=name,
            snapshot_id=snap.id,
            data_files=tuple(plan.data_files) if plan else (),
            index_files=tuple(plan.index_files) if plan else (),
            manifest_files=tuple(plan.manifest_files) if plan else (),
            duration_s=time.monotonic() - start,
        )
        if result.files_deleted:
            logger.info(
                "deleted tag %s of %s with %d data file(s), %d index file(s) and %d "
                "metadata file(s) only it held", name, table.identifier,
                len(result.data_files), len(result.index_files), len(result.manifest_files),
            )  # fmt: skip
        return result

    def _plan(self, name: str, snap: Snapshot) -> _Plan | None:
        """The files only tag ``name`` holds; ``None``: delete only the tag file."""
        table = self.table
        schema = table.schema_manager.latest()
        if schema is not None:
            check_supported(schema, Operation.MAINTENANCE)
        if schema is None or table.snapshot_manager.snapshot_exists(snap.id):
            return None
        tags = self.tags.tags()
        if sum(1 for s in tags.values() if s.id == snap.id) > 1 or self._has_branches():
            return None
        tagged = sorted({s.id: s for s in tags.values()}.values(), key=lambda s: s.id)
        left = [s for s in tagged if s.id < snap.id]
        later = [s for s in tagged if s.id > snap.id]
        earliest_id = table.snapshot_manager.earliest_snapshot_id()
        earliest = None if earliest_id is None else table.snapshot_manager.try_snapshot(earliest_id)
        if earliest is None:  # expired meanwhile (or no snapshot): no safe right neighbour
            return None
        neighbours = [*left[-1:], min([*later[:1], earliest], key=lambda s: s.id)]

        files = SnapshotFiles(table.file_io, table.paths, schema, workers=self._workers)
        skip: set[FileKey] = set()
        keep: set[str] = set()
        for neighbour in neighbours:
            skip |= files.live_files(neighbour)
            keep |= files.referenced_metadata(neighbour)
        data: dict[str, None] = {}
        for entry in files.live_entries(snap):
            if files.key(entry) not in skip:
                data.update((path, None) for path, _ in files.data_paths(entry))
        manifests = {
            table.paths.manifest_path(n): None for n, _ in files.metadata_of(snap) if n not in keep
        }
        index: dict[str, None] = {}
        if snap.index_manifest and snap.index_manifest not in keep:
            manifests[table.paths.index_manifest_path(snap.index_manifest)] = None
            for e in read_index_strict(table.file_io, table.paths, snap.index_manifest):
                if e.index_file.file_name not in keep:
                    index[index_path(table.paths, e.index_file)] = None
        return _Plan(list(data), list(index), list(manifests))

    def _has_branches(self) -> bool:
        """Whether ``branch/`` holds a branch (which may reference this branch's files)."""
        io, root = self.table.file_io, self.table.paths.root
        return any(d.startswith("branch-") for d in io.list_dirs(f"{root}/branch"))
