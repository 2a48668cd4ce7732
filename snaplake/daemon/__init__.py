"""The maintenance daemon: ``snaplake daemon --config snaplake.toml``.

A long-running process that keeps every table it is given healthy (manifest
merge, small-file compaction, snapshot expiry, orphan clean, each on its own
schedule and thresholds), tails every table's snapshots, and serves
Prometheus metrics plus ``/healthz`` and ``/readyz``. Only one daemon
maintains a table at a time (a lease in the table directory).

Entry points: :func:`main` (``python -m snaplake.daemon``; argv in, exit code
out) and :func:`run` (what the ``snaplake daemon`` CLI command calls).
apscheduler is imported only when the daemon actually starts.
"""

from __future__ import annotations

from snaplake.daemon.config import DaemonConfig, Task, load_config, parse_config
from snaplake.daemon.config_describe import describe_config
from snaplake.daemon.main import main, run

__all__ = [
    "DaemonConfig",
    "Task",
    "describe_config",
    "load_config",
    "main",
    "parse_config",
    "run",
]
