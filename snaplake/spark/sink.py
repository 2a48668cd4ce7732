"""SnaplakeSink: an exactly-once Spark Structured Streaming sink for ``foreachBatch``.

``df.writeStream.foreachBatch(SnaplakeSink("db.t", warehouse=...)).start()``.
Per micro-batch the driver first asks the table whether this query's
``commit_user`` already committed ``batch_id`` (the transaction map carried
in every snaplake snapshot); a replayed batch returns at once, before the
DataFrame is touched. Otherwise executors write the data files and return
CommitMessages, and the driver commits them once with
``commit_identifier = batch_id``. A batch into a dynamic-bucket table whose
commit lost a HASH index race (``HashIndexConflictError``: another writer
added keys to a bucket it changes), or into a cross-partition table whose
commit wrote a key another writer wrote since its key map
(``CrossPartitionConflictError``), is written again, up to 10 times.

Under Spark Connect (``SparkSession.builder.remote(...)``) the client pickles
the sink and the Connect server calls it in a Python process of its own, with
a Connect DataFrame; the protocol is the same, but that process cannot see
the streaming query's id, so a ``commit_user`` must be given (see
:class:`SnaplakeSink`).

Source: Spark's ``foreachBatch`` contract (a batch may be re-run after a
failure with the same ``batchId`` and the same rows: "use the batchId to
deduplicate"), Delta Lake's ``txn`` action ``(appId, version)`` that its
foreachBatch idempotent writes use, Paimon's ``commitIdentifier`` dedup in
``FileStoreCommitImpl``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.result import CommitResult
from snaplake.errors import CrossPartitionConflictError, HashIndexConflictError
from snaplake.spark._common import connect_mode, is_connect, resolve_table
from snaplake.spark.ordering import normalize_order_by
from snaplake.spark.write import write_messages
from snaplake.table import Table
from snaplake.write.batch_write import commit_or_abort

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["BatchOutcome", "SinkBatchResult", "SnaplakeSink"]

logger = logging.getLogger(__name__)

_QUERY_ID_PROPERTY = "sql.streaming.queryId"
_INDEX_CONFLICT_ATTEMPTS = 10
"""Writes of one batch that lost a HASH index or cross-partition key race, at most."""
_CONNECT_NEEDS_USER = (
    "SnaplakeSink needs an explicit commit_user under Spark Connect: the Connect server runs "
    "foreachBatch functions where the streaming query's id is not visible, so the default "
    "'spark-<queryId>' cannot be derived. Pass commit_user=... with a name stable across "
    "restarts of this query (same checkpoint) and unique among running queries, e.g. "
    "SnaplakeSink(table, commit_user='orders-ingest')"
)


class BatchOutcome(StrEnum):
    """What the sink did with one micro-batch."""

    COMMITTED = "committed"
    """Files written and a new snapshot published."""
    SKIPPED = "skipped"
    """Replayed batch: already committed by this commit user; the DataFrame was not read."""
    EMPTY = "empty"
    """No rows: nothing written, no snapshot."""
    DUPLICATE = "duplicate"
    """Committed by this user meanwhile (between the check and the commit); files deleted."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkBatchResult:
    """One ``foreachBatch`` call of :class:`SnaplakeSink`.

    Attributes:
        batch_id: Spark's micro-batch id (the commit identifier).
        commit_user: Who committed.
        outcome: What happened.
        commit: The commit result (``None`` when skipped or empty).
        num_messages: CommitMessages collected from the executors.
        write_s: Seconds spent in the Spark job writing files.
        commit_s: Seconds spent committing.
        total_s: Seconds of the whole call.
    """

    batch_id: int
    commit_user: str
    outcome: BatchOutcome
    commit: CommitResult | None
    num_messages: int
    write_s: float
    commit_s: float
    total_s: float


@dataclass(slots=True)
class _UserState:
    """Per commit user: the committer (keeps its last manifest lists) and a lock."""

    committer: FileStoreCommit
    lock: threading.Lock


