"""Data file formats: one reader and writer per ``file.format`` (Parquet, ORC, Avro).

The format of a data file is the extension of its name (``data-<uuid>-<n>.orc``),
so a table whose ``file.format`` changed over time holds files of several
formats and reads them all; new files (writers and compaction) use the
table's current ``file.format``. Every format reads into and writes from the
table's Arrow schema, so value statistics (computed from the Arrow data) and
stats pruning are the same whatever the format.

What each format writes, and why (readable by Java Paimon and pypaimon alike):

* **parquet**: pyarrow's writer, DECIMAL(p <= 9 | 18) stored as INT32 | INT64
  as Java's ``ParquetRowDataWriter`` does (Java Paimon 0.9 cannot read
  pyarrow's default fixed-length encoding of them); BINARY(n) (Arrow
  ``fixed_size_binary(n)``) stored as BYTE_ARRAY, as Java's
  ``ParquetSchemaConverter`` does (pypaimon writes FIXED_LEN_BYTE_ARRAY;
  both read back); ``file.compression`` =
  ``zstd`` (level ``file.compression.zstd-level``), ``snappy``, ``gzip``,
  ``brotli``, ``lz4`` / ``lz4_raw``, ``none`` / ``uncompressed``.
* **orc**: ``pyarrow.orc`` with Java's ORC types: BINARY(n) as ``binary``, TIME as ORC ``int``
  (milliseconds), TIMESTAMP as ``timestamp``, TIMESTAMP WITH LOCAL TIME ZONE
  as ``timestamp`` holding the UTC wall clock (Java's default
  ``orc.timestamp-ltz.legacy.type = true``; ``false`` writes
  ``timestamp with local time zone``). Fields are matched by name, as Java's
  ORC reader does (pyarrow cannot write Java's ``paimon.id`` attributes,
  and Java does not need them). ``file.compression`` = ``zstd`` (level 1
  only: pyarrow's ORC writer has no level setting), ``snappy``, ``lz4``,
  ``zlib``, ``none``.
* **avro**: the schema Java's ``AvroSchemaConverter`` builds (record
  ``org.apache.paimon.avro.generated.record``, nullable fields as ``["null",
  T]`` with default null, DECIMAL as ``bytes``/``decimal``, DATE ``int``/
  ``date``, TIME(p <= 3) ``int``/``time-millis``, TIMESTAMP(p <= 3 | 6)
  ``long``/``timestamp-millis | -micros``, TIMESTAMP_LTZ ``long``/
  ``local-timestamp-millis | -micros``), values encoded from their raw
  integers (no time-zone conversion); ``file.compression`` = ``zstd``,
  ``snappy``, ``deflate``, ``bzip2``, ``xz``, ``none``. Nested types and
  TIMESTAMP(p > 6) / TIME(p > 3) are refused (Java refuses the latter two).

Source: Paimon ``FileFormat`` / ``OrcFileFormat`` / ``OrcTypeUtil`` /
``AvroFileFormat`` / ``AvroSchemaConverter`` / ``FileStorePathFactory``
(file extensions); pypaimon ``FileIO.write_orc`` / ``write_avro`` and its
format readers.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Self

import pyarrow as pa
import pyarrow.parquet as pq

from snaplake.options import CoreOptions
from snaplake.store.format import avro_data
from snaplake.store.format.types import DataType, TypeRoot, variable_binary_schema

__all__ = [
    "DataFileSpec",
    "FileFormat",
    "FormatWriter",
    "file_format",
    "format_of_file",
]


class FormatWriter(Protocol):
    """Writes one data file piece by piece; :meth:`close` finishes it (also on ``with`` exit)."""

    def write(self, data: pa.Table) -> None:
        """Append ``data`` (the table's Arrow schema) to the file."""

    def close(self) -> None:
        """Write the footer; the stream stays open (its owner closes it)."""

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class _Writer:
    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FileFormat(abc.ABC):
    """One data file format: its name, extension, compressions, reader and writer."""

    name: str
    """``file.format`` value and file extension (``parquet``, ``orc``, ``avro``)."""

    @abc.abstractmethod
    def compression_refusal(self, compression: str, zstd_level: int) -> str | None:
        """Return why ``file.compression`` (and level) cannot be written, or ``None``."""

    def type_refusal(self, types: Sequence[DataType]) -> str | None:
        """Return why columns of these Paimon types cannot be written, or ``None``."""
        return None

    @abc.abstractmethod
    def open_writer(
        self, stream: Any, schema: pa.Schema, *, compression: str, zstd_level: int, **options: Any
    ) -> FormatWriter:
        """Start a file on the writable binary ``stream`` for rows of ``schema``.

        Args:
            stream: A pyarrow ``NativeFile`` or a writable file-like object.
            schema: The table's Arrow schema.
            compression: ``file.compression`` (accepted by :meth:`compression_refusal`).
            zstd_level: ``file.compression.zstd-level``.
            **options: Format-specific tuning (Parquet: ``dictionary_pagesize_limit``,
                ``use_dictionary``; ORC: ``ltz_legacy``); others ignore them.
        """

    def write(
        self, data: pa.Table, stream: Any, *, compression: str, zstd_level: int, **options: Any
    ) -> None:
        """Write ``data`` as one complete file on ``stream``."""
        with self.open_writer(
            stream, data.schema, compression=compression, zstd_level=zstd_level, **options
        ) as writer:
            writer.write(data)

    @abc.abstractmethod
    def field_names(self, source: Any) -> list[str]:
        """Return the names of the file's top-level columns, in file order.

        Reads only the file's schema (Parquet and ORC footer, Avro header) and
        leaves ``source`` at the position it had.

        Raises:
            OSError: the file is not a valid file of this format.
        """

    @abc.abstractmethod
    def iter_batches(
        self, source: Any, schema: pa.Schema, *, batch_rows: int = 65_536
    ) -> Iterator[pa.Table]:
        """Yield the file's rows as tables of ``schema`` (columns by name), in file order.

        Args:
            source: A seekable binary input (pyarrow ``NativeFile`` or file object).
            schema: The columns to return, with the table's Arrow types; a
                column the file lacks raises (schema evolution maps them first).
            batch_rows: Rows per piece (an upper bound; Avro yields per block).

        Raises:
            UnsupportedTypeError: the file stores a column in a way snaplake
                cannot convert to its Arrow type.
            OSError: the file is not a valid file of this format.
        """

    def read(self, source: Any, schema: pa.Schema, *, use_threads: bool = False) -> pa.Table:
        """Read the whole file as one table of ``schema`` (see :meth:`iter_batches`).

        ``use_threads``: decode columns in parallel on Arrow's CPU pool, where
        the format's reader can (Parquet): for query reads, which a dataset
        scan would thread as well; compaction keeps the default for bounded
        memory per task.
        """
        pieces = list(self.iter_batches(source, schema, batch_rows=1 << 30))
        return pa.concat_tables(pieces) if pieces else schema.empty_table()


# ----------------------------------------------------------------------------- parquet


_PARQUET_CODECS = {
    "zstd": "zstd",
    "snappy": "snappy",
    "gzip": "gzip",
    "brotli": "brotli",
    "lz4": "lz4",
    "lz4_raw": "lz4",
    "none": "none",
    "uncompressed": "none",
}


_last_parquet_schema: tuple[pa.Schema, pa.Schema] | None = None
"""The last (schema, written schema) pair: every file of a table has the same schema."""


def _to_parquet(data: pa.Table) -> pa.Table:
    """``data`` as written: BINARY(n) as ``binary`` (Java's BYTE_ARRAY; no copy otherwise).

    The written schema is remembered for the last schema seen (an equality
    check is ~0.05 µs, rebuilding it ~40 µs per file on the commit path).
    """
    target = _parquet_schema(data.schema)
    return data if target.equals(data.schema) else data.cast(target)


def _parquet_schema(schema: pa.Schema) -> pa.Schema:
    """``variable_binary_schema(schema)``, remembered for the last schema seen."""
    global _last_parquet_schema
    last = _last_parquet_schema  # one read: writer threads may replace it meanwhile
    if last is not None and last[0].equals(schema):
        return last[1]
    target = variable_binary_schema(schema)
    _last_parquet_schema = (schema, target)
    return target


class _ParquetWriter(_Writer):
    def __init__(self, writer: pq.ParquetWriter) -> None:
        self._writer = writer

    def write(self, data: pa.Table) -> None:
        self._writer.write_table(_to_parquet(data), row_group_size=max(1, data.num_rows))

    def close(self) -> None:
        self._writer.close()


_DICTIONARY_MIN_ROWS = 16_384
"""Rows above which a one-shot Parquet file gets dictionary pages (see ``ParquetFormat.write``)."""


class ParquetFormat(FileFormat):
    """Parquet through pyarrow."""

    name = "parquet"

    def compression_refusal(self, compression: str, zstd_level: int) -> str | None:
        """See :meth:`FileFormat.compression_refusal`."""
        if compression.lower() not in _PARQUET_CODECS:
            return f"Parquet compression must be one of {sorted(_PARQUET_CODECS)}"
        return None

    def open_writer(
        self, stream: Any, schema: pa.Schema, *, compression: str, zstd_level: int, **options: Any
    ) -> FormatWriter:
        """See :meth:`FileFormat.open_writer`."""
        codec = _PARQUET_CODECS[compression.lower()]
        kwargs = {
            k: options[k] for k in ("dictionary_pagesize_limit", "use_dictionary") if k in options
        }
        return _ParquetWriter(
            pq.ParquetWriter(
                stream,
                _parquet_schema(schema),
                compression=codec,
                compression_level=zstd_level if codec == "zstd" else None,
                store_decimal_as_integer=True,
                **kwargs,
            )
        )

    def write(
        self, data: pa.Table, stream: Any, *, compression: str, zstd_level: int, **options: Any
    ) -> None:
        """See :meth:`FileFormat.write` (one ``pq.write_table``: pyarrow's row-group sizing).

        Files of up to :data:`_DICTIONARY_MIN_ROWS` rows (a streaming
        writer's typical flush) are written without dictionary pages: on such
        files zstd removes the repetition a dictionary would, and plain pages
        encode faster (1,100 flights rows: 1.16 -> 0.87 ms, 36.7 -> 35.4 KB).
        Larger files keep pyarrow's dictionary encoding. Only the byte layout
        differs; every Parquet reader reads both.
        """
        codec = _PARQUET_CODECS[compression.lower()]
        pq.write_table(
            _to_parquet(data),
            stream,
            compression=codec,
            compression_level=zstd_level if codec == "zstd" else None,
            store_decimal_as_integer=True,
            use_dictionary=data.num_rows > _DICTIONARY_MIN_ROWS,
        )

    def read(self, source: Any, schema: pa.Schema, *, use_threads: bool = False) -> pa.Table:
        """See :meth:`FileFormat.read` (``use_threads`` decodes columns in parallel)."""
        return (
            pq.ParquetFile(source).read(columns=schema.names, use_threads=use_threads).cast(schema)
        )

    def field_names(self, source: Any) -> list[str]:
        """See :meth:`FileFormat.field_names`."""
        position = source.tell()
        names = list(pq.ParquetFile(source).schema_arrow.names)
        source.seek(position)
        return names

    def iter_batches(
        self, source: Any, schema: pa.Schema, *, batch_rows: int = 65_536
    ) -> Iterator[pa.Table]:
        """See :meth:`FileFormat.iter_batches`."""
        reader = pq.ParquetFile(source)
        if batch_rows >= reader.metadata.num_rows:
            yield reader.read(columns=schema.names, use_threads=False).cast(schema)
            return
        for batch in reader.iter_batches(
            batch_size=batch_rows, columns=schema.names, use_threads=False
        ):
            yield pa.Table.from_batches([batch]).cast(schema)


# ----------------------------------------------------------------------------- orc


_ORC_CODECS = {
    "zstd": "zstd",
    "snappy": "snappy",
    "lz4": "lz4",
    "zlib": "zlib",
    "none": "uncompressed",
}


def _orc_arrow_type(t: pa.DataType, *, ltz_legacy: bool) -> pa.DataType:
    """The Arrow type pyarrow writes as the ORC type Java Paimon uses."""
    if pa.types.is_time(t):
        return pa.int32()
    if pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_timestamp(t) and t.tz is not None and ltz_legacy:
        return pa.timestamp(t.unit)
    if pa.types.is_list(t):
        item = t.value_field
        return pa.list_(item.with_type(_orc_arrow_type(item.type, ltz_legacy=ltz_legacy)))
    if pa.types.is_map(t):
        return pa.map_(
            t.key_field.with_type(_orc_arrow_type(t.key_type, ltz_legacy=ltz_legacy)),
            t.item_field.with_type(_orc_arrow_type(t.item_type, ltz_legacy=ltz_legacy)),
        )
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_orc_arrow_type(f.type, ltz_legacy=ltz_legacy)) for f in t])
    return t


