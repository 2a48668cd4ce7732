"""SnapshotFiles: the files a snapshot (or tag) reaches, read strictly, for the deleters.

Snapshot expiry (:mod:`snaplake.compaction.expire`) and tag deletion
(:mod:`snaplake.compaction.tag_deletion`) decide what to delete from the same
facts: the data files live in a snapshot, the manifests, manifest lists, index
manifest and index files it reaches, and each data file's path. Every read
here is strict (``CorruptMetadataError`` naming a missing file), so a deleter
stops before it deletes anything.

Source: Paimon ``FileDeletionBase`` (``manifestSkippingSet``, the data-file
skippers built from whole snapshots).
"""

from __future__ import annotations

from collections.abc import Sequence

from snaplake.compaction._io import (
    parallel_map,
    read_entries_strict,
    read_index_strict,
    read_list_strict,
)
from snaplake.errors import CorruptMetadataError
from snaplake.store.format.avro import parse_container
from snaplake.store.format.avro_codecs import decompress_block
from snaplake.store.format.manifest import ManifestEntry
from snaplake.store.format.manifest_list import ManifestFileMeta
from snaplake.store.format.partition import canonical_partition
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import merge_live_entries

__all__ = ["FileKey", "SnapshotFiles"]

FileKey = tuple[bytes, int, str]
"""A data file compared across snapshots: (canonical partition, bucket, file name)."""


class SnapshotFiles:
    """Strict reads of what snapshots reference, for one table and its latest schema.

    Args:
        file_io: The table's storage.
        paths: The table's paths.
        schema: The latest schema (partition types for comparing partitions by
            value and for data file paths).
        workers: Threads for reading manifests.
    """

    def __init__(
        self, file_io: FileIO, paths: PathFactory, schema: TableSchema, *, workers: int = 8
    ) -> None:
        self.file_io, self.paths, self.schema = file_io, paths, schema
        self._workers = workers
        self._part_paths: dict[bytes, str] = {}

    def entries(self, metas: Sequence[ManifestFileMeta]) -> list[ManifestEntry]:
        """Every entry of the manifests ``metas``, in order (strict reads)."""
        chunks = parallel_map(
            lambda m: read_entries_strict(self.file_io, self.paths, m.file_name),
            list(metas),
            workers=self._workers,
        )
        return [e for chunk in chunks for e in chunk]

    def live_entries(self, snap: Snapshot) -> list[ManifestEntry]:
        """The ADD entries of the data files live in ``snap`` (base and delta merged)."""
        metas = read_list_strict(self.file_io, self.paths, snap.base_manifest_list)
        metas += read_list_strict(self.file_io, self.paths, snap.delta_manifest_list)
        return list(merge_live_entries(self.entries(metas)).values())

    def live_files(self, snap: Snapshot) -> frozenset[FileKey]:
        """The :data:`FileKey` s of the data files live in ``snap``."""
        return frozenset(self.key(e) for e in self.live_entries(snap))

    def key(self, entry: ManifestEntry) -> FileKey:
        """``entry``'s file key; partitions compare by value (writers encode them differently)."""
        partition = canonical_partition(entry.partition, self.schema.partition_types)
        return (partition, entry.bucket, entry.file.file_name)

    def partition_path(self, partition: bytes) -> str:
        """The directory of ``partition`` under the table root (cached)."""
        path = self._part_paths.get(partition)
        if path is None:
            path = self.schema.partition_path_of(partition)
            self._part_paths[partition] = path
        return path

    def data_paths(self, entry: ManifestEntry) -> list[tuple[str, int]]:
        """``(path, bytes)`` of ``entry``'s data file and its extra files (size 0)."""
        part = self.partition_path(entry.partition)
        f = entry.file
        out = [
            (
                self.paths.data_file_path(
                    part, entry.bucket, f.file_name, external_path=f.external_path
                ),
                f.file_size_bytes,
            )
        ]
        out.extend((self.paths.data_file_path(part, entry.bucket, x), 0) for x in f.extra_files)
        return out

    def list_names(self, snap: Snapshot) -> list[tuple[str, int]]:
        """``snap``'s manifest lists (base, delta, changelog if any) with their sizes."""
        lists = [
            (snap.base_manifest_list, snap.base_manifest_list_size or 0),
            (snap.delta_manifest_list, snap.delta_manifest_list_size or 0),
        ]
        if snap.changelog_manifest_list:
            lists.append((snap.changelog_manifest_list, snap.changelog_manifest_list_size or 0))
        return lists

    def metadata_of(
        self, snap: Snapshot, *, chain: dict[str, bytes] | None = None
    ) -> list[tuple[str, int]]:
        """Manifest lists and manifests of ``snap`` with their sizes (strict reads).

        With ``chain`` (carried across snapshots visited in ascending order), a
        base list whose records are byte for byte the previous snapshot's base
        records followed by its delta records is not decoded: its manifests
        were returned for the previous snapshot. snaplake's commit builds every
        base list that way, so this turns the otherwise quadratic decoding of a
        long chain of base lists into a linear scan of decompressed bytes.
        """
        out: list[tuple[str, int]] = []
        lists = self.list_names(snap)
        raws: dict[str, bytes] = {}
        if chain is not None:
            raws = {name: self._raw_records(name) for name, _ in lists[:2]}
        for i, (name, size) in enumerate(lists):
            out.append((name, size))
            if i == 0 and chain and raws[name] == chain.get("next_base"):
                continue
            out.extend(
                (m.file_name, m.file_size_bytes)
                for m in read_list_strict(self.file_io, self.paths, name)
            )
        if chain is not None:
            chain["next_base"] = raws[lists[0][0]] + raws[lists[1][0]]
        return out

    def _raw_records(self, name: str) -> bytes:
        """The concatenated (decompressed) record encodings of manifest list ``name``.

        Raises:
            CorruptMetadataError: the list is missing or not an Avro container.
        """
        path = self.paths.manifest_path(name)
        try:
            data = self.file_io.read_bytes(path)
        except FileNotFoundError as exc:
            raise CorruptMetadataError(
                f"manifest list {path} is missing but a snapshot references it; "
                "nothing was deleted",
                path=path,
            ) from exc
        container = parse_container(data, path=path)
        return b"".join(
            decompress_block(container.codec, block, path=path) for _, block in container.blocks
        )

    def referenced_metadata(self, snap: Snapshot) -> set[str]:
        """Every metadata and index file name ``snap`` reaches (Paimon's manifest skipping set).

        Raises:
            CorruptMetadataError: a list, manifest or the index manifest is missing.
        """
        names = {name for name, _ in self.metadata_of(snap)}
        if snap.index_manifest:
            names.add(snap.index_manifest)
            names.update(
                e.index_file.file_name
                for e in read_index_strict(self.file_io, self.paths, snap.index_manifest)
            )
        if snap.statistics:
            names.add(snap.statistics)
        return names
