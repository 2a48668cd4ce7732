"""Rollback: make an older snapshot (or a tag) the latest version of a table again.

Paimon semantics: every snapshot newer than the target is deleted (newest
first) and tags on those snapshots are deleted; the ``LATEST`` hint points to
the target. Rolling back to a tag whose snapshot already expired re-creates
``snapshot-<id>`` from the tag and moves ``EARLIEST`` to it. Long-lived
changelogs (``changelog/changelog-<id>``, kept by Paimon's decoupled
changelog retention) above the target are deleted too and
``changelog/LATEST`` is moved below them. Data files, changelog files, index
files, manifests and index manifests that only the removed snapshots
referenced become orphans for orphan clean (a snapshot re-created from a tag
keeps the tag's ``indexManifest``, so its index files stay live). Rollback
rewrites history: stop writers first (a commit that lands during the rollback
may build on a removed snapshot).

Source: Paimon ``RollbackHelper`` (``cleanLargerThan``, ``cleanLongLivedChangelogs``,
``createSnapshotFileIfNeeded``)
and ``FileStoreTable.rollbackTo``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass

from snaplake.errors import FileAlreadyExistsError, SnapshotNotFoundError
from snaplake.options import Operation
from snaplake.store.format.paths import PathFactory, list_ids
from snaplake.store.format.schema import SchemaManager
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.io.file_io import FileIO
from snaplake.store.snapshot_manager import SnapshotManager
from snaplake.store.support import check_latest_supported
from snaplake.store.tags import TagManager

__all__ = ["RollbackResult", "rollback_to"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class RollbackResult:
    """What a rollback did.

    Attributes:
        snapshot_id: The snapshot that is now the latest.
        snapshots_deleted: Ids of the removed snapshots, newest first.
        changelogs_deleted: Ids of the removed long-lived changelogs, newest first.
        tags_deleted: Names of the removed tags (they pointed past the target).
        restored_from_tag: True when the snapshot file was re-created from a tag.
        duration_s: Wall time, seconds.
    """

    snapshot_id: int
    snapshots_deleted: tuple[int, ...] = ()
    changelogs_deleted: tuple[int, ...] = ()
    tags_deleted: tuple[str, ...] = ()
    restored_from_tag: bool = False
    duration_s: float = 0.0


def rollback_to(
    *,
    file_io: FileIO,
    paths: PathFactory,
    snapshot_manager: SnapshotManager,
    target: int | str,
) -> RollbackResult:
    """Roll the table back to snapshot id ``target`` or to the tag named ``target``.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        snapshot_manager: Reads snapshots.
        target: A retained snapshot id, or a tag name.

    Returns:
        What was removed.

    Raises:
        SnapshotNotFoundError: the id is not retained.
        TagNotFoundError: no tag of that name.

    Storage:
        Rewrites ``snapshot/LATEST``; deletes ``snapshot-<id>`` for every id
        above the target (newest first), then ``changelog/changelog-<id>``
        above it (rewriting ``changelog/LATEST``), and the tags on them; may create
        ``snapshot-<id>`` from the tag and rewrite ``snapshot/EARLIEST``.

    Source:
        Paimon ``RollbackHelper.cleanLargerThan``.
    """
    start = time.monotonic()
    check_latest_supported(SchemaManager(file_io, paths), Operation.MAINTENANCE)
    tags = TagManager(file_io, paths)
    restored = False
    if isinstance(target, str):
        snap: Snapshot = tags.get(target)
    else:
        snap = snapshot_manager.snapshot(target)
    latest = snapshot_manager.latest_snapshot_id()
    earliest = snapshot_manager.earliest_snapshot_id()
    file_io.write_bytes(paths.latest_hint_path, str(snap.id).encode(), overwrite=True)
    deleted: list[int] = []
    if latest is not None:
        low = max(earliest or 1, snap.id + 1)
        for sid in range(latest, low - 1, -1):
            if snapshot_manager.snapshot_exists(sid):
                file_io.delete(paths.snapshot_path(sid))
                deleted.append(sid)
    changelogs = _clean_long_lived_changelogs(file_io, paths, snap.id)
    removed_tags = []
    for name, tagged in tags.tags().items():
        if tagged.id > snap.id:
            tags.delete_tag(name)
            removed_tags.append(name)
    if not snapshot_manager.snapshot_exists(snap.id):
        if isinstance(target, int):
            raise SnapshotNotFoundError(
                f"snapshot {snap.id} vanished during the rollback (expired concurrently)",
                snapshot_id=snap.id,
            )
        # Someone may have re-created it already; same content by construction.
        with contextlib.suppress(FileAlreadyExistsError):
            file_io.write_if_absent(paths.snapshot_path(snap.id), snap.to_bytes())
        file_io.write_bytes(paths.earliest_hint_path, str(snap.id).encode(), overwrite=True)
        restored = True
    result = RollbackResult(
        snapshot_id=snap.id,
        snapshots_deleted=tuple(deleted),
        changelogs_deleted=changelogs,
        tags_deleted=tuple(sorted(removed_tags)),
        restored_from_tag=restored,
        duration_s=time.monotonic() - start,
    )
    logger.info(
        "rolled %s back to snapshot %d (%d snapshot(s), %d tag(s) removed)",
        paths.root, snap.id, len(deleted), len(removed_tags),
    )  # fmt: skip
    return result


def _clean_long_lived_changelogs(
    file_io: FileIO, paths: PathFactory, target: int
) -> tuple[int, ...]:
    """Delete ``changelog/changelog-<id>`` for every id above ``target``; return the ids.

    ``changelog/LATEST`` then names the newest id left (``-1`` when none is
    left), as Paimon writes it.

    Source: Paimon ``RollbackHelper.cleanLongLivedChangelogs``.
    """
    ids = list_ids(file_io, paths.changelog_dir, paths.parse_changelog_id)[::-1]
    above = tuple(cid for cid in ids if cid > target)
    if not above:
        return ()
    remaining = [cid for cid in ids if cid <= target]
    file_io.write_bytes(
        f"{paths.changelog_dir}/LATEST",
        str(remaining[0] if remaining else -1).encode(),
        overwrite=True,
    )
    for cid in above:
        file_io.delete(paths.changelog_path(cid))
    return above
