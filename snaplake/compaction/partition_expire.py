"""PartitionExpire: drop the partitions older than ``partition.expiration-time``.

Which partitions expire follows Paimon:

* ``partition.expiration-strategy = values-time`` (default): the partition's
  time is read from its values (``partition.timestamp-pattern`` /
  ``partition.timestamp-formatter``, see
  :mod:`snaplake.options.partition_time`); a partition whose values give no
  time (not a date, a null) never expires;
* ``update-time``: the partition's time is the newest creation time of its
  live files (files without one are ignored);
* a partition expires when ``now - partition.expiration-time`` is after its
  time. Both times are zone-less local wall-clock times, as Paimon's
  ``LocalDateTime.now()`` and ``_CREATION_TIME`` are: ``now`` is converted to
  this machine's local zone;
* the expired partitions are ordered by their values joined with ``,`` (the
  strings Paimon prints, nulls as ``partition.default-name``) and at most
  ``partition.expiration-max-num`` of them are dropped per run, in snapshots
  of ``partition.expiration-batch-size`` partitions (unset: one snapshot).

The drop is an ``OVERWRITE`` snapshot deleting every planned file of the
partitions (their index files too:
:class:`~snaplake.commit.overwrite.DropPartitions`), conflict-checked like any
overwrite. A writer that appends to an expiring partition at the same moment
never loses an acknowledged row silently:

* its commit lands before the drop: the drop finds a live file it did not
  plan, fails with a conflict and plans again from the new snapshot. Under
  ``update-time`` the new file makes the partition young again and it is kept;
  under ``values-time`` the partition is still old by its values, so the
  second plan drops it with the new file, as Paimon (which drops whatever the
  partition holds when it commits) always would. A file is never deleted
  without a plan that saw it;
* its commit lands after the drop: an append deletes nothing, so it commits,
  and the partition lives again with the new rows (until a later check). On a
  dynamic-bucket table the writer restored the partition's HASH index, which
  the drop deleted: its commit fails with ``HashIndexConflictError`` and
  publishes nothing (its rows were never acknowledged; a new writer lands them).

``partition.expiration-check-interval`` is the daemon's business (it checks
a table at most that often); :meth:`PartitionExpire.execute` always checks.

Source: Paimon ``PartitionExpire`` (``expire``, ``doExpire``,
``convertToPartitionString``), ``PartitionValuesTimeExpireStrategy``,
``PartitionUpdateTimeExpireStrategy``, ``FileStoreCommitImpl.dropPartitions``.
The re-plan on a concurrent append is snaplake's (Paimon's drop deletes the
partition's files as of its own commit).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from snaplake.commit.file_store_commit import FileStoreCommit, FileStoreTable
from snaplake.errors import CommitConflictError, TableNotFoundError
from snaplake.options import CoreOptions, Operation
from snaplake.options import registry as r
from snaplake.options.partition_time import PartitionExpireConfig, PartitionTimeExtractor
from snaplake.store.format.manifest import ManifestEntry
from snaplake.store.format.partition import (
    DEFAULT_PARTITION_NAME,
    canonical_partition,
    partition_value_string,
)
from snaplake.store.format.schema import TableSchema
from snaplake.store.read.scan import FileStoreScan
from snaplake.store.support import check_supported

__all__ = [
    "ExpiredPartition",
    "PartitionExpire",
    "PartitionExpireResult",
    "partition_expire_config",
]

logger = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 - zone-less, as Paimon's _CREATION_TIME


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpiredPartition:
    """One partition an expiry dropped (or would drop).

    Attributes:
        spec: ``{partition key: value}`` as Paimon prints the values (nulls as
            ``partition.default-name``).
        time: The partition's zone-less time the strategy compared.
        files: Its live data files.
        rows: Rows in them.
        size_bytes: Their size.
    """

    spec: Mapping[str, str]
    time: datetime
    files: int
    rows: int
    size_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionExpireResult:
    """What a partition expiry dropped (or, for a dry run, would drop).

    Attributes:
        dry_run: Nothing was committed.
        strategy: ``values-time`` or ``update-time`` (``None``: the table sets
            no ``partition.expiration-time`` or has no partition keys; nothing
            was checked).
        expire_before: Partitions with a time before this zone-less instant
            expire (``None`` when nothing was checked).
        partitions: The expired partitions, in the order Paimon drops them.
        snapshot_ids: The OVERWRITE snapshots published, one per batch.
        replans: Plans made again after a concurrent commit changed a
            planned partition.
        duration_s: Wall time, seconds.
    """

    dry_run: bool
    strategy: str | None = None
    expire_before: datetime | None = None
    partitions: tuple[ExpiredPartition, ...] = ()
    snapshot_ids: tuple[int, ...] = ()
    replans: int = 0
    duration_s: float = 0.0

    @property
    def partitions_expired(self) -> int:
        """Partitions dropped (or droppable)."""
        return len(self.partitions)

    @property
    def files_deleted(self) -> int:
        """Data files the drops deleted from the table's latest state."""
        return sum(p.files for p in self.partitions)

    @property
    def rows_deleted(self) -> int:
        """Rows in those files."""
        return sum(p.rows for p in self.partitions)


