"""Index manifests: the ``IndexManifestEntry`` records naming a table's index files.

A snapshot's ``indexManifest`` names ``manifest/index-manifest-<uuid>-<n>``: one
Avro object container (never rolled) whose records each ADD or DELETE one index
file (a HASH file of a dynamic-bucket table, or a DELETION_VECTORS file) of one
(partition, bucket). Stored manifests hold the full index state, all ADD; the
commit combines the previous state with its own changes
(:func:`combine_index_entries`).

This module owns the value types, the Avro schema Java Paimon writes
(``_VERSION`` = 1 first, then ``_KIND``, ``_PARTITION``, ``_BUCKET`` and the
``IndexFileMeta`` fields flattened; top record
``org.apache.paimon.avro.generated.record``) and reading/writing the files.
Reading goes by field name, so files from Java 0.8+ (3-field DV ranges, no
``_EXTERNAL_PATH``/``_GLOBAL_INDEX``) and pypaimon (its own record names) decode alike.

Source: Paimon ``IndexFileMeta``, ``DeletionVectorMeta``, ``IndexManifestEntry``,
``IndexManifestEntrySerializer``, ``IndexManifestFile``, ``IndexManifestFileHandler``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

import fastavro
import orjson

from snaplake.errors import CorruptMetadataError, UnsupportedFormatVersionError
from snaplake.store.format import avro, avro_codecs, decoded_cache
from snaplake.store.format.manifest import FileKind

if TYPE_CHECKING:
    from snaplake.store.format.paths import PathFactory
    from snaplake.store.io.file_io import FileIO

__all__ = [
    "DELETION_VECTORS_INDEX",
    "HASH_INDEX",
    "INDEX_MANIFEST_AVRO_SCHEMA",
    "INDEX_MANIFEST_FORMAT_VERSION",
    "DeletionVectorMeta",
    "IndexFileMeta",
    "IndexManifestEntry",
    "combine_index_entries",
    "decode_index_manifest",
    "encode_index_manifest",
    "index_file_from_json_dict",
    "index_file_to_json_dict",
    "index_path",
    "read_index_manifest",
    "write_index_manifest",
]

HASH_INDEX: Final[str] = "HASH"
"""``indexType`` of a dynamic-bucket HASH file (Paimon ``HashIndexFile.HASH_INDEX``)."""

DELETION_VECTORS_INDEX: Final[str] = "DELETION_VECTORS"
"""``indexType`` of a deletion-vectors file (Paimon ``DeletionVectorsIndexFile``)."""

INDEX_MANIFEST_FORMAT_VERSION: Final[int] = 1
"""The ``_VERSION`` every index manifest record carries (``IndexManifestEntrySerializer``)."""


@dataclass(frozen=True, slots=True)
class DeletionVectorMeta:
    """Where one data file's deletion vector sits inside a DELETION_VECTORS file.

    Attributes:
        data_file_name: The data file the vector belongs to (``f0``).
        offset: Byte offset of the vector in the index file (``f1``).
        length: Byte length of the vector (``f2``).
        cardinality: Deleted row count (``_CARDINALITY``, Paimon 1.0+; ``None`` if unknown).

    Source: Paimon ``org.apache.paimon.index.DeletionVectorMeta``.
    """

    data_file_name: str
    offset: int
    length: int
    cardinality: int | None


@dataclass(frozen=True, slots=True)
class IndexFileMeta:
    """One index file.

    Attributes:
        index_type: :data:`HASH_INDEX` or :data:`DELETION_VECTORS_INDEX` (other types are
            carried through unchanged).
        file_name: Name of the file in ``<table>/index/``.
        file_size: Size in bytes.
        row_count: HASH: number of hashes; DELETION_VECTORS: number of vectors.
        dv_ranges: DELETION_VECTORS only: one range per data file, else ``None``.
        external_path: Full path when the file lives outside the table (Paimon 1.3+).

    Source: Paimon ``org.apache.paimon.index.IndexFileMeta`` (``_GLOBAL_INDEX`` is not
    modelled: it is null for HASH and DELETION_VECTORS files).
    """

    index_type: str
    file_name: str
    file_size: int
    row_count: int
    dv_ranges: tuple[DeletionVectorMeta, ...] | None = None
    external_path: str | None = None


@dataclass(frozen=True, slots=True)
class IndexManifestEntry:
    """One ADD or DELETE of an index file in one partition and bucket.

    Attributes:
        kind: ADD or DELETE (stored manifests hold ADDs only).
        partition: Serialized BinaryRow of the partition values (opaque).
        bucket: The bucket the index file describes.
        index_file: The index file.

    Source: Paimon ``org.apache.paimon.manifest.IndexManifestEntry``.
    """

    kind: FileKind
    partition: bytes
    bucket: int
    index_file: IndexFileMeta

    def as_delete(self) -> IndexManifestEntry:
        """Return the DELETE entry that removes this entry's file."""
        return replace(self, kind=FileKind.DELETE)


