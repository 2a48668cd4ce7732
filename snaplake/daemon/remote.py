"""Compaction on a remote engine: the daemon schedules, a Spark Connect cluster rewrites.

With ``[tasks.compact] engine = "spark"`` the daemon keeps its leases,
schedules and metrics, and hands a due compaction whose planned input is at
least ``spark.min-input-bytes`` to a :class:`CompactionEngine` (rewriting on
the cluster's executors, planning and committing here); smaller ones stay in
process. Append tables compare the whole compaction's input with the bar.
Primary-key tables compare each bucket's: when a bucket due for LSM
compaction reaches it, the engine runs the round, the buckets that reach the
bar on the cluster and the others in the daemon's process, one commit. When
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

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.compaction.append_compact import AppendCompactor, CompactResult
from snaplake.compaction.merge_tree_plan import MergeTreeCompactPlanner, SortedRunStats
from snaplake.errors import SnaplakeError, UnsupportedTableError
from snaplake.options import CoreOptions
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
        *,
        commit: FileStoreCommit,
        options: CoreOptions,
        local_below_bytes: int | None = None,
    ) -> CompactResult:
        """Plan (as in process, with ``options``), rewrite remotely, commit with ``commit``.

        ``local_below_bytes``: units (buckets) with less input are rewritten
        in this process instead; ``None`` = all remotely. Raises on failure.
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
        input_bytes: Planned input bytes (append tables: what was compared with
            the bar; primary-key tables: of the buckets that reach it).
        sorted_runs: Primary-key tables: sorted runs per bucket of the planned
            snapshot, else ``None``.
    """

    result: CompactResult | None = None
    failure: str | None = None
    input_bytes: int = 0
    sorted_runs: SortedRunStats | None = None


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

    def try_compact(
        self, table: Table, *, options: CoreOptions, commit: FileStoreCommit
    ) -> RemoteOutcome:
        """Compact ``table`` on the engine if its planned input reaches the bar.

        Append tables: when the planned small-file compaction's input reaches
        ``min_input_bytes``, all of it runs on the engine. Primary-key tables:
        when some bucket's planned LSM compaction reaches it, the engine runs
        the round with the buckets below the bar rewritten in this process
        (one commit either way).

        Args:
            table: The table (its lease is held by this daemon).
            options: Effective options (``target-file-size``,
                ``compaction.min.file-num``, ``compaction.small-file-ratio``;
                primary-key tables: the universal compaction options).
            commit: The maintenance committer to publish with.

        Returns:
            The remote result; or no result (below the bar, a table kind the
            engine does not handle, or a failure named in ``failure``): then
            the caller compacts in process.

        Raises:
            SnaplakeError: what the compaction itself raised on this side
                (``CommitConflictError``, ``CorruptMetadataError``,
                ``UnsupportedTableError`` from planning, ...): the in-process
                compaction would meet the same.

        Storage:
            Reads the latest snapshot's manifests; when delegated, as
            ``snaplake.spark.compact``.
        """
        runs = None
        if table.schema().primary_keys:
            plan = MergeTreeCompactPlanner(
                file_io=commit.file_io,
                paths=commit.paths,
                schema_manager=commit.schema_manager,
                snapshot_manager=commit.snapshot_manager,
                options=options,
            ).plan()
            runs = plan.runs
            sizes = [sum(f.file_size_bytes for f in t.files) for t in plan.tasks]
            input_bytes = sum(b for b in sizes if b >= self.min_input_bytes)
            due = any(b >= self.min_input_bytes for b in sizes)
            local_below: int | None = self.min_input_bytes
        else:
            tasks = AppendCompactor(
                commit=commit,
                target_file_size_bytes=options.target_file_size_bytes,
                min_file_num=options.compaction_min_file_num,
                small_file_ratio=options.compaction_small_file_ratio,
            ).plan()
            input_bytes = sum(f.file_size_bytes for t in tasks for f in t.files)
            due = bool(tasks) and input_bytes >= self.min_input_bytes
            local_below = None
        if not due:
            return RemoteOutcome(input_bytes=input_bytes, sorted_runs=runs)
        logger.info(
            "compaction of %s (%d input bytes) delegated to %s at %s",
            table.identifier, input_bytes, self.name, self.where,
        )  # fmt: skip
        try:
            result = self._get_engine().compact(
                table, commit=commit, options=options, local_below_bytes=local_below
            )
        except UnsupportedTableError as exc:
            logger.info("%s compacts %s in process: %s", self.name, table.identifier, exc)
            return RemoteOutcome(input_bytes=input_bytes, sorted_runs=runs)
        except SnaplakeError:
            raise
        except Exception as exc:  # noqa: BLE001 - remote boundary: any engine failure falls back
            logger.warning(
                "compaction of %s on %s at %s failed (%s: %s); compacting in process instead",
                table.identifier, self.name, self.where, type(exc).__name__,
                _first_line(exc),
            )  # fmt: skip
            self._discard()
            return RemoteOutcome(
                failure=type(exc).__name__, input_bytes=input_bytes, sorted_runs=runs
            )
        return RemoteOutcome(result=result, input_bytes=input_bytes, sorted_runs=runs)

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
