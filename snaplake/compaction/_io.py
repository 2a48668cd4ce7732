"""Helpers shared by the maintenance operations: strict metadata reads and batched deletes.

Maintenance must never act on a partial view of the table: every metadata read
here either returns the full content or raises :class:`CorruptMetadataError`
naming the file (a missing file included), so a caller can stop before it
deletes anything. Deletions run in parallel batches through
``FileIO.delete_many`` (one ``DeleteObjects`` call per 1,000 keys on S3).

Imports: ``snaplake.errors`` and ``snaplake.store`` only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from snaplake.errors import CorruptMetadataError
from snaplake.store.format.index_file import IndexManifestEntry, read_index_manifest
from snaplake.store.format.manifest import ManifestEntry, read_manifest_file
from snaplake.store.format.manifest_list import ManifestFileMeta, read_manifest_list
from snaplake.store.format.paths import PathFactory
from snaplake.store.io.file_io import FileIO

__all__ = [
    "delete_in_batches",
    "parallel_map",
    "read_entries_strict",
    "read_index_strict",
    "read_list_strict",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

DELETE_BATCH = 1000
"""Paths per ``delete_many`` call (the S3 ``DeleteObjects`` limit)."""

_MAX_WORKERS = 8


def parallel_map(
    fn: Callable[[T], R], items: Sequence[T], *, workers: int = _MAX_WORKERS
) -> list[R]:
    """Apply ``fn`` to ``items`` on a thread pool; results in input order; first error raised."""
    if len(items) <= 2:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(fn, items))


def _read_strict(
    read: Callable[[FileIO, str], list[T]],
    what: str,
    file_io: FileIO,
    paths: PathFactory,
    name: str,
) -> list[T]:
    """Read ``manifest/<name>`` with ``read``; a missing file is corruption named ``what``."""
    path = paths.manifest_path(name)
    try:
        return read(file_io, path)
    except FileNotFoundError as exc:
        raise CorruptMetadataError(
            f"{what} {path} is missing but a snapshot or tag references it; "
            "nothing was deleted — restore the file or drop the referencing snapshot",
            path=path,
        ) from exc


def read_list_strict(file_io: FileIO, paths: PathFactory, name: str) -> list[ManifestFileMeta]:
    """Read manifest list ``name`` from ``manifest/``.

    Raises:
        CorruptMetadataError: the file is missing or undecodable (``.path`` names it).
    """
    return _read_strict(read_manifest_list, "manifest list", file_io, paths, name)


def read_entries_strict(file_io: FileIO, paths: PathFactory, name: str) -> list[ManifestEntry]:
    """Read manifest ``name`` from ``manifest/``.

    Raises:
        CorruptMetadataError: the file is missing or undecodable (``.path`` names it).
    """
    return _read_strict(read_manifest_file, "manifest", file_io, paths, name)


def read_index_strict(file_io: FileIO, paths: PathFactory, name: str) -> list[IndexManifestEntry]:
    """Read index manifest ``name`` from ``manifest/``.

    Raises:
        CorruptMetadataError: the file is missing or undecodable (``.path`` names it).
    """
    return _read_strict(
        lambda fio, path: read_index_manifest(fio, paths, name), "index manifest", file_io,
        paths, name,
    )  # fmt: skip


def delete_in_batches(file_io: FileIO, targets: Iterable[str], *, workers: int = 4) -> int:
    """Delete ``targets`` (missing ones are fine) in parallel batches; return how many were given.

    Raises:
        StorageError: a batch failed; some files of other batches may be gone.

    Storage:
        Deletes exactly ``targets``.
    """
    unique = list(dict.fromkeys(targets))
    batches = [unique[i : i + DELETE_BATCH] for i in range(0, len(unique), DELETE_BATCH)]
    # Small batches on a local disk: split further so the pool has work to share.
    if len(batches) == 1 and len(unique) > 64:
        step = max(16, len(unique) // workers)
        batches = [unique[i : i + step] for i in range(0, len(unique), step)]
    parallel_map(file_io.delete_many, batches, workers=workers)
    logger.debug("deleted %d file(s)", len(unique))
    return len(unique)