def index_path(paths: PathFactory, meta: IndexFileMeta) -> str:
    """Full path of the index file ``meta``: ``external_path``, else ``<table>/index/<name>``."""
    return meta.external_path or paths.index_file_path(meta.file_name)


# --------------------------------------------------------------------------- schema

_RECORD: Final[str] = "org.apache.paimon.avro.generated.record"


def _nullable(avro_type: Any) -> list[Any]:
    return ["null", avro_type]


_DV_META_SCHEMA: Final[dict[str, Any]] = {
    "type": "record",
    "name": f"{_RECORD}__DELETIONS_VECTORS_RANGES",
    "fields": [
        {"name": "f0", "type": "string"},
        {"name": "f1", "type": "int"},
        {"name": "f2", "type": "int"},
        {"name": "_CARDINALITY", "type": _nullable("long"), "default": None},
    ],
}

_GLOBAL_INDEX_SCHEMA: Final[dict[str, Any]] = {
    "type": "record",
    "name": f"{_RECORD}__GLOBAL_INDEX",
    "fields": [
        {"name": "_ROW_RANGE_START", "type": "long"},
        {"name": "_ROW_RANGE_END", "type": "long"},
        {"name": "_INDEX_FIELD_ID", "type": "int"},
        {
            "name": "_EXTRA_FIELD_IDS",
            "type": _nullable({"type": "array", "items": "int"}),
            "default": None,
        },
        {"name": "_INDEX_META", "type": _nullable("bytes"), "default": None},
        {"name": "_SOURCE_META", "type": _nullable("bytes"), "default": None},
    ],
}

INDEX_MANIFEST_AVRO_SCHEMA: Final[dict[str, Any]] = {
    "type": "record",
    "name": _RECORD,
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_INDEX_TYPE", "type": "string"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {
            "name": "_DELETIONS_VECTORS_RANGES",
            "type": _nullable({"type": "array", "items": _nullable(_DV_META_SCHEMA)}),
            "default": None,
        },
        {"name": "_EXTERNAL_PATH", "type": _nullable("string"), "default": None},
        {"name": "_GLOBAL_INDEX", "type": _nullable(_GLOBAL_INDEX_SCHEMA), "default": None},
    ],
}
"""Avro schema of an index manifest record, as Java Paimon 1.4+ writes it.

Java 0.9 writes the same names and shapes (checked against a file it wrote:
nullable array of nullable range records) without ``_CARDINALITY``,
``_EXTERNAL_PATH`` and ``_GLOBAL_INDEX``.

Source: Paimon ``IndexManifestEntrySerializer`` (``_VERSION`` prepended to
``IndexManifestEntry.SCHEMA``) through ``AvroSchemaConverter`` (nested record names
``<parent>_<field>``)."""

_PARSED_SCHEMA: Final[Any] = fastavro.parse_schema(INDEX_MANIFEST_AVRO_SCHEMA)
_SCHEMA_JSON: Final[bytes] = orjson.dumps(INDEX_MANIFEST_AVRO_SCHEMA)
_KINDS: Final[dict[int, FileKind]] = {k.value: k for k in FileKind}


# --------------------------------------------------------------------------- codec


def _entry_to_record(e: IndexManifestEntry) -> dict[str, Any]:
    f = e.index_file
    ranges = None
    if f.dv_ranges is not None:
        ranges = [
            {"f0": r.data_file_name, "f1": r.offset, "f2": r.length, "_CARDINALITY": r.cardinality}
            for r in f.dv_ranges
        ]
    return {
        "_VERSION": INDEX_MANIFEST_FORMAT_VERSION,
        "_KIND": int(e.kind),
        "_PARTITION": e.partition,
        "_BUCKET": e.bucket,
        "_INDEX_TYPE": f.index_type,
        "_FILE_NAME": f.file_name,
        "_FILE_SIZE": f.file_size,
        "_ROW_COUNT": f.row_count,
        "_DELETIONS_VECTORS_RANGES": ranges,
        "_EXTERNAL_PATH": f.external_path,
        "_GLOBAL_INDEX": None,
    }


