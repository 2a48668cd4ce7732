"""``spark.readStream.format("snaplake")``: a table's changes as a Structured Streaming source.

::

    register_data_source(spark)
    changes = (
        spark.readStream.format("snaplake")
        .option("warehouse", "./warehouse")
        .option("startingSnapshot", "earliest")   # or "latest", or a snapshot id
        .option("mode", "auto")                    # auto | delta | changelog | diff
        .load("db.orders")
    )

An offset is ``{"snapshot": N}``: every change of snapshots up to ``N`` was
handed to Spark. A micro-batch from offset ``S`` to ``E`` reads
``table.plan_changes(S + 1, E)``: its input partitions are the plan's
splits, each read on an executor by the plan's picklable read task. The
rows carry ``_row_kind`` (``'+I' '-U' '+U' '-D'``) and ``_snapshot_id``
after the table's columns. For a given offset range the rows are always
the same, so Spark's checkpoint (offsets logged before a batch runs, the
batch re-run after a crash) makes the query exactly-once with an
idempotent sink such as :class:`~snaplake.spark.SnaplakeSink`. A snapshot
the range needs must not expire before the batch ran: keep
``snapshot.num-retained.min`` above the query's lag.

Source: Paimon's Spark ``PaimonMicroBatchStream`` (offsets by snapshot,
``scan.mode`` ``latest`` / ``from-snapshot``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from snaplake.spark._common import arrow_schema_of
from snaplake.spark.source import SnaplakeSourceOptions, conform_batch

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["ChangesPartition", "SnaplakeStreamReader"]


class ChangesPartition(InputPartition):
    """One split of a change plan and the plan's read task (both picklable).

    Attributes:
        split: A ``ChangeSplit`` of ``ChangePlan.splits``.
        read_task: ``ChangePlan.read_task``: ``read_task(split)`` yields the
            split's rows as record batches.
    """

    def __init__(self, split: Any, read_task: Callable[[Any], Iterator[pa.RecordBatch]]) -> None:
        super().__init__(None)
        self.split = split
        self.read_task = read_task


def _offset(snapshot: int) -> dict[str, int]:
    return {"snapshot": snapshot}


class SnaplakeStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are snapshot ids; each micro-batch reads the changes of its snapshot range.

    With ``trigger(availableNow=True)`` the query reads up to the snapshot
    that was the latest when it started (a batch replayed from the
    checkpoint first), then stops.

    Args:
        options: The parsed options (``startingSnapshot``, ``mode``).
        schema: The query's Spark schema (the table's columns at its start,
            ``_row_kind``, ``_snapshot_id``); rows are cast to it by name.
    """

    def __init__(self, options: SnaplakeSourceOptions, schema: StructType) -> None:
        self.options = options
        self.out = arrow_schema_of(schema)
        self.target: int | None = None

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 - Spark's name
        """Where a new query starts (a restarted one resumes from its checkpoint instead).

        ``earliest``: before the earliest retained snapshot (its changes are
        the first read); ``latest``: the latest snapshot (only later commits
        are read); an id ``N``: before ``N``. An empty table starts at 0.
        """
        start = self.options.starting_snapshot
        manager = self.options.table().snapshot_manager
        if start == "latest":
            return _offset(manager.latest_snapshot_id() or 0)
        if start == "earliest":
            earliest = manager.earliest_snapshot_id()
            return _offset(earliest - 1 if earliest is not None else 0)
        return _offset(int(start) - 1)

    def latestOffset(  # noqa: N802 - Spark's name
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, int]:
        """The latest snapshot id (``start`` again while nothing newer was committed).

        Under ``availableNow``, at most the snapshot that was the latest at the start.
        """
        latest = self.options.table().snapshot_manager.latest_snapshot_id() or 0
        if self.target is not None:
            latest = min(latest, self.target)
        floor = int(start["snapshot"]) if start else 0
        return _offset(max(latest, floor))

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
        """Fix the ``availableNow`` target: the latest snapshot now."""
        self.target = self.options.table().snapshot_manager.latest_snapshot_id() or 0

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """The splits of ``plan_changes(start + 1, end)`` (none for an empty range).

        Raises:
            SnapshotNotFoundError: a snapshot of the range expired (names the
                earliest retained one).
        """
        first, last = int(start["snapshot"]) + 1, int(end["snapshot"])
        if last < first:
            return []
        plan = self.options.table().plan_changes(first, last, mode=self.options.mode)
        return [ChangesPartition(split, plan.read_task) for split in plan.splits]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one split on an executor, in the query's schema."""
        assert isinstance(partition, ChangesPartition)
        for batch in partition.read_task(partition.split):
            yield conform_batch(batch, self.out)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: progress lives in Spark's checkpoint."""
