"""ConsumerManager: readers' progress markers (``consumer/consumer-<id>``) that pin snapshots.

A consumer file records the next snapshot a streaming reader will read
(``{"nextSnapshot": N}``). Snapshot expiry never expires snapshot ``N`` or
later for the smallest such ``N``, so a slow reader never finds its next
snapshot gone.

A subscription (:mod:`snaplake.subscription`) holds a lease on its consumer
id while it lives (:meth:`ConsumerManager.lease`): the lease files are
``<table>/.snaplake/subscription-<id>-<generation>``, outside ``consumer/``,
because Paimon reads every ``consumer/consumer-*`` file as a consumer.

Source: Paimon ``ConsumerManager`` and ``Consumer`` (file name, JSON key
``nextSnapshot``, ``minNextSnapshot``, ``resetConsumer`` overwrites).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

import orjson

from snaplake.errors import CorruptMetadataError, FileAlreadyExistsError, InvalidNameError
from snaplake.store.format.paths import TableFileManager, list_prefixed
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.io.file_io import FileStatus
from snaplake.store.lease import TableLease

__all__ = ["LEASE_NAME_PREFIX", "ConsumerLag", "ConsumerManager", "SnapshotLookup",
           "check_consumer_id", "consumer_lags"]  # fmt: skip

logger = logging.getLogger(__name__)

_PREFIX = "consumer-"
_VALID_ID = re.compile(r"[A-Za-z0-9_.\-]+")

#: A consumer's lease role is ``subscription-<id>`` (files ``.snaplake/subscription-<id>-<g>``).
LEASE_NAME_PREFIX = "subscription-"


def check_consumer_id(consumer_id: str) -> None:
    """Refuse a consumer id that cannot name ``consumer/consumer-<id>``.

    Raises:
        InvalidNameError: empty, or a character other than letters, digits,
            ``_``, ``.`` and ``-`` (checked in full; ``.`` and ``..`` alone are
            refused too).
    """
    if not _VALID_ID.fullmatch(consumer_id) or consumer_id in (".", ".."):
        raise InvalidNameError(
            f"invalid consumer id {consumer_id!r}: use letters, digits, '_', '.' and '-'",
            kind="consumer id",
            name=str(consumer_id),
        )


class ConsumerManager(TableFileManager):
    """Read and write the consumer markers of one table."""

    def set_consumer(self, consumer_id: str, *, next_snapshot: int) -> None:
        """Record that ``consumer_id`` will read ``next_snapshot`` next.

        Args:
            consumer_id: Letters, digits, ``_``, ``.`` and ``-``.
            next_snapshot: A snapshot id ``>= 1``; expiry keeps it and every
                later snapshot.

        Raises:
            InvalidNameError: the id has another character (checked in full).
            ValueError: ``next_snapshot`` is below 1.

        Storage:
            Overwrites ``consumer/consumer-<id>`` (create-or-replace, atomically:
            a reader sees the old or the new content).
        """
        check_consumer_id(consumer_id)
        if next_snapshot < 1:
            raise ValueError(f"next_snapshot must be >= 1, got {next_snapshot}")
        data = orjson.dumps({"nextSnapshot": int(next_snapshot)})
        self.file_io.write_bytes(self.paths.consumer_path(consumer_id), data, overwrite=True)
        logger.info("consumer %s now at snapshot %d", consumer_id, next_snapshot)

    def create_consumer(self, consumer_id: str, *, next_snapshot: int) -> bool:
        """Create the marker of a new consumer; leave an existing one as it is.

        Returns:
            Whether the marker was created (``False``: the consumer exists).

        Raises:
            InvalidNameError: an invalid id.
            ValueError: ``next_snapshot`` is below 1.

        Storage:
            Creates ``consumer/consumer-<id>`` if absent (create-if-absent).
        """
        check_consumer_id(consumer_id)
        if next_snapshot < 1:
            raise ValueError(f"next_snapshot must be >= 1, got {next_snapshot}")
        data = orjson.dumps({"nextSnapshot": int(next_snapshot)})
        try:
            self.file_io.write_if_absent(self.paths.consumer_path(consumer_id), data)
        except FileAlreadyExistsError:
            return False
        logger.info("consumer %s created at snapshot %d", consumer_id, next_snapshot)
        return True

    def lease(self, consumer_id: str, *, ttl: timedelta, nonce: str | None = None) -> TableLease:
        """The lease one subscription holds on ``consumer_id`` (not acquired yet).

        A holder that recorded this host and a pid no longer alive is taken
        over at once; on other hosts after ``ttl`` (plus the clock skew).

        Raises:
            InvalidNameError: an invalid id.
        """
        check_consumer_id(consumer_id)
        return TableLease(
            file_io=self.file_io, table_root=self.paths.root, owner=consumer_id, nonce=nonce,
            ttl=ttl, name=f"{LEASE_NAME_PREFIX}{consumer_id}", reclaim_dead_local=True,
        )  # fmt: skip

    def consumer(self, consumer_id: str) -> int | None:
        """Return the ``nextSnapshot`` of ``consumer_id``, or ``None`` if it has no marker.

        Raises:
            InvalidNameError: an invalid id.
            CorruptMetadataError: the marker is not ``{"nextSnapshot": <int>}``.
        """
        check_consumer_id(consumer_id)
        return self._read(consumer_id)

    def _read(self, consumer_id: str) -> int | None:
        """Read a marker (ids listed from storage are not checked: other engines allow more)."""
        path = self.paths.consumer_path(consumer_id)
        try:
            data = self.file_io.read_bytes(path)
        except FileNotFoundError:
            return None
        try:
            return int(orjson.loads(data)["nextSnapshot"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise CorruptMetadataError(
                f"{path} is not a Paimon consumer file ({exc}); fix or delete it", path=path
            ) from exc

    def delete_consumer(self, consumer_id: str) -> None:
        """Remove the marker of ``consumer_id`` (missing is fine).

        Raises:
            InvalidNameError: an invalid id.

        Storage:
            Deletes ``consumer/consumer-<id>``.
        """
        check_consumer_id(consumer_id)
        self.file_io.delete(self.paths.consumer_path(consumer_id))

    def consumers(self, *, modified_after_ms: int | None = None) -> dict[str, int]:
        """Return ``{consumer_id: nextSnapshot}`` for every marker.

        Args:
            modified_after_ms: Only markers modified at or after this epoch
                millisecond (``None`` = all).

        Raises:
            CorruptMetadataError: a marker cannot be decoded.
        """
        out: dict[str, int] = {}
        for cid, status in self._markers():
            if modified_after_ms is not None and status.modification_time_ms < modified_after_ms:
                continue
            value = self._read(cid)
            if value is not None:
                out[cid] = value
        return dict(sorted(out.items()))

    def _markers(self) -> list[tuple[str, FileStatus]]:
        return list_prefixed(self.file_io, self.paths.consumer_dir, _PREFIX)

    def min_next_snapshot(self, *, modified_after_ms: int | None = None) -> int | None:
        """Return the smallest ``nextSnapshot`` of the consumers, ``None`` without any.

        Args:
            modified_after_ms: Ignore markers last modified before this epoch
                millisecond (idle consumers, ``consumer.expiration-time``).
        """
        values = self.consumers(modified_after_ms=modified_after_ms).values()
        return min(values) if values else None

    def expire(self, *, modified_before_ms: int) -> list[str]:
        """Delete the markers of consumers idle since before ``modified_before_ms``.

        Returns:
            The removed consumer ids.

        Storage:
            Deletes ``consumer/consumer-<id>`` of each idle consumer.

        Source:
            Paimon ``ConsumerManager.expire`` (``consumer.expiration-time``).
        """
        idle = [cid for cid, st in self._markers() if st.modification_time_ms < modified_before_ms]
        for cid in idle:
            self.file_io.delete(self.paths.consumer_path(cid))
        if idle:
            logger.info("removed idle consumer(s) %s", ", ".join(idle))
        return idle


class SnapshotLookup(Protocol):
    """What :func:`consumer_lags` reads (a ``SnapshotManager``)."""

    def latest_snapshot_id(self) -> int | None:
        """The newest snapshot id."""
        ...

    def earliest_snapshot_id(self) -> int | None:
        """The oldest retained snapshot id."""
        ...

    def try_snapshot(self, snapshot_id: int) -> Snapshot | None:
        """One snapshot, ``None`` when it does not exist."""
        ...


@dataclass(frozen=True, slots=True)
class ConsumerLag:
    """How far one consumer is behind the table.

    Attributes:
        next_snapshot: Its ``nextSnapshot``.
        snapshots: Snapshots it has yet to read: latest id + 1 - ``next_snapshot``, at least 0.
        seconds: Now minus the commit time of its oldest unread snapshot
            (``next_snapshot``, or the earliest retained one if that expired),
            at least 0; 0 when it is caught up.
    """

    next_snapshot: int
    snapshots: int
    seconds: float


def consumer_lags(
    consumers: Mapping[str, int], snapshots: SnapshotLookup, *, now_ms: int
) -> dict[str, ConsumerLag]:
    """Measure the lag of each consumer (``{id: nextSnapshot}``) at ``now_ms`` (epoch ms).

    Storage: finds the latest and earliest snapshot ids; reads the snapshot
    file of each distinct unread ``nextSnapshot`` (once each).
    """
    latest = snapshots.latest_snapshot_id() or 0
    earliest: int | None = None
    times: dict[int, int | None] = {}
    out: dict[str, ConsumerLag] = {}
    for cid, next_snapshot in consumers.items():
        behind = max(latest + 1 - next_snapshot, 0)
        seconds = 0.0
        if behind:
            if earliest is None:
                earliest = snapshots.earliest_snapshot_id() or 1
            oldest = max(next_snapshot, earliest)
            if oldest not in times:
                snap = snapshots.try_snapshot(oldest)
                times[oldest] = snap.time_millis if snap is not None else None
            committed = times[oldest]
            if committed is not None:
                seconds = max(now_ms - committed, 0) / 1000
        out[cid] = ConsumerLag(next_snapshot, behind, seconds)
    return out
