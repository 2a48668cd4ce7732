"""Positional lookup of keys in a bucket's higher levels (a streaming probe).

:class:`LookupLevels` answers, for a key-sorted chunk of keys, where each key's
newest live record sits among a chosen set of level >= 1 files of one bucket:
the file, the 0-based row position in that file and the record itself. Lookup
compaction uses it to mark superseded rows in deletion vectors and to merge a
level-0 key with its older version (Paimon's ``LookupMergeTreeCompactRewriter``);
the ``lookup`` changelog producer uses the found record as the before-image.

Only the probed keys cost anything: each level >= 1 is one sorted run (files of
disjoint key ranges) that a cursor walks forward in key order, skipping files
whose key range (``DataFileMeta`` min/max key) ends before the chunk without
opening them. Of a candidate file only the key, sequence and row-kind columns
are read; the keys are encoded into one binary column
(:func:`~snaplake.mergetree.kv.encode_keys`) and
matched against the chunk's keys with a hash lookup. Value columns are read only
for the rows found, and only when asked for (the merge function needs the old
value, or the changelog its before-image), by a forward reader per file. The
key columns of small files are kept in a process-wide LRU cache
(:class:`LookupKeyCache`, bounded in bytes) keyed by the file's path: data files
are immutable, so a long-lived writer's later commits probe their bucket's
files without reading them again. Rows a file's deletion vector marks are never
returned (they are not live); vectors are applied at probe time, never cached.
Memory: the cache's bound, plus about one key batch and one value batch per
level; never a whole level.

Successive chunks must come in ascending key order (as a compaction's merged
output does).

Source: Paimon ``LookupLevels`` (which builds local lookup files per data file
and keeps them in a size-bounded cache, ``lookup.cache-max-memory-size``; here
the encoded key columns are cached in memory instead), ``LookupFile``,
``PositionedKeyValue``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.mergetree.kv import SEQUENCE_NUMBER, VALUE_KIND, encode_keys, key_column
from snaplake.mergetree.read import BucketFiles, KeyValueReadContext
from snaplake.mergetree.sorted_run import java_order_key
from snaplake.store.format.data_file import DataFileMeta

__all__ = [
    "LOOKUP_FILE",
    "LOOKUP_LEVEL",
    "LOOKUP_POSITION",
    "LOOKUP_ROW",
    "LookupKeyCache",
    "LookupLevels",
    "REMEMBER_ROWS",
    "remember_files",
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
"""Rows a file's value reader reads at a time."""

_KEY_BATCH_ROWS: Final = 65_536
"""Rows of key columns read at a time."""

DEFAULT_CACHE_BYTES: Final = 64 << 20
"""Bound of the process-wide key cache (encoded keys, sequence numbers, kinds)."""

_CACHE_ROWS_PER_FILE: Final = 1 << 18
"""Files of at most this many rows are read whole into the key cache; larger ones stream."""

REMEMBER_ROWS: Final = _CACHE_ROWS_PER_FILE
"""Rows of a compaction's output whose keys :func:`remember_files` may be given."""


@dataclass(frozen=True, slots=True)
class _KeyBatch:
    """Consecutive rows of one file: encoded keys, sequence numbers, kinds."""

    start: int
    """Position of the first row in the file."""
    keys: pa.Array
    sequence: npt.NDArray[np.int64]
    kinds: npt.NDArray[np.int8]
    last: tuple[Any, ...]
    """Sortable key of the last row (``java_order_key``)."""

    @property
    def nbytes(self) -> int:
        return int(self.keys.nbytes) + self.sequence.nbytes + self.kinds.nbytes


class LookupKeyCache:
    """Process-wide LRU of files' key batches, bounded in bytes (thread-safe).

    Entries are keyed by (full path, key types): data files are immutable, so
    an entry never goes stale; deletion vectors are not part of an entry.

    Args:
        max_bytes: Bound of the entries' sizes; the least recently used go first.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], tuple[_KeyBatch, ...]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """Bytes the entries hold."""
        return self._bytes

    def get(self, key: tuple[str, str]) -> tuple[_KeyBatch, ...] | None:
        """The batches stored for ``key`` (marked recently used), or ``None``."""
        with self._lock:
            batches = self._entries.get(key)
            if batches is not None:
                self._entries.move_to_end(key)
            return batches

    def put(self, key: tuple[str, str], batches: tuple[_KeyBatch, ...]) -> None:
        """Store ``batches`` (dropped at once when larger than the bound)."""
        size = sum(b.nbytes for b in batches)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= sum(b.nbytes for b in old)
            self._entries[key] = batches
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, gone = self._entries.popitem(last=False)
                self._bytes -= sum(b.nbytes for b in gone)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0


KEY_CACHE: Final = LookupKeyCache()
"""The cache :class:`LookupLevels` uses unless given another."""


def _key_batches(tables: Iterable[pa.Table], names: Sequence[str]) -> Iterator[_KeyBatch]:
    """Key batches of one file's rows (``tables`` in file order, key/value layout)."""
    start = 0
    for table in tables:
        n = table.num_rows
        if n == 0:
            continue
        yield _KeyBatch(
            start=start,
            keys=encode_keys(table, names),
            sequence=np.asarray(table.column(SEQUENCE_NUMBER).to_numpy(), dtype=np.int64),
            kinds=np.asarray(table.column(VALUE_KIND).to_numpy(), dtype=np.int8),
            last=java_order_key(table.column(k)[n - 1].as_py() for k in names),
        )
        start += n


