"""Merge-on-read of primary-key buckets.

A bucket's files are cut into sections of overlapping key ranges
(:func:`~snaplake.mergetree.sorted_run.interval_partition`). A section of one
sorted run is read as it is (one version per key); a section of several runs
goes through the streaming k-way merge. Retractions are dropped after the
merge; predicates are applied to the merged rows by the caller.

Every data file is read through :func:`read_kv_file`, the one place that
opens a key/value file (schema evolution wraps it).

Source: Paimon ``MergeFileSplitRead.createMergeReader``, ``MergeTreeReaders``,
``KeyValueFileReaderFactory``, ``DropDeleteReader``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from snaplake.mergetree.evolution import KeyValueEvolution
from snaplake.mergetree.kv import (
    KEY_FIELD_PREFIX,
    VALUE_KIND,
    RowKind,
    kv_schema,
    system_columns,
)
from snaplake.mergetree.merge_function import (
    LEVEL_COLUMN,
    MergeSpec,
    drop_retracts,
    merge_function_for,
)
from snaplake.mergetree.sort_merge import SortMergeReader
from snaplake.mergetree.sorted_run import KeyComparator, SortedRun, interval_partition
from snaplake.store.format.data_file import DataFileMeta
from snaplake.store.format.deletion_vector import DeletionVector
from snaplake.store.format.file_format import format_of_file
from snaplake.store.format.primary_key import MergeEngine
from snaplake.store.format.schema import TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.predicate import Predicate, and_expression, resolve_projection
from snaplake.store.read.scan import Split
from snaplake.store.read.split_read import SplitsTask

__all__ = [
    "LEVEL_COLUMN",
    "BucketFiles",
    "KeyValueReadContext",
    "MergeSplitsTask",
    "merge_bucket",
    "read_bucket",
    "read_context",
    "read_kv_file",
    "read_primary_key_batches",
    "read_primary_key_splits",
    "without_deleted",
]

DEFAULT_BATCH_ROWS = 65_536
"""Rows per batch a run yields into the k-way merge (divided among many runs)."""

_MERGE_ROWS_BUDGET = 1 << 19
"""Rows buffered by a k-way merge across all its runs."""

_STREAM_BUFFER_BYTES = 1 << 20
"""Read buffer per column of a file read in batches (:func:`read_kv_file`)."""

_READ_WORKERS = 4
"""Buckets :func:`read_primary_key_splits` reads at once."""


@dataclass(frozen=True, slots=True)
class KeyValueReadContext:
    """What reading key/value files of one table needs.

    Attributes:
        file_io: Storage of the table.
        value_schema: The table's Arrow schema (all columns) in the read schema.
        spec: Keys, sequence ordering and merge function.
        cmp: Comparator of the trimmed primary key.
        evolution: Maps files written under other schemas to the read
            schema by field id (``None``: every file is in the read schema).
    """

    file_io: FileIO
    value_schema: pa.Schema
    spec: MergeSpec
    cmp: KeyComparator
    evolution: KeyValueEvolution | None = None

    def kv_schema(self, value_columns: Sequence[str]) -> pa.Schema:
        """Key/value schema holding ``value_columns`` as the value part."""
        value = pa.schema([self.value_schema.field(n) for n in value_columns])
        full = kv_schema(self.value_schema, self.spec.key_names)
        system = [full.field(n) for n in system_columns(self.spec.key_names)]
        return pa.schema(system + list(value))

    def read_file(
        self, file: DataFileMeta, path: str, schema: pa.Schema, *, batch_rows: int | None
    ) -> Iterator[pa.Table]:
        """Read ``schema`` (read layout) from ``file``, mapped by field id if it is older.

        Raises:
            FileNotFoundError: the file is missing.
            SchemaMismatchError: the file's schema has no column for a key.
            UnsupportedTypeError: a value does not fit its read type.
        """
        m = self.evolution.mapping(file.schema_id, schema) if self.evolution else None
        if m is None:
            yield from read_kv_file(self.file_io, path, schema, batch_rows=batch_rows)
            return
        for table in read_kv_file(self.file_io, path, m.file_arrow_schema, batch_rows=batch_rows):
            yield m.apply(table)


class BucketFiles:
    """The live files of one bucket, their full paths and their deletion vectors.

    Args:
        files: Data files.
        paths: Full path of each file, aligned with ``files``.
        deletion_vectors: Data file name → its deletion vector (files without one are
            absent); the rows a vector marks are never read.
    """

    def __init__(
        self,
        files: Sequence[DataFileMeta],
        paths: Sequence[str],
        deletion_vectors: Mapping[str, DeletionVector] | None = None,
    ) -> None:
        self.files = tuple(files)
        self.paths = tuple(paths)
        self.deletion_vectors: Mapping[str, DeletionVector] = deletion_vectors or {}
        self._by_name = {f.file_name: p for f, p in zip(self.files, self.paths, strict=True)}

    def path_of(self, file: DataFileMeta) -> str:
        """Full path of ``file``."""
        return self._by_name[file.file_name]

    def vector_of(self, file: DataFileMeta) -> DeletionVector | None:
        """The deletion vector of ``file``, ``None`` when no row of it is deleted."""
        return self.deletion_vectors.get(file.file_name)


def without_deleted(
    tables: Iterator[pa.Table], vector: DeletionVector | None
) -> Iterator[pa.Table]:
    """``tables`` (one file's rows in file order) without the rows ``vector`` marks.

    Vectorised: one boolean mask per table from the positions in its row range.

    Source: Paimon ``ApplyDeletionVectorReader``.
    """
    if vector is None or vector.is_empty():
        yield from tables
        return
    start = 0
    for table in tables:
        n = table.num_rows
        mask = vector.keep_mask(n, start=start)
        start += n
        yield table if mask.all() else table.filter(pa.array(mask))


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


def _run_tables(
    ctx: KeyValueReadContext,
    run: SortedRun,
    bucket: BucketFiles,
    schema: pa.Schema,
    rows: int,
    *,
    with_level: bool = False,
) -> Iterator[pa.Table]:
    for f in run.files:
        read = ctx.read_file(f, bucket.path_of(f), schema, batch_rows=rows)
        for table in without_deleted(read, bucket.vector_of(f)):
            if with_level:
                level = pa.array([f.level] * table.num_rows, type=pa.int32())
                table = table.append_column(
                    pa.field(LEVEL_COLUMN, pa.int32(), nullable=False), level
                )
            yield table


def merge_bucket(
    ctx: KeyValueReadContext,
    sections: Sequence[Sequence[SortedRun]],
    bucket: BucketFiles,
    value_columns: Sequence[str],
    *,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    with_level: bool = False,
) -> Iterator[pa.Table]:
    """Yield the merged key/value rows of ``sections`` (retractions kept), in key order.

    With ``with_level`` every row carries :data:`LEVEL_COLUMN`, the level of
    the file its (winning) version came from. Tables that need lookup
    (``ctx.spec.lookup``) merge each key's level-0 versions with only its
    newest higher-level one (Paimon's ``LookupMergeFunction``).

    Args:
        ctx: The read context (schemas, key comparator, merge function).
        sections: Groups of sorted runs whose key ranges overlap
            (``interval_partition``); sections are merged one after another.
        bucket: The bucket's files and their paths.
        value_columns: Value columns to read and return.
        batch_rows: Upper bound of rows per yielded table.
        with_level: Add :data:`LEVEL_COLUMN`.

    Raises:
        MergeFunctionError: the merge engine rejects a key's versions.
        FileNotFoundError: a data file is missing.

    Memory: a section of ``n`` runs buffers at most
    ``max(1024, min(batch_rows, 128 Ki / n))`` rows per run.

    Source: Paimon ``MergeTreeReaders.readerForMergeTree`` (sections,
    ``SortMergeReader``).
    """
    schema = ctx.kv_schema(value_columns)
    for section in sections:
        if len(section) == 1:
            yield from _run_tables(
                ctx, section[0], bucket, schema, batch_rows, with_level=with_level
            )
            continue
        rows = max(1024, min(batch_rows, _MERGE_ROWS_BUDGET // len(section)))
        levels = with_level or ctx.spec.lookup
        runs = [_run_tables(ctx, run, bucket, schema, rows, with_level=levels) for run in section]
        merged = SortMergeReader(runs, ctx.spec)
        if levels and not with_level:
            yield from (t.drop_columns([LEVEL_COLUMN]) for t in merged)
        else:
            yield from merged


def _needs_merge_columns(ctx: KeyValueReadContext, columns: Sequence[str]) -> list[str]:
    names = list(dict.fromkeys([*columns, *ctx.spec.sequence_fields]))
    return [n for n in ctx.value_schema.names if n in names]


def read_bucket(
    ctx: KeyValueReadContext,
    bucket: BucketFiles,
    columns: Sequence[str],
    *,
    batch_rows: int | None = None,
    raw_convertible: bool = False,
) -> Iterator[pa.Table]:
    """Yield the merged rows of one bucket (value columns only, retractions dropped).

    Args:
        ctx: The table's read context.
        bucket: The bucket's live files (already pruned by key range).
        columns: Value columns to return (in table order), e.g. the projection
            plus the predicate columns.
        batch_rows: Rows per table for one-run sections (``None`` = one table
            per file); merged sections stream in bounded chunks.
        raw_convertible: Read every file on its own, with no key merge (a
            deletion-vector split whose vectors leave one version per key:
            ``Split.raw_convertible``).

    Raises:
        MergeFunctionError: the merge engine rejects a key's versions.
        FileNotFoundError: a data file is missing.

    Source: Paimon ``MergeFileSplitRead`` / ``RawFileSplitRead`` (raw-convertible splits).
    """
    if not bucket.files:
        return
    value_names = _needs_merge_columns(ctx, columns)
    full = ctx.kv_schema(value_names)
    if raw_convertible:
        for f in bucket.files:
            yield from _read_single(ctx, bucket, f, full, columns, batch_rows)
        return
    sections = interval_partition(bucket.files, ctx.cmp)
    for section in sections:
        if len(section) == 1:
            for f in section[0].files:
                yield from _read_single(ctx, bucket, f, full, columns, batch_rows)
            continue
        for chunk in merge_bucket(ctx, [section], bucket, value_names):
            yield drop_retracts(chunk).select(list(columns))


def _read_single(
    ctx: KeyValueReadContext,
    bucket: BucketFiles,
    file: DataFileMeta,
    full: pa.Schema,
    columns: Sequence[str],
    batch_rows: int | None,
) -> Iterator[pa.Table]:
    """One file read with no merge; drop deleted rows and retractions."""
    clean = file.delete_row_count == 0
    names = list(columns) if clean else [VALUE_KIND, *columns]
    schema = pa.schema([full.field(n) for n in names])
    read = ctx.read_file(file, bucket.path_of(file), schema, batch_rows=batch_rows)
    for table in without_deleted(read, bucket.vector_of(file)):
        if clean:
            yield table
            continue
        kinds = table.column(VALUE_KIND)
        keep = pc.or_(pc.equal(kinds, RowKind.INSERT), pc.equal(kinds, RowKind.UPDATE_AFTER))
        yield table.filter(keep).select(list(columns))


def read_context(
    file_io: FileIO,
    schema: TableSchema,
    schema_of: Callable[[int], TableSchema] | None = None,
) -> KeyValueReadContext:
    """The read context of a primary-key table's schema.

    The caller's operation has passed ``check_supported`` (a scan: reads; a
    compaction: maintenance) on the table's latest schema; nothing is checked
    again here.

    Args:
        file_io: Storage of the table.
        schema: The read schema (rows are merged and returned in it).
        schema_of: Returns a schema by id, for files written under other
            schemas (``None``: every file must be in ``schema``).

    Raises:
        InvalidOptionError: the merge engine's options cannot merge this schema.
        UnsupportedTableError: an aggregate function snaplake does not merge.
    """
    return KeyValueReadContext(
        file_io=file_io,
        value_schema=schema.arrow_schema,
        spec=merge_function_for(schema),
        cmp=KeyComparator(schema.key_types),
        evolution=None if schema_of is None else KeyValueEvolution(schema, schema_of),
    )


def read_primary_key_batches(
    file_io: FileIO,
    splits: Sequence[Split],
    *,
    schema: TableSchema,
    columns: Sequence[str] | None = None,
    predicates: Sequence[Predicate] = (),
    schema_of: Callable[[int], TableSchema] | None = None,
) -> Iterator[pa.Table]:
    """Yield the merged rows of ``splits``, bucket by bucket, exactly filtered.

    Args:
        file_io: Storage of the table.
        splits: Output of ``FileStoreScan.plan()`` (files pruned by key range).
        schema: The read schema (the latest, or the snapshot's for time travel).
        columns: Columns to return, in this order (``None`` = all).
        predicates: AND of predicates, applied to the merged rows.
        schema_of: Returns a schema by id; files written under other schemas
            are read by field id (``None``: every file must be in ``schema``).

    Raises:
        SchemaMismatchError: an unknown column is named, or a filter literal's
            type does not fit its column (before anything is read).
        MergeFunctionError: the merge engine rejects a key's versions.
        FileNotFoundError: a data file or deletion vector file of the snapshot is missing.
        CorruptMetadataError: a deletion vector file is damaged (named).

    Each split's deletion vectors (``Split.deletion_files``) are read when the
    split is reached; the rows they mark are never returned.
    """
    ctx = read_context(file_io, schema, schema_of)
    arrow = schema.arrow_schema
    names, wanted = resolve_projection(arrow, columns, predicates)
    needed = [n for n in arrow.names if n in set(wanted)]
    expr = and_expression(predicates)
    # Paimon's batch scan of a first-row table skips level 0: its writers compact
    # every write up with lookup before committing (AbstractBatchTableScan,
    # CoreOptions.batchScanSkipLevel0).
    skip_level0 = schema.core_options.merge_engine == MergeEngine.FIRST_ROW
    for split in splits:
        pairs = [(f, p) for f, p in zip(split.files, split.paths, strict=True)
                 if not (skip_level0 and f.level == 0)]  # fmt: skip
        vectors = split.read_deletion_vectors(file_io) if split.deletion_files else None
        bucket = BucketFiles([f for f, _ in pairs], [p for _, p in pairs], vectors)
        for table in read_bucket(ctx, bucket, needed, raw_convertible=split.raw_convertible):
            if expr is not None:
                table = table.filter(expr)
            if table.num_rows:
                yield table.select(names)


@dataclass(frozen=True, slots=True)
class MergeSplitsTask(SplitsTask):
    """Merge-read chosen splits of one plan, on an engine's executor (see :class:`SplitsTask`).

    Each call merges whole buckets (every version of a key lives in one
    bucket) with their deletion vectors, so calls over disjoint split indices
    yield disjoint parts of the merged view.

    Source: Paimon ``MergeFileSplitRead`` run per Spark input partition
    (``PaimonPartitionReader``).
    """

    def __call__(self, indices: Sequence[int]) -> Iterator[pa.Table]:
        """Yield the merged rows of ``splits[i]`` for each ``i`` in ``indices``, unfiltered.

        Raises:
            MergeFunctionError: the merge engine rejects a key's versions.
            FileNotFoundError: a data file is missing.
        """
        return read_primary_key_batches(
            self.file_io, [self.splits[i] for i in indices], schema=self.schema,
            columns=self.columns, schema_of=self.schemas.__getitem__,
        )  # fmt: skip


def read_primary_key_splits(
    file_io: FileIO,
    splits: Sequence[Split],
    *,
    schema: TableSchema,
    columns: Sequence[str] | None = None,
    predicates: Sequence[Predicate] = (),
    limit: int | None = None,
    schema_of: Callable[[int], TableSchema] | None = None,
) -> pa.Table:
    """Read the merged rows of ``splits`` into one table; see :func:`read_primary_key_batches`.

    Args:
        file_io: Storage of the table.
        splits: Output of ``FileStoreScan.plan()``.
        schema: The read schema.
        columns: Columns to return (``None`` = all).
        predicates: AND of predicates applied exactly.
        limit: Stop after this many rows (``None`` = all).
        schema_of: See :func:`read_primary_key_batches`.

    Raises:
        SchemaMismatchError: an unknown column, or a filter literal whose type
            does not fit its column (before anything is read).
        MergeFunctionError: the merge engine rejects a key's versions.
        FileNotFoundError: a data file of the snapshot is missing.
    """
    names, _ = resolve_projection(schema.arrow_schema, columns, predicates)
    out_schema = pa.schema([schema.arrow_schema.field(n) for n in names])
    parts: list[pa.Table] = []
    rows = 0
    workers = min(_READ_WORKERS, len(splits))
    if limit is None and workers > 1:
        # Buckets are independent: decode them in parallel (Arrow releases the GIL).
        def one(split: Split) -> list[pa.Table]:
            return list(
                read_primary_key_batches(
                    file_io,
                    [split],
                    schema=schema,
                    columns=columns,
                    predicates=predicates,
                    schema_of=schema_of,
                )
            )

        with ThreadPoolExecutor(max_workers=workers) as pool:
            parts = [t for tables in pool.map(one, splits) for t in tables]
    else:
        for table in read_primary_key_batches(
            file_io, splits, schema=schema, columns=columns, predicates=predicates,
            schema_of=schema_of,
        ):  # fmt: skip
            parts.append(table)
            rows += table.num_rows
            if limit is not None and rows >= limit:
                break
    result = pa.concat_tables(parts) if parts else out_schema.empty_table()
    return result if limit is None else result.slice(0, limit)
