"""Reading one key/value data file (Parquet, ORC or Avro) in the key/value layout.

The one place that opens a primary-key table's data file: merge reads,
compaction and conflict checks go through :func:`read_kv_file` (schema
evolution wraps it in :class:`~snaplake.mergetree.read.KeyValueReadContext`).

Source: Paimon ``KeyValueFileReaderFactory``, ``KeyValueDataFileRecordReader``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from snaplake.mergetree.kv import KEY_FIELD_PREFIX
from snaplake.store.format.file_format import format_of_file
from snaplake.store.io.file_io import FileIO

__all__ = ["read_kv_file"]

_STREAM_BUFFER_BYTES = 1 << 20
"""Read buffer per column of a file read in batches (:func:`read_kv_file`)."""


def _open(file_io: FileIO, path: str) -> Any:
    arrow = file_io.arrow_filesystem()
    if arrow is None:
        return file_io.open_input(path)
    fs, prefix = arrow
    return fs.open_input_file(path.removeprefix(prefix))


def read_kv_file(
    file_io: FileIO,
    path: str,
    schema: pa.Schema,
    *,
    batch_rows: int | None = None,
) -> Iterator[pa.Table]:
    """Read the columns of ``schema`` from one key/value data file (Parquet, ORC or Avro).

    The format is the file's extension (a table's levels may differ:
    ``file.format.per.level``).

    Args:
        file_io: Storage of the table.
        path: Full path of the data file.
        schema: Columns to return and their Arrow types (a projection of the
            key/value layout). A ``_KEY_<k>`` column the file lacks (Paimon's
            ``data-file.thin-mode``) is taken from the value column ``k``.
        batch_rows: Rows per yielded table (``None`` = the whole file at once).

    Yields:
        Tables with ``schema``, in file order.

    Raises:
        FileNotFoundError: the file is missing.
        StorageError: the storage failed.
        UnsupportedTypeError: the file's extension names no format snaplake
            reads, or a column cannot be converted to its Arrow type.
    """
    fmt = format_of_file(path)
    with _open(file_io, path) as source:
        if fmt.name == "parquet":
            # Streaming (batch_rows set): read column chunks page by page through a
            # small buffer instead of whole row groups, so a k-way merge over many
            # runs holds about one batch per run, not one row group per run.
            pf = (
                pq.ParquetFile(source)
                if batch_rows is None
                else pq.ParquetFile(source, buffer_size=_STREAM_BUFFER_BYTES, pre_buffer=False)
            )
            present = _decoded(set(pf.schema_arrow.names), schema)
            read = _file_columns(schema, present)
            if batch_rows is None:
                tables: Iterator[pa.Table] = iter([pf.read(columns=read, use_threads=True)])
            else:
                tables = (
                    pa.Table.from_batches([b])
                    for b in pf.iter_batches(batch_size=batch_rows, columns=read, use_threads=False)
                )
        else:  # ORC (one piece per stripe), Avro (the whole file): the format's reader
            present = set(fmt.field_names(source))
            read = _file_columns(schema, present)
            types = {_file_column(f.name, present): f.type for f in schema}
            read_schema = pa.schema([pa.field(n, types[n]) for n in read])
            tables = _sliced(fmt.iter_batches(source, read_schema), batch_rows)
        for table in tables:
            columns = [
                _as_type(table.column(_file_column(f.name, present)), f.type) for f in schema
            ]
            yield pa.Table.from_arrays(columns, schema=schema)


def _as_type(column: pa.ChunkedArray, arrow_type: pa.DataType) -> pa.ChunkedArray:
    """``column`` cast to ``arrow_type``; no cast call when it already has that type."""
    return column if column.type == arrow_type else column.cast(arrow_type)


def _decoded(present: set[str], schema: pa.Schema) -> set[str]:
    """The columns of a Parquet file worth decoding for ``schema``.

    A key column's value twin ``k`` is the same data as its ``_KEY_k`` (the key
    is the value's field), so it is not decoded when ``schema`` reads both:
    ``_file_column`` then maps ``k`` to ``_KEY_k``.
    """
    names = set(schema.names)
    return {
        n for n in present
        if n.startswith(KEY_FIELD_PREFIX) or KEY_FIELD_PREFIX + n not in (names & present)
    }  # fmt: skip


def _file_column(name: str, present: set[str]) -> str:
    """The file column holding ``name``.

    A thin-mode file's ``_KEY_<k>`` is its column ``k``; a value column ``k``
    not decoded (:func:`_decoded`) is its ``_KEY_<k>``.
    """
    if name in present:
        return name
    if name.startswith(KEY_FIELD_PREFIX):
        return name[len(KEY_FIELD_PREFIX) :]
    return KEY_FIELD_PREFIX + name


def _file_columns(schema: pa.Schema, present: set[str]) -> list[str]:
    return list(dict.fromkeys(_file_column(n, present) for n in schema.names))


def _sliced(tables: Iterator[pa.Table], batch_rows: int | None) -> Iterator[pa.Table]:
    for table in tables:
        if batch_rows is None or table.num_rows <= batch_rows:
            yield table
            continue
        for offset in range(0, table.num_rows, batch_rows):
            yield table.slice(offset, batch_rows)
