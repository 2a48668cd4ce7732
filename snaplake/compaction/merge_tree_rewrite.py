"""Rewriting of one bucket's compaction unit into one ``CommitMessage``.

:func:`rewrite_bucket` merges sections of overlapping runs (and small files) with
the table's merge engine through the streaming k-way merge and writes them, rolled
at ``target-file-size``, at the output level; large files alone in their section
are *upgraded* (the same file re-recorded at the output level). Retractions are
dropped only when the output level is the highest non-empty level (with deletion
vectors: at every output level above 0). Memory: bounded by the k-way merge and
the lookup's one batch per level, never a whole bucket.

Lookup compaction (first-row and deletion-vector tables): each merged key whose
newest version came from level 0 is looked up in the task's lookup files
(:class:`~snaplake.mergetree.lookup.LookupLevels`). First-row tables drop the
row when found; deletion-vector tables merge the found (older) record in, mark
its (file, position) in that file's vector, and end the rewrite with one new
DELETION_VECTORS file for the bucket (the vectors of live files plus the new
marks) replacing the old one in the message's ``CompactIncrement``.

Source: Paimon ``MergeTreeCompactTask.doCompact`` (sections, small files,
upgrades, top-level files with deletes rewritten), ``MergeTreeCompactRewriter``,
``LookupMergeTreeCompactRewriter``, ``BucketedDvMaintainer``,
``DataFileMeta.upgrade``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.commit.message import CommitMessage, CompactIncrement
from snaplake.compaction.changelog_rewrite import CompactChangelog
from snaplake.compaction.merge_tree_plan import BucketCompaction
from snaplake.errors import SchemaMismatchError
from snaplake.mergetree.kv import SEQUENCE_NUMBER
from snaplake.mergetree.lookup import (
    LOOKUP_FILE,
    LOOKUP_POSITION,
    LOOKUP_ROW,
    REMEMBER_ROWS,
    LookupLevels,
    remember_files,
)
from snaplake.mergetree.merge_function import DeduplicateMergeFunction, drop_retracts, fold
from snaplake.mergetree.read import (
    LEVEL_COLUMN,
    BucketFiles,
    KeyValueReadContext,
    merge_bucket,
    read_context,
)
from snaplake.mergetree.sorted_run import SortedRun, interval_partition
from snaplake.store.format.data_file import DataFileMeta, FileSource
from snaplake.store.format.deletion_vector import (
    DeletionVector,
    read_deletion_vectors,
    write_deletion_vectors_index,
)
from snaplake.store.format.index_file import IndexFileMeta, index_path
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.io.file_io import FileIO

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
        CorruptMetadataError: the bucket's vectors file is damaged (named);
            nothing is written.

    Storage: creates data files at the output level under the bucket directory
    and, with deletion vectors whose set changed, one ``index/index-<uuid>-<n>``
    file (all deleted again if this raises). Reads the bucket's vectors file
    (``task.dv_index``). Inputs are never deleted here.

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
    vectors = (
        read_deletion_vectors(file_io, paths, task.dv_index) if task.dv_index is not None else {}
    )
    bucket_files = BucketFiles(task.files, task.paths, vectors)
    before: list[DataFileMeta] = []
    after: list[DataFileMeta] = []
    written: list[str] = []
    rows = 0
    lookup = (
        _Lookup(task, ctx, vectors, bitmap64=opts.deletion_vectors_bitmap64)
        if task.lookup
        else None
    )
    changelog = _changelog(task, ctx, schema, file_io, paths, vectors)
    changelog_files: list[DataFileMeta] = []
    levels = lookup is not None or changelog is not None
    key_names = ctx.kv_schema(()).names

    def rewrite_impl(candidate: list[list[SortedRun]]) -> None:
        nonlocal rows
        writer = task.output_writer(file_io, paths, schema, file_source=FileSource.COMPACT)
        # Lookup: the outputs are the lookup files of the bucket's next compaction;
        # their keys go into the lookup cache (bounded: small outputs only).
        keys: list[pa.Table] | None = [] if levels else None
        try:
            chunks = merge_bucket(
                ctx, candidate, bucket_files, schema.field_names, with_level=levels
            )
            for chunk in chunks:
                out = lookup.apply(chunk) if lookup is not None else chunk
                if changelog is not None:
                    out = changelog.add(chunk, out)
                out = drop_retracts(out) if task.drop_delete else out
                rows += out.num_rows
                writer.write(out)
                if keys is not None:
                    keys.append(out.select(key_names))
                    if sum(k.num_rows for k in keys) > REMEMBER_ROWS:
                        keys = None
            files = writer.close()
        except BaseException:
            writer.abort()
            raise
        if keys:
            written_rows = pa.concat_tables(keys)
            remember_files(ctx, [(w.meta, w.path) for w in files], written_rows)
        before.extend(f for section in candidate for run in section for f in run.files)
        after.extend(w.meta for w in files)
        written.extend(w.path for w in files)

    def upgrade(file: DataFileMeta) -> None:
        has_deletes = file.delete_row_count is None or file.delete_row_count > 0
        has_deletes = has_deletes or file.file_name in vectors
        # Lookup: a level-0 file's keys must be checked against the other levels.
        if (
            (task.output_level == task.max_level and has_deletes)
            or (lookup is not None and file.level == 0)
            or (changelog is not None and changelog.rewrites(file))
        ):
            rewrite_impl([[SortedRun((file,))]])
        elif file.level != task.output_level:
            if changelog is not None:
                changelog.upgraded(file, bucket_files)
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
        if changelog is not None:
            changelog_files, changelog_paths = changelog.close()
            written.extend(changelog_paths)
        new_index: tuple[IndexFileMeta, ...] = ()
        if task.deletion_vectors and lookup is not None:
            gone = {f.file_name for f in before} - {f.file_name for f in after}
            kept = {n: v for n, v in vectors.items() if n not in gone}
            merged = lookup.merged_vectors(kept)
            if merged != vectors:
                meta = write_deletion_vectors_index(file_io, paths, merged)
                written.append(index_path(paths, meta))
                new_index = (meta,)
    except BaseException:
        if changelog is not None:
            changelog.abort()
        file_io.delete_many(written)
        raise
    message = CommitMessage(
        partition=task.partition,
        bucket=task.bucket,
        total_buckets=task.total_buckets,
        compact_increment=CompactIncrement(
            compact_before=tuple(before),
            compact_after=tuple(after),
            new_index_files=new_index,
            deleted_index_files=(task.dv_index,) if new_index and task.dv_index else (),
            changelog_files=tuple(changelog_files),
        ),
    )
    return RewriteResult(message=message, written=tuple(written), rows_rewritten=rows)


def _changelog(
    task: BucketCompaction,
    ctx: KeyValueReadContext,
    schema: TableSchema,
    file_io: FileIO,
    paths: PathFactory,
    vectors: Mapping[str, DeletionVector],
) -> CompactChangelog | None:
    """The changelog writer of ``task`` (``None`` when it neither writes nor merges any)."""
    if not task.changelog and not task.force_lookup:
        return None
    return CompactChangelog(
        task, ctx=ctx, schema=schema, file_io=file_io, paths=paths, vectors=vectors
    )


class _Lookup:
    """A rewrite's lookup of level-0 keys in the higher levels (:class:`LookupLevels`).

    First-row tables drop a level-0 row whose key a lookup file holds (the
    older version wins and already lives higher). Deletion-vector tables merge
    the found record into the key's result (it is older than every input) and
    mark its (file, position) deleted.

    Source: Paimon ``LookupMergeTreeCompactRewriter``, ``LookupMergeFunction``,
    ``FirstRowMergeFunctionWrapper``.
    """

    def __init__(
        self,
        task: BucketCompaction,
        ctx: KeyValueReadContext,
        vectors: Mapping[str, DeletionVector],
        *,
        bitmap64: bool,
    ) -> None:
        self.task = task
        self.ctx = ctx
        self.bitmap64 = bitmap64
        function = ctx.spec.function
        # Deduplicate: the level-0 version wins over an older (lower sequence
        # number) one whatever its values, so they are read only when a found
        # record is not older (then ``apply`` reads them).
        self.newest_wins = (
            isinstance(function, DeduplicateMergeFunction)
            and not function.ignore_delete
            and not ctx.spec.sequence_fields
        )
        values = ctx.value_schema.names if task.deletion_vectors and not self.newest_wins else ()
        self.levels = LookupLevels(
            ctx, BucketFiles(task.lookup_files, task.lookup_paths, vectors), value_columns=values
        )
        self.marks: dict[str, list[npt.NDArray[np.int64]]] = {}

    def apply(self, chunk: pa.Table) -> pa.Table:
        """``chunk`` (merged, key order, with ``_LEVEL``) after looking up its level-0 winners."""
        if chunk.num_rows == 0 or self.levels.empty:
            return chunk
        level0 = np.asarray(
            pc.equal(chunk.column(LEVEL_COLUMN), 0).to_numpy(zero_copy_only=False), dtype=np.bool_
        )
        if not level0.any():
            return chunk
        rows = np.flatnonzero(level0)
        found = self.levels.lookup(chunk.take(pa.array(rows)))
        if found.num_rows == 0:
            return chunk
        hit = rows[found.column(LOOKUP_ROW).to_numpy()]
        if not self.task.deletion_vectors:
            keep = np.ones(chunk.num_rows, dtype=np.bool_)
            keep[hit] = False
            return chunk.filter(pa.array(keep))
        files = found.column(LOOKUP_FILE).to_pylist()
        positions = found.column(LOOKUP_POSITION).to_numpy()
        for name in set(files):
            picked = positions[np.asarray([f == name for f in files], dtype=np.bool_)]
            self.marks.setdefault(name, []).append(picked)
        names = [n for n in chunk.column_names if n != LEVEL_COLUMN]
        if self.newest_wins:
            found_seq = found.column(SEQUENCE_NUMBER).to_numpy()
            chunk_seq = chunk.column(SEQUENCE_NUMBER).to_numpy()[hit]
            if (found_seq < chunk_seq).all():
                return chunk.set_column(
                    chunk.schema.get_field_index(LEVEL_COLUMN),
                    pa.field(LEVEL_COLUMN, pa.int32(), nullable=False),
                    pa.array(np.zeros(chunk.num_rows, dtype=np.int32)),
                )
            values = [n for n in names if n not in found.column_names]
            found = _with_columns(found, self.levels.values(found, values))
        older = found.select(names).cast(chunk.select(names).schema)
        merged = fold(pa.concat_tables([older, chunk.select(names)]), self.ctx.spec)
        return merged.append_column(
            pa.field(LEVEL_COLUMN, pa.int32(), nullable=False),
            pa.array(np.zeros(merged.num_rows, dtype=np.int32)),
        )

    def merged_vectors(self, kept: Mapping[str, DeletionVector]) -> dict[str, DeletionVector]:
        """``kept`` (the vectors of files still live) with this rewrite's marks added."""
        out = dict(kept)
        for name, parts in self.marks.items():
            positions = np.concatenate(parts)
            old = out.get(name)
            out[name] = (
                old.union(positions)
                if old is not None
                else DeletionVector.from_positions(positions, bitmap64=self.bitmap64)
            )
        return out


def _with_columns(table: pa.Table, extra: pa.Table) -> pa.Table:
    """``table`` with the columns of the row-aligned ``extra`` appended."""
    for field in extra.schema:
        table = table.append_column(field, extra.column(field.name))
    return table
