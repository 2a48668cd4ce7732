"""Deletion vectors: the deleted row positions of data files, and the files that hold them.

A deletion vector (DV) marks rows of one data file as deleted by their 0-based
ordinal in that file. A DELETION_VECTORS index file (``<table>/index/index-<uuid>-<n>``)
holds the vectors of many data files back to back:

- byte 0: the format version, ``1``;
- then one blob per data file. A **32-bit blob** (the default) is
  ``int32 BE L | int32 BE magic 1581511376 | portable RoaringBitmap | int32 BE CRC32``,
  where ``L`` counts the magic and the bitmap and the CRC covers the same ``L`` bytes;
  its range in the index manifest is ``(offset of L, L)``. A **64-bit blob**
  (``deletion-vectors.bitmap64``) stores its magic ``1681511377`` little-endian and a
  64-bit portable bitmap (LE: an int64 count, then per high 32-bit key an int32 key and a
  portable 32-bit bitmap); its range length is ``L + 8``, the whole blob.

Readers pick the width by magic, check ``L`` against the range and check the CRC
(Paimon 0.8 did; later versions skip it), so a damaged file is a
:class:`~snaplake.errors.CorruptMetadataError` naming it, never wrong rows.

Source: Paimon ``DeletionVector``, ``BitmapDeletionVector``,
``Bitmap64DeletionVector``, ``DeletionFileWriter``, ``DeletionVectorsIndexFile``
(docs ``concepts/spec/tableindex.md``); the portable Roaring format of
RoaringBitmap/CRoaring (``pyroaring``).
"""

from __future__ import annotations

import array
import struct
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap, BitMap64

from snaplake.errors import CorruptMetadataError, UnsupportedTableError
from snaplake.store.format.index_file import (
    DELETION_VECTORS_INDEX,
    DeletionVectorMeta,
    IndexFileMeta,
    index_path,
)

if TYPE_CHECKING:
    from snaplake.store.format.paths import PathFactory
    from snaplake.store.io.file_io import FileIO

__all__ = [
    "BITMAP32_MAGIC",
    "BITMAP64_MAGIC",
    "DELETION_VECTORS_FILE_VERSION",
    "DeletionVector",
    "decode_deletion_vectors",
    "encode_deletion_vectors",
    "read_deletion_vectors",
    "write_deletion_vectors_index",
]

DELETION_VECTORS_FILE_VERSION: Final[int] = 1
"""Byte 0 of every DELETION_VECTORS file (``DeletionVectorsIndexFile.VERSION_ID_V1``)."""

BITMAP32_MAGIC: Final[int] = 1581511376
"""Magic of a 32-bit vector, stored big-endian (``BitmapDeletionVector.MAGIC_NUMBER``)."""

BITMAP64_MAGIC: Final[int] = 1681511377
"""Magic of a 64-bit vector, stored little-endian (``Bitmap64DeletionVector.MAGIC_NUMBER``)."""

_MAX_POSITION_32: Final[int] = 2**31 - 1  # Java's RoaringBitmap positions are int
_MAGIC32_BYTES: Final[bytes] = struct.pack(">i", BITMAP32_MAGIC)
_MAGIC64_BYTES: Final[bytes] = struct.pack("<i", BITMAP64_MAGIC)


