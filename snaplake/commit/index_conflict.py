"""HASH index replacement check: a commit replaces only the HASH files its writer read.

(A bucket's DELETION_VECTORS file is checked by
:class:`~snaplake.commit.dv_conflict.DeletionVectorRule`.)

A dynamic-bucket writer names, for each bucket whose key hashes grew, the
HASH file it restored (or last wrote) in ``deleted_index_files`` (the new
file itself when the bucket had none) and the new complete file in
``new_index_files``. When another commit changed that bucket's HASH file
since (or created the bucket), the two writers may have given one new key
two buckets: the later commit is refused before it publishes, and its
writer writes the rows again after restoring the new index. Without this
check (Paimon's: concurrent HASH replacements are last-writer-wins) the
hashes of the first writer would be lost and its keys could be assigned
again elsewhere. Messages naming no replaced file (Paimon's) are not checked.

Two writers that add new keys to one partition from the same restored
state always change the partition's first non-full bucket (or create the
same new bucket), so they always meet here; a capped partition puts a key
into a bucket seeded by its hash, the same in both writers.

Source: snaplake's own rule (issue 20 item 2); the conflict model is Paimon
``ConflictDetection``'s "deleted files must be live".
"""

from __future__ import annotations

from collections.abc import Sequence

from snaplake.errors import HashIndexConflictError
from snaplake.store.format.index_file import HASH_INDEX, IndexManifestEntry
from snaplake.store.format.manifest import FileKind
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.read.index_scan import IndexStorage, read_index_entries

__all__ = ["check_hash_replacements"]


def check_hash_replacements(
    table: IndexStorage,
    latest: Snapshot | None,
    changes: Sequence[IndexManifestEntry],
    kept: Sequence[tuple[bytes, int, str]] = (),
) -> None:
    """Refuse HASH index changes that replace a file other than the one they name.

    A HASH DELETE names the file its writer restored for the (partition,
    bucket); when it names the file the commit ADDs for that bucket, the
    writer found no file there. Either must still hold in ``latest``. ADDs
    that name no replaced file (Paimon's messages) are not checked.

    Args:
        table: The table's storage.
        latest: The snapshot the commit would publish on.
        changes: The commit's write-side index ADD/DELETE entries (an
            overwrite's DELETEs of the replaced partitions included).
        kept: ``(partition, bucket, HASH file name)`` a writer relied on for
            a bucket it wrote known keys into without changing its HASH file
            (``DataIncrement.kept_index_files``): each must still be live
            (an overwrite or another writer replaced it otherwise, and the
            keys may now live in another bucket).

    Raises:
        HashIndexConflictError: a named file is not the live one of its
            (partition, bucket), or a bucket expected without a file has one.

    Storage: reads the index manifest of ``latest`` (cached), only when the
    commit names replaced HASH files.
    """
    hashes = [e for e in changes if e.index_file.index_type == HASH_INDEX]
    added = {
        (e.partition, e.bucket, e.index_file.file_name) for e in hashes if e.kind == FileKind.ADD
    }
    named = {
        (e.partition, e.bucket): e.index_file.file_name for e in hashes if e.kind == FileKind.DELETE
    }
    if not named and not kept:
        return
    live = {
        (e.partition, e.bucket): e.index_file.file_name
        for e in read_index_entries(
            table,
            latest,
            index_type=HASH_INDEX,
            partitions={p for p, _ in named} | {p for p, _, _ in kept},
        )
    }
    conflicts = {
        (p, b)
        for (p, b), name in named.items()
        if live.get((p, b)) != (None if (p, b, name) in added else name)
    }
    conflicts |= {(p, b) for p, b, name in kept if live.get((p, b)) != name}
    if conflicts:
        raise HashIndexConflictError(
            "a concurrent commit changed the HASH index of bucket(s) "
            f"{sorted({b for _, b in conflicts})} since this writer restored it, so a new key "
            "could land in two buckets; nothing was published: write these rows again with a "
            "new writer (it restores the new index)",
            paths=sorted(live[k] for k in conflicts if k in live),
            conflicting_snapshot_ids=[latest.id] if latest is not None else [],
        )
