"""The changelog a primary-key compaction produces (``lookup`` / ``full-compaction``).

:class:`CompactChangelog` rides along one bucket's rewrite
(:func:`~snaplake.compaction.merge_tree_rewrite.rewrite_bucket`): for each merged
chunk it finds the keys' before-images with a streaming
:class:`~snaplake.mergetree.lookup.LookupLevels` (full-compaction: the unit's
top-level files; lookup: the unit's files of levels > 0, then the bucket's
files above the output level, the lowest level winning), applies
:func:`~snaplake.mergetree.changelog.changelog_rows` and writes the rows into
changelog files (``changelog-file.prefix``, ``.format``, ``.compression``;
level = the output level, FileSource APPEND), which the compaction's commit
message carries as ``CompactIncrement.changelog_files``. Lookup without deletion
vectors also changes the output: a level-0 key's record found above the output
level is merged into it (:meth:`CompactChangelog.add`), as Paimon's lookup merge
then reads only that key's newest higher-level record.

Source: Paimon ``FullChangelogMergeTreeCompactRewriter``,
``LookupMergeTreeCompactRewriter``, ``ChangelogMergeTreeRewriter``
(``rewriteChangelog``, ``upgradeChangelog``), ``LookupChangelogMergeFunctionWrapper``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.compaction.merge_tree_plan import BucketCompaction
from snaplake.mergetree.changelog import ChangelogRules, changelog_rows
from snaplake.mergetree.kv import encode_keys, key_column
from snaplake.mergetree.lookup import LOOKUP_LEVEL, LOOKUP_ROW, LookupLevels
from snaplake.mergetree.merge_function import fold
from snaplake.mergetree.read import (
    LEVEL_COLUMN,
    BucketFiles,
    KeyValueReadContext,
    merge_bucket,
    without_deleted,
)
from snaplake.mergetree.sorted_run import SortedRun
from snaplake.options.registry import (
    CHANGELOG_PRODUCER_ROW_DEDUPLICATE,
    CHANGELOG_PRODUCER_ROW_DEDUPLICATE_IGNORE_FIELDS,
)
from snaplake.store.format.data_file import DataFileMeta, FileSource
from snaplake.store.format.deletion_vector import DeletionVector
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.primary_key import MergeEngine
from snaplake.store.format.schema import TableSchema
from snaplake.store.io.file_io import FileIO

__all__ = ["FULL_COMPACTION", "LOOKUP", "CompactChangelog"]

LOOKUP = "lookup"
"""``changelog-producer`` value: changelog from lookup compaction."""
FULL_COMPACTION = "full-compaction"
"""``changelog-producer`` value: changelog from compaction into the top level."""
_LEVEL0_BATCH_ROWS = 65_536
"""Rows of a level-0 file's keys read at a time (:func:`_level0_keys`)."""
_ROW = "_CHANGELOG_ROW"
"""Scratch column: the row of a chunk a found record is merged into."""


