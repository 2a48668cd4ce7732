"""SnapshotRetention: which snapshots are due for expiry, by the retention options and consumers.

``snapshot.num-retained.min`` / ``.max``, ``snapshot.time-retained``,
``snapshot.expire.limit`` (each overridable by the caller), consumers that
pin snapshots (``consumer/consumer-<id>``, idle ones past
``consumer.expiration-time`` not counted, none with
``consumer.changelog-only``), and the refusal of changelog retention longer
than the snapshots'.

Source: Paimon ``ExpireSnapshotsImpl.expire`` (the range), ``ExpireConfig``,
``ConsumerManager.minNextSnapshot`` / ``expire``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from snaplake.errors import InvalidOptionError, UnsupportedTableError
from snaplake.options import CoreOptions
from snaplake.store.consumers import ConsumerManager
from snaplake.store.format.schema import TableSchema
from snaplake.store.snapshot_manager import SnapshotManager

__all__ = ["SnapshotRetention"]


class SnapshotRetention:
    """The expiry range of a table: what its retention options and consumers allow.

    Args:
        snapshot_manager: Reads snapshot ids and commit times.
        consumers: The table's consumers (pins).
        retain_min: Override ``snapshot.num-retained.min`` (>= 1).
        retain_max: Override ``snapshot.num-retained.max``.
        time_retained: Override ``snapshot.time-retained``.
        expire_limit: Override ``snapshot.expire.limit``.
        now_ms: Epoch milliseconds (injected by tests).
    """

    def __init__(
        self,
        *,
        snapshot_manager: SnapshotManager,
        consumers: ConsumerManager,
        retain_min: int | None,
        retain_max: int | None,
        time_retained: timedelta | None,
        expire_limit: int | None,
        now_ms: Callable[[], int],
    ) -> None:
        self.snapshot_manager = snapshot_manager
        self.consumers = consumers
        self._retain_min = retain_min
        self._retain_max = retain_max
        self._time_retained = time_retained
        self._expire_limit = expire_limit
        self._now_ms = now_ms

    def options(self, schema: TableSchema) -> tuple[int, int, timedelta, int]:
        """Return ``(retain_min, retain_max, time_retained, expire_limit)`` in effect.

        Raises:
            InvalidOptionError: ``retain_min < 1`` or ``retain_max < retain_min``.
            UnsupportedTableError: changelog kept longer than its snapshots.
        """
        opts = schema.core_options
        rmin = self._retain_min if self._retain_min is not None else opts.snapshot_num_retained_min
        rmax = self._retain_max if self._retain_max is not None else opts.snapshot_num_retained_max
        tret = (
            self._time_retained if self._time_retained is not None else opts.snapshot_time_retained
        )
        limit = self._expire_limit if self._expire_limit is not None else opts.snapshot_expire_limit
        if rmin < 1:
            raise InvalidOptionError(
                f"snapshot.num-retained.min must be at least 1, got {rmin}",
                key="snapshot.num-retained.min", value=str(rmin),
            )  # fmt: skip
        if rmax < rmin:
            raise InvalidOptionError(
                f"snapshot.num-retained.max ({rmax}) must not be less than "
                f"snapshot.num-retained.min ({rmin})",
                key="snapshot.num-retained.max", value=str(rmax),
            )  # fmt: skip
        self.check_changelog_coupled(opts, rmin, rmax, tret)
        return rmin, rmax, tret, max(limit, 1)

    @staticmethod
    def check_changelog_coupled(opts: CoreOptions, rmin: int, rmax: int, tret: timedelta) -> None:
        """Refuse ``changelog.*`` retention longer than the snapshots' (decoupled changelog).

        Paimon then keeps each expired snapshot's changelog as
        ``changelog/changelog-<id>`` and expires it on its own schedule
        (``ExpireChangelogImpl``); snaplake expires changelog with its snapshot.

        Raises:
            UnsupportedTableError: a ``changelog.*`` retention exceeds the snapshot one.

        Source: Paimon ``ExpireConfig`` (``isChangelogDecoupled``).
        """
        cmin, cmax, ctime = opts.changelog_retention(
            retain_min=rmin, retain_max=rmax, time_retained=tret
        )
        longer = [
            f"{key} ({mine}) > {theirs_key} ({theirs})"
            for key, mine, theirs_key, theirs in (
                ("changelog.num-retained.min", cmin, "snapshot.num-retained.min", rmin),
                ("changelog.num-retained.max", cmax, "snapshot.num-retained.max", rmax),
                ("changelog.time-retained", ctime, "snapshot.time-retained", tret),
            )
            if mine > theirs  # type: ignore[operator]
        ]
        if longer:
            raise UnsupportedTableError(
                f"{'; '.join(longer)}: changelog kept longer than its snapshots (Paimon's "
                "decoupled changelog, kept under changelog/) is not supported; snaplake expires "
                "changelog files with their snapshot: lower or remove the changelog.* options",
                feature="decoupled changelog retention",
                operation="maintenance",
                key=longer[0].split(" ", 1)[0],
            )

    def consumer_pin(self, schema: TableSchema) -> int | None:
        """The smallest ``nextSnapshot`` of the consumers that keep snapshots.

        None with ``consumer.changelog-only`` (consumers then never keep
        snapshots); consumers idle longer than ``consumer.expiration-time``
        (by their marker's modification time) do not count.

        Source: Paimon ``ExpireSnapshotsImpl`` / ``ConsumerManager.minNextSnapshot``
        and ``ConsumerManager.expire``.
        """
        opts = schema.core_options
        if opts.consumer_changelog_only:
            return None
        return self.consumers.min_next_snapshot(modified_after_ms=self.consumer_cutoff_ms(schema))

    def consumer_cutoff_ms(self, schema: TableSchema) -> int | None:
        """Epoch ms before which an idle consumer expires (``consumer.expiration-time``)."""
        ttl = schema.core_options.consumer_expiration_time
        return None if ttl is None else self._now_ms() - int(ttl.total_seconds() * 1000)

    def expire_range(self, schema: TableSchema) -> tuple[int, int, int] | None:
        """Return ``(earliest, end_exclusive, latest)`` or ``None`` for an empty table.

        Source: Paimon ``ExpireSnapshotsImpl.expire``.
        """
        rmin, rmax, tret, limit = self.options(schema)
        latest = self.snapshot_manager.latest_snapshot_id()
        earliest = self.snapshot_manager.earliest_snapshot_id()
        if latest is None or earliest is None:
            return None
        low = max(latest - rmax + 1, earliest)
        end = latest - rmin + 1
        consumer = self.consumer_pin(schema)
        if consumer is not None:
            end = min(end, consumer)
        end = min(end, earliest + limit)
        older_than = self._now_ms() - int(tret.total_seconds() * 1000)
        for sid in range(low, end):
            nxt = self.snapshot_manager.try_snapshot(sid + 1)
            if nxt is not None and older_than <= nxt.time_millis:
                return earliest, sid, latest
        return earliest, end, latest