@dataclass(slots=True)
class _Partition:
    key: bytes
    values: tuple[str | None, ...]
    entries: list[ManifestEntry] = field(default_factory=list)


class PartitionExpire:
    """Plans and drops a table's expired partitions.

    Args:
        table: The table (duck-typed: this layer does not import ``Table``).
        commit: The committer of the drops (the maintenance committer).
        options: The options to honour (default: the table's latest schema's).
        max_replans: Plans made again after a concurrent commit changed a
            planned partition, before giving up.

    Source: Paimon ``PartitionExpire``.
    """

    def __init__(
        self,
        table: FileStoreTable,
        *,
        commit: FileStoreCommit,
        options: CoreOptions | None = None,
        max_replans: int = 3,
    ) -> None:
        self.table = table
        self.commit = commit
        self._options = options
        self.max_replans = max_replans

    def _schema(self) -> TableSchema:
        schema = self.table.schema_manager.latest()
        if schema is None:
            name = self.table.identifier
            raise TableNotFoundError(f"table {name} was dropped", identifier=name)
        check_supported(schema, Operation.MAINTENANCE)
        return schema

    def config(self, schema: TableSchema) -> PartitionExpireConfig | None:
        """The expiration options in force; ``None`` when partitions never expire here."""
        options = self._options if self._options is not None else schema.core_options
        config = partition_expire_config(options)
        return config if config is not None and schema.partition_keys else None

    def plan(self, now: datetime | None = None) -> PartitionExpireResult:
        """The partitions :meth:`execute` would drop at ``now`` (a dry run; nothing written).

        Args:
            now: An aware instant (default: the current time).

        Raises:
            ValueError: ``now`` is naive.
            UnsupportedTableError: the table cannot be maintained by snaplake.
            CorruptMetadataError: a manifest is undecodable.

        Storage: reads the latest snapshot's manifests.
        """
        start = time.monotonic()
        result, _ = self._plan(now)
        return _with_duration(result, start)

    def _plan(
        self, now: datetime | None
    ) -> tuple[PartitionExpireResult, list[tuple[ExpiredPartition, _Partition]]]:
        schema = self._schema()
        config = self.config(schema)
        if config is None:
            return PartitionExpireResult(dry_run=True), []
        expire_before = _local(now) - config.expiration_time
        keys, types = schema.partition_keys, schema.partition_types
        default_name = schema.options.get("partition.default-name", DEFAULT_PARTITION_NAME)
        scan = FileStoreScan(
            file_io=self.table.file_io,
            paths=self.table.paths,
            schema_manager=self.table.schema_manager,
            snapshot=self.table.snapshot_manager.latest_snapshot(),
        )
        groups: dict[bytes, _Partition] = {}  # by value: engines encode some differently
        for entry in scan.plan_entries():
            key = canonical_partition(entry.partition, types)
            part = groups.get(key)
            if part is None:
                values = tuple(
                    partition_value_string(v, t)
                    for v, t in zip(scan.partition_values(entry.partition), types, strict=True)
                )
                part = groups[key] = _Partition(key, values)
            part.entries.append(entry)
        expired: list[tuple[str, ExpiredPartition, _Partition]] = []
        for part in groups.values():
            at = _partition_time(config, keys, part)
            if at is None or not expire_before > at:
                continue
            shown = [default_name if v is None else v for v in part.values]
            files = [e.file for e in part.entries]
            found = ExpiredPartition(
                spec=dict(zip(keys, shown, strict=True)), time=at, files=len(files),
                rows=sum(f.row_count for f in files),
                size_bytes=sum(f.file_size_bytes for f in files),
            )  # fmt: skip
            expired.append((",".join(shown), found, part))
        expired.sort(key=lambda x: x[0])
        chosen = [(found, part) for _, found, part in expired[: config.max_num]]
        result = PartitionExpireResult(
            dry_run=True, strategy=config.strategy, expire_before=expire_before,
            partitions=tuple(found for found, _ in chosen),
        )  # fmt: skip
        return result, chosen

    def execute(self, now: datetime | None = None) -> PartitionExpireResult:
        """Drop the expired partitions at ``now``: one OVERWRITE snapshot per batch.

        Args:
            now: An aware instant (default: the current time).

        Returns:
            The partitions dropped, the snapshots published, the re-plans.

        Raises:
            ValueError: ``now`` is naive.
            UnsupportedTableError: the table cannot be maintained by snaplake.
            CommitConflictError: concurrent commits changed the planned
                partitions on more than ``max_replans`` plans (the batches
                committed before stay dropped); run again.
            CommitRetriesExhaustedError, CommitStateUnknownError: as
                ``FileStoreCommit.drop_partitions``.

        Storage: reads the latest snapshot's manifests; publishes one
        OVERWRITE snapshot (with a DELETE manifest) per batch of dropped
        partitions. Deletes no file: the dropped files stay until snapshot
        expiry removes them with the snapshots that still reference them.
        """
        start = time.monotonic()
        done: list[ExpiredPartition] = []
        snapshot_ids: list[int] = []
        replans = 0
        planned, chosen = self._plan(now)
        while True:
            config = self.config(self._schema())
            batch_size = (config.batch_size if config else None) or max(len(chosen), 1)
            try:
                for i in range(0, len(chosen), batch_size):
                    batch = chosen[i : i + batch_size]
                    outcome = self.commit.drop_partitions(
                        {p.key for _, p in batch},
                        expected_files={e.file.file_name for _, p in batch for e in p.entries},
                    )
                    done.extend(found for found, _ in batch)
                    if outcome.snapshot_id is not None:
                        snapshot_ids.append(outcome.snapshot_id)
                break
            except CommitConflictError:
                replans += 1
                if replans > self.max_replans:
                    raise
                logger.info(
                    "partition expiry of %s: a concurrent commit changed a planned partition; "
                    "planning again (%d of %d)", self.table.identifier, replans, self.max_replans,
                )  # fmt: skip
                planned, chosen = self._plan(now)
                if config is not None:  # partition.expiration-max-num bounds the whole run
                    chosen = chosen[: max(config.max_num - len(done), 0)]
        if done:
            logger.info(
                "partition expiry of %s dropped %d partition(s) older than %s: %s",
                self.table.identifier, len(done), planned.expire_before,
                [dict(p.spec) for p in done][:10],
            )  # fmt: skip
        result = PartitionExpireResult(
            dry_run=False, strategy=planned.strategy, expire_before=planned.expire_before,
            partitions=tuple(done), snapshot_ids=tuple(snapshot_ids), replans=replans,
        )  # fmt: skip
        return _with_duration(result, start)