def _entry_from_record(r: dict[str, Any], *, path: str) -> IndexManifestEntry:
    version = r["_VERSION"]
    if version != INDEX_MANIFEST_FORMAT_VERSION:
        raise UnsupportedFormatVersionError(
            f"{path}: index manifest record _VERSION {version} is not supported "
            f"(expected {INDEX_MANIFEST_FORMAT_VERSION})",
            path=path,
            version=version,
        )
    raw_ranges = r.get("_DELETIONS_VECTORS_RANGES")
    ranges = None
    if raw_ranges is not None:
        ranges = tuple(
            DeletionVectorMeta(d["f0"], d["f1"], d["f2"], d.get("_CARDINALITY")) for d in raw_ranges
        )
    return IndexManifestEntry(
        _KINDS[r["_KIND"]],
        r["_PARTITION"],
        r["_BUCKET"],
        IndexFileMeta(
            r["_INDEX_TYPE"],
            r["_FILE_NAME"],
            r["_FILE_SIZE"],
            r["_ROW_COUNT"],
            ranges,
            r.get("_EXTERNAL_PATH"),
        ),
    )


def encode_index_manifest(
    entries: Sequence[IndexManifestEntry], *, compression: str = "zstd"
) -> bytes:
    """Encode ``entries`` as an index manifest (Avro object container).

    Args:
        entries: The records, in order; may be empty.
        compression: Paimon ``manifest.compression`` (see
            :func:`snaplake.store.format.manifest.encode_manifest_file`).

    Returns:
        The file content; every record has ``_VERSION`` = 1 and ``_GLOBAL_INDEX`` null.

    Raises:
        InvalidOptionError: Unknown ``compression``.

    Source: Paimon ``IndexManifestFile`` writer.
    """
    codec = avro_codecs.codec_for_compression(compression)
    return avro.encode_container(
        _PARSED_SCHEMA, _SCHEMA_JSON, (_entry_to_record(e) for e in entries), codec=codec
    )


def decode_index_manifest(data: bytes, *, path: str) -> list[IndexManifestEntry]:
    """Decode a whole index manifest.

    Args:
        data: The file content (any writer schema with Paimon's field names).
        path: The file's path, for error messages.

    Returns:
        The entries in file order.

    Raises:
        CorruptMetadataError: Truncated or undecodable file, a missing required field
            or an unknown ``_KIND``.
        UnsupportedFormatVersionError: A record's ``_VERSION`` is not 1.

    Source: Paimon ``IndexManifestEntrySerializer.convertFrom``.
    """
    container = avro.parse_container(data, path=path)
    try:
        return [
            _entry_from_record(r, path=path)
            for r in avro.decode_container_records(container, path=path)
        ]
    except (KeyError, IndexError, TypeError) as e:
        raise CorruptMetadataError(
            f"{path}: index manifest record does not match Paimon's IndexManifestEntry: {e!r}",
            path=path,
        ) from e


def read_index_manifest(file_io: FileIO, paths: PathFactory, name: str) -> list[IndexManifestEntry]:
    """Read the index manifest ``name`` of the table.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        name: The snapshot's ``indexManifest`` (``index-manifest-<uuid>-<n>``).

    Returns:
        A new list of the entries in file order.

    Raises:
        FileNotFoundError: No such file.
        CorruptMetadataError: Truncated or undecodable file.
        UnsupportedFormatVersionError: A record's ``_VERSION`` is not 1.

    Storage: one ``read_bytes`` of ``manifest/<name>`` on a miss of the process-wide
    decoded-metadata cache.
    """
    return decoded_cache.read_records(
        file_io, paths.index_manifest_path(name), decode_index_manifest, use_cache=True
    )


