"""DynamicBucketFileStore: primary-key tables with ``bucket = -1`` (Paimon's default mode).

The key-value kind whose writer assigns each new key a bucket (filling each
bucket to ``dynamic-bucket.target-row-num`` keys) instead of hashing it into
a fixed count, and keeps every bucket's HASH index file (the key hashes it
holds) so the next writer, or another engine's, sends a known key to the same
bucket. Reads, compaction and conflicts are the key-value kind's: the buckets
are ordinary buckets whose manifest entries say ``_TOTAL_BUCKETS = -1``.

Source: Paimon ``KeyValueFileStore`` in ``HASH_DYNAMIC`` mode
(``HashBucketAssigner``, ``DynamicBucketIndexMaintainer``).
"""

from __future__ import annotations

import threading

import numpy as np
import numpy.typing as npt

from snaplake.filestore.key_value import KeyValueFileStore
from snaplake.store.format.hash_index import read_hash_index
from snaplake.store.format.index_file import HASH_INDEX, IndexFileMeta
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.read.index_scan import read_index_entries
from snaplake.write.bucket_assigner import DynamicBucketIndex

__all__ = ["DynamicBucketFileStore"]


class DynamicBucketFileStore(KeyValueFileStore):
    """The key-value kind with dynamic buckets (``bucket = -1``, key holding every partition key).

    Source: Paimon ``KeyValueFileStore`` (``BucketMode.HASH_DYNAMIC``).
    """

    @property
    def bucket_mode(self) -> str:
        """``"dynamic"``."""
        return "dynamic"

    def new_bucket_index(self, commit_user: str) -> DynamicBucketIndex:
        """A writer's :class:`~snaplake.write.bucket_assigner.DynamicBucketIndex`.

        Each partition's HASH index is read at the partition's first write,
        from the latest snapshot when the writer first needs one (all
        partitions of a writer restore from that one snapshot).
        """
        return DynamicBucketIndex(
            file_io=self.file_io, paths=self.paths, schema=self.schema,
            load=_HashIndexRestore(self).load,
        )  # fmt: skip


class _HashIndexRestore:
    """Reads partitions' HASH files from one snapshot: the latest when first asked."""

    def __init__(self, store: DynamicBucketFileStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._resolved = False

    def snapshot(self) -> Snapshot | None:
        """The snapshot the writer restores from (resolved at the first call)."""
        with self._lock:
            if not self._resolved:
                self._snapshot = self._store.table.snapshot_manager.latest_snapshot()
                self._resolved = True
            return self._snapshot

    def load(self, partition: bytes) -> dict[int, tuple[IndexFileMeta, npt.NDArray[np.int32]]]:
        """``{bucket: (HASH file, key hashes)}`` of ``partition`` in :meth:`snapshot`.

        Raises:
            FileNotFoundError: the index manifest or a HASH file is missing.
            CorruptMetadataError: one of them is malformed.

        Storage: reads the index manifest (cached) and the partition's HASH files.
        """
        store = self._store
        entries = read_index_entries(
            store.table, self.snapshot(), index_type=HASH_INDEX, partitions=[partition]
        )
        return {
            e.bucket: (e.index_file, read_hash_index(store.file_io, store.paths, e.index_file))
            for e in entries
        }
