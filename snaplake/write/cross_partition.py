"""Cross-partition upserts: ``bucket = -1`` and a primary key lacking a partition key.

A key may move between partitions, so a writer keeps a map from every live
key to its (partition, bucket) (:class:`KeyPartitionIndex`), bootstrapped
from the latest snapshot at the writer's first write and kept up to date as it
writes. :class:`CrossPartitionIndex` rewrites each batch before it is routed
(Paimon ``GlobalIndexAssigner.processInput``):

- deduplicate: a row whose key lives in another partition is written into its
  own partition and a ``-D`` of the key (the row with the old partition's
  values) into the key's old (partition, bucket); a ``-U``/``-D`` row goes to
  the key's current (partition, bucket) and the key leaves the map (one for a
  key the map does not know is dropped: there is nothing to retract);
- first-row: a row whose key lives anywhere is dropped.

Within one batch the rows of a key collapse first (deduplicate keeps the
last, first-row the first), so a key is written at most once per partition
per batch. A new key's bucket within its partition is the smallest bucket
holding fewer than ``dynamic-bucket.target-row-num`` keys, else a new one
(Paimon ``crosspartition.BucketAssigner``; counts are of keys and drop when
a key leaves). No HASH index files are written (Paimon writes none).

Concurrent writers (snaplake's own rule; Paimon allows one writer job): the
map is exact at one snapshot, which every prepared message names
(``DataIncrement.key_map_snapshot``). At each round of writes after a
``prepare_commit`` the writer moves that snapshot past its own commits and
COMPACTs (reading only the snapshot files since); another writer's commit
stops it there, and a commit of this writer that writes a key that commit
wrote is refused (``CrossPartitionConflictError``,
:func:`~snaplake.commit.key_conflict.check_key_races`): ``abort`` drops the
map (and the writer's sequence numbers), so the same rows written again
are placed by the map of the new latest snapshot.

``cross-partition-upsert.index-ttl``: an entry not written for that long
counts as absent (Paimon's index TTL; a key may then be duplicated, as Paimon
documents). The clock is injectable, so tests never wait.

Source: Paimon ``crosspartition.GlobalIndexAssigner``, ``IndexBootstrap``,
``BucketAssigner``, ``ExistingProcessor`` (``DeleteExistingProcessor``,
``SkipNewExistingProcessor``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.commit.key_conflict import key_array
from snaplake.commit.message import CommitMessage
from snaplake.errors import UnsupportedTableError
from snaplake.options.registry import CROSS_PARTITION_UPSERT_INDEX_TTL
from snaplake.store.format.binary_row import decode_binary_row, encode_binary_row
from snaplake.store.format.primary_key import MergeEngine
from snaplake.store.format.schema import TableSchema

__all__ = [
    "BucketIndex",
    "CrossPartitionIndex",
    "KeyBootstrap",
    "KeyPartitionIndex",
]

KeyBootstrap = Callable[[], tuple[int, Iterable[tuple[bytes, int, pa.Table]]]]
"""Returns the id of the snapshot a cross-partition writer starts from (0 = none) and
``(partition, bucket, key columns of its live rows)`` for every bucket of it."""

_RETRACT = (1, 3)  # -U, -D
_DELETE = 3


class BucketIndex(Protocol):
    """A writer's bucket assignment for ``bucket = -1`` (dynamic or cross-partition)."""

    def rewrite_rows(self, table: pa.Table, kinds: pa.Array) -> tuple[pa.Table, pa.Array]:
        """The rows (and int8 kinds) to route: ``table`` itself, or rewritten (cross-partition)."""

    def assign(
        self, rows: pa.Table, partitions: Sequence[tuple[bytes, int, int]]
    ) -> npt.NDArray[np.int32]:
        """The bucket of each row (of the last :meth:`rewrite_rows`).

        Rows ``[start, end)`` of each ``(partition, start, end)`` are of that
        partition (see ``BucketAssign``).
        """

    def prepare_commit(self, messages: Sequence[CommitMessage]) -> list[CommitMessage]:
        """The messages with the index files they add."""

    def abort(self, messages: Sequence[CommitMessage]) -> None:
        """Forget what uncommitted ``messages`` added (deleting their index files)."""

    def ignore_previous_files(self) -> None:
        """The messages overwrite their partitions (call before the first write)."""


