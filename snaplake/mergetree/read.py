"""Merge-on-read of primary-key buckets.

A bucket's files are cut into sections of overlapping key ranges
(:func:`~snaplake.mergetree.sorted_run.interval_partition`). A section of one
sorted run is read as it is (one version per key); a section of several runs
goes through the streaming k-way merge. Retractions are dropped after the
merge; predicates are applied to the merged rows by the caller.

Every data file is read through :func:`~snaplake.mergetree.kv_file.read_kv_file`,
the one place that opens a key/value file (schema evolution wraps it).
:func:`read_primary_key_splits` reads a bucket's files and sections
(:func:`bucket_reads`) on a thread pool, all with one read context.

Source: Paimon ``MergeFileSplitRead.createMergeReader``, ``MergeTreeReaders``,
``KeyValueFileReaderFactory``, ``DropDeleteReader``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc

from snaplake.mergetree.evolution import KeyValueEvolution
from snaplake.mergetree.kv import (
    VALUE_KIND,
    RowKind,
    kv_schema,
    system_columns,
)
from snaplake.mergetree.kv_file import read_kv_file
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
    "bucket_reads",
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

_READ_WORKERS = 4
"""Files or merged sections :func:`read_primary_key_splits` reads at once."""


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


def bucket_reads(
    ctx: KeyValueReadContext,
    bucket: BucketFiles,
    columns: Sequence[str],
    *,
    batch_rows: int | None = None,
    raw_convertible: bool = False,
) -> list[Callable[[], Iterator[pa.Table]]]:
    """The independent reads of one bucket, in key order (see :func:`read_bucket`).

    Each read is a file read on its own (a one-run section, or every file of a
    raw-convertible split) or the k-way merge of one section of overlapping
    runs; they touch disjoint keys, so they may run on different threads and
    their outputs, in list order, are :func:`read_bucket`'s stream.

    Source: Paimon ``MergeFileSplitRead`` / ``RawFileSplitRead`` (raw-convertible
    splits), ``MergeTreeReaders.readerForMergeTree`` (one reader per section).
    """
    if not bucket.files:
        return []
    value_names = _needs_merge_columns(ctx, columns)
    full = ctx.kv_schema(value_names)
    if raw_convertible:
        return [
            partial(_read_single, ctx, bucket, f, full, columns, batch_rows) for f in bucket.files
        ]
    reads: list[Callable[[], Iterator[pa.Table]]] = []
    for section in interval_partition(bucket.files, ctx.cmp):
        if len(section) == 1:
            reads += [partial(_read_single, ctx, bucket, f, full, columns, batch_rows)
                      for f in section[0].files]  # fmt: skip
        else:
            reads.append(partial(_read_merged, ctx, section, bucket, value_names, columns))
    return reads


def _read_merged(
    ctx: KeyValueReadContext,
    section: Sequence[SortedRun],
    bucket: BucketFiles,
    value_names: Sequence[str],
    columns: Sequence[str],
) -> Iterator[pa.Table]:
    for chunk in merge_bucket(ctx, [section], bucket, value_names):
        yield drop_retracts(chunk).select(list(columns))


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
    reads = bucket_reads(
        ctx, bucket, columns, batch_rows=batch_rows, raw_convertible=raw_convertible
    )
    for read in reads:
        yield from read()


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
    plan = _ReadPlan(file_io, schema, columns, predicates, schema_of)
    for split in splits:
        for read in plan.reads(split):
            yield from plan.finish(read())


class _ReadPlan:
    """One read context, projection and filter for every split of a read.

    Raises:
        SchemaMismatchError: an unknown column, or a filter literal whose type
            does not fit its column.
    """

    def __init__(
        self,
        file_io: FileIO,
        schema: TableSchema,
        columns: Sequence[str] | None,
        predicates: Sequence[Predicate],
        schema_of: Callable[[int], TableSchema] | None,
    ) -> None:
        self.file_io = file_io
        self.ctx = read_context(file_io, schema, schema_of)
        arrow = schema.arrow_schema
        self.names, wanted = resolve_projection(arrow, columns, predicates)
        self.needed = [n for n in arrow.names if n in set(wanted)]
        self.expr = and_expression(predicates)
        # Paimon's batch scan of a first-row table skips level 0: its writers compact
        # every write up with lookup before committing (AbstractBatchTableScan,
        # CoreOptions.batchScanSkipLevel0).
        self.skip_level0 = schema.core_options.merge_engine == MergeEngine.FIRST_ROW

    def reads(self, split: Split) -> list[Callable[[], Iterator[pa.Table]]]:
        """The independent reads of ``split`` (its deletion vectors read now)."""
        pairs = [(f, p) for f, p in zip(split.files, split.paths, strict=True)
                 if not (self.skip_level0 and f.level == 0)]  # fmt: skip
        vectors = split.read_deletion_vectors(self.file_io) if split.deletion_files else None
        bucket = BucketFiles([f for f, _ in pairs], [p for _, p in pairs], vectors)
        return bucket_reads(self.ctx, bucket, self.needed, raw_convertible=split.raw_convertible)

    def finish(self, tables: Iterator[pa.Table]) -> Iterator[pa.Table]:
        """``tables`` filtered exactly, projected, empty ones dropped."""
        for table in tables:
            if self.expr is not None:
                table = table.filter(self.expr)
            if table.num_rows:
                yield table.select(self.names)


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
    if limit is None:
        # Files and sections are independent: decode and merge them in parallel
        # (Arrow releases the GIL), one read context for the whole read.
        plan = _ReadPlan(file_io, schema, columns, predicates, schema_of)
        reads = [read for split in splits for read in plan.reads(split)]
        if len(reads) <= 1:
            parts = [t for read in reads for t in plan.finish(read())]
        else:
            with ThreadPoolExecutor(max_workers=min(_READ_WORKERS, len(reads))) as pool:
                done = pool.map(lambda read: list(plan.finish(read())), reads)
                parts = [t for tables in done for t in tables]
    else:
        for table in read_primary_key_batches(
            file_io, splits, schema=schema, columns=columns, predicates=predicates,
            schema_of=schema_of,
        ):  # fmt: skip
            parts.append(table)
            rows += table.num_rows
            if rows >= limit:
                break
    result = pa.concat_tables(parts) if parts else out_schema.empty_table()
    return result if limit is None else result.slice(0, limit)