class CompactChangelog:
    """The changelog of one bucket's compaction (a :class:`BucketCompaction` with ``changelog``).

    A task with ``force_lookup`` (and no ``changelog``) gets the lookup
    producer's merge of found records and writes no changelog file.

    Args:
        task: The bucket's compaction; ``task.changelog`` names the producer.
        ctx: The rewrite's read context.
        schema: The schema outputs are written in.
        file_io: Storage of the table.
        paths: Names the changelog files.
        vectors: The bucket's deletion vectors (rows they mark are not live).

    Storage: :meth:`add` writes changelog files in the bucket directory;
    :meth:`abort` deletes them.
    """

    def __init__(
        self,
        task: BucketCompaction,
        *,
        ctx: KeyValueReadContext,
        schema: TableSchema,
        file_io: FileIO,
        paths: PathFactory,
        vectors: Mapping[str, DeletionVector],
    ) -> None:
        self.task = task
        self.ctx = ctx
        opts = schema.core_options
        fields: tuple[str, ...] | None = opts.get(CHANGELOG_PRODUCER_ROW_DEDUPLICATE_IGNORE_FIELDS)
        dedup: bool | None = opts.get(CHANGELOG_PRODUCER_ROW_DEDUPLICATE)
        ignored = set(fields or ())
        first_row = opts.merge_engine == MergeEngine.FIRST_ROW
        self.rules = ChangelogRules(
            row_deduplicate=bool(dedup),
            compared=tuple(n for n in ctx.value_schema.names if n not in ignored),
            insert_only=first_row,
        )
        self.full = task.changelog == FULL_COMPACTION
        self.produces = bool(task.changelog)
        # lookup without deletion vectors: the rewrite merges found records in (add).
        self.merges_found = not self.full and not task.lookup
        self.field_names = schema.field_names
        # lookup: a level-0 file is upgraded as is and only its changelog written,
        # unless Paimon's rewriter forces a rewrite (LookupMergeTreeCompactRewriter
        # .upgradeStrategy: another format at the output level, deletion vectors,
        # another merge engine or sequence.field).
        self.in_place = (
            not self.full
            and not task.deletion_vectors
            and opts.merge_engine == MergeEngine.DEDUPLICATE
            and not opts.sequence_field
            and opts.format_for_level(0) == opts.format_for_level(task.output_level)
        )
        pairs = [(f, p) for f, p in zip(task.files, task.paths, strict=True)
                 if (f.level == task.max_level if self.full else f.level > 0)]  # fmt: skip
        if not self.full:
            pairs += [(f, p) for f, p in zip(task.lookup_files, task.lookup_paths, strict=True)
                      if f.level > task.output_level]  # fmt: skip
        files = BucketFiles([f for f, _ in pairs], [p for _, p in pairs], vectors)
        self.levels = LookupLevels(ctx, files, value_columns=ctx.value_schema.names)
        # lookup under sequence.field: an older level's record can win over a key's
        # level-0 rows, so the winner's level does not tell that the key had some.
        self.level0_keys: pa.Array | None = None
        if not self.full and opts.sequence_field:
            level0 = BucketFiles(task.files, task.paths, vectors)
            self.level0_keys = _level0_keys(ctx, level0)
        self.writer = (
            None
            if not self.produces
            else task.output_writer(
                file_io, paths, schema, file_source=FileSource.APPEND, changelog=True
            )
        )

    def rewrites(self, file: DataFileMeta) -> bool:
        """Whether upgrading ``file`` alone must go through a rewrite to produce changelog.

        full-compaction: a file lifted into the top level (its records are new
        there: ``+I``); lookup: a level-0 file.
        """
        if self.full:
            return file.level != self.task.max_level
        return file.level == 0 and not self.in_place

    def upgraded(self, file: DataFileMeta, bucket: BucketFiles) -> None:
        """Write the changelog of ``file``, upgraded to the output level without a rewrite.

        Raises:
            FileNotFoundError: ``file`` or a file to look in is missing.
        """
        if self.full or file.level != 0 or not self.produces:
            return
        run = [[SortedRun((file,))]]
        for chunk in merge_bucket(self.ctx, run, bucket, self.field_names, with_level=True):
            self.add(chunk, chunk)

    def add(self, merged: pa.Table, result: pa.Table) -> pa.Table:
        """Write the changelog of one merged chunk; return the rows the rewrite writes.

        Lookup producer without deletion vectors (``task.lookup`` false): a
        level-0 key whose before-image comes from above the output level
        (none of the unit's files holds it) gets that record merged in, as
        Paimon's lookup merge reads only the newest higher-level record of a
        key: the output row and the after-image are merge(found, level-0
        versions). With deletion vectors ``_Lookup`` already merged it.

        Args:
            merged: The chunk the k-way merge yielded (key order, retractions
                kept; with ``_LEVEL`` for lookup).
            result: What the rewrite made of it before dropping retractions
                (row-aligned with ``merged``: with deletion vectors, the found
                record merged in; first-row lookups drop rows, ``merged`` is
                then used, as a dropped key has a before and emits nothing).

        Returns:
            ``result``, or (see above) ``result`` with found records merged in
            (same columns; a key whose merge leaves no row is left out).

        Raises:
            FileNotFoundError: a file to look in is missing.
            MergeFunctionError: the merge engine rejects a key's versions.
            StorageError: the storage failed.
        """
        if merged.num_rows == 0:
            return result
        after = result if result.num_rows == merged.num_rows else merged
        names = [n for n in after.column_names if n != LEVEL_COLUMN]
        after = after.select(names)
        # full-compaction: keys with a record below the top level (a key found
        # only at the top is unchanged); lookup: keys with a level-0 record. The
        # newest record's level tells both, except under sequence.field (lookup:
        # the level-0 files' keys then tell).
        level = merged.column(LEVEL_COLUMN)
        emit = np.asarray(
            (
                pc.not_equal(level, self.task.max_level) if self.full else pc.equal(level, 0)
            ).to_numpy(zero_copy_only=False),
            dtype=np.bool_,
        )
        if self.level0_keys is not None:
            encoded = encode_keys(merged, self.levels.key_names)
            had = pc.is_in(encoded, value_set=self.level0_keys, skip_nulls=True)
            emit |= np.asarray(had.to_numpy(zero_copy_only=False), dtype=np.bool_)
        if not emit.any():
            return result
        rows = np.flatnonzero(emit)
        found = self.levels.lookup(after.take(pa.array(rows)))
        hit = rows[found.column(LOOKUP_ROW).to_numpy()]
        before = found.select(names).cast(after.schema)
        keep: npt.NDArray[np.bool_] | None = None
        if self.merges_found and before.num_rows:
            found_levels = np.asarray(found.column(LOOKUP_LEVEL).to_numpy(), dtype=np.int64)
            outside = found_levels > self.task.output_level
            if outside.any():
                after, keep = self._merge_found(
                    after, before.filter(pa.array(outside)), hit[outside]
                )
                emit = emit & keep
        has_before = np.zeros(after.num_rows, dtype=np.bool_)
        has_before[hit] = True
        index = np.zeros(after.num_rows, dtype=np.int64)
        index[hit] = np.arange(hit.size)
        before = before.take(pa.array(index)) if before.num_rows else after
        if self.writer is not None:
            self.writer.write(changelog_rows(before, has_before, after, self.rules, emit=emit))
        if keep is None:
            return result
        if LEVEL_COLUMN in result.column_names:
            after = after.append_column(
                result.schema.field(LEVEL_COLUMN), result.column(LEVEL_COLUMN)
            )
        return after if keep.all() else after.filter(pa.array(keep))

    def _merge_found(
        self, after: pa.Table, older: pa.Table, targets: npt.NDArray[np.int64]
    ) -> tuple[pa.Table, npt.NDArray[np.bool_]]:
        """``after`` with row ``targets[i]`` merged over ``older`` row ``i``; the rows kept.

        Returns ``after``'s rows (aligned) and a mask of those whose merge
        leaves a row (a row that leaves none keeps its old values, unmasked).

        Source: Paimon ``LookupChangelogMergeFunctionWrapper.calculateResult``.
        """
        n = after.num_rows
        tagged = pa.concat_tables(
            [
                older.append_column(_ROW, pa.array(targets, type=pa.int64())),
                after.append_column(_ROW, pa.array(np.arange(n, dtype=np.int64))),
            ]
        )
        folded = fold(tagged, self.ctx.spec)
        positions = np.asarray(folded.column(_ROW).to_numpy(), dtype=np.int64)
        index = np.arange(n, dtype=np.int64)
        index[positions] = n + np.arange(positions.size, dtype=np.int64)
        combined = pa.concat_tables([after, folded.drop_columns([_ROW]).cast(after.schema)])
        keep = np.zeros(n, dtype=np.bool_)
        keep[positions] = True
        return combined.take(pa.array(index)), keep

    def close(self) -> tuple[list[DataFileMeta], list[str]]:
        """Finish the changelog files: their metadata and full paths (none when empty).

        Raises:
            StorageError: the storage failed (the files written are deleted).
        """
        if self.writer is None:
            return [], []
        try:
            files = self.writer.close()
        except BaseException:
            self.writer.abort()
            raise
        return [w.meta for w in files], [w.path for w in files]

    def abort(self) -> None:
        """Delete the changelog files written so far."""
        if self.writer is not None:
            self.writer.abort()


def _level0_keys(ctx: KeyValueReadContext, bucket: BucketFiles) -> pa.Array:
    """The encoded keys (:func:`encode_keys`) of the live rows of ``bucket``'s level-0 files.

    Memory: one encoded key per level-0 row of the unit.

    Raises:
        FileNotFoundError: a file is missing.
    """
    schema = ctx.kv_schema(())
    names = [key_column(k) for k in ctx.spec.key_names]
    parts: list[pa.Array] = [pa.array([], pa.large_binary())]
    for f in bucket.files:
        if f.level != 0:
            continue
        read = ctx.read_file(f, bucket.path_of(f), schema, batch_rows=_LEVEL0_BATCH_ROWS)
        parts += [encode_keys(t, names) for t in without_deleted(read, bucket.vector_of(f))]
    return pa.concat_arrays(parts)