def _orc_schema(schema: pa.Schema, *, ltz_legacy: bool) -> pa.Schema:
    return pa.schema([f.with_type(_orc_arrow_type(f.type, ltz_legacy=ltz_legacy)) for f in schema])


def _from_orc(column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """Cast a column as pyarrow read it from ORC to the table's Arrow type."""
    if pa.types.is_time(target):
        return column.cast(pa.int32()).cast(target)
    if pa.types.is_timestamp(target) and target.tz is not None and column.type.tz is None:
        column = column.cast(pa.timestamp(column.type.unit, tz=target.tz))
    return column.cast(target)


class _OrcWriter(_Writer):
    def __init__(self, stream: Any, schema: pa.Schema, compression: str, *, ltz_legacy: bool):
        import pyarrow.orc as orc

        self._schema = _orc_schema(schema, ltz_legacy=ltz_legacy)
        self._writer = orc.ORCWriter(stream, compression=compression)

    def write(self, data: pa.Table) -> None:
        arrays = [
            c.cast(f.type) if c.type != f.type else c
            for c, f in zip(data.columns, self._schema, strict=True)
        ]
        self._writer.write(pa.Table.from_arrays(arrays, schema=self._schema))

    def close(self) -> None:
        self._writer.close()


class OrcFormat(FileFormat):
    """ORC through ``pyarrow.orc`` with Java Paimon's type mapping."""

    name = "orc"

    def compression_refusal(self, compression: str, zstd_level: int) -> str | None:
        """See :meth:`FileFormat.compression_refusal`."""
        codec = _ORC_CODECS.get(compression.lower())
        if codec is None:
            return f"ORC compression must be one of {sorted(_ORC_CODECS)}"
        if codec == "zstd" and zstd_level != 1:
            return "pyarrow's ORC writer cannot set a zstd level; only level 1 (the default)"
        return None

    def open_writer(
        self, stream: Any, schema: pa.Schema, *, compression: str, zstd_level: int, **options: Any
    ) -> FormatWriter:
        """See :meth:`FileFormat.open_writer`.

        ``ltz_legacy`` is ``orc.timestamp-ltz.legacy.type`` (default true).
        """
        return _OrcWriter(
            stream,
            schema,
            _ORC_CODECS[compression.lower()],
            ltz_legacy=bool(options.get("ltz_legacy", True)),
        )

    def field_names(self, source: Any) -> list[str]:
        """See :meth:`FileFormat.field_names`."""
        import pyarrow.orc as orc

        position = source.tell()
        names = list(orc.ORCFile(source).schema.names)
        source.seek(position)
        return names

    def iter_batches(
        self, source: Any, schema: pa.Schema, *, batch_rows: int = 65_536
    ) -> Iterator[pa.Table]:
        """See :meth:`FileFormat.iter_batches` (one piece per ORC stripe)."""
        import pyarrow.orc as orc

        reader = orc.ORCFile(source)
        for i in range(reader.nstripes):
            batch = reader.read_stripe(i, columns=schema.names)
            table = pa.Table.from_batches([batch])
            yield pa.Table.from_arrays(
                [_from_orc(table.column(f.name), f.type) for f in schema], schema=schema
            )


# ----------------------------------------------------------------------------- avro


class AvroFormat(FileFormat):
    """Avro object containers with Java Paimon's schema (see :mod:`avro_data`)."""

    name = "avro"

    def compression_refusal(self, compression: str, zstd_level: int) -> str | None:
        """See :meth:`FileFormat.compression_refusal`."""
        return avro_data.compression_refusal(compression)

    def type_refusal(self, types: Sequence[DataType]) -> str | None:
        """See :meth:`FileFormat.type_refusal`."""
        for t in types:
            if t.root in (TypeRoot.ARRAY, TypeRoot.MAP, TypeRoot.MULTISET, TypeRoot.ROW):
                return f"snaplake does not write {t.sql()} columns to Avro data files"
            if t.root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ) and (t.precision or 0) > 6:
                return f"Avro stores no {t.sql()} (Java Paimon refuses precision above 6)"
            if t.root is TypeRoot.TIME and (t.precision or 0) > 3:
                return f"Avro stores no {t.sql()} (Java Paimon refuses precision above 3)"
        return None

    def open_writer(
        self, stream: Any, schema: pa.Schema, *, compression: str, zstd_level: int, **options: Any
    ) -> FormatWriter:
        """See :meth:`FileFormat.open_writer`."""
        return avro_data.AvroDataWriter(
            stream, schema, compression=compression, zstd_level=zstd_level
        )

    def field_names(self, source: Any) -> list[str]:
        """See :meth:`FileFormat.field_names` (reads the container header only)."""
        position = source.tell()
        names = avro_data.field_names(source)
        source.seek(position)
        return names

    def iter_batches(
        self, source: Any, schema: pa.Schema, *, batch_rows: int = 65_536
    ) -> Iterator[pa.Table]:
        """See :meth:`FileFormat.iter_batches` (the file is read whole: Avro has no index)."""
        yield avro_data.read_avro_data(source.read(), schema)


