"""Data file metadata: ``DataFileMeta``, ``SimpleStats`` and their Avro and JSON shapes.

This module owns the value types describing one data file as Paimon records
it inside a manifest entry, the Avro schema of those records, and the JSON
transport form used when a ``CommitMessage`` travels from a Spark executor to
the driver. BinaryRow payloads (keys, stats bounds) are opaque ``bytes`` here;
the BinaryRow codec lives elsewhere.

It imports only the standard library, so every other store module may depend on it.
"""

from __future__ import annotations

import binascii
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any, Final

__all__ = [
    "DATA_FILE_META_AVRO_SCHEMA",
    "EMPTY_BINARY_ROW",
    "EMPTY_STATS",
    "creation_time_now_ms",
    "DataFileIdentifier",
    "DataFileMeta",
    "FileSource",
    "SimpleStats",
    "data_file_meta_from_json_dict",
    "data_file_meta_to_json_dict",
    "simple_stats_avro_schema",
]

EMPTY_BINARY_ROW: Final[bytes] = b"\x00" * 12
"""The serialized BinaryRow of arity 0: a 4-byte big-endian arity (0) and one 8-byte
header/null-bitset word. Paimon never writes zero bytes for "no row"."""

DataFileIdentifier = tuple[int, str, tuple[str, ...], bytes | None, str | None]
"""``(level, file_name, extra_files, embedded_index, external_path)``."""


class FileSource(IntEnum):
    """Why a data file exists; the value is the on-disk ``_FILE_SOURCE`` int.

    Source:
        Paimon ``org.apache.paimon.manifest.FileSource`` (APPEND = 0, COMPACT = 1).
    """

    APPEND = 0
    COMPACT = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class SimpleStats:
    """Per-column min, max and null counts of a file, as Paimon stores them.

    Attributes:
        min_values: Serialized BinaryRow (opaque bytes) holding each column's minimum;
            ``EMPTY_BINARY_ROW`` when there are no stats.
        max_values: Serialized BinaryRow holding each column's maximum.
        null_counts: One count per column (``None`` = unknown for that column), or
            ``None`` when the whole array is absent.

    Source:
        Paimon ``org.apache.paimon.stats.SimpleStats`` (``EMPTY_STATS`` = two empty rows
        and an empty null-count array).
    """

    min_values: bytes
    max_values: bytes
    null_counts: tuple[int | None, ...] | None

    def to_json_dict(self) -> dict[str, Any]:
        """Return the JSON transport form: bytes as base64, null counts as a list.

        Returns:
            ``{"minValues": str, "maxValues": str, "nullCounts": list | None}``.
        """
        nc = self.null_counts
        return {
            "minValues": _b64(self.min_values),
            "maxValues": _b64(self.max_values),
            "nullCounts": None if nc is None else list(nc),
        }

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any]) -> SimpleStats:
        """Rebuild stats from :meth:`to_json_dict` output.

        Args:
            d: The mapping; unknown keys are ignored.

        Returns:
            Equal stats.

        Raises:
            KeyError: A required key is missing.
            ValueError: A bytes field is not valid base64.
        """
        nc = d.get("nullCounts")
        return cls(
            min_values=_unb64(d["minValues"]),
            max_values=_unb64(d["maxValues"]),
            null_counts=None if nc is None else tuple(nc),
        )