class KeyPartitionIndex:
    """Every live key of a cross-partition table with its partition id, bucket and age.

    Arrays, not Python objects: the keys (an Arrow array, see
    :func:`key_array`), int32 partition id (-1 = removed), int32 bucket and
    int64 write time in ms (see ``docs/primary-key-tables.md`` for memory per
    million keys). Lookups hash the whole key array once per batch
    (``pyarrow.compute.index_in``).

    Args:
        ttl_millis: ``cross-partition-upsert.index-ttl`` in ms (``None`` = never).
        clock: Current time in ms (default: the wall clock).
    """

    def __init__(self, *, ttl_millis: int | None, clock: Callable[[], int]) -> None:
        self.ttl_millis = ttl_millis
        self.clock = clock
        self.keys: pa.Array | None = None
        self.parts = np.zeros(0, dtype=np.int32)
        self.buckets = np.zeros(0, dtype=np.int32)
        self.stamps = np.zeros(0, dtype=np.int64)
        self.removed = 0

    def __len__(self) -> int:
        """Keys held, removed and expired ones included."""
        return len(self.parts)

    def lookup(self, keys: pa.Array) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Position of each of ``keys`` in the index (-1 = never held), and whether it is live.

        An entry is not live once removed or older than the TTL.
        """
        if self.keys is None or len(self.keys) == 0:
            return np.full(len(keys), -1, dtype=np.int64), np.zeros(len(keys), dtype=bool)
        found = pc.index_in(keys.cast(self.keys.type), value_set=self.keys)
        pos = np.asarray(found.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
        live = pos >= 0
        live[live] = self.parts[pos[live]] >= 0
        if self.ttl_millis is not None:
            cut = self.clock() - self.ttl_millis
            live[live] = self.stamps[pos[live]] >= cut
        return pos, live

    def append(
        self, keys: pa.Array, parts: npt.NDArray[np.int32], buckets: npt.NDArray[np.int32]
    ) -> None:
        """Add entries for ``keys`` (unknown to the index), stamped now; compact if half removed."""
        now = self.clock()
        stamps = np.full(len(keys), now, dtype=np.int64)
        if self.keys is None:
            self.keys = keys
        else:
            self.keys = pa.concat_arrays([self.keys, keys.cast(self.keys.type)])
        self.parts = np.concatenate((self.parts, parts.astype(np.int32)))
        self.buckets = np.concatenate((self.buckets, buckets.astype(np.int32)))
        self.stamps = np.concatenate((self.stamps, stamps))
        if self.removed * 2 > len(self.parts):
            self._compact()

    def update(
        self,
        pos: npt.NDArray[np.int64],
        parts: npt.NDArray[np.int32],
        buckets: npt.NDArray[np.int32],
    ) -> None:
        """Set the entries at ``pos`` (-1 parts remove them), stamped now."""
        was_removed = self.parts[pos] < 0
        self.removed += int(np.count_nonzero(parts < 0)) - int(np.count_nonzero(was_removed))
        self.parts[pos] = parts
        self.buckets[pos] = buckets
        self.stamps[pos] = self.clock()

    def _compact(self) -> None:
        assert self.keys is not None
        keep = self.parts >= 0
        self.keys = self.keys.filter(pa.array(keep))
        self.parts, self.buckets, self.stamps = (
            self.parts[keep], self.buckets[keep], self.stamps[keep]
        )  # fmt: skip
        self.removed = 0


class CrossPartitionIndex:
    """A cross-partition writer's key map and bucket assignment (see the module docstring).

    Args:
        schema: The table schema (``bucket = -1``, primary key lacking a
            partition key, deduplicate or first-row).
        bootstrap: Reads the live keys of the snapshot the writer starts from
            (see :data:`KeyBootstrap`); called at the first write, and again
            after :meth:`abort`.
        advance: Given the snapshot id the map is exact at, the latest id it
            is still exact at (past this writer's own commits; see
            :func:`~snaplake.commit.key_conflict.last_exact_snapshot`);
            called at the first write after each :meth:`prepare_commit`.
            ``None`` = the map stays at its bootstrap snapshot.
        clock: Current time in ms, for ``cross-partition-upsert.index-ttl``.

    Not thread-safe (a writer writes from one thread).

    Source: Paimon ``GlobalIndexAssigner``.
    """

    def __init__(
        self,
        *,
        schema: TableSchema,
        bootstrap: KeyBootstrap,
        advance: Callable[[int], int] | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        opts = schema.core_options
        ttl = opts.get(CROSS_PARTITION_UPSERT_INDEX_TTL)
        self._ttl = None if ttl is None else int(ttl.total_seconds() * 1000)
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._schema = schema
        self._key = list(schema.primary_keys)
        self._partition_keys = list(schema.partition_keys)
        self._partition_types = list(schema.partition_types)
        self._first_row = opts.merge_engine == MergeEngine.FIRST_ROW
        self._target = opts.dynamic_bucket_target_row_num
        self._bootstrap = bootstrap
        self._advance = advance
        self._index: KeyPartitionIndex | None = None
        self._snapshot = 0  # the snapshot id the map is exact at
        self._prepared = False  # prepare_commit ran since the last write
        self._part_ids: dict[bytes, int] = {}
        self._part_rows: list[bytes] = []
        self._counts: dict[int, dict[int, int]] = {}
        self._pending: dict[int, tuple[pa.Array, npt.NDArray[np.int32]]] = {}

    # ------------------------------------------------------------------ index
    def _part_id(self, partition: bytes) -> int:
        found = self._part_ids.get(partition)
        if found is None:
            found = self._part_ids[partition] = len(self._part_rows)
            self._part_rows.append(partition)
        return found

    def index(self) -> KeyPartitionIndex:
        """The key map, bootstrapped now if this is the first use (or after an abort).

        Raises:
            CorruptMetadataError / FileNotFoundError: reading the snapshot failed.

        Storage: reads the key columns of every live data file of the snapshot.
        """
        if self._index is None:
            index = KeyPartitionIndex(ttl_millis=self._ttl, clock=self._clock)
            self._counts = {}
            keys, parts, buckets = [], [], []
            self._snapshot, found = self._bootstrap()
            self._prepared = False
            for partition, bucket, rows in found:
                if rows.num_rows == 0:
                    continue
                pid = self._part_id(partition)
                keys.append(key_array(rows, self._key))
                parts.append(np.full(rows.num_rows, pid, dtype=np.int32))
                buckets.append(np.full(rows.num_rows, bucket, dtype=np.int32))
                counts = self._counts.setdefault(pid, {})
                counts[bucket] = counts.get(bucket, 0) + rows.num_rows
            if keys:
                index.append(pa.concat_arrays(keys), np.concatenate(parts), np.concatenate(buckets))
            self._index = index
        return self._index

    def _new_buckets(self, pids: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
        """Buckets for new keys in partitions ``pids``: fill the smallest non-full bucket."""
        out = np.empty(len(pids), dtype=np.int32)
        for pid in np.unique(pids).tolist():
            where = np.flatnonzero(pids == pid)
            counts = self._counts.setdefault(pid, {})
            start, bucket = 0, 0
            while start < len(where):
                while counts.get(bucket, 0) >= self._target:
                    bucket += 1
                end = min(len(where), start + self._target - counts.get(bucket, 0))
                out[where[start:end]] = bucket
                counts[bucket] = counts.get(bucket, 0) + end - start
                start = end
        return out

    def _leave(self, pids: npt.NDArray[np.int32], buckets: npt.NDArray[np.int32]) -> None:
        for pid, bucket in zip(pids.tolist(), buckets.tolist(), strict=True):
            counts = self._counts.setdefault(pid, {})
            counts[bucket] = max(0, counts.get(bucket, 0) - 1)

    # ------------------------------------------------------------------ rows
    def _row_parts(self, table: pa.Table) -> npt.NDArray[np.int32]:
        """The partition id of every row of ``table``."""
        code = np.zeros(table.num_rows, dtype=np.int64)
        for name in self._partition_keys:
            encoded = pc.dictionary_encode(table.column(name).combine_chunks())
            idx = np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False))
            code = code * (len(encoded.dictionary) + 1) + (idx + 1)
        uniq, first, inverse = np.unique(code, return_index=True, return_inverse=True)
        ids = np.empty(len(uniq), dtype=np.int32)
        for i, row in enumerate(first.tolist()):
            values = tuple(table.column(k)[row].as_py() for k in self._partition_keys)
            ids[i] = self._part_id(encode_binary_row(values, self._partition_types))
        return ids[inverse.reshape(-1)]

    def _with_partitions(self, table: pa.Table, pids: npt.NDArray[np.int32]) -> pa.Table:
        """``table`` with its partition columns set to the values of partitions ``pids``."""
        uniq, inverse = np.unique(pids, return_inverse=True)
        decoded = [decode_binary_row(self._part_rows[p], self._partition_types) for p in uniq]
        take = pa.array(inverse.reshape(-1).astype(np.int64))
        for j, name in enumerate(self._partition_keys):
            field = table.schema.field(name)
            values = pa.array([d[j] for d in decoded], type=field.type).take(take)
            table = table.set_column(table.column_names.index(name), field, values)
        return table

    def rewrite_rows(self, table: pa.Table, kinds: pa.Array) -> tuple[pa.Table, pa.Array]:
        """The rows to route for ``table`` (int8 ``kinds``); updates the key map.

        Returns the kept rows (collapsed per key; retractions moved to their
        key's partition) followed by the ``-D`` rows of keys that moved.

        Raises:
            CorruptMetadataError / FileNotFoundError: from the bootstrap.

        Storage: the first write bootstraps the map; the first after a
        ``prepare_commit`` reads the snapshot files committed since the map's
        snapshot (see ``advance``).
        """
        index = self.index()
        if self._prepared:
            self._prepared = False
            if self._advance is not None:
                self._snapshot = self._advance(self._snapshot)
        keys = key_array(table, self._key)
        rows = pa.table({"k": keys, "i": pa.array(np.arange(len(keys), dtype=np.int64))})
        agg = "min" if self._first_row else "max"
        keep = np.sort(rows.group_by("k").aggregate([("i", agg)]).column(f"i_{agg}").to_numpy())
        if len(keep) < table.num_rows:
            taken = pa.array(keep)
            table, kinds, keys = table.take(taken), kinds.take(taken), keys.take(taken)
        slot, known = index.lookup(keys)
        pos = np.where(known, slot, -1)
        pids = self._row_parts(table)
        old_pids = np.full(len(pos), -1, dtype=np.int32)
        old_buckets = np.full(len(pos), -1, dtype=np.int32)
        old_pids[known] = index.parts[pos[known]]
        old_buckets[known] = index.buckets[pos[known]]
        kind = np.asarray(kinds.to_numpy(zero_copy_only=False), dtype=np.int8)
        retract = np.isin(kind, _RETRACT)
        if self._first_row:
            drop = known | retract
            stay = np.zeros(len(pos), dtype=bool)
            move = stay
        else:
            drop = retract & ~known
            stay = known & (retract | (old_pids == pids))
            move = known & ~retract & (old_pids != pids)
        new = ~drop & ~stay  # new keys and moved ones: a new bucket in their partition
        buckets = np.where(stay, old_buckets, -1).astype(np.int32)
        buckets[new] = self._new_buckets(pids[new])
        row_pids = np.where(stay, old_pids, pids).astype(np.int32)
        if (stay & retract).any():
            table = self._with_partitions(table, row_pids)
        # -D rows of moved keys into their old (partition, bucket).
        moved = np.flatnonzero(move)
        retracted = self._with_partitions(table.take(pa.array(moved)), old_pids[moved])
        keep_rows = np.flatnonzero(~drop)
        out = pa.concat_tables([table.take(pa.array(keep_rows)), retracted])
        out_kinds = pa.concat_arrays(
            [kinds.take(pa.array(keep_rows)), pa.array(np.full(len(moved), _DELETE, np.int8))]
        )
        out_pids = np.concatenate((row_pids[keep_rows], old_pids[moved]))
        out_buckets = np.concatenate((buckets[keep_rows], old_buckets[moved]))
        out_keys = pa.concat_arrays([keys.take(pa.array(keep_rows)), keys.take(pa.array(moved))])
        self._pending = {}
        for pid in np.unique(out_pids).tolist():
            where = np.flatnonzero(out_pids == pid)
            self._pending[pid] = (out_keys.take(pa.array(where)), out_buckets[where])
        # The key map: moved keys leave their old bucket; retracted keys leave the map.
        gone = stay & retract
        self._leave(old_pids[move | gone], old_buckets[move | gone])
        reuse = new & ~known & (slot >= 0)  # a removed or expired entry of the key
        update = move | (stay & ~retract) | gone | reuse
        index.update(
            slot[update],
            np.where(gone, -1, pids)[update].astype(np.int32),
            buckets[update],
        )
        added = new & (slot < 0)
        index.append(keys.filter(pa.array(added)), pids[added], buckets[added])
        return out, out_kinds

    def assign(
        self, rows: pa.Table, partitions: Sequence[tuple[bytes, int, int]]
    ) -> npt.NDArray[np.int32]:
        """The bucket of each row, as the last :meth:`rewrite_rows` chose (see ``BucketAssign``)."""
        out = np.empty(rows.num_rows, dtype=np.int32)
        for partition, start, end in partitions:
            keys, buckets = self._pending[self._part_ids[partition]]
            part = rows.slice(start, end - start)
            found = pc.index_in(key_array(part, self._key), value_set=keys)
            out[start:end] = buckets[np.asarray(found.to_numpy(zero_copy_only=False), np.int64)]
        return out

    def prepare_commit(self, messages: Sequence[CommitMessage]) -> list[CommitMessage]:
        """``messages``, each naming the snapshot the key map is exact at.

        ``DataIncrement.key_map_snapshot`` (the commit checks it, see the
        module docstring); no index files (Paimon writes none).
        """
        self._prepared = True
        return [
            dataclasses.replace(
                m,
                data_increment=dataclasses.replace(
                    m.data_increment, key_map_snapshot=self._snapshot
                ),
            )
            for m in messages
        ]

    def abort(self, messages: Sequence[CommitMessage]) -> None:
        """Forget the key map: the next write bootstraps it again from the latest snapshot.

        (After a ``CrossPartitionConflictError`` the rows written again are
        then placed by the other writers' commits too.)

        Storage: none (no index files).
        """
        self._index = None

    def ignore_previous_files(self) -> None:
        """Refuse an overwrite: its rows may retract keys in partitions it does not replace.

        A deduplicate row moving a key out of a partition outside the
        overwrite would need a ``-D`` there (refused by a static overwrite,
        and a dynamic one would replace that whole partition by the ``-D``);
        a first-row row whose key lived only in an overwritten partition
        would be dropped.

        Raises:
            UnsupportedTableError: always (before anything is written).
        """
        raise UnsupportedTableError(
            "overwrite of a cross-partition table (bucket = -1, primary key lacking a "
            "partition key) is not supported: a key moving out of a partition the overwrite "
            "does not replace would have to be deleted there; append (upsert) instead",
            feature="overwrite of a cross-partition table",
            operation="write",
        )
