"""Liveness and readiness of the daemon, answered on the metrics port.

- ``/healthz`` (liveness): the scheduler's control job (table discovery and
  lease renewal) ran recently. A wedged scheduler fails it, so an orchestrator
  restarts the process; a slow maintenance job does not (it runs on another
  thread pool).
- ``/readyz`` (readiness): the first discovery and lease round finished, the
  daemon is not shutting down, and every configured ``tables`` entry names an
  existing table (database, warehouse): a typo in the configuration keeps the
  pod unready (a rollout waiting for readiness stops there) while liveness
  stays OK (no restart loop) and the tables that exist are maintained. The
  body names what is missing; the daemon becomes ready at the first discovery
  that finds it.

This module imports neither apscheduler nor prometheus_client.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from snaplake.metrics import HealthStatus

__all__ = ["HealthState"]


@dataclass(slots=True, kw_only=True)
class HealthState:
    """Mutable health facts, updated by the daemon and read by the HTTP probes.

    Attributes:
        stale_after_s: Liveness fails when the control job has not run for
            this many seconds.
        clock: Monotonic seconds.
    """

    stale_after_s: float
    clock: Callable[[], float] = time.monotonic
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _last_control: float | None = None
    _started: float | None = None
    _ready: bool = False
    _stopping: bool = False
    _tables_held: int = 0
    _tables_known: int = 0
    _missing: tuple[str, ...] = ()

    def started(self) -> None:
        """Mark the scheduler as started."""
        with self._lock:
            self._started = self.clock()

    def control_ran(
        self, *, tables_known: int, tables_held: int, missing: tuple[str, ...] = ()
    ) -> None:
        """Record a finished discovery/lease round; the first one makes the daemon ready.

        Args:
            tables_known: Tables discovered.
            tables_held: Tables whose lease this daemon holds.
            missing: Configured ``tables`` entries that name nothing (readiness
                fails while there is one).
        """
        with self._lock:
            self._last_control = self.clock()
            self._tables_known, self._tables_held = tables_known, tables_held
            self._missing = missing
            self._ready = True

    def stopping(self) -> None:
        """Mark the daemon as shutting down (readiness fails from now on)."""
        with self._lock:
            self._stopping = True

    def liveness(self) -> HealthStatus:
        """Answer ``/healthz``."""
        with self._lock:
            now = self.clock()
            last = self._last_control if self._last_control is not None else self._started
            if last is None:
                return HealthStatus(ok=True, detail="starting")
            age = now - last
            if age > self.stale_after_s:
                return HealthStatus(
                    ok=False, detail=f"control job has not run for {age:.0f} s (scheduler stuck)"
                )
            return HealthStatus(ok=True, detail="ok")

    def readiness(self) -> HealthStatus:
        """Answer ``/readyz``."""
        with self._lock:
            if self._stopping:
                return HealthStatus(ok=False, detail="shutting down")
            if not self._ready:
                return HealthStatus(ok=False, detail="discovering tables")
            maintaining = f"maintaining {self._tables_held} of {self._tables_known} table(s)"
            if self._missing:
                return HealthStatus(
                    ok=False,
                    detail=f"not ready: configured but missing: {', '.join(self._missing)}; "
                    f"{maintaining}",
                )
            return HealthStatus(ok=True, detail=f"ready: {maintaining}")
