"""Write a Spark DataFrame into a snaplake table: executors write files, the driver commits.

Each Spark task runs the writer of the table's FileStore
(:meth:`snaplake.filestore.FileStore.new_write`) over its partition's Arrow
batches (``mapInArrow``), so the files have the same partition/bucket layout
and statistics as a plain Python write, and returns
its ``CommitMessage`` bytes. The driver collects them and commits once.
Files of a task attempt that fails are deleted by that attempt; files of
a job that failed (every file is named with the job's token) and of a commit
that failed are deleted by the driver.

Works on a classic session and on a Spark Connect session (which has no
``sparkContext``). On a classic session the driver waits, through the job
group's status tracker, until the failed job's remaining tasks stopped before
it deletes the job's files. Spark Connect offers no view of running tasks, so
there the job is tagged (``SparkSession.addTag``), a failure interrupts the
tag's operations (``interruptTag``: stops a job the server still runs, e.g.
after the client lost its stream or was interrupted) and the files are
deleted at once: a task attempt still running then may finish a file after
the deletion. Such a file is never committed (the failed job's messages are
never collected), so no snapshot sees it; the table's orphan clean removes it.

Used by :func:`write` (batch) and by :class:`snaplake.spark.SnaplakeSink`
(streaming).
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from snaplake.commit.message import CommitMessage
from snaplake.commit.result import CommitResult
from snaplake.errors import AmbiguousOrderError, SchemaMismatchError
from snaplake.filestore import file_store_for
from snaplake.options import Operation
from snaplake.spark._buckets import BUCKET_COLUMN, by_bucket
from snaplake.spark._common import arrow_schema_of as spark_arrow_schema
from snaplake.spark._common import (
    check_spark_schema,
    is_connect,
    resolve_table,
    with_missing_columns,
)
from snaplake.spark.ordering import VersionCheck, normalize_order_by, plan_version_order
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.store.snapshot_manager import SnapshotManager
from snaplake.store.support import check_supported
from snaplake.table import Table
from snaplake.write.batch_write import commit_or_abort
from snaplake.write.schema_merge import merge_data_schema
from snaplake.write.table_write import TableWrite

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, Row

__all__ = ["write", "write_messages"]

logger = logging.getLogger(__name__)

_MESSAGE_SCHEMA = pa.schema([pa.field("message", pa.binary(), nullable=False)])
_SCHEMA_ERROR_MARK = "snaplake.errors.SchemaMismatchError"
_ORDER_ERROR_MARK = "snaplake.errors.AmbiguousOrderError"


class _BatchPathFactory(PathFactory):
    """PathFactory whose data file names start with the batch's token.

    Names stay Paimon-shaped, ``data-<uuid>-<n>.parquet``: the first 16 hex
    digits of the uuid are the token of the Spark job (shared by all its
    tasks), the last 16 are random per task attempt. After a failed job the
    driver can therefore find every file the job wrote, including files of
    tasks that were still running when the job failed, by name.
    """

    def __init__(self, table_root: str, *, token: str) -> None:
        super().__init__(table_root)
        rand = secrets.token_hex(8)
        self.file_uuid = f"{token[:8]}-{token[8:12]}-{token[12:16]}-{rand[:4]}-{rand[4:]}"
        self._names = itertools.count()

    def new_data_file_name(self, *, extension: str = "parquet", prefix: str = "data-") -> str:
        """A fresh ``<prefix><token-uuid>-<n>.<extension>`` name (thread-safe)."""
        return f"{prefix}{self.file_uuid}-{next(self._names)}.{extension}"


def _token_prefix(token: str, *, prefix: str = "data-") -> str:
    """The file-name prefix shared by every data file of the job with ``token``.

    ``prefix`` is the table's ``data-file.prefix``.
    """
    return f"{prefix}{token[:8]}-{token[8:12]}-{token[12:16]}-"


@dataclass(slots=True)
class _TaskTable:
    """What a FileStore needs of the table, on an executor (see ``filestore.TableContext``)."""

    file_io: FileIO
    paths: PathFactory
    schema_manager: SchemaManager
    snapshot_manager: SnapshotManager
    identifier: str


class _WriteTask:
    """The function ``mapInArrow`` runs on an executor: one TableWrite per task attempt.

    Holds only picklable configuration (the FileIO carries no client). Yields
    one record batch of serialised CommitMessages, or nothing when the
    partition had no rows. With a :class:`VersionCheck` each batch is checked
    (the rows arrive sorted by it) before it is written; ``order_only``
    columns are dropped after the check. On any exception it deletes every
    file this attempt wrote, then re-raises: a retried attempt leaves no orphans.
    """

    def __init__(
        self,
        *,
        file_io: FileIO,
        root: str,
        identifier: str,
        schema: TableSchema,
        commit_user: str,
        token: str,
        row_kind_column: str | None = None,
        sequences: Mapping[tuple[bytes, int], int] | None = None,
        versions: VersionCheck | None = None,
        order_only: Sequence[str] = (),
        overwrite: bool = False,
    ) -> None:
        self.file_io = file_io
        self.root = root
        self.identifier = identifier
        self.schema = schema
        self.commit_user = commit_user
        self.token = token
        self.row_kind_column = row_kind_column
        self.sequences = dict(sequences or {})
        self.versions = versions
        self.order_only = tuple(order_only)
        self.overwrite = overwrite

    def _writer(self) -> TableWrite:
        """The FileStore's writer: files named with the job's token, state from the driver."""
        paths = _BatchPathFactory(self.root, token=self.token)
        table = _TaskTable(
            file_io=self.file_io,
            paths=paths,
            schema_manager=SchemaManager(self.file_io, paths),
            snapshot_manager=SnapshotManager(self.file_io, paths),
            identifier=self.identifier,
        )
        store = file_store_for(table, self.schema)
        write = store.new_write(self.commit_user, restored=self.sequences, checked=True)
        if self.overwrite:
            write.ignore_previous_files()
        return write

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        write = self._writer()
        check = self.versions.new_checker() if self.versions is not None else None
        messages: list[CommitMessage] = []
        try:
            for batch in batches:
                if BUCKET_COLUMN in batch.schema.names:
                    batch = batch.drop_columns([BUCKET_COLUMN])
                if check is not None:
                    check(batch)
                if self.order_only:
                    batch = batch.drop_columns(list(self.order_only))
                kinds = None
                if self.row_kind_column is not None:
                    kinds = batch.column(self.row_kind_column)
                    batch = batch.drop_columns([self.row_kind_column])
                write.write_arrow(batch, row_kinds=kinds)
            messages = write.prepare_commit()
        except BaseException:
            try:
                write.abort(messages)
            except Exception:  # the task's own error matters more; orphan clean remains
                logger.warning("could not delete the files of a failed write task", exc_info=True)
            raise
        if messages:
            payload = pa.array([m.to_bytes() for m in messages], pa.binary())
            yield pa.RecordBatch.from_arrays([payload], schema=_MESSAGE_SCHEMA)


def _wait_for_tasks(
    sc: SparkContext, group: str | None, before: set[int], timeout_s: float
) -> None:
    """Wait until no task of the jobs started since ``before`` (in ``group``) is still running.

    A failed job's other tasks may keep running (and writing) for a while;
    Spark kills Python workers ``spark.python.task.killTimeout`` after a
    cancellation.
    """
    tracker = sc.statusTracker()
    deadline = time.monotonic() + timeout_s
    while True:
        running = 0
        for job_id in set(tracker.getJobIdsForGroup(group)) - before:
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                stage = tracker.getStageInfo(stage_id)
                running += stage.numActiveTasks if stage is not None else 0
        if running == 0:
            return
        if time.monotonic() > deadline:
            logger.warning("%d task(s) of a failed write are still running; not waiting", running)
            return
        time.sleep(0.05)


def _delete_job_files(table: Table, token: str) -> None:
    """Delete every data and changelog file named with ``token`` (the files of one failed job).

    Storage: lists the table directory; deletes the matching files.
    """
    opts = table.schema().core_options
    prefixes = tuple(
        _token_prefix(token, prefix=p) for p in (opts.data_file_prefix, opts.changelog_file_prefix)
    )
    try:
        doomed = [
            st.path
            for st in table.file_io.list_files(table.root)
            if st.path.rsplit("/", 1)[-1].startswith(prefixes)
        ]
        table.file_io.delete_many(doomed)
    except Exception:  # cleanup must not hide the original error; orphan clean remains
        logger.warning("could not delete the files of a failed write", exc_info=True)
        return
    if doomed:
        logger.info("deleted %d file(s) of a failed write to %s", len(doomed), table.identifier)


def _collect_classic(job: DataFrame, table: Table, token: str, timeout_s: float) -> list[Row]:
    """Run ``job`` on a classic session; after a failure wait for its tasks, delete its files."""
    sc = job.sparkSession.sparkContext
    group = sc.getLocalProperty("spark.jobGroup.id")
    before = set(sc.statusTracker().getJobIdsForGroup(group))
    try:
        return job.collect()
    except Exception:
        _wait_for_tasks(sc, group, before, timeout_s)
        _delete_job_files(table, token)
        raise


def _collect_connect(job: DataFrame, table: Table, token: str) -> list[Row]:
    """Run ``job`` on a Spark Connect session under a per-job tag; on failure stop it, delete.

    Connect has no status tracker to wait for the failed job's remaining
    tasks: the tag's operations are interrupted (a no-op when the server had
    already failed the job) and the files are deleted at once. A task that
    finishes a file after the deletion leaves it for orphan clean (it is
    never committed). ``BaseException`` is caught too: a client interrupted
    (``KeyboardInterrupt``) would otherwise leave the job running on the
    server.

    Source:
        Spark Connect's operation tags (``SparkSession.addTag`` /
        ``interruptTag``, pyspark >= 3.5), the Connect counterpart of job
        groups.
    """
    spark = job.sparkSession
    tag = f"snaplake-write-{token}"
    spark.addTag(tag)
    try:
        return job.collect()
    except BaseException:
        try:
            interrupted = spark.interruptTag(tag)
            if interrupted:
                logger.info("interrupted %d operation(s) of a failed write", len(interrupted))
        except Exception:  # the write's own error matters more; orphan clean remains
            logger.warning("could not interrupt the operations of a failed write", exc_info=True)
        _delete_job_files(table, token)
        raise
    finally:
        spark.removeTag(tag)


def write_messages(
    df: DataFrame,
    table: Table,
    *,
    commit_user: str,
    check_nullability: bool = True,
    straggler_timeout_s: float = 120.0,
    merge_schema: bool = False,
    row_kind_column: str | None = None,
    order_by: str | Sequence[str] | None = None,
    overwrite: bool = False,
) -> tuple[list[CommitMessage], TableSchema]:
    """Write ``df`` into data files on the executors and return their CommitMessages.

    When the table's FileStore writes by bucket (primary-key tables), the rows
    are first repartitioned by (partition keys, Paimon bucket): one task
    writes each bucket, continuing the sequence numbers the driver restored
    (``FileStore.restore_write_state``). Where versions of a key need an order
    (:mod:`snaplake.spark.ordering`), each task sorts its rows by key and
    ``order_by`` (``sortWithinPartitions``, which spills), numbers them in
    that order, and refuses a key whose versions nothing orders.

    Table columns the DataFrame lacks are written as NULL when nullable (e.g.
    a column added by ``alter_table`` while a stream runs), as Delta does.

    With dynamic buckets (``bucket = -1``) one task writes each partition and
    assigns its buckets.

    Nothing is committed: the caller commits the messages or aborts them.
    When the job fails, the driver deletes every file named with the job's
    token (a failed task attempt deletes its own at once); see the module
    docstring for stragglers on classic and Spark Connect sessions.

    Args:
        df: Any DataFrame whose columns match the table (any order; see
            :func:`snaplake.spark._common.check_spark_schema`), of a classic
            or a Spark Connect session. One task per Spark partition.
        table: The target table.
        commit_user: Recorded in the writers' logs.
        check_nullability: See ``check_spark_schema``.
        straggler_timeout_s: After a failure on a classic session, how long to
            wait (seconds) for the job's still-running tasks before deleting
            its files. Unused under Spark Connect.
        merge_schema: First alter the table so the DataFrame fits: new
            columns are added (nullable), wider types widen the column where
            the rules allow (see :mod:`snaplake.write.schema_merge`). The
            alter is committed before any file is written and is not
            repeated when the same data comes again.
        row_kind_column: Primary-key tables: a column of ``df`` (not of the
            table) holding each row's kind (``'+I' '-U' '+U' '-D'`` or 0..3);
            tables with ``rowkind.field`` take the kinds from their own column.
        order_by: Primary-key tables: column(s) of ``df`` ordering the
            versions of a key (e.g. a change log's sequence number); rows of
            a key get sequence numbers in this order (ascending; a ``-U``
            before the other kinds of an equal value). Columns the table
            lacks are used for ordering only, never written (``merge_schema``
            does not add them). Without it, and without the table's
            ``sequence.field``, a key may have only one version per write.
        overwrite: The messages will overwrite their partitions: the writers
            restore no state of them (a dynamic-bucket writer no HASH index;
            see ``TableWrite.ignore_previous_files``).

    Returns:
        The messages (one per partition and bucket and task) and the schema
        the files were written with.

    Raises:
        SchemaMismatchError: the DataFrame does not fit the table (checked on
            the driver before any job runs; the message names the columns;
            with ``merge_schema`` only columns that cannot widen; a missing
            NOT NULL column), a bad ``order_by`` column, or, with
            ``check_nullability=False``, a NOT NULL column held a null. No
            file is left behind.
        AmbiguousOrderError: a key has several different versions and neither
            ``order_by`` nor ``sequence.field`` orders them, versions tie on
            ``order_by``, or an ``order_by`` value is null (found by the
            tasks; the job's files are deleted, nothing is committed).
        ValueError: an empty or repeated ``order_by``.
        UnsupportedTableError: the table is one snaplake cannot write
            (``check_supported``), refused on the driver before any job runs.
        Exception: whatever the Spark job raised (a ``Py4JJavaError`` or
            ``PythonException``; under Connect pyspark's Connect exceptions),
            after the job's files were deleted.

    Storage:
        Writes data files (``file.format``) under the table (invisible until
        committed); after a failure, lists the table and deletes them again.
    """
    order = normalize_order_by(order_by)
    table_columns = set(table.schema().field_names)
    # columns that steer the write but are not written (nor added by merge_schema)
    steering = [c for c in (row_kind_column, *order) if c is not None and c not in table_columns]
    order_only = [c for c in order if c in steering and c != row_kind_column]
    if merge_schema:
        merge_data_schema(
            table.schema_manager,
            spark_arrow_schema(df.drop(*[c for c in steering if c in df.columns]).schema),
            has_snapshots=table.latest_snapshot() is not None,
            identifier=table.identifier,
        )
    schema = table.schema()
    store = table.file_store(schema)
    check_supported(schema, Operation.WRITE)  # on the driver, before any job runs; not again
    if row_kind_column is not None:
        if row_kind_column not in df.columns:
            raise SchemaMismatchError(f"row_kind_column {row_kind_column!r} is not a column")
        if not store.takes_row_kinds:
            raise SchemaMismatchError("row kinds need a primary-key table")
    versions = plan_version_order(
        table.file_store(schema),
        identifier=table.identifier,
        order_by=order,
        kind_column=row_kind_column,
        data_columns=df.columns,
        data_types=[f.dataType.simpleString() for f in df.schema.fields],
    )
    df = with_missing_columns(df, schema, table.identifier)
    data_schema = df.drop(*[c for c in steering if c in df.columns]).schema
    check_spark_schema(data_schema, schema, check_nullability=check_nullability)
    token = secrets.token_hex(8)
    if store.writes_by_bucket:
        df = by_bucket(df, schema, by_key=store.bucket_mode == "cross-partition")
        if versions is not None:
            df = versions.sort(df)
    task = _WriteTask(
        file_io=table.file_io,
        root=table.root,
        identifier=table.identifier,
        schema=schema,
        commit_user=commit_user,
        token=token,
        row_kind_column=row_kind_column,
        sequences=store.restore_write_state(),
        versions=versions,
        order_only=order_only,
        overwrite=overwrite,
    )
    job = df.mapInArrow(task, "message binary")
    try:
        if is_connect(df.sparkSession):
            rows = _collect_connect(job, table, token)
        else:
            rows = _collect_classic(job, table, token, straggler_timeout_s)
    except Exception as exc:
        text = str(exc)
        if _ORDER_ERROR_MARK in text:
            raise AmbiguousOrderError(_relayed_text(text, _ORDER_ERROR_MARK)) from exc
        if _SCHEMA_ERROR_MARK in text:
            raise SchemaMismatchError(
                f"a DataFrame row does not fit table {table.identifier}: "
                f"{_relayed_text(text, _SCHEMA_ERROR_MARK)}"
            ) from exc
        raise
    return [CommitMessage.from_bytes(bytes(r[0])) for r in rows], schema


def _relayed_text(text: str, mark: str) -> str:
    """Extract the message of the error named ``mark`` from a Python traceback Spark relayed.

    The executor's traceback ends with ``snaplake.errors.<Error>: <message>``.
    """
    start = text.rfind(mark + ": ")
    if start < 0:
        return text
    return text[start + len(mark) + 2 :].splitlines()[0]


def write(
    df: DataFrame,
    table: Table | str,
    *,
    mode: Literal["append", "overwrite"] = "append",
    overwrite_partitions: Mapping[str, Any] | Literal["dynamic"] | None = None,
    warehouse: str | None = None,
    options: Mapping[str, str] | None = None,
    commit_user: str | None = None,
    check_nullability: bool = True,
    merge_schema: bool = False,
    row_kind_column: str | None = None,
    order_by: str | Sequence[str] | None = None,
) -> CommitResult:
    """Write a DataFrame into a table as one snapshot (a batch job, not a stream).

    On a primary-key table the rows upsert (or, with ``row_kind_column``,
    retract) by key; see :func:`write_messages`.

    Executors write the data files (one task per Spark partition); the driver
    commits once. A failed job or commit deletes the files it wrote (under
    Spark Connect, files a straggler task of a failed job finishes after the
    deletion are left for orphan clean; see :func:`write_messages`).

    Args:
        df: Rows to write, from a classic or a Spark Connect session; columns
            match the table by name (any order), types storable without loss.
            Under Connect the server's executors must reach the warehouse.
        table: A :class:`Table`, or ``"database.table"`` in ``warehouse``.
        mode: ``"append"`` adds the rows; ``"overwrite"`` replaces the rows
            selected by ``overwrite_partitions``.
        overwrite_partitions: With ``mode="overwrite"``: ``None`` replaces the
            whole table; a (possibly partial) ``{partition_key: value}``
            mapping replaces the matching partitions (every row must lie in
            them); ``"dynamic"`` replaces exactly the partitions the data
            touches.
        warehouse: Warehouse of an identifier.
        options: Catalog options (``s3.*``) for ``warehouse``.
        commit_user: Recorded in the snapshot (default: a new
            ``spark-write-<uuid>``). Batch commits are never deduplicated.
        check_nullability: Refuse nullable columns for NOT NULL fields by
            schema (default) or check the values on the executors.
        merge_schema: Add the DataFrame's new columns to the table (nullable)
            and widen columns whose type it widens, in one ``alter_table``
            before writing; without it such a DataFrame raises
            ``SchemaMismatchError`` naming the columns.
        row_kind_column: Primary-key tables: the column of ``df`` holding
            row kinds (see :func:`write_messages`).
        order_by: Primary-key tables: column(s) of ``df`` ordering the
            versions of a key; required (unless the table has
            ``sequence.field``) when ``df`` holds several different rows of
            one key (see :func:`write_messages`). Table columns ``df`` lacks
            are written as NULL when nullable.

    Returns:
        The commit result (``snapshot_id`` ``None`` when an append had no rows
        and the table is empty).

    Raises:
        SchemaMismatchError: the data does not fit the table (e.g. lacks a
            NOT NULL column), or lies outside a static ``overwrite_partitions``
            spec; no file is left behind.
        AmbiguousOrderError: several different rows of one key and nothing
            orders them (see ``order_by``); nothing is committed, no file is
            left behind.
        CommitConflictError: an overwrite raced a commit that removed the
            files it replaces.
        CommitRetriesExhaustedError: the commit kept losing races; the files
            were deleted, retry the write.
        CommitStateUnknownError: the outcome is unknown; files are kept.
        ValueError: a bad ``mode`` / ``overwrite_partitions`` combination,
            an empty or repeated ``order_by``.
        TableNotFoundError: no such table.

    Storage:
        Writes Parquet data files, one manifest, two manifest lists and one
        snapshot; deletes the data files again on failure.

    Source:
        Paimon's Spark ``WriteIntoPaimonTable`` (executor writers, driver
        commit) and Delta's ``replaceWhere`` / dynamic partition overwrite.
    """
    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be 'append' or 'overwrite', not {mode!r}")
    if mode == "append" and overwrite_partitions is not None:
        raise ValueError("overwrite_partitions needs mode='overwrite'")
    if isinstance(overwrite_partitions, str) and overwrite_partitions != "dynamic":
        raise ValueError(
            "overwrite_partitions must be a mapping, 'dynamic' or None, "
            f"not {overwrite_partitions!r}"
        )
    target = resolve_table(table, warehouse=warehouse, options=options)
    user = commit_user or f"spark-write-{uuid.uuid4()}"
    overwrite: Mapping[str, Any] | bool | None = None
    if mode == "overwrite":
        if overwrite_partitions is None:
            overwrite = {}
        elif overwrite_partitions == "dynamic":
            overwrite = True
        else:
            overwrite = dict(overwrite_partitions)
    messages, schema = write_messages(
        df,
        target,
        commit_user=user,
        check_nullability=check_nullability,
        merge_schema=merge_schema,
        row_kind_column=row_kind_column,
        order_by=order_by,
        overwrite=overwrite is not None,
    )
    commit = target.new_commit(commit_user=user)
    result = commit_or_abort(commit, schema, messages, commit_identifier=None, overwrite=overwrite)
    logger.info(
        "spark write to %s: snapshot %s, %d file(s), %d row(s), %.0f ms",
        target.identifier,
        result.snapshot_id,
        result.files_added,
        result.records_added,
        result.duration_s * 1000,
    )
    return result
