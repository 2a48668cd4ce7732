"""Avro object-container plumbing: framing, block codecs, record and columnar decoding.

This module owns:

* framing of Avro object container files (header, blocks, sync markers),
  block compression for the codecs Paimon writes (``null``, ``deflate``,
  ``zstandard``, ``bzip2``, ``xz``, ``snappy`` through cramjam), independent
  of fastavro's optional codec libraries; ``lz4`` blocks (fastavro's
  non-standard codec) are read but never written: Java's Avro has no such
  codec and pypaimon refuses it, so no Paimon engine could read them;
* record decoding (fastavro) and the columnar decoder for large files
  (:func:`iter_container_columns`, polars).

It imports only from ``snaplake.errors``. Manifest lists built from earlier
lists' blocks live in ``manifest_list`` (:func:`concat_manifest_lists`), the
cache of decoded files in ``metadata_cache``.
"""

from __future__ import annotations

import bz2
import contextlib
import functools
import gc
import io
import lzma
import os
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

import cramjam
import fastavro
import orjson
import zstandard

from snaplake.errors import CorruptMetadataError, InvalidOptionError

__all__ = [
    "AVRO_MAGIC",
    "COLUMNAR_CHUNK_RECORDS",
    "COLUMNAR_MIN_RECORDS",
    "DEFAULT_SYNC_INTERVAL_BYTES",
    "AvroContainer",
    "ColumnarUnavailableError",
    "build_container",
    "codec_for_compression",
    "frame_block",
    "columnar_available",
    "compress_block",
    "decode_container_columns",
    "decode_container_records",
    "decompress_block",
    "encode_block",
    "encode_container",
    "iter_container_columns",
    "parse_container",
    "paused_gc",
    "strip_logical_types",
]

AVRO_MAGIC: Final[bytes] = b"Obj\x01"
"""The four bytes every Avro object container file starts with."""

DEFAULT_SYNC_INTERVAL_BYTES: Final[int] = 64_000
"""Target uncompressed size of one data block (Java Avro's default sync interval)."""

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


# --------------------------------------------------------------------------- varints


def _encode_long(n: int) -> bytes:
    """Avro zig-zag varint encoding of a signed 64-bit integer."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _decode_long(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode one zig-zag varint at ``pos``; return ``(value, new_pos)``.

    Raises:
        IndexError: The buffer ends inside the varint.
        ValueError: The varint is longer than 10 bytes.
    """
    b = buf[pos]
    pos += 1
    z = b & 0x7F
    shift = 7
    while b & 0x80:
        if shift > 63:
            raise ValueError("varint too long")
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        shift += 7
    return (z >> 1) ^ -(z & 1), pos


# --------------------------------------------------------------------------- codecs


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


# --------------------------------------------------------------------------- containers


@dataclass(frozen=True, slots=True, kw_only=True)
class AvroContainer:
    """A parsed Avro object container file: header facts and raw (compressed) blocks.

    Attributes:
        schema_json: The ``avro.schema`` metadata value, byte for byte.
        codec: The ``avro.codec`` metadata value (``null`` when absent).
        sync: The 16-byte sync marker.
        blocks: ``(record_count, compressed_bytes)`` per data block, in file order.
    """

    schema_json: bytes
    codec: str
    sync: bytes
    blocks: tuple[tuple[int, memoryview], ...]

    @property
    def record_count(self) -> int:
        """Total number of records over all blocks."""
        return sum(count for count, _ in self.blocks)

    def schema(self) -> Any:
        """Return the writer schema parsed from JSON (dicts, lists, strings)."""
        return orjson.loads(self.schema_json)