class DeletionVector:
    """The deleted row positions of one data file; immutable.

    Args:
        bitmap: The positions (0-based row ordinals): a ``pyroaring`` ``BitMap`` (32-bit)
            or ``BitMap64``; the vector keeps it and never changes it.

    Source: Paimon ``BitmapDeletionVector`` / ``Bitmap64DeletionVector``.
    """

    __slots__ = ("_bitmap",)

    def __init__(self, bitmap: BitMap | BitMap64) -> None:
        self._bitmap = bitmap

    @classmethod
    def from_positions(cls, positions: npt.ArrayLike, *, bitmap64: bool = False) -> DeletionVector:
        """A vector of ``positions`` (any integer array-like, any order, repeats allowed).

        Raises:
            ValueError: A position is negative.
            UnsupportedTableError: A position is above 2**31 - 1 in a 32-bit vector
                (set ``deletion-vectors.bitmap64``).
        """
        pos = np.asarray(positions, dtype=np.int64).ravel()
        if pos.size and int(pos.min()) < 0:
            raise ValueError(f"a deletion vector position is negative: {pos.min()}")
        if bitmap64:
            bits = array.array("Q")
            bits.frombytes(pos.astype(np.uint64).tobytes())
            return cls(BitMap64(bits))
        if pos.size and int(pos.max()) > _MAX_POSITION_32:
            raise UnsupportedTableError(
                f"row position {int(pos.max())} does not fit a 32-bit deletion vector; "
                "set deletion-vectors.bitmap64 = true for files of more than 2**31 rows",
                feature="a 32-bit deletion vector past row 2**31 - 1",
                operation="write",
                key="deletion-vectors.bitmap64",
            )
        bits = array.array("I")
        bits.frombytes(pos.astype(np.uint32).tobytes())
        return cls(BitMap(bits))

    @property
    def bitmap64(self) -> bool:
        """Whether this is a 64-bit vector."""
        return isinstance(self._bitmap, BitMap64)

    @property
    def cardinality(self) -> int:
        """Number of deleted rows."""
        return len(self._bitmap)

    def is_empty(self) -> bool:
        """Whether no row is deleted."""
        return not self._bitmap

    def is_deleted(self, position: int) -> bool:
        """Whether row ``position`` is deleted."""
        return position in self._bitmap

    def positions(self) -> npt.NDArray[np.int64]:
        """The deleted positions, ascending, as int64."""
        dtype = np.uint64 if self.bitmap64 else np.uint32
        return np.frombuffer(self._bitmap.to_array(), dtype=dtype).astype(np.int64)

    def keep_mask(self, num_rows: int, *, start: int = 0) -> npt.NDArray[np.bool_]:
        """Boolean mask of the rows ``start .. start + num_rows - 1`` that are kept.

        ``mask[i]`` is False when row ``start + i`` is deleted. Vectorised: one pass over
        the positions in range, no per-row Python loop.
        """
        mask = np.ones(num_rows, dtype=np.bool_)
        pos = self.positions()
        lo, hi = np.searchsorted(pos, [start, start + num_rows])
        mask[pos[lo:hi] - start] = False
        return mask

    def union(self, positions: npt.ArrayLike) -> DeletionVector:
        """A new vector holding this vector's positions and ``positions``.

        Raises:
            UnsupportedTableError: As :meth:`from_positions`.
        """
        merged = self._bitmap.copy()
        merged.update(DeletionVector.from_positions(positions, bitmap64=self.bitmap64)._bitmap)
        return DeletionVector(merged)

    def serialize(self) -> bytes:
        """The vector's blob as it sits in a DELETION_VECTORS file (``L`` to CRC)."""
        bitmap = self._bitmap.copy()
        bitmap.run_optimize()
        body = (_MAGIC64_BYTES if self.bitmap64 else _MAGIC32_BYTES) + bitmap.serialize()
        return struct.pack(">i", len(body)) + body + struct.pack(">I", zlib.crc32(body))

    def range_length(self, blob: bytes) -> int:
        """The index manifest's ``length`` of ``blob`` (:meth:`serialize`'s output)."""
        return len(blob) if self.bitmap64 else len(blob) - 8

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeletionVector):
            return NotImplemented
        return self.bitmap64 == other.bitmap64 and self._bitmap == other._bitmap

    def __hash__(self) -> int:
        return hash((self.bitmap64, self.cardinality))

    def __repr__(self) -> str:
        width = 64 if self.bitmap64 else 32
        return f"DeletionVector({width}-bit, {self.cardinality} deleted)"

    @classmethod
    def deserialize(
        cls, data: bytes | memoryview, dv: DeletionVectorMeta, *, path: str
    ) -> DeletionVector:
        """Read the vector of ``dv`` out of ``data``, the whole DELETION_VECTORS file.

        Raises:
            CorruptMetadataError: The range lies outside the file, the magic is unknown,
                ``L`` disagrees with the range, the CRC fails or the bitmap is malformed
                (the message names ``path`` and the data file).
        """
        where = f"{path}: deletion vector of {dv.data_file_name}"
        start = dv.offset
        if start < 1 or start + 8 > len(data):
            raise CorruptMetadataError(
                f"{where} at offset {start} lies outside the file of {len(data)} bytes", path=path
            )
        (body_len,) = struct.unpack_from(">i", data, start)
        magic = bytes(data[start + 4 : start + 8])
        if magic == _MAGIC32_BYTES:
            expected, bitmap64 = body_len, False
        elif magic == _MAGIC64_BYTES:
            expected, bitmap64 = body_len + 8, True
        else:
            raise CorruptMetadataError(f"{where} has unknown magic {magic.hex()}", path=path)
        end = start + 4 + body_len + 4
        if dv.length != expected or body_len < 4 or end > len(data):
            raise CorruptMetadataError(
                f"{where}: blob length {body_len} disagrees with the index manifest's range "
                f"(offset {start}, length {dv.length}) or the file size {len(data)}",
                path=path,
            )
        body = bytes(data[start + 4 : start + 4 + body_len])
        (crc,) = struct.unpack_from(">I", data, start + 4 + body_len)
        if zlib.crc32(body) != crc:
            raise CorruptMetadataError(f"{where} fails its CRC32 check", path=path)
        try:
            bitmap: BitMap | BitMap64 = (BitMap64 if bitmap64 else BitMap).deserialize(body[4:])
        except (ValueError, OverflowError) as exc:
            raise CorruptMetadataError(
                f"{where} holds a malformed bitmap: {exc}", path=path
            ) from exc
        vector = cls(bitmap)
        if dv.cardinality is not None and dv.cardinality != vector.cardinality:
            raise CorruptMetadataError(
                f"{where} holds {vector.cardinality} positions; the index manifest says "
                f"{dv.cardinality}",
                path=path,
            )
        return vector


