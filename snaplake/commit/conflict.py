"""ConflictDetection: pure checks of a pending delta against live files.

A commit that only ADDs files never conflicts. A commit that DELETEs files
(compaction, overwrite, row rewrites) requires every deleted file to be live
in the snapshot it publishes on top of, its bucket count to match the live
files of the same partition, and the delta itself to be self-consistent.

Source: Paimon ``ConflictDetection`` (``checkNoConflictsOrFail``: deleted files
must exist, total buckets unchanged) and Iceberg's serializable-isolation
validation of deleted files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from snaplake.errors import CommitConflictError
from snaplake.store.manifest import FileKind, ManifestEntry

__all__ = ["apply_entries", "check_deletes_live", "check_self_consistent"]

EntryKey = tuple[Any, ...]


def check_self_consistent(entries: Sequence[ManifestEntry]) -> None:
    """Refuse a delta that ADDs or DELETEs one file twice.

    Raises:
        CommitConflictError: a file identity appears twice with the same kind.
    """
    seen: set[tuple[FileKind, EntryKey]] = set()
    dupes = []
    for e in entries:
        key = (e.kind, e.identifier())
        if key in seen:
            dupes.append(e.file.file_name)
        seen.add(key)
    if dupes:
        raise CommitConflictError(
            f"the commit lists files twice: {sorted(set(dupes))[:10]}; each message must name "
            "a file once (were the same messages passed twice?)",
            paths=sorted(set(dupes)),
        )


def apply_entries(
    live: dict[EntryKey, ManifestEntry],
    entries: Iterable[ManifestEntry],
    *,
    partitions: frozenset[bytes] | None = None,
) -> None:
    """Apply ``entries`` (oldest first) to ``live`` in place, optionally only some partitions."""
    for e in entries:
        if partitions is not None and e.partition not in partitions:
            continue
        if e.kind == FileKind.ADD:
            live[e.identifier()] = e
        else:
            live.pop(e.identifier(), None)


def check_deletes_live(
    deletes: Sequence[ManifestEntry],
    live: Mapping[EntryKey, ManifestEntry],
    *,
    snapshot_id: int,
    removed_by: Mapping[str, int] | None = None,
) -> None:
    """Require every DELETE to name a live file with an unchanged bucket count.

    Args:
        deletes: The commit's DELETE entries.
        live: Live ADD entries of (at least) the touched partitions in the
            snapshot being committed on, keyed by identity.
        snapshot_id: Id of that snapshot (for the message).
        removed_by: Optional ``file name -> snapshot id`` that deleted it.

    Raises:
        CommitConflictError: a file is no longer live or the table's bucket
            count changed. Retrying the same messages cannot succeed.
    """
    missing = [d for d in deletes if d.identifier() not in live]
    if missing:
        names = sorted(d.file.file_name for d in missing)
        who = sorted({removed_by[n] for n in names if removed_by and n in removed_by})
        by = f" (removed by snapshot {', '.join(map(str, who))})" if who else ""
        raise CommitConflictError(
            f"{len(names)} file(s) this commit deletes are no longer live in snapshot "
            f"{snapshot_id}{by}: {names[:10]}; another commit (compaction or overwrite) "
            "replaced them — re-plan the operation on the latest snapshot",
            paths=names,
            conflicting_snapshot_ids=who,
        )
    for d in deletes:
        current = live[d.identifier()]
        if current.total_buckets != d.total_buckets:
            raise CommitConflictError(
                f"bucket count of {d.file.file_name} changed from {d.total_buckets} to "
                f"{current.total_buckets} (the table was rescaled); re-plan the operation",
                paths=[d.file.file_name],
                conflicting_snapshot_ids=[snapshot_id],
            )
