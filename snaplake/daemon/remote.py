"""Compaction on a remote engine: the daemon schedules, a Spark Connect cluster rewrites.

With ``[tasks.compact] engine = "spark"`` the daemon keeps its leases,
schedules and metrics, plans each compaction round once, and hands a plan
whose input is at least ``spark.min-input-bytes`` to a
:class:`CompactionEngine` (rewriting the plan's units on the cluster's
executors, committing here); smaller ones stay in process. A plan of slices
(append tables) is compared with the bar as a whole. A plan of whole buckets
(primary-key tables) is compared bucket by bucket: when a bucket reaches the
bar, the engine runs the round, the buckets that reach it on the cluster and
the others in the daemon's process, one commit. When
the engine fails (cluster unreachable, job failed) the compaction runs in
process instead, with the reason logged and counted
(``snaplake_daemon_remote_failures_total``).

The daemon never imports pyspark: :func:`load_engine` imports the engine's
module by name (``snaplake.spark.engine``, which implements
:class:`CompactionEngine`) the first time a compaction is delegated, so a
daemon with ``engine = "in-process"`` never loads Spark's client.
"""

from __future__ import annotations

import importlib
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from snaplake.compaction.job import CompactionJob, CompactionPlan
from snaplake.compaction.result import CompactResult
from snaplake.errors import SnaplakeError, UnsupportedTableError
from snaplake.table import Table

__all__ = ["ENGINE_MODULES", "CompactionEngine", "RemoteCompaction", "RemoteOutcome", "load_engine"]

logger = logging.getLogger(__name__)

#: Engine name -> module whose ``connect_engine(remote=...)`` returns a CompactionEngine.
ENGINE_MODULES = {"spark": "snaplake.spark.engine"}


class CompactionEngine(Protocol):
    """Runs a table's compaction with the rewriting elsewhere (``snaplake.spark.engine``)."""

    def compact(
        self,
        table: Table,
        job: CompactionJob,
        plan: CompactionPlan,
        *,
        local_below_bytes: int | None = None,
    ) -> CompactResult:
        """Rewrite the units of ``job``'s ``plan`` remotely, then commit them with ``job``.

        ``local_below_bytes``: units (buckets) with less input are rewritten
        in this process instead; ``None`` = all remotely. Raises on failure
        (after the job's outputs were deleted).
        """
        ...

    def close(self) -> None:
        """Stop what runs remotely for this engine and release its connection."""
        ...


def load_engine(name: str, *, remote: str) -> CompactionEngine:
    """Import engine ``name``'s module and connect it to ``remote``.

    Raises:
        ValueError: an unknown engine name.
        ImportError: the engine's dependencies (pyspark's Connect client) are
            not installed.
    """
    module_name = ENGINE_MODULES.get(name)
    if module_name is None:
        raise ValueError(f"unknown compaction engine {name!r}; known: {sorted(ENGINE_MODULES)}")
    module = importlib.import_module(module_name)
    engine: CompactionEngine = module.connect_engine(remote=remote)
    return engine


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteOutcome:
    """What :meth:`RemoteCompaction.try_compact` did.

    Attributes:
        result: The remote compaction's result, or ``None`` when it did not run
            or failed (then compact in process).
        failure: The exception class name when the engine failed, else ``None``.
        input_bytes: Planned input bytes compared with the bar (a plan of
            whole buckets: of the buckets that reach it).
    """

    result: CompactResult | None = None
    failure: str | None = None
    input_bytes: int = 0


