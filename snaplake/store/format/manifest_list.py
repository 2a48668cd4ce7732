"""Manifest lists: ``ManifestFileMeta`` records in Avro.

A manifest list (``manifest/manifest-list-<uuid>-<n>``) is an Avro object
container whose records each describe one manifest file: its name and size,
how many files it adds and deletes, partition stats for pruning, and optional
bucket/level/row-id bounds. A snapshot points at a base list and a delta list.
This module owns the value type, the exact Avro schema (``_VERSION`` = 2) and
reading/writing; appending to an existing list without decoding it is
:func:`snaplake.store.format.avro.concat_manifest_lists`.

Imports: ``snaplake.errors``, ``snaplake.store.format.data_file``, ``snaplake.store.format.avro``
(with ``avro_codecs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import fastavro
import orjson

from snaplake.errors import CorruptMetadataError, UnsupportedFormatVersionError
from snaplake.store.format import avro, avro_codecs, decoded_cache
from snaplake.store.format.data_file import (
    SimpleStats,
    _fast_simple_stats,
    _opt_list,
    _opt_tuple,
    simple_stats_avro_schema,
)

if TYPE_CHECKING:
    from snaplake.store.io.file_io import FileIO

__all__ = [
    "MANIFEST_FILE_META_AVRO_SCHEMA",
    "MANIFEST_LIST_FORMAT_VERSION",
    "MANIFEST_LIST_SCHEMA_JSON",
    "ManifestFileMeta",
    "decode_manifest_list",
    "decode_manifest_list_container",
    "encode_manifest_list",
    "encode_manifest_list_block",
    "read_manifest_list",
    "write_manifest_list",
]

MANIFEST_LIST_FORMAT_VERSION: Final[int] = 2
"""The ``_VERSION`` every manifest-list record carries."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestFileMeta:
    """One row of a manifest list: a manifest file and what it holds.

    Attributes:
        file_name: Bare manifest file name (``manifest-<uuid>-<n>``).
        file_size_bytes: Size of the manifest file in bytes.
        num_added_files: ADD entries in the manifest.
        num_deleted_files: DELETE entries in the manifest.
        partition_stats: Min/max/null counts of the partition columns over all
            entries (serialized BinaryRows, opaque here).
        schema_id: Largest schema id of the entries' files.
        min_bucket: Smallest bucket of the entries, or ``None`` if not recorded.
        max_bucket: Largest bucket, or ``None``.
        min_level: Smallest file level, or ``None``.
        max_level: Largest file level, or ``None``.
        min_row_id: Smallest row id (row-tracking tables), or ``None``.
        max_row_id: Largest row id, or ``None``.
        total_buckets: The common positive bucket count of all entries, or ``None``
            (pypaimon 2.1.0 field; Java 1.x readers skip it).
        extra_files: Companion files of the manifest (pypaimon 2.1.0 field), or ``None``.

    Source:
        Paimon ``org.apache.paimon.manifest.ManifestFileMeta`` (``SCHEMA``) and pypaimon
        2.1.0 ``manifest/schema/manifest_file_meta.py`` (adds ``_TOTAL_BUCKETS``,
        ``_EXTRA_FILES``).
    """

    file_name: str
    file_size_bytes: int
    num_added_files: int
    num_deleted_files: int
    partition_stats: SimpleStats
    schema_id: int
    min_bucket: int | None = None
    max_bucket: int | None = None
    min_level: int | None = None
    max_level: int | None = None
    min_row_id: int | None = None
    max_row_id: int | None = None
    total_buckets: int | None = None
    extra_files: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.num_added_files < 0 or self.num_deleted_files < 0:
            raise ValueError(
                f"file counts must be >= 0, got added={self.num_added_files} "
                f"deleted={self.num_deleted_files}"
            )

    @property
    def num_entries(self) -> int:
        """Entries in the manifest: added plus deleted."""
        return self.num_added_files + self.num_deleted_files


class _ManifestFileMetaBuilder:
    """Mutable twin of :class:`ManifestFileMeta` (see ``data_file._DataFileMetaBuilder``)."""

    __slots__ = ManifestFileMeta.__slots__


def _nullable(avro_type: str) -> dict[str, Any]:
    return {"type": ["null", avro_type], "default": None}