def _cache_key(ctx: KeyValueReadContext, path: str) -> tuple[str, str]:
    return path, ",".join(str(f.type) for f in ctx.kv_schema(()))


def remember_files(
    ctx: KeyValueReadContext,
    files: Sequence[tuple[DataFileMeta, str]],
    rows: pa.Table,
    *,
    cache: LookupKeyCache = KEY_CACHE,
) -> None:
    """Put the key batches of just-written files into ``cache`` (no read needed later).

    A compaction's outputs are the lookup files of the bucket's next lookup:
    remembering them spares a long-lived writer reading them back. Nothing is
    stored when the row counts do not add up or a file is too large to cache.

    Args:
        ctx: The read context of the table (its key types).
        files: The files written, in write order, with their full paths.
        rows: Every row written into them, in write order (key/value layout;
            only the key, sequence and kind columns are used).
        cache: Where to store them.
    """
    if sum(f.row_count for f, _ in files) != rows.num_rows:
        return
    names = [key_column(k) for k in ctx.spec.key_names]
    start = 0
    for f, path in files:
        part = rows.slice(start, f.row_count)
        start += f.row_count
        if f.row_count > _CACHE_ROWS_PER_FILE:
            continue
        pieces = (part.slice(o, _KEY_BATCH_ROWS) for o in range(0, f.row_count, _KEY_BATCH_ROWS))
        cache.put(_cache_key(ctx, path), tuple(_key_batches(pieces, names)))


@dataclass(frozen=True, slots=True)
class _Matches:
    """Found records of one probe: per match, the probe row and where the record is."""

    rows: npt.NDArray[np.int64]
    files: npt.NDArray[np.int64]
    """Index of the file in ``LookupLevels.files``."""
    positions: npt.NDArray[np.int64]
    levels: npt.NDArray[np.int32]
    sequence: npt.NDArray[np.int64]
    kinds: npt.NDArray[np.int8]


class _LevelCursor:
    """Walks one sorted run (one level's files, key order) forward, a key batch at a time."""

    def __init__(self, lookup: LookupLevels, level: int, files: Sequence[int]) -> None:
        self.lookup = lookup
        self.level = level
        cmp = lookup.ctx.cmp
        self.files = sorted(files, key=lambda i: cmp.key(lookup.files[i].min_key))
        self.next_file = 0
        self.current = -1
        self.batches: Iterator[_KeyBatch] | None = None
        self.buffer: _KeyBatch | None = None

    def _open_next(self, low: tuple[Any, ...], high: tuple[Any, ...]) -> bool:
        """Open the next file that may hold keys in ``[low, high]``; False when none."""
        cmp = self.lookup.ctx.cmp
        while self.next_file < len(self.files):
            index = self.files[self.next_file]
            f = self.lookup.files[index]
            if cmp.key(f.min_key) > high:
                return False  # later chunks will reach it
            self.next_file += 1
            if cmp.key(f.max_key) < low:
                continue  # wholly before this chunk: never opened
            self.current = index
            self.batches = self.lookup.key_batches(f)
            return True
        return False

    def probe(
        self, probe: pa.Array, low: tuple[Any, ...], high: tuple[Any, ...], out: list[_Matches]
    ) -> None:
        """Append this level's live records of the encoded ``probe`` keys to ``out``.

        Consumes the batches whose keys all lie at or below ``high``; a batch
        reaching beyond it stays for the next chunk (probed again then).
        """
        while True:
            if self.buffer is None:
                if self.batches is None and not self._open_next(low, high):
                    return
                assert self.batches is not None
                self.buffer = next(self.batches, None)
                if self.buffer is None:
                    self.batches = None
                    continue
            batch = self.buffer
            self._match(batch, probe, out)
            if batch.last > high:
                return  # the rest lies beyond this chunk
            self.buffer = None

    def _match(self, batch: _KeyBatch, probe: pa.Array, out: list[_Matches]) -> None:
        index = pc.index_in(batch.keys, value_set=probe, skip_nulls=True)
        if index.null_count == len(index):
            return
        at = np.flatnonzero(index.is_valid().to_numpy(zero_copy_only=False))
        file = self.lookup.files[self.current]
        vector = self.lookup.bucket.vector_of(file)
        if vector is not None and not vector.is_empty():
            at = at[vector.keep_mask(len(batch.kinds), start=batch.start)[at]]
            if at.size == 0:
                return
        rows = np.asarray(index.take(pa.array(at)).to_numpy(), dtype=np.int64)
        out.append(
            _Matches(
                rows=rows,
                files=np.full(at.size, self.current, dtype=np.int64),
                positions=at + batch.start,
                levels=np.full(at.size, self.level, dtype=np.int32),
                sequence=batch.sequence[at],
                kinds=batch.kinds[at],
            )
        )


