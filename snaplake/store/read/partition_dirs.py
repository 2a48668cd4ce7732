"""Find the data files of partitions whose directory name cannot be computed (BINARY keys).

A partition directory is normally spelled from the partition values
(:func:`snaplake.store.format.partition.partition_path`), exactly as Java
spells it. For a BINARY/VARBINARY partition key that is impossible: Java
Paimon prints ``byte[].toString()`` (``[B@1b6d3586``, an identity hash that
differs for every object) and pypaimon prints Python's ``repr`` (``b'ab'``).
Reading such a table therefore finds the files by listing: below every
directory that could hold the partition (``<key>=...`` for the BINARY
components, the computed name for the others) it lists ``bucket-<b>`` and
looks the files up by name (data file names are unique UUIDs). Only tables
with BINARY partition keys take this path; snaplake only reads them
(:func:`snaplake.store.support.check_supported`).

Source: Paimon ``InternalRowPartitionComputer`` (why the names cannot be
computed); the listing is snaplake's own.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from typing import Any

from snaplake.store.format.data_file import DataFileMeta
from snaplake.store.format.partition import escape_path_name, partition_path
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.types import TypeRoot
from snaplake.store.io.file_io import FileIO

__all__ = ["PartitionDirectories", "has_uncomputable_partition_dirs"]

_BINARY_ROOTS = frozenset({TypeRoot.BINARY, TypeRoot.VARBINARY})


def has_uncomputable_partition_dirs(schema: TableSchema) -> bool:
    """Tell whether some partition directory names of the table cannot be computed."""
    return any(t.root in _BINARY_ROOTS for t in schema.partition_types)


class PartitionDirectories:
    """Resolves data file paths by listing, for tables with BINARY partition keys.

    One instance per scan: listings are cached for its lifetime.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        schema: The table schema (partition keys, types, naming options).
    """

    def __init__(self, file_io: FileIO, paths: PathFactory, schema: TableSchema) -> None:
        self.file_io = file_io
        self.paths = paths
        self.schema = schema
        self._dirs: dict[str, list[str]] = {}
        self._files: dict[str, dict[str, str]] = {}

    def _list_dirs(self, path: str) -> list[str]:
        names = self._dirs.get(path)
        if names is None:
            names = self.file_io.list_dirs(path)
            self._dirs[path] = names
        return names

    def _list_files(self, path: str) -> dict[str, str]:
        found = self._files.get(path)
        if found is None:
            found = {s.path.rsplit("/", 1)[-1]: s.path for s in self.file_io.list_files(path)}
            self._files[path] = found
        return found

    def _candidates(self, values: Sequence[Any]) -> list[str]:
        """Every directory that may hold the partition with ``values``."""
        opts = self.schema.core_options
        default = escape_path_name(opts.partition_default_name)
        dirs = [self.paths.root]
        for key, value, dtype in zip(
            self.schema.partition_keys, values, self.schema.partition_types, strict=True
        ):
            if dtype.root in _BINARY_ROOTS and value is not None:
                prefix = f"{escape_path_name(key)}="
                dirs = [
                    f"{d}/{name}"
                    for d in dirs
                    for name in self._list_dirs(d)
                    if name.startswith(prefix) and name != prefix + default
                ]
            else:
                component = partition_path(
                    [key],
                    [value],
                    [dtype],
                    default_partition_name=opts.partition_default_name,
                    legacy_partition_name=opts.partition_legacy_name,
                )
                dirs = [f"{d}/{component}" for d in dirs]
        return dirs

    def file_paths(
        self, values: Sequence[Any], bucket: int, files: Sequence[DataFileMeta]
    ) -> list[str]:
        """Return the full path of each of ``files`` of one (partition, bucket).

        Args:
            values: Decoded partition values, in partition-key order.
            bucket: The bucket.
            files: The split's files (an ``external_path`` is used as it is).

        Returns:
            One path per file, aligned with ``files``.

        Raises:
            FileNotFoundError: a file is in none of the directories that may
                hold the partition.

        Storage:
            Lists the partition directories below the table root and the
            ``bucket-<b>`` directories that may hold the files (cached).
        """
        found: dict[str, str] = {}
        for d in self._candidates(values):
            found.update(self._list_files(f"{d}/bucket-{bucket}"))
        out = []
        for f in files:
            if f.external_path:
                out.append(f.external_path)
                continue
            path = found.get(f.file_name)
            if path is None:
                raise FileNotFoundError(
                    errno.ENOENT,
                    f"data file {f.file_name} of partition {list(values)} bucket {bucket} is in "
                    f"no partition directory below {self.paths.root}",
                    f.file_name,
                )
            out.append(path)
        return out
