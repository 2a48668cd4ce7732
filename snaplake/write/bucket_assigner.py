"""Dynamic buckets (``bucket = -1``): each new key hash gets a bucket, each known one keeps its own.

:class:`PartitionIndex` is one partition's map from key hash to bucket,
restored from the partition's HASH index files (one file per bucket: every
key hash the bucket holds) and grown by :meth:`PartitionIndex.assign`.
:class:`HashBucketAssigner` keeps one per partition, restored lazily at the
partition's first write. snaplake runs one assigner per writer (one writer per
partition), so it owns every bucket id: Paimon's ``initial-buckets`` /
``assigner-parallelism`` split of bucket ids between assigners is the case of
one assigner.

Assignment of a hash (Paimon ``PartitionIndex.assign``):

1. a known hash keeps its bucket;
2. else the first bucket (smallest id) holding fewer than
   ``dynamic-bucket.target-row-num`` distinct hashes takes it (buckets found
   full are dropped from the candidates);
3. else, unless the partition is capped, the smallest unused bucket id (at
   most ``dynamic-bucket.max-buckets - 1``; without max-buckets at most
   32766, beyond which :class:`~snaplake.errors.InvalidOptionError`);
4. a capped partition (its largest bucket id is ``max-buckets - 1``) puts it
   into one of its buckets, chosen at random (seeded by the hash, so every
   writer puts a key into the same bucket).

Counts are of distinct hashes, so keys whose hashes collide share a bucket.
Lookups of known hashes are vectorised (sorted arrays and ``searchsorted``);
new hashes are assigned in ascending order, a run per bucket (a Python loop
over hashes only once a partition is capped).

Source: Paimon ``HashBucketAssigner``, ``PartitionIndex``,
``DynamicBucketIndexMaintainer`` (the per-bucket hash sets written at commit).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from snaplake.commit.message import CommitMessage
from snaplake.errors import InvalidOptionError
from snaplake.store.format.bucket import hash_binary_rows
from snaplake.store.format.hash_index import write_hash_index
from snaplake.store.format.index_file import IndexFileMeta, index_path
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import TableSchema
from snaplake.store.io.file_io import FileIO

__all__ = [
    "MAX_BUCKET_ID",
    "DynamicBucketIndex",
    "HashBucketAssigner",
    "HashLoader",
    "PartitionIndex",
]

MAX_BUCKET_ID = 32766
"""The largest bucket id a dynamic-bucket table gets without ``max-buckets`` (Java
``PartitionIndex`` tries ids below ``Short.MAX_VALUE``)."""

HashLoader = Callable[[bytes], Mapping[int, tuple[IndexFileMeta, npt.NDArray[np.int32]]]]
"""Reads one partition's HASH index: ``{bucket: (its HASH file, int32 key hashes)}`` of the
snapshot the writer restores from (``{}`` for a new partition or table)."""

_EMPTY = np.zeros(0, dtype=np.int32)


def _lookup(
    keys: npt.NDArray[np.int32],
    values: npt.NDArray[np.int32],
    wanted: npt.NDArray[np.int32],
    out: npt.NDArray[np.int32],
) -> npt.NDArray[np.bool_]:
    """Set ``out[i] = values[j]`` where sorted ``keys[j] == wanted[i]``; return which were found."""
    if len(keys) == 0:
        return np.zeros(len(wanted), dtype=bool)
    pos = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    found: npt.NDArray[np.bool_] = keys[pos] == wanted
    out[found] = values[pos[found]]
    return found


def _nothing(_partition: bytes) -> dict[int, tuple[IndexFileMeta, npt.NDArray[np.int32]]]:
    """A partition restored as empty (see ``HashBucketAssigner.ignore_previous_files``)."""
    return {}


class PartitionIndex:
    """One partition's key hash -> bucket map, with the distinct-hash count of each bucket.

    Args:
        restored: ``{bucket: int32 hashes}`` of the partition's HASH files
            (each file's hashes distinct, as Paimon writes them).
        target_row_num: ``dynamic-bucket.target-row-num`` (> 0).
        max_buckets: ``dynamic-bucket.max-buckets`` (-1 = no cap).

    Raises:
        InvalidOptionError: from :meth:`assign`, when no bucket id is left.

    Source: Paimon ``PartitionIndex`` (one assigner owning every bucket).
    """

    def __init__(
        self,
        restored: Mapping[int, npt.NDArray[np.int32]],
        *,
        target_row_num: int,
        max_buckets: int,
    ) -> None:
        self.target_row_num = target_row_num
        self.max_buckets = max_buckets
        order = sorted(restored)
        hashes = [np.asarray(restored[b], dtype=np.int32) for b in order]
        buckets = [np.full(len(h), b, dtype=np.int32) for b, h in zip(order, hashes, strict=True)]
        all_hashes = np.concatenate(hashes) if hashes else _EMPTY
        all_buckets = np.concatenate(buckets) if buckets else _EMPTY
        sort = np.argsort(all_hashes, kind="stable")
        self._hashes: npt.NDArray[np.int32] = all_hashes[sort]
        self._buckets: npt.NDArray[np.int32] = all_buckets[sort]
        self._restored = {b: np.asarray(restored[b], dtype=np.int32) for b in order}
        self.counts: dict[int, int] = {b: len(h) for b, h in zip(order, hashes, strict=True)}
        """Distinct hashes per bucket (restored and assigned)."""
        # Candidates by id (a heap): the smallest non-full bucket takes the next new hash.
        self._non_full = [b for b in order if self.counts[b] < target_row_num]
        # Hashes assigned since the restore: sorted arrays (lookups), and per bucket.
        self._added_hashes: npt.NDArray[np.int32] = _EMPTY
        self._added_buckets: npt.NDArray[np.int32] = _EMPTY
        self._added_by_bucket: dict[int, list[npt.NDArray[np.int32]]] = {}
        self._changed: set[int] = set()
        self._max_bucket_id = max(order, default=-1)
        self._free = 0

    def assign(self, hashes: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
        """Return the bucket of every hash in ``hashes`` (int32, same length), assigning new ones.

        New hashes are assigned in ascending order, a run at a time (a Python
        loop over buckets, not hashes, until a partition is capped).

        Raises:
            InvalidOptionError: a new hash needs a bucket id above 32766 (no
                ``max-buckets``): raise ``dynamic-bucket.target-row-num``.
        """
        hashes = np.asarray(hashes, dtype=np.int32)
        if len(hashes) == 0:
            return _EMPTY
        unique, inverse = np.unique(hashes, return_inverse=True)
        out = np.empty(len(unique), dtype=np.int32)
        found = _lookup(self._hashes, self._buckets, unique, out)
        found |= _lookup(self._added_hashes, self._added_buckets, unique, out)
        new = unique[~found]
        if len(new):
            assigned = self._assign_new(new)
            out[~found] = assigned
            added = np.concatenate((self._added_hashes, new))
            order = np.argsort(added, kind="stable")
            self._added_hashes = added[order]
            self._added_buckets = np.concatenate((self._added_buckets, assigned))[order]
        return out[inverse.reshape(-1)]

    def _assign_new(self, new: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
        """Buckets of ``new`` (hashes unknown to the partition, ascending), filled in order."""
        out = np.empty(len(new), dtype=np.int32)
        start = 0
        while start < len(new):
            bucket = self._next_bucket()
            if bucket is None:  # capped: Paimon picks at random; seeded by the hash, alike
                choices = sorted(self.counts)
                for i in range(start, len(new)):
                    h = int(new[i])
                    out[i] = self._put(new[i : i + 1], random.Random(h).choice(choices))
                break
            end = min(len(new), start + self.target_row_num - self.counts[bucket])
            out[start:end] = self._put(new[start:end], bucket)
            start = end
        return out

    def _next_bucket(self) -> int | None:
        """The smallest non-full bucket, else a new one, else ``None`` (the partition is capped).

        Raises:
            InvalidOptionError: no bucket id is left and there is no ``max-buckets``.
        """
        while self._non_full:
            bucket = self._non_full[0]
            if self.counts[bucket] < self.target_row_num:
                return bucket
            heapq.heappop(self._non_full)
        capped = self.max_buckets != -1 and self._max_bucket_id >= self.max_buckets - 1
        if capped and self.counts:
            return None
        while self._free in self.counts:  # ids are never removed: the cursor only grows
            self._free += 1
        if self._free > MAX_BUCKET_ID:
            if self.max_buckets != -1 and self.counts:
                return None
            raise InvalidOptionError(
                f"a dynamic-bucket partition would need more than {MAX_BUCKET_ID + 1} "
                "buckets; raise 'dynamic-bucket.target-row-num' or set "
                "'dynamic-bucket.max-buckets'",
                key="dynamic-bucket.target-row-num",
                value=str(self.target_row_num),
            )
        bucket = self._free
        self.counts[bucket] = 0
        heapq.heappush(self._non_full, bucket)
        self._max_bucket_id = max(self._max_bucket_id, bucket)
        return bucket

    def _put(self, hashes: npt.NDArray[np.int32], bucket: int) -> int:
        self.counts[bucket] = self.counts.get(bucket, 0) + len(hashes)
        self._added_by_bucket.setdefault(bucket, []).append(hashes)
        self._changed.add(bucket)
        return bucket

    def bucket_hashes(self, bucket: int) -> npt.NDArray[np.int32]:
        """Every hash of ``bucket``: its restored HASH file plus those assigned since (int32)."""
        parts = [self._restored.get(bucket, _EMPTY), *self._added_by_bucket.get(bucket, ())]
        return np.concatenate(parts).astype(np.int32, copy=False)

    def take_changed_buckets(self) -> list[int]:
        """Buckets that got a new hash since the last call (or the restore), in id order."""
        changed, self._changed = sorted(self._changed), set()
        return changed


class HashBucketAssigner:
    """The dynamic-bucket assigner of one writer: a :class:`PartitionIndex` per partition.

    Args:
        load: Reads a partition's HASH index (see :data:`HashLoader`); called
            once per partition, at its first :meth:`assign`.
        target_row_num: ``dynamic-bucket.target-row-num`` (> 0).
        max_buckets: ``dynamic-bucket.max-buckets`` (-1 or 1..32767).

    Not thread-safe (a writer assigns from one thread).

    Source: Paimon ``HashBucketAssigner`` (one assigner: ``numAssigners = 1``).
    """

    def __init__(self, load: HashLoader, *, target_row_num: int, max_buckets: int) -> None:
        self._load = load
        self.target_row_num = target_row_num
        self.max_buckets = max_buckets
        self.partitions: dict[bytes, PartitionIndex] = {}
        """The partitions restored so far, by BinaryRow bytes."""
        self.files: dict[bytes, dict[int, IndexFileMeta]] = {}
        """Each restored partition's current HASH file per bucket (the restored one, then
        the one the writer's last ``prepare_commit`` wrote)."""

    def ignore_previous_files(self) -> None:
        """Restore partitions not used yet as empty (an overwrite replaces them).

        Raises:
            ValueError: a partition was restored already.
        """
        if self.partitions:
            raise ValueError("ignore_previous_files must be called before the first write")
        self._load = _nothing

    def index(self, partition: bytes) -> PartitionIndex:
        """The index of ``partition``, restored now if this is its first use.

        Raises:
            CorruptMetadataError: a HASH index file is missing or malformed (from ``load``).
        """
        found = self.partitions.get(partition)
        if found is None:
            restored = self._load(partition)
            found = PartitionIndex(
                {b: hashes for b, (_, hashes) in restored.items()},
                target_row_num=self.target_row_num,
                max_buckets=self.max_buckets,
            )
            self.partitions[partition] = found
            self.files[partition] = {b: meta for b, (meta, _) in restored.items()}
        return found

    def assign(self, partition: bytes, hashes: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
        """Return the bucket of each key hash of ``partition`` (see :meth:`PartitionIndex.assign`).

        Raises:
            InvalidOptionError: the partition ran out of bucket ids.
            CorruptMetadataError: restoring the partition's index failed.
        """
        return self.index(partition).assign(hashes)


class DynamicBucketIndex:
    """A dynamic-bucket writer's buckets: assigns rows, keeps each bucket's HASH file complete.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory (names the HASH files).
        schema: The table schema (``bucket = -1``, primary key holding every
            partition key); its ``dynamic-bucket.*`` options.
        load: Reads a partition's HASH index from the snapshot the writer
            restores from (see :data:`HashLoader`).

    Source: Paimon ``HashBucketAssigner`` (assignment) and
    ``DynamicBucketIndexMaintainer`` (one complete new HASH file per bucket
    whose hashes grew, in ``DataIncrement.newIndexFiles``; the old file is
    replaced by the commit's per-bucket combine, never deleted explicitly).
    """

    def __init__(
        self, *, file_io: FileIO, paths: PathFactory, schema: TableSchema, load: HashLoader
    ) -> None:
        opts = schema.core_options
        self.file_io = file_io
        self.paths = paths
        self.total_buckets = opts.bucket
        self.assigner = HashBucketAssigner(
            load,
            target_row_num=opts.dynamic_bucket_target_row_num,
            max_buckets=opts.dynamic_bucket_max_buckets,
        )
        self._key = list(schema.trimmed_primary_keys)
        self._key_types = list(schema.key_types)
        self._ignore_previous = False

    def ignore_previous_files(self) -> None:
        """Restore no HASH index from now on: the writer's messages overwrite their partitions.

        Call before the first write. Source: Paimon ``SimpleHashBucketAssigner``
        (an overwrite's assigner) and ``DynamicBucketIndexMaintainer`` restored
        with ``ignorePreviousFiles``.
        """
        self.assigner.ignore_previous_files()
        self._ignore_previous = True

    def rewrite_rows(self, table: pa.Table, kinds: pa.Array) -> tuple[pa.Table, pa.Array]:
        """``table`` and ``kinds`` unchanged (a key never leaves its partition)."""
        return table, kinds

    def assign(
        self, rows: pa.Table, partitions: Sequence[tuple[bytes, int, int]]
    ) -> npt.NDArray[np.int32]:
        """The bucket of each row (the writer's ``BucketAssign``).

        ``partitions``: ``(partition, start, end)``: rows ``[start, end)`` are
        of ``partition``. The key hash is ``BinaryRow.hashCode()`` of the
        trimmed primary key, the hash fixed buckets use
        (:func:`~snaplake.store.format.bucket.hash_binary_rows`), computed for
        all rows at once.

        Raises:
            InvalidOptionError: a partition ran out of bucket ids.
            CorruptMetadataError: restoring a partition's HASH index failed.
        """
        hashes = hash_binary_rows(rows, self._key, self._key_types)
        out = np.empty(rows.num_rows, dtype=np.int32)
        for partition, start, end in partitions:
            out[start:end] = self.assigner.assign(partition, hashes[start:end])
        return out

    def prepare_commit(self, messages: Sequence[CommitMessage]) -> list[CommitMessage]:
        """Write a complete HASH file for every bucket with new hashes; add it to its message.

        A bucket with new hashes but no message gets one of its own (no data
        files). The bucket's HASH file the writer restored (or last wrote) goes
        into ``deleted_index_files`` (for a bucket that had none, the new file
        itself): the commit refuses to replace any other file there (a
        concurrent writer added keys to the bucket), see
        :func:`~snaplake.commit.index_conflict.check_hash_replacements`.
        Paimon names no replaced file (its combine replaces whatever is there);
        the index manifest written is the same. A bucket that got data files
        but no new hash names its restored HASH file in ``kept_index_files``:
        the commit refuses when another is live there by then (an overwrite
        or another writer moved the bucket's keys). An overwrite's writer
        (:meth:`ignore_previous_files`) names none.

        Raises:
            StorageError: writing a HASH file failed (the files written here are deleted).

        Storage: writes one ``index/index-<uuid>-<n>`` per changed bucket and
        starts syncing them (``FileIO.sync_in_background``).
        """
        out = {(m.partition, m.bucket): m for m in messages}
        written: list[str] = []
        try:
            replaced: list[tuple[bytes, int, IndexFileMeta]] = []
            for partition, index in self.assigner.partitions.items():
                files = self.assigner.files[partition]
                for bucket in index.take_changed_buckets():
                    meta = write_hash_index(self.file_io, self.paths, index.bucket_hashes(bucket))
                    written.append(index_path(self.paths, meta))
                    replaced.append((partition, bucket, meta))
                    found = out.get((partition, bucket))
                    if found is None:
                        found = CommitMessage(
                            partition=partition, bucket=bucket, total_buckets=self.total_buckets
                        )
                    increment = replace(
                        found.data_increment,
                        new_index_files=(meta,),
                        deleted_index_files=self._replaces(files.get(bucket), meta),
                    )
                    out[(partition, bucket)] = replace(found, data_increment=increment)
        except BaseException:
            self.file_io.delete_many(written)
            raise
        self.file_io.sync_in_background(written)  # the commit's publish finds them durable
        changed = {(p, b) for p, b, _ in replaced}
        if not self._ignore_previous:
            for key, message in out.items():
                restored = self.assigner.files.get(key[0], {}).get(key[1])
                if key in changed or restored is None or not message.data_increment.new_files:
                    continue
                increment = replace(message.data_increment, kept_index_files=(restored,))
                out[key] = replace(message, data_increment=increment)
        for partition, bucket, meta in replaced:
            self.assigner.files[partition][bucket] = meta
        return list(out.values())

    def _replaces(self, old: IndexFileMeta | None, new: IndexFileMeta) -> tuple[IndexFileMeta, ...]:
        """The HASH file a bucket's new one replaces, for the commit's check (see above)."""
        if self._ignore_previous:
            return ()
        return (new,) if old is None else (old,)

    def abort(self, messages: Sequence[CommitMessage]) -> None:
        """Delete the HASH files uncommitted ``messages`` add (missing: fine).

        Storage: deletes index files only.
        """
        self.file_io.delete_many(
            [index_path(self.paths, f) for m in messages for f in m.data_increment.new_index_files]
        )
