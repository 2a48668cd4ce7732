"""Subscriptions: read a table's changes snapshot by snapshot under a consumer id, exactly once.

``table.subscribe("job-a")`` yields one :class:`ChangeBatch` per snapshot that
has change rows in the read mode (``auto``, ``delta``, ``changelog``, ``diff``:
:mod:`snaplake.table_changes`). The caller handles ``batch.reader`` and calls
``batch.ack()``; only then does ``consumer/consumer-job-a`` (Paimon's consumer
file, ``{"nextSnapshot": N}``) move past the snapshot. A process that dies
before ``ack`` gets the same snapshot again from a new subscription with the
same id, so a caller that makes its own output idempotent per snapshot (e.g. a
snaplake commit with ``commit_identifier = batch.snapshot_id``) processes every
snapshot exactly once.

Progress (the consumer file):

- A **new** consumer (no file yet) starts at ``start``: ``"earliest"`` (the
  oldest retained snapshot), ``"latest"`` (only snapshots committed after
  now), a snapshot id (retained), or an aware ``datetime`` (the first snapshot
  committed at or after it). Its file is created at once with that position:
  nothing is marked read, but a crash before the first ack resumes at the same
  snapshot (not at a new "latest"), and expiry keeps the snapshot.
- An **existing** consumer resumes from its ``nextSnapshot``; ``start`` is
  ignored (Paimon's consumers do the same). Reset it with
  ``snaplake consumers TABLE --reset ID --to N``.
- ``ack()`` writes ``nextSnapshot = batch.snapshot_id + 1`` (create-or-replace,
  atomic). Batches are acknowledged in delivery order, each once
  (:class:`~snaplake.errors.AckOrderError` otherwise). At each lease renewal
  the file is rewritten unchanged, so a live subscription never looks idle to
  ``consumer.expiration-time`` (Paimon's streaming jobs rewrite it at every
  checkpoint).
- Snapshots without rows in the mode (a COMPACT snapshot in ``delta`` mode, an
  OVERWRITE in ``changelog`` mode) give no batch. The next batch's ack moves
  the consumer past them; when they are the newest snapshots, the subscription
  moves the consumer past them itself, but only once every delivered batch is
  acknowledged (they hold nothing to lose), so the consumer neither lags nor
  pins them.

Exclusivity: a subscription holds a lease on its consumer id
(``<table>/.snaplake/subscription-<id>-<generation>``, :class:`TableLease`,
renewed by a background thread every third of ``lease_ttl``) from the start
until :meth:`Subscription.close`. A second subscription with the same id, in
this or another process, gets :class:`~snaplake.errors.ConsumerBusyError`.
A holder that died frees the id at once for a process on its own host (the
lease records host and pid) and after ``lease_ttl`` elsewhere.

Snapshot expiry never removes a snapshot a consumer still needs (``nextSnapshot``
and later, :mod:`snaplake.compaction.expire`); ``consumer.expiration-time``
lets the daemon delete consumers idle longer than that.

Source: Paimon ``Consumer`` / ``ConsumerManager`` (the file), the
``consumer-id`` streaming read (progress per consumer), and pypaimon's
``StreamReadBuilder.with_consumer_id`` (which moves the file when a batch is
planned: at-least-once; here it moves on ack).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa

from snaplake.change_plan import DIFF, MODES, ChangePlan, ChangeSplit
from snaplake.errors import (
    AckOrderError,
    ConsumerBusyError,
    InvalidOptionError,
    SnapshotNotFoundError,
)
from snaplake.store.consumers import ConsumerManager, check_consumer_id
from snaplake.store.lease import TableLease
from snaplake.table_changes import TableChanges

__all__ = [
    "ChangeBatch",
    "Subscription",
    "SubscriptionOptions",
    "TableSubscriptions",
    "delete_consumer",
    "reset_consumer",
]

logger = logging.getLogger(__name__)

#: Snapshots planned at once when a consumer is far behind.
MAX_SNAPSHOTS_PER_PLAN = 64
#: Default lease validity; a renewal every third of it.
DEFAULT_LEASE_TTL = timedelta(seconds=60)

Start = str | int | datetime


@dataclass(eq=False)
class ChangeBatch:
    """The change rows of one snapshot, delivered by a :class:`Subscription`.

    Attributes:
        snapshot_id: The snapshot the rows belong to.
        commit_kind: That snapshot's commit kind (``APPEND``, ``COMPACT``, ``OVERWRITE``).
        time_millis: That snapshot's commit time, epoch milliseconds.
        reader: The rows (the table's columns or the projection, then
            ``_row_kind`` and ``_snapshot_id``), read lazily from the data
            files; read it before acknowledging.
        consumer_id: The subscription's consumer id.
    """

    snapshot_id: int
    commit_kind: str
    time_millis: int
    reader: pa.RecordBatchReader
    consumer_id: str
    _subscription: Subscription = field(repr=False)
    acked: bool = False

    def ack(self) -> None:
        """Record that this snapshot is handled: the consumer reads the next one next.

        Raises:
            AckOrderError: already acknowledged, an earlier batch is not yet
                acknowledged, or the subscription is closed. Nothing written.
            ConsumerBusyError: the subscription lost its lease (it could not
                renew it in time, or another process took the id over).
                Nothing written.
            StorageError: the write failed; the batch stays unacknowledged
                (call ``ack`` again).

        Storage: overwrites ``consumer/consumer-<id>`` with
        ``{"nextSnapshot": snapshot_id + 1}`` (atomically).
        """
        self._subscription._ack(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionOptions:
    """How a :class:`Subscription` reads: the arguments of ``Table.subscribe``, checked.

    Attributes:
        start: Where a new consumer starts (``"earliest"``, ``"latest"``, a
            snapshot id, an aware ``datetime``).
        poll_interval: Wait between looks for new snapshots when caught up.
        stop_when_idle: End the iteration once caught up.
        mode: ``auto``, ``delta``, ``changelog`` or ``diff``.
        columns: Table columns to return (``None`` = all).
        filter: As ``Table.to_arrow``.
        lease_ttl: Validity of the consumer-id lease between renewals.

    Raises:
        InvalidOptionError: an unknown mode, a ``start`` of another type, a
            non-positive ``poll_interval`` or ``lease_ttl``.
        ValueError: a naive ``datetime`` start.
    """

    start: Start = "earliest"
    poll_interval: timedelta = timedelta(seconds=1)
    stop_when_idle: bool = False
    mode: str = "auto"
    columns: tuple[str, ...] | None = None
    filter: Any = None
    lease_ttl: timedelta = DEFAULT_LEASE_TTL

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InvalidOptionError(
                f"unknown change read mode {self.mode!r}; use one of {', '.join(MODES)}",
                key="incremental-between-scan-mode", value=str(self.mode),
            )  # fmt: skip
        start = self.start
        ok = start in ("earliest", "latest") or isinstance(start, datetime | int)
        if not ok or isinstance(start, bool):
            raise InvalidOptionError(
                f"start must be 'earliest', 'latest', a snapshot id or a datetime, got {start!r}",
                key="scan.mode", value=str(start),
            )  # fmt: skip
        if isinstance(self.start, datetime) and self.start.tzinfo is None:
            raise ValueError("start must be timezone-aware (e.g. datetime.now(UTC))")
        if self.poll_interval <= timedelta(0):
            raise InvalidOptionError(
                f"poll_interval must be positive, got {self.poll_interval}",
                key="continuous.discovery-interval", value=str(self.poll_interval),
            )  # fmt: skip
        if self.lease_ttl <= timedelta(0):
            raise InvalidOptionError(
                f"lease_ttl must be positive, got {self.lease_ttl}", key="lease_ttl",
                value=str(self.lease_ttl),
            )  # fmt: skip


class Subscription:
    """Iterate a table's changes as :class:`ChangeBatch` es under a consumer id.

    Made by ``Table.subscribe`` (arguments there, held as ``options``: a
    :class:`SubscriptionOptions`). Iterating yields batches;
    with ``stop_when_idle`` the iteration ends once every retained snapshot
    has been delivered, otherwise it polls every ``poll_interval``. Use it as
    a context manager, or call :meth:`close`, to release the consumer id at
    once (a subscription dropped unclosed releases it when collected, or at
    interpreter exit). Not for use from several threads at once.
    """

    def __init__(self, table: TableChanges, consumer_id: str, options: SubscriptionOptions) -> None:
        check_consumer_id(consumer_id)
        self.table = table
        self.consumer_id = consumer_id
        self.options = options
        self._consumers = ConsumerManager(table.file_io, table.paths)
        self._lease = self._consumers.lease(consumer_id, ttl=options.lease_ttl)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._lost: list[str] = []  # set by the renewal thread when the lease is gone
        self._pending: deque[ChangeBatch] = deque()
        self._closed = False
        if not self._lease.try_acquire():
            raise _busy(table, consumer_id, self._lease, "subscribe with another consumer id")
        try:
            self._acked_next = self._open_consumer(options.start)
        except BaseException:
            self._lease.release()
            raise
        self._next_read = self._acked_next
        self._thread = threading.Thread(
            target=_renew_loop, name=f"snaplake-lease-{consumer_id}", daemon=True,
            args=(self._lease, self._lock, self._stop, self._lost,
                  options.lease_ttl.total_seconds() / 3, weakref.WeakMethod(self._touch)),
        )  # fmt: skip
        self._thread.start()
        self._finalizer = weakref.finalize(
            self, _shutdown, self._lease, self._lock, self._stop, self._thread
        )
        self._iter = self._batches()
        logger.info(
            "subscription %s on %s from snapshot %d (mode %s)",
            consumer_id, table.identifier, self._next_read, options.mode,
        )  # fmt: skip

    def __repr__(self) -> str:
        return (
            f"Subscription({self.table.identifier!r}, {self.consumer_id!r}, "
            f"next={self._next_read}, acked_next={self._acked_next}, closed={self._closed})"
        )

    @property
    def next_snapshot(self) -> int:
        """The consumer's ``nextSnapshot`` as this subscription last wrote or read it."""
        return self._acked_next

    def __iter__(self) -> Iterator[ChangeBatch]:
        return self

    def __next__(self) -> ChangeBatch:
        return next(self._iter)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop renewing and release the consumer id (idempotent).

        Unacknowledged batches stay unacknowledged: the next subscription
        with this id delivers their snapshots again.

        Storage: rewrites the own lease file as released.
        """
        with self._lock:
            self._closed = True
        self._finalizer()

    # -- progress -----------------------------------------------------------
    def _open_consumer(self, start: Start) -> int:
        """The consumer's next snapshot: its file's, or ``start`` resolved (file created)."""
        existing = self._consumers.consumer(self.consumer_id)
        if existing is not None:
            return existing
        first = self._resolve_start(start)
        if not self._consumers.create_consumer(self.consumer_id, next_snapshot=first):
            found = self._consumers.consumer(self.consumer_id)
            return first if found is None else found
        return first

    def _resolve_start(self, start: Start) -> int:
        sm = self.table.snapshot_manager
        latest = sm.latest_snapshot_id() or 0
        earliest = sm.earliest_snapshot_id() or 1
        if start == "earliest":
            return earliest
        if start == "latest":
            return latest + 1
        if isinstance(start, datetime):
            before = sm.earlier_or_equal_time_millis(int(start.timestamp() * 1000) - 1)
            return earliest if before is None else before.id + 1
        assert isinstance(start, int)
        if start > latest or start < earliest:
            where = f"retained snapshots are {earliest}..{latest}" if latest else "none yet"
            raise SnapshotNotFoundError(
                f"start snapshot {start} of {self.table.identifier} is not retained ({where}); "
                "start from a retained snapshot, 'earliest' or 'latest'", snapshot_id=start,
            )  # fmt: skip
        return start

    def _ack(self, batch: ChangeBatch) -> None:
        with self._lock:
            sid = batch.snapshot_id
            if batch.acked:
                raise AckOrderError(f"snapshot {sid} was already acknowledged", snapshot_id=sid)
            if self._closed:
                raise AckOrderError(
                    f"the subscription of consumer {self.consumer_id!r} is closed; snapshot "
                    f"{sid} is delivered again by the next subscription", snapshot_id=sid,
                )  # fmt: skip
            if not self._pending or self._pending[0] is not batch:
                first = self._pending[0].snapshot_id if self._pending else None
                raise AckOrderError(
                    f"acknowledge batches in delivery order: snapshot {first} comes before "
                    f"snapshot {sid}", snapshot_id=sid,
                )  # fmt: skip
            self._check_lease()
            self._consumers.set_consumer(self.consumer_id, next_snapshot=sid + 1)
            self._pending.popleft()
            batch.acked = True
            self._acked_next = sid + 1

    def _check_lease(self) -> None:
        """Raise ConsumerBusyError unless the lease is still held (caller holds the lock)."""
        if self._lost or not self._lease.held:
            reason = self._lost[0] if self._lost else "its lease lapsed before renewal"
            raise ConsumerBusyError(
                f"the subscription of consumer {self.consumer_id!r} on {self.table.identifier} "
                f"lost the consumer id ({reason}); close it and subscribe again",
                consumer_id=self.consumer_id, holder=reason,
            )  # fmt: skip

    def _touch(self) -> None:
        """Rewrite the consumer file unchanged (renewal thread, lock held).

        A live subscription is never idle: ``consumer.expiration-time`` counts
        from the file's last write, as for Paimon's streaming jobs, which
        rewrite it at every checkpoint. Recreates a file an expiry removed.
        """
        if not self._closed:
            self._consumers.set_consumer(self.consumer_id, next_snapshot=self._acked_next)

    def _skip_empty(self) -> None:
        """Move the consumer past snapshots without rows once every batch is acknowledged."""
        with self._lock:
            if self._pending or self._closed or self._acked_next >= self._next_read:
                return
            self._check_lease()
            self._consumers.set_consumer(self.consumer_id, next_snapshot=self._next_read)
            self._acked_next = self._next_read

    # -- reading --------------------------------------------------------------
    def _batches(self) -> Iterator[ChangeBatch]:
        sm = self.table.snapshot_manager
        while True:
            with self._lock:
                if self._closed:
                    return
                self._check_lease()
            latest = sm.latest_snapshot_id() or 0
            if self._next_read > latest:
                self._skip_empty()
                if self.options.stop_when_idle:
                    if not self._pending:
                        self.close()
                    return
                self._stop.wait(self.options.poll_interval.total_seconds())
                continue
            end = min(latest, self._next_read + MAX_SNAPSHOTS_PER_PLAN - 1)
            yield from self._range(self._next_read, end)
            self._next_read = end + 1
            self._skip_empty()

    def _range(self, start: int, end: int) -> Iterator[ChangeBatch]:
        """The batches of ``start..end``; ``_next_read`` moves past each one delivered."""
        plans: Iterator[ChangePlan]
        if self.options.mode == DIFF:
            plans = (self._plan(sid, sid) for sid in range(start, end + 1))
        else:
            plans = iter([self._plan(start, end)])
        for plan in plans:
            by_snapshot: dict[int, list[ChangeSplit]] = {}
            for split in plan.splits:
                by_snapshot.setdefault(split.snapshot_id, []).append(split)
            for sid in sorted(by_snapshot):
                batch = self._batch(plan, sid, by_snapshot[sid])
                with self._lock:
                    if self._closed:
                        return
                    self._pending.append(batch)
                self._next_read = sid + 1
                yield batch

    def _plan(self, start: int, end: int) -> ChangePlan:
        return self.table.plan_changes(
            start,
            end,
            mode=self.options.mode,
            columns=self.options.columns,
            filter=self.options.filter,
        )

    def _batch(self, plan: ChangePlan, sid: int, splits: list[ChangeSplit]) -> ChangeBatch:
        task = plan.read_task
        rows = (b for split in splits for b in task(split))
        snapshot = self.table.snapshot_manager.snapshot(sid)
        return ChangeBatch(
            snapshot_id=sid, commit_kind=splits[0].commit_kind, time_millis=snapshot.time_millis,
            reader=pa.RecordBatchReader.from_batches(plan.schema, rows),
            consumer_id=self.consumer_id, _subscription=self,
        )  # fmt: skip


class TableSubscriptions(TableChanges):
    """The ``subscribe`` method of :class:`snaplake.table.Table` (a mixin over its change reads)."""

    def subscribe(
        self,
        consumer_id: str,
        *,
        start: Start = "earliest",
        poll_interval: timedelta = timedelta(seconds=1),
        stop_when_idle: bool = False,
        mode: str = "auto",
        columns: Sequence[str] | None = None,
        filter: Any = None,
        lease_ttl: timedelta = DEFAULT_LEASE_TTL,
    ) -> Subscription:
        """Subscribe to the table's changes as consumer ``consumer_id`` (see the module).

        Args:
            consumer_id: Letters, digits, ``_``, ``.``, ``-``; names
                ``consumer/consumer-<id>``.
            start: Where a new consumer starts: ``"earliest"``, ``"latest"``, a
                retained snapshot id, or an aware ``datetime``. Ignored when
                the consumer exists (it resumes from its ``nextSnapshot``).
            poll_interval: Wait between looks for new snapshots when caught up.
            stop_when_idle: End the iteration once caught up instead of polling.
            mode: ``auto``, ``delta``, ``changelog`` or ``diff`` (``diff``: per
                snapshot, the difference of the merged views before and after it;
                a snapshot that changed files but not the view, e.g. a
                compaction, gives a batch whose reader is empty; it needs the
                snapshot before the consumer's next one retained).
            columns: Table columns to return (``None`` = all).
            filter: As ``Table.to_arrow``; applied exactly to every change row.
            lease_ttl: Validity of the consumer-id lease between renewals: how
                long a crashed holder on another host blocks the id.

        Returns:
            The :class:`Subscription` (iterable, a context manager).

        Raises:
            InvalidNameError: an invalid consumer id.
            InvalidOptionError: an unknown mode, a ``start`` of another type, a
                non-positive ``poll_interval`` or ``lease_ttl``.
            ValueError: a naive ``datetime`` start.
            ConsumerBusyError: another live subscription holds the consumer id.
            SnapshotNotFoundError: a new consumer's start snapshot is not
                retained; while iterating, the consumer's next snapshot expired.
            UnsupportedTableError: as ``plan_changes`` (e.g. ``changelog``
                without a changelog producer), while iterating.

        Storage: creates ``consumer/consumer-<id>`` for a new consumer and the
        lease files under ``.snaplake/``; see :meth:`ChangeBatch.ack`.
        """
        options = SubscriptionOptions(
            start=start, poll_interval=poll_interval, stop_when_idle=stop_when_idle, mode=mode,
            columns=None if columns is None else tuple(columns), filter=filter,
            lease_ttl=lease_ttl,
        )  # fmt: skip
        return Subscription(self, consumer_id, options)


def reset_consumer(table: TableChanges, consumer_id: str, *, next_snapshot: int) -> None:
    """Set consumer ``consumer_id`` to read ``next_snapshot`` next (created if missing).

    Raises:
        InvalidNameError: an invalid consumer id.
        SnapshotNotFoundError: ``next_snapshot`` is neither a retained snapshot
            nor the one after the latest.
        ConsumerBusyError: a live subscription holds the id (stop it first).

    Storage: takes and releases the consumer's lease (``.snaplake/``);
    overwrites ``consumer/consumer-<id>``.

    Source: Paimon ``ConsumerManager.resetConsumer`` (the reset procedure).
    """
    check_consumer_id(consumer_id)
    sm = table.snapshot_manager
    latest = sm.latest_snapshot_id() or 0
    earliest = sm.earliest_snapshot_id() or 1
    if not earliest <= next_snapshot <= latest + 1:
        raise SnapshotNotFoundError(
            f"cannot reset consumer {consumer_id!r} of {table.identifier} to snapshot "
            f"{next_snapshot}: pick a retained snapshot {earliest}..{latest} or {latest + 1} "
            "(the next one)", snapshot_id=next_snapshot,
        )  # fmt: skip
    consumers = ConsumerManager(table.file_io, table.paths)
    with _exclusively(table, consumers, consumer_id):
        consumers.set_consumer(consumer_id, next_snapshot=next_snapshot)


def delete_consumer(table: TableChanges, consumer_id: str) -> None:
    """Delete consumer ``consumer_id`` (missing is fine): it no longer pins snapshots.

    Raises:
        InvalidNameError: an invalid consumer id.
        ConsumerBusyError: a live subscription holds the id (stop it first).

    Storage: takes and releases the consumer's lease (``.snaplake/``);
    deletes ``consumer/consumer-<id>``.
    """
    check_consumer_id(consumer_id)
    consumers = ConsumerManager(table.file_io, table.paths)
    with _exclusively(table, consumers, consumer_id):
        consumers.delete_consumer(consumer_id)


@contextlib.contextmanager
def _exclusively(
    table: TableChanges, consumers: ConsumerManager, consumer_id: str
) -> Iterator[None]:
    """Hold ``consumer_id``'s lease for one change by a tool (refused while subscribed)."""
    lease = consumers.lease(consumer_id, ttl=DEFAULT_LEASE_TTL)
    if not lease.try_acquire():
        raise _busy(table, consumer_id, lease, "stop that subscription first")
    try:
        yield
    finally:
        lease.release()


def _busy(
    table: TableChanges, consumer_id: str, lease: TableLease, advice: str
) -> ConsumerBusyError:
    holder = lease.current()
    described = holder.describe() if holder is not None else "unknown"
    return ConsumerBusyError(
        f"consumer {consumer_id!r} of {table.identifier} is in use by a live subscription "
        f"({described}); {advice}. A holder that crashed frees the id at once on its own "
        f"host, elsewhere once its lease expires (at most {lease.ttl_ms / 1000:g} s)",
        consumer_id=consumer_id, holder=described,
    )  # fmt: skip


def _renew_loop(
    lease: TableLease,
    lock: threading.Lock,
    stop: threading.Event,
    lost: list[str],
    every_s: float,
    touch: weakref.WeakMethod[Callable[[], None]],
) -> None:
    """Renew ``lease`` and ``touch`` the consumer file every ``every_s`` until ``stop``.

    Records in ``lost`` why the lease was lost. ``touch`` is held weakly so
    that an unclosed subscription can still be collected.
    """
    while not stop.wait(every_s):
        with lock:
            if stop.is_set():
                return
            try:
                renewed = lease.renew()
            except Exception:  # a storage hiccup: try again next round
                logger.warning("renewing %r failed", lease, exc_info=True)
                continue
            if not renewed:
                lost.append("another subscription took the consumer id over, or it lapsed")
                return
            refresh = touch()
            if refresh is None:
                return
            try:
                refresh()
            except Exception:
                logger.warning("refreshing the consumer file of %r failed", lease, exc_info=True)


def _shutdown(
    lease: TableLease, lock: threading.Lock, stop: threading.Event, thread: threading.Thread
) -> None:
    """Stop the renewal thread and release the lease (a close, a collection, or exit)."""
    stop.set()
    if thread is not threading.current_thread():
        thread.join()
    with lock:
        try:
            lease.release()
        except Exception:  # the lease expires on its own
            logger.warning("releasing %r failed", lease, exc_info=True)