class RemoteCompaction:
    """The daemon's delegation: an engine, connected at first use, and the input-size bar.

    Thread-safe: the daemon's job threads share one engine (one connection).

    Args:
        engine: Engine name (``"spark"``).
        remote: Where it runs (``sc://host:port``); shown in logs without
            its ``;`` parameters (they may hold a token).
        min_input_bytes: Delegate a compaction whose planned input is at
            least this many bytes; smaller ones run in process.
        loader: Connects an engine (default :func:`load_engine`).
    """

    def __init__(
        self,
        *,
        engine: str,
        remote: str,
        min_input_bytes: int,
        loader: Callable[..., CompactionEngine] = load_engine,
    ) -> None:
        self.name = engine
        self.remote = remote
        self.min_input_bytes = min_input_bytes
        self._loader = loader
        self._engine: CompactionEngine | None = None
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        """``remote`` without connection parameters (safe to log)."""
        return self.remote.split(";", 1)[0].rstrip("/")

    def try_compact(self, table: Table, job: CompactionJob, plan: CompactionPlan) -> RemoteOutcome:
        """Run ``plan`` on the engine if its input reaches the bar.

        A plan of slices (``plan.whole_buckets`` false: append tables) runs
        on the engine as a whole when its input reaches ``min_input_bytes``.
        A plan of whole buckets (primary-key tables) runs on the engine when
        some bucket's input reaches it, the buckets below the bar rewritten
        in this process (one commit either way).

        Args:
            table: The table (its lease is held by this daemon).
            job: The table's compaction job (commits with the maintenance committer).
            plan: The round's plan, made by ``job`` (the engine does not plan again).

        Returns:
            The remote result; or no result (below the bar, a table the
            engine does not handle, or a failure named in ``failure``): then
            the caller runs ``plan`` in process.

        Raises:
            SnaplakeError: what the compaction itself raised on this side
                (``CommitConflictError``, ``CorruptMetadataError``, ...): the
                in-process compaction would meet the same.

        Storage:
            When delegated, as ``snaplake.spark.compact``; nothing otherwise.
        """
        bar = self.min_input_bytes
        local_below: int | None = None
        if plan.whole_buckets:
            input_bytes = sum(u.input_bytes for u in plan.units if u.input_bytes >= bar)
            due = any(u.input_bytes >= bar for u in plan.units)
            local_below = bar
        else:
            input_bytes = plan.input_bytes
            due = bool(plan.units) and input_bytes >= bar
        if not due:
            return RemoteOutcome(input_bytes=input_bytes)
        logger.info(
            "compaction of %s (%d input bytes) delegated to %s at %s",
            table.identifier, input_bytes, self.name, self.where,
        )  # fmt: skip
        try:
            result = self._get_engine().compact(table, job, plan, local_below_bytes=local_below)
        except UnsupportedTableError as exc:
            logger.info("%s compacts %s in process: %s", self.name, table.identifier, exc)
            return RemoteOutcome(input_bytes=input_bytes)
        except SnaplakeError:
            raise
        except Exception as exc:  # noqa: BLE001 - remote boundary: any engine failure falls back
            logger.warning(
                "compaction of %s on %s at %s failed (%s: %s); compacting in process instead",
                table.identifier, self.name, self.where, type(exc).__name__,
                _first_line(exc),
            )  # fmt: skip
            self._discard()
            return RemoteOutcome(failure=type(exc).__name__, input_bytes=input_bytes)
        return RemoteOutcome(result=result, input_bytes=input_bytes)

    def close(self) -> None:
        """Stop the engine's remote work and connection (daemon shutdown)."""
        self._discard()

    def _get_engine(self) -> CompactionEngine:
        with self._lock:
            if self._engine is None:
                self._engine = self._loader(self.name, remote=self.remote)
            return self._engine

    def _discard(self) -> None:
        with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            try:
                engine.close()
            except Exception:
                logger.debug("closing the %s engine failed", self.name, exc_info=True)


def _first_line(exc: BaseException) -> str:
    """A one-line reason: gRPC's ``details = "..."`` when there is one, else the first line."""
    text = str(exc).strip()
    match = re.search(r'details = "([^"]*)"', text)
    if match:
        return match.group(1)[:300]
    return text.splitlines()[0][:300] if text else ""