def encode_deletion_vectors(
    vectors: Mapping[str, DeletionVector],
) -> tuple[bytes, tuple[DeletionVectorMeta, ...]]:
    """Encode a DELETION_VECTORS file holding ``vectors`` (data file name → vector).

    Empty vectors are left out. With no vector left the file is the version byte alone
    (what Paimon writes when a bucket's last vector goes away).

    Returns:
        ``(file bytes, ranges)``, one :class:`DeletionVectorMeta` per vector written, in
        ``vectors``' order, with its cardinality.

    Source: Paimon ``DeletionFileWriter`` / ``DeletionVectorsIndexFile.writeSingleFile``.
    """
    parts = [bytes([DELETION_VECTORS_FILE_VERSION])]
    ranges: list[DeletionVectorMeta] = []
    offset = 1
    for name, vector in vectors.items():
        if vector.is_empty():
            continue
        blob = vector.serialize()
        ranges.append(
            DeletionVectorMeta(name, offset, vector.range_length(blob), vector.cardinality)
        )
        parts.append(blob)
        offset += len(blob)
    return b"".join(parts), tuple(ranges)


def decode_deletion_vectors(
    data: bytes, ranges: tuple[DeletionVectorMeta, ...], *, path: str
) -> dict[str, DeletionVector]:
    """Decode the vectors ``ranges`` names out of ``data``, a whole DELETION_VECTORS file.

    Raises:
        CorruptMetadataError: The file is empty or of an unknown version, or a vector is
            damaged (:meth:`DeletionVector.deserialize`).
    """
    if not data:
        raise CorruptMetadataError(f"{path}: empty deletion vectors file", path=path)
    if data[0] != DELETION_VECTORS_FILE_VERSION:
        raise CorruptMetadataError(
            f"{path}: deletion vectors file version {data[0]}; this reader knows "
            f"{DELETION_VECTORS_FILE_VERSION}",
            path=path,
        )
    view = memoryview(data)
    return {dv.data_file_name: DeletionVector.deserialize(view, dv, path=path) for dv in ranges}


def write_deletion_vectors_index(
    file_io: FileIO, paths: PathFactory, vectors: Mapping[str, DeletionVector]
) -> IndexFileMeta:
    """Write ``vectors`` (data file name → vector) as one new DELETION_VECTORS file.

    Returns:
        ``IndexFileMeta(DELETION_VECTORS, name, size, number of vectors, ranges)``.

    Raises:
        StorageError: The write failed.

    Storage: creates ``<table>/index/index-<uuid>-<n>`` (``write_output``); the commit
    that publishes it makes it durable.

    Source: Paimon ``DeletionVectorsIndexFile.writeSingleFile``.
    """
    data, ranges = encode_deletion_vectors(vectors)
    name = paths.new_index_file_name()
    file_io.write_output(paths.index_file_path(name), data)
    return IndexFileMeta(DELETION_VECTORS_INDEX, name, len(data), len(ranges), ranges)


def read_deletion_vectors(
    file_io: FileIO, paths: PathFactory, meta: IndexFileMeta
) -> dict[str, DeletionVector]:
    """Read every vector of the DELETION_VECTORS file ``meta`` (data file name → vector).

    Raises:
        FileNotFoundError: The file is missing.
        CorruptMetadataError: ``meta`` is not a DELETION_VECTORS file, or the file is
            damaged (:func:`decode_deletion_vectors`).

    Storage: one ``read_bytes``.

    Source: Paimon ``DeletionVectorsIndexFile.readAllDeletionVectors``.
    """
    path = index_path(paths, meta)
    if meta.index_type != DELETION_VECTORS_INDEX:
        raise CorruptMetadataError(
            f"{path}: index type {meta.index_type!r} is not {DELETION_VECTORS_INDEX}", path=path
        )
    return decode_deletion_vectors(file_io.read_bytes(path), meta.dv_ranges or (), path=path)