EMPTY_STATS: Final[SimpleStats] = SimpleStats(
    min_values=EMPTY_BINARY_ROW, max_values=EMPTY_BINARY_ROW, null_counts=()
)
"""What Paimon (Java and pypaimon) writes for "no stats": two 12-byte empty rows and an
empty (not null) null-count array."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DataFileMeta:
    """Metadata of one data file (Parquet/ORC/Avro) as recorded in a manifest entry.

    Field order and meaning follow the ``_FILE`` record of Paimon's manifest schema.
    All BinaryRow values are opaque ``bytes``.

    Attributes:
        file_name: Bare file name (``data-<uuid>-<n>.parquet``), no directory.
        file_size_bytes: Size of the data file in bytes.
        row_count: Number of rows in the file (including deleted ones).
        min_key: Serialized BinaryRow of the smallest primary key
            (``EMPTY_BINARY_ROW`` on append tables).
        max_key: Serialized BinaryRow of the largest primary key.
        key_stats: Stats over the key columns.
        value_stats: Stats over the value columns (all columns, or
            ``value_stats_cols`` when that is set).
        min_sequence_number: Smallest sequence number of a row in the file.
        max_sequence_number: Largest sequence number of a row in the file.
        schema_id: Id of the table schema the file was written with.
        level: LSM level (0 for append tables and fresh files).
        extra_files: Names of companion files (e.g. file indexes) next to the file.
        creation_time_ms: Paimon's ``_CREATION_TIME`` as stored: a ``timestamp-millis``
            long holding the writer's *local* wall-clock time (Paimon's TIMESTAMP
            without time zone), or ``None`` when absent.
        delete_row_count: Rows marked deleted inside the file, or ``None`` if unknown.
        embedded_index: Serialized file index embedded in the manifest, or ``None``.
        file_source: Whether an append or a compaction produced the file, or ``None``.
        value_stats_cols: Names of the columns ``value_stats`` covers; ``None`` means
            all columns of schema ``schema_id``; ``()`` means none.
        external_path: Full path of the file when it lives outside the table
            directory, else ``None``.
        first_row_id: Row id of the first row (row-tracking tables), else ``None``.
        write_cols: Columns physically written to the file (partial writes), else ``None``.
        write_cols_sequences: Per-write-column sequence numbers (Paimon's
            ``_WRITE_COLS_SEQUENCES``), else ``None``.

    Source:
        Paimon ``org.apache.paimon.io.DataFileMeta`` (``SCHEMA``, 21 fields) and
        pypaimon 2.1.0 ``manifest/schema/data_file_meta.py``.
    """

    file_name: str
    file_size_bytes: int
    row_count: int
    min_key: bytes
    max_key: bytes
    key_stats: SimpleStats
    value_stats: SimpleStats
    min_sequence_number: int
    max_sequence_number: int
    schema_id: int
    level: int
    extra_files: tuple[str, ...]
    creation_time_ms: int | None = None
    delete_row_count: int | None = None
    embedded_index: bytes | None = None
    file_source: FileSource | None = None
    value_stats_cols: tuple[str, ...] | None = None
    external_path: str | None = None
    first_row_id: int | None = None
    write_cols: tuple[str, ...] | None = None
    write_cols_sequences: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.row_count < 0:
            raise ValueError(f"row_count must be >= 0, got {self.row_count}")
        if self.file_size_bytes < 0:
            raise ValueError(f"file_size_bytes must be >= 0, got {self.file_size_bytes}")

    def identifier(self) -> DataFileIdentifier:
        """Return the file part of Paimon's file-entry identity.

        A manifest entry's full identity is ``(partition, bucket) + this``; see
        :meth:`snaplake.store.format.manifest.ManifestEntry.identifier`.

        Returns:
            ``(level, file_name, extra_files, embedded_index, external_path)``.

        Source:
            Paimon ``FileEntry.Identifier`` (minus partition and bucket).
        """
        return (
            self.level,
            self.file_name,
            self.extra_files,
            self.embedded_index,
            self.external_path,
        )

    def with_sequence_range(
        self, min_sequence_number: int, max_sequence_number: int
    ) -> DataFileMeta:
        """Return a copy with a new sequence number range.

        Args:
            min_sequence_number: New smallest sequence number.
            max_sequence_number: New largest sequence number.

        Returns:
            The updated copy; ``self`` is unchanged.
        """
        return replace(
            self,
            min_sequence_number=min_sequence_number,
            max_sequence_number=max_sequence_number,
        )

    def without_value_stats(self) -> DataFileMeta:
        """Return a copy whose value stats are Paimon's empty stats (``value_stats_cols=()``).

        Source:
            Paimon ``DataFileMeta.copyWithoutStats``.
        """
        return replace(self, value_stats=EMPTY_STATS, value_stats_cols=())

    def to_json_dict(self) -> dict[str, Any]:
        """Return the JSON transport form; see :func:`data_file_meta_to_json_dict`."""
        return data_file_meta_to_json_dict(self)

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any]) -> DataFileMeta:
        """Rebuild from the JSON transport form; see :func:`data_file_meta_from_json_dict`."""
        return data_file_meta_from_json_dict(d)


class _DataFileMetaBuilder:
    """Mutable twin of :class:`DataFileMeta` with the same slot layout.

    Decoders fill one with plain attribute stores, then switch its class to
    ``DataFileMeta``. A frozen dataclass ``__init__`` routes each of its 21
    fields through ``object.__setattr__`` (about 3 us per object); this path takes
    about 0.5 us, which matters when a scan decodes 100,000 entries.
    ``__post_init__`` checks are skipped: the values come from a decoded file.
    """

    __slots__ = DataFileMeta.__slots__


def _fast_data_file_meta(
    file_name: str,
    file_size_bytes: int,
    row_count: int,
    min_key: bytes,
    max_key: bytes,
    key_stats: SimpleStats,
    value_stats: SimpleStats,
    min_sequence_number: int,
    max_sequence_number: int,
    schema_id: int,
    level: int,
    extra_files: tuple[str, ...],
    creation_time_ms: int | None,
    delete_row_count: int | None,
    embedded_index: bytes | None,
    file_source: FileSource | None,
    value_stats_cols: tuple[str, ...] | None,
    external_path: str | None,
    first_row_id: int | None,
    write_cols: tuple[str, ...] | None,
    write_cols_sequences: tuple[int, ...] | None,
) -> DataFileMeta:
    """Build a ``DataFileMeta`` without the frozen-dataclass ``__init__`` (decoder hot path)."""
    o: Any = _DataFileMetaBuilder()
    o.file_name = file_name
    o.file_size_bytes = file_size_bytes
    o.row_count = row_count
    o.min_key = min_key
    o.max_key = max_key
    o.key_stats = key_stats
    o.value_stats = value_stats
    o.min_sequence_number = min_sequence_number
    o.max_sequence_number = max_sequence_number
    o.schema_id = schema_id
    o.level = level
    o.extra_files = extra_files
    o.creation_time_ms = creation_time_ms
    o.delete_row_count = delete_row_count
    o.embedded_index = embedded_index
    o.file_source = file_source
    o.value_stats_cols = value_stats_cols
    o.external_path = external_path
    o.first_row_id = first_row_id
    o.write_cols = write_cols
    o.write_cols_sequences = write_cols_sequences
    o.__class__ = DataFileMeta
    result: DataFileMeta = o
    return result


class _SimpleStatsBuilder:
    """Mutable twin of :class:`SimpleStats`; see :class:`_DataFileMetaBuilder`."""

    __slots__ = SimpleStats.__slots__


def _fast_simple_stats(
    min_values: bytes, max_values: bytes, null_counts: tuple[int | None, ...] | None
) -> SimpleStats:
    """Build a ``SimpleStats`` without the frozen-dataclass ``__init__`` (decoder hot path)."""
    o: Any = _SimpleStatsBuilder()
    o.min_values = min_values
    o.max_values = max_values
    o.null_counts = null_counts
    o.__class__ = SimpleStats
    result: SimpleStats = o
    return result


# --------------------------------------------------------------------------- Avro schema


def simple_stats_avro_schema(record_name: str) -> dict[str, Any]:
    """Return the Avro record schema of a ``SimpleStats`` field.

    Args:
        record_name: The Avro record name; Paimon writers use ``record_<FIELD>``
            (``record_KEY_STATS``, ``record_VALUE_STATS``, ``record_PARTITION_STATS``)
            because Avro names must be unique inside one schema.

    Returns:
        A fresh schema dict (``_MIN_VALUES`` bytes, ``_MAX_VALUES`` bytes,
        ``_NULL_COUNTS`` nullable array of nullable long).

    Source:
        Paimon ``SimpleStats.SCHEMA``; record naming as written by pypaimon 2.1.0.
    """
    return {
        "type": "record",
        "name": record_name,
        "fields": [
            {"name": "_MIN_VALUES", "type": "bytes"},
            {"name": "_MAX_VALUES", "type": "bytes"},
            {
                "name": "_NULL_COUNTS",
                "type": ["null", {"type": "array", "items": ["null", "long"]}],
                "default": None,
            },
        ],
    }


def _nullable(avro_type: Any) -> list[Any]:
    return ["null", avro_type]


DATA_FILE_META_AVRO_SCHEMA: Final[dict[str, Any]] = {
    "type": "record",
    "name": "DataFileMeta",
    "fields": [
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_MIN_KEY", "type": "bytes"},
        {"name": "_MAX_KEY", "type": "bytes"},
        {"name": "_KEY_STATS", "type": simple_stats_avro_schema("record_KEY_STATS")},
        {"name": "_VALUE_STATS", "type": simple_stats_avro_schema("record_VALUE_STATS")},
        {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_SCHEMA_ID", "type": "long"},
        {"name": "_LEVEL", "type": "int"},
        {"name": "_EXTRA_FILES", "type": {"type": "array", "items": "string"}},
        {
            "name": "_CREATION_TIME",
            "type": _nullable({"type": "long", "logicalType": "timestamp-millis"}),
            "default": None,
        },
        {"name": "_DELETE_ROW_COUNT", "type": _nullable("long"), "default": None},
        {"name": "_EMBEDDED_FILE_INDEX", "type": _nullable("bytes"), "default": None},
        {"name": "_FILE_SOURCE", "type": _nullable("int"), "default": None},
        {
            "name": "_VALUE_STATS_COLS",
            "type": _nullable({"type": "array", "items": "string"}),
            "default": None,
        },
        {"name": "_EXTERNAL_PATH", "type": _nullable("string"), "default": None},
        {"name": "_FIRST_ROW_ID", "type": _nullable("long"), "default": None},
        {
            "name": "_WRITE_COLS",
            "type": _nullable({"type": "array", "items": "string"}),
            "default": None,
        },
        {
            "name": "_WRITE_COLS_SEQUENCES",
            "type": _nullable({"type": "array", "items": "long"}),
            "default": None,
        },
    ],
}
"""Avro schema of the ``_FILE`` record, field for field as pypaimon 2.1.0 writes it.

