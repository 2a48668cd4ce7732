"""Duplicate commits: which snapshot holds a replayed identifier, and its leftover data files.

A commit whose ``commit_identifier`` is at or below the highest one its
``commit_user`` committed is a duplicate (Paimon's rule: identifiers increase
per user, so a lower one counts as committed). Nothing is published; the
result names the snapshot that holds the identifier, and the data files the
duplicate's messages ADD are deleted unless a snapshot references them (a
replay after an unknown outcome commits the very files that landed).

A file is referenced by a retained snapshot exactly when it is live in the
latest snapshot or a snapshot after the earliest retained one DELETEs it
(a file live in a retained snapshot and not any more was deleted after it);
a tag older than the earliest snapshot references its own live files.

Source: Paimon ``FileStoreCommitImpl.filterCommitted`` (identifiers at or
below the user's latest are committed) and ``SnapshotDeletion`` (which files
a snapshot range still references).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence

from snaplake.commit.conflict import ConflictDetection
from snaplake.commit.message import CommitMessage
from snaplake.store.format.index_file import index_path, read_index_manifest
from snaplake.store.format.manifest import FileKind, ManifestEntry, read_manifest_file
from snaplake.store.format.manifest_list import read_manifest_list
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.read.scan import FileStoreScan
from snaplake.store.snapshot_manager import SnapshotManager, read_snapshot_file
from snaplake.store.table_storage import TableStorage

__all__ = ["data_file_paths", "delete_unreferenced_files", "find_holding_snapshot"]

logger = logging.getLogger(__name__)


def find_holding_snapshot(
    snapshot_manager: SnapshotManager, *, commit_user: str, identifier: int, highest: int
) -> Snapshot | None:
    """Return the snapshot that holds ``identifier`` of ``commit_user``, if retained.

    Args:
        snapshot_manager: Reads snapshots.
        commit_user: The user.
        identifier: The duplicate's identifier.
        highest: The user's highest committed identifier (``>= identifier``).

    Returns:
        The snapshot, or ``None`` when no retained snapshot holds it: it
        expired, or (for ``identifier < highest``) it never landed and is
        only *treated* as committed, which is logged as a WARNING.

    Storage: reads snapshots from the latest back to the user's commit
    with an identifier at or below ``identifier``.
    """
    found = snapshot_manager.find_commit(commit_user, identifier)
    if found is None and identifier < highest:
        logger.warning(
            "commit identifier %d of %s is below the user's last committed identifier %d but "
            "no retained snapshot holds it; it is treated as committed (Paimon's rule) and its "
            "messages are dropped. If it never landed, commit them under an identifier above %d",
            identifier, commit_user, highest, highest,
        )  # fmt: skip
    return found


def data_file_paths(
    paths: PathFactory, schema: TableSchema, entries: Sequence[ManifestEntry]
) -> list[str]:
    """Full paths of the data files of ``entries`` (their external path when set)."""
    part_paths: dict[bytes, str] = {}
    out = []
    for e in entries:
        part = part_paths.get(e.partition)
        if part is None:
            part = part_paths[e.partition] = schema.partition_path_of(e.partition)
        out.append(
            paths.data_file_path(part, e.bucket, e.file.file_name,
                                 external_path=e.file.external_path)
        )  # fmt: skip
    return out


def delete_unreferenced_files(
    table: TableStorage,
    *,
    schema: TableSchema,
    messages: Sequence[CommitMessage],
    latest: Snapshot,
) -> list[str]:
    """Delete the data, changelog and index files of ``messages`` no retained snapshot or tag holds.

    Best effort: when the history cannot be read, nothing is deleted (orphan
    clean removes the files later) and the failure is logged.

    Args:
        table: The table's storage, paths and managers.
        schema: Gives the partition paths of the messages.
        messages: The duplicate commit's messages.
        latest: The latest snapshot.

    Returns:
        The paths deleted.

    Storage: reads the latest snapshot's manifests, the delta lists and
    manifests of every retained snapshot after the earliest one, and the
    manifests of tags older than the earliest snapshot (for changelog files:
    the changelog lists and manifests of retained snapshots and tags, newest
    first, until every file is found; for index files the index manifests of
    every retained snapshot and tag); deletes data, changelog and index files.
    """
    adds = [
        ManifestEntry(kind=FileKind.ADD, partition=m.partition, bucket=m.bucket,
                      total_buckets=m.total_buckets, file=f)
        for m in messages
        for f in m.added_files()
    ]  # fmt: skip
    changelog = [
        ManifestEntry(kind=FileKind.ADD, partition=m.partition, bucket=m.bucket,
                      total_buckets=m.total_buckets, file=f)
        for m in messages
        for f in (*m.data_increment.changelog_files, *m.compact_increment.changelog_files)
    ]  # fmt: skip
    index_files = [f for m in messages for f in m.added_index_files()]
    if not adds and not changelog and not index_files:
        return []
    try:
        referenced = (
            _referenced_names(table, latest, {e.file.file_name for e in adds}) if adds else set()
        )
        referenced |= _referenced_changelog(table, latest, {e.file.file_name for e in changelog})
        adds += changelog
        index_referenced = _referenced_index(table, latest) if index_files else set()
    except (OSError, ValueError):
        logger.warning("could not check whether a duplicate's data files are referenced; "
                       "leaving them to orphan clean", exc_info=True)  # fmt: skip
        return []
    targets = data_file_paths(
        table.paths, schema, [e for e in adds if e.file.file_name not in referenced]
    )
    targets += [
        index_path(table.paths, f) for f in index_files if f.file_name not in index_referenced
    ]
    table.file_io.delete_many(targets)
    logger.info("deleted %d data and index file(s) of a duplicate commit (%d referenced, kept)",
                len(targets), len(adds) + len(index_files) - len(targets))  # fmt: skip
    return targets


def _referenced_index(table: TableStorage, latest: Snapshot) -> set[str]:
    """Names of the index files the index manifest of a retained snapshot or a tag lists."""
    file_io, paths, snapshot_manager = table.file_io, table.paths, table.snapshot_manager
    earliest = snapshot_manager.earliest_snapshot_id() or latest.id
    snaps = (snapshot_manager.try_snapshot(sid) for sid in range(latest.id, earliest - 1, -1))
    tags = (read_snapshot_file(file_io, s.path) for s in file_io.list_files(paths.tag_dir))
    manifests = {s.index_manifest for s in itertools.chain(snaps, tags) if s and s.index_manifest}
    return {
        e.index_file.file_name
        for name in manifests
        for e in read_index_manifest(file_io, paths, name)
    }


def _referenced_changelog(table: TableStorage, latest: Snapshot, names: set[str]) -> set[str]:
    """Which of the changelog file ``names`` a retained snapshot's or a tag's changelog lists."""
    found: set[str] = set()
    if not names:
        return found
    file_io, paths, snapshot_manager = table.file_io, table.paths, table.snapshot_manager
    earliest = snapshot_manager.earliest_snapshot_id() or latest.id
    snaps = (snapshot_manager.try_snapshot(sid) for sid in range(latest.id, earliest - 1, -1))
    tags = (read_snapshot_file(file_io, s.path) for s in file_io.list_files(paths.tag_dir))
    for snap in itertools.chain(snaps, tags):  # lazily: stops once all are found
        if found == names:
            break
        if snap is None or not snap.changelog_manifest_list:
            continue
        list_path = paths.manifest_path(snap.changelog_manifest_list)
        for meta in read_manifest_list(file_io, list_path):
            entries = read_manifest_file(file_io, paths.manifest_path(meta.file_name))
            found |= {e.file.file_name for e in entries} & names
    return found


def _live_names(table: TableStorage, snapshot: Snapshot) -> set[str]:
    scan = FileStoreScan(
        file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager,
        snapshot=snapshot,
    )  # fmt: skip
    return {e.file.file_name for e in scan.plan_entries()}


def _referenced_names(table: TableStorage, latest: Snapshot, names: set[str]) -> set[str]:
    """Which of ``names`` a retained snapshot or a tag references."""
    file_io, paths, snapshot_manager = table.file_io, table.paths, table.snapshot_manager
    found = names & _live_names(table, latest)
    earliest = snapshot_manager.earliest_snapshot_id() or latest.id
    history = ConflictDetection(table)
    for sid in range(latest.id, earliest, -1):
        if found == names:
            return found
        snap = snapshot_manager.try_snapshot(sid)
        if snap is None:  # expired meanwhile: the newer ones were read already
            break
        found |= {
            e.file.file_name
            for e in history.delta_entries(snap)
            if e.kind == FileKind.DELETE and e.file.file_name in names
        }
    for status in file_io.list_files(paths.tag_dir):
        tag = read_snapshot_file(file_io, status.path)
        if tag is not None and tag.id < earliest and found != names:
            found |= names & _live_names(table, tag)
    return found
