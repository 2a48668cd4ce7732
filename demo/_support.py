"""Moving parts of the flights demo: file release, snapshot tail, maintenance, progress bar.

Only processes started here are stopped here, by their pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

import snaplake

REPO_ROOT = Path(__file__).resolve().parent.parent


def stage_files(flights: pa.Table, directory: Path, *, files: int) -> list[Path]:
    """Split ``flights`` (in source order) into ``files`` Parquet files under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    chunk = -(-flights.num_rows // files)
    paths = []
    for i in range(files):
        path = directory / f"flights-{i:05d}.parquet"
        pq.write_table(flights.slice(i * chunk, chunk), path)
        paths.append(path)
    return paths


class Releaser(threading.Thread):
    """Moves staged files into the landing folder at ``rate`` files per second (atomic renames)."""

    def __init__(self, staged: list[Path], landing: Path, *, rate: float) -> None:
        super().__init__(name="releaser", daemon=True)
        self.staged = staged
        self.landing = landing
        self.rate = rate
        self.released = 0
        self.done = threading.Event()
        self._halt = threading.Event()

    def run(self) -> None:
        self.landing.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        for i, path in enumerate(self.staged):
            wait = start + i / self.rate - time.monotonic()
            if wait > 0 and self._halt.wait(wait):
                return
            os.rename(path, self.landing / path.name)
            self.released = i + 1
        self.done.set()

    def stop(self) -> None:
        self._halt.set()


class SnapshotTail(threading.Thread):
    """Records the kind of every snapshot as it appears (expiry may remove it later)."""

    def __init__(self, table: snaplake.Table, *, interval_s: float = 0.25) -> None:
        super().__init__(name="snapshot-tail", daemon=True)
        self.table = table
        self.interval_s = interval_s
        self.kinds: Counter[str] = Counter()
        self.last_id = 0
        self.unseen = 0
        self._halt = threading.Event()

    def poll(self) -> None:
        manager = self.table.snapshot_manager
        latest = manager.latest_snapshot_id() or 0
        for sid in range(self.last_id + 1, latest + 1):
            snap = manager.try_snapshot(sid)
            if snap is None:
                self.unseen += 1
            else:
                self.kinds[snap.commit_kind.value] += 1
        self.last_id = max(self.last_id, latest)

    def run(self) -> None:
        while not self._halt.wait(self.interval_s):
            with contextlib.suppress(Exception):  # a half-expired id: next round
                self.poll()

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)
        with contextlib.suppress(Exception):
            self.poll()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _toml_str(value: str) -> str:
    return json.dumps(value)