def _local(now: datetime | None) -> datetime:
    """``now`` as a zone-less local wall-clock time (Paimon's ``LocalDateTime.now()``)."""
    if now is None:
        now = datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError(f"now must be an aware datetime, got {now!r}")
    return now.astimezone().replace(tzinfo=None)


def _partition_time(
    config: PartitionExpireConfig, keys: tuple[str, ...] | list[str], part: _Partition
) -> datetime | None:
    """The partition's time under the strategy; ``None``: it cannot expire."""
    if config.strategy == "update-time":
        times = [e.file.creation_time_ms for e in part.entries]
        newest = max((t for t in times if t is not None), default=None)
        return None if newest is None else _EPOCH + timedelta(milliseconds=newest)
    at = config.extractor.extract(list(keys), list(part.values))
    if at is None:
        logger.warning(
            "partition %s: no time can be read from its values, so it never expires; check "
            "partition.timestamp-formatter / -pattern, or use partition.expiration-strategy "
            "= update-time", dict(zip(keys, part.values, strict=True)),
        )  # fmt: skip
    return at


def _with_duration(result: PartitionExpireResult, start: float) -> PartitionExpireResult:
    return replace(result, duration_s=time.monotonic() - start)


def partition_expire_config(options: CoreOptions) -> PartitionExpireConfig | None:
    """The table's ``partition.expiration-*`` options (``None``: partitions never expire).

    Raises:
        InvalidOptionError: an option value does not parse.

    Source: Paimon ``CoreOptions`` (``partitionExpireTime`` and the others).
    """
    expiration = options.get(r.PARTITION_EXPIRATION_TIME)
    if expiration is None:
        return None
    required: Any = options.get  # these options have defaults: never None
    return PartitionExpireConfig(
        expiration_time=expiration,
        check_interval=required(r.PARTITION_EXPIRATION_CHECK_INTERVAL),
        strategy=required(r.PARTITION_EXPIRATION_STRATEGY),
        max_num=required(r.PARTITION_EXPIRATION_MAX_NUM),
        batch_size=options.get(r.PARTITION_EXPIRATION_BATCH_SIZE),
        extractor=PartitionTimeExtractor(
            options.get(r.PARTITION_TIMESTAMP_PATTERN),
            options.get(r.PARTITION_TIMESTAMP_FORMATTER),
        ),
    )
