"""Compaction of postpone-bucket tables: pending rows assigned to real buckets, one snapshot.

A table with ``bucket = -2`` keeps its writers' rows in each partition's
``bucket-postpone`` directory (bucket -2) until a compaction assigns them.
:class:`PostponeCompactionPlanner` is the kind's
:class:`~snaplake.compaction.job.CompactionPlanner`: every partition with
pending files becomes one :class:`PostponeAssignUnit`, and the real buckets
of the other partitions are LSM-compacted as in any key-value table
(:class:`~snaplake.compaction.merge_tree_compact.MergeTreeCompactionPlanner`).

A unit's partition keeps its bucket count when it has real buckets already
(their ``_TOTAL_BUCKETS``), else gets ``postpone.default-bucket-num`` (see
:meth:`~snaplake.options.CoreOptions.postpone_bucket_num`). The unit reads
the pending files by creation time (each writer's files, those sharing a
writer prefix, in the order it wrote them), routes each row with the
fixed-bucket hash, and writes them with an ordinary merge-tree writer
(sequence numbers continue from each bucket's largest, level-0 sorted runs
folded by the merge engine); each
bucket then gets the compaction universal compaction picks (or a full one)
over its files and the new ones. The unit's messages delete the pending
files (compact before, bucket -2) and add the new files (compact after);
the job commits every unit's messages as one COMPACT snapshot, or deletes
the outputs (never a pending file) when the commit fails.

Source: Paimon ``CompactAction.buildForPostponeBucketCompaction``,
``PostponeUtils`` (bucket count per partition), ``BucketFiles.makeMessage``
(new files as compact after), ``PostponeBucketFileStoreWrite.getWriterPrefix``.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from snaplake.commit.message import CommitMessage, CompactIncrement
from snaplake.compaction.job import CompactionPlan, CompactionUnit, partition_specs
from snaplake.compaction.merge_tree_compact import MergeTreeCompactionPlanner
from snaplake.compaction.merge_tree_plan import FULL_COMPACTION_PROPERTY, plan_bucket
from snaplake.compaction.merge_tree_rewrite import rewrite_bucket
from snaplake.errors import CommitConflictError, UnsupportedTableError
from snaplake.mergetree.kv import VALUE_KIND, kv_schema
from snaplake.mergetree.read import read_context
from snaplake.mergetree.sorted_run import KeyComparator
from snaplake.mergetree.universal import UniversalCompaction
from snaplake.options import CoreOptions
from snaplake.store.format.data_file import DataFileMeta
from snaplake.store.format.file_format import format_of_file
from snaplake.store.format.manifest import ManifestEntry
from snaplake.store.format.paths import POSTPONE_BUCKET, PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import FileStoreScan, Split
from snaplake.store.table_storage import TableStorage
from snaplake.write.kv_write import KeyValueTableWrite
from snaplake.write.postpone_write import writer_prefix

__all__ = ["PartitionBucketsRule", "PostponeAssignUnit", "PostponeCompactionPlanner"]

_COMPACT_USER = "postpone-compaction"


@dataclass(frozen=True, slots=True, kw_only=True)
class RealBucket:
    """One real bucket's live files when planned (picklable).

    Attributes:
        bucket: Bucket number.
        files: Its live files.
        paths: Full path of each file, aligned with ``files``.
    """

    bucket: int
    files: tuple[DataFileMeta, ...]
    paths: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PostponeAssignUnit:
    """One partition's pending files, to assign to its real buckets (picklable; no clients).

    Attributes:
        partition: Partition BinaryRow bytes.
        partition_path: The partition's directory (``""`` unpartitioned).
        schema_id: The table's schema when planned (rows are written in it).
        total_buckets: Real buckets of the partition (kept, or assigned now).
        pending: The pending files in the order their rows are applied
            (by creation time, each writer's files in the order it wrote them).
        pending_paths: Full path of each pending file.
        real: The partition's real buckets with files.
        full: Compact every real bucket of the partition into its top level.
        options: Effective options for picking compactions (the daemon's
            overrides), ``None`` = the table's.
    """

    partition: bytes
    partition_path: str
    schema_id: int
    total_buckets: int
    pending: tuple[DataFileMeta, ...]
    pending_paths: tuple[str, ...]
    real: tuple[RealBucket, ...] = ()
    full: bool = False
    options: Mapping[str, str] | None = None

    @property
    def bucket(self) -> int:
        """The postpone bucket (-2): the unit's messages cover the partition's real buckets too."""
        return POSTPONE_BUCKET

    @property
    def input_bytes(self) -> int:
        """Bytes of the pending files and of the partition's real-bucket files."""
        return sum(f.file_size_bytes for f in self.pending) + sum(
            f.file_size_bytes for b in self.real for f in b.files
        )

    def rewrite(
        self, *, file_io: FileIO, paths: PathFactory, schema_manager: SchemaManager
    ) -> list[CommitMessage]:
        """Assign the pending rows to real buckets, compact the buckets, return the messages.

        Memory: the merge-tree writer's ``write-buffer-size`` and one pending
        file (an Avro file is decoded whole).

        Raises:
            MergeFunctionError: the merge engine rejects a key's versions.
            FileNotFoundError: an input vanished; this unit left no output.
            StorageError: the storage failed; this unit left no output.

        Storage: writes data files into the partition's real buckets,
        deleting those a bucket's compaction consumed again at once; on
        failure deletes every file it wrote. Never deletes an input.
        """
        schema = schema_manager.schema(self.schema_id)
        # The partition as a fixed-bucket table (postpone.* options mean nothing there).
        options = {k: v for k, v in schema.options.items() if not k.startswith("postpone.")}
        real = dataclasses.replace(schema, options={**options, "bucket": str(self.total_buckets)})
        existing = {b.bucket: b for b in self.real}
        writer = KeyValueTableWrite(
            file_io=file_io, paths=paths, schema=real, commit_user=_COMPACT_USER,
            restore_sequences=lambda: {
                (self.partition, b.bucket): max(f.max_sequence_number for f in b.files)
                for b in self.real if b.files
            },
        )  # fmt: skip
        takes_kinds = real.core_options.rowkind_field is None
        try:
            for rows in self._pending_rows(file_io, schema_manager, schema):
                kinds = rows.column(VALUE_KIND).to_numpy() if takes_kinds else None
                writer.write_arrow(rows.drop_columns([VALUE_KIND]), row_kinds=kinds)
            written = writer.prepare_commit()
        except BaseException:
            writer.abort()
            raise
        new = {m.bucket: m for m in written}
        created: list[str] = [
            paths.data_file_path(self.partition_path, m.bucket, f.file_name)
            for m in written
            for f in m.data_increment.new_files
        ]
        try:
            out = [
                CommitMessage(
                    partition=self.partition,
                    bucket=POSTPONE_BUCKET,
                    total_buckets=POSTPONE_BUCKET,
                    compact_increment=CompactIncrement(compact_before=self.pending),
                )
            ]
            for bucket in sorted({*existing, *new}):
                message = self._compact_bucket(
                    real, bucket, existing.get(bucket), new.get(bucket), file_io, paths, created
                )
                if message is not None:
                    out.append(message)
        except BaseException:
            file_io.delete_many(created)
            raise
        return out

    def _pending_rows(
        self, file_io: FileIO, schema_manager: SchemaManager, schema: TableSchema
    ) -> Iterator[pa.Table]:
        """Yield the pending files' rows (value columns and ``_VALUE_KIND``) in order."""
        ctx = read_context(file_io, schema, schema_manager.schema)
        full = kv_schema(schema.arrow_schema, schema.trimmed_primary_keys)
        target = pa.schema([*schema.arrow_schema, full.field(VALUE_KIND)])
        for f, path in zip(self.pending, self.pending_paths, strict=True):
            m = ctx.evolution.mapping(f.schema_id, target) if ctx.evolution else None
            read = target if m is None else m.file_arrow_schema
            with file_io.open_input(path) as source:
                for table in format_of_file(f.file_name).iter_batches(source, read):
                    yield table if m is None else m.apply(table)

    def _compact_bucket(
        self,
        schema: TableSchema,
        bucket: int,
        old: RealBucket | None,
        new: CommitMessage | None,
        file_io: FileIO,
        paths: PathFactory,
        created: list[str],
    ) -> CommitMessage | None:
        """One real bucket's message: its new files and the compaction picked over all of them.

        New files a compaction consumed are deleted now and listed nowhere;
        the others are compact-after files, as Paimon's ``BucketFiles`` does.
        """
        files = list(old.files) if old else []
        file_paths = list(old.paths) if old else []
        added = list(new.data_increment.new_files) if new else []
        files += added
        file_paths += [
            paths.data_file_path(self.partition_path, bucket, f.file_name) for f in added
        ]
        opts = CoreOptions(self.options) if self.options is not None else schema.core_options
        task, _ = plan_bucket(
            schema, KeyComparator(schema.key_types), UniversalCompaction.from_options(opts),
            partition=self.partition, partition_path=self.partition_path, bucket=bucket,
            total_buckets=self.total_buckets, files=files, paths=file_paths, full=self.full,
            options=opts,
        )  # fmt: skip
        before: list[DataFileMeta] = []
        after: list[DataFileMeta] = []
        if task is not None:
            result = rewrite_bucket(task, file_io=file_io, paths=paths, schema=schema)
            created.extend(result.written)
            before = list(result.message.compact_increment.compact_before)
            after = list(result.message.compact_increment.compact_after)
        new_names = {f.file_name for f in added}
        kept = {f.file_name for f in after}
        consumed = [f for f in before if f.file_name in new_names and f.file_name not in kept]
        file_io.delete_many(
            [paths.data_file_path(self.partition_path, bucket, f.file_name) for f in consumed]
        )
        gone = {f.file_name for f in before}
        increment = CompactIncrement(
            compact_before=tuple(f for f in before if f.file_name not in new_names),
            compact_after=(*(f for f in added if f.file_name not in gone), *after),
        )
        if increment.is_empty():
            return None
        return CommitMessage(
            partition=self.partition,
            bucket=bucket,
            total_buckets=self.total_buckets,
            compact_increment=increment,
        )


class PostponeCompactionPlanner:
    """The postpone-bucket kind's planner: pending files assigned, real buckets LSM-compacted.

    Args:
        table: The table's storage, paths and managers.
        full: Compact every real bucket into one top-level sorted run too.
        partitions: Partition specs to compact (``None`` = every partition).
        options: Effective options (the daemon's overrides); ``None`` = the table's.

    Raises:
        ValueError: an empty ``partitions`` list.
    """

    workers: ClassVar[int] = 2
    """Units rewritten at a time in process by default."""

    def __init__(
        self,
        table: TableStorage,
        *,
        full: bool = False,
        partitions: Sequence[Mapping[str, Any]] | None = None,
        options: CoreOptions | None = None,
    ) -> None:
        self.table = table
        self.full = full
        self.options = options
        self.specs = partition_specs(partitions)
        self.real = MergeTreeCompactionPlanner(
            table, full=full, partitions=partitions, options=options
        )

    def plan(self, *, max_unit_bytes: int) -> CompactionPlan:
        """Plan the latest snapshot: one unit per partition with pending files, LSM for the rest.

        A partition with pending files is compacted by its assign unit only
        (its real buckets included). Planned as a full compaction when the
        LSM plan is one (``full``, or ``full-compaction.delta-commits`` due).

        Raises:
            UnsupportedTableError: a partition whose real buckets disagree on
                their count.
            CorruptMetadataError: a manifest is undecodable.
            SchemaMismatchError: a partition spec names a non-partition column.
            ValueError: ``max_unit_bytes < 1``.

        Storage: reads the latest snapshot's manifests; writes nothing.
        """
        lsm = self.real.plan(max_unit_bytes=max_unit_bytes)
        t = self.table
        latest = t.snapshot_manager.latest_snapshot()
        schema = t.schema_manager.latest()
        if latest is None or schema is None:
            return lsm
        full = self.full or FULL_COMPACTION_PROPERTY in lsm.properties
        opts = self.options or schema.core_options
        splits: dict[tuple[bytes, int], Split] = {}
        for spec in self.specs:
            scan = FileStoreScan(
                file_io=t.file_io, paths=t.paths, schema_manager=t.schema_manager,
                snapshot=latest, partition_filter=spec,
            )  # fmt: skip
            for split in scan.plan():
                splits.setdefault((split.partition, split.bucket), split)
        units: list[CompactionUnit] = []
        for (partition, bucket), pending in splits.items():
            if bucket != POSTPONE_BUCKET:
                continue
            real = [s for (p, b), s in splits.items() if p == partition and b >= 0]
            units.append(
                _assign_unit(schema, pending, real, full=full, options=self.options, opts=opts)
            )
        assigned = {u.partition for u in units}
        units += [u for u in lsm.units if u.partition not in assigned]
        units.sort(key=lambda u: -u.input_bytes)
        return dataclasses.replace(lsm, units=tuple(units))

    def commit_messages(
        self, plan: CompactionPlan, messages: Sequence[CommitMessage]
    ) -> list[CommitMessage]:
        """The non-empty messages, each of a bucket (or an assigned partition) of ``plan``.

        Raises:
            ValueError: a message of a bucket or partition ``plan`` did not plan.
        """
        buckets = {(u.partition, u.bucket) for u in plan.units}
        assigned = {u.partition for u in plan.units if isinstance(u, PostponeAssignUnit)}
        for m in messages:
            if m.partition not in assigned and (m.partition, m.bucket) not in buckets:
                raise ValueError(
                    f"a message for bucket {m.bucket} of a partition this job did not plan; "
                    "commit only messages of the units of the plan"
                )
        return [m for m in messages if not m.is_empty()]


def _assign_unit(
    schema: TableSchema,
    pending: Split,
    real: Sequence[Split],
    *,
    full: bool,
    options: CoreOptions | None,
    opts: CoreOptions,
) -> PostponeAssignUnit:
    """The unit of one partition: its bucket count and its pending files in apply order."""
    counts = {s.total_buckets for s in real}
    if len(counts) > 1:
        raise UnsupportedTableError(
            f"partition {list(pending.partition_values)} has real buckets written for "
            f"{sorted(counts)} buckets; snaplake cannot assign its pending rows (rescale the "
            "partition with Paimon first)",
            feature="postpone buckets over rescaled partitions",
            operation="maintenance",
        )
    total = counts.pop() if counts else opts.postpone_bucket_num(
        rows=sum(f.row_count for f in pending.files),
        size_bytes=sum(f.file_size_bytes for f in pending.files),
    )  # fmt: skip
    groups: dict[str, list[tuple[DataFileMeta, str]]] = {}
    for f, p in zip(pending.files, pending.paths, strict=True):
        groups.setdefault(writer_prefix(f.file_name), []).append((f, p))
    # Each writer's files in the order it wrote them, the writers interleaved by creation
    # time: a key written by several writers one after another keeps their order.
    ordered = list(
        heapq.merge(
            *(sorted(g, key=lambda fp: (_created(fp[0]), _file_number(fp[0])))
              for _, g in sorted(groups.items())),
            key=lambda fp: _created(fp[0]),
        )
    )  # fmt: skip
    return PostponeAssignUnit(
        partition=pending.partition,
        partition_path=schema.partition_path(pending.partition_values),
        schema_id=schema.id,
        total_buckets=total,
        pending=tuple(f for f, _ in ordered),
        pending_paths=tuple(p for _, p in ordered),
        real=tuple(RealBucket(bucket=s.bucket, files=s.files, paths=s.paths) for s in real),
        full=full,
        options=dict(options.raw) if options is not None else None,
    )


def _created(file: DataFileMeta) -> int:
    return file.creation_time_ms if file.creation_time_ms is not None else -1


def _file_number(file: DataFileMeta) -> tuple[int, str]:
    """A writer's file counter (``...-<n>.<ext>``), then the name: order within one millisecond."""
    stem = file.file_name.split(".", 1)[0]
    number = stem.rsplit("-", 1)[-1]
    return (int(number) if number.isdigit() else -1, file.file_name)


class PartitionBucketsRule:
    """A commit's real-bucket files of a partition must agree with the partition's bucket count.

    Two compactions of a postpone-bucket table may race to give a new
    partition its buckets (with different ``postpone.default-bucket-num``):
    the second commit must not leave the partition with two counts.

    Source: Paimon ``ConflictDetection`` (total buckets of a partition stay the same).
    """

    def partitions(self, delta: Sequence[ManifestEntry]) -> frozenset[bytes]:
        """Partitions where ``delta`` adds files to real buckets."""
        return frozenset(e.partition for e in delta if e.bucket >= 0 and e.total_buckets > 0)

    def check(
        self,
        merged: Mapping[tuple[Any, ...], ManifestEntry],
        *,
        delta: Sequence[ManifestEntry],
        snapshot_id: int,
    ) -> None:
        """Refuse ``delta`` when a partition it adds to would hold two bucket counts.

        Raises:
            CommitConflictError: naming the partition's counts; plan again.
        """
        touched = self.partitions(delta)
        counts: dict[bytes, set[int]] = {}
        for e in merged.values():
            if e.partition in touched and e.bucket >= 0:
                counts.setdefault(e.partition, set()).add(e.total_buckets)
        for found in counts.values():
            if len(found) > 1:
                raise CommitConflictError(
                    f"a partition would hold real buckets of {sorted(found)} bucket counts after "
                    f"snapshot {snapshot_id} (a concurrent compaction assigned its buckets); "
                    "give up this commit and plan the compaction again"
                )
