"""TableWatcher: tail a table's new snapshots and turn them into table-level metrics.

Every poll reads the snapshots committed since the previous poll (one small
JSON read each, plus the snapshot's delta manifest list for the file counts)
and records, per snapshot: a commit of its kind, the files it added and
removed, its ``deltaRecordCount``, and — for snaplake writers — the commit
duration and attempts they store in the snapshot ``properties``
(``snaplake.commit.duration-ms``, ``snaplake.commit.attempts``). It also keeps
the table gauges current: latest snapshot id, retained snapshots, manifests
referenced by the latest snapshot, live and small data files (at most every
``files_interval``), rows, and the latest commit time (for freshness).

So one daemon scrape covers every writer of the table, including pypaimon,
Java Paimon and writers nobody scrapes. History before the first poll is not
replayed (the counters start at zero, as Prometheus expects).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from snaplake.commit.snapshot_commit import ATTEMPTS_PROPERTY, DURATION_PROPERTY
from snaplake.compaction.maintenance import count_files, count_manifests
from snaplake.daemon.config import Task
from snaplake.metrics import SnaplakeMetrics
from snaplake.options import CoreOptions
from snaplake.store.format.manifest_list import read_manifest_list
from snaplake.store.format.snapshot import Snapshot
from snaplake.table import Table

__all__ = ["TableWatcher", "WatchResult"]

logger = logging.getLogger(__name__)

_MAX_SNAPSHOTS_PER_POLL = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchResult:
    """What one poll saw.

    Attributes:
        table: ``db.table``.
        latest_snapshot_id: Newest snapshot (``None`` = no snapshot yet).
        new_snapshots: Snapshots read and recorded by this poll.
        missed_snapshots: Snapshots expired before they could be read.
        snapshots_retained: ``latest - earliest + 1``.
        manifest_files: Manifests referenced by the latest snapshot.
        data_files: Live data files, when counted by this poll.
        small_files: Small live data files, when counted by this poll.
    """

    table: str
    latest_snapshot_id: int | None
    new_snapshots: int
    missed_snapshots: int
    snapshots_retained: int
    manifest_files: int
    data_files: int | None = None
    small_files: int | None = None
    task: Task = Task.WATCH

    @property
    def acted(self) -> bool:
        """Whether new snapshots were seen."""
        return self.new_snapshots > 0

    def summary(self) -> str:
        """One log line."""
        return (
            f"{self.new_snapshots} new snapshot(s), latest {self.latest_snapshot_id}, "
            f"{self.snapshots_retained} retained, {self.manifest_files} manifest(s)"
        )


class TableWatcher:
    """Tails one table; :meth:`poll` is the watch job.

    Args:
        table: The table.
        metrics: Where to record.
        options: Returns the effective options of the table (called per poll,
            so option changes are picked up).
        files_interval: Minimum time between two counts of the live data files.
        clock: Epoch seconds (injected by tests).
    """

    def __init__(
        self,
        table: Table,
        *,
        metrics: SnaplakeMetrics,
        options: Callable[[], CoreOptions],
        files_interval: timedelta = timedelta(minutes=1),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.table = table
        self.metrics = metrics
        self._options = options
        self._files_interval_s = files_interval.total_seconds()
        self._clock = clock
        self._last_seen: int | None = None
        self._manifests_of: int | None = None
        self._manifest_files = 0
        self._files_counted_at: float | None = None
        self._files_of: int | None = None

    @property
    def name(self) -> str:
        """``db.table``."""
        return self.table.identifier

    def poll(self, *, stop: Callable[[], bool] = lambda: False) -> WatchResult:
        """Read the snapshots committed since the last poll and update the table metrics.

        Args:
            stop: Polled between snapshots; when it returns true the poll
                ends early (daemon shutdown) and resumes there next time.

        Returns:
            What was seen.

        Raises:
            CorruptMetadataError: the latest snapshot or its manifest lists
                are undecodable.

        Storage: lists ``schema/`` (the latest schema id), reads the new
        snapshot files, their delta manifest lists, the latest snapshot's
        manifest lists; every ``files_interval``, all manifests of the
        latest snapshot.
        """
        sm = self.table.snapshot_manager
        name = self.name
        options = self._options()
        self._set_limits(options)
        self.metrics.table_schema_id.labels(name).set(self.table.schema_id)
        latest_id = sm.latest_snapshot_id()
        if latest_id is None:
            self._last_seen = 0  # every snapshot from the first one on is new
            self.metrics.snapshot_latest_id.labels(name).set(0)
            self.metrics.snapshots_retained.labels(name).set(0)
            self.metrics.manifest_files.labels(name).set(0)
            return WatchResult(
                table=name, latest_snapshot_id=None, new_snapshots=0, missed_snapshots=0,
                snapshots_retained=0, manifest_files=0,
            )  # fmt: skip
        if self._last_seen is None or latest_id < self._last_seen:
            self._last_seen = latest_id  # first poll of a non-empty table, or it was recreated
        new = missed = 0
        start = self._last_seen + 1
        if latest_id - start + 1 > _MAX_SNAPSHOTS_PER_POLL:
            missed += latest_id - _MAX_SNAPSHOTS_PER_POLL + 1 - start
            start = latest_id - _MAX_SNAPSHOTS_PER_POLL + 1
        for sid in range(start, latest_id + 1):
            if stop():
                break
            snap = sm.try_snapshot(sid)
            if snap is None:
                missed += 1
            else:
                self._record(snap)
                new += 1
            self._last_seen = sid
        if missed:
            self.metrics.table_snapshots_missed.labels(name).inc(missed)

        latest = sm.try_snapshot(latest_id) or sm.latest_snapshot()
        earliest_id = sm.earliest_snapshot_id()
        retained = latest_id - earliest_id + 1 if earliest_id is not None else 0
        self.metrics.snapshot_latest_id.labels(name).set(latest_id)
        self.metrics.snapshots_retained.labels(name).set(retained)
        if latest is not None:
            self.metrics.set_last_commit_time(table=name, commit_time_s=latest.time_millis / 1000)
            if latest.total_record_count is not None:
                self.metrics.table_records.labels(name).set(latest.total_record_count)
            if self._manifests_of != latest.id:
                self._manifest_files = count_manifests(self.table, latest)
                self._manifests_of = latest.id
            self.metrics.manifest_files.labels(name).set(self._manifest_files)
        data_files = small_files = None
        now = self._clock()
        due = (
            self._files_counted_at is None or now - self._files_counted_at >= self._files_interval_s
        )
        if latest is not None and due and self._files_of != latest.id:
            store = self.table.file_store()
            counts = count_files(
                self.table,
                latest,
                options=options,
                target_file_size_bytes=store.target_file_size(options),
            )
            data_files, small_files = counts.data_files, counts.small_files
            self.metrics.data_files.labels(name).set(data_files)
            self.metrics.small_files.labels(name).set(small_files)
            runs = store.count_sorted_runs(latest, options=options)
            if runs is not None:  # a kind whose files form sorted runs
                self.metrics.sorted_runs_max.labels(name).set(runs.max_sorted_runs)
                self.metrics.buckets_over_trigger.labels(name).set(runs.buckets_over_trigger)
            self._files_counted_at, self._files_of = now, latest.id
        return WatchResult(
            table=name,
            latest_snapshot_id=latest_id,
            new_snapshots=new,
            missed_snapshots=missed,
            snapshots_retained=retained,
            manifest_files=self._manifest_files,
            data_files=data_files,
            small_files=small_files,
        )

    def _set_limits(self, options: CoreOptions) -> None:
        name = self.name
        self.metrics.manifest_merge_min_count.labels(name).set(options.manifest_merge_min_count)
        self.metrics.snapshots_retained_limit.labels(name, "min").set(
            options.snapshot_num_retained_min
        )
        self.metrics.snapshots_retained_limit.labels(name, "max").set(
            options.snapshot_num_retained_max
        )
        self.metrics.snapshot_time_retained.labels(name).set(
            options.snapshot_time_retained.total_seconds()
        )

    def _record(self, snap: Snapshot) -> None:
        props = snap.properties or {}
        duration_s = _float(props.get(DURATION_PROPERTY))
        attempts = _float(props.get(ATTEMPTS_PROPERTY))
        added = removed = 0
        try:
            metas = read_manifest_list(
                self.table.file_io, self.table.paths.manifest_path(snap.delta_manifest_list)
            )
            added = sum(m.num_added_files for m in metas)
            removed = sum(m.num_deleted_files for m in metas)
        except FileNotFoundError:
            logger.debug("delta manifest list of snapshot %d of %s already expired",
                         snap.id, self.name)  # fmt: skip
        self.metrics.record_table_commit(
            table=self.name,
            kind=snap.commit_kind.value,
            files_added=added,
            files_deleted=removed,
            records_added=snap.delta_record_count or 0,
            duration_s=duration_s / 1000 if duration_s is not None else None,
            attempts=int(attempts) if attempts is not None else None,
            lag_s=self._clock() - snap.time_millis / 1000,
            commit_user=snap.commit_user,
        )


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None
