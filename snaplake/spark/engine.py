"""The daemon's Spark Connect compaction engine (``[tasks.compact] engine = "spark"``).

The maintenance daemon loads this module by name (``snaplake.daemon.remote``)
only when a compaction is delegated; :class:`SparkConnectEngine` implements
its ``CompactionEngine`` protocol with
:func:`snaplake.spark.maintenance.run_compaction`: planning (once, by the
daemon) and the commit in the daemon's process, the rewriting on the
cluster's executors (primary-key tables: the buckets below
``spark.min-input-bytes`` are merged in the daemon's process meanwhile).
The Connect client retries an unreachable server only briefly, so a stopped
cluster makes the daemon fall back within seconds.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from snaplake.compaction.job import CompactionJob, CompactionPlan
from snaplake.compaction.result import CompactResult
from snaplake.spark.maintenance import run_compaction
from snaplake.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkConnectEngine", "connect_engine"]

logger = logging.getLogger(__name__)

_CONNECT_RETRIES = 3
"""Retries of a failed Connect RPC (50 ms, 200 ms, 800 ms apart) before it fails."""


class SparkConnectEngine:
    """Compaction on a Spark Connect cluster; one client session, created at first use.

    Args:
        remote: ``sc://host:port`` (Spark Connect's URL syntax, parameters allowed).
        max_retries: Retries of a failed RPC before the call fails.
    """

    def __init__(self, *, remote: str, max_retries: int = _CONNECT_RETRIES) -> None:
        if not remote.startswith("sc://"):
            raise ValueError(f"a Spark Connect address starts with sc://, got {remote!r}")
        self.remote = remote
        self.max_retries = max_retries
        self._session: SparkSession | None = None
        self._lock = threading.Lock()

    def compact(
        self,
        table: Table,
        job: CompactionJob,
        plan: CompactionPlan,
        *,
        local_below_bytes: int | None = None,
    ) -> CompactResult:
        """Rewrite ``plan``'s units on the cluster, commit with ``job`` (:func:`run_compaction`).

        Args:
            table: The table.
            job: The table's compaction job (the daemon's maintenance committer).
            plan: The plan the daemon decided on (not planned again).
            local_below_bytes: Units below this input size are rewritten in
                the daemon's process, the others on the cluster.

        Raises:
            CommitConflictError: a concurrent commit deleted an input (outputs deleted).
            Exception: the cluster is unreachable or the job failed (the
                session is dropped; the next call connects anew).

        Storage: as :func:`snaplake.spark.compact`.
        """
        session = self._get_session()
        try:
            return run_compaction(session, table, job, plan, local_below_bytes=local_below_bytes)
        except Exception:
            self._drop(session)
            raise

    def close(self) -> None:
        """Interrupt this engine's running operations and stop its session."""
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            self._stop(session)

    def _get_session(self) -> SparkSession:
        with self._lock:
            if self._session is None:
                self._session = _connect(self.remote, self.max_retries)
            return self._session

    def _drop(self, session: SparkSession) -> None:
        with self._lock:
            if self._session is session:
                self._session = None
        self._stop(session)

    @staticmethod
    def _stop(session: Any) -> None:
        try:
            session.interruptAll()
        except Exception:
            logger.debug("interrupting the Connect session failed", exc_info=True)
        try:
            session.stop()
        except Exception:
            logger.debug("stopping the Connect session failed", exc_info=True)


def _connect(remote: str, max_retries: int) -> SparkSession:
    """A new Connect client session to ``remote`` whose RPCs retry ``max_retries`` times."""
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    session = SparkSession.builder.remote(remote).create()
    session.client.set_retry_policies(
        [DefaultPolicy(max_retries=max_retries, initial_backoff=50, max_backoff=2000)]
    )
    return session


def connect_engine(*, remote: str) -> SparkConnectEngine:
    """Return the engine for ``remote`` (what the daemon's ``load_engine`` calls)."""
    return SparkConnectEngine(remote=remote)
