"""Avro data files (``file.format = avro``): Java Paimon's schema, raw-value encoding.

Writing builds the writer schema Java's ``AvroSchemaConverter`` builds for the
table's columns and encodes every value from its raw integer form (epoch
milliseconds or microseconds, epoch days, unscaled decimal bytes), so no
time-zone conversion can creep in (fastavro would read a naive ``datetime``
in the host's zone). Reading parses the file's own writer schema, decodes the
raw values (polars for speed, fastavro as the fallback) and converts them to
the table's Arrow types using the writer's logical types, so files written by
Java Paimon, pypaimon and snaplake read alike.

Source: Paimon ``AvroFileFormat`` / ``AvroSchemaConverter`` /
``FieldWriterFactory`` and ``FieldReaderFactory`` (value encodings); the Avro
1.11 specification (logical types, container files).
"""

from __future__ import annotations

import io
import os
from decimal import Context, Decimal
from typing import Any

import fastavro
import orjson
import pyarrow as pa
import zstandard

from snaplake.errors import SchemaMismatchError, UnsupportedTypeError
from snaplake.store.format import avro, avro_codecs

__all__ = [
    "AvroDataWriter",
    "avro_schema_json",
    "compression_refusal",
    "field_names",
    "read_avro_data",
]

_CODECS = {
    "zstd": "zstandard",
    "snappy": "snappy",
    "deflate": "deflate",
    "bzip2": "bzip2",
    "xz": "xz",
    "none": "null",
    "null": "null",
    "uncompressed": "null",
}
_BLOCK_ROWS = 4096
_EXACT = Context(prec=100)  # DECIMAL(38) and more, never rounded
_RECORD_NAME = "org.apache.paimon.avro.generated.record"
_AVRO_PRIMITIVES: dict[pa.DataType, str] = {
    pa.bool_(): "boolean",
    pa.int8(): "int",
    pa.int16(): "int",
    pa.int32(): "int",
    pa.int64(): "long",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.string(): "string",
    pa.binary(): "bytes",
}
"""Avro types of the Arrow types that map one-to-one (Java ``AvroSchemaConverter``)."""


def compression_refusal(compression: str) -> str | None:
    """Return why Avro data files cannot use ``compression``, or ``None``."""
    if compression.lower() not in _CODECS:
        return f"Avro compression must be one of {sorted(_CODECS)}"
    return None


def _avro_type(t: pa.DataType, name: str) -> Any:
    """Java ``AvroSchemaConverter``'s Avro type for a column of Arrow type ``t``."""
    primitive = _AVRO_PRIMITIVES.get(t)
    if primitive is not None:
        return primitive
    if pa.types.is_fixed_size_binary(t):  # BINARY(n) is bytes too, as in Java
        return "bytes"
    if pa.types.is_decimal128(t):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_time32(t) and t.unit == "ms":
        return {"type": "int", "logicalType": "time-millis"}
    if pa.types.is_timestamp(t) and t.unit in ("s", "ms", "us"):
        local = "local-" if t.tz is not None else ""
        unit = "micros" if t.unit == "us" else "millis"
        return {"type": "long", "logicalType": f"{local}timestamp-{unit}"}
    raise UnsupportedTypeError(f"column {name!r} of type {t} cannot be written to Avro")


def avro_schema_json(schema: pa.Schema) -> bytes:
    """Return the writer schema Java Paimon uses for rows of ``schema`` (compact JSON).

    Raises:
        UnsupportedTypeError: a column type Avro data files cannot hold here.
    """
    fields = []
    for f in schema:
        t = _avro_type(f.type, f.name)
        if f.nullable:
            fields.append({"name": f.name, "type": ["null", t], "default": None})
        else:
            fields.append({"name": f.name, "type": t})
    return orjson.dumps(
        {
            "type": "record",
            "name": "record",
            "namespace": "org.apache.paimon.avro.generated",
            "fields": fields,
        }
    )


def _raw_column(column: pa.ChunkedArray) -> list[Any]:
    """Python values as the Avro encoding takes them (ints for dates, times, timestamps)."""
    t = column.type
    if pa.types.is_timestamp(t):
        unit = "us" if t.unit == "us" else "ms"
        ints: list[Any] = column.cast(pa.timestamp(unit)).cast(pa.int64()).to_pylist()
        return ints
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        days: list[Any] = column.cast(pa.int32()).to_pylist()
        return days
    if pa.types.is_decimal128(t):
        scale = t.scale
        out: list[Any] = []
        for v in column.to_pylist():
            if v is None:
                out.append(None)
                continue
            n = int(v.scaleb(scale, context=_EXACT))
            out.append(n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True))
        return out
    values: list[Any] = column.to_pylist()
    return values


