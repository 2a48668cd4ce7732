"""HASH index files: the key hashes of one (partition, bucket) of a dynamic-bucket table.

A HASH file (``<table>/index/index-<uuid>-<n>``) is a bare sequence of 4-byte
big-endian signed ints, one per distinct key hash (``BinaryRow.hashCode()`` of
the trimmed primary key) stored in the bucket: no header, count, footer or
checksum, and no order.

Source: Paimon ``HashIndexFile`` / ``IntFileUtils`` (docs ``concepts/spec/tableindex.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from snaplake.errors import CorruptMetadataError
from snaplake.store.format.index_file import HASH_INDEX, IndexFileMeta, index_path

if TYPE_CHECKING:
    from snaplake.store.format.paths import PathFactory
    from snaplake.store.io.file_io import FileIO

__all__ = ["read_hash_index", "write_hash_index"]

_BIG_ENDIAN_INT32 = np.dtype(">i4")


def write_hash_index(
    file_io: FileIO, paths: PathFactory, hashes: npt.NDArray[np.int32]
) -> IndexFileMeta:
    """Write ``hashes`` as a new HASH file and describe it.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory (names the file).
        hashes: The bucket's distinct key hashes (any int32-valued array; written
            as given, in order).

    Returns:
        ``IndexFileMeta(HASH, name, 4 * len(hashes), len(hashes))``.

    Raises:
        StorageError: The write failed.

    Storage: creates ``<table>/index/index-<uuid>-<n>`` (``write_output``); the commit
    that publishes it makes it durable.

    Source: Paimon ``HashIndexFile.write``.
    """
    data = np.asarray(hashes, dtype=np.int32).astype(_BIG_ENDIAN_INT32).tobytes()
    name = paths.new_index_file_name()
    file_io.write_output(paths.index_file_path(name), data)
    return IndexFileMeta(HASH_INDEX, name, len(data), len(data) // 4)


def read_hash_index(
    file_io: FileIO, paths: PathFactory, meta: IndexFileMeta
) -> npt.NDArray[np.int32]:
    """Read the hashes of the HASH file ``meta``.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        meta: A HASH index file of the table.

    Returns:
        The int32 hashes in file order (native byte order).

    Raises:
        FileNotFoundError: The file is missing.
        CorruptMetadataError: The size is not a multiple of 4, or ``meta`` is not HASH.

    Storage: one ``read_bytes``.

    Source: Paimon ``HashIndexFile.read`` / ``IntFileUtils.readInts``.
    """
    path = index_path(paths, meta)
    if meta.index_type != HASH_INDEX:
        raise CorruptMetadataError(f"{path}: index type {meta.index_type!r} is not HASH", path=path)
    data = file_io.read_bytes(path)
    if len(data) % 4:
        raise CorruptMetadataError(
            f"{path}: HASH index of {len(data)} bytes is not a whole number of int32s", path=path
        )
    return np.frombuffer(data, dtype=_BIG_ENDIAN_INT32).astype(np.int32)
