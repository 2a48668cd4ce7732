"""FileStoreScan: the live data files of one snapshot, pruned and grouped into splits.

Reads the snapshot's base and delta manifest lists, skips manifests whose
``_PARTITION_STATS`` exclude the partition filter, reads the rest (in
parallel), merges ADD/DELETE entries oldest first, then keeps the live files
whose partition matches and whose stats may satisfy the predicate (which
stats: the table kind's :class:`~snaplake.store.read.stats_filter.StatsFilter`,
from its FileStore). Used by readers, by the commit (overwrite and conflict
checks) and by maintenance.

Source: Paimon ``AbstractFileStoreScan`` / ``ManifestsReader`` (manifest
pruning by partition stats, ``FileEntry.mergeEntries``, ``filterByStats``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from snaplake.errors import SchemaMismatchError
from snaplake.store.format.binary_row import decode_binary_row
from snaplake.store.format.data_file import DataFileMeta
from snaplake.store.format.deletion_vector import DeletionVector, decode_deletion_vectors
from snaplake.store.format.index_file import DELETION_VECTORS_INDEX, IndexFileMeta, index_path
from snaplake.store.format.manifest import FileKind, ManifestEntry, read_manifest_file
from snaplake.store.format.manifest_list import ManifestFileMeta, read_manifest_list
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.index_scan import read_index_entries
from snaplake.store.read.partition_dirs import (
    PartitionDirectories,
    has_uncomputable_partition_dirs,
)
from snaplake.store.read.predicate import Predicate
from snaplake.store.read.schema_evolution import file_stats_predicates
from snaplake.store.read.stats_filter import StatsFilter

__all__ = ["FileStoreScan", "Split", "merge_live_entries"]

_PARALLEL_MIN_MANIFESTS = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class Split:
    """The live files of one (partition, bucket) of a snapshot.

    Attributes:
        partition: Partition BinaryRow bytes.
        partition_values: Decoded partition values, in partition-key order.
        bucket: Bucket number.
        total_buckets: Bucket count recorded in the entries.
        files: Live data files, ordered by min sequence number.
        paths: Full storage path of each file, aligned with ``files``.
        deletion_files: The DELETION_VECTORS index files holding vectors of ``files``,
            each cut to the ranges of ``files`` (empty: no row of them is deleted).
        deletion_paths: Full storage path of each index file, aligned with ``deletion_files``.
        raw_convertible: Each file reads on its own, no key merge (a deletion-vector
            primary-key table whose files all sit above level 0 and hold no
            retractions; Paimon's ``DataSplit.rawConvertible``).
    """

    partition: bytes
    partition_values: tuple[Any, ...]
    bucket: int
    total_buckets: int
    files: tuple[DataFileMeta, ...]
    paths: tuple[str, ...]
    deletion_files: tuple[IndexFileMeta, ...] = ()
    deletion_paths: tuple[str, ...] = ()
    raw_convertible: bool = False

    @property
    def row_count(self) -> int:
        """Rows in the split's files."""
        return sum(f.row_count for f in self.files)

    def read_deletion_vectors(self, file_io: FileIO) -> dict[str, DeletionVector]:
        """The vectors of the split's files: data file name → vector (files without one absent).

        Raises:
            FileNotFoundError: an index file is missing (``filename`` names it;
                :class:`~snaplake.store.read.missing_files.MissingFileCheck`
                types it).
            CorruptMetadataError: an index file is damaged (the message names it).

        Storage: one read of each of :attr:`deletion_files` (none when empty).

        Source: Paimon ``DeletionVector.read(fileIO, DeletionFile)`` per data file of a
        ``DataSplit`` (here one read per index file).
        """
        vectors: dict[str, DeletionVector] = {}
        for meta, path in zip(self.deletion_files, self.deletion_paths, strict=True):
            data = file_io.read_bytes(path)
            vectors.update(decode_deletion_vectors(data, meta.dv_ranges or (), path=path))
        return vectors


def merge_live_entries(entries: Iterable[ManifestEntry]) -> dict[tuple[Any, ...], ManifestEntry]:
    """Apply DELETE entries to earlier ADDs; return the live ADD entries by identity.

    Entries must come oldest manifest first. A DELETE removes the ADD with the
    same identity; a DELETE without a prior ADD is dropped (its ADD was in an
    older, already-compacted range).

    Source: Paimon ``FileEntry.mergeEntries``.
    """
    live: dict[tuple[Any, ...], ManifestEntry] = {}
    for entry in entries:
        key = entry.identifier()
        if entry.kind == FileKind.ADD:
            live[key] = entry
        else:
            live.pop(key, None)
    return live


class FileStoreScan:
    """Plans the live files of one snapshot.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        schema_manager: To read the schema of the snapshot.
        snapshot: The snapshot to plan (``None`` = empty table: no files).
        partition_filter: ``{partition_key: value}`` equalities (a subset of
            the keys is fine), or predicates on partition keys.
        predicate: AND of predicates on any columns: those on partition keys
            prune by partition, the others by file stats through ``stats_filter``.
        read_schema: The schema the predicates' columns belong to (default:
            the snapshot's); files of other schemas are pruned by field id.
        stats_filter: Which predicates prune files, by which of a file's stats
            (the table kind's; a FileStore's ``new_scan`` passes it). ``None``:
            no file is pruned by its stats (a scan that lists files).
        only_real_buckets: Skip the files of negative buckets (the pending
            files of postpone-bucket tables, bucket -2), as Paimon's
            ``onlyReadRealBuckets`` does for batch reads and LSM compaction.
        deletion_vectors: Give each split the DELETION_VECTORS index files of its
            (partition, bucket) from the snapshot's index manifest (a read's scan).
        skip_level0: Leave out level-0 files (Paimon's ``batchScanSkipLevel0``).
        raw_convertible: Mark the splits whose files all sit above level 0 and
            hold no retractions (``delete_row_count`` 0 or unknown) as read file
            by file (Paimon's ``MergeTreeSplitGenerator`` under deletion vectors).
    """

    def __init__(
        self,
        *,
        file_io: FileIO,
        paths: PathFactory,
        schema_manager: SchemaManager,
        snapshot: Snapshot | None,
        partition_filter: Mapping[str, Any] | Sequence[Predicate] | None = None,
        predicate: Sequence[Predicate] = (),
        read_schema: TableSchema | None = None,
        stats_filter: StatsFilter | None = None,
        only_real_buckets: bool = False,
        deletion_vectors: bool = False,
        skip_level0: bool = False,
        raw_convertible: bool = False,
    ) -> None:
        self.file_io = file_io
        self.paths = paths
        self.schema_manager = schema_manager
        self.snapshot = snapshot
        self.schema: TableSchema | None = (
            schema_manager.schema(snapshot.schema_id) if snapshot is not None else None
        )
        if isinstance(partition_filter, Mapping):
            part_preds: tuple[Predicate, ...] = tuple(
                Predicate(column=k, op="is null" if v is None else "=", value=v)
                for k, v in partition_filter.items()
            )
        else:
            part_preds = tuple(partition_filter or ())
        keys = set(self.schema.partition_keys) if self.schema else set()
        for p in part_preds:
            if self.schema is not None and p.column not in keys:
                raise SchemaMismatchError(
                    f"partition filter column {p.column!r} is not a partition key "
                    f"{sorted(keys)}; use filter= for other columns"
                )
        # Predicates on partition keys prune by partition; the rest by file stats.
        self.partition_predicates = part_preds + tuple(p for p in predicate if p.column in keys)
        self.read_schema = read_schema if read_schema is not None else self.schema
        self.stats_filter = stats_filter
        self.min_bucket = 0 if only_real_buckets else -(2**31)
        self.deletion_vectors = deletion_vectors
        self.min_level = 1 if skip_level0 else 0
        self.raw_convertible = raw_convertible
        self.stats_predicates: tuple[Predicate, ...] = ()
        if stats_filter is not None and self.read_schema is not None:
            others = [p for p in predicate if p.column not in keys]
            self.stats_predicates = stats_filter.prunable(others, self.read_schema)
        self._partition_cache: dict[bytes, tuple[Any, ...]] = {}
        self._evolved: dict[int, tuple[tuple[Predicate, ...], tuple[Predicate, ...]]] = {}

    # manifests ------------------------------------------------------------
    def manifest_metas(self) -> list[ManifestFileMeta]:
        """Return base + delta ManifestFileMeta of the snapshot, oldest first."""
        snap = self.snapshot
        if snap is None:
            return []
        metas = read_manifest_list(self.file_io, self.paths.manifest_path(snap.base_manifest_list))
        metas = list(metas) + list(
            read_manifest_list(self.file_io, self.paths.manifest_path(snap.delta_manifest_list))
        )
        return metas

    def _manifest_may_match(self, meta: ManifestFileMeta) -> bool:
        if not self.partition_predicates or self.schema is None:
            return True
        types = self.schema.partition_types
        stats = meta.partition_stats
        if not types or stats.null_counts is None or len(stats.null_counts) != len(types):
            return True
        mins = decode_binary_row(stats.min_values, types)
        maxs = decode_binary_row(stats.max_values, types)
        index = {k: i for i, k in enumerate(self.schema.partition_keys)}
        for p in self.partition_predicates:
            i = index[p.column]
            if not p.may_match_stats(
                min_value=mins[i],
                max_value=maxs[i],
                null_count=stats.null_counts[i],
                row_count=meta.num_added_files + meta.num_deleted_files,
            ):
                return False
        return True

    def read_entries(self, metas: Sequence[ManifestFileMeta]) -> list[ManifestEntry]:
        """Read the entries of ``metas`` in order (parallel I/O, ordered result)."""
        paths = [self.paths.manifest_path(m.file_name) for m in metas]
        workers = min(self.file_io.read_parallelism, len(paths))
        if workers <= 1 or len(paths) < _PARALLEL_MIN_MANIFESTS:
            chunks = [read_manifest_file(self.file_io, p) for p in paths]
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                chunks = list(pool.map(lambda p: read_manifest_file(self.file_io, p), paths))
        out: list[ManifestEntry] = []
        for chunk in chunks:
            out.extend(chunk)
        return out

    # entries --------------------------------------------------------------
    def partition_values(self, partition: bytes) -> tuple[Any, ...]:
        """Decode a partition BinaryRow (cached per distinct bytes)."""
        values = self._partition_cache.get(partition)
        if values is None:
            assert self.schema is not None
            values = decode_binary_row(partition, self.schema.partition_types)
            self._partition_cache[partition] = values
        return values

    def _partition_matches(self, partition: bytes) -> bool:
        if not self.partition_predicates:
            return True
        assert self.schema is not None
        values = self.partition_values(partition)
        index = {k: i for i, k in enumerate(self.schema.partition_keys)}
        return all(p.test_value(values[index[p.column]]) for p in self.partition_predicates)

    def _file_predicates(self, file: DataFileMeta) -> tuple[Predicate, ...] | None:
        """The stats predicates on ``file``'s own columns; ``None`` if it cannot match."""
        read = self.read_schema
        if read is None or file.schema_id == read.id:
            return self.stats_predicates
        evolved = self._evolved.get(file.schema_id)
        if evolved is None:
            old = self.schema_manager.schema(file.schema_id)
            evolved = file_stats_predicates(old, read, self.stats_predicates)
            self._evolved[file.schema_id] = evolved
        on_file, absent = evolved
        n = file.row_count  # a column the file lacks is NULL in each of its rows
        if any(not p.may_match_stats(min_value=None, max_value=None, null_count=n, row_count=n)
               for p in absent):  # fmt: skip
            return None
        return on_file

    def _stats_match(self, file: DataFileMeta) -> bool:
        if not self.stats_predicates or self.stats_filter is None:
            return True
        predicates = self._file_predicates(file)
        if predicates is None:
            return False
        if not predicates:
            return True
        found = self.stats_filter.file_stats(file, self.schema_manager.schema(file.schema_id))
        names, stats = found.names, found.stats
        if not names or stats.null_counts is None or len(stats.null_counts) != len(names):
            return True
        mins = decode_binary_row(stats.min_values, found.types)
        maxs = decode_binary_row(stats.max_values, found.types)
        position = {n: i for i, n in enumerate(names)}
        for p in predicates:
            i = position.get(p.column)
            if i is None:
                continue
            if not p.may_match_stats(
                min_value=mins[i],
                max_value=maxs[i],
                null_count=stats.null_counts[i],
                row_count=file.row_count,
            ):
                return False
        return True

    def plan_entries(self) -> list[ManifestEntry]:
        """Return the live ADD entries that pass partition and stats pruning.

        Raises:
            CorruptMetadataError: a manifest list or manifest cannot be decoded.
            FileNotFoundError: a referenced metadata file is missing (the
                snapshot expired meanwhile, or damage:
                :class:`~snaplake.store.read.missing_files.MissingFileCheck`
                tells which).
        """
        metas = [m for m in self.manifest_metas() if self._manifest_may_match(m)]
        live = merge_live_entries(self.read_entries(metas))
        return [
            e
            for e in live.values()
            if e.bucket >= self.min_bucket
            and e.file.level >= self.min_level
            and self._partition_matches(e.partition)
            and self._stats_match(e.file)
        ]

    def _deletion_files(self) -> dict[tuple[bytes, int], list[IndexFileMeta]]:
        """The snapshot's DELETION_VECTORS index files by (partition, bucket)."""
        found: dict[tuple[bytes, int], list[IndexFileMeta]] = {}
        if not self.deletion_vectors:
            return found
        for e in read_index_entries(self, self.snapshot, index_type=DELETION_VECTORS_INDEX):
            found.setdefault((e.partition, e.bucket), []).append(e.index_file)
        return found

    def _split_deletion_files(
        self, metas: Sequence[IndexFileMeta], files: Sequence[DataFileMeta]
    ) -> tuple[tuple[IndexFileMeta, ...], tuple[str, ...]]:
        """``metas`` cut to the ranges of ``files`` (index files with none left dropped)."""
        names = {f.file_name for f in files}
        kept = []
        for meta in metas:
            ranges = tuple(r for r in meta.dv_ranges or () if r.data_file_name in names)
            if ranges:
                kept.append(replace(meta, dv_ranges=ranges))
        return tuple(kept), tuple(index_path(self.paths, m) for m in kept)

    def plan(self) -> list[Split]:
        """Group :meth:`plan_entries` by (partition, bucket) into :class:`Split` objects.

        With ``deletion_vectors`` each split carries its bucket's vector files
        (the index manifest is read once).

        Raises:
            CorruptMetadataError: a manifest or the index manifest cannot be decoded.
            FileNotFoundError: a metadata file is missing (see :meth:`plan_entries`).
        """
        groups: dict[tuple[bytes, int], list[ManifestEntry]] = {}
        for entry in self.plan_entries():
            groups.setdefault((entry.partition, entry.bucket), []).append(entry)
        deletion_files = self._deletion_files() if groups else {}
        splits = []
        listed = None  # BINARY partition keys: directory names found by listing
        if self.schema is not None and has_uncomputable_partition_dirs(self.schema):
            listed = PartitionDirectories(self.file_io, self.paths, self.schema)
        for (partition, bucket), entries in groups.items():
            entries.sort(key=lambda e: (e.file.min_sequence_number, e.file.file_name))
            values = self.partition_values(partition)
            assert self.schema is not None
            files = tuple(e.file for e in entries)
            if listed is not None:
                paths = tuple(listed.file_paths(values, bucket, files))
            else:
                part_path = self.schema.partition_path(values)
                paths = tuple(
                    self.paths.data_file_path(
                        part_path, bucket, f.file_name, external_path=f.external_path
                    )
                    for f in files
                )
            dv_files, dv_paths = self._split_deletion_files(
                deletion_files.get((partition, bucket), ()), files
            )
            raw = self.raw_convertible and all(
                f.level != 0 and not f.delete_row_count for f in files
            )
            splits.append(
                Split(
                    partition=partition,
                    partition_values=values,
                    bucket=bucket,
                    total_buckets=entries[0].total_buckets,
                    files=files,
                    paths=paths,
                    deletion_files=dv_files,
                    deletion_paths=dv_paths,
                    raw_convertible=raw,
                )
            )
        splits.sort(key=lambda s: (s.partition, s.bucket))
        return splits
