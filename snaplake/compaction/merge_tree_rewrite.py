"""Rewriting of one bucket's compaction unit into one ``CommitMessage``.

:func:`rewrite_bucket` merges sections of overlapping runs (and small files) with
the table's merge engine through the streaming k-way merge and writes them, rolled
at ``target-file-size``, at the output level; large files alone in their section
are *upgraded* (the same file re-recorded at the output level). Retractions are
dropped only when the output level is the highest non-empty level. Memory:
bounded by the k-way merge, never a whole bucket.

Source: Paimon ``MergeTreeCompactTask.doCompact`` (sections, small files,
upgrades, top-level files with deletes rewritten), ``MergeTreeCompactRewriter``,
``DataFileMeta.upgrade``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.commit.message import CommitMessage, CompactIncrement
from snaplake.compaction.merge_tree_plan import BucketCompaction
from snaplake.errors import SchemaMismatchError
from snaplake.mergetree.kv import key_column
from snaplake.mergetree.merge_function import drop_retracts
from snaplake.mergetree.read import (
    LEVEL_COLUMN,
    BucketFiles,
    KeyValueReadContext,
    merge_bucket,
    read_context,
)
from snaplake.mergetree.sorted_run import SortedRun, interval_partition
from snaplake.store.format.data_file import DataFileMeta, FileSource
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.write.kv_file_writer import KeyValueFileWriter

__all__ = ["RewriteResult", "rewrite_bucket"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RewriteResult:
    """What :func:`rewrite_bucket` produced.

    Attributes:
        message: compact before/after of the bucket.
        written: Full paths of files this rewrite created (upgraded inputs excluded).
        rows_rewritten: Rows written into new files.
    """

    message: CommitMessage
    written: tuple[str, ...]
    rows_rewritten: int


def rewrite_bucket(
    task: BucketCompaction, *, file_io: FileIO, paths: PathFactory, schema: TableSchema
) -> RewriteResult:
    """Compact one bucket: merge, upgrade, write outputs; return its CommitMessage.

    Args:
        task: The planned bucket compaction.
        file_io: Storage of the table.
        paths: The table's PathFactory.
        schema: The schema of ``task.schema_id`` (inputs written under other
            schemas are read into it by field id; their schema files are read
            from ``paths``).

    Returns:
        The message (inputs as compact before, outputs and upgraded files as
        compact after) and the files written.

    Raises:
        MergeFunctionError: the merge engine rejects a key's versions.
        FileNotFoundError: an input vanished (a concurrent compaction and
            expiry removed it); the outputs written so far are deleted.
        SchemaMismatchError: an input was written under a schema newer than
            ``schema`` (its newer columns would be lost); nothing is written.

    Storage: creates data files at the output level under the bucket directory
    (deleted again if this raises). Inputs are never deleted here.

    Source: Paimon ``MergeTreeCompactTask.doCompact``.
    """
    newer = sorted({f.schema_id for f in task.files if f.schema_id > schema.id})
    if newer:
        raise SchemaMismatchError(
            f"compaction of bucket {task.bucket} would write inputs of schema(s) {newer} "
            f"into the older schema {schema.id} and lose their newer columns; compact with "
            "the table's latest schema"
        )
    older = any(f.schema_id != schema.id for f in (*task.files, *task.lookup_files))
    ctx = read_context(file_io, schema, SchemaManager(file_io, paths).schema if older else None)
    opts = schema.core_options
    min_file_size = int(
        opts.target_file_size(has_primary_key=True) * opts.compaction_small_file_ratio
    )
    bucket_files = BucketFiles(task.files, task.paths)
    before: list[DataFileMeta] = []
    after: list[DataFileMeta] = []
    written: list[str] = []
    rows = 0
    lookup = _LookupKeys(task, file_io=file_io, ctx=ctx) if task.lookup else None

    def rewrite_impl(candidate: list[list[SortedRun]]) -> None:
        nonlocal rows
        writer = KeyValueFileWriter(
            file_io=file_io,
            paths=paths,
            schema=schema,
            partition_path=task.partition_path,
            bucket=task.bucket,
            level=task.output_level,
            file_source=FileSource.COMPACT,
            target_file_size=opts.target_file_size(has_primary_key=True),
        )
        try:
            chunks = merge_bucket(
                ctx, candidate, bucket_files, schema.field_names, with_level=lookup is not None
            )
            for chunk in chunks:
                out = drop_retracts(chunk) if task.drop_delete else chunk
                if lookup is not None:
                    out = lookup.drop_known(out)
                rows += out.num_rows
                writer.write(out)
            files = writer.close()
        except BaseException:
            writer.abort()
            raise
        before.extend(f for section in candidate for run in section for f in run.files)
        after.extend(w.meta for w in files)
        written.extend(w.path for w in files)

    def upgrade(file: DataFileMeta) -> None:
        has_deletes = file.delete_row_count is None or file.delete_row_count > 0
        # Lookup: a level-0 file's keys must be checked against the other levels.
        if (task.output_level == task.max_level and has_deletes) or (
            lookup is not None and file.level == 0
        ):
            rewrite_impl([[SortedRun((file,))]])
        elif file.level != task.output_level:
            before.append(file)
            after.append(dataclasses.replace(file, level=task.output_level))

    def rewrite(candidate: list[list[SortedRun]]) -> None:
        if not candidate:
            return
        if len(candidate) == 1 and len(candidate[0]) == 1:
            for f in candidate[0][0].files:
                upgrade(f)
        else:
            rewrite_impl(candidate)
        candidate.clear()

    try:
        candidate: list[list[SortedRun]] = []
        for section in interval_partition(task.files, ctx.cmp):
            if len(section) > 1:
                candidate.append(list(section))
                continue
            for f in section[0].files:
                if f.file_size_bytes < min_file_size:
                    candidate.append([SortedRun((f,))])
                else:
                    rewrite(candidate)
                    upgrade(f)
        rewrite(candidate)
    except BaseException:
        file_io.delete_many(written)
        raise
    message = CommitMessage(
        partition=task.partition,
        bucket=task.bucket,
        total_buckets=task.total_buckets,
        compact_increment=CompactIncrement(
            compact_before=tuple(before), compact_after=tuple(after)
        ),
    )
    return RewriteResult(message=message, written=tuple(written), rows_rewritten=rows)


class _LookupKeys:
    """The keys of a bucket's level >= 1 files outside the unit (read once, keys only).

    A folded row whose version came from level 0 and whose key is among them is
    dropped: in a first-row table the older version wins and already lives at a
    higher level (Paimon's ``FirstRowMergeFunctionWrapper`` with lookup).
    """

    def __init__(
        self, task: BucketCompaction, *, file_io: FileIO, ctx: KeyValueReadContext
    ) -> None:
        self.task = task
        self.file_io = file_io
        self.ctx = ctx
        self._keys: pa.Table | None = None

    def _load(self) -> pa.Table:
        if self._keys is None:
            names = [key_column(k) for k in self.ctx.spec.key_names]
            full = self.ctx.kv_schema([])
            schema = pa.schema([full.field(n) for n in names])
            parts = [
                t
                for f, p in zip(self.task.lookup_files, self.task.lookup_paths, strict=True)
                for t in self.ctx.read_file(f, p, schema, batch_rows=None)
            ]
            self._keys = pa.concat_tables(parts) if parts else schema.empty_table()
        return self._keys

    def drop_known(self, chunk: pa.Table) -> pa.Table:
        """``chunk`` without level-0 rows whose key a lookup file holds."""
        if chunk.num_rows == 0 or not self.task.lookup_files:
            return chunk
        level0 = np.asarray(
            pc.equal(chunk.column(LEVEL_COLUMN), 0).to_numpy(zero_copy_only=False), dtype=np.bool_
        )
        if not level0.any():
            return chunk
        keys = self._load()
        names = keys.column_names
        probe = chunk.select(names).append_column("__row", pa.array(np.arange(chunk.num_rows)))
        hit = probe.join(keys, keys=names, join_type="left semi", use_threads=False)
        known = np.zeros(chunk.num_rows, dtype=np.bool_)
        known[np.asarray(hit.column("__row").to_numpy(), dtype=np.int64)] = True
        drop = known & level0
        return chunk.filter(pa.array(~drop)) if drop.any() else chunk