def parse_container(data: bytes, *, path: str) -> AvroContainer:
    """Split an Avro object container into header facts and raw blocks without decoding.

    Args:
        data: The whole file.
        path: File path, for error messages.

    Returns:
        The parsed container; blocks are views into ``data`` (still compressed).

    Raises:
        CorruptMetadataError: Bad magic, truncated header or block, a block whose
            sync marker does not match the header's, or a missing schema.
    """
    mv = memoryview(data)
    n = len(data)
    try:
        if bytes(mv[:4]) != AVRO_MAGIC:
            raise ValueError("not an Avro object container (bad magic)")
        pos = 4
        meta: dict[str, bytes] = {}
        while True:
            count, pos = _decode_long(mv, pos)
            if count == 0:
                break
            if count < 0:
                _, pos = _decode_long(mv, pos)  # block byte size, unused
                count = -count
            for _ in range(count):
                klen, pos = _decode_long(mv, pos)
                key = bytes(mv[pos : pos + klen]).decode("utf-8")
                pos += klen
                vlen, pos = _decode_long(mv, pos)
                if klen < 0 or vlen < 0 or pos + vlen > n:
                    raise ValueError("truncated header metadata")
                meta[key] = bytes(mv[pos : pos + vlen])
                pos += vlen
        sync = bytes(mv[pos : pos + 16])
        if len(sync) != 16:
            raise ValueError("truncated header (sync marker)")
        pos += 16
        blocks: list[tuple[int, memoryview]] = []
        while pos < n:
            count, pos = _decode_long(mv, pos)
            size, pos = _decode_long(mv, pos)
            end = pos + size
            if count < 0 or size < 0 or end + 16 > n:
                raise ValueError(f"truncated data block at byte {pos}")
            if mv[end : end + 16] != sync:
                raise ValueError(f"sync marker mismatch after block at byte {pos}")
            blocks.append((count, mv[pos:end]))
            pos = end + 16
    except (IndexError, ValueError, UnicodeDecodeError) as e:
        raise CorruptMetadataError(f"{path}: corrupt Avro file: {e}", path=path) from e
    schema_json = meta.get("avro.schema")
    if schema_json is None:
        raise CorruptMetadataError(f"{path}: Avro header has no avro.schema", path=path)
    codec = meta.get("avro.codec", b"null").decode("utf-8", "replace") or "null"
    return AvroContainer(schema_json=schema_json, codec=codec, sync=sync, blocks=tuple(blocks))


def build_container(
    schema_json: bytes,
    codec: str,
    blocks: Iterable[tuple[int, bytes | memoryview]],
    *,
    sync: bytes | None = None,
) -> bytes:
    """Assemble an Avro object container from already-encoded blocks.

    Args:
        schema_json: The ``avro.schema`` value to write.
        codec: The ``avro.codec`` value; each block must already be compressed with it.
        blocks: ``(record_count, block_bytes)`` pairs; blocks with zero records are dropped.
        sync: 16-byte sync marker; a random one when ``None``.

    Returns:
        The file content.
    """
    if sync is None:
        sync = os.urandom(16)
    out: list[bytes | memoryview] = [AVRO_MAGIC, _encode_long(2)]
    for key, value in ((b"avro.schema", schema_json), (b"avro.codec", codec.encode())):
        out += (_encode_long(len(key)), key, _encode_long(len(value)), value)
    out += (_encode_long(0), sync)
    for count, block in blocks:
        if count == 0:
            continue
        out += (_encode_long(count) + _encode_long(len(block)), block, sync)
    return b"".join(out)


def frame_block(count: int, block: bytes, sync: bytes) -> bytes:
    """Return one data block as it follows the header: count, size, bytes, sync marker.

    Args:
        count: Records in the block (> 0).
        block: The block's compressed bytes.
        sync: The file's 16-byte sync marker.
    """
    return _encode_long(count) + _encode_long(len(block)) + block + sync


def encode_container(
    parsed_schema: Any,
    schema_json: bytes,
    records: Iterable[Any],
    *,
    codec: str,
    sync_interval_bytes: int = DEFAULT_SYNC_INTERVAL_BYTES,
) -> bytes:
    """Encode records into an Avro object container compressed with ``codec``.

    fastavro encodes the records (uncompressed), then each block is compressed here,
    so no optional fastavro codec library is needed.

    Args:
        parsed_schema: ``fastavro.parse_schema`` output of the schema.
        schema_json: The same schema as compact JSON, written into the header.
        records: Dicts shaped like the schema.
        codec: Avro codec name (``zstandard``, ``null``, ``deflate``, ...).
        sync_interval_bytes: Target uncompressed block size.

    Returns:
        The file content.

    Raises:
        InvalidOptionError: Unknown codec.
        ValueError: A record does not fit the schema.
    """
    buf = io.BytesIO()
    fastavro.writer(buf, parsed_schema, records, codec="null", sync_interval=sync_interval_bytes)
    raw = parse_container(buf.getvalue(), path="<encoding>")
    return build_container(
        schema_json,
        codec,
        ((count, compress_block(codec, bytes(block))) for count, block in raw.blocks),
        sync=raw.sync,
    )