MANIFEST_FILE_META_AVRO_SCHEMA: Final[dict[str, Any]] = {
    "type": "record",
    "name": "ManifestFileMeta",
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_NUM_ADDED_FILES", "type": "long"},
        {"name": "_NUM_DELETED_FILES", "type": "long"},
        {"name": "_PARTITION_STATS", "type": simple_stats_avro_schema("record_PARTITION_STATS")},
        {"name": "_SCHEMA_ID", "type": "long"},
        {"name": "_MIN_BUCKET", **_nullable("int")},
        {"name": "_MAX_BUCKET", **_nullable("int")},
        {"name": "_MIN_LEVEL", **_nullable("int")},
        {"name": "_MAX_LEVEL", **_nullable("int")},
        {"name": "_MIN_ROW_ID", **_nullable("long")},
        {"name": "_MAX_ROW_ID", **_nullable("long")},
        {"name": "_TOTAL_BUCKETS", **_nullable("int")},
        {
            "name": "_EXTRA_FILES",
            "type": ["null", {"type": "array", "items": "string"}],
            "default": None,
        },
    ],
}
"""Avro schema of a manifest-list record, as pypaimon 2.1.0 writes it.

Source: Paimon ``ManifestFileMetaSerializer`` (``_VERSION`` prepended to
``ManifestFileMeta.SCHEMA``) plus pypaimon 2.1.0's trailing ``_TOTAL_BUCKETS`` and
``_EXTRA_FILES``."""

_PARSED_SCHEMA: Final[Any] = fastavro.parse_schema(MANIFEST_FILE_META_AVRO_SCHEMA)
MANIFEST_LIST_SCHEMA_JSON: Final[bytes] = orjson.dumps(MANIFEST_FILE_META_AVRO_SCHEMA)
"""The ``avro.schema`` header value snaplake writes into manifest lists."""


def _meta_to_record(m: ManifestFileMeta) -> dict[str, Any]:
    ps = m.partition_stats
    return {
        "_VERSION": MANIFEST_LIST_FORMAT_VERSION,
        "_FILE_NAME": m.file_name,
        "_FILE_SIZE": m.file_size_bytes,
        "_NUM_ADDED_FILES": m.num_added_files,
        "_NUM_DELETED_FILES": m.num_deleted_files,
        "_PARTITION_STATS": {
            "_MIN_VALUES": ps.min_values,
            "_MAX_VALUES": ps.max_values,
            "_NULL_COUNTS": _opt_list(ps.null_counts),
        },
        "_SCHEMA_ID": m.schema_id,
        "_MIN_BUCKET": m.min_bucket,
        "_MAX_BUCKET": m.max_bucket,
        "_MIN_LEVEL": m.min_level,
        "_MAX_LEVEL": m.max_level,
        "_MIN_ROW_ID": m.min_row_id,
        "_MAX_ROW_ID": m.max_row_id,
        "_TOTAL_BUCKETS": m.total_buckets,
        "_EXTRA_FILES": _opt_list(m.extra_files),
    }


def _meta_from_record(r: dict[str, Any], *, path: str) -> ManifestFileMeta:
    version = r["_VERSION"]
    if version != MANIFEST_LIST_FORMAT_VERSION:
        hint = "a newer Paimon writer" if version > MANIFEST_LIST_FORMAT_VERSION else "Paimon < 0.8"
        raise UnsupportedFormatVersionError(
            f"{path}: manifest-list record _VERSION {version} is not supported "
            f"(expected {MANIFEST_LIST_FORMAT_VERSION}; written by {hint})",
            path=path,
            version=version,
        )
    ps = r["_PARTITION_STATS"]
    nc = ps.get("_NULL_COUNTS")
    o: Any = _ManifestFileMetaBuilder()
    o.file_name = r["_FILE_NAME"]
    o.file_size_bytes = r["_FILE_SIZE"]
    o.num_added_files = r["_NUM_ADDED_FILES"]
    o.num_deleted_files = r["_NUM_DELETED_FILES"]
    o.partition_stats = _fast_simple_stats(
        ps["_MIN_VALUES"], ps["_MAX_VALUES"], None if nc is None else tuple(nc)
    )
    o.schema_id = r["_SCHEMA_ID"]
    o.min_bucket = r.get("_MIN_BUCKET")
    o.max_bucket = r.get("_MAX_BUCKET")
    o.min_level = r.get("_MIN_LEVEL")
    o.max_level = r.get("_MAX_LEVEL")
    o.min_row_id = r.get("_MIN_ROW_ID")
    o.max_row_id = r.get("_MAX_ROW_ID")
    o.total_buckets = r.get("_TOTAL_BUCKETS")
    o.extra_files = _opt_tuple(r.get("_EXTRA_FILES"))
    o.__class__ = ManifestFileMeta
    result: ManifestFileMeta = o
    return result


