"""Maintenance on Spark: compaction and orphan clean with the heavy work on executors.

:func:`compact` plans on the driver with ``Table.compact``'s job (the
table's :class:`~snaplake.compaction.job.CompactionJob`: small-file
compaction of append tables, universal or full LSM compaction of primary-key
tables), ships one
unit per (partition, bucket), or per slice of a large append bucket, to the
executors (``mapInArrow``), where each unit is rewritten with the same
bounded-memory rewriter as in process and comes back as CommitMessage bytes;
the driver then commits once (COMPACT, with conflict detection, the LSM rule
included). Output files carry the job's token in their names: a task attempt
that fails deletes its own outputs, a failed job has every file with its
token deleted by the driver (see :mod:`snaplake.spark.write`), and a lost
commit deletes the outputs (never an input a primary-key compaction only
moved to another level: it keeps its name).

:func:`remove_orphan_files` lists the table's data directories (one task per
top-level partition directory) on the executors, builds the set of
referenced files on the driver, and deletes the orphans partition by
partition on the executors, with the grace period and dry-run default of
``Table.remove_orphan_files`` (:mod:`snaplake.compaction.orphan_clean`).

Classic and Spark Connect sessions both work; executors reach the warehouse
through the table's picklable FileIO (local disk, or S3 from Python: no
Hadoop connector). Driver and executors must run the same snaplake.
"""

from __future__ import annotations

import logging
import pickle
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from snaplake.commit.message import CommitMessage
from snaplake.compaction.job import (
    DEFAULT_MAX_UNIT_BYTES,
    CompactionJob,
    CompactionPlan,
    CompactionUnit,
)
from snaplake.compaction.maintenance import maintenance_committer
from snaplake.compaction.orphan_clean import (
    DEFAULT_OLDER_THAN,
    OrphanCleanResult,
    OrphanFilesClean,
    list_candidates,
)
from snaplake.compaction.result import CompactResult
from snaplake.spark._common import is_connect, resolve_table
from snaplake.spark.write import _BatchPathFactory, _collect_classic, _collect_connect
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager
from snaplake.store.io.file_io import FileIO
from snaplake.table import Table
from snaplake.write.table_write import abort_messages

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["compact", "remove_orphan_files", "run_compaction"]

logger = logging.getLogger(__name__)

_MESSAGE_DDL = "message binary"
_MESSAGE_SCHEMA = pa.schema([pa.field("message", pa.binary(), nullable=False)])
_LISTING_DDL = "path string, size long, mtime long"
_LISTING_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("mtime", pa.int64(), nullable=False),
    ]
)
_DELETED_DDL = "deleted long"
_DELETED_SCHEMA = pa.schema([pa.field("deleted", pa.int64(), nullable=False)])


def _rewrite_units(
    units: Sequence[CompactionUnit], *, file_io: FileIO, paths: PathFactory
) -> list[CommitMessage]:
    """Rewrite ``units`` one after the other; on any exception delete every output, re-raise.

    Storage: creates the units' outputs; deletes them all again if one fails.
    """
    schema_manager = SchemaManager(file_io, paths)
    done: list[CommitMessage] = []
    try:
        for unit in units:
            done += unit.rewrite(file_io=file_io, paths=paths, schema_manager=schema_manager)
    except BaseException:
        schema = schema_manager.latest() if done else None
        try:
            if schema is not None:
                abort_messages(file_io, paths, schema, done)
        except Exception:  # the unit's own error matters more; orphan clean remains
            logger.warning("could not delete the outputs of a failed compaction task",
                           exc_info=True)  # fmt: skip
        raise
    return done


class _RewriteTask:
    """What ``mapInArrow`` runs per task: rewrite the pickled units of its rows.

    Returns one record batch of serialised CommitMessages. On any exception
    it deletes every output this attempt wrote (never an upgraded input),
    then re-raises, so a retried attempt leaves no extra files.
    """

    def __init__(self, *, file_io: FileIO, root: str, token: str) -> None:
        self.file_io = file_io
        self.root = root
        self.token = token

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        units = [
            pickle.loads(blob)  # pickled by this job's driver
            for batch in batches
            for blob in batch.column("unit").to_pylist()
        ]
        paths = _BatchPathFactory(self.root, token=self.token)
        done = _rewrite_units(units, file_io=self.file_io, paths=paths)
        if done:
            payload = pa.array([m.to_bytes() for m in done], pa.binary())
            yield pa.RecordBatch.from_arrays([payload], schema=_MESSAGE_SCHEMA)


