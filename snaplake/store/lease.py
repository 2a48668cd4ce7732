"""TableLease: one holder of a role on a table, by create-if-absent lease files with an expiry.

Two roles use it: the daemon's maintenance of a table (one maintainer per
table, name ``lease``) and a subscription's consumer id (one reader per
consumer id, name ``subscription-<id>``, :mod:`snaplake.subscription`).
A lease is a small JSON file ``<table>/.snaplake/<name>-<generation>``::

    {"owner": "maint-a", "nonce": "3f2a...", "generation": 7, "acquired_ms": ...,
     "expires_ms": ..., "released": false, "host": "node-1", "pid": 4242}

``owner`` is the configured daemon id or the consumer id (for people);
``nonce`` is drawn at random by each process (or subscription) when it starts,
so two processes started from one copied configuration (same id) are two
holders: the holder is ``(owner, nonce)``. ``host`` and ``pid`` say where the
holder runs: with ``reclaim_dead_local``, a lease whose holder ran on this
host under a pid that is no longer alive is free at once (a crashed
subscriber restarted on the same machine does not wait for the expiry).

- **Acquire**: read the newest generation ``g``. If there is none, or it is
  released, or it expired more than ``clock_skew`` ago (or its holder is a
  dead local process, see above), create ``<name>-<g+1>`` with
  ``write_if_absent``: of several processes racing for the same role exactly
  one wins, on local disk and on S3 alike. The winner deletes the older
  generations.
- **Renew**: only the holder that created a generation holds it: another
  process, even with the same owner id (a copied config, or the same daemon
  restarted after a crash), waits for the expiry like any other. The
  holder rewrites its own generation file with a later expiry,
  after checking that no newer generation exists and that its lease has not
  lapsed (a holder paused for longer than the TTL gives the role up rather
  than renewing over a successor).
- **Release** (shutdown, close): mark the file ``released``; the next holder
  takes over at once instead of waiting for the expiry.

For the daemon, the lease prevents two daemons from doing the same work; it is
not what keeps the table correct. Every maintenance action is an ordinary commit with
conflict detection, so even a paused holder that resumes after a takeover can
at worst lose a commit race (``CommitConflictError``), never corrupt the table.

Storage: each role gets one tiny file per generation under ``.snaplake/``;
renewals overwrite it. Orphan clean must leave ``<table>/.snaplake/`` alone,
and no lease lives under ``consumer/`` (Paimon reads every ``consumer-*`` file
there as a consumer).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta

from snaplake.errors import CorruptMetadataError, FileAlreadyExistsError
from snaplake.store.format.json_codec import decode_json, encode_json
from snaplake.store.io.file_io import FileIO

__all__ = ["LEASE_DIR", "LeaseState", "TableLease", "pid_alive"]

logger = logging.getLogger(__name__)

#: Directory (under the table root) holding the lease files.
LEASE_DIR = ".snaplake"


def pid_alive(pid: int) -> bool:
    """Tell whether process ``pid`` exists on this host (a zombie counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseState:
    """Content of one lease file.

    Attributes:
        owner: Daemon id of the holder.
        nonce: Random id of the holder's process (drawn at daemon start); ``""``
            in lease files written before nonces existed.
        generation: Increases with every acquisition of the table.
        acquired_ms: When the holder acquired it, epoch milliseconds.
        expires_ms: Until when it is valid unless renewed, epoch milliseconds.
        released: The holder gave it up (shutdown).
        host: Host name of the holder's machine (``""`` in older files).
        pid: Process id of the holder on ``host`` (0 in older files).
    """

    owner: str
    generation: int
    acquired_ms: int
    expires_ms: int
    released: bool = False
    nonce: str = ""
    host: str = ""
    pid: int = 0

    def is_free(self, *, now_ms: int, clock_skew_ms: int) -> bool:
        """Tell whether another holder may take the lease over now (released or expired)."""
        return self.released or now_ms > self.expires_ms + clock_skew_ms

    def describe(self) -> str:
        """Who holds it, for messages: ``owner (host pid N, until <ms>)``."""
        where = f"host {self.host} pid {self.pid}" if self.host else "unknown host"
        return f"{self.owner} ({where}, instance {self.nonce or '?'}, expires_ms {self.expires_ms})"

    def to_bytes(self) -> bytes:
        """Encode as the file content."""
        return encode_json(
            {
                "owner": self.owner,
                "nonce": self.nonce,
                "generation": self.generation,
                "acquired_ms": self.acquired_ms,
                "expires_ms": self.expires_ms,
                "released": self.released,
                "host": self.host,
                "pid": self.pid,
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes, *, path: str) -> LeaseState:
        """Decode a lease file.

        Raises:
            CorruptMetadataError: not a lease document.
        """
        doc = decode_json(data, path=path)
        try:
            return cls(
                owner=str(doc["owner"]),
                generation=int(doc["generation"]),
                acquired_ms=int(doc["acquired_ms"]),
                expires_ms=int(doc["expires_ms"]),
                released=bool(doc.get("released", False)),
                nonce=str(doc.get("nonce", "")),
                host=str(doc.get("host", "")),
                pid=int(doc.get("pid", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptMetadataError(f"{path} is not a lease file ({exc})", path=path) from exc


class TableLease:
    """One role's lease on one table, as seen by one holder.

    Not thread-safe: one holder drives a lease from one thread at a time
    (the daemon's lease job; a subscription serialises its renewal thread and
    its acks with a lock).

    Args:
        file_io: Storage of the table.
        table_root: Path of the table directory.
        owner: The daemon id, or the consumer id.
        nonce: This holder's random id (a daemon: one per process, shared by
            the leases of all its tables); a fresh ``uuid4`` when ``None``.
        ttl: Validity of an acquisition or renewal.
        clock_skew: Extra time a lease stays taken after its expiry, to
            absorb clock differences between hosts.
        clock_ms: Epoch milliseconds (injected by tests).
        name: The role: files are ``.snaplake/<name>-<generation>``; the
            daemon's is ``lease``. Must not start with another role's name
            followed by ``-`` and digits only.
        reclaim_dead_local: Treat a lease as free when its holder recorded
            this host and a pid that is not alive (crashed; restarted here).
        host: This machine's name (default ``socket.gethostname()``).
        pid: This process's id (default ``os.getpid()``).
    """

    def __init__(
        self,
        *,
        file_io: FileIO,
        table_root: str,
        owner: str,
        nonce: str | None = None,
        ttl: timedelta,
        clock_skew: timedelta = timedelta(seconds=1),
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        name: str = "lease",
        reclaim_dead_local: bool = False,
        host: str | None = None,
        pid: int | None = None,
    ) -> None:
        if ttl <= timedelta(0):
            raise ValueError(f"lease ttl must be positive, got {ttl}")
        self.file_io = file_io
        self.directory = f"{table_root.rstrip('/')}/{LEASE_DIR}"
        self.prefix = f"{name}-"
        self.reclaim_dead_local = reclaim_dead_local
        self.host = socket.gethostname() if host is None else host
        self.pid = os.getpid() if pid is None else pid
        self.owner = owner
        self.nonce = nonce if nonce is not None else uuid.uuid4().hex
        self.ttl_ms = int(ttl.total_seconds() * 1000)
        self.skew_ms = int(clock_skew.total_seconds() * 1000)
        self._clock_ms = clock_ms
        self._held: LeaseState | None = None
        self._warned_twin = False

    def __repr__(self) -> str:
        return (
            f"TableLease({self.directory!r}, owner={self.owner!r}, nonce={self.nonce!r}, "
            f"held={self.held})"
        )

    def _path(self, generation: int) -> str:
        return f"{self.directory}/{self.prefix}{generation}"

    def _generations(self) -> list[int]:
        found = []
        n = len(self.prefix)
        for status in self.file_io.list_files(self.directory):
            name = status.path.rsplit("/", 1)[-1]
            if name.startswith(self.prefix) and name[n:].isdigit():
                found.append(int(name[n:]))
        return sorted(found)

    def _holder_dead(self, state: LeaseState) -> bool:
        """Whether ``state``'s holder ran on this host and its process is gone."""
        return (
            self.reclaim_dead_local
            and state.host == self.host
            and state.pid != self.pid
            and not pid_alive(state.pid)
        )

    def current(self) -> LeaseState | None:
        """Return the newest lease file's content, ``None`` when the role never had one.

        Raises:
            CorruptMetadataError: the newest lease file is undecodable.

        Storage: one listing of ``.snaplake/`` and one read.
        """
        for generation in reversed(self._generations()):
            path = self._path(generation)
            try:
                return LeaseState.from_bytes(self.file_io.read_bytes(path), path=path)
            except FileNotFoundError:
                continue  # deleted by a newer holder meanwhile
        return None

    @property
    def held(self) -> bool:
        """Whether this holder holds the lease and it has not lapsed (local view)."""
        held = self._held
        return held is not None and self._clock_ms() < held.expires_ms

    def try_acquire(self) -> bool:
        """Take the lease if it is free; renew it if this process already holds it.

        A lease held by another holder is not taken before it is released or
        expired (or, with ``reclaim_dead_local``, its process on this host is
        gone), even when that holder has the same owner id (the first time, a
        warning says the id is shared).

        Returns:
            Whether this holder holds the lease afterwards.

        Storage: lists ``.snaplake/``, reads the newest lease; creates
        ``<name>-<g+1>`` (create-if-absent) and deletes older generations when
        taking over; rewrites the own generation file when renewing.
        """
        if self._held is not None:
            return self.renew()
        now = self._clock_ms()
        latest: LeaseState | None
        try:
            latest = self.current()
        except CorruptMetadataError:
            # An undecodable lease (torn write on a store without atomic
            # overwrite) blocks nobody: treat it as expired.
            logger.warning("lease in %s is unreadable; taking it over", self.directory,
                           exc_info=True)  # fmt: skip
            generations = self._generations()
            latest = LeaseState(
                owner="?", generation=generations[-1] if generations else 0,
                acquired_ms=0, expires_ms=0, released=True,
            )  # fmt: skip
        if (
            latest is not None
            and not latest.is_free(now_ms=now, clock_skew_ms=self.skew_ms)
            and not self._holder_dead(latest)
        ):
            if latest.owner == self.owner and latest.nonce != self.nonce and not self._warned_twin:
                self._warned_twin = True
                logger.warning(
                    "lease %s/%s* is held by another process with the same id %r "
                    "(instance %s; this one is instance %s): it is taken over only once "
                    "released or expired. Give each holder its own id.",
                    self.directory, self.prefix, self.owner, latest.nonce or "?", self.nonce,
                )  # fmt: skip
            return False
        generation = (latest.generation if latest else 0) + 1
        state = LeaseState(
            owner=self.owner, nonce=self.nonce, generation=generation, acquired_ms=now,
            expires_ms=now + self.ttl_ms, host=self.host, pid=self.pid,
        )  # fmt: skip
        try:
            self.file_io.write_if_absent(self._path(generation), state.to_bytes())
        except FileAlreadyExistsError:
            return False  # another holder won this generation
        self._held = state
        if latest is not None:
            how = "released" if latest.released else "expired"
            if not latest.released and self._holder_dead(latest):
                how = "dead"
            logger.info(
                "lease %s/%s%d acquired by %s (instance %s; previous holder %s, %s)",
                self.directory, self.prefix, generation, self.owner, self.nonce,
                latest.describe(), how,
            )  # fmt: skip
        for old in self._generations():
            if old < generation:
                self.file_io.delete(self._path(old))
        return True

    def renew(self) -> bool:
        """Extend the held lease by the TTL.

        Returns:
            ``False`` (and the lease is dropped locally) when it lapsed or a
            newer generation exists: another holder took the role over.
        """
        held = self._held
        if held is None:
            return False
        now = self._clock_ms()
        if now >= held.expires_ms:
            logger.warning(
                "lease %s/%s* lapsed before renewal (%d ms late); giving it up",
                self.directory, self.prefix, now - held.expires_ms,
            )  # fmt: skip
            self._held = None
            return False
        newer = [g for g in self._generations() if g > held.generation]
        if newer:
            logger.warning("lease %s/%s* was taken over (generation %d); giving it up",
                           self.directory, self.prefix, newer[-1])  # fmt: skip
            self._held = None
            return False
        state = replace(held, expires_ms=now + self.ttl_ms)
        self.file_io.write_bytes(self._path(held.generation), state.to_bytes(), overwrite=True)
        self._held = state
        return True

    def release(self) -> None:
        """Give the lease up so that another holder can take it at once.

        Storage: rewrites the own generation file with ``released = true``,
        unless a newer generation exists (then nothing is written).
        """
        held, self._held = self._held, None
        if held is None:
            return
        if any(g > held.generation for g in self._generations()):
            return
        state = replace(held, released=True, expires_ms=self._clock_ms())
        self.file_io.write_bytes(self._path(held.generation), state.to_bytes(), overwrite=True)
        logger.info("lease %s/%s* released by %s", self.directory, self.prefix, self.owner)
