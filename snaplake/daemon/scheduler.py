"""MaintenanceDaemon: APScheduler wiring, table discovery, leases, signals and shutdown.

Threads and pools (all APScheduler 3.x ``BlockingScheduler``, UTC,
``max_instances=1``, ``coalesce=True``):

- ``control`` (one thread): table discovery every ``discovery_interval`` and
  the lease round every ``lease_renew_interval``. One thread means leases and
  the table map are only ever changed here, and a slow compaction can never
  starve a lease renewal.
- ``watch`` (two threads): each held table's :class:`TableWatcher`.
- ``default`` (``workers`` threads, at CPU niceness ``job_nice``): merge,
  compaction, expiry and orphan clean, one APScheduler job per (task,
  table). Different tasks of one table may run at the same time: each is an
  ordinary commit with conflict detection (a merge re-plans on appends, a
  compaction conflicts only if its inputs vanished, expiry never touches what
  the latest snapshot references), so a slow compaction never holds back
  merges and expiry.

A table's jobs exist only while this daemon holds its lease. SIGTERM/SIGINT
stop the scheduling, wait up to ``shutdown_grace`` for running jobs, release
the leases, and exit 0; a job still running after the grace period is
abandoned by exiting the process, which is safe because every maintenance
action publishes through an atomic snapshot commit (its unpublished files
become orphans for orphan clean).

Test hook: with ``SNAPLAKE_DAEMON_TEST_GATE=DIR`` in the environment, a job of
task ``T`` on table ``db.t`` for which the file ``DIR/T@db.t.hold`` exists
first creates ``DIR/T@db.t.waiting``, then waits (counted as a running job)
until the hold file is deleted. Tests use it to stop a daemon during a job
without depending on how long the job takes; without the variable, or
without a hold file, nothing changes.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.blocking import BlockingScheduler

from snaplake.catalog import FileSystemCatalog
from snaplake.daemon.config import DaemonConfig, Task, WarehouseConfig
from snaplake.daemon.config_describe import format_duration
from snaplake.daemon.discovery import list_warehouse, missing_reason
from snaplake.daemon.health import HealthState
from snaplake.daemon.job_results import JobResult
from snaplake.daemon.jobs import (
    check_job,
    compact_job,
    expire_partitions_job,
    expire_snapshots_job,
    merge_manifests_job,
    orphan_clean_job,
    run_job,
)
from snaplake.daemon.lifecycle_jobs import LIFECYCLE_JOBS
from snaplake.daemon.memory import limit_malloc_arenas, release_memory, trim_malloc
from snaplake.daemon.remote import RemoteCompaction
from snaplake.daemon.watcher import TableWatcher
from snaplake.errors import TableNotFoundError
from snaplake.metrics import MetricsServer, SnaplakeMetrics, default_metrics, serve
from snaplake.store.format import decoded_cache
from snaplake.store.lease import TableLease
from snaplake.table import Table

__all__ = ["MaintenanceDaemon", "lower_thread_priority"]

logger = logging.getLogger(__name__)

_MISFIRE_GRACE_S = 30
_TEST_GATE_ENV = "SNAPLAKE_DAEMON_TEST_GATE"
_TEST_GATE_POLL_S = 0.02

_job_thread = threading.local()


def lower_thread_priority(nice: int) -> None:
    """Give the calling thread CPU niceness ``nice`` (once per thread; Linux only).

    On Linux ``setpriority(PRIO_PROCESS, tid)`` changes one thread, and the
    threads it starts later inherit the value; raising niceness needs no
    privilege. Elsewhere, or when refused, the thread keeps its priority (a
    debug log line, nothing else: priority is a courtesy to writers).

    Args:
        nice: 0-19; 0, or a thread already at least this nice, is left as it is.

    Source:
        setpriority(2), "Linux notes": the nice value is a per-thread attribute.
    """
    if nice <= 0 or getattr(_job_thread, "nice", None) == nice:
        return
    _job_thread.nice = nice
    try:
        tid = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, tid) < nice:  # only ever lower the priority
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except (OSError, AttributeError):
        logger.debug("could not lower the priority of job thread %s", threading.get_native_id(),
                     exc_info=True)  # fmt: skip


def _bound_metadata_cache(max_records: int) -> None:
    """Shrink the process-wide decoded-metadata cache to ``max_records``.

    The daemon reads every manifest ever written (merges, expiry, file counts),
    so with the library default (2,000,000 records, sized for interactive
    scans) its memory would grow for hours.
    """
    decoded_cache.metadata_cache.resize(max_records)


@dataclass(slots=True, kw_only=True)
class _TableState:
    """One discovered table, as this daemon tracks it."""

    key: str
    table: Table
    lease: TableLease
    watcher: TableWatcher
    held: bool = False
    job_ids: list[str] = field(default_factory=list)


class MaintenanceDaemon:
    """Keeps the configured tables healthy and exports their metrics.

    Args:
        config: Validated configuration.
        metrics: Where to record; the process-wide :func:`default_metrics`
            (which also records this process's own commits) by default.
        serve_http: Start the metrics/health HTTP server (tests may skip it).
    """

    def __init__(
        self,
        config: DaemonConfig,
        *,
        metrics: SnaplakeMetrics | None = None,
        serve_http: bool = True,
    ) -> None:
        self.config = config
        self.metrics = metrics if metrics is not None else default_metrics()
        self._serve_http = serve_http
        self.server: MetricsServer | None = None
        d = config.daemon
        self.health = HealthState(
            stale_after_s=max(30.0, 3 * d.lease_renew_interval.total_seconds())
        )
        self.scheduler = BlockingScheduler(
            timezone=UTC,
            executors={
                "default": ThreadPoolExecutor(d.workers),
                "watch": ThreadPoolExecutor(2),
                "control": ThreadPoolExecutor(1),
            },
            job_defaults={
                "max_instances": 1,
                "coalesce": True,
                "misfire_grace_time": _MISFIRE_GRACE_S,
            },
        )
        self._tables: dict[str, _TableState] = {}
        self._missing: dict[int, tuple[str, ...]] = {}  # warehouse index -> missing patterns
        self._stopping = threading.Event()
        self._signals = 0
        self._active: dict[str, float] = {}
        self._active_cv = threading.Condition()
        self._rng = random.Random()
        #: This process's lease nonce: two daemons with one (copied) id are two holders.
        self.instance = uuid.uuid4().hex
        self._test_gate = os.environ.get(_TEST_GATE_ENV) or None
        self.remote: RemoteCompaction | None = None
        if d.compact_engine != "in-process" and d.spark_remote is not None:
            self.remote = RemoteCompaction(
                engine=d.compact_engine, remote=d.spark_remote,
                min_input_bytes=d.spark_min_input_bytes,
            )  # fmt: skip

    # ------------------------------------------------------------------ run
    def run(self) -> int:
        """Run until SIGTERM/SIGINT; return the exit code (0 after a clean shutdown).

        Raises:
            OSError: the metrics address cannot be bound.
        """
        d = self.config.daemon
        limit_malloc_arenas()
        _bound_metadata_cache(d.metadata_cache_records)
        self.metrics.daemon_up.set(1)
        self.metrics.daemon_start_time.set(time.time())
        if self._serve_http:
            self.server = serve(
                d.metrics_port,
                addr=d.metrics_host,
                metrics=self.metrics,
                liveness=self.health.liveness,
                readiness=self.health.readiness,
            )
        self.install_signal_handlers()
        now = datetime.now(UTC)
        self.scheduler.add_job(
            self.discover, "interval", seconds=d.discovery_interval.total_seconds(),
            id="discover", executor="control", next_run_time=now,
        )  # fmt: skip
        self.scheduler.add_job(
            self.lease_round, "interval", seconds=d.lease_renew_interval.total_seconds(),
            id="leases", executor="control",
            next_run_time=now + d.lease_renew_interval,
        )  # fmt: skip
        logger.info(
            "snaplake daemon %s (instance %s) starting: %d warehouse(s), tasks %s, metrics on %s",
            d.daemon_id, self.instance, len(self.config.warehouses),
            ",".join(t.value for t in self.config.enabled_tasks()),
            self.server.url if self.server else "(not served)",
        )  # fmt: skip
        self.health.started()
        if not self._stopping.is_set():
            self.scheduler.start()  # blocks until shutdown() is called
        return self._finish()

    def install_signal_handlers(self) -> None:
        """Make SIGTERM and SIGINT stop the daemon gracefully (main thread only)."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        name = signal.Signals(signum).name
        if self._signals == 1:
            logger.info("%s received: stopping the scheduler, finishing running jobs", name)
            self.stop()
        else:
            logger.warning("%s received again: aborting running jobs now", name)
            self._abort(reason=f"second {name}")

    def stop(self) -> None:
        """Stop scheduling new runs; :meth:`run` then finishes and returns. Thread-safe."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self.health.stopping()
        # shutdown() takes scheduler locks: never from inside the signal handler.
        threading.Thread(target=self._shutdown_scheduler, name="snaplake-stop", daemon=True).start()

    def _shutdown_scheduler(self) -> None:
        try:
            self.scheduler.shutdown(wait=False)
        except Exception:  # already stopped (SchedulerNotRunningError) is fine
            logger.debug("scheduler shutdown", exc_info=True)

    def _finish(self) -> int:
        grace = self.config.daemon.shutdown_grace.total_seconds()
        deadline = time.monotonic() + grace
        with self._active_cv:
            while self._active and time.monotonic() < deadline:
                self._active_cv.wait(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
            still = sorted(self._active)
        if still:
            self._abort(reason=f"jobs still running after {grace:g} s grace: {', '.join(still)}")
        self._release_all()
        self._close()
        logger.info("snaplake daemon %s stopped", self.config.daemon.daemon_id)
        return 0

    def _abort(self, *, reason: str) -> None:
        """Release leases and leave the process at once, abandoning running jobs."""
        logger.warning(
            "aborting (%s); unpublished files of abandoned jobs become orphans for orphan clean",
            reason,
        )
        self._release_all()
        self._close()
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    def _release_all(self) -> None:
        for state in list(self._tables.values()):
            if state.held or state.lease.held:
                try:
                    state.lease.release()
                except Exception:  # shutdown: the lease then expires by itself
                    logger.warning("could not release the lease of %s", state.key, exc_info=True)
                state.held = False
                self.metrics.lease_held.labels(state.table.identifier).set(0)

    def _close(self) -> None:
        self.metrics.daemon_up.set(0)
        if self.remote is not None:
            self.remote.close()  # stops a delegated compaction still running on the cluster
        if self.server is not None:
            server, self.server = self.server, None
            server.close()

    # ------------------------------------------------------------ discovery
    def discover(self) -> None:
        """Find the tables to maintain (the ``discover`` job), then run a lease round.

        Each configured ``tables`` entry that names nothing (see
        :mod:`snaplake.daemon.discovery`) is logged as a warning at every
        discovery, exported as ``snaplake_daemon_missing_tables`` and named
        by ``/readyz`` (503 while any is missing).
        """
        if self._stopping.is_set():
            return
        found: dict[str, tuple[WarehouseConfig, str]] = {}
        every = format_duration(self.config.daemon.discovery_interval)
        for index, wh in enumerate(self.config.warehouses):
            try:
                listing = list_warehouse(wh, index=index)
            except Exception:  # job boundary: one warehouse must not stop the others
                logger.exception("listing tables of warehouse[%d] failed; keeping the known tables",
                             index)  # fmt: skip
                found.update({k: (wh, s.table.identifier) for k, s in self._tables.items()
                              if k.startswith(f"{index}:")})  # fmt: skip
                continue  # the missing names of this warehouse stay as last seen
            found.update({f"{index}:{t}": (wh, t) for t in listing.found})
            self._missing[index] = listing.missing
            for pattern in wh.tables:
                self.metrics.missing_tables.labels(str(index), pattern).set(
                    1 if pattern in listing.missing else 0
                )
            for pattern in listing.missing:
                logger.warning(
                    "warehouse[%d] %s: %s; nothing to maintain for %r (looking again every %s)",
                    index, wh.uri, missing_reason(pattern), pattern, every,
                )  # fmt: skip
        for key in sorted(set(self._tables) - set(found)):
            logger.info("table %s is gone; stopping its maintenance", key)
            self._drop(self._tables.pop(key))
        for key, (wh, identifier) in sorted(found.items()):
            if key in self._tables:
                continue
            try:
                self._tables[key] = self._track(key, wh, identifier)
            except TableNotFoundError:
                logger.warning("table %s does not exist (yet); will look again", identifier)
            except Exception:  # job boundary: one table must not stop discovery
                logger.exception("opening table %s failed", identifier)
        self.metrics.daemon_tables.set(len(self._tables))
        self.lease_round()

    def missing(self) -> list[str]:
        """Configured ``tables`` entries that name nothing, as ``"<pattern> (warehouse[i])"``."""
        return [
            f"{pattern} (warehouse[{index}])"
            for index, patterns in sorted(self._missing.items())
            for pattern in patterns
        ]

    def _track(self, key: str, wh: WarehouseConfig, identifier: str) -> _TableState:
        table = FileSystemCatalog(wh.uri, options=wh.options).get_table(identifier)
        d = self.config.daemon
        lease = TableLease(
            file_io=table.file_io, table_root=table.root, owner=d.daemon_id,
            nonce=self.instance, ttl=d.lease_ttl,
        )  # fmt: skip
        watcher = TableWatcher(
            table,
            metrics=self.metrics,
            options=lambda: self.config.effective_options(table.options),
            files_interval=d.files_interval,
        )
        return _TableState(key=key, table=table, lease=lease, watcher=watcher)

    def _drop(self, state: _TableState) -> None:
        self._unschedule(state)
        if state.held:
            try:
                state.lease.release()
            except Exception:  # the table is gone; its lease with it
                logger.debug("releasing the lease of dropped %s", state.key, exc_info=True)
        self.metrics.forget_table(state.table.identifier)

    # --------------------------------------------------------------- leases
    def lease_round(self) -> None:
        """Acquire free leases and renew held ones (the ``leases`` job)."""
        if self._stopping.is_set():
            return
        states = list(self._tables.values())
        self._rng.shuffle(states)  # daemons starting together split the tables
        for state in states:
            if self._stopping.is_set():
                return
            name = state.table.identifier
            try:
                holds = state.lease.try_acquire()
            except Exception:  # job boundary: retried at the next round
                logger.exception("lease round for %s failed", name)
                holds = state.lease.held
            if holds and not state.held:
                state.held = True
                logger.info("daemon %s now maintains %s", self.config.daemon.daemon_id, name)
                self.metrics.lease_acquired.labels(name).inc()
                self.metrics.lease_held.labels(name).set(1)
                self.metrics.init_table(
                    table=name, tasks=[t.value for t in self.config.enabled_tasks()]
                )
                self._schedule(state)
            elif state.held and not holds:
                state.held = False
                logger.warning("daemon %s lost the lease of %s", self.config.daemon.daemon_id,
                               name)  # fmt: skip
                self._unschedule(state)
                self.metrics.forget_table(name)
                self.metrics.lease_lost.labels(name).inc()
                self.metrics.lease_held.labels(name).set(0)
            elif not holds:
                self.metrics.lease_held.labels(name).set(0)
        self.health.control_ran(
            tables_known=len(self._tables),
            tables_held=sum(s.held for s in self._tables.values()),
            missing=tuple(self.missing()),
        )
        trim_malloc()

    def _schedule(self, state: _TableState) -> None:
        now = datetime.now(UTC)
        for task in self.config.enabled_tasks():
            interval = self.config.tasks[task].interval
            if task in (Task.ORPHAN_CLEAN, Task.CHECK):
                first = now + interval  # daily work: not at every restart
            else:
                first = now + timedelta(seconds=self._rng.uniform(0, 1))
            job_id = f"{task.value}:{state.key}"
            self.scheduler.add_job(
                self._run_task, "interval", seconds=interval.total_seconds(), id=job_id,
                args=(state.key, task), executor="watch" if task is Task.WATCH else "default",
                next_run_time=first, replace_existing=True,
            )  # fmt: skip
            state.job_ids.append(job_id)

    def _unschedule(self, state: _TableState) -> None:
        for job_id in state.job_ids:
            try:
                self.scheduler.remove_job(job_id)
            except Exception:  # JobLookupError: already gone
                logger.debug("removing job %s", job_id, exc_info=True)
        state.job_ids.clear()

    # ----------------------------------------------------------------- jobs
    @contextmanager
    def _tracked(self, job_id: str) -> Iterator[None]:
        with self._active_cv:
            self._active[job_id] = time.monotonic()
        try:
            yield
        finally:
            with self._active_cv:
                self._active.pop(job_id, None)
                self._active_cv.notify_all()

    def _run_task(self, key: str, task: Task) -> None:
        """Run ``task`` on table ``key`` if this daemon still holds its lease."""
        if self._stopping.is_set():
            return
        state = self._tables.get(key)
        if state is None or not state.held or not state.lease.held:
            return
        name = state.table.identifier
        if task is Task.WATCH:
            with self._tracked(f"{task.value}:{name}"):
                run_job(
                    lambda: state.watcher.poll(stop=self._stopping.is_set),
                    table=name, task=task, metrics=self.metrics,
                )  # fmt: skip
            return
        lower_thread_priority(self.config.daemon.job_nice)
        with self._tracked(f"{task.value}:{name}"):
            self._wait_at_test_gate(task, name)
            logger.debug("%s of %s started", task.value, name)
            run_job(self._job(state.table, task), table=name, task=task, metrics=self.metrics)
            release_memory()  # a compaction's buffers are not needed until the next run
            logger.debug("%s of %s finished", task.value, name)

    def _wait_at_test_gate(self, task: Task, name: str) -> None:
        """The ``SNAPLAKE_DAEMON_TEST_GATE`` hook (module docstring); tests only."""
        if self._test_gate is None:
            return
        hold = os.path.join(self._test_gate, f"{task.value}@{name}.hold")
        if not os.path.exists(hold):
            return
        with open(os.path.join(self._test_gate, f"{task.value}@{name}.waiting"), "w"):
            pass
        logger.info("%s of %s waits for the test gate %s", task.value, name, hold)
        while os.path.exists(hold):
            time.sleep(_TEST_GATE_POLL_S)

    def _job(self, table: Table, task: Task) -> Callable[[], JobResult]:
        config = self.config

        def job() -> JobResult:
            options = config.effective_options(table.options)
            if task is Task.MANIFEST_MERGE:
                return merge_manifests_job(table, options=options)
            if task is Task.COMPACT:
                return compact_job(
                    table, options=options, max_files_per_bucket=config.daemon.compact_max_files,
                    remote=self.remote,
                )  # fmt: skip
            if task is Task.EXPIRE_SNAPSHOTS:
                return expire_snapshots_job(table, options=options)
            if task is Task.ORPHAN_CLEAN:
                return orphan_clean_job(
                    table,
                    older_than=config.daemon.orphan_older_than,
                    dry_run=config.daemon.orphan_dry_run,
                )
            if task is Task.CHECK:
                return check_job(table)
            if task is Task.EXPIRE_PARTITIONS:
                return expire_partitions_job(table, options=options)
            if task in LIFECYCLE_JOBS:
                return LIFECYCLE_JOBS[task](table, options=options)
            raise ValueError(f"no job for task {task}")  # pragma: no cover

        return job

    # -------------------------------------------------------------- testing
    def held_tables(self) -> list[str]:
        """``db.table`` of every table whose lease this daemon holds."""
        return sorted(s.table.identifier for s in self._tables.values() if s.held)

    def state_of(self, identifier: str) -> Any:
        """The internal state of table ``identifier`` (tests and debugging)."""
        for s in self._tables.values():
            if s.table.identifier == identifier:
                return s
        return None
