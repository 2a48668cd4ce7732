"""Positional lookup of keys in a bucket's higher levels (a streaming merge-join).

:class:`LookupLevels` answers, for a key-sorted chunk of keys, where each key's
newest live record sits among a chosen set of level >= 1 files of one bucket:
the file, the 0-based row position in that file and the record itself. Lookup
compaction uses it to mark superseded rows in deletion vectors and to merge a
level-0 key with its older version (Paimon's ``LookupMergeTreeCompactRewriter``);
the ``lookup`` changelog producer uses the found record as the before-image.

Each level >= 1 is one sorted run (files of disjoint key ranges), so the lookup
is a merge-join: every level keeps a cursor that streams its files in key order,
one bounded batch at a time, and never goes back. Successive chunks must
therefore come in ascending key order (as a compaction's merged output does).
Files whose key range ends before a chunk are skipped without being opened;
memory is about one batch per level, never a whole level. Rows a file's deletion
vector marks are never returned (they are not live).

Source: Paimon ``LookupLevels`` (which builds local lookup files per data file;
here a sequential merge-join over the sorted runs instead), ``LookupFile``,
``PositionedKeyValue``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

import numpy as np
import pyarrow as pa

from snaplake.mergetree.kv import key_column
from snaplake.mergetree.read import BucketFiles, KeyValueReadContext
from snaplake.mergetree.sorted_run import java_order_key
from snaplake.store.format.data_file import DataFileMeta

__all__ = [
    "LOOKUP_FILE",
    "LOOKUP_LEVEL",
    "LOOKUP_POSITION",
    "LOOKUP_ROW",
    "LookupLevels",
]

LOOKUP_ROW: Final = "_LOOKUP_ROW"
"""Result column: index (int64) of the looked-up key in the chunk passed to ``lookup``."""
LOOKUP_FILE: Final = "_LOOKUP_FILE"
"""Result column: name (string) of the data file holding the found record."""
LOOKUP_POSITION: Final = "_LOOKUP_POSITION"
"""Result column: 0-based row position (int64) of the found record in its file."""
LOOKUP_LEVEL: Final = "_LOOKUP_LEVEL"
"""Result column: level (int32) of the file holding the found record."""

DEFAULT_LOOKUP_BATCH_ROWS: Final = 16_384
"""Rows a level's cursor reads at a time."""


def _row_key(table: pa.Table, names: Sequence[str], i: int) -> tuple[Any, ...]:
    return java_order_key(table.column(n)[i].as_py() for n in names)


def _count_at_most(table: pa.Table, names: Sequence[str], bound: tuple[Any, ...]) -> int:
    """Rows of the key-sorted ``table`` whose key is <= ``bound`` (binary search)."""
    lo, hi = 0, table.num_rows
    while lo < hi:
        mid = (lo + hi) // 2
        if _row_key(table, names, mid) <= bound:
            lo = mid + 1
        else:
            hi = mid
    return lo


class _LevelCursor:
    """Streams one sorted run (one level's files, key order) forward, a batch at a time."""

    def __init__(
        self,
        lookup: LookupLevels,
        level: int,
        files: Sequence[DataFileMeta],
    ) -> None:
        self.lookup = lookup
        self.level = level
        self.files = sorted(files, key=lambda f: lookup.ctx.cmp.key(f.min_key))
        self.next_file = 0
        self.batches: Iterator[pa.Table] | None = None
        self.buffer: pa.Table | None = None

    def _open_next(self, low: tuple[Any, ...], high: tuple[Any, ...]) -> bool:
        """Open the next file that may hold keys in ``[low, high]``; False when none."""
        cmp = self.lookup.ctx.cmp
        while self.next_file < len(self.files):
            f = self.files[self.next_file]
            if cmp.key(f.min_key) > high:
                return False  # later chunks will reach it
            self.next_file += 1
            if cmp.key(f.max_key) < low:
                continue  # wholly before this chunk: never opened
            self.batches = self.lookup.file_batches(f, self.level)
            return True
        return False

    def _fill(self, low: tuple[Any, ...], high: tuple[Any, ...]) -> bool:
        """Make ``buffer`` non-empty; False when the run has no more rows for ``<= high``."""
        while self.buffer is None or self.buffer.num_rows == 0:
            if self.batches is None and not self._open_next(low, high):
                return False
            assert self.batches is not None
            try:
                self.buffer = next(self.batches)
            except StopIteration:
                self.batches = None
        return True

    def matches(
        self, keys: pa.Table, low: tuple[Any, ...], high: tuple[Any, ...]
    ) -> list[pa.Table]:
        """Joined rows of this level for ``keys`` (indexed by :data:`LOOKUP_ROW`), consumed."""
        names = self.lookup.key_columns
        out: list[pa.Table] = []
        while self._fill(low, high):
            assert self.buffer is not None
            count = _count_at_most(self.buffer, names, high)
            if count:
                head = self.buffer.slice(0, count)
                self.buffer = self.buffer.slice(count)
                joined = keys.join(head, keys=list(names), join_type="inner", use_threads=False)
                if joined.num_rows:
                    out.append(joined)
            if self.buffer.num_rows:
                break  # the rest lies beyond this chunk
        return out