@dataclass
class Maintenance:
    """Runs the maintenance daemon beside the stream (or a thread calling the table's methods).

    ``snaplake.daemon`` is launched as ``python -m snaplake.daemon --config``
    when it is installed; otherwise a thread runs ``merge_manifests``,
    ``compact`` and ``expire_snapshots`` every ``interval_s``.
    """

    warehouse: str
    table: snaplake.Table
    work: Path
    listen: str
    options: Mapping[str, str]
    interval_s: float = 2.0
    extra_tables: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    actions: Counter[str] = field(default_factory=Counter)
    _thread: threading.Thread | None = None
    _halt: threading.Event = field(default_factory=threading.Event)

    @property
    def uses_daemon(self) -> bool:
        return (REPO_ROOT / "snaplake" / "daemon" / "__main__.py").exists()

    def start(self) -> None:
        if self.uses_daemon:
            config = self.work / "snaplake.toml"
            opts = ", ".join(f"{_toml_str(k)} = {_toml_str(v)}" for k, v in self.options.items())
            i = self.interval_s
            config.write_text(
                f'log_level = "INFO"\n'
                f'[daemon]\nid = "flights-demo"\nlease_ttl = "20 s"\n'
                f"[metrics]\nlisten = {_toml_str(self.listen)}\n"
                f"[[warehouse]]\nuri = {_toml_str(self.warehouse)}\n"
                f"tables = {json.dumps([self.table.identifier, *self.extra_tables])}\n"
                f"options = {{ {opts} }}\n"
                f'[tasks.watch]\ninterval = "1 s"\nfiles_interval = "1 s"\n'
                f'[tasks.manifest_merge]\ninterval = "{i:g} s"\n'
                f'[tasks.compact]\ninterval = "{i * 1.5:g} s"\n'
                f'[tasks.expire_snapshots]\ninterval = "{i:g} s"\n'
                f"[tasks.orphan_clean]\nenabled = false\n"
            )
            self.log = open(self.work / "daemon.log", "wb")  # noqa: SIM115 - closed in stop()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "snaplake.daemon", "--config", str(config)],
                stdout=self.log,
                stderr=subprocess.STDOUT,
                cwd=REPO_ROOT,
            )
        else:
            self._thread = threading.Thread(target=self._loop, name="maintenance", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._halt.wait(self.interval_s):
            self.run_once()

    def run_once(self) -> None:
        """One round of merge, compaction and expiry in this process (counts what acted)."""
        for name in ("merge_manifests", "compact", "expire_snapshots"):
            method = getattr(self.table, name, None)
            if method is None:
                continue
            try:
                result = method()
            except Exception as exc:  # noqa: BLE001 - a failed round is reported, the demo goes on
                self.actions[f"{name} failed ({type(exc).__name__})"] += 1
                continue
            if _acted(result):
                self.actions[name] += 1

    def scrape(self) -> dict[str, float]:
        """Return ``snaplake_maintenance_runs_total`` successes by task, from the daemon."""
        if self.proc is None:
            return {}
        try:
            with urllib.request.urlopen(f"http://{self.listen}/metrics", timeout=5) as resp:
                text = resp.read().decode()
        except OSError:
            return {}
        out: dict[str, float] = {}
        pattern = re.compile(r"^snaplake_maintenance_runs_total\{([^}]*)\} ([0-9.e+]+)$")
        for line in text.splitlines():
            m = pattern.match(line)
            if m and 'outcome="success"' in m.group(1):
                task = re.search(r'task="([^"]+)"', m.group(1))
                if task:
                    out[task.group(1)] = out.get(task.group(1), 0) + float(m.group(2))
        for name in ("snaplake_snapshots_expired_total", "snaplake_files_compacted_total",
                     "snaplake_manifests_merged_total"):  # fmt: skip
            total = sum(
                float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith((name + "{", name + " "))
            )
            out[name.removeprefix("snaplake_").removesuffix("_total")] = total
        return out

    def stop(self) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            if self.log is not None:
                self.log.close()


def _acted(result: Any) -> bool:
    """Tell whether a maintenance result did something (a snapshot or deletions)."""
    if result is None:
        return False
    if getattr(result, "snapshot_id", None) is not None:
        return True
    for name in ("expired_snapshot_ids", "expired", "deleted_files"):
        value = getattr(result, name, None)
        if value:
            return True
    return False


def final_maintenance(table: snaplake.Table) -> dict[str, Any]:
    """Compact, merge manifests, expire and clean orphans once, after the stream stopped."""
    out: dict[str, Any] = {}
    if hasattr(table, "compact"):
        out["compact"] = table.compact()
    if hasattr(table, "merge_manifests"):
        out["merge_manifests"] = table.merge_manifests()
    if hasattr(table, "expire_snapshots"):
        out["expire_snapshots"] = table.expire_snapshots()
    if hasattr(table, "remove_orphan_files"):
        out["remove_orphan_files"] = table.remove_orphan_files(
            older_than=timedelta(0), dry_run=False
        )
    return out


class Progress:
    """A one-line progress bar on a terminal; a line every few seconds otherwise."""

    def __init__(self, total_rows: int, *, stream: IO[str] = sys.stderr) -> None:
        self.total = total_rows
        self.stream = stream
        self.tty = stream.isatty()
        self._last_print = 0.0

    def show(self, *, rows: int, released: int, files: int, batches: int, note: str) -> None:
        now = time.monotonic()
        if not self.tty and now - self._last_print < 5:
            return
        self._last_print = now
        width = 30
        filled = int(width * min(rows, self.total) / self.total)
        bar = "#" * filled + "." * (width - filled)
        line = (
            f"[{bar}] {rows:>9,}/{self.total:,} rows | landed {released}/{files} files | "
            f"{batches} batches {note}"
        )
        if self.tty:
            self.stream.write("\r" + line.ljust(110))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def read_results(path: Path) -> list[dict[str, Any]]:
    """The driver's per-batch JSON lines (a torn last line is ignored)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            out.append(json.loads(line))
    return out


def copy_table_locally(table: snaplake.Table, target: Path) -> Path:
    """Copy every file of a (remote) table below ``target`` for a local pypaimon read."""
    prefix = table.root.rstrip("/") + "/"
    for status in table.file_io.list_files(table.root):
        rel = status.path.removeprefix(prefix)
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(table.file_io.read_bytes(status.path))
    return target
