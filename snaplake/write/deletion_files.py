"""The deletion vectors of one (partition, bucket) of an append table: changed, then written back.

A delete (``Table.delete``) marks rows of data files deleted; a compaction
removes the vectors of the files it rewrote. Both hold a
:class:`DeletionFileMaintainer` per (partition, bucket): it starts from the
bucket's DELETION_VECTORS index files in the snapshot the operation planned on,
takes the changes, and :meth:`~DeletionFileMaintainer.persist` writes the new
index files and names the ones they replace (the commit message's new and
deleted index files):

- bucketed tables (``bucket > 0``): one file holds every vector of the bucket;
  it is rewritten whole and the old one deleted (Paimon combines such entries
  by (partition, bucket));
- bucket-unaware tables (``bucket = -1``): the index files holding a changed
  vector are deleted and their other vectors written again, with the changed
  ones, into new files rolled at ``deletion-vector.index-file.target-size``
  (Paimon combines these entries by file name).

Source: Paimon ``BaseAppendDeleteFileMaintainer``, ``AppendDeleteFileMaintainer``
(bucketed), ``UnawareAppendDeletionFileMaintainer`` (bucket-unaware),
``DeletionVectorIndexFileWriter`` (rolling at the target size).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy.typing as npt

from snaplake.store.format.deletion_vector import (
    DeletionVector,
    encode_deletion_vectors,
    read_deletion_vectors,
)
from snaplake.store.format.index_file import DELETION_VECTORS_INDEX, IndexFileMeta, index_path
from snaplake.store.format.paths import PathFactory
from snaplake.store.io.file_io import FileIO

__all__ = ["DeletionFileMaintainer", "delete_index_files"]


class DeletionFileMaintainer:
    """The vectors of one (partition, bucket), changed in memory, then persisted as new files.

    Args:
        file_io: Storage of the table.
        paths: Names new index files.
        index_files: The bucket's DELETION_VECTORS index files in the planned snapshot.
        live_files: Names of the bucket's live data files; vectors of other files
            (left behind by another engine) are dropped when their file is rewritten.
        bucketed: One file per bucket, rewritten whole (``bucket > 0``); else
            files rolled at ``target_size`` and replaced only where they changed.
        target_size: ``deletion-vector.index-file.target-size`` in bytes.
        bitmap64: New vectors are 64-bit (``deletion-vectors.bitmap64``).

    Raises:
        FileNotFoundError: an index file is missing.
        CorruptMetadataError: an index file is damaged (named).

    Storage: reads every file of ``index_files`` at construction.
    """

    def __init__(
        self,
        *,
        file_io: FileIO,
        paths: PathFactory,
        index_files: Sequence[IndexFileMeta],
        live_files: Collection[str],
        bucketed: bool,
        target_size: int,
        bitmap64: bool = False,
    ) -> None:
        self.file_io = file_io
        self.paths = paths
        self.index_files = tuple(f for f in index_files if f.index_type == DELETION_VECTORS_INDEX)
        self.bucketed = bucketed
        self.target_size = max(target_size, 1)
        self.bitmap64 = bitmap64
        self._live = frozenset(live_files)
        self._holder: dict[str, str] = {}
        self._vectors: dict[str, DeletionVector] = {}
        for meta in self.index_files:
            for name, vector in read_deletion_vectors(file_io, paths, meta).items():
                self._vectors[name] = vector
                self._holder[name] = meta.file_name
        self._changed: set[str] = set()

    def vector_of(self, data_file: str) -> DeletionVector | None:
        """The current vector of ``data_file`` (``None``: no row of it is deleted)."""
        return self._vectors.get(data_file)

    def vectors(self) -> dict[str, DeletionVector]:
        """Data file name → current vector, for every file of the bucket that has one."""
        return dict(self._vectors)

    def delete_positions(self, data_file: str, positions: npt.ArrayLike) -> int:
        """Mark rows ``positions`` (0-based ordinals) of ``data_file`` deleted.

        Returns:
            How many of them were not deleted before.

        Raises:
            UnsupportedTableError: a position past 2**31 - 1 in a 32-bit vector.
        """
        old = self._vectors.get(data_file)
        if old is None:
            new = DeletionVector.from_positions(positions, bitmap64=self.bitmap64)
        else:
            new = old.union(positions)
        added = new.cardinality - (old.cardinality if old is not None else 0)
        if added:
            self._vectors[data_file] = new
            self._changed.add(data_file)
        return added

    def remove(self, data_file: str) -> None:
        """Drop the vector of ``data_file`` (a compaction rewrote the file away)."""
        if self._vectors.pop(data_file, None) is not None:
            self._changed.add(data_file)

    def persist(self) -> tuple[tuple[IndexFileMeta, ...], tuple[IndexFileMeta, ...]]:
        """Write the changed vectors; return ``(new index files, replaced index files)``.

        Nothing changed: ``((), ())``. A bucket left with no vector gets no new file.

        Raises:
            StorageError: a write failed (the files written so far are deleted).

        Storage: creates ``<table>/index/index-<uuid>-<n>`` files (deleted again on a
        failure); deletes nothing else (the replaced files go with snapshot expiry).
        """
        if not self._changed:
            return (), ()
        if self.bucketed:
            replaced = self.index_files
            keep = {n: v for n, v in self._vectors.items() if n in self._live}
        else:
            touched = {self._holder[n] for n in self._changed if n in self._holder}
            replaced = tuple(f for f in self.index_files if f.file_name in touched)
            keep = {
                n: v
                for n, v in self._vectors.items()
                if n in self._live and (n in self._changed or self._holder.get(n) in touched)
            }
        written: list[IndexFileMeta] = []
        try:
            for group in self._roll(keep):
                data, ranges = encode_deletion_vectors(group)
                name = self.paths.new_index_file_name()
                self.file_io.write_output(self.paths.index_file_path(name), data)
                written.append(
                    IndexFileMeta(DELETION_VECTORS_INDEX, name, len(data), len(ranges), ranges)
                )
        except BaseException:
            delete_index_files(self.file_io, self.paths, written)
            raise
        return tuple(written), replaced

    def _roll(self, vectors: dict[str, DeletionVector]) -> list[dict[str, DeletionVector]]:
        """Group ``vectors`` into files: one (bucketed), or rolled at the target size."""
        if not vectors:
            return []
        if self.bucketed:
            return [vectors]
        groups: list[dict[str, DeletionVector]] = [{}]
        size = 1
        for name, vector in sorted(vectors.items()):
            blob = len(vector.serialize())
            if groups[-1] and size + blob > self.target_size:
                groups.append({})
                size = 1
            groups[-1][name] = vector
            size += blob
        return groups


def delete_index_files(file_io: FileIO, paths: PathFactory, files: Sequence[IndexFileMeta]) -> None:
    """Delete uncommitted index files ``files`` (missing ones are fine).

    Storage: deletes ``<table>/index/<name>`` of each.
    """
    if files:
        file_io.delete_many([index_path(paths, f) for f in files])
