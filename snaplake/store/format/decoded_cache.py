"""The process-wide cache of decoded manifest files and manifest lists.

Manifests and manifest lists are write-once with unique names, so their
decoded records can be shared by every reader in the process: an LRU bounded
by record count (:data:`metadata_cache`), keyed by ``(file_io, path)``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Final, Protocol, TypeVar

__all__ = ["DecodedCache", "cached_read", "metadata_cache", "read_records", "write_records"]

_T_co = TypeVar("_T_co", covariant=True)


class RecordDecoder(Protocol[_T_co]):
    """Decodes a whole metadata file: ``decode(data, path=path)`` returns its records."""

    def __call__(self, data: bytes, *, path: str) -> Sequence[_T_co]: ...


class DecodedCache:
    """A thread-safe LRU of decoded immutable metadata files, bounded by record count.

    Keys are ``(file_io, path)`` (``FileIO`` objects with value equality, such as
    ``LocalFileIO``, share entries); values are tuples of decoded records. Safe
    because manifests and manifest lists are write-once with unique names.

    Args:
        max_records: Upper bound on the sum of cached tuple lengths; the least
            recently used files are evicted beyond it. A file larger than the
            bound is not cached.
    """

    def __init__(self, *, max_records: int = 2_000_000) -> None:
        self._max_records = max_records
        self._records = 0
        self._data: OrderedDict[Hashable, tuple[Any, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def max_records(self) -> int:
        """The configured bound on cached records."""
        return self._max_records

    @property
    def record_count(self) -> int:
        """Records currently cached."""
        return self._records

    def get(self, key: Hashable) -> tuple[Any, ...] | None:
        """Return the cached tuple for ``key`` (marking it recently used), or ``None``."""
        with self._lock:
            value = self._data.get(key)
            if value is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Hashable, value: tuple[Any, ...]) -> None:
        """Insert ``value`` under ``key`` and evict least recently used files over the bound."""
        size = max(len(value), 1)
        if size > self._max_records:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._records -= max(len(old), 1)
            self._data[key] = value
            self._records += size
            while self._records > self._max_records:
                _, evicted = self._data.popitem(last=False)
                self._records -= max(len(evicted), 1)

    def resize(self, max_records: int) -> None:
        """Change the bound to ``max_records`` and evict least recently used files over it.

        Raises:
            ValueError: ``max_records`` is negative.
        """
        if max_records < 0:
            raise ValueError(f"max_records must be >= 0, got {max_records}")
        with self._lock:
            self._max_records = max_records
            while self._data and self._records > self._max_records:
                _, evicted = self._data.popitem(last=False)
                self._records -= max(len(evicted), 1)

    def invalidate(self, key: Hashable) -> None:
        """Drop ``key`` if cached."""
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._records -= max(len(old), 1)

    def clear(self) -> None:
        """Drop everything and reset the hit/miss counters."""
        with self._lock:
            self._data.clear()
            self._records = 0
            self.hits = 0
            self.misses = 0


metadata_cache: Final[DecodedCache] = DecodedCache(max_records=2_000_000)
"""The process-wide cache used by ``read_manifest_file`` and ``read_manifest_list``."""


def cached_read(
    file_io: Any,
    path: str,
    decode: Callable[[bytes], tuple[Any, ...]],
    *,
    use_cache: bool,
) -> tuple[Any, ...]:
    """Return decoded records of ``path``, from :data:`metadata_cache` when possible.

    Args:
        file_io: The ``FileIO`` to read with (part of the cache key).
        path: File path.
        decode: Turns the file bytes into a tuple of records.
        use_cache: ``False`` reads and decodes without touching the cache.

    Returns:
        The decoded records.

    Raises:
        FileNotFoundError: ``path`` does not exist (on a cache miss).
        CorruptMetadataError: From ``decode``.

    Storage:
        One ``read_bytes`` on a cache miss; nothing on a hit.
    """
    if not use_cache:
        return decode(file_io.read_bytes(path))
    key = (file_io, path)
    hit = metadata_cache.get(key)
    if hit is not None:
        return hit
    value = decode(file_io.read_bytes(path))
    metadata_cache.put(key, value)
    return value


def read_records(
    file_io: Any, path: str, decode: RecordDecoder[_T_co], *, use_cache: bool
) -> list[_T_co]:
    """Read and decode the manifest file or manifest list at ``path`` through :func:`cached_read`.

    Args:
        file_io: The ``FileIO`` to read with (part of the cache key).
        path: File path.
        decode: The file's decoder (``decode_manifest_file``, ``decode_manifest_list``).
        use_cache: Serve from (and fill) :data:`metadata_cache`; ``False`` always
            reads storage.

    Returns:
        A new list of the records in file order (the records themselves are shared).

    Raises:
        FileNotFoundError: ``path`` does not exist (on a cache miss).
        CorruptMetadataError: From ``decode``.
        UnsupportedFormatVersionError: From ``decode``.

    Storage:
        As :func:`cached_read`.
    """
    return list(
        cached_read(file_io, path, lambda data: tuple(decode(data, path=path)), use_cache=use_cache)
    )


def write_records(file_io: Any, path: str, data: bytes, records: Sequence[Any]) -> int:
    """Write the encoded file ``data`` as a new file at ``path`` and cache its ``records``.

    Args:
        file_io: Storage to write to (part of the cache key).
        path: Full path of the new manifest file or manifest list.
        data: The encoded file.
        records: The records ``data`` encodes, for :data:`metadata_cache`.

    Returns:
        Bytes written (the size to record for the file).

    Raises:
        FileAlreadyExistsError: ``path`` already exists; nothing is written.
        StorageError: The backend failed; retrying may help.

    Storage:
        Creates ``path`` with ``write_new``; deletes nothing. On success the
        records are also placed in :data:`metadata_cache`.
    """
    file_io.write_new(path, data)
    metadata_cache.put((file_io, path), tuple(records))
    return len(data)