def encode_block(parsed_schema: Any, records: Sequence[Any]) -> bytes:
    """Return the uncompressed Avro encoding of ``records`` (one block's content).

    Args:
        parsed_schema: ``fastavro.parse_schema`` output.
        records: Dicts shaped like the schema.

    Returns:
        The concatenated binary encodings.
    """
    buf = io.BytesIO()
    write = fastavro.schemaless_writer
    for record in records:
        write(buf, parsed_schema, record)
    return buf.getvalue()


def decode_container_records(container: AvroContainer, *, path: str) -> Iterator[Any]:
    """Decode every record of a parsed container with fastavro (record by record).

    The blocks are decompressed here and handed to fastavro as a ``null``-codec
    container, so any codec in :func:`decompress_block` works and the writer
    schema (whatever its record names or extra fields) drives decoding.

    Args:
        container: From :func:`parse_container`.
        path: File path, for error messages.

    Returns:
        An iterator of dicts keyed by Avro field name. ``timestamp-millis`` values
        are returned as raw ``int`` milliseconds.

    Raises:
        CorruptMetadataError: A block does not decompress or does not decode against
            the writer schema (raised lazily, while iterating).
    """
    schema = _reader_schema(container.schema_json)
    try:
        for count, block in container.blocks:
            data = io.BytesIO(decompress_block(container.codec, block, path=path))
            for _ in range(count):
                yield fastavro.schemaless_reader(data, schema, None)
    except CorruptMetadataError:
        raise
    except Exception as e:
        raise CorruptMetadataError(f"{path}: cannot decode Avro records: {e}", path=path) from e


@functools.lru_cache(maxsize=64)
def _reader_schema(schema_json: bytes) -> Any:
    """Parsed writer schema without logical types, cached per distinct schema text.

    Every manifest of a table carries the same schema, so a cold scan of
    hundreds of small manifests parses it once instead of once per file.
    """
    return fastavro.parse_schema(orjson.loads(_without_logical_types(schema_json)))


def strip_logical_types(node: Any) -> Any:
    """Return a copy of the parsed Avro schema ``node`` without ``logicalType`` keys.

    Readers then decode the stored primitive (a ``timestamp-millis`` as its long,
    a ``date`` as its int) instead of a Python ``datetime``/``date``.
    """
    if isinstance(node, dict):
        return {k: strip_logical_types(v) for k, v in node.items() if k != "logicalType"}
    if isinstance(node, list):
        return [strip_logical_types(v) for v in node]
    return node


@functools.lru_cache(maxsize=64)
def _without_logical_types(schema_json: bytes) -> bytes:
    """Return ``schema_json`` without ``logicalType`` annotations.

    Paimon's ``_CREATION_TIME`` is a ``timestamp-millis`` holding a local
    wall-clock value, not an instant; decoding it as the stored long keeps it
    exact (fastavro would build a UTC ``datetime``).
    """
    if b"logicalType" not in schema_json:
        return schema_json
    try:
        return orjson.dumps(strip_logical_types(orjson.loads(schema_json)))
    except orjson.JSONDecodeError:
        return schema_json


# --------------------------------------------------------------------------- columnar decode

COLUMNAR_MIN_RECORDS: Final[int] = 2_000
"""Files with at least this many records decode through polars when it is installed;
below it fastavro's per-file setup cost is lower."""


def _polars() -> Any:
    try:
        import polars  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    return polars


def columnar_available() -> bool:
    """Return whether the columnar decoder (``polars``) can be used in this process."""
    return _polars() is not None


class ColumnarUnavailableError(Exception):
    """Internal signal: polars is missing or cannot read this file; use fastavro instead."""


COLUMNAR_CHUNK_RECORDS: Final[int] = 20_000
"""Records per chunk of the pipelined columnar decoder."""


