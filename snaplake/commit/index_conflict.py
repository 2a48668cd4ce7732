"""HASH index replacement check: a commit replaces only the HASH files its writer restored.

A dynamic-bucket writer names, for each bucket whose key hashes grew, the
HASH file it restored (or last wrote) in ``deleted_index_files`` and the new
complete file in ``new_index_files``. When another commit changed that
bucket's HASH file since (or created the bucket), the two writers may have
given one new key two buckets: the later commit is refused before it
publishes, and its writer writes the rows again after restoring the new
index. Without this check (Paimon's: concurrent HASH replacements are
last-writer-wins) the hashes of the first writer would be lost and its keys
could be assigned again elsewhere.

Two writers that add new keys to one partition from the same restored
state always change the partition's first non-full bucket (or create the
same new bucket), so they always meet here; a capped partition puts a key
into a bucket seeded by its hash, the same in both writers.

Source: snaplake's own rule (issue 20 item 2); the conflict model is Paimon
``ConflictDetection``'s "deleted files must be live".
"""

from __future__ import annotations

from collections.abc import Sequence

from snaplake.errors import CommitConflictError
from snaplake.store.format.index_file import HASH_INDEX, IndexManifestEntry
from snaplake.store.format.manifest import FileKind
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.read.index_scan import IndexStorage, read_index_entries

__all__ = ["check_hash_replacements"]


def check_hash_replacements(
    table: IndexStorage, latest: Snapshot | None, changes: Sequence[IndexManifestEntry]
) -> None:
    """Refuse HASH index changes that replace a file other than the one they name.

    Args:
        table: The table's storage.
        latest: The snapshot the commit would publish on.
        changes: The commit's index ADD/DELETE entries (an overwrite's
            DELETEs of the replaced partitions included).

    Raises:
        CommitConflictError: a HASH DELETE names a file that is not the live
            one of its (partition, bucket), or a HASH ADD lands on a
            (partition, bucket) whose live file the commit does not DELETE.

    Storage: reads the index manifest of ``latest`` (cached), only when the
    commit changes HASH files.
    """
    hashes = [e for e in changes if e.index_file.index_type == HASH_INDEX]
    if not hashes:
        return
    live = {
        (e.partition, e.bucket): e.index_file.file_name
        for e in read_index_entries(
            table, latest, index_type=HASH_INDEX, partitions={e.partition for e in hashes}
        )
    }
    deleted = {
        (e.partition, e.bucket): e.index_file.file_name for e in hashes if e.kind == FileKind.DELETE
    }
    added = {(e.partition, e.bucket) for e in hashes if e.kind == FileKind.ADD}
    conflicts = {k for k, name in deleted.items() if live.get(k) != name}
    conflicts |= {k for k in added if k in live and k not in deleted}
    if conflicts:
        raise CommitConflictError(
            "a concurrent commit changed the HASH index of bucket(s) "
            f"{sorted({b for _, b in conflicts})} since this writer restored it, so a new key "
            "could land in two buckets; nothing was published: write these rows again with a "
            "new writer (it restores the new index)",
            paths=sorted(live[k] for k in conflicts if k in live),
            conflicting_snapshot_ids=[latest.id] if latest is not None else [],
        )