class AvroDataWriter:
    """Writes one Avro data file block by block (``FormatWriter`` protocol).

    Args:
        stream: Writable binary stream.
        schema: The table's Arrow schema.
        compression: ``file.compression`` (see :func:`compression_refusal`).
        zstd_level: ``file.compression.zstd-level``.

    Raises:
        UnsupportedTypeError: a column type Avro data files cannot hold here.
    """

    def __init__(self, stream: Any, schema: pa.Schema, *, compression: str, zstd_level: int):
        self._stream = stream
        self._codec = _CODECS[compression.lower()]
        self._level = zstd_level
        schema_json = avro_schema_json(schema)
        self._parsed = fastavro.parse_schema(avro.strip_logical_types(orjson.loads(schema_json)))
        self._names = schema.names
        self._sync = os.urandom(16)
        stream.write(avro.build_container(schema_json, self._codec, [], sync=self._sync))

    def _compress(self, raw: bytes) -> bytes:
        if self._codec == "zstandard":
            return bytes(zstandard.ZstdCompressor(level=self._level).compress(raw))
        return avro_codecs.compress_block(self._codec, raw)

    def write(self, data: pa.Table) -> None:
        """Append ``data``'s rows as blocks of at most 4096 records."""
        for offset in range(0, data.num_rows, _BLOCK_ROWS):
            piece = data.slice(offset, _BLOCK_ROWS)
            columns = [_raw_column(piece.column(n)) for n in self._names]
            records = [
                dict(zip(self._names, row, strict=True)) for row in zip(*columns, strict=True)
            ]
            raw = avro.encode_block(self._parsed, records)
            self._stream.write(avro.frame_block(len(records), self._compress(raw), self._sync))

    def close(self) -> None:
        """Nothing to finish: an Avro container has no footer."""

    def __enter__(self) -> AvroDataWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ----------------------------------------------------------------------------- reading


def _writer_fields(schema_json: bytes, path: str) -> dict[str, Any]:
    """Top-level writer fields by name: their Avro type without the null branch."""
    node = orjson.loads(schema_json)
    if not isinstance(node, dict) or node.get("type") != "record":
        raise SchemaMismatchError(f"{path}: Avro data file schema is not a record")
    out = {}
    for f in node["fields"]:
        t = f["type"]
        if isinstance(t, list):
            branches = [b for b in t if b != "null"]
            t = branches[0] if len(branches) == 1 else t
        out[f["name"]] = t
    return out


def _decode_raw(container: avro.AvroContainer, names: list[str], path: str) -> dict[str, list[Any]]:
    """Raw column values (logical types removed) of ``names``; polars first, fastavro after."""
    stripped = orjson.dumps(avro.strip_logical_types(orjson.loads(container.schema_json)))
    plain = avro.build_container(
        stripped,
        "null",
        [
            (c, avro_codecs.decompress_block(container.codec, b, path=path))
            for c, b in container.blocks
        ],
        sync=container.sync,
    )
    try:
        import polars as pl  # type: ignore[import-not-found, unused-ignore]

        frame = pl.read_avro(io.BytesIO(plain), columns=names)
        return {n: frame.get_column(n).to_list() for n in names}
    except Exception:  # noqa: BLE001 - polars missing or refusing the file: fastavro decodes it
        parsed = fastavro.parse_schema(orjson.loads(stripped))
        cols: dict[str, list[Any]] = {n: [] for n in names}
        for record in fastavro.reader(io.BytesIO(plain), reader_schema=parsed):
            assert isinstance(record, dict)
            for n in names:
                cols[n].append(record.get(n))
        return cols


def _to_arrow(values: list[Any], writer_type: Any, target: pa.DataType, name: str) -> pa.Array:
    logical = writer_type.get("logicalType") if isinstance(writer_type, dict) else None
    if pa.types.is_timestamp(target):
        unit = "us" if logical and logical.endswith("micros") else "ms"
        ts = pa.array(values, pa.int64()).cast(pa.timestamp(unit)).cast(pa.timestamp(target.unit))
        return ts.cast(pa.int64()).cast(target)
    if pa.types.is_decimal128(target):
        scale = writer_type.get("scale", 0) if isinstance(writer_type, dict) else 0
        decimals = [
            None
            if v is None
            else Decimal(int.from_bytes(v, "big", signed=True)).scaleb(-scale, context=_EXACT)
            for v in values
        ]
        return pa.array(decimals, pa.decimal128(38, scale)).cast(target)
    if pa.types.is_date32(target) or pa.types.is_time32(target):
        return pa.array(values, pa.int32()).cast(target)
    if pa.types.is_nested(target):
        raise UnsupportedTypeError(f"column {name!r}: snaplake does not read {target} from Avro")
    return pa.array(values).cast(target) if values else pa.array([], target)


def field_names(source: Any) -> list[str]:
    """Return the top-level column names of the Avro data file read from ``source``.

    Reads the container header only (the blocks stay unread).

    Raises:
        SchemaMismatchError: the writer schema is not a record.
        ValueError: ``source`` holds no Avro container.
    """
    header = fastavro.reader(source)  # reads the header, decodes no block
    schema_json = header.metadata["avro.schema"]
    return list(_writer_fields(schema_json.encode(), "<avro>"))


def read_avro_data(data: bytes, schema: pa.Schema, *, path: str = "<avro>") -> pa.Table:
    """Decode an Avro data file into a table of ``schema`` (columns matched by name).

    Args:
        data: The whole file.
        schema: The columns to return, with the table's Arrow types.
        path: For error messages.

    Returns:
        The rows in file order.

    Raises:
        CorruptMetadataError: the container is truncated or a block does not decompress.
        SchemaMismatchError: a requested column is not in the file.
        UnsupportedTypeError: a nested column.
    """
    container = avro.parse_container(data, path=path)
    fields = _writer_fields(container.schema_json, path)
    missing = [n for n in schema.names if n not in fields]
    if missing:
        raise SchemaMismatchError(f"{path}: Avro data file has no column(s) {missing}")
    raw = _decode_raw(container, schema.names, path)
    arrays = [_to_arrow(raw[f.name], fields[f.name], f.type, f.name) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)