def encode_manifest_list_block(metas: Sequence[ManifestFileMeta]) -> bytes:
    """Return the uncompressed Avro encoding of ``metas`` (one data block's content).

    Args:
        metas: Records to encode.

    Returns:
        Concatenated record encodings under :data:`MANIFEST_FILE_META_AVRO_SCHEMA`.
    """
    return avro.encode_block(_PARSED_SCHEMA, [_meta_to_record(m) for m in metas])


def encode_manifest_list(metas: Sequence[ManifestFileMeta], *, compression: str = "zstd") -> bytes:
    """Encode ``metas`` as a manifest-list file (Avro object container).

    Args:
        metas: The records, in order; may be empty.
        compression: Paimon ``manifest.compression`` (``zstd`` default, ``none``,
            ``deflate``, ``bzip2``, ``xz``, ``snappy``).

    Returns:
        The file content; every record has ``_VERSION`` = 2.

    Raises:
        InvalidOptionError: Unknown ``compression``.

    Source:
        Paimon ``ManifestList.write`` / pypaimon ``ManifestListManager.write``.
    """
    codec = avro_codecs.codec_for_compression(compression)
    return avro.encode_container(
        _PARSED_SCHEMA, MANIFEST_LIST_SCHEMA_JSON, (_meta_to_record(m) for m in metas), codec=codec
    )


def write_manifest_list(
    file_io: FileIO,
    path: str,
    metas: Sequence[ManifestFileMeta],
    *,
    compression: str = "zstd",
) -> int:
    """Write ``metas`` as a new manifest list at ``path``.

    Args:
        file_io: Storage to write to.
        path: Full path (``.../manifest/manifest-list-<uuid>-<n>``).
        metas: The records.
        compression: See :func:`encode_manifest_list`.

    Returns:
        Bytes written (the snapshot's ``baseManifestListSize``/``deltaManifestListSize``).

    Raises:
        FileAlreadyExistsError: ``path`` already exists; nothing is written.
        InvalidOptionError: Unknown ``compression``.
        StorageError: The backend failed; retrying may help.

    Storage:
        Creates ``path`` with ``write_new``; deletes nothing. On success the records
        also go to the process-wide decoded-metadata cache (``write_records``).

    Source:
        Paimon ``ManifestList.write``.
    """
    data = encode_manifest_list(metas, compression=compression)
    return decoded_cache.write_records(file_io, path, data, metas)


def decode_manifest_list_container(
    container: avro.AvroContainer, *, path: str
) -> list[ManifestFileMeta]:
    """Decode the records of an already parsed manifest-list container.

    Args:
        container: From :func:`snaplake.store.format.avro.parse_container`.
        path: File path, for error messages.

    Returns:
        The records in file order.

    Raises:
        CorruptMetadataError: Undecodable blocks or records missing required fields.
        UnsupportedFormatVersionError: A record's ``_VERSION`` is not 2.
    """
    try:
        with avro.paused_gc():
            return [
                _meta_from_record(r, path=path)
                for r in avro.decode_container_records(container, path=path)
            ]
    except (KeyError, TypeError) as e:
        raise CorruptMetadataError(
            f"{path}: manifest-list record does not match Paimon's ManifestFileMeta: {e!r}",
            path=path,
        ) from e


def decode_manifest_list(data: bytes, *, path: str) -> list[ManifestFileMeta]:
    """Decode a whole manifest-list file.

    Args:
        data: The file content.
        path: The file's path, for error messages.

    Returns:
        The records in file order.

    Raises:
        CorruptMetadataError: Truncated or undecodable file.
        UnsupportedFormatVersionError: A record's ``_VERSION`` is not 2.

    Source:
        Paimon ``ManifestFileMetaSerializer.fromRow``.
    """
    return decode_manifest_list_container(avro.parse_container(data, path=path), path=path)


def read_manifest_list(
    file_io: FileIO, path: str, *, use_cache: bool = True
) -> list[ManifestFileMeta]:
    """Read and decode the manifest list at ``path``.

    Args:
        file_io: Storage to read from.
        path: Full path of the manifest list.
        use_cache: Serve from (and fill) the process-wide decoded-metadata cache.

    Returns:
        A new list of the records in file order.

    Raises:
        FileNotFoundError: No file at ``path``.
        CorruptMetadataError: Truncated or undecodable file (``.path`` names it).
        UnsupportedFormatVersionError: A record's ``_VERSION`` is not 2.

    Storage:
        One ``read_bytes`` of ``path`` on a cache miss; nothing on a hit.
    """
    return decoded_cache.read_records(file_io, path, decode_manifest_list, use_cache=use_cache)


