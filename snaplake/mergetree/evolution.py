"""Read key/value files written under older schemas in the read schema, by field id.

After ``alter_table`` a bucket's files span schemas. Every file is read
through :func:`~snaplake.mergetree.read.read_kv_file` in its own layout and
turned into the read layout by a
:class:`~snaplake.store.read.schema_evolution.FileSchemaMapping` before the
merge, so merge functions see every version of a key in the read schema:

* ``_KEY_<k>`` columns map by the key column's id (an engine that renamed a
  primary-key column, as pypaimon and newer Paimon allow, left
  ``_KEY_<old name>`` in the old files); ``_SEQUENCE_NUMBER`` and
  ``_VALUE_KIND`` are read as they are;
* value columns map by id: added since = NULL (partial-update then keeps the
  newer non-null value, aggregation functions skip it, as in Paimon, whose
  readers fill the same NULL), renamed = read under the old name, widened =
  cast, dropped = not read.

Source: Paimon ``KeyValueFileReaderFactory`` (key and value index/cast
mappings per file schema, ``SchemaEvolutionUtil.createIndexCastMapping``),
``KeyValueDataFileRecordReader``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from snaplake.errors import SchemaMismatchError
from snaplake.mergetree.kv import KEY_FIELD_PREFIX, key_column
from snaplake.store.format.schema import TableSchema
from snaplake.store.read.schema_evolution import ColumnSource, FileSchemaMapping, mapping_of

__all__ = ["KeyValueEvolution", "kv_file_mapping"]

_MAX_CACHED = 256


def kv_file_mapping(
    file_schema: TableSchema, read_schema: TableSchema, schema: pa.Schema
) -> FileSchemaMapping:
    """Map a key/value file written under ``file_schema`` to ``schema`` (read layout).

    Args:
        file_schema: The file's schema (``DataFileMeta.schema_id``).
        read_schema: The schema of the read.
        schema: The key/value columns to produce (a projection of
            ``KeyValue.schema`` of ``read_schema``).

    Raises:
        SchemaMismatchError: a primary-key column of the read has no column
            with its id in the file (key columns are never dropped; the
            file is not of this table).
    """
    read_by_name = {f.name: f for f in read_schema.data_fields}
    file_by_id = {f.id: f for f in file_schema.data_fields}
    columns: list[ColumnSource] = []
    for target in schema:
        name = target.name
        if name.startswith(KEY_FIELD_PREFIX):
            field = read_by_name[name[len(KEY_FIELD_PREFIX) :]]
            old = file_by_id.get(field.id)
            if old is None:
                raise SchemaMismatchError(
                    f"primary-key column {field.name!r} (field id {field.id}) is missing from "
                    f"schema {file_schema.id}; its data files cannot be merged"
                )
            columns.append(ColumnSource(target, key_column(old.name), old.type, field.type))
        elif name in read_by_name:
            field = read_by_name[name]
            old = file_by_id.get(field.id)
            columns.append(
                ColumnSource(
                    target,
                    None if old is None else old.name,
                    None if old is None else old.type,
                    field.type,
                )
            )
        else:  # _SEQUENCE_NUMBER, _VALUE_KIND, as stored
            columns.append(ColumnSource(target, name))
    return mapping_of(file_schema.id, columns)


class KeyValueEvolution:
    """The key/value file mappings of one read or compaction, cached per file schema.

    Args:
        read_schema: The schema rows are merged and returned in.
        schema_of: Returns a schema by id (``SchemaManager.schema``, or a dict's
            ``__getitem__`` on a Spark executor).
    """

    def __init__(self, read_schema: TableSchema, schema_of: Callable[[int], TableSchema]) -> None:
        self.read_schema = read_schema
        self.schema_of = schema_of
        self._cache: dict[tuple[int, tuple[str, ...]], FileSchemaMapping | None] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, object]:
        return {"read_schema": self.read_schema, "schema_of": self.schema_of}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.read_schema = state["read_schema"]
        self.schema_of = state["schema_of"]
        self._cache = {}
        self._lock = threading.Lock()

    def mapping(self, schema_id: int, schema: pa.Schema) -> FileSchemaMapping | None:
        """The mapping of a file of ``schema_id`` to ``schema``; ``None`` when none is needed.

        Raises:
            FileNotFoundError: no such schema file.
            SchemaMismatchError: see :func:`kv_file_mapping`.
        """
        if schema_id == self.read_schema.id:
            return None
        key = (schema_id, tuple(schema.names))
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        m: FileSchemaMapping | None = kv_file_mapping(
            self.schema_of(schema_id), self.read_schema, schema
        )
        if m is not None and m.identity and m.target.equals(schema):
            m = None
        with self._lock:
            if len(self._cache) >= _MAX_CACHED:
                self._cache.clear()
            self._cache[key] = m
        return m