class _ValueReader:
    """Reads one file's value columns forward and takes asked-for positions."""

    def __init__(self, lookup: LookupLevels, file: DataFileMeta, schema: pa.Schema) -> None:
        self.lookup = lookup
        self.file = file
        self.schema = schema
        self.batches: Iterator[pa.Table] | None = None
        self.buffer: pa.Table | None = None
        self.start = 0

    def _reopen(self) -> None:
        ctx = self.lookup.ctx
        path = self.lookup.bucket.path_of(self.file)
        self.batches = ctx.read_file(
            self.file, path, self.schema, batch_rows=self.lookup.batch_rows
        )
        self.buffer = None
        self.start = 0

    def take(self, positions: npt.NDArray[np.int64]) -> pa.Table:
        """Rows at ``positions`` (ascending) of the file.

        Raises:
            FileNotFoundError: the file is missing.
            ValueError: a position is beyond the file's rows.
        """
        if self.batches is None or positions[0] < self.start:
            self._reopen()
        assert self.batches is not None
        parts: list[pa.Table] = []
        i = 0
        while i < positions.size:
            if self.buffer is None or positions[i] >= self.start + self.buffer.num_rows:
                if self.buffer is not None:
                    self.start += self.buffer.num_rows
                self.buffer = next(self.batches, None)
                if self.buffer is None:
                    raise ValueError(
                        f"position {int(positions[i])} is beyond the rows of {self.file.file_name}"
                    )
                continue
            end = self.start + self.buffer.num_rows
            j = int(np.searchsorted(positions, end, side="left"))
            parts.append(self.buffer.take(pa.array(positions[i:j] - self.start)))
            i = j
        return pa.concat_tables(parts)


