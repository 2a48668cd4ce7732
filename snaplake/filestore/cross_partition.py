"""CrossPartitionFileStore: ``bucket = -1`` with a primary key lacking a partition key.

The key-value kind whose writer keeps every live key's (partition, bucket)
(:class:`~snaplake.write.cross_partition.CrossPartitionIndex`), bootstrapped
from the latest snapshot at the first write, so an upsert whose key lives in
another partition retracts it there (deduplicate) or is dropped (first-row).
Buckets within a partition are dynamic (filled to
``dynamic-bucket.target-row-num`` keys); no HASH index files are written and
manifest entries say ``_TOTAL_BUCKETS = -1``. Reads, compaction and conflicts
are the key-value kind's.

Source: Paimon ``KeyValueFileStore`` in ``KEY_DYNAMIC`` mode
(``GlobalIndexAssigner``, ``IndexBootstrap``).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from snaplake.filestore.key_value import KeyValueFileStore
from snaplake.mergetree.read import read_primary_key_splits
from snaplake.options.registry import CROSS_PARTITION_UPSERT_BOOTSTRAP_PARALLELISM
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

    def new_bucket_index(self) -> CrossPartitionIndex:
        """A writer's :class:`~snaplake.write.cross_partition.CrossPartitionIndex`.

        Its key map is bootstrapped at the first write from the latest
        snapshot then (:meth:`bootstrap_keys`).
        """
        return CrossPartitionIndex(schema=self.schema, bootstrap=self.bootstrap_keys)

    def bootstrap_keys(self) -> Iterator[tuple[bytes, int, pa.Table]]:
        """``(partition, bucket, primary-key columns of its live rows)`` of the latest snapshot.

        Each bucket's files are merged (a deleted key is not live) and only the
        key columns are returned; ``cross-partition-upsert.bootstrap-parallelism``
        buckets are read at a time.

        Raises:
            CorruptMetadataError: a manifest or data file of the snapshot is missing (named).
            MergeFunctionError: the merge engine rejects a key's versions.

        Storage: reads the snapshot's manifests and data files.

        Source: Paimon ``IndexBootstrap.bootstrap``.
        """
        table = self.table
        latest = table.snapshot_manager.latest_snapshot()
        if latest is None:
            return
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