class _ListTask:
    """List the candidates of each directory row older than the cutoff (executor side)."""

    def __init__(self, *, file_io: FileIO, root: str, cutoff_ms: int) -> None:
        self.file_io = file_io
        self.root = root
        self.cutoff_ms = cutoff_ms

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for directory in batch.column("dir").to_pylist():
                found = list(
                    list_candidates(
                        self.file_io,
                        table_root=self.root,
                        directory=directory,
                        cutoff_ms=self.cutoff_ms,
                    )
                )
                if found:
                    yield pa.RecordBatch.from_arrays(
                        [
                            pa.array([s.path for s in found], pa.string()),
                            pa.array([s.size_bytes for s in found], pa.int64()),
                            pa.array([s.modification_time_ms for s in found], pa.int64()),
                        ],
                        schema=_LISTING_SCHEMA,
                    )


class _DeleteTask:
    """Delete the orphan paths of each row (one partition directory's) on an executor."""

    def __init__(self, *, file_io: FileIO) -> None:
        self.file_io = file_io

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        deleted = 0
        for batch in batches:
            for paths in batch.column("paths").to_pylist():
                self.file_io.delete_many(paths)
                deleted += len(paths)
        yield pa.RecordBatch.from_arrays([pa.array([deleted], pa.int64())], schema=_DELETED_SCHEMA)


def _one_row_per_task(spark: SparkSession, data: pa.Table) -> DataFrame:
    """A DataFrame of ``data`` (first column ``id`` = 0..n-1) with about one row per partition.

    Range partitioning on the dense id puts each row in its own partition
    (Spark samples every row of a small input), so each becomes a task.
    """
    df = spark.createDataFrame(data)
    return df.repartitionByRange(max(1, data.num_rows), "id")


def compact(
    spark: SparkSession,
    table: Table | str,
    *,
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
    partitions: Sequence[Mapping[str, Any]] | None = None,
    full: bool = False,
    max_task_input_bytes: int = DEFAULT_MAX_UNIT_BYTES,
) -> CompactResult:
    """Compact a table with the rewriting on Spark executors (one COMPACT snapshot).

    Plans exactly as ``table.compact()`` does, rewrites on the executors and
    commits once on the driver, with the same bounded memory per task as in
    process:

    - append tables: small-file compaction, one task per (partition, bucket),
      or per slice of about ``max_task_input_bytes`` of a larger one;
    - primary-key tables: Paimon's universal LSM compaction (``full=True``:
      full compaction into the top level) of the buckets it picks, one task
      per bucket whatever its size (one streaming k-way merge of its sorted
      runs); the commit checks the LSM rule too.

    Appends and upserts committed meanwhile do not conflict; a concurrent
    commit that removed an input (or, for primary-key tables, wrote
    overlapping files into an output level) makes the commit fail with
    ``CommitConflictError`` after the outputs were deleted (inputs that were
    only moved to a new level are never deleted).

    Args:
        spark: A classic or Spark Connect session; its executors must reach
            the warehouse and import snaplake.
        table: A :class:`Table`, or ``"database.table"`` in ``warehouse``.
        warehouse: Local path or ``s3://bucket/prefix`` of an identifier.
        options: Catalog options (``s3.*``) for ``warehouse``.
        partitions: Partition specs (``{key: value}``, a subset of the keys is
            fine) to compact; ``None`` = every partition.
        full: Paimon's full compaction: append tables rewrite every file of a
            bucket after its leading large ones, not only runs of small files;
            primary-key tables compact every bucket into one top-level sorted
            run (retractions dropped).
        max_task_input_bytes: Append tables: input bytes per task; a bucket
            with more is rewritten as several slices (the same output files).
            Primary-key buckets are never sliced.

    Returns:
        What was rewritten; ``snapshot_id`` is ``None`` when nothing was due
        (then no Spark job ran).

    Raises:
        CommitConflictError: a concurrent commit deleted an input (or broke
            the LSM rule); the outputs were deleted, nothing is lost; run again.
        CommitRetriesExhaustedError: the commit kept losing races; the outputs
            were deleted.
        CommitStateUnknownError: the outcome is unknown; the outputs are kept.
        UnsupportedTableError: a primary-key table snaplake cannot compact
            (dynamic buckets, deletion vectors, ...; nothing was written).
        MergeFunctionError: the merge engine rejected a key's versions (from
            the failed Spark job; its files were deleted).
        SchemaMismatchError: a partition spec names a non-partition column.
        TableNotFoundError: no such table.
        ValueError: an empty ``partitions`` list or ``max_task_input_bytes < 1``.
        Exception: what a failed Spark job raised (pyspark's or Py4J's
            exception), after every file of the job was deleted.

    Storage:
        Executors write Parquet files into the buckets' directories; the
        driver writes one manifest, two manifest lists and one snapshot.
        Inputs are left for snapshot expiry, as in process.

    Source:
        Paimon's Spark ``CompactProcedure`` (driver plan, executor rewrite,
        one driver commit), Delta's ``OPTIMIZE``.
    """
    start = time.monotonic()
    target = resolve_table(table, warehouse=warehouse, options=options)
    job = target.file_store().new_compaction(
        commit=maintenance_committer(target), full=full, partitions=partitions
    )
    plan = job.plan_units(max_unit_bytes=max_task_input_bytes)
    return run_compaction(spark, target, job, plan, started=start)