class LookupLevels:
    """Streaming positional lookup of key-sorted chunks in a bucket's level >= 1 files.

    Args:
        ctx: The table's read context (schemas, key comparator, evolution).
        bucket: The files to look in (every one at level >= 1; each level one
            sorted run), their paths and their deletion vectors (rows a vector
            marks are not live and never found).
        value_columns: Value columns to return with each found record (``()``:
            keys and system columns only).
        batch_rows: Rows a level's cursor reads at a time.

    Raises:
        ValueError: a file of ``bucket`` is at level 0 (level 0 is not a sorted run).

    Memory: about ``batch_rows`` rows per level plus one chunk's matches.

    Source: Paimon ``LookupLevels.lookup`` / ``LookupUtils.lookup`` (levels
    searched from the lowest, the first hit wins).
    """

    def __init__(
        self,
        ctx: KeyValueReadContext,
        bucket: BucketFiles,
        *,
        value_columns: Sequence[str] = (),
        batch_rows: int = DEFAULT_LOOKUP_BATCH_ROWS,
    ) -> None:
        if any(f.level == 0 for f in bucket.files):
            raise ValueError("LookupLevels looks only in levels >= 1 (sorted runs)")
        self.ctx = ctx
        self.bucket = bucket
        self.batch_rows = batch_rows
        self.key_columns = tuple(key_column(k) for k in ctx.spec.key_names)
        self.schema = ctx.kv_schema(value_columns)
        by_level: dict[int, list[DataFileMeta]] = {}
        for f in bucket.files:
            by_level.setdefault(f.level, []).append(f)
        self._cursors = [_LevelCursor(self, lv, by_level[lv]) for lv in sorted(by_level)]
        self._last: tuple[Any, ...] | None = None

    @property
    def empty(self) -> bool:
        """Whether there is no file to look in (every lookup finds nothing)."""
        return not self._cursors

    def file_batches(self, file: DataFileMeta, level: int) -> Iterator[pa.Table]:
        """Live rows of ``file`` in file order, with their positions, file name and level."""
        vector = self.bucket.vector_of(file)
        start = 0
        read = self.ctx.read_file(
            file, self.bucket.path_of(file), self.schema, batch_rows=self.batch_rows
        )
        for table in read:
            n = table.num_rows
            positions = np.arange(start, start + n, dtype=np.int64)
            if vector is not None and not vector.is_empty():
                keep = vector.keep_mask(n, start=start)
                table = table.filter(pa.array(keep))
                positions = positions[keep]
            start += n
            if table.num_rows == 0:
                continue
            table = table.append_column(
                LOOKUP_FILE, pa.array([file.file_name] * table.num_rows, type=pa.string())
            )
            table = table.append_column(LOOKUP_POSITION, pa.array(positions))
            table = table.append_column(
                LOOKUP_LEVEL, pa.array(np.full(table.num_rows, level, dtype=np.int32))
            )
            yield table

    def lookup(self, keys: pa.Table) -> pa.Table:
        """Find each key's newest live record in the levels.

        Args:
            keys: A table holding the ``_KEY_<k>`` columns (others ignored),
                sorted by key, one row per key; every call's keys must sort
                after the previous call's.

        Returns:
            One row per found key, ordered by :data:`LOOKUP_ROW` (the key's
            index in ``keys``): :data:`LOOKUP_ROW`, the record's key/value
            columns (``_KEY_<k>``, ``_SEQUENCE_NUMBER``, ``_VALUE_KIND``, the
            value columns), :data:`LOOKUP_FILE`, :data:`LOOKUP_POSITION`,
            :data:`LOOKUP_LEVEL`. A key in several levels is reported from the
            lowest (newest) one.

        Raises:
            ValueError: ``keys`` do not come after the previous call's keys.
            FileNotFoundError: a data file is missing.
        """
        out_schema = pa.schema(
            [pa.field(LOOKUP_ROW, pa.int64()), *self.schema,
             pa.field(LOOKUP_FILE, pa.string()), pa.field(LOOKUP_POSITION, pa.int64()),
             pa.field(LOOKUP_LEVEL, pa.int32())]
        )  # fmt: skip
        if keys.num_rows == 0 or not self._cursors:
            return out_schema.empty_table()
        names = self.key_columns
        low = _row_key(keys, names, 0)
        high = _row_key(keys, names, keys.num_rows - 1)
        if self._last is not None and low <= self._last:
            raise ValueError("LookupLevels.lookup: chunks must come in ascending key order")
        self._last = high
        probe = keys.select(list(names)).append_column(
            LOOKUP_ROW, pa.array(np.arange(keys.num_rows, dtype=np.int64))
        )
        parts = [t for c in self._cursors for t in c.matches(probe, low, high)]
        if not parts:
            return out_schema.empty_table()
        found = pa.concat_tables([p.select(out_schema.names) for p in parts])
        rows = found.column(LOOKUP_ROW).to_numpy()
        levels = found.column(LOOKUP_LEVEL).to_numpy()
        order = np.lexsort((levels, rows))
        first = np.ones(order.size, dtype=np.bool_)
        first[1:] = rows[order][1:] != rows[order][:-1]
        return found.take(pa.array(order[first])).cast(out_schema)