Java Paimon writes the same fields under generated record names
(``org.apache.paimon.avro.generated.record_...``); readers resolve by field name.
``_CREATION_TIME`` is decoded as a raw long (see ``creation_time_ms``)."""


# --------------------------------------------------------------------------- JSON transport


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _unb64(text: str) -> bytes:
    return binascii.a2b_base64(text, strict_mode=True)


def _opt_tuple(value: Any) -> Any:
    """``None`` stays ``None``; a decoded array becomes a tuple (also used by the manifests)."""
    return None if value is None else tuple(value)


def _opt_list(value: Any) -> Any:
    """``None`` stays ``None``; a tuple field becomes a list to encode (also the manifests)."""
    return None if value is None else list(value)


def data_file_meta_to_json_dict(meta: DataFileMeta) -> dict[str, Any]:
    """Return the JSON transport form of ``meta`` (what ``CommitMessage`` ships).

    Keys are literal camelCase names; bytes are base64 (RFC 4648, no newline);
    tuples become lists; every key is present (``None`` as ``null``) so the
    round trip is exact.

    Args:
        meta: The file metadata.

    Returns:
        A dict of JSON-native values, ready for ``orjson.dumps``.
    """
    ks = meta.key_stats
    vs = meta.value_stats
    fs = meta.file_source
    ei = meta.embedded_index
    return {
        "fileName": meta.file_name,
        "fileSize": meta.file_size_bytes,
        "rowCount": meta.row_count,
        "minKey": _b64(meta.min_key),
        "maxKey": _b64(meta.max_key),
        "keyStats": {
            "minValues": _b64(ks.min_values),
            "maxValues": _b64(ks.max_values),
            "nullCounts": _opt_list(ks.null_counts),
        },
        "valueStats": {
            "minValues": _b64(vs.min_values),
            "maxValues": _b64(vs.max_values),
            "nullCounts": _opt_list(vs.null_counts),
        },
        "minSequenceNumber": meta.min_sequence_number,
        "maxSequenceNumber": meta.max_sequence_number,
        "schemaId": meta.schema_id,
        "level": meta.level,
        "extraFiles": list(meta.extra_files),
        "creationTime": meta.creation_time_ms,
        "deleteRowCount": meta.delete_row_count,
        "embeddedIndex": None if ei is None else _b64(ei),
        "fileSource": None if fs is None else int(fs),
        "valueStatsCols": _opt_list(meta.value_stats_cols),
        "externalPath": meta.external_path,
        "firstRowId": meta.first_row_id,
        "writeCols": _opt_list(meta.write_cols),
        "writeColsSequences": _opt_list(meta.write_cols_sequences),
    }


def _stats_from_json(d: Mapping[str, Any]) -> SimpleStats:
    nc = d.get("nullCounts")
    return _fast_simple_stats(
        _unb64(d["minValues"]), _unb64(d["maxValues"]), None if nc is None else tuple(nc)
    )


def data_file_meta_from_json_dict(d: Mapping[str, Any]) -> DataFileMeta:
    """Rebuild a ``DataFileMeta`` from :func:`data_file_meta_to_json_dict` output.

    Unknown keys are ignored; absent optional keys take their defaults.

    Args:
        d: The mapping (as parsed by ``orjson.loads``).

    Returns:
        A ``DataFileMeta`` equal to the one that was serialized.

    Raises:
        KeyError: A required key is missing.
        ValueError: A bytes field is not valid base64, ``fileSource`` is not a known
            value, or a count is negative.
    """
    ei = d.get("embeddedIndex")
    fs = d.get("fileSource")
    return DataFileMeta(
        file_name=d["fileName"],
        file_size_bytes=d["fileSize"],
        row_count=d["rowCount"],
        min_key=_unb64(d["minKey"]),
        max_key=_unb64(d["maxKey"]),
        key_stats=_stats_from_json(d["keyStats"]),
        value_stats=_stats_from_json(d["valueStats"]),
        min_sequence_number=d["minSequenceNumber"],
        max_sequence_number=d["maxSequenceNumber"],
        schema_id=d["schemaId"],
        level=d["level"],
        extra_files=tuple(d["extraFiles"]),
        creation_time_ms=d.get("creationTime"),
        delete_row_count=d.get("deleteRowCount"),
        embedded_index=None if ei is None else _unb64(ei),
        file_source=None if fs is None else FileSource(fs),
        value_stats_cols=_opt_tuple(d.get("valueStatsCols")),
        external_path=d.get("externalPath"),
        first_row_id=d.get("firstRowId"),
        write_cols=_opt_tuple(d.get("writeCols")),
        write_cols_sequences=_opt_tuple(d.get("writeColsSequences")),
    )


def creation_time_now_ms() -> int:
    """Now as Paimon's ``_CREATION_TIME``: local wall-clock time as zone-less epoch millis.

    Source: Paimon ``DataFileMeta`` (``Timestamp.fromLocalDateTime(LocalDateTime.now())``).
    """
    now_s = time.time()
    return int((now_s + time.localtime(now_s).tm_gmtoff) * 1000)
