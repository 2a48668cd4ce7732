"""CrossPartitionFileStore: ``bucket = -1`` with a primary key lacking a partition key.

The key-value kind whose writer keeps every live key's (partition, bucket)
(:class:`~snaplake.write.cross_partition.CrossPartitionIndex`), bootstrapped
from the latest snapshot at the first write, so an upsert whose key lives in
another partition retracts it there (deduplicate) or is dropped (first-row).
Buckets within a partition are dynamic (filled to
``dynamic-bucket.target-row-num`` keys); no HASH index files are written and
manifest entries say ``_TOTAL_BUCKETS = -1``. Reads, compaction and conflicts
are the key-value kind's, plus the key-race check of concurrent writers:
each message names the snapshot its writer's key map was exact at, and a
commit writing a key another writer wrote since is refused with the
retryable ``CrossPartitionConflictError``
(:func:`~snaplake.commit.key_conflict.check_key_races`; snaplake's own,
Paimon allows one writer job per table and does not check).

Source: Paimon ``KeyValueFileStore`` in ``KEY_DYNAMIC`` mode
(``GlobalIndexAssigner``, ``IndexBootstrap``).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from snaplake.commit.key_conflict import last_exact_snapshot
from snaplake.filestore.key_value import KeyValueFileStore
from snaplake.mergetree.read import read_primary_key_splits
from snaplake.options.registry import CROSS_PARTITION_UPSERT_BOOTSTRAP_PARALLELISM
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.read.missing_files import MissingFileCheck
from snaplake.store.read.scan import Split
from snaplake.write.cross_partition import CrossPartitionIndex

__all__ = ["CrossPartitionFileStore"]


class CrossPartitionFileStore(KeyValueFileStore):
    """The key-value kind with cross-partition upserts (Paimon's ``KEY_DYNAMIC``).

    Source: Paimon ``KeyValueFileStore`` (``BucketMode.KEY_DYNAMIC``).
    """

    @property
    def bucket_mode(self) -> str:
        """``"cross-partition"``."""
        return "cross-partition"

    def new_bucket_index(self, commit_user: str) -> CrossPartitionIndex:
        """A writer's :class:`~snaplake.write.cross_partition.CrossPartitionIndex`.

        Its key map is bootstrapped at the first write from the latest
        snapshot then (:meth:`bootstrap_keys`); at each later round of writes
        it follows ``commit_user``'s own commits
        (:func:`~snaplake.commit.key_conflict.last_exact_snapshot`).
        """
        table = self.table
        return CrossPartitionIndex(
            schema=self.schema, bootstrap=self.bootstrap_keys,
            advance=lambda base: last_exact_snapshot(table, base, commit_user),
        )  # fmt: skip

    def bootstrap_keys(self) -> tuple[int, Iterator[tuple[bytes, int, pa.Table]]]:
        """The latest snapshot's id (0 = none) and its ``(partition, bucket, live key columns)``.

        Each bucket's files are merged (a deleted key is not live) and only the
        key columns are returned; ``cross-partition-upsert.bootstrap-parallelism``
        buckets are read at a time, as the iterator is consumed.

        Raises (from the iterator):
            CorruptMetadataError: a manifest or data file of the snapshot is missing (named).
            MergeFunctionError: the merge engine rejects a key's versions.

        Storage: reads the snapshot's manifests and data files.

        Source: Paimon ``IndexBootstrap.bootstrap``.
        """
        latest = self.table.snapshot_manager.latest_snapshot()
        if latest is None:
            return 0, iter(())
        return latest.id, self._bucket_keys(latest)

    def _bucket_keys(self, latest: Snapshot) -> Iterator[tuple[bytes, int, pa.Table]]:
        table = self.table
        opts = self.schema.core_options
        threads = opts.get(CROSS_PARTITION_UPSERT_BOOTSTRAP_PARALLELISM) or 1
        key = list(self.schema.primary_keys)
        schema_of = table.schema_manager.schema

        def one(split: Split) -> tuple[bytes, int, pa.Table]:
            rows = read_primary_key_splits(
                self.file_io, [split], schema=self.schema, columns=key, schema_of=schema_of
            )
            return split.partition, split.bucket, rows

        with MissingFileCheck(
            file_io=table.file_io, paths=table.paths,
            schema_manager=table.schema_manager, snapshot=latest,
        ).reading():  # fmt: skip
            splits = self.new_scan(latest).plan()
            with ThreadPoolExecutor(max_workers=max(1, min(threads, len(splits)))) as pool:
                yield from pool.map(one, splits)