_HADOOP_EXTENSIONS = {
    "none": "",
    "gzip": "gz",
    "bzip2": "bz2",
    "deflate": "deflate",
    "snappy": "snappy",
    "lz4": "lz4",
    "zstd": "zst",
}

_FORMATS: dict[str, FileFormat] = {f.name: f for f in (ParquetFormat(), OrcFormat(), AvroFormat())}


def file_format(name: str) -> FileFormat:
    """Return the format for a ``file.format`` value (case-insensitive).

    Raises:
        ValueError: not ``parquet``, ``orc`` or ``avro``.
    """
    found = _FORMATS.get(name.strip().lower())
    if found is None:
        raise ValueError(f"file format {name!r} is not one of {sorted(_FORMATS)}")
    return found


def format_of_file(file_name: str) -> FileFormat:
    """Return the format of a data file by its extension (``data-<uuid>-<n>.orc``).

    Raises:
        UnsupportedTypeError: the extension names no format snaplake reads
            (``.lance``, ``.blob``, ``.vortex``, ...).
    """
    from snaplake.errors import UnsupportedTypeError

    ext = file_name.rsplit(".", 1)[-1].lower() if "." in file_name else ""
    found = _FORMATS.get(ext)
    if found is None:
        raise UnsupportedTypeError(
            f"data file {file_name} has format {ext!r}; snaplake reads {sorted(_FORMATS)}"
        )
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class DataFileSpec:
    """How a table's new data files are written: format, compression and format options.

    Built from the table options with :meth:`from_options`; used by writers
    and compaction alike, so both write what the table says.

    Attributes:
        format: ``file.format``.
        compression: ``file.compression``.
        zstd_level: ``file.compression.zstd-level``.
        options: Format-specific writer options (ORC: ``ltz_legacy``).
        prefix: ``data-file.prefix`` of new file names.
        suffix_include_compression: ``file.suffix.include.compression``.
    """

    format: FileFormat
    compression: str
    zstd_level: int
    options: Mapping[str, Any] = field(default_factory=dict)
    prefix: str = "data-"
    suffix_include_compression: bool = False

    @classmethod
    def from_options(cls, options: CoreOptions, *, format_name: str | None = None) -> DataFileSpec:
        """Read ``file.format``, ``file.compression`` and the format's options.

        ``format_name`` overrides ``file.format`` (a primary-key level's
        ``file.format.per.level``, ``changelog-file.format``).

        Raises:
            ValueError: the format names no format snaplake writes (the
                table's ``check_supported`` refuses such tables first).
        """
        fmt = file_format(options.file_format if format_name is None else format_name)
        extra: dict[str, Any] = {}
        if fmt.name == "orc":
            extra["ltz_legacy"] = options.orc_timestamp_ltz_legacy_type
        return cls(
            format=fmt,
            compression=options.file_compression,
            zstd_level=options.file_compression_zstd_level,
            options=extra,
            prefix=options.data_file_prefix,
            suffix_include_compression=options.file_suffix_include_compression,
        )

    @property
    def extension(self) -> str:
        """File name extension of new files: ``<format>``, or ``<compression>.<format>``.

        With ``file.suffix.include.compression`` the compression's Hadoop file
        extension comes first (``zst.parquet``, ``snappy.orc``; none for
        ``none``), as Java names them; readers take the format from the last
        extension either way.

        Source: Paimon ``DataFilePathFactory.makeExtension`` and
        ``HadoopCompressionType.fileExtension``.
        """
        if self.suffix_include_compression:
            compression = self.compression.strip()
            suffix = _HADOOP_EXTENSIONS.get(compression.lower(), compression)
            if suffix:
                return f"{suffix}.{self.format.name}"
        return self.format.name

    def refusal(self, types: Sequence[DataType]) -> str | None:
        """Return why files of this spec cannot be written for columns of ``types``."""
        return self.format.compression_refusal(
            self.compression, self.zstd_level
        ) or self.format.type_refusal(types)

    def write(self, data: pa.Table, stream: Any) -> None:
        """Write ``data`` as one complete file on ``stream``."""
        self.format.write(
            data, stream, compression=self.compression, zstd_level=self.zstd_level, **self.options
        )

    def open_writer(self, stream: Any, schema: pa.Schema, **tuning: Any) -> FormatWriter:
        """Start a file on ``stream`` for rows of ``schema``.

        ``tuning`` is format-specific (Parquet's ``dictionary_pagesize_limit``);
        other formats ignore it.
        """
        return self.format.open_writer(
            stream,
            schema,
            compression=self.compression,
            zstd_level=self.zstd_level,
            **{**self.options, **tuning},
        )
