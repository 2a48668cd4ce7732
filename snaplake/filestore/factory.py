"""The one place that picks a table's kind from its schema.

Source: Paimon ``FileStoreTableFactory.create``.
"""

from __future__ import annotations

from snaplake.filestore.append import AppendOnlyFileStore
from snaplake.filestore.base import FileStore
from snaplake.filestore.cross_partition import CrossPartitionFileStore
from snaplake.filestore.dynamic_bucket import DynamicBucketFileStore
from snaplake.filestore.key_value import KeyValueFileStore
from snaplake.filestore.postpone import PostponeBucketFileStore
from snaplake.store.format.paths import POSTPONE_BUCKET
from snaplake.store.format.schema import TableSchema
from snaplake.store.table_storage import TableStorage

__all__ = ["file_store_for"]


def file_store_for(table: TableStorage, schema: TableSchema) -> FileStore:
    """Return the FileStore of ``schema``'s kind: key-value with primary keys, else append.

    Primary-key tables with ``bucket = -2`` get the postpone-bucket variant. A
    primary-key table with ``bucket = -1`` whose key holds every partition
    key gets the dynamic-bucket variant (Paimon's ``HASH_DYNAMIC``); one whose
    key lacks a partition key the cross-partition variant (``KEY_DYNAMIC``).

    Args:
        table: The table's storage, paths, managers and identifier.
        schema: The schema the store works in.

    This is the one place outside the schema rules that looks at the primary key.

    Source: Paimon ``FileStoreTableFactory.create``.
    """
    if schema.primary_keys:
        if schema.core_options.bucket == POSTPONE_BUCKET:
            return PostponeBucketFileStore(table, schema)
        if schema.core_options.bucket != -1:
            return KeyValueFileStore(table, schema)
        if set(schema.partition_keys) <= set(schema.primary_keys):
            return DynamicBucketFileStore(table, schema)
        return CrossPartitionFileStore(table, schema)
    return AppendOnlyFileStore(table, schema)