def run_compaction(
    spark: SparkSession,
    table: Table,
    job: CompactionJob,
    plan: CompactionPlan,
    *,
    local_below_bytes: int | None = None,
    straggler_timeout_s: float = 120.0,
    started: float | None = None,
) -> CompactResult:
    """Rewrite ``plan``'s units on the executors and commit them once with ``job``.

    The Spark runner of a :class:`~snaplake.compaction.job.CompactionJob`
    (the daemon's engine hands it the plan it decided on; nothing is planned
    again). Errors and storage as :func:`compact`.

    Args:
        spark: The session.
        table: The table (its FileIO and root reach the executors).
        job: The table's compaction job (commits on the driver).
        plan: What ``job.plan_units`` returned.
        local_below_bytes: Units with less input than this are rewritten in
            this (the driver's) process, one at a time, while the executors
            rewrite the others (the daemon's ``spark.min-input-bytes``);
            ``None`` = every unit on the executors.
        straggler_timeout_s: After a failed job on a classic session, how
            long to wait for its running tasks before deleting its files.
        started: ``time.monotonic()`` when the compaction began; default now.
    """
    start = time.monotonic() if started is None else started
    if not plan.units:
        return CompactResult.nothing(start=start)
    cm = job.commit
    bar = local_below_bytes
    here = [u for u in plan.units if bar is not None and u.input_bytes < bar]
    there = [u for u in plan.units if bar is None or u.input_bytes >= bar]
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-compaction") as pool:
        local = (
            pool.submit(_rewrite_units, here, file_io=cm.file_io, paths=cm.paths) if here else None
        )
        try:
            messages = (
                _rewrite_on_executors(spark, table, there, straggler_timeout_s) if there else []
            )
        except BaseException:
            if local is not None and local.exception() is None:
                job.abort(local.result())
            raise
        if local is not None:
            try:
                messages += local.result()
            except BaseException:
                job.abort(messages)
                raise
    return job.commit_rewritten(plan, messages, started=start)


def _rewrite_on_executors(
    spark: SparkSession, table: Table, units: Sequence[CompactionUnit], straggler_timeout_s: float
) -> list[CommitMessage]:
    """Run one Spark task per unit; return their messages (every job file deleted on failure)."""
    token = secrets.token_hex(8)
    data = pa.table(
        {
            "id": pa.array(range(len(units)), pa.int64()),
            "unit": pa.array([pickle.dumps(u) for u in units], pa.binary()),
        }
    )
    rewrite = _RewriteTask(file_io=table.file_io, root=table.root, token=token)
    spark_job = _one_row_per_task(spark, data).mapInArrow(rewrite, _MESSAGE_DDL)
    logger.info(
        "spark compaction of %s: %d task(s), %d input bytes",
        table.identifier, len(units), sum(u.input_bytes for u in units),
    )  # fmt: skip
    if is_connect(spark):
        rows = _collect_connect(spark_job, table, token)
    else:
        rows = _collect_classic(spark_job, table, token, straggler_timeout_s)
    return [CommitMessage.from_bytes(bytes(r[0])) for r in rows]


