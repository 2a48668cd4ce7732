"""CompactResult: what one compaction (or several rounds of it) rewrote, counted one way.

Every runner of :class:`~snaplake.compaction.job.CompactionJob` (in process,
Spark, the daemon, inline maintenance) reports its commit with
:meth:`CompactResult.of_commit`, from the committed messages: files and bytes
before and after from their compact increments (an upgraded file, re-recorded
at a new level under its own name, counts on both sides, as in Paimon's
compaction metrics), rows rewritten from the new outputs only.

Source: Paimon ``CompactionMetrics`` (compacted files before/after, upgraded
files counted as both).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from snaplake.commit.message import CommitMessage
from snaplake.store.format.data_file import DataFileMeta
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import TableSchema

__all__ = ["CompactResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactResult:
    """What a compaction did.

    Attributes:
        snapshot_id: The COMPACT snapshot, or ``None`` when nothing was due.
        buckets_compacted: (partition, bucket) pairs rewritten.
        files_before: Input files of the commit (upgraded ones included).
        files_after: Files the commit adds (upgraded ones included).
        bytes_before: Bytes of the inputs.
        bytes_after: Bytes of the added files.
        rows_rewritten: Rows written into new files (upgraded files excluded).
        input_files: Full paths of the inputs (deleted from the table's view,
            physically removed by snapshot expiry later).
        output_files: Full paths of the new files (upgraded inputs excluded).
        duration_s: Wall time, seconds.
    """

    snapshot_id: int | None
    buckets_compacted: int = 0
    files_before: int = 0
    files_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    rows_rewritten: int = 0
    input_files: tuple[str, ...] = ()
    output_files: tuple[str, ...] = ()
    duration_s: float = 0.0

    @classmethod
    def nothing(cls, *, start: float) -> CompactResult:
        """The result of a compaction that had nothing to do (``snapshot_id`` ``None``).

        ``start`` is the ``time.monotonic()`` at which the compaction began.
        """
        return cls(snapshot_id=None, duration_s=time.monotonic() - start)

    @classmethod
    def of_commit(
        cls,
        snapshot_id: int | None,
        messages: Sequence[CommitMessage],
        *,
        buckets: int,
        schema: TableSchema,
        paths: PathFactory,
        start: float,
    ) -> CompactResult:
        """The result of committing ``messages`` as snapshot ``snapshot_id``.

        Args:
            snapshot_id: The COMPACT snapshot published (as the commit reports it).
            messages: The committed messages (compact increments).
            buckets: (partition, bucket) pairs the compaction rewrote.
            schema: The table's schema (names each message's partition directory).
            paths: The table's PathFactory.
            start: ``time.monotonic()`` at which the compaction began.
        """
        ins: list[str] = []
        outs: list[str] = []
        before: list[DataFileMeta] = []
        after: list[DataFileMeta] = []
        new: list[DataFileMeta] = []
        for m in messages:
            ci = m.compact_increment
            directory = schema.partition_path_of(m.partition)
            inputs = {f.file_name for f in ci.compact_before}
            before += ci.compact_before
            after += ci.compact_after
            ins += [
                paths.data_file_path(
                    directory, m.bucket, f.file_name, external_path=f.external_path
                )
                for f in ci.compact_before
            ]
            for f in ci.compact_after:
                if f.file_name in inputs:  # upgraded: the same file at a new level
                    continue
                new.append(f)
                outs.append(
                    paths.data_file_path(
                        directory, m.bucket, f.file_name, external_path=f.external_path
                    )
                )
        return cls(
            snapshot_id=snapshot_id,
            buckets_compacted=buckets,
            files_before=len(before),
            files_after=len(after),
            bytes_before=sum(f.file_size_bytes for f in before),
            bytes_after=sum(f.file_size_bytes for f in after),
            rows_rewritten=sum(f.row_count for f in new),
            input_files=tuple(ins),
            output_files=tuple(outs),
            duration_s=time.monotonic() - start,
        )

    @classmethod
    def of_rounds(cls, rounds: Sequence[CompactResult]) -> CompactResult:
        """One result for several rounds: counts and files summed, the last snapshot id.

        Raises:
            ValueError: ``rounds`` is empty.
        """
        if not rounds:
            raise ValueError("no rounds to combine")
        done = [r for r in rounds if r.snapshot_id is not None]
        if len(done) <= 1:
            return done[0] if done else rounds[-1]
        return cls(
            snapshot_id=done[-1].snapshot_id,
            buckets_compacted=sum(r.buckets_compacted for r in done),
            files_before=sum(r.files_before for r in done),
            files_after=sum(r.files_after for r in done),
            bytes_before=sum(r.bytes_before for r in done),
            bytes_after=sum(r.bytes_after for r in done),
            rows_rewritten=sum(r.rows_rewritten for r in done),
            input_files=tuple(p for r in done for p in r.input_files),
            output_files=tuple(p for r in done for p in r.output_files),
            duration_s=sum(r.duration_s for r in rounds),
        )
