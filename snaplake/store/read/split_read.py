"""Read planned splits into Arrow.

Parquet files are read in parallel by pyarrow (a dataset over the file list
when the FileIO exposes a pyarrow filesystem); otherwise, and for ORC and
Avro files (the format is the file's extension, so a table whose
``file.format`` changed reads whole), one file at a time through
:mod:`snaplake.store.format.file_format`. Rows are projected to
the requested columns, cast to the table schema and filtered exactly by the
predicates (stats pruning is only a first cut).

Source: pypaimon ``TableRead.to_arrow`` (reads Parquet via pyarrow); Paimon
``RawFileSplitRead`` for the split -> file mapping.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa

from snaplake.store.format.deletion_vector import DeletionVector
from snaplake.store.format.file_format import format_of_file
from snaplake.store.format.schema import TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.predicate import Predicate, and_expression, resolve_projection
from snaplake.store.read.scan import Split
from snaplake.store.read.schema_evolution import ReadFile, SchemaEvolution

__all__ = ["ReadSplitsTask", "SplitsTask", "read_splits", "read_splits_batches"]

_VECTOR_WORKERS = 4
"""Splits whose deletion vector files are read at once."""


def read_splits(
    file_io: FileIO,
    splits: Sequence[Split],
    *,
    schema: pa.Schema,
    columns: Sequence[str] | None = None,
    predicates: Sequence[Predicate] = (),
    limit: int | None = None,
    evolution: SchemaEvolution | None = None,
) -> pa.Table:
    """Read the rows of ``splits`` as one Arrow table.

    Args:
        file_io: Storage of the table.
        splits: Output of ``FileStoreScan.plan()``.
        schema: The table's Arrow schema (result schema before projection).
        columns: Columns to return, in this order (``None`` = all).
        predicates: AND of predicates applied exactly to the rows.
        limit: Stop after this many rows (``None`` = all).
        evolution: Maps files written under other schemas to ``schema`` by
            field id (``None``: every file is in ``schema``).

    Returns:
        A table with ``columns`` (or all columns), rows in split order.

    Raises:
        SchemaMismatchError: an unknown column is named, or a filter literal's
            type does not fit its column (before anything is read).
        FileNotFoundError: a data file is missing (``filename`` names it);
            :class:`~snaplake.store.read.missing_files.MissingFileCheck` tells
            an expired snapshot from a damaged one (``Table`` reads use it).
        StorageError: the storage failed (``StorageAccessError`` for refused
            credentials); pyarrow's ``OSError`` s are translated by
            ``FileIO.translate_error``.
    """
    names, needed = resolve_projection(schema, columns, predicates)
    arrow = file_io.arrow_filesystem()
    vectors = _deletion_vectors(file_io, splits)
    read_file: ReadFile = partial(_read_file, file_io, arrow)
    if vectors:
        read_file = partial(_read_without_deleted, read_file, vectors)
    if evolution is not None and (vectors or evolution.needs_mapping(splits, needed)):
        return evolution.read(
            splits, read_file=read_file, names=names, needed=needed, predicates=predicates,
            limit=limit,
        )  # fmt: skip
    out_schema = pa.schema([schema.field(n) for n in needed])
    paths = [p for s in splits for p in s.paths]
    expr = and_expression(predicates)
    if not paths:
        table = out_schema.empty_table()
    else:
        if (
            not vectors
            and arrow is not None
            and all(format_of_file(p).name == "parquet" for p in paths)
        ):
            import pyarrow.dataset as ds  # its libraries cost the daemon, which reads no data

            fs, prefix = arrow
            try:
                dataset = ds.dataset(
                    [p.removeprefix(prefix) for p in paths],
                    schema=out_schema,
                    format="parquet",
                    filesystem=fs,
                )
                if limit is not None and expr is None:
                    table = dataset.head(limit, columns=needed)
                else:
                    table = dataset.to_table(columns=needed, filter=expr)
            except OSError as exc:  # pyarrow's own errors: typed by the FileIO
                error = file_io.translate_error(exc, path=paths[0], operation="read")
                if error is exc:
                    raise
                raise error from exc
        else:  # one file at a time, each with the reader of its format (ORC, Avro, mixed)
            parts = [read_file(path, out_schema) for path in paths]
            table = pa.concat_tables(parts)
            if expr is not None:
                table = table.filter(expr)
    if limit is not None:
        table = table.slice(0, limit)
    return table.select(names)


def _deletion_vectors(file_io: FileIO, splits: Sequence[Split]) -> dict[str, DeletionVector]:
    """Data file path → deletion vector, over ``splits`` (each split's files read in a thread)."""
    with_files = [s for s in splits if s.deletion_files]
    if not with_files:
        return {}

    def one(split: Split) -> dict[str, DeletionVector]:
        by_name = split.read_deletion_vectors(file_io)
        return {p: by_name[f.file_name] for f, p in zip(split.files, split.paths, strict=True)
                if f.file_name in by_name}  # fmt: skip

    if len(with_files) == 1:
        return one(with_files[0])
    out: dict[str, DeletionVector] = {}
    with ThreadPoolExecutor(max_workers=min(_VECTOR_WORKERS, len(with_files))) as pool:
        for found in pool.map(one, with_files):
            out.update(found)
    return out


def _read_without_deleted(
    read_file: ReadFile, vectors: dict[str, DeletionVector], path: str, schema: pa.Schema
) -> pa.Table:
    """``read_file(path, schema)`` without the rows of the file's vector (a vectorised mask).

    Source: Paimon ``ApplyDeletionVectorReader``.
    """
    table = read_file(path, schema)
    vector = vectors.get(path)
    if vector is None or vector.is_empty():
        return table
    return table.filter(pa.array(vector.keep_mask(table.num_rows)))


def _read_file(
    file_io: FileIO, arrow: tuple[Any, str] | None, path: str, schema: pa.Schema
) -> pa.Table:
    fmt = format_of_file(path)
    if arrow is None:
        with file_io.open_input(path) as f:
            return fmt.read(f, schema, use_threads=True)
    fs, prefix = arrow
    try:
        with fs.open_input_file(path.removeprefix(prefix)) as f:
            return fmt.read(f, schema, use_threads=True)
    except OSError as exc:  # pyarrow's own errors: typed by the FileIO
        error = file_io.translate_error(exc, path=path, operation="read")
        if error is exc:
            raise
        raise error from exc


def read_splits_batches(
    file_io: FileIO,
    splits: Sequence[Split],
    *,
    schema: pa.Schema,
    columns: Sequence[str] | None = None,
    predicates: Sequence[Predicate] = (),
    evolution: SchemaEvolution | None = None,
) -> Iterator[pa.RecordBatch]:
    """Yield the rows of ``splits`` as record batches, one split at a time (bounded memory).

    Raises:
        SchemaMismatchError: an unknown column, or a filter literal whose
            type does not fit its column (before anything is read).
    """
    resolve_projection(schema, columns, predicates)
    for split in splits:
        table = read_splits(
            file_io, [split], schema=schema, columns=columns, predicates=predicates,
            evolution=evolution,
        )  # fmt: skip
        yield from table.to_batches()


@dataclass(frozen=True, slots=True)
class SplitsTask:
    """Picklable: read chosen splits of one plan on an engine's executor (a kind's reader).

    Calls over disjoint split indices yield disjoint rows; all of them
    together the whole read. Holds only picklable configuration.

    Attributes:
        file_io: Storage of the table (picklable).
        schema: The read schema.
        splits: The planned splits (with their deletion files); a call names them by index.
        columns: Columns to yield, in this order.
        schemas: The schema of every ``_SCHEMA_ID`` the splits' files carry
            (files of other schemas are read by field id).

    Source: Paimon's ``SplitRead`` run per Spark input partition (``PaimonPartitionReader``).
    """

    file_io: FileIO
    schema: TableSchema
    splits: tuple[Split, ...]
    columns: tuple[str, ...]
    schemas: Mapping[int, TableSchema]

    def __call__(self, indices: Sequence[int]) -> Iterator[pa.Table]:
        """Yield the rows of ``splits[i]`` for each ``i`` in ``indices``, unfiltered."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class ReadSplitsTask(SplitsTask):
    """Read each file of chosen splits on its own, its deletion vector applied.

    An append table whose splits carry deletion vectors cannot hand its files
    to an engine's own reader (it would return deleted rows).

    Source: Paimon ``RawFileSplitRead`` run per Spark input partition.
    """

    def __call__(self, indices: Sequence[int]) -> Iterator[pa.Table]:
        """Yield the rows of ``splits[i]`` for each ``i`` in ``indices``, unfiltered.

        Raises:
            FileNotFoundError: a data or deletion vector file is missing.
            CorruptMetadataError: a deletion vector file is damaged (named).
        """
        evolution = SchemaEvolution(self.schema, self.schemas.__getitem__)
        for i in indices:
            yield read_splits(
                self.file_io, [self.splits[i]], schema=self.schema.arrow_schema,
                columns=self.columns, evolution=evolution,
            )  # fmt: skip
