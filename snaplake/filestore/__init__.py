"""One object per table kind: what differs between append and key-value tables.

:func:`file_store_for` chooses the kind once, from the schema;
:class:`~snaplake.filestore.base.FileStore` is what the facade, Spark, the
daemon, the CLI and inline maintenance ask (writer, split reader, scan file
selection, compaction, conflict rules, writer-state restore, supported
options). A new table mode is a new variant or an option inside one kind's
module, never a branch in those callers.

Source: Paimon ``FileStore``, ``AppendOnlyFileStore``, ``KeyValueFileStore``
(``DynamicBucketFileStore``: its ``HASH_DYNAMIC`` mode;
``CrossPartitionFileStore``: ``KEY_DYNAMIC``).
"""

from snaplake.filestore.append import AppendOnlyFileStore
from snaplake.filestore.base import FileStore
from snaplake.filestore.cross_partition import CrossPartitionFileStore
from snaplake.filestore.dynamic_bucket import DynamicBucketFileStore
from snaplake.filestore.factory import file_store_for
from snaplake.filestore.key_value import KeyValueFileStore
from snaplake.filestore.postpone import PostponeBucketFileStore

__all__ = [
    "AppendOnlyFileStore",
    "CrossPartitionFileStore",
    "DynamicBucketFileStore",
    "FileStore",
    "KeyValueFileStore",
    "PostponeBucketFileStore",
    "file_store_for",
]
