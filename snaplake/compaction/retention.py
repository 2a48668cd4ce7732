"""SnapshotRetention: which snapshots are due for expiry, by the retention options and consumers.

``snapshot.num-retained.min`` / ``.max``, ``snapshot.time-retained``,
``snapshot.expire.limit``, consumers that pin snapshots
(``consumer/consumer-<id>``, idle ones past ``consumer.expiration-time`` not
counted, none with ``consumer.changelog-only``), and the refusal of changelog
retention longer than the snapshots'. Every option is read from the effective
options the caller passes (the daemon's defaults under the table's own), else
from the table's latest schema, as every maintenance operation takes them.

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
        options: Effective options (``snapshot.num-retained.*``,
            ``snapshot.time-retained``, ``snapshot.expire.limit``,
            ``changelog.*`` retention, ``consumer.*``; the daemon's
            overrides); ``None`` = the latest schema's.
        now_ms: Epoch milliseconds (injected by tests).
    """

    def __init__(
        self,
        *,
        snapshot_manager: SnapshotManager,
        consumers: ConsumerManager,
        options: CoreOptions | None = None,
        now_ms: Callable[[], int],
    ) -> None:
        self.snapshot_manager = snapshot_manager
        self.consumers = consumers
        self.options = options
        self._now_ms = now_ms

    def effective_options(self, schema: TableSchema) -> CoreOptions:
        """The options in effect: those given, else ``schema``'s."""
        return self.options if self.options is not None else schema.core_options

    def limits(self, schema: TableSchema) -> tuple[int, int, timedelta, int]:
        """Return ``(retain_min, retain_max, time_retained, expire_limit)`` in effect.

        Raises:
            InvalidOptionError: ``snapshot.num-retained.min < 1`` or
                ``snapshot.num-retained.max < snapshot.num-retained.min``.
            UnsupportedTableError: changelog kept longer than its snapshots.
        """
        opts = self.effective_options(schema)
        rmin, rmax = opts.snapshot_num_retained_min, opts.snapshot_num_retained_max
        tret, limit = opts.snapshot_time_retained, opts.snapshot_expire_limit
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
        if self.effective_options(schema).consumer_changelog_only:
            return None
        return self.consumers.min_next_snapshot(modified_after_ms=self.consumer_cutoff_ms(schema))

    def consumer_cutoff_ms(self, schema: TableSchema) -> int | None:
        """Epoch ms before which an idle consumer expires (``consumer.expiration-time``)."""
        ttl = self.effective_options(schema).consumer_expiration_time
        return None if ttl is None else self._now_ms() - int(ttl.total_seconds() * 1000)

    def expire_range(self, schema: TableSchema) -> tuple[int, int, int] | None:
        """Return ``(earliest, end_exclusive, latest)`` or ``None`` for an empty table.

        Source: Paimon ``ExpireSnapshotsImpl.expire``.
        """
        rmin, rmax, tret, limit = self.limits(schema)
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