class LookupLevels:
    """Streaming positional lookup of key-sorted chunks in a bucket's level >= 1 files.

    Args:
        ctx: The table's read context (schemas, key comparator, evolution).
        bucket: The files to look in (every one at level >= 1; each level one
            sorted run), their paths and their deletion vectors (rows a vector
            marks are not live and never found).
        value_columns: Value columns to return with each found record (``()``:
            keys and system columns only; the values are then never read).
        batch_rows: Rows a file's value reader reads at a time.
        cache: Where the files' key columns are kept between lookups
            (``None``: nothing kept).

    Raises:
        ValueError: a file of ``bucket`` is at level 0 (level 0 is not a sorted run).

    Memory: the cache's bound, one key batch per level, one value batch per
    level (the file reaching past the last chunk), and one chunk's matches.

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
        cache: LookupKeyCache | None = KEY_CACHE,
    ) -> None:
        if any(f.level == 0 for f in bucket.files):
            raise ValueError("LookupLevels looks only in levels >= 1 (sorted runs)")
        self.ctx = ctx
        self.bucket = bucket
        self.files = bucket.files
        self.batch_rows = batch_rows
        self.cache = cache
        self.key_names = tuple(key_column(k) for k in ctx.spec.key_names)
        self.schema = ctx.kv_schema(value_columns)
        self.value_columns = tuple(value_columns)
        self._key_schema = ctx.kv_schema(())
        by_level: dict[int, list[int]] = {}
        for i, f in enumerate(self.files):
            by_level.setdefault(f.level, []).append(i)
        self._cursors = [_LevelCursor(self, lv, by_level[lv]) for lv in sorted(by_level)]
        self._readers: dict[int, _ValueReader] = {}
        self._last: tuple[Any, ...] | None = None

    @property
    def empty(self) -> bool:
        """Whether there is no file to look in (every lookup finds nothing)."""
        return not self._cursors

    def key_batches(self, file: DataFileMeta) -> Iterator[_KeyBatch]:
        """The key batches of ``file`` in file order (every row, deletion vector not applied).

        Small files are read whole and cached; larger ones stream.

        Raises:
            FileNotFoundError: the file is missing.
        """
        path = self.bucket.path_of(file)
        key = _cache_key(self.ctx, path)
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                yield from cached
                return
        batches = self._read_key_batches(file, path)
        if self.cache is None or file.row_count > _CACHE_ROWS_PER_FILE:
            yield from batches
            return
        whole = tuple(batches)
        self.cache.put(key, whole)
        yield from whole

    def _read_key_batches(self, file: DataFileMeta, path: str) -> Iterator[_KeyBatch]:
        read = self.ctx.read_file(file, path, self._key_schema, batch_rows=_KEY_BATCH_ROWS)
        return _key_batches(read, self.key_names)

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
        names = self.key_names
        low = java_order_key(keys.column(n)[0].as_py() for n in names)
        high = java_order_key(keys.column(n)[keys.num_rows - 1].as_py() for n in names)
        if self._last is not None:
            if low <= self._last:
                raise ValueError("LookupLevels.lookup: chunks must come in ascending key order")
            self._close_readers(self._last)  # those :meth:`values` opened
        self._last = high
        probe = encode_keys(keys, names)
        parts: list[_Matches] = []
        for cursor in self._cursors:
            cursor.probe(probe, low, high, parts)
        if not parts:
            return out_schema.empty_table()
        rows = np.concatenate([p.rows for p in parts])
        levels = np.concatenate([p.levels for p in parts])
        order = np.lexsort((levels, rows))
        first = np.ones(order.size, dtype=np.bool_)
        first[1:] = rows[order][1:] != rows[order][:-1]
        pick = order[first]
        rows = rows[pick]
        files = np.concatenate([p.files for p in parts])[pick]
        positions = np.concatenate([p.positions for p in parts])[pick]
        columns: dict[str, Any] = {LOOKUP_ROW: pa.array(rows)}
        taken = keys.select(list(names)).take(pa.array(rows))
        for n in names:
            columns[n] = taken.column(n)
        columns[SEQUENCE_NUMBER] = pa.array(np.concatenate([p.sequence for p in parts])[pick])
        columns[VALUE_KIND] = pa.array(np.concatenate([p.kinds for p in parts])[pick])
        if self.value_columns:
            values = self._values(files, positions, self.value_columns)
            for n in self.value_columns:
                columns[n] = values.column(n)
        columns[LOOKUP_FILE] = pa.array(
            [self.files[i].file_name for i in files.tolist()], type=pa.string()
        )
        columns[LOOKUP_POSITION] = pa.array(positions)
        columns[LOOKUP_LEVEL] = pa.array(levels[pick])
        self._close_readers(high)
        return pa.table([columns[n] for n in out_schema.names], names=out_schema.names).cast(
            out_schema
        )

    def values(self, found: pa.Table, columns: Sequence[str]) -> pa.Table:
        """The value ``columns`` of the records of a :meth:`lookup` result, row-aligned.

        Args:
            found: Rows of a :meth:`lookup` result (:data:`LOOKUP_FILE`,
                :data:`LOOKUP_POSITION`), in the order it returned them.
            columns: Value columns of the table.

        Raises:
            FileNotFoundError: a data file is missing.
        """
        index = {f.file_name: i for i, f in enumerate(self.files)}
        files = np.asarray(
            [index[n] for n in found.column(LOOKUP_FILE).to_pylist()], dtype=np.int64
        )
        positions = np.asarray(found.column(LOOKUP_POSITION).to_numpy(), dtype=np.int64)
        return self._values(files, positions, tuple(columns))

    def _values(
        self,
        files: npt.NDArray[np.int64],
        positions: npt.NDArray[np.int64],
        columns: tuple[str, ...],
    ) -> pa.Table:
        """Value ``columns`` of the records at (``files[i]``, ``positions[i]``), aligned."""
        schema = self.ctx.kv_schema(columns)
        value_schema = pa.schema([schema.field(n) for n in columns])
        if files.size == 0:
            return value_schema.empty_table()
        parts: list[pa.Table] = []
        where: list[npt.NDArray[np.int64]] = []
        for index in np.unique(files).tolist():
            at = np.flatnonzero(files == index)
            at = at[np.argsort(positions[at], kind="stable")]
            reader = self._readers.get(index)
            if reader is None or reader.schema != schema:
                reader = _ValueReader(self, self.files[index], schema)
                self._readers[index] = reader
            parts.append(reader.take(positions[at]).select(list(columns)))
            where.append(at)
        combined = pa.concat_tables([p.cast(value_schema) for p in parts])
        back = np.empty(files.size, dtype=np.int64)
        back[np.concatenate(where)] = np.arange(files.size, dtype=np.int64)
        return combined.take(pa.array(back))

    def _close_readers(self, done: tuple[Any, ...]) -> None:
        """Drop the value readers of files ending at or before ``done`` (never asked again)."""
        cmp = self.ctx.cmp
        for index in [i for i in self._readers if cmp.key(self.files[i].max_key) <= done]:
            del self._readers[index]
