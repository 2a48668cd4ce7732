"""Avro block codecs: compression of the data blocks of Avro object container files.

Compresses and decompresses one block for the codecs Paimon writes
(``null``, ``deflate``, ``zstandard``, ``bzip2``, ``xz``, ``snappy`` through
cramjam), independent of fastavro's optional codec libraries, and maps
Paimon's ``manifest.compression`` values to Avro codec names. ``lz4`` blocks
(fastavro's non-standard codec) are read but never written: Java's Avro has no
such codec and pypaimon refuses it, so no Paimon engine could read them.

It imports only from ``snaplake.errors``; the container framing around the
blocks is :mod:`snaplake.store.format.avro`.
"""

from __future__ import annotations

import bz2
import lzma
import threading
import zlib
from typing import Final

import cramjam
import zstandard

from snaplake.errors import CorruptMetadataError, InvalidOptionError

__all__ = ["codec_for_compression", "compress_block", "decompress_block"]

_ZSTD_LEVEL: Final[int] = 1
"""Paimon's default ``file.compression.zstd-level``."""

_COMPRESSION_TO_CODEC: Final[dict[str, str]] = {
    "zstd": "zstandard",
    "zstandard": "zstandard",
    "null": "null",
    "none": "null",
    "uncompressed": "null",
    "deflate": "deflate",
    "snappy": "snappy",
    "bzip2": "bzip2",
    "xz": "xz",
}


def codec_for_compression(compression: str) -> str:
    """Map a Paimon ``manifest.compression`` value to the Avro codec name.

    Args:
        compression: ``zstd`` (Paimon's default), ``none``/``null``, ``deflate``,
            ``snappy``, ``bzip2`` or ``xz``; case-insensitive.

    Returns:
        The Avro ``avro.codec`` value (``zstandard``, ``null``, ...).

    Raises:
        InvalidOptionError: Unknown compression name (not retryable).
    """
    codec = _COMPRESSION_TO_CODEC.get(compression.lower())
    if compression.lower() == "lz4":
        raise InvalidOptionError(
            "manifest.compression = lz4 cannot be written: Avro has no lz4 codec in Java "
            "Paimon and pypaimon refuses it, so no other engine could read the manifests; "
            "use zstd (Paimon's default) or snappy",
            key="manifest.compression",
            value=compression,
        )
    if codec is None:
        raise InvalidOptionError(
            f"unsupported manifest compression {compression!r}; "
            f"expected one of {sorted(_COMPRESSION_TO_CODEC)}",
            key="manifest.compression",
            value=compression,
        )
    return codec


_ZSTD_DECOMPRESSOR_LOCAL = threading.local()
_MAX_BLOCK_BYTES: Final[int] = 1 << 30


def _zstd_decompress(data: bytes | memoryview) -> bytes:
    # A frame written by a streaming compressor may lack the content size, so
    # decompress through a stream object rather than ZstdDecompressor.decompress.
    dctx = getattr(_ZSTD_DECOMPRESSOR_LOCAL, "dctx", None)
    if dctx is None:
        dctx = zstandard.ZstdDecompressor()
        _ZSTD_DECOMPRESSOR_LOCAL.dctx = dctx
    params = zstandard.get_frame_parameters(data)
    if 0 < params.content_size <= _MAX_BLOCK_BYTES:
        # One-shot into a buffer of the declared size (zstd, fastavro and Java
        # writers all record it); bounded so a corrupt header cannot allocate wildly.
        out: bytes = dctx.decompress(data)
    else:
        out = dctx.decompressobj().decompress(data)
    return out


def decompress_block(codec: str, data: bytes | memoryview, *, path: str) -> bytes:
    """Decompress one Avro data block.

    Args:
        codec: The container's ``avro.codec``.
        data: The block's compressed bytes (for ``snappy`` raw Snappy plus the
            trailing big-endian CRC32 of the uncompressed bytes, as the Avro
            spec says; for ``lz4``, which only fastavro writes, an LZ4 block
            after its 4-byte little-endian uncompressed size).
        path: File path, for error messages.

    Returns:
        The uncompressed, Avro-encoded records of the block.

    Raises:
        CorruptMetadataError: The block does not decompress, or the codec is unknown.
    """
    try:
        if codec == "null":
            return bytes(data)
        if codec == "zstandard":
            return _zstd_decompress(data)
        if codec == "deflate":
            return zlib.decompress(data, -15)
        if codec == "bzip2":
            return bz2.decompress(data)
        if codec == "xz":
            return lzma.decompress(data)
        if codec == "snappy":
            raw = bytes(cramjam.snappy.decompress_raw(bytes(data[:-4])))
            if zlib.crc32(raw) != int.from_bytes(data[-4:], "big"):
                raise ValueError("snappy block CRC32 mismatch")
            return raw
        if codec == "lz4":
            return bytes(cramjam.lz4.decompress_block(bytes(data)))
    except Exception as e:
        raise CorruptMetadataError(
            f"{path}: cannot decompress {codec} Avro block: {e}", path=path
        ) from e
    raise CorruptMetadataError(f"{path}: unsupported Avro codec {codec!r}", path=path)


def compress_block(codec: str, data: bytes) -> bytes:
    """Compress one block of Avro-encoded records with ``codec``.

    Args:
        codec: An Avro codec name (see :func:`codec_for_compression`).
        data: Uncompressed block content.

    Returns:
        The block as it goes into the container.

    Raises:
        InvalidOptionError: Unknown codec (``lz4`` included: no Paimon engine reads it).
    """
    if codec == "null":
        return data
    if codec == "zstandard":
        return zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(data)
    if codec == "deflate":
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()
    if codec == "bzip2":
        return bz2.compress(data)
    if codec == "xz":
        return lzma.compress(data)
    if codec == "snappy":
        return bytes(cramjam.snappy.compress_raw(data)) + zlib.crc32(data).to_bytes(4, "big")
    if codec == "lz4":
        codec_for_compression("lz4")  # raises: explains why lz4 is never written
    raise InvalidOptionError(
        f"unsupported Avro codec {codec!r}", key="manifest.compression", value=codec
    )