def remove_orphan_files(
    spark: SparkSession,
    table: Table | str,
    *,
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
    older_than: timedelta | datetime = DEFAULT_OLDER_THAN,
    dry_run: bool = True,
) -> OrphanCleanResult:
    """Find (and unless ``dry_run``, delete) unreferenced files, listing them on executors.

    The same files as ``table.remove_orphan_files`` are candidates and
    orphans: the data directories are listed in parallel (one Spark task per
    top-level partition directory, or per bucket directory of an
    unpartitioned table), the metadata directories on the driver; then the
    driver reads every retained snapshot and tag, and the orphans are deleted
    partition by partition on the executors (metadata orphans on the driver).

    Args:
        spark: A classic or Spark Connect session.
        table: A :class:`Table`, or ``"database.table"`` in ``warehouse``.
        warehouse: Local path or ``s3://bucket/prefix`` of an identifier.
        options: Catalog options (``s3.*``) for ``warehouse``.
        older_than: Grace period, or an aware cutoff instant; only files
            modified before it are touched (protects commits in flight).
        dry_run: Only report (the default).

    Returns:
        The orphans found (and deleted, unless ``dry_run``).

    Raises:
        ValueError: a negative age, a naive or future ``older_than`` (before
            any Spark job).
        CorruptMetadataError: a retained snapshot's metadata is missing;
            nothing was deleted.
        TableNotFoundError: no such table.
        Exception: what a failed Spark job raised.

    Storage:
        Lists the table; deletes the orphan files (never directories) unless
        ``dry_run``.

    Source:
        Paimon's ``SparkOrphanFilesClean`` (directories listed on executors,
        used files from the driver), ``OrphanFilesClean`` for what counts.
    """
    target = resolve_table(table, warehouse=warehouse, options=options)
    start = time.monotonic()
    clean = OrphanFilesClean(
        file_io=target.file_io,
        paths=target.paths,
        snapshot_manager=target.snapshot_manager,
        older_than=older_than,
    )
    data_dirs, meta_dirs = clean.scan_dirs()
    listed: list[Any] = []
    if data_dirs:
        dirs = pa.table(
            {"id": pa.array(range(len(data_dirs)), pa.int64()), "dir": pa.array(data_dirs)}
        )
        lister = _ListTask(file_io=target.file_io, root=target.root, cutoff_ms=clean.cutoff_ms)
        found = _one_row_per_task(spark, dirs).mapInArrow(lister, _LISTING_DDL).toArrow()
        listed += _statuses(found)
    for directory in meta_dirs:
        listed += list_candidates(
            target.file_io, table_root=target.root, directory=directory, cutoff_ms=clean.cutoff_ms
        )

    def delete(paths: Sequence[str]) -> None:
        _delete_by_directory(spark, target, paths, data_dirs)

    return clean.clean(listed, dry_run=dry_run, delete=delete, started=start)


def _statuses(found: pa.Table) -> list[Any]:
    from snaplake.store.io.file_io import FileStatus

    return [
        FileStatus(path=p, size_bytes=s, modification_time_ms=m)
        for p, s, m in zip(
            found.column("path").to_pylist(),
            found.column("size").to_pylist(),
            found.column("mtime").to_pylist(),
            strict=True,
        )
    ]


def _delete_by_directory(
    spark: SparkSession, table: Table, paths: Sequence[str], data_dirs: Sequence[str]
) -> None:
    """Delete data orphans on the executors, one task per data directory; others here."""
    data = set(data_dirs)
    by_dir: dict[str, list[str]] = {}
    local: list[str] = []
    for path in paths:
        top = path[len(table.root) :].lstrip("/").split("/", 1)[0]
        directory = f"{table.root}/{top}"
        (by_dir.setdefault(directory, []) if directory in data else local).append(path)
    if by_dir:
        rows = pa.table(
            {
                "id": pa.array(range(len(by_dir)), pa.int64()),
                "paths": pa.array(list(by_dir.values()), pa.list_(pa.string())),
            }
        )
        deleter = _DeleteTask(file_io=table.file_io)
        _one_row_per_task(spark, rows).mapInArrow(deleter, _DELETED_DDL).toArrow()
    if local:
        table.file_io.delete_many(local)