def concat_manifest_lists(parts: Sequence[bytes], extra: Sequence[ManifestFileMeta]) -> bytes:
    """Build a manifest list holding every record of ``parts`` followed by ``extra``.

    Data blocks of a part whose schema is ours (byte-identical ``avro.schema`` or
    the same parsed schema) and whose codec matches the output codec are copied
    verbatim, re-framed with the new file's sync marker; other parts are decoded
    and re-encoded. Runs of small blocks (fewer than ``SMALL_BLOCK_RECORDS``
    records, typically one commit's delta list each) are merged by joining their
    decompressed contents, still without decoding any record. The output codec
    is the first part's codec when we can write it, else ``zstandard``.

    Args:
        parts: Whole manifest-list files (e.g. the latest snapshot's base and delta lists).
        extra: Records to append after them.

    Returns:
        The new manifest-list file content (readable by fastavro, pypaimon and Java).

    Raises:
        CorruptMetadataError: A part is not a decodable manifest list (its ``path``
            is ``<part i>``).
        UnsupportedFormatVersionError: A part holds a record with a ``_VERSION``
            newer than 2.

    Source:
        Avro's ``DataFileWriter.appendAllFrom`` (raw block copy when schema and codec
        match); the motivation is Paimon's commit, which rewrites base + delta into
        the new base list every commit.
    """
    containers = [avro.parse_container(p, path=f"<part {i}>") for i, p in enumerate(parts)]
    codec = "zstandard"
    if containers and containers[0].codec in {
        "null",
        "zstandard",
        "deflate",
        "bzip2",
        "xz",
        "snappy",
    }:
        codec = containers[0].codec
    our_schema = MANIFEST_LIST_SCHEMA_JSON
    blocks: list[tuple[int, bytes | memoryview]] = []
    for i, c in enumerate(containers):
        if c.codec == codec and (c.schema_json == our_schema or _same_schema(c, our_schema)):
            blocks.extend(c.blocks)
            continue
        metas = decode_manifest_list_container(c, path=f"<part {i}>")
        if metas:
            raw = encode_manifest_list_block(metas)
            blocks.append((len(metas), avro_codecs.compress_block(codec, raw)))
    if extra:
        blocks.append(
            (len(extra), avro_codecs.compress_block(codec, encode_manifest_list_block(extra)))
        )
    return avro.build_container(our_schema, codec, _coalesce_small_blocks(blocks, codec))


SMALL_BLOCK_BYTES: Final[int] = 4096
SMALL_BLOCK_RECORDS: Final[int] = 128
"""Blocks with fewer records than this and under ``SMALL_BLOCK_BYTES`` compressed are
merged with their neighbours by :func:`concat_manifest_lists` into blocks of
``SMALL_BLOCK_RECORDS`` records, so that a list appended to on every commit does not
end up as one tiny block (plus a 16-byte sync marker and a codec frame) per commit,
while full blocks are copied verbatim from then on."""


def _coalesce_small_blocks(
    blocks: list[tuple[int, bytes | memoryview]], codec: str
) -> list[tuple[int, bytes | memoryview]]:
    """Merge runs of small blocks into blocks of up to ``avro.DEFAULT_SYNC_INTERVAL_BYTES``.

    Avro records are self-delimiting, so a block's content is the plain
    concatenation of its records: merging decompresses and joins block contents
    without decoding any record. Large blocks are kept verbatim.
    """

    def small(count: int, block: bytes | memoryview) -> bool:
        return count < SMALL_BLOCK_RECORDS and len(block) < SMALL_BLOCK_BYTES

    if sum(1 for count, b in blocks if small(count, b)) < 2:
        return blocks
    out: list[tuple[int, bytes | memoryview]] = []
    run: list[bytes] = []
    run_count = 0
    run_bytes = 0

    def flush() -> None:
        nonlocal run, run_count, run_bytes
        if len(run) == 1:
            out.append((run_count, avro_codecs.compress_block(codec, run[0])))
        elif run:
            out.append((run_count, avro_codecs.compress_block(codec, b"".join(run))))
        run, run_count, run_bytes = [], 0, 0

    for count, block in blocks:
        if not small(count, block):
            flush()
            out.append((count, block))
            continue
        raw = avro_codecs.decompress_block(codec, block, path="<concat>")
        run.append(raw)
        run_count += count
        run_bytes += len(raw)
        if run_count >= SMALL_BLOCK_RECORDS or run_bytes >= avro.DEFAULT_SYNC_INTERVAL_BYTES:
            flush()
    flush()
    return out


def _same_schema(container: avro.AvroContainer, schema_json: bytes) -> bool:
    try:
        return bool(container.schema() == orjson.loads(schema_json))
    except orjson.JSONDecodeError:
        return False