def iter_container_columns(
    container: AvroContainer, *, path: str, chunk_records: int = COLUMNAR_CHUNK_RECORDS
) -> Iterator[dict[str, list[Any]]]:
    """Decode a container column by column with ``polars.read_avro``, chunk by chunk.

    Consecutive blocks are grouped into chunks of about ``chunk_records`` records.
    A helper thread decompresses chunk *i + 1* and parses it with polars (both
    release the GIL) while the caller turns chunk *i* into Python objects, so
    on two or more cores the native work overlaps the Python work. Blocks reach
    polars as a ``null``-codec container (polars reads no zstandard) with logical
    types removed, so ``timestamp-millis`` stays the stored long.

    Args:
        container: From :func:`parse_container`.
        path: File path, for error messages.
        chunk_records: Target records per chunk.

    Returns:
        An iterator of column dicts, one per chunk, in file order: one Python list
        per leaf field, keyed by dotted path (``_FILE._FILE_NAME``,
        ``_FILE._VALUE_STATS._NULL_COUNTS``); nested records are flattened,
        arrays are tuples (``None`` for a null array).

    Raises:
        ColumnarUnavailableError: polars is not installed or cannot read the file
            (possibly after some chunks were yielded; callers discard them and
            fall back to :func:`decode_container_records`).
        CorruptMetadataError: A block does not decompress.
    """
    pl = _polars()
    if pl is None:
        raise ColumnarUnavailableError("polars is not installed")
    schema_json = _without_logical_types(container.schema_json)
    chunks: list[list[tuple[int, memoryview]]] = [[]]
    pending = 0
    for block in container.blocks:
        if pending >= chunk_records:
            chunks.append([])
            pending = 0
        chunks[-1].append(block)
        pending += block[0]

    def read_chunk(blocks: list[tuple[int, memoryview]]) -> Any:
        plain = build_container(
            schema_json,
            "null",
            [(count, decompress_block(container.codec, b, path=path)) for count, b in blocks],
            sync=container.sync,
        )
        try:
            frame = pl.read_avro(io.BytesIO(plain))
        except Exception as e:
            raise ColumnarUnavailableError(str(e)) from e
        if frame.height != sum(count for count, _ in blocks):
            raise ColumnarUnavailableError("polars returned a different row count")
        return frame

    if len(chunks) == 1:
        out: dict[str, list[Any]] = {}
        _flatten_columns(pl, read_chunk(chunks[0]), "", out)
        yield out
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="snaplake-avro") as pool:
        future = pool.submit(read_chunk, chunks[0])
        for i in range(len(chunks)):
            frame = future.result()
            if i + 1 < len(chunks):
                future = pool.submit(read_chunk, chunks[i + 1])
            out = {}
            _flatten_columns(pl, frame, "", out)
            del frame
            yield out


def decode_container_columns(container: AvroContainer, *, path: str) -> dict[str, list[Any]] | None:
    """Decode a whole container column by column (see :func:`iter_container_columns`).

    Args:
        container: From :func:`parse_container`.
        path: File path, for error messages.

    Returns:
        One list per leaf field for the whole file, or ``None`` when polars is not
        installed or cannot read the file.

    Raises:
        CorruptMetadataError: A block does not decompress.
    """
    merged: dict[str, list[Any]] = {}
    try:
        for chunk in iter_container_columns(container, path=path):
            for key, values in chunk.items():
                merged.setdefault(key, []).extend(values)
    except ColumnarUnavailableError:
        return None
    return merged


def _flatten_columns(pl: Any, frame: Any, prefix: str, out: dict[str, list[Any]]) -> None:
    n = frame.height
    for name in frame.columns:
        series = frame[name]
        key = f"{prefix}{name}"
        if isinstance(series.dtype, pl.Struct):
            _flatten_columns(pl, series.struct.unnest(), f"{key}.", out)
        elif series.null_count() == n:
            out[key] = [None] * n
        elif isinstance(series.dtype, pl.List):
            # Arrays come back as tuples; an all-empty column shares one tuple.
            if series.null_count() == 0 and not series.list.len().max():
                out[key] = [()] * n
            else:
                out[key] = [None if v is None else tuple(v) for v in series.to_list()]
        elif (
            series.dtype == pl.Binary and series.null_count() == 0 and series.min() == series.max()
        ):
            # Constant (e.g. the empty min/max key of append tables): share one object.
            out[key] = [series[0]] * n
        else:
            out[key] = series.to_list()


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Suspend the cyclic garbage collector while bulk-building acyclic objects.

    Decoding 100,000 entries allocates about half a million tracked objects,
    which triggers many generation-2 collections that each traverse the
    growing heap; pausing the collector halves decode time. The previous state
    is restored on exit (a collector already disabled by the caller stays off).
    """
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
