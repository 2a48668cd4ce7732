"""Avro object-container plumbing: framing, and record encoding and decoding.

This module owns:

* framing of Avro object container files (header, blocks, sync markers):
  :func:`parse_container`, :func:`build_container`, :func:`frame_block`;
* record encoding and decoding with fastavro (:func:`encode_container`,
  :func:`decode_container_records`), with the writer schema read without its
  logical types.

Block compression is :mod:`~snaplake.store.format.avro_codecs`; the columnar
decoder for large files (polars) is :mod:`~snaplake.store.format.avro_columnar`.
It imports only from ``snaplake.errors`` and ``avro_codecs``. Manifest lists built from earlier
lists' blocks live in ``manifest_list`` (:func:`concat_manifest_lists`), the
cache of decoded files in ``metadata_cache``.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import fastavro
import orjson

from snaplake.errors import CorruptMetadataError
from snaplake.store.format.avro_codecs import compress_block, decompress_block

__all__ = [
    "AVRO_MAGIC",
    "DEFAULT_SYNC_INTERVAL_BYTES",
    "AvroContainer",
    "build_container",
    "decode_container_records",
    "encode_block",
    "encode_container",
    "frame_block",
    "parse_container",
    "paused_gc",
    "strip_logical_types",
    "without_logical_types",
]

AVRO_MAGIC: Final[bytes] = b"Obj\x01"
"""The four bytes every Avro object container file starts with."""

DEFAULT_SYNC_INTERVAL_BYTES: Final[int] = 64_000
"""Target uncompressed size of one data block (Java Avro's default sync interval)."""

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
    return fastavro.parse_schema(orjson.loads(without_logical_types(schema_json)))


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
def without_logical_types(schema_json: bytes) -> bytes:
    """Return ``schema_json`` without ``logicalType`` annotations (cached per schema text).

    Paimon's ``_CREATION_TIME`` is a ``timestamp-millis`` holding a local
    wall-clock value, not an instant; decoding it as the stored long keeps it
    exact (fastavro would build a UTC ``datetime``).

    Args:
        schema_json: An ``avro.schema`` header value.

    Returns:
        The schema as compact JSON without logical types; ``schema_json``
        itself when it has none or is not valid JSON.
    """
    if b"logicalType" not in schema_json:
        return schema_json
    try:
        return orjson.dumps(strip_logical_types(orjson.loads(schema_json)))
    except orjson.JSONDecodeError:
        return schema_json


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
