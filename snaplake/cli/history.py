"""Rendering helpers that read a little table metadata the facade does not summarise.

Only reads; never writes. Kept here (the rendering layer) because it only
shapes history for display.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from snaplake.cli.output import format_time_ms
from snaplake.store.format.manifest_list import read_manifest_list
from snaplake.store.format.snapshot import BATCH_COMMIT_IDENTIFIER, Snapshot
from snaplake.table import Table

__all__ = ["delta_file_counts", "snapshot_rows"]

logger = logging.getLogger(__name__)


def delta_file_counts(table: Table, snapshot: Snapshot) -> tuple[int, int] | None:
    """Return ``(files added, files deleted)`` by ``snapshot``, from its delta manifest list.

    The counts are the ``_NUM_ADDED_FILES`` / ``_NUM_DELETED_FILES`` of the
    delta manifests (a manifest merge has an empty delta: ``(0, 0)``).

    Returns:
        The counts, or ``None`` when the delta manifest list is gone.

    Raises:
        CorruptMetadataError: the delta manifest list is undecodable.

    Storage:
        Reads ``manifest/<deltaManifestList>`` (cached per process).
    """
    path = table.paths.manifest_path(snapshot.delta_manifest_list)
    try:
        metas = read_manifest_list(table.file_io, path)
    except FileNotFoundError:
        logger.warning("delta manifest list %s of snapshot %d is missing", path, snapshot.id)
        return None
    return sum(m.num_added_files for m in metas), sum(m.num_deleted_files for m in metas)


def snapshot_rows(table: Table, snapshots: Sequence[Snapshot]) -> list[dict[str, Any]]:
    """Return one history row per snapshot (oldest first), with delta file counts.

    Keys: ``id, time, kind, user, identifier, records_added, total_records,
    files_added, files_deleted, schema_id``. ``identifier`` is ``None`` for
    batch commits (Paimon's ``Long.MAX_VALUE``).
    """
    with ThreadPoolExecutor(max_workers=8) as pool:
        counts = list(pool.map(lambda s: delta_file_counts(table, s), snapshots))
    rows = []
    for snap, count in zip(snapshots, counts, strict=True):
        rows.append(
            {
                "id": snap.id,
                "time": format_time_ms(snap.time_millis),
                "kind": snap.commit_kind.value,
                "user": snap.commit_user,
                "identifier": (
                    None
                    if snap.commit_identifier == BATCH_COMMIT_IDENTIFIER
                    else snap.commit_identifier
                ),
                "records_added": snap.delta_record_count,
                "total_records": snap.total_record_count,
                "files_added": count[0] if count else None,
                "files_deleted": count[1] if count else None,
                "schema_id": snap.schema_id,
            }
        )
    return rows
