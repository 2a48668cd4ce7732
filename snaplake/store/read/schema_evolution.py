"""Read data files written under older schemas in the read schema, by field id.

A data file records the schema it was written with (``DataFileMeta._SCHEMA_ID``).
After ``alter_table`` the table's files span several schemas; a read maps
each file's columns to the read schema through the field ids:

* a read column whose id the file lacks (added later) is all NULL;
* a renamed column is read under its name in the file;
* a widened column is read in its old type and cast (the casts of
  :mod:`snaplake.store.format.type_casts` are exact);
* a column dropped since is not read at all.

:func:`file_schema_mapping` gives that mapping for one file schema (which
physical columns to read, how to turn them into the result); it is a pure
function, so the append reader, the compactor and a merge reader of
primary-key tables can call it per file. :class:`SchemaEvolution` caches the
mappings of one read and reads a list of splits whose files span schemas:
every file on its own, in its own layout, all at once in threads (as parallel
as a plain scan of the same files), then mapped and filtered.

Value statistics of an older file are used for pruning only where the types
allow it (:func:`file_stats_predicates`): the column's type in the file must
widen exactly to the read type; otherwise the predicate is not used on that
file (the file is kept and filtered after reading). A column the file lacks is
NULL in every row, which prunes exactly.

Source: Paimon ``SchemaEvolutionUtil.createIndexCastMapping`` (index mapping
by field id, ``NULL_FIELD_INDEX``, cast per field), ``IndexCastMapping``,
``SchemaEvolutionUtil.devolveFilters`` / ``CastExecutors.castLiteralsWithEvolution``
(filters on evolved columns), pypaimon ``SplitRead._create_base_index_mapping``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pyarrow as pa

from snaplake.errors import SchemaMismatchError, UnsupportedTypeError
from snaplake.store.format.data_file import DataFileMeta
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.type_casts import can_widen
from snaplake.store.format.types import DataField, DataType, to_arrow_field, to_arrow_type
from snaplake.store.read.field_evolution import can_evolve, evolve_column, same_layout
from snaplake.store.read.predicate import Predicate, and_expression

if TYPE_CHECKING:
    from snaplake.store.read.scan import Split

_MAX_READ_THREADS = 8
_MAX_CACHED_MAPPINGS = 512

__all__ = [
    "ColumnSource",
    "ReadFile",
    "FileSchemaMapping",
    "SchemaEvolution",
    "check_files_readable",
    "file_schema_mapping",
    "file_stats_predicates",
    "mapping_of",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class FileSchemaMapping:
    """How to read a data file written under one schema as columns of another.

    Attributes:
        file_schema_id: Schema the file was written with.
        file_columns: Names, as spelled in the file, of the columns to read.
        file_arrow_schema: Those columns with the file's Arrow types.
        target: The result columns: read-schema names and Arrow types.
        sources: For each target column, its index in ``file_columns``, or
            -1 when the file does not have it (the column is all NULL).
        identity: The file's columns already are the target (same names and
            types in order, nested field ids included): nothing to rename,
            cast or fill.
        file_types: For each target column, its Paimon type in the file
            (``None``: absent, or a system column read as it is).
        target_types: For each target column, its Paimon type in the read
            schema (``None`` for a system column).

    Source: Paimon ``IndexCastMapping`` (index mapping plus cast mapping).
    """

    file_schema_id: int
    file_columns: tuple[str, ...]
    file_arrow_schema: pa.Schema
    target: pa.Schema
    sources: tuple[int, ...]
    identity: bool
    file_types: tuple[DataType | None, ...] = ()
    target_types: tuple[DataType | None, ...] = ()

    def apply(self, data: pa.Table | pa.RecordBatch) -> pa.Table:
        """Turn ``data`` (the ``file_columns`` read from a file) into ``target`` columns.

        Raises:
            UnsupportedTypeError: a value of the file does not fit the read
                type (only after a lossy type change made by another engine).
        """
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        if self.identity:
            return table
        arrays = []
        for i, (field, src) in enumerate(zip(self.target, self.sources, strict=True)):
            if src < 0:
                arrays.append(pa.nulls(table.num_rows, field.type))
                continue
            column = table.column(src)
            old = self.file_types[i] if self.file_types else None
            new = self.target_types[i] if self.target_types else None
            if column.type != field.type or (
                old is not None and new is not None and not same_layout(old, new)
            ):
                try:
                    if old is not None and new is not None:
                        column = evolve_column(column, old, new)
                    if column.type != field.type:
                        column = column.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise UnsupportedTypeError(
                        f"column {field.name!r} of a file written under schema "
                        f"{self.file_schema_id} holds {column.type} values that cannot be "
                        f"read as {field.type}: {exc}"
                    ) from exc
            arrays.append(column)
        return pa.Table.from_arrays(arrays, schema=self.target)


def _fields(schema: TableSchema) -> tuple[DataField, ...]:
    return schema.data_fields


@dataclass(frozen=True, slots=True)
class ColumnSource:
    """One result column of a :class:`FileSchemaMapping` and where a file holds it.

    Attributes:
        target: The result column (name and Arrow type).
        file_column: Its name in the file, ``None`` when the file lacks it.
        file_type: Its Paimon type in the file (``None``: absent, or a
            system column read as it is).
        target_type: Its Paimon type in the read schema (``None`` for a system column).
    """

    target: pa.Field
    file_column: str | None
    file_type: DataType | None = None
    target_type: DataType | None = None


def mapping_of(file_schema_id: int, columns: Sequence[ColumnSource]) -> FileSchemaMapping:
    """Build the mapping that reads ``columns`` from a file of ``file_schema_id``.

    The file layout (``file_columns``) is each present column once, in
    order; ``identity`` holds when that layout already is the target.
    """
    file_columns: list[str] = []
    file_arrow: list[pa.Field] = []
    sources: list[int] = []
    identity = True
    for c in columns:
        if c.file_column is None:
            sources.append(-1)
            identity = False
            continue
        sources.append(len(file_columns))
        file_columns.append(c.file_column)
        if c.file_type is None:
            file_arrow.append(c.target.with_name(c.file_column))
        else:
            file_arrow.append(pa.field(c.file_column, to_arrow_type(c.file_type),
                                       nullable=c.file_type.nullable))  # fmt: skip
        identity = (
            identity
            and c.file_column == c.target.name
            and file_arrow[-1].type == c.target.type
            and (c.file_type is None or c.target_type is None
                 or same_layout(c.file_type, c.target_type))
        )  # fmt: skip
    return FileSchemaMapping(
        file_schema_id=file_schema_id,
        file_columns=tuple(file_columns),
        file_arrow_schema=pa.schema(file_arrow),
        target=pa.schema([c.target for c in columns]),
        sources=tuple(sources),
        identity=identity,
        file_types=tuple(c.file_type for c in columns),
        target_types=tuple(c.target_type for c in columns),
    )


def file_schema_mapping(
    file_schema: TableSchema, read_schema: TableSchema, columns: Sequence[str]
) -> FileSchemaMapping:
    """Map the columns of a file written under ``file_schema`` to ``read_schema``'s ``columns``.

    Args:
        file_schema: The schema of the data file (``DataFileMeta.schema_id``).
        read_schema: The schema of the read (current, or the snapshot's for
            time travel).
        columns: Read-schema column names to produce, in this order.

    Returns:
        The mapping; columns are matched by field id, never by name.

    Raises:
        SchemaMismatchError: a name in ``columns`` is not a read-schema column.

    Source: Paimon ``SchemaEvolutionUtil.createIndexCastMapping``.
    """
    read_by_name = {f.name: f for f in _fields(read_schema)}
    file_by_id = {f.id: f for f in _fields(file_schema)}
    out: list[ColumnSource] = []
    for name in columns:
        field = read_by_name.get(name)
        if field is None:
            raise SchemaMismatchError(
                f"unknown column {name!r}; the table has {list(read_by_name)}"
            )
        old = file_by_id.get(field.id)
        out.append(
            ColumnSource(
                target=to_arrow_field(field),
                file_column=None if old is None else old.name,
                file_type=None if old is None else old.type,
                target_type=field.type,
            )
        )
    return mapping_of(file_schema.id, out)


def file_stats_predicates(
    file_schema: TableSchema, read_schema: TableSchema, predicates: Sequence[Predicate]
) -> tuple[tuple[Predicate, ...], tuple[Predicate, ...]]:
    """Translate read-schema predicates into ones on an older file's value stats.

    Args:
        file_schema: The file's schema.
        read_schema: The read's schema (the predicates name its columns).
        predicates: AND of predicates on read-schema columns.

    Returns:
        ``(on_file, absent)``: predicates renamed to the file's columns, kept
        only where the file's type widens exactly to the read type (its stats
        order values as the read does); and predicates on columns the file
        lacks (NULL in every row of it). Predicates on columns whose type
        changed otherwise are left out: they cannot prune this file.

    Source: Paimon ``SchemaEvolutionUtil.devolveFilters`` (drop what cannot be
    translated exactly).
    """
    read_by_name = {f.name: f for f in _fields(read_schema)}
    file_by_id = {f.id: f for f in _fields(file_schema)}
    on_file: list[Predicate] = []
    absent: list[Predicate] = []
    for p in predicates:
        field = read_by_name.get(p.column)
        if field is None:
            continue
        old = file_by_id.get(field.id)
        if old is None:
            absent.append(p)
        elif can_widen(
            old.type.with_nullable(nullable=True), field.type.with_nullable(nullable=True)
        ):
            on_file.append(p if old.name == p.column else replace(p, column=old.name))
    return tuple(on_file), tuple(absent)


def check_files_readable(
    files: Sequence[DataFileMeta], schema: TableSchema, schema_of: Callable[[int], TableSchema]
) -> None:
    """Check that data files written under older schemas read in ``schema``.

    A commit may carry files written before an ``alter_table`` (a writer
    opened earlier); Paimon accepts them when their schema is still readable.
    Every column the file shares with ``schema`` (by field id) must widen to
    its type in ``schema``.

    Raises:
        SchemaMismatchError: a file's schema file is missing, or a shared
            column's type changed in a way its values cannot be read (only
            after a type change by another engine); raised before anything
            is published.
    """
    checked: set[int] = {schema.id}
    by_id = {f.id: f for f in _fields(schema)}
    for file in files:
        if file.schema_id in checked:
            continue
        checked.add(file.schema_id)
        try:
            old = schema_of(file.schema_id)
        except FileNotFoundError as exc:
            raise SchemaMismatchError(
                f"data file {file.file_name} was written under schema {file.schema_id}, "
                "which does not exist; it cannot be committed"
            ) from exc
        for f in _fields(old):
            now = by_id.get(f.id)
            if now is not None and not can_evolve(
                f.type.with_nullable(nullable=True), now.type.with_nullable(nullable=True)
            ):
                raise SchemaMismatchError(
                    f"data file {file.file_name} was written under schema {old.id}, where "
                    f"column {f.name!r} is {f.type}; schema {schema.id} made it {now.type}, "
                    "which its values cannot be read as; write the data again with a new writer"
                )


ReadFile = Callable[[str, pa.Schema], pa.Table]
"""Reads the columns of a schema (names and Arrow types as in the file) from one data file."""


class SchemaEvolution:
    """The file-to-read-schema mappings of one read, cached per file schema id.

    Args:
        read_schema: The schema of the result.
        schema_of: Returns the schema of an id (``SchemaManager.schema``;
            schema files are immutable, so it may cache).
    """

    def __init__(self, read_schema: TableSchema, schema_of: Callable[[int], TableSchema]) -> None:
        self.read_schema = read_schema
        self.schema_of = schema_of
        self._mappings: dict[tuple[int, tuple[str, ...]], FileSchemaMapping] = {}

    def mapping(self, schema_id: int, columns: Sequence[str]) -> FileSchemaMapping:
        """Return the mapping of files written under ``schema_id`` (cached).

        Raises:
            FileNotFoundError: no such schema file.
        """
        key = (schema_id, tuple(columns))
        found = self._mappings.get(key)
        if found is None:
            found = file_schema_mapping(self.schema_of(schema_id), self.read_schema, columns)
            if len(self._mappings) >= _MAX_CACHED_MAPPINGS:  # many ad hoc projections
                self._mappings.clear()
            self._mappings[key] = found
        return found

    def needs_mapping(self, splits: Sequence[Split], columns: Sequence[str]) -> bool:
        """Tell whether some file of ``splits`` is not already in the read layout."""
        rid = self.read_schema.id
        return any(
            f.schema_id != rid and not self.mapping(f.schema_id, columns).identity
            for s in splits
            for f in s.files
        )

    def read(
        self,
        splits: Sequence[Split],
        *,
        read_file: ReadFile,
        names: Sequence[str],
        needed: Sequence[str],
        predicates: Sequence[Predicate],
        limit: int | None,
    ) -> pa.Table:
        """Read ``splits`` whose files span schemas into the read schema.

        Every file is read on its own, in its own layout, mapped to the read
        schema and filtered; without ``limit`` all files are read at once
        (threads; the readers release the GIL), as parallel as a plain scan
        over the same files. With ``limit`` files are read in order until
        enough rows came.

        Args:
            splits: Planned splits.
            read_file: Reads columns (file names and types) from one data file.
            names: Columns of the result, in order.
            needed: ``names`` plus the predicates' columns.
            predicates: AND of predicates applied exactly to the rows.
            limit: Stop after this many rows.

        Returns:
            The rows in file order, columns ``names``.

        Raises:
            FileNotFoundError: a data file is missing.
            UnsupportedTypeError: a value does not fit its read type.
        """
        read_arrow = self.read_schema.arrow_schema
        target = pa.schema([read_arrow.field(n) for n in needed])
        expr = and_expression(predicates)
        files = [(split.paths[i], split.files[i].schema_id)
                 for split in splits for i in range(len(split.files))]  # fmt: skip

        def one(entry: tuple[str, int]) -> pa.Table:
            path, schema_id = entry
            m = self.mapping(schema_id, needed)
            part = (
                read_file(path, target)
                if m.identity
                else m.apply(read_file(path, m.file_arrow_schema))
            )
            if part.schema != target:  # field metadata / nullability of the read schema
                part = pa.Table.from_arrays(part.columns, schema=target)
            return part.filter(expr) if expr is not None else part

        parts: list[pa.Table] = []
        if limit is not None:
            rows = 0
            for entry in files:
                parts.append(one(entry))
                rows += parts[-1].num_rows
                if rows >= limit:
                    break
        elif len(files) > 1:
            parts = list(_pool().map(one, files))
        else:
            parts = [one(f) for f in files]
        table = pa.concat_tables(parts) if parts else target.empty_table()
        if limit is not None:
            table = table.slice(0, limit)
        return table.select(list(names))


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """Threads that read data files side by side (one pool per process).

    Each file read is mostly I/O and Arrow decoding with the GIL released, so
    the pool holds more threads than cores (like Arrow's own I/O pool).
    """
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=_MAX_READ_THREADS,
                                       thread_name_prefix="snaplake-read")  # fmt: skip
        return _POOL