class SnaplakeSink:
    """A ``foreachBatch`` callable writing each micro-batch exactly once into a table.

    Use one sink per streaming query (a sink may serve several queries when
    each has its own checkpoint, since the default commit user differs).

    Works with classic and Spark Connect sessions. Under Connect,
    ``foreachBatch(sink)`` pickles the sink (the table is sent as its FileIO,
    root and identifier and re-opened on the server); the server calls it in
    its own Python process, so ``on_batch`` runs there too (it must be
    picklable; record results to storage, not to client memory), and
    ``commit_user`` is required.

    Args:
        table_or_identifier: A :class:`snaplake.Table`, or ``"database.table"``
            in ``warehouse``. The table must exist.
        warehouse: Local path, ``file://`` or ``s3://bucket/prefix`` of an
            identifier. Executors reach it through the picklable FileIO: no
            Hadoop S3 connector is needed.
        commit_user: Who commits. Default: ``spark-<queryId>``, where the
            query id is the one Spark stores in the checkpoint (stable across
            restarts; a new checkpoint is a new query and a new user). Set it
            explicitly to keep dedup across a change of checkpoint, and never
            share one value between two running queries. With an explicit
            user, a new checkpoint (batch ids restarting at 0) also needs a
            new user, or its first batches are skipped as already committed.
            Required under Spark Connect, where the query id is not visible
            to the function the server runs.
        options: Catalog options (``s3.*`` keys) for ``warehouse``.
        check_nullability: Refuse a nullable column for a NOT NULL field by
            schema (default, as Iceberg does), or check the values on the
            executors instead (needed for file sources, whose columns Spark
            always marks nullable).
        on_batch: Called with a :class:`SinkBatchResult` after every batch
            (for progress reporting and metrics); its errors are logged only.
            Under Spark Connect it runs in the server's Python process.
        merge_schema: Evolve the table with the stream: a batch with columns
            the table lacks adds them (nullable), a wider type widens the
            column where Paimon's rules allow, in one ``alter_table`` before
            the batch's files are written. A batch replayed after a crash
            between that alter and the commit finds the columns there and
            alters nothing again. Without it such a batch raises
            ``SchemaMismatchError`` naming the columns.
        row_kind_column: Primary-key tables: a micro-batch column (not a
            table column) holding each row's kind (``'+I' '-U' '+U' '-D'``);
            rows are upserted by key, repartitioned so that one task writes
            each (partition, bucket). Tables with ``rowkind.field`` take the
            kinds from that table column instead.
        order_by: Primary-key tables: column(s) of the micro-batch ordering
            the versions of a key (e.g. the change log's sequence number or
            position); within a batch, rows of a key get sequence numbers in
            this order (ascending; a ``-U`` before the other kinds of an equal
            value), so the newest version wins whatever order Spark delivers
            the rows in. Columns the table lacks steer the order only and are
            not written. Without it, and without the table's
            ``sequence.field``, a batch holding two different rows of one
            key fails with ``AmbiguousOrderError`` (an aggregation table whose
            functions ignore order excepted); see :mod:`snaplake.spark.ordering`.

    Missing columns: table columns a batch lacks (e.g. one ``alter_table``
    added while the stream runs) are written as NULL when nullable; a
    missing NOT NULL column fails the batch with ``SchemaMismatchError``.

    Raises:
        ValueError: an identifier without a warehouse, an empty
            ``commit_user``, an empty or repeated ``order_by``, or no
            ``commit_user`` while this process runs pyspark in Spark Connect
            mode (``pyspark.sql.utils.is_remote()``).
        TableNotFoundError: the table does not exist.

    Source:
        Spark ``DataStreamWriter.foreachBatch`` docs: the batch id "can be
        used to deduplicate and transactionally write the output"; Delta's
        ``txnAppId``/``txnVersion`` idempotent writes.
    """

    def __init__(
        self,
        table_or_identifier: Table | str,
        *,
        warehouse: str | None = None,
        commit_user: str | None = None,
        options: Mapping[str, str] | None = None,
        check_nullability: bool = True,
        on_batch: Callable[[SinkBatchResult], None] | None = None,
        merge_schema: bool = False,
        row_kind_column: str | None = None,
        order_by: str | Sequence[str] | None = None,
    ) -> None:
        if commit_user is not None and not commit_user:
            raise ValueError("commit_user must be a non-empty string or None")
        self.order_by = normalize_order_by(order_by)
        if commit_user is None and connect_mode():
            raise ValueError(_CONNECT_NEEDS_USER)
        self.table = resolve_table(table_or_identifier, warehouse=warehouse, options=options)
        self.commit_user = commit_user
        self.check_nullability = check_nullability
        self.on_batch = on_batch
        self.merge_schema = merge_schema
        self.row_kind_column = row_kind_column
        self._states: dict[str, _UserState] = {}
        self._states_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SnaplakeSink({self.table.identifier!r}, commit_user={self.commit_user!r})"

    def __getstate__(self) -> dict[str, Any]:
        """Picklable state (Spark Connect ships the sink to the server's Python process).

        The table travels as its picklable FileIO, root and identifier; the
        per-user committers and locks are not carried (the copy starts
        with none and reads each user's last batch from the table).
        """
        return {
            "file_io": self.table.file_io,
            "root": self.table.root,
            "identifier": self.table.identifier,
            "commit_user": self.commit_user,
            "check_nullability": self.check_nullability,
            "on_batch": self.on_batch,
            "merge_schema": self.merge_schema,
            "row_kind_column": self.row_kind_column,
            "order_by": self.order_by,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Re-open the table from :meth:`__getstate__`'s state.

        Raises:
            TableNotFoundError: the table no longer exists where it was.

        Storage:
            Reads the table's latest schema file.
        """
        self.table = Table(
            file_io=state["file_io"], root=state["root"], identifier=state["identifier"]
        )
        self.commit_user = state["commit_user"]
        self.check_nullability = state["check_nullability"]
        self.on_batch = state["on_batch"]
        self.merge_schema = state.get("merge_schema", False)
        self.row_kind_column = state.get("row_kind_column")
        self.order_by = state.get("order_by", ())
        self._states = {}
        self._states_lock = threading.Lock()

    def resolve_commit_user(self, df: DataFrame) -> str:
        """Return the commit user for a micro-batch of ``df``'s query.

        Raises:
            ValueError: no ``commit_user`` was given and either ``df`` belongs
                to a Spark Connect session (the query id is not visible
                there) or ``df`` does not come from a streaming query (no
                query id to derive one from).
        """
        if self.commit_user is not None:
            return self.commit_user
        if is_connect(df.sparkSession):
            raise ValueError(_CONNECT_NEEDS_USER)
        query_id = df.sparkSession.sparkContext.getLocalProperty(_QUERY_ID_PROPERTY)
        if not query_id:
            raise ValueError(
                "SnaplakeSink was called outside a streaming query and has no commit_user; "
                "pass commit_user=... (or use snaplake.spark.write for batch writes)"
            )
        return f"spark-{query_id}"

    def _state(self, user: str) -> _UserState:
        with self._states_lock:
            state = self._states.get(user)
            if state is None:
                state = _UserState(
                    committer=self.table.new_commit(commit_user=user), lock=threading.Lock()
                )
                self._states[user] = state
            return state

    def last_committed(self, commit_user: str) -> int | None:
        """Return the newest ``batch_id`` committed by ``commit_user``, ``None`` if none.

        Storage: reads the latest snapshot (and, after a non-snaplake commit,
        walks back to the newest snaplake one).
        """
        committer = self.table.new_commit(commit_user=commit_user)
        return committer.txn_map(self.table.latest_snapshot()).get(commit_user)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """Write micro-batch ``batch_id`` exactly once.

        Args:
            df: The micro-batch (classic or Spark Connect); columns match the
                table by name, types storable without loss. Not read at all
                when the batch was already committed.
            batch_id: Spark's micro-batch id; increasing per query, the same
                for a batch that is re-run after a failure.

        Raises:
            ValueError: no ``commit_user`` and no query id to derive one from
                (outside a streaming query, or under Spark Connect); raised
                before ``df`` is read. The query fails.
            SchemaMismatchError: the batch does not fit the table (the
                message names the columns; with ``merge_schema`` only columns
                that cannot widen; a missing NOT NULL column); raised on the
                driver before any Spark job runs (or, for values with
                ``check_nullability=False``, after the executors deleted their
                files). The query fails.
            AmbiguousOrderError: the batch holds several different versions
                of a key and neither ``order_by`` nor the table's
                ``sequence.field`` orders them (or they tie on ``order_by``);
                nothing is committed, the batch's files are deleted. The
                query fails; restart it with ``order_by``.
            CommitConflictError: cannot happen for appends (kept for safety).
            CommitRetriesExhaustedError: the commit kept losing races; the
                batch's files were deleted. Restarting the query retries it.
            CommitStateUnknownError: the publish outcome is unknown; files are
                kept. Restarting the query is safe: the batch dedups if it
                landed.

        Storage:
            Writes Parquet data files (executors) and one snapshot with its
            manifest and manifest lists; a failed batch deletes its data
            files (under Spark Connect a straggler task's late file is left,
            uncommitted, for orphan clean; see ``write_messages``). With
            ``merge_schema``, a new ``schema/schema-<N>`` first when the
            batch brings new or wider columns. Nothing when the batch is
            replayed or empty.
        """
        started = time.perf_counter()
        user = self.resolve_commit_user(df)
        state = self._state(user)
        with state.lock:
            result = self._write_batch(df, batch_id, user, state, started)
        logger.info(
            "batch %d of %s for %s: %s, %d message(s), write %.0f ms, commit %.0f ms",
            batch_id,
            user,
            self.table.identifier,
            result.outcome.value,
            result.num_messages,
            result.write_s * 1000,
            result.commit_s * 1000,
        )
        if self.on_batch is not None:
            try:
                self.on_batch(result)
            except Exception:  # a reporting hook must not fail a committed batch
                logger.warning("on_batch callback failed", exc_info=True)

    def _write_batch(
        self, df: DataFrame, batch_id: int, user: str, state: _UserState, started: float
    ) -> SinkBatchResult:
        committer = state.committer
        last = committer.txn_map(self.table.latest_snapshot()).get(user)
        if last is not None and last >= batch_id:
            if batch_id < last:
                logger.warning(
                    "batch %d is older than batch %d, the last one %s committed to %s: skipped. "
                    "Expected only after restoring an older checkpoint; if the checkpoint was "
                    "reset, this query needs a new commit_user or its batches are all skipped",
                    batch_id, last, user, self.table.identifier,
                )  # fmt: skip
            return SinkBatchResult(
                batch_id=batch_id, commit_user=user, outcome=BatchOutcome.SKIPPED, commit=None,
                num_messages=0, write_s=0.0, commit_s=0.0,
                total_s=time.perf_counter() - started,
            )  # fmt: skip
        for attempt in range(1, _INDEX_CONFLICT_ATTEMPTS + 1):
            messages, schema = write_messages(
                df,
                self.table,
                commit_user=user,
                check_nullability=self.check_nullability,
                merge_schema=self.merge_schema,
                row_kind_column=self.row_kind_column,
                order_by=self.order_by or None,
            )
            written = time.perf_counter()
            if not messages:
                return SinkBatchResult(
                    batch_id=batch_id, commit_user=user, outcome=BatchOutcome.EMPTY,
                    commit=None, num_messages=0, write_s=written - started, commit_s=0.0,
                    total_s=time.perf_counter() - started,
                )  # fmt: skip
            try:
                commit = commit_or_abort(committer, schema, messages, commit_identifier=batch_id)
                break
            except (HashIndexConflictError, CrossPartitionConflictError):  # write them again
                if attempt == _INDEX_CONFLICT_ATTEMPTS:
                    raise
                logger.info("batch %d of %s lost a key race; writing it again (attempt %d)",
                            batch_id, user, attempt + 1)  # fmt: skip
        done = time.perf_counter()
        outcome = BatchOutcome.DUPLICATE if commit.was_duplicate else BatchOutcome.COMMITTED
        return SinkBatchResult(
            batch_id=batch_id, commit_user=user, outcome=outcome, commit=commit,
            num_messages=len(messages), write_s=written - started, commit_s=done - written,
            total_s=done - started,
        )  # fmt: skip