def write_index_manifest(
    file_io: FileIO,
    paths: PathFactory,
    entries: Sequence[IndexManifestEntry],
    *,
    compression: str,
) -> str:
    """Write ``entries`` as a new index manifest and return its name.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory (names the file).
        entries: The full index state (ADD entries), in order; may be empty.
        compression: Paimon ``manifest.compression``.

    Returns:
        The new name, ``index-manifest-<uuid>-<n>``, in the manifest directory.

    Raises:
        ValueError: An entry is a DELETE (stored index manifests hold ADDs only).
        InvalidOptionError: Unknown ``compression``.
        StorageError: The write failed.

    Storage: creates ``manifest/<name>`` with ``write_new``; deletes nothing.

    Source: Paimon ``IndexManifestFileHandler.write`` / ``IndexManifestFile.writeWithoutRolling``.
    """
    if any(e.kind != FileKind.ADD for e in entries):
        raise ValueError("a stored index manifest holds ADD entries only")
    name = paths.new_index_manifest_name()
    data = encode_index_manifest(entries, compression=compression)
    decoded_cache.write_records(file_io, paths.index_manifest_path(name), data, entries)
    return name


# --------------------------------------------------------------------------- combining


def combine_index_entries(
    previous: Iterable[IndexManifestEntry],
    changes: Iterable[IndexManifestEntry],
    *,
    by_file_name: Collection[str] = (),
) -> list[IndexManifestEntry]:
    """Apply a commit's index ADD/DELETE entries to the previous full state, per index type.

    HASH and DELETION_VECTORS entries are keyed by (partition, bucket, index
    type): DELETEs first, each removing the entries of its key (whatever file
    they name, as Java does); then each ADD replaces the entries of its key
    (the last ADD of a key wins). Entries of every other index type (Paimon's
    global indexes), and of the types in ``by_file_name``, are keyed by their
    file name instead, so one (partition, bucket) holds many such files (the
    DELETION_VECTORS files of a bucket-unaware append table).

    Args:
        previous: The previous snapshot's index manifest entries (all ADD).
        changes: The commit's ADD and DELETE entries.
        by_file_name: DELETION_VECTORS when the table combines them by file name.

    Returns:
        The new full state, all ADD: the untouched previous entries in their order,
        then the ADDs in the order their keys first came.

    Source: Paimon ``IndexManifestFileHandler`` (``BucketedCombiner`` for HASH and
    bucketed DELETION_VECTORS, ``GlobalCombiner`` for DELETION_VECTORS of
    ``BUCKET_UNAWARE`` tables, ``GlobalIndexCombiner`` for the other types).
    """

    def key(e: IndexManifestEntry) -> tuple[bytes, int, str]:
        kind = e.index_file.index_type
        if kind in by_file_name or kind not in (HASH_INDEX, DELETION_VECTORS_INDEX):
            return (b"", -1, e.index_file.file_name)
        return (e.partition, e.bucket, kind)

    changes = list(changes)
    adds = {key(e): e for e in changes if e.kind == FileKind.ADD}
    touched = {key(e) for e in changes if e.kind == FileKind.DELETE} | adds.keys()
    return [e for e in previous if key(e) not in touched] + list(adds.values())


# --------------------------------------------------------------------------- transport


def index_file_to_json_dict(meta: IndexFileMeta) -> dict[str, Any]:
    """Return the commit-message JSON object of ``meta`` (snaplake's transport, not Paimon's)."""
    ranges = None
    if meta.dv_ranges is not None:
        ranges = [[r.data_file_name, r.offset, r.length, r.cardinality] for r in meta.dv_ranges]
    return {
        "indexType": meta.index_type,
        "fileName": meta.file_name,
        "fileSize": meta.file_size,
        "rowCount": meta.row_count,
        "dvRanges": ranges,
        "externalPath": meta.external_path,
    }


def index_file_from_json_dict(data: dict[str, Any]) -> IndexFileMeta:
    """Inverse of :func:`index_file_to_json_dict`.

    Raises:
        KeyError, TypeError: malformed object.
    """
    ranges = data["dvRanges"]
    return IndexFileMeta(
        index_type=str(data["indexType"]),
        file_name=str(data["fileName"]),
        file_size=int(data["fileSize"]),
        row_count=int(data["rowCount"]),
        dv_ranges=None
        if ranges is None
        else tuple(DeletionVectorMeta(str(n), int(o), int(ln), c) for n, o, ln, c in ranges),
        external_path=data["externalPath"],
    )
