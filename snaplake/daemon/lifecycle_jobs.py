"""The daemon's tag and consumer jobs: automatic tags, tag expiry, idle consumers.

Each job reads only the table's own options (through the effective options
the scheduler passes): a table that sets none of ``tag.automatic-creation``,
``tag.num-retained-max``, ``tag.default-time-retained`` (or, for consumers,
``consumer.expiration-time``) is only read (its tags counted for
``snaplake_tags``), never written, and the run is a no-op. What each does:
:mod:`snaplake.compaction.tag_lifecycle`.

- :func:`auto_tag_job`: ``Task.AUTO_TAG``, creates the tags due.
- :func:`expire_tags_job`: ``Task.EXPIRE_TAGS``, deletes tags past retention.
- :func:`expire_consumers_job`: ``Task.EXPIRE_CONSUMERS``.

:func:`record_lifecycle_result` turns their results into ``snaplake_tags``,
``snaplake_tags_created_total``, ``snaplake_tags_expired_total``,
``snaplake_consumers_expired_total`` (label ``table``),
``snaplake_consumer_lag_snapshots`` and ``snaplake_consumer_lag_seconds``
(labels ``table``, ``consumer``; a consumer's series go with it).

Imports no apscheduler and no prometheus_client.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from snaplake.compaction.tag_lifecycle import TagLifecycle, expire_consumers
from snaplake.daemon.config import Task
from snaplake.metrics import SnaplakeMetrics
from snaplake.options import CoreOptions
from snaplake.options.tag_options import TagOptions
from snaplake.store.consumers import consumer_lags
from snaplake.table import Table

__all__ = [
    "LIFECYCLE_JOBS",
    "AutoTagJobResult",
    "ExpireConsumersJobResult",
    "ExpireTagsJobResult",
    "auto_tag_job",
    "expire_consumers_job",
    "expire_tags_job",
    "record_lifecycle_result",
]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoTagJobResult:
    """Result of :func:`auto_tag_job`.

    Attributes:
        table: ``db.table``.
        mode: ``tag.automatic-creation`` (``none``: the table asks for no tags).
        created: Names of the tags created, oldest first.
        tags: Tags of the table after the run.
    """

    table: str
    mode: str
    created: tuple[str, ...] = ()
    tags: int | None = None
    task: Task = Task.AUTO_TAG

    @property
    def acted(self) -> bool:
        """Whether tags were created."""
        return bool(self.created)

    def summary(self) -> str:
        """One log line."""
        if self.mode == "none":
            return "no tag.automatic-creation"
        return f"{len(self.created)} tag(s) created ({', '.join(self.created)}), {self.tags} now"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpireTagsJobResult:
    """Result of :func:`expire_tags_job`.

    Attributes:
        table: ``db.table``.
        expired: Names of the tags deleted.
        tags: Tags of the table after the run.
    """

    table: str
    expired: tuple[str, ...] = ()
    tags: int | None = None
    task: Task = Task.EXPIRE_TAGS

    @property
    def acted(self) -> bool:
        """Whether tags were deleted."""
        return bool(self.expired)

    def summary(self) -> str:
        """One log line."""
        return f"{len(self.expired)} tag(s) expired ({', '.join(self.expired)}), {self.tags} left"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpireConsumersJobResult:
    """Result of :func:`expire_consumers_job`.

    Attributes:
        table: ``db.table``.
        expired: Ids of the consumers deleted.
        lags: ``{consumer id: snapshots it has yet to read}`` of the consumers left
            (latest snapshot id + 1 - its ``nextSnapshot``, at least 0).
        lag_seconds: ``{consumer id: seconds behind}``: now minus the commit
            time of its oldest unread snapshot, 0 when caught up.
    """

    table: str
    expired: tuple[str, ...] = ()
    lags: Mapping[str, int] = field(default_factory=dict)
    lag_seconds: Mapping[str, float] = field(default_factory=dict)
    task: Task = Task.EXPIRE_CONSUMERS

    @property
    def acted(self) -> bool:
        """Whether consumers were deleted."""
        return bool(self.expired)

    def summary(self) -> str:
        """One log line."""
        return f"{len(self.expired)} idle consumer(s) deleted ({', '.join(self.expired)})"


def auto_tag_job(
    table: Table, *, options: CoreOptions, now_ms: Callable[[], int] = _now_ms
) -> AutoTagJobResult:
    """Create the tags the table's ``tag.automatic-creation`` asks for.

    Raises:
        InvalidOptionError: contradicting ``tag.*`` options.
        CorruptMetadataError: a snapshot or tag file is undecodable.

    Storage: creates ``tag/tag-<name>`` files, deletes automatic tags beyond
    ``tag.num-retained-max`` (see :meth:`TagLifecycle.create_tags`).
    """
    mode = TagOptions.of(options).mode
    lifecycle = TagLifecycle(table, options=options, now_ms=now_ms)
    if mode == "none":  # only counted (snaplake_tags)
        return AutoTagJobResult(
            table=table.identifier, mode=mode, tags=len(lifecycle.tags.tag_names())
        )
    created = tuple(t.name for t in lifecycle.create_tags())
    return AutoTagJobResult(
        table=table.identifier, mode=mode, created=created, tags=len(lifecycle.tags.tag_names())
    )


def expire_tags_job(
    table: Table, *, options: CoreOptions, now_ms: Callable[[], int] = _now_ms
) -> ExpireTagsJobResult:
    """Delete the tags past their retention and automatic tags beyond ``tag.num-retained-max``.

    A table without tag options is left alone (``tagTimeRetained`` written by
    another engine is honoured as soon as the table sets one of them).

    Raises:
        InvalidOptionError: contradicting ``tag.*`` options.
        CorruptMetadataError: a tag file is undecodable.

    Storage: deletes ``tag/tag-<name>`` files (see :meth:`TagLifecycle.expire_tags`).
    """
    lifecycle = TagLifecycle(table, options=options, now_ms=now_ms)
    if not TagOptions.of(options).sets_any:  # only counted (snaplake_tags)
        return ExpireTagsJobResult(table=table.identifier, tags=len(lifecycle.tags.tag_names()))
    expired = tuple(lifecycle.expire_tags())
    return ExpireTagsJobResult(
        table=table.identifier, expired=expired, tags=len(lifecycle.tags.tag_names())
    )


def expire_consumers_job(
    table: Table, *, options: CoreOptions, now_ms: Callable[[], int] = _now_ms
) -> ExpireConsumersJobResult:
    """Delete the consumers idle longer than ``consumer.expiration-time`` (unset: none).

    Also measures each remaining consumer's lag in snapshots and seconds
    (:func:`snaplake.store.consumers.consumer_lags`).

    Storage: deletes ``consumer/consumer-<id>`` files; reads the others and
    the snapshot file of each consumer's oldest unread snapshot.
    """
    now = now_ms()
    expired = expire_consumers(table, options=options, now_ms=now)
    lags = consumer_lags(table.consumers(), table.snapshot_manager, now_ms=now)
    return ExpireConsumersJobResult(
        table=table.identifier, expired=tuple(expired),
        lags={c: lag.snapshots for c, lag in lags.items()},
        lag_seconds={c: lag.seconds for c, lag in lags.items()},
    )  # fmt: skip


def record_lifecycle_result(
    metrics: SnaplakeMetrics,
    result: AutoTagJobResult | ExpireTagsJobResult | ExpireConsumersJobResult,
) -> None:
    """Record the tag and consumer counts of one of these jobs' results."""
    table = result.table
    if isinstance(result, AutoTagJobResult):
        if result.created:
            metrics.tags_created.labels(table).inc(len(result.created))
    elif isinstance(result, ExpireTagsJobResult):
        if result.expired:
            metrics.tags_expired.labels(table).inc(len(result.expired))
    else:
        if result.expired:
            metrics.consumers_expired.labels(table).inc(len(result.expired))
        metrics.set_consumer_lags(table, result.lags, result.lag_seconds)
    if not isinstance(result, ExpireConsumersJobResult) and result.tags is not None:
        metrics.tags.labels(table).set(result.tags)


LifecycleJob = Callable[..., AutoTagJobResult | ExpireTagsJobResult | ExpireConsumersJobResult]

#: The job of each lifecycle task; each is called as ``job(table, options=...)``.
LIFECYCLE_JOBS: dict[Task, LifecycleJob] = {
    Task.AUTO_TAG: auto_tag_job,
    Task.EXPIRE_TAGS: expire_tags_job,
    Task.EXPIRE_CONSUMERS: expire_consumers_job,
}
