"""TagLifecycle: automatic tags, tag retention and idle consumers, as Paimon's writers keep them.

Paimon's Java committers create a tag per period as snapshots pass the
period's end (``tag.automatic-creation``), expire tags past their retention
and delete idle consumers; pypaimon does none of it. snaplake does it on
demand (``Table.create_tag_automatically`` / ``expire_tags`` /
``expire_consumers``, the daemon's ``auto_tag`` / ``expire_tags`` /
``expire_consumers`` tasks), from the table's own options.

* :meth:`TagLifecycle.create_tags`, ``process-time`` / ``watermark``: from the
  snapshot after the newest automatic tag (the earliest snapshot when there is
  none), each snapshot whose time (commit time, or watermark) minus
  ``tag.creation-delay`` reaches the end of the period after the last tagged
  one tags the period before its own; periods without a snapshot get no tag,
  unless ``tag.automatic-completion`` tags them one by one. ``batch``: the
  latest snapshot is tagged ``batch-write-<yyyy-MM-dd>`` (or
  ``tag.batch.customized-name``), replacing that day's earlier tag.
* :meth:`TagLifecycle.expire_tags`: tags whose ``tagCreateTime +
  tagTimeRetained`` has passed; then, with ``tag.num-retained-max``, the
  oldest automatic tags (by snapshot id) beyond that count (batch mode: the
  oldest tags of any kind).
* :func:`expire_consumers`: ``consumer/consumer-<id>`` files not modified for
  ``consumer.expiration-time``.

Deleting a tag deletes the files only it kept alive
(:class:`~snaplake.compaction.tag_deletion.TagDeletion`, Paimon's rule).

Source: Paimon ``TagAutoCreation`` (``run``, ``tryToCreateTags``, the start
from the newest auto tag), ``TagBatchCreation``, ``TagTimeExpire``,
``TagAutoManager``, ``ConsumerManager.expire``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime

from snaplake.compaction.tag_deletion import TagDeletion
from snaplake.errors import FileAlreadyExistsError, TagNotFoundError, UnsupportedTableError
from snaplake.options import CoreOptions, Operation
from snaplake.options.registry import option_refusal
from snaplake.options.tag_options import TagOptions, batch_tag_name, local_time
from snaplake.store.consumers import ConsumerManager
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.table_storage import TableStorage
from snaplake.store.tags import TagInfo, TagManager

__all__ = ["TagLifecycle", "epoch_ms_of", "expire_consumers"]

logger = logging.getLogger(__name__)

# (table root, tag options) -> (newest automatic tag, id and timeMillis of the last snapshot
# create_tags looked at): where it stopped
_progress: dict[tuple[str, TagOptions], tuple[str | None, int, int]] = {}
_progress_lock = threading.Lock()
_SUCCESS_FILE = "tag.create-success-file"
MAINTENANCE = Operation.MAINTENANCE
_NEVER = datetime(1, 1, 1)  # noqa: DTZ001 - sorts tags without tagCreateTime first


def epoch_ms_of(now: datetime | None) -> int:
    """Epoch milliseconds of an aware ``now`` (``None``: the wall clock).

    Raises:
        ValueError: ``now`` is naive.
    """
    if now is None:
        return time.time_ns() // 1_000_000
    if now.tzinfo is None:
        raise ValueError(f"now must be timezone-aware, got {now!r}")
    return int(now.timestamp() * 1000)


class TagLifecycle:
    """Create and expire the tags of one table by its ``tag.*`` options.

    Args:
        table: The table's storage, paths and managers.
        options: Effective options (``None``: the latest schema's).
        now_ms: Epoch milliseconds (injected by tests); gives ``tagCreateTime``
            and decides retention.

    Raises:
        InvalidOptionError: the tag options contradict each other (raised by
            the methods, before anything is written).
    """

    def __init__(
        self,
        table: TableStorage,
        *,
        options: CoreOptions | None = None,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.table = table
        self.tags = TagManager(table.file_io, table.paths)
        self._options = options
        self._now_ms = now_ms

    def tag_options(self) -> TagOptions:
        """The tag options in effect (those given, else the latest schema's)."""
        if self._options is not None:
            return TagOptions.of(self._options)
        schema = self.table.schema_manager.latest()
        return TagOptions.of(schema.core_options if schema is not None else CoreOptions({}))

    # ---------------------------------------------------------------- creation
    def create_tags(self) -> list[TagInfo]:
        """Create the tags ``tag.automatic-creation`` asks for now; return them, oldest first.

        ``none`` creates nothing. Also deletes the automatic tags beyond
        ``tag.num-retained-max``, as Paimon does right after creating one (a
        tag created and at once deleted so is not returned).

        Raises:
            InvalidOptionError: contradicting tag options.
            UnsupportedTableError: ``tag.create-success-file = true`` (Paimon
                would write a success file beside each tag; nothing is written).
            CorruptMetadataError: a snapshot or tag file is undecodable.

        Storage:
            Creates ``tag/tag-<name>`` files (create-only: a tag another
            process created meanwhile is kept as it is); deletes the tag files
            of tags beyond ``tag.num-retained-max``.
        """
        opts = self.tag_options()
        if opts.mode == "none":
            return []
        self._refuse_success_files()
        if opts.mode == "batch":
            return self._create_batch_tag(opts)
        periods = opts.periods
        sm = self.table.snapshot_manager
        latest = sm.latest_snapshot_id()
        if latest is None:
            return []
        earliest = sm.earliest_snapshot_id() or 1
        newest, next_snapshot = self._resume(opts, latest)
        next_tag = None
        if newest is not None:
            newest_time = periods.tag_to_time(newest)
            assert newest_time is not None  # an auto tag parses
            next_tag = periods.next_tag_time(newest_time)
        created: list[TagInfo] = []
        passed: tuple[int, int] | None = None  # (id, timeMillis) of the last snapshot looked at
        for sid in range(max(next_snapshot, earliest), latest + 1):
            snap = sm.try_snapshot(sid)
            if snap is None:  # expired meanwhile: Paimon moves on to the earliest
                continue
            passed = (snap.id, snap.time_millis)
            when = opts.tag_time(snap.time_millis, snap.watermark)
            if when is None:
                continue
            if next_tag is not None and when - opts.delay < periods.next_tag_time(next_tag):
                continue
            this = periods.normalize_to_previous_tag(when)
            if opts.automatic_completion and next_tag is not None:
                this = next_tag
            newest = periods.time_to_tag(this)
            info = self._create(newest, snap, opts)
            if info is not None:
                created.append(info)
            next_tag = periods.next_tag_time(this)
            self._expire_by_count(opts)
        if passed is not None:
            with _progress_lock:
                _progress[(self.table.paths.root, opts)] = (newest, *passed)
        return [c for c in created if self.tags.tag_exists(c.name)]

    def _resume(self, opts: TagOptions, latest: int) -> tuple[str | None, int]:
        """``(newest automatic tag, first snapshot to look at)``.

        Where this process's previous run stopped while the newest automatic
        tag is still the one it knew (a listing of tag names, no tag file
        read) and the last snapshot it looked at is still the same (not
        rolled back and rewritten): a committer's in-memory ``nextSnapshot``
        in Paimon. Otherwise
        from the tags, as Paimon's constructor starts: after the automatic tag
        on the newest snapshot, or at the earliest snapshot without one.
        """
        periods = opts.periods
        names = [n for n in self.tags.tag_names() if periods.is_auto_tag(n)]
        newest_name = max(names, key=lambda n: periods.tag_to_time(n) or _NEVER, default=None)
        with _progress_lock:
            known = _progress.get((self.table.paths.root, opts))
        if known is not None and known[0] == newest_name and known[1] <= latest:
            passed = self.table.snapshot_manager.try_snapshot(known[1])
            if passed is None or passed.time_millis == known[2]:  # None: expired since
                return newest_name, known[1] + 1
        auto = self._auto_tags(opts)
        if not auto:
            return None, 1
        last = max(auto.values(), key=lambda info: (info.snapshot_id, info.name))
        return last.name, last.snapshot_id + 1

    def _refuse_success_files(self) -> None:
        if self._options is not None:
            raw = self._options.raw
        else:
            schema = self.table.schema_manager.latest()
            raw = schema.options if schema is not None else {}
        value = raw.get(_SUCCESS_FILE)
        reason = None if value is None else option_refusal(_SUCCESS_FILE, value, MAINTENANCE)
        if value is not None and reason is not None:
            raise UnsupportedTableError(
                f"option {_SUCCESS_FILE!r} = {value!r}: {reason}; snaplake creates no tags "
                "for this table",
                feature=f"option {_SUCCESS_FILE!r} = {value!r}",
                operation=MAINTENANCE.value,
                key=_SUCCESS_FILE,
            )

    def _create_batch_tag(self, opts: TagOptions) -> list[TagInfo]:
        snap = self.table.snapshot_manager.latest_snapshot()
        if snap is None:
            return []
        name = batch_tag_name(opts, snap.time_millis)
        existing = self.tags.try_get(name)
        if existing is not None and existing.id == snap.id:
            return []
        if existing is not None:
            self._delete(name)
        info = self._create(name, snap, opts)
        self._expire_by_count(opts)
        return [info] if info is not None and self.tags.tag_exists(name) else []

    def _create(self, name: str, snap: Snapshot, opts: TagOptions) -> TagInfo | None:
        if self.tags.tag_exists(name):
            return None
        try:
            return self.tags.create_tag(
                name,
                snapshot=snap,
                time_retained=opts.default_time_retained,
                create_time=local_time(self._now_ms()),
                allow_digits=True,
            )
        except FileAlreadyExistsError:  # another process created it meanwhile
            return None

    # ------------------------------------------------------------------ expiry
    def expire_tags(self) -> list[str]:
        """Delete the tags past their retention and the automatic tags beyond the count.

        Returns:
            The deleted tag names, in deletion order.

        Raises:
            InvalidOptionError: contradicting tag options.
            CorruptMetadataError: a tag file is undecodable.

        Storage:
            Deletes ``tag/tag-<name>`` files and the files only those tags held
            (:class:`~snaplake.compaction.tag_deletion.TagDeletion`).
        """
        opts = self.tag_options()
        now = local_time(self._now_ms())
        expired = []
        for info in self.tags.list_tags():
            if info.create_time is None or info.time_retained is None:
                continue
            if now > info.create_time + info.time_retained and self._delete(info.name):
                logger.info(
                    "tag %s expired: created %s, retained %s", info.name, info.create_time,
                    info.time_retained,
                )  # fmt: skip
                expired.append(info.name)
        return expired + self._expire_by_count(opts)

    def _auto_tags(self, opts: TagOptions) -> dict[str, TagInfo]:
        return {t.name: t for t in self.tags.list_tags() if opts.periods.is_auto_tag(t.name)}

    def _expire_by_count(self, opts: TagOptions) -> list[str]:
        """``tag.num-retained-max``: delete the oldest automatic tags beyond it (batch: any tag)."""
        if opts.num_retained_max is None or opts.mode == "none":
            return []
        if opts.mode == "batch":
            candidates = self.tags.list_tags()
        else:
            candidates = list(self._auto_tags(opts).values())
        candidates.sort(key=lambda t: (t.snapshot_id, t.create_time or _NEVER, t.name))
        surplus = len(candidates) - opts.num_retained_max
        deleted = [t.name for t in candidates[: max(surplus, 0)] if self._delete(t.name)]
        if deleted:
            logger.info(
                "deleted tag(s) %s: more than tag.num-retained-max = %d", ", ".join(deleted),
                opts.num_retained_max,
            )  # fmt: skip
        return deleted

    def _delete(self, name: str) -> bool:
        try:
            TagDeletion(self.table).delete(name)
        except TagNotFoundError:  # another process deleted it meanwhile
            return False
        return True


def expire_consumers(
    table: TableStorage, *, options: CoreOptions | None = None, now_ms: int
) -> list[str]:
    """Delete the consumers idle longer than ``consumer.expiration-time``.

    A consumer is idle since its file's modification time; without the
    option nothing is deleted.

    Args:
        table: The table's storage and paths.
        options: Effective options (``None``: the latest schema's).
        now_ms: Epoch milliseconds now.

    Returns:
        The deleted consumer ids.

    Storage:
        Deletes ``consumer/consumer-<id>`` files.

    Source: Paimon ``ConsumerManager.expire`` (called by ``ExpireSnapshotsImpl``).
    """
    if options is None:
        schema = table.schema_manager.latest()
        options = schema.core_options if schema is not None else CoreOptions({})
    ttl = options.consumer_expiration_time
    if ttl is None:
        return []
    cutoff = now_ms - int(ttl.total_seconds() * 1000)
    return ConsumerManager(table.file_io, table.paths).expire(modified_before_ms=cutoff)
