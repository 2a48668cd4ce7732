"""One compaction job: plan units, rewrite each unit, commit the rewritten units once, or abort.

A :class:`CompactionJob` is what every runner drives, whatever the table kind:

1. :meth:`CompactionJob.plan_units` asks the kind's :class:`CompactionPlanner`
   for a :class:`CompactionPlan` of the latest snapshot: picklable
   :class:`CompactionUnit` s (one (partition, bucket), or a slice of a large
   append bucket) holding no client;
2. :meth:`CompactionUnit.rewrite` writes a unit's outputs and returns its
   CommitMessages, anywhere (a thread here, a Spark executor); a unit that
   fails deletes what it wrote;
3. :meth:`CompactionJob.commit_rewritten` publishes every unit's messages as
   one COMPACT snapshot (the kind merges them and names the snapshot's
   properties), or deletes the outputs when the commit surely failed;
   :meth:`CompactionJob.abort` deletes the outputs of messages that will not
   be committed.

Runners: :meth:`CompactionJob.execute` (in process, a thread pool; it plans
again after a lost conflict, up to ``max_replans`` plans), Spark
(``snaplake.spark.maintenance``), the daemon (``snaplake.daemon.jobs``, in
rounds while the plan cut something off; ``snaplake.daemon.remote`` hands
its plan to an engine) and inline maintenance (``snaplake.compaction.inline``).
The table's FileStore chooses the planner (``FileStore.new_compaction``).

Source: Paimon's ``CompactProcedure`` / ``AppendCompactTask`` /
``MergeTreeCompactTask`` (serialised per-bucket tasks, one
``BatchTableCommit``), ``FileStoreCommitImpl`` (COMPACT commits).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage
from snaplake.compaction.merge_tree_plan import SortedRunStats
from snaplake.compaction.result import CompactResult
from snaplake.errors import CommitConflictError, CommitStateUnknownError
from snaplake.options import Operation
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager
from snaplake.store.format.snapshot import CommitKind
from snaplake.store.io.file_io import FileIO
from snaplake.store.support import check_supported
from snaplake.write.deletion_files import delete_index_files
from snaplake.write.table_write import abort_messages

__all__ = [
    "DEFAULT_MAX_UNIT_BYTES",
    "MAX_REPLANS",
    "CompactionJob",
    "CompactionPlan",
    "CompactionPlanner",
    "CompactionUnit",
    "partition_specs",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_UNIT_BYTES = 1 << 30
"""Input bytes of one unit (1 GiB): a larger append bucket is rewritten as several slices."""

MAX_REPLANS = 3
"""Plans :meth:`CompactionJob.execute` tries when a concurrent commit wins."""


class CompactionUnit(Protocol):
    """One task's work: a picklable value without clients."""

    @property
    def partition(self) -> bytes:
        """The (partition, bucket) rewritten: partition BinaryRow bytes."""
        ...

    @property
    def bucket(self) -> int:
        """The bucket rewritten."""
        ...

    @property
    def input_bytes(self) -> int:
        """Bytes of the unit's input files (for scheduling, largest first)."""
        ...

    def rewrite(
        self, *, file_io: FileIO, paths: PathFactory, schema_manager: SchemaManager
    ) -> list[CommitMessage]:
        """Write the unit's outputs and return their messages; delete them again on failure."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPlan:
    """What a planner found in one snapshot.

    Attributes:
        snapshot_id: The planned snapshot (``None`` for an empty table).
        units: The work, largest first (empty: nothing is due).
        capped: ``max_files_per_bucket`` left due files for a later round.
        whole_buckets: Each unit is one bucket's whole compaction, never
            sliced (primary-key tables: one k-way merge); else units are
            slices of at most ``max_unit_bytes``. A remote engine takes whole
            buckets only at its bar, sliced plans as a whole.
        properties: Snapshot properties the commit of this plan carries
            (primary-key tables: the full-compaction mark).
        sorted_runs: Primary-key tables: sorted runs per bucket of the planned
            snapshot (the daemon's gauges); ``None`` for append tables.
    """

    snapshot_id: int | None
    units: tuple[CompactionUnit, ...] = ()
    capped: bool = False
    whole_buckets: bool = False
    properties: Mapping[str, str] = field(default_factory=dict)
    sorted_runs: SortedRunStats | None = None

    @property
    def input_bytes(self) -> int:
        """Bytes of every unit's inputs."""
        return sum(u.input_bytes for u in self.units)


class CompactionPlanner(Protocol):
    """A table kind's planning and commit hook (append: small files; key-value: LSM)."""

    @property
    def workers(self) -> int:
        """Units rewritten at a time in process unless the runner says otherwise."""
        ...

    def plan(self, *, max_unit_bytes: int) -> CompactionPlan:
        """Plan the latest snapshot's compaction as units of about ``max_unit_bytes`` at most."""
        ...

    def commit_messages(
        self, plan: CompactionPlan, messages: Sequence[CommitMessage]
    ) -> list[CommitMessage]:
        """The messages to commit for the units of ``plan`` (merged or checked by kind).

        Raises:
            ValueError: a message does not belong to ``plan``.
        """
        ...


def partition_specs(
    partitions: Sequence[Mapping[str, Any]] | None,
) -> tuple[Mapping[str, Any] | None, ...]:
    """The partition filters a planner scans with: ``(None,)`` for every partition.

    Raises:
        ValueError: an empty ``partitions`` list (``None`` means every partition).
    """
    if partitions is None:
        return (None,)
    if not partitions:
        raise ValueError("partitions is empty; pass None to compact every partition")
    return tuple(partitions)


class CompactionJob:
    """A table's compaction: plan units, rewrite them, commit once (or abort).

    Made by ``FileStore.new_compaction`` (the store picks the planner).

    Args:
        commit: The maintenance committer of the table (its storage, paths
            and schemas are the job's).
        planner: The table kind's planner.
    """

    def __init__(self, *, commit: FileStoreCommit, planner: CompactionPlanner) -> None:
        self.commit = commit
        self.planner = planner

    def __repr__(self) -> str:
        return f"CompactionJob({self.commit.table_name!r}, {type(self.planner).__name__})"

    def plan_units(self, *, max_unit_bytes: int = DEFAULT_MAX_UNIT_BYTES) -> CompactionPlan:
        """Plan the latest snapshot's compaction.

        The table's latest schema is checked here, once per plan and before
        anything is written: for compaction (``Operation.MAINTENANCE``) and for
        the COMPACT commit that follows (the committer's ``Operation.COMMIT``
        check, which it then does not repeat for that schema).

        Raises:
            CorruptMetadataError: a manifest is undecodable.
            SchemaMismatchError: a partition spec names a non-partition column.
            UnsupportedTableError: a table snaplake cannot compact or commit to
                (:func:`snaplake.store.support.check_supported`).
            ValueError: ``max_unit_bytes < 1``.

        Storage: reads the latest snapshot's manifests; writes nothing.
        """
        schema = self.commit.schema_manager.latest()
        if schema is not None:
            check_supported(schema, Operation.MAINTENANCE)
            self.commit.check_supported(schema)
        return self.planner.plan(max_unit_bytes=max_unit_bytes)

    def rewrite(self, unit: CompactionUnit) -> list[CommitMessage]:
        """Rewrite ``unit`` in this process with the job's storage (see :class:`CompactionUnit`)."""
        cm = self.commit
        return unit.rewrite(file_io=cm.file_io, paths=cm.paths, schema_manager=cm.schema_manager)

    def commit_rewritten(
        self,
        plan: CompactionPlan,
        messages: Sequence[CommitMessage],
        *,
        started: float | None = None,
    ) -> CompactResult:
        """Commit the units' messages as one COMPACT snapshot, or delete the outputs.

        The commit detects conflicts (an input no longer live; primary-key
        tables: outputs overlapping another file of their level). A commit
        that surely failed deletes the messages' new files, never an input a
        unit only moved to another level; an unknown outcome keeps them (the
        snapshot may reference them); an interrupt (``KeyboardInterrupt``,
        ``SystemExit``) deletes nothing (the commit may still land).

        Args:
            plan: The plan whose units produced ``messages``.
            messages: What the units' :meth:`~CompactionUnit.rewrite` returned
                (in this process or on executors), in any order.
            started: ``time.monotonic()`` when the compaction began (for
                ``duration_s``); default now.

        Returns:
            What was rewritten (``snapshot_id`` ``None`` for no messages).

        Raises:
            CommitConflictError: a concurrent commit won; outputs deleted.
            CommitRetriesExhaustedError: lost the publish race too often;
                outputs deleted.
            CommitStateUnknownError: the outcome is unknown; outputs kept.
            ValueError: a message of a bucket ``plan`` does not hold; outputs deleted.

        Storage:
            One manifest, two manifest lists and one snapshot file; on a
            failed commit, deletes the messages' new files (and the index
            files the planner's merge wrote: replaced deletion vectors).
        """
        start = time.monotonic() if started is None else started
        if not messages:
            return CompactResult.nothing(start=start)
        merged: list[CommitMessage] = []
        try:
            merged = self.planner.commit_messages(plan, messages)
            result = self.commit.commit(
                merged, kind=CommitKind.COMPACT, properties=dict(plan.properties) or None
            )
        except CommitStateUnknownError:
            raise
        except Exception:  # surely not published; an interrupt may come after: keep
            self.abort(messages)
            delete_index_files(
                self.commit.file_io, self.commit.paths,
                [f for m in merged for f in m.compact_increment.new_index_files],
            )  # fmt: skip
            raise
        schema = self.commit.schema_manager.latest()
        assert schema is not None  # a snapshot was just committed
        res = CompactResult.of_commit(
            result.snapshot_id, merged, schema=schema, paths=self.commit.paths, start=start,
            buckets=len({(u.partition, u.bucket) for u in plan.units}),
        )  # fmt: skip
        logger.info(
            "compacted %d file(s) into %d in %d bucket(s) of %s (snapshot %s, %.1f ms)",
            res.files_before, res.files_after, res.buckets_compacted, self.commit.table_name,
            res.snapshot_id, res.duration_s * 1000,
        )  # fmt: skip
        return res

    def abort(self, messages: Sequence[CommitMessage]) -> None:
        """Delete the new files of messages that will not be committed.

        Inputs a unit only moved to another level (same name) are kept.

        Storage: deletes data files only (missing ones are fine).
        """
        schema = self.commit.schema_manager.latest()
        if schema is not None and messages:
            abort_messages(self.commit.file_io, self.commit.paths, schema, messages)

    def execute(
        self,
        *,
        plan: CompactionPlan | None = None,
        workers: int | None = None,
        max_replans: int = MAX_REPLANS,
    ) -> CompactResult:
        """Run the job in this process: rewrite the units in a thread pool, commit once.

        When a concurrent commit wins (``CommitConflictError``), plan again on
        the new latest snapshot, up to ``max_replans`` plans in all.

        Args:
            plan: The first plan (a caller that planned to decide where to
                run); ``None`` = plan now.
            workers: Units rewritten at a time (each holds one unit's
                rewrite in memory); ``None`` = the planner's default.
            max_replans: Plans tried in all, >= 1.

        Returns:
            What was rewritten; ``snapshot_id`` is ``None`` when nothing was due.

        Raises:
            CommitConflictError: every plan lost to a concurrent commit
                (outputs deleted each time).
            CommitRetriesExhaustedError: writers kept winning the publish
                race; outputs deleted.
            CommitStateUnknownError: the publish outcome is unknown; outputs kept.
            MergeFunctionError: the merge engine rejects a key's versions.
            FileNotFoundError: an input vanished while being read.
            ValueError: ``max_replans < 1``.

        Storage:
            New data files in the buckets' directories, then one manifest,
            two manifest lists and one snapshot. Inputs are not deleted here
            (snapshot expiry does it once no retained snapshot references them).
        """
        if max_replans < 1:
            raise ValueError(f"max_replans must be >= 1, got {max_replans}")
        start = time.monotonic()
        current = plan if plan is not None else self.plan_units()
        for attempt in range(1, max_replans + 1):
            if not current.units:
                return CompactResult.nothing(start=start)
            messages = self._rewrite_all(current.units, workers or self.planner.workers)
            try:
                return self.commit_rewritten(current, messages, started=start)
            except CommitConflictError:
                if attempt == max_replans:
                    raise
                logger.info("compaction of %s lost a race; planning again", self.commit.table_name)
            current = self.plan_units()
        raise AssertionError("unreachable")

    def _rewrite_all(self, units: Sequence[CompactionUnit], workers: int) -> list[CommitMessage]:
        """Rewrite ``units`` on ``workers`` threads; on a failure delete every output, re-raise."""
        messages: list[CommitMessage] = []
        errors: list[BaseException] = []
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(units)))) as pool:
            for fut in [pool.submit(self.rewrite, u) for u in units]:
                try:
                    messages += fut.result()
                except BaseException as exc:  # noqa: BLE001 - re-raised below after cleanup
                    errors.append(exc)
        if errors:
            self.abort(messages)
            raise errors[0]
        return messages
